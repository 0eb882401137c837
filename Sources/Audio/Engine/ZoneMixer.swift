import AudioCore
import OSThread
import Synchronization

/// Mixes a zone's source slots into one period of interleaved Float frames.
///
/// Everything is allocated in `init`; `render` is real-time safe (no allocation, lock, log or await)
/// and is called by one thread only: the zone's output thread (or a test standing in for it).
///
/// **Rendering ahead.** A mixer made with `rewindPeriods > 0` keeps its state at the start of each of
/// the last that many periods (each slot's ring read position, gain and counters, the zone volume)
/// and leaves what it read in the rings until `settle(playedThrough:)` says the device has played it.
/// So an output can render well ahead of the device and, when something changes (a new source, a
/// pause, a gain or the volume), take back the periods the device has not played (`rewind`) and
/// render them again with the change in. A period in which something happened that others may have
/// seen — a slot started or stopped sounding, drained, paused, faded out as let go of or was freed,
/// or the loudness crossed
/// the meter's threshold — is never taken back: `rewindablePeriods` ends there.
// @unchecked: the slots are shared through their atomics; the buffers belong to the rendering thread.
public final class ZoneMixer: @unchecked Sendable {
    public let channels: Int
    public let periodFrames: Int
    /// The largest gain change per frame: a full 0→1 swing takes `rampFrames` frames.
    public let rampStep: Float
    public let slots: [SourceSlot]
    /// The mixed period, `periodFrames × channels` samples, valid after `render`.
    public let mix: UnsafeMutablePointer<Float>
    private let scratch: UnsafeMutablePointer<Float>
    /// The level of the final mix (after the zone volume), measured every period.
    public let meter = Meter()

    /// The zone frame counter: frames rendered so far. Rendering thread only.
    public private(set) var frame = 0
    /// Set by `render` when what the zone mixes changed — a slot began or stopped sounding (its
    /// first frame, a fade to 0, a ring run dry) or the loudness crossed the meter's threshold —
    /// and cleared by `takeChanged`. Rendering thread only.
    private var changed = false
    private let renderedFrames = Atomic<Int>(0)

    /// Render-ahead (see the type's notes): the state at the start of each kept period, in a ring of
    /// `markCapacity` periods; `markCount` are kept, the newest for the period that starts at `frame -
    /// periodFrames`. Rendering thread only.
    private let markCapacity: Int
    private let marks: UnsafeMutablePointer<Mark>
    private let slotMarks: UnsafeMutablePointer<SlotMark>
    private var markCount = 0
    /// The first frame a rewind may go back to: the end of the last period in which something
    /// happened that cannot be taken back.
    private var barrierFrame = 0
    /// Set while rendering a period in which something happened that cannot be taken back.
    private var eventInPeriod = false

    /// The zone's state at the start of a period.
    private struct Mark {
        var frame: Int
        var volumeGain: Float
    }

    /// A slot's state at the start of a period.
    private struct SlotMark {
        var epoch: Int
        var active: Bool
        var readPosition: Int
        var gain: Float
        var consumed: Int
        var lastMixedEndFrame: Int
        var starved: Int
        var soundingNow: Bool

        /// The mark of a slot not active then: never used (`rewind` and `dropMark` skip it).
        static func inactive(epoch: Int) -> SlotMark {
            SlotMark(
                epoch: epoch, active: false, readPosition: 0, gain: 0, consumed: 0, lastMixedEndFrame: -1, starved: 0,
                soundingNow: false)
        }
    }

