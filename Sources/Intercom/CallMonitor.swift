/// Why a call ended.
public enum CallEndReason: Sendable, Equatable {
    /// No packet of the call arrived for the configured silence timeout.
    case silenceTimeout
    /// `RTPReceiver.endCall()` was called (someone hung up).
    case explicit
}

/// What a receiver reports about calls.
public enum CallEvent: Sendable, Equatable {
    /// The first valid packet of a stream arrived (`ssrc` names the stream).
    case callStarted(ssrc: UInt32)
    case callEnded(CallEndReason)
}

/// When a call starts and ends: a pure state machine clocked by the caller (monotonic ns).
/// Thread: a value; its owner serialises access.
public struct CallMonitor: Sendable, Equatable {
    /// How long without packets ends a call (ns).
    public let silenceTimeout: Int
    public private(set) var inCall = false
    public private(set) var lastPacket = 0

    public init(silenceTimeout: Int) { self.silenceTimeout = silenceTimeout }

    /// A valid packet of the stream `ssrc` arrived at `now`. Returns `.callStarted` for the first one.
    public mutating func packet(ssrc: UInt32, now: Int) -> CallEvent? {
        lastPacket = now
        if inCall { return nil }
        inCall = true
        return .callStarted(ssrc: ssrc)
    }

    /// Time passed: returns `.callEnded(.silenceTimeout)` once `silenceTimeout` has gone by without a packet.
    public mutating func tick(now: Int) -> CallEvent? {
        guard inCall, now - lastPacket >= silenceTimeout else { return nil }
        inCall = false
        return .callEnded(.silenceTimeout)
    }

    /// Ends the call now; nil when there was none.
    public mutating func end() -> CallEvent? {
        guard inCall else { return nil }
        inCall = false
        return .callEnded(.explicit)
    }
}
