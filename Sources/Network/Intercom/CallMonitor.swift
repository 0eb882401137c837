/// Why a call ended.
public enum CallEndReason: Sendable, Equatable {
    /// No packet of the call arrived for the configured silence timeout.
    case silenceTimeout
    /// `RTPReceiver.endCall()` was called (someone hung up).
    case explicit
}

/// What a receiver reports about calls.
public enum CallEvent: Sendable, Equatable {
    /// A stream proved itself: `CallMonitor.packetsToStart` valid packets of the same `ssrc` in a row.
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
    /// Valid packets in a row from one stream before a call starts: a stray datagram that happens to
    /// parse as RTP/Opus (1 in ~16 random ones does) never starts a call by itself.
    public static let packetsToStart = 3
    private struct Candidate: Sendable, Equatable {
        var ssrc: UInt32
        var count: Int
        var last: Int
    }
    private var candidate: Candidate?

    public init(silenceTimeout: Int) { self.silenceTimeout = silenceTimeout }

    /// A valid packet of the stream `ssrc` arrived at `now`. Returns `.callStarted` once
    /// `packetsToStart` packets of one stream came in a row, each within the silence timeout of the last.
    public mutating func packet(ssrc: UInt32, now: Int) -> CallEvent? {
        lastPacket = now
        if inCall { return nil }
        if let c = candidate, c.ssrc == ssrc, now - c.last < silenceTimeout {
            candidate = Candidate(ssrc: ssrc, count: c.count + 1, last: now)
        } else {
            candidate = Candidate(ssrc: ssrc, count: 1, last: now)
        }
        guard let c = candidate, c.count >= Self.packetsToStart else { return nil }
        candidate = nil
        inCall = true
        return .callStarted(ssrc: ssrc)
    }

    /// Time passed: returns `.callEnded(.silenceTimeout)` once `silenceTimeout` has gone by without a packet.
    public mutating func tick(now: Int) -> CallEvent? {
        guard inCall, now - lastPacket >= silenceTimeout else { return nil }
        inCall = false
        return .callEnded(.silenceTimeout)
    }

    /// A call started by request (before its packets, or while a hung-up stream is ignored): timed
    /// from `now` as if a packet had come, so that it ends after the silence timeout when none does.
    public mutating func expect(now: Int) {
        inCall = true
        lastPacket = max(lastPacket, now)
        candidate = nil
    }

    /// Ends the call now; nil when there was none.
    public mutating func end() -> CallEvent? {
        guard inCall else { return nil }
        inCall = false
        return .callEnded(.explicit)
    }
}
