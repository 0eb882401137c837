import AudioCore
import OSThread
import Synchronization

/// One source's place in a zone's mix: its sample ring, its gain, its pause state and its counters.
///
/// Three parties share a slot, each through atomics only:
/// - the **control thread** claims it, sets the target gain, pauses/resumes and releases it;
/// - the source's **producer thread** writes frames into `ring` and marks the end of the stream;
/// - the zone's **output thread** reads frames, ramps the gain and reports what it did.
/// Samples are interleaved Float at the zone's rate and channel count.
// @unchecked: every field shared across threads is an `Atomic` or the SPSC `FloatRing`; `gain`,
// `soundingNow` and `epoch` are the output thread's, but for `activate`'s writes to a free slot, which
// it reads only once it sees the slot active (an acquiring load of `phase`).
public final class SourceSlot: @unchecked Sendable {
    /// Slot lifecycle, stored in `phase`.
    enum Phase: UInt8 {
        case free = 0  // unused; control may claim it
        case active = 1  // the output thread mixes it
        case releasing = 2  // control wants it back; the output thread fades it out, then sets `.free`
    }

    /// The frames this source feeds into the zone.
    public let ring: FloatRing
    /// Which slot of the zone this is (for telemetry).
    public let index: Int

    let phase = Atomic<UInt8>(Phase.free.rawValue)
    let targetGainBits = Atomic<UInt32>(Float(1).bitPattern)
    let currentGainBits = Atomic<UInt32>(0)
    /// Gain change per frame for the current ramp; 0 uses the zone's default ramp.
    let rampStepBits = Atomic<UInt32>(0)
    let pauseRequested = Atomic<Bool>(false)
    let pausedNow = Atomic<Bool>(false)
    let endOfStream = Atomic<Bool>(false)
    let drainedFlag = Atomic<Bool>(false)
    let consumed = Atomic<Int>(0)
    /// A sequence counter (odd while being written) over `consumed` and `lastMixedEndFrame`, which
    /// the output thread changes together each period and a position reads together.
    let counts = SequenceCount()
    /// Frames dropped for this zone while it was out and others played — by the producer, instead
    /// of writing them, and by the output at its request, what the ring held from before the loss
    /// — less the silence the producer put in to come back in step.
    let skipped = Atomic<Int>(0)
    /// Set by the producer when it dropped frames for this zone; until it is in step with the
    /// source's other zones again (`SourceOutput.rejoins`).
    let behind = Atomic<Bool>(false)
    /// Frames dropped since it fell behind (`drop`).
    let droppedBehind = Atomic<Int>(0)
    /// The source frame (this zone's frames, counting those dropped as heard) the producer asked
    /// the output to drop the ring's frames up to (-1: none pending).
    let discardUpTo = Atomic<Int>(-1)
    let starved = Atomic<Int>(0)
    /// The zone's frame counter when this slot's last frame was mixed (its end), or -1.
    let drainedAtFrame = Atomic<Int>(-1)
    /// The zone's frame counter when this slot's first frame was mixed, or -1.
    let startedAtFrame = Atomic<Int>(-1)
    /// The zone frame just after the last frame of this slot that was mixed, or -1.
    let lastMixedEndFrame = Atomic<Int>(-1)
    /// Where the mixing of this slot's frames went on after its latest breaks (pauses, a ring that
    /// ran dry): a frame heard before one counts from the break, not across it (`framesHeard`).
    let breaks = MixingBreaks()
    /// When the slot's frames are in the mix at a gain above 0 (heard, once the device plays them),
    /// or at all for a source at volume 0 (`atVolumeZero`): on from the first such frame, off from
    /// the frame after the last; the off is tagged when the ring ran dry before the end of the
    /// stream (the producer is late: buffering), or at a resume into an empty ring (on and off at
    /// its first frame: `ZoneMixer.trackSounding`).
    public let sounding = Timeline()
    /// Whether the slot ended its last period sounding. Output thread only, but for `activate`
    /// (as `gain`).
    var soundingNow = false
    /// The source plays at volume 0, the user's choice: its frames, mixed at gain 0, count as
    /// sounding while they are consumed — it plays, at the volume asked — though nothing of it is
    /// heard. Not while it is muted there, nor during a fade (those silence it). Set when the slot
    /// is claimed and by `setAtVolumeZero`.
    let atVolumeZero = Atomic<Bool>(false)

