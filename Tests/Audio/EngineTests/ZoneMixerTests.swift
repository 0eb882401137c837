import BatonTesting
import Engine
import Testing

/// The zone mixer without ALSA: exact samples, ramps, pause/resume positions.
@Suite(.ownThread) struct ZoneMixerTests {
    /// Rendering a busy mix (4 sources, ramps in flight) makes no heap allocation.
    @Test func renderDoesNotAllocate() throws {
        let mixer = ZoneMixer(channels: 2, periodFrames: 480, slotCount: 8, ringSamples: 1 << 16, rampFrames: 480)
        let tone = Signals.sine(frequency: 440, rate: 48_000, frames: 4_800, channels: 2)
        var slots: [SourceSlot] = []
        for _ in 0..<4 { slots.append(try #require(mixer.claimSlot(gain: 0.25))) }
        let feeder = FeedLoop(slots: slots, block: tone)
        feeder.topUp()
        mixer.render()
        var total: UInt64 = 0
        for cycle in 0..<1_000 {
            feeder.topUp()
            if cycle % 50 == 0 { slots[cycle / 50 % 4].setGain(cycle % 100 == 0 ? 0.05 : 0.3) }
            total += countAllocations { mixer.render() }
        }
        // Slots let go of, fading out over the ramp, then freed.
        for slot in slots[..<2] { mixer.release(slot) }
        let rest = FeedLoop(slots: Array(slots[2...]), block: tone)
        for _ in 0..<3 {
            rest.topUp()
            total += countAllocations { mixer.render() }
        }
        #expect(total == 0)
    }
}

extension ZoneMixerTests {
    /// The allocation counter sees allocations: a fresh array on the counting thread counts.
    @Test func allocationCounterCountsAllocations() {
        let n = countAllocations { _ = [Int](repeating: 7, count: Int.random(in: 100...200)) }
        #expect(n >= 1)
    }

    /// Renders `cycles` periods and returns the left channel of the mix.
    func renderLeft(_ mixer: ZoneMixer, cycles: Int, each: (Int) -> Void = { _ in }) -> [Float] {
        var out: [Float] = []
        for c in 0..<cycles {
            each(c)
            mixer.render()
            for f in 0..<mixer.periodFrames { out.append(mixer.mix[f * mixer.channels]) }
        }
        return out
    }

    /// Muting and unmuting a full-scale signal ramps: no sample-to-sample jump exceeds the signal's own
    /// largest step plus one ramp step (amplitude / ramp frames).
    @Test(arguments: [0.0, 0.05, 1.0]) func gainChangesRampWithoutClicks(to target: Float) throws {
        let ramp = 441
        let mixer = ZoneMixer(channels: 2, periodFrames: 441, slotCount: 2, ringSamples: 1 << 18, rampFrames: ramp)
        let slot = try #require(mixer.claimSlot(gain: 1))
        let signal = Signals.sine(frequency: 100, rate: 44_100, frames: 44_100, channels: 2, amplitude: 0.9)
        signal.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        let out = renderLeft(mixer, cycles: 90) { c in
            if c == 10 { slot.setGain(target) }
            if c == 30 { slot.setGain(1) }
            if c == 50 { slot.pause() }
            if c == 70 { slot.resume() }
        }
        let signalStep: Float = 0.9 * 2 * .pi * 100 / 44_100
        let bound = signalStep + 0.9 / Float(ramp) + 1e-5
        var worst: Float = 0
        for i in 1..<out.count { worst = max(worst, abs(out[i] - out[i - 1])) }
        #expect(worst <= bound, "largest jump \(worst), bound \(bound)")
        #expect(Signals.rms(out[(20 * 441)..<(30 * 441)]) < Double(target) * 0.9 / 2.squareRoot() + 0.01)
    }

    /// A paused source resumes from the very sample after the last one it gave: every frame written
    /// is mixed exactly once, in order, and steady parts are bit-exact.
    @Test func pauseAndResumeLoseNoSample() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 1, ringSamples: 1 << 14, rampFrames: 150)
        let slot = try #require(mixer.claimSlot(gain: 1))
        let input = (0..<6_000).map { Float($0 + 1) / 8_192 }
        input.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        slot.finish()
        let out = renderLeft(mixer, cycles: 120) { c in
            if c == 10 { slot.pause() }
            if c == 25 {
                #expect(slot.isPaused)
                #expect(slot.framesConsumed == 1_000 + 150, "stopped at the end of the 150-frame fade")
            }
            if c == 30 { slot.resume() }
        }
        var k = 0
        for v in out where v != 0 {
            let ratio = v / input[k]
            #expect(ratio > 0 && ratio <= 1.0001, "frame \(k): gain \(ratio)")
            if ratio == 1 { #expect(v == input[k]) }
            k += 1
        }
        #expect(k == input.count, "every frame mixed once")
        #expect(slot.isDrained)
        #expect(slot.framesConsumed == input.count)
    }
}

extension ZoneMixerTests {
    /// The mix is each sounding slot's frames times its gain, added in slot order, bit for bit —
    /// whether a slot is the first in the period (read straight into the mix) or added to others,
    /// whether its ring runs dry in the middle of a period, at gain 1, ½ and 0 — and silence once
    /// nothing sounds (the last period's frames do not linger).
    @Test func mixIsEverySlotTimesItsGainExactly() throws {
        let period = 64
        let channels = 2
        let mixer = ZoneMixer(
            channels: channels, periodFrames: period, slotCount: 3, ringSamples: 1 << 14, rampFrames: 32)
        let a = try #require(mixer.claimSlot(gain: 0.5))
        let b = try #require(mixer.claimSlot(gain: 1))
        let c = try #require(mixer.claimSlot(gain: 0))
        let sa = Signals.sine(frequency: 440, rate: 48_000, frames: 2 * period + 10, channels: channels, amplitude: 0.7)
        let sb = Signals.sine(frequency: 997, rate: 48_000, frames: 5 * period, channels: channels, amplitude: 0.3)
        let sc = Signals.sine(frequency: 3000, rate: 48_000, frames: 5 * period, channels: channels, amplitude: 0.9)
        for (slot, s) in [(a, sa), (b, sb), (c, sc)] {
            s.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        }
        // What a slot gives in period `p`: its frames times its gain, zero where its ring is dry.
        func part(_ s: [Float], _ gain: Float, _ p: Int, _ i: Int) -> Float {
            let at = p * period * channels + i
            return at < s.count && gain != 0 ? s[at] * gain : 0
        }
        // a first (its ring runs dry 10 frames into period 2), b added, c at gain 0; then, with a
        // released, b is the first slot read.
        for p in 0..<4 {
            if p == 3 { mixer.release(a) }
            mixer.render()
            for i in 0..<(period * channels) {
                var expected: Float = 0
                if p < 3 { expected += part(sa, 0.5, p, i) }
                expected += part(sb, 1, p, i)
                expected += part(sc, 0, p, i)
                #expect(mixer.mix[i] == expected, "period \(p), sample \(i)")
            }
        }
        // Every slot gone: b fades out over the ramp (c, at gain 0, has nothing to fade), then
        // silence, not the last period again.
        mixer.release(b)
        mixer.release(c)
        mixer.render()
        #expect(mixer.mix[0] == sb[4 * period * channels] && mixer.mix[32 * channels] == 0)
        mixer.render()
        #expect((0..<(period * channels)).allSatisfy { mixer.mix[$0] == 0 })
        #expect(a.framesConsumed == 2 * period + 10 && b.framesConsumed == 4 * period + 32)
        #expect(c.framesConsumed == 4 * period)
    }
}

/// A zone's slot rings are paged in when their slot is first claimed, lowest slot first: a zone
/// that mixes at most two sources holds two rings, however many sources it played one after another.
@Suite(.ownThread) struct ZoneMixerMemoryTests {
    @Test func onlyTheSlotsEverUsedHoldMemory() throws {
        let mixer = ZoneMixer(channels: 2, periodFrames: 441, slotCount: 8, ringSamples: 44_100, rampFrames: 441)
        let ring = 44 * 4_096  // 44 100 samples in whole pages
        #expect(mixer.residentRingBytes == 0, "no slot used yet")
        for _ in 0..<3 {  // one source after another: the first slot each time
            let slot = try #require(mixer.claimSlot(gain: 1))
            #expect(slot.index == 0)
            mixer.release(slot)
            mixer.render()  // the output thread frees it
        }
        #expect(mixer.residentRingBytes == ring)
        let music = try #require(mixer.claimSlot(gain: 1))
        let bell = try #require(mixer.claimSlot(gain: 1))
        #expect(bell.index == 1 && bell.ring.isResident)
        #expect(mixer.residentRingBytes == 2 * ring, "two at once: two rings")
        for slot in [music, bell] { mixer.release(slot) }
        mixer.render()
        #expect(mixer.residentRingBytes == 2 * ring, "a ring stays in memory once paged in")
        #expect(mixer.slots[2...].allSatisfy { !$0.ring.isResident })
    }
}

extension ZoneMixerTests {
    /// A resume fades in over the zone's ramp, whatever ramp the last gain change had: after a duck
    /// released over 4 000 frames, a pause and a resume, the source is at its gain within the
    /// 100-frame ramp. It faded in at the duck's pace (2.2 periods here; a third of a second at the
    /// default 300 ms release), which the pause's fade-out did not share.
    @Test func aResumeFadesInOverTheZoneRampAfterADuck() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 1, ringSamples: 1 << 14, rampFrames: 100)
        let slot = try #require(mixer.claimSlot(gain: 1))
        let input = [Float](repeating: 0.5, count: 8_000)
        input.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        let out = renderLeft(mixer, cycles: 70) { c in
            if c == 2 { slot.setGain(0.2, overFrames: 400) }  // duck attack
            if c == 10 { slot.setGain(1, overFrames: 4_000) }  // release over 40 periods
            if c == 55 { slot.pause() }
            if c == 60 { slot.resume() }
        }
        #expect(out[5_800] == 0, "paused")
        let back = try #require(out.indices.first { $0 >= 6_000 && out[$0] > 0 })
        #expect(out[back + 100] == 0.5, "at full gain one ramp after it resumed: \(out[back + 100])")
    }
}

