import Curl
import OSThread

/// What to fetch to play a song: a `stream` URL with credentials, and the `Range` to resume from.
///
/// ``url`` holds credentials (a token, or the hex-encoded password): never log it; ``description``
/// is redacted. A token URL stays valid on the servers tested; build a fresh request per attempt anyway.
///
/// A plain value: safe to use from any thread.
public struct StreamRequest: Sendable, Equatable, CustomStringConvertible {
    /// The full `…/rest/stream?…` URL, credentials included.
    public var url: String
    /// Extra request headers (none today; kept for servers that want some).
    public var headers: HTTPHeaders
    /// `bytes=N-` when resuming at byte N, else nil.
    public var range: ByteRange?

    /// Creates a request.
    public init(url: String, headers: HTTPHeaders = HTTPHeaders(), range: ByteRange? = nil) {
        self.url = url
        self.headers = headers
        self.range = range
    }

    /// The redacted URL, and the range.
    public var description: String {
        URLRedaction.redact(url) + (range.map { " (Range: bytes=\($0))" } ?? "")
    }
}

/// The head of a `stream` answer that carries audio.
///
/// A plain value: safe to use from any thread.
public struct StreamResponse: Sendable, Equatable {
    /// 200 (whole body) or 206 (partial, from ``startOffset``).
    public var status: Int
    /// The media type without parameters (`audio/ogg`, `audio/x-wav`, `audio/flac`), when given.
    public var contentType: String?
    /// The length of this body (not of the file, for a 206), or nil when chunked (a live transcode).
    public var contentLength: Int64?
    /// The whole file's length, from `Content-Range` (206) or `Content-Length` (200), when known.
    public var totalLength: Int64?
    /// Whether the server takes `Range` requests for this resource (`Accept-Ranges: bytes`).
    public var acceptsRanges: Bool
    /// The offset in the file of the first body byte: the requested offset for a 206, 0 for a 200
    /// (a server that ignored the `Range`, as a transcoder does: skip bytes yourself or start over).
    public var startOffset: Int64
    /// The body bytes delivered to `onData`: 0 in `onResponse`, the total in the returned value.
    public var bytesReceived: Int64

    /// Creates a response description.
    public init(
        status: Int, contentType: String?, contentLength: Int64?, totalLength: Int64?, acceptsRanges: Bool,
        startOffset: Int64, bytesReceived: Int64 = 0
    ) {
        self.status = status
        self.contentType = contentType
        self.contentLength = contentLength
        self.totalLength = totalLength
        self.acceptsRanges = acceptsRanges
        self.startOffset = startOffset
        self.bytesReceived = bytesReceived
    }
}

/// Streaming.
extension SubsonicClient {
    /// The request that streams song `id`.
    ///
    /// - Parameters:
    ///   - format: `opus`, `mp3`, `raw` (the original file)…; nil uses ``SubsonicSettings/format``.
    ///   - maxBitRate: kbit/s; nil uses ``SubsonicSettings/maxBitRate``, else
    ///     ``SubsonicClient/defaultMaxBitRate`` whenever a format other than `raw` is asked for (some
    ///     servers otherwise transcode at the source's bit rate).
    ///   - offsetBytes: resume at this byte of the answer (`Range: bytes=N-`); 0 for the start.
    /// Blocking: the first call may `ping` the server to settle the authentication mode. Any thread but
    /// an output thread.
    public func streamRequest(
        id: String, format: String? = nil, maxBitRate: Int? = nil,
        offsetBytes: Int64 = 0
    ) throws(SubsonicError) -> StreamRequest {
        if !auth.withLock({ $0.settled }) { try ping() }
        var parameters = [("id", id)]
        let format = format ?? config.format
        if let format {
            parameters.append(("format", format))
            let rate = maxBitRate ?? config.maxBitRate ?? (format == "raw" ? nil : Self.defaultMaxBitRate)
            if let rate { parameters.append(("maxBitRate", "\(rate)")) }
        } else if let rate = maxBitRate ?? config.maxBitRate {
            parameters.append(("maxBitRate", "\(rate)"))
        }
        let url = self.url("stream", parameters, mode: try authenticationMode(), format: "json")
        return StreamRequest(url: url, range: offsetBytes > 0 ? .from(offsetBytes) : nil)
    }