    /// The gain the output thread applied last. Output thread only, but for `activate`, which sets
    /// it on a free slot: the output thread reads it only while the slot is active (or releasing).
    var gain: Float = 0
    /// How many times the output thread freed the slot: a mark of a rendered-ahead period belongs to
    /// the source that held the slot then (`ZoneMixer.rewind`). Output thread only.
    var epoch = 0

    /// Posted when the control thread changes the slot (gain, pause, resume), so that an output that
    /// renders ahead takes back what it rendered and renders the change in (`ZoneMixer.rewind`).
    private let doorbell: ChangeBell?
    /// What the ring must hold before the producer's writes ring the doorbell for the slot's first
    /// frames (`write`); `Int.max`: never (an output that does not render ahead has nothing to
    /// take back).
    let firstWakeSamples: Int

    init(index: Int, ringSamples: Int, doorbell: ChangeBell? = nil, firstWakeSamples: Int = .max) {
        self.index = index
        self.doorbell = doorbell
        self.firstWakeSamples = firstWakeSamples
        ring = FloatRing(capacity: ringSamples, resident: false)  // paged in when first claimed
    }

    // MARK: Control thread

    /// Sets the gain the output thread ramps to (linear; 1 = unity), at the zone's default ramp speed
    /// or, with `overFrames`, so that the change from the gain applied now takes that many frames
    /// (duck attack and release). Control thread; any time.
    public func setGain(_ linear: Float, overFrames frames: Int? = nil) {
        if let frames, frames > 0 {
            let step = max(abs(linear - appliedGain), 1e-4) / Float(frames)
            rampStepBits.store(step.bitPattern, ordering: .relaxed)
        } else {
            rampStepBits.store(0, ordering: .relaxed)
        }
        targetGainBits.store(linear.bitPattern, ordering: .releasing)
        doorbell?.post()
    }

    /// The gain the output thread ramps to.
    public var targetGain: Float { Float(bitPattern: targetGainBits.load(ordering: .acquiring)) }

    /// Whether the source plays at volume 0 by the user's choice (`claimSlot`): `sounding` while
    /// its frames are consumed, though none is heard.
    public var playsAtVolumeZero: Bool { atVolumeZero.load(ordering: .acquiring) }

    /// Sets `playsAtVolumeZero`: off while a source at volume 0 is muted in this zone (silenced
    /// there, it does not play there), on again when it is unmuted. Control thread.
    public func setAtVolumeZero(_ on: Bool) {
        guard atVolumeZero.load(ordering: .relaxed) != on else { return }
        atVolumeZero.store(on, ordering: .releasing)
        doorbell?.post()
    }

    /// Fades the source out and stops consuming its frames at the end of the fade, so `resume` goes
    /// on from the very next sample. Control thread.
    public func pause() {
        pauseRequested.store(true, ordering: .releasing)
        doorbell?.post()
    }

    /// Fades the source back in from the sample where `pause` stopped it, over the zone's ramp (not
    /// the pace of the last gain change: a duck's release would fade it in over a third of a
    /// second). Control thread.
    public func resume() {
        rampStepBits.store(0, ordering: .relaxed)
        pauseRequested.store(false, ordering: .releasing)
        doorbell?.post()
    }

    /// True from `pause` to `resume`, whether or not the fade has ended. Any thread.
    public var isPauseRequested: Bool { pauseRequested.load(ordering: .acquiring) }

    /// True once a requested pause has taken effect (the fade reached 0 and consumption stopped).
    public var isPaused: Bool { pausedNow.load(ordering: .acquiring) }

    /// Frames of this source the output thread has mixed so far (its playback position).
    public var framesConsumed: Int { consumed.load(ordering: .acquiring) }

    /// The gain the output thread applied at the end of its last cycle.
    public var appliedGain: Float { Float(bitPattern: currentGainBits.load(ordering: .acquiring)) }

    /// Periods in which the ring ran dry before the end of the stream (the producer was late).
    public var starvedPeriods: Int { starved.load(ordering: .acquiring) }

    /// True when the producer marked the end and the output thread has mixed every frame.
    public var isDrained: Bool { drainedFlag.load(ordering: .acquiring) }

    /// The zone frame at which the first frame of this source was mixed, if it was.
    public var firstFrameAt: Int? {
        let v = startedAtFrame.load(ordering: .acquiring)
        return v < 0 ? nil : v
    }

