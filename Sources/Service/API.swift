import BatonDaemon
import ControlParts
import FoundationEssentials
import Glibc
import HTTPServer
import Synchronization

/// The control API (`/api/v1/...`) and the web app (`/`) over the control plane. Documented in
/// docs/API.md. Thread: `handle` runs on libmicrohttpd's connection threads, any number at once.
public struct API: Sendable {
    let daemon: Daemon
    let commands: Commands
    /// The token every request must carry (as a bearer header, or through a session cookie), when
    /// one is configured: always when the API is reachable beyond loopback.
    let token: String?
    /// The MQTT bridge and GPIO buttons, for their part of the status.
    let triggers: Triggers?
    /// The Host, Content-Type and Origin rules (cross-site safety), from `api:` at start.
    let crossSite: CrossSiteGuard
    let sessions: Sessions

    public init(daemon: Daemon, token: String? = nil, triggers: Triggers? = nil) {
        self.init(daemon: daemon, token: token, triggers: triggers, sessions: Sessions())
    }

    /// With `sessions` of the test's own (an injected clock).
    init(daemon: Daemon, token: String?, triggers: Triggers?, sessions: Sessions) {
        self.sessions = sessions
        self.daemon = daemon
        commands = Commands(daemon: daemon)
        self.token = token
        self.triggers = triggers
        crossSite = CrossSiteGuard(config: daemon.config.api)
    }

    /// Compares in time independent of where the strings differ.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }

    private static let readable: Set<String> = [
        "/api/v1/status", "/api/v1/events", "/api/v1/events/recent", "/api/v1/sounds", "/api/v1/config",
        "/api/v1/music/queue",
    ]

    /// Who a request is: a bearer-token client (batonctl, scripts), a logged-in page, or nobody.
    enum Caller {
        case open  // no token configured
        case bearer
        case session(id: String, csrf: String)
        case anonymous
    }

    func caller(_ r: HTTPRequest) -> Caller {
        guard let token else { return .open }
        if let offered = Self.offeredToken(r) {
            // A wrong token is not rescued by a cookie.
            return Self.constantTimeEqual(offered, token) ? .bearer : .anonymous
        }
        if let s = sessions.session(cookieHeader: r.headers["cookie"]) { return .session(id: s.id, csrf: s.csrf) }
        return .anonymous
    }

    /// The token a request offers: what follows `Bearer ` in its Authorization header (the scheme
    /// in any case, RFC 7235); nil for none or another scheme. Another scheme is not for batond: a
    /// proxy's `Basic` login, which browsers send with every request behind it, made each of the
    /// web app's requests a wrong token — its session ignored (the login form came back for ever)
    /// and every request waited as a guess (`Sessions.delayWrongToken`).
    static func offeredToken(_ r: HTTPRequest) -> String? {
        guard let header = r.headers["authorization"], header.prefix(7).lowercased() == "bearer " else { return nil }
        return String(header.dropFirst(7))
    }

    /// The most body a request to the page or the login (`isPublic`) may carry when a token is
    /// configured: a login is a few dozen bytes, and anyone may send one.
    static let publicBodyBytes = 4096

    /// Whether `path` needs no token: the page and its login hold no data.
    static func isPublic(_ path: String) -> Bool { WebApp.asset(path) != nil || path == "/api/v1/session" }

    /// What to do with a request whose head alone has come (`r.body` empty), before any of its body
    /// is read: the Host and other cross-site rules, then the token or session (a wrong token
    /// waiting its turn, as in `handle`), refuse it; the page and the login, which need neither,
    /// take at most `publicBodyBytes` of body (413 past it, declared or chunked); anything else
    /// goes on to `handle` with up to `api.max-body`. The server calls it on its connection's
    /// thread (`HTTPServer`'s `admit`). Before, every body up to `api.max-body` (16 MiB at most)
    /// was read in full before anyone looked at who sent it, and 64 anonymous connections could
    /// hold a gigabyte of locked memory; then a chunked login, whose length is declared nowhere,
    /// was still read up to it.
    public func admit(_ r: HTTPRequest) -> HTTPAdmission {
        if token != nil && Self.isPublic(r.path) {
            if let refusal = crossSite.refusal(r) { return .refuse(refusal) }
            // A wrong token here waits in `handle`, once.
            return .limit(
                bytes: Self.publicBodyBytes,
                tooLarge: .error(
                    413, "a request to \(r.path) without a token carries at most \(Self.publicBodyBytes) bytes of body")
            )
        }
        if case .refused(let response) = gate(r) { return .refuse(response) }
        return .proceed
    }

