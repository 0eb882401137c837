import Glibc
import OSThread

/// Runs built executables from tests (batond, batonctl) and collects what they print.
public enum Subprocess {
    /// The directory holding the test binary, where SwiftPM also puts the package's executables.
    public static var buildDirectory: String {
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buf, 4095)
        let path = String(decoding: buf[0..<max(0, n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var dir = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
        // The test binary may sit inside an .xctest bundle directory.
        while dir.hasSuffix(".xctest") || dir.contains(".xctest/") { dir = String(dir[..<dir.lastIndex(of: "/")!]) }
        return dir
    }

    /// Runs `executable` (a path) with `arguments`, environment additions `environment`, and returns
    /// its exit status and combined standard output and error. Waits at most `seconds`, then kills it.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        seconds: Double = 30
    ) -> (status: Int32, output: String) {
        var pipe: [Int32] = [-1, -1]
        guard Glibc.pipe(&pipe) == 0 else {
            return (-1, "cannot start \(executable): pipe: \(String(cString: strerror(errno)))")
        }
        // Close-on-exec at once (Glibc's module has no pipe2): a program another test starts now
        // would otherwise keep the write end open, and this read would wait for that program to end.
        for fd in pipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 2)
        posix_spawn_file_actions_addclose(&actions, pipe[0])
        // Nothing else of this process (other tests' connections and pipes, run in parallel).
        ChildProcess.closeInherited(&actions)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        var env = environment.map { "\($0.key)=\($0.value)" }
        var e = environ
        while let p = e.pointee {
            env.append(String(cString: p))
            e += 1
        }
        let envp = env.map { strdup($0) } + [nil]
        var pid: pid_t = 0
        // The calling test thread may block SIGTERM: the child would inherit it (a server restarted
        // from a test then ignored the next restart's SIGTERM until its SIGKILL, 5 s later).
        let rc = ChildProcess.withDefaultSignals { posix_spawn(&pid, executable, &actions, $0, argv, envp) }
        posix_spawn_file_actions_destroy(&actions)
        argv.forEach { free($0) }
        envp.forEach { free($0) }
        close(pipe[1])
        guard rc == 0 else {
            close(pipe[0])
            return (-1, "cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var pfd = pollfd(fd: pipe[0], events: Int16(POLLIN), revents: 0)
        var waited = 0.0
        while waited < seconds {
            if poll(&pfd, 1, 100) == 0 {
                waited += 0.1
                continue
            }
            let n = chunk.withUnsafeMutableBytes { read(pipe[0], $0.baseAddress, $0.count) }
            if n <= 0 { break }
            output += chunk[0..<n]
        }
        close(pipe[0])
        if waited >= seconds { kill(pid, SIGKILL) }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        let code = ChildProcess.exitStatus(status)
        return (code, String(decoding: output, as: UTF8.self))
    }
}
