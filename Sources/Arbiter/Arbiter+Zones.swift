// Per-zone arbitration: who silences or ducks whom, and the effects that bring the daemon in line.
extension Arbiter {
    /// What a zone should do with one granted source.
    struct ZoneVerdict {
        /// The strongest higher-priority source interrupting it there, if any.
        var silencedBy: Record?
        /// The strongest higher-priority source ducking it there (only when not silenced).
        var duckedBy: Record?
        var duck: DuckPolicy?

        var heard: Bool { silencedBy == nil }
    }

    /// The strongest granted source above `priority` in `zone` whose class interrupts lower ones.
    func silencer(above priority: Int, in zone: ZoneID, excluding source: SourceID?) -> Record? {
        var best: Record?
        for other in records where other.granted && other.priority > priority && other.rules.lower == .interrupt
            && other.id != source && other.zones.contains(zone) {
            if best == nil || other.priority > best!.priority { best = other }
        }
        return best
    }

    func verdict(for record: Record, in zone: ZoneID) -> ZoneVerdict {
        if let silencer = silencer(above: record.priority, in: zone, excluding: record.id) {
            return ZoneVerdict(silencedBy: silencer)
        }
        var verdict = ZoneVerdict()
        for other in records where other.granted && other.priority > record.priority && other.rules.lower == .duck
            && other.zones.contains(zone) {
            let duck = other.rules.duck ?? policy.duck
            // The deepest duck wins; equal depth goes to the higher priority, then the earlier arrival.
            if verdict.duck == nil || duck.level < verdict.duck!.level
                || (duck.level == verdict.duck!.level && other.priority > verdict.duckedBy!.priority) {
                verdict.duck = duck
                verdict.duckedBy = other
            }
        }
        return verdict
    }

    /// Brings every granted source's interruption and gain stages in line with the current grants.
    mutating func reconcile(now: Instant) {
        for i in records.indices where records[i].granted {
            let record = records[i]
            let verdicts = record.zones.map { verdict(for: record, in: $0) }
            let heard = verdicts.contains { $0.heard }
            if var interruption = record.interruption {
                if heard {
                    syncOutputs(at: i, verdicts)
                    endInterruption(at: i, interruption, now: now)
                } else if interruption.permanentBy == nil,
                          let permanent = verdicts.lazy.compactMap(\.silencedBy).first(where: { $0.kind == .permanent }) {
                    interruption.permanentBy = permanent.contender
                    records[i].interruption = interruption
                }
            } else if heard {
                syncOutputs(at: i, verdicts)
            } else {
                let silencers = verdicts.compactMap(\.silencedBy)
                let strongest = silencers.max { $0.priority < $1.priority }!
                records[i].interruption = Interruption(
                    began: now, wasPlaying: !record.paused, by: strongest.contender,
                    permanentBy: silencers.first { $0.kind == .permanent }?.contender, userCommand: nil)
                emit(.interruptionBegan(record.id, zones: record.zones), .interruptedBy(strongest.contender))
            }
        }
    }

    /// Sends the duck and mute changes for one heard source.
    mutating func syncOutputs(at i: Int, _ verdicts: [ZoneVerdict]) {
        let id = records[i].id
        for (k, zone) in records[i].zones.enumerated() {
            let current = records[i].outputs[k]
            let verdict = verdicts[k]
            var wanted = current
            wanted.muted = !verdict.heard
            if verdict.heard { wanted.duck = verdict.duck }
            if wanted.duck != current.duck {
                if let duck = wanted.duck {
                    emit(.duckBegan(id, zone: zone, level: duck.level, attack: duck.attack),
                         .duckedBy(verdict.duckedBy!.contender))
                } else if let old = current.duck {
                    emit(.duckEnded(id, zone: zone, release: old.release), .restored)
                }
            }
            if wanted.muted != current.muted {
                if wanted.muted {
                    emit(.muted(id, zone: zone), .interruptedBy(verdict.silencedBy!.contender))
                } else {
                    emit(.unmuted(id, zone: zone), .restored)
                }
            }
            records[i].outputs[k] = wanted
        }
    }

    /// Sends `interruptionEnded`, deciding `shouldResume` by the contract's rules in order.
    mutating func endInterruption(at i: Int, _ interruption: Interruption, now: Instant) {
        let lasted = interruption.began.duration(to: now)
        let reason: Reason
        if !interruption.wasPlaying {
            reason = .notPlayingWhenBegan
        } else if let permanent = interruption.permanentBy {
            reason = .permanentTakeover(permanent)
        } else if let command = interruption.userCommand {
            reason = .userCommand(command)
        } else if let limit = records[i].rules.resumeWithin, lasted > limit {
            reason = .resumeWindowExceeded(lasted: lasted, limit: limit)
        } else {
            reason = .interruptionOver(lasted: lasted)
        }
        let shouldResume = if case .interruptionOver = reason { true } else { false }
        records[i].interruption = nil
        records[i].paused = !shouldResume
        emit(.interruptionEnded(records[i].id, shouldResume: shouldResume), reason)
    }
}
