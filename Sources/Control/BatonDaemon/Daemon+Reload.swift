import Arbiter
import BatonConfig
import ControlParts
import Glibc
import OSThread
import Players

extension Daemon {
    /// Re-reads the configuration file and applies it (see `apply(_:)`). Any thread.
    /// The file is read under the same lock as it is applied: two reloads at once (a SIGHUP and an
    /// API request around an edit) could apply the older file last.
    public func reload() -> ReloadReport {
        guard let path = configPath else { return .refused(["the daemon was not started from a config file"]) }
        return reloading.withLock { _ in
            do throws(ConfigError) {
                return applyNow(try BatonConfiguration.load(path: path, checkingFiles: true))
            } catch {
                logger.error("reload: \(path) is invalid; keeping the running configuration:\n\(error)")
                events.publish(type: .reloadRejected, reason: error.issues.map(\.description).joined(separator: "\n"))
                return .refused(error.issues.map(\.description))
            }
        }
    }

    /// Applies a checked configuration as a diff: devices whose zones and settings are unchanged keep
    /// playing untouched; removed or changed ones stop (their sources end as `vanished`), new ones
    /// start; a new policy goes to the arbiter. One at a time; any thread.
    public func apply(_ new: BatonConfiguration) -> ReloadReport {
        reloading.withLock { _ in applyNow(new) }
    }

    /// `new` with what a reload does not apply (`ReloadReport.needsRestart`) as it runs: what is
    /// kept as the configuration is what runs. `GET /api/v1/config` showed a new broker or listen
    /// address while the old one ran, the MQTT bridge took the new `api.max-body` while the API
    /// kept the old, and the next reload, compared with it, no longer said a restart was needed.
    /// External sources' socket is the new one when this reload sets it up (there was none).
    static func running(
        _ new: BatonConfiguration, keeping old: BatonConfiguration, settingUpExternal: Bool
    ) -> BatonConfiguration {
        var running = new
        running.api = old.api
        running.mqtt = old.mqtt
        // The device's name is used only by the MQTT bridge, made at start.
        if old.mqtt != nil || new.mqtt != nil { running.device = old.device }
        running.gpio = old.gpio
        running.stateDir = old.stateDir
        running.alsaConfig = old.alsaConfig
        running.outputDir = old.outputDir
        // The receiver runs as it started; calls take the zones as configured now (or, its
        // section gone, the ones it had).
        running.intercom = old.intercom.map { receiver in
            var intercom = receiver
            if let zones = new.intercom?.zones { intercom.zones = zones }
            return intercom
        }
        if !settingUpExternal, running.externalSources != nil {
            running.externalSources?.socket = old.externalSources?.socket
        }
        return running
    }

