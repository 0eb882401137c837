import ALSA
import Glibc
import OSThread

// Rendering ahead (`DeviceSpec.rendersAhead`): a zone whose output keeps the device's whole buffer
// filled and wakes only when it holds `minimumHeldNanoseconds`, instead of once a period, and takes
// back what the device has not started playing when something changes. The device is the card
// (`clock: device`) or, for a `clock: system` zone, a `ClockedBuffer` the system clock plays.
// Output thread only; real-time safe.
extension DeviceOutput {
    /// Frames never taken back: the period the device may be playing (its pointer moves a period
    /// at a time on many cards) and the next one, which it may already be fetching.
    static func keptFrames(periodFrames: Int) -> Int { 2 * periodFrames }

    /// What a card rendered ahead holds when its output wakes: `minimumHeldNanoseconds` in whole
    /// periods, less than the buffer.
    static func lowWaterFrames(bufferFrames: Int, periodFrames: Int, rate: Int) -> Int {
        let periods = (minimumHeldNanoseconds * rate / 1_000_000_000 + periodFrames - 1) / periodFrames
        return min(bufferFrames - periodFrames, periods * periodFrames)
    }

    /// Plays until stopped or the device is lost. Each cycle:
    ///
    /// 1. when the doorbell rang (a new source, a gain, a pause, a release, the volume), takes back
    ///    every whole period the device and every zone's mixer can give back beyond `keptFrames`
    ///    (`snd_pcm_rewind`, `ZoneMixer.rewind`), so the change is rendered in from there;
    /// 2. renders what keeps the device above its low water (`minimumHeldNanoseconds` and a period)
    ///    and, while every source has a whole period ready (`ZoneMixer.hasPeriodReady`: a live
    ///    source is not run dry), up to the whole buffer, and writes it;
    /// 3. sleeps until the device is down to its low water (its wake-up threshold, `avail_min`, set
    ///    at open: `lowWaterFrames`), or stops, or the doorbell rings.
    ///
    /// A prepared stream is started as soon as it holds its low water (`snd_pcm_start`), not when
    /// its buffer is full. Faults are handled by `deliver` as on the period-by-period path.
    /// `devicePeriod`: the period the device granted (`PCM.Configuration.periodFrames`).
    func playAhead<Sink: RewindableSink>(on pcm: Sink, bufferFrames: Int, devicePeriod: Int, cycle: inout Int) {
        let period = spec.pcm.periodFrames
        let channels = spec.pcm.channels
        let rate = spec.pcm.rate
        let lowWater = Self.lowWaterFrames(bufferFrames: bufferFrames, periodFrames: period, rate: rate)
        // A clocked buffer plays frame by frame when called, fetching nothing ahead: a period is kept.
        // A card keeps two of its own periods, which may be longer than the one asked (dmix's
        // 1024 frames beside 480 asked): its pointer moves, and it fetches, a period of its own
        // at a time, and two asked periods would take back what it is playing.
        let kept = pcm.playsBetweenCalls ? Self.keptFrames(periodFrames: max(period, devicePeriod)) : period
        // A card that stops consuming (a stall) is waited for in steps, so that `stop` is seen.
        let waitMilliseconds = Int32(clamping: max(100, 2 * bufferFrames * 1_000 / rate))
        // How late the card may reach its low water and still count as playing: a period of its
        // own (its pointer may move a period at a time).
        let wakeMargin = max(period, devicePeriod)
        // Where the card stood (played, in zone frames) when a wait for its low water timed out
        // with the card short of it — whatever it played in that wait before it stopped: a card
        // that stalled but still runs (no error, no room). Its audible frame is not moved on
        // (`counters`) until a measure finds it moved since. Nil: playing.
        var stalledAt: Int? = nil
        var timedOut = false
        var rang = true
        var idleFrames = 0
        // When the running card last took frames (a stall: no error, no room, `played` stands).
        var progressAt = monotonicNanoseconds()
        var lastPlayed = -1
        // Whether this PCM can take back, asked once it holds more than it keeps: nothing is
        // rendered ahead until it said yes. A PCM that cannot (alsa-lib's `rate` plugin, a `plug`
        // that converts the rate: `snd_pcm_rewindable` is always 0) is kept at its low water and
        // a period, as without the setting: what was rendered ahead there would be heard before
        // any change, up to a buffer later. A card is first asked to take back a period of
        // silence before it plays (`refusalBeforeStart`); one that refused is not asked again.
        var takesBack: Bool? = nil
        if let off = RenderAheadOff(code: renderAheadOffCode.load(ordering: .acquiring)),
            off != .cannotRewind && off != .periodTooLong
        {
            takesBack = false
        } else {
            renderAheadOffCode.store(0, ordering: .releasing)
            if let off = refusalBeforeStart(pcm) {
                takesBack = false
                renderAheadIsOff(off)
            } else if bufferFrames < ((kept + period) / period + 1) * period {
                // It would never hold more than it keeps and a period in whole periods (where it is
                // asked whether it takes back): never rendered ahead, while the status said it was.
                // (480-frame periods in the default 1,920-frame buffer keep 960: it is asked at
                // 1,920.)
                takesBack = false
                renderAheadIsOff(.periodTooLong)
            }
        }
        while !stopping {
            wakeUps.add(1, ordering: .relaxed)
            var tookBack = false
            if rang && takesBack == true && history.pending == 0 && pcm.isRunning {
                switch takeBack(pcm, keeping: kept) {
                case .nothing: break
                case .done: tookBack = true
                case .refused(let code):
                    takesBack = false
                    renderAheadIsOff(.refused(code))
                }
            }
            let avail = self.room(in: pcm)
            // Stopped at once after a take-back with frames still in it: a PCM that cannot take
            // back but did not say so in `snd_pcm_rewind` (the xrun is recovered below). A card
            // that ran dry (the thread held off for the `kept` frames it left) has played all it
            // was given: an xrun, not a refusal.
            if tookBack && avail == -Int(EPIPE) && (pcm.unplayedFrames() ?? 0) > 0 {
                takesBack = false
                renderAheadIsOff(.refused(-EPIPE))
            }
            let held = avail < 0 ? 0 : max(0, bufferFrames - avail)
            let room = avail < 0 ? period : avail - history.pending
            // What the device needs to stay above its low water — until it was asked whether it
            // takes back, more than it keeps and a period, where it can be asked (a card whose own
            // period is long, as dmix's 1,024 frames beside 480 asked, keeps more than its low water
            // and a period: it was never asked, never rendered ahead, and the status said it did)
            // — and what may be rendered ahead.
            let target = takesBack == nil ? max(lowWater + period, kept + period + 1) : lowWater + period
            let needed = max(0, (target - held + period - 1) / period)
            let ahead = takesBack == true
            var periods = 0
            while periods < room / period && (periods < needed || (ahead && mixersHavePeriodReady)) {
                renderPeriod(period: period, channels: channels, cycle: &cycle)
                periods += 1
            }
            guard deliver(to: pcm, bufferFrames: bufferFrames) else {
                deviceLost(rendered: periods * period)
                return
            }
            // Started once it holds its low water and a period — or once no other period fits: a
            // stream reopened or restarted with frames written again (`deliver`) that left it less
            // than a period of room, and short of that, was never started, nothing more rendered
            // into it (a zone "available" in silence for good). Asked after the delivery, which may
            // have restarted it (an xrun met in the write: then it holds what was written since).
            if !pcm.isRunning {
                let free = self.room(in: pcm)
                let fill = free < 0 ? 0 : bufferFrames - free
                if fill > 0 && (fill >= lowWater + period || free < period) { _ = pcm.start() }
            }
            // Asked once, when it holds more than it keeps and a period: what it can take back then
            // is beyond what it may be playing or fetching.
            if takesBack == nil && pcm.isRunning {
                let free = self.room(in: pcm)
                if free >= 0 && bufferFrames - free > kept + period {
                    let can = pcm.rewindable() > 0
                    takesBack = can
                    if !can { renderAheadIsOff(.cannotRewind) }
                }
            }
            // A system-clocked device on probation has taken what it was given (a clocked buffer
            // does not play between calls: its progress is not watched below).
            if spec.clock == .system && unprovenSince != nil && pcm.isRunning && deliveredThisCycle > 0 {
                progressed()
            }
            // Asked before the publication, which must not block (`recordDelay`). A card plays on
            // between wake-ups, so the status moves its audible frame with the card's clock. A
            // clocked buffer hands its PCM what the clock played only when the thread wakes: until
            // then a `file` PCM or a pipe has not had it, so the audible frame stays what the PCM
            // was given (it steps at each wake-up).
            //
            // How far: until the thread wakes again, when the card is down to its low water, and a
            // period; a card that is not there by then has stalled, and its wait times out
            // (`wakeMilliseconds`). Not at all once one did, until the card is seen playing again:
            // moved on, the audible frame ran ahead of a stalled card to everything written, and
            // went back at each wait. The card almost always stops within a wait, having played
            // some of it: asked whether it played since the wake-up before, it was moved on again
            // from where it stopped for a second whole wait (up to the buffer), and went back twice.
            let measured = pcm.delay()
            if let measured {
                let playedNow = history.sent - measured
                if let at = stalledAt {
                    if playedNow != at { stalledAt = nil }
                } else if timedOut && held > lowWater {
                    stalledAt = playedNow
                }
            }
            let moves = pcm.isRunning && pcm.playsBetweenCalls && stalledAt == nil
            publishingCounters {
                framesPlayed.add(periods * period, ordering: .sequentiallyConsistent)
                recordDelay(measured, of: pcm, bufferFrames: bufferFrames)
                // Not measured: not moved on from a stale measure either.
                delayMeasuredAt.store(
                    moves && measured != nil ? monotonicNanoseconds() : 0, ordering: .sequentiallyConsistent)
                extrapolationLimit.store(
                    max(0, (measured ?? 0) - lowWater) + wakeMargin, ordering: .sequentiallyConsistent)
            }
            // What the sink holds (a `file` PCM's hidden delay comes after it, what is still to be
            // written before it).
            let delay = delayFrames.load(ordering: .relaxed) - pcm.hiddenDelayFrames - history.pending
            let now = monotonicNanoseconds()
            // In zone frames (what every mixer has rendered is `history.rendered`): what the sink has
            // played, beyond which it can take back.
            let played = history.sent - delay
            if !pcm.isRunning || !pcm.playsBetweenCalls {
                progressAt = now
            } else if played != lastPlayed {
                progressAt = now
                if lastPlayed >= 0 { progressed() }
            } else if now - progressAt >= Self.stallLimitNanoseconds {
                return stalled(pcm)
            }
            lastPlayed = played
            // While frames wait to be written again, or until the device said it takes back,
            // nothing is taken back: a change that rings then is rendered after what was rendered
            // already, and `nextFrame` says so (it said `kept` frames on while unasked: up to 30 ms
            // early).
            let keep = history.pending > 0 || takesBack != true ? bufferFrames + history.pending : kept
            for m in mixers {
                m.settle(playedThrough: played)
                m.publishChangeFrame(played: played, keepFrames: keep, rate: rate, now: now)
            }
            // Stopping idle: what was rendered ahead is silence; taken back, the device plays out
            // only what it keeps (tens of ms, not the buffer) before a request can restart it.
            let check = stopIfIdle(pcm, rendered: periods * period, idleFrames: &idleFrames) {
                guard ahead && pcm.isRunning && history.pending == 0 else { return }
                if case .refused(let code) = takeBack(pcm, keeping: kept) {
                    takesBack = false
                    renderAheadIsOff(.refused(code))
                }
                // A part period given back with the whole ones is written again now, not left
                // pending across the drain, uncounted, ahead of the next sound at the restart.
                if history.pending > 0 { _ = deliver(to: pcm, bufferFrames: bufferFrames) }
            }
            switch check {
            case .playing: break
            case .restarted:
                rang = false
                continue
            case .lost: return
            }
            // Until the device is down to its low water: the card wakes the thread there (its
            // `avail_min`, set at open), or at once when it stops (an xrun, a suspend, an unplug),
            // or the bell rings. A card holding no more than its low water (its sources had nothing
            // ready to render ahead, or it is not running) would wake it at once: then a period's
            // sleep on the bell alone.
            // A card is waited for as long as it should take to get there and a period more (a card
            // that stalls is found then, `stalledAt`); a clocked buffer, which does not stall, longer.
            // A card whose descriptor wakes the thread with nothing to say (room short of its
            // threshold, no error: a plugin's own wake-up, the test card's commands) is waited for
            // again until that time is up: `timedOut` says the card did not get there in time.
            timedOut = false
            if pcm.isRunning && delay > lowWater {
                let wakeMilliseconds =
                    pcm.playsBetweenCalls
                    ? Int32(clamping: (delay - lowWater + 2 * wakeMargin) * 1_000 / rate + 1) : waitMilliseconds
                let waitMs = min(wakeMilliseconds, waitMilliseconds)
                let until = monotonicNanoseconds() + Int(waitMs) * 1_000_000
                var waited = pcm.wait(milliseconds: waitMs, orUntilReadable: doorbell.fd)
                while pcm.playsBetweenCalls && waited == .timedOut && !stopping && monotonicNanoseconds() < until {
                    let left = Int32(clamping: (until - monotonicNanoseconds() + 999_999) / 1_000_000)
                    waited = pcm.wait(milliseconds: max(0, left), orUntilReadable: doorbell.fd)
                }
                switch waited {
                case .other:
                    doorbell.drain()
                    rang = true
                case .ready:
                    rang = false
                case .timedOut:
                    rang = false
                    timedOut = true
                }
            } else {
                rang = doorbell.waitForPost(milliseconds: Int32(clamping: max(1, period * 1_000 / rate)))
            }
        }
    }

