import Glibc
import HTTPServer
import OSThread
import Synchronization

/// The web app's logins beyond loopback: `POST /api/v1/session` exchanges the API token for a
/// session, kept here in memory (a restart logs everyone out) and named by an HttpOnly,
/// SameSite=Strict cookie; each session has its own CSRF secret, which the page holds in memory
/// and sends as `X-Baton-CSRF` with every state-changing request. At most `capacity` sessions (the
/// oldest go first), each forgotten after `idle` without use. Any thread.
final class Sessions: Sendable {
    struct Session: Sendable {
        let csrf: String
        var lastUsed: Int
    }

    static let cookieName = "baton-session"
    let capacity: Int
    let idleSeconds: Int
    private let table = Mutex<[String: Session]>([:])
    /// The event streams each session opened: ended when the session ends (logout, eviction,
    /// expiry), so a page logged out stops receiving events. Its own lock, taken after `table`'s
    /// is released; streams are finished outside both.
    private let streams = Mutex<[String: [HTTPChunkQueue]]>([:])
    /// When the next wrong token may be answered, per client address (monotonic ns): one a
    /// quarter of a second over all its connections, so that parallel guesses are no faster than
    /// one after the other; and over all clients, one a sixteenth (a guesser with many addresses).
    private let nextWrongAnswer = Mutex<(perClient: [String: Int], all: Int)>(([:], 0))
    /// Readable once batond stops (`endDelays`; never drained): every wrong-token wait ends then.
    private let stopping = WakeFD()
    /// The addresses that showed the right token or a session lately (monotonic ns of the last
    /// time), exempt from the budget shared by all clients (`trustedFor`); at most
    /// `trustedCapacity`, the longest unseen dropped first.
    private let trusted = Mutex<[String: Int]>([:])
    static let trustedFor = 24 * 3600 * 1_000_000_000
    static let trustedCapacity = 256
    /// The monotonic clock in ns, and the wait before a wrong token's answer (ns; nil: really wait,
    /// until then or batond's stop): injected by tests.
    private let now: @Sendable () -> Int
    private let pause: (@Sendable (Int) -> Void)?

    init(
        capacity: Int = 64, idleSeconds: Int = 30 * 24 * 3600,
        now: @escaping @Sendable () -> Int = monotonicNanoseconds, pause: (@Sendable (Int) -> Void)? = nil
    ) {
        self.capacity = capacity
        self.idleSeconds = idleSeconds
        self.now = now
        self.pause = pause
    }

    /// `client` (an address) showed the right token, or a session: for `trustedFor` its requests
    /// are not held off by the budget all clients share, which a guesser with a few addresses
    /// keeps full (the owner's batonctl, Home Assistant and web logins were answered 429 for as
    /// long as it went on).
    func authenticated(from client: String) {
        let now = self.now()
        trusted.withLock { t in
            t[client] = now
            if t.count > Self.trustedCapacity, let oldest = t.min(by: { $0.value < $1.value }) {
                t.removeValue(forKey: oldest.key)
            }
        }
    }

    /// Whether `client`'s wrong tokens count against, and wait for, the budget shared by all
    /// clients: not on loopback (the speaker itself, or a proxy on it, which its own budget
    /// slows), nor from an address that showed the right token or a session in the last day.
    private func sharesBudget(_ client: String, now: Int) -> Bool {
        if CrossSiteGuard.isLoopback(client) { return false }
        return trusted.withLock { t in t[client].map { now - $0 >= Self.trustedFor } ?? true }
    }

    /// Waits before a wrong token from `client` (its address) is answered: a quarter of a second
    /// after the one answered to it last, whatever its connection, so a guesser gets four tries a
    /// second (another client, the owner's phone, is barely slowed), and sixteen a second over all
    /// clients (but loopback and addresses lately authenticated, `sharesBudget`). False, at once,
    /// when that would be more than 5 s away (answered 429: threads cannot pile up).
    func delayWrongToken(from client: String) -> Bool {
        let quarter = 250_000_000
        let now = self.now()
        let shares = sharesBudget(client, now: now)
        let at = nextWrongAnswer.withLock { next -> Int? in
            next.perClient = next.perClient.filter { $0.value > now }  // forgotten once past
            let mine = max(now, next.perClient[client] ?? now) + quarter
            let everyone = max(now, next.all) + quarter / 4
            let at = shares ? max(mine, everyone) : mine
            guard at - now <= 5_000_000_000 else { return nil }
            next.perClient[client] = at
            if shares { next.all = everyone }
            return at
        }
        guard let at else { return false }
        let wait = at - self.now()
        if let pause {
            pause(wait)
            return true
        }
        // Until then, or batond's stop: the API's stop waits for its handlers, and a guesser's
        // waits (up to 5 s each) held it past systemd's 5 s for the whole stop, which then killed
        // batond before its fade-out and last save.
        if wait > 0 {
            var one = pollfd(fd: stopping.fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&one, 1, Int32(clamping: (wait + 999_999) / 1_000_000))
        }
        return true
    }

