import BatonTesting
import Engine
import Testing

/// The zone meter and the slots' sounding timelines: what the output thread says about the audio,
/// exact to the frame.
@Suite(.ownThread) struct MeterTests {
    func write(_ slot: SourceSlot, _ samples: [Float]) {
        samples.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
    }

    /// A full-scale square wave of ±0.5 on both channels reads peak and RMS −6.0 dBFS; a sine of
    /// 0.5, peak −6.0 and RMS −9.0; digital silence −200; values above full scale are clipped (the
    /// conversion clips them).
    @Test(arguments: [
        ([Float](repeating: 0.5, count: 960), -6.0, -6.0),
        (Signals.sine(frequency: 1_000, rate: 48_000, frames: 480, channels: 2, amplitude: 0.5), -6.0, -9.0),
        ([Float](repeating: 0, count: 960), -200.0, -200.0),
        ([Float](repeating: 1.5, count: 960), 0.0, 0.0),
    ])
    func measuresPeakAndRMS(samples: [Float], peakDb: Double, rmsDb: Double) throws {
        let mixer = ZoneMixer(channels: 2, periodFrames: 480, slotCount: 1, ringSamples: 4_096, rampFrames: 48)
        write(try #require(mixer.claimSlot(gain: 1)), samples)
        mixer.render()
        #expect(abs(mixer.meter.level.peakDb - peakDb) < 0.05, "\(mixer.meter.level)")
        #expect(abs(mixer.meter.level.rmsDb - rmsDb) < 0.05, "\(mixer.meter.level)")
    }

    /// Loudness turns on at the first period at or above −70 dBFS and off at the first period
    /// below it, at those periods' first frames; −71 dBFS is silent, −69 is not.
    @Test func loudnessFollowsTheThreshold() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 1, ringSamples: 4_096, rampFrames: 10)
        let slot = try #require(mixer.claimSlot(gain: 1))
        let quiet = Float(0.000_281_8)  // −71 dBFS
        let loud = Float(0.000_354_8)  // −69 dBFS
        write(slot, [Float](repeating: quiet, count: 200) + [Float](repeating: loud, count: 300) + [quiet])
        mixer.render()
        mixer.render()
        #expect(mixer.meter.loudness.snapshot().onFrom == -1, "never loud yet")
        mixer.render()
        #expect(mixer.meter.loudness.snapshot() == .init(onFrom: 200, offFrom: -1, offTag: false))
        mixer.render()
        mixer.render()
        mixer.render()
        let s = mixer.meter.loudness.snapshot()
        #expect(s == .init(onFrom: 200, offFrom: 500, offTag: false))
        #expect(s.isOn(at: 499) && !s.isOn(at: 500) && !s.isOn(at: 199))
    }

    /// A slot sounds from its first frame; a pause is heard until its fade reaches 0 (one ramp);
    /// a ring that runs dry stops it at the last frame mixed, tagged as starved, and it sounds again
    /// from the first frame mixed after. Periods before its first frame are not starved ones.
    @Test func soundingTracksStartPauseAndStarvation() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 1, ringSamples: 8_192, rampFrames: 40)
        let slot = try #require(mixer.claimSlot(gain: 1))
        mixer.render()  // nothing written yet: not started, so not starved (timeline or count)
        #expect(slot.sounding.snapshot() == .init(onFrom: -1, offFrom: -1, offTag: false))
        #expect(slot.starvedPeriods == 0)
        write(slot, [Float](repeating: 0.25, count: 250))
        mixer.render()
        #expect(slot.sounding.snapshot().onFrom == 100)
        mixer.render()
        mixer.render()  // 50 frames, then dry
        var s = slot.sounding.snapshot()
        #expect(s == .init(onFrom: 100, offFrom: 350, offTag: true))
        #expect(s.isOn(at: 349) && !s.isOn(at: 350))
        mixer.render()
        #expect(slot.starvedPeriods == 2, "the period that ran dry and the empty one after it")
        write(slot, [Float](repeating: 0.25, count: 1_000))
        mixer.render()
        s = slot.sounding.snapshot()
        #expect(s == .init(onFrom: 500, offFrom: 350, offTag: true, earlier: 100))
        #expect(s.isOn(at: 200) && !s.isOn(at: 400) && s.isOn(at: 500) && !s.isOn(at: 99))
        slot.pause()
        mixer.render()  // fades over 40 frames: heard up to 640
        s = slot.sounding.snapshot()
        #expect(s == .init(onFrom: 500, offFrom: 640, offTag: false, earlier: 350, earliest: 100))
        #expect(slot.framesHeard(atZoneFrame: 640) == slot.framesConsumed)
        #expect(slot.framesHeard(atZoneFrame: 620) == slot.framesConsumed - 20)
    }

    /// A resume whose fade-in begins at the frame where the pause's fade-out reached 0 (fades as long
    /// as a period) leaves the slot sounding throughout: its "off" and "on" fall on one frame, and the
    /// timeline says which came last. An "on" and "off" within one period at one frame is never heard.
    @Test func aResumeWhereThePauseFadeEndedSoundsThroughout() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 1, ringSamples: 8_192, rampFrames: 100)
        let slot = try #require(mixer.claimSlot(gain: 1))
        write(slot, [Float](repeating: 0.25, count: 1_000))
        mixer.render()
        slot.pause()
        mixer.render()  // fades out over 100..200
        #expect(slot.sounding.snapshot() == .init(onFrom: 0, offFrom: 200, offTag: false))
        slot.resume()
        mixer.render()  // fades in from 200
        let s = slot.sounding.snapshot()
        #expect(s == .init(onFrom: 200, offFrom: 200, offTag: false, onLast: true, earlier: 0))
        #expect(s.isOn && s.isOn(at: 150) && s.isOn(at: 200) && s.isOn(at: 299))
        let never = Timeline()
        never.record(on: 300, off: 300)
        #expect(!never.snapshot().isOn && !never.snapshot().isOn(at: 300) && !never.snapshot().isOn(at: 299))
    }

    /// A pause whose fade takes the ring's last frames, then a resume before more are written: the
    /// source is starved from the resume's first frame — an "on" and a tagged "off" there, never
    /// heard — so it reads `buffering` once that frame is heard, not the `paused` of before (which it
    /// read for as long as its ring stayed empty: nothing recorded the resume). The silence between
    /// the fade's end and the resume stays a pause's, and a ring still dry records nothing more.
    @Test func aResumeIntoAnEmptyRingIsStarvedFromItsFirstFrame() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 1, ringSamples: 8_192, rampFrames: 40)
        let slot = try #require(mixer.claimSlot(gain: 1))
        write(slot, [Float](repeating: 0.25, count: 140))
        mixer.render()
        slot.pause()
        mixer.render()  // the fade takes the last 40 frames: heard up to 140
        #expect(slot.sounding.snapshot() == .init(onFrom: 0, offFrom: 140, offTag: false))
        mixer.render()
        slot.resume()
        mixer.render()  // from 300, dry
        let dry = Timeline.Snapshot(onFrom: 300, offFrom: 300, offTag: true, onLast: false, earlier: 140, earliest: 0)
        #expect(slot.sounding.snapshot() == dry)
        let s = slot.sounding.snapshot()
        #expect(!s.isOn(at: 200) && !s.isOn(at: 300) && !s.isOn(at: 350) && s.isOn(at: 100))
        mixer.render()
        #expect(slot.sounding.snapshot() == dry, "still dry: nothing more")
        write(slot, [Float](repeating: 0.25, count: 1_000))
        mixer.render()
        #expect(slot.sounding.snapshot().onFrom == 500 && slot.sounding.snapshot().isOn)
    }

    /// Four transitions are kept: a reader a device buffer behind sees the state of its own frame
    /// through an outage that came, went and came again meanwhile (it read "on" before the first
    /// when only the latest two were kept); before every kept one, the other kind than the oldest.
    @Test func readsBackThroughFourTransitions() {
        let t = Timeline()
        t.record(on: 100, off: nil)
        t.record(on: nil, off: 200)
        t.record(on: 300, off: nil)
        let s = t.snapshot()
        #expect(!s.isOn(at: 99) && s.isOn(at: 100) && s.isOn(at: 199) && !s.isOn(at: 200) && s.isOn(at: 300))
        #expect(s.runStart(at: 250) == 200 && s.runStart(at: 150) == 100 && s.runStart(at: 50) == nil)
        t.record(on: nil, off: 400)
        t.record(on: 500, off: nil)  // the first is forgotten: before the oldest kept (200, off), on
        let later = t.snapshot()
        #expect(later.isOn(at: 150) && !later.isOn(at: 250) && later.isOn(at: 350) && !later.isOn(at: 450))
        // The same kind twice: the later takes the earlier's place.
        t.record(on: 550, off: nil)
        #expect(t.snapshot().isOn(at: 520) == false && t.snapshot().onFrom == 550)
    }

    /// A position read a device delay behind the mix counts only this source's frames mixed before
    /// the frame heard, exactly, at every frame: across two pauses and a ring that ran dry and
    /// refilled, all within that delay (a Snapcast zone's second; a button pressed twice).
    @Test func framesHeardAreExactAcrossSeveralBreaks() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 1, ringSamples: 8_192, rampFrames: 40)
        let slot = try #require(mixer.claimSlot(gain: 1))
        // Each period's source frames are mixed at its start: (zone frame, frames mixed there).
        var periods: [(frame: Int, got: Int)] = []
        func render(_ n: Int) {
            for _ in 0..<n {
                let before = slot.framesConsumed
                let frame = mixer.nextFrame
                mixer.render()
                periods.append((frame, slot.framesConsumed - before))
            }
        }
        write(slot, [Float](repeating: 0.25, count: 650))
        render(2)
        slot.pause()
        render(2)  // a 40-frame fade, then nothing
        slot.resume()
        render(1)
        slot.pause()
        render(3)
        slot.resume()
        render(3)  // runs dry in the third
        render(2)
        write(slot, [Float](repeating: 0.25, count: 300))
        render(4)
        #expect(periods.contains { $0.got > 0 && $0.got < 100 }, "a period ran dry")
        var wrong: [String] = []
        for a in 0...mixer.nextFrame {
            let truth = periods.reduce(0) { $0 + max(0, min($1.got, a - $1.frame)) }
            let heard = slot.framesHeard(atZoneFrame: a)
            if heard != truth { wrong.append("\(a): \(heard) for \(truth)") }
        }
        #expect(wrong.count == 0, "frames read wrong, first \(wrong.prefix(3))")
    }
}
