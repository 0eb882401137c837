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
}

/// A snapshot of one source.
public struct SourceStatus: Hashable, Sendable {
    /// The source, its class, priority and kind.
    public var contender: Contender
    /// What it is doing.
    public var state: SourceState
    /// Per zone, in zone order. Queued sources list their zones as silenced with no cause.
    public var zones: [ZoneEntry]
    /// While interrupted: who interrupted it (the strongest when it began).
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

// The query API the daemon uses for status. Pure reads; never changes the arbiter.
extension Arbiter {
    /// The state of `source`, or `nil` if the arbiter does not know it (never requested, or finished).
    public func state(of source: SourceID) -> SourceState? {
        guard let record = records.first(where: { $0.id == source }) else { return nil }
        return state(of: record)
    }

    /// The duck stage of `source` in `zone` as last sent to the daemon: 0 dB when not ducked or unknown.
    /// Independent of the user's volume, which the arbiter never changes.
    public func duckGain(of source: SourceID, in zone: ZoneID) -> Decibels {
        guard let record = records.first(where: { $0.id == source }),
              let k = record.zones.firstIndex(of: zone) else { return .unity }
        return record.outputs[k].duck?.level ?? .unity
    }

    /// Whether `source` is muted in `zone` as last sent to the daemon.
    public func isMuted(_ source: SourceID, in zone: ZoneID) -> Bool {
        guard let record = records.first(where: { $0.id == source }),
              let k = record.zones.firstIndex(of: zone) else { return false }
        return record.outputs[k].muted
    }

    /// A snapshot of `source`, or `nil` if unknown.
    public func status(of source: SourceID) -> SourceStatus? {
        guard let record = records.first(where: { $0.id == source }) else { return nil }
        return status(of: record)
    }

    /// Snapshots of every known source, in arrival order.
    public var sources: [SourceStatus] { records.map { status(of: $0) } }

    /// Every zone named by a known source, sorted.
    public var zones: [ZoneID] { Array(Set(records.flatMap(\.zones))).sorted() }

    /// A snapshot of `zone`: who holds it, who is ducked or silenced there and why, who waits.
    public func status(of zone: ZoneID) -> ZoneStatus {
        var result = ZoneStatus(zone: zone, audible: [], ducked: [], silenced: [], queued: [])
        let here = records.filter { $0.zones.contains(zone) }
        for record in here.sorted(by: { ($0.priority, $1.sequence) > ($1.priority, $0.sequence) }) {
            guard record.granted else {
                result.queued.append(record.id)
                continue
            }
            let verdict = verdict(for: record, in: zone)
            if let silencer = verdict.silencedBy {
                result.silenced.append((record.id, silencer.contender))
            } else {
                result.audible.append(record.id)
                if let duck = verdict.duck, let by = verdict.duckedBy {
                    result.ducked.append((record.id, duck.level, by.contender))
                }
            }
        }
        return result
    }

    func state(of record: Record) -> SourceState {
        if !record.granted { return .queued }
        if record.interruption != nil { return .interrupted }
        if record.paused { return .paused }
        let ducked = record.zones.contains { zone in
            let verdict = verdict(for: record, in: zone)
            return verdict.heard && verdict.duck != nil
        }
        return ducked ? .ducked : .playing
    }

    func status(of record: Record) -> SourceStatus {
        let entries = record.zones.map { zone -> ZoneEntry in
            guard record.granted else { return ZoneEntry(zone: zone, audibility: .silenced, cause: nil) }
            let verdict = verdict(for: record, in: zone)
            if let silencer = verdict.silencedBy {
                return ZoneEntry(zone: zone, audibility: .silenced, cause: silencer.contender)
            }
            if let duck = verdict.duck {
                return ZoneEntry(zone: zone, audibility: .ducked(duck.level), cause: verdict.duckedBy?.contender)
            }
            return ZoneEntry(zone: zone, audibility: .audible, cause: nil)
        }
        return SourceStatus(contender: record.contender, state: state(of: record), zones: entries,
                            interruptedBy: record.interruption?.by)
    }
}
