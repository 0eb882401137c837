/// A source asking to be heard in some zones.
public struct Request: Hashable, Sendable {
    /// Who asks. Asking again with an id the arbiter already holds first finishes the old request.
    public var source: SourceID
    /// The class whose rules apply.
    public var sourceClass: SourceClass
    /// The zones, already expanded from groups by the daemon. Order and duplicates do not matter.
    public var zones: [ZoneID]
    /// Transient or permanent; `nil` takes the class's ``ClassPolicy/kind``.
    public var kind: RequestKind?
    /// Requests of the same class with the same key coalesce within the class's window
    /// (for example the sound name `doorbell`).
    public var coalesceKey: String?
    /// How long it may wait in the queue before it expires; `nil` takes the class's
    /// ``ClassPolicy/ttl``. (Interrupted music asked again by a reload: what remains of its
    /// `resume-within`, ``Arbiter/wouldResume(_:at:)``.)
    public var ttl: Duration?

    /// Creates a request.
    public init(
        source: SourceID, sourceClass: SourceClass, zones: [ZoneID], kind: RequestKind? = nil,
        coalesceKey: String? = nil, ttl: Duration? = nil
    ) {
        self.source = source
        self.sourceClass = sourceClass
        self.zones = zones
        self.kind = kind
        self.coalesceKey = coalesceKey
        self.ttl = ttl
    }
}

/// Something the user did to a source, through any control (HTTP, MQTT, buttons).
public enum UserCommand: String, Hashable, Sendable, CaseIterable {
    /// Paused: the source stops where it is and keeps its grant.
    case pause
    /// Resumed or started playing.
    case play
    /// Stopped: the source gives up its grant, as if released.
    case stop
    /// Moved to another position.
    case seek
    /// Changed otherwise (another track, another stream).
    case change
    /// Changed its volume. Never affects arbitration: the user's volume is not the arbiter's.
    case volume

    /// Whether the command means "the user changed that source", which forbids an automatic resume.
    public var changesPlayback: Bool { self != .volume }
}

/// One input to the arbiter, for ``Arbiter/handle(_:at:)``.
public enum Input: Hashable, Sendable {
    /// A source asks to be heard.
    case request(Request)
    /// A source finished or gave up its request.
    case release(SourceID)
    /// A source ended because it failed (its stream broke, its server was too slow), not played
    /// through: as `release`, and it leaves nothing to coalesce into — a retry of it plays.
    case failed(SourceID)
    /// The user acted on a source.
    case user(SourceID, UserCommand)
    /// A source disappeared (its process died, its stream closed) without releasing.
    case vanished(SourceID)
    /// A source disappeared and a request takes its place, in one step: what the old one silenced
    /// is judged against the newcomer before anyone is told, so nothing it covered and the
    /// newcomer covers too is told to resume for the instant between (a call the daemon makes
    /// again after a reload reopened one of its zones: the music it interrupted played over it).
    case replaced(SourceID, by: Request)
    /// The timer from the last ``Effect/Action/scheduleTimer(at:)`` fired, or the clock moved on.
    case tick
    /// The configuration changed.
    case policy(Policy)
}
