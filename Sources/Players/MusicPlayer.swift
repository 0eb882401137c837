import AudioCore
import FoundationEssentials
import OSThread
import Subsonic
import Synchronization

/// Music from the household's Subsonic server: a queue of songs streamed one after another into
/// the source's slots (gapless, see `MusicStreamer`), with scrobbling by what is heard and
/// OpenSubsonic `reportPlayback` of what truly happens.
///
/// Threads: as `Source`. `setStart` then `start` (a restart) are called by the control plane under
/// its lock, after `endStream()`, the second with freshly claimed slots; the server calls run on
/// short threads of their own (scrobbles), or one at a time on one (playback reports: `reports`).
public final class MusicPlayer: Source, @unchecked Sendable {
    // @unchecked: `state` is touched only under the control plane's lock (start, setStart, tick, stop);
    // the streamer is behind a mutex for the readers on other threads.
    /// How to reach the server and what to apply to each song.
    public struct Server: Sendable {
        public let client: SubsonicClient
        public let retryLimit: Duration
        /// Each song's linear gain (ReplayGain), in queue order.
        public let gains: [Float]
        /// The submissions the server could not take, to be sent again (one per `music:` section).
        public let submissions: Submissions
        /// The client the daemon has for this same server now, made again with the password or API
        /// key its files hold now; nil when the configuration names another server now (music
        /// playing across a reload to another server goes on with `client`). Called off the
        /// control plane's lock (it may read the secret files): at each stream request, scrobble
        /// and playback report. A player kept `client` for good: after the password was changed
        /// (its file rewritten, batond reloaded) every following track failed "Subsonic error 40"
        /// and the queue stopped after three.
        public let current: @Sendable () -> SubsonicClient?
        public init(
            client: SubsonicClient, retryLimit: Duration, gains: [Float], submissions: Submissions,
            current: @escaping @Sendable () -> SubsonicClient? = { nil }
        ) {
            self.client = client
            self.retryLimit = retryLimit
            self.gains = gains
            self.submissions = submissions
            self.current = current
        }

        /// The client to ask the server with now: `current`'s, else the one the music started with.
        public var clientNow: SubsonicClient { current() ?? client }
    }

    /// The track heard now and the position in it (seconds).
    public struct NowPlaying: Sendable, Equatable {
        public let index: Int
        public let seconds: Double
        public let song: Song
        /// The queue entry heard (its key: the same song twice in the queue is two entries).
        public let key: Int
        /// Where the stream began this track (seconds): 0, or where a seek or a restored queue
        /// started it.
        public let from: Double
    }

    /// The queue; edited only through `edit` (under the control plane's lock).
    public let queue: MusicQueue
    /// The songs of the queue, in order.
    public var songs: [Song] { queue.songs }
    private let server: Server
    /// The server this queue's songs are from (its URL and user): a reload to another server
    /// leaves music playing with the client it started with (one to the same server, with a
    /// changed password, has it use the new client: `Server.current`).
    public var serverIdentity: (url: String, user: String) { (server.client.config.url, server.client.config.user) }
    private let report: SourceReporter
    private let changed: @Sendable () -> Void
    private let streamer = Mutex<MusicStreamer?>(nil)
    private var state: State
    /// Sends the playback reports one at a time, the newest in place of any waiting: two sent at
    /// once could reach the server in either order and leave it showing the older state.
    private let reports = NewestJob(threadName: "report-playback")
    /// The number (`State.reportNumber`) of the last playback report the server did not take, set
    /// by its job: a look that finds it is still the last one sent sends it again.
    private let failedReport = Atomic<Int>(0)

