// Requests: coalescing, equal-priority rules, the queue, expiry and the timer.
extension ArbiterCore {
    mutating func receive(_ request: Request, now: Instant) {
        guard let rules = policy[request.sourceClass] else {
            emit(.rejected(request.source), .unknownClass(request.sourceClass))
            return
        }
        let zones = Array(Set(request.zones)).sorted()
        guard !zones.isEmpty else {
            emit(.rejected(request.source), .noZones)
            return
        }
        if index(of: request.source) != nil {
            finish(request.source, reason: .superseded)
        }
        // Never into the source's own earlier request: that one was just superseded and will not play.
        if let key = request.coalesceKey, rules.coalesceWindow != nil,
            let entry = coalesceMemory.first(where: {
                $0.sourceClass == request.sourceClass && $0.key == key && $0.source != request.source
                    && zones.allSatisfy($0.zones.contains)
            })
        {
            emit(.coalesced(request.source, into: entry.source), .coalesceWindow(key: key, window: entry.window))
            return
        }
        let record = Record(
            id: request.source, sourceClass: request.sourceClass,
            kind: request.kind ?? rules.kind, zones: zones, coalesceKey: request.coalesceKey,
            sequence: nextSequence, requestedAt: now, rules: rules, ownTTL: request.ttl,
            outputs: Array(repeating: ZoneOutput(), count: zones.count))
        nextSequence += 1

        // Equal priority: the arriving class's `same` rule. A replace takes the old ones out only once
        // the newcomer is known to be granted or queued: refused by `during-higher` or a full queue
        // after it, it lost them for nothing (the music a call interrupted told it lost for good, and
        // the new playlist refused: nothing played after the call).
        var replaced: [Record] = []
        let equals = records.filter { $0.priority == rules.priority && $0.overlaps(zones) }
        if let first = equals.first {
            switch rules.same {
            case .mix:
                break
            case .replace:
                replaced = equals
            case .reject:
                emit(.rejected(record.id), .sameRejects((equals.first { $0.granted } ?? first).contender))
                return
            case .queue:
                enqueue(record, reason: .queuedBehind((equals.last { !$0.granted } ?? first).contender))
                return
            }
        }

        // Higher priority interrupting every zone: the arriving class's `during-higher` rule. (The
        // replaced ones are of the newcomer's priority: they silence nothing it would hear.)
        if let blocker = blockerInAllZones(priority: rules.priority, zones: zones, holders: holders) {
            let by = records[blocker].contender
            switch rules.duringHigher {
            case .queue:
                // A request that may wait no time (`ttl: 0`, "now or never") is queued only to expire
                // in this same step: it is not let in, and replaces nothing. (Replaced here, the music
                // a call interrupted was lost for good, the newcomer expired: nothing after the call.)
                // Nor does it wait, so a full queue is not why it cannot play: it was refused
                // "queue full", pointing at `queue-limit` instead of its ttl.
                if record.ttl == .zero {
                    enqueue(record, reason: .delayedBy(by), checkingLimit: false)
                    return
                }
                if let limit = fullQueueLimit(for: record, leaving: replaced) {
                    emit(.rejected(record.id), .queueFull(limit: limit))
                    return
                }
                replace(replaced, by: record.contender)
                enqueue(record, reason: .delayedBy(by))
            case .reject:
                emit(.rejected(record.id), .higherRejects(by))
            }
            return
        }

        replace(replaced, by: record.contender)
        var granted = record
        granted.granted = true
        records.append(granted)
        arbitrationChanged = true
        remember(granted, now: now)
        let lower = records.filter { $0.granted && $0.priority < rules.priority && $0.overlaps(zones) }
        emit(.granted(granted.id, zones: zones), .outranks(lower.map(\.contender)))
    }

    /// Takes out the sources a newcomer replaces (`same: replace`): each lost for good.
    mutating func replace(_ old: [Record], by newcomer: Contender) {
        guard !old.isEmpty else { return }
        records.removeAll { r in old.contains { $0.id == r.id } }
        forgetUnplayed(old)
        arbitrationChanged = true
        for record in old {
            emit(.lostForGood(record.id), .replacedBy(newcomer))
        }
    }

    /// The limit of `record`'s class's queue if it is full, not counting the requests in `leaving`
    /// (those a replace will take out); nil when `record` may wait.
    func fullQueueLimit(for record: Record, leaving: [Record] = []) -> Int? {
        guard let limit = record.rules.queueLimit else { return nil }
        let waiting = records.withUnsafeBufferPointer { records in
            records.indices.count { j in
                !records[j].granted && records[j].sourceClass == record.sourceClass
                    && !leaving.contains { $0.id == records[j].id }
            }
        }
        return waiting >= limit ? limit : nil
    }

    /// Queues `record` unless its class's queue is full (`checkingLimit` false: one that expires
    /// in this same step, `ttl: 0`, whatever the queue holds).
    mutating func enqueue(_ record: Record, reason: Reason, checkingLimit: Bool = true) {
        if checkingLimit, let limit = fullQueueLimit(for: record) {
            emit(.rejected(record.id), .queueFull(limit: limit))
            return
        }
        records.append(record)
        arbitrationChanged = true
        remember(record, now: record.requestedAt)
        emit(.queued(record.id), reason)
    }

