import BatonTesting
import Glibc
import OSThread
import Players
import Testing

/// The external sources' socket path belongs to one batond: a second one started with the same path
/// (a test config run by hand, `sudo batond --config test.yaml`) deleted the running service's socket
/// and bound its own, and deleted the path again when it stopped: every player then failed with
/// "cannot reach batond" until the service restarted, its status saying all was well. And a
/// `socket:` naming a file that was not a socket deleted that file.
@Suite struct ExternalSocketTests {
    static func server(_ path: String) -> ExternalSourceServer {
        ExternalSourceServer(path: path, logger: Logger(minimum: .error), lookup: { _ in nil }, onFrames: { _ in })
    }

    /// `call` (`connect`, `bind`) on a new stream socket with the address `path`; the socket is
    /// closed after it. Its result.
    static func onNewSocket(_ path: String, _ call: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                call(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    /// Whether something accepts connections on the Unix socket at `path`.
    static func answers(_ path: String) -> Bool { onNewSocket(path, connect) == 0 }

    @Test func aSecondServerLeavesTheFirstOnesSocketAlone() throws {
        let path = TestDirectory.make("external-socket") + "/sources.sock"
        let first = Self.server(path)
        try first.start()
        defer { first.stop() }
        let second = Self.server(path)
        do {
            try second.start()
            Issue.record("a second server started on \(path)")
        } catch {
            #expect(error.description.contains("another program listens on \(path)"), "\(error)")
        }
        second.stop()
        #expect(Self.answers(path), "the first server still accepts")
    }

    @Test func aStaleSocketIsReplacedAndAFileIsNot() throws {
        let directory = TestDirectory.make("external-socket")
        // A socket nobody listens on any more (a batond killed with SIGKILL): replaced.
        let stale = directory + "/stale.sock"
        let killed = Self.server(stale)
        try killed.start()
        killed.stop()
        // Bound, never listened on, closed: what a killed process leaves.
        #expect(Self.onNewSocket(stale, bind) == 0)
        let next = Self.server(stale)
        try next.start()
        #expect(Self.answers(stale))
        next.stop()
        // A file that is not a socket: refused, and left as it is.
        let file = directory + "/notes.txt"
        let f = try #require(fopen(file, "w"))
        fputs("keep me\n", f)
        fclose(f)
        do {
            try Self.server(file).start()
            Issue.record("a server started on a regular file")
        } catch {
            #expect(error.description.contains("is not a socket"), "\(error)")
        }
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_size == 8, "the file is still there")
    }

    /// A raw peer connected to `path` that sent `bytes`: its socket (-1 when it cannot connect).
    static func peer(_ path: String, sending bytes: [UInt8]) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return -1
        }
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return fd
    }

    /// Everything the server sends `fd` until it closes, or until `seconds` pass without a byte.
    static func received(_ fd: Int32, seconds: Int) -> [UInt8] {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }

    static func message(_ type: UInt32, _ payload: [UInt8]) -> [UInt8] {
        func le(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * UInt32($0))) & 0xff) } }
        return le(type) + le(UInt32(payload.count)) + payload
    }

    /// A connection that sends OPEN and never its FORMAT is closed at the deadline with a sentence
    /// (here 0.3 s; 30 s in batond), and gives its connection back: it used to wait for ever, and 32
    /// such leaks locked every player out.
    @Test func aConnectionWithoutAFormatIsClosedAtTheDeadline() throws {
        let path = TestDirectory.make("external-socket") + "/sources.sock"
        let server = ExternalSourceServer(
            path: path, logger: Logger(minimum: .error), lookup: { _ in nil }, formatNanoseconds: 300_000_000,
            onFrames: { _ in })
        try server.start()
        defer { server.stop() }
        let fd = Self.peer(path, sending: Self.message(1, [1, 0, 0, 0] + Array("x".utf8)))
        #expect(fd >= 0)
        defer { close(fd) }
        let began = monotonicNanoseconds()
        let answer = String(decoding: Self.received(fd, seconds: 5).dropFirst(8), as: UTF8.self)
        let took = Double(monotonicNanoseconds() - began) / 1e9
        #expect(answer.contains("not the baton PCM protocol: no FORMAT within 0.3 s of OPEN"), "\(answer)")
        #expect(took < 3, "closed after \(took) s")
        #expect(waitUntil(seconds: 2) { server.connections.isEmpty }, "its connection is given back")
    }
}
