import CGlibc
import Glibc
import Synchronization

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
    /// signal at its default action; pass them to `posix_spawn`/`posix_spawnp`. `ownGroup`: the
    /// child leads a process group of its own, so that `waitForExit(_:killingAfter:)` stops what
    /// it started too (a shell's pipeline, a wrapper script's program).
    public static func withDefaultSignals<R>(
        ownGroup: Bool = false, _ body: (UnsafePointer<posix_spawnattr_t>) throws -> R
    ) rethrows -> R {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        return try body(&attributes)
    }

    /// Adds to `actions` the closing, in the child, of every descriptor from 3 up (after the
    /// actions added before it, which set up 0–2): the child has only what it was given. A
    /// descriptor opened without close-on-exec — libcurl's and libmosquitto's sockets — went to
    /// a pause command and espeak-ng, and with anything they left running in the background:
    /// the broker saw no close when batond died (its last will waited for the keepalive), and a
    /// connection batond closed stayed open. Call it after the other file actions.
    public static func closeInherited(_ actions: inout posix_spawn_file_actions_t) {
        _ = baton_spawn_close_from(&actions, 3)
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

    /// Waits as `waitForExit` does, for at most `nanoseconds` (of the monotonic clock: a Pi's wall
    /// clock steps at its first time sync): a process still running then is killed (SIGKILL) —
    /// with its process group when it leads one (`withDefaultSignals(ownGroup:)`) — and reaped, and
    /// nil is returned. A thread of its own sleeps until the deadline or the end, whichever comes
    /// first; the process is reaped only after it is done, so the kill can never reach another
    /// process that took its number. `stop`, once set, is a deadline come: the watchdog looks at it
    /// every 100 ms (batond's stop must not wait out a hung child past systemd's 5 s). Any thread.
    public static func waitForExit(_ pid: pid_t, killingAfter nanoseconds: Int, stop: StopFlag? = nil) -> Int32? {
        let ended = Atomic<Bool>(false)
        let bell = WakeFD()
        let killed = Atomic<Bool>(false)
        let deadline = monotonicNanoseconds() + nanoseconds
        let watchdog = OSThread.start(name: "child-deadline") {
            while !ended.load(ordering: .acquiring) {
                let left = deadline - monotonicNanoseconds()
                guard left > 0, stop?.isSet != true else {
                    killed.store(true, ordering: .releasing)
                    // Its group, if it leads one (what it started), else itself.
                    if kill(-pid, SIGKILL) != 0 { kill(pid, SIGKILL) }
                    return
                }
                let look = stop == nil ? left : min(left, 100_000_000)
                _ = bell.wait(for: -1, timeout: Int32(clamping: look / 1_000_000 + 1), fallback: 100)
            }
        }
        // Ended (or killed), not reaped yet: the watchdog's kill reaches this process or its zombie.
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
        ended.store(true, ordering: .releasing)
        bell.post()
        watchdog.join()
        let status = waitForExit(pid)
        // Killed at the deadline; one that ended by itself just then keeps its status.
        return killed.load(ordering: .acquiring) && status == 128 + SIGKILL ? nil : status
    }

    /// A `waitpid` status as a shell reports it: the exit status, or 128 + the terminating signal.
    /// (`WIFEXITED`/`WEXITSTATUS` are macros Swift cannot import.)
    public static func exitStatus(_ status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