    /// Streams `request`'s audio to `onData`, after checking that the answer is audio.
    ///
    /// `onResponse` is called once, when the answer's headers are in (before the first chunk), only
    /// for an audio answer. `onData` gets
    /// each chunk (valid only during the call); it may block to apply back-pressure (wait for room in
    /// a ring): the server waits meanwhile, and the client's stall timeout does not run. Return false
    /// to stop: the call then throws ``SubsonicError/transport(_:)`` with `cancelled` set.
    ///
    /// An answer that is not audio — a Subsonic error document (with HTTP 200, for a bad ID), text, or
    /// an empty body (a failed transcode) — throws ``SubsonicError/notAudio(contentType:code:message:)``
    /// with the server's message; an HTTP error (416 past the end) throws ``SubsonicError/http(status:body:)``.
    /// When the connection breaks mid-body (``SubsonicError/isTransient``), resume with
    /// `streamRequest(id:…, offsetBytes: startOffset + bytesReceived)` if ``StreamResponse/acceptsRanges``.
    ///
    /// Blocks the calling thread for the whole transfer: a player's network thread, never an output
    /// thread. `stop`, once set, ends it within about a second (libcurl's progress call) even while
    /// no byte comes (a server that hangs): the call throws with `cancelled` set.
    /// - Returns: the response with ``StreamResponse/bytesReceived`` filled in.
    @discardableResult
    public func stream(
        _ request: StreamRequest, stop: StopFlag? = nil, onResponse: (StreamResponse) -> Void = { _ in },
        onData: (UnsafeRawBufferPointer) -> Bool
    ) throws(SubsonicError) -> StreamResponse {
        var http = self.http
        if let stop { http.options.stop = stop }
        var response: StreamResponse? = nil
        var rejectedType: String?? = nil  // .some when the answer is not audio
        var rejectedStatus = 0
        var rejectedBody: [UInt8] = []
        var received: Int64 = 0
        do {
            try http.get(
                url: request.url, headers: request.headers, range: request.range,
                onResponse: { head in
                    let type = head.headers.mediaType
                    guard (200..<300).contains(head.status), Self.isAudio(type) else {
                        rejectedType = .some(type)
                        rejectedStatus = head.status
                        return true  // its body says why
                    }
                    let ranged = head.status == 206
                    let contentRange = head.headers["Content-Range"].flatMap(Self.parseContentRange)
                    let start = ranged ? (contentRange?.start ?? request.range?.start ?? 0) : 0
                    let total = ranged ? contentRange?.total : head.headers.contentLength
                    let value = StreamResponse(
                        status: head.status, contentType: type,
                        contentLength: head.headers.contentLength, totalLength: total,
                        acceptsRanges: head.headers.acceptsByteRanges || ranged,
                        startOffset: start)
                    response = value
                    onResponse(value)
                    return true
                },
                onData: { chunk in
                    if rejectedType != nil {
                        rejectedBody.append(contentsOf: chunk.prefix(64 << 10 - rejectedBody.count))
                        return rejectedBody.count < 64 << 10
                    }
                    received += Int64(chunk.count)
                    return onData(chunk)
                })
        } catch {
            if rejectedType == nil || !error.cancelled { throw .transport(error) }
        }
        if let rejectedType {
            if !(200..<300).contains(rejectedStatus) {
                throw .http(status: rejectedStatus, body: serverText(rejectedBody))
            }
            let envelope = try? ResponseDecoder(bytes: rejectedBody).envelope()
            let message = rejectedBody.isEmpty ? "empty body" : serverText(rejectedBody)
            throw .notAudio(contentType: rejectedType, code: envelope?.errorCode, message: message)
        }
        guard var response else {
            throw .notAudio(contentType: nil, code: nil, message: "no answer")
        }
        guard received > 0 else {
            throw .notAudio(
                contentType: response.contentType, code: nil,
                message: "empty body (a failed transcode?)")
        }
        response.bytesReceived = received
        return response
    }

    /// Whether a media type can be audio: anything but Subsonic's error documents and text. A missing
    /// type counts as audio (some servers omit it); `application/octet-stream` too.
    static func isAudio(_ mediaType: String?) -> Bool {
        guard let type = mediaType else { return true }
        if type.hasPrefix("text/") { return false }
        return !["application/json", "application/xml", "text/xml", "application/javascript"].contains(type)
    }

    /// `bytes 100-999/1000` → (100, 1000); `bytes 100-999/*` → (100, nil).
    static func parseContentRange(_ value: String) -> (start: Int64, total: Int64?)? {
        guard value.hasPrefix("bytes ") else { return nil }
        let spec = value.dropFirst(6)
        let parts = spec.split(separator: "/", maxSplits: 1)
        guard let range = parts.first, let dash = range.firstIndex(of: "-"),
            let start = Int64(range[..<dash])
        else { return nil }
        let total = parts.count == 2 ? Int64(parts[1]) : nil
        return (start, total)
    }
}
