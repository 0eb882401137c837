import Arbiter
import BatonConfig
import ControlParts
import Engine

/// What the audio says about a source now: whether its frames are heard in each of its zones at the
/// zone's audible frame (the device's delay behind the frame rendered), from its slots' atomics.
/// The arbiter says what should be heard; this says what is, and the reported state follows it.
struct Hearing {
    /// One zone's share.
    struct Part {
        let zone: String
        /// The zone frame heard now.
        let audibleFrame: Int
        let sounding: Timeline.Snapshot
        /// The zone frame of the source's first frame there, if it was mixed.
        let firstFrame: Int?
        /// Where the zone's output did not reach its listeners (`DeviceOutput.outage`).
        let outage: Timeline.Snapshot
        /// The zone's output is lost at the audible frame, and the source would be heard there
        /// else: it is mixed there (dropped), or was where the loss began (held since,
        /// `Daemon.followStreams`), or has not begun there yet. Not one paused before the loss.
        var lost: Bool {
            guard outage.isOn(at: audibleFrame) else { return false }
            return sounding.isOn(at: audibleFrame) || notYetHeard
                || outage.runStart(at: audibleFrame).map(sounding.isOn) == true
        }
        /// The zone's output is lost at the audible frame: nothing mixed there is heard, whatever
        /// the source did before the loss.
        var unreached: Bool { outage.isOn(at: audibleFrame) }
        var heard: Bool { sounding.isOn(at: audibleFrame) && !outage.isOn(at: audibleFrame) }
        /// The zone frame from which it is heard (when it is): where its sounding began, or where the
        /// zone's output came back, whichever is later.
        var heardFrom: Int {
            let sounded = sounding.onRunStart(at: audibleFrame)
            return max(sounded, outage.runStart(at: audibleFrame) ?? -1)
        }
        /// Its first frame has not been heard yet.
        var notYetHeard: Bool { firstFrame.map { audibleFrame < $0 } ?? true }
        /// It ran dry before its end and that silence is what is heard now.
        var starved: Bool {
            !heard && sounding.offTag && sounding.offFrom >= 0 && audibleFrame >= sounding.offFrom
        }
    }

    let parts: [Part]
    var heard: Bool { parts.contains(where: \.heard) }
    /// Where each heard zone began hearing it (zone frames).
    var heardFrom: [String: Int] {
        Dictionary(
            parts.compactMap { p in p.heard ? (p.zone, p.heardFrom) : nil }, uniquingKeysWith: { a, _ in a })
    }
    /// Where each starved zone stopped hearing it (zone frames).
    var starvedFrom: [String: Int] {
        Dictionary(
            parts.compactMap { p in p.starved ? (p.zone, p.sounding.offFrom) : nil }, uniquingKeysWith: { a, _ in a })
    }

    /// The state to report, from the arbiter's word and the audio: `playing`/`ducked` only while
    /// heard; `starting` while granted but its first frame is not heard yet; `unavailable` while
    /// none of its zones' outputs reaches anyone (a card unplugged, a stalled or absent
    /// snapserver) — also for one paused or interrupted before the loss and let play during it,
    /// which read `paused` or `interrupted` for the whole outage — or while its frames are mixed
    /// or held in a lost zone and its other zones do not hear it yet; `buffering` while its ring ran dry and the silence is heard; while the arbiter's
    /// word is audible but the audio is not back yet (a resume within the device's delay), the word
    /// reported before.
    func state(arbiter: SourceState?, previous: String?) -> String {
        guard let arbiter else { return previous ?? "queued" }
        if heard { return arbiter == .ducked ? "ducked" : "playing" }
        guard arbiter.isAudible else { return arbiter.rawValue }
        if !parts.isEmpty && parts.allSatisfy(\.unreached) { return "unavailable" }
        if parts.isEmpty || parts.allSatisfy(\.notYetHeard) { return "starting" }
        if parts.contains(where: \.lost) { return "unavailable" }
        if parts.contains(where: \.starved) { return "buffering" }
        if let previous, previous == "interrupted" || previous == "paused" { return previous }
        return "buffering"
    }
}

/// A source that played to its end and was released (the arbiter was told when its last frame was
/// mixed, so what follows is gapless), while its last frames are still in the zone's device.
struct Retiring {
    let source: String
    let zone: String
    /// The zone frame just after its last frame.
    let end: Int
}

/// A zone's silence watch: since when a source is heard there, and whether the alarm is raised.
struct SilenceWatch {
    var heardSince: Int?
    var quietSince: Int?
    var alarmed = false
    /// The zone was turned down to 0 at the last look: nothing was heard because of that.
    var turnedDown = false
}

