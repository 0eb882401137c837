import ALSA
import AudioCore
import BatonConfig
import Engine
import Glibc
import OSThread
import Players

/// One configured zone as the daemon drives it: its device output and its mixer there.
/// Immutable; shared between threads.
package final class ZoneHandle: Sendable {
    package let name: String
    package let config: ZoneConfig
    package let device: DeviceOutput
    package let mixer: ZoneMixer

    package init(name: String, config: ZoneConfig, device: DeviceOutput, mixer: ZoneMixer) {
        self.name = name
        self.config = config
        self.device = device
        self.mixer = mixer
    }

    package var rate: Int { device.spec.pcm.rate }
    package var channels: Int { mixer.channels }
    package var pcm: String { device.spec.pcm.name }

    /// What a source writes into `slot` of this zone, resampling with `resampler`.
    package func output(_ slot: SourceSlot, resampler: ResamplerKind) -> SourceOutput {
        SourceOutput(
            zone: name, slot: slot, mixer: mixer, device: device, rate: rate, channels: channels, resampler: resampler)
    }

    /// `d` in frames at the zone's rate (at least 1).
    package func frames(_ d: Duration) -> Int {
        let (sec, atto) = d.components
        return max(1, Int(sec) * rate + Int(Double(atto) / 1e18 * Double(rate)))
    }
}

