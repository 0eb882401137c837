import Glibc
import OSThread

// Writing a rendered period to the device, recovering from its faults without losing or repeating a
// frame (see ``WrittenFrames``), and measuring a device-clocked zone (delay, late cycles, rate).
// Output thread only; real-time safe.
extension DeviceOutput {
    /// Restarts (xrun, suspend) one delivery makes before it gives the device up (`deliver`).
    public static let recoveryLimit = 8

    /// Writes everything the device has not taken yet — frames it dropped at an earlier fault first,
    /// then the period just rendered — recovering from xruns and suspends on the way:
    ///
    /// - `-EPIPE` (xrun): counted in `xruns`; the frames the device took but never played
    ///   (`unplayedFrames`, read before `prepare` discards them) are written again after the prepare.
    ///   An underrun proper has played everything: nothing is written twice.
    /// - `-ESTRPIPE` (suspend): counted in `suspends`; `snd_pcm_resume` continues where the device
    ///   stopped (retried while it answers -EAGAIN, for at most `stallLimitNanoseconds`). When it
    ///   is refused (-ENOSYS, or the stream is left in XRUN, which is how alsa-lib's ioplug reports
    ///   a refusal) or still -EAGAIN then, the stream is prepared and what it dropped is written
    ///   again, as after an xrun.
    /// - anything else (`-ENODEV`: gone): what the device dropped is kept for the reopen; false.
    ///
    /// What a stream that is not running, or one catching up (written again what it dropped at a
    /// fault or a reopen: up to a buffer more than the periods just rendered), has no room for is
    /// not written now: it stays pending (`history.pending`, counted as delay) for the next cycle,
    /// after the wait for room; a stream not running is started once full. Written at once, the
    /// rest blocked the write until the device took frames — on a card that takes none (a dead
    /// DAC, one that died at the xrun) for the kernel's 10 s, then -EIO, again at every reopen, the
    /// stall never seen and the zone "available". (Room is asked only then: `snd_pcm_avail` is a
    /// system call, and the periods of an ordinary cycle were rendered for the room waited for;
    /// while catching up the cycle renders nothing until the rest fits, `play`.)
    ///
    /// Output thread; real-time safe.
    func deliver<Sink: PeriodSink>(to pcm: Sink, bufferFrames: Int) -> Bool {
        var delivered = 0
        var recoveries = 0
        while history.pending > 0 {
            var run = history.nextRun()
            var full = false
            if catchingUp || !pcm.isRunning {
                let room = self.room(in: pcm)
                full = room == 0
                if room > 0 { run.frames = min(run.frames, room) }
            }
            // Full: a running stream is left to play; one not running is started (a stopped one —
            // xrun, suspend, gone — refuses with the error its write would meet, handled below).
            var r: Int
            var call = LastError.Call.write
            if full {
                catchingUp = true
                if pcm.isRunning { break }
                let started = pcm.start()
                if started == 0 && pcm.isRunning { break }
                // Started and stopped at once (ran dry: an xrun, recovered as one), or not started.
                r = Int(started < 0 ? started : pcm.isInXrun ? -EPIPE : -EBADFD)
                call = .start
            } else {
                r = pcm.write(run.bytes, frames: run.frames)
            }
            if r >= 0 {
                history.markSent(r)
                delivered += r
                framesSincePrepare += r
                continue
            }
            let code = Int32(r)
            if code == -EAGAIN || code == -EINTR { continue }
            // A device that fails again at once, time after time (an xrun at every start), is not
            // recovered here for ever, this thread at real-time priority: it is taken for stalled —
            // reopened after a pause, and unavailable until it takes frames (`progressed`).
            // (A system-clocked zone has no stall watch to clear it: not there.)
            recoveries += 1
            let recover = recoveries <= Self.recoveryLimit
            if !recover && spec.clock == .device {
                stoppedAtEachRestart.store(true, ordering: .releasing)
                deviceStalled.store(true, ordering: .releasing)
            }
            // The error that ends the delivery: the write's (or start's), or the prepare's that
            // failed to restart it.
            var failure = (code: code, call: call)
            if code == -EPIPE && recover {
                xruns.add(1, ordering: .relaxed)
                let prepared = restart(pcm)
                if prepared == 0 { continue }
                failure = (prepared, .prepare)
            } else if code == -ESTRPIPE && recover {
                suspends.add(1, ordering: .relaxed)
                let resumed = resumeAfterSuspend(pcm)
                if resumed == 0 { continue }
                failure = (resumed, .prepare)
            } else {
                history.rewind(unplayed(pcm))
            }
            lastError.store(failure.code, failure.call)
            return false
        }
        if history.pending == 0 { catchingUp = false }
        deliveredThisCycle = delivered
        return true
    }