    private func applyNow(_ new: BatonConfiguration) -> ReloadReport {
        // Once the stop began (`saveLastState`, under this lock too), nothing is started again.
        if state.withLock({ $0.stopping }) { return .refused(["batond is stopping: the configuration is not applied"]) }
        let old = config
        let oldTable = zones
        let (table, stopped, started) = oldTable.rebuilt(for: new)
        let stoppedZones = Set(stopped.flatMap { $0.spec.zones.map(\.name) })
        var report = ReloadReport(from: old, to: new, zones: oldTable.names, stopping: stoppedZones)

        // Sources on zones that go away, and programs playing through an external source that was
        // removed or changed, end first, so nothing keeps a slot of a stopped device. The new table
        // and configuration go in under the same lock: a request admitted from now on sees them
        // (`admit` checks).
        // The user's volume of each zone reopened, carried to its new output (within its new
        // `max-volume`) unless the zone's configured `volume` changed (it started at that again,
        // the listener's setting lost — and on a hardware control too, and in the state file at
        // the next save). The `volume` written, not the one the zone starts at: without one, that
        // is the cap, and a change of only `max-volume` lost the listener's volume (30 % back at
        // a new cap of 100 %).
        // From the volumes read to the controls opened, no volume change comes in between: one
        // that did was written over by the volume carried (answered 200, a `volume` event, then
        // the old volume back). Not the rest of the reload (music resumed from a slow server).
        // A call on a zone the reload reopens: it goes on afterwards on the zones it has then,
        // made again in the step that ends it (`Calls.start(replacing:)`).
        var callGoingOn: SourceID?
        let resumeMusic = volumeChanges.withLock { _ in
            var carried: [String: Double] = [:]
            for zone in oldTable.zones where stoppedZones.contains(zone.name) {
                guard let next = new.zones.first(where: { $0.name == zone.name }),
                    next.configuredVolume == zone.config.configuredVolume
                else {
                    continue
                }
                carried[zone.name] = min(parts.volumes.userVolume(zone), next.maxVolume)
            }
            // A zone added back (commented out and in again) starts at the volume the saves kept for it.
            let saved = parts.persistence.saved.volumes
            for name in report.zonesAdded {
                guard let zone = new.zones.first(where: { $0.name == name }),
                    let start = saved[name].flatMap(zone.start(atSaved:))
                else { continue }
                carried[name] = start
            }
            // On the new outputs (not started yet) before the table that holds them is published:
            // set after the old devices stopped, a save or a status in between read the zone at its
            // configured volume (a power cut then brought it back so).
            for zone in table.zones {
                if let volume = carried[zone.name] { zone.mixer.setInitialVolume(Float(volume)) }
            }
            let externalEnding = Set(report.externalSourcesChanged)
            let library = report.soundsChanged ? Self.soundLibrary(new) : sounds
            let settingUpExternal = parts.external.server == nil && !(new.externalSources?.sources.isEmpty ?? true)
            let running = Self.running(new, keeping: old, settingUpExternal: settingUpExternal)
            // Music from the server that was heard on a zone the reload reopens plays on afterwards
            // from where it was heard, on its zones that remain: it stopped for good, also in the
            // zones the reload left alone, until someone asked `music/resume`. So does music a
            // doorbell or a call interrupts that will resume when it ends (`interrupted`: it was
            // playing, nobody paused it meanwhile): asked again, it waits for its zones (music's
            // `during-higher`) and plays from where it was cut. Only audible music was taken: the
            // interrupted one ended for good, saved as not playing, and the doorbell's end
            // brought nothing back. Paused music stays ended, as paused. Interrupted music is
            // asked again only if its interruption, ended now, would resume it (`resume-within`),
            // and waits no longer than what remains of that: asked again as any new music, a
            // 20-minute call reloaded at minute 10 brought it back when the call ended.
            // What the reload ends and does not ask again, said in the report (the API's answer,
            // the log's warnings): only the log said so, or nothing did.
            var lost: [String] = []
            let server = new.music.map { SavedQueue.Server($0.subsonic) }
            let resumeMusic = state.withLock { s in
                defer {
                    // A reopened zone starts unseen, like at start: "opening PCM" is not an outage.
                    for zone in stoppedZones { s.availability.forget(zone) }
                    // What the old devices' frame counts said (a sound's last frames, the silence
                    // alarm's watch) means nothing on the new ones, which count from 0: a retiring
                    // sound stayed "heard" there until the new device reached the old count (hours).
                    s.retiring.removeAll { stoppedZones.contains($0.zone) }
                    for zone in stoppedZones { s.silence[zone] = nil }
                    replaceZones(table)
                    replaceConfig(running, sounds: library)
                    s.configGeneration += 1
                }
                // The queue of the music asked again (the newest, if several: music replaces
                // music), as it was heard, how long it may wait for its zones (nil: as any music),
                // and whether the user paused it while it was queued. The others that would have
                // been asked again are passed over: said in the report (they vanished unsaid), with
                // whether the queue saved is theirs.
                var resume: (queue: SavedQueue, number: Int, ttl: Duration?, paused: Bool, id: SourceID)?
                var passedOver: [SourceID] = []
                let ending = s.playbacks.values.sorted(by: { $0.id < $1.id }).filter { p in
                    p.zones.contains(where: stoppedZones.contains)
                        || (p.source as? ExternalPlayer).map({ externalEnding.contains($0.name) }) == true
                }
                // Each decided before any ends: the end of one (the call) granted what waited
                // behind it, which was then taken for heard, or not said queued.
                for p in ending {
                    let said = s.arbiter.state(of: p.id)
                    if let music = p.music, let said,
                        p.zones.contains(where: { z in new.zones.contains { $0.name == z } })
                    {
                        switch musicAfterReload(p, music, said, server: server, s) {
                        case .askedAgain(let queue, let ttl, let paused):
                            // Newest by number ("music-10" sorts before "music-9" as text).
                            let number = Int(p.id.rawValue.split(separator: "-").last ?? "") ?? 0
                            if number >= resume?.number ?? 0 {
                                if let older = resume?.id { passedOver.append(older) }
                                resume = (queue, number, ttl, paused, p.id)
                            } else {
                                passedOver.append(p.id)
                            }
                        case .left(let why): lost.append(why)
                        case .ends: break
                        }
                    } else if said == .queued, p.sourceClass != .call {
                        // A doorbell queued behind the call the reload makes again: it vanished
                        // unsaid, its source (made for the old device) not made again.
                        lost.append(
                            "\(p.id) was queued on \(p.zones.joined(separator: ", ")), which the reload reopened: it is dropped (ask for it again)"
                        )
                    }
                    if p.sourceClass == .call {
                        // Not one a user paused: made again, it would play.
                        if said != .paused { callGoingOn = p.id }
                        // Said by `finish` (the vanish's own `finished` said "stopped", as if a
                        // user had stopped it).
                        p.endReason = "a reload changed its zones"
                    }
                }
                // The music whose queue is the one saved (one is: the last kept, by its end).
                var keeper: SourceID?
                for p in ending {
                    // The call that goes on ends when it is made again, in that arbiter step: ended
                    // here, what it interrupted in the zones the reload leaves alone was resumed
                    // until then (the music heard over the visitor, a doorbell queued behind it
                    // granted). It plays on there meanwhile; its slots on the devices that stop are
                    // let go of now, while the table is the old one.
                    if p.id == callGoingOn {
                        for part in p.parts where stoppedZones.contains(part.zone) { part.slot = nil }
                        continue
                    }
                    external.sayLeftPaused(p, why: "a reload changed its zones or its source")
                    apply(s.arbiter.sourceVanished(p.id, at: .now), &s)
                    let kept = parts.persistence.keptCount
                    finish(p.id, &s, why: "a reload changed its zones")
                    if p.music != nil, parts.persistence.keptCount != kept {
                        keeper = parts.persistence.saved.queue == nil ? nil : p.id
                    }
                }
                // The music that plays on elsewhere (an AirPlay in the kitchen beside the patio's
                // server music): not music started meanwhile.
                let before = Set(s.playbacks.values.filter { $0.sourceClass == .music }.map(\.id))
                return resume.map {
                    (
                        queue: $0.queue, ttl: $0.ttl, paused: $0.paused, id: $0.id, musicBefore: before,
                        passedOver: passedOver, keeper: keeper
                    )
                }
            }
            report.warnings += lost
            for d in stopped { d.stop() }
            if report.policyChanged {
                state.withLock { s in apply(s.arbiter.setPolicy(Policy(new.policy), at: .now), &s) }
            }
            parts.volumes.forget(report.zonesRemoved, stillPlayingOn: table.zones.map(\.pcm))
            parts.volumes.open(table.zones.filter { (report.zonesAdded + report.zonesChanged).contains($0.name) })
            return resumeMusic
        }
        for d in started {
            d.start(logger, connection: parts.snapcast.connectionObserver(for: d)) { [monitor] in monitor.wake() }
        }
        // Not the saved speakers: a keeper of before hands its own on (`carried`), and a zone kept
        // now and not before may have had its speakers reconnect unseen.
        parts.snapcast.update(new.zones) { [weak self] in self?.output($0)?.device }
        // External sources where there were none (or their socket could not be set up at start):
        // the socket is set up now, at the path the new configuration gives. Started only at start,
        // every program was refused ("cannot connect") until a restart, and the reload said nothing.
        if parts.external.server == nil, !(new.externalSources?.sources.isEmpty ?? true) {
            external.listen()
            if parts.external.server != nil { report.externalSocketSetUp() }
        }
        // What goes on on the reopened zones waits for them to open their PCMs (milliseconds; a
        // second at most): a zone not open yet is skipped by the admission, and left for good.
        if resumeMusic != nil || callGoingOn != nil {
            let deadline = monotonicNanoseconds() + 1_000_000_000
            while started.contains(where: { !$0.snapshot().available }) && monotonicNanoseconds() < deadline {
                usleep(5_000)
            }
        }
        // The call goes on (its source made again, on the call's zones as configured now, in the
        // arbiter step that ends the old one): ended for good, it was over in every zone, the ones
        // the reload left alone too, and its end hung up the receiver, which ignored the door's
        // stream until it paused — the visitor gone mid-word.
        if let old = callGoingOn {
            do throws(ControlError) {
                let admission = try calls.start(reason: "it goes on after a reload changed its zones", replacing: old)
                logger.info("reload: the call goes on as \(admission.id)")
                if !admission.skipped.isEmpty {
                    report.warnings.append(
                        "the call goes on as \(admission.id) without \(admission.skipped.joined(separator: ", ")): not available after the reload"
                    )
                }
            } catch {
                report.warnings.append("the call the reload ended could not go on: \(error.message)")
            }
            // Not made again (it could not be, or a call made meanwhile is the door's): it ends now.
            state.withLock { s in
                if s.playbacks[old] != nil { apply(s.arbiter.sourceVanished(old, at: .now), &s) }
            }
        }
        if let (queue, ttl, paused, id, musicBefore, passedOver, keeper) = resumeMusic {
            // Its queue saved is `music/resume`'s once it ended, unless it plays on, or music was
            // started meanwhile (whose next save replaces the kept queue).
            let saved = "; its queue is saved where it was heard (music/resume plays it on)"
            var playsOn = false
            var startedMeanwhile = false
            do throws(ControlError) {
                // Not over music a user started meanwhile (a request, a resume). Any music was
                // taken for that: other music playing on in zones the reload left alone stopped
                // the server's for good, against what a reload promises.
                guard
                    !state.withLock({ s in
                        s.playbacks.values.contains { $0.sourceClass == .music && !musicBefore.contains($0.id) }
                    })
                else {
                    startedMeanwhile = true
                    throw ControlError(.conflict, "music was started meanwhile")
                }
                let admission = try music.play(queue, ttl: ttl, paused: paused)
                playsOn = true
                logger.info(
                    "reload: the music on the zones it reopened \(paused ? "is asked again, paused," : "plays on") as \(admission.id)"
                )
                if !admission.skipped.isEmpty {
                    report.warnings.append(
                        "\(id) plays on as \(admission.id) without \(admission.skipped.joined(separator: ", ")): not available after the reload"
                    )
                }
            } catch {
                report.warnings.append(
                    "\(id) could not play on after the reload: \(error.message)\(keeper == id && !startedMeanwhile ? saved : "")"
                )
            }
            // Music on reopened zones beside newer music asked again (another zone's, or queued
            // behind it) vanished unsaid: only the newest is asked again.
            for older in passedOver {
                report.warnings.append(
                    "\(older) is not asked again: only the newest music is (\(id))\(keeper == older && !playsOn && !startedMeanwhile ? saved : "; its queue is not saved")"
                )
            }
        }
        for warning in report.warnings { logger.warning("reload: \(warning)") }
        if let warning = table.ringMemoryWarning(new) { logger.warning("reload: \(warning)") }
        logger.info(
            "reload: applied (added \(report.zonesAdded), removed \(report.zonesRemoved), changed \(report.zonesChanged), unchanged \(report.zonesUnchanged)\(report.policyChanged ? ", new policy" : "")\(report.needsRestart.isEmpty ? "" : "; restart needed for \(report.needsRestart)"))"
        )
        events.publish(
            type: .reloaded, zones: new.zones.map(\.name),
            reason: "added \(report.zonesAdded), removed \(report.zonesRemoved), changed \(report.zonesChanged)")
        return report
    }