extension ZoneMixerTests {
    /// A slot let go of in the middle of its stream (a stop, a seek, a skip) fades out over the
    /// zone's ramp, as a pause does, instead of ending mid-waveform at full amplitude (a click): no
    /// sample-to-sample step exceeds the signal's own plus one ramp step, the mix is silent after
    /// the fade, only the fade's frames are consumed, and the slot is free once the fade is over.
    @Test func aReleasedSlotFadesOutAndIsFreedAfter() throws {
        let ramp = 150
        let mixer = ZoneMixer(channels: 2, periodFrames: 100, slotCount: 1, ringSamples: 1 << 16, rampFrames: ramp)
        let slot = try #require(mixer.claimSlot(gain: 1))
        let signal = Signals.sine(frequency: 100, rate: 48_000, frames: 10_000, channels: 2, amplitude: 0.9)
        signal.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        var free: [Bool] = []
        let out = renderLeft(mixer, cycles: 8) { c in
            if c == 3 { mixer.release(slot) }
            free.append(mixer.hasFreeSlot)
        }
        free.append(mixer.hasFreeSlot)
        let signalStep: Float = 0.9 * 2 * .pi * 100 / 48_000
        let bound = signalStep + 0.9 / Float(ramp) + 1e-5
        var worst: Float = 0
        for i in 1..<out.count { worst = max(worst, abs(out[i] - out[i - 1])) }
        #expect(worst <= bound, "largest jump \(worst), bound \(bound)")
        #expect(out[300] != 0, "the fade begins at the period after the release")
        #expect(out[(300 + ramp)...].allSatisfy { $0 == 0 }, "silent after the fade")
        #expect(slot.framesConsumed == 300 + ramp, "consumed up to the end of the fade")
        #expect(free == [false, false, false, false, false, true, true, true, true], "free once faded")
    }

    /// A slot claimed to go on from the middle of a stream (`fadeIn`: a seek, a skip) rises from 0
    /// over the zone's ramp, as a resume does, instead of starting mid-waveform at full gain.
    @Test func aSlotClaimedToFadeInRisesFromZero() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 1, ringSamples: 1 << 14, rampFrames: 150)
        let slot = try #require(mixer.claimSlot(gain: 0.8, fadeIn: true))
        #expect(slot.appliedGain == 0 && slot.targetGain == 0.8)
        let input = [Float](repeating: 0.5, count: 1_000)
        input.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        let out = renderLeft(mixer, cycles: 4)
        #expect(out[0] > 0 && out[0] <= 0.5 / 150 + 1e-6, "one ramp step up: \(out[0])")
        // 0 → 0.8 takes 0.8 of the 150-frame full ramp: 120 frames.
        for i in 1..<120 { #expect(out[i] > out[i - 1], "rising at \(i)") }
        #expect(out[120...].allSatisfy { $0 == 0.5 * 0.8 }, "at its gain after the ramp")
        #expect(slot.framesConsumed == 400, "no frame skipped")
    }
}