    /// The first frame the next `render` produces: a change made now (a gain, a pause, a new slot)
    /// is in the audio from this frame on, or one period later when a render is in progress. For an
    /// output that renders ahead (`publishChangeFrame`), the frame its rewind would go back to now,
    /// by the clock (rounded up to a period). Any thread.
    public var nextFrame: Int {
        let rendered = renderedFrames.load(ordering: .acquiring)
        // The base, its time and the rate of one publication, under their sequence counter: read
        // apart, a publication between them paired the new base with the old time — two periods
        // later than the output took back to, under load (ClockedAheadTests in a fresh clone).
        let (base, published, rate) = changeFrameSequence.read {
            (
                changeFrameBase.load(ordering: .sequentiallyConsistent),
                changeFrameNanoseconds.load(ordering: .sequentiallyConsistent),
                changeFrameRate.load(ordering: .sequentiallyConsistent)
            )
        }
        guard rate > 0 else { return rendered }
        // Rendering ahead: where a rewind would go now, by the clock since it was published.
        // In whole seconds and the rest: `elapsed * rate` overflowed after 53 hours at 48 kHz (26 at
        // 96), as a zone idle over a weekend is (its output stops and publishes nothing): the
        // first request after trapped batond.
        let elapsed = max(0, monotonicNanoseconds() - published)
        let moved = elapsed / 1_000_000_000 * rate + elapsed % 1_000_000_000 * rate / 1_000_000_000
        let at = base + moved
        return min(rendered, (at + periodFrames - 1) / periodFrames * periodFrames)
    }
    /// What `publishChangeFrame` published (rate 0: nothing, `nextFrame` is the frame rendered next).
    private let changeFrameBase = Atomic<Int>(0)
    private let changeFrameNanoseconds = Atomic<Int>(0)
    private let changeFrameRate = Atomic<Int>(0)
    /// Odd while `publishChangeFrame` writes the three above.
    private let changeFrameSequence = SequenceCount()

    /// The zone frame counter as the rendering thread last published it: frames rendered so far
    /// (less those a rewind took back). Any thread.
    public var framesRendered: Int { renderedFrames.load(ordering: .acquiring) }

    /// The zone's volume (the user's, linear), applied to the whole mix after the sources' own
    /// gains and ducks. Set by the control thread, ramped by the rendering thread.
    private let volumeBits = Atomic<UInt32>(Float(1).bitPattern)
    private let appliedVolumeBits = Atomic<UInt32>(Float(1).bitPattern)
    private var volumeGain: Float = 1
    /// What a restart of the stopped device takes at once (its buffer, as granted at each open:
    /// `deviceBufferGranted`), in samples: a paused slot lets the zone stop only with that much in
    /// hand (`isIdle`). Rendering thread only.
    private var restartSamples = 0
    private let doorbell: ChangeBell?

    /// - Parameters:
    ///   - slotCount: how many sources the zone can mix at once.
    ///   - ringSamples: each slot's ring size in samples.
    ///   - rampFrames: frames a full 0↔1 gain change takes (click-free ramps).
    ///   - doorbell: posted when the volume changes, or a slot's gain or pause changes or it is
    ///     released, so that an output that renders ahead renders the change in. An output stopped
    ///     while its zones were idle takes a volume change at once and stays stopped (`isIdle`: there
    ///     is nothing to ramp over; see `DeviceSpec.stopsWhenIdle`).
    ///   - rewindPeriods: how many periods back `rewind` can go (0: none, and what is read from the
    ///     rings is handed back to their producers at once).
    ///   - firstWakeFrames: rendering ahead, what a slot's ring must hold before its producer's
    ///     writes ring the doorbell for its first frames (`SourceSlot.write`); nil: never.
    public init(
        channels: Int, periodFrames: Int, slotCount: Int, ringSamples: Int, rampFrames: Int,
        doorbell: ChangeBell? = nil, rewindPeriods: Int = 0, firstWakeFrames: Int? = nil
    ) {
        precondition(channels > 0 && periodFrames > 0 && slotCount > 0 && rampFrames > 0 && rewindPeriods >= 0)
        self.channels = channels
        self.periodFrames = periodFrames
        self.doorbell = doorbell
        rampStep = 1 / Float(rampFrames)
        let firstWake = firstWakeFrames.map { $0 * channels } ?? .max
        slots = (0..<slotCount).map {
            SourceSlot(index: $0, ringSamples: ringSamples, doorbell: doorbell, firstWakeSamples: firstWake)
        }
        mix = .allocate(capacity: periodFrames * channels)
        mix.initialize(repeating: 0, count: periodFrames * channels)
        scratch = .allocate(capacity: periodFrames * channels)
        scratch.initialize(repeating: 0, count: periodFrames * channels)
        markCapacity = rewindPeriods
        marks = .allocate(capacity: max(1, rewindPeriods))
        marks.initialize(repeating: Mark(frame: 0, volumeGain: 0), count: max(1, rewindPeriods))
        let blank = SlotMark.inactive(epoch: 0)
        slotMarks = .allocate(capacity: max(1, rewindPeriods) * slotCount)
        slotMarks.initialize(repeating: blank, count: max(1, rewindPeriods) * slotCount)
    }