    /// True when every zone's sources have a whole period ready. Output thread; real-time safe.
    private var mixersHavePeriodReady: Bool {
        for m in mixers where !m.hasPeriodReady { return false }
        return true
    }

    /// Says (the status, then the monitor's log and event) that the zone plays as without
    /// rendering ahead, and why. Output thread; real-time safe.
    private func renderAheadIsOff(_ why: RenderAheadOff) {
        renderAheadOffCode.store(why.code, ordering: .releasing)
        availabilityObserver?()
    }

    /// Before a card first plays: writes it a period of silence and takes it back, so that a card
    /// that cannot take back is found before it plays anything instead of at the first change.
    /// `.refused` with the negative errno of a refused `snd_pcm_rewind`, or -EPIPE when the stream
    /// stopped at it (the kernel's indirect-PCM helpers, the Raspberry Pi's bcm2835: their ack
    /// fails a rewind in a prepared stream as in a running one; at the first change it would stop,
    /// an xrun); `.keptWhatItTookBack` when the rewind said yes but the PCM still counts the
    /// frames as to be played, or cannot say what it holds (a plugin that handed them on at once,
    /// as PulseAudio's `pulse` does: rendering ahead there would play every take-back twice); nil
    /// when it took back, or took back nothing (a PCM that cannot rewind at all, asked again once
    /// it plays). Leaves the card prepared and empty. A `clock: system` zone's buffer always takes
    /// back: it has no `probeSilence`, and is not asked. Output thread; real-time safe.
    func refusalBeforeStart<Sink: RewindableSink>(_ pcm: Sink) -> RenderAheadOff? {
        guard let silence = probeSilence, !pcm.isRunning else { return nil }
        let written = pcm.write(silence, frames: spec.pcm.periodFrames)
        guard written > 0 else { return nil }  // a card that cannot be written: the loop meets it
        let back = pcm.rewind(frames: written)
        var off: RenderAheadOff? = nil
        if back < 0 {
            off = .refused(Int32(clamping: back))
        } else if pcm.avail() == -Int(EPIPE) {
            off = .refused(-EPIPE)
        } else if back == written, heldAfterTakingBack(pcm) != 0 {
            off = .keptWhatItTookBack
        }
        if off != nil || back != written { _ = pcm.prepare() }
        return off
    }

