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
}
