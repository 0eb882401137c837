import Arbiter
import AudioCore
import BatonConfig
import ControlParts
import Players

/// Carrying out the arbiter's effects: events for all, slots claimed for grants and released for
/// ends, and every slot brought in line with what the arbiter says (paused, resumed, muted, ducked).
extension Daemon {
    /// Under the lock.
    ///
    /// Every event of one decision carries the frame the next render starts at in its zones, read
    /// once for the whole decision (an output thread may render between two events; with a
    /// device-paced zone it may be blocked writing a period rendered before the decision, so the
    /// device's frames-played counter would be a period early). Right after reading them, before
    /// anything that can take long (publishing wakes subscribers, a starting source writes its
    /// rings) and so leave a thread descheduled, the slots of the sources already playing are set
    /// as the decision says — paused, resumed, ducked — so the audio changes at the frame the
    /// events name, within a period: the 30-minute soak saw an interruption heard 27.5 ms after
    /// its frame when the slots were set only after the events.
    func apply(_ effects: [Effect<Instant>], _ s: inout State) {
        // What one arbiter step changes (a pause and the announcement that caused it) reaches each
        // output together: one take-back renders both in (`ChangeBell`).
        let devices = zones.devices
        for d in devices { d.holdChanges() }
        defer { for d in devices { d.releaseChanges() } }
        var ramps: [String: Int] = [:]  // "source/zone" → ramp frames for a duck change
        var ending: Set<SourceID> = []
        var next: [String: Int] = [:]
        for e in effects {
            switch e.action {
            case .duckBegan(let id, let zone, _, let attack):
                ramps["\(id)/\(zone)"] = output(zone.rawValue)?.frames(attack)
            case .duckEnded(let id, let zone, let release):
                ramps["\(id)/\(zone)"] = output(zone.rawValue)?.frames(release)
            case .rejected(let id), .coalesced(let id, _), .expired(let id), .lostForGood(let id), .finished(let id):
                ending.insert(id)
            default: break
            }
            for z in e.action.source.flatMap({ s.playbacks[$0] })?.zones ?? [] where next[z] == nil {
                next[z] = output(z)?.mixer.nextFrame
            }
        }
        for p in s.playbacks.values where p.started && !ending.contains(p.id) { reconcile(p, &s, ramps: ramps) }
        for e in effects {
            let frames = e.action.source.flatMap { s.playbacks[$0] }.map { p in
                Dictionary(uniqueKeysWithValues: p.zones.compactMap { z in next[z].map { (z, $0) } })
            }
            events.publish(e, zoneFrames: frames)
            logger.debug("arbiter: \(e)")
            switch e.action {
            case .granted(let id, _):
                start(id, &s)
            case .rejected(let id):
                finish(id, &s, why: "refused by the policy")
            case .coalesced(let id, _):
                finish(id, &s, why: "merged into another request")
            case .expired(let id):
                finish(id, &s, why: "it waited past its ttl")
            case .lostForGood(let id):
                // Replaced by a newcomer (or its class gone from the policy): for good.
                (s.playbacks[id]?.source as? ExternalPlayer)?.endsForGood()
                finish(id, &s, why: "its zones were lost")
            case .finished(let id):
                finish(id, &s, why: "stopped")
            case .interruptionBegan(let id, _):
                (s.playbacks[id]?.source as? ExternalPlayer)?.interruption(began: true)
            case .interruptionEnded(let id, let resume):
                (s.playbacks[id]?.source as? ExternalPlayer)?.interruption(began: false, shouldResume: resume)
            case .scheduleTimer(let at):
                s.timer = at
            default:
                break
            }
        }
        // The sources granted now, and any slot the first pass did not cover.
        for p in s.playbacks.values where p.started { reconcile(p, &s, ramps: ramps) }
        // The monitor sleeps until something needs it: sources, drains and timers may have changed.
        if !effects.isEmpty { monitor.wake() }
    }

    /// Claims a slot in each of `p`'s zones, at its gain, or paused at 0 when it is granted but not
    /// heard anywhere yet (a new source begins at its own first sample: no fade in). `fadeIn`: it
    /// goes on from the middle of its stream (`restartInSlots`): it fades in from 0 as a resume does.
    func claimSlots(_ p: Playback, _ s: borrowing State, fadeIn: Bool = false) -> [SourceOutput] {
        let audible = s.arbiter.state(of: p.id)?.isAudible ?? false
        var outputs: [SourceOutput] = []
        for part in p.parts {
            // Held where music is held (`followStreams`): claimed at 0 like one not let be heard, so
            // no fade out of its first frames is mixed where nobody hears them.
            let held = p.sourceClass == .music && isHeld(in: part.zone, p, s)
            guard let zone = output(part.zone),
                let slot = zone.mixer.claimSlot(
                    gain: audible && !held ? target(p, zone: part.zone, s) : 0,
                    atVolumeZero: playsAtVolumeZero(p, zone: part.zone, s), fadeIn: fadeIn)
            else {
                logger.error("zone \(part.zone): every slot is busy; \(p.id) cannot play there")
                continue
            }
            if !audible || held { slot.pause() }
            if held && p.heldSince == nil { p.heldSince = .now }
            part.slot = slot
            outputs.append(
                zone.output(
                    slot, resampler: p.sourceClass == .call ? .callsDefault : config.musicResampler(for: zone.config)))
        }
        monitor.wake()  // a new source: the monitor computes when to feed it
        return outputs
    }

