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

/// The bearer token required when the API is reachable beyond loopback.
@Suite(.ownThread) struct APITokenTests {
    /// A test daemon and its API with the token `s3cret-token`, on a server of its own (stop both).
    static func tokenAPI(maxBody: Int = 4096) throws -> (TestDaemon, HTTPServer) {
        let t = try TestDaemon()
        let api = API(daemon: t.daemon, token: "s3cret-token")
        do {
            return (
                t,
                try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: maxBody, admit: { api.admit($0) }) {
                    api.handle($0)
                }
            )
        } catch {
            t.stop()
            throw error
        }
    }

    /// Without the token, or with a wrong one, every endpoint answers 401 JSON; with it, 200.
    @Test func requestsNeedTheBearerToken() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
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

    /// The scheme is case-insensitive (RFC 7235, 2.1): `bearer TOKEN` and `BEARER TOKEN` are the
    /// token. `hasPrefix("Bearer ")` answered them 401, each one a wrong guess: the fifth within
    /// a second was a 429.
    @Test func theSchemeIsCaseInsensitive() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        func get(_ auth: String) throws -> Int {
            let c = try RawClient(port: server.port)
            c.send(
                "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: \(auth)\r\n\r\n"
            )
            return try c.readResponse().status
        }
        let schemes = ["bearer", "BEARER", "bEaReR", "bearer", "Bearer", "bearer", "BEARER", "bearer"]
        #expect(try schemes.map { try get("\($0) s3cret-token") } == Array(repeating: 200, count: schemes.count))
        #expect(try get("bearer wrong") == 401)
        #expect(try get("bearers3cret-token") == 401)
    }

    /// The web app loads without the token (it holds no data); a token in the address
    /// (`?access_token=`) is refused now, for GET as for POST: it would end up in logs and history.
    @Test func webAppLoadsAndQueryTokenIsRefused() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        func send(_ line: String, body: String = "") throws -> RawClient.Response {
            let c = try RawClient(port: server.port)
            c.send(
                "\(line) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            )
            return try c.readResponse()
        }
        let page = try send("GET /")
        #expect(page.status == 200 && page.text.contains("/app.js") && !page.text.contains("token="))
        #expect(try send("GET /app.js").status == 200)
        #expect(try send("GET /api/v1/status?access_token=s3cret-token").status == 401)
        #expect(
            try send("POST /api/v1/announce?access_token=s3cret-token", body: #"{"sound": "bell1k"}"#).status == 401)
    }

    /// The login: a wrong token is 401; the right one gives an HttpOnly, SameSite=Strict session
    /// cookie and the CSRF secret; with the cookie, GET works, a POST needs the X-Baton-CSRF header
    /// (403 without it, naming the csrf rule); logout ends the session.
    @Test func sessionCookieLoginWithCSRF() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        func send(_ method: String, _ path: String, body: String = "", headers: [String] = []) throws
            -> RawClient.Response
        {
            let c = try RawClient(port: server.port)
            var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nConnection: close\r\n"
            if method != "GET" { text += "Content-Type: application/json\r\n" }
            for h in headers { text += h + "\r\n" }
            c.send(text + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            return try c.readResponse()
        }
        func object(_ r: RawClient.Response) -> [String: String] {
            (try? JSONDecoder().decode([String: String].self, from: Data(r.body))) ?? [:]
        }
        #expect(try send("GET", "/api/v1/session").text.contains(#""authenticated":false"#))
        let wrong = try send("POST", "/api/v1/session", body: #"{"token": "guess"}"#)
        #expect(wrong.status == 401)
        #expect(wrong.headers["set-cookie"] == nil)
        #expect(object(wrong)["error"]?.contains("wrong token") == true)
        #expect(try send("POST", "/api/v1/session", body: #"{"tokn": "x"}"#).status == 400)

        let login = try send("POST", "/api/v1/session", body: #"{"token": "s3cret-token"}"#)
        #expect(login.status == 200)
        let cookieHeader = try #require(login.headers["set-cookie"])
        #expect(cookieHeader.contains("HttpOnly") && cookieHeader.contains("SameSite=Strict"))
        let cookie = String(cookieHeader.split(separator: ";")[0])
        let csrf = try #require(
            (try? JSONDecoder().decode([String: SessionField].self, from: Data(login.body)))?["csrf"]?.text)
        #expect(!login.text.contains("s3cret-token"))

        #expect(try send("GET", "/api/v1/status", headers: ["Cookie: \(cookie)"]).status == 200)
        let again = try send("GET", "/api/v1/session", headers: ["Cookie: \(cookie)"])
        #expect(again.text.contains(csrf))
        // The cookie again, its 30 days from now: set only at login, a phone used every day was
        // logged out 30 days after it logged in.
        #expect(again.headers["set-cookie"] == cookieHeader, "\(again.headers)")
        let noCSRF = try send("POST", "/api/v1/music/stop", headers: ["Cookie: \(cookie)"])
        #expect(noCSRF.status == 403)
        #expect(object(noCSRF)["rule"] == "csrf")
        let badCSRF = try send("POST", "/api/v1/music/stop", headers: ["Cookie: \(cookie)", "X-Baton-CSRF: nope"])
        #expect(badCSRF.status == 403)
        let ok = try send(
            "POST", "/api/v1/announce", body: #"{"sound": "bell1k"}"#,
            headers: ["Cookie: \(cookie)", "X-Baton-CSRF: \(csrf)", "Origin: http://127.0.0.1:\(server.port)"])
        #expect(ok.status == 202, "\(ok.text)")
        // A forged cookie is nobody.
        #expect(try send("GET", "/api/v1/status", headers: ["Cookie: baton-session=forged"]).status == 401)

        let out = try send("DELETE", "/api/v1/session", headers: ["Cookie: \(cookie)", "X-Baton-CSRF: \(csrf)"])
        #expect(out.status == 200)
        #expect(out.headers["set-cookie"]?.contains("Max-Age=0") == true)
        #expect(try send("GET", "/api/v1/status", headers: ["Cookie: \(cookie)"]).status == 401)
    }

    /// Logging out ends the event stream the session opened (a page logged out on one tab stops
    /// receiving events on the others); a stream opened with the bearer token goes on. Before, the
    /// stream went on after the logout for as long as the page stayed open.
    @Test func aLogoutEndsTheSessionsEventStream() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        let host = "Host: 127.0.0.1:\(server.port)"
        let (cookie, csrf) = try Self.login(port: server.port)
        func stream(_ auth: String) throws -> RawClient {
            let c = try RawClient(port: server.port)
            c.send("GET /api/v1/events HTTP/1.1\r\n\(host)\r\nConnection: close\r\n\(auth)\r\n\r\n")
            #expect(try c.readHead().status == 200)
            return c
        }
        let page = try stream("Cookie: \(cookie)")
        let tool = try stream("Authorization: Bearer s3cret-token")
        let logout = try RawClient(port: server.port)
        logout.send(
            "DELETE /api/v1/session HTTP/1.1\r\n\(host)\r\nConnection: close\r\nCookie: \(cookie)\r\n"
                + "X-Baton-CSRF: \(csrf)\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n")
        #expect(try logout.readResponse().status == 200)
        #expect(page.readsEndOfFile(), "the session's stream ended")
        _ = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#)
        #expect(try tool.readServerSentEvent() != nil, "the bearer's stream goes on")
    }

    /// Behind a proxy with a `Basic` login (which browsers send with every request there), the web
    /// app's session cookie still counts, and the header is no wrong token: eight at once with the
    /// cookie are answered 200, and without it 401 at once, not a quarter of a second apart.
    /// Before, any Authorization header made the caller anonymous, cookie or not (the login form
    /// came back after each login), and each request waited as a guess.
    @Test func aProxysBasicLoginLeavesTheSessionAlone() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        let host = "Host: 127.0.0.1:\(server.port)"
        let cookie = try Self.login(port: server.port).cookie
        let basic = "Authorization: Basic dXNlcjpwYXNz"
        let withCookie = Self.eightAtOnce(
            server.port,
            "GET /api/v1/status HTTP/1.1\r\n\(host)\r\nConnection: close\r\n\(basic)\r\nCookie: \(cookie)\r\n\r\n")
        #expect(withCookie.statuses == Array(repeating: 200, count: 8), "\(withCookie.statuses)")
        let without = Self.eightAtOnce(
            server.port, "GET /api/v1/status HTTP/1.1\r\n\(host)\r\nConnection: close\r\n\(basic)\r\n\r\n")
        #expect(without.statuses == Array(repeating: 401, count: 8), "\(without.statuses)")
        #expect(without.lastSeconds < 1.2, "not waited as guesses (1.75 s or more): \(without.lastSeconds) s")
        let c = try RawClient(port: server.port)
        c.send("GET /api/v1/session HTTP/1.1\r\n\(host)\r\nConnection: close\r\n\(basic)\r\nCookie: \(cookie)\r\n\r\n")
        #expect(try c.readResponse().text.contains(#""authenticated":true"#))
    }

    /// A login sent with the cookie of a session (another tab logging in again, a script's cookie
    /// jar) ends that session: its event stream ends and its cookie is refused; the new one works.
    /// Before, the old session stayed for 30 days, its stream went on after the logout of the new
    /// one, and each such login took one of the 64 places.
    @Test func aLoginAgainEndsTheSessionItReplaces() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        let host = "Host: 127.0.0.1:\(server.port)"
        let old = try Self.login(port: server.port).cookie
        let stream = try RawClient(port: server.port)
        stream.send("GET /api/v1/events HTTP/1.1\r\n\(host)\r\nConnection: close\r\nCookie: \(old)\r\n\r\n")
        #expect(try stream.readHead().status == 200)
        let new = try Self.login(port: server.port, cookie: old).cookie
        #expect(new != old)
        #expect(stream.readsEndOfFile(), "the replaced session's stream ended")
        func status(_ cookie: String) throws -> Int {
            let c = try RawClient(port: server.port)
            c.send("GET /api/v1/status HTTP/1.1\r\n\(host)\r\nConnection: close\r\nCookie: \(cookie)\r\n\r\n")
            return try c.readResponse().status
        }
        #expect(try status(old) == 401)
        #expect(try status(new) == 200)
    }

    /// Logs in with the right token (sending `cookie`, if any): the session's cookie (`name=value`)
    /// and CSRF secret.
    static func login(port: Int, cookie: String? = nil) throws -> (cookie: String, csrf: String) {
        let c = try RawClient(port: port)
        let body = #"{"token": "s3cret-token"}"#
        c.send(
            "POST /api/v1/session HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
                + (cookie.map { "Cookie: \($0)\r\n" } ?? "")
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        let answer = try c.readResponse()
        let cookie = String(try #require(answer.headers["set-cookie"]).split(separator: ";")[0])
        let csrf = try #require(
            (try? JSONDecoder().decode([String: SessionField].self, from: Data(answer.body)))?["csrf"]?.text)
        return (cookie, csrf)
    }

    /// With a token, a method the page's paths do not take is the documented 404 (not a 401 that
    /// says a token is needed for what does not exist), and a method other than GET on a library
    /// path is the documented 405, as on every other path of the table.
    @Test func wrongMethodsGetTheDocumentedStatus() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        func send(_ method: String, _ path: String, auth: Bool) throws -> RawClient.Response {
            let c = try RawClient(port: server.port)
            var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nConnection: close\r\n"
            if method != "GET" && method != "HEAD" { text += "Content-Type: application/json\r\n" }
            if auth { text += "Authorization: Bearer s3cret-token\r\n" }
            c.send(text + "Content-Length: 0\r\n\r\n")
            return try c.readResponse()
        }
        #expect(try send("POST", "/", auth: false).status == 404)
        #expect(try send("DELETE", "/", auth: false).status == 404)
        #expect(try send("GET", "/", auth: false).status == 200)
        let post = try send("POST", "/api/v1/library/artists", auth: true)
        #expect(post.status == 405, "\(post.status) \(post.text)")
        #expect(post.text.contains("method POST not allowed on /api/v1/library/artists"), "\(post.text)")
        #expect(try send("POST", "/api/v1/library/artists", auth: false).status == 401)
    }

    /// Sends `request` (raw HTTP, `PORT` standing for the port) on eight connections at once to
    /// an API with a token; their statuses and how long after the sending the last came back.
    static func eightAtOnce(_ port: Int, _ request: String) -> (statuses: [Int], lastSeconds: Double) {
        let answers = Mutex<[(status: Int, at: Int)]>([])
        let go = Semaphore()
        var threads: [OSThread] = []
        let text = request.replacing("PORT", with: "\(port)")
        for _ in 0..<8 {
            threads.append(
                OSThread.start(name: "guess") {
                    go.wait()
                    let c = try? RawClient(port: port)
                    c?.send(text)
                    let status = (try? c?.readResponse())?.status ?? 0
                    answers.withLock { $0.append((status, monotonicNanoseconds())) }
                })
        }
        let began = monotonicNanoseconds()
        for _ in threads { go.post() }
        for thread in threads { thread.join() }
        let got = answers.withLock { $0 }.sorted { $0.at < $1.at }
        return (got.map(\.status), Double((got.last?.at ?? began) - began) / 1e9)
    }

    /// A wrong bearer token on any path waits its turn as a wrong login does: eight at once from
    /// one client are answered a quarter of a second apart — on /api/v1/status and on the public
    /// /api/v1/session, whose answer says whether the token was right — while the right token,
    /// sent meanwhile, is answered at once. Before, only the login was slowed.
    @Test func wrongBearerTokensAreSlowedToo() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        for path in ["/api/v1/status", "/api/v1/session"] {
            let port = server.port
            let guesses = Mutex<(statuses: [Int], lastSeconds: Double)?>(nil)
            OSThread.detach(name: "guesses") {
                let got = Self.eightAtOnce(
                    port,
                    "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nConnection: close\r\nAuthorization: Bearer guess\r\n\r\n"
                )
                guesses.withLock { $0 = got }
            }
            usleep(300_000)  // the guesses wait their turns
            let began = monotonicNanoseconds()
            let c = try RawClient(port: server.port)
            c.send(
                "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nConnection: close\r\n"
                    + "Authorization: Bearer s3cret-token\r\n\r\n")
            #expect(try c.readResponse().status == 200)
            let took = Double(monotonicNanoseconds() - began) / 1e9
            #expect(took < 0.5, "the right token took \(took) s on \(path)")
            #expect(guesses.withLock { $0 } == nil, "the guesses were all answered by then")
            #expect(waitUntil(seconds: 5) { guesses.withLock { $0 } != nil })
            let got = try #require(guesses.withLock { $0 })
            #expect(
                got.statuses == Array(repeating: path.hasSuffix("session") ? 200 : 401, count: 8), "\(got.statuses)")
            #expect(got.lastSeconds >= 1.9, "\(path): the eighth answered \(got.lastSeconds) s after they were sent")
        }
    }

    /// A request without the token, with a wrong one or for another Host is refused once its head
    /// has come, before any of its body is read: 16 MB declared and none of it sent is answered at
    /// once, and so is a login declaring more than a login needs. Before, every body up to
    /// `api.max-body` (16 MiB) was read in full before anyone looked at who sent it.
    @Test func aRefusedRequestsBodyIsNeverRead() throws {
        let (t, server) = try Self.tokenAPI(maxBody: 16 << 20)
        defer {
            server.stop()
            t.stop()
        }
        func head(_ path: String, _ extra: String, length: Int) throws -> RawClient.Response {
            let c = try RawClient(port: server.port)
            c.send(
                "POST \(path) HTTP/1.1\r\nConnection: close\r\nContent-Type: application/json\r\n\(extra)"
                    + "Content-Length: \(length)\r\n\r\n")
            return try c.readResponse()
        }
        let none = try head("/api/v1/announce", "Host: 127.0.0.1\r\n", length: 16_000_000)
        #expect(none.status == 401, "\(none.text)")
        #expect(none.text.contains("bearer token is required"))
        let wrong = try head(
            "/api/v1/announce", "Host: 127.0.0.1\r\nAuthorization: Bearer guess\r\n", length: 16_000_000)
        #expect(wrong.status == 401)
        let host = try head("/api/v1/announce", "Host: evil.example\r\n", length: 16_000_000)
        #expect(host.status == 403)
        #expect(host.text.contains("host rule"))
        let login = try head("/api/v1/session", "Host: 127.0.0.1\r\n", length: 100_000)
        #expect(login.status == 413)
        #expect(login.text.contains("without a token carries at most 4096 bytes"), "\(login.text)")
        // With the token the body is read and the request carried out.
        let body = #"{"sound": "bell1k", "zones": ["kitchen"]}"#
        let c = try RawClient(port: server.port)
        c.send(
            "POST /api/v1/announce HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                + "Authorization: Bearer s3cret-token\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        let ok = try c.readResponse()
        #expect(ok.status == 202, "\(ok.status) \(ok.text)")
    }

    /// An anonymous login's body is held to 4096 bytes however its length is told: chunked, with
    /// no Content-Length, it is answered 413 (not stored past 4096 bytes); with Content-Length
    /// twice, 400 before any of it is read. Before, only a declared single length was checked:
    /// a chunked login was read up to `api.max-body` (16 MiB), and of two lengths the check saw
    /// neither (joined, not a number) while libmicrohttpd waited for the first's 16 MB, so
    /// anonymous connections could still make batond hold `api.max-body` each.
    @Test func anAnonymousBodyIsHeldTo4096BytesHoweverItsLengthIsTold() throws {
        let (t, server) = try Self.tokenAPI(maxBody: 16 << 20)
        defer {
            server.stop()
            t.stop()
        }
        let head =
            "POST /api/v1/session HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            + "Content-Type: application/json\r\n"
        // A login of 5000 bytes in five chunks: a wrong token (401) if it were read whole.
        let login = Array(#"{"token": "\#(String(repeating: "x", count: 4_987))"}"#.utf8)
        #expect(login.count == 5_000)
        var chunked = head + "Transfer-Encoding: chunked\r\n\r\n"
        for start in stride(from: 0, to: login.count, by: 1_000) {
            chunked += "3e8\r\n" + String(decoding: login[start..<start + 1_000], as: UTF8.self) + "\r\n"
        }
        let c = try RawClient(port: server.port)
        c.send(chunked + "0\r\n\r\n")
        let big = try c.readResponse()
        #expect(big.status == 413, "\(big.status) \(big.text)")
        #expect(big.text.contains("without a token carries at most 4096 bytes"), "\(big.text)")
        // Two lengths, the same or not: how long the body is cannot be told.
        for lengths in ["16000000", "10"] {
            let d = try RawClient(port: server.port)
            d.send(head + "Content-Length: 16000000\r\nContent-Length: \(lengths)\r\n\r\n")
            let twice = try d.readResponse()
            #expect(twice.status == 400, "\(twice.status) \(twice.text)")
            #expect(twice.text.contains("Content-Length is given 2 times"), "\(twice.text)")
        }
        // A small chunked login is read and answered (a wrong token).
        let small = Array(#"{"token": "guess"}"#.utf8)
        let e = try RawClient(port: server.port)
        e.send(
            head + "Transfer-Encoding: chunked\r\n\r\n\(String(small.count, radix: 16))\r\n"
                + String(decoding: small, as: UTF8.self) + "\r\n0\r\n\r\n")
        let wrong = try e.readResponse()
        #expect(wrong.status == 401, "\(wrong.status) \(wrong.text)")
    }

    /// A guesser on five addresses keeps the budget all clients share full; the owner's batonctl
    /// (loopback) and an address that showed the right token before (Home Assistant, a phone that
    /// logged in) still get in with the right token, while the right token from an address never
    /// seen is held off with the rest until the guesses stop (a 429 for it says nothing of the
    /// token). Before, every request with a token, the right one too, was a 429 for as long as the
    /// guessing went on. The clock stands still: the guesses' waits are taken as overlapping.
    @Test func aGuesserDoesNotLockOutTheRightToken() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let clock = Mutex(1_000_000_000)
        let sessions = Sessions(now: { clock.withLock { $0 } }, pause: { _ in })
        let api = API(daemon: t.daemon, token: "s3cret-token", triggers: nil, sessions: sessions)
        func get(_ token: String, from address: String) -> Int {
            api.handle(
                .init(
                    method: "GET", path: "/api/v1/status",
                    headers: ["host": "127.0.0.1", "authorization": "Bearer \(token)"], remoteAddress: address)
            ).status
        }
        func login(_ token: String, from address: String) -> Int {
            api.handle(
                .init(
                    method: "POST", path: "/api/v1/session",
                    headers: ["host": "127.0.0.1", "content-type": "application/json"],
                    body: Array(#"{"token": "\#(token)"}"#.utf8), remoteAddress: address)
            ).status
        }
        #expect(get("s3cret-token", from: "192.0.2.10") == 200)  // Home Assistant, before the attack
        #expect(login("s3cret-token", from: "192.0.2.11") == 200)  // a phone's login
        var statuses: [Int] = []
        for round in 0..<20 {
            for host in 1...5 { statuses.append(get("guess\(round)", from: "192.0.2.\(host)")) }
        }
        #expect(statuses.filter { $0 == 401 }.count >= 79, "the guesses were answered: \(statuses)")
        #expect(get("s3cret-token", from: "192.0.2.99") == 429, "the shared budget is full")
        #expect(login("s3cret-token", from: "192.0.2.98") == 429)
        #expect(get("s3cret-token", from: "192.0.2.10") == 200, "Home Assistant was locked out")
        #expect(login("s3cret-token", from: "192.0.2.11") == 200, "the phone could not log in again")
        #expect(get("s3cret-token", from: "127.0.0.1") == 200, "batonctl on the speaker was locked out")
        // Their own wrong tokens still wait their turns (a quarter of a second each, at most 5 s).
        #expect(get("typo", from: "192.0.2.10") == 401)
        for _ in 0..<19 { _ = get("typo", from: "192.0.2.10") }
        #expect(get("typo", from: "192.0.2.10") == 429)
        clock.withLock { $0 += 6_000_000_000 }  // the guesses' turns are past
        #expect(get("s3cret-token", from: "192.0.2.99") == 200)
    }

    /// Wrong tokens sent on eight connections at once are answered a quarter of a second apart, as
    /// one after the other would be: guessing is four tries a second however many connections a
    /// guesser opens. Before, each connection waited its own quarter: all eight came back together.
    @Test func parallelWrongTokensAreAnsweredAQuarterSecondApart() throws {
        let (t, server) = try Self.tokenAPI()
        defer {
            server.stop()
            t.stop()
        }
        let body = #"{"token": "guess"}"#
        let got = Self.eightAtOnce(
            server.port,
            "POST /api/v1/session HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nConnection: close\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        #expect(got.statuses == Array(repeating: 401, count: 8), "\(got.statuses)")
        #expect(got.lastSeconds >= 1.9, "the eighth answered \(got.lastSeconds) s after they were sent")
    }
}

/// A string or a boolean in a JSON object, for answers that mix them.
private enum SessionField: Decodable {
    case string(String)
    case other
    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        self = (try? c.decode(String.self)).map(SessionField.string) ?? .other
    }
    var text: String? { if case .string(let s) = self { s } else { nil } }
}
