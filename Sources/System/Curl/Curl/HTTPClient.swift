import CCurl
import OSThread

/// A small blocking HTTP client over libcurl easy handles: streaming GETs with back-pressure, and
/// whole-body fetches with a size cap.
///
/// Every call runs on the calling thread and blocks it until the transfer ends; callbacks run on that
/// same thread, inside the call. Any thread may call, and many threads at once (each call has its own
/// libcurl handle). Never call from an output (real-time) thread.
///
/// The defaults suit a LAN media server: connect within 5 s, follow up to 5 redirects, and give up when
/// no byte has arrived for 20 s while the client was waiting for the network (``Options/stallTimeout``).
public struct HTTPClient: Sendable {
    /// How transfers behave. A plain value.
    public struct Options: Sendable, Equatable {
        /// The longest time to establish the TCP connection (`CURLOPT_CONNECTTIMEOUT_MS`).
        public var connectTimeout: Duration = .seconds(5)
        /// Abort when no byte arrived for this long while libcurl was waiting on the network, or nil
        /// for never. Time spent blocked in `onData` (back-pressure) does not count. This is how a dead
        /// or hung server is detected on a stream that may legitimately be paused by the reader.
        public var stallTimeout: Duration? = .seconds(20)
        /// libcurl's own low-speed abort (`CURLOPT_LOW_SPEED_LIMIT`/`_TIME`): fewer than
        /// `bytesPerSecond` for `seconds`. Off by default: libcurl counts time blocked in `onData` as
        /// slow, so a reader that applies back-pressure for longer than `seconds` would be cut off.
        public var lowSpeed: (bytesPerSecond: Int, seconds: Int)? = nil
        /// The most redirects followed (`CURLOPT_MAXREDIRS`); 0 disables following.
        public var maxRedirects: Int = 5
        /// The `User-Agent` header.
        public var userAgent: String = HTTPClient.defaultUserAgent
        /// Once set, a transfer ends at libcurl's next progress call (at least once a second, also
        /// while connecting or waiting for the answer) with a ``CurlError`` marked cancelled: how
        /// the program's stop ends requests that would wait for their timeouts.
        public var stop: StopFlag? = nil

        /// The defaults.
        public init() {}

        public static func == (lhs: Options, rhs: Options) -> Bool {
            lhs.connectTimeout == rhs.connectTimeout && lhs.stallTimeout == rhs.stallTimeout
                && lhs.lowSpeed?.bytesPerSecond == rhs.lowSpeed?.bytesPerSecond
                && lhs.lowSpeed?.seconds == rhs.lowSpeed?.seconds
                && lhs.maxRedirects == rhs.maxRedirects && lhs.userAgent == rhs.userAgent && lhs.stop === rhs.stop
        }
    }

    /// `Baton/1 libcurl/7.88.1`.
    public static let defaultUserAgent = "Baton/1 libcurl/\(LIBCURL_VERSION)"

    /// How transfers behave.
    public var options: Options

    /// Creates a client; it holds only options, so it is cheap to copy.
    public init(options: Options = Options()) {
        self.options = options
    }

    /// Streams the body of `GET url` to `onData`, chunk by chunk, as it arrives.
    ///
    /// - `onResponse` is called once, as soon as the final response's headers have arrived (after
    ///   redirects and `1xx` answers; before the first chunk, however late the body comes), with its
    ///   status and headers. Check `status` and `headers.mediaType` there; return `false` to stop at
    ///   once (the call then throws a ``CurlError`` with ``CurlError/cancelled`` set).
    /// - `onData` gets each chunk; the bytes are valid only during the call. Return `false` to stop:
    ///   the call then throws a ``CurlError`` with ``CurlError/cancelled`` set. `onData` may block
    ///   (waiting for room in a ring: back-pressure); the server then waits too, and the stall timeout
    ///   is not running meanwhile.
    /// - `range` sends `Range: bytes=N-` (or `N-M`); a server that honours it answers 206, one that does
    ///   not answers 200 with the whole body: check the status.
    /// - `timeout` bounds the whole transfer (nil: no bound, for streams of any length).
    ///
    /// HTTP error statuses are not errors here: they arrive in `onResponse` with their body in `onData`.
    /// Blocks the calling thread; callbacks run on it. Any thread but an output thread.
    /// - Returns: the response head, also given to `onResponse`.
    /// - Throws: ``CurlError`` when the transfer could not complete (connect, timeout, stall, closed
    ///   early, cancelled).
    @discardableResult
    public func get(
        url: String, headers: HTTPHeaders = HTTPHeaders(), range: ByteRange? = nil,
        timeout: Duration? = nil,
        onResponse: (HTTPResponseHead) -> Bool = { _ in true },
        onData: (UnsafeRawBufferPointer) -> Bool
    ) throws(CurlError) -> HTTPResponseHead {
        let result = withoutActuallyEscaping(onResponse) { onResponse in
            withoutActuallyEscaping(onData) { onData in
                let transfer = Transfer(
                    url: url, stallTimeout: options.stallTimeout, stop: options.stop, onResponse: onResponse,
                    onData: onData)
                return transfer.run(options: options, headers: headers, range: range, timeout: timeout, body: nil)
            }
        }
        return try result.get()
    }