    /// Takes back what a stopped device dropped and prepares it; the prepare's error when it cannot
    /// be prepared (then what it dropped is kept for the reopen), else 0.
    private func restart<Sink: PeriodSink>(_ pcm: Sink) -> Int32 {
        history.rewind(unplayed(pcm))
        catchingUp = true
        newStream()
        return pcm.prepare()
    }

    /// The device starts a new stream, empty, everything sent before played or taken back (a
    /// prepare, an open): its first writes, made before it starts, must not count as the device
    /// nearly running dry (a late cycle at every restart), nor feed the rate estimate. Output
    /// thread.
    func newStream() {
        rateEstimator.reset()
        framesSincePrepare = 0
        lastDelayAfterWrite = 0
        playedAtLastMeasure = history.sent
    }

    /// Resumes a suspended device, or restarts it (`restart`) when it cannot resume: 0, or the
    /// prepare's error. A device still waking up (-EAGAIN) is asked again every 10 ms for at most
    /// `stallLimitNanoseconds`, then restarted as one that cannot resume: asked for as long as it
    /// said -EAGAIN, it held this thread, the zone "available" and its sources "playing" in
    /// silence, with no limit (alsa-lib's `snd_pcm_recover` has none either). A device that cannot
    /// be prepared then is lost, and reopened with backoff.
    private func resumeAfterSuspend<Sink: PeriodSink>(_ pcm: Sink) -> Int32 {
        rateEstimator.reset()
        // The card stopped at the suspend: while it wakes, its audible frame is not moved on from
        // where the suspend found it as if it played (`counters`), nor back to its last measure
        // (what it played since that measure counted as not heard: behind where it stopped).
        publishingCounters {
            let played = playedSinceMeasure(
                at: delayMeasuredAt.load(ordering: .sequentiallyConsistent),
                limit: extrapolationLimit.load(ordering: .sequentiallyConsistent))
            let delay = delayFrames.load(ordering: .sequentiallyConsistent)
            delayFrames.store(max(0, delay - played), ordering: .sequentiallyConsistent)
            delayMeasuredAt.store(0, ordering: .sequentiallyConsistent)
        }
        let giveUpAt = monotonicNanoseconds() + Self.stallLimitNanoseconds
        var r = pcm.resume()
        while r == -EAGAIN && !stopping && monotonicNanoseconds() < giveUpAt {
            sleepUntil(min(giveUpAt, monotonicNanoseconds() + 10_000_000))  // still waking up
            r = pcm.resume()
        }
        if r == 0 && !pcm.isInXrun { return 0 }
        return restart(pcm)
    }

    /// Frames the stopped `pcm` took but did not play, to be written again: what it says, or —
    /// when it cannot say (a kernel card unplugged fails `snd_pcm_status` with -ENODEV) — all it
    /// took since the last measure of its delay (what it held then and the writes since: about a
    /// buffer). That plays again what it played since then (at most a wake-up) rather than count
    /// as heard what it held (up to its buffer, as it did: the music resumed that far past the
    /// cut). Output thread; real-time safe.
    func unplayed<Sink: PeriodSink>(_ pcm: Sink) -> Int {
        pcm.unplayedFrames() ?? max(0, history.sent - playedAtLastMeasure)
    }

