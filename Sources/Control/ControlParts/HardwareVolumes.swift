import ALSA
import OSThread
import Synchronization

/// Zone volume through an ALSA mixer control (`mixer:` on the zone or its board with
/// `volume: hardware`). The user's volume goes to the control and the zone's software volume stage
/// stays at 1; ducking and fades remain software gains on each source, so they never touch the
/// hardware setting. A control that cannot be opened leaves the zone on software gain, with a
/// warning and a `volume-control` event that say why. Any thread (one mutex).
package final class HardwareVolumes: Sendable {
    private let controls = Mutex<[String: (control: MixerControl, volume: Double)]>([:])
    private let logger: Logger
    private let events: EventLog

    package init(logger: Logger, events: EventLog) {
        self.logger = logger
        self.events = events
    }

    /// Opens the controls of `zones`, moving each zone's current user volume onto its control.
    /// Control thread, before or right after the zones start.
    package func open(_ zones: [ZoneHandle]) {
        // First every control a zone no longer uses goes back to full, then the new ones are
        // opened: a zone opened first on a control another zone was leaving had it set to 100 %
        // after it (and played at full while its status said 40 %).
        for zone in zones {
            let device = zone.config.mixer.map { _ in MixerControl.device(forPCM: zone.pcm) }
            // A control a reload no longer uses (`mixer: none`, or another control) goes back to
            // full: left at the zone's last volume, it stayed under the software gain that now
            // carries that volume — 30 % of 30 %, while the status said 30 %.
            let left = controls.withLock { c -> MixerControl? in
                guard let previous = c[zone.name],
                    previous.control.control != zone.config.mixer || previous.control.device != device
                else { return nil }
                c.removeValue(forKey: zone.name)
                return previous.control
            }
            if let left { setBackToFull(left, of: zone.name) }
        }
        for zone in zones {
            guard let control = zone.config.mixer else {
                controls.withLock { _ = $0.removeValue(forKey: zone.name) }
                continue
            }
            let device = MixerControl.device(forPCM: zone.pcm)
            do {
                let mixer = try MixerControl(device: device, control: control)
                let volume = Double(zone.mixer.volume)
                try mixer.setVolume(volume)
                zone.mixer.setInitialVolume(1)
                controls.withLock { $0[zone.name] = (mixer, volume) }
                let range =
                    mixer.decibelRange.map { " (\($0.lowerBound)…\($0.upperBound) dB)" } ?? " (no dB scale: linear)"
                logger.info("zone \(zone.name): hardware volume on \(device) control \"\(control)\"\(range)")
            } catch {
                controls.withLock { _ = $0.removeValue(forKey: zone.name) }
                logger.warning("zone \(zone.name): hardware volume unavailable (\(error)); using software gain")
                events.publish(
                    type: .volumeControl, zones: [zone.name],
                    reason:
                        "hardware volume \"\(control)\" on \(device) unavailable: \(error.message); using software gain"
                )
            }
        }
    }

    /// Closes the controls of zones a reload removed (they were kept open until a restart). One on
    /// a card a remaining zone still plays on (`pcms`: their PCMs) goes back to full — a zone split
    /// into two on its card played under the old zone's last level for good —; one on a card Baton
    /// no longer plays on is left as it is, not Baton's to set.
    package func forget(_ names: [String], stillPlayingOn pcms: [String]) {
        let devices = Set(pcms.map { MixerControl.device(forPCM: $0) })
        for name in names {
            guard let entry = controls.withLock({ $0.removeValue(forKey: name) }) else { continue }
            if devices.contains(entry.control.device) { setBackToFull(entry.control, of: name) }
        }
    }

    private func setBackToFull(_ control: MixerControl, of zone: String) {
        let full = (try? control.setVolume(1)) != nil
        logger.info(
            "zone \(zone): hardware volume \"\(control.control)\" on \(control.device) "
                + (full ? "no longer used: set back to 100%" : "no longer used, and could not be set back to 100%"))
    }

    /// The zone's user volume (0...1): the hardware control's when it has one.
    package func userVolume(_ zone: ZoneHandle) -> Double {
        controls.withLock { $0[zone.name]?.volume } ?? Double(zone.mixer.volume)
    }

    /// How the zone's volume is applied: `software`, or `hardware: CONTROL on DEVICE`.
    package func description(_ zone: ZoneHandle) -> String {
        controls.withLock { $0[zone.name] }.map { "hardware: \($0.control.control) on \($0.control.device)" }
            ?? "software"
    }

    /// Sets the zone's user volume (0...1, at most its max-volume): on its hardware control when it
    /// has one (an upstream failure when the control refuses), else on its software stage.
    package func setUserVolume(_ zone: ZoneHandle, _ volume: Float) throws(ControlError) {
        guard volume.isFinite, (0...1).contains(volume) else {
            throw ControlError(.badRequest, "volume must be between 0 and 1 (got \(volume))")
        }
        guard zone.config.allows(volume: Double(volume)) else {
            throw ControlError(
                .badRequest, "volume \(volume) is above zone \(zone.name)'s max-volume \(zone.config.maxVolume)")
        }
        if try !set(zone, Double(volume)) { zone.mixer.setVolume(volume) }
    }

    /// Sets the user volume on the zone's hardware control; false when it has none.
    private func set(_ zone: ZoneHandle, _ volume: Double) throws(ControlError) -> Bool {
        guard let entry = controls.withLock({ $0[zone.name] }) else { return false }
        do {
            try entry.control.setVolume(volume)
        } catch {
            throw ControlError(.upstreamFailure, "zone \(zone.name): \(error)")
        }
        controls.withLock { $0[zone.name]?.volume = volume }
        return true
    }
}
