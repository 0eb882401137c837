import BatonTesting
import Glibc
import OSThread

/// The real `batond` executable running in the background on a temporary configuration: zones
/// `kitchen` (44.1 kHz) and `patio` (48 kHz) on ALSA `file` PCMs (`clock: system`), the shipped
/// sounds, and the API on a random free loopback port. Stop it with `stop()` (SIGTERM).
/// Test thread only.
final class BatondProcess {
    let directory: String
    private(set) var port = 0
    private(set) var pid: pid_t = 0
    private var stopped = false
    private let notifySocket: String?

    var url: String { "http://127.0.0.1:\(port)" }
    var logPath: String { directory + "/batond.log" }

    static let repoRoot: String = {
        var path = #filePath
        for _ in 0..<4 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    struct StartError: Error, CustomStringConvertible {
        var description: String
    }

    /// Starts batond and waits until its API listens. A port that turns out to be taken is replaced
    /// by another, up to 5 times.
    /// `extra` is appended to the configuration (e.g. a `music:` section); `zones`, zones beside
    /// kitchen and patio (YAML indented under `zones:`).
    /// `notifySocket`: batond runs as under systemd, with `NOTIFY_SOCKET` set to it.
    init(extra: String = "", zones: String = "", token: String? = nil, notifySocket: String? = nil) throws {
        self.notifySocket = notifySocket
        directory = TestDirectory.make("batonctl")
        mkdir(directory + "/out", 0o755)
        if let token { Self.write(directory + "/token", token + "\n") }
        Self.write(
            directory + "/alsa.conf",
            """
            </usr/share/alsa/alsa.conf>
            pcm.tool_null { type null }
            pcm.tool_kitchen { type file slave.pcm "tool_null" file "\(directory)/out/kitchen.wav" format "wav" }
            pcm.tool_patio { type file slave.pcm "tool_null" file "\(directory)/out/patio.wav" format "wav" }

            """)
        var lastLog = ""
        for _ in 0..<5 {
            // From FreePort, as every other test server's: a random port of its own (20000–60000)
            // could be one FreePort had just handed to another test (a StreamOutputTests listener
            // once found its port taken), or an ephemeral port an outgoing connection then took.
            port = try FreePort.next()
            Self.write(
                directory + "/baton.yaml",
                """
                api:
                  listen: 127.0.0.1:\(port)\(token == nil ? "" : "\n  token-file: token")
                zones:
                  kitchen: {pcm: tool_kitchen, rate: 44100, clock: system}
                  patio: {pcm: tool_patio, rate: 48000, clock: system}
                \(zones)
                sounds: \(Self.repoRoot)/config/sounds
                alsa-config: alsa.conf
                output-dir: out
                state-dir: state
                \(extra)

                """)
            pid = try spawn()
            var exited = false
            let listening = waitUntil(seconds: 15) {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    exited = true
                    return true
                }
                usleep(20_000)
                return log.contains("control API on")
            }
            if listening && !exited { return }
            lastLog = log
            if !exited {
                kill(pid, SIGKILL)
                waitpid(pid, nil, 0)
            }
        }
        stopped = true
        throw StartError(description: "batond did not start:\n\(lastLog)")
    }

    deinit { _ = stop() }

    /// What batond printed so far.
    var log: String { TextFile.read(logPath) ?? "" }

    /// SIGTERM, then waits up to 5 s (SIGKILL after). Returns the exit status (128 + signal if killed).
    @discardableResult
    func stop() -> Int32 {
        guard !stopped else { return 0 }
        stopped = true
        kill(pid, SIGTERM)
        var status: Int32 = 0
        let exited = waitUntil(seconds: 5) {
            usleep(5_000)
            return waitpid(pid, &status, WNOHANG) == pid
        }
        if !exited {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        return ChildProcess.exitStatus(status)
    }

    /// SIGKILL, as a power cut or an OOM kill would: no fade-out, no final save. Then starts batond
    /// again on the same configuration and state, and waits until its API listens.
    /// Returns when the kill was sent.
    @discardableResult
    func killAndRestart() throws -> ContinuousClock.Instant {
        let killed = ContinuousClock.now
        kill(pid, SIGKILL)
        waitpid(pid, nil, 0)
        stopped = true
        try start()
        return killed
    }

    /// Starts batond again after `stop` (or a kill), on the same configuration and state, and waits
    /// until its API answers.
    func start() throws {
        guard stopped else { throw StartError(description: "batond runs already") }
        pid = try spawn()
        stopped = false
        var status: Int32 = 0
        let answered = waitUntil(seconds: 15) {
            usleep(20_000)
            if waitpid(pid, &status, WNOHANG) == pid {
                stopped = true
                return true
            }
            return batonctl("status").status == 0
        }
        guard answered && !stopped else {
            let how = stopped ? "exited with \(ChildProcess.exitStatus(status))" : "did not come back"
            throw StartError(description: "batond \(how):\n\(log)")
        }
    }

    /// True when every one of `zones` is `available`: its output thread has its PCM open.
    func zonesAvailable(_ zones: [String]) -> Bool {
        let status = TruthRecorder.status(port: port)?.zones ?? []
        return zones.allSatisfy { name in status.contains { $0.name == name && $0.state == "available" } }
    }

    /// Runs batonctl against this daemon.
    func batonctl(_ arguments: String...) -> (status: Int32, output: String) {
        Subprocess.run(Subprocess.buildDirectory + "/batonctl", ["--url", url] + arguments)
    }

    private func spawn() throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        ChildProcess.closeInherited(&actions)  // as systemd starts it: nothing of this process
        let executable = Subprocess.buildDirectory + "/batond"
        let arguments: [String] = [executable, "--config", directory + "/baton.yaml"]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        // Not under this test process's (fake) systemd: the notify tests set NOTIFY_SOCKET in-process.
        var env: [String] = notifySocket.map { ["NOTIFY_SOCKET=" + $0] } ?? []
        var e = environ
        while let p = e.pointee {
            let entry = String(cString: p)
            if !["NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID="].contains(where: entry.hasPrefix) {
                env.append(entry)
            }
            e += 1
        }
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        // batond as from a shell: not with the test thread's blocked signals.
        let rc = ChildProcess.withDefaultSignals { posix_spawn(&pid, executable, &actions, $0, argv, envp) }
        guard rc == 0 else {
            throw StartError(description: "cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        return pid
    }

    private static func write(_ path: String, _ text: String) {
        let file = fopen(path, "w")!
        fputs(text, file)
        fclose(file)
    }
}