    func start(_ id: SourceID, _ s: inout State) {
        guard let p = s.playbacks[id], !p.started, slotsReady(p) else { return }
        p.started = true
        startInSlots(p, s)
    }

    /// Starts `p`'s source again in fresh slots (a music restart, after its stream ended): now, or
    /// once its zones have a free slot (`slotsReady`). It goes on mid-waveform (a seek, a skip, a
    /// queue edit), so it fades in over the zone's ramp, as the old slots fade out. Under the lock.
    func restartInSlots(_ p: Playback, _ s: inout State) {
        guard p.started, slotsReady(p) else { return }
        startInSlots(p, s, fadeIn: true)
    }

    /// Claims `p`'s slots and starts its source in them. With no slot in any of its zones it is
    /// not started: it ends at the monitor's next look, saying why (`noSlot`) — granted and never
    /// heard, it held its zones (a doorbell interrupted the music for good) and read "starting".
    private func startInSlots(_ p: Playback, _ s: borrowing State, fadeIn: Bool = false) {
        let outputs = claimSlots(p, s, fadeIn: fadeIn)
        if outputs.isEmpty && !p.parts.isEmpty {
            p.noSlot = "every slot of \(p.zones.joined(separator: ", ")) is taken"
            monitor.wake()
            return
        }
        p.noSlot = nil  // a seek before the monitor ended it found a slot: it plays
        p.source.start(outputs)
        // An idle zone's output thread restarts now (on silence, if the source's thread has not
        // written yet: its first frames then come to a running device).
        for o in outputs { o.device.wake() }
    }

    /// Whether `p` may claim its slots now: each of its zones has one free, or it has waited
    /// `slotWait` for one (it then takes what is free). Else it waits, the lock let go of, and the
    /// monitor asks again every 2 ms (`startWaitingSources`). A slot let go of is free only once
    /// the ended stream's thread has ended and the output thread has passed it: a quick run of
    /// seeks or skips outran that, and the music, then a doorbell, found every slot taken —
    /// granted, and silent. Under the lock.
    private func slotsReady(_ p: Playback) -> Bool {
        let since = p.awaitingSlots ?? .now
        if p.parts.allSatisfy({ output($0.zone)?.mixer.hasFreeSlot ?? true })
            || ContinuousClock.now - since >= slotWait
        {
            p.awaitingSlots = nil
            return true
        }
        // The monitor, woken once, then looks every 2 ms (`tick`): woken at each look, it spun.
        if p.awaitingSlots == nil { monitor.wake() }
        p.awaitingSlots = since
        return false
    }

    /// The sources waiting for a free slot (`slotsReady`), started (or started again) once they
    /// have one, in the order they came. Monitor, under the lock.
    func startWaitingSources(_ s: inout State) {
        // Nothing sorted at a look with none waiting (nearly all of them).
        guard s.playbacks.values.contains(where: { $0.awaitingSlots != nil }) else { return }
        for p in s.playbacks.values.sorted(by: { $0.id < $1.id }) where p.awaitingSlots != nil {
            if p.started { restartInSlots(p, &s) } else { start(p.id, &s) }
            // Its slots as the arbiter says now, and what the source is told (an external player
            // paused through Baton is told so from its state at this start on).
            if p.awaitingSlots == nil { reconcile(p, &s, ramps: [:]) }
        }
    }

    /// Releases the slots of `p`'s zones now (false: the source's own thread releases them when it
    /// ends); each fades out over its zone's ramp and is free after (`ZoneMixer.release`).
    func releaseSlots(_ p: Playback, now: Bool) {
        for part in p.parts {
            if now, let slot = part.slot { output(part.zone)?.mixer.release(slot) }
            part.slot = nil
        }
    }

    /// Ends `id`'s source and releases its slots. A call says it ended (`call` event), and why: the
    /// reason its ender gave (`Playback.endReason`), else `why`.
    func finish(_ id: SourceID, _ s: inout State, why: String) {
        guard let p = s.playbacks.removeValue(forKey: id) else { return }
        if p.sourceClass == .call {
            events.publish(
                type: .call, source: id.rawValue, zones: p.zones, reason: "call ended: \(p.endReason ?? why)")
        }
        if let music = p.music {
            // Keep the queue where it was heard (unless it played to its end).
            if music.progress.finished {
                parts.persistence.keep(queue: nil)
            } else if let queue = SavedQueue(p, playing: false) {
                parts.persistence.keep(queue: queue)
            }
        }
        releaseSlots(p, now: p.source.stop())
    }

