import Arbiter
import Subsonic

/// Keeping what the user set across restarts: zone volumes and the music queue with the position
/// heard, in `<state-dir>/state.json` (see `StateStore`).
extension Daemon {
    /// The state to keep, as it is now: every zone's user volume, and the newest server-music
    /// queue at its audible position (or the last one seen, marked not playing, once its source
    /// was stopped). A queue that played to its end is dropped. Under the lock.
    func currentSavedState(_ s: borrowing State) -> SavedState {
        var saved = SavedState()
        for zone in zones.zones { saved.volumes[zone.name] = userVolume(zone) }
        let music = s.playbacks.values.filter { !$0.songs.isEmpty && $0.streamer != nil }.max { $0.id < $1.id }
        if let p = music, let streamer = p.streamer {
            if streamer.progress.finished {
                saved.queue = nil
            } else if let now = streamer.nowPlaying() {
                let audible = s.arbiter.state(of: p.id)?.isAudible ?? false
                saved.queue = SavedQueue(songs: p.songs, index: now.index, position: (now.seconds * 1000).rounded() / 1000,
                                         zones: p.zones, volume: Double(p.volume), playing: audible)
            } else {
                saved.queue = s.saved.queue
            }
        } else {
            saved.queue = s.saved.queue.map { var q = $0; q.playing = false; return q }
        }
        return saved
    }

    /// Reads the saved state at start: applies each known zone's volume (within its max-volume)
    /// and keeps the queue for `music/resume`. A damaged file is logged and left alone. Before the
    /// output threads start.
    func restoreSavedState() {
        switch store.load() {
        case .failure(let failure):
            logger.error("state: \(failure)")
            events.publish(type: "state-error", reason: failure.description)
        case .success(nil):
            if store.path == nil { logger.info("state: no state-dir configured: volumes and the play queue are not kept across restarts") }
        case .success(let saved?):
            for (name, volume) in saved.volumes.sorted(by: { $0.key < $1.key }) {
                guard let zone = output(name), volume.isFinite, (0...zone.config.maxVolume).contains(volume) else { continue }
                zone.mixer.setInitialVolume(Float(volume))
            }
            state.withLock { $0.saved = saved; $0.written = saved }
            if let q = saved.queue, q.index < q.songs.count {
                logger.info("state: restored volumes and a queue of \(q.songs.count) songs at \(q.songs[q.index].title) \(Int(q.position)) s (music/resume plays it)")
            }
        }
    }

    /// Writes the state now if it changed since the last write. Any thread but an output thread;
    /// the monitor calls it about once a second and shutdown once more, before the fade-out (which
    /// turns the zone volumes down and must not be saved).
    public func saveState() {
        let pending: SavedState? = state.withLock { s in
            let now = currentSavedState(s)
            s.saved = now
            guard s.written != now else { return nil }
            s.written = now
            return now
        }
        guard let pending else { return }
        if case .failure(let failure) = store.save(pending) {
            logger.error("state: \(failure)")
        }
    }

    /// Plays the saved queue again from its track and position when no music source exists
    /// (`music/resume` after a restart or a stop). Any thread.
    func resumeSavedQueue() throws(RequestError) -> (id: String, outcome: Outcome, skipped: [String]) {
        guard let q = state.withLock({ $0.saved.queue }), q.index < q.songs.count else {
            throw RequestError(status: 404, message: "no music source to resume and no saved queue")
        }
        guard case .success = musicContext() else {
            throw RequestError(status: 409, message: "a queue was saved but no music server is configured")
        }
        let known = Set(zones.names)
        let zoneNames = q.zones.filter(known.contains)
        guard !zoneNames.isEmpty else {
            throw RequestError(status: 409, message: "the saved queue played on zones that no longer exist (\(q.zones.joined(separator: ", ")))")
        }
        return try startSongs(q.songs, zones: zoneNames, volume: Float(min(max(q.volume, 0), 1)), index: q.index, offset: q.position)
    }

    /// The saved queue for the status report. Under the lock.
    func savedQueueStatus(_ s: borrowing State) -> StatusReport.SavedQueue? {
        guard let q = s.saved.queue, q.index < q.songs.count else { return nil }
        let song = q.songs[q.index]
        return StatusReport.SavedQueue(
            track: StatusReport.Track(id: song.id, title: song.title, artist: song.artist, album: song.album, durationSeconds: song.duration),
            trackIndex: q.index, queueLength: q.songs.count, positionSeconds: q.position, zones: q.zones, playing: q.playing)
    }
}