    /// What a reload that ends server music `p` (in state `said`) does with it.
    enum MusicAfterReload {
        /// Asked again from `queue`, waiting for its zones no longer than `ttl` (nil: as any music);
        /// `paused`: with the pause the user gave it while it was queued (asked without it, it
        /// played when the call it waited behind ended).
        case askedAgain(SavedQueue, ttl: Duration?, paused: Bool = false)
        /// Not asked again, for the reason given (said in the report).
        case left(String)
        /// Ends as it is (paused: it stays paused).
        case ends
    }

    /// Music heard, interrupted with its resume to come, or queued is asked again; not when the new
    /// configuration names another server (`server`: its URL and user) than the one its songs are
    /// from — asked again, its player was the new server's, given the old one's song ids (tracks
    /// failed or other songs played, and the queue was mirrored there) — nor when its zones were
    /// all unavailable (held): asked again, it found the new device not open yet and was refused,
    /// or skipped the zone for good, where it would have resumed when the zone came back. Under
    /// the lock.
    func musicAfterReload(
        _ p: Playback, _ music: MusicPlayer, _ said: SourceState, server: SavedQueue.Server?,
        _ s: borrowing State
    ) -> MusicAfterReload {
        let queued = said == .queued
        guard said.isAudible || said == .interrupted || queued else { return .ends }
        let saved = queued ? nil : p.isUnderway ? SavedQueue(p, playing: true) : nil
        guard
            let queue = queued
                ? SavedQueue(
                    songs: music.songs, index: music.startPlace.index, position: music.startPlace.seconds,
                    zones: p.zones, volume: Double(p.volume), playing: true) : saved
        else { return .ends }
        let from = SavedQueue.Server(music)
        guard let server, server == from else {
            let now = server.map { "names \($0.user) at \($0.url)" } ?? "has no music server"
            return .left(
                "\(p.id) is music from \(from.user) at \(from.url), and the new configuration \(now): it is not asked again (its songs are the old server's)\(queued ? "" : "; it stays paused, its queue saved where it was heard")"
            )
        }
        if !queued,
            p.heldSince != nil
                || p.zones.allSatisfy({ s.zonesDown.contains($0) || zones.zone($0)?.device.isAvailable != true })
        {
            return .left(
                "\(p.id) was held while its zones (\(p.zones.joined(separator: ", "))) were unavailable: it stays paused, its queue saved where it was held (music/resume plays it on)"
            )
        }
        switch said {
        case .interrupted:
            guard let goesOn = s.arbiter.wouldResume(p.id, at: .now), goesOn.resume else {
                return .left(
                    "\(p.id) was interrupted longer than its resume-within: it stays paused, its queue saved where it was cut (music/resume plays it on)"
                )
            }
            return .askedAgain(queue, ttl: goesOn.within)
        case .queued:
            guard case .some(let left) = s.arbiter.remainingWait(of: p.id, at: .now) else { return .ends }
            if let left, left <= .zero {
                return .left("\(p.id) had waited its ttl out in the queue: it is not asked again")
            }
            return .askedAgain(queue, ttl: left, paused: s.arbiter.isPaused(p.id))
        default:
            return .askedAgain(queue, ttl: nil)
        }
    }
}
