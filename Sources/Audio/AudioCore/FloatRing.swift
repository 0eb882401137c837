import Glibc
import Synchronization

/// A single-producer/single-consumer ring of interleaved `Float` samples.
///
/// One producer at a time writes and one thread reads (a zone's output thread). The producer is one
/// thread (a music streamer, a call pump), or several threads that serialize their writes under a
/// lock of their own: the control plane feeds sound players from request threads and the monitor,
/// always under its mutex. `write` and `read` are wait-free and do not allocate. The capacity is
/// what was asked for, not the next power of two: a zone's eight half-second rings at 44.1 kHz
/// stereo were 8 × 256 KiB with 33 % of it never used (44 100 samples rounded to 65 536); the one
/// remainder per call costs less than a cache miss.
///
/// Memory: the storage is an anonymous mapping of its own. `init(capacity:)` makes it resident at
/// once; `init(capacity:resident: false)` leaves it unmapped until `makeResident()` (a zone's slot
/// rings: a slot's ring is paged in when the slot is first claimed, on the control thread, so a
/// zone that never mixes more than two sources keeps six of its eight rings, ≈ 1 MiB, out of
/// memory, and neither the producer nor the output thread ever takes its page faults). A ring is
/// only ever paged in, never out: RSS grows by a ring when a slot is used for the first time and
/// stays so (`residentBytes` says what the kernel holds).
///
/// A consumer that may take back what it read (a zone output that renders ahead and rewinds, see
/// `ZoneMixer.rewind`) reads with `read(into:count:releasing: false)`: its read position moves on,
/// but the samples stay the producer's to keep until `release(upTo:)` hands them back, and
/// `rewindRead(to:)` reads them again. `readable` is always what the consumer has not read yet;
/// `writable` is the room the producer has, so it is smaller by what is read but not released.
// @unchecked: the storage is shared, but the producer only writes slots between `tail` and `head +
// capacity`, the consumer only reads slots between `head` and `tail` (its cursor `readAt` lies
// between them); the counters are atomics with acquire/release ordering, which publish the sample
// writes to the reader.
public final class FloatRing: @unchecked Sendable {
    /// Samples the ring holds at most.
    public let capacity: Int
    private let storage: UnsafeMutablePointer<Float>
    private let head = Atomic<Int>(0)  // samples released to the producer so far (written by the consumer)
    private let readAt = Atomic<Int>(0)  // samples read so far (written by the consumer; ≥ head)
    private let tail = Atomic<Int>(0)  // samples written so far (written by the producer)

    /// The mapping's length in bytes: the capacity's, rounded up to whole pages.
    private let mappedBytes: Int
    private static let pageBytes = Int(sysconf(Int32(_SC_PAGESIZE)))
    private let paged = Atomic<Bool>(false)