    deinit {
        mix.deallocate()
        scratch.deallocate()
        marks.deallocate()
        slotMarks.deallocate()
    }

    /// Sets the zone's volume (linear, 0...1); the output thread ramps to it click-free.
    /// Control thread; any time.
    public func setVolume(_ linear: Float) {
        volumeBits.store(min(max(linear, 0), 1).bitPattern, ordering: .releasing)
        doorbell?.post()
    }

    /// The zone volume the control thread asked for.
    public var volume: Float { Float(bitPattern: volumeBits.load(ordering: .acquiring)) }

    /// The zone volume the output thread applied at the end of its last period.
    public var appliedVolume: Float { Float(bitPattern: appliedVolumeBits.load(ordering: .acquiring)) }

    /// Sets the volume before the output thread starts, without a ramp, and without ringing the
    /// doorbell: it is no change to render in (rung, an output rendering ahead took back at its
    /// first wake-up what it had just rendered). Control thread, before start.
    public func setInitialVolume(_ linear: Float) {
        volumeBits.store(min(max(linear, 0), 1).bitPattern, ordering: .releasing)
        volumeGain = volume
        appliedVolumeBits.store(volumeGain.bitPattern, ordering: .releasing)
    }

    /// Claims a free slot for a new source, or nil when all are busy: the lowest free one, so that
    /// the slots used are the first few. A slot used for the first time has its ring paged in here
    /// (`FloatRing.makeResident`), before its producer writes. The output thread is not woken: wake
    /// it (`DeviceOutput.wake`) once the source has started. `fadeIn`: the source goes on from the
    /// middle of its stream (a seek, a skip): it fades in from 0 over the zone's ramp, as a resume
    /// does, instead of starting at full gain mid-waveform. Control thread only.
    public func claimSlot(gain: Float, atVolumeZero: Bool = false, fadeIn: Bool = false) -> SourceSlot? {
        for slot in slots where slot.phase.load(ordering: .acquiring) == SourceSlot.Phase.free.rawValue {
            slot.ring.makeResident()
            slot.activate(gain: gain, atVolumeZero: atVolumeZero, fadeIn: fadeIn)
            return slot
        }
        return nil
    }

    /// Whether a slot is free now (what `claimSlot` would take). A slot released is free once the
    /// output thread has faded it out (`release`: the zone's ramp, from its next period). Control thread.
    public var hasFreeSlot: Bool {
        slots.contains { $0.phase.load(ordering: .acquiring) == SourceSlot.Phase.free.rawValue }
    }

    /// The bytes of this zone's slot rings in memory (`mincore`): the rings of the slots used since
    /// the zone was made. Any thread; a system call per slot.
    public var residentRingBytes: Int { slots.reduce(0) { $0 + $1.ring.residentBytes } }

    /// Hands a slot back: from its next period the output thread fades it out over the zone's ramp,
    /// as a pause does (reading its ring only up to the end of the fade), and then marks it free —
    /// at once when it has nothing to fade (never mixed, at gain 0, drained). Its producer must not
    /// write it any more. Control thread only.
    public func release(_ slot: SourceSlot) {
        slot.phase.store(SourceSlot.Phase.releasing.rawValue, ordering: .releasing)
        doorbell?.post()
    }

    /// The device's buffer as granted: see `restartSamples`. Rendering thread only.
    func deviceBufferGranted(frames: Int) { restartSamples = frames * channels }

    /// True when the zone has nothing to play until its doorbell rings: every slot is free or
    /// paused (`SourceSlot.awaitsTheDoorbell`), so `render` would give silence. A volume change
    /// then is taken at once, with no ramp (there is nothing to ramp over): asked to ramp over
    /// silence, the zone was not idle, so a volume set on a card stopped idle started it (a USB DAC
    /// pops at a start), and the fade-out at batond's stop started every idle card. Rendering
    /// thread only (after `render`). Real-time safe.
    public var isIdle: Bool {
        for slot in slots where !slot.awaitsTheDoorbell(restartSamples: restartSamples) { return false }
        let target = Float(bitPattern: volumeBits.load(ordering: .acquiring))
        if volumeGain != target {
            volumeGain = target
            appliedVolumeBits.store(target.bitPattern, ordering: .relaxed)
        }
        return true
    }

