import Arbiter
import ControlParts
import Players
import Subsonic
import Synchronization

/// Music from the household's Subsonic server, through the same admit path and slots as everything
/// else (the player itself is `MusicPlayer`, Players): playing a selection, skipping, seeking,
/// resuming the saved queue, and the queue of the newest music source seen and edited
/// (`MusicControl+Queue.swift`). Calls that ask the server block: any thread but an output thread.
public struct MusicControl: Sendable {
    let daemon: Daemon

    /// Resolves `selection` on the server and plays it as music (class `music`, permanent) on `zones`
    /// (empty: `music.zones`).
    public func play(_ selection: MusicSelection, zones requested: [String], volume: Float = 1)
        throws(ControlError) -> Admission
    {
        let music = try daemon.parts.music.context(daemon.config)
        let songs = try music.songs(selection)
        return try start(songs, zones: requested.isEmpty ? music.config.zones : requested, volume: volume)
    }

    /// The most songs a queue holds. Each save copies the whole queue under the daemon's lock and
    /// writes it to the state file (about 450 bytes a song): unbounded, queue additions of 500
    /// songs each grew it past the 64 MiB a state file is read up to, and the next start set the
    /// whole file aside, the volumes with it. A longer queue restored (a state file from before
    /// the limit, a server's `getPlayQueue`) is cut to it around its song (`SavedQueue.cutToMostSongs`).
    public static let mostQueuedSongs = SavedQueue.mostSongs

    /// Refuses a queue of `count` songs beyond `mostQueuedSongs`.
    static func checkQueueLength(_ count: Int, adding: Int? = nil) throws(ControlError) {
        guard count > mostQueuedSongs else { return }
        let what = adding.map { "adding \($0) songs would make the queue \(count) songs long" } ?? "\(count) songs"
        throw ControlError(.conflict, "\(what); a queue holds at most \(mostQueuedSongs)")
    }

    /// Plays resolved songs on zones through the arbiter, from song `index` at `offset` seconds
    /// (a restored queue); `ttl`: how long it may wait for its zones (nil: the class's); `paused`:
    /// asked paused (see `Daemon.admit`). At most `mostQueuedSongs`.
    func start(
        _ songs: [Song], zones: [String], volume: Float = 1, index: Int = 0, offset: Double = 0, ttl: Duration? = nil,
        paused: Bool = false
    ) throws(ControlError) -> Admission {
        try Self.checkQueueLength(songs.count)
        let context = try daemon.parts.music.context(daemon.config)
        // Each request asks for the client of the server configured then: one made again with a
        // password changed since (its file rewritten while the queue plays) while it is this server.
        let from = SavedQueue.Server(context.config.subsonic)
        let server = context.server(for: songs) { [weak daemon = self.daemon] in
            daemon.flatMap { $0.parts.music.client(for: from, $0.config) }
        }
        let identity = Mutex<(id: String, zones: [String])>(("", []))
        let report = daemon.events.reporter(logger: daemon.logger) { identity.withLock { $0 } }
        return try daemon.admit(
            .music, zones: zones, volume: volume, ttl: ttl, paused: paused,
            before: { id in identity.withLock { $0.id = id.rawValue } }
        ) {
            (available: [ZoneHandle]) throws(ControlError) in
            identity.withLock { $0.zones = available.map(\.name) }
            return MusicPlayer(
                songs: songs, index: index, offset: offset, server: server, report: report,
                changed: { [monitor = daemon.monitor] in monitor.wake() })
        }
    }

    /// Skips `by` tracks (1: next, -1: previous) in the newest music source.
    public func skip(by offset: Int, id: String? = nil) throws(ControlError) -> String {
        try withNewest(id: id) { p, music, s throws(ControlError) in
            let index = (music.nowPlaying()?.index ?? music.startIndex) + offset
            guard index >= 0 && index < music.songs.count else {
                throw ControlError(.conflict, offset > 0 ? "already at the last track" : "already at the first track")
            }
            restart(p, music, at: index, offset: 0, &s)
            return p.id.rawValue
        }
    }

    /// Moves the newest music source (or source `id`) to `position` seconds of its current track
    /// (or of track `track`, 0-based, when given): the track is fetched again and decoded frames
    /// before the position are dropped, exact to the decoded frame.
    public func seek(to position: Double, track: Int? = nil, id: String? = nil) throws(ControlError) -> String {
        guard position.isFinite, position >= 0 else {
            throw ControlError(.badRequest, "position must be a number of seconds ≥ 0")
        }
        return try withNewest(id: id) { p, music, s throws(ControlError) in
            let index: Int
            switch music.seekTarget(position, track: track) {
            case .success(let i): index = i
            case .failure(let problem): throw ControlError(.badRequest, problem.message)
            }
            restart(p, music, at: index, offset: position, &s)
            return p.id.rawValue
        }
    }

