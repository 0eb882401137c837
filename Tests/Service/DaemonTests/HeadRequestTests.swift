import BatonTesting
import Glibc
import Testing

@testable import BatonService

/// HEAD is answered as GET without the body (RFC 9110 9.3.2): uptime monitors ask with it.
@Suite(.ownThread) struct HeadRequestTests {
    /// HEAD on the web app, the status and the event stream answers each 200 with GET's headers and
    /// no body, one after the other on one connection (a body sent would be read as the next
    /// answer's status line); the event stream's subscription ends with its HEAD. Before, `HEAD /`
    /// was a 404 and `HEAD /api/v1/status` a 405.
    @Test func headIsAnsweredAsGetWithoutTheBody() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let client = try RawClient(port: t.port)
        for (path, type) in [
            ("/", "text/html"), ("/api/v1/status", "application/json"), ("/api/v1/events", "text/event-stream"),
        ] {
            client.send("HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let head = try client.readHead()
            #expect(head.status == 200, "HEAD \(path)")
            #expect(head.headers["content-type"]?.hasPrefix(type) == true, "HEAD \(path): \(head.headers)")
        }
        #expect(waitUntil { t.daemon.events.subscriberCount == 0 }, "the HEAD's event subscription ended")
        client.send("GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let after = try client.readResponse()
        #expect(after.status == 200)
        #expect(after.text.contains("\"zones\""), "\(after.text.prefix(200))")
        // A HEAD still needs the token where one is configured.
        let api = API(daemon: t.daemon, token: "s3cret-token")
        #expect(api.handle(.init(method: "HEAD", path: "/api/v1/status", headers: ["host": "127.0.0.1"])).status == 401)
        #expect(api.handle(.init(method: "HEAD", path: "/", headers: ["host": "127.0.0.1"])).status == 200)
    }
}
