import AudioCore
import BatonConfig
import Glibc
import OSThread
import Players
import Subsonic
import Synchronization

/// The household's Subsonic server as the `music:` section names it: one client per section (so it
/// keeps what it learnt of the server: auth mode, extensions), and the play queue mirrored there
/// with `savePlayQueue`. Any thread (its own locks).
package final class MusicConnection: Sendable {
    /// A configured server: the client, the section, and the resampler music uses by default.
    package struct Context: Sendable {
        package let config: MusicConfig
        package let client: SubsonicClient
        package let resampler: ResamplerKind
        let logger: Logger
        /// The submissions the server could not take, kept across the clients made again.
        let submissions: Submissions

        /// The player's view of the server for `songs`: the client, the retry limit, and each song's
        /// ReplayGain factor under `music.replay-gain` (1 when off or untagged; values that cannot
        /// be ReplayGain are said in the log, and ignored).
        package func server(
            for songs: [Song], current: @escaping @Sendable () -> SubsonicClient? = { nil }
        ) -> MusicPlayer.Server {
            let gains = songs.map { song -> Float in
                guard config.replayGain != .off, let rg = song.replayGain else { return 1 }
                if let what = rg.implausible {
                    logger.warning("music: \(song.title) (\(song.id)): the server's ReplayGain \(what) is ignored")
                }
                return rg.factor(album: config.replayGain == .album)
            }
            return MusicPlayer.Server(
                client: client, retryLimit: config.retryLimit, gains: gains, submissions: submissions,
                current: current)
        }
    }

    /// The context last made, and what it was made from: the section, the music resampler and the
    /// secrets read from their files (a password changed there is used from the next request on).
    private let cache = Mutex<(made: Made, context: Context)?>(nil)
    private struct Made: Equatable {
        let config: MusicConfig
        let resampler: ResamplerKind
        let password: String
        let apiKey: String?
    }
    /// What was last sent with `savePlayQueue`, when, whether that failed, and whether the server
    /// lacks the call.
    private let sync = Mutex<(last: SavedQueue?, at: Int, failed: Bool, unsupported: Bool)>((nil, 0, false, false))
    /// When the stop's mirror (`mirrorAtStop`) was sent (monotonic ns); `stopMirrorSent` is posted
    /// when it has been answered or has failed.
    private let stopMirror = Mutex<Int?>(nil)
    private let stopMirrorSent = Semaphore()
    /// The `savePlayQueue` calls, one at a time, the newest waiting in place of an older one: a slow
    /// answer (a NAS spinning up) let a later call land first, then the older one over it.
    private let saves = NewestJob(threadName: "save-queue")
    /// Scrobble submissions waiting to be sent again (`Submissions`): they outlive the clients made
    /// again for the same server, not a change of server (`switched`).
    package var submissions: Submissions { currentSubmissions.withLock { $0 } }
    private let currentSubmissions = Mutex(Submissions())
    /// Whether the server was found to lack `savePlayQueue` (the queue is not mirrored there).
    package var lacksSavePlayQueue: Bool { sync.withLock { $0.unsupported } }
    /// How long after a call the same queue is sent again while it plays, or after a failure.
    private static let resendNanoseconds = 30_000_000_000
    private let logger: Logger

    /// Set at batond's stop: requests to the server end at once (see `Peripherals.networkStop`).
    private let stop: StopFlag

    package init(logger: Logger, stop: StopFlag) {
        self.logger = logger
        self.stop = stop
    }

    /// The server batond's configuration names now (its URL and user), set at start and at each
    /// reload: `context` switches to no other.
    private let configured = Mutex<(url: String, user: String)?>(nil)

    /// The client of `config`'s server (`context`: made again when a secret changed) when that is
    /// still `server`, the one a playing queue's songs are from; nil when `config` names another
    /// server or none (music playing across a reload to another server keeps its own client), or
    /// when no client can be made (a secret unreadable, none made before). Reads the secret files:
    /// not under the control plane's lock.
    package func client(for server: SavedQueue.Server, _ config: BatonConfiguration) -> SubsonicClient? {
        guard let music = config.music, SavedQueue.Server(music.subsonic) == server else { return nil }
        return try? context(config).client
    }

    /// The `music:` section batond's configuration has now. Control thread.
    package func configure(_ music: MusicConfig?) {
        configured.withLock { $0 = music.map { ($0.subsonic.url, $0.subsonic.user) } }
    }

    /// The context of `config`'s `music:` section, made again only when the section or a secret
    /// changed: the password and API key files are read at each call (a few bytes, in the page
    /// cache), so a password changed there takes effect without a restart — it took one, and until
    /// then every request was refused (a queue already playing asks for the client at each request:
    /// `client(for:_:)`).
    /// Fails (conflict) without a section, or (unavailable) when a secret cannot be read and no
    /// client was made with an earlier one.
    package func context(_ config: BatonConfiguration) throws(ControlError) -> Context {
        guard let music = config.music else {
            throw ControlError(.conflict, "no music server is configured (add a music: section, see docs/CONFIG.md)")
        }
        let resampler = config.resampler.music
        let password: String
        let apiKey: String?
        do throws(ControlError) {
            (password, apiKey) = try Self.secrets(music.subsonic)
        } catch {
            // A file being rewritten (an editor saving in place, `echo new > file`: empty or gone
            // for a moment) keeps the client made with the last secret read; with none, the error.
            if let cached = cache.withLock({ $0 }), cached.made.config == music, cached.made.resampler == resampler {
                return cached.context
            }
            throw error
        }
        let made = Made(config: music, resampler: resampler, password: password, apiKey: apiKey)
        if let cached = cache.withLock({ $0 }), cached.made == made { return cached.context }
        // A caller holding the configuration from before a reload to another server (a cover asked
        // then, a save queued then) gets a client of its own: it switched the cache back, dropping
        // the new server's kept scrobbles, and the next caller switched it again.
        let current = configured.withLock { $0 }.map {
            SavedQueue.Server(url: $0.url, user: $0.user) == SavedQueue.Server(music.subsonic)
        }
        let client = SubsonicClient(
            config: SubsonicSettings(
                url: music.subsonic.url, user: music.subsonic.user, password: password, apiKey: apiKey,
                format: music.subsonic.format.rawValue,
                maxBitRate: music.subsonic.format == .raw ? nil : music.subsonic.maxBitrate), stop: stop)
        guard current ?? true else {
            return Context(
                config: music, client: client, resampler: made.resampler, logger: logger, submissions: Submissions())
        }
        // Compared, switched and stored in one hold of the lock: two callers at once switched twice.
        let (context, switchedFrom) = cache.withLock { c -> (Context, (SubsonicConfig, Int, Bool)?) in
            if let c, c.made == made { return (c.context, nil) }
            var switchedFrom: (SubsonicConfig, Int, Bool)? = nil
            if let old = c?.made.config.subsonic, SavedQueue.Server(old) != SavedQueue.Server(music.subsonic) {
                let (dropped, lacked) = dropWhatWasLearnt()
                switchedFrom = (old, dropped, lacked)
            }
            // After the drop: the new server's context has submissions of its own.
            let context = Context(
                config: music, client: client, resampler: made.resampler, logger: logger, submissions: submissions)
            c = (made, context)
            return (context, switchedFrom)
        }
        if let (old, dropped, lacked) = switchedFrom {
            switched(from: old, to: music.subsonic, dropped: dropped, lacked: lacked)
        }
        return context
    }

    /// The `music:` section now names another server (its URL or its user, after a reload): what
    /// was learnt of the old one is dropped, said in the log. Its scrobble submissions waiting to
    /// be sent again carried its song ids to the new server (another song scrobbled, or refused);
    /// its lack of `savePlayQueue` (Supysonic) kept the queue from being mirrored to the new one
    /// until a restart. A queue already playing keeps its own client (and its submissions) to the
    /// old server, and is not mirrored to the new one (the daemon's `currentState` tells it apart
    /// by its player's server).
    private func switched(from old: SubsonicConfig, to new: SubsonicConfig, dropped: Int, lacked: Bool) {
        var what = ["music: the server is now \(new.user) at \(new.url) (was \(old.user) at \(old.url))"]
        if dropped > 0 {
            what.append("\(dropped) scrobble submission(s) kept for the old server are dropped (its song ids)")
        }
        if lacked { what.append("savePlayQueue is asked of the new server (the old one had none)") }
        if dropped > 0 {
            logger.warning(what.joined(separator: "; "))
        } else {
            logger.info(what.joined(separator: "; "))
        }
    }

    /// Drops the kept submissions and what `savePlayQueue` showed of the old server: how many
    /// submissions were waiting, and whether it lacked the call. Under `cache`'s lock.
    private func dropWhatWasLearnt() -> (dropped: Int, lacked: Bool) {
        let dropped = currentSubmissions.withLock { s in
            let waiting = s.waiting.count
            s = Submissions()
            return waiting
        }
        let lacked = sync.withLock { s in
            let lacked = s.unsupported
            s.unsupported = false
            s.failed = false
            s.at = 0
            return lacked
        }
        return (dropped, lacked)
    }

    /// The password (a file's first line, not empty, or an environment variable) and the
    /// OpenSubsonic API key (used when the server offers `apiKeyAuthentication`; it was read from
    /// the configuration and never used: a server that takes keys only refused batond).
    private static func secrets(_ subsonic: SubsonicConfig) throws(ControlError) -> (String, String?) {
        let password: String
        switch subsonic.password {
        case .file(let path):
            guard let secret = FileIO.firstLine(path) else {
                throw ControlError(
                    .unavailable,
                    "music.subsonic.password-file \(path): cannot read: \(String(cString: strerror(errno)))")
            }
            // Empty is allowed beside an API key (a server that takes keys never sees the password).
            guard !secret.isEmpty || subsonic.apiKeyFile != nil else {
                throw ControlError(.unavailable, "music.subsonic.password-file \(path): its first line is empty")
            }
            password = secret
        case .environment(let name):
            guard let value = getenv(name) else {
                throw ControlError(.unavailable, "music.subsonic.password-env: \(name) is not set")
            }
            password = String(cString: value)
        }
        guard let path = subsonic.apiKeyFile else { return (password, nil) }
        guard let key = FileIO.firstLine(path) else {
            throw ControlError(
                .unavailable, "music.subsonic.api-key-file \(path): cannot read: \(String(cString: strerror(errno)))")
        }
        guard !key.isEmpty else {
            throw ControlError(.unavailable, "music.subsonic.api-key-file \(path): its first line is empty")
        }
        return (password, key)
    }

    /// Mirrors the queue to the server with `savePlayQueue` (so other Subsonic clients can pick it
    /// up) when its songs, track or playing state changed, its position while not playing (a seek
    /// while paused), or, while playing, 30 s after the last call (and 30 s after a call that
    /// failed); a server without play-queue endpoints (Supysonic) is noticed once and never asked
    /// again. `ofThisRun`: the queue of music this run of batond has (else the one it restored — the
    /// state file's or the server's own —, marked not playing). A restored queue is not sent until
    /// this run had music: it was sent back at the first save after the start, over a queue another
    /// client had saved since (the phone's album replaced by the one batond played before its
    /// restart), and again every 30 s after Baton's music was stopped. The calls run one at a time
    /// on a thread of their own, and so does reading the password file they need (the monitor calls
    /// this about once a second, and must not wait on the disk).
    package func mirror(_ queue: SavedQueue?, ofThisRun: Bool, _ config: BatonConfiguration) {
        guard let queue, queue.index < queue.songs.count, config.music != nil else { return }
        let now = monotonicNanoseconds()
        let due: Bool = sync.withLock { s in
            guard !s.unsupported, s.last != nil || ofThisRun else { return false }
            let changed =
                s.last.map {
                    $0.songs.map(\.id) != queue.songs.map(\.id) || $0.index != queue.index
                        || $0.playing != queue.playing || !queue.playing && $0.position != queue.position
                } ?? true
            guard changed || (queue.playing || s.failed) && now - s.at >= Self.resendNanoseconds else { return false }
            s.last = queue
            s.at = now
            return true
        }
        if due { send(config) }
    }

    /// The stop's mirror: as `mirror`, and also the position heard while playing, which `mirror`
    /// sends only every 30 s — the server kept a position up to 30 s before the stop, where another
    /// client picking the queue up began. `awaitMirrorAtStop` waits for it.
    package func mirrorAtStop(_ queue: SavedQueue?, ofThisRun: Bool, _ config: BatonConfiguration) {
        guard let queue, queue.index < queue.songs.count, config.music != nil else { return }
        let due: Bool = sync.withLock { s in
            guard !s.unsupported, s.last != nil || ofThisRun else { return false }
            let same =
                s.last.map {
                    $0.songs.map(\.id) == queue.songs.map(\.id) && $0.index == queue.index
                        && $0.playing == queue.playing
                        && $0.position == queue.position
                } ?? false
            guard !same || s.failed else { return false }
            s.last = queue
            s.at = monotonicNanoseconds()
            return true
        }
        guard due else { return }
        stopMirror.withLock { $0 = monotonicNanoseconds() }
        send(config) { [stopMirrorSent] in stopMirrorSent.post() }
    }

    /// Waits for the stop's mirror until `span` after it was sent (the fade-out and the outputs'
    /// stop ran meanwhile); true when it was answered (or none was sent). It is not stopped with
    /// the network (`stoppable: false`): the process's end would cut it.
    package func awaitMirrorAtStop(within span: Duration) -> Bool {
        guard let sent = stopMirror.withLock({ $0 }) else { return true }
        let left = sent + span.wholeNanoseconds - monotonicNanoseconds()
        return stopMirrorSent.wait(nanoseconds: max(0, left))
    }

    /// Sends the queue last mirrored again if its call failed 30 s ago or more: the state may not
    /// change again to call `mirror` (music stopped while the server was away), and the server kept
    /// an older queue for good. Cheap while nothing failed. Any thread but an output thread.
    package func retryMirror(_ config: BatonConfiguration) {
        guard config.music != nil else { return }
        let now = monotonicNanoseconds()
        let due: Bool = sync.withLock { s in
            guard s.failed, !s.unsupported, s.last != nil, now - s.at >= Self.resendNanoseconds else { return false }
            s.at = now
            return true
        }
        if due { send(config) }
    }

    /// `savePlayQueue` with the queue last recorded (`sync.last`) as the call runs — not one taken
    /// before, which a newer may have passed meanwhile — after the one running and in place of one
    /// waiting. A failure the server or the network may get over (`isTransient`) is tried again in
    /// 30 s (`retryMirror`); another (the server refused it) is said once, not every 30 s all day.
    private func send(_ config: BatonConfiguration, then done: (@Sendable () -> Void)? = nil) {
        let logger = self.logger
        saves.run { [self] in
            defer { done?() }
            guard let queue = sync.withLock({ $0.last }), queue.index < queue.songs.count else { return }
            let client: SubsonicClient
            do { client = try context(config).client } catch {
                sync.withLock { $0.failed = false }
                logger.warning("music: savePlayQueue failed: \(error)")
                return
            }
            do {
                try client.savePlayQueue(
                    songIDs: queue.songs.map(\.id), current: queue.songs[queue.index].id,
                    positionMilliseconds: Int64(queue.position * 1000))
                sync.withLock { $0.failed = false }
            } catch let error as SubsonicError where client.lacksEndpoint(error) {
                sync.withLock { $0.unsupported = true }
                logger.info("music: the server has no savePlayQueue; the queue is kept in state-dir only")
            } catch {
                // A 404 that is not the server's lack (a proxy in front of a server that is down)
                // is tried again too.
                let again = (error as? SubsonicError).map { $0.isTransient || $0.isUnsupportedEndpoint } == true
                sync.withLock { $0.failed = again }
                logger.warning("music: savePlayQueue failed: \(error)\(again ? "; tried again in 30 s" : "")")
            }
        }
    }

    /// The queue the server keeps (`getPlayQueue`), to play on `zones`: `.success(nil)` when there
    /// is none, no server, or the server has no such call; a failure when it could not be asked
    /// (then it is asked again at the next start). Blocking (it asks the server).
    package func serverQueue(_ config: BatonConfiguration, zones: [String]) -> Result<SavedQueue?, any Error> {
        guard config.music != nil else { return .success(nil) }
        let music: Context
        do { music = try context(config) } catch {
            // An unreadable password: the server could not be asked (asked again at the next start).
            logger.warning("music: the server's play queue not asked: \(error.message)")
            return .failure(error)
        }
        do {
            guard let q = try music.client.playQueue(), !q.entries.isEmpty else { return .success(nil) }
            // The position is the current song's: without it (no `current`, or a song no longer in
            // the list) the queue plays from its first song's start, not that far into it.
            let current = q.current.flatMap { id in q.entries.firstIndex { $0.id == id } }
            logger.info(
                "music: restored the server's play queue (\(q.entries.count) songs, changed by \(q.changedBy ?? "?"))")
            var queue = SavedQueue(
                songs: q.entries, index: current ?? 0, position: current == nil ? 0 : Double(q.position) / 1000,
                zones: zones, volume: 1, playing: false,
                server: SavedQueue.Server(music.config.subsonic))
            // Another client's word, checked as the state file is: a position of 2^63 ms trapped
            // batond at its first save (`Int64(position * 1000)`), a negative one dropped the
            // queue at the next start.
            if let problem = StateStore.problem(queue) {
                logger.warning("music: the server's play queue: \(problem); it plays from the song's start")
                queue.position = 0
            }
            if let cut = queue.cutToMostSongs() { logger.warning("music: the server's play queue: \(cut)") }
            return .success(queue)
        } catch {
            if music.client.lacksEndpoint(error) { return .success(nil) }
            if !stop.isSet { logger.warning("music: getPlayQueue failed: \(error); asked again at the next start") }
            return .failure(error)
        }
    }
}