    /// Returns once the queue the server keeps, asked at start when no state file was there, has
    /// come (or failed); at once otherwise. Up to the server's request timeout (and 5 s of `ping` after a 404): not under the lock.
    public func awaitServerQueue() { daemon.parts.persistence.awaitServerQueue() }

    /// Plays the saved queue again from its track and position when no music source exists
    /// (`music/resume` after a restart or a stop). After `awaitServerQueue` (the saved queue may be
    /// the server's, still on its way), which `music/resume` calls before it looks for music.
    public func resumeSavedQueue() throws(ControlError) -> Admission {
        guard let q = daemon.parts.persistence.saved.queue, q.index < q.songs.count else {
            throw ControlError(.notFound, "no music source to resume and no saved queue")
        }
        // Its song ids are its server's: sent to another (`music.subsonic` changed since), each
        // failed as "song not found", and the music gave up after three.
        if let from = q.server, let now = daemon.config.music?.subsonic, from != SavedQueue.Server(now) {
            throw ControlError(
                .conflict,
                "the saved queue is from \(from.url) as \(from.user), not the server configured now (\(now.url) as \(now.user)); music/play to start anew"
            )
        }
        return try play(q)
    }

    /// Plays `q` from its track and position on its zones that exist; `ttl`: how long it may wait
    /// for its zones (nil: the class's); `paused`: asked paused (see `Daemon.admit`).
    func play(_ q: SavedQueue, ttl: Duration? = nil, paused: Bool = false) throws(ControlError) -> Admission {
        guard (try? daemon.parts.music.context(daemon.config)) != nil else {
            throw ControlError(.conflict, "a queue was saved but no music server is configured")
        }
        let zoneNames = q.zones.filter(Set(daemon.zones.names).contains)
        guard !zoneNames.isEmpty else {
            throw ControlError(
                .conflict, "the saved queue played on zones that no longer exist (\(q.zones.joined(separator: ", ")))")
        }
        return try start(
            q.songs, zones: zoneNames, volume: Float(min(max(q.volume, 0), 1)), index: q.index, offset: q.position,
            ttl: ttl, paused: paused)
    }

    /// Runs `body` under the lock with the newest granted music source from the server, or throws
    /// not found (`hint` added) when there is none.
    /// Runs `body` on the newest server-music source, or on source `id` when given (the web app's
    /// card acts on the music of its zone, which need not be the newest).
    func withNewest<T: Sendable>(
        hint: String = "", id: String? = nil,
        _ body: (Playback, MusicPlayer, inout Daemon.State) throws(ControlError) -> T
    ) throws(ControlError) -> T {
        try daemon.state.withLock { (s: inout Daemon.State) throws(ControlError) in
            if let id {
                guard let p = s.playbacks[SourceID(id)], p.isUnderway, let music = p.music
                else {
                    throw ControlError(.notFound, "no music from the server with id \(id)")
                }
                return try body(p, music, &s)
            }
            guard let p = Self.newest(s), let music = p.music else {
                throw ControlError(.notFound, "no music from the server is playing\(hint)")
            }
            return try body(p, music, &s)
        }
    }

    /// Plays `p` on from track `index`, `offset` seconds in (nil: past the queue's end, where it
    /// ends as played out): the old stream gives up its slots and the source goes on in fresh ones
    /// (once its zones have one free: `Daemon.slotsReady`). A user change for the arbiter. Under
    /// the lock.
    func restart(_ p: Playback, _ music: MusicPlayer, at index: Int?, offset: Double, _ s: inout Daemon.State) {
        daemon.releaseSlots(p, now: music.endStream())
        if let index { music.setStart(at: index, offset: offset) } else { music.setStartPastTheEnd() }
        daemon.restartInSlots(p, &s)
        daemon.apply(s.arbiter.user(.change, on: p.id, at: .now), &s)
    }

    /// The newest granted source of music from the server, if any (started, or waiting for a free
    /// slot to start: a command then sets where it starts). Under the lock.
    static func newest(_ s: borrowing Daemon.State) -> Playback? {
        s.playbacks.values.filter { $0.music != nil && $0.isUnderway }.max { $0.id < $1.id }
    }
}
