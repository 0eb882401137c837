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
        guard waitUntil(seconds: 10, { MosquittoBroker.accepts(port: httpPort) }) else {
            throw BackgroundProcess.SpawnError(description: "snapserver did not open port \(httpPort):\n\(p.output)")
        }
    }

    /// Stops the server (SIGTERM, waiting for it) — an outage.
    public func stop() {
        process?.stop()
        process = nil
    }

    /// What the server printed.
    public var log: String { process?.output ?? "" }
}
