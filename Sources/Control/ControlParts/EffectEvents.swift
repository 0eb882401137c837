import Arbiter
import OSThread
import Players

extension EventLog {
    /// Publishes an arbiter effect as its event, with the zone frames of its source attached.
    package func publish<Instant>(_ e: Effect<Instant>, zoneFrames frames: [String: Int]?) {
        let reason = String(describing: e.reason)
        func put(
            _ type: EventType, _ id: SourceID, zones: [ZoneID]? = nil, shouldResume: Bool? = nil, level: Double? = nil,
            into: String? = nil
        ) {
            publish(
                type: type, source: id.rawValue, zones: zones?.map(\.rawValue), reason: reason,
                shouldResume: shouldResume,
                level: level, into: into, zoneFrames: frames)
        }
        switch e.action {
        case .granted(let id, let zones): put(.granted, id, zones: zones)
        case .queued(let id): put(.queued, id)
        case .rejected(let id): put(.rejected, id)
        case .coalesced(let id, let into): put(.coalesced, id, into: into.rawValue)
        case .expired(let id): put(.expired, id)
        case .lostForGood(let id): put(.lostForGood, id)
        case .finished(let id): put(.finished, id)
        case .interruptionBegan(let id, let zones): put(.interruptionBegan, id, zones: zones)
        case .interruptionEnded(let id, let resume): put(.interruptionEnded, id, shouldResume: resume)
        case .duckBegan(let id, let zone, let level, _): put(.duckBegan, id, zones: [zone], level: level.value)
        case .duckEnded(let id, let zone, _): put(.duckEnded, id, zones: [zone])
        case .muted(let id, let zone): put(.muted, id, zones: [zone])
        case .unmuted(let id, let zone): put(.unmuted, id, zones: [zone])
        case .scheduleTimer: break
        }
    }
}

extension EventLog {
    /// What a source reports, said where the user sees it: events (`track`, `scrobbled`,
    /// `stream-error`) and the log. `identity` names the source and its zones when it reports.
    package func reporter(logger: Logger, identity: @escaping @Sendable () -> (id: String, zones: [String]))
        -> SourceReporter
    {
        { [self] notice in
            let (source, zones) = identity()
            switch notice {
            case .track(let index, let count, let title):
                publish(
                    type: .track, source: source, zones: zones, reason: "now playing: \(title) (\(index + 1)/\(count))"
                )
            case .scrobbled(let submission, let title):
                publish(
                    type: .scrobbled, source: source, reason: "\(submission ? "submitted" : "now playing"): \(title)")
            case .gaveUp(let why):
                publish(
                    type: .streamError, source: source, zones: zones,
                    reason: "gave up: \(why); music/resume continues from what was heard")
            case .trackFailed(let why):
                logger.error("music: \(why)")
                publish(type: .streamError, source: source, zones: zones, reason: why)
            case .streamEnded(let why), .damaged(let why):
                logger.warning(why)
                publish(type: .streamError, source: source, zones: zones, reason: why)
            case .warning(let message): logger.warning(message)
            case .error(let message): logger.error(message)
            }
        }
    }
}
