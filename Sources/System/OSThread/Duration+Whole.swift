extension Duration {
    /// The duration in whole nanoseconds, truncated toward zero: for the C APIs and the monotonic
    /// clock, which count in integers (configuration durations are never finer). Any thread;
    /// real-time safe.
    @inline(__always)
    public var wholeNanoseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }

    /// The duration in whole milliseconds, truncated toward zero (libcurl's `_MS` options,
    /// snapserver's latency).
    public var wholeMilliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}