    /// Renders one period into `mix`. Rendering thread only. Real-time safe.
    public func render() {
        let samples = periodFrames * channels
        if markCapacity > 0 { keepMark() }
        eventInPeriod = false
        // `filled`: `mix` holds this period's sum so far. The first slot that sounds at a steady
        // gain is read straight into it (no clearing, no scratch copy: the common case of one
        // source); every other slot is added to it.
        var filled = false
        for slot in slots {
            let phase = slot.phase.load(ordering: .acquiring)
            let releasing = phase == SourceSlot.Phase.releasing.rawValue
            guard releasing || phase == SourceSlot.Phase.active.rawValue else { continue }
            if releasing {
                // Let go of: it fades out over the zone's ramp, as a pause does, and is freed once
                // silent — cut off at once, its last period ended mid-waveform (a click at every
                // stop, seek and skip). One never mixed, at gain 0 or drained has nothing to fade.
                // Its periods are never taken back.
                eventInPeriod = true
                if slot.gain == 0 || slot.startedAtFrame.load(ordering: .relaxed) < 0
                    || slot.drainedFlag.load(ordering: .relaxed)
                {
                    free(slot)
                    continue
                }
            }
            // One call site: `renderSlot` is inlined, and a second copy of it for the fade made the
            // output thread's code larger.
            filled = renderSlot(slot, filled: filled, releasing: releasing)
            if releasing && (slot.gain == 0 || slot.drainedFlag.load(ordering: .relaxed)) { free(slot) }
        }
        if !filled { mix.update(repeating: 0, count: samples) }
        applyVolume(samples: samples)
        if meter.measure(mix, frames: periodFrames, channels: channels, frame: frame) {
            changed = true
            eventInPeriod = true
        }
        frame += periodFrames
        if eventInPeriod { barrierFrame = frame }
        renderedFrames.store(frame, ordering: .releasing)
    }

    /// Marks a slot let go of free, a new epoch for its next source. Rendering thread only.
    @inline(__always)
    private func free(_ slot: SourceSlot) {
        slot.phase.store(SourceSlot.Phase.free.rawValue, ordering: .releasing)
        slot.epoch += 1
    }

    // MARK: Rendering ahead

    /// True when every source the zone mixes has a whole period ready (or has ended, or is paused),
    /// so that rendering a period ahead does not run a live source dry. Rendering thread only.
    /// Real-time safe.
    public var hasPeriodReady: Bool {
        let samples = periodFrames * channels
        for slot in slots where slot.phase.load(ordering: .acquiring) == SourceSlot.Phase.active.rawValue {
            if slot.drainedFlag.load(ordering: .relaxed) || slot.endOfStream.load(ordering: .acquiring) { continue }
            if slot.pausedNow.load(ordering: .relaxed) && slot.pauseRequested.load(ordering: .relaxed) { continue }
            if slot.ring.readable < samples { return false }
        }
        return true
    }

    /// For an output that renders ahead: the device has played every frame before `played`, and
    /// a change asked for now is rendered in from `played + keepFrames` on (where the output takes
    /// back to), which `nextFrame` reports, moving on with the clock at `rate` from `now` (ns).
    /// Rendering thread only. Real-time safe.
    public func publishChangeFrame(played: Int, keepFrames: Int, rate: Int, now: Int) {
        let first = max(frame - rewindablePeriods * periodFrames, played + keepFrames)
        changeFrameSequence.write {
            changeFrameBase.store(first, ordering: .sequentiallyConsistent)
            changeFrameNanoseconds.store(now, ordering: .sequentiallyConsistent)
            changeFrameRate.store(rate, ordering: .sequentiallyConsistent)
        }
    }

    /// Periods `rewind` can take back now: those kept, back to the last period in which something
    /// happened that cannot be (see the type's notes). Rendering thread only. Real-time safe.
    public var rewindablePeriods: Int {
        min(markCount, max(0, frame - barrierFrame) / periodFrames)
    }

