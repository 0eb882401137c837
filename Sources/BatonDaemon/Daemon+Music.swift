import Arbiter
import AudioCore
import BatonConfig
import Engine
import Glibc
import FoundationEssentials
import Subsonic

/// Music from the household's Subsonic server, through the same arbiter and slots as everything else.
struct MusicContext: Sendable {
    let config: MusicConfig
    let client: SubsonicClient
    let resampler: ResamplerKind

    /// Each song's ReplayGain factor under `music.replay-gain` (1 when off or untagged).
    func gains(_ songs: [Song]) -> [Float] {
        songs.map { song in
            guard config.replayGain != .off, let rg = song.replayGain else { return 1 }
            return rg.factor(album: config.replayGain == .album)
        }
    }

    /// The client for `music.subsonic`, with the password read from its file or environment variable.
    static func make(_ config: BatonConfiguration) -> Result<MusicContext, Daemon.RequestError> {
        guard let music = config.music else {
            return .failure(.init(status: 409, message: "no music server is configured (add a music: section, see docs/CONFIG.md)"))
        }
        let password: String
        switch music.subsonic.password {
        case .file(let path):
            guard let secret = Service.readSecret(path) else {
                return .failure(.init(status: 503, message: "music.subsonic.password-file \(path): cannot read: \(String(cString: strerror(errno)))"))
            }
            password = secret
        case .environment(let name):
            guard let value = getenv(name) else {
                return .failure(.init(status: 503, message: "music.subsonic.password-env: \(name) is not set"))
            }
            password = String(cString: value)
        }
        let client = SubsonicClient(config: Subsonic.SubsonicConfig(
            url: music.subsonic.url, user: music.subsonic.user, password: password,
            format: music.subsonic.format.rawValue, maxBitRate: music.subsonic.format == .raw ? nil : music.subsonic.maxBitrate))
        let kind = ResamplerKind(rawValue: config.resampler.music.rawValue) ?? .musicDefault
        return .success(MusicContext(config: music, client: client, resampler: kind))
    }
}

extension Daemon {
    /// The music context of the running configuration, made once per `music:` section (so the
    /// client keeps what it learnt of the server: auth mode, extensions). Any thread.
    func musicContext() -> Result<MusicContext, RequestError> {
        let config = self.config
        if let cached = musicCache.withLock({ $0 }), cached.config == config.music, cached.context.resampler.rawValue == config.resampler.music.rawValue {
            return .success(cached.context)
        }
        let made = MusicContext.make(config)
        if case .success(let context) = made { musicCache.withLock { $0 = (config.music, context) } }
        return made
    }

    /// What to play from the server; exactly one is set.
    public struct MusicSelection: Sendable, Equatable {
        public var album: String?
        public var playlist: String?
        public var songs: [String]?
        public var search: String?
        public var random: Int?

        public init(album: String? = nil, playlist: String? = nil, songs: [String]? = nil, search: String? = nil, random: Int? = nil) {
            self.album = album
            self.playlist = playlist
            self.songs = songs
            self.search = search
            self.random = random
        }
    }

    /// Resolves `selection` on the server and plays it as music (class `music`, permanent) on `zones`
    /// (empty: `music.zones`). Blocking (it asks the server): any thread but an output thread.
    public func playFromServer(_ selection: MusicSelection, zones requested: [String], volume: Float = 1) throws(RequestError) -> (id: String, outcome: Outcome, skipped: [String]) {
        let music: MusicContext
        switch musicContext() {
        case .success(let m): music = m
        case .failure(let e): throw e
        }
        let count = [selection.album != nil, selection.playlist != nil, selection.songs != nil, selection.search != nil,
                     selection.random != nil].filter { $0 }.count
        guard count == 1 else {
            throw RequestError(status: 400, message: "give exactly one of sound, album, playlist, songs, search, random")
        }
        let songs: [Song]
        do {
            if let id = selection.album {
                songs = try music.client.album(id: id).songs
            } else if let id = selection.playlist {
                songs = try music.client.playlist(id: id).entries
            } else if let ids = selection.songs {
                var list: [Song] = []
                for id in ids { list.append(try music.client.song(id: id)) }
                songs = list
            } else if let text = selection.search {
                songs = try music.client.search(text, artistCount: 0, albumCount: 0, songCount: 50).songs
            } else {
                songs = try music.client.randomSongs(size: max(1, min(selection.random ?? 10, 500)))
            }
        } catch {
            let notFound: Bool
            if case .api(let code, _) = error { notFound = code == 70 } else { notFound = false }
            throw RequestError(status: notFound ? 404 : 502, message: "music server: \(error)")
        }
        guard !songs.isEmpty else { throw RequestError(status: 404, message: "nothing to play: the selection has no songs") }
        guard volume.isFinite, (0...1).contains(volume) else { throw RequestError(status: 400, message: "volume must be between 0 and 1") }
        return try startSongs(songs, zones: requested.isEmpty ? music.config.zones : requested, volume: volume)
    }

