import OSThread

/// Turns raw edges into presses: a selected edge is a press when the line was quiet (no edge of
/// either kind) for at least the debounce time before it; every edge, accepted or not, restarts
/// that quiet time.
///
/// So a press is reported on its first edge, without delay; its contact bounce (edges microseconds
/// to milliseconds apart) is ignored; a button held down reports one press; its release bounce
/// (which contains falling edges too) is ignored because it follows the release edge closely; and
/// two genuine presses further apart than the debounce time both count. A single spike longer than
/// nothing but shorter than the debounce time cannot be told from a press (this reacts on the
/// leading edge); keep wires short or add an RC filter for noisy runs.
///
/// Pure: no clock is read; time comes from the events' timestamps, which must not go backwards
/// (an earlier one is treated as simultaneous). A value owned by the thread that feeds it.
public struct EdgeDebouncer: Sendable, Equatable {
    public let edges: EdgeSelection
    public let debounce: Duration
    private let debounceNanoseconds: Int64
    /// The timestamp of the latest edge of either kind.
    private var lastEdge: Int64?

    public init(edges: EdgeSelection, debounce: Duration) {
        precondition(debounce >= .zero, "a debounce time cannot be negative")
        self.edges = edges
        self.debounce = debounce
        debounceNanoseconds = Int64(debounce.wholeNanoseconds)
    }

    public init(_ configuration: GPIOButtonConfiguration) {
        self.init(edges: configuration.edge, debounce: configuration.debounce)
    }

    /// Takes the next raw edge; returns whether it is a press.
    public mutating func accept(_ event: EdgeEvent) -> Bool {
        defer { lastEdge = max(lastEdge ?? event.timestamp, event.timestamp) }
        if let lastEdge, max(0, event.timestamp - lastEdge) < debounceNanoseconds { return false }
        return edges.matches(event.edge)
    }

    /// The presses among `events`, in order (for recorded traces).
    public mutating func presses(in events: [EdgeEvent]) -> [EdgeEvent] {
        events.filter { accept($0) }
    }
}