    /// Frames of this source heard by zone frame `audibleFrame` (the device's audible frame): the
    /// frames mixed, less those mixed at or after that frame (still in the device's buffer), plus
    /// those the producer dropped (`skip`): the source's position, as in its other zones.
    /// Any thread.
    public func framesHeard(atZoneFrame audibleFrame: Int) -> Int {
        // A frame heard before a break's end: count from where the break began (the zone frames of
        // a pause, or of a ring run dry, held none of this source's frames).
        // The latest counts first, then the breaks: the output thread records a break before it
        // stores the counts of the period that ended it, so counts that include such a period are
        // read with its break. The count and the end of one period, under their sequence counter.
        var (end, mixed) = counts.read {
            (
                lastMixedEndFrame.load(ordering: .sequentiallyConsistent),
                consumed.load(ordering: .sequentiallyConsistent)
            )
        }
        if let b = breaks.firstEnded(after: audibleFrame) { (mixed, end) = (b.consumed, b.mixedEnd) }
        mixed += skipped.load(ordering: .acquiring)
        guard end >= 0 else { return mixed }
        return max(0, mixed - max(0, end - audibleFrame))
    }

    /// Sets the frames mixed and the zone frame just after the last of them, as one pair for
    /// `framesHeard` (under `counts`). Output thread only. Real-time safe.
    @inline(__always)
    func publishCounts(consumed mixed: Int, mixedEnd: Int) {
        counts.write {
            consumed.store(mixed, ordering: .sequentiallyConsistent)
            lastMixedEndFrame.store(mixedEnd, ordering: .sequentiallyConsistent)
        }
    }

    /// Frames dropped for this zone while it was out (`drop`, `requestDiscard`), less the silence
    /// written to come back in step. Any thread.
    public var framesSkipped: Int { skipped.load(ordering: .acquiring) }

    /// The zone frame just after the last frame of this source was mixed, once drained.
    public var lastFrameAt: Int? {
        let v = drainedAtFrame.load(ordering: .acquiring)
        return v < 0 ? nil : v
    }

    // MARK: Producer thread

    /// Writes up to `count` samples into the ring (as `FloatRing.write`); returns how many it took.
    /// Until the output has mixed the slot's first frame, a write that leaves `firstWakeSamples` or
    /// more in the ring rings the output's doorbell: one that renders ahead takes back what it
    /// rendered (silence) and renders the new source in at once, instead of at its next wake-up
    /// (up to about a buffer later). Not before: what a take-back leaves the card must be refilled
    /// at once, and a source with less than that in hand would run dry there (a gap in its first
    /// tens of ms). Producer thread.
    @discardableResult
    public func write(_ samples: UnsafePointer<Float>, count: Int) -> Int {
        let n = ring.write(samples, count: count)
        if n > 0 { wrote() }
        return n
    }

    /// What `write` does after writing, for a producer that wrote into `ring` itself. Producer thread.
    public func wrote() {
        if startedAtFrame.load(ordering: .acquiring) < 0 && ring.readable >= firstWakeSamples { doorbell?.post() }
    }

    /// Marks that no more frames will be written. The first time, before the output has mixed any,
    /// it rings the doorbell of an output that renders ahead (a sound shorter than
    /// `firstWakeSamples`, which `write` did not ring for). Producer thread.
    public func finish() {
        if !endOfStream.exchange(true, ordering: .acquiringAndReleasing) && firstWakeSamples != .max
            && startedAtFrame.load(ordering: .acquiring) < 0
        {
            doorbell?.post()
        }
    }

    /// Counts `frames` the producer dropped instead of writing them: this zone was out (its card
    /// lost) while the source played on in others. They count as heard in the position, so it
    /// stays the source's, as in the zones that played them; the slot is behind from now on until
    /// the producer marks it in step again. Producer thread.
    public func drop(_ frames: Int) {
        skipped.add(frames, ordering: .releasing)
        droppedBehind.add(frames, ordering: .releasing)  // after `skipped` (see `ZoneMixer.renderSlot`)
        behind.store(true, ordering: .releasing)
    }

    /// Counts `frames` of silence the producer wrote that are not the source's (to come back in
    /// step after `drop`): not counted as heard. Producer thread.
    public func wroteSilence(_ frames: Int) { skipped.add(-frames, ordering: .releasing) }

    /// True from the producer's first dropped frame (`drop`) until it marks the slot in step again.
    /// Any thread; set by the producer.
    public var isBehind: Bool {
        get { behind.load(ordering: .acquiring) }
        set {
            if !newValue { droppedBehind.store(0, ordering: .relaxed) }
            behind.store(newValue, ordering: .releasing)
        }
    }

    /// Frames dropped since the slot fell behind (`drop`): they come after what its ring holds.
    /// Any thread.
    public var framesDroppedBehind: Int { droppedBehind.load(ordering: .relaxed) }

