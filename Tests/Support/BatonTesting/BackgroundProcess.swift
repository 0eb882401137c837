import Glibc
import OSThread

/// A child process that runs alongside the test (a broker, a `mosquitto_sub`), its standard output
/// and error going to a file the test can read at any time. Killed and reaped on deinit.
///
/// Thread: one test at a time; `output` may be read from any thread.
public final class BackgroundProcess: @unchecked Sendable {
    // @unchecked: `exitStatus` is written only by `wait`/`signal` callers, which a test makes from
    // one thread; everything else is `let`.
    public let pid: pid_t
    /// Where standard output and error go.
    public let outputPath: String
    private var exitStatus: Int32?

    /// Starts `executable` (a path) with `arguments`; output goes to `outputPath` (truncated).
    /// - Throws: ``BackgroundProcess/SpawnError`` when it cannot be started.
    public init(_ executable: String, _ arguments: [String], outputPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Nothing else of this process: a long-lived child held other tests' connections (a test
        // server's close of a request was not seen by its client while a mosquitto_sub lived).
        ChildProcess.closeInherited(&actions)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        // Test threads may block SIGTERM: the child starts with nothing blocked, like from a shell.
        let rc = ChildProcess.withDefaultSignals { posix_spawn(&pid, executable, &actions, $0, argv, environ) }
        guard rc == 0 else {
            throw SpawnError(description: "cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        self.pid = pid
        self.outputPath = outputPath
    }

    deinit {
        if exitStatus == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// Why a process could not be started.
    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Everything it has printed so far.
    public var output: String { TextFile.read(outputPath) ?? "" }

    /// Waits up to `seconds` for it to exit; returns its exit code (128 + signal when killed), or nil
    /// if it is still running.
    @discardableResult
    public func wait(seconds: Double) -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        let exited = waitUntil(seconds: seconds) { waitpid(pid, &status, WNOHANG) == pid }
        guard exited else { return nil }
        let code = ChildProcess.exitStatus(status)
        exitStatus = code
        return code
    }

    /// Sends `signal` and waits (up to 10 s) for it to exit; returns the exit code.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM) -> Int32? {
        if let exitStatus { return exitStatus }
        kill(pid, signal)
        if let code = wait(seconds: 10) { return code }
        kill(pid, SIGKILL)
        return wait(seconds: 10)
    }
}
