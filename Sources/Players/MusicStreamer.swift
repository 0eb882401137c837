import AudioCore
import Engine
import Media
import OSThread
import Subsonic
import Synchronization

/// Streams a queue of Subsonic songs into a music source's slots: for each track a network thread
/// fills a `StreamBuffer` (reconnecting with `Range` after a transient failure), and this streamer's
/// own thread decodes, maps channels, resamples to each zone's rate and writes into the slot rings,
/// waiting while they are full. Consecutive tracks go into the same rings with nothing in between:
/// gapless. When the source is paused or interrupted the output threads stop reading, the rings
/// fill, this thread waits, the byte buffer fills, and the network thread waits: memory per stream
/// stays bounded (rings of 0.5 s per zone + 256 KiB of bytes).
///
/// Thread: created and cancelled by the control thread; runs on its own thread; never takes the
/// daemon lock. It owns its slots once started and releases them when it ends after a cancel.
final class MusicStreamer: @unchecked Sendable {
    // @unchecked: `targets` is immutable after init; the queue has its own lock; mutable state is in
    // `progress` (a mutex) and `cancelled` (an atomic).
    struct Progress: Sendable {
        /// Where each started track (by queue key) begins, in frames of the first zone's slot, and
        /// the track position (seconds) of that frame: 0, or where a seek or a restored queue started it.
        /// A track that fails before its first frame (the server refuses it, the decoder cannot read
        /// it) is taken out again: it is never heard, and must not be shown as playing.
        var trackStarts: [(key: Int, frame: Int, offset: Double)] = []
        var error: String?
        /// The queue entry (key) of the track `error` is about.
        var errorKey: Int?
        var retrying: String?
        /// The queue played to its end (not cancelled, not given up).
        var finished = false
        /// The queue stopped where it was (it can be resumed from there), and why, as a sentence:
        /// the server stayed unreachable past the retry limit, or tracks in a row could not be played.
        var gaveUp: String?
        /// Where the queue is to go on from, once what was written before has been heard
        /// (`MusicPlayer.placeToSave`), when it stopped at a track nothing of which was written (the
        /// last, refused; the first of those refused in a row; the one the server was given up on):
        /// that track, from where it was to start (a seek's position, else 0).
        var stoppedBefore: (key: Int, seconds: Double)?
    }

    /// The queue, walked by key: after each track the streamer plays the entry that follows it now,
    /// so edits of the queue beyond the track being written take effect without a restart.
    let queue: MusicQueue
    let firstKey: Int
    /// Its token for the queue's note of where it ended (`MusicQueue.streamStarts`).
    let stream: Int
    /// Where in the first track to start (seconds): decoded frames before it are skipped.
    let startOffset: Double
    private let targets: [SourceOutput]
    /// The client to ask the server with now (`MusicPlayer.Server.clientNow`): taken again at each
    /// request, so a password changed meanwhile is used from the next one on.
    private let client: @Sendable () -> SubsonicClient
    private let retryLimit: Duration
    private let report: SourceReporter
    /// Called on the streamer's thread when `nextLook` may have come closer: a track began to be
    /// written (its start is now known), the queue ended or gave up.
    private let changed: @Sendable () -> Void
    private let cancelled = Atomic<Bool>(false)
    /// Set with `cancelled`: the parent of each fetch's own stop flag, so a transfer waiting on a
    /// server that hangs ends within about a second.
    private let stopFetches = StopFlag()
    /// Set by whichever comes second of "the thread ended" and "cancel was called" (see `cancel`).
    private let ended = Atomic<Bool>(false)
    private let progressState = Mutex(Progress())
    private let currentBuffer = Mutex<StreamBuffer?>(nil)
    /// The streamer thread sleeps here while a ring is full; `cancel` posts it.
    private let roomOrCancel = Semaphore()

    init(
        queue: MusicQueue, startAt key: Int, offset: Double = 0, targets: [SourceOutput],
        client: @escaping @Sendable () -> SubsonicClient, retryLimit: Duration, report: @escaping SourceReporter,
        changed: @escaping @Sendable () -> Void = {}
    ) {
        self.queue = queue
        firstKey = key
        stream = queue.streamStarts()
        startOffset = max(0, offset)
        self.targets = targets
        self.client = client
        self.retryLimit = retryLimit
        self.report = report
        self.changed = changed
    }

    var progress: Progress { progressState.withLock { $0 } }

