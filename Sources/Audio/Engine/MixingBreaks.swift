import Synchronization

/// Where a slot's frames went on being mixed after a break (a pause, a ring that ran dry): for each
/// of the latest four, the zone frame where mixing went on, with the slot's frames mixed by then
/// and the zone frame just after the last of them. A position read a device delay behind the mix
/// (`SourceSlot.framesHeard`) counts from the first break after the frame heard, so a break in
/// between — two pauses within a Snapcast zone's second of delay, a ring that ran dry and refilled
/// — is not counted as frames still to be heard.
///
/// One writer (the zone's output thread) and any number of readers, under a sequence counter as in
/// ``Timeline``. Real-time safe on the writer's side: atomics only.
// @unchecked: every field is an `Atomic`.
final class MixingBreaks: @unchecked Sendable {
    /// One break's end.
    struct Break: Equatable {
        /// The zone frame where mixing went on (the first frame mixed after the break).
        var wentOnAt: Int
        /// The slot's frames mixed before it.
        var consumed: Int
        /// The zone frame just after the last frame mixed before the break.
        var mixedEnd: Int
    }

    static let kept = 4

    private let sequence = Atomic<Int>(0)
    /// How many breaks were recorded since the last reset; the latest `kept` are in the fields,
    /// break `n` at index `n % kept`.
    private let count = Atomic<Int>(0)
    private let wentOn0 = Atomic<Int>(0)
    private let wentOn1 = Atomic<Int>(0)
    private let wentOn2 = Atomic<Int>(0)
    private let wentOn3 = Atomic<Int>(0)
    private let consumed0 = Atomic<Int>(0)
    private let consumed1 = Atomic<Int>(0)
    private let consumed2 = Atomic<Int>(0)
    private let consumed3 = Atomic<Int>(0)
    private let end0 = Atomic<Int>(0)
    private let end1 = Atomic<Int>(0)
    private let end2 = Atomic<Int>(0)
    private let end3 = Atomic<Int>(0)

    /// Records a break that ended at `b.wentOnAt`, after every one recorded before. Writer only.
    /// Real-time safe.
    @inline(__always)
    func record(_ b: Break) {
        sequence.add(1, ordering: .sequentiallyConsistent)
        let n = count.load(ordering: .sequentiallyConsistent)
        switch n % Self.kept {
        case 0: store(b, wentOn0, consumed0, end0)
        case 1: store(b, wentOn1, consumed1, end1)
        case 2: store(b, wentOn2, consumed2, end2)
        default: store(b, wentOn3, consumed3, end3)
        }
        count.store(n + 1, ordering: .sequentiallyConsistent)
        sequence.add(1, ordering: .sequentiallyConsistent)
    }

    /// Forgets every break (a slot claimed for a new source). Writer only, while no reader relies
    /// on the old values.
    func reset() {
        sequence.add(1, ordering: .sequentiallyConsistent)
        count.store(0, ordering: .sequentiallyConsistent)
        sequence.add(1, ordering: .sequentiallyConsistent)
    }

    /// The earliest kept break that ended after zone frame `frame`, nil when none did. (When every
    /// kept one did, the oldest kept: an older one is forgotten.) Any thread but the writer's;
    /// lock-free.
    func firstEnded(after frame: Int) -> Break? {
        while true {
            let before = sequence.load(ordering: .sequentiallyConsistent)
            if before & 1 == 1 { continue }
            let n = count.load(ordering: .sequentiallyConsistent)
            var found: Break? = nil
            // Newest first: the last one read that ended after `frame` is the earliest.
            var k = n - 1
            while k >= max(0, n - Self.kept) {
                let b = load(k % Self.kept)
                if b.wentOnAt <= frame { break }
                found = b
                k -= 1
            }
            if sequence.load(ordering: .sequentiallyConsistent) == before { return found }
        }
    }

    @inline(__always)
    private func store(
        _ b: Break, _ wentOn: borrowing Atomic<Int>, _ consumed: borrowing Atomic<Int>, _ end: borrowing Atomic<Int>
    ) {
        wentOn.store(b.wentOnAt, ordering: .sequentiallyConsistent)
        consumed.store(b.consumed, ordering: .sequentiallyConsistent)
        end.store(b.mixedEnd, ordering: .sequentiallyConsistent)
    }

    private func load(_ index: Int) -> Break {
        switch index {
        case 0: read(wentOn0, consumed0, end0)
        case 1: read(wentOn1, consumed1, end1)
        case 2: read(wentOn2, consumed2, end2)
        default: read(wentOn3, consumed3, end3)
        }
    }

    private func read(_ wentOn: borrowing Atomic<Int>, _ consumed: borrowing Atomic<Int>, _ end: borrowing Atomic<Int>)
        -> Break
    {
        Break(
            wentOnAt: wentOn.load(ordering: .sequentiallyConsistent),
            consumed: consumed.load(ordering: .sequentiallyConsistent),
            mixedEnd: end.load(ordering: .sequentiallyConsistent))
    }
}
