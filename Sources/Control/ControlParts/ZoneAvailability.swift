import ALSA
import Engine
import OSThread

/// Which zones were last reported available, so each change is published once (`zone-available`,
/// `zone-unavailable`) and logged; and which zones set to `render-ahead` were found on a PCM that
/// cannot rewind (`render-ahead-off`, once per zone). Part of the control plane's state, under its lock.
package struct ZoneAvailability {
    private var available: [String: Bool] = [:]
    /// Zones whose PCM was found unable to take back, once said.
    private var cannotTakeBack: Set<String> = []
    /// Snapcast zones connected to their source and waiting for its server to answer, since when
    /// (monotonic ns): said as unavailable once that lasts `awaitingLimit` (a moment of it after
    /// each connect is normal, and not worth two events).
    private var awaitingSince: [String: Int] = [:]
    static let awaitingLimit = 2_000_000_000

    package init() {}

    /// Forgets what was said of `zone`: its device was replaced (a reload), and the new one is seen
    /// as at start — not open yet is no news, open is `zone-available`.
    package mutating func forget(_ zone: String) {
        available[zone] = nil
        cannotTakeBack.remove(zone)
        awaitingSince[zone] = nil
    }

    /// Publishes `zone`'s change of availability, if it changed.
    package mutating func report(_ zone: ZoneHandle, events: EventLog, logger: Logger) {
        let name = zone.name
        let pcm = zone.device.spec.pcm.name
        let snap = zone.device.snapshot()
        if let off = snap.renderAheadOff, cannotTakeBack.insert(name).inserted {
            let why: String
            let reason: String
            switch off {
            case .cannotRewind:
                why = "cannot take back what it was given (snd_pcm_rewindable is 0: a rate conversion in its chain?)"
                reason = "PCM \"\(pcm)\" cannot rewind"
            case .refused(let code):
                let error = ALSAError(operation: "rewind", pcm: pcm, code: code)
                let what = "\(error.message) (\(code))\(error.isXrun ? ", the stream stopped" : "")"
                why =
                    "refused to take back what it was given (\(what): a driver that copies ahead to its hardware, as the Raspberry Pi's bcm2835 does?)"
                reason = "PCM \"\(pcm)\" refused a take-back: \(what)"
            case .keptWhatItTookBack:
                why =
                    "took back what it was given but still counts it as to be played (snd_pcm_delay above 0, or no answer, after the rewind: a plugin that hands frames on at once, as PulseAudio's pulse does?)"
                reason = "PCM \"\(pcm)\" kept what it took back"
            case .periodTooLong:
                why =
                    "has periods of \(snap.periodFrames) frames, too long for a buffer of \(snap.bufferFrames): two of its periods are never taken back, and the buffer holds no more (raise the zone's buffer to at least three of its periods)"
                reason = "PCM \"\(pcm)\" period of \(snap.periodFrames) frames too long for its buffer"
            }
            logger.warning(
                "zone \(name): PCM \"\(pcm)\" \(why); render-ahead is off, the zone keeps its low water and a period as without it"
            )
            events.publish(type: .renderAheadOff, zones: [name], reason: reason)
        }
        let now = monotonicNanoseconds()
        let awaiting = !snap.available && zone.device.awaitsServer
        if !awaiting { awaitingSince[name] = nil } else if awaitingSince[name] == nil { awaitingSince[name] = now }
        let awaitedLong = awaitingSince[name].map { now - $0 >= Self.awaitingLimit } ?? false
        guard
            available[name] != snap.available
                && (snap.available || snap.lastError != 0 || awaitedLong || zone.device.hasNoListener
                    || available[name] == true)
        else { return }
        available[name] = snap.available
        if snap.available {
            events.publish(type: .zoneAvailable, zones: [name], reason: "PCM \"\(pcm)\" open")
            logger.info(
                "zone \(name): available (PCM \"\(pcm)\", period \(snap.periodFrames), buffer \(snap.bufferFrames) frames\(snap.realtime ? ", SCHED_FIFO" : ""))"
            )
            if !snap.realtime && zone.device.spec.realtimePriority > 0 {
                logger.warning(
                    "zone \(name): real-time scheduling not granted (needs CAP_SYS_NICE or RLIMIT_RTPRIO); running at normal priority"
                )
            }
        } else {
            let why = zone.errorText
            events.publish(type: .zoneUnavailable, zones: [name], reason: why)
            let then =
                zone.device.listenersElsewhere
                ? "looking again every 2 s"
                : zone.device.listenersMuted
                    ? "waiting for one to be unmuted"
                    : zone.device.hasNoListener ? "waiting for one to connect" : "retrying with backoff"
            logger.error("zone \(name): unavailable: \(why); \(then)")
        }
    }
}

extension ZoneHandle {
    /// Why the zone cannot play (or `available`). Any thread.
    package var errorText: String {
        let snap = device.snapshot()
        if snap.available { return "available" }
        if let text = SnapcastKeepers.errorText(self, snap) { return text }
        if device.isStalled && (snap.lastError == 0 || snap.lastError == DeviceOutput.stallError) {
            let limit = DeviceOutput.stallLimitNanoseconds / 1_000_000_000
            return "PCM \"\(pcm)\" took no audio for \(limit) s (the device stalled): reopening it"
        }
        if device.isStalledByRestarts {
            let limit = DeviceOutput.recoveryLimit
            return "PCM \"\(pcm)\" stopped again at each of \(limit) restarts in a row: reopening it"
        }
        if snap.lastError == 0 { return "opening PCM \"\(pcm)\"" }
        return ALSAError(operation: snap.failedCall, pcm: pcm, code: snap.lastError).description
    }
}
