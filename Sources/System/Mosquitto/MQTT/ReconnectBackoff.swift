/// How long to wait before the next connection attempt: `minimum` after the first failure, doubling
/// after each further one, never more than `maximum`; back to `minimum` after a successful connect.
///
/// Pure: it never reads a clock or sleeps; the client's loop thread asks it for each wait.
/// A value owned by one thread.
public struct ReconnectBackoff: Sendable, Equatable {
    public let minimum: Duration
    public let maximum: Duration
    /// Failures since the last successful connect.
    public private(set) var failures = 0

    public init(minimum: Duration, maximum: Duration) {
        precondition(minimum > .zero && maximum >= minimum, "reconnect delays must be 0 < minimum <= maximum")
        self.minimum = minimum
        self.maximum = maximum
    }

    /// Records a failed attempt (or a lost connection) and returns the wait before the next attempt.
    public mutating func nextDelay() -> Duration {
        var delay = minimum
        var doublings = failures
        while doublings > 0 && delay < maximum {
            delay *= 2
            doublings -= 1
        }
        failures += 1
        return min(delay, maximum)
    }

    /// Records a successful connect: the next failure waits ``minimum`` again.
    public mutating func reset() {
        failures = 0
    }
}