/// Following the audio: each source's reported state and the zones' silence watches, from the
/// slots' and devices' atomics (what is heard), with the events that mark the changes. Made for one
/// look from the daemon's zones, event log and config; used under the daemon's lock (monitor tick,
/// status).
struct AudioTruth {
    let zones: ZoneTable
    let events: EventLog
    let silenceAlarm: Duration
    /// The zones' user volumes: nothing is heard in a zone turned down to 0.
    let volumes: HardwareVolumes

    /// What `p`'s slots say now. Under the lock.
    func hearing(_ p: Playback) -> Hearing {
        Hearing(
            parts: p.parts.compactMap { part in
                guard let slot = part.slot, let zone = zones.zone(part.zone) else { return nil }
                return Hearing.Part(
                    zone: part.zone, audibleFrame: zone.device.snapshot().audibleFrame,
                    sounding: slot.sounding.snapshot(), firstFrame: slot.firstFrameAt, outage: zone.device.outage)
            })
    }

    /// The state reported for `p` now. Under the lock.
    func reportedState(_ p: Playback, _ s: borrowing Daemon.State) -> String {
        hearing(p).state(arbiter: s.arbiter.state(of: p.id), previous: p.reported)
    }

    /// The sources heard in `zone` now (their frames mixed at a gain above 0 at the audible frame:
    /// not one that plays at volume 0), highest priority first; a released source's last frames
    /// first of all. None in a zone whose user volume is 0 (turned down, on its software stage or
    /// its hardware control): its sources were listed heard, and after `silence-alarm` it was said
    /// `silent-while-playing` — an alarm each time someone turned a room down. Under the lock.
    func heardSources(in zone: ZoneHandle, _ s: borrowing Daemon.State) -> [String] {
        guard volumes.userVolume(zone) > 0 else { return [] }
        let audible = zone.device.snapshot().audibleFrame
        // Highest priority first, then in arrival order (as the arbiter lists a zone's sources): a
        // doorbell heard over ducked music comes before it, whichever came first.
        let order = s.arbiter.sources.enumerated()
            .sorted { ($0.element.contender.priority, $1.offset) > ($1.element.contender.priority, $0.offset) }
            .map(\.element.contender.source)
        let tails = s.retiring.filter { $0.zone == zone.name && audible < $0.end }.map(\.source)
        return tails
            + order.compactMap { id -> String? in
                // Not one at volume 0 (its own, for good: the slot's mark changes with a mute at
                // once, ahead of the frame heard).
                guard let p = s.playbacks[id], p.volume > 0,
                    let slot = p.parts.first(where: { $0.zone == zone.name })?.slot,
                    slot.sounding.snapshot().isOn(at: audible), !zone.device.outage.isOn(at: audible)
                else { return nil }
                return id.rawValue
            }
    }

    /// One pass of following the audio (monitor tick): each source's reported state, with an
    /// `audible` event when it starts being heard (the zone frames where its frames begin) and a
    /// `buffering` event when its ring ran dry (where the silence begins); each zone's silence
    /// watch. Under the lock.
    func follow(_ s: inout Daemon.State) {
        for p in s.playbacks.values.sorted(by: { $0.id < $1.id }) where p.started {
            let h = hearing(p)
            let state = h.state(arbiter: s.arbiter.state(of: p.id), previous: p.reported)
            // Each zone that begins hearing it (its zones' devices need not start at the same look).
            let heardFrom = h.heardFrom
            let newly = heardFrom.filter { !p.heardZones.contains($0.key) }
            if !newly.isEmpty {
                events.publish(
                    type: .audible, source: p.id.rawValue, zones: newly.keys.sorted(),
                    reason: "first frame heard", zoneFrames: newly)
            }
            p.heardZones = Set(heardFrom.keys)
            if state == "buffering" && p.reported != "buffering" && !h.starvedFrom.isEmpty {
                events.publish(
                    type: .buffering, source: p.id.rawValue, zones: h.starvedFrom.keys.sorted(),
                    reason: "its audio ran out before its end (the stream is late)", zoneFrames: h.starvedFrom)
            }
            p.reported = state
        }
        for zone in zones.zones { watchSilence(zone, &s) }
    }

