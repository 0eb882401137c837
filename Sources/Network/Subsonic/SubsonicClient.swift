import Curl
import FoundationEssentials
import OSThread
import Synchronization

/// A Subsonic / OpenSubsonic API client: browsing, search, playlists, play queue, scrobbling, and
/// the URL and headers to stream a song.
///
/// Every call is blocking: it runs on the calling thread until the server answers (bounded by
/// ``requestTimeout``) and throws ``SubsonicError``. Any thread may call, several at once: the only
/// shared state is the authentication mode, behind a mutex. Never call from an output thread.
///
/// Authentication: token auth (`t = md5(password + salt)`, a fresh salt per request) first. When the
/// server refuses tokens (error 10 "missing parameter", 41 or 42 to a plain `ping` with a token, as
/// Supysonic does), the client switches to the hex-encoded password (`p=enc:…`) and keeps it. With an
/// API key configured and a server that lists the `apiKeyAuthentication` extension, the key is used.
public final class SubsonicClient: Sendable {
    /// The API version sent as `v=`; servers of older versions (Supysonic: 1.12.0) accept it.
    public static let apiVersion = "1.16.1"
    /// The bit rate (kbit/s) sent with a `format` when neither the call nor the configuration gives
    /// one: without `maxBitRate` some servers transcode at the source's bit rate.
    public static let defaultMaxBitRate = 192

    /// How the client proves who it is.
    public enum Authentication: Sendable, Equatable, CustomStringConvertible {
        /// `u`, `t = md5(password + salt)`, `s = salt`.
        case token
        /// `u`, `p=enc:<hex of the password>`: for servers without token support.
        case password
        /// OpenSubsonic `apiKey=`.
        case apiKey

        public var description: String {
            switch self {
            case .token: return "token"
            case .password: return "password (enc:)"
            case .apiKey: return "API key"
            }
        }
    }

    /// What the client has learnt about the server's authentication.
    struct AuthState {
        var mode: Authentication = .token
        /// A request succeeded in `mode`, or the mode was chosen by a probe: no more probing.
        var settled = false
        /// The OpenSubsonic extensions were asked for (only with an API key configured).
        var apiKeyProbed = false
    }

    /// The server and credentials.
    public let config: SubsonicSettings
    /// The HTTP client used for streams.
    public let http: HTTPClient
    /// The same with the `stop` flag, for API calls.
    let api: HTTPClient
    /// The bound on each API call (streams have none: see ``stream(_:onResponse:onData:)``).
    public let requestTimeout: Duration
    let auth = Mutex(AuthState())
    /// The OpenSubsonic extension names, once asked (`[]` for a plain Subsonic server).
    let knownExtensions = Mutex<[String]?>(nil)

    /// Creates a client. Does no I/O. `stop`, once set, ends every API request of this client at
    /// once (the program is stopping), instead of after its timeout; a stream goes on (its reader
    /// ends it: the music plays until the daemon stops, and its place in the queue is kept).
    public init(
        config: SubsonicSettings, http: HTTPClient = HTTPClient(), requestTimeout: Duration = .seconds(30),
        stop: StopFlag? = nil
    ) {
        var api = http
        if let stop { api.options.stop = stop }
        self.config = config
        self.http = http
        self.api = api
        self.requestTimeout = requestTimeout
    }

    /// The program is stopping (`stop` was set): API calls end at once, and their failures are
    /// not worth a warning.
    public var isStopping: Bool { api.options.stop?.isSet ?? false }

    /// The authentication used now (``Authentication/token`` until the server has said otherwise).
    public var authentication: Authentication { auth.withLock { $0.mode } }

    // MARK: - Requests

    /// Calls `endpoint` and returns the body of a successful (`status: ok`) answer, settling the
    /// authentication mode on the way.
    /// `stoppable: false` for a write that must reach the server even while the program stops (the
    /// last queue mirror, a scrobble, the playback report "stopped"): it runs on a thread of its
    /// own, never in the way of the stop.
    func call(
        _ endpoint: String, _ parameters: [(String, String)] = [], stoppable: Bool = true
    ) throws(SubsonicError) -> [UInt8] {
        let mode = try authenticationMode()
        do {
            let body = try callOnce(endpoint, parameters, mode: mode, stoppable: stoppable)
            auth.withLock { if $0.mode == mode { $0.settled = true } }
            return body
        } catch {
            guard mode == .token, case .api(let code, _) = error, Self.tokenRefusalCodes.contains(code) else {
                throw error
            }
            // Another call, sent at the same time, found meanwhile that tokens are refused: this one
            // again as that one chose (several first calls at once each got the refusal).
            // Mode and settled read together: read apart, another call could switch to the password
            // (and settle) between them, and this one took the refusal for a real error 10.
            let (now, settled) = auth.withLock { ($0.mode, $0.settled) }
            if now != .token { return try callOnce(endpoint, parameters, mode: now, stoppable: stoppable) }
            guard !settled, tokenIsRefused(endpoint: endpoint, code: code) else {
                throw error
            }
            auth.withLock {
                $0.mode = .password
                $0.settled = true
            }
            return try callOnce(endpoint, parameters, mode: .password, stoppable: stoppable)
        }
    }

