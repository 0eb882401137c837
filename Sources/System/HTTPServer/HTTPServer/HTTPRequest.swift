/// One HTTP request, fully received, as the server hands it to its handler.
///
/// The server builds it on the connection's own thread (a libmicrohttpd thread) just before calling the
/// handler; it is a plain value and may be sent anywhere.
public struct HTTPRequest: Sendable {
    /// The method as sent, e.g. `"GET"`, `"POST"` (HTTP methods are case-sensitive; no case folding).
    public var method: String
    /// The percent-decoded path, without the query, e.g. `"/zones/kitchen speaker"`. Always valid UTF-8
    /// and never contains NUL: requests whose path does not decode to that are answered 400 before any
    /// handler runs. `%2F` decodes to `/` like any other escape.
    public var path: String
    /// The query parameters, percent-decoded, with `+` read as a space. A name given twice is a 400
    /// before any handler runs (`RequestTarget`); a name without `=` maps to `""`.
    public var query: [String: String]
    /// The request headers with lowercased names. Repeated headers are joined with `", "`.
    public var headers: [String: String]
    /// The body, at most the server's `maxBodyBytes` long (larger bodies are answered 413 instead).
    public var body: [UInt8]
    /// The client's numeric address, e.g. `"127.0.0.1"` or `"::1"`, or nil if libmicrohttpd gave none.
    public var remoteAddress: String?

    /// Makes a request; the server uses this, and tests may use it to call a handler directly.
    public init(
        method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
        body: [UInt8] = [], remoteAddress: String? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }
}
