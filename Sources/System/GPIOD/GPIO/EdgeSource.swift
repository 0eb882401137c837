/// Something that reports a line's raw edges: the real line (``GPIOLineReader``) or a recorded
/// trace (``RecordedEdgeSource``).
public protocol EdgeSource: AnyObject, Sendable {
    /// Starts delivering edges, in order, to `handler`, on a thread the source chooses (documented
    /// by each). Control thread; once.
    func start(_ handler: @escaping @Sendable (EdgeEvent) -> Void)
    /// Stops delivering; after it returns `handler` is not called again. Control thread.
    func stop()
    /// The line's level (true: high) when the first edge `start` delivers will come, if known.
    var initialLevel: Bool? { get }
}

extension EdgeSource {
    public var initialLevel: Bool? { nil }
}