    /// Takes back the last `periods` periods rendered (at most `rewindablePeriods`): the rings are
    /// read again from where those periods began, with the gains, counters and zone volume of
    /// then, and `frame` goes back. Returns how many periods were taken back.
    /// Rendering thread only. Real-time safe.
    @discardableResult
    public func rewind(periods: Int) -> Int {
        let n = min(max(0, periods), rewindablePeriods)
        guard n > 0 else { return 0 }
        markCount -= n
        let index = (frame / periodFrames - n) % markCapacity
        let mark = marks[index]
        frame = mark.frame
        volumeGain = mark.volumeGain
        appliedVolumeBits.store(volumeGain.bitPattern, ordering: .relaxed)
        for (i, slot) in slots.enumerated() {
            let m = slotMarks[index * slots.count + i]
            guard m.active && m.epoch == slot.epoch else { continue }
            slot.ring.rewindRead(to: m.readPosition)
            slot.gain = m.gain
            slot.currentGainBits.store(m.gain.bitPattern, ordering: .relaxed)
            slot.publishCounts(consumed: m.consumed, mixedEnd: m.lastMixedEndFrame)
            slot.starved.store(m.starved, ordering: .relaxed)
            slot.soundingNow = m.soundingNow
        }
        renderedFrames.store(frame, ordering: .releasing)
        return n
    }

    /// The device has played every frame before `frame`: the periods that ended by then can no
    /// longer be taken back, and what they read from the rings goes back to the producers.
    /// Rendering thread only. Real-time safe.
    public func settle(playedThrough frame: Int) {
        while markCount > 0 {
            let oldest = (self.frame / periodFrames - markCount) % markCapacity
            guard marks[oldest].frame + periodFrames <= frame else { return }
            dropMark(oldest)
        }
    }

    /// Keeps the state at the start of the period about to be rendered; when the ring of marks is
    /// full, the oldest period becomes final first.
    @inline(__always)
    private func keepMark() {
        let index = (frame / periodFrames) % markCapacity
        if markCount == markCapacity { dropMark(index) }
        marks[index] = Mark(frame: frame, volumeGain: volumeGain)
        for (i, slot) in slots.enumerated() {
            // A slot not active is not read: a free one's gain, sounding state and ring are the
            // control thread's, which may be activating it now (`SourceSlot.activate`, ordered
            // before this thread's reads only by the acquiring load of an active phase).
            guard slot.phase.load(ordering: .acquiring) == SourceSlot.Phase.active.rawValue else {
                slotMarks[index * slots.count + i] = .inactive(epoch: slot.epoch)
                continue
            }
            slotMarks[index * slots.count + i] = SlotMark(
                epoch: slot.epoch, active: true, readPosition: slot.ring.readPosition, gain: slot.gain,
                consumed: slot.consumed.load(ordering: .relaxed),
                lastMixedEndFrame: slot.lastMixedEndFrame.load(ordering: .relaxed),
                starved: slot.starved.load(ordering: .relaxed), soundingNow: slot.soundingNow)
        }
        markCount += 1
    }

    /// Forgets the oldest mark (at `index`): the rings are released up to where its period ended —
    /// the next mark's read positions, or, when it was the only one, where they are read to now. A
    /// slot is touched only while it holds the same source as then (`epoch`) and is active: a freed
    /// slot's ring is the control thread's to reset.
    private func dropMark(_ index: Int) {
        markCount -= 1
        let next = (index + 1) % markCapacity
        for (i, slot) in slots.enumerated()
        where slot.phase.load(ordering: .acquiring) == SourceSlot.Phase.active.rawValue {
            if markCount > 0 {
                let m = slotMarks[next * slots.count + i]
                if m.active && m.epoch == slot.epoch { slot.ring.release(upTo: m.readPosition) }
            } else {
                slot.ring.release(upTo: slot.ring.readPosition)
            }
        }
    }

    /// Whether what the zone mixes changed since the last call (see `changed`). Rendering thread
    /// only, after `render`. Real-time safe.
    public func takeChanged() -> Bool {
        defer { changed = false }
        return changed
    }

    /// Multiplies the mix by the zone volume, ramping toward a new value at the zone's ramp speed.
    @inline(__always)
    private func applyVolume(samples: Int) {
        let target = Float(bitPattern: volumeBits.load(ordering: .acquiring))
        var g = volumeGain
        if g == target {
            if g != 1 { for i in 0..<samples { mix[i] *= g } }
            return
        }
        var i = 0
        for _ in 0..<periodFrames {
            if g < target { g = min(target, g + rampStep) } else if g > target { g = max(target, g - rampStep) }
            for _ in 0..<channels {
                mix[i] *= g
                i += 1
            }
        }
        volumeGain = g
        appliedVolumeBits.store(g.bitPattern, ordering: .relaxed)
    }

