import AudioCore
import Glibc
import Synchronization

/// A bounded byte buffer between a track's network thread (writer) and its decoder thread (reader):
/// the back-pressure point of the music pipeline (the daemon's streamer and baton-bench's pipeline). When it is full the writer waits inside libcurl's
/// write callback, so TCP holds the server back and memory stays bounded at `capacity` bytes: a ring
/// allocated once (its pages resident as the writer first reaches them). It was an array compacted
/// when half read, which grew to twice the capacity (512 KiB, 400 KiB of it resident while a
/// track played) and moved up to half of it at each compaction.
///
/// Thread: one writer thread, one reader thread; both may block (never an output thread).
public final class StreamBuffer: ByteSource, Sendable {
    private struct State {
        /// `capacity` bytes; `count` of them from `head` on (wrapping) are buffered.
        var bytes: [UInt8]
        var head = 0
        var count = 0
        var finished = false
        var failure: ByteSourceError?
        /// The answer's content type, known once the writer set it or the transfer ended.
        var contentType: String?
        var typeKnown = false
        /// A side is waiting for the other: the other posts its semaphore when it changes something.
        var writerWaiting = false
        var readerWaiting = false
        /// Set by `restart`: how many of the buffered bytes are the old stream's (the reader reads
        /// them, then is told the stream began again); `restarted` once the reader got there.
        var oldBytesLeft: Int?
        var restarted = false
    }

    public let capacity: Int
    private let state: Mutex<State>
    private let cancelled: Atomic<Bool>
    /// The writer waits here for room, the reader for bytes: woken by the other side (or `cancel`),
    /// never by a timeout. While a track plays the writer is nearly always waiting (TCP
    /// back-pressure), so it is woken only once a quarter of the buffer is free, not at every read.
    private let roomMade = Semaphore(), bytesCame = Semaphore()

    public init(capacity: Int = 256 * 1024) {
        precondition(capacity > 0, "a stream buffer needs room for at least one byte")
        self.capacity = capacity
        self.cancelled = Atomic(false)
        // Not zeroed: only bytes the writer wrote are ever read.
        state = Mutex(State(bytes: [UInt8](unsafeUninitializedCapacity: capacity) { _, n in n = capacity }))
    }

    /// Stops both sides: the writer's next `write` returns false, the reader's `read` throws.
    public func cancel() {
        cancelled.store(true, ordering: .releasing)
        roomMade.post()
        bytesCame.post()
    }
    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Appends `chunk`, waiting while the buffer is full. False when cancelled. Writer thread.
    public func write(_ chunk: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < chunk.count {
            if isCancelled { return false }
            let (n, wakeReader) = state.withLock { s -> (Int, Bool) in
                let n = min(capacity - s.count, chunk.count - offset)
                if n > 0 {
                    let tail = (s.head + s.count) % capacity
                    let first = min(n, capacity - tail)
                    s.bytes.withUnsafeMutableBytes { ring in
                        let from = chunk.baseAddress! + offset
                        (ring.baseAddress! + tail).copyMemory(from: from, byteCount: first)
                        ring.baseAddress!.copyMemory(from: from + first, byteCount: n - first)
                    }
                    s.count += n
                }
                s.writerWaiting = n == 0
                let wake = n > 0 && s.readerWaiting
                if wake { s.readerWaiting = false }
                return (n, wake)
            }
            if wakeReader { bytesCame.post() }
            offset += n
            if n == 0 { roomMade.wait() }
        }
        return true
    }

    /// The bytes written from now on are a new stream from its start (the server sent it again, a
    /// new transcode: its bytes do not follow the old ones). The reader reads what is left of the
    /// old stream, then its `read` throws and `takeRestart()` is true: the caller decodes the new
    /// stream from its first byte. A restart before the reader reached the last one drops the
    /// bytes written between the two. Writer thread.
    public func restart() {
        state.withLock { s in
            if let old = s.oldBytesLeft {
                s.count = old
            } else if s.restarted {
                // The reader has not taken the last restart yet: the new stream's bytes it has not
                // read are dropped, the restart stands.
                s.count = 0
            } else {
                s.oldBytesLeft = s.count
            }
        }
        bytesCame.post()
    }

    /// Whether the reader reached a `restart` (once: the next call is false). Reader thread.
    public func takeRestart() -> Bool {
        state.withLock { s in
            defer { s.restarted = false }
            return s.restarted
        }
    }

    /// The answer's content type (nil: none given), before its first bytes. The first call counts.
    /// Writer thread.
    public func setContentType(_ type: String?) {
        state.withLock { s in
            if !s.typeKnown {
                s.contentType = type
                s.typeKnown = true
            }
        }
        bytesCame.post()
    }

    /// Waits until the answer's content type is known (set by the writer, or nil when the transfer
    /// ended without one). Throws when cancelled. Reader thread.
    public func waitForContentType() throws(ByteSourceError) -> String? {
        while true {
            if isCancelled { throw ByteSourceError(message: "stream cancelled", cancelled: true) }
            let known: String?? = state.withLock { s in
                if s.typeKnown || s.finished || s.failure != nil { return .some(s.contentType) }
                s.readerWaiting = true
                return .none
            }
            if let known { return known }
            bytesCame.wait()
        }
    }

    /// No more bytes will come. Writer thread.
    public func finish() {
        state.withLock { $0.finished = true }
        bytesCame.post()
    }

    /// The transfer failed for good; the reader gets `error` once the buffered bytes are read.
    public func fail(_ error: ByteSourceError) {
        state.withLock { $0.failure = error }
        bytesCame.post()
    }

    /// True once the writer finished (every byte of the transfer is here). Any thread.
    public var isComplete: Bool { state.withLock { $0.finished } }
    /// Set when the network thread gave up (the server stayed unreachable past the retry limit).
    public var networkFailure: ByteSourceError? { state.withLock { $0.failure } }

    /// Bytes buffered and not yet read. Any thread.
    public var buffered: Int { state.withLock { $0.count } }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) -> Int {
        while true {
            if isCancelled { throw ByteSourceError(message: "stream cancelled", cancelled: true) }
            var wakeWriter = false
            let result: Result<Int, ByteSourceError>? = state.withLock { s in
                if s.oldBytesLeft == 0 {
                    s.oldBytesLeft = nil
                    s.restarted = true
                    return .failure(ByteSourceError(message: "the stream began again (a new transcode)"))
                }
                if s.count > 0 {
                    let n = min(s.count, buffer.count, s.oldBytesLeft ?? Int.max)
                    if let old = s.oldBytesLeft { s.oldBytesLeft = old - n }
                    let first = min(n, capacity - s.head)
                    s.bytes.withUnsafeBytes { ring in
                        buffer.baseAddress!.copyMemory(from: ring.baseAddress! + s.head, byteCount: first)
                        (buffer.baseAddress! + first).copyMemory(from: ring.baseAddress!, byteCount: n - first)
                    }
                    s.head = (s.head + n) % capacity
                    s.count -= n
                    // The writer goes on once there is room for a good part of the buffer (or the
                    // buffer is empty), not for each read's few KiB.
                    if s.writerWaiting && (capacity - s.count >= capacity / 4 || s.count == 0) {
                        wakeWriter = true
                        s.writerWaiting = false
                    }
                    return .success(n)
                }
                if let failure = s.failure { return .failure(failure) }
                if s.finished { return .success(0) }
                s.readerWaiting = true
                return nil
            }
            if wakeWriter { roomMade.post() }
            switch result {
            case .success(let n)?: return n
            case .failure(let e)?: throw e
            case nil: bytesCame.wait()
            }
        }
    }
}
