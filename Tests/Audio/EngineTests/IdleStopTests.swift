import ALSA
import BatonTesting
import Engine
import Glibc
import Testing

/// A device with `stopsWhenIdle`: with nothing to play it drains and stops its PCM and its thread
/// sleeps; a source claimed later still starts within one period of the wake-up, from its exact
/// first sample, right after the silence written before the stop.
@Suite(.ownThread) struct IdleStopTests {
    static func now() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }

    static let rate = 48_000
    static let period = rate / 100
    static let buffer = rate / 25

    func spec(_ pcm: String, clock: ZoneClock) -> DeviceSpec {
        var spec = DeviceSpec(
            zone: pcm,
            pcm: PCMRequest(
                name: pcm, rate: Self.rate, channels: 2, format: .s16LE, periodFrames: Self.period,
                bufferFrames: Self.buffer),
            clock: clock, realtimePriority: 70)
        spec.stopsWhenIdle = true
        return spec
    }

    @Test(arguments: [ZoneClock.system, .device])
    func announcementOnAnIdleZoneStartsAtOnceFromItsFirstSample(clock: ZoneClock) throws {
        let pcm = ALSATestRig.makePCM()
        let zone = DeviceOutput(spec(pcm.name, clock: clock))
        zone.start()
        #expect(waitUntil(seconds: 5) { zone.isStoppedIdle }, "stops after half a second of nothing")
        let stoppedAt = zone.snapshot().framesPlayed
        #expect(stoppedAt >= Self.rate / 2)
        let wakes = zone.wakeUpCount

        // A sound whose every sample differs from silence, the first one included.
        let frames = 4_800
        let sound = (0..<(frames * 2)).map { Float($0 % 300 + 1) / 600 }
        let slot = try #require(zone.mixer.claimSlot(gain: 1))
        _ = sound.withUnsafeBufferPointer { slot.write($0.baseAddress!, count: $0.count) }
        slot.finish()
        // Until it is woken: a zone that woke at the claim would start on silence (the source not
        // fed yet) and play its first sample late.
        usleep(200_000)
        #expect(zone.snapshot().framesPlayed == stoppedAt, "writes nothing while stopped")
        #expect(zone.isStoppedIdle && zone.wakeUpCount == wakes, "neither the claim nor the frames wake it")
        #expect(zone.idleStops == 1)
        let woken = Self.now()
        zone.wake()
        #expect(waitUntil { slot.firstFrameAt != nil })
        let started = Self.now() - woken
        // Rendered within one period of the request, so heard within period + buffer of it. (Timed
        // on the system clock only: a device-clocked `file` PCM never blocks, so once restarted its
        // SCHED_FIFO thread writes as fast as it can and can keep this thread off the CPU.)
        if clock == .system {
            #expect(
                started < (Self.period + Self.buffer) * 1_000_000_000 / Self.rate,
                "first frame mixed after \(started) ns")
        }
        #expect(slot.firstFrameAt == stoppedAt, "the zone's frames go on from where it stopped")
        #expect(waitUntil { slot.isDrained })
        zone.mixer.release(slot)
        #expect(waitUntil(seconds: 5) { zone.isStoppedIdle && zone.idleStops == 2 }, "and stops again")
        zone.stop()

        let written = ALSATestRig.readS16(pcm.file)
        let first = try #require(written.firstIndex { $0 != 0 })
        #expect(first == stoppedAt * 2, "the sound begins right after the silence written before the stop")
        #expect(written.count >= first + sound.count)
        let exact = zip(sound, written[first...]).allSatisfy {
            Int16(($0 * 32767).rounded()) == Int16(($1 * 32768).rounded())
        }
        #expect(exact, "every sample of the sound, from the first, converted to S16")
    }

    /// A zone whose only source is paused stops its device once the fade is over, as an idle one
    /// does (a paused source would otherwise cost a wake-up a period all day); the resume wakes it,
    /// and the source goes on from the very sample where its fade ended.
    @Test(arguments: [ZoneClock.system, .device])
    func aPausedSourceStopsTheZoneAndGoesOnWhereItWas(clock: ZoneClock) throws {
        // The system clock plays into a file; a device-clocked zone into the test card, which
        // takes frames in real time (a file would take them as fast as they come).
        let file = clock == .system ? ALSATestRig.makePCM() : nil
        let card =
            clock == .device
            ? ALSATestRig.makeCard(rate: Self.rate, periodFrames: Self.period, bufferFrames: Self.buffer) : nil
        let zone = DeviceOutput(spec(file?.name ?? card!.name, clock: clock))
        zone.start()
        #expect(waitUntil(seconds: 5) { zone.isStoppedIdle })
        // Half a second (what the ring holds) of a signal whose every frame is different: where it
        // is cut and goes on is exact.
        let frames = Self.rate / 2
        let sound = (0..<(frames * 2)).map { Float($0 / 2 + 1) / Float(2 * frames) }
        let slot = try #require(zone.mixer.claimSlot(gain: 1))
        let written = sound.withUnsafeBufferPointer { slot.write($0.baseAddress!, count: $0.count) }
        zone.wake()
        #expect(waitUntil { slot.framesConsumed >= Self.rate / 5 })
        slot.pause()
        #expect(waitUntil { slot.isPaused })
        let cut = slot.framesConsumed
        #expect(waitUntil(seconds: 5) { zone.isStoppedIdle && zone.idleStops == 2 }, "stopped while paused")
        let stoppedAt = zone.snapshot().framesPlayed
        usleep(200_000)
        #expect(zone.snapshot().framesPlayed == stoppedAt, "writes nothing while paused and stopped")
        slot.resume()
        #expect(waitUntil { slot.framesConsumed > cut + Self.rate / 8 }, "the resume restarted it")
        zone.mixer.release(slot)
        zone.stop()
        #expect(written == sound.count)

        // After the restart the zone's frames go on from where it stopped (the file's, or the
        // card's record's, frame n is the zone's): the fade in from `cut`, then the source exactly,
        // sample for sample.
        let out: [Int16] =
            if let file {
                ALSATestRig.readS16(file.file).map { Int16(($0 * 32768).rounded()) }
            } else {
                card!.recordedBytes().withUnsafeBytes { $0.bindMemory(to: Int16.self).map { Int16(littleEndian: $0) } }
            }
        let ramp = Self.period  // the zone's default ramp: 10 ms
        let from = (stoppedAt + ramp) * 2
        let expected = sound[((cut + ramp) * 2)...]
        let compared = min(Self.rate / 10 * 2, out.count - from, expected.count)
        try #require(compared > 0 && stoppedAt > Self.period, "\(out.count) samples written, stopped at \(stoppedAt)")
        let off = (0..<compared).filter {
            Int16((expected[expected.startIndex + $0] * 32767).rounded(.toNearestOrEven)) != out[from + $0]
        }
        #expect(off.count == 0, "\(off.count) of \(compared) samples after the fade in are not the source's next")
        #expect(out[(stoppedAt - Self.period) * 2..<stoppedAt * 2].allSatisfy { $0 == 0 }, "silence before the stop")
    }

    /// A volume change on a zone whose card stopped idle is taken at once, with no ramp over
    /// silence: the card stays stopped (no new start: a USB DAC pops at each), the zone stays
    /// stopped idle, and the volume is applied. Ramped, it woke the card for half a second of
    /// silence — at batond's stop, whose fade-out sets every zone's volume to 0, every idle card.
    @Test(arguments: [ZoneClock.system, .device])
    func aVolumeChangeLeavesAnIdleCardStopped(clock: ZoneClock) throws {
        let file = clock == .system ? ALSATestRig.makePCM() : nil
        let card =
            clock == .device
            ? ALSATestRig.makeCard(rate: Self.rate, periodFrames: Self.period, bufferFrames: Self.buffer) : nil
        let zone = DeviceOutput(spec(file?.name ?? card!.name, clock: clock))
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 5) { zone.isStoppedIdle })
        let stoppedAt = zone.snapshot().framesPlayed
        let starts = card?.events("start").count
        zone.mixer.setVolume(0.3)
        // Nothing to wait for but time: a card started for the ramp stops again half a second later.
        usleep(1_000_000)
        #expect(zone.isStoppedIdle && zone.idleStops == 1, "\(zone.idleStops) idle stops")
        #expect(zone.snapshot().framesPlayed == stoppedAt, "wrote \(zone.snapshot().framesPlayed - stoppedAt) frames")
        #expect(card?.events("start").count == starts, "the card was started again")
        #expect(zone.mixer.appliedVolume == 0.3)
    }

    /// On a card (`clock: device`), a restart after an idle stop is a new stream that fills an empty
    /// buffer before it starts: not a late cycle (the device nearly running dry), and no xrun.
    @Test func restartingACardIsNotALateCycle() throws {
        let card = ALSATestRig.makeCard(rate: Self.rate, periodFrames: Self.period, bufferFrames: Self.buffer)
        let zone = DeviceOutput(spec(card.name, clock: .device))
        zone.start()
        #expect(waitUntil(seconds: 5) { zone.isStoppedIdle })
        let sound = [Float](repeating: 0.25, count: 4_800 * 2)
        for round in 0..<3 {
            let slot = try #require(zone.mixer.claimSlot(gain: 1))
            _ = sound.withUnsafeBufferPointer { slot.write($0.baseAddress!, count: $0.count) }
            slot.finish()
            zone.wake()
            #expect(waitUntil { slot.isDrained })
            zone.mixer.release(slot)
            #expect(waitUntil(seconds: 5) { zone.isStoppedIdle && zone.idleStops == round + 2 })
        }
        let snapshot = zone.snapshot()
        zone.stop()
        #expect(snapshot.lateCycles == 0, "\(snapshot.lateCycles) late cycles over 3 restarts")
        #expect(snapshot.xruns == 0)
        #expect(card.events("start").count == 4, "the card started once, then once a restart")
        #expect(card.events("drained").count == 4)
        #expect(card.events("xrun").isEmpty)
    }
}