    /// Plays resolved songs on zones through the arbiter, from song `index` at `offset` seconds
    /// (a restored queue). Any thread.
    func startSongs(_ songs: [Song], zones requested: [String], volume: Float = 1, index: Int = 0, offset: Double = 0) throws(RequestError) -> (id: String, outcome: Outcome, skipped: [String]) {
        let table = self.zones
        let (available, skipped) = try availableZones(try requestedZones(requested, in: table), in: table)
        let parts = available.map { z in Playback.ZonePart(zone: z, samples: [], channels: table.zone(z)!.channels) }
        return try state.withLock { (s: inout State) throws(RequestError) in
            let id = SourceID("music-\(s.nextID)")
            s.nextID += 1
            let p = Playback(id: id, sourceClass: .music, sound: songs[0].title, loop: false, volume: volume, parts: parts)
            p.songs = songs
            p.startIndex = min(max(0, index), songs.count - 1)
            p.startOffset = max(0, offset)
            p.skipped = skipped
            s.playbacks[id] = p
            let effects = s.arbiter.handle(.request(Request(source: id, sourceClass: .music, zones: available.map { ZoneID($0) })), at: .now)
            apply(effects, &s)
            return (id.rawValue, try outcome(of: id, in: effects), p.skipped)
        }
    }

    /// Starts a streamer for `p` at song `index`, `offset` seconds in, over its current slots.
    /// Each zone resamples with its own `resampler:` or else `resampler.music`. Under the lock.
    func startStreamer(_ p: Playback, at index: Int, offset: Double = 0) {
        guard case .success(let music) = musicContext() else {
            logger.error("music: \(p.id): no usable music server configuration")
            return
        }
        let targets = p.parts.compactMap { part -> MusicStreamer.Target? in
            guard let slot = part.slot, let zone = output(part.zone) else { return nil }
            let kind = zone.config.resampler.flatMap { ResamplerKind(rawValue: $0.rawValue) } ?? music.resampler
            return MusicStreamer.Target(zone: part.zone, slot: slot, mixer: zone.mixer, rate: zone.rate, channels: zone.channels,
                                        resampler: kind, device: zone.device)
        }
        let streamer = MusicStreamer(songs: p.songs, startAt: index, offset: offset, gains: music.gains(p.songs), targets: targets,
                                     client: music.client, retryLimit: music.config.retryLimit, logger: logger)
        p.streamer = streamer
        streamer.start()
    }

    /// Skips `by` tracks (1: next, -1: previous) in the newest music source. Any thread.
    public func skip(by offset: Int) throws(RequestError) -> String {
        try state.withLock { (s: inout State) throws(RequestError) in
            guard let (p, streamer) = newestServerMusic(s) else {
                throw RequestError(status: 404, message: "no music from the server is playing")
            }
            let current = streamer.nowPlaying()?.index ?? p.startIndex
            let index = current + offset
            guard index >= 0 && index < p.songs.count else {
                throw RequestError(status: 409, message: offset > 0 ? "already at the last track" : "already at the first track")
            }
            restart(p, streamer, at: index, offset: 0, &s)
            return p.id.rawValue
        }
    }

    /// Moves the newest music source to `position` seconds of its current track (or of track
    /// `track`, 0-based, when given): the track is fetched again and decoded frames before the
    /// position are dropped, exact to the decoded frame. Any thread.
    public func seek(to position: Double, track: Int? = nil) throws(RequestError) -> String {
        guard position.isFinite, position >= 0 else { throw RequestError(status: 400, message: "position must be a number of seconds ≥ 0") }
        return try state.withLock { (s: inout State) throws(RequestError) in
            guard let (p, streamer) = newestServerMusic(s) else {
                throw RequestError(status: 404, message: "no music from the server is playing")
            }
            let index = track ?? streamer.nowPlaying()?.index ?? p.startIndex
            guard index >= 0 && index < p.songs.count else {
                throw RequestError(status: 400, message: "track \(index) is not in the queue (0...\(p.songs.count - 1))")
            }
            // A song without a duration still has a bound: a week is past the end of any track.
            guard position < 604_800 else {
                throw RequestError(status: 400, message: "position \(position) s is past the end of \(p.songs[index].title)")
            }
            if let duration = p.songs[index].duration, duration > 0, position >= Double(duration) {
                throw RequestError(status: 400, message: "position \(position) s is past the end of \(p.songs[index].title) (\(duration) s)")
            }
            restart(p, streamer, at: index, offset: position, &s)
            return p.id.rawValue
        }
    }

