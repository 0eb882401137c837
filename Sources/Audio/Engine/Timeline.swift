import Synchronization

/// When something in a zone's output last started and stopped: the zone frames of its latest four
/// transitions ("on", "off", alternating), so that a reader can tell whether it was on at an
/// earlier frame (the frame heard now, a device buffer behind the one rendered) even when it
/// changed more than once within that buffer (a Snapcast zone's outage that comes, goes and comes
/// again within the server's second of buffer; a resume and a pause inside one device delay).
///
/// One writer (the zone's output thread) and any number of readers; the transitions are published
/// under a sequence counter (a seqlock: the writer never waits, a reader retries while a write is
/// in flight), so a reader never sees one transition's frame with another's kind.
/// Real-time safe on the writer's side: atomics only.
// @unchecked: every field is an `Atomic`.
public final class Timeline: @unchecked Sendable {
    /// What a reader sees: the latest transitions, in zone frames (-1: none yet).
    public struct Snapshot: Sendable, Equatable {
        /// The zone frame from which it is on (latest "on" transition), or -1 if it never was.
        public var onFrom: Int
        /// The zone frame from which it is off after it was on (latest "off" transition), or -1.
        public var offFrom: Int
        /// The writer's tag on the latest "off" (for a slot: it ran dry before its end).
        public var offTag: Bool
        /// Whether the latest transition is the "on": the frames alone cannot tell when both are the
        /// same frame (a fade that reached 0 where a resume's fade begins: off at X, then on at X, heard
        /// throughout; or one period that began and ended it there: on at X, then off at X, never heard).
        public var onLast: Bool
        /// The two transitions before the latest "on" and "off", newer first (-1: none): `earlier` is
        /// of the same kind as the latest transition, `earliest` of the other.
        public var earlier: Int
        public var earliest: Int

        /// `onLast` defaults to what the frames say when they differ.
        public init(
            onFrom: Int, offFrom: Int, offTag: Bool, onLast: Bool? = nil, earlier: Int = -1, earliest: Int = -1
        ) {
            self.onFrom = onFrom
            self.offFrom = offFrom
            self.offTag = offTag
            self.onLast = onLast ?? (onFrom > offFrom)
            self.earlier = earlier
            self.earliest = earliest
        }

        /// The frame of the `index`-th latest transition (0: the latest; kinds alternate from
        /// `onLast`), -1 past those known.
        public func transition(_ index: Int) -> Int {
            switch index {
            case 0: onLast ? onFrom : offFrom
            case 1: onLast ? offFrom : onFrom
            case 2: earlier
            case 3: earliest
            default: -1
            }
        }

        /// True when on at the end of what was rendered.
        public var isOn: Bool { onFrom >= 0 && onLast }

        /// True when it was on at zone frame `frame`: the kind of the latest transition at or before
        /// it; before every known one, the other kind than the oldest (an "on" implies it was off
        /// before, an "off" that it was on). Never on when it never was.
        public func isOn(at frame: Int) -> Bool {
            guard onFrom >= 0 else { return false }
            var on = onLast
            for index in 0..<4 {
                let t = transition(index)
                if t < 0 { break }
                if frame >= t { return on }
                on.toggle()
            }
            return on
        }

        /// The frame where the run that holds `frame` began (its latest transition at or before
        /// `frame`), nil when `frame` is before every known transition.
        public func runStart(at frame: Int) -> Int? {
            for index in 0..<4 {
                let t = transition(index)
                if t < 0 { return nil }
                if frame >= t { return t }
            }
            return nil
        }

        /// Where the "on" run that holds `frame` began (for a frame it is on at): its start, or the
        /// latest "on" when it began before every known transition.
        public func onRunStart(at frame: Int) -> Int { runStart(at: frame) ?? onFrom }
    }

    private let sequence = Atomic<Int>(0)
    /// The latest transitions' frames, newest first (-1: none), and the newest one's kind.
    private let t0 = Atomic<Int>(-1)
    private let t1 = Atomic<Int>(-1)
    private let t2 = Atomic<Int>(-1)
    private let t3 = Atomic<Int>(-1)
    private let newestOn = Atomic<Bool>(false)
    private let tag = Atomic<Bool>(false)

    public init() {}

    /// The latest transitions. Any thread but the writer's; lock-free (retries while a write is in
    /// flight, which takes a few nanoseconds).
    public func snapshot() -> Snapshot {
        while true {
            let before = sequence.load(ordering: .sequentiallyConsistent)
            if before & 1 == 1 { continue }
            let newest = t0.load(ordering: .sequentiallyConsistent)
            let second = t1.load(ordering: .sequentiallyConsistent)
            let third = t2.load(ordering: .sequentiallyConsistent)
            let fourth = t3.load(ordering: .sequentiallyConsistent)
            let on = newestOn.load(ordering: .sequentiallyConsistent)
            let offTag = tag.load(ordering: .sequentiallyConsistent)
            if sequence.load(ordering: .sequentiallyConsistent) == before {
                return Snapshot(
                    onFrom: on ? newest : second, offFrom: on ? second : newest, offTag: offTag, onLast: on,
                    earlier: third, earliest: fourth)
            }
        }
    }

    /// Records transitions: on at `on`, then off at `off` (either may be nil), after every one
    /// recorded before. Writer thread only (the output thread, or the control thread while the slot
    /// is free). Real-time safe.
    @inline(__always)
    public func record(on: Int?, off: Int?, tag offTag: Bool = false) {
        sequence.add(1, ordering: .sequentiallyConsistent)
        if let on { push(on, on: true) }
        if let off {
            push(off, on: false)
            tag.store(offTag, ordering: .sequentiallyConsistent)
        }
        sequence.add(1, ordering: .sequentiallyConsistent)
    }

    /// Sets the transitions `s` holds. Writer only. Real-time safe.
    private func restore(_ s: Snapshot) {
        sequence.add(1, ordering: .sequentiallyConsistent)
        t0.store(s.transition(0), ordering: .sequentiallyConsistent)
        t1.store(s.transition(1), ordering: .sequentiallyConsistent)
        t2.store(s.earlier, ordering: .sequentiallyConsistent)
        t3.store(s.earliest, ordering: .sequentiallyConsistent)
        newestOn.store(s.onLast, ordering: .sequentiallyConsistent)
        tag.store(s.offTag, ordering: .sequentiallyConsistent)
        sequence.add(1, ordering: .sequentiallyConsistent)
    }

    /// Forgets every transition (a slot claimed for a new source). Writer only, while no reader
    /// relies on the old values.
    func reset() { restore(Snapshot(onFrom: -1, offFrom: -1, offTag: false, onLast: false)) }

    /// A transition of kind `on` at `frame`: the newest; one of the newest's own kind again takes
    /// its place (the kinds alternate). Inside the write's sequence.
    @inline(__always)
    private func push(_ frame: Int, on: Bool) {
        let newest = t0.load(ordering: .sequentiallyConsistent)
        if newest >= 0 && newestOn.load(ordering: .sequentiallyConsistent) == on {
            t0.store(frame, ordering: .sequentiallyConsistent)
            return
        }
        t3.store(t2.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
        t2.store(t1.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
        t1.store(newest, ordering: .sequentiallyConsistent)
        t0.store(frame, ordering: .sequentiallyConsistent)
        newestOn.store(on, ordering: .sequentiallyConsistent)
    }
}
