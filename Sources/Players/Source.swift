import AudioCore
import Engine
import OSThread

/// One zone's share of a granted source: the slot it writes (claimed by the control plane, paused
/// or playing as the arbiter says), the zone's format, and the device that plays it.
public struct SourceOutput: Sendable {
    public let zone: String
    public let slot: SourceSlot
    public let mixer: ZoneMixer
    public let device: DeviceOutput
    public let rate: Int
    public let channels: Int
    /// The converter for audio at another rate: the zone's `resampler:`, or the class default.
    public let resampler: ResamplerKind

    public init(
        zone: String, slot: SourceSlot, mixer: ZoneMixer, device: DeviceOutput, rate: Int, channels: Int,
        resampler: ResamplerKind
    ) {
        self.zone = zone
        self.slot = slot
        self.mixer = mixer
        self.device = device
        self.rate = rate
        self.channels = channels
        self.resampler = resampler
    }

    /// Writes all of `samples` into the slot's ring, waiting for room; false when `cancelled()`.
    /// While the ring is full (nearly always once a stream plays) it sleeps until the output has
    /// taken it down to half full — with 500 ms rings 0.25 s of audio, then decoded in one go: a
    /// few wake-ups a second, not one per 20 ms block (which cost the music streamer 74 wake-ups a
    /// second and cold caches at each) — or until `wake` is posted (the cancel posts it). The other
    /// half is the margin against a late wake-up. "Full" counts what the output has read but not
    /// handed back yet (a zone that renders ahead keeps what the card has not played, see
    /// `FloatRing.release`), so the writer sleeps until there is room, not until there is less to
    /// read. A zone left behind among `outputs` (`isLeftBehind`) is not waited for: what does not
    /// fit is dropped (`drop`) until the zone `rejoins` its source's others. The producer's thread.
    public func write(
        _ samples: UnsafeBufferPointer<Float>, among outputs: [SourceOutput], waking wake: Semaphore,
        cancelled: () -> Bool
    ) -> Bool {
        let frameSamples = max(1, channels)
        if slot.isBehind && !rejoins(among: outputs) {
            drop(samples.count / frameSamples)
            return true
        }
        var offset = 0
        while offset < samples.count {
            if cancelled() { return false }
            let n = slot.write(samples.baseAddress! + offset, count: samples.count - offset)
            offset += n
            guard n == 0 else { continue }
            // Left behind, or behind and not in step yet (its output mixes none of it meanwhile:
            // waiting for room would wait for ever).
            if !takesFrames(among: outputs) {
                drop((samples.count - offset) / frameSamples)
                return true
            }
            wake.wait(nanoseconds: min(500_000_000, max(10_000_000, nanosecondsAboveHalf)))
        }
        return true
    }

    /// True while this zone's device is out and stopped taking frames (its card lost: a Snapcast
    /// zone takes them on, unheard) and another of `outputs` plays: the source goes on there, and
    /// its frames for this zone are dropped rather than waited for (a lost card stopped the music in
    /// every room). With every zone out the source waits, and goes on from where it was when one is
    /// back. Any thread.
    public func isLeftBehind(among outputs: some Sequence<SourceOutput>) -> Bool {
        isOut && outputs.contains { $0.device.isAvailable }
    }

    /// Whether the source's next frames go into this zone's ring now: not left behind
    /// (`isLeftBehind`), and in step or rejoining (`rejoins`, which first drops what a zone behind
    /// holds from before). Otherwise they are dropped for it, or wait with every zone out. The
    /// producer's thread.
    public func takesFrames(among outputs: some Sequence<SourceOutput>) -> Bool {
        !isLeftBehind(among: outputs) && (!slot.isBehind || rejoins(among: outputs))
    }

    /// True while this zone's device is out and stopped taking frames: its card lost (a Snapcast
    /// zone takes them on, unheard). Any thread.
    public var isOut: Bool { device.spec.stream == nil && !device.isAvailable }

    /// Whether this zone takes the source's frames with the others: neither left behind
    /// (`isLeftBehind`) nor behind since (`rejoins`). Any thread.
    public func isInStep(among outputs: some Sequence<SourceOutput>) -> Bool {
        !slot.isBehind && !isLeftBehind(among: outputs)
    }

    /// Drops `frames` of the source for this zone (it is left behind): counted as heard, so the
    /// position stays the source's, and the zone marked behind until it `rejoins`. Producer thread.
    public func drop(_ frames: Int) { slot.drop(frames) }

