import AudioCore
import Arbiter
import Engine
import Subsonic
import Synchronization

/// Keeping what the user set across restarts: zone volumes and the music queue with the position
/// heard, in `<state-dir>/state.json` (see `StateStore`).
extension Daemon {
    /// The state to keep, as it is now: every zone's user volume, and the newest server-music
    /// queue at its audible position (or the last one seen, marked not playing, once its source
    /// was stopped). A queue that played to its end is dropped. Under the lock.
    func currentSavedState(_ s: borrowing State) -> SavedState {
        var saved = SavedState()
        for zone in zones.zones { saved.volumes[zone.name] = userVolume(zone) }
        if let (p, streamer) = newestServerMusic(s) {
            if streamer.progress.finished {
                saved.queue = nil
            } else {
                saved.queue = SavedQueue(p, playing: s.arbiter.state(of: p.id)?.isAudible ?? false) ?? s.saved.queue
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
            if config.music != nil, let q = queueFromServer() { state.withLock { $0.saved.queue = q; $0.written.queue = q } }
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
    /// A write that fails (full disk, read-only state-dir) is retried at the next call; the first
    /// failure of a streak is logged and published (`state-error`), and the recovery is logged.
    public func saveState() {
        let pending: (state: SavedState, previous: SavedState)? = state.withLock { s in
            let now = currentSavedState(s)
            s.saved = now
            guard s.written != now else { return nil }
            let previous = s.written
            s.written = now
            return (now, previous)
        }
        guard let pending else { return }
        switch store.save(pending.state) {
        case .failure(let failure):
            let first = state.withLock { s -> Bool in
                if s.written == pending.state { s.written = pending.previous }  // retry next time
                defer { s.saveFailing = true }
                return !s.saveFailing
            }
            if first {
                logger.error("state: \(failure); volumes and the queue are kept in memory and saved again once it works")
                events.publish(type: "state-error", reason: failure.description)
            }
        case .success:
            if state.withLock({ s in defer { s.saveFailing = false }; return s.saveFailing }) {
                logger.info("state: saved again to \(store.path ?? "")")
            }
        }
        syncQueueToServer(pending.state.queue)
    }

    /// Mirrors the queue to the server with `savePlayQueue` (so other Subsonic clients can pick it
    /// up) when its songs, track or playing state changed, or 30 s after the last call; a server
    /// without play-queue endpoints (Supysonic) is noticed once and never asked again. Runs the call
    /// on its own thread. Any thread.
    func syncQueueToServer(_ queue: SavedQueue?) {
        guard let queue, queue.index < queue.songs.count, case .success(let music) = musicContext() else { return }
        let now = monotonicNanoseconds()
        let due: Bool = queueSync.withLock { s in
            guard !s.unsupported else { return false }
            let changed = s.last.map { $0.songs.map(\.id) != queue.songs.map(\.id) || $0.index != queue.index || $0.playing != queue.playing } ?? true
            guard changed || now - s.at >= 30_000_000_000 else { return false }
            s.last = queue
            s.at = now
            return true
        }
        guard due else { return }
        let logger = self.logger
        _ = startThread {
            do {
                try music.client.savePlayQueue(songIDs: queue.songs.map(\.id), current: queue.songs[queue.index].id,
                                               positionMilliseconds: Int64(queue.position * 1000))
            } catch let error as SubsonicError where error.isUnsupportedEndpoint {
                self.queueSync.withLock { $0.unsupported = true }
                logger.info("music: the server has no savePlayQueue; the queue is kept in state-dir only")
            } catch {
                logger.warning("music: savePlayQueue failed: \(error)")
            }
        }
    }

    /// When nothing was saved locally, the queue the server keeps (`getPlayQueue`) for `music.zones`.
    /// Blocking (it asks the server); at start, before the zones play.
    func queueFromServer() -> SavedQueue? {
        guard case .success(let music) = musicContext() else { return nil }
        do {
            guard let q = try music.client.playQueue(), !q.entries.isEmpty else { return nil }
            let index = q.current.flatMap { id in q.entries.firstIndex { $0.id == id } } ?? 0
            let zones: [String]
            switch expandZones(music.config.zones) {
            case .success(let names): zones = names
            case .failure: zones = self.zones.names
            }
            logger.info("music: restored the server's play queue (\(q.entries.count) songs, changed by \(q.changedBy ?? "?"))")
            return SavedQueue(songs: q.entries, index: index, position: Double(q.position) / 1000, zones: zones, volume: 1, playing: false)
        } catch {
            if !error.isUnsupportedEndpoint { logger.warning("music: getPlayQueue failed: \(error)") }
            return nil
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
