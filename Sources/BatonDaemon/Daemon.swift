import ALSA
import Arbiter
import AudioCore
import BatonConfig
import Engine
import Glibc
import Media
import Synchronization

/// The running Baton: zones and their output threads, the arbiter, the sources, the event log.
///
/// Thread: every public method may be called from any thread (HTTP handlers, signal handling, tests);
/// one mutex guards the arbiter and the sources. The output threads never take it: they see only
/// their slots' atomics. A control thread ("monitor") feeds the rings, notices finished sources
/// and fires the arbiter's timers.
public final class Daemon: Sendable {
    typealias Instant = ContinuousClock.Instant

    /// The running configuration; replaced by a successful reload.
    public var config: BatonConfiguration { current.withLock { $0.config } }
    /// The file `reload()` reads, if the daemon was started from one.
    public let configPath: String?
    private let current: Mutex<(config: BatonConfiguration, sounds: SoundLibrary)>
    public let events: EventLog
    let logger: Logger
    var sounds: SoundLibrary { current.withLock { $0.sounds } }
    /// The zones and devices; replaced as a whole on reload.
    private let table: Mutex<ZoneTable>
    private let state: Mutex<State>
    private let running = Atomic<Bool>(false)
    private let monitorThread = Mutex<pthread_t?>(nil)

    struct State: ~Copyable {
        var arbiter: Arbiter<Instant>
        var playbacks: [SourceID: Playback] = [:]
        var nextID = 1
        var timer: Instant?
        var zoneAvailable: [String: Bool] = [:]
        var zoneStarving: [String: Int] = [:]
    }

    /// Builds the daemon from a checked configuration. Allocates every zone's buffers; starts nothing.
    public init(config: BatonConfiguration, configPath: String? = nil, logger: Logger) {
        self.configPath = configPath
        self.logger = logger
        events = EventLog()
        current = Mutex((config, Self.soundLibrary(config)))
        table = Mutex(ZoneTable.build(config))
        state = Mutex(State(arbiter: Arbiter(policy: Policy(config.policy))))
    }

    static func soundLibrary(_ config: BatonConfiguration) -> SoundLibrary {
        SoundLibrary(directory: config.sounds,
                     resampler: ResamplerKind(rawValue: config.resampler.announcements.rawValue) ?? .announcementsDefault)
    }

    /// The current zones. Any thread.
    var zones: ZoneTable { table.withLock { $0 } }
    func output(_ zone: String) -> ZoneHandle? { zones.zone(zone) }

    // MARK: Lifecycle

