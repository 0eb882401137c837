// Per-zone arbitration: who silences or ducks whom, and the effects that bring the daemon in line.
extension ArbiterCore {
    /// What a zone should do with one granted source. Sources are named by their index in `records`,
    /// valid until the records change.
    struct ZoneVerdict {
        /// The strongest higher-priority source interrupting it there, if any.
        var silencedBy: Int?
        /// The higher-priority source ducking it there (only when not silenced).
        var duckedBy: Int?
        var duck: DuckPolicy?

        var heard: Bool { silencedBy == nil }
    }

    /// What per-zone arbitration needs of one record, cheap to copy (debug builds spend most of their time
    /// copying whole records otherwise). Parallel to `records`; rebuilt whenever grants change.
    struct Holder {
        var granted: Bool
        var priority: Int
        var lower: LowerAction
        var duck: DuckPolicy
        var zones: [ZoneID]
    }

    /// A snapshot of every record for ``silencer(above:in:holders:)`` and ``verdict(priority:in:holders:)``.
    var holders: [Holder] {
        var result: [Holder] = []
        result.reserveCapacity(records.count)
        for record in records {
            result.append(
                Holder(
                    granted: record.granted, priority: record.rules.priority, lower: record.rules.lower,
                    duck: record.rules.duck ?? policy.duck, zones: record.zones))
        }
        return result
    }

    /// The index of the strongest granted source above `priority` in `zone` whose class interrupts lower ones
    /// (the earliest among equals).
    func silencer(above priority: Int, in zone: ZoneID, holders: [Holder]) -> Int? {
        var best: Int?
        var bestPriority = priority
        var j = 0
        while j < holders.count {
            let h = holders[j]
            if h.granted && h.priority > bestPriority && h.lower == .interrupt && Self.zones(h.zones, contain: zone) {
                best = j
                bestPriority = h.priority
            }
            j += 1
        }
        return best
    }

    /// `zones.contains(zone)` as a plain loop: the generic algorithm is the slowest part of debug builds.
    static func zones(_ zones: [ZoneID], contain zone: ZoneID) -> Bool {
        var k = 0
        while k < zones.count {
            if zones[k].rawValue == zone.rawValue { return true }
            k += 1
        }
        return false
    }

    /// What `zone` does with a granted source of `priority`.
    func verdict(priority: Int, in zone: ZoneID, holders: [Holder]) -> ZoneVerdict {
        if let silencer = silencer(above: priority, in: zone, holders: holders) {
            return ZoneVerdict(silencedBy: silencer)
        }
        var verdict = ZoneVerdict()
        var duckPriority = priority
        var j = 0
        while j < holders.count {
            let h = holders[j]
            j += 1
            guard h.granted && h.priority > priority && h.lower == .duck && Self.zones(h.zones, contain: zone) else {
                continue
            }
            // The deepest duck wins; equal depth goes to the higher priority, then the earlier arrival.
            if verdict.duck == nil || h.duck.level < verdict.duck!.level
                || (h.duck.level == verdict.duck!.level && h.priority > duckPriority)
            {
                verdict.duck = h.duck
                verdict.duckedBy = j - 1
                duckPriority = h.priority
            }
        }
        return verdict
    }

    /// Brings every granted source's interruption and gain stages in line with the current grants.
    mutating func reconcile(now: Instant) {
        let holders = self.holders
        for i in holders.indices where holders[i].granted {
            let verdicts = holders[i].zones.map { verdict(priority: holders[i].priority, in: $0, holders: holders) }
            let record = records[i]
            let heard = verdicts.contains { $0.heard }
            if var interruption = record.interruption {
                if heard {
                    syncOutputs(at: i, verdicts)
                    endInterruption(at: i, interruption, now: now)
                } else {
                    interruption.see(
                        takeovers: permanentInterrupters(of: record).map { records[$0].contender }, at: inputCount)
                    records[i].interruption = interruption
                }
            } else if heard {
                syncOutputs(at: i, verdicts)
            } else {
                let silencers = verdicts.compactMap(\.silencedBy)
                let strongest = records[silencers.max { records[$0].priority < records[$1].priority }!].contender
                var interruption = Interruption(began: now, wasPlaying: !record.paused, by: strongest)
                interruption.see(
                    takeovers: permanentInterrupters(of: record).map { records[$0].contender }, at: inputCount)
                records[i].interruption = interruption
                emit(.interruptionBegan(record.id, zones: record.zones), .interruptedBy(strongest))
            }
        }
    }