    /// What the rules before routing make of a request.
    enum Gate {
        case admitted(Caller)
        case refused(HTTPResponse)
    }

    /// Answers one request.
    public func handle(_ r: HTTPRequest) -> HTTPResponse {
        let who: Caller
        switch gate(r) {
        case .refused(let response): return response
        case .admitted(let caller): who = caller
        }
        return route(r, who)
    }

    /// The cross-site rules, then who the caller is: a refusal, or the caller to route for.
    func gate(_ r: HTTPRequest) -> Gate {
        if let refusal = crossSite.refusal(r) { return .refused(refusal) }
        // A client with a bearer token to try: refused before it is compared while that client's
        // wrong guesses wait, or everyone's do (a 429 then says nothing of whether this one is
        // right); everyone's not for loopback nor an address that showed the right token lately
        // (`Sessions.sharesBudget`: a guesser with a few addresses does not lock the owner out).
        let client = r.remoteAddress ?? ""
        let bearing = token != nil && Self.offeredToken(r) != nil
        if bearing && sessions.guessesFull(from: client) { return .refused(Self.tooManyGuesses) }
        let who = caller(r)
        switch who {
        case .bearer, .session: sessions.authenticated(from: client)
        case .open, .anonymous: break
        }
        // A wrong bearer token waits as a wrong login does (four tries a second), on every path:
        // the session's GET would tell it otherwise.
        if bearing, case .anonymous = who, !sessions.delayWrongToken(from: client) {
            return .refused(Self.tooManyGuesses)
        }
        // The page and its login need no token: they hold no data (another method on the page's
        // paths is a 404, as without a token).
        if !Self.isPublic(r.path) {
            switch who {
            case .open, .bearer: break
            case .session(_, let csrf):
                if r.method != "GET" && r.method != "HEAD" {
                    guard let given = r.headers["x-baton-csrf"], Self.constantTimeEqual(given, csrf) else {
                        return .refused(
                            CrossSiteGuard.forbidden(
                                "csrf",
                                "a \(r.method) with a session cookie must carry the page's X-Baton-CSRF header"))
                    }
                }
            case .anonymous:
                var response = HTTPResponse.error(
                    401,
                    "a bearer token is required (Authorization: Bearer <token from api.token-file>), "
                        + "or a session: log in with POST /api/v1/session")
                response.headers.append((name: "WWW-Authenticate", value: "Bearer"))
                return .refused(response)
            }
        }
        return .admitted(who)
    }

