import Curl
import Glibc
import Subsonic
import Testing

/// HTTPClient failures that need no Subsonic server: a closed port and a server that never answers.
@Suite struct HTTPClientTests {
    /// A closed port on 127.0.0.1 fails at once with curl's "couldn't connect" (7), a transient error.
    @Test func reportsAClosedPort() throws {
        let port = try closedPort()
        let error = #expect(throws: CurlError.self) { try HTTPClient().fetch(url: "http://127.0.0.1:\(port)/x") }
        #expect(error?.code == CurlError.couldNotConnect)
        #expect(error?.isTransient == true)
        #expect(error?.detail.contains("\(port)") == true)
    }

    /// A Subsonic client pointed at a closed port reports a transport error without the password.
    @Test func reportsAnUnreachableSubsonicServer() throws {
        let port = try closedPort()
        let client = SubsonicClient(config: SubsonicConfig(url: "http://127.0.0.1:\(port)", user: "u",
                                                           password: "pa55word-secret"))
        let error = #expect(throws: SubsonicError.self) { try client.ping() }
        guard case .transport(let curlError)? = error else {
            Issue.record("expected a transport error, got \(String(describing: error))")
            return
        }
        #expect(curlError.code == CurlError.couldNotConnect)
        #expect(!"\(error!)".contains("pa55word-secret"))
        #expect(!"\(error!)".contains(MD5.hex("pa55word-secret")))
    }

    /// A server that accepts the connection but never answers is cut off by the stall timeout.
    @Test func detectsAStalledServer() throws {
        let listener = try Listener()
        defer { close(listener.fd) }
        var options = HTTPClient.Options()
        options.stallTimeout = .milliseconds(1200)
        let error = #expect(throws: CurlError.self) {
            try HTTPClient(options: options).get(url: "http://127.0.0.1:\(listener.port)/x") { _ in true }
        }
        #expect(error?.code == CurlError.timedOut)
        #expect(error?.detail.contains("stall") == true)
    }

    /// A port on 127.0.0.1 that nothing listens on (bound, then released).
    private func closedPort() throws -> UInt16 {
        let listener = try Listener()
        close(listener.fd)
        return listener.port
    }
}

/// A TCP socket listening on 127.0.0.1 that never accepts: connections complete in the backlog.
struct Listener {
    struct Failed: Error {}
    let fd: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else {
            close(fd)
            throw Failed()
        }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }
}
