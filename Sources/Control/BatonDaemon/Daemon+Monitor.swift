import OSThread

extension Daemon {
    /// One pass of the monitor: sources' upkeep (feeding rings, track changes), drained sources
    /// released, timers fired, zone availability reported. Returns the nanoseconds until the next
    /// pass is needed (the soonest of the sources' `nextTick` and the arbiter's timer), nil when
    /// nothing is due. Monitor thread; tests call it directly.
    @discardableResult
    func tick() -> Int? {
        let truth = self.truth
        return state.withLock { s -> Int? in
            external.tick(&s)
            startWaitingSources(&s)
            var done: [Playback] = []
            for p in s.playbacks.values where p.started && (p.noSlot != nil || p.source.isDrained) && !p.released {
                done.append(p)
            }
            for p in done.sorted(by: { $0.id < $1.id }) {
                p.released = true
                if let why = p.noSlot { p.endReason = why }  // a call's `call ended: …` says it
                p.music?.reportGaveUp()  // before "played": the monitor may not have looked since it gave up
                let frames = Dictionary(
                    uniqueKeysWithValues: p.parts.compactMap { part in part.slot?.lastFrameAt.map { (part.zone, $0) } })
                let why = (p.noSlot ?? p.music?.progress.gaveUp ?? p.source.endedEarly).map { "stopped: \($0)" }
                events.publish(
                    type: .played, source: p.id.rawValue, zones: p.zones,
                    reason: why ?? "sound \(p.source.label) played to its end", zoneFrames: frames)
                // One that failed leaves nothing to coalesce into: a retry plays.
                apply(s.arbiter.release(p.id, failed: why != nil, at: .now), &s)
                // Its last frames are still in the devices' buffers: heard until they play out (not
                // at volume 0: nothing of it is heard).
                for (zone, end) in frames where p.volume > 0 {
                    s.retiring.append(Retiring(source: p.id.rawValue, zone: zone, end: end))
                }
            }
            s.retiring.removeAll { r in
                guard let zone = output(r.zone) else { return true }
                let snap = zone.device.snapshot()
                return !snap.available || snap.audibleFrame >= r.end
            }
            if let t = s.timer, t <= .now {
                s.timer = nil
                apply(s.arbiter.tick(at: .now), &s)
            }
            truth.follow(&s)
            // What a source tells others (scrobbles, the server's playback report, `track`) follows
            // what is heard — this look, so a source heard for the first time now says so now, not
            // at the next look (up to a second later: nothing else may be due).
            for p in s.playbacks.values where p.started {
                p.source.tick(audible: p.heard && (s.arbiter.state(of: p.id)?.isAudible ?? false))
            }
            for zone in zones.zones { s.availability.report(zone, events: events, logger: logger) }
            followStreams(&s)
            var next = endStaleAnnouncements(&s)
            for p in s.playbacks.values where p.started && !p.released {
                if let n = p.source.nextTick { next = min(next ?? n, n) }
            }
            if let look = truth.nextLook(s) { next = min(next ?? look, look) }
            // A source waiting for a free slot: asked again in 2 ms (`startWaitingSources`).
            if s.playbacks.values.contains(where: { $0.awaitingSlots != nil }) {
                next = min(next ?? 2_000_000, 2_000_000)
            }
            if let t = s.timer {
                let n = max(0, ContinuousClock.now.duration(to: t).wholeNanoseconds)
                next = min(next ?? n, n)
            }
            return next
        }
    }
}