/// The zones and devices of one configuration. Replaced as a whole on reload; any thread reads it.
package final class ZoneTable: Sendable {
    package let zones: [ZoneHandle]
    package let devices: [DeviceOutput]

    package init(zones: [ZoneHandle], devices: [DeviceOutput]) {
        self.zones = zones
        self.devices = devices
    }

    package func zone(_ name: String) -> ZoneHandle? { zones.first { $0.name == name } }
    package var names: [String] { zones.map(\.name) }

    /// The device spec for one configured device of `config` and its zones: 10 ms ramps, 8 slots
    /// per zone, rings of `ringFrames(rate:among:atLeast:)`, each zone starting at its configured
    /// volume.
    package static func deviceSpec(
        for device: DeviceConfig, in config: BatonConfiguration, ringsAtLeast: RingLength? = nil
    ) -> DeviceSpec {
        let zones = config.zones
        let request = PCMRequest(
            name: device.pcm, rate: device.rate, channels: device.channels,
            format: SampleFormat(device.format),
            periodFrames: device.periodFrames, bufferFrames: device.bufferFrames)
        let specs = device.zones.map { z in
            ZoneSpec(
                name: z.name, deviceChannels: z.deviceChannels, rampFrames: max(1, device.rate / 100),
                ringFrames: ringFrames(rate: device.rate, among: config.devices, atLeast: ringsAtLeast),
                volume: Float(zones.first { $0.name == z.name }?.volume ?? 1))
        }
        if let snapcast = device.snapcast {
            return snapcastSpec(request, snapcast, zones: specs)
        }
        // An ALSA device with nothing to play stops its PCM and its thread sleeps (docs/PERFORMANCE.md);
        // the control plane wakes it when it starts a source there.
        return DeviceSpec(
            pcm: request, clock: ZoneClock(device.clock), zones: specs, stopsWhenIdle: true,
            rendersAhead: device.renderAhead)
    }

    /// Frames of a slot's ring: half a second (four periods at least), or for a long buffer what
    /// the output may take before a feeder that looked just before it took anything looks again.
    /// Such a feeder (the monitor, a music stream's thread) sleeps until the ring it left full is
    /// half full (`SourceOutput.nanosecondsAboveHalf`), as if the output drained it evenly; but
    /// the output takes the whole buffer at once when its card starts (from idle, too) and up to
    /// half of it at each wake-up after (`DeviceOutput.wakePeriods`). So the ring holds the
    /// buffer, half of it more, and a quarter second against a late look. With the buffer and a
    /// quarter second, a 2 s buffer ran dry a second after the start (75 periods) whenever the
    /// look came before the card's first fill.
    package static func ringFrames(rate: Int, periodFrames: Int, bufferFrames: Int) -> Int {
        max(rate / 2, periodFrames * 4, bufferFrames + bufferFrames / 2 + rate / 4)
    }

    /// Frames at `rate` of every zone's slot ring: as long in time as the longest ring any zone of
    /// `devices` needs (`ringFrames(rate:periodFrames:bufferFrames:)`, rounded up). A source may
    /// play in any zones, and a zone back from a lost card rejoins the others only by holding the
    /// silence of what they hold unread (`SourceOutput.rejoins`): while it is away its producer
    /// waits on the others' rings only, which stay at least half full. With a ring shorter than
    /// half of another's (`buffer:` above about 0.5 s there) it never rejoined: its frames were
    /// dropped until the stream restarted, the zone available and silent. `atLeast`: the rings a
    /// reload keeps (`rebuilt`), which every new device's match.
    package static func ringFrames(rate: Int, among devices: [DeviceConfig], atLeast: RingLength? = nil) -> Int {
        let needed = devices.reduce(rate / 2) { longest, d in max(longest, ringNeeded(by: d).frames(at: rate)) }
        return max(needed, atLeast?.frames(at: rate) ?? 0)
    }

    /// The ring `device`'s own period and buffer need (`ringFrames(rate:periodFrames:bufferFrames:)`).
    static func ringNeeded(by device: DeviceConfig) -> RingLength {
        RingLength(
            frames: ringFrames(rate: device.rate, periodFrames: device.periodFrames, bufferFrames: device.bufferFrames),
            rate: device.rate)
    }

    /// A slot ring's length in time: `frames` at `rate`.
    package struct RingLength: Sendable, Equatable {
        package var frames: Int
        package var rate: Int

        package init(frames: Int, rate: Int) {
            self.frames = frames
            self.rate = rate
        }

        /// The same length at `other`, rounded up.
        package func frames(at other: Int) -> Int { (frames * other + rate - 1) / max(1, rate) }

        /// The ring of `spec`'s zones (the longest, in time).
        package init?(_ spec: DeviceSpec) {
            guard let frames = spec.zones.map(\.ringFrames).max() else { return nil }
            self.init(frames: frames, rate: spec.pcm.rate)
        }

        /// Whether it is longer in time than `other`.
        package func isLonger(than other: RingLength) -> Bool { frames * other.rate > other.frames * rate }
    }

    /// Above this, the slot rings' worst case is said at load (`ringMemoryWarning`): 64 MiB.
    package static let ringMemoryWarningBytes = 64 << 20

    /// What the slot rings of this table's zones hold with every slot in use, when that is above
    /// `ringMemoryWarningBytes`: the bytes in all and per zone, and the `buffer` that makes them so
    /// long (the longest in `config`). Rings are as long as the longest any zone needs
    /// (`ringFrames(rate:among:)`): a `buffer: 10s` zone beside an 8-channel 192 kHz zone makes
    /// each slot used there 94 MB, and batond locks its memory (`mlockall`). Rings are paged in
    /// only as slots are used, so this is the worst case, said once at start and at each reload;
    /// nil below it (a default configuration is far below: 1.5 MiB a 48 kHz stereo zone). Rings a
    /// reload kept longer than `config` needs (`rebuilt`) are said kept, to shrink at a restart.
    package func ringMemoryWarning(_ config: BatonConfiguration) -> String? {
        let perZone = devices.flatMap { d in
            d.spec.zones.map { z in (name: z.name, slot: z.ringFrames * z.channels * 4, slots: z.slotCount) }
        }
        let total = perZone.reduce(0) { $0 + $1.slot * $1.slots }
        let need = Self.ringNeeded(by:)
        guard total > Self.ringMemoryWarningBytes,
            let longest = devices.compactMap({ RingLength($0.spec) }).max(by: { $1.isLonger(than: $0) }),
            let widest = config.devices.max(by: { need($1).isLonger(than: need($0)) })
        else { return nil }
        func mib(_ bytes: Int) -> String {
            let tenths = (bytes * 10 + (1 << 19)) >> 20
            return "\(tenths / 10).\(tenths % 10) MiB"
        }
        let zones = perZone.sorted { $0.slot * $0.slots > $1.slot * $1.slots }.map { z in
            "\(z.name) \(mib(z.slot * z.slots)) (\(z.slot) bytes a slot)"
        }
        let length = { (r: RingLength) in ConfigSyntax.format(.nanoseconds(r.frames * 1_000_000_000 / max(1, r.rate))) }
        let zone = widest.zones.map(\.name).joined(separator: ", ")
        let held =
            "with every slot of every zone in use they hold \(total) bytes (\(mib(total))) of locked memory: \(zones.joined(separator: ", "))"
        // Longer than `config` makes them (`build`): rings a reload kept (`rebuilt`), longer than
        // any zone needs now. Said as if `widest` made them, the warning blamed a zone whose
        // buffer did not, and a shorter buffer there changed nothing.
        let kept = devices.contains { d in
            RingLength(d.spec).map { $0.frames > Self.ringFrames(rate: $0.rate, among: config.devices) } ?? false
        }
        if kept {
            return
                "zones: every slot ring is \(length(longest)) long, kept from before the reload (the longest any zone needs now is \(length(need(widest))): \(zone), buffer: \(ConfigSyntax.format(widest.buffer))); \(held). The rings shrink only when every zone restarts: restart batond"
        }
        return
            "zones: every slot ring is \(length(longest)) long (the longest any zone needs: \(zone), buffer: \(ConfigSyntax.format(widest.buffer))); \(held). A shorter buffer in \(zone) makes every zone's rings shorter"
    }

    /// A Snapcast zone's output: S16_LE into the stream source, paced by the system clock, heard one
    /// server buffer later; 20 ms of silence (one server chunk) after each connect, once the server's
    /// JSON-RPC has answered after it (when Baton keeps the zone's speakers: `GroupKeeper`).
    package static func snapcastSpec(_ request: PCMRequest, _ snapcast: SnapcastConfig, zones: [ZoneSpec]) -> DeviceSpec
    {
        var pcm = request
        pcm.name = snapcast.source.description
        pcm.format = .s16LE
        pcm.bufferFrames = 4 * pcm.periodFrames  // a cycle this late counts as late
        let stream = StreamSpec(
            target: snapcast.source, latencyFrames: snapcast.bufferFrames(rate: pcm.rate),
            prefillFrames: pcm.rate / 50, awaitsServer: snapcast.keepsSpeakers)
        return DeviceSpec(pcm: pcm, clock: .system, zones: zones, stream: stream)
    }

    /// Builds the zones of `config`: one device output per PCM, carrying every zone on it.
    /// Devices are created, not started.
    package static func build(_ config: BatonConfiguration) -> ZoneTable {
        var handles: [String: ZoneHandle] = [:]
        var devices: [DeviceOutput] = []
        for d in config.devices {
            let device = DeviceOutput(deviceSpec(for: d, in: config))
            devices.append(device)
            for z in d.zones {
                guard let zc = config.zone(named: z.name), let mixer = device.mixer(for: z.name) else { continue }
                handles[z.name] = ZoneHandle(name: z.name, config: zc, device: device, mixer: mixer)
            }
        }
        return ZoneTable(zones: config.zones.compactMap { handles[$0.name] }, devices: devices)
    }

    /// The zones of `new`, keeping every device of this table whose spec and whose zones' settings
    /// are identical (it plays on untouched): the table, the devices to stop, and the new devices to
    /// start. A zone whose settings changed off the device's spec (`max-volume`, `mixer`,
    /// `resampler`, `volume`) starts anew like any changed zone: kept, it went on with the old ones.
    /// Rings are compared by what they hold: a device whose rings are longer than `new` needs is
    /// kept (`DeviceSpec.serves`), and the devices started beside it get rings as long as its, so
    /// that every zone's rings stay one length (`ringFrames(rate:among:atLeast:)`). Compared whole,
    /// a reload that removed or shortened the longest `buffer` reopened every zone: the music cut
    /// everywhere for rings that were long enough. Only rings that must grow reopen every zone;
    /// rings made shorter than needed stay until every device restarts (a reload that reopens all
    /// of them, or a restart). A Snapcast zone's speakers, `control` and `stream` are not compared
    /// (`played(_:)`): its keeper applies them, and the stream connection plays on.
    package func rebuilt(for new: BatonConfiguration) -> (
        table: ZoneTable, stopped: [DeviceOutput], started: [DeviceOutput]
    ) {
        let kept = new.devices.map { d in
            let wanted = ZoneTable.deviceSpec(for: d, in: new)
            return self.devices.first { old in
                old.spec.serves(wanted)
                    && old.spec.zones.allSatisfy { z in
                        zone(z.name).map { Self.played($0.config) } == new.zone(named: z.name).map(Self.played)
                    }
            }
        }
        let ring = kept.compactMap { $0.flatMap { RingLength($0.spec) } }.max { $1.isLonger(than: $0) }
        let devices = zip(new.devices, kept).map { d, old in
            old ?? DeviceOutput(ZoneTable.deviceSpec(for: d, in: new, ringsAtLeast: ring))
        }
        let handles = new.zones.compactMap { zone -> ZoneHandle? in
            guard let device = devices.first(where: { $0.mixer(for: zone.name) != nil }),
                let mixer = device.mixer(for: zone.name)
            else { return nil }
            return ZoneHandle(name: zone.name, config: zone, device: device, mixer: mixer)
        }
        let stopped = self.devices.filter { d in !devices.contains { $0 === d } }
        let started = devices.filter { d in !self.devices.contains { $0 === d } }
        return (ZoneTable(zones: handles, devices: devices), stopped, started)
    }

    /// `zone`'s settings its device plays by: a Snapcast zone's speakers (`clients`, their volumes
    /// and latencies), its `control` and its `stream` name left out. Only its group keeper uses
    /// those, and `SnapcastKeepers.update` replaces that on its own (carrying the volumes it set);
    /// whether Baton keeps speakers at all is in the device's spec (`StreamSpec.awaitsServer`).
    /// Compared whole, a speaker's new latency reopened the stream connection: what played in the
    /// zone ended as vanished and the speakers drifted apart for seconds.
    static func played(_ zone: ZoneConfig) -> ZoneConfig {
        var played = zone
        played.snapcast?.clients = []
        played.snapcast?.control = nil
        played.snapcast?.stream = ""
        return played
    }

    /// Splits `zones` into those whose device plays now and those skipped; unavailable, with each
    /// zone's error, when none is. Any thread.
    package func available(_ zones: [String]) throws(ControlError) -> (available: [String], skipped: [String]) {
        let available = zones.filter { zone($0)?.device.snapshot().available == true }
        guard !available.isEmpty else {
            let why = zones.map { z in "\(z): \(zone(z)?.errorText ?? "unknown zone")" }.joined(separator: "; ")
            throw ControlError(.unavailable, "no requested zone is available (\(why))")
        }
        return (available, zones.filter { !available.contains($0) })
    }

    /// Fades every zone to silence over its ramp and waits until the fade has been heard, at most
    /// 0.5 s in all. The volume reaches 0 when the fade is rendered, a buffer before the card plays
    /// it: the stop that follows drops the card's buffer (`snd_pcm_drop`), and stopping then cut
    /// the music at full level (a click at every `systemctl restart`). So each zone is waited for
    /// until its audible frame passes what it had rendered when its volume reached 0 (and the
    /// period a render in progress then adds) — not a zone whose card is away or stopped while
    /// idle, which plays nothing. Control thread.
    package func fadeOut() {
        let playing = zones.filter { !$0.device.isStoppedIdle }
        for zone in zones { zone.mixer.setVolume(0) }
        let deadline = monotonicNanoseconds() + 500_000_000
        // Per zone: the frame its fade ended by, once its volume is 0.
        var silentFrom = [Int?](repeating: nil, count: playing.count)
        while monotonicNanoseconds() < deadline {
            var waiting = false
            for (i, zone) in playing.enumerated() {
                let snap = zone.device.snapshot()
                guard snap.available else { continue }
                if silentFrom[i] == nil {
                    guard zone.mixer.appliedVolume == 0 else {
                        waiting = true
                        continue
                    }
                    silentFrom[i] = zone.mixer.framesRendered + zone.mixer.periodFrames
                }
                if let end = silentFrom[i], snap.audibleFrame < end { waiting = true }
            }
            guard waiting else { return }
            usleep(5_000)
        }
    }
}

extension DeviceOutput {
    /// Starts the output thread and says so. Control thread.
    /// `changed` runs on the output thread when the PCM opens or is lost and when what a
    /// zone mixes changed (it wakes the monitor, which reports availability and follows the audio);
    /// `connection` when a stream output's connection changes (it wakes the zone's Snapcast keeper).
    package func start(
        _ logger: Logger, connection: (@Sendable () -> Void)? = nil, changed: @escaping @Sendable () -> Void
    ) {
        availabilityObserver = changed
        audioObserver = changed
        // A stream output's connection changes its availability and what is heard: the monitor looks too.
        if let connection {
            connectionObserver = { @Sendable in
                connection()
                changed()
            }
        }
        start()
        let p = spec.pcm
        let names = spec.zones.map(\.name)
        logger.info(
            "PCM \"\(p.name)\": output thread started for zone\(names.count == 1 ? "" : "s") \(names.joined(separator: ", ")) (\(p.rate) Hz, \(p.channels) ch, \(p.format.rawValue), clock \(spec.clock.rawValue)\(spec.rendersAhead ? ", rendering ahead" : ""))"
        )
    }
}