    /// Mixes one period of `slot` into `mix`; `filled`: whether `mix` already holds other slots'
    /// frames (if not, this slot's frames are the first: they are written, not added). Returns
    /// whether `mix` holds this period's sum now.
    @inline(__always)
    private func renderSlot(_ slot: SourceSlot, filled: Bool, releasing: Bool = false) -> Bool {
        // A slot let go of fades out as a pause does (`render`).
        let pausing = releasing || slot.pauseRequested.load(ordering: .acquiring)
        if slot.drainedFlag.load(ordering: .relaxed) { return filled }
        // Frames its producer asked to drop unplayed (from before a loss, played in the source's
        // other zones meanwhile): up to the source frame it named, counted as heard there, as the
        // frames it dropped for it were. Not taken back (a barrier), so released at once.
        let upTo = slot.discardUpTo.load(ordering: .acquiring)
        if upTo >= 0 {
            let dropped = slot.ring.discard(count: max(0, upTo - slot.ringStart) * channels) / channels
            slot.skipped.add(dropped, ordering: .releasing)
            slot.discardUpTo.store(-1, ordering: .releasing)
            eventInPeriod = true
        }
        if pausing && slot.gain == 0 {
            if !slot.pausedNow.load(ordering: .relaxed) { eventInPeriod = true }
            slot.pausedNow.store(true, ordering: .releasing)
            if slot.soundingNow {
                // A source at volume 0 (the only one sounding at gain 0) stops where its pause
                // begins: it has no fade to play out.
                slot.sounding.record(on: nil, off: frame)
                slot.soundingNow = false
                changed = true
                eventInPeriod = true
            }
            return filled
        }
        if !pausing && slot.pausedNow.load(ordering: .relaxed) {
            slot.pausedNow.store(false, ordering: .releasing)
            eventInPeriod = true
        }
        let target: Float = pausing ? 0 : slot.targetGain
        let custom = Float(bitPattern: slot.rampStepBits.load(ordering: .relaxed))
        // A pause always uses the zone's ramp, so it is consumed up to the same click-free fade.
        let rampStep = custom > 0 && !pausing ? custom : self.rampStep
        // Frames of the ramp toward the target, and how many frames to take from the ring: a pausing
        // source is consumed only up to the frame where its fade reaches 0, so it resumes from the
        // very next sample.
        let distance = abs(target - slot.gain)
        let fullRamp = distance == 0 ? 0 : Int((distance / rampStep).rounded(.up))
        let rampFrames = min(periodFrames, fullRamp)
        let want = pausing ? rampFrames : periodFrames
        // Steady gain into an empty mix: read the ring straight into it (see `render`).
        let direct = !filled && rampFrames == 0 && want > 0
        let got =
            want == 0
            ? 0
            : slot.ring.read(into: direct ? mix : scratch, count: want * channels, releasing: markCapacity == 0)
                / channels
        if got > 0 && slot.startedAtFrame.load(ordering: .relaxed) < 0 {
            slot.startedAtFrame.store(frame, ordering: .releasing)
            eventInPeriod = true
        }
        var ranDry = false
        if got < want {
            if slot.endOfStream.load(ordering: .acquiring) && slot.ring.readable == 0 {
                slot.drainedAtFrame.store(frame + got, ordering: .relaxed)
                slot.drainedFlag.store(true, ordering: .releasing)
                eventInPeriod = true
            } else if !pausing && slot.startedAtFrame.load(ordering: .relaxed) >= 0 && !slot.isBehind {
                // Ran dry once heard (a gap). Before its first frame a source is not starved: it
                // has not started yet (its stream is still connecting), and nothing is heard missing;
                // nor while its producer has yet to write it in step again after a loss (`isBehind`).
                slot.starved.add(1, ordering: .relaxed)
                ranDry = true
            }
        }
        let startGain = slot.gain
        // Ramp segment, then the flat rest at the target.
        let rampPart = min(got, rampFrames)
        let step = rampFrames == 0 ? 0 : (target > slot.gain ? rampStep : -rampStep)
        var g = slot.gain
        if direct {
            // What `mixAdd` into a cleared mix gives, bit for bit: the frames times the gain
            // (none at gain 0), silence after the last frame read.
            let n = got * channels
            if g == 0 {
                mix.update(repeating: 0, count: n)
            } else if g != 1 {
                for i in 0..<n { mix[i] *= g }
            }
            (mix + n).update(repeating: 0, count: periodFrames * channels - n)
        } else if !filled {
            mix.update(repeating: 0, count: periodFrames * channels)
        }
        if rampPart > 0 {
            // Rising ramps start one step up and falling ones at the current gain, so no frame of a
            // fade is mixed at gain 0: every frame a source gives up is heard, however softly.
            mixAdd(
                into: mix, from: scratch, frames: rampPart, channels: channels,
                startGain: step > 0 ? g + step : g, step: step)
            g += step * Float(rampPart)
            if (step > 0 && g > target) || (step < 0 && g < target) || rampPart == fullRamp { g = target }
        }
        if got > rampPart && !direct {
            mixAdd(
                into: mix + rampPart * channels, from: scratch + rampPart * channels,
                frames: got - rampPart, channels: channels, startGain: g, step: 0)
        }
        if got == 0 && pausing { g = target }  // nothing buffered: the fade is silent anyway
        trackSounding(
            slot, got: got, startGain: startGain, endGain: g, rising: step > 0, rampPart: rampPart, ranDry: ranDry,
            atVolumeZero: !pausing && slot.atVolumeZero.load(ordering: .relaxed))
        if got > 0 {
            // Mixed again after a break (a pause, a ring that ran dry): where, for the position of
            // frames heard before it (`framesHeard`). Not taken back (a barrier for `rewind`).
            let mixedEnd = slot.lastMixedEndFrame.load(ordering: .relaxed)
            if mixedEnd >= 0 && mixedEnd < frame {
                slot.breaks.record(
                    .init(wentOnAt: frame, consumed: slot.consumed.load(ordering: .relaxed), mixedEnd: mixedEnd))
                eventInPeriod = true
            }
            slot.publishCounts(consumed: slot.consumed.load(ordering: .relaxed) + got, mixedEnd: frame + got)
        }
        slot.gain = g
        slot.currentGainBits.store(g.bitPattern, ordering: .relaxed)
        if pausing && g == 0 {
            if !slot.pausedNow.load(ordering: .relaxed) { eventInPeriod = true }
            slot.pausedNow.store(true, ordering: .releasing)
        }
        return true
    }

