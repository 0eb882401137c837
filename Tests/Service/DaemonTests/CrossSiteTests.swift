import BatonConfig
import BatonTesting
import FoundationEssentials
import Glibc
import HTTPServer
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// The cross-site rules, through the real HTTP server: a page on another site must not be able to
/// ring the doorbell through a browser, nor reach the API under a rebound DNS name.
@Suite(.ownThread) struct CrossSiteTests {
    /// Sends one raw request with the given headers (and body) to the daemon's API.
    static func send(
        _ t: TestDaemon, _ method: String, _ path: String, headers: [String], body: String = ""
    ) throws -> RawClient.Response {
        let c = try RawClient(port: t.port)
        var text = "\(method) \(path) HTTP/1.1\r\nConnection: close\r\n"
        for h in headers { text += h + "\r\n" }
        text += "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        c.send(text)
        return try c.readResponse()
    }

    static func rule(_ r: RawClient.Response) -> String? {
        (try? JSONDecoder().decode([String: String].self, from: Data(r.body)))?["rule"]
    }

    /// A `text/plain` POST from origin evil.example (what a cross-site form or `fetch` without a
    /// preflight sends) is 403 naming the content-type rule, and no doorbell is admitted.
    @Test func refusesATextPlainPostFromAnotherSite() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let r = try Self.send(
            t, "POST", "/api/v1/announce",
            headers: ["Host: 127.0.0.1:\(t.port)", "Content-Type: text/plain", "Origin: http://evil.example"],
            body: #"{"sound": "doorbell"}"#)
        #expect(r.status == 403)
        #expect(Self.rule(r) == "content-type")
        let error = (try? JSONDecoder().decode([String: String].self, from: Data(r.body)))?["error"] ?? ""
        #expect(error.contains("Content-Type: application/json") && error.contains("text/plain"), "\(error)")
        usleep(200_000)
        #expect(t.daemon.events.recent().allSatisfy { $0.type != "granted" }, "a doorbell was admitted")
        #expect(t.daemon.status().sources.isEmpty)
    }

    /// JSON with a foreign Origin is 403 naming the origin rule (a page elsewhere cannot send JSON
    /// without a preflight, but the check holds on its own), and so is Sec-Fetch-Site: cross-site.
    @Test func refusesAForeignOrigin() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        for extra in [
            "Origin: http://evil.example", "Origin: null", "Origin: http://127.0.0.1:1", "Sec-Fetch-Site: cross-site",
        ] {
            let r = try Self.send(
                t, "POST", "/api/v1/announce",
                headers: ["Host: 127.0.0.1:\(t.port)", "Content-Type: application/json", extra],
                body: #"{"sound": "doorbell"}"#)
            #expect(r.status == 403, "\(extra)")
            #expect(Self.rule(r) == "origin", "\(extra): \(r.text)")
        }
        usleep(200_000)
        #expect(t.daemon.status().sources.isEmpty)
    }

    /// A request under a name that is not the API's (DNS rebinding: evil.example resolving to
    /// 127.0.0.1) is 403 naming the host rule, GET as well as POST.
    @Test func refusesAForeignHost() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let get = try Self.send(t, "GET", "/api/v1/status", headers: ["Host: evil.example:8470"])
        #expect(get.status == 403)
        #expect(Self.rule(get) == "host")
        #expect(get.text.contains("api.allowed-hosts"))
        let page = try Self.send(t, "GET", "/", headers: ["Host: evil.example"])
        #expect(page.status == 403)
        let post = try Self.send(
            t, "POST", "/api/v1/announce", headers: ["Host: evil.example:8470", "Content-Type: application/json"],
            body: #"{"sound": "doorbell"}"#)
        #expect(post.status == 403)
        #expect(Self.rule(post) == "host")
        let none = try Self.send(t, "GET", "/api/v1/status", headers: [])
        #expect(none.status == 403 || none.status == 400, "no Host header: \(none.status)")
    }

    /// The refusal of a foreign Host names the API's names (the host name, every interface's
    /// address) only to a client on this machine: anyone who reached the port learnt them.
    @Test func theNamesAreToldOnlyToThisMachine() {
        let guardian = CrossSiteGuard(names: ["speaker.lan", "10.8.0.5"])
        for (peer, told) in [
            ("192.168.1.20", false), ("::ffff:192.168.1.20", false), ("127.0.0.1", true), ("::1", true),
        ] {
            let refusal = guardian.refusal(
                HTTPRequest(method: "GET", path: "/", headers: ["host": "evil.example"], remoteAddress: peer))
            let text =
                refusal.map { r in
                    if case .bytes(let b) = r.body { String(decoding: b, as: UTF8.self) } else { "" }
                } ?? ""
            #expect(text.contains("api.allowed-hosts"), "\(peer): \(text)")
            #expect(text.contains("10.8.0.5") == told, "\(peer): \(text)")
        }
    }