    /// Routes a request the gate admitted from `who`.
    private func route(_ r: HTTPRequest, _ who: Caller) -> HTTPResponse {
        let name = r.path.hasPrefix("/api/v1/") ? String(r.path.dropFirst("/api/v1/".count)) : ""
        let isCommand = Commands.names.contains(name) || (name.hasPrefix("zones/") && name.hasSuffix("/volume"))
        // HEAD is answered as GET (RFC 9110 9.3.2), libmicrohttpd leaving the body out: an uptime
        // monitor asking `HEAD /` was told 404, `HEAD /api/v1/status` 405.
        switch (Self.routed(r.method), r.path) {
        case ("GET", "/api/v1/status"):
            var status = daemon.status()
            if let triggers {
                status.mqtt = triggers.mqttStatus
                let gpio = triggers.gpioStatus
                status.gpio = gpio.isEmpty ? nil : gpio
            }
            return json(200, status)
        case ("GET", "/api/v1/events"):
            // The event id to go on after: `Last-Event-ID` (a browser's reconnect) or `?after=`.
            let last: Int?
            do throws(ControlError) {
                if let header = r.headers["last-event-id"], !header.isEmpty {
                    guard let id = Int(header), id >= 0 else {
                        throw ControlError(
                            .badRequest, "Last-Event-ID \"\(header)\" is not an event id (an integer ≥ 0)")
                    }
                    last = id
                } else {
                    last = try integer(r, "after", 0...Int.max, default: nil)
                }
            } catch {
                return .error(error.kind.httpStatus, error.message)
            }
            let stream = EventStream.open(daemon.events, after: last) { [sessions] in sessions.detach($0) }
            if case .session(let id, _) = who { sessions.attach(stream, to: id) }
            return .eventStream(stream)
        case ("GET", "/api/v1/events/recent"):
            do throws(ControlError) {
                return json(200, daemon.events.recent(after: try integer(r, "after", 0...Int.max, default: 0) ?? 0))
            } catch {
                return .error(error.kind.httpStatus, error.message)
            }
        case ("GET", "/api/v1/sounds"):
            // A directory that cannot be read now is said, not answered as one with no sounds.
            do {
                let listing = try daemon.sounds.readListing()
                return json(
                    200,
                    SoundsAnswer(
                        sounds: listing.names, ignored: listing.ignored.map { .init(file: $0.file, why: $0.why) }))
            } catch {
                return .error(503, "\(error)")
            }
        case ("GET", "/api/v1/config"):
            return json(200, daemon.config.redacted())
        case ("GET", "/api/v1/music/queue"):
            do { return json(200, QueueAnswer(try daemon.music.queue())) } catch {
                return .error(error.kind.httpStatus, error.message)
            }
        case (_, "/api/v1/session"):
            return session(r, who)
        case ("GET", _) where r.path.hasPrefix("/api/v1/library/"):
            return library(r)
        case ("POST", _) where isCommand:
            do {
                switch try commands.run(name, body: r.body) {
                case .accepted(let answer): return json(202, answer)
                case .done(let answer): return json(200, answer)
                case .reload(let report): return json(report.applied ? 200 : 422, report)
                }
            } catch {
                return .error(error.kind.httpStatus, error.message)
            }
        case (_, _) where isCommand && !name.hasPrefix("zones/"), (_, _) where Self.readable.contains(r.path),
            (_, _) where r.path.hasPrefix("/api/v1/library/"):
            return .error(405, "method \(r.method) not allowed on \(r.path)")
        case ("GET", _) where WebApp.asset(r.path) != nil:
            let asset = WebApp.asset(r.path)!
            return HTTPResponse(
                status: 200,
                headers: [
                    (name: "Content-Type", value: asset.type), (name: "Cache-Control", value: "no-cache"),
                    (name: "X-Content-Type-Options", value: "nosniff"), (name: "X-Frame-Options", value: "DENY"),
                    (name: "Content-Security-Policy", value: WebApp.contentSecurityPolicy),
                ], body: .bytes(Array(asset.text.utf8)))
        default:
            return .error(404, "no such endpoint: \(r.method) \(r.path) (see docs/API.md)")
        }
    }

    /// The method a request is routed by: HEAD as GET.
    static func routed(_ method: String) -> String { method == "HEAD" ? "GET" : method }

    /// The session cookie for session `id`, kept by the browser as long as the session is kept unused.
    private func sessionCookie(_ id: String) -> (name: String, value: String) {
        (
            name: "Set-Cookie",
            value: "\(Sessions.cookieName)=\(id); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(sessions.idleSeconds)"
        )
    }

    /// `/api/v1/session`: GET says whether a login is needed and, to a logged-in page, its CSRF
    /// secret; POST `{"token": …}` logs in (a session cookie); DELETE logs out.
    private func session(_ r: HTTPRequest, _ who: Caller) -> HTTPResponse {
        struct Login: Decodable { var token: String }
        struct State: Encodable {
            var login: String
            var authenticated: Bool
            var csrf: String?
        }
        switch Self.routed(r.method) {
        case "GET":
            switch who {
            case .open: return json(200, State(login: "none", authenticated: true))
            case .bearer: return json(200, State(login: "required", authenticated: true))
            case .session(let id, let csrf):
                // The cookie again, its 30 days counted from now: set once at login, a phone used
                // every day had to log in again 30 days after it did, not after 30 days unused.
                var response = json(200, State(login: "required", authenticated: true, csrf: csrf))
                response.headers.append(sessionCookie(id))
                return response
            case .anonymous: return json(200, State(login: "required", authenticated: false))
            }
        case "POST":
            guard let token else {
                return .error(409, "no token is configured (api.token-file): this API needs no login")
            }
            let login: Login
            do { login = try JSONBody.decode(Login.self, from: r.body, keys: ["token"]) } catch {
                return .error(400, error.message)
            }
            let client = r.remoteAddress ?? ""
            if sessions.guessesFull(from: client) { return Self.tooManyGuesses }
            guard Self.constantTimeEqual(login.token, token) else {
                // A guesser gets four tries a second in all, however many connections it uses.
                guard sessions.delayWrongToken(from: client) else { return Self.tooManyGuesses }
                return .error(401, "wrong token (it is the first line of the file api.token-file names)")
            }
            sessions.authenticated(from: client)
            // A login from a browser logged in already (another tab, a script's cookie jar) ends
            // the session its cookie named, which the new cookie replaces there: it stayed open
            // 30 days, its event streams went on past the logout, and it took one of the 64 places.
            if case .session(let old, _) = who { sessions.close(old) }
            let s = sessions.open()
            var response = json(200, State(login: "required", authenticated: true, csrf: s.csrf))
            response.headers.append(sessionCookie(s.id))
            return response
        case "DELETE":
            guard case .session(let id, let csrf) = who else {
                return .error(409, "not logged in with a session (nothing to log out of)")
            }
            guard let given = r.headers["x-baton-csrf"], Self.constantTimeEqual(given, csrf) else {
                return CrossSiteGuard.forbidden(
                    "csrf", "a DELETE with a session cookie must carry the page's X-Baton-CSRF header")
            }
            sessions.close(id)
            var response = json(200, ["loggedOut": true])
            response.headers.append(
                (name: "Set-Cookie", value: "\(Sessions.cookieName)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"))
            return response
        default:
            return .error(405, "method \(r.method) not allowed on /api/v1/session")
        }
    }

