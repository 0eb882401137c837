import Arbiter

extension Daemon {
    /// Every zone and source as they are now. Any thread.
    public func status() -> StatusReport {
        // As it runs: a reload's new `intercom:` takes effect at the next start.
        let intercom = parts.intercom.config.map(parts.intercom.status)
        let truth = self.truth
        return state.withLock { s in
            let playbacks = s.playbacks.values.sorted { $0.id < $1.id }
            let zones = self.zones.zones.map { handle in
                StatusReport.Zone(
                    handle, s.arbiter.status(of: ZoneID(handle.name)), heard: truth.heardSources(in: handle, s),
                    silent: s.silence[handle.name]?.alarmed ?? false, error: handle.errorText,
                    volume: parts.volumes.userVolume(handle), volumeControl: parts.volumes.description(handle),
                    slots: playbacks.flatMap { p in
                        p.parts.filter { $0.zone == handle.name }.compactMap { part in
                            part.slot.map { (p.id.rawValue, $0) }
                        }
                    },
                    snapcast: parts.snapcast.status(handle))
            }
            let sources = s.arbiter.sources.compactMap { st in
                s.playbacks[st.contender.source].map { p in
                    StatusReport.Source(
                        p, st,
                        state: p.isUnderway ? truth.reportedState(p, s) : st.state.rawValue,
                        pausedWhileQueued: s.arbiter.isPaused(p.id))
                }
            }
            return StatusReport(
                zones: zones, sources: sources, uptimeMs: events.uptimeMs, run: events.run,
                savedQueue: parts.persistence.saved.queue.flatMap(StatusReport.SavedQueue.init),
                intercom: intercom, mqtt: nil, gpio: nil)
        }
    }
}