    /// Creates a ring holding `capacity` samples, its memory resident at once unless `resident` is
    /// false (then it is paged in by `makeResident()`; until then it reads as silence and costs no
    /// memory). Thread: any; allocates (maps memory).
    public init(capacity: Int, resident: Bool = true) {
        precondition(capacity > 0, "a ring needs room for at least one sample")
        self.capacity = capacity
        let page = Self.pageBytes
        mappedBytes = (capacity * MemoryLayout<Float>.stride + page - 1) / page * page
        let mapped = mmap(nil, mappedBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped, mapped != MAP_FAILED else {
            fatalError("FloatRing: cannot map \(mappedBytes) bytes: \(String(cString: strerror(errno)))")
        }
        storage = mapped.bindMemory(to: Float.self, capacity: capacity)  // anonymous memory reads as 0
        if resident { makeResident() }
    }

    deinit { munmap(storage, mappedBytes) }

    /// Pages the storage in (once; later calls return at once). Call it before the producer's first
    /// write, from a thread that may block on page faults (the control thread claiming a slot), so
    /// that no real-time thread ever takes one. Thread: any, while nothing was written; blocks.
    public func makeResident() {
        guard !paged.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // A write faults a page in (a read would map the shared zero page); each holds silence anyway.
        for sample in stride(from: 0, to: capacity, by: Self.pageBytes / MemoryLayout<Float>.stride) {
            storage[sample] = 0
        }
    }

    /// True once `makeResident()` ran (always for a ring made resident). Any thread.
    public var isResident: Bool { paged.load(ordering: .acquiring) }

    /// The bytes of the ring's storage the kernel holds in memory now (`mincore`). Any thread; a
    /// system call.
    public var residentBytes: Int {
        var vector = [UInt8](repeating: 0, count: mappedBytes / Self.pageBytes)
        guard mincore(storage, mappedBytes, &vector) == 0 else { return 0 }
        return vector.reduce(0) { $0 + Int($1 & 1) } * Self.pageBytes
    }

    /// Samples ready to read: written and not read yet. Consumer thread (exact) or any thread (a
    /// snapshot).
    public var readable: Int { tail.load(ordering: .acquiring) - readAt.load(ordering: .acquiring) }

    /// Room for writing, in samples: the capacity less what was written and not released. Producer
    /// thread (exact) or any thread (a snapshot).
    public var writable: Int { capacity - (tail.load(ordering: .acquiring) - head.load(ordering: .acquiring)) }

    /// Samples read so far: the consumer's position, for `rewindRead(to:)` and `release(upTo:)`.
    /// Consumer thread.
    public var readPosition: Int { readAt.load(ordering: .relaxed) }

    /// Copies up to `count` samples from `source`; returns how many fit. Producer thread only.
    @discardableResult
    public func write(_ source: UnsafePointer<Float>, count: Int) -> Int {
        let t = tail.load(ordering: .relaxed)
        let h = head.load(ordering: .acquiring)
        let n = min(count, capacity - (t - h))
        guard n > 0 else { return 0 }
        let start = t % capacity
        let first = min(n, capacity - start)
        (storage + start).update(from: source, count: first)
        if first < n { storage.update(from: source + first, count: n - first) }
        tail.store(t + n, ordering: .releasing)
        return n
    }

    /// Copies up to `count` samples into `destination`; returns how many were there. With
    /// `releasing` (the default) the samples are handed back to the producer at once; without, they
    /// stay until `release(upTo:)`, and `rewindRead(to:)` can read them again.
    /// Consumer thread only. Real-time safe.
    @discardableResult
    public func read(into destination: UnsafeMutablePointer<Float>, count: Int, releasing: Bool = true) -> Int {
        let r = readAt.load(ordering: .relaxed)
        let t = tail.load(ordering: .acquiring)
        let n = min(count, t - r)
        guard n > 0 else { return 0 }
        let start = r % capacity
        let first = min(n, capacity - start)
        destination.update(from: storage + start, count: first)
        if first < n { (destination + first).update(from: storage, count: n - first) }
        readAt.store(r + n, ordering: .releasing)
        if releasing { head.store(r + n, ordering: .releasing) }
        return n
    }

    /// Hands the samples read before `position` (a `readPosition`) back to the producer. A position
    /// at or behind what was released already, or past what was read, changes nothing beyond the
    /// read position. Consumer thread only. Real-time safe.
    public func release(upTo position: Int) {
        let h = head.load(ordering: .relaxed)
        let p = min(position, readAt.load(ordering: .relaxed))
        if p > h { head.store(p, ordering: .releasing) }
    }

    /// Moves the read position back to `position` (a `readPosition`), so that the samples read since
    /// are read again; never behind what was released. Returns the position it moved to.
    /// Consumer thread only. Real-time safe.
    @discardableResult
    public func rewindRead(to position: Int) -> Int {
        let p = max(position, head.load(ordering: .relaxed))
        if p < readAt.load(ordering: .relaxed) { readAt.store(p, ordering: .releasing) }
        return readAt.load(ordering: .relaxed)
    }

    /// Skips up to `count` samples written and not read yet (the oldest), as `read` would, without
    /// copying them; returns how many. Consumer thread only. Real-time safe.
    @discardableResult
    public func discard(count: Int, releasing: Bool = true) -> Int {
        let r = readAt.load(ordering: .relaxed)
        let n = min(count, tail.load(ordering: .acquiring) - r)
        guard n > 0 else { return 0 }
        readAt.store(r + n, ordering: .releasing)
        if releasing { head.store(r + n, ordering: .releasing) }
        return n
    }

    /// Empties the ring. Only while neither side is using it (e.g. the slot is free).
    public func reset() {
        head.store(0, ordering: .releasing)
        readAt.store(0, ordering: .releasing)
        tail.store(0, ordering: .releasing)
    }
}