    /// True once every slot played the queue's last frame, or the stream, past the queue's end
    /// (`MusicPlayer.setStartPastTheEnd`), ended with no track: nothing to play, paused or not.
    /// Any thread.
    var isDrained: Bool {
        if allDrained(targets) { return true }
        let p = progress
        return p.finished && p.trackStarts.isEmpty
    }

    /// The track audible now in the first zone and the position in it (seconds): the frames the
    /// mixer took, less those still in the device's buffer (`SourceOutput.heardFrames`); and where
    /// this stream began that track (`from`: 0, or where a seek or a restored queue started it).
    func nowPlaying() -> (key: Int, seconds: Double, from: Double)? {
        guard let first = targets.first, let consumed = heardInFirstZone(targets) else { return nil }
        let starts = progress.trackStarts
        guard let current = starts.last(where: { $0.frame <= consumed }) ?? starts.first else { return nil }
        return (
            current.key, current.offset + Double(max(0, consumed - current.frame)) / Double(first.rate),
            current.offset
        )
    }

    /// Nanoseconds until the monitor should look at this stream again: once the queue is all
    /// written (or given up), when its last frame will have been played; otherwise when the next
    /// track begins in the first zone, or nil while that is not known yet (the streamer calls
    /// `changed` when it is: a track's start is known at least a quarter second, half a slot ring,
    /// before it is heard). "Begins" by the measure `nowPlaying` uses (`heardFrames`), so the
    /// tick that is due finds the new track. Any thread.
    var nextLook: Int? {
        let p = progress
        if p.finished || p.gaveUp != nil { return nanosecondsToDrain(targets) }
        guard let first = targets.first, let heard = heardInFirstZone(targets) else { return nil }
        guard let next = p.trackStarts.first(where: { $0.frame > heard }) else { return nil }
        return (next.frame - heard) * 1_000_000_000 / max(1, first.rate) + 1_000_000
    }

    /// Every zone's slot paused and taken from no more (`allHeldStill`): nothing to look at until a
    /// resume. Any thread.
    var isHeldStill: Bool { allHeldStill(targets) }

    func start() { OSThread.detach(name: "stream") { [self] in run() } }

    /// Stops streaming. Returns true when the thread has already ended, so the caller releases the
    /// slots; false when the thread still runs and will release them itself. Control thread.
    func cancel() -> Bool {
        cancelled.store(true, ordering: .releasing)
        stopFetches.set()
        roomOrCancel.post()
        currentBuffer.withLock { $0?.cancel() }
        return ended.exchange(true, ordering: .acquiringAndReleasing)
    }

    private var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// One track's transfer: its byte buffer (which also carries the answer's content type), its
    /// network thread, and what ends that thread's transfer and its wait between attempts.
    private struct Fetch: Sendable {
        let key: Int
        let song: Song
        let buffer: StreamBuffer
        let gaveUp: GaveUp
        let stop: StopFlag
        let wake: Semaphore
        let thread: OSThread
    }

    private func startFetch(_ entry: MusicQueue.Entry) -> Fetch {
        let buffer = StreamBuffer()
        let gaveUp = GaveUp()
        let stop = StopFlag(parent: stopFetches)
        let wake = Semaphore()
        let song = entry.song
        return Fetch(
            key: entry.key, song: song, buffer: buffer, gaveUp: gaveUp, stop: stop, wake: wake,
            thread: OSThread.start(name: "fetch") { [self, key = entry.key] in
                self.fetch(song, key: key, into: buffer, gaveUp: gaveUp, stop: stop, wake: wake)
            })
    }

    /// The key of the track being written into the rings now (the last one started). Any thread.
    var writingKey: Int? { progress.trackStarts.last?.key }

    /// After this many tracks in a row that could not be played (nothing of them heard), the queue
    /// stops as if the server had been given up on: with a server that refuses every track (a
    /// password changed, the library moved) the queue would otherwise race through to its end.
    static let failuresInARow = 3

    /// After this many HTTP 500 or 501 answers in a row for a song, from a server that answers its
    /// API, the song fails (the queue goes on) instead of being retried up to `retryLimit`.
    static let requestFailureAttempts = 3

    /// Set by a fetch's network thread when it gave up on the server (transient failures past
    /// `retryLimit`), as opposed to the server refusing this track. Any thread.
    private final class GaveUp: Sendable {
        private let flag = Atomic<Bool>(false)
        var value: Bool { flag.load(ordering: .acquiring) }
        func set() { flag.store(true, ordering: .releasing) }
    }

