import AudioCore
import FoundationEssentials
import OSThread
import Subsonic
import Synchronization

/// Music from the household's Subsonic server: a queue of songs streamed one after another into
/// the source's slots (gapless, see `MusicStreamer`), with scrobbling by what is heard and
/// OpenSubsonic `reportPlayback` of what truly happens.
///
/// Threads: as `Source`. `restart` is called by the control plane under its lock, after `stop()` and
/// with freshly claimed slots; the server calls (scrobble, report) run on short threads of their own.
public final class MusicPlayer: Source, @unchecked Sendable {
    // @unchecked: `state` is touched only under the control plane's lock (start, restart, tick, stop);
    // the streamer is behind a mutex for the readers on other threads.
    /// How to reach the server and what to apply to each song.
    public struct Server: Sendable {
        public let client: SubsonicClient
        public let retryLimit: Duration
        /// Each song's linear gain (ReplayGain), in queue order.
        public let gains: [Float]
        public init(client: SubsonicClient, retryLimit: Duration, gains: [Float]) {
            self.client = client
            self.retryLimit = retryLimit
            self.gains = gains
        }
    }

    /// The track heard now and the position in it (seconds).
    public struct NowPlaying: Sendable, Equatable {
        public let index: Int
        public let seconds: Double
        public let song: Song
    }

    public let songs: [Song]
    private let server: Server
    private let report: SourceReporter
    private let streamer = Mutex<MusicStreamer?>(nil)
    private var state: State

    private struct State {
        /// Where the current streamer started: the track and seconds into it.
        var startIndex: Int
        var startOffset: Double
        /// The state and track last reported with `reportPlayback`.
        var reported: (state: SubsonicClient.PlaybackState, index: Int)?
        /// The track last announced as now playing, and whether it was submitted.
        var scrobbledIndex: Int?
        var submitted = false
        var gaveUpReported = false
    }

    /// Plays `songs` from track `index`, `offset` seconds in (a seek or a restored queue).
    public init(songs: [Song], index: Int = 0, offset: Double = 0, server: Server, report: @escaping SourceReporter) {
        precondition(!songs.isEmpty && server.gains.count == songs.count, "one gain per song, at least one song")
        self.songs = songs
        self.server = server
        self.report = report
        state = State(startIndex: min(max(0, index), songs.count - 1), startOffset: max(0, offset))
    }

    public var label: String { nowPlaying()?.song.title ?? songs[state.startIndex].title }

    public func start(_ outputs: [SourceOutput]) {
        let streamer = MusicStreamer(
            songs: songs, startAt: state.startIndex, offset: state.startOffset, gains: server.gains,
            targets: outputs, client: server.client, retryLimit: server.retryLimit, report: report)
        self.streamer.withLock { $0 = streamer }
        streamer.start()
    }

    /// Ends the current stream without telling the server (a skip or seek follows): true when its
    /// slots may be released now, as `stop()`.
    public func endStream() -> Bool { streamer.withLock { $0 }?.cancel() ?? true }

    /// Plays on from track `index`, `offset` seconds in, in `outputs` (fresh slots). After `endStream()`.
    public func restart(at index: Int, offset: Double, in outputs: [SourceOutput]) {
        state.startIndex = index
        state.startOffset = offset
        start(outputs)
    }

    /// Why a seek cannot go where it asks.
    public struct SeekProblem: Error, Sendable { public let message: String }

    /// The track a seek to `position` seconds goes to: `track` (0-based) or the current one; a
    /// problem when it is not in the queue or the position is past its end.
    public func seekTarget(_ position: Double, track: Int?) -> Result<Int, SeekProblem> {
        let index = track ?? nowPlaying()?.index ?? state.startIndex
        guard index >= 0 && index < songs.count else {
            return .failure(SeekProblem(message: "track \(index) is not in the queue (0...\(songs.count - 1))"))
        }
        let song = songs[index]
        // A song without a duration still has a bound: a week is past the end of any track.
        guard position < 604_800 else {
            return .failure(SeekProblem(message: "position \(position) s is past the end of \(song.title)"))
        }
        if let duration = song.duration, duration > 0, position >= Double(duration) {
            return .failure(
                SeekProblem(message: "position \(position) s is past the end of \(song.title) (\(duration) s)"))
        }
        return .success(index)
    }

