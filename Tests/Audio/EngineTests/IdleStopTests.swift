import ALSA
import BatonTesting
import Engine
import Glibc
import Testing

/// A device with `stopsWhenIdle`: with nothing to play it drains and stops its PCM and its thread
/// sleeps; a source claimed later still starts within one period of the wake-up, from its exact
/// first sample, right after the silence written before the stop.
@Suite struct IdleStopTests {
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
        _ = sound.withUnsafeBufferPointer { slot.ring.write($0.baseAddress!, count: $0.count) }
        slot.finish()
        // Until it is woken: a zone that woke at the claim would start on silence (the source not
        // fed yet) and play its first sample late.
        usleep(200_000)
        #expect(zone.snapshot().framesPlayed == stoppedAt, "writes nothing while stopped")
        #expect(zone.isStoppedIdle && zone.wakeUpCount == wakes, "a claimed slot does not wake it")
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
            _ = sound.withUnsafeBufferPointer { slot.ring.write($0.baseAddress!, count: $0.count) }
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

    /// A volume change reaches an idle, stopped zone: the thread wakes, ramps over silence, stops again.
    @Test func volumeChangeWakesAStoppedZone() throws {
        let pcm = ALSATestRig.makePCM()
        let zone = DeviceOutput(spec(pcm.name, clock: .system))
        zone.start()
        #expect(waitUntil(seconds: 5) { zone.isStoppedIdle })
        zone.mixer.setVolume(0.25)
        #expect(waitUntil { zone.mixer.appliedVolume == 0.25 })
        #expect(waitUntil(seconds: 5) { zone.isStoppedIdle && zone.idleStops == 2 })
        zone.stop()
    }
}
