import OSThread

/// The header fields of an HTTP response, in arrival order, looked up without regard to case.
///
/// A plain value: safe to use from any thread.
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    /// The fields as received, names as the server spelled them.
    public private(set) var fields: [(name: String, value: String)]

    /// Creates headers from name/value pairs.
    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    /// Appends a field.
    public mutating func append(name: String, value: String) {
        fields.append((name, value))
    }

    /// The value of the first field called `name` (any case), or nil.
    public subscript(name: String) -> String? {
        let lower = name.lowercased()
        return fields.first { $0.name.lowercased() == lower }?.value
    }

    /// `Content-Type` without parameters, lower-cased: `audio/ogg` for `audio/ogg; codecs=opus`.
    public var mediaType: String? {
        guard let value = self["Content-Type"] else { return nil }
        let type = value.split(separator: ";", maxSplits: 1).first ?? ""
        return type.trimmingWhitespace().lowercased()
    }

    /// `Content-Length` as a number, or nil when absent (chunked transfer) or malformed.
    public var contentLength: Int64? {
        self["Content-Length"].flatMap { Int64($0.trimmingWhitespace()) }
    }

    /// Whether the server said `Accept-Ranges: bytes`.
    public var acceptsByteRanges: Bool {
        self["Accept-Ranges"]?.lowercased().contains("bytes") ?? false
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }
}

/// The status line and headers of a response: what ``HTTPClient`` hands to `onResponse`.
///
/// A plain value: safe to use from any thread.
public struct HTTPResponseHead: Sendable, Equatable {
    /// The HTTP status code (200, 206, 404, ...) of the final response, after redirects.
    public var status: Int
    /// The final response's header fields.
    public var headers: HTTPHeaders

    /// Creates a response head.
    public init(status: Int, headers: HTTPHeaders) {
        self.status = status
        self.headers = headers
    }
}

/// A whole response read into memory by ``HTTPClient/fetch(url:headers:maxBodyBytes:timeout:)``.
///
/// A plain value: safe to use from any thread.
public struct HTTPClientResponse: Sendable, Equatable {
    /// The HTTP status code of the final response.
    public var status: Int
    /// The final response's header fields.
    public var headers: HTTPHeaders
    /// The body bytes.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// A byte range to request: `Range: bytes=start-` or `bytes=start-end` (end inclusive, as in HTTP).
///
/// A plain value: safe to use from any thread.
public struct ByteRange: Sendable, Equatable, CustomStringConvertible {
    /// The first byte wanted, from 0.
    public var start: Int64
    /// The last byte wanted (inclusive), or nil for "to the end".
    public var end: Int64?

    /// Creates a range.
    public init(start: Int64, end: Int64? = nil) {
        precondition(start >= 0 && (end ?? start) >= start, "invalid byte range \(start)-\(end.map(String.init) ?? "")")
        self.start = start
        self.end = end
    }

    /// From `offset` to the end: how a stream is resumed.
    public static func from(_ offset: Int64) -> ByteRange { ByteRange(start: offset) }

    /// `N-` or `N-M`, the form libcurl's `CURLOPT_RANGE` and the HTTP `Range` header use.
    public var description: String { "\(start)-\(end.map(String.init) ?? "")" }
}
