import Glibc

/// Starting and waiting for a child process with the signal state a shell would give it.
///
/// A child inherits its parent's signal mask and ignored signals through `exec`. batond blocks
/// SIGTERM, SIGINT and SIGHUP in every thread (it takes them with `sigwait`, see `Service.run`) and
/// ignores SIGPIPE; a program it started as it is (espeak-ng, a player's pause command) could then
/// not be stopped with SIGTERM — `systemctl stop` would wait for its SIGKILL — and a pipeline in a
/// command would not end when its reader does. The same holds for a test thread that blocks signals.
///
/// Thread: any.
public enum ChildProcess {
    /// Calls `body` with spawn attributes that start the child with no signal blocked and every
    /// signal at its default action; pass them to `posix_spawn`/`posix_spawnp`.
    public static func withDefaultSignals<R>(_ body: (UnsafePointer<posix_spawnattr_t>) throws -> R) rethrows -> R {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        return try body(&attributes)
    }

    /// Waits until `pid` ends (through EINTR); its exit status, or 128 + the signal that ended it,
    /// as a shell reports it. -1 when it cannot be waited for.
    public static func waitForExit(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        return exitStatus(status)
    }

    /// A `waitpid` status as a shell reports it: the exit status, or 128 + the terminating signal.
    /// (`WIFEXITED`/`WEXITSTATUS` are macros Swift cannot import.)
    public static func exitStatus(_ status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
