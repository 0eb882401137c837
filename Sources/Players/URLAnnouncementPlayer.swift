import AudioCore
import Curl
import Engine
import Glibc
import Media
import OSThread
import Synchronization

/// An announcement played from a URL as it downloads (Home Assistant's TTS hands out speech as
/// `http://ha.local:8123/api/tts_proxy/….mp3`): a network thread fetches the file into a bounded
/// `StreamBuffer`, and the player's own thread decodes it by its Content-Type (MP3, Ogg Opus, WAV,
/// FLAC, or sniffed), maps channels, resamples per zone (`TrackRenderer`) and writes into the slot
/// rings, waiting while they are full, so the first sample is heard long before the last byte came.
///
/// `open()` runs before the request reaches the arbiter: it starts both threads and waits until the
/// decoder has read the file's header, so a refused status, a file too large by its Content-Length,
/// and bytes that are no audio fail the request itself (``Failure``). What goes wrong later (the
/// transfer breaks, the file grows past `maxBytes`, the audio passes `maxSeconds`) ends the
/// announcement there, reported through `report`.
///
/// Threads: as `Source`; `open` on the request's thread (blocking, never under the control plane's
/// lock). The player thread never takes the control plane's lock; after a `stop` that came while it
/// still ran it releases its slots itself.
public final class URLAnnouncementPlayer: Source, @unchecked Sendable {
    // @unchecked: every mutable field is in `shared` (a mutex) or an atomic; the rest is `let`.

    /// The caps on one URL announcement.
    public struct Limits: Sendable, Equatable {
        /// The largest file fetched: a larger Content-Length fails `open`, a longer body ends the
        /// announcement at this many bytes.
        public var maxBytes: Int
        /// The longest the announcement plays; the rest is cut.
        public var maxSeconds: Double
        /// How long `open` waits for the server's answer and the audio's header.
        public var firstByteTimeout: Duration

        public init(maxBytes: Int, maxSeconds: Double, firstByteTimeout: Duration) {
            self.maxBytes = maxBytes
            self.maxSeconds = maxSeconds
            self.firstByteTimeout = firstByteTimeout
        }
    }

