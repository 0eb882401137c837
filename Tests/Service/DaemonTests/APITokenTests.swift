import BatonTesting
import HTTPServer
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService

/// The bearer token required when the API is reachable beyond loopback.
@Suite struct APITokenTests {
    /// Without the token, or with a wrong one, every endpoint answers 401 JSON; with it, 200.
    @Test func requestsNeedTheBearerToken() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let api = API(daemon: t.daemon, token: "s3cret-token")
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { api.handle($0) }
        defer { server.stop() }
        func get(_ auth: String?) throws -> RawClient.Response {
            let c = try RawClient(port: server.port)
            c.send(
                "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(auth.map { "Authorization: \($0)\r\n" } ?? "")\r\n"
            )
            return try c.readResponse()
        }
        let none = try get(nil)
        #expect(none.status == 401)
        #expect(none.text.contains("bearer token is required"))
        #expect(none.headers["www-authenticate"] == "Bearer")
        #expect(try get("Bearer wrong").status == 401)
        #expect(try get("Bearer s3cret-toke").status == 401)
        #expect(try get("Basic czNjcmV0LXRva2Vu").status == 401)
        #expect(try get("Bearer s3cret-token").status == 200)
    }

    /// The status page loads without the token (it holds no data and asks for it); its event stream
    /// may carry the token as `?access_token=` (EventSource cannot set headers), GET requests only.
    @Test func statusPageAndQueryToken() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let api = API(daemon: t.daemon, token: "s3cret-token")
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { api.handle($0) }
        defer { server.stop() }
        func send(_ line: String, body: String = "") throws -> RawClient.Response {
            let c = try RawClient(port: server.port)
            c.send(
                "\(line) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            )
            return try c.readResponse()
        }
        let page = try send("GET /")
        #expect(page.status == 200 && page.text.contains("batonToken"))
        #expect(try send("GET /api/v1/status?access_token=s3cret-token").status == 200)
        #expect(try send("GET /api/v1/status?access_token=wrong").status == 401)
        #expect(try send("GET /api/v1/status?access_token=").status == 401)
        #expect(
            try send("POST /api/v1/announce?access_token=s3cret-token", body: #"{"sound": "bell1k"}"#).status == 401,
            "a query token is for GET only")
    }
}
