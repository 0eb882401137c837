/// One decision of the arbiter for the daemon to carry out, with when and why.
public struct Effect<Instant: InstantProtocol>: Hashable, Sendable, CustomStringConvertible
where Instant.Duration == Duration {
    /// What to do.
    public enum Action: Hashable, Sendable {
        /// The source may play in these zones now (for an announcement: it is played).
        case granted(SourceID, zones: [ZoneID])
        /// The request waits in the queue.
        case queued(SourceID)
        /// The request is refused; the source must not play.
        case rejected(SourceID)
        /// The request is merged into an earlier accepted one with the same key; it must not play.
        case coalesced(SourceID, into: SourceID)
        /// The queued request waited too long and is dropped; it must not play.
        case expired(SourceID)
        /// The source lost its grant permanently and must stop; it will not be resumed.
        case lostForGood(SourceID)
        /// The source's request is over (released, stopped by the user, vanished, superseded).
        case finished(SourceID)
        /// The source is heard in none of its zones: pause it and show it interrupted.
        case interruptionBegan(SourceID, zones: [ZoneID])
        /// The interruption is over; resume the source only if `shouldResume`, else leave it paused.
        case interruptionEnded(SourceID, shouldResume: Bool)
        /// Ramp the source's duck stage in `zone` down to `level` over `attack`. User volume is untouched.
        case duckBegan(SourceID, zone: ZoneID, level: Decibels, attack: Duration)
        /// Ramp the source's duck stage in `zone` back to 0 dB over `release`.
        case duckEnded(SourceID, zone: ZoneID, release: Duration)
        /// Silence the source in `zone` only; it keeps playing elsewhere.
        case muted(SourceID, zone: ZoneID)
        /// Let the source be heard in `zone` again.
        case unmuted(SourceID, zone: ZoneID)
        /// Call ``Arbiter/tick(at:)`` at this instant (replaces any earlier timer).
        case scheduleTimer(at: Instant)

        /// The source the action is about, if any.
        public var source: SourceID? {
            switch self {
            case .granted(let s, _), .queued(let s), .rejected(let s), .coalesced(let s, _), .expired(let s),
                .lostForGood(let s), .finished(let s), .interruptionBegan(let s, _),
                .interruptionEnded(let s, _), .duckBegan(let s, _, _, _), .duckEnded(let s, _, _),
                .muted(let s, _), .unmuted(let s, _):
                s
            case .scheduleTimer:
                nil
            }
        }
    }

    /// The instant of the input that caused the effect.
    public var at: Instant
    /// What to do.
    public var action: Action
    /// Which rule decided, naming the classes and priorities involved.
    public var reason: Reason

    /// Creates an effect.
    public init(at: Instant, action: Action, reason: Reason) {
        self.at = at
        self.action = action
        self.reason = reason
    }

    public var description: String { "\(action) — \(reason)" }
}
