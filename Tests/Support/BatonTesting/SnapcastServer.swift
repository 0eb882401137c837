import Glibc

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
        directory = WAVWriter.temporaryDirectory("snapserver")
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
    /// client connected to the stream source while it was frozen and not before (on a busy machine
    /// the client may connect, and the server answer, between the listen and the freeze).
    @discardableResult
    public func start(frozenFor seconds: Double) throws -> Bool {
        let p = try spawn()
        guard waitUntil(seconds: 10, { Self.tcpStates(port: sourcePort).contains("0A") }) else {
            throw BackgroundProcess.SpawnError(description: "snapserver did not listen on \(sourcePort):\n\(p.output)")
        }
        kill(p.pid, SIGSTOP)
        let before = Self.tcpStates(port: sourcePort).contains("01")
        usleep(UInt32(seconds * 1_000_000))
        let after = Self.tcpStates(port: sourcePort).contains("01")
        kill(p.pid, SIGCONT)
        return after && !before
    }

    /// The states (/proc/net/tcp's `st`: 0A listening, 01 established) of the TCP sockets whose
    /// local address is 127.0.0.1:`port`, read without connecting to it.
    static func tcpStates(port: Int) -> [String] {
        let hex = String(port, radix: 16, uppercase: true)
        let local = "0100007F:" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        var states: [String] = []
        let table = String(decoding: TestCard.readFile("/proc/net/tcp"), as: UTF8.self)
        for line in table.split(separator: "\n") {
            // sl, local_address, rem_address, st, …
            let fields = line.split(separator: " ")
            if fields.count > 3 && fields[1] == local { states.append(String(fields[3])) }
        }
        return states
    }

    /// Stops the server (SIGTERM, waiting for it) — an outage.
    public func stop() {
        process?.stop()
        process = nil
    }

    /// What the server printed.
    public var log: String { process?.output ?? "" }
}
