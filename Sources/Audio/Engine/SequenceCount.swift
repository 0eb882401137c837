import Synchronization

/// A sequence counter over values that one thread stores together and others read as one set (a
/// seqlock): odd while a write is under way, and a read that saw it move reads again. Atomics
/// only, so the output thread writes through it. The values themselves are atomics, stored and
/// loaded `.sequentiallyConsistent` in the bodies.
struct SequenceCount: ~Copyable, Sendable {
    private let count = Atomic<Int>(0)

    /// Runs `body` (the writer's stores) as one publication. The writer's thread only. Real-time safe.
    @inline(__always)
    func write(_ body: () -> Void) {
        count.add(1, ordering: .sequentiallyConsistent)
        body()
        count.add(1, ordering: .sequentiallyConsistent)
    }

    /// Runs `body` (the reader's loads) until it has read one publication whole; what it read.
    /// Any thread.
    @inline(__always)
    func read<T>(_ body: () -> T) -> T {
        while true {
            let before = count.load(ordering: .sequentiallyConsistent)
            if before & 1 == 1 { continue }
            let value = body()
            if count.load(ordering: .sequentiallyConsistent) == before { return value }
        }
    }
}
