/// Keeping what the user set across restarts: zone volumes and the music queue with the position
/// heard, in `<state-dir>/state.json` (see `Persistence`, `StateStore`).
extension Daemon {
    /// Reads the saved state at start (volumes onto the zones, the queue for `music/resume`), or
    /// else the queue the server keeps. Before the output threads start.
    func restoreSavedState() {
        let config = self.config
        parts.persistence.restore(zones) { [self] in
            guard config.music != nil else { return nil }
            return parts.music.serverQueue(config, zones: (try? expandZones(config.music?.zones ?? [])) ?? zones.names)
        }
    }

    /// Writes the state now if it changed since the last write, and mirrors the queue to the server.
    /// Any thread but an output thread; the monitor calls it about once a second and shutdown once
    /// more, before the fade-out (which turns the zone volumes down and must not be saved).
    public func saveState() {
        let previous = parts.persistence.saved.queue
        // Every zone's user volume, and the newest server-music queue at its audible position (or the
        // last one seen, marked not playing, once its source was stopped; none once it played out).
        var now = SavedState()
        for zone in zones.zones { now.volumes[zone.name] = parts.volumes.userVolume(zone) }
        now.queue = state.withLock { s in
            guard let p = newestServerMusic(s) else {
                return previous.map {
                    var q = $0
                    q.playing = false
                    return q
                }
            }
            if p.music!.progress.finished { return nil }
            return SavedQueue(p, playing: s.arbiter.state(of: p.id)?.isAudible ?? false) ?? previous
        }
        if let written = parts.persistence.save(now) { parts.music.mirror(written, config) }
    }

    /// Plays the saved queue again from its track and position when no music source exists
    /// (`music/resume` after a restart or a stop). Any thread.
    public func resumeSavedQueue() throws(ControlError) -> Admission {
        guard let q = parts.persistence.saved.queue, q.index < q.songs.count else {
            throw ControlError(.notFound, "no music source to resume and no saved queue")
        }
        guard (try? parts.music.context(config)) != nil else {
            throw ControlError(.conflict, "a queue was saved but no music server is configured")
        }
        let zoneNames = q.zones.filter(Set(zones.names).contains)
        guard !zoneNames.isEmpty else {
            throw ControlError(
                .conflict, "the saved queue played on zones that no longer exist (\(q.zones.joined(separator: ", ")))")
        }
        return try startSongs(
            q.songs, zones: zoneNames, volume: Float(min(max(q.volume, 0), 1)), index: q.index, offset: q.position)
    }
}
