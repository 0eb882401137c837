/// One answer from `HTTPStream.next(timeout:)`.
public enum HTTPStreamChunk: Sendable, Equatable {
    /// Bytes to send now (an empty array is treated like `.idle`).
    case data([UInt8])
    /// Nothing arrived within the timeout; the server may send its keep-alive and asks again.
    case idle
    /// The body is complete; the server ends the response cleanly.
    case end
}

/// A streaming response body (Server-Sent Events) that the server *pulls* on the connection's own thread.
///
/// Threads: `next(timeout:)` is called only on the connection's libmicrohttpd thread, never concurrently
/// with itself. `close()` is called exactly once, on a libmicrohttpd thread or the thread calling
/// `HTTPServer.stop()`, when the server is done with the stream: it ended, the client went away, or the
/// server stopped. After `close()` the server never calls `next` again and releases the stream.
///
/// Most producers should use `HTTPChunkQueue` rather than conform themselves.
public protocol HTTPStream: AnyObject, Sendable {
    /// Waits at most `timeout` for the next chunk. Connection thread only; may block, but must honour
    /// `timeout` so that a vanished client or a stopping server is noticed (the server passes at most
    /// about 100 ms).
    func next(timeout: Duration) -> HTTPStreamChunk
    /// The server is done with this stream. Called exactly once; see the type's documentation.
    func close()
}

/// A thread-safe queue of byte chunks that is an `HTTPStream`: producers on any thread `send` chunks, the
/// server pulls them in order on the connection thread.
///
/// Backpressure: at most `capacity` chunks wait; a `send` beyond that closes the queue (the client is
/// too slow; for SSE it will reconnect and resynchronise) and returns false. `send` also returns false
/// once the server has closed the stream, so a producer drops its reference on the first false.
public final class HTTPChunkQueue: HTTPStream {
    private struct State {
        var chunks: [[UInt8]] = []
        var head = 0
        var finished = false
        var closed = false
        var onClose: (@Sendable () -> Void)?
    }

    private let state: ConditionLock<State>
    private let capacity: Int

    /// Makes an empty, open queue. `onClose` runs once, on whichever thread closes the queue (the server's
    /// `close()` or an overflowing `send`), after the queue is marked closed.
    public init(capacity: Int = 1024, onClose: (@Sendable () -> Void)? = nil) {
        precondition(capacity > 0, "capacity must be positive")
        self.capacity = capacity
        self.state = ConditionLock(State(onClose: onClose))
    }

    /// Queues `bytes` to be sent after everything queued before. Any thread; never blocks for long.
    /// Returns false, dropping `bytes`, if the queue is closed, finished, or just overflowed (which closes it).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        let (accepted, onClose) = state.withLock { s -> (Bool, (@Sendable () -> Void)?) in
            if s.closed || s.finished { return (false, nil) }
            if s.chunks.count - s.head >= capacity {
                s.closed = true
                s.chunks = []
                s.head = 0
                defer { s.onClose = nil }
                return (false, s.onClose)
            }
            s.chunks.append(bytes)
            return (true, nil)
        }
        state.signal()
        onClose?()
        return accepted
    }

    /// Queues `text` as UTF-8. See `send(_:)`.
    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Ends the stream after the chunks already queued. Any thread. Later `send`s return false.
    public func finish() {
        state.withLock { $0.finished = true }
        state.signal()
    }

    /// True once the server is done with the stream or it overflowed: the producer should drop it.
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Connection thread (see `HTTPStream`). Waits up to `timeout` for a chunk.
    public func next(timeout: Duration) -> HTTPStreamChunk {
        state.wait(timeout: timeout, until: { $0.closed || $0.finished || $0.head < $0.chunks.count }) { s in
            if s.closed { return .end }
            if s.head < s.chunks.count {
                let chunk = s.chunks[s.head]
                s.head += 1
                if s.head == s.chunks.count || s.head >= 64 {
                    s.chunks.removeFirst(s.head)
                    s.head = 0
                }
                return .data(chunk)
            }
            return s.finished ? .end : .idle
        }
    }

    /// Called by the server, once (see `HTTPStream`). Drops queued chunks and runs `onClose`.
    public func close() {
        let callback = state.withLock { s -> (@Sendable () -> Void)? in
            if s.closed { return nil }
            s.closed = true
            s.chunks = []
            s.head = 0
            defer { s.onClose = nil }
            return s.onClose
        }
        state.signal()
        callback?()
    }
}

/// Encoding of Server-Sent Events (the `text/event-stream` format).
public enum ServerSentEvent {
    /// One event: optional `event:` and `id:` lines, one `data:` line per line of `data`, and a blank line.
    /// CR and LF in `event` and `id` are removed (they would end the field). Any thread.
    public static func encode(event: String? = nil, id: String? = nil, data: String) -> [UInt8] {
        func field(_ value: String) -> String { value.filter { $0 != "\n" && $0 != "\r" && $0 != "\r\n" } }
        var text = ""
        if let event { text += "event: \(field(event))\n" }
        if let id { text += "id: \(field(id))\n" }
        var line = Substring(data)
        while true {
            guard let breakIndex = line.firstIndex(where: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else {
                text += "data: \(line)\n"
                break
            }
            text += "data: \(line[..<breakIndex])\n"
            line = line[line.index(after: breakIndex)...]
        }
        return Array((text + "\n").utf8)
    }
}
