/// The direction of one change of a line's level.
public enum Edge: String, Sendable, Equatable {
    /// Low to high.
    case rising
    /// High to low.
    case falling
}

/// One edge on a line, as the kernel timestamped it.
///
/// A plain value: safe to use from any thread.
public struct EdgeEvent: Sendable, Equatable, CustomStringConvertible {
    public var edge: Edge
    /// When it happened, in nanoseconds of `CLOCK_MONOTONIC` (what the kernel's GPIO character
    /// device uses since Linux 5.7). Only differences between events matter.
    public var timestamp: Int64

    public init(_ edge: Edge, at timestamp: Int64) {
        self.edge = edge
        self.timestamp = timestamp
    }

    /// An edge at `milliseconds` (fractions allowed), for readable recorded traces.
    public static func rising(ms milliseconds: Double) -> EdgeEvent {
        EdgeEvent(.rising, at: Int64((milliseconds * 1_000_000).rounded()))
    }

    /// An edge at `milliseconds` (fractions allowed), for readable recorded traces.
    public static func falling(ms milliseconds: Double) -> EdgeEvent {
        EdgeEvent(.falling, at: Int64((milliseconds * 1_000_000).rounded()))
    }

    public var description: String { "\(edge.rawValue)@\(Double(timestamp) / 1_000_000)ms" }
}
