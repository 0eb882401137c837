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
/// The kernel's edge kinds are not trusted for the first edge after a quiet time. With both edges
/// requested, libgpiod v1's interface (Debian 12's 1.6) does not record which edge came: the
/// kernel reads the line's level a little after it, in its interrupt thread, and calls the edge
/// rising when the level is high. Read during the bounce, a press's falling edge can be called
/// rising (the press lost: it is no selected edge, and the real ones after it are bounce), and a
/// long hold's rising release falling (a second press). The level read after the last edge of a
/// burst is the settled one, so the first edge after a quiet time is taken as leaving the level
/// the edge before it reported (or the line's level at start, `high`), whatever it is called.
///
/// Pure: no clock is read; time comes from the events' timestamps, which must not go backwards
/// (an earlier one is treated as simultaneous). A value owned by the thread that feeds it.
public struct EdgeDebouncer: Sendable, Equatable {
    public let edges: EdgeSelection
    public let debounce: Duration
    private let debounceNanoseconds: Int64
    /// The timestamp of the latest edge of either kind.
    private var lastEdge: Int64?
    /// The line's level as the latest edge reported it (true: high), or as it was at start; nil
    /// when not known.
    private var high: Bool?

    /// `high`: the line's level when its edges start to come, if known.
    public init(edges: EdgeSelection, debounce: Duration, high: Bool? = nil) {
        precondition(debounce >= .zero, "a debounce time cannot be negative")
        self.edges = edges
        self.debounce = debounce
        self.high = high
        debounceNanoseconds = Int64(debounce.wholeNanoseconds)
    }

    public init(_ configuration: GPIOButtonConfiguration) {
        self.init(edges: configuration.edge, debounce: configuration.debounce)
    }

    /// The line's level now (true: high), when it is known otherwise than from its edges (read
    /// when the line was requested).
    public mutating func settle(high: Bool) { self.high = high }

    /// Takes the next raw edge; returns the press it makes — the edge as it left the settled
    /// level, which the kernel may have called otherwise — or nil.
    public mutating func press(_ event: EdgeEvent) -> EdgeEvent? {
        let settled = high
        defer {
            lastEdge = max(lastEdge ?? event.timestamp, event.timestamp)
            high = event.edge == .rising
        }
        if let lastEdge, max(0, event.timestamp - lastEdge) < debounceNanoseconds { return nil }
        let edge = settled.map { $0 ? Edge.falling : .rising } ?? event.edge
        return edges.matches(edge) ? EdgeEvent(edge, at: event.timestamp) : nil
    }

    /// Takes the next raw edge; returns whether it is a press.
    public mutating func accept(_ event: EdgeEvent) -> Bool { press(event) != nil }

    /// The presses among `events`, in order (for recorded traces).
    public mutating func presses(in events: [EdgeEvent]) -> [EdgeEvent] {
        events.compactMap { press($0) }
    }
}
