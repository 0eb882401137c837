import Players
import Subsonic
import Synchronization

/// Music from the household's Subsonic server, through the same admit path and slots as everything
/// else; the player itself is `MusicPlayer` (Players).
extension Daemon {
    /// Resolves `selection` on the server and plays it as music (class `music`, permanent) on `zones`
    /// (empty: `music.zones`). Blocking (it asks the server): any thread but an output thread.
    public func playFromServer(_ selection: MusicSelection, zones requested: [String], volume: Float = 1)
        throws(ControlError) -> Admission
    {
        let music = try parts.music.context(config)
        let songs = try music.songs(selection)
        return try startSongs(songs, zones: requested.isEmpty ? music.config.zones : requested, volume: volume)
    }

    /// Plays resolved songs on zones through the arbiter, from song `index` at `offset` seconds
    /// (a restored queue). Any thread.
    func startSongs(_ songs: [Song], zones: [String], volume: Float = 1, index: Int = 0, offset: Double = 0)
        throws(ControlError) -> Admission
    {
        let server = try parts.music.context(config).server(for: songs)
        let identity = Mutex<(id: String, zones: [String])>(("", []))
        let report = events.reporter(logger: logger) { identity.withLock { $0 } }
        return try admit(
            .music, zones: zones, volume: volume, before: { id in identity.withLock { $0.id = id.rawValue } }
        ) {
            (available: [ZoneHandle]) throws(ControlError) in
            identity.withLock { $0.zones = available.map(\.name) }
            return MusicPlayer(songs: songs, index: index, offset: offset, server: server, report: report)
        }
    }

    /// Skips `by` tracks (1: next, -1: previous) in the newest music source. Any thread.
    public func skip(by offset: Int) throws(ControlError) -> String {
        try state.withLock { (s: inout State) throws(ControlError) in
            guard let p = newestServerMusic(s), let music = p.music else {
                throw ControlError(.notFound, "no music from the server is playing")
            }
            let index = (music.nowPlaying()?.index ?? music.startIndex) + offset
            guard index >= 0 && index < music.songs.count else {
                throw ControlError(.conflict, offset > 0 ? "already at the last track" : "already at the first track")
            }
            restart(p, music, at: index, offset: 0, &s)
            return p.id.rawValue
        }
    }

    /// Moves the newest music source to `position` seconds of its current track (or of track
    /// `track`, 0-based, when given): the track is fetched again and decoded frames before the
    /// position are dropped, exact to the decoded frame. Any thread.
    public func seek(to position: Double, track: Int? = nil) throws(ControlError) -> String {
        guard position.isFinite, position >= 0 else {
            throw ControlError(.badRequest, "position must be a number of seconds ≥ 0")
        }
        return try state.withLock { (s: inout State) throws(ControlError) in
            guard let p = newestServerMusic(s), let music = p.music else {
                throw ControlError(.notFound, "no music from the server is playing")
            }
            let index: Int
            switch music.seekTarget(position, track: track) {
            case .success(let i): index = i
            case .failure(let problem): throw ControlError(.badRequest, problem.message)
            }
            restart(p, music, at: index, offset: position, &s)
            return p.id.rawValue
        }
    }

    /// The newest granted source of music from the server, if any. Under the lock.
    func newestServerMusic(_ s: borrowing State) -> Playback? {
        s.playbacks.values.filter { $0.music != nil && $0.started }.max { $0.id < $1.id }
    }

    /// Plays `p` on from track `index`, `offset` seconds in: the old stream gives up its slots and
    /// the source goes on in fresh ones. A user change for the arbiter. Under the lock.
    func restart(_ p: Playback, _ music: MusicPlayer, at index: Int, offset: Double, _ s: inout State) {
        releaseSlots(p, now: music.endStream())
        music.restart(at: index, offset: offset, in: claimSlots(p, s))
        apply(s.arbiter.user(.change, on: p.id, at: .now), &s)
    }
}