    /// Replaces `p`'s streamer by one that starts at track `index`, `offset` seconds in. Under the lock.
    private func restart(_ p: Playback, _ streamer: MusicStreamer, at index: Int, offset: Double, _ s: inout State) {
        // The old streamer gives up its slots; the source goes on in fresh ones from the new track.
        let releaseNow = streamer.cancel()
        for part in p.parts {
            if releaseNow, let slot = part.slot { output(part.zone)?.mixer.release(slot) }
            part.slot = nil
            let audible = s.arbiter.state(of: p.id)?.isAudible ?? false
            if let slot = output(part.zone)?.mixer.claimSlot(gain: audible ? target(p, zone: part.zone, s) : 0) {
                if !audible { slot.pause() }
                part.slot = slot
            }
        }
        p.startIndex = index
        p.startOffset = offset
        startStreamer(p, at: index, offset: offset)
        apply(s.arbiter.user(.change, on: p.id, at: .now), &s)
    }
}

extension Daemon {
    /// Scrobbles server music by what is audible: "now playing" (`submission=false`) when a track
    /// starts being heard, and a submission once half the track or 4 minutes were heard (the
    /// last.fm rule). The calls run on their own short-lived threads, never under the lock; each
    /// accepted call is published as a `scrobbled` event. Monitor thread, under the lock.
    func scrobble(_ p: Playback) {
        guard let streamer = p.streamer, let now = streamer.nowPlaying(), now.index < p.songs.count else { return }
        let song = p.songs[now.index]
        if p.scrobbledIndex != now.index {
            p.scrobbledIndex = now.index
            p.submitted = false
            events.publish(type: "track", source: p.id.rawValue, zones: p.zones,
                           reason: "now playing: \(song.title) (\(now.index + 1)/\(p.songs.count))")
            send(song, submission: false, source: p.id.rawValue)
        }
        let threshold = min(Double(song.duration ?? 0) / 2, 240)
        if !p.submitted && song.duration != nil && now.seconds >= threshold {
            p.submitted = true
            send(song, submission: true, source: p.id.rawValue)
        }
    }

    private func send(_ song: Song, submission: Bool, source: String) {
        guard case .success(let music) = musicContext() else { return }
        let events = self.events, logger = self.logger
        let time = Int64(Date.now.timeIntervalSince1970 * 1000)
        _ = startThread {
            do {
                try music.client.scrobble(id: song.id, submission: submission, time: time)
                events.publish(type: "scrobbled", source: source,
                               reason: "\(submission ? "submitted" : "now playing"): \(song.title)")
            } catch {
                logger.warning("music: scrobble of \(song.title) failed: \(error)")
            }
        }
    }
}

extension Daemon {
    /// Tells an OpenSubsonic server that offers `playbackReport` what the player truly does: `playing`
    /// while the music is audible, `paused` while it is paused or interrupted, `stopped` when it
    /// ends; again whenever the track changes. A server without the extension is asked once (its
    /// extension list is remembered) and never sent a report. Monitor thread, under the lock.
    func reportPlayback(_ p: Playback, state: SubsonicClient.PlaybackState) {
        guard let streamer = p.streamer, let now = streamer.nowPlaying(), now.index < p.songs.count else { return }
        guard p.reported?.state != state || p.reported?.index != now.index else { return }
        p.reported = (state, now.index)
        guard case .success(let music) = musicContext() else { return }
        let song = p.songs[now.index], logger = self.logger
        let ms = Int64(now.seconds * 1000)
        _ = startThread {
            do {
                guard try music.client.supportsPlaybackReport() else { return }
                try music.client.reportPlayback(id: song.id, state: state, positionMilliseconds: ms)
            } catch {
                logger.warning("music: reportPlayback (\(state.rawValue)) of \(song.title) failed: \(error)")
            }
        }
    }
}