    /// Ends a fetch: its transfer stops within about a second, also on a server that hangs. A
    /// cancelled streamer does not wait for it: its slots are let go of at once (a run of skips
    /// on a hung server held one slot per skip for the 20 s stall timeout, and the ninth took the
    /// doorbell's), and the thread is joined on a thread of its own.
    private func end(_ fetch: Fetch) {
        fetch.stop.set()
        fetch.buffer.cancel()
        fetch.wake.post()
        if isCancelled {
            OSThread.detach(name: "fetch-end") { fetch.thread.join() }
        } else {
            fetch.thread.join()
        }
    }

    private func run() {
        var written = 0  // frames written into the first zone's slot
        var failedInARow = 0
        // The first of the tracks refused in a row, nothing of them written: where the queue goes on.
        var firstRefusedInARow: (key: Int, seconds: Double)?
        var entry = queue.entry(key: firstKey)
        var next: Fetch? = nil
        // The last entry streamed could not be played (why), when it could not.
        var lastFailure: String?
        // Where in the track to start: the seek's or the restored queue's place in the first
        // track only. Taken for every pass at the first track's key, a track moved after the ones
        // that followed it (an edit that plays on) was heard again from that place, its start lost.
        var firstPass = true
        while let current = entry, !isCancelled {
            let song = current.song
            let offset = firstPass ? startOffset : 0
            firstPass = false
            progressState.withLock {
                $0.trackStarts.append((current.key, written, offset))
                $0.stoppedBefore = nil  // a refused track's, until a later one starts
            }
            changed()
            // The track fetched ahead is used only if it is still the one that comes next, and did
            // not fail meanwhile (it gave up on a server away while the music was paused, which is
            // back now: the queue stopped there at the resume).
            let fetch: Fetch
            if let ahead = next, ahead.key == current.key, ahead.buffer.networkFailure == nil {
                fetch = ahead
            } else {
                if let ahead = next { end(ahead) }
                fetch = startFetch(current)
            }
            next = nil
            // A cancel that came before this saw no buffer to cancel: it is cancelled here (on a
            // server that hangs, the reader waited until the transfer saw its stop flag, about a
            // second, holding the stream's slots meanwhile).
            currentBuffer.withLock {
                $0 = fetch.buffer
                if isCancelled { fetch.buffer.cancel() }
            }
            var delivered = 0
            var reached = 0.0  // where in the track decoding got to (seconds)
            var failed = false
            do {
                try play(fetch, skipSeconds: offset, gain: current.gain, delivered: &delivered, reached: &reached) {
                    // Once this track's bytes are all here, fetch the next one, so it is ready at the joint.
                    if next == nil, let after = queue.entry(after: current.key) { next = startFetch(after) }
                }
            } catch {
                failed = !isCancelled
                if failed && !fetch.gaveUp.value {
                    // The server's refusal (not audio, an error answer, 404) rather than what the
                    // decoder made of the nothing that came.
                    let why = fetch.buffer.networkFailure.map(\.message) ?? "\(error)"
                    report(.trackFailed(Self.failure(song, why: why, delivered: delivered, reached: reached)))
                    progressState.withLock {
                        $0.error = "\(song.title): \(why)"
                        $0.errorKey = current.key
                    }
                }
            }
            written += delivered  // what was written is heard, the part of a track that failed midway too
            // Why the queue stops here, if it does (resumable from what was heard): the server was
            // given up on (the next track would fail the same way), or too many tracks in a row
            // could not be played.
            var stop: String?
            // Where it goes on from once all written before is heard, when it stops at a track
            // nothing of which was written: that track's start. Without it the place saved was the
            // one heard when the source was released, before the device had played its last
            // frames: near the end of the track before, downloaded again to be skipped at a
            // resume, and announced again.
            var goOnAt: (key: Int, seconds: Double)?
            if failed, fetch.gaveUp.value, let failure = fetch.buffer.networkFailure {
                report(
                    .error(
                        "music: \(song.title) (\(song.id)): the server stayed unreachable past retry.limit (\(failure.message)); stopping the queue here"
                    ))
                stop = "the server stayed unreachable past retry.limit (\(song.title): \(failure.message))"
                if delivered == 0 {
                    progressState.withLock { p in
                        if p.trackStarts.last?.key == current.key { p.trackStarts.removeLast() }
                    }
                    goOnAt = (current.key, offset)
                }
            } else if failed && delivered == 0 {
                // Nothing of it was written: it was never heard (where the queue stopped on the
                // server, above, stays: that is where music/resume goes on).
                let error = progressState.withLock { p in
                    if p.trackStarts.last?.key == current.key { p.trackStarts.removeLast() }
                    return p.error
                }
                failedInARow += 1
                if failedInARow == 1 { firstRefusedInARow = (current.key, offset) }
                if failedInARow >= Self.failuresInARow {
                    report(
                        .error(
                            "music: \(Self.failuresInARow) tracks in a row could not be played; stopping the queue here"
                        ))
                    stop =
                        "\(Self.failuresInARow) tracks in a row could not be played (the last, \(error ?? song.title))"
                    goOnAt = firstRefusedInARow
                }
            } else {
                failedInARow = 0
                firstRefusedInARow = nil
            }
            if let stop {
                progressState.withLock {
                    $0.gaveUp = stop
                    $0.stoppedBefore = goOnAt
                }
                end(fetch)
                break
            }
            lastFailure = failed ? progressState.withLock { $0.error } ?? song.title : nil
            // Refused with nothing written: the queue goes on from the first of those refused in a
            // row, should it end here. It was this one's: with the last two refused, `music/resume`
            // went on from the last, and the one before it, never heard, was lost.
            if failed && delivered == 0 {
                progressState.withLock { $0.stoppedBefore = firstRefusedInARow ?? (current.key, offset) }
            }
            end(fetch)
            entry = isCancelled ? nil : queue.streamEntry(after: current.key, stream: stream)
        }
        if let next { end(next) }
        progressState.withLock { p in
            // A queue whose last track could not be played (or broke off) did not play to its end:
            // it stops there, resumable from what was heard. Taken as played out, its saved queue was
            // dropped — after a password change, `music/resume` of a queue at its last track found
            // none.
            if !isCancelled && p.gaveUp == nil, let lastFailure {
                p.gaveUp = "the last track could not be played (\(lastFailure))"
            }
            p.finished = !isCancelled && p.gaveUp == nil
        }
        changed()
        if ended.exchange(true, ordering: .acquiringAndReleasing) {
            // cancel() came first and left the slots to this thread.
            for t in targets { t.mixer.release(t.slot) }
        } else {
            for t in targets { t.slot.finish() }
        }
    }