    /// Why `open` failed; the message names the URL (credentials hidden) and the cause.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public enum Kind: Sendable, Equatable {
            /// The server answered 404 or 410.
            case notFound
            /// The server answered another status than 200 (a redirect is not followed: the allowed
            /// hosts are checked on the URL given).
            case badStatus
            /// The server could not be reached, or did not answer in time.
            case unreachable
            /// The Content-Length is larger than `maxBytes`.
            case tooLarge
            /// The bytes are not audio Baton decodes.
            case undecodable
        }
        public var kind: Kind
        public var message: String
        public var description: String { message }
        public init(_ kind: Kind, _ message: String) {
            self.kind = kind
            self.message = message
        }
    }

    public let label: String
    /// The URL with credentials hidden, for messages.
    public let shownURL: String
    private let url: String
    private let limits: Limits
    /// Set by `stop`, or at batond's stop (its parent): the transfer ends at once instead of after
    /// its timeouts. A stopped announcement whose server had gone quiet kept its thread and its
    /// slots until the stall timeout (10–60 s): a few such filled a zone's eight slots.
    private let stopFlag: StopFlag
    private let report: SourceReporter
    /// Called on the player's thread once its slots are finished (it wrote its last frame, or gave
    /// up): `nextTick` came closer.
    private let changed: @Sendable () -> Void
    private let buffer = StreamBuffer()
    private let cancelled = Atomic<Bool>(false)
    /// Set by whichever comes second of "the player thread ended" and "stop was called".
    private let ended = Atomic<Bool>(false)
    private let opened = Semaphore()
    private let started = Semaphore()
    private struct Shared {
        /// Set once the header was read (success) or the request failed.
        var ready: Result<Void, Failure>?
        /// What the network thread knows went wrong, before the buffer fails.
        var fetchFailure: Failure?
        /// The slots, from `start`.
        var outputs: [SourceOutput]?
        /// Bytes of the body received so far.
        var bytesReceived = 0
        /// Why it ended before its end, once it has (`endedEarly`).
        var endedEarly: String?
        /// How long it waited, not paused, for its first frame after `start` (ns; a look adds at
        /// most 100 ms: a monitor held up is not the server's delay), and the last look (`tick`).
        var waitedForFirst = 0
        var lastLook: Int?
        /// The decoder wrote its first frame into the rings; it wrote its last (or gave up).
        var wrote = false
        var decoded = false
        /// Its slots finished (or released): what is in them is all it will play.
        var finished = false
    }
    private let shared = Mutex(Shared())

    /// `label`: what status shows (`url: tts_proxy/abc.mp3`).
    public init(
        url: String, label: String, limits: Limits, stop: StopFlag? = nil, report: @escaping SourceReporter,
        changed: @escaping @Sendable () -> Void = {}
    ) {
        self.url = url
        self.changed = changed
        self.label = label
        self.limits = limits
        stopFlag = StopFlag(parent: stop)
        self.report = report
        shownURL = URLRedaction.redact(url)
    }

    /// Starts the transfer and the decoder, and waits until the audio's header was read (or
    /// `firstByteTimeout` passed). Blocking; call once, before the player is admitted.
    public func open() throws(Failure) {
        OSThread.detach { [self] in run() }
        let deadline = ContinuousClock.now + limits.firstByteTimeout
        while true {
            if let ready = shared.withLock({ $0.ready }) {
                switch ready {
                case .success: return
                case .failure(let failure): throw failure
                }
            }
            if ContinuousClock.now >= deadline {
                _ = stop()
                throw Failure(
                    .unreachable,
                    "\(shownURL): no audio within \(limits.firstByteTimeout) (announce.first-byte-timeout)")
            }
            opened.wait(nanoseconds: 20_000_000)
        }
    }

    /// Bytes received so far. Any thread.
    public var bytesReceived: Int { shared.withLock { $0.bytesReceived } }
    public var endedEarly: String? { shared.withLock { $0.endedEarly } }

    /// Reports that it ended before its end, and keeps why for `played` — the first reason only
    /// (the monitor's cut and the decoder's own could cross). True when this one was.
    @discardableResult
    private func endEarly(_ why: String) -> Bool {
        let first = shared.withLock { s -> Bool in
            guard s.endedEarly == nil else { return false }
            s.endedEarly = why
            return true
        }
        if first { report(.streamEnded(why)) }
        return first
    }

    public func start(_ outputs: [SourceOutput]) {
        shared.withLock { $0.outputs = outputs }
        started.post()
    }

    /// How long the zones may wait for the announcement's audio — a server that sends slower than
    /// it plays, a byte now and then, so never stalled — before it is cut: the first byte's
    /// timeout, at least a second. Such a server held the zone, and the music it interrupted, for
    /// as long as the trickle lasted (hours, at a byte a second).
    var allowedWaitNanoseconds: Int { max(limits.firstByteTimeout.wholeNanoseconds, 1_000_000_000) }

    /// Cuts the announcement once its zones have waited `allowedWaitNanoseconds` for its audio: for
    /// its first frame (not paused), then the periods its rings ran dry while it played (the
    /// output's own count: not while paused, lost or behind, nor for what a device or a Snapcast
    /// buffer holds). Its decoder and transfer stop, and what it wrote plays out. Monitor thread.
    public func tick(audible: Bool) {
        let now = monotonicNanoseconds()
        let looked = shared.withLock { s -> (outputs: [SourceOutput], waited: Int)? in
            defer { s.lastLook = now }
            guard let outputs = s.outputs, !s.decoded, s.endedEarly == nil else { return nil }
            if !s.wrote, let last = s.lastLook, outputs.contains(where: { !$0.slot.isPauseRequested }) {
                s.waitedForFirst += min(now - last, 100_000_000)
            }
            return (outputs, s.waitedForFirst)
        }
        guard let (outputs, waitedForFirst) = looked, !isCancelled else { return }
        let starved =
            outputs.map { $0.slot.starvedPeriods * $0.mixer.periodFrames * 1_000_000_000 / max(1, $0.rate) }.max()
            ?? 0
        let waited = waitedForFirst + starved
        guard waited > allowedWaitNanoseconds else { return }
        let tenths = waited / 100_000_000
        guard
            endEarly(
                "\(shownURL): the server sends it slower than it plays (its zones waited \(tenths / 10).\(tenths % 10) s "
                    + "for it; announce.first-byte-timeout)")
        else { return }
        buffer.cancel()  // the decoder's wait for bytes ends; what it wrote plays out
        stopFlag.set()  // and the transfer's, at libcurl's next progress call (within a second)
    }

    public func stop() -> Bool {
        cancelled.store(true, ordering: .releasing)
        stopFlag.set()
        buffer.cancel()
        started.post()
        return ended.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// While it decodes, every 50 ms: the cut counts the zones' wait for its audio from looks at
    /// most 100 ms apart. Once its slots are finished (all written, or it gave up: after its
    /// transfer ended, up to a second after a cut): when its last frame will have been played, so
    /// it is released within about a millisecond of it. It used to be the default 5 ms all along:
    /// the monitor woke 200 times a second for as long as a URL played. Never while every slot is
    /// paused and still (`allHeldStill`: interrupted by a call): the zones wait for none of its
    /// audio, and the resume wakes the monitor. It looked 20 times a second for as long as a call
    /// went on. Under the control plane's lock.
    public var nextTick: Int? {
        let (outputs, finished) = shared.withLock { ($0.outputs, $0.finished) }
        guard let outputs, !allHeldStill(outputs) else { return nil }
        if !finished { return Self.lookWhileDecoding }
        return allDrained(outputs) ? nil : nanosecondsToDrain(outputs)
    }
    static let lookWhileDecoding = 50_000_000

    public var position: Double? { slotPosition(shared.withLock { $0.outputs } ?? []) }
    public var isDrained: Bool { allDrained(shared.withLock { $0.outputs } ?? []) }

    private var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    private func setReady(_ result: Result<Void, Failure>) {
        shared.withLock { if $0.ready == nil { $0.ready = result } }
        opened.post()
    }

    /// The player thread: the network thread, the decoder, then the rings.
    private func run() {
        let network = OSThread.start { [self] in fetch() }
        let decoded = decodeAll()
        buffer.cancel()
        // A server that sent all the audio may hold its connection open with more to come: the
        // transfer ends at libcurl's next progress call. (Only a decoder that knows where its audio
        // ends returns before the body does — WAV, at its data chunk's end, and the max-duration
        // cut; Ogg Opus, MP3 and FLAC read on to the body's end, and wait with it.)
        stopFlag.set()
        // The slots given, whether or not the decoder saw them: a stop between the grant and its
        // look left them to this thread, which released none of them (a slot a zone, until a restart).
        let outputs = shared.withLock { $0.outputs } ?? decoded
        // Finished before `ended` says so: once it does, a stop releases them at once, and one
        // finished after that could be the next source's (its end of stream marked: cut short).
        // And before the network thread is joined: the zones play out what was written meanwhile,
        // not silence under "playing" until the transfer's stall timeout (10 s by default).
        for t in outputs { t.slot.finish() }
        network.join()
        if ended.exchange(true, ordering: .acquiringAndReleasing) {
            // stop() came first and left the slots to this thread.
            for t in outputs { t.mixer.release(t.slot) }
        }
        shared.withLock { $0.finished = true }
        changed()
    }

    /// Opens the decoder (then `open` returns), waits for the slots, and streams into them. Returns
    /// the slots it was given (none when it never started).
    private func decodeAll() -> [SourceOutput] {
        let decoder: any AudioDecoder
        do {
            let type = try buffer.waitForContentType()
            decoder = try StreamDecoders.make(contentType: type, source: buffer, name: shownURL)
        } catch {
            let failure = shared.withLock { $0.fetchFailure } ?? Failure(.undecodable, "\(error)")
            setReady(.failure(failure))
            return []
        }
        setReady(.success(()))
        // Decoded, cut, stopped or never given slots: nothing more is written (the cut's count).
        defer { shared.withLock { $0.decoded = true } }
        var outputs: [SourceOutput]?
        while !isCancelled {
            outputs = shared.withLock { $0.outputs }
            if outputs != nil { break }
            started.wait(nanoseconds: 50_000_000)
        }
        guard let targets = outputs, !isCancelled, let first = targets.first else { return outputs ?? [] }
        let maxFrames = Int(limits.maxSeconds * Double(first.rate))
        do {
            let renderer = try TrackRenderer(
                decoder: decoder,
                outputs: targets.map {
                    TrackRenderer.Output(channels: $0.channels, rate: $0.rate, resampler: $0.resampler)
                })
            var wrote = false
            while !isCancelled {
                // Waits for room on `started`, which `stop` posts.
                let more = try renderer.step { k, samples in
                    targets[k].write(samples, among: targets, waking: started) { isCancelled }
                }
                if !wrote && (renderer.framesDelivered.first ?? 0) > 0 {
                    wrote = true
                    shared.withLock { $0.wrote = true }
                }
                if !more { break }
                if (renderer.framesDelivered.first ?? 0) >= maxFrames {
                    endEarly("\(shownURL): cut after \(limits.maxSeconds) s (announce.max-duration)")
                    break
                }
            }
            if !isCancelled, let damage = decoder.damage {
                report(.damaged("\(shownURL): damaged audio: \(damage); it played on"))
            }
            // A header and no audio (a WAV whose data is empty) "played" in silence, unsaid.
            if !isCancelled, (renderer.framesDelivered.first ?? 0) == 0 {
                // A transfer that broke after the header says so, not "no audio".
                let failure = shared.withLock { $0.fetchFailure }
                endEarly(failure?.message ?? "\(shownURL): it holds no audio (0 frames)")
            }
        } catch {
            // Cut by `tick` (it waited too long), which said why: `endEarly` keeps the first.
            if !isCancelled {
                let failure = shared.withLock { $0.fetchFailure }
                endEarly(failure?.message ?? "\(shownURL): \(error)")
            }
        }
        return targets
    }

    /// The network thread: one GET, no redirects, no retries (an announcement is short and late is
    /// worse than never); the body into the buffer, at most `maxBytes`.
    private func fetch() {
        var options = HTTPClient.Options()
        options.maxRedirects = 0
        options.connectTimeout = min(options.connectTimeout, limits.firstByteTimeout)
        // A server that stops sending (or never answers) frees this thread soon after `open` gave
        // up on it, instead of after libcurl's default 20 s.
        options.stallTimeout = max(limits.firstByteTimeout, .seconds(5))
        options.stop = stopFlag
        let client = HTTPClient(options: options)
        var refused: Failure?
        var overflow = false
        var received = 0
        let maxBytes = limits.maxBytes
        do {
            try client.get(
                url: url,
                onResponse: { head in
                    if head.status == 404 || head.status == 410 {
                        refused = Failure(.notFound, "\(shownURL): the server answered HTTP \(head.status)")
                    } else if (300..<400).contains(head.status) {
                        refused = Failure(
                            .badStatus,
                            "\(shownURL): the server answered HTTP \(head.status) (a redirect, not followed: "
                                + "announce.allow-url-hosts is checked on the URL given)")
                    } else if head.status != 200 {
                        refused = Failure(.badStatus, "\(shownURL): the server answered HTTP \(head.status)")
                    } else if let length = head.headers.contentLength, length > maxBytes {
                        refused = Failure(
                            .tooLarge,
                            "\(shownURL): the file is \(length) bytes; at most \(maxBytes) (announce.max-bytes)")
                    } else {
                        buffer.setContentType(head.headers["Content-Type"])
                    }
                    // Refused by its head: stopped now, not when (or if) its body comes.
                    return refused == nil
                },
                onData: { chunk in
                    if refused != nil { return false }
                    if received + chunk.count > maxBytes {
                        overflow = true
                        return false
                    }
                    guard buffer.write(chunk) else { return false }
                    received += chunk.count
                    shared.withLock { $0.bytesReceived = received }
                    return true
                })
            if let refused { throw refused }
            buffer.finish()
        } catch {
            if buffer.isCancelled { return }
            let failure =
                refused
                ?? (overflow
                    ? Failure(.tooLarge, "\(shownURL): the file is larger than \(maxBytes) bytes (announce.max-bytes)")
                    : Failure(.unreachable, "\(shownURL): \(error)"))
            shared.withLock { $0.fetchFailure = failure }
            buffer.fail(ByteSourceError(message: failure.message))
        }
    }
}