    /// After a period was delivered to a device-clocked zone, with `delay` the device's delay asked
    /// just before (`pcm.delay()`, outside `publishingCounters`: asking can block — a clocked
    /// buffer hands its `file` PCM what the clock played, and a FIFO behind it whose reader stalls
    /// blocks that write — and a reader of the counters waits while they are being published):
    /// records the delay, whether the cycle came late (the device held less than a period when the
    /// writes began, after it had been full: it nearly ran dry), and the rate estimate (from a
    /// device that paces, not a `file` PCM). In `publishingCounters`.
    func recordDelay<Sink: PeriodSink>(_ delay: Int?, of pcm: Sink, bufferFrames: Int) {
        guard let delay else {
            // Not known (the card stopped or was suspended just after the write: -EPIPE,
            // -ESTRPIPE): what was sent since the last measure counts as not played yet, so the
            // audible frame stays where it was measured. Left as it was, the frames counted as
            // played this cycle moved the audible frame (and positions) on by up to a buffer.
            // At most a buffer: a PCM that never says again would freeze positions for good.
            let since = min(max(0, history.sent - playedAtLastMeasure), bufferFrames)
            delayFrames.store(since + pcm.hiddenDelayFrames + history.pending, ordering: .sequentiallyConsistent)
            return
        }
        playedAtLastMeasure = history.sent - delay
        // What `deliver` left pending is not in the device yet: not heard either.
        delayFrames.store(delay + pcm.hiddenDelayFrames + history.pending, ordering: .sequentiallyConsistent)
        let period = spec.pcm.periodFrames
        if lastDelayAfterWrite >= bufferFrames - period && delay - deliveredThisCycle < period {
            lateCycles.add(1, ordering: .relaxed)
        }
        lastDelayAfterWrite = delay
        // A rate is the card's: not a `file` PCM's, nor the system clock's (a `ClockedBuffer`).
        guard pcm.hiddenDelayFrames == 0 && spec.clock == .device else { return }
        rateEstimator.add(nanoseconds: monotonicNanoseconds(), frames: history.sent - delay)
        rateEstimateBits.store((rateEstimator.ppm ?? .nan).bitPattern, ordering: .relaxed)
    }

    /// A PCM was opened: a new stream. Output thread.
    func deviceOpened() {
        catchingUp = history.pending > 0
        newStream()
        // Heard again from the first frame it dropped, written first — after a stall, once the
        // reopened device takes frames (`progressed`).
        if deviceOutage.snapshot().isOn {
            let first = framesPlayed.load(ordering: .relaxed) - history.pending
            if deviceStalled.load(ordering: .relaxed) || unprovenSince != nil {
                reopenedAt = first
            } else {
                deviceOutage.record(on: nil, off: first)
            }
        }
    }

    /// The PCM is gone: until it is back, the frames it dropped count as delay, so the zone's
    /// `audibleFrame` (and the position of what plays there) is the last frame it consumed.
    /// `rendered`: frames rendered in the cycle that found it gone, counted in the same publication
    /// (apart, a status read between the two saw them played and not delayed: heard too soon).
    func deviceLost(rendered: Int = 0) {
        publishingCounters {
            framesPlayed.add(rendered, ordering: .sequentiallyConsistent)
            delayFrames.store(history.pending, ordering: .sequentiallyConsistent)
            delayMeasuredAt.store(0, ordering: .sequentiallyConsistent)
        }
        // Nothing from the first frame it did not play is heard until it is back.
        if !deviceOutage.snapshot().isOn {
            deviceOutage.record(on: framesPlayed.load(ordering: .relaxed) - history.pending, off: nil)
        }
        rateEstimateBits.store(Double.nan.bitPattern, ordering: .relaxed)
    }

    /// The rate estimate, nil when unknown. Any thread.
    var rateEstimatePPM: Double? {
        let v = Double(bitPattern: rateEstimateBits.load(ordering: .relaxed))
        return v.isNaN ? nil : v
    }
}