    /// Sends `POST url` with `body` (of type `contentType`) and reads the whole answer into memory
    /// (for JSON-RPC and similar small requests).
    ///
    /// Blocks the calling thread. Any thread but an output thread.
    /// - Throws: ``CurlError`` when the transfer could not complete, or the answer is larger than
    ///   `maxBodyBytes` (``CurlError/tooLarge``). HTTP error statuses are returned.
    public func post(
        url: String, body: [UInt8], contentType: String, headers: HTTPHeaders = HTTPHeaders(),
        maxBodyBytes: Int = 8 << 20, timeout: Duration = .seconds(30)
    ) throws(CurlError) -> HTTPClientResponse {
        var requestHeaders = headers
        requestHeaders.append(name: "Content-Type", value: contentType)
        var answer: [UInt8] = []
        var overflow = false
        let result = withoutActuallyEscaping({ (_: HTTPResponseHead) in true }) { onResponse in
            withoutActuallyEscaping({ (chunk: UnsafeRawBufferPointer) -> Bool in
                guard answer.count + chunk.count <= maxBodyBytes else {
                    overflow = true
                    return false
                }
                answer.append(contentsOf: chunk)
                return true
            }) { onData in
                Transfer(
                    url: url, stallTimeout: options.stallTimeout, stop: options.stop, onResponse: onResponse,
                    onData: onData
                )
                .run(options: options, headers: requestHeaders, range: nil, timeout: timeout, body: body)
            }
        }
        switch result {
        case .success(let head):
            return HTTPClientResponse(status: head.status, headers: head.headers, body: answer)
        case .failure(var error):
            if overflow {
                error.cancelled = false
                error.tooLarge = true
                error.detail = "the body is larger than \(maxBodyBytes) bytes"
            }
            throw error
        }
    }

    /// Reads the whole body of `GET url` into memory.
    ///
    /// Blocks the calling thread. Any thread but an output thread.
    /// - Parameters:
    ///   - maxBodyBytes: the largest body accepted; a longer one stops the transfer and throws a
    ///     ``CurlError`` with ``CurlError/tooLarge`` set.
    ///   - timeout: bounds the whole transfer.
    /// - Throws: ``CurlError`` when the transfer could not complete. HTTP error statuses are returned.
    public func fetch(
        url: String, headers: HTTPHeaders = HTTPHeaders(), maxBodyBytes: Int = 8 << 20,
        timeout: Duration = .seconds(30)
    ) throws(CurlError) -> HTTPClientResponse {
        var body: [UInt8] = []
        var overflow = false
        let head: HTTPResponseHead
        do {
            head = try get(
                url: url, headers: headers, timeout: timeout,
                onResponse: { head in
                    if let length = head.headers.contentLength, length > 0, length <= maxBodyBytes {
                        body.reserveCapacity(Int(length))
                    }
                    return true
                },
                onData: { chunk in
                    guard body.count + chunk.count <= maxBodyBytes else {
                        overflow = true
                        return false
                    }
                    body.append(contentsOf: chunk)
                    return true
                })
        } catch  where overflow {
            var error = error
            error.cancelled = false
            error.tooLarge = true
            error.detail = "the body is larger than \(maxBodyBytes) bytes"
            throw error
        }
        return HTTPClientResponse(status: head.status, headers: head.headers, body: body)
    }
}

/// libcurl's global state, initialized once, on first use, from whichever thread gets there first
/// (a global `let` is initialized exactly once, thread-safely). Never cleaned up: it lives as long
/// as the process.
private let globalInitResult: UInt32 = curl_global_init(baton_curl_global_default()).rawValue

