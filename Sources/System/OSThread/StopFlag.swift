import Synchronization

/// A one-way flag that says "stop": set once (by whoever ends the work), read by any thread that
/// should give up what it waits for. batond's stop sets one, and its network requests (the music
/// server, a URL) end at their next look instead of after their timeouts. Any thread.
public final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    private let parent: StopFlag?

    /// `parent`: a flag that sets this one too (the program's stop, for one transfer's own flag).
    public init(parent: StopFlag? = nil) { self.parent = parent }

    /// From now on, `isSet` is true.
    public func set() { flag.store(true, ordering: .releasing) }
    public var isSet: Bool { flag.load(ordering: .acquiring) || parent?.isSet == true }
}
