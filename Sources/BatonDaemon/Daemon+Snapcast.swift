import BatonConfig
import Engine
import Glibc
import Snapcast

extension Daemon {
    /// Starts a group keeper for each Snapcast zone with `control` and speakers, stops those whose
    /// zone went away or changed, and leaves the others running. Control thread (start, reload).
    func updateSnapcastKeepers() {
        let wanted = config.zones.compactMap { zone -> (String, SnapcastConfig)? in
            guard let s = zone.snapcast, s.control != nil, !s.clients.isEmpty else { return nil }
            return (zone.name, s)
        }
        var stale: [GroupKeeper] = []
        var fresh: [GroupKeeper] = []
        snapcastKeepers.withLock { keepers in
            for (name, keeper) in keepers {
                guard let s = wanted.first(where: { $0.0 == name })?.1, keeper.zone == Self.snapcastZone(s),
                      keeper.control.endpoint == SnapcastControl(control: s.control!).endpoint else {
                    stale.append(keeper)
                    keepers[name] = nil
                    continue
                }
            }
            for (name, s) in wanted where keepers[name] == nil {
                let logger = self.logger
                let keeper = GroupKeeper(name: name, zone: Self.snapcastZone(s), control: SnapcastControl(control: s.control!)) { isError, message in
                    if isError { logger.warning(message) } else { logger.info(message) }
                }
                keepers[name] = keeper
                fresh.append(keeper)
            }
        }
        for keeper in stale { keeper.stop() }
        for keeper in fresh { keeper.start() }
    }

    /// Stops every group keeper. Control thread.
    func stopSnapcastKeepers() {
        let keepers = snapcastKeepers.withLock { k in defer { k = [:] }; return Array(k.values) }
        for keeper in keepers { keeper.stop() }
    }

    /// Why a Snapcast zone is unavailable (its stream source refuses or is gone), nil for ALSA zones.
    func snapcastErrorText(_ zone: ZoneHandle, _ snap: DeviceOutput.Snapshot) -> String? {
        guard let snapcast = zone.config.snapcast else { return nil }
        if snap.lastError == 0 { return "connecting to snapserver source \(snapcast.source)" }
        return "snapserver source \(snapcast.source): \(String(cString: strerror(snap.lastError))) (errno \(snap.lastError)); retrying"
    }

    /// The speakers a zone's configuration asks for, as the keeper's planner takes them.
    static func snapcastZone(_ s: SnapcastConfig) -> SnapcastZone {
        SnapcastZone(stream: s.stream, speakers: s.clients.map { c in
            SnapcastZone.Speaker(id: c.id, volumePercent: c.volume.map { Int(($0 * 100).rounded()) },
                                 latencyMilliseconds: c.latency.map { Int($0.components.seconds) * 1000 + Int($0.components.attoseconds / 1_000_000_000_000_000) })
        })
    }

    /// The zone's Snapcast part of the status report (nil for an ALSA zone). Any thread.
    func snapcastStatus(_ zone: ZoneHandle) -> StatusReport.Snapcast? {
        guard let s = zone.config.snapcast else { return nil }
        let keeper = snapcastKeepers.withLock { $0[zone.name] }
        let state = keeper?.state
        return StatusReport.Snapcast(source: "\(s.source)", speakers: s.clients.map(\.id), connected: state?.connected ?? [],
                                     problem: state?.problem, fixes: state?.fixes ?? 0, droppedFrames: zone.device.droppedFrames)
    }
}