    /// Records when the slot's frames start and stop being mixed at a gain above 0, or at all for a
    /// source at volume 0 (`atVolumeZero`: not pausing) — see `SourceSlot.sounding`. Rendering thread
    /// only. Real-time safe.
    @inline(__always)
    private func trackSounding(
        _ slot: SourceSlot, got: Int, startGain: Float, endGain: Float, rising: Bool, rampPart: Int, ranDry: Bool,
        atVolumeZero: Bool
    ) {
        let contributes = got > 0 && (atVolumeZero || startGain > 0 || endGain > 0 || rising)
        let onAtEnd = got == periodFrames && (atVolumeZero || endGain > 0)
        var on = contributes && !slot.soundingNow ? frame : nil
        var off: Int? = nil
        if (slot.soundingNow || on != nil) && !onAtEnd {
            // Heard up to the last frame mixed, or up to where a fade reached 0.
            off = frame + (atVolumeZero || endGain > 0 ? got : (startGain > 0 ? min(got, rampPart) : 0))
        }
        if on == nil && off == nil && ranDry && !slot.soundingNow {
            // Dry where it should sound and was not sounding: a resume into an empty ring. Starved
            // from here — an "on" and a tagged "off" at one frame, never heard —, unless the latest
            // "off" already says so (a ring still dry). Read back by the writer: no other writes.
            let s = slot.sounding.snapshot()
            if s.onFrom >= 0 && !s.onLast && !s.offTag { (on, off) = (frame, frame) }
        }
        if on != nil || off != nil {
            slot.sounding.record(on: on, off: off, tag: ranDry)
            changed = true
            eventInPeriod = true
        }
        slot.soundingNow = onAtEnd
    }
}