    /// Whether a zone that was behind plays the source's next frames in step with its other zones.
    /// Once its device is back: what its ring holds from before where a zone in step reads (played
    /// there while this one was out) is dropped by its output first (`SourceSlot.requestDiscard`;
    /// false until done); what the others have not played (all of them paused) is kept. Then it is
    /// made to end where the next frames go with silence — as far behind the others' read position
    /// as what it holds allows (positions in the source, so the order the producer writes its zones
    /// in does not matter) — once its ring has room for it (false until then: a zone that renders
    /// ahead gives room back only as its card plays), so each frame from here on is heard in every
    /// zone together. With no zone in step to follow it just goes on; while every zone is out it
    /// waits with the others (true, still behind). Producer thread.
    public func rejoins(among outputs: some Sequence<SourceOutput>) -> Bool {
        if !device.isAvailable { return !outputs.contains { $0.device.isAvailable } }
        if slot.isDiscardPending { return false }
        if let reference = outputs.first(where: { $0.device.isAvailable && !$0.slot.isBehind }) {
            let frameSamples = max(1, channels)
            // Where the reference reads, in this zone's source frames.
            let read = Int(
                (Double(reference.slot.framesConsumed + reference.slot.framesSkipped) * Double(rate)
                    / Double(max(1, reference.rate))).rounded())
            let held = slot.ring.readable / frameSamples
            if held > 0 && read - slot.ringStart > rate / 100 {
                slot.requestDiscard(upTo: read)
                return false
            }
            // Where the producer writes next (this zone's frames passed, held and dropped), less
            // where the reference reads and what this zone holds: the silence that puts the next
            // frames as far from now here as there — what this zone has passed beyond the reference.
            let gap = slot.framesConsumed + slot.framesSkipped - read
            if gap > slot.ring.writable / frameSamples { return false }
            if gap > 0 {
                let silence = [Float](repeating: 0, count: gap * frameSamples)
                let written = silence.withUnsafeBufferPointer { slot.write($0.baseAddress!, count: $0.count) }
                slot.wroteSilence(written / frameSamples)
            }
        }
        slot.isBehind = false
        return true
    }

    /// Seconds of the source this zone's ring holds. Any thread.
    var secondsInRing: Double { Double(slot.ring.readable / max(1, channels)) / Double(max(1, rate)) }

    /// Nanoseconds of audio the slot's ring holds above half full (0 at or below): how long the
    /// output takes to bring it down to half. What the output read but has not handed back counts
    /// as held. Any thread (a snapshot).
    var nanosecondsAboveHalf: Int {
        let ring = slot.ring
        let frames = max(0, ring.capacity - ring.writable - ring.capacity / 2) / max(1, channels)
        return frames * 1_000_000_000 / max(1, rate)
    }
}

/// What a source tells the control plane as it plays (published as events or logged there).
public enum SourceNotice: Sendable, Equatable {
    /// A new track became audible (server music): 0-based index, queue length, title.
    case track(index: Int, count: Int, title: String)
    /// The server accepted a scrobble ("now playing" or a submission).
    case scrobbled(submission: Bool, title: String)
    /// The source stopped for good (resumable from what was heard): the server stayed unreachable,
    /// or tracks in a row could not be played; the sentence says which.
    case gaveUp(String)
    /// A stream ended before its end, or was cut (a URL announcement past a cap, a broken
    /// transfer); the message says why. Published as a `stream-error` event.
    case streamEnded(String)
    /// A stream played to its end, but its decoder stepped over damage on the way (corrupt frames,
    /// lost pages: gaps or silence there); the sentence says how much and where the first was.
    /// Logged as a warning and published as a `stream-error` event.
    case damaged(String)
    /// A track of the queue could not be played (the server refused it, the decoder could not read
    /// it); the sentence names it and why. Logged as an error and published as a `stream-error`.
    case trackFailed(String)
    /// Something the user should see in the log.
    case warning(String)
    case error(String)
}

/// Receives a source's notices. Called on the monitor thread under the control plane's lock, or on a
/// source's own threads; must not block and must not call back into the source.
public typealias SourceReporter = @Sendable (SourceNotice) -> Void

