import Glibc
import OSThread

// Writing a rendered period to the device, recovering from its faults without losing or repeating a
// frame (see ``WrittenFrames``), and measuring a device-clocked zone (delay, late cycles, rate).
// Output thread only; real-time safe.
extension DeviceOutput {
    /// Writes everything the device has not taken yet — frames it dropped at an earlier fault first,
    /// then the period just rendered — recovering from xruns and suspends on the way:
    ///
    /// - `-EPIPE` (xrun): counted in `xruns`; the frames the device took but never played
    ///   (`unplayedFrames`, read before `prepare` discards them) are written again after the prepare.
    ///   An underrun proper has played everything: nothing is written twice.
    /// - `-ESTRPIPE` (suspend): counted in `suspends`; `snd_pcm_resume` continues where the device
    ///   stopped (retried while it answers -EAGAIN). When it is refused (-ENOSYS, or the stream is left
    ///   in XRUN, which is how alsa-lib's ioplug reports a refusal), the stream is prepared and what it
    ///   dropped is written again, as after an xrun.
    /// - anything else (`-ENODEV`: gone): what the device dropped is kept for the reopen; false.
    ///
    /// Output thread; real-time safe.
    func deliver<Sink: PeriodSink>(to pcm: Sink, bufferFrames: Int) -> Bool {
        var delivered = 0
        while history.pending > 0 {
            let run = history.nextRun()
            let r = pcm.write(run.bytes, frames: run.frames)
            if r >= 0 {
                history.markSent(r)
                delivered += r
                framesSincePrepare += r
                continue
            }
            let code = Int32(r)
            if code == -EAGAIN || code == -EINTR { continue }
            if code == -EPIPE {
                xruns.add(1, ordering: .relaxed)
                if restart(pcm) { continue }
            } else if code == -ESTRPIPE {
                suspends.add(1, ordering: .relaxed)
                if resumeAfterSuspend(pcm) { continue }
            } else {
                history.rewind(pcm.unplayedFrames())
            }
            lastError.store(code, ordering: .releasing)
            return false
        }
        deliveredThisCycle = delivered
        return true
    }

    /// Takes back what a stopped device dropped and prepares it; false when it cannot be prepared
    /// (then what it dropped is kept for the reopen).
    private func restart<Sink: PeriodSink>(_ pcm: Sink) -> Bool {
        history.rewind(pcm.unplayedFrames())
        rateEstimator.reset()
        framesSincePrepare = 0
        lastDelayAfterWrite = 0
        return pcm.prepare() == 0
    }

    private func resumeAfterSuspend<Sink: PeriodSink>(_ pcm: Sink) -> Bool {
        rateEstimator.reset()
        var r = pcm.resume()
        while r == -EAGAIN && !stopping {
            sleepUntil(monotonicNanoseconds() + 10_000_000)  // still waking up (alsa-lib's recover waits 1 s)
            r = pcm.resume()
        }
        if r == 0 && !pcm.isInXrun { return true }
        return restart(pcm)
    }

    /// After a period was delivered to a device-clocked zone: its delay, whether the cycle came late
    /// (the device held less than a period when the writes began, after it had been full: it nearly
    /// ran dry), and the rate estimate (from a device that paces, not a `file` PCM).
    func measureDevice<Sink: PeriodSink>(_ pcm: Sink, bufferFrames: Int) {
        guard let delay = pcm.delay() else { return }
        delayFrames.store(delay + pcm.hiddenDelayFrames, ordering: .sequentiallyConsistent)
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
        rateEstimator.reset()
        framesSincePrepare = 0
        lastDelayAfterWrite = 0
        // Heard again from the first frame it dropped, written first — after a stall, once the
        // reopened device takes frames (`progressed`).
        if deviceOutage.snapshot().isOn {
            let first = framesPlayed.load(ordering: .relaxed) - history.pending
            if deviceStalled.load(ordering: .relaxed) {
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
