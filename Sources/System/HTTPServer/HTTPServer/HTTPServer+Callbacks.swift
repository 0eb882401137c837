import CMicroHTTPD
import Glibc

// libmicrohttpd's callbacks. All run on libmicrohttpd threads: the access handler and the stream reader on
// the connection's own thread; request-completed and the stream free callback on that thread or the thread
// in `MHD_stop_daemon`. Contexts cross as `Unmanaged` pointers: `ServerCore` unretained (the `HTTPServer`
// outlives the daemon), `RequestContext` and `StreamContext` retained once and released exactly once.

/// Per-request state. Created (retained) in the URI log callback, released in request-completed.
/// Only the connection's thread touches it while the request runs.
final class RequestContext {
    let rawTarget: [UInt8]
    var started = false
    var target: RequestTarget?
    var body: [UInt8] = []
    var overflowed = false
    /// The most body this request may carry (`maxBodyBytes`, or less as `admit` said), and the
    /// answer to one over it.
    var bodyLimit = 0
    var tooLarge = HTTPResponse.error(413, "")

    init(rawTarget: [UInt8]) {
        self.rawTarget = rawTarget
    }
}

/// Size of the blocks libmicrohttpd asks a stream for.
let streamBlockSize = 4096
/// Longest a stream reader waits before checking for a vanished client or a stopping server.
let streamPollSlice = Duration.milliseconds(100)

/// URI log callback: sees the raw request target before libmicrohttpd unescapes it; the result becomes
/// the request's context (`*req_cls`).
func mhdURILog(
    _ cls: UnsafeMutableRawPointer?, _ uri: UnsafePointer<CChar>?,
    _ connection: OpaquePointer?
) -> UnsafeMutableRawPointer? {
    let raw = uri.map { Array(UnsafeRawBufferPointer(start: $0, count: strlen($0))) } ?? []
    return Unmanaged.passRetained(RequestContext(rawTarget: raw)).toOpaque()
}

/// The server's `ServerCore` from a callback's `cls`.
private func core(_ cls: UnsafeMutableRawPointer?) -> ServerCore? {
    cls.map { Unmanaged<ServerCore>.fromOpaque($0).takeUnretainedValue() }
}

/// Request-completed callback: releases the request's context, whatever way the request ended, and
/// starts the connection's clock for its next request.
func mhdRequestCompleted(
    _ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
    _ requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ code: MHD_RequestTerminationCode
) {
    if let connection { core(cls)?.deadlines.completed(connection) }
    guard let requestContext, let context = requestContext.pointee else { return }
    requestContext.pointee = nil
    Unmanaged<RequestContext>.fromOpaque(context).release()
}

/// Access handler: called once after the headers (validate; refuse early), once per body fragment
/// (accumulate up to the limit), and once with `*upload_data_size == 0` at the end (answer).
func mhdAccessHandler(
    _ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
    _ url: UnsafePointer<CChar>?, _ method: UnsafePointer<CChar>?,
    _ version: UnsafePointer<CChar>?, _ uploadData: UnsafePointer<CChar>?,
    _ uploadDataSize: UnsafeMutablePointer<Int>?,
    _ requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let uploadDataSize, let requestContext else { return .NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    let context: RequestContext
    if let existing = requestContext.pointee {
        context = Unmanaged<RequestContext>.fromOpaque(existing).takeUnretainedValue()
    } else {
        // Not expected (the URI log callback always runs first); fall back to the path libmicrohttpd saw.
        let raw = url.map { Array(UnsafeRawBufferPointer(start: $0, count: strlen($0))) } ?? [UInt8(ascii: "/")]
        context = RequestContext(rawTarget: raw)
        requestContext.pointee = Unmanaged.passRetained(context).toOpaque()
    }

    if !context.started {
        context.started = true
        do {
            context.target = try RequestTarget(raw: context.rawTarget)
        } catch {
            return queue(.error(400, error.message), on: connection, core: core)
        }
        // Content-Length twice (libmicrohttpd reads the first, a proxy perhaps the last: a request
        // smuggling shape) or not a number: no one can say how long the body is.
        let headers = headerPairs(connection)
        let lengths = headers.filter { $0.name == "content-length" }.map(\.value)
        if lengths.count > 1 {
            return queue(
                .error(400, "Content-Length is given \(lengths.count) times; a request carries it once"),
                on: connection, core: core, head: isHead(method))
        }
        var declared: UInt64?
        if let text = lengths.first {
            guard let length = UInt64(text) else {
                return queue(
                    .error(400, "Content-Length \"\(text)\" is not a number of bytes"),
                    on: connection, core: core, head: isHead(method))
            }
            declared = length
        }
        context.bodyLimit = core.maxBodyBytes
        context.tooLarge = tooLarge(core)
        // Who sent it, before any of its body is read (a refusal of it sent at once), and how much
        // body they may send.
        switch core.admit?(request(connection, method, context, headers: headers, body: [])) ?? .proceed {
        case .proceed: break
        case .refuse(let refusal): return queue(refusal, on: connection, core: core, head: isHead(method))
        case .limit(let bytes, let response):
            if bytes < context.bodyLimit { (context.bodyLimit, context.tooLarge) = (max(0, bytes), response) }
        }
        // Refuse a declared oversize body now, before any of it is read; libmicrohttpd then closes the
        // connection instead of reading the body.
        if let length = declared, length > UInt64(context.bodyLimit) {
            return queue(context.tooLarge, on: connection, core: core, head: isHead(method))
        }
        return .YES
    }

    let size = uploadDataSize.pointee
    if size > 0 {
        // (A body still coming past `Limits.requestSeconds` has its connection shut by
        // `RequestDeadlines`. A 413 queued before the body's end is lost to the client, still
        // sending, in the connection's reset: an oversize body that does end within it is read to
        // its end.) A chunked body of unknown length: keep reading it, but stop storing once over the
        // limit (`maxBodyBytes`, or `admit`'s).
        if !context.overflowed {
            if context.body.count + size > context.bodyLimit {
                context.overflowed = true
                context.body = []
            } else if let uploadData {
                context.body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: size))
            }
        }
        uploadDataSize.pointee = 0
        return .YES
    }
    if context.overflowed { return queue(context.tooLarge, on: connection, core: core, head: isHead(method)) }

    let whole = request(connection, method, context, headers: headerPairs(connection), body: context.body)
    context.body = []
    core.deadlines.arrived(connection)  // a slow handler is not cut
    return queue(core.handler(whole), on: connection, core: core, head: isHead(method))
}