/// Every kind of source Baton plays — an announcement or a local sound, music from the server, an
/// intercom call, and (later) an external ALSA player — as the control plane drives it.
///
/// The control plane owns the arbitration: it claims the slots, pauses and resumes them, sets their
/// gains, and releases them. A source only fills its slots' rings and reports what it is doing.
/// Threads: every method is called by the control plane under its lock (from the monitor thread or
/// a request's thread) and must return quickly, never waiting on the network or a device; `label`,
/// `position` and `isDrained` may be read from any thread.
public protocol Source: AnyObject, Sendable {
    /// What plays now, in words: the sound's name, the current track's title.
    var label: String { get }
    /// Begins filling `outputs` (one per zone; the slots are claimed already). Called once, when the
    /// arbiter first grants the source.
    func start(_ outputs: [SourceOutput])
    /// The arbiter made the source heard (true) or silent everywhere (false: paused, interrupted).
    /// Its slots are paused or resumed by the control plane; this is what the source itself must do
    /// (tell a server or a player).
    func audibilityChanged(_ audible: Bool)
    /// Upkeep on the monitor thread: top up rings, notice track changes and failures.
    func tick(audible: Bool)
    /// Nanoseconds from now until the source needs its next `tick` (its ring falls to the point where
    /// it must be topped up, its last frame will have been played, its next track begins), or nil
    /// when it needs none. The monitor sleeps until the soonest of these (it also ticks at least
    /// once a second, and whenever the control plane's state changes). Read after `tick`, under the
    /// control plane's lock. The default, 5 ms, is the monitor's old fixed rate.
    var nextTick: Int? { get }
    /// Ends the source. True when its slots may be released now; false when a thread of the source
    /// still writes into them and releases them itself when it ends.
    func stop() -> Bool
    /// Seconds into what plays, as heard (nil before anything played).
    var position: Double? { get }
    /// True once every frame it will ever write was played.
    var isDrained: Bool { get }
    /// Why it ended before its end (a transfer that broke, a cut at a limit), once it has; nil while
    /// it plays or when it played to its end. What `played` says instead of "played to its end".
    var endedEarly: String? { get }
}

extension Source {
    public func audibilityChanged(_ audible: Bool) {}
    public var nextTick: Int? { 5_000_000 }
    public var endedEarly: String? { nil }
}

/// Nanoseconds until the output threads have taken what `outputs`' rings still hold (when a source
/// that wrote its last frame will be drained), plus 1 ms; at least 2 ms. Monitor thread.
func nanosecondsToDrain(_ outputs: [SourceOutput]) -> Int {
    max(2_000_000, nanosecondsQueued(outputs) + 1_000_000)
}

/// How long the fullest of `outputs`' rings plays on what it holds (ns; 0 when all are empty or
/// drained). Monitor thread.
func nanosecondsQueued(_ outputs: [SourceOutput]) -> Int {
    var most = 0
    for o in outputs where !o.slot.isDrained {
        most = max(most, o.slot.ring.readable / max(1, o.channels) * 1_000_000_000 / max(1, o.rate))
    }
    return most
}

/// Nanoseconds until the fullest of `outputs`' rings falls to half full (where a source topped up
/// by the monitor is fed again: the other half is 250 ms of margin with 500 ms rings), at least 5 ms.
/// Full counts what an output read but has not handed back (see `Source.write`). Monitor thread.
func nanosecondsToHalfFull(_ outputs: [SourceOutput]) -> Int {
    max(5_000_000, outputs.lazy.map(\.nanosecondsAboveHalf).min() ?? 5_000_000)
}

/// The position of a slot-fed source: frames of it heard, in seconds (`heardInFirstZone`).
func slotPosition(_ outputs: [SourceOutput]) -> Double? {
    guard let first = outputs.first, let heard = heardInFirstZone(outputs) else { return nil }
    return Double(heard) / Double(first.rate)
}

/// Frames of the source heard so far, in the first zone's frames, as the first zone that is heard
/// and in step says (`DeviceOutput.isHeard`, not behind), else the first: a zone left behind counts
/// what was dropped for it as heard when it was dropped, ahead of what the others have played, and
/// a zone whose output is lost holds the position where it lost it.
func heardInFirstZone(_ outputs: [SourceOutput]) -> Int? {
    guard let first = outputs.first else { return nil }
    guard let reference = outputs.first(where: { $0.device.isHeard && !$0.slot.isBehind }),
        reference.slot !== first.slot
    else { return first.heardFrames }
    return Int((Double(reference.heardFrames) * Double(first.rate) / Double(max(1, reference.rate))).rounded())
}

extension SourceOutput {
    /// Frames of the source heard in this zone by now: the slot's frames mixed, less those still
    /// in the device's buffer, or, while the zone's output is lost, those mixed since it was.
    public var heardFrames: Int { slot.framesHeard(atZoneFrame: device.heardFrame) }
}

/// True while every one of `outputs` is paused and its output thread has stopped taking from it:
/// nothing of the source moves — its rings do not drain, nothing more is heard — until a resume,
/// which wakes the monitor itself. Its deadlines (a ring half empty, the next track, a scrobble
/// threshold) would come no closer, and the monitor looked again at each (four times a second for
/// a paused sound, for as long as it stayed paused). Monitor thread.
func allHeldStill(_ outputs: [SourceOutput]) -> Bool {
    !outputs.isEmpty && outputs.allSatisfy { $0.slot.isPauseRequested && $0.slot.isPaused }
}

/// True once every slot played the source's last frame — but for a zone left behind
/// (`isLeftBehind`): its lost card would hold the source for as long as it is gone.
func allDrained(_ outputs: [SourceOutput]) -> Bool {
    !outputs.isEmpty && outputs.allSatisfy { $0.slot.isDrained || $0.isLeftBehind(among: outputs) }
}