    /// The error codes a server may give a token it does not support: 10 (Supysonic: "a required
    /// parameter is missing", it wants `p`), 41 (Subsonic: "token authentication not supported"), 42
    /// (OpenSubsonic: "provided authentication mechanism not supported").
    static let tokenRefusalCodes: Set<Int> = [10, 41, 42]

    /// Whether the refusal `code` to `endpoint` is about the token and not about the request: `ping`
    /// needs no parameter, so a refusal of `ping` with a token is one.
    private func tokenIsRefused(endpoint: String, code: Int) -> Bool {
        if endpoint == "ping" { return true }
        do {
            _ = try callOnce("ping", [], mode: .token)
            auth.withLock { $0.settled = true }
            return false
        } catch {
            if case .api(let pingCode, _) = error { return Self.tokenRefusalCodes.contains(pingCode) }
            return false
        }
    }

    /// The mode to use now; with an API key configured, asks once whether the server takes it.
    /// Throws ``SubsonicError/authentication(_:)`` when the key is the only credential (the password
    /// is empty) and the server does not take keys: token or `p=enc:` with an empty password only
    /// got "error 40: Wrong username or password" on every call, nothing saying the key was never used.
    func authenticationMode() throws(SubsonicError) -> Authentication {
        if config.apiKey != nil, !auth.withLock({ $0.apiKeyProbed }) {
            let extensions = try openSubsonicExtensions()
            let supported = extensions?.contains { $0.name == "apiKeyAuthentication" } ?? false
            auth.withLock {
                $0.apiKeyProbed = true
                if supported {
                    $0.mode = .apiKey
                    $0.settled = true
                }
            }
        }
        let mode = auth.withLock { $0.mode }
        if mode != .apiKey, config.apiKey != nil, config.password.isEmpty {
            throw .authentication(
                "an API key is set (api-key-file) but the server at \(URLRedaction.redact(config.url)) does not "
                    + "offer apiKeyAuthentication, and the password is empty: set a password")
        }
        return mode
    }

    /// The largest API answer taken (a playlist of 10 000 songs is about 5 MB). It was 64 MiB: an
    /// answer that size — a server's bug, a proxy's error page gone wrong — was copied and
    /// parsed twice (the envelope, then the payload), hundreds of MB at the peak on a Pi with 512.
    static let maximumAnswerBytes = 16 << 20

    /// The longest URL sent as a GET; a longer request is a POST of the same parameters to a server
    /// with `formPost`.
    static let longestURL = 4000

    /// One request in one mode; `nil` sends no credentials.
    func callOnce(
        _ endpoint: String, _ parameters: [(String, String)],
        mode: Authentication?, stoppable: Bool = true, timeout: Duration? = nil
    ) throws(SubsonicError) -> [UInt8] {
        let requestTimeout = timeout ?? self.requestTimeout
        let url = self.url(endpoint, parameters, mode: mode)
        let response: HTTPClientResponse
        do {
            let client = stoppable ? api : http
            if url.utf8.count > Self.longestURL, endpoint != "getOpenSubsonicExtensions",
                let query = url.firstIndex(of: "?"), (try? extensionNames().contains("formPost")) == true
            {
                // The same parameters as a form, to a server that says it reads them (OpenSubsonic's
                // `formPost`): a queue of a few hundred songs mirrored with `savePlayQueue` put
                // every ID in the URL, past the 8 KB request line of nginx's and Tomcat's defaults
                // (414, every 30 s while it played). A server that does not say so gets the GET.
                // Not followed: libcurl keeps a POST and its form — the credentials — through a 307
                // or 308 (only 301, 302 and 303 become a GET without it), to whatever host the
                // redirect names. The redirect is the server's answer: an error.
                var poster = client
                poster.options.maxRedirects = 0
                response = try poster.post(
                    url: String(url[..<query]), body: Array(url[url.index(after: query)...].utf8),
                    contentType: "application/x-www-form-urlencoded", maxBodyBytes: Self.maximumAnswerBytes,
                    timeout: requestTimeout)
            } else {
                response = try client.fetch(url: url, maxBodyBytes: Self.maximumAnswerBytes, timeout: requestTimeout)
            }
        } catch {
            throw .transport(error)
        }
        let decoder = ResponseDecoder(bytes: response.body)
        guard (200..<300).contains(response.status) else {
            throw .http(status: response.status, body: serverText(response.body))
        }
        if response.body.allSatisfy({ $0 == 0x20 || $0 == 0x0a || $0 == 0x0d }) {
            return []  // Some servers answer a successful write with no body at all.
        }
        let envelope: Envelope
        do {
            envelope = try decoder.envelope()
        } catch {
            throw .decoding(endpoint: endpoint, detail: "\(error) in \(excerpt(response.body))")
        }
        if envelope.status == "failed" {
            throw .api(code: envelope.errorCode ?? 0, message: scrub(envelope.errorMessage ?? ""))
        }
        guard envelope.status == "ok" else {
            throw .decoding(endpoint: endpoint, detail: "status \"\(envelope.status)\"")
        }
        return response.body
    }