    /// Raises `silent-while-playing` when a source is heard in `zone` but its final mix stayed below
    /// the meter's threshold for `silence-alarm`; `sound-returned` when it is above again.
    private func watchSilence(_ zone: ZoneHandle, _ s: inout Daemon.State) {
        let heard = heardSources(in: zone, s)
        let audible = zone.device.snapshot().audibleFrame
        var w = s.silence[zone.name] ?? SilenceWatch()
        defer { s.silence[zone.name] = w }
        guard let first = heard.first else {
            w = SilenceWatch()
            w.turnedDown = volumes.userVolume(zone) <= 0
            return
        }
        if w.heardSince == nil {
            // From the frame the source heard first began there (it is heard, so that is known).
            let slot = s.playbacks[SourceID(first)]?.parts.first { $0.zone == zone.name }?.slot
            w.heardSince = slot.map { $0.sounding.snapshot().onRunStart(at: audible) } ?? audible
            // Turned up again: from the frames mixed at the new volume on, not from the music's
            // start — the turn-down's silence, still in the device, read as silence for that long.
            if w.turnedDown { w.heardSince = max(w.heardSince ?? audible, zone.device.snapshot().framesPlayed) }
            w.turnedDown = false
        }
        let loud = zone.mixer.meter.loudness.snapshot()
        if loud.isOn(at: audible) {
            w.quietSince = nil
            if w.alarmed {
                w.alarmed = false
                events.publish(
                    type: .soundReturned, source: first, zones: [zone.name],
                    reason: "the zone's output is above \(Int(Meter.silenceThresholdDb)) dBFS again",
                    zoneFrames: [zone.name: loud.onFrom <= audible ? loud.onFrom : audible])
            }
            return
        }
        if w.quietSince == nil {
            w.quietSince = loud.offFrom >= 0 && loud.offFrom <= audible ? loud.offFrom : (loud.onFrom < 0 ? 0 : audible)
        }
        let silentFrom = max(w.quietSince ?? audible, w.heardSince ?? audible)
        let limit = zone.frames(silenceAlarm)
        if !w.alarmed && audible - silentFrom >= limit {
            w.alarmed = true
            events.publish(
                type: .silentWhilePlaying, source: first, zones: [zone.name],
                reason:
                    "\(first) is playing but the zone's output stayed below \(Int(Meter.silenceThresholdDb)) dBFS for \(ConfigSyntax.format(silenceAlarm))",
                zoneFrames: [zone.name: silentFrom])
        }
    }

    /// How soon the monitor must look again to follow the audio (nanoseconds), nil when only a
    /// wake-up can make it due: every 5 ms while a source the arbiter lets be heard has its first
    /// frame not heard yet, or a finished sound's tail plays out — so `audible` is published within
    /// a period of that frame. While sources are heard it does not poll: a change the output thread
    /// mixed (a fade to 0, a ring run dry, the loudness crossing the threshold) wakes the monitor
    /// (`DeviceOutput.audioObserver`), and this says when that change is heard — a device delay
    /// later — or when a quiet zone's silence alarm is due. Under the lock.
    func nextLook(_ s: borrowing Daemon.State) -> Int? {
        let heardNow = s.playbacks.values.filter {
            $0.started && !$0.released && (s.arbiter.state(of: $0.id)?.isAudible ?? false)
        }
        // A source not heard yet is looked for every 5 ms; not one whose every zone lost its output,
        // whatever it did before the loss (its return wakes the monitor, and its frame is due
        // below): music paused before a card was unplugged and played during the outage was
        // looked for every 5 ms until the card came back.
        let waiting = heardNow.contains { p in
            guard !p.heard else { return false }
            let parts = hearing(p).parts
            return parts.isEmpty || !parts.allSatisfy(\.unreached)
        }
        if waiting || !s.retiring.isEmpty { return 5_000_000 }
        var soonest: Int?
        func due(_ frame: Int, in zone: ZoneHandle, audible: Int) {
            guard frame > audible else { return }
            let n = (frame - audible) * 1_000_000_000 / zone.rate + 1_000_000
            soonest = min(soonest ?? n, n)
        }
        for p in heardNow {
            for part in p.parts {
                guard let slot = part.slot, let zone = zones.zone(part.zone) else { continue }
                let audible = zone.device.snapshot().audibleFrame
                let sounding = slot.sounding.snapshot()
                let outage = zone.device.outage
                for index in 0..<4 {
                    due(sounding.transition(index), in: zone, audible: audible)
                    due(outage.transition(index), in: zone, audible: audible)
                }
            }
        }
        for zone in zones.zones {
            guard let w = s.silence[zone.name], w.heardSince != nil else { continue }
            let audible = zone.device.snapshot().audibleFrame
            let loud = zone.mixer.meter.loudness.snapshot()
            due(loud.onFrom, in: zone, audible: audible)
            due(loud.offFrom, in: zone, audible: audible)
            if !w.alarmed, let quiet = w.quietSince {
                due(max(quiet, w.heardSince ?? quiet) + zone.frames(silenceAlarm), in: zone, audible: audible)
            }
        }
        return soonest
    }
}