    /// What the PCM says it holds, right after it took back all it was given before it plays:
    /// 0 when it took back. `pulse` cannot say until its server has sent it the stream's timing,
    /// a few milliseconds after the first write, so a failed `snd_pcm_delay` is asked again every
    /// millisecond, up to 50 times; nil when it never says (which is not a yes either). Output
    /// thread, before the card plays: it may sleep.
    private func heldAfterTakingBack<Sink: RewindableSink>(_ pcm: Sink) -> Int? {
        for _ in 0..<50 {
            if let held = pcm.delay() { return held }
            sleepUntil(monotonicNanoseconds() + 1_000_000)
        }
        return nil
    }

    /// What `takeBack` did.
    private enum TakeBack {
        case nothing, done
        case refused(Int32)
    }

    /// Takes back from the device and every zone the whole periods both can give back beyond
    /// `kept` frames: the device then holds `kept` frames (or a little more) and every zone renders
    /// again from the first frame taken back. `refused` with the negative errno `snd_pcm_rewind`
    /// returned (nothing was taken back). Output thread; real-time safe.
    private func takeBack<Sink: RewindableSink>(_ pcm: Sink, keeping kept: Int) -> TakeBack {
        let period = spec.pcm.periodFrames
        let rewindable = pcm.rewindable()
        guard rewindable > kept else { return .nothing }
        var periods = (rewindable - kept) / period
        for m in mixers { periods = min(periods, m.rewindablePeriods) }
        guard periods > 0 else { return .nothing }
        let r = pcm.rewind(frames: periods * period)
        if r < 0 { return .refused(Int32(clamping: r)) }
        guard r > 0 else { return .nothing }
        // Whole periods only: a device that gave back a part period more (its pointer moved
        // between the two calls) is written that part again from the history, before what is
        // rendered next. (Moving forward over it again, `snd_pcm_forward`, can fail or move less
        // — an xrun between — and every frame after would have gone out that much early.)
        let whole = r / period
        history.takeBack(whole * period)
        history.rewind(r % period)
        guard whole > 0 else { return .nothing }
        for m in mixers { m.rewind(periods: whole) }
        publishingCounters {
            framesPlayed.subtract(whole * period, ordering: .sequentiallyConsistent)
            delayFrames.subtract(whole * period, ordering: .sequentiallyConsistent)
        }
        // Emptied on purpose: the writes that follow do not find it nearly run dry (a late cycle).
        lastDelayAfterWrite = 0
        rewinds.add(1, ordering: .relaxed)
        framesTakenBack.add(whole * period, ordering: .relaxed)
        return .done
    }
}