    /// The gain of `p` in `zone` the arbiter calls for: the user's volume × the duck stage, or 0
    /// where it is muted.
    func target(_ p: Playback, zone: String, _ s: borrowing State) -> Float {
        let z = ZoneID(zone)
        if s.arbiter.isMuted(p.id, in: z) { return 0 }
        return p.volume * linearGain(decibels: s.arbiter.duckGain(of: p.id, in: z).value)
    }

    /// Whether `p` plays at volume 0 by the user's choice in `zone` (`SourceSlot.playsAtVolumeZero`):
    /// asked at volume 0 and not muted there.
    func playsAtVolumeZero(_ p: Playback, zone: String, _ s: borrowing State) -> Bool {
        p.volume == 0 && !s.arbiter.isMuted(p.id, in: ZoneID(zone))
    }

    /// Sets each slot of `p` to what the arbiter says: paused unless the source is audible; in each
    /// zone, the user's volume × the duck stage, or 0 where it is muted. Duck changes ramp over the
    /// policy's attack or release; everything else over the zone's default ramp. Music is also held
    /// (paused) while all its zones are out (`followStreams`).
    func reconcile(_ p: Playback, _ s: inout State, ramps: [String: Int]) {
        let audible = s.arbiter.state(of: p.id)?.isAudible ?? false
        for part in p.parts {
            guard let slot = part.slot else { continue }
            let gain = target(p, zone: part.zone, s)
            if slot.targetGain != gain { slot.setGain(gain, overFrames: ramps["\(p.id)/\(part.zone)"]) }
            slot.setAtVolumeZero(playsAtVolumeZero(p, zone: part.zone, s))
            let held = p.sourceClass == .music && isHeld(in: part.zone, p, s)
            // A hold is counted from its start, or from a play the user asked during it (paused
            // before: `holdEnds`) — not from an interruption's end (a doorbell while the speakers
            // were away started the count again, and music held all night came back at dawn).
            if held && (p.heldSince == nil || (audible && p.audible == false && p.arbiterState == .paused)) {
                p.heldSince = .now
            }
            let pause = !audible || held
            if pause != slot.isPauseRequested {
                if pause { slot.pause() } else { slot.resume() }
            }
        }
        // A pause or resume through Baton (playing ↔ paused, no interruption between) is the
        // player's too (`ExternalPlayer.pausedThroughBaton`); an interruption's are its own. Told
        // before the audibility: a `drop` player's stream goes straight to held, not through a
        // moment of discarding.
        // The first reconcile after its start has no state before (`arbiterState` nil): a pause
        // given while it waited for its slots is told then, or the player played on, blocked.
        let now = s.arbiter.state(of: p.id)
        if let external = p.source as? ExternalPlayer, let now {
            switch (p.arbiterState, now) {
            case (.playing?, .paused), (.ducked?, .paused), (nil, .paused): external.pausedThroughBaton(true)
            case (.paused?, .playing), (.paused?, .ducked): external.pausedThroughBaton(false)
            default: break
            }
        }
        p.arbiterState = now
        if p.audible != audible {
            // Sources take themselves for heard when they start; one that starts silent is told.
            if p.audible != nil || !audible { p.source.audibilityChanged(audible) }
            p.audible = audible
        }
    }

    /// Music whose zones are all out is held there from the monitor's next look, and goes on from
    /// that sample when one is back (within resume-within: `holdEnds`). A Snapcast zone whose
    /// server went away (stopped, restarting, stalled): the zone's clock runs on through the
    /// outage (so its speakers stay in step), and the music used to run on with it, unheard,
    /// coming back later in the track by the outage's length. What played between the outage's
    /// first frame and the hold (a period and a fade; a stall's first 0.1 s) is lost. A card
    /// unplugged or stalled stops taking frames, and its source waits where the card lost it.
    /// Music that plays on in another zone is not held: a Snapcast zone keeps taking its frames,
    /// unheard, and a lost card is left behind (`SourceOutput.isLeftBehind`); each is in step
    /// with the others when it is back. Announcements and calls are not held: late, they would be
    /// wrong. Under the lock; monitor thread.
    func followStreams(_ s: inout State) {
        var down = Set<String>()
        for zone in zones.zones where !zone.device.isAvailable { down.insert(zone.name) }
        guard down != s.zonesDown else { return }
        s.zonesDown = down
        let music = s.playbacks.values.filter { $0.started && $0.sourceClass == .music }
        // Every hold that ends is decided first, and the pauses go to the arbiter together: one
        // applied alone reconciled every source, and another held too long was resumed for a
        // moment (a fade in and out) before its own turn.
        var pauses: [Effect<ContinuousClock.Instant>] = []
        for p in music {
            if let since = p.heldSince, !p.parts.contains(where: { isHeld(in: $0.zone, p, s) }) {
                p.heldSince = nil
                if holdEnds(p, heldSince: since, s) { pauses += s.arbiter.user(.pause, on: p.id, at: .now) }
            }
        }
        if !pauses.isEmpty { apply(pauses, &s) }
        for p in music { reconcile(p, &s, ramps: [:]) }
    }