    /// Streams one fetched song into the rings; `delivered` is the frames written (first zone), kept
    /// when it throws midway. The first `skipSeconds` of decoded audio are dropped (a seek: exact to
    /// the decoded frame), and every sample is scaled by `gain` (ReplayGain). `downloaded` is
    /// called (on this thread) once the song's transfer has completed.
    private func play(
        _ fetch: Fetch, skipSeconds: Double, gain: Float, delivered: inout Int, reached: inout Double,
        downloaded: () -> Void
    ) throws {
        let buffer = fetch.buffer
        let song = fetch.song
        // The answer's content type comes with its first bytes (or the end of the transfer).
        let type = try buffer.waitForContentType()
        let decoder = try makeDecoder(type, buffer, song.title)
        let renderer = try TrackRenderer(
            decoder: decoder,
            outputs: targets.map {
                TrackRenderer.Output(channels: $0.channels, rate: $0.rate, resampler: $0.resampler)
            }, skipSeconds: skipSeconds, gain: gain)
        defer {
            delivered = renderer.framesDelivered.first ?? 0
            reached = Double(renderer.position) / Double(max(1, renderer.decoder.rate))
        }
        while !isCancelled {
            let more: Bool
            do {
                more = try renderer.step(afterRead: { if buffer.isComplete { downloaded() } }) { k, samples in
                    targets[k].write(samples, among: targets, waking: roomOrCancel) { isCancelled }
                }
            } catch  where buffer.takeRestart() {
                // The server sent the song again from its start (a new transcode, whose bytes do
                // not follow the old ones): decoded again, from where this one was.
                let at = renderer.framesDecoded
                try renderer.restart(with: try makeDecoder(type, buffer, song.title))
                report(
                    .warning(
                        "music: \(song.title): the server sent the stream again from its start; decoding it again to frame \(at)"
                    ))
                continue
            }
            if !more { break }
        }
        // The damage of the decoders a restart replaced too (what they gave was heard).
        if !isCancelled, let damage = renderer.damage {
            report(.damaged("\(song.title) (\(song.id)): damaged audio: \(damage); it played on"))
        }
        // A transcode the server gave up on midway can end its answer in order (a chunked answer
        // closed cleanly): the decoder finds an end, and the track read "played" though the rest
        // of it never came, without a word. Against the song's duration (whole seconds, and not
        // always exact: a margin of 3 s or 5 %).
        if !isCancelled, let duration = song.duration, duration > 0 {
            let came = Double(renderer.framesDecoded) / Double(max(1, renderer.decoder.rate))
            if Double(duration) - came > max(3, 0.05 * Double(duration)) {
                report(
                    .damaged(
                        "\(song.title) (\(song.id)): ended early: \(Int(came)) of its \(duration) s came (the server's stream ended there); the queue goes on"
                    ))
            }
        }
    }