    /// Calls `endpoint` and decodes the payload under `key`; a missing payload is nil.
    func call<T: Decodable>(
        _ endpoint: String, _ parameters: [(String, String)] = [], key: String,
        as type: T.Type
    ) throws(SubsonicError) -> T? {
        let body = try call(endpoint, parameters)
        guard !body.isEmpty else { return nil }
        do {
            return try ResponseDecoder(bytes: body).payload(key, as: T.self).1
        } catch {
            throw .decoding(endpoint: endpoint, detail: "\(error)")
        }
    }

    /// Like ``call(_:_:key:as:)`` for payloads that must be there.
    func require<T: Decodable>(
        _ endpoint: String, _ parameters: [(String, String)] = [], key: String,
        as type: T.Type
    ) throws(SubsonicError) -> T {
        guard let value = try call(endpoint, parameters, key: key, as: type) else {
            throw .decoding(endpoint: endpoint, detail: "the answer has no \"\(key)\"")
        }
        return value
    }

    /// `<base>/rest/<endpoint>?v=…&c=…&f=json&<credentials>&<parameters>`. Holds secrets: never log it.
    func url(
        _ endpoint: String, _ parameters: [(String, String)], mode: Authentication?,
        format: String = "json"
    ) -> String {
        var base = config.url
        while base.hasSuffix("/") { base.removeLast() }
        var items: [(String, String)] = [("v", Self.apiVersion), ("c", config.clientName), ("f", format)]
        switch mode {
        case .token:
            let salt = Self.salt()
            items += [("u", config.user), ("t", MD5.hex(config.password + salt)), ("s", salt)]
        case .password:
            items += [("u", config.user), ("p", "enc:" + Array(config.password.utf8).hexString)]
        case .apiKey:
            items += [("apiKey", config.apiKey ?? "")]
        case nil:
            break
        }
        items += parameters
        let query = items.map { "\(Self.percentEncode($0.0))=\(Self.percentEncode($0.1))" }.joined(separator: "&")
        return "\(base)/rest/\(endpoint)?\(query)"
    }

    /// 12 random hex digits, from the system's generator.
    static func salt() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<6).map { _ in UInt8.random(in: 0...255, using: &generator) }.hexString
    }

    /// RFC 3986 percent-encoding of everything but the unreserved characters.
    static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Array("0123456789ABCDEF".unicodeScalars)
                out += "%"
                out.unicodeScalars.append(digits[Int(byte >> 4)])
                out.unicodeScalars.append(digits[Int(byte & 0xf)])
            }
        }
        return out
    }

    // MARK: - Texts that may reach the caller

    /// The server's error message in `body` (JSON or XML), or the start of the body; scrubbed.
    func serverText(_ body: [UInt8]) -> String {
        if let envelope = try? ResponseDecoder(bytes: body).envelope(), let message = envelope.errorMessage {
            return scrub(message)
        }
        let text = String(decoding: body, as: UTF8.self)
        if let range = text.firstRange(of: "message=\"") {
            let rest = text[range.upperBound...]
            if let end = rest.firstIndex(of: "\"") { return scrub(String(rest[..<end])) }
        }
        return excerpt(body)
    }

    /// The first 200 characters of `body`, one line, scrubbed.
    func excerpt(_ body: [UInt8]) -> String {
        var text = String(decoding: body.prefix(200), as: UTF8.self)
        text = String(text.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
        while text.hasPrefix(" ") { text.removeFirst() }
        while text.hasSuffix(" ") { text.removeLast() }
        return scrub(text) + (body.count > 200 ? "…" : "")
    }

    /// `text` with the password, its hex form and the API key replaced by `***`, and the values of
    /// the credential parameters (`t`, `s`, `p`, `apiKey`…: ``URLRedaction/redactParameters(in:)``):
    /// a server may echo what it was sent — an error page quoting the query string put a token and
    /// its salt, which can be sent again, into API errors and the event log.
    func scrub(_ text: String) -> String {
        var secrets = [config.password, Array(config.password.utf8).hexString]
        if let apiKey = config.apiKey { secrets.append(apiKey) }
        var result = text
        for secret in secrets where secret.count >= 3 {
            result = result.replacing(secret, with: "***")
        }
        return URLRedaction.redactParameters(in: result)
    }
}