    /// An announcement whose zones are all lost cards waits where they lost it (its source stops
    /// taking frames), and played on at the replug however late: a doorbell cut by an unplug was
    /// heard when the card came back, hours later. Once its zones have been out longer than its
    /// class's `ttl` (how late it may still be heard, as in the queue) it ends, too late to be
    /// heard (`played`, stopped, with why; a new request is not coalesced into it). One in a
    /// Snapcast zone is not waited for (the zone takes its frames on, unheard) and ends in its own
    /// time; music is held (`followStreams`); calls and external programs are left. Returns the
    /// nanoseconds until the next is due. Under the lock; monitor thread.
    func endStaleAnnouncements(_ s: inout State) -> Int? {
        var next: Int?
        for p in s.playbacks.values.sorted(by: { $0.id < $1.id })
        where p.started && !p.released && p.sourceClass != .music && p.sourceClass != .call
            && !(p.source is ExternalPlayer)
        {
            let out =
                !p.zones.isEmpty
                && p.zones.allSatisfy { z in s.zonesDown.contains(z) && output(z)?.device.spec.stream == nil }
            guard out else {
                p.heldSince = nil
                continue
            }
            let since = p.heldSince ?? .now
            p.heldSince = since
            guard let ttl = s.arbiter.policy[p.sourceClass]?.ttl else { continue }
            let left = ttl - since.duration(to: .now)
            if left > .zero {
                next = min(next ?? left.wholeNanoseconds, left.wholeNanoseconds)
                continue
            }
            p.released = true
            events.publish(
                type: .played, source: p.id.rawValue, zones: p.zones,
                reason:
                    "stopped: its zones were unavailable longer than its ttl (\(ConfigSyntax.format(ttl))): too late to be heard"
            )
            apply(s.arbiter.release(p.id, failed: true, at: .now), &s)
        }
        return next
    }

    /// The end of a hold, by the contract's rule for an interruption: music let be heard goes on
    /// where it was held, unless the hold outlasted its class's `resume-within` — then it is to be
    /// paused (true: `music/resume` plays it from there): speakers switched off for the night with
    /// music playing brought it back when the first was switched on in the morning. Either way a
    /// `hold-ended` event says which, and why. Music paused meanwhile keeps its own state, and says
    /// nothing; so does music interrupted now, held no longer than `resume-within` (its
    /// interruption's end decides). Interrupted and held longer, it is paused too, so that end does
    /// not resume it: the hold was forgotten, and music held all night behind a doorbell granted
    /// at dawn came back when the doorbell ended. Under the lock; monitor thread.
    private func holdEnds(_ p: Playback, heldSince: ContinuousClock.Instant, _ s: borrowing State) -> Bool {
        let state = s.arbiter.state(of: p.id)
        guard state?.isAudible == true || state == .interrupted else { return false }
        let lasted = heldSince.duration(to: .now)
        let tenths = lasted.wholeNanoseconds / 100_000_000
        let held = "held \(tenths / 10).\(tenths % 10) s while its zones were unavailable"
        guard let limit = s.arbiter.policy[p.sourceClass]?.resumeWithin, lasted > limit else {
            guard state != .interrupted else { return false }
            events.publish(
                type: .holdEnded, source: p.id.rawValue, zones: p.zones,
                reason: "\(held): it goes on where it was held", shouldResume: true)
            return false
        }
        events.publish(
            type: .holdEnded, source: p.id.rawValue, zones: p.zones,
            reason: "\(held), longer than resume-within \(ConfigSyntax.format(limit)): paused", shouldResume: false)
        return true
    }

    /// Whether `p` is held in `zone`: every one of `p`'s zones is out — a Snapcast zone whose
    /// server is away, a card unplugged or stalled — as the monitor last looked. A card's hold was
    /// not counted (its source waits by itself), and music on a USB DAC unplugged for the night
    /// came back at the morning's replug, past its resume-within and with no `hold-ended`. Under
    /// the lock.
    private func isHeld(in zone: String, _ p: Playback, _ s: borrowing State) -> Bool {
        s.zonesDown.contains(zone) && p.zones.allSatisfy(s.zonesDown.contains)
    }
}