    /// Why a track stopped, for its `stream-error`: `could not play TITLE (ID): why` when nothing of
    /// it was heard, `stopped TITLE (ID) at 3:02: why` when some was (a decode error midway read as
    /// if the track never started). `reached`: where decoding got to, in seconds.
    static func failure(_ song: Song, why: String, delivered: Int, reached: Double) -> String {
        guard delivered > 0 else { return "could not play \(song.title) (\(song.id)): \(why)" }
        return "stopped \(song.title) (\(song.id)) at \(clock(reached)): \(why)"
    }

    /// Seconds as `3:02` (`1:02:03` past an hour).
    static func clock(_ seconds: Double) -> String {
        let whole = Int(max(0, seconds.isFinite ? seconds : 0))
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return whole >= 3600
            ? "\(whole / 3600):\(two(whole / 60 % 60)):\(two(whole % 60))" : "\(whole / 60):\(two(whole % 60))"
    }

    /// A decoder of the stream in `buffer`; made again when the server sent the stream again from
    /// its start while it was being made (a connection that broke within the first few kB: the
    /// headers are then the new stream's).
    private func makeDecoder(_ type: String?, _ buffer: StreamBuffer, _ name: String) throws -> any AudioDecoder {
        while true {
            let made: Result<any AudioDecoder, any Error> = Result {
                try StreamDecoders.make(contentType: type, source: buffer, name: name)
            }
            if case .failure = made, buffer.takeRestart() { continue }
            return try made.get()
        }
    }