/// The request as the handler (or `admit`, with no body yet) sees it: `headers` (`headerPairs`) by
/// name, a repeated one's values joined with ", ".
private func request(
    _ connection: OpaquePointer, _ method: UnsafePointer<CChar>?, _ context: RequestContext,
    headers: [(name: String, value: String)], body: [UInt8]
) -> HTTPRequest {
    var byName: [String: String] = [:]
    for (name, value) in headers {
        byName[name] = byName[name].map { $0 + ", " + value } ?? value
    }
    return HTTPRequest(
        method: method.map { String(cString: $0) } ?? "GET",
        path: context.target?.path ?? "/",
        query: context.target?.query ?? [:],
        headers: byName,
        body: body,
        remoteAddress: baton_mhd_client_address(connection).flatMap(numericHost))
}

private func isHead(_ method: UnsafePointer<CChar>?) -> Bool {
    method.map { String(cString: $0) == "HEAD" } ?? false
}

private func tooLarge(_ core: ServerCore) -> HTTPResponse {
    .error(413, "request body exceeds \(core.maxBodyBytes) bytes")
}

/// Every request header as sent, in order: its name lowercased, and its value.
private func headerPairs(_ connection: OpaquePointer) -> [(name: String, value: String)] {
    var pairs: [(name: String, value: String)] = []
    _ = withUnsafeMutablePointer(to: &pairs) {
        MHD_get_connection_values_n(connection, .HEADER_KIND, collectHeader, $0)
    }
    return pairs
}

/// Header iterator: adds one header to the `[(name, value)]` at `cls`, its name lowercased.
private func collectHeader(
    _ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind,
    _ key: UnsafePointer<CChar>?, _ keySize: Int,
    _ value: UnsafePointer<CChar>?, _ valueSize: Int
) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let pairs = cls.assumingMemoryBound(to: [(name: String, value: String)].self)
    let name = String(decoding: UnsafeRawBufferPointer(start: key, count: keySize), as: UTF8.self).lowercased()
    let text = value.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: valueSize), as: UTF8.self) } ?? ""
    pairs.pointee.append((name, text))
    return .YES
}

