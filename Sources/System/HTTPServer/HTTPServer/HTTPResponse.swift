/// What a handler answers: a status, headers and a body that is either bytes or a stream.
///
/// Built by the handler on the connection's thread; a plain value.
public struct HTTPResponse: Sendable {
    /// The status code, 100...599. Any other value makes the server answer 500 instead.
    public var status: Int
    /// Headers in the order they are sent; repeats allowed. `Content-Length` and `Transfer-Encoding` are
    /// set by the server. A name or value containing CR, LF or NUL makes the server answer 500 instead.
    public var headers: [(name: String, value: String)]
    /// The body.
    public var body: Body

    /// A response body.
    public enum Body: Sendable {
        /// A complete body, sent with a `Content-Length`.
        case bytes([UInt8])
        /// A body pulled from `stream` on the connection's own thread until it ends, the client goes away
        /// or the server stops (HTTP/1.1 chunked encoding). After `keepAlive.interval` without data the
        /// server sends `keepAlive.bytes`; nil sends nothing while the stream is idle.
        case stream(any HTTPStream, keepAlive: HTTPKeepAlive?)
    }

    /// Makes a response. Any thread.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with `Content-Type: application/json` and `text` (already JSON) as the body.
    public static func json(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: .bytes(Array(text.utf8)))
    }

    /// A response with `Content-Type: text/plain; charset=utf-8`.
    public static func text(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: [("Content-Type", "text/plain; charset=utf-8")],
            body: .bytes(Array(text.utf8)))
    }

    /// A response with `Content-Type: text/html; charset=utf-8`.
    public static func html(_ status: Int, _ html: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: [("Content-Type", "text/html; charset=utf-8")],
            body: .bytes(Array(html.utf8)))
    }

    /// The wrapper's own error shape: `{"error": message}` as JSON, `message` escaped.
    public static func error(_ status: Int, _ message: String) -> HTTPResponse {
        json(status, "{\"error\":\(jsonString(message))}")
    }

    /// A Server-Sent Events response (`text/event-stream`, no caching, no proxy buffering) streaming
    /// `stream`, with an SSE comment `": keep-alive\n\n"` after `keepAlive` of silence so that proxies and
    /// the server's idle timeout leave the connection open and a vanished client is noticed.
    public static func eventStream(_ stream: any HTTPStream, keepAlive: Duration = .seconds(15)) -> HTTPResponse {
        HTTPResponse(
            status: 200,
            headers: [
                ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
                ("X-Accel-Buffering", "no"),
            ],
            body: .stream(stream, keepAlive: .sseComment(every: keepAlive)))
    }
}

/// What a streaming response sends while its stream has nothing to say.
public struct HTTPKeepAlive: Sendable {
    /// Silence after which `bytes` are sent.
    public var interval: Duration
    /// Bytes sent after `interval` of silence; they must be harmless to the client (an SSE comment).
    public var bytes: [UInt8]

    /// Makes a keep-alive policy. `bytes` must not be empty.
    public init(interval: Duration, bytes: [UInt8]) {
        precondition(!bytes.isEmpty, "a keep-alive must send at least one byte")
        self.interval = interval
        self.bytes = bytes
    }

    /// The SSE comment `": keep-alive\n\n"` every `interval`.
    public static func sseComment(every interval: Duration) -> HTTPKeepAlive {
        HTTPKeepAlive(interval: interval, bytes: Array(": keep-alive\n\n".utf8))
    }
}

/// `text` as a JSON string literal with quotes, escaping `"`, `\` and control characters.
func jsonString(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20:
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