    mutating func remember(_ record: Record, now: Instant) {
        guard let key = record.coalesceKey, let window = record.rules.coalesceWindow else { return }
        coalesceMemory.append(
            CoalesceEntry(
                sourceClass: record.sourceClass, key: key, zones: record.zones,
                source: record.id, at: now, window: window))
    }

    /// Requests taken out that never played leave nothing to coalesce into: a repeat of one plays.
    /// (A queued doorbell stopped, replaced or dropped, and the next press within the window was
    /// coalesced into it: no chime at all.)
    mutating func forgetUnplayed(_ removed: [Record]) {
        for record in removed where !record.granted {
            coalesceMemory.removeAll { $0.source == record.id }
        }
    }

    mutating func pruneCoalesceMemory(now: Instant) {
        coalesceMemory.removeAll { $0.at.advanced(by: $0.window) <= now }
    }

    /// The index of the highest-priority granted source above `priority` if such sources interrupt every zone in `zones`
    /// (so a request there would be heard nowhere); `nil` if some zone would hear it.
    func blockerInAllZones(priority: Int, zones: [ZoneID], holders: [Holder]) -> Int? {
        var strongest: Int?
        for zone in zones {
            guard let silencer = silencer(above: priority, in: zone, holders: holders) else { return nil }
            if strongest == nil || holders[silencer].priority > holders[strongest!].priority { strongest = silencer }
        }
        return strongest
    }

    /// Drops queued requests older than their ttl (their request's, else their class's).
    mutating func expireQueued(now: Instant) {
        var stale: [Int] = []
        var j = 0
        while j < records.count {
            if !records[j].granted, let ttl = records[j].ttl, records[j].requestedAt.duration(to: now) >= ttl {
                stale.append(j)
            }
            j += 1
        }
        for j in stale {
            emit(.expired(records[j].id), .ttlElapsed(records[j].ttl!))
        }
        forgetUnplayed(stale.map { records[$0] })
        for j in stale.reversed() {
            records.remove(at: j)
            arbitrationChanged = true
        }
    }

    /// Grants queued requests that can be heard now: highest priority first, first in first out within one.
    /// A waiting request reserves its zones against later requests of its priority, so the queue stays FIFO
    /// per zone.
    mutating func grantQueued(now: Instant) {
        var waiting: [Int] = []
        var j = 0
        while j < records.count {
            if !records[j].granted { waiting.append(j) }
            j += 1
        }
        guard !waiting.isEmpty else { return }
        waiting.sort { (records[$0].priority, records[$1].sequence) > (records[$1].priority, records[$0].sequence) }
        var holders = self.holders
        var reserved: [(priority: Int, zones: [ZoneID])] = []
        for i in waiting {
            let priority = holders[i].priority
            let zones = holders[i].zones
            let blockedByEqual =
                records[i].rules.same != .mix
                && (holders.contains {
                    $0.granted && $0.priority == priority && $0.zones.contains(where: zones.contains)
                }
                    || reserved.contains { $0.priority == priority && $0.zones.contains(where: zones.contains) })
            if blockedByEqual || blockerInAllZones(priority: priority, zones: zones, holders: holders) != nil {
                reserved.append((priority, zones))
                continue
            }
            holders[i].granted = true
            records[i].granted = true
            arbitrationChanged = true
            // A pause given while it waited holds: it is granted paused (its zones taken, silent) and
            // plays at the user's play. (Cleared here, music paused during a call played when the
            // call ended, and a player paused on the phone meanwhile read "playing".)
            emit(.granted(records[i].id, zones: zones), .waited(records[i].requestedAt.duration(to: now)))
        }
    }

    /// After a policy change, rejects the newest queued requests beyond their class's new limit.
    mutating func trimQueues() {
        var counts: [SourceClass: Int] = [:]
        var dropped: [Record] = []
        for record in records where !record.granted {
            counts[record.sourceClass, default: 0] += 1
            if let limit = record.rules.queueLimit, counts[record.sourceClass]! > limit {
                dropped.append(record)
            }
        }
        records.removeAll { r in dropped.contains { $0.id == r.id } }
        forgetUnplayed(dropped)
        arbitrationChanged = true
        for record in dropped {
            emit(.rejected(record.id), .queueFull(limit: record.rules.queueLimit!))
        }
    }

    /// Sends `scheduleTimer` when the earliest queue expiry changed.
    mutating func scheduleNextExpiry() {
        let deadline: Instant? = records.withUnsafeBufferPointer { records in
            var deadline: Instant?
            for j in records.indices where !records[j].granted {
                guard let ttl = records[j].ttl else { continue }
                let expiry = records[j].requestedAt.advanced(by: ttl)
                if deadline == nil || expiry < deadline! { deadline = expiry }
            }
            return deadline
        }
        if deadline != announcedDeadline, let deadline {
            emit(.scheduleTimer(at: deadline), .nextExpiry)
        }
        announcedDeadline = deadline
    }
}