    /// Starts the output threads and the monitor. Control thread.
    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for device in zones.devices { startDevice(device) }
        let thread = startThread { [self] in monitorLoop() }
        monitorThread.withLock { $0 = thread }
    }

    /// Stops everything: the monitor, then each output thread (closing its PCM, which finishes the
    /// WAV header of a file PCM). Control thread.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        if let t = monitorThread.withLock({ $0 }) { pthread_join(t, nil) }
        for device in zones.devices { device.stop() }
    }

    func startDevice(_ device: DeviceOutput) {
        device.start()
        let p = device.spec.pcm
        logger.info("PCM \"\(p.name)\": output thread started for zone\(device.spec.zones.count == 1 ? "" : "s") \(device.spec.zones.map(\.name).joined(separator: ", ")) (\(p.rate) Hz, \(p.channels) ch, \(p.format.rawValue), clock \(device.spec.clock.rawValue))")
    }

    // MARK: Reload support

    /// Ends every source that plays on one of `zones` (as vanished: its zones go away). Any thread.
    func endSources(onZones zones: Set<String>) {
        guard !zones.isEmpty else { return }
        state.withLock { s in
            for p in s.playbacks.values.sorted(by: { $0.id < $1.id }) where p.zones.contains(where: zones.contains) {
                apply(s.arbiter.sourceVanished(p.id, at: .now), &s)
                finish(p.id, &s)
            }
        }
    }

    func replaceZones(_ new: ZoneTable) { table.withLock { $0 = new } }

    func replaceConfig(_ config: BatonConfiguration, sounds: SoundLibrary) { current.withLock { $0 = (config, sounds) } }

    func setPolicy(_ policy: Policy) { state.withLock { s in apply(s.arbiter.setPolicy(policy, at: .now), &s) } }

    /// Sets a zone's volume (linear 0...1, the user's stage; ducking is separate). Any thread.
    public func setVolume(zone: String, volume: Float) throws(RequestError) {
        guard let z = output(zone) else {
            throw RequestError(status: 404, message: "unknown zone \"\(zone)\" (zones: \(zones.names.joined(separator: ", ")))")
        }
        guard volume.isFinite, (0...1).contains(volume) else {
            throw RequestError(status: 400, message: "volume must be between 0 and 1 (got \(volume))")
        }
        z.mixer.setVolume(volume)
        events.publish(type: "volume", zones: [zone], reason: "zone volume set to \(volume)", level: Double(volume))
    }

    // MARK: Requests

    /// What happened to a play request.
    public enum Outcome: Sendable, Equatable {
        case playing
        case queued
        case coalesced(into: String)
    }

    /// Why a request was refused; `status` is the HTTP status the API answers with.
    public struct RequestError: Error, Sendable, Equatable, CustomStringConvertible {
        public var status: Int
        public var message: String
        public var description: String { message }
    }

    /// Plays the named sound as an announcement on `zones` (empty: every zone), through the arbiter.
    /// Any thread. Decoding and resampling happen before the lock (once per sound and zone format).
    public func announce(sound: String, zones: [String], volume: Float = 1) throws(RequestError) -> (id: String, outcome: Outcome, skipped: [String]) {
        try play(sound: sound, zones: zones, sourceClass: .announcement, loop: false, volume: volume, prefix: "announce")
    }

    /// Plays a sound file as music (class `music`, permanent) on `zones`, looping when asked.
    /// Local files stand in for the streaming player until it exists. Any thread.
    public func playMusic(sound: String, zones: [String], loop: Bool, volume: Float = 1) throws(RequestError) -> (id: String, outcome: Outcome, skipped: [String]) {
        try play(sound: sound, zones: zones, sourceClass: .music, loop: loop, volume: volume, prefix: "music")
    }

    private func play(sound: String, zones requested: [String], sourceClass: SourceClass, loop: Bool, volume: Float,
                      prefix: String) throws(RequestError) -> (id: String, outcome: Outcome, skipped: [String]) {
        let table = self.zones
        let zones = requested.isEmpty ? table.names : requested
        var seen = Set<String>()
        for zone in zones {
            guard table.zone(zone) != nil else {
                throw RequestError(status: 404, message: "unknown zone \"\(zone)\" (zones: \(table.names.joined(separator: ", ")))")
            }
            guard seen.insert(zone).inserted else { throw RequestError(status: 400, message: "zone \"\(zone)\" named twice") }
        }
        guard volume.isFinite, (0...1).contains(volume) else {
            throw RequestError(status: 400, message: "volume must be between 0 and 1")
        }
        do { try SoundLibrary.validate(name: sound) } catch {
            throw RequestError(status: 400, message: "sound \"\(sound)\": \(error.problem)")
        }
        let available = zones.filter { table.zone($0)!.device.snapshot().available }
        let skipped = zones.filter { !available.contains($0) }
        guard !available.isEmpty else {
            let why = zones.map { z in "\(z): \(zoneErrorText(z))" }.joined(separator: "; ")
            throw RequestError(status: 503, message: "no requested zone is available (\(why))")
        }
        var parts: [Playback.ZonePart] = []
        for zone in available {
            let z = table.zone(zone)!
            do {
                parts.append(Playback.ZonePart(zone: zone, samples: try sounds.samples(sound, rate: z.rate, channels: z.channels),
                                               channels: z.channels))
            } catch {
                let unknown = error.problem.hasPrefix("unknown sound")
                throw RequestError(status: unknown ? 404 : 422, message: "sound \"\(sound)\": \(error.problem)")
            }
        }
        return try state.withLock { (s: inout State) throws(RequestError) in
            let id = SourceID("\(prefix)-\(s.nextID)")
            s.nextID += 1
            let playback = Playback(id: id, sourceClass: sourceClass, sound: sound, loop: loop, volume: volume, parts: parts)
            playback.skipped = skipped
            s.playbacks[id] = playback
            let request = Request(source: id, sourceClass: sourceClass, zones: available.map { ZoneID($0) },
                                  coalesceKey: sourceClass == .announcement ? sound : nil)
            let effects = s.arbiter.handle(.request(request), at: .now)
            apply(effects, &s)
            for e in effects where e.action.source == id {
                switch e.action {
                case .granted: return (id.rawValue, .playing, skipped)
                case .queued: return (id.rawValue, .queued, skipped)
                case .coalesced(_, let into): return (id.rawValue, .coalesced(into: into.rawValue), skipped)
                case .rejected: throw RequestError(status: 409, message: "rejected: \(e.reason)")
                default: continue
                }
            }
            return (id.rawValue, .queued, skipped)
        }
    }

    /// A user command on a source: `pause`, `play` (resume), `stop`. Any thread.
    public func command(_ command: UserCommand, source: String) throws(RequestError) {
        try state.withLock { (s: inout State) throws(RequestError) in
            let id = SourceID(source)
            guard s.playbacks[id] != nil, s.arbiter.state(of: id) != nil else {
                throw RequestError(status: 404, message: "no source \"\(source)\"")
            }
            apply(s.arbiter.user(command, on: id, at: .now), &s)
        }
    }

    /// The newest source of `class` still known (for "pause the music" without an id). Any thread.
    public func latestSource(of sourceClass: SourceClass) -> String? {
        state.withLock { s in
            s.playbacks.values.filter { $0.sourceClass == sourceClass && s.arbiter.state(of: $0.id) != nil }
                .max { $0.id.rawValue.count == $1.id.rawValue.count ? $0.id < $1.id : $0.id.rawValue.count < $1.id.rawValue.count }?
                .id.rawValue
        }
    }

    // MARK: Effects

    /// Carries out the arbiter's effects: events for all, slots for grants, then brings every
    /// slot in line with what the arbiter now says (paused, resumed, muted, ducked). Under the lock.
    private func apply(_ effects: [Effect<Instant>], _ s: inout State) {
        var ramps: [String: Int] = [:]  // "source/zone" → ramp frames for a duck change
        for e in effects {
            publish(e, s)
            switch e.action {
            case .granted(let id, _):
                start(id, &s)
            case .rejected(let id), .coalesced(let id, _), .expired(let id), .lostForGood(let id), .finished(let id):
                finish(id, &s)
            case .duckBegan(let id, let zone, _, let attack):
                ramps["\(id)/\(zone)"] = frames(attack, zone: zone.rawValue)
            case .duckEnded(let id, let zone, let release):
                ramps["\(id)/\(zone)"] = frames(release, zone: zone.rawValue)
            case .scheduleTimer(let at):
                s.timer = at
            default:
                break
            }
        }
        reconcile(&s, ramps: ramps)
    }

    private func frames(_ d: Duration, zone: String) -> Int {
        let rate = output(zone)?.rate ?? 48_000
        let (sec, atto) = d.components
        return max(1, Int(sec) * rate + Int(Double(atto) / 1e18 * Double(rate)))
    }

    private func start(_ id: SourceID, _ s: inout State) {
        guard let p = s.playbacks[id], !p.started else { return }
        p.started = true
        let audible = s.arbiter.state(of: p.id)?.isAudible ?? false
        for part in p.parts {
            // A new source starts at its gain with no fade (it begins at its own first sample), or
            // paused at 0 when it is granted but not heard anywhere yet.
            let gain = audible ? target(p, zone: part.zone, s) : 0
            guard let slot = output(part.zone)?.mixer.claimSlot(gain: gain) else {
                logger.error("zone \(part.zone): every slot is busy; \(id) cannot play there")
                continue
            }
            if !audible { slot.pause() }
            part.slot = slot
            if part.samples.isEmpty { slot.finish() }
        }
        p.feed()
    }

    /// The gain of `p` in `zone` the arbiter calls for: the user's volume × the duck stage, or 0
    /// where it is muted.
    private func target(_ p: Playback, zone: String, _ s: borrowing State) -> Float {
        let z = ZoneID(zone)
        if s.arbiter.isMuted(p.id, in: z) { return 0 }
        return p.volume * linearGain(decibels: s.arbiter.duckGain(of: p.id, in: z).value)
    }

    private func finish(_ id: SourceID, _ s: inout State) {
        guard let p = s.playbacks.removeValue(forKey: id) else { return }
        for part in p.parts {
            if let slot = part.slot, let out = output(part.zone) { out.mixer.release(slot) }
            part.slot = nil
        }
    }

    private func reconcile(_ s: inout State, ramps: [String: Int]) {
        for p in s.playbacks.values where p.started { reconcile(p, &s, ramps: ramps) }
    }

    /// Sets each slot of `p` to what the arbiter says: paused unless the source is audible; in each
    /// zone, the user's volume × the duck stage, or 0 where it is muted. Duck changes ramp over the
    /// policy's attack or release; everything else over the zone's default ramp.
    private func reconcile(_ p: Playback, _ s: inout State, ramps: [String: Int]) {
        let audible = s.arbiter.state(of: p.id)?.isAudible ?? false
        for part in p.parts {
            guard let slot = part.slot else { continue }
            let gain = target(p, zone: part.zone, s)
            if slot.targetGain != gain { slot.setGain(gain, overFrames: ramps["\(p.id)/\(part.zone)"]) }
            if audible { slot.resume() } else { slot.pause() }
        }
    }

    private func publish(_ e: Effect<Instant>, _ s: borrowing State) {
        let reason = String(describing: e.reason)
        var frames: [String: Int]?
        if let id = e.action.source, let p = s.playbacks[id] {
            frames = Dictionary(uniqueKeysWithValues: p.zones.compactMap { z in output(z).map { (z, $0.device.snapshot().framesPlayed) } })
        }
        let events = EventSink(log: self.events, frames: frames)
        switch e.action {
        case .granted(let id, let zones): events.publish(type: "granted", source: id.rawValue, zones: zones.map(\.rawValue), reason: reason)
        case .queued(let id): events.publish(type: "queued", source: id.rawValue, reason: reason)
        case .rejected(let id): events.publish(type: "rejected", source: id.rawValue, reason: reason)
        case .coalesced(let id, let into): events.publish(type: "coalesced", source: id.rawValue, reason: reason, into: into.rawValue)
        case .expired(let id): events.publish(type: "expired", source: id.rawValue, reason: reason)
        case .lostForGood(let id): events.publish(type: "lost-for-good", source: id.rawValue, reason: reason)
        case .finished(let id): events.publish(type: "finished", source: id.rawValue, reason: reason)
        case .interruptionBegan(let id, let zones):
            events.publish(type: "interruption-began", source: id.rawValue, zones: zones.map(\.rawValue), reason: reason)
        case .interruptionEnded(let id, let resume):
            events.publish(type: "interruption-ended", source: id.rawValue, reason: reason, shouldResume: resume)
        case .duckBegan(let id, let zone, let level, _):
            events.publish(type: "duck-began", source: id.rawValue, zones: [zone.rawValue], reason: reason, level: level.value)
        case .duckEnded(let id, let zone, _): events.publish(type: "duck-ended", source: id.rawValue, zones: [zone.rawValue], reason: reason)
        case .muted(let id, let zone): events.publish(type: "muted", source: id.rawValue, zones: [zone.rawValue], reason: reason)
        case .unmuted(let id, let zone): events.publish(type: "unmuted", source: id.rawValue, zones: [zone.rawValue], reason: reason)
        case .scheduleTimer: break
        }
        logger.debug("arbiter: \(e)")
    }

    // MARK: Monitor (control thread)

    private func monitorLoop() {
        while running.load(ordering: .acquiring) {
            tick()
            usleep(2_000)
        }
    }

    /// One pass of the monitor: feed rings, release drained sources, fire timers, report zone changes.
    /// Control thread; public to tests through `@testable`.
    func tick() {
        state.withLock { s in
            var done: [Playback] = []
            for p in s.playbacks.values where p.started {
                p.feed()
                if p.drained && !p.released { done.append(p) }
            }
            for p in done.sorted(by: { $0.id < $1.id }) {
                p.released = true
                let frames = Dictionary(uniqueKeysWithValues: p.parts.compactMap { part in part.slot?.lastFrameAt.map { (part.zone, $0) } })
                events.publish(type: "played", source: p.id.rawValue, zones: p.zones, reason: "sound \(p.sound) played to its end",
                               zoneFrames: frames)
                apply(s.arbiter.release(p.id, at: .now), &s)
            }
            if let t = s.timer, t <= .now {
                s.timer = nil
                apply(s.arbiter.tick(at: .now), &s)
            }
            for zone in zones.zones {
                let name = zone.name, output = zone.device
                let snap = output.snapshot()
                if s.zoneAvailable[name] != snap.available && (snap.available || snap.lastError != 0 || s.zoneAvailable[name] == true) {
                    s.zoneAvailable[name] = snap.available
                    if snap.available {
                        events.publish(type: "zone-available", zones: [name], reason: "PCM \"\(output.spec.pcm.name)\" open")
                        logger.info("zone \(name): available (PCM \"\(output.spec.pcm.name)\", period \(snap.periodFrames), buffer \(snap.bufferFrames) frames\(snap.realtime ? ", SCHED_FIFO" : ""))")
                        if !snap.realtime && zone.device.spec.realtimePriority > 0 {
                            logger.warning("zone \(name): real-time scheduling not granted (needs CAP_SYS_NICE or RLIMIT_RTPRIO); running at normal priority")
                        }
                    } else {
                        let why = zoneErrorText(name)
                        events.publish(type: "zone-unavailable", zones: [name], reason: why)
                        logger.error("zone \(name): unavailable: \(why); retrying with backoff")
                    }
                }
            }
        }
    }

    func zoneErrorText(_ zone: String) -> String {
        guard let out = output(zone) else { return "unknown zone" }
        let snap = out.device.snapshot()
        if snap.available { return "available" }
        if snap.lastError == 0 { return "opening PCM \"\(out.pcm)\"" }
        return ALSAError(operation: "open", pcm: out.pcm, code: snap.lastError).description
    }

    // MARK: Status

    /// Every zone and source as they are now. Any thread.
    public func status() -> StatusReport {
        state.withLock { s in
            let zones = self.zones.zones.map { handle -> StatusReport.Zone in
                let name = handle.name, output = handle.device
                let snap = output.snapshot()
                let z = s.arbiter.status(of: ZoneID(name))
                var slots: [StatusReport.SlotGain] = []
                for p in s.playbacks.values.sorted(by: { $0.id < $1.id }) {
                    for part in p.parts where part.zone == name {
                        if let slot = part.slot {
                            slots.append(.init(source: p.id.rawValue, gain: Double(slot.appliedGain), targetGain: Double(slot.targetGain),
                                               paused: slot.isPaused, positionFrames: slot.framesConsumed, starvedPeriods: slot.starvedPeriods))
                        }
                    }
                }
                return StatusReport.Zone(
                    name: name, pcm: output.spec.pcm.name, rate: output.spec.pcm.rate, channels: handle.channels,
                    format: output.spec.pcm.format.rawValue, clock: output.spec.clock.rawValue,
                    state: snap.available ? "available" : "unavailable", error: snap.available ? nil : zoneErrorText(name),
                    periodFrames: output.spec.pcm.periodFrames, bufferFrames: snap.bufferFrames,
                    framesPlayed: snap.framesPlayed, audibleFrame: snap.audibleFrame, delayFrames: snap.delayFrames,
                    xruns: snap.xruns, suspends: snap.suspends, lateCycles: snap.lateCycles, reopens: snap.reopens,
                    realtime: snap.realtime, volume: Double(handle.mixer.volume), appliedVolume: Double(handle.mixer.appliedVolume),
                    audible: z.audible.map(\.rawValue),
                    ducked: z.ducked.map { .init(source: $0.source.rawValue, levelDb: $0.level.value, by: $0.by.source.rawValue) },
                    silenced: z.silenced.map { .init(source: $0.source.rawValue, by: $0.by.source.rawValue) },
                    queued: z.queued.map(\.rawValue), sources: slots)
            }
            let sources = s.arbiter.sources.compactMap { st -> StatusReport.Source? in
                guard let p = s.playbacks[st.contender.source] else { return nil }
                let first = p.parts.first { $0.slot != nil }
                let rate = first.flatMap { output($0.zone)?.rate } ?? 1
                return StatusReport.Source(
                    id: p.id.rawValue, class: p.sourceClass.rawValue, sound: p.sound, loop: p.loop, volume: Double(p.volume),
                    state: st.state.rawValue, zones: p.zones, skippedZones: p.skipped.isEmpty ? nil : p.skipped,
                    interruptedBy: st.interruptedBy?.source.rawValue,
                    positionSeconds: first?.slot.map { Double($0.framesConsumed) / Double(rate) })
            }
            return StatusReport(zones: zones, sources: sources, uptimeMs: events.uptimeMs)
        }
    }
}

/// Publishes into the event log with the zone frames of the effect's source attached.
struct EventSink {
    let log: EventLog
    let frames: [String: Int]?
    func publish(type: String, source: String? = nil, zones: [String]? = nil, reason: String? = nil,
                 shouldResume: Bool? = nil, level: Double? = nil, into: String? = nil) {
        log.publish(type: type, source: source, zones: zones, reason: reason, shouldResume: shouldResume, level: level,
                    into: into, zoneFrames: frames)
    }
}

/// Starts a plain (non-real-time) OS thread.
func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { body = b } }
    var thread = pthread_t()
    let ctx = Unmanaged.passRetained(Box(body)).toOpaque()
    let rc = pthread_create(&thread, nil, { raw in
        Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
        return nil
    }, ctx)
    precondition(rc == 0, "pthread_create failed: \(rc)")
    return thread
}
