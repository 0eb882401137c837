import Arbiter
import BatonConfig
import Engine

extension Daemon {
    /// What a reload did.
    public struct ReloadReport: Codable, Sendable, Equatable {
        /// True when the new configuration was applied.
        public var applied: Bool
        /// The problems that kept an invalid configuration from being applied (one per line).
        public var errors: [String]
        public var zonesAdded: [String]
        public var zonesRemoved: [String]
        /// Zones whose settings changed (their device was reopened; what played there stopped).
        public var zonesChanged: [String]
        /// Zones left untouched: their audio never stopped.
        public var zonesUnchanged: [String]
        public var policyChanged: Bool
        public var soundsChanged: Bool
        /// Settings that only take effect after a restart (e.g. `api.listen`).
        public var needsRestart: [String]
    }

    /// Re-reads the configuration file and applies it (see `apply(_:)`). Any thread.
    public func reload() -> ReloadReport {
        guard let path = configPath else {
            return ReloadReport(applied: false, errors: ["the daemon was not started from a config file"], zonesAdded: [],
                                zonesRemoved: [], zonesChanged: [], zonesUnchanged: [], policyChanged: false,
                                soundsChanged: false, needsRestart: [])
        }
        do {
            return apply(try BatonConfiguration.load(path: path))
        } catch {
            logger.error("reload: \(path) is invalid; keeping the running configuration:\n\(error)")
            events.publish(type: "reload-rejected", reason: error.issues.map(\.description).joined(separator: "\n"))
            return ReloadReport(applied: false, errors: error.issues.map(\.description), zonesAdded: [], zonesRemoved: [],
                                zonesChanged: [], zonesUnchanged: [], policyChanged: false, soundsChanged: false,
                                needsRestart: [])
        }
    }

    /// Applies a checked configuration as a diff: devices whose zones and settings are unchanged keep
    /// playing untouched; removed or changed ones stop (their sources end as `vanished`), new ones
    /// start; a new policy goes to the arbiter. Any thread.
    public func apply(_ new: BatonConfiguration) -> ReloadReport {
        let old = config
        let oldTable = zones
        let fresh = ZoneTable.build(new)
        // Keep every old device whose spec is identical; use the new one otherwise.
        var keptDevices: [DeviceOutput] = []
        var devices: [DeviceOutput] = []
        var handles: [ZoneHandle] = []
        for device in fresh.devices {
            if let same = oldTable.devices.first(where: { $0.spec == device.spec }) {
                keptDevices.append(same)
                devices.append(same)
            } else {
                devices.append(device)
            }
        }
        for zone in new.zones {
            let device = devices.first { $0.mixer(for: zone.name) != nil }!
            handles.append(ZoneHandle(name: zone.name, config: zone, device: device, mixer: device.mixer(for: zone.name)!))
        }
        let stopped = oldTable.devices.filter { d in !keptDevices.contains { $0 === d } }
        let started = devices.filter { d in !keptDevices.contains { $0 === d } }
        let stoppedZones = Set(stopped.flatMap { $0.spec.zones.map(\.name) })
        let report = ReloadReport(
            applied: true, errors: [],
            zonesAdded: new.zones.map(\.name).filter { oldTable.zone($0) == nil },
            zonesRemoved: oldTable.names.filter { n in !new.zones.contains { $0.name == n } },
            zonesChanged: new.zones.map(\.name).filter { oldTable.zone($0) != nil && stoppedZones.contains($0) },
            zonesUnchanged: new.zones.map(\.name).filter { !stoppedZones.contains($0) && oldTable.zone($0) != nil },
            policyChanged: old.policy != new.policy,
            soundsChanged: old.sounds != new.sounds || old.resampler != new.resampler,
            needsRestart: old.api != new.api ? ["api"] : [])

        // Sources on zones that go away end first, so nothing keeps a slot of a stopped device.
        endSources(onZones: stoppedZones)
        for d in stopped { d.stop() }
        replaceZones(ZoneTable(zones: handles, devices: devices))
        replaceConfig(new, sounds: report.soundsChanged ? Self.soundLibrary(new) : sounds)
        if report.policyChanged { setPolicy(Policy(new.policy)) }
        openHardwareVolumes(report.zonesAdded + report.zonesChanged)
        for d in started { startDevice(d) }
        updateSnapcastKeepers()
        logger.info("reload: applied (added \(report.zonesAdded), removed \(report.zonesRemoved), changed \(report.zonesChanged), unchanged \(report.zonesUnchanged)\(report.policyChanged ? ", new policy" : "")\(report.needsRestart.isEmpty ? "" : "; restart needed for \(report.needsRestart)"))")
        events.publish(type: "reloaded", zones: new.zones.map(\.name),
                       reason: "added \(report.zonesAdded), removed \(report.zonesRemoved), changed \(report.zonesChanged)")
        return report
    }
}
