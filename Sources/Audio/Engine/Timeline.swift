import Synchronization

/// When something in a zone's output last started and stopped: the zone frame of the latest "on"
/// and "off" transition, so that a reader can tell whether it was on at an earlier frame (the
/// frame heard now, a device buffer behind the one rendered).
///
/// One writer (the zone's output thread) and any number of readers; the pair is published under a
/// sequence counter (a seqlock: the writer never waits, a reader retries while a write is in
/// flight), so a reader never sees an "on" from one transition with an "off" from another.
/// Real-time safe on the writer's side: atomics only.
// @unchecked: every field is an `Atomic`.
public final class Timeline: @unchecked Sendable {
    /// What a reader sees: the last transitions, in zone frames (-1: none yet).
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

        /// `onLast` defaults to what the frames say when they differ.
        public init(onFrom: Int, offFrom: Int, offTag: Bool, onLast: Bool? = nil) {
            self.onFrom = onFrom
            self.offFrom = offFrom
            self.offTag = offTag
            self.onLast = onLast ?? (onFrom > offFrom)
        }

        /// True when on at the end of what was rendered.
        public var isOn: Bool { onFrom >= 0 && onLast }

        /// True when it was on at zone frame `frame`, as far as the last two transitions tell (an
        /// "on" implies it was off before, an "off" that it was on before).
        public func isOn(at frame: Int) -> Bool {
            guard onFrom >= 0 else { return false }
            if onLast { return frame >= onFrom || (offFrom >= 0 && frame < offFrom) }
            return frame >= onFrom && frame < offFrom
        }

        /// The frame from which it has been on, when it is on at `frame`; else nil.
        public func on(at frame: Int) -> Int? {
            guard isOn(at: frame) else { return nil }
            return frame >= onFrom ? onFrom : nil
        }
    }

    private let sequence = Atomic<Int>(0)
    private let onFrame = Atomic<Int>(-1)
    private let offFrame = Atomic<Int>(-1)
    private let tag = Atomic<Bool>(false)
    private let onLast = Atomic<Bool>(false)

    public init() {}

    /// The latest transitions. Any thread but the writer's; lock-free (retries while a write is in
    /// flight, which takes a few nanoseconds).
    public func snapshot() -> Snapshot {
        while true {
            let before = sequence.load(ordering: .sequentiallyConsistent)
            if before & 1 == 1 { continue }
            let s = Snapshot(
                onFrom: onFrame.load(ordering: .sequentiallyConsistent),
                offFrom: offFrame.load(ordering: .sequentiallyConsistent),
                offTag: tag.load(ordering: .sequentiallyConsistent),
                onLast: onLast.load(ordering: .sequentiallyConsistent))
            if sequence.load(ordering: .sequentiallyConsistent) == before { return s }
        }
    }

    /// Records transitions: on at `on`, then off at `off` (either may be nil), after every one
    /// recorded before. Writer thread only (the output thread, or the control thread while the slot
    /// is free). Real-time safe.
    @inline(__always)
    public func record(on: Int?, off: Int?, tag offTag: Bool = false) {
        sequence.add(1, ordering: .sequentiallyConsistent)
        if let on { onFrame.store(on, ordering: .sequentiallyConsistent) }
        if let off {
            offFrame.store(off, ordering: .sequentiallyConsistent)
            tag.store(offTag, ordering: .sequentiallyConsistent)
        }
        if on != nil || off != nil { onLast.store(off == nil, ordering: .sequentiallyConsistent) }
        sequence.add(1, ordering: .sequentiallyConsistent)
    }

    /// Forgets every transition (a slot claimed for a new source). Writer only, while no reader
    /// relies on the old values.
    func reset() {
        sequence.add(1, ordering: .sequentiallyConsistent)
        onFrame.store(-1, ordering: .sequentiallyConsistent)
        offFrame.store(-1, ordering: .sequentiallyConsistent)
        tag.store(false, ordering: .sequentiallyConsistent)
        onLast.store(false, ordering: .sequentiallyConsistent)
        sequence.add(1, ordering: .sequentiallyConsistent)
    }
}
