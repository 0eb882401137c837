import BatonTesting
import Glibc
import HTTPServer
import Snapcast
import Testing

/// The JSON-RPC client against a real snapserver, and against answers snapserver would never give
/// (served by Baton's own HTTP server), which must be reported with the JSON path of the bad value.
@Suite struct SnapcastControlTests {
    /// Reading the status and moving a stream works against the real server; an unknown group is
    /// the server's JSON-RPC error, named with the method.
    @Test func talksToARealServer() throws {
        let server = try SnapcastServer()
        defer { server.stop() }
        let control = SnapcastControl(control: server.control + "/")
        #expect(control.endpoint == server.control + "/jsonrpc")
        let status = try control.status()
        #expect(Set(status.streams.map(\.id)) == ["upstairs", "other"])
        #expect(throws: SnapcastError.self) { try control.setStream(group: "no-such-group", stream: "upstairs") }
        do throws(SnapcastError) {
            try control.setStream(group: "no-such-group", stream: "upstairs")
        } catch {
            #expect(
                error.description.hasPrefix("snapserver \(server.control)/jsonrpc: Group.SetStream: error "), "\(error)"
            )
            #expect(!error.isTransient)
        }
    }

    /// Malformed answers, HTTP errors and an absent server each give a clear, located error.
    @Test(arguments: [
        (
            200,
            #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":[{"id":"g","stream_id":"s","clients":[{"connected":true}]}],"streams":[]}}}"#,
            "Server.GetStatus: unexpected answer: result.server.groups[0].clients[0].id: missing"
        ),
        (
            200, #"{"id":1,"jsonrpc":"2.0","result":{"server":{"groups":"none","streams":[]}}}"#,
            "Server.GetStatus: unexpected answer: result.server.groups: expected an array"
        ),
        (
            200, "not json",
            "Server.GetStatus: unexpected answer: (top level): not valid JSON (The given data was not valid JSON.)"
        ),
        (200, #"{"id":1,"jsonrpc":"2.0"}"#, "Server.GetStatus: unexpected answer: neither result nor error"),
        (503, "busy", "Server.GetStatus: HTTP 503: busy"),
    ])
    func reportsBadAnswers(status: Int, body: String, problem: String) throws {
        let fake = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 4096) { _ in
            HTTPResponse(
                status: status, headers: [("Content-Type", "application/json")], body: .bytes(Array(body.utf8)))
        }
        defer { fake.stop() }
        let control = SnapcastControl(control: "http://127.0.0.1:\(fake.port)")
        do throws(SnapcastError) {
            _ = try control.status()
            Issue.record("no error for \(body)")
        } catch {
            #expect(error.description == "snapserver http://127.0.0.1:\(fake.port)/jsonrpc: \(problem)")
            #expect(error.isTransient == (status >= 500))
        }
    }

    /// No server: a transient transport error.
    @Test func reportsAnAbsentServer() throws {
        let control = SnapcastControl(control: "http://127.0.0.1:\(try FreePort.next())")
        do throws(SnapcastError) {
            _ = try control.status()
            Issue.record("no error without a server")
        } catch {
            #expect(error.isTransient)
            #expect(error.description.contains("Server.GetStatus"), "\(error)")
        }
    }
}
