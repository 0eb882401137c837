import Glibc
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

    init(capacity: Int = 64, idleSeconds: Int = 30 * 24 * 3600) {
        self.capacity = capacity
        self.idleSeconds = idleSeconds
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
        table.withLock { t in
            t = t.filter { now - $0.value.lastUsed < idleSeconds }
            while t.count >= capacity, let oldest = t.min(by: { $0.value.lastUsed < $1.value.lastUsed }) {
                t.removeValue(forKey: oldest.key)
            }
            t[id] = Session(csrf: csrf, lastUsed: now)
        }
        return (id, csrf)
    }

    /// The session a `Cookie` header names, if it is open (and marks it used).
    func session(cookieHeader: String?) -> (id: String, csrf: String)? {
        guard let id = Self.cookie(in: cookieHeader) else { return nil }
        let now = Self.now()
        return table.withLock { t in
            guard var s = t[id] else { return nil }
            guard now - s.lastUsed < idleSeconds else {
                t.removeValue(forKey: id)
                return nil
            }
            s.lastUsed = now
            t[id] = s
            return (id, s.csrf)
        }
    }

    func close(_ id: String) { _ = table.withLock { $0.removeValue(forKey: id) } }

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
