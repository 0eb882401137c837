import Curl

/// Why a Subsonic call failed.
///
/// No case ever holds the password, its hex form, a token or an API key: URLs are redacted and server
/// texts are scrubbed of them before they get here.
///
/// A plain value: safe to use from any thread.
public enum SubsonicError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered `status: "failed"` (with HTTP 200, as the API does): its error code and
    /// message. Codes: 0 generic, 10 missing parameter, 20/30 incompatible versions, 40 wrong user or
    /// password, 41 token auth not supported, 42/43/44 (OpenSubsonic) auth mechanism refused, 50 not
    /// authorized, 70 not found.
    case api(code: Int, message: String)
    /// The server answered an HTTP error status; `body` is its message or the start of the body.
    /// 404 means the server does not know the endpoint.
    case http(status: Int, body: String)
    /// The request did not complete: connect failure, timeout, stall, connection closed early.
    case transport(CurlError)
    /// The answer could not be understood as the endpoint's JSON.
    case decoding(endpoint: String, detail: String)
    /// `stream` answered something that is not audio: a Subsonic error document (JSON or XML), text,
    /// or an empty body (a failed transcode). `code` and `message` are the server's when it said.
    case notAudio(contentType: String?, code: Int?, message: String)
    /// The client has no credentials the server takes (an API key only, to a server without
    /// `apiKeyAuthentication`): no request with credentials was sent. The message says what to set.
    case authentication(String)

    /// Error code 40: wrong user name or password.
    public static let wrongCredentialsCode = 40
    /// Error code 70: the requested item does not exist.
    public static let notFoundCode = 70

    /// Whether retrying later (or resuming with a `Range`) may succeed: transport trouble or a 5xx.
    public var isTransient: Bool {
        switch self {
        case .transport(let error): return error.isTransient
        case .http(let status, _): return status >= 500
        default: return false
        }
    }

    /// An HTTP 404 answer: the server's "not found" — or a reverse proxy's whose server behind it
    /// is down (`SubsonicClient.answersAPI` tells the two apart).
    public var isNotFound: Bool {
        if case .http(404, _) = self { return true }
        return false
    }

    /// An HTTP 5xx answer: the server (or a proxy in front of it) answered, with an error of its own.
    public var isServerError: Bool {
        if case .http(let status, _) = self { return status >= 500 }
        return false
    }

    /// An HTTP 500 or 501: the server's own failure on this request (a file it cannot read, a
    /// transcode that failed), which asking again rarely mends — unlike 502, 503 and 504, a proxy's
    /// server behind it away or a server restarting, which pass.
    public var isRequestFailure: Bool {
        if case .http(let status, _) = self { return status == 500 || status == 501 }
        return false
    }

    /// Whether the server does not implement the endpoint (HTTP 404, as Supysonic answers unknown
    /// methods such as `getPlayQueue`).
    public var isUnsupportedEndpoint: Bool {
        if case .http(404, _) = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .api(let code, let message): return "Subsonic error \(code): \(message)"
        case .http(let status, let body): return "HTTP \(status)" + (body.isEmpty ? "" : ": \(body)")
        case .transport(let error): return "transport: \(error)"
        case .decoding(let endpoint, let detail): return "cannot decode the \(endpoint) response: \(detail)"
        case .notAudio(let contentType, let code, let message):
            let what = contentType.map { "a \($0) answer" } ?? "an answer without Content-Type"
            let said = code.map { "error \($0): \(message)" } ?? message
            return "stream returned \(what), not audio: \(said)"
        case .authentication(let message): return "cannot authenticate: \(message)"
        }
    }
}
