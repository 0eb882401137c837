import BatonConfig
import Engine
import Glibc
import OSThread
import Snapcast
import Synchronization

/// The group keepers of the Snapcast zones, by zone: each keeps its zone's speakers grouped on the
/// zone's stream (see `GroupKeeper`). Control thread for `update`/`stop`; any thread for the rest.
package final class SnapcastKeepers: Sendable {
    private let keepers = Mutex<[String: GroupKeeper]>([:])
    /// What wakes each zone's keeper, by zone, kept across reloads: the zone's output posts it from
    /// its thread (no lock there) whatever keeper runs now.
    private let bells = Mutex<[String: GroupKeeper.Bell]>([:])
    private let logger: Logger

    package init(logger: Logger) { self.logger = logger }

    /// Starts a keeper for each Snapcast zone with `control` and speakers, stops those whose zone went
    /// away or changed, and leaves the others running. Each keeper's answers go to the zone's
    /// current output (`device(zone)`, looked up at each answer, so a reload's new device gets
    /// them): its new connections carry audio once the server is seen running. A new keeper takes
    /// the speakers `saved` says were set (the state file's, at a start) at the volume configured
    /// now as set already: a restart must not undo a listener's change either. Control thread
    /// (start, reload).
    package func update(
        _ zones: [ZoneConfig], saved: [String: [String: Int]] = [:],
        device: @escaping @Sendable (_ zone: String) -> DeviceOutput?
    ) {
        let wanted = zones.compactMap { zone -> (String, SnapcastZone, SnapcastControl)? in
            guard let s = zone.snapcast, let control = s.control, s.keepsSpeakers else { return nil }
            return (zone.name, Self.zone(zone, s), SnapcastControl(control: control))
        }
        var stale: [GroupKeeper] = []
        var fresh: [GroupKeeper] = []
        // A keeper replaced for a zone whose settings changed hands on the speakers whose volume
        // it set, with the percent (kept as set if their configured volume is the same): a reload
        // must not undo a listener's change. Also when the control URL is written another way for
        // the same server (`SnapcastControl.identity`: `localhost`, credentials added), whose new
        // spelling the new keeper calls.
        var carried: [String: [String: Int]] = [:]
        keepers.withLock { keepers in
            for (name, keeper) in keepers {
                guard let (_, s, control) = wanted.first(where: { $0.0 == name }), keeper.zone == s,
                    keeper.control.endpoint == control.endpoint
                else {
                    if let (_, _, control) = wanted.first(where: { $0.0 == name }),
                        SnapcastControl.identity(keeper.control.endpoint) == SnapcastControl.identity(control.endpoint)
                    {
                        carried[name] = Self.percentsSet(by: keeper)
                    }
                    stale.append(keeper)
                    keepers[name] = nil
                    continue
                }
            }
            for (name, s, control) in wanted where keepers[name] == nil {
                let set = carried[name] ?? saved[name] ?? [:]
                let logger = self.logger
                let keeper = GroupKeeper(
                    name: name, zone: s, control: control,
                    answered: { device(name)?.serverAnswered(callStartedAt: $0) },
                    listeners: {
                        device(name)?.listenersConnected($0 == .heard, elsewhere: $0 == .elsewhere, muted: $0 == .muted)
                    },
                    output: { device(name)?.awaitsServer == true ? .answer : .nothing }, wake: bell(for: name),
                    volumesSet: Set(
                        s.speakers.compactMap { speaker in
                            speaker.volumePercent != nil && set[speaker.id] == speaker.volumePercent ? speaker.id : nil
                        })
                ) { isError, message in
                    if isError { logger.warning(message) } else { logger.info(message) }
                }
                keepers[name] = keeper
                fresh.append(keeper)
            }
        }
        for keeper in stale { keeper.askToStop() }
        for keeper in stale { keeper.stop() }
        for keeper in fresh { keeper.start() }
    }

    /// What a Snapcast zone's output calls when its connection changes (`DeviceOutput.connectionObserver`):
    /// it wakes the zone's keeper, which answers a new connection at once. Nil for an ALSA device.
    /// Control thread, before the output starts.
    package func connectionObserver(for device: DeviceOutput) -> (@Sendable () -> Void)? {
        guard device.spec.stream != nil, let zone = device.spec.zones.first?.name else { return nil }
        let bell = bell(for: zone)
        return { bell.post() }
    }

    private func bell(for zone: String) -> GroupKeeper.Bell {
        bells.withLock { bells in
            if let bell = bells[zone] { return bell }
            let bell = GroupKeeper.Bell()
            bells[zone] = bell
            return bell
        }
    }

    /// Per zone whose keeper runs, the speakers it set to their configured volume, with the
    /// percent (`SavedState.speakerVolumes`); `saved`'s entry for a zone of `zones` that keeps
    /// speakers but whose keeper has not started yet (at a start). Not one for a zone not kept now:
    /// its speakers may reconnect unseen meanwhile, and the zone back (a reload, or a start) must
    /// set their volumes again. Any thread.
    package func volumesSet(_ zones: [ZoneConfig], saved: [String: [String: Int]]) -> [String: [String: Int]] {
        let running = keepers.withLock { $0 }
        var result: [String: [String: Int]] = [:]
        for (zone, set) in saved where running[zone] == nil {
            if zones.first(where: { $0.name == zone })?.snapcast?.keepsSpeakers == true { result[zone] = set }
        }
        for (zone, keeper) in running {
            let set = Self.percentsSet(by: keeper)
            result[zone] = set.isEmpty ? nil : set
        }
        return result
    }

    /// The speakers `keeper` set to their configured volume, by the percent it set. A new keeper
    /// takes those still configured at that percent as set (`update`).
    private static func percentsSet(by keeper: GroupKeeper) -> [String: Int] {
        let set = keeper.state.volumesSet
        var percents: [String: Int] = [:]
        for speaker in keeper.zone.speakers where set.contains(speaker.id) {
            if let percent = speaker.volumePercent { percents[speaker.id] = percent }
        }
        return percents
    }

    /// Stops every keeper. Control thread.
    package func stop() {
        let all = keepers.withLock { k in
            defer { k = [:] }
            return Array(k.values)
        }
        // All told first: systemd gives the whole stop 5 s, and a keeper waiting on a hung
        // server took up to its call's 3 s, one keeper after another.
        for keeper in all { keeper.askToStop() }
        for keeper in all { keeper.stop() }
    }

    /// Why a Snapcast zone is unavailable (its stream source refuses or is gone), nil for ALSA zones.
    package static func errorText(_ zone: ZoneHandle, _ snap: DeviceOutput.Snapshot) -> String? {
        guard let snapcast = zone.config.snapcast else { return nil }
        if zone.device.awaitsServer, let control = snapcast.control {
            return
                "connected to snapserver source \(snapcast.source); waiting for its JSON-RPC (\(SnapcastControl.shown(control))) to answer"
        }
        if zone.device.listenersElsewhere {
            return
                "snapserver has the zone's speakers connected, but none on its stream \"\(snapcast.stream)\" (the status's snapcast.problem says why): what it plays reaches no one"
        }
        if zone.device.listenersMuted {
            return
                "every speaker of the zone on its stream \"\(snapcast.stream)\" is muted in Snapcast (muted, at volume 0 %, or in a muted group): what it plays reaches no one"
        }
        if zone.device.hasNoListener {
            let speakers = snapcast.clients.map(\.id).joined(separator: ", ")
            return "snapserver has none of the zone's speakers (\(speakers)) connected: what it plays reaches no one"
        }
        if zone.device.isStalled {
            return
                "snapserver source \(snapcast.source) takes nothing (the server is stopped or hung but keeps the connection): what falls due is dropped"
        }
        if snap.lastError == 0 { return "connecting to snapserver source \(snapcast.source)" }
        return
            "snapserver source \(snapcast.source): \(String(cString: strerror(snap.lastError))) (errno \(snap.lastError))"
    }

    /// The speakers a Snapcast zone's configuration asks for, and the format Baton writes to its
    /// stream `s` (S16_LE at the zone's rate and channels), as the keeper's planner takes them.
    package static func zone(_ zone: ZoneConfig, _ s: SnapcastConfig) -> SnapcastZone {
        SnapcastZone(
            stream: s.stream,
            speakers: s.clients.map { c in
                SnapcastZone.Speaker(
                    id: c.id, volumePercent: c.volume.map { Int(($0 * 100).rounded()) },
                    latencyMilliseconds: c.latency.map(\.wholeMilliseconds))
            }, sampleFormat: "\(zone.rate):\(zone.format.bytesPerSample * 8):\(zone.channels)")
    }

    /// The zone's Snapcast part of the status report (nil for an ALSA zone).
    package func status(_ zone: ZoneHandle) -> SnapcastStatus? {
        guard let s = zone.config.snapcast else { return nil }
        // No keeper: no speaker to keep, none to be connected.
        let state = keepers.withLock { $0[zone.name] }?.state
        return SnapcastStatus(
            source: "\(s.source)", speakers: s.clients.map(\.id), connected: state.map(\.connected) ?? [],
            problem: state?.problem, fixes: state?.fixes ?? 0, droppedFrames: zone.device.droppedFrames)
    }
}

/// A Snapcast zone's speakers as snapserver reports them, the last problem the keeper met (a
/// speaker not connected, the server unreachable), the group fixes it made, and the audio dropped
/// while the stream source was away.
public struct SnapcastStatus: Codable, Sendable, Equatable {
    public var source: String
    public var speakers: [String]
    /// Nil (absent from the JSON) when the keeper's last poll read no status: not known.
    public var connected: [String]?
    public var problem: String?
    public var fixes: Int
    public var droppedFrames: Int
}