    /// 429 for a client whose wrong tokens wait: it should wait too.
    static var tooManyGuesses: HTTPResponse {
        var response = HTTPResponse.error(429, "too many wrong tokens just now; try again in a few seconds")
        response.headers.append((name: "Retry-After", value: "5"))
        return response
    }

    /// `GET /api/v1/sounds`: the sound names, and the files not offered because their names are not
    /// sound names (`ignored`, empty when none), each with why.
    struct SoundsAnswer: Encodable {
        struct Ignored: Encodable {
            var file: String
            var why: String
        }
        var sounds: [String]
        var ignored: [Ignored]
    }

    func json<T: Encodable>(_ status: Int, _ value: T) -> HTTPResponse {
        guard let data = try? JSONEncoder.baton.encode(value) else { return .error(500, "cannot encode the response") }
        return HTTPResponse(
            status: status, headers: [(name: "Content-Type", value: "application/json")], body: .bytes(Array(data)))
    }
}
/// One Server-Sent Events stream of the event log: an `EventSubscriber` writing into the HTTP
/// server's chunk queue, unsubscribed when the client goes away.
final class EventStream: EventSubscriber {
    private let queue: HTTPChunkQueue

    private init(queue: HTTPChunkQueue) { self.queue = queue }

    /// `closed` runs with the queue when the stream closes (the client went, or it overflowed).
    static func open(
        _ log: EventLog, after lastEventID: Int?, closed: @escaping @Sendable (HTTPChunkQueue) -> Void = { _ in }
    ) -> HTTPChunkQueue {
        let id = Mutex<Int?>(nil)
        let made = Mutex<HTTPChunkQueue?>(nil)
        let queue = HTTPChunkQueue(
            capacity: Self.capacity,
            onClose: { [weak log] in
                if let subscriber = id.withLock({ $0 }) { log?.unsubscribe(subscriber) }
                if let queue = made.withLock({ $0 }) { closed(queue) }
            })
        made.withLock { $0 = queue }
        queue.send(": baton events\n\n")
        // Subscribed outside `id`'s lock: a replay that overflowed the queue closes it from within,
        // and the close reads `id` (a recursive lock, the process stopped). A subscriber whose
        // queue closed before its id was set is dropped at the next event it cannot take.
        let subscriber = log.subscribe(EventStream(queue: queue), after: lastEventID)
        id.withLock { $0 = subscriber }
        return queue
    }

    /// How many events a stream holds for a client that reads slowly before it is let go: more
    /// than the log keeps (2 000), so a whole replay fits. One that falls behind further and
    /// reconnects is told what it missed (`missed`).
    static let capacity = 4_096

    func deliver(_ event: Event) -> Bool {
        guard let data = try? JSONEncoder.baton.encode(event), let text = String(data: data, encoding: .utf8) else {
            return true
        }
        return queue.send(ServerSentEvent.encode(event: event.type, id: String(event.seq), data: text))
    }

    /// An `events-missed` event without an id (the client's last id stays its own): the events
    /// between are gone, and a client that rebuilds state from them reads the status again.
    func missed(after: Int, next: Int) {
        _ = queue.send(
            ServerSentEvent.encode(
                event: "events-missed", id: nil,
                data: #"{"after":\#(after),"next":\#(next),"count":\#(next - after - 1)}"#))
    }
}
