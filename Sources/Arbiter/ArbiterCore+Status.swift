// Status queries behind the public ones on Arbiter. Pure reads.
extension ArbiterCore {
    /// The state of `source`, or `nil` if the arbiter does not know it (never requested, or finished).
    func state(of source: SourceID) -> SourceState? {
        guard let i = index(of: source) else { return nil }
        let record = records[i]
        return state(of: record)
    }

    /// The duck stage of `source` in `zone` as last sent to the daemon: 0 dB when not ducked or unknown.
    /// Independent of the user's volume, which the arbiter never changes.
    func duckGain(of source: SourceID, in zone: ZoneID) -> Decibels {
        guard let i = index(of: source), let k = records[i].zones.firstIndex(of: zone) else { return .unity }
        return records[i].outputs[k].duck?.level ?? .unity
    }

    /// Whether `source` is muted in `zone` as last sent to the daemon.
    func isMuted(_ source: SourceID, in zone: ZoneID) -> Bool {
        guard let i = index(of: source), let k = records[i].zones.firstIndex(of: zone) else { return false }
        return records[i].outputs[k].muted
    }

    /// A snapshot of `source`, or `nil` if unknown.
    func status(of source: SourceID) -> SourceStatus? {
        guard let i = index(of: source) else { return nil }
        let record = records[i]
        return status(of: record)
    }

    /// Snapshots of every known source, in arrival order.
    var sources: [SourceStatus] { records.map { status(of: $0) } }

    /// Every zone named by a known source, sorted.
    var zones: [ZoneID] { Array(Set(records.flatMap(\.zones))).sorted() }

    /// A snapshot of `zone`: who holds it, who is ducked or silenced there and why, who waits.
    func status(of zone: ZoneID) -> ZoneStatus {
        var result = ZoneStatus(zone: zone, audible: [], ducked: [], silenced: [], queued: [])
        let holders = self.holders
        let here = records.filter { $0.zones.contains(zone) }
        for record in here.sorted(by: { ($0.priority, $1.sequence) > ($1.priority, $0.sequence) }) {
            guard record.granted else {
                result.queued.append(record.id)
                continue
            }
            let verdict = verdict(priority: record.priority, in: zone, holders: holders)
            if let silencer = verdict.silencedBy {
                result.silenced.append((record.id, records[silencer].contender))
            } else {
                result.audible.append(record.id)
                if let duck = verdict.duck, let by = verdict.duckedBy {
                    result.ducked.append((record.id, duck.level, records[by].contender))
                }
            }
        }
        return result
    }

    func state(of record: Record) -> SourceState {
        if !record.granted { return .queued }
        // Covered, and it will not resume when the cover ends (paused before or meanwhile, sought,
        // changed, taken over): it reads paused. (A cover that outlasts resume-within reads
        // interrupted until it ends: the state does not look at the clock.)
        if let interruption = record.interruption {
            return resumeDecision(interruption, rules: record.rules, at: nil).resume ? .interrupted : .paused
        }
        if record.paused { return .paused }
        // After every input the gain stages sent equal the zones' verdicts, so they tell whether it is ducked.
        let ducked = record.outputs.contains { !$0.muted && $0.duck != nil }
        return ducked ? .ducked : .playing
    }

    func status(of record: Record) -> SourceStatus {
        let holders = self.holders
        let entries = record.zones.map { zone -> ZoneEntry in
            guard record.granted else { return ZoneEntry(zone: zone, audibility: .silenced, cause: nil) }
            let verdict = verdict(priority: record.priority, in: zone, holders: holders)
            if let silencer = verdict.silencedBy {
                return ZoneEntry(zone: zone, audibility: .silenced, cause: records[silencer].contender)
            }
            if let duck = verdict.duck {
                return ZoneEntry(
                    zone: zone, audibility: .ducked(duck.level), cause: verdict.duckedBy.map { records[$0].contender })
            }
            return ZoneEntry(zone: zone, audibility: .audible, cause: nil)
        }
        // What covers it now, as its zones' status says: the strongest of its silencers (the first
        // in zone order among equals, as `interruptionBegan` picks) — not the one its interruption
        // began with, which may be gone (a doorbell granted when the call ended).
        let covering = entries.compactMap { $0.audibility == .silenced ? $0.cause : nil }
        return SourceStatus(
            contender: record.contender, state: state(of: record), zones: entries,
            interruptedBy: record.interruption.map { interruption in
                covering.max { $0.priority < $1.priority } ?? interruption.by
            })
    }
}