    /// The track the streamer started with (before anything of it was heard).
    public var startIndex: Int { state.startIndex }

    public func tick(audible: Bool) {
        guard let streamer = streamer.withLock({ $0 }) else { return }
        if let why = streamer.progress.gaveUp, !state.gaveUpReported {
            state.gaveUpReported = true
            report(.gaveUp(why))
        }
        if audible { scrobble() }
        reportPlayback(audible ? .playing : .paused)
    }

    public func stop() -> Bool {
        reportPlayback(.stopped)
        return endStream()
    }

    public var position: Double? { nowPlaying()?.seconds }
    public var isDrained: Bool { streamer.withLock { $0 }?.isDrained ?? false }

    /// When the next track begins (its `track` notice and scrobble are due), when the last frame will
    /// have been played once the queue is all written, and otherwise every 250 ms (pause and
    /// playback reports, the scrobble threshold, a give-up). Under the control plane's lock.
    public var nextTick: Int? { streamer.withLock { $0 }?.nextLook }

    /// The track heard now and the position in it. Any thread.
    public func nowPlaying() -> NowPlaying? {
        guard let now = streamer.withLock({ $0 })?.nowPlaying(), now.index < songs.count else { return nil }
        return NowPlaying(index: now.index, seconds: now.seconds, song: songs[now.index])
    }

    /// The streamer's view: waiting for the server, the last stream error, played to its end, gave up.
    public var progress: (retrying: String?, error: String?, finished: Bool, gaveUp: String?) {
        let p = streamer.withLock { $0 }?.progress
        return (p?.retrying, p?.error, p?.finished ?? false, p?.gaveUp)
    }

    /// Scrobbles by what is audible: "now playing" when a track starts being heard, and a submission
    /// once half the track or 4 minutes were heard (the last.fm rule).
    private func scrobble() {
        guard let now = nowPlaying() else { return }
        if state.scrobbledIndex != now.index {
            state.scrobbledIndex = now.index
            state.submitted = false
            report(.track(index: now.index, count: songs.count, title: now.song.title))
            send(now.song, submission: false)
        }
        let threshold = min(Double(now.song.duration ?? 0) / 2, 240)
        if !state.submitted && now.song.duration != nil && now.seconds >= threshold {
            state.submitted = true
            send(now.song, submission: true)
        }
    }

    private func send(_ song: Song, submission: Bool) {
        let client = server.client
        let report = self.report
        let time = Int64(Date.now.timeIntervalSince1970 * 1000)
        OSThread.detach(name: "scrobble") {
            do {
                try client.scrobble(id: song.id, submission: submission, time: time)
                report(.scrobbled(submission: submission, title: song.title))
            } catch {
                report(.warning("music: scrobble of \(song.title) failed: \(error)"))
            }
        }
    }

    /// Tells an OpenSubsonic server that offers `playbackReport` what the player truly does: `playing`
    /// while audible, `paused` while paused or interrupted, `stopped` at the end; again at each track
    /// change. A server without the extension is asked once and never sent a report.
    private func reportPlayback(_ playback: SubsonicClient.PlaybackState) {
        guard let now = nowPlaying() else { return }
        guard state.reported?.state != playback || state.reported?.index != now.index else { return }
        state.reported = (playback, now.index)
        let client = server.client
        let report = self.report
        let song = now.song
        let ms = Int64(now.seconds * 1000)
        OSThread.detach(name: "report-playback") {
            do {
                guard try client.supportsPlaybackReport() else { return }
                try client.reportPlayback(id: song.id, state: playback, positionMilliseconds: ms)
            } catch {
                report(.warning("music: reportPlayback (\(playback.rawValue)) of \(song.title) failed: \(error)"))
            }
        }
    }
}