/// What to play from the server; exactly one is set.
public struct MusicSelection: Sendable, Equatable {
    public var album: String?
    public var playlist: String?
    public var songs: [String]?
    public var search: String?
    public var random: Int?

    public init(
        album: String? = nil, playlist: String? = nil, songs: [String]? = nil, search: String? = nil, random: Int? = nil
    ) {
        self.album = album
        self.playlist = playlist
        self.songs = songs
        self.search = search
        self.random = random
    }
}

extension MusicConnection.Context {
    /// The most song IDs a play or a queue addition names (as many as `random` gives).
    static let mostSongIDs = 500

    /// The songs `selection` names, asked from the server (blocking). Not found for an unknown id
    /// (Subsonic error 70) or an empty selection; an upstream failure for anything else.
    package func songs(_ selection: MusicSelection) throws(ControlError) -> [Song] {
        let count = [
            selection.album != nil, selection.playlist != nil, selection.songs != nil, selection.search != nil,
            selection.random != nil,
        ].filter { $0 }.count
        guard count == 1 else {
            throw ControlError(.badRequest, "give exactly one of sound, album, playlist, songs, search, random")
        }
        // Each is a request of its own, one after another, on the requester's thread: 5 000 IDs
        // (a 64 KiB body) held it for minutes, and the music started long after the client left.
        if let ids = selection.songs, ids.count > Self.mostSongIDs {
            throw ControlError(.badRequest, "songs: \(ids.count) IDs; at most \(Self.mostSongIDs) at once")
        }
        // Refused, not clamped: 10 000 asked for played 500, and nothing said so.
        if let n = selection.random, n > Self.mostSongIDs {
            throw ControlError(.badRequest, "random: \(n) songs; at most \(Self.mostSongIDs) at once")
        }
        if let n = selection.random, n < 1 {
            throw ControlError(.badRequest, "random: \(n) songs; give at least 1")
        }
        let songs: [Song]
        do {
            if let id = selection.album {
                songs = try client.album(id: id).songs
            } else if let id = selection.playlist {
                songs = try client.playlist(id: id).entries
            } else if let ids = selection.songs {
                var list: [Song] = []
                for id in ids { list.append(try client.song(id: id)) }
                songs = list
            } else if let text = selection.search {
                songs = try client.search(text, artistCount: 0, albumCount: 0, songCount: 50).songs
            } else {
                songs = try client.randomSongs(size: selection.random ?? 10)
            }
        } catch {
            let notFound: Bool
            if case .api(let code, _) = error { notFound = code == 70 } else { notFound = false }
            throw ControlError(notFound ? .notFound : .upstreamFailure, "music server: \(error)")
        }
        guard !songs.isEmpty else { throw ControlError(.notFound, "nothing to play: the selection has no songs") }
        return songs
    }
}

extension SavedQueue.Server {
    /// The server `subsonic` names.
    package init(_ subsonic: SubsonicConfig) { self.init(url: subsonic.url, user: subsonic.user) }

    /// The server `music` streams from.
    package init(_ music: MusicPlayer) {
        let from = music.serverIdentity
        self.init(url: from.url, user: from.user)
    }
}