    /// batond stops: wrong-token waits end now (answered as they would be), and those after at once.
    func endDelays() { stopping.post() }

    /// `client` has so many wrong tokens waiting that the next would be answered 429: asked before
    /// a token is compared, so that a 429 says nothing of whether the token was right. The budget
    /// all clients share counts only for a client that `sharesBudget`.
    func guessesFull(from client: String) -> Bool {
        let now = self.now()
        let shares = sharesBudget(client, now: now)
        return nextWrongAnswer.withLock {
            let mine = max(now, $0.perClient[client] ?? now) + 250_000_000
            let everyone = shares ? max(now, $0.all) + 62_500_000 : now
            return max(mine, everyone) - now > 5_000_000_000
        }
    }

    /// 32 random bytes as hex, from the system's generator.
    static func secret() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in
            let b = UInt8.random(in: 0...255, using: &generator)
            return String(b >> 4, radix: 16) + String(b & 15, radix: 16)
        }.joined()
    }

    private static func now() -> Int {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return t.tv_sec
    }

    /// A new session: its id (the cookie's value) and its CSRF secret.
    func open() -> (id: String, csrf: String) {
        let id = Self.secret()
        let csrf = Self.secret()
        let now = Self.now()
        let gone = table.withLock { t -> [String] in
            let expired = t.filter { now - $0.value.lastUsed >= idleSeconds }.map(\.key)
            for key in expired { t.removeValue(forKey: key) }
            var evicted: [String] = []
            while t.count >= capacity, let oldest = t.min(by: { $0.value.lastUsed < $1.value.lastUsed }) {
                t.removeValue(forKey: oldest.key)
                evicted.append(oldest.key)
            }
            t[id] = Session(csrf: csrf, lastUsed: now)
            return expired + evicted
        }
        endStreams(of: gone)
        return (id, csrf)
    }

    /// The session a `Cookie` header names, if it is open (and marks it used).
    func session(cookieHeader: String?) -> (id: String, csrf: String)? {
        guard let id = Self.cookie(in: cookieHeader) else { return nil }
        let now = Self.now()
        let found: (id: String, csrf: String)? = table.withLock { t in
            guard var s = t[id] else { return nil }
            guard now - s.lastUsed < idleSeconds else {
                t.removeValue(forKey: id)
                return nil
            }
            s.lastUsed = now
            t[id] = s
            return (id, s.csrf)
        }
        if found == nil { endStreams(of: [id]) }  // expired just now: its streams end too
        return found
    }

    /// Ends a session (logout) and the event streams it opened.
    func close(_ id: String) {
        _ = table.withLock { $0.removeValue(forKey: id) }
        endStreams(of: [id])
    }

    /// Notes an event stream opened under session `id`; it is forgotten when it closes.
    func attach(_ stream: HTTPChunkQueue, to id: String) {
        streams.withLock { $0[id, default: []].append(stream) }
        // A session ended between the request's check and now: its stream ends at once.
        if table.withLock({ $0[id] == nil }) { endStreams(of: [id]) }
    }

    /// Forgets a closed stream.
    func detach(_ stream: HTTPChunkQueue) {
        streams.withLock { all in
            for (id, list) in all {
                let kept = list.filter { $0 !== stream }
                all[id] = kept.isEmpty ? nil : kept
            }
        }
    }

    private func endStreams(of ids: [String]) {
        guard !ids.isEmpty else { return }
        let ending = streams.withLock { all in ids.flatMap { all.removeValue(forKey: $0) ?? [] } }
        for stream in ending { stream.finish() }
    }

    /// The value of `baton-session` in a `Cookie` header.
    static func cookie(in header: String?) -> String? {
        guard let header else { return nil }
        for part in header.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].trimmedBlanks == cookieName {
                return pair[1].trimmedBlanks
            }
        }
        return nil
    }
}