/// Hands `response` to libmicrohttpd. A response the handler built wrongly becomes a 500. For a
/// HEAD (`head`) libmicrohttpd leaves the body out; a streaming one is closed at once and answered
/// as an empty body instead (`Content-Length: 0`): libmicrohttpd 0.9.75 sends a chunked body's last
/// chunk (`0` CRLF CRLF) after a HEAD's head, which the client reads as the start of the next answer.
private func queue(
    _ response: HTTPResponse, on connection: OpaquePointer, core: ServerCore, head: Bool = false
) -> MHD_Result {
    if head, case .stream(let stream, _) = response.body {
        stream.close()
        var empty = response
        empty.body = .bytes([])
        return queue(empty, on: connection, core: core)
    }
    func unsafe(_ text: String) -> Bool { text.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 } }
    guard (100...599).contains(response.status) else {
        if case .stream(let stream, _) = response.body { stream.close() }
        return queue(.error(500, "handler answered with invalid status \(response.status)"), on: connection, core: core)
    }
    guard !response.headers.contains(where: { unsafe($0.name) || $0.name.isEmpty || unsafe($0.value) }) else {
        if case .stream(let stream, _) = response.body { stream.close() }
        return queue(.error(500, "handler answered with an invalid header"), on: connection, core: core)
    }

    let made: OpaquePointer?
    switch response.body {
    case .bytes(let bytes):
        core.deadlines.answering(connection)  // sent within the limit, however slowly it is read
        made = bytes.withUnsafeBytes {
            MHD_create_response_from_buffer(
                $0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress),
                .RESPMEM_MUST_COPY)
        }
    case .stream(let stream, let keepAlive):
        core.deadlines.arrived(connection)  // an event stream lasts as long as it lasts
        let streamContext = StreamContext(
            stream: stream, keepAlive: keepAlive, core: core,
            fd: baton_mhd_connection_fd(connection))
        let opaque = Unmanaged.passRetained(streamContext).toOpaque()
        // UInt64.max is MHD_SIZE_UNKNOWN.
        made = MHD_create_response_from_callback(
            UInt64.max, streamBlockSize,
            mhdStreamRead, opaque, mhdStreamFree)
        if made == nil {
            // No response, so no free callback: release here.
            Unmanaged<StreamContext>.fromOpaque(opaque).release()
            stream.close()
        }
    }
    guard let made else { return .NO }
    for (name, value) in response.headers {
        let lowered = name.lowercased()
        if lowered == "content-length" || lowered == "transfer-encoding" { continue }
        _ = MHD_add_response_header(made, name, value)
    }
    let result = MHD_queue_response(connection, UInt32(response.status), made)
    MHD_destroy_response(made)  // libmicrohttpd keeps its own reference while sending
    return result
}

/// A streaming body in flight: owns the pending bytes of the last chunk and the keep-alive clock.
/// Retained for libmicrohttpd's response; released (and the stream closed) in the free callback.
final class StreamContext {
    let stream: any HTTPStream
    let keepAlive: HTTPKeepAlive?
    let core: ServerCore
    let fd: Int32
    private var pending: [UInt8] = []
    private var offset = 0
    private var lastSent = ContinuousClock.now

    init(stream: any HTTPStream, keepAlive: HTTPKeepAlive?, core: ServerCore, fd: Int32) {
        self.stream = stream
        self.keepAlive = keepAlive
        self.core = core
        self.fd = fd
    }

    /// Connection thread. Fills `buffer` with at least one byte, blocking until there is something to send;
    /// or returns end-of-stream, or end-with-error once the client is gone or the server stops.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while offset >= pending.count {
            if core.stopping.load(ordering: .acquiring) { return MHD_CONTENT_READER_END_WITH_ERROR }
            if fd >= 0 && baton_peer_closed(fd) != 0 { return MHD_CONTENT_READER_END_WITH_ERROR }
            var wait = streamPollSlice
            if let keepAlive {
                let due = lastSent + keepAlive.interval
                let now = ContinuousClock.now
                if now >= due {
                    pending = keepAlive.bytes
                    offset = 0
                    break
                }
                wait = min(wait, due - now)
            }
            switch stream.next(timeout: wait) {
            case .data(let bytes):
                pending = bytes
                offset = 0
            case .idle:
                continue
            case .end:
                return MHD_CONTENT_READER_END_OF_STREAM
            }
        }
        let count = min(buffer.count, pending.count - offset)
        pending.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + offset, byteCount: count)
        }
        offset += count
        lastSent = ContinuousClock.now
        return count
    }
}

/// Content reader: see `StreamContext.read(into:)`.
private func mhdStreamRead(
    _ cls: UnsafeMutableRawPointer?, _ position: UInt64,
    _ buffer: UnsafeMutablePointer<CChar>?, _ max: Int
) -> Int {
    guard let cls, let buffer, max > 0 else { return MHD_CONTENT_READER_END_WITH_ERROR }
    let context = Unmanaged<StreamContext>.fromOpaque(cls).takeUnretainedValue()
    return context.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: max))
}

/// Free callback: libmicrohttpd is done with the response (sent, client gone, or daemon stopping).
private func mhdStreamFree(_ cls: UnsafeMutableRawPointer?) {
    guard let cls else { return }
    let context = Unmanaged<StreamContext>.fromOpaque(cls).takeRetainedValue()
    context.stream.close()
}
