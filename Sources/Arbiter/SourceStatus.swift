/// What a source is doing, as the daemon should show it. Never lies: `playing` means heard somewhere.
public enum SourceState: String, Hashable, Sendable {
    /// Waiting in the queue for its zones.
    case queued
    /// Granted and heard at full level in at least one zone.
    case playing
    /// Granted and heard, attenuated by a duck in at least one zone. Still playing, not interrupted.
    case ducked
    /// Granted but heard in no zone: told `interruptionBegan`, not yet `interruptionEnded`.
    case interrupted
    /// Granted but not playing: paused by the user, or told not to resume.
    case paused

    /// Whether the source is audible somewhere (`playing` or `ducked`).
    public var isAudible: Bool { self == .playing || self == .ducked }
}

/// What one zone does with one granted source.
public enum ZoneAudibility: Hashable, Sendable {
    /// Heard at full level (the duck stage at 0 dB).
    case audible
    /// Heard through the duck stage at this level.
    case ducked(Decibels)
    /// Not heard here: muted, or the whole source is interrupted.
    case silenced
}

/// One source in one zone, for status pages.
public struct ZoneEntry: Hashable, Sendable {
    /// The zone.
    public var zone: ZoneID
    /// What the zone does with the source.
    public var audibility: ZoneAudibility
    /// The higher-priority source silencing or ducking it there, if any.
    public var cause: Contender?

    /// Creates an entry (for tests and status fakes; the arbiter makes its own).
    public init(zone: ZoneID, audibility: ZoneAudibility, cause: Contender?) {
        self.zone = zone
        self.audibility = audibility
        self.cause = cause
    }
}

/// A snapshot of one source.
public struct SourceStatus: Hashable, Sendable {
    /// The source, its class, priority and kind.
    public var contender: Contender
    /// What it is doing.
    public var state: SourceState
    /// Per zone, in zone order. Queued sources list their zones as silenced with no cause.
    public var zones: [ZoneEntry]
    /// While interrupted: what covers it now, the strongest of what silences it in its zones (the
    /// first in zone order among equals), as its zones' ``ZoneStatus/silenced`` say — not
    /// necessarily the source its `interruptionBegan` named, which may have ended since.
    public var interruptedBy: Contender?
}

/// A snapshot of one zone.
public struct ZoneStatus: Hashable, Sendable {
    /// The zone.
    public var zone: ZoneID
    /// Sources heard there, at full level or ducked, highest priority first.
    public var audible: [SourceID]
    /// Sources heard there through a duck, with their level and who ducks them.
    public var ducked: [(source: SourceID, level: Decibels, by: Contender)]
    /// Granted sources not heard there, with who silences them.
    public var silenced: [(source: SourceID, by: Contender)]
    /// Requests waiting for the zone, in the order they would be granted.
    public var queued: [SourceID]

    public static func == (lhs: ZoneStatus, rhs: ZoneStatus) -> Bool {
        lhs.zone == rhs.zone && lhs.audible == rhs.audible && lhs.queued == rhs.queued
            && lhs.ducked.elementsEqual(rhs.ducked) { $0.source == $1.source && $0.level == $1.level && $0.by == $1.by }
            && lhs.silenced.elementsEqual(rhs.silenced) { $0.source == $1.source && $0.by == $1.by }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(zone)
        hasher.combine(audible)
        hasher.combine(queued)
    }
}
