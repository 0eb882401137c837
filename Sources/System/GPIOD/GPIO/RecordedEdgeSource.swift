/// Replays recorded edges (a bounce trace captured on a Pi, or written by hand): for tests, and to
/// simulate a button where there is no GPIO chip.
///
/// ``start(_:)`` delivers every event, in order, on the calling thread, before it returns.
public final class RecordedEdgeSource: EdgeSource {
    public let events: [EdgeEvent]

    public init(_ events: [EdgeEvent]) {
        self.events = events
    }

    /// Delivers all events to `handler` on the calling thread, then returns. Any thread.
    public func start(_ handler: @escaping @Sendable (EdgeEvent) -> Void) {
        for event in events { handler(event) }
    }

    /// Nothing to stop: ``start(_:)`` has finished delivering when it returns.
    public func stop() {}
}