    /// The API's own names work: the loopback addresses, localhost, the machine's host name, and
    /// a same-origin POST from the page rings the doorbell (202).
    @Test func acceptsItsOwnNamesAndASameOriginPost() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, 255)
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        for h in ["127.0.0.1:\(t.port)", "localhost:\(t.port)", "[::1]:\(t.port)", "\(host):\(t.port)", "LOCALHOST"] {
            let r = try Self.send(t, "GET", "/api/v1/status", headers: ["Host: \(h)"])
            #expect(r.status == 200, "Host: \(h): \(r.text)")
        }
        let r = try Self.send(
            t, "POST", "/api/v1/announce",
            headers: [
                "Host: 127.0.0.1:\(t.port)", "Content-Type: application/json; charset=utf-8",
                "Origin: http://127.0.0.1:\(t.port)", "Sec-Fetch-Site: same-origin",
            ],
            body: #"{"sound": "bell1k"}"#)
        #expect(r.status == 202, "\(r.text)")
        // A POST without a body still needs the JSON type; with it, it works.
        let bare = try Self.send(t, "POST", "/api/v1/music/stop", headers: ["Host: 127.0.0.1"])
        #expect(bare.status == 403)
        #expect(Self.rule(bare) == "content-type")
    }

    /// `api.allowed-hosts` adds names (read from the file, checked, lowercased). It needs a token,
    /// even on a loopback listener: those are the names of a reverse proxy in front of it, whose
    /// every request came from loopback — the whole API was open to anyone who reached the proxy.
    @Test func allowedHostsAddNames() throws {
        let dir = TestDirectory.make("allowed-hosts")
        let open = "api:\n  allowed-hosts: [speaker.example.org]\nzones:\n  kitchen: {pcm: \"null\"}\n"
        _ = FileIO.writeAtomically(Array(open.utf8), to: "\(dir)/baton.yaml")
        #expect {
            try BatonConfiguration.load(path: "\(dir)/baton.yaml")
        } throws: { error in
            "\(error)".contains(
                "api: missing required key \"token-file\": api.allowed-hosts names hosts the API is reached by")
        }
        let yaml = """
            api:
              listen: 127.0.0.1:8470
              token-file: api.token
              allowed-hosts: [Speaker.Example.org, "10.1.2.3"]
            zones:
              kitchen: {pcm: "null"}
            """
        let path = "\(dir)/baton.yaml"
        _ = FileIO.writeAtomically(Array(yaml.utf8), to: path)
        let config = try BatonConfiguration.load(path: path)
        #expect(config.api.allowedHosts == ["speaker.example.org", "10.1.2.3"])
        let guardrail = CrossSiteGuard(config: config.api)
        #expect(
            guardrail.refusal(HTTPRequest(method: "GET", path: "/", headers: ["host": "speaker.example.org:8470"]))
                == nil)
        #expect(guardrail.refusal(HTTPRequest(method: "GET", path: "/", headers: ["host": "10.1.2.3"])) == nil)
        #expect(guardrail.refusal(HTTPRequest(method: "GET", path: "/", headers: ["host": "other.example.org"])) != nil)

        let bad = "api:\n  allowed-hosts: [\"http://x\"]\nzones:\n  kitchen: {pcm: \"null\"}\n"
        _ = FileIO.writeAtomically(Array(bad.utf8), to: path)
        do {
            _ = try BatonConfiguration.load(path: path)
            Issue.record("a URL in allowed-hosts was accepted")
        } catch {
            #expect("\(error)".contains("allowed-hosts"), "\(error)")
        }
    }

    /// A speaker that gets its address (DHCP) or its name after batond started answers to it: the
    /// machine's names are asked again when a request's `Host` is not among those known, and a name
    /// it still does not have is refused, the message listing the names it has now (to a client on
    /// this machine).
    @Test func anAddressGainedAfterStartIsAnswered() {
        let machine = Mutex<Set<String>>(["speaker", "speaker.local"])
        let guardrail = CrossSiteGuard(
            names: ["localhost", "127.0.0.1", "::1", "speaker", "speaker.local"],
            machineNames: { machine.withLock { $0 } })
        func host(_ name: String) -> HTTPResponse? {
            // From this machine: the refusal lists the names it has (`theNamesAreToldOnlyToThisMachine`).
            guardrail.refusal(
                HTTPRequest(method: "GET", path: "/", headers: ["host": name], remoteAddress: "127.0.0.1"))
        }
        #expect(host("192.168.1.20:8470")?.status == 403)
        machine.withLock { $0 = ["speaker", "speaker.local", "192.168.1.20", "fd00::20"] }
        #expect(host("192.168.1.20:8470")?.status == nil)
        #expect(host("[fd00::20]:8470")?.status == nil)
        machine.withLock { $0 = ["living-room", "living-room.local"] }
        #expect(host("living-room.local")?.status == nil)
        let refused = host("192.168.1.99")
        #expect(refused?.status == 403)
        if case .bytes(let body) = refused?.body {
            let text = String(decoding: body, as: UTF8.self)
            #expect(text.contains("living-room.local") && text.contains("192.168.1.99"), "\(text)")
        } else {
            Issue.record("the refusal has no body")
        }
    }
}
