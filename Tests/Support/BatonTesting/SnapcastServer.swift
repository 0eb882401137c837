import Glibc
import OSThread

/// A real snapserver on 127.0.0.1 for tests: free ports, its own datadir and an empty config file
/// (so the packaged /etc/snapserver.conf adds no stream), one `tcp://…?mode=server` source named
/// `stream` that Baton connects to, and the JSON-RPC HTTP port. Killed on deinit.
///
/// Thread: one test at a time.
public final class SnapcastServer: @unchecked Sendable {
    // @unchecked: `process` is replaced only by `restart`, called by the one test that owns the server.
    public let directory: String
    public let streamPort: Int, httpPort: Int, tcpPort: Int, sourcePort: Int
    public let stream: String
    public let bufferMilliseconds: Int
    private var process: BackgroundProcess?

    /// The source URL as Baton's configuration writes it.
    public var source: String { "tcp://127.0.0.1:\(sourcePort)" }
    /// The control URL as Baton's configuration writes it.
    public var control: String { "http://127.0.0.1:\(httpPort)" }

    public init(stream: String = "upstairs", bufferMilliseconds: Int = 1000) throws {
        directory = TestDirectory.make("snapserver")
        self.stream = stream
        self.bufferMilliseconds = bufferMilliseconds
        streamPort = try FreePort.next()
        httpPort = try FreePort.next()
        tcpPort = try FreePort.next()
        sourcePort = try FreePort.next()
        let empty = fopen("\(directory)/snapserver.conf", "w")
        fclose(empty)
        try start()
    }

    deinit { process?.stop(signal: SIGKILL) }

    /// Starts the server and waits (up to 10 s) until its JSON-RPC port accepts connections.
    public func start() throws {
        let p = try spawn()
        guard waitUntil(seconds: 10, { MosquittoBroker.accepts(port: httpPort) }) else {
            throw BackgroundProcess.SpawnError(description: "snapserver did not open port \(httpPort):\n\(p.output)")
        }
    }

    private func spawn() throws -> BackgroundProcess {
        let p = try BackgroundProcess(
            "/usr/bin/snapserver",
            [
                "--config=\(directory)/snapserver.conf", "--server.datadir=\(directory)",
                "--stream.bind_to_address=127.0.0.1", "--stream.port=\(streamPort)",
                "--http.bind_to_address=127.0.0.1", "--http.port=\(httpPort)",
                "--tcp.bind_to_address=127.0.0.1", "--tcp.port=\(tcpPort)",
                "--stream.source=tcp://127.0.0.1:\(sourcePort)?name=\(stream)&mode=server&sampleformat=48000:16:2",
                // A second stream, so the speakers start somewhere else and Baton has to move them.
                "--stream.source=pipe://\(directory)/other.fifo?name=other&mode=create&sampleformat=48000:16:2",
                "--stream.codec=pcm", "--stream.buffer=\(bufferMilliseconds)", "--logging.filter=*:notice",
            ], outputPath: "\(directory)/snapserver.log")
        process = p
        return p
    }

    /// Starts the server and freezes it (SIGSTOP) as soon as its stream source listens, for
    /// `seconds`: a server that accepts connections but reads and answers nothing yet, as a slow
    /// start (a busy Pi at boot) looks from outside. Then resumes it (SIGCONT). Returns whether a
    /// client's connection to the stream source was accepted (by the kernel) by then.
    ///
    /// The server starts frozen and runs in 10 ms slices, looked at between them while stopped,
    /// so it runs at most one slice past its `listen` however long the look takes (reading
    /// /proc/net/tcp after the parallel suites, thousands of sockets long, takes longer than
    /// snapserver needs to start answering): a client that connects has found a server that
    /// cannot have read or answered anything yet.
    @discardableResult
    public func start(frozenFor seconds: Double) throws -> Bool {
        let p = try spawn()
        var listening = false
        for _ in 0..<1000 where !listening {  // 10 s of slices
            kill(p.pid, SIGCONT)
            usleep(10_000)
            kill(p.pid, SIGSTOP)
            _ = waitUntil(seconds: 1) { Self.isStopped(p.pid) }
            listening = Self.tcpStates(port: sourcePort).contains("0A")
        }
        guard listening else {
            kill(p.pid, SIGCONT)
            throw BackgroundProcess.SpawnError(description: "snapserver did not listen on \(sourcePort):\n\(p.output)")
        }
        usleep(UInt32(seconds * 1_000_000))
        let connected = Self.tcpStates(port: sourcePort).contains("01")
        kill(p.pid, SIGCONT)
        return connected
    }

    /// Whether process `pid` is stopped by a signal (state `T` in /proc/PID/stat).
    static func isStopped(_ pid: pid_t) -> Bool { ProcessThreads.state(stat: "/proc/\(pid)/stat") == "T" }

    /// The states (/proc/net/tcp's `st`: 0A listening, 01 established) of the TCP sockets whose
    /// local address is 127.0.0.1:`port`, read without connecting to it. After the parallel suites
    /// the table holds thousands of sockets in TIME_WAIT, so it is searched as bytes (`strstr`).
    static func tcpStates(port: Int) -> [String] {
        let hex = String(port, radix: 16, uppercase: true)
        // A line is "  sl: local remote st …"; the local address alone follows ": ".
        let local = ": 0100007F:" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + " "
        let skip = local.utf8.count
        // NUL-terminated for strstr (memmem is a GNU function Swift does not import).
        guard case .success(var table?) = FileIO.read("/proc/net/tcp") else { return [] }
        table.append(0)
        var states: [String] = []
        table.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { text in
                guard let base = text.baseAddress else { return }
                var from = base
                while let hit = strstr(from, local) {
                    // The remote address (13 characters) and a space, then the state.
                    let state = UnsafePointer(hit) + skip + 14
                    if state - base + 2 < text.count {
                        let pair: [UInt8] = [UInt8(bitPattern: state[0]), UInt8(bitPattern: state[1])]
                        states.append(String(decoding: pair, as: UTF8.self))
                    }
                    from = UnsafePointer(hit) + skip
                }
            }
        }
        return states
    }

    /// Stops the running server (SIGSTOP) and waits until it is stopped: a stall that keeps every
    /// connection open, as a hung server does. `thaw` lets it go on.
    public func freeze() {
        guard let pid = process?.pid else { return }
        kill(pid, SIGSTOP)
        _ = waitUntil(seconds: 5) { Self.isStopped(pid) }
    }

    /// Lets a frozen server go on (SIGCONT).
    public func thaw() {
        if let pid = process?.pid { kill(pid, SIGCONT) }
    }

    /// Stops the server (SIGTERM, waiting for it) — an outage.
    public func stop() {
        process?.stop()
        process = nil
    }

    /// What the server printed.
    public var log: String { process?.output ?? "" }
}