    /// The network thread: streams the song into `buffer`, resuming after transient failures with
    /// `Range` (or by skipping what was already received when the server answers from the start),
    /// until `retryLimit` passes without progress.
    private func fetch(
        _ song: Song, key: Int, into buffer: StreamBuffer, gaveUp: GaveUp, stop: StopFlag, wake: Semaphore
    ) {
        // `retrying` (the status's "buffering") is the track being written's: a fetch ahead that
        // retries while the track before it is heard is not said as buffering.
        func retrying(_ why: String?) {
            progressState.withLock { if $0.trackStarts.last?.key == key { $0.retrying = why } }
        }
        var received: Int64 = 0
        // Since when no byte came (the fetch's start, else the last byte). It used to be the first
        // failure, so a server that held the connection without sending (a failure only after the
        // 20 s stall timeout) was given a retry.limit more after that.
        var progressAt = ContinuousClock.now
        // The furthest the stream got (bytes): only bytes past it are progress. Bytes skipped (a
        // server that ignores Range sends the start again) or sent again (a new transcode) are not:
        // a server that broke at the same byte every time was retried for ever, never given up on.
        var furthest: Int64 = 0
        var backoff = Duration.milliseconds(250)
        // HTTP 500/501 answers in a row (`isRequestFailure`).
        var requestFailures = 0
        // The client of the fetch's first request, and its format: a client made again meanwhile
        // (a new password) is used for the requests after it only if it streams the same (a format
        // changed by a reload would send other bytes than those resumed from).
        let first = self.client()
        let transcoded = first.config.format != "raw"
        while !buffer.isCancelled {
            let now = self.client()
            let client =
                now.config.format == first.config.format && now.config.maxBitRate == first.config.maxBitRate
                ? now : first
            // A 206 from further on than asked: the bytes between are not to be had from it.
            var gap: Int64?
            let furthestBefore = furthest
            do {
                let request = try client.streamRequest(id: song.id, offsetBytes: received)
                var skip: Int64 = 0
                let answer = try client.stream(
                    request, stop: stop,
                    onResponse: { r in
                        // A server that ignores Range answers from byte 0. The original file: skip
                        // what the decoder already has. A transcode (any format but `raw`) is a new
                        // encode, whose bytes do not follow the old ones (Ogg serial numbers, page
                        // bounds): the decoder starts it again from its first byte and drops the
                        // frames it already gave. A 206 is from where its `Content-Range` says,
                        // which may be before what was asked (those bytes are had: skipped — they
                        // went to the decoder twice, a seam in the music and the position off).
                        if r.status == 206 {
                            if r.startOffset <= received {
                                skip = received - r.startOffset
                            } else {
                                gap = r.startOffset
                            }
                        } else if received == 0 || !transcoded {
                            skip = received
                        } else {
                            buffer.restart()
                            received = 0
                        }
                        buffer.setContentType(r.contentType)
                    },
                    onData: { chunk in
                        if gap != nil { return false }
                        var bytes = chunk
                        if skip > 0 {
                            let drop = Int(min(skip, Int64(bytes.count)))
                            skip -= Int64(drop)
                            bytes = UnsafeRawBufferPointer(rebasing: bytes[drop...])
                        }
                        guard buffer.write(bytes) else { return false }
                        received += Int64(bytes.count)
                        if received > furthest {
                            furthest = received
                            progressAt = .now
                            retrying(nil)
                        }
                        return true
                    })
                // A 206 that ends before the file does, as its `Content-Range` says (a server or a
                // proxy that answers a range in parts): the rest is asked for, from where it ended.
                // It was taken as the song's end — the track ended early, the queue went on.
                if answer.status == 206, let total = answer.totalLength, received < total {
                    guard furthest > furthestBefore else {
                        retrying(nil)
                        buffer.fail(
                            ByteSourceError(
                                message: "the server's answer from byte \(answer.startOffset) ended at byte "
                                    + "\(received) of \(total) with nothing new"))
                        return
                    }
                    backoff = .milliseconds(250)
                    continue
                }
                buffer.finish()
                return
            } catch {
                // Ended (a skip, a seek, the stream's end): the transfer stopped; so does the reader.
                if stop.isSet { buffer.cancel() }
                if buffer.isCancelled { return }
                if let gap {
                    retrying(nil)
                    buffer.fail(
                        ByteSourceError(
                            message: "the server answered from byte \(gap) when asked from byte \(received)"))
                    return
                }
                // A 404 from a proxy whose server behind it is down (Traefik before a restarting
                // Navidrome) is waited out like a refused connection; one from a server that
                // answers its API is the song's absence. Taken as that, a ten-second restart
                // failed this track and the next ones at once, and stopped the queue.
                // A 500 or 501 for this song, again and again, from a server that answers its API:
                // a file it cannot read or transcode. The song fails and the queue goes on. Retried
                // up to retry.limit as a server away, each bad file was two minutes of silence
                // shown as buffering, and thirty warnings.
                requestFailures = error.isRequestFailure ? requestFailures + 1 : 0
                if requestFailures >= Self.requestFailureAttempts, client.answersAPI() {
                    retrying(nil)
                    buffer.fail(
                        ByteSourceError(
                            message: "\(error) (\(requestFailures) times in a row, from a server that answers its API)")
                    )
                    return
                }
                let transient = error.isTransient || (error.isNotFound && !client.answersAPI())
                guard transient, ContinuousClock.now - progressAt < retryLimit else {
                    // Before the failure the reader sees: the server is given up on — unless it
                    // was a 5xx for this song from a server that answers its API (a file it cannot
                    // read or transcode): then the song fails and the queue goes on. The queue
                    // stopped, "the server stayed unreachable", for one bad file.
                    if transient, !(error.isServerError && client.answersAPI()) { gaveUp.set() }
                    retrying(nil)
                    buffer.fail(ByteSourceError(message: "\(error)"))
                    return
                }
                retrying("\(error)")
                report(.warning("music: \(song.title): \(error); retrying at byte \(received)"))
                // A transfer that brought new bytes before it broke starts the waits over: a long
                // track whose connection a proxy closed at each pause waited 4 s before every
                // reconnect from the fifth on, longer than its buffer lasts (the music stopped).
                if furthest > furthestBefore { backoff = .milliseconds(250) }
                _ = wake.wait(nanoseconds: backoff.wholeNanoseconds)  // or until ended
                backoff = min(backoff * 2, .seconds(4))
            }
        }
    }
}