    /// The permanent granted sources of higher priority interrupting `record` in any of its zones:
    /// takeovers, after which the interrupted source is not told to resume.
    func permanentInterrupters(of record: Record) -> [Int] {
        records.indices.filter { j in
            records[j].granted && records[j].kind == .permanent && records[j].priority > record.priority
                && records[j].rules.lower == .interrupt && records[j].overlaps(record.zones)
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
                    emit(
                        .duckBegan(id, zone: zone, level: duck.level, attack: duck.attack),
                        .duckedBy(records[verdict.duckedBy!].contender))
                } else if let old = current.duck {
                    emit(.duckEnded(id, zone: zone, release: old.release), .restored)
                }
            }
            if wanted.muted != current.muted {
                if wanted.muted {
                    emit(.muted(id, zone: zone), .interruptedBy(records[verdict.silencedBy!].contender))
                } else {
                    emit(.unmuted(id, zone: zone), .restored)
                }
            }
            records[i].outputs[k] = wanted
        }
    }

    /// What an interruption ending at `now` decides, by the contract's rules in order: whether the
    /// source resumes, and why. Without `now` (what it would be, for the state while it is covered)
    /// `resume-within` is not looked at.
    func resumeDecision(_ interruption: Interruption, rules: ClassPolicy, at now: Instant?) -> (
        resume: Bool, reason: Reason
    ) {
        let lasted = now.map { interruption.began.duration(to: $0) } ?? .zero
        if let (command, at, input) = interruption.playOrPause {
            // The user's own word, the last given, comes first: a pause keeps it paused; a play is
            // not lost to the interruption it came in — but a takeover after it, or a cover that
            // outlasts resume-within counted from it, still holds.
            guard command == .play else { return (false, .userCommand(command)) }
            if let permanent = interruption.permanentBy, let since = interruption.permanentSince, since > input {
                return (false, .permanentTakeover(permanent))
            }
            if let now, let limit = rules.resumeWithin, at.duration(to: now) > limit {
                return (false, .resumeWindowExceeded(lasted: at.duration(to: now), limit: limit))
            }
            return (true, .userCommand(.play))
        }
        if !interruption.wasPlaying { return (false, .notPlayingWhenBegan) }
        if let permanent = interruption.permanentBy { return (false, .permanentTakeover(permanent)) }
        if let command = interruption.userCommand { return (false, .userCommand(command)) }
        if now != nil, let limit = rules.resumeWithin, lasted > limit {
            return (false, .resumeWindowExceeded(lasted: lasted, limit: limit))
        }
        return (true, .interruptionOver(lasted: lasted))
    }

    /// Whether `source`'s interruption, were it to end at `now`, would resume it, and for how much
    /// longer that holds: what remains of its class's `resume-within`, counted from the play given
    /// meanwhile or else from the interruption's start (nil: no limit). Nil when it is not
    /// interrupted (or unknown). A pure read.
    func wouldResume(_ source: SourceID, at now: Instant) -> (resume: Bool, within: Duration?)? {
        guard let i = index(of: source), let interruption = records[i].interruption else { return nil }
        let rules = records[i].rules
        guard resumeDecision(interruption, rules: rules, at: now).resume else { return (false, nil) }
        guard let limit = rules.resumeWithin else { return (true, nil) }
        let from = interruption.playOrPause?.at ?? interruption.began
        return (true, limit - from.duration(to: now))
    }

    /// Sends `interruptionEnded` with `resumeDecision`'s verdict.
    mutating func endInterruption(at i: Int, _ interruption: Interruption, now: Instant) {
        let (shouldResume, reason) = resumeDecision(interruption, rules: records[i].rules, at: now)
        records[i].interruption = nil
        records[i].paused = !shouldResume
        emit(.interruptionEnded(records[i].id, shouldResume: shouldResume), reason)
    }
}