/// One transfer: the easy handle's callbacks reach it through their `void *` context.
/// Lives on the stack of ``HTTPClient/get``; used only by the calling thread.
private final class Transfer {
    let url: String
    let stallTimeout: Duration?
    let stop: StopFlag?
    /// The progress call saw `stop` set.
    var stopped = false
    let onResponse: (HTTPResponseHead) -> Bool
    let onData: (UnsafeRawBufferPointer) -> Bool
    var handle: UnsafeMutableRawPointer?
    /// Whether libcurl follows a redirect (then a `3xx` with a `Location` is not the final answer).
    var followsRedirects = false
    var headers = HTTPHeaders()
    var head: HTTPResponseHead?
    var cancelled = false
    var stalled = false
    var lastActivity = ContinuousClock.now
    var lastDownloaded: Int64 = 0

    init(
        url: String, stallTimeout: Duration?, stop: StopFlag?, onResponse: @escaping (HTTPResponseHead) -> Bool,
        onData: @escaping (UnsafeRawBufferPointer) -> Bool
    ) {
        self.url = url
        self.stallTimeout = stallTimeout
        self.stop = stop
        self.onResponse = onResponse
        self.onData = onData
    }

    /// - Parameter body: sent as a POST body when given (a GET otherwise).
    func run(
        options: HTTPClient.Options, headers requestHeaders: HTTPHeaders, range: ByteRange?,
        timeout: Duration?, body: [UInt8]?
    ) -> Result<HTTPResponseHead, CurlError> {
        guard globalInitResult == 0 else {
            return .failure(error(code: globalInitResult, detail: "curl_global_init failed"))
        }
        guard let handle = curl_easy_init() else {
            return .failure(error(code: 2, detail: "curl_easy_init failed"))
        }
        self.handle = handle
        defer {
            curl_easy_cleanup(handle)
            self.handle = nil
        }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        var headerList: UnsafeMutablePointer<curl_slist>? = nil
        defer { curl_slist_free_all(headerList) }
        for (name, value) in requestHeaders {
            headerList = curl_slist_append(headerList, "\(name): \(value)")
        }

        let context = Unmanaged.passUnretained(self).toOpaque()
        do {
            try check(baton_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
            try check(baton_curl_setopt_string(handle, CURLOPT_URL, url))
            try check(baton_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
            try check(baton_curl_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"))
            // Threaded code: no SIGALRM-based DNS timeouts.
            try check(baton_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
            followsRedirects = options.maxRedirects > 0
            try check(baton_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, followsRedirects ? 1 : 0))
            // A proxy's answer to CONNECT is not the server's: keep it out of the header callback.
            try check(baton_curl_setopt_long(handle, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1))
            try check(baton_curl_setopt_long(handle, CURLOPT_MAXREDIRS, options.maxRedirects))
            try check(
                baton_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeout.wholeMilliseconds))
            if let timeout {
                try check(baton_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, max(1, timeout.wholeMilliseconds)))
            }
            if let lowSpeed = options.lowSpeed {
                try check(baton_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, lowSpeed.bytesPerSecond))
                try check(baton_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, lowSpeed.seconds))
            }
            try check(baton_curl_setopt_string(handle, CURLOPT_USERAGENT, options.userAgent))
            if let headerList {
                try check(baton_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList))
            }
            if let range {
                try check(baton_curl_setopt_string(handle, CURLOPT_RANGE, range.description))
            }
            if let body {
                // POSTFIELDSIZE first: COPYPOSTFIELDS copies that many bytes (the body may hold NULs).
                try check(baton_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, body.count))
                let rc = body.withUnsafeBytes { bytes in
                    bytes.baseAddress.map {
                        baton_curl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0))
                    }
                        ?? baton_curl_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, "")
                }
                try check(rc)
            }
            try check(
                baton_curl_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION) { bytes, size, count, context in
                    let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                    return transfer.received(UnsafeRawBufferPointer(start: bytes, count: size * count))
                })
            try check(baton_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
            try check(
                baton_curl_setopt_write_callback(handle, CURLOPT_HEADERFUNCTION) { bytes, size, count, context in
                    let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                    let keepGoing = transfer.receivedHeader(UnsafeRawBufferPointer(start: bytes, count: size * count))
                    return keepGoing ? size * count : 0
                })
            try check(baton_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context))
            try check(
                baton_curl_setopt_xferinfo_callback(handle) { context, _, downloaded, _, _ in
                    let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                    return transfer.progress(downloaded: Int64(downloaded)) ? 0 : 1
                })
            try check(baton_curl_setopt_pointer(handle, CURLOPT_XFERINFODATA, context))
            try check(baton_curl_setopt_long(handle, CURLOPT_NOPROGRESS, 0))
            // Stopped while the name is being resolved: do not wait for the resolver thread (a
            // dead DNS server holds it for getaddrinfo's whole 5 s × attempts).
            if stop != nil { try check(baton_curl_setopt_long(handle, CURLOPT_QUICK_EXIT, 1)) }
        } catch {
            return .failure(error)
        }

        lastActivity = .now
        let rc = withExtendedLifetime(self) { curl_easy_perform(handle) }
        if rc == CURLE_OK {
            // No body, and no head yet: handed over now, and its "stop" honoured like any other.
            if head == nil && !deliverHead() {
                return .failure(
                    error(
                        code: CURLE_WRITE_ERROR.rawValue, detail: "the receiver stopped the transfer", cancelled: true))
            }
            return .success(head!)
        }
        let detail = String(cString: errorBuffer)
        if cancelled {
            return .failure(error(code: rc.rawValue, detail: "the receiver stopped the transfer", cancelled: true))
        }
        if stopped {
            return .failure(error(code: rc.rawValue, detail: "stopped: the program is stopping", cancelled: true))
        }
        if stalled, let stallTimeout {
            return .failure(
                error(
                    code: UInt32(CurlError.timedOut),
                    detail: "no data received for \(stallTimeout.wholeMilliseconds / 1000) s (stall timeout)"))
        }
        return .failure(error(code: rc.rawValue, detail: detail))
    }

    private func check(_ rc: CURLcode) throws(CurlError) {
        if rc != CURLE_OK { throw error(code: rc.rawValue, detail: "curl_easy_setopt failed") }
    }

    private func error(code: UInt32, detail: String, cancelled: Bool = false) -> CurlError {
        let message = String(cString: curl_easy_strerror(CURLcode(rawValue: code)))
        return CurlError(
            code: Int32(bitPattern: code), message: message, detail: detail, url: url,
            cancelled: cancelled)
    }

    /// The response's status code as libcurl has it now (0 before a status line).
    private var status: Int {
        var status = 0
        if let handle { _ = baton_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status) }
        return status
    }

    /// Hands the head to `onResponse`; false (and `cancelled`) when it says stop.
    @discardableResult
    private func deliverHead() -> Bool {
        let head = HTTPResponseHead(status: status, headers: headers)
        self.head = head
        guard onResponse(head) else {
            cancelled = true
            return false
        }
        return true
    }

    /// The write callback: hands a chunk to `onData`; a short count tells libcurl to stop.
    func received(_ bytes: UnsafeRawBufferPointer) -> Int {
        if head == nil && !deliverHead() { return 0 }
        guard !bytes.isEmpty else { return 0 }
        let keepGoing = onData(bytes)
        lastActivity = .now
        guard keepGoing else {
            cancelled = true
            return 0
        }
        return bytes.count
    }

    /// The header callback: one line a call, the status line of each response (redirects, `100
    /// Continue`) first, so a status line starts a new header set. The blank line that ends the final
    /// response's headers delivers the head (not a `1xx`, nor a redirect libcurl follows); false when
    /// `onResponse` said stop.
    func receivedHeader(_ bytes: UnsafeRawBufferPointer) -> Bool {
        lastActivity = .now
        let line = String(decoding: bytes, as: UTF8.self)
        if line == "\r\n" || line == "\n" {
            let code = status
            let interim = (100..<200).contains(code)
            let redirected = followsRedirects && (300..<400).contains(code) && headers["Location"] != nil
            if head == nil && code > 0 && !interim && !redirected { return deliverHead() }
        } else if line.hasPrefix("HTTP/") {
            headers = HTTPHeaders()
        } else if let colon = line.firstIndex(of: ":") {
            headers.append(
                name: line[..<colon].trimmingWhitespace(),
                value: line[line.index(after: colon)...].trimmingWhitespace())
        }
        return true
    }

    /// The progress callback (about once a second while idle): false aborts a stalled transfer.
    func progress(downloaded: Int64) -> Bool {
        if stop?.isSet == true {
            stopped = true
            return false
        }
        let now = ContinuousClock.now
        if downloaded != lastDownloaded {
            lastDownloaded = downloaded
            lastActivity = now
        }
        if let stallTimeout, now - lastActivity > stallTimeout {
            stalled = true
            return false
        }
        return true
    }
}