    private struct State {
        /// Where the current streamer started: the track (its queue key) and seconds into it.
        var startKey: Int
        var startOffset: Double
        /// The state and track last reported with `reportPlayback` (sent: it may have failed), and
        /// that report's number (1, 2…; `failedReport`).
        var reported: (state: SubsonicClient.PlaybackState, index: Int)?
        var reportNumber = 0
        /// A failed report is sent again no sooner than this (monotonic ns): 1 s after the first
        /// failure, doubling to a minute (`resends` in a row).
        var resendAt = 0
        var resends = 0
        /// The track (key) last announced as now playing, and whether it was submitted.
        var scrobbledKey: Int?
        var submitted = false
        /// Seconds of that track heard so far (`scrobble`), and its position at the last look.
        var heardSeconds = 0.0
        var lastPosition: Double?
        /// When that track began to be heard (ms since 1970): its submission's time.
        var heardFrom: Int64 = 0
        var gaveUpReported = false
        /// The arbiter's word: heard (true, as when it first grants the source) or paused or
        /// interrupted (`audibilityChanged`).
        var wanted = true
        /// Whether anything of the current stream was heard yet (a start, skip or seek makes a new
        /// one): until then a wanted source is starting, not paused.
        var heardSinceStart = false
        /// `setStart` was called and `start` not yet: a restart waits (`pendingStart`). Music that
        /// never started has no place of its own to save (a request refused or stopped while
        /// queued took the saved queue's place).
        var restartPending = false
    }

    /// Plays `songs` from track `index`, `offset` seconds in (a seek or a restored queue).
    /// `changed` is called on the streamer's thread when `nextTick` may have come closer (a track
    /// began to be written, the queue ended or gave up): the control plane wakes its monitor, which
    /// otherwise sleeps until the soonest `nextTick` (at most a second).
    public init(
        songs: [Song], index: Int = 0, offset: Double = 0, server: Server, report: @escaping SourceReporter,
        changed: @escaping @Sendable () -> Void = {}
    ) {
        precondition(!songs.isEmpty && server.gains.count == songs.count, "one gain per song, at least one song")
        queue = MusicQueue(songs: songs, gains: server.gains)
        self.server = server
        self.report = report
        self.changed = changed
        state = State(startKey: min(max(0, index), songs.count - 1), startOffset: max(0, offset))
    }

    public var label: String {
        nowPlaying()?.song.title ?? queue.entry(key: state.startKey)?.song.title ?? queue.songs.first?.title ?? ""
    }

    public func start(_ outputs: [SourceOutput]) {
        state.restartPending = false
        state.heardSinceStart = false
        // A new stream may give up again, and that is told too (a second give-up after a skip was not).
        state.gaveUpReported = false
        let streamer = MusicStreamer(
            queue: queue, startAt: state.startKey, offset: state.startOffset, targets: outputs,
            client: { [server] in server.clientNow }, retryLimit: server.retryLimit, report: report, changed: changed)
        self.streamer.withLock { $0 = streamer }
        streamer.start()
    }

    /// Ends the current stream without telling the server (a skip or seek follows): true when its
    /// slots may be released now, as `stop()`. Until the next `start` (it may wait for a free slot)
    /// there is no stream: what plays next is where `setStart` put it, not the ended stream's track.
    public func endStream() -> Bool {
        streamer.withLock { streamer in
            defer { streamer = nil }
            return streamer?.cancel() ?? true
        }
    }

    /// Where the next `start` plays from: track `index`, `offset` seconds in. After `endStream()`;
    /// `start` follows, in fresh slots.
    public func setStart(at index: Int, offset: Double) {
        let entries = queue.entries
        state.startKey = entries[min(max(0, index), entries.count - 1)].key
        state.startOffset = offset
        state.restartPending = true
    }

    /// The next `start` plays from past the queue's end (`EditOutcome.ends`): its stream finds no
    /// track, plays nothing, and is played to its end at once (`isDrained`). After `endStream()`.
    public func setStartPastTheEnd() {
        state.startKey = Self.pastTheEnd
        state.startOffset = 0
        state.restartPending = true
    }

    /// The start key of a stream past the queue's end: no entry has it (keys count from 0).
    static let pastTheEnd = -1

    /// Why a seek cannot go where it asks.
    public struct SeekProblem: Error, Sendable { public let message: String }

