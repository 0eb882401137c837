import ALSA
import BatonConfig

/// Zone volume through an ALSA mixer control (`mixer:` on the zone or its board with
/// `volume: hardware`). The user's volume goes to the control and the zone's software volume stage
/// stays at 1; ducking and fades remain software gains on each source, so they never touch the
/// hardware setting. A control that cannot be opened leaves the zone on software gain, with a
/// warning and a `volume-control` event that say why.
extension Daemon {
    /// Opens the hardware controls of `names` (every zone when nil), moving each zone's current
    /// user volume onto its control. Control thread, before or right after the zones start.
    func openHardwareVolumes(_ names: [String]? = nil) {
        for zone in zones.zones where names?.contains(zone.name) ?? true {
            guard let control = zone.config.mixer else {
                hardware.withLock { _ = $0.removeValue(forKey: zone.name) }
                continue
            }
            let device = MixerControl.device(forPCM: zone.pcm)
            do {
                let mixer = try MixerControl(device: device, control: control)
                let volume = Double(zone.mixer.volume)
                try mixer.setVolume(volume)
                zone.mixer.setInitialVolume(1)
                hardware.withLock { $0[zone.name] = (mixer, volume) }
                let range = mixer.decibelRange.map { " (\($0.lowerBound)…\($0.upperBound) dB)" } ?? " (no dB scale: linear)"
                logger.info("zone \(zone.name): hardware volume on \(device) control \"\(control)\"\(range)")
            } catch {
                hardware.withLock { _ = $0.removeValue(forKey: zone.name) }
                logger.warning("zone \(zone.name): hardware volume unavailable (\(error)); using software gain")
                events.publish(type: "volume-control", zones: [zone.name],
                               reason: "hardware volume \"\(control)\" on \(device) unavailable: \(error.message); using software gain")
            }
        }
    }

    /// The zone's user volume (0...1): the hardware control's when it has one. Any thread.
    func userVolume(_ zone: ZoneHandle) -> Double {
        hardware.withLock { $0[zone.name]?.volume } ?? Double(zone.mixer.volume)
    }

    /// How the zone's volume is applied: `software`, or `hardware: CONTROL on DEVICE`. Any thread.
    func volumeControl(_ zone: ZoneHandle) -> String {
        hardware.withLock { $0[zone.name] }.map { "hardware: \($0.control.control) on \($0.control.device)" } ?? "software"
    }

    /// Sets the user volume on the zone's hardware control; false when it has none. Throws (502)
    /// when the control refuses. Any thread.
    func setHardwareVolume(_ zone: ZoneHandle, _ volume: Double) throws(RequestError) -> Bool {
        guard let entry = hardware.withLock({ $0[zone.name] }) else { return false }
        do {
            try entry.control.setVolume(volume)
        } catch {
            throw RequestError(status: 502, message: "zone \(zone.name): \(error)")
        }
        hardware.withLock { $0[zone.name]?.volume = volume }
        return true
    }
}
