import BatonTesting
import Curl
import Glibc
import Testing

/// HTTPClient failures that need no Subsonic server: a closed port and a server that never answers.
@Suite struct HTTPClientTests {
    /// A closed port on 127.0.0.1 fails at once with curl's "couldn't connect" (7), a transient error.
    @Test func reportsAClosedPort() throws {
        let port = try FreePort.next()
        let error = #expect(throws: CurlError.self) { try HTTPClient().fetch(url: "http://127.0.0.1:\(port)/x") }
        #expect(error?.code == CurlError.couldNotConnect)
        #expect(error?.isTransient == true)
        #expect(error?.detail.contains("\(port)") == true)
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
}