    /// The track a seek to `position` seconds goes to: `track` (0-based) or the current one; a
    /// problem when it is not in the queue or the position is past its end.
    public func seekTarget(_ position: Double, track: Int?) -> Result<Int, SeekProblem> {
        let index = track ?? nowPlaying()?.index ?? startIndex
        let songs = queue.songs
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
    public var startIndex: Int { queue.index(of: state.startKey) ?? 0 }
    /// Where the next stream starts (the track and seconds into it): a queued source's place before
    /// it ever started. Under the control plane's lock.
    public var startPlace: (index: Int, seconds: Double) { (startIndex, state.startOffset) }

    /// Where the next stream starts (the track and seconds into it) while none runs: after
    /// `endStream` and `setStart`, before `start` (a seek waiting for a free slot). What is saved to resume from
    /// meanwhile — a stop or reload then kept the place before the seek. Nil while a stream runs.
    /// Under the control plane's lock.
    public var pendingStart: (index: Int, seconds: Double)? {
        guard state.restartPending, let index = queue.index(of: state.startKey) else { return nil }
        return (index, state.startOffset)
    }

    /// Where the queue is saved as being (`SavedQueue`): the track heard now and the position in
    /// it; before the stream has begun a track — none runs yet (`pendingStart`), its thread has not
    /// begun, or its first track was refused with nothing written —, where it starts. A stop in
    /// that moment saved the place before a seek or skip (the monitor's save, once a second, had
    /// not seen the new start). Nil when no stream runs or waits: music that never started has no
    /// place of its own. Under the control plane's lock.
    public var placeToSave: (index: Int, seconds: Double)? {
        if let now = nowPlaying() {
            // A queue that stopped at a last track nothing of which was written (refused): once
            // all before it was heard, it goes on from that track's start — not from the end of
            // the one before, downloaded again to be skipped, and announced again.
            if let streamer = streamer.withLock({ $0 }), streamer.isDrained,
                let stopped = streamer.progress.stoppedBefore, let index = queue.index(of: stopped.key)
            {
                return (index, stopped.seconds)
            }
            return (now.index, now.seconds)
        }
        if let pending = pendingStart { return pending }
        guard let streamer = streamer.withLock({ $0 }), streamer.writingKey == nil,
            let index = queue.index(of: state.startKey)  // not an entry an edit removed since
        else { return nil }
        return (index, state.startOffset)
    }

    public func tick(audible: Bool) {
        guard streamer.withLock({ $0 }) != nil else { return }
        reportGaveUp()
        if audible {
            state.heardSinceStart = true
            scrobble()
        }
        reportPlayback(audible ? .playing : state.wanted && !state.heardSinceStart ? .starting : .paused)
    }

    public func audibilityChanged(_ audible: Bool) { state.wanted = audible }

    /// Tells (once) that the streamer gave up on the server: a `stream-error` event. At each tick,
    /// and by the monitor before it releases the drained source — which can come first when the
    /// monitor looks only after the streamer gave up and its last frames played; the event must
    /// not be lost then. Under the control plane's lock.
    public func reportGaveUp() {
        guard let why = streamer.withLock({ $0 })?.progress.gaveUp, !state.gaveUpReported else { return }
        state.gaveUpReported = true
        report(.gaveUp(why))
    }

    /// Tells the server `stopped` — of what is heard, or, while nothing is (a skip or seek waiting
    /// for its slots, a stream not begun), of where the queue stops (`placeToSave`): nothing was
    /// sent then, and the server showed the last report, `playing`, for good — and ends the stream.
    public func stop() -> Bool {
        if nowPlaying() != nil {
            reportPlayback(.stopped)
        } else if let place = placeToSave {
            reportPlayback(.stopped, index: place.index, song: queue.songs[place.index], seconds: place.seconds)
        }
        return endStream()
    }

    public var position: Double? { nowPlaying()?.seconds }
    public var isDrained: Bool { streamer.withLock { $0 }?.isDrained ?? false }

    /// When the next track begins (its `track` notice and scrobble are due), when the track heard
    /// now reaches its scrobble threshold, when the last frame will have been played once the queue
    /// is all written; nil while none of these is known (a track's start becomes known when the
    /// streamer begins writing it, and it calls `changed`). Pause and playback reports follow the
    /// arbiter's changes, which wake the monitor themselves. Under the control plane's lock.
    public var nextTick: Int? {
        guard let streamer = streamer.withLock({ $0 }), !streamer.isHeldStill else { return nil }
        var next = streamer.nextLook
        // Past the threshold but not submitted: it is submitted at the next tick that hears it (a
        // source silenced there is resumed by the arbiter, which wakes the monitor).
        if !state.submitted, let now = nowPlaying(), let threshold = Self.scrobbleThreshold(now.song) {
            // Heard by now: what was counted, and the step since the last look (`scrobble`).
            let remaining = threshold - state.heardSeconds - heardStep(to: now.seconds)
            if remaining > 0 {
                let due = Int(remaining * 1e9) + 1_000_000
                next = min(next ?? due, due)
            }
        }
        return next
    }

    /// The track heard now and the position in it. Any thread.
    public func nowPlaying() -> NowPlaying? {
        guard let now = streamer.withLock({ $0 })?.nowPlaying(), let entry = queue.entry(key: now.key),
            let index = queue.index(of: now.key)
        else { return nil }
        return NowPlaying(index: index, seconds: now.seconds, song: entry.song, key: now.key, from: now.from)
    }

    /// The streamer's view: waiting for the server, the error of the track heard now (or of a later
    /// one that failed before anything of it was heard), played to its end, gave up. Played to its
    /// end once the last frame was played (`isDrained`), not once it was written: the streamer is
    /// done half a second and more before that, and a pause and stop (or a save) then dropped the
    /// saved queue, its last track not heard to its end.
    public var progress: (retrying: String?, error: String?, finished: Bool, gaveUp: String?) {
        let streamer = streamer.withLock { $0 }
        let p = streamer?.progress
        // A stream error describes the present only until a later track is heard.
        let heard = nowPlaying()?.index ?? startIndex
        let error = p.flatMap { p in
            p.errorKey.flatMap { queue.index(of: $0) }.map { $0 >= heard } == true ? p.error : nil
        }
        return (p?.retrying, error, p?.finished == true && streamer?.isDrained == true, p?.gaveUp)
    }

    /// Scrobbles by what is audible: "now playing" when a track starts being heard, and a submission
    /// once half the track or 4 minutes were heard (the last.fm rule) — heard, not reached: the
    /// position moved on between two looks, each at most `maximumStep` apart while it is heard
    /// (ticks come at least once a second), so a seek's jump, or a restored queue's starting
    /// point, is not time heard (it used to submit a track sought past its half at once).
    private func scrobble() {
        // One look: the key and the song of the same moment (two looks could straddle a track's
        // start, and the new track never be announced).
        guard let now = nowPlaying() else { return }
        let audibleKey = now.key
        if state.scrobbledKey != audibleKey {
            state.scrobbledKey = audibleKey
            state.submitted = false
            state.heardSeconds = 0
            // Heard from where this stream began it: its start, or where a seek or a restore put it
            // (its first pass only: the same entry heard again later began at 0).
            state.lastPosition = now.from
            // When it began to be heard (this look is at most a second after): the submission's
            // time, as Last.fm and ListenBrainz take a scrobble's (it was the moment the
            // threshold was reached, up to 4 minutes later).
            state.heardFrom = Self.epochMilliseconds() - Int64(max(0, now.seconds - (state.lastPosition ?? 0)) * 1000)
            report(.track(index: now.index, count: queue.count, title: now.song.title))
            send(now.song, submission: false, time: Self.epochMilliseconds())
        }
        state.heardSeconds += heardStep(to: now.seconds)
        state.lastPosition = now.seconds
        if !state.submitted, let threshold = Self.scrobbleThreshold(now.song), state.heardSeconds >= threshold {
            state.submitted = true
            send(now.song, submission: true, time: state.heardFrom)
        }
    }

    /// The most the position may move between two looks and count as heard (they come at least
    /// once a second while a track is heard; more is a jump).
    static let maximumStep = 3.0

    /// Seconds heard from the last look's position to `seconds`: the step forward, if it is not a
    /// jump (`maximumStep`); 0 before the first look.
    private func heardStep(to seconds: Double) -> Double {
        guard let last = state.lastPosition, seconds > last, seconds - last <= Self.maximumStep else { return 0 }
        return seconds - last
    }

    /// Seconds of `song` to be heard before it is submitted: half of it or 4 minutes, whichever
    /// comes first (the last.fm rule); nil when its duration is unknown or not a length — a server
    /// that could not probe a file says 0 — (it is never submitted; with 0 it was, at once).
    static func scrobbleThreshold(_ song: Song) -> Double? {
        song.duration.flatMap { $0 > 0 ? min(Double($0) / 2, 240) : nil }
    }

    /// Milliseconds since 1970 (the wall clock).
    private static func epochMilliseconds() -> Int64 { Int64(Date.now.timeIntervalSince1970 * 1000) }

    /// Sends a scrobble on a thread of its own. A submission the server cannot take now is kept
    /// to be sent again (`Submissions`); one that goes through sends what was kept.
    private func send(_ song: Song, submission: Bool, time: Int64) {
        let server = self.server
        let submissions = server.submissions
        let report = self.report
        OSThread.detach(name: "scrobble") {
            let client = server.clientNow
            do throws(SubsonicError) {
                try client.scrobble(id: song.id, submission: submission, time: time)
                report(.scrobbled(submission: submission, title: song.title))
                submissions.resend(with: client, report: report)
            } catch  where submission && error.isTransient {
                let kept = submissions.keep(.init(id: song.id, title: song.title, time: time))
                report(.warning("music: scrobble of \(song.title) failed: \(error); \(kept)"))
            } catch {
                report(.warning("music: scrobble of \(song.title) failed: \(error)"))
            }
        }
    }

    /// Tells an OpenSubsonic server that offers `playbackReport` what the player truly does: `starting`
    /// until the first sample of a stream (a start, skip or seek) is heard, `playing` while audible,
    /// `paused` while paused, interrupted or not heard (the server slow, the card away), `stopped` at
    /// the end; again at each track change. A server without the extension is asked once and never sent a report.
    /// A report the server did not take for a passing reason (the network, a 5xx; or the extension
    /// check that failed so) is sent again, with the position then, 1 s later and then at doubling
    /// intervals up to a minute, until one goes through or a newer one is sent: a lost `paused`
    /// left the server showing the song playing on for as long as Baton was paused. One it refused
    /// (an error answer) is not: sent again at each look, it was a request a second all night.
    /// Its failure is told once.
    private func reportPlayback(_ playback: SubsonicClient.PlaybackState) {
        guard let now = nowPlaying() else { return }
        reportPlayback(playback, index: now.index, song: now.song, seconds: now.seconds)
    }

    private func reportPlayback(_ playback: SubsonicClient.PlaybackState, index: Int, song: Song, seconds: Double) {
        let same = state.reported?.state == playback && state.reported?.index == index
        let failed = state.reportNumber > 0 && failedReport.load(ordering: .acquiring) == state.reportNumber
        if same {
            guard failed, monotonicNanoseconds() >= state.resendAt else { return }
            state.resends += 1
        } else {
            state.resends = 0
        }
        state.resendAt = monotonicNanoseconds() + min(60, 1 << min(state.resends, 6)) * 1_000_000_000
        state.reported = (playback, index)
        state.reportNumber += 1
        let number = state.reportNumber
        let server = self.server
        let report = self.report
        let ms = Int64(seconds * 1000)
        reports.run { [self] in
            let client = server.clientNow
            do throws(SubsonicError) {
                guard try client.supportsPlaybackReport() else { return }
                try client.reportPlayback(id: song.id, state: playback, positionMilliseconds: ms)
            } catch {
                if error.isTransient { failedReport.store(number, ordering: .releasing) }
                guard !client.isStopping, !same else { return }  // its extension check, at the stop; told already
                report(
                    .warning(
                        "music: reportPlayback (\(playback.rawValue)) of \(song.title) failed: \(error)"
                            + (playback == .stopped || !error.isTransient ? "" : "; sent again shortly")))
            }
        }
    }

    /// A change of the queue.
    public enum QueueEdit: Sendable {
        /// Songs (each with its gain) at the end, or right after the track heard now (`next`).
        case add([(song: Song, gain: Float)], next: Bool)
        case remove(Int)
        case move(from: Int, to: Int)
        /// Every track but the one heard now.
        case clear
    }

    /// What the control plane must do after an edit: nothing (the edit is beyond what is being heard
    /// and written, and the streamer picks it up at the next joint), or play on from `index`,
    /// `offset` seconds in, in fresh slots (the edit touched the track heard now or the one already
    /// written ahead into the rings).
    public enum EditOutcome: Sendable, Equatable {
        case playsOn
        case restart(index: Int, offset: Double)
        /// The track heard now was removed, and it was the last: the queue has played out. The
        /// stream goes on past its end (`setStartPastTheEnd`): the source ends as a queue played to
        /// its end does.
        case ends
    }

    /// Why an edit cannot be made.
    public struct EditProblem: Error, Sendable { public let message: String }

    /// Edits the queue. The tracks from the one heard now to the one being written must stay
    /// together and in order, or the stream restarts: at the track heard now, where it is heard, if
    /// it is still there, else at the track that took its place — or, when there is none (the last
    /// track, heard now, removed), the queue ends. Under the control plane's lock.
    public func edit(_ change: QueueEdit) -> Result<EditOutcome, EditProblem> {
        let before = queue.entries
        let range = 0...(before.count - 1)
        let now = streamer.withLock { $0 }?.nowPlaying()
        let audible = now?.key ?? state.startKey
        let writing = streamer.withLock { $0 }?.writingKey ?? audible
        let a = before.firstIndex { $0.key == audible } ?? 0
        switch change {
        case .remove(let i), .move(let i, _):
            guard range.contains(i) else {
                return .failure(EditProblem(message: "index \(i) is not in the queue (0...\(before.count - 1))"))
            }
            if case .remove = change, before.count == 1 {
                return .failure(EditProblem(message: "the queue has only this track: stop the music instead"))
            }
            if case .move(_, let to) = change, !range.contains(to) {
                return .failure(EditProblem(message: "to \(to) is not a place in the queue (0...\(before.count - 1))"))
            }
        case .add(let songs, _):
            guard !songs.isEmpty else { return .failure(EditProblem(message: "no songs to add")) }
        case .clear: break
        }
        let handedOut = queue.edit { entries, make in
            switch change {
            case .add(let songs, let next):
                let new = songs.map { make($0.song, $0.gain) }
                entries.insert(contentsOf: new, at: next ? a + 1 : entries.count)
            case .remove(let i): entries.remove(at: i)
            case .move(let from, let to): entries.insert(entries.remove(at: from), at: to)
            case .clear: entries = [before[a]]
            }
        }
        // From the track heard to the one being written, or the one the streamer took next (under
        // the queue's lock, as the edit was made: it may not have begun writing it yet).
        let w = [writing, handedOut].compactMap { key in before.firstIndex { $0.key == key } }.reduce(a, max)
        let run = before[a...w].map(\.key)
        let after = queue.entries.map(\.key)
        // A streamer that already found nothing after the entry it looked at last (written, or
        // failed) has ended: what comes after it now would never be played (and the queue,
        // played to its end, dropped).
        let ended = queue.endedAfter.map { after.last != $0 } ?? false
        if !ended, let start = after.firstIndex(of: audible), start + run.count <= after.count,
            Array(after[start..<(start + run.count)]) == run
        {
            return .success(.playsOn)
        }
        if let index = after.firstIndex(of: audible) {
            // Nothing heard of it yet (a stream starting, or a seek's waiting for slots): where that
            // start was to be — it restarted the seek's track from its beginning.
            return .success(.restart(index: index, offset: now?.seconds ?? state.startOffset))
        }
        // The track heard now was removed. The one that took its place plays from its start; none
        // did when it was the last: the queue has played out. It restarted the track before it.
        guard a < after.count else { return .success(.ends) }
        return .success(.restart(index: a, offset: 0))
    }
}