    /// The source frame the ring's frames begin at (this zone's frames; those dropped for it count
    /// as passed, but not the ones dropped since it fell behind, which come after the ring's).
    /// Any thread (a snapshot; real-time safe). Dropped-behind is read first: the producer counts
    /// a drop in `skipped` before it does there, so this never sees a drop there without it in
    /// `skipped` (which would put the start too early, and a discard up to a frame drop too much).
    public var ringStart: Int {
        let dropped = droppedBehind.load(ordering: .acquiring)
        return consumed.load(ordering: .acquiring) + skipped.load(ordering: .acquiring) - dropped
    }

    /// Asks the output to drop the ring's frames before source frame `position` (see `ringStart`)
    /// unplayed, counted as heard: frames from before a loss that the source's other zones played
    /// meanwhile. Done at its next period. Producer thread, while behind.
    public func requestDiscard(upTo position: Int) {
        discardUpTo.store(max(0, position), ordering: .releasing)
        doorbell?.post()
    }

    /// True from `requestDiscard` until the output has dropped those frames. Any thread.
    public var isDiscardPending: Bool { discardUpTo.load(ordering: .acquiring) >= 0 }

    // MARK: Output thread

    /// True when rendering the slot would give only silence until something rings the output's
    /// doorbell: it is free, or its pause has taken effect (its fade is over: `resume` rings) with
    /// `restartSamples` of it in hand (what a restart of the device takes at once: its buffer) or
    /// its end written — and no drop it asked for is pending. A zone whose slots are all so may stop its device
    /// (`DeviceOutput.stopsWhenIdle`): the restart at a resume takes a buffer's worth at once.
    /// A paused live source (a program held, which keeps only tens of ms in hand) keeps its zone
    /// running, and so does a slot whose source has not written yet: its output restarts at once
    /// on silence (whoever claims it wakes the output, `DeviceOutput.wake`), so that the first
    /// frames come to a running device with its buffer full. Output thread only (reads `gain`).
    /// Real-time safe.
    func awaitsTheDoorbell(restartSamples: Int) -> Bool {
        switch phase.load(ordering: .acquiring) {
        case Phase.free.rawValue: return true
        case Phase.active.rawValue: break
        default: return false  // releasing: the output frees it
        }
        if discardUpTo.load(ordering: .acquiring) >= 0 { return false }
        return pauseRequested.load(ordering: .acquiring) && gain == 0
            && (ring.readable >= restartSamples || endOfStream.load(ordering: .acquiring))
    }

    // MARK: Slot lifecycle (Zone)

    /// Prepares a free slot for a new source; `fadeIn`: it starts at gain 0 and ramps to `gain`
    /// over the zone's ramp (a source going on from the middle of its stream: a seek). Does not
    /// ring the output's doorbell: the control plane wakes the output once the source has started
    /// (`DeviceOutput.wake`), after a sound's frames are written. Control thread, while the slot is free.
    func activate(gain: Float, atVolumeZero zero: Bool, fadeIn: Bool = false) {
        ring.reset()
        atVolumeZero.store(zero, ordering: .relaxed)
        targetGainBits.store(gain.bitPattern, ordering: .relaxed)
        currentGainBits.store((fadeIn ? 0 : gain).bitPattern, ordering: .relaxed)
        rampStepBits.store(0, ordering: .relaxed)
        pauseRequested.store(false, ordering: .relaxed)
        pausedNow.store(false, ordering: .relaxed)
        endOfStream.store(false, ordering: .relaxed)
        drainedFlag.store(false, ordering: .relaxed)
        consumed.store(0, ordering: .relaxed)
        skipped.store(0, ordering: .relaxed)
        behind.store(false, ordering: .relaxed)
        droppedBehind.store(0, ordering: .relaxed)
        discardUpTo.store(-1, ordering: .relaxed)
        starved.store(0, ordering: .relaxed)
        drainedAtFrame.store(-1, ordering: .relaxed)
        startedAtFrame.store(-1, ordering: .relaxed)
        lastMixedEndFrame.store(-1, ordering: .relaxed)
        breaks.reset()
        sounding.reset()
        soundingNow = false
        // A new source starts at its gain: it begins at its own first sample, so there is no jump to
        // smooth. Ramps are for changes in the middle of a stream (duck, mute, pause, resume, and a
        // source going on from the middle of its stream: `fadeIn`).
        self.gain = fadeIn ? 0 : gain
        phase.store(Phase.active.rawValue, ordering: .releasing)
    }
}
