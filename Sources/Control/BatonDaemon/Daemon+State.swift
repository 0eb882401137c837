import ControlParts

/// Keeping what the user set across restarts: zone volumes and the music queue with the position
/// heard, in `<state-dir>/state.json` (see `Persistence`, `StateStore`).
extension Daemon {
    /// Reads the saved state at start (volumes onto the zones, the queue for `music/resume`), or
    /// else the queue the server keeps. Before the output threads start.
    func restoreSavedState() {
        let config = self.config
        parts.persistence.restore(zones) { [self] in
            guard config.music != nil else { return .success(nil) }
            return parts.music.serverQueue(config, zones: (try? expandZones(config.music?.zones ?? [])) ?? zones.names)
        }
    }

    /// Writes the state if it changed since the last write, and mirrors the queue to the server:
    /// now, or `inBackground` by the state's writer thread (the monitor, about once a second: a
    /// slow disk must not hold it). Any thread but an output thread.
    public func saveState(inBackground: Bool = false) {
        let (now, basis, ofThisRun, otherServer) = currentState()
        let persistence = parts.persistence
        if let written = inBackground ? persistence.offer(now, basis: basis) : persistence.save(now, basis: basis) {
            if !otherServer { mirror(written, ofThisRun: ofThisRun) }
        } else {
            parts.music.retryMirror(config)
        }
    }

    /// The sound Home Assistant's select chose for its announce button, kept across restarts
    /// (`state-dir`); nil until one is chosen. Any thread.
    public var announceSound: String? { parts.persistence.saved.sound }

    /// Chooses the announce button's sound (a name of the sounds directory, checked by the caller):
    /// the monitor's next save writes it. Any thread.
    public func chooseAnnounceSound(_ name: String) {
        parts.persistence.choose(sound: name)
        monitor.wake()
    }

    /// Saves the state for the last time (the stop's, before the fade-out turns the zone volumes
    /// down, which must not be saved), waiting for the disk at most 2 s. Control thread.
    func saveLastState() {
        // From here on nothing is admitted (under the lock `admit` looks at it in): what the last
        // state is computed from is all there will be.
        // After a reload that runs now (it applies whole, or not at all): one that went on past
        // the stop started outputs no one stopped, unfaded (a file PCM's header never finished).
        // The last state read with no volume change in between (`volumeChanges`): one answered
        // after the mark is refused, one before it is in the state.
        let (now, basis, ofThisRun, otherServer) = reloading.withLock { _ in
            volumeChanges.withLock { _ in
                state.withLock { $0.stopping = true }
                return currentState()
            }
        }
        if let written = parts.persistence.saveLast(now, basis: basis), !otherServer {
            mirror(written, ofThisRun: ofThisRun, atStop: true)
        }
    }

    /// Mirrors the queue a save recorded to the server (`atStop`: the position too, see
    /// `MusicConnection.mirrorAtStop`). A queue kept by a source of this run —
    /// also one that ended after the state was computed, whose kept queue was recorded in its
    /// place — is of this run too.
    private func mirror(_ written: SavedQueue?, ofThisRun: Bool, atStop: Bool = false) {
        let ofThisRun = ofThisRun || parts.persistence.keptCount > 0
        if atStop {
            parts.music.mirrorAtStop(written, ofThisRun: ofThisRun, config)
        } else {
            parts.music.mirror(written, ofThisRun: ofThisRun, config)
        }
    }

    /// Every zone's user volume, and the newest server-music queue at its audible position (or the
    /// one kept, as it was kept, when no music plays; none once it played out);
    /// with how many times a source had kept its queue then (`Persistence.keptCount`), and whether
    /// the queue is a playing source's (`mirror` adds those kept by sources that ended), and
    /// whether its songs are from another server than the one configured now (music that went on
    /// across a reload to another server: its queue, mirrored there, carried the old server's song
    /// ids to the new one).
    private func currentState() -> (SavedState, basis: Int, ofThisRun: Bool, otherServer: Bool) {
        var now = SavedState()
        // A zone not configured now (a USB DAC commented out for a day) keeps its saved volume.
        now.volumes = parts.persistence.saved.volumes.filter { zones.zone($0.key) == nil }
        for zone in zones.zones { now.volumes[zone.name] = parts.volumes.userVolume(zone) }
        now.speakerVolumes = parts.snapcast.volumesSet(
            zones.zones.map(\.config), saved: parts.persistence.saved.speakerVolumes)
        var basis = 0
        var ofThisRun = false
        var otherServer = false
        let configured = config.music.map { SavedQueue.Server($0.subsonic) }
        now.queue = state.withLock { s in
            // Under the control plane's lock: a source that ends keeps its queue (`keep(queue:)`)
            // under it too.
            basis = parts.persistence.keptCount
            let previous = parts.persistence.saved.queue
            // No music now: the queue kept stays as it was. One of this run's was kept not playing
            // when its source ended (`finish`); one restored at start says what it was when saved
            // (music heard at a power cut was playing, and a restart must not rewrite it as paused).
            guard let p = MusicControl.newest(s) else {
                // Kept by music that ended after a reload to another server (stopped, or ended by
                // the reload itself), or restored from a file written with another server
                // configured: its songs are that server's, and mean nothing to the one now.
                if let from = previous?.server { otherServer = configured != from }
                return previous
            }
            if p.music!.progress.finished { return nil }
            // Playing: heard (`AudioTruth.follow`, the monitor's look before this save) and let be
            // heard — or heard and waiting a moment for a late stream (`buffering`), not one
            // that starts (a play, a resume, a seek: nothing of it heard yet) nor music held in a
            // Snapcast zone whose server is away. The arbiter's grant alone said "playing" of both.
            let granted = s.arbiter.state(of: p.id)?.isAudible ?? false
            let heard = p.heard || p.reported == "buffering"
            guard let queue = SavedQueue(p, playing: granted && heard) else { return previous }
            ofThisRun = true
            otherServer = configured != queue.server
            return queue
        }
        return (now, basis, ofThisRun, otherServer)
    }
}

extension SavedQueue {
    /// The queue of server music `p` at the track and position heard now (to the millisecond), or,
    /// before its stream has begun a track, where it starts (`MusicPlayer.placeToSave`), with the
    /// server it streams from; nil when
    /// it never started, or when `p` is not server music. Under the daemon lock.
    init?(_ p: Playback, playing: Bool) {
        guard let music = p.music, let now = music.placeToSave else { return nil }
        self.init(
            songs: music.songs, index: now.index, position: (now.seconds * 1000).rounded() / 1000, zones: p.zones,
            volume: Double(p.volume), playing: playing, server: Server(music))
    }
}
