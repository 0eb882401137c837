import ALSA
import BatonTesting
import Engine
import Glibc
import Testing

/// Zone outputs through the real alsa-lib, writing into `file` PCMs whose bytes the tests read back.
@Suite(.ownThread) struct DeviceOutputTests {
    func spec(
        _ pcm: String, rate: Int = 48_000, clock: ZoneClock = .device, format: SampleFormat = .s16LE,
        realtime: Int32 = 0
    ) -> DeviceSpec {
        DeviceSpec(
            zone: pcm,
            pcm: PCMRequest(
                name: pcm, rate: rate, channels: 2, format: format,
                periodFrames: rate / 100, bufferFrames: rate / 25),
            clock: clock, realtimePriority: realtime)
    }

    /// Writes all of `samples` into `slot`, waiting for room, then marks the end.
    func feed(_ slot: SourceSlot, _ samples: [Float]) {
        var offset = 0
        while offset < samples.count {
            offset += samples[offset...].withUnsafeBufferPointer { slot.ring.write($0.baseAddress!, count: $0.count) }
            if offset < samples.count { usleep(1000) }
        }
        slot.finish()
    }

    /// A chime announced on one zone appears in that zone's file (tone detected) and not in the other's.
    @Test func toneLandsOnlyInItsZone() throws {
        let a = ALSATestRig.makePCM()
        let b = ALSATestRig.makePCM()
        let zoneA = DeviceOutput(spec(a.name))
        let zoneB = DeviceOutput(spec(b.name))
        let slot = try #require(zoneA.mixer.claimSlot(gain: 1))
        let tone = Signals.sine(frequency: 1000, rate: 48_000, frames: 24_000, channels: 2)
        feed(slot, tone)
        zoneA.start()
        zoneB.start()
        #expect(waitUntil { slot.isDrained && zoneB.snapshot().framesPlayed >= 24_000 })
        zoneA.stop()
        zoneB.stop()

        let written = ALSATestRig.readS16(a.file)
        #expect(written.count >= tone.count)
        let exact = zip(tone, written).allSatisfy { Int16(($0 * 32767).rounded()) == Int16(($1 * 32768).rounded()) }
        #expect(exact, "every sample is the tone, converted to S16")
        let left = Signals.channel(written, 0, of: 2)
        #expect(abs(Signals.toneLevel(left[0..<24_000], frequency: 1000, rate: 48_000) - 0.5) < 0.01)
        #expect(left[24_000...].allSatisfy { $0 == 0 }, "silence after the tone")
        let other = ALSATestRig.readS16(b.file)
        #expect(!other.isEmpty, "the other zone played")
        #expect(other.allSatisfy { $0 == 0 }, "and stayed silent")
        #expect(slot.lastFrameAt == 24_000)
    }

    /// S32_LE zones get the exact 32-bit value of each mixed sample.
    @Test func writesExactS32Samples() throws {
        let a = ALSATestRig.makePCM()
        let zone = DeviceOutput(spec(a.name, format: .s32LE))
        let slot = try #require(zone.mixer.claimSlot(gain: 1))
        feed(slot, [0.5, -0.5, 1.0, -1.0, 0.25, 0])
        zone.start()
        #expect(waitUntil { slot.isDrained })
        zone.stop()
        let f = fopen(a.file, "rb")!
        var words = [Int32](repeating: 0, count: 6)
        _ = words.withUnsafeMutableBytes { fread($0.baseAddress, 4, 6, f) }
        fclose(f)
        #expect(words == [1_073_741_824, -1_073_741_824, 2_147_483_647, -2_147_483_647, 536_870_912, 0])
    }

    /// A zone whose PCM cannot be opened is reported unavailable and retried while another zone plays.
    @Test func unopenablePCMIsUnavailableWhileOthersPlay() throws {
        let good = ALSATestRig.makePCM()
        let broken = DeviceOutput(spec(ALSATestRig.missingPCM))
        let zone = DeviceOutput(spec(good.name))
        broken.start()
        zone.start()
        #expect(waitUntil { zone.snapshot().framesPlayed > 48_000 })
        #expect(waitUntil { broken.openAttemptCount >= 2 }, "retried with backoff")
        let s = broken.snapshot()
        #expect(!s.available)
        #expect(s.lastError < 0)
        #expect(s.framesPlayed == 0)
        #expect(zone.snapshot().available)
        broken.stop()
        zone.stop()
    }

    /// A card that refuses a setting (a USB DAC without S32_LE, or without 44.1 kHz) says which:
    /// the zone's failed call is the step of the set-up, with the value it asked for, not "open"
    /// (the zone said `open failed: Invalid argument` and the user suspected the PCM name).
    @Test(arguments: [
        (SampleFormat.s32LE, 48_000, "set format S32_LE"), (SampleFormat.s16LE, 44_100, "set rate 44100 Hz"),
    ])
    func aRefusedSettingIsNamed(format: SampleFormat, rate: Int, call: String) throws {
        let card = ALSATestRig.makeCard(rate: 48_000, format: .s16LE)
        var s = spec(card.name, rate: rate, format: format)
        s.pcm.periodFrames = 480
        s.pcm.bufferFrames = 1_920
        let zone = DeviceOutput(s)
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil { zone.snapshot().lastError != 0 })
        let snap = zone.snapshot()
        #expect(snap.lastError == -EINVAL && snap.failedCall == call, "\(snap.lastError) \(snap.failedCall)")
        #expect(!snap.available)
    }

    /// A PCM that opens but whose writes fail (-EIO; a `file` PCM writing to /dev/full) is opened
    /// again at once the first time, then after 0.25 s doubling: it was reopened at once, over and
    /// over, on the output thread (hundreds of times a second here), the zone flapping.
    @Test func aPCMThatOpensButCannotPlayIsRetriedWithBackoff() throws {
        let zone = DeviceOutput(spec(ALSATestRig.failingPCM))
        var t0 = timespec()
        var t1 = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t0)
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil { zone.openAttemptCount >= 4 })
        clock_gettime(CLOCK_MONOTONIC, &t1)
        let fourth = Double(t1.tv_sec - t0.tv_sec) + Double(t1.tv_nsec - t0.tv_nsec) / 1e9
        #expect(fourth >= 0.75, "the fourth open came \(fourth) s after the first")
        #expect(waitUntil { zone.snapshot().lastError == -EIO }, "\(zone.snapshot().lastError)")
        #expect(zone.snapshot().failedCall == "write", "it opened: a write failed")
        #expect(!zone.snapshot().available)
    }

    /// A device on probation (lost soon after its open twice in a row) that then works is
    /// available again once it has played 1 s — on every way an output plays: the device's clock
    /// or the system's, rendering ahead or not. A system-clocked zone rendering ahead never said
    /// it had played (its clocked buffer's progress is not watched) and stayed unavailable; and,
    /// reopened with what it dropped written again and less than a period of room left, it was
    /// never started: "available" in silence, never failing again (here: never a third open).
    @Test(arguments: [
        (0, ZoneClock.device, false), (1, ZoneClock.system, false), (2, ZoneClock.device, true),
        (3, ZoneClock.system, true),
    ])
    func aDeviceOnProbationThatWorksIsAvailableAgain(index: Int, clock: ZoneClock, ahead: Bool) throws {
        unsetenv(ALSATestRig.switchingVariable(index))
        var spec = spec(ALSATestRig.switching(index), clock: clock)
        spec.rendersAhead = ahead
        let zone = DeviceOutput(spec)
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil { zone.openAttemptCount >= 3 }, "failed twice soon after its open")
        #expect(!zone.snapshot().available)
        // A clock of its own (the virtual card) for a device-clocked zone; a `file` PCM takes what
        // it is given at once.
        let works = clock == .device ? ALSATestRig.makeCard().name : ALSATestRig.makePCM().name
        setenv(ALSATestRig.switchingVariable(index), works, 1)
        #expect(waitUntil(seconds: 8) { zone.snapshot().available }, "\(zone.snapshot())")
        #expect(zone.snapshot().lastError == 0)
    }

    /// A system-clocked zone plays 5 s of audio in 5 s ± 2 %, not all at once.
    @Test func systemClockPacesInRealTime() throws {
        let a = ALSATestRig.makePCM()
        // SCHED_FIFO, as the daemon asks for: the suite loads both cores while this runs.
        let zone = DeviceOutput(spec(a.name, rate: 44_100, clock: .system, realtime: 70))
        var t0 = timespec()
        var t1 = timespec()
        zone.start()
        #expect(waitUntil { zone.snapshot().framesPlayed >= 441 })
        clock_gettime(CLOCK_MONOTONIC, &t0)
        let first = zone.snapshot().framesPlayed
        #expect(waitUntil(seconds: 7) { zone.snapshot().framesPlayed >= first + 5 * 44_100 })
        clock_gettime(CLOCK_MONOTONIC, &t1)
        zone.stop()
        let elapsed = Double(t1.tv_sec - t0.tv_sec) + Double(t1.tv_nsec - t0.tv_nsec) / 1e9
        #expect(abs(elapsed - 5) < 0.1, "5 s of audio took \(elapsed) s")
        #expect(zone.snapshot().lateCycles == 0)
    }

    /// The output thread makes no heap allocation across 1,000 render cycles of a busy mix
    /// (4 sources with gain ramps, S16 conversion and the real snd_pcm_writei).
    @Test func outputThreadDoesNotAllocate() throws {
        let a = ALSATestRig.makePCM()
        let zone = DeviceOutput(spec(a.name))
        let result = AllocationProbe(from: 20, cycles: 1_000)
        zone.cycleObserver = { cycle in result.observe(cycle) }
        var slots: [SourceSlot] = []
        let tone = Signals.sine(frequency: 440, rate: 48_000, frames: 4_800, channels: 2)
        for i in 0..<4 {
            let slot = try #require(zone.mixer.claimSlot(gain: 0.25))
            if i % 2 == 1 { slot.setGain(0.05) }  // ramps in flight
            slots.append(slot)
        }
        let feeder = FeedLoop(slots: slots, block: tone)
        zone.start()
        while !result.done {
            feeder.topUp()
            usleep(200)
        }
        zone.stop()
        #expect(result.count == 0, "allocations on the output thread over 1,000 cycles")
    }
}

/// Counts allocations on the output thread between two cycle numbers (set from the thread itself).
final class AllocationProbe: @unchecked Sendable {  // @unchecked: written by the output thread only; read after `done`
    let from: Int, cycles: Int
    nonisolated(unsafe) var count: UInt64 = .max
    private let finished = UnsafeMutablePointer<Bool>.allocate(capacity: 1)
    init(from: Int, cycles: Int) {
        self.from = from
        self.cycles = cycles
        finished.initialize(to: false)
    }
    var done: Bool { finished.pointee }
    func observe(_ cycle: Int) {
        if cycle == from { allocationCountStart() }
        if cycle == from + cycles {
            count = allocationCountStop()
            finished.pointee = true
        }
    }
}

/// Keeps several slots' rings topped up from a repeating block.
struct FeedLoop {
    let slots: [SourceSlot]
    let block: [Float]
    func topUp() {
        for slot in slots where slot.ring.writable >= block.count {
            block.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        }
    }
}

extension DeviceOutputTests {
    /// Two zones share one stereo device by channel: the kitchen's tone is only on the left, the
    /// patio's only on the right.
    @Test func zonesShareADeviceByChannel() throws {
        let a = ALSATestRig.makePCM()
        let pcm = PCMRequest(
            name: a.name, rate: 48_000, channels: 2, format: .s16LE, periodFrames: 480, bufferFrames: 1_920)
        let device = DeviceOutput(
            DeviceSpec(
                pcm: pcm, clock: .device, realtimePriority: 0,
                zones: [
                    ZoneSpec(name: "kitchen", deviceChannels: [0], rampFrames: 480, ringFrames: 48_000),
                    ZoneSpec(name: "patio", deviceChannels: [1], rampFrames: 480, ringFrames: 48_000),
                ]))
        let kitchen = try #require(device.mixer(for: "kitchen")?.claimSlot(gain: 1))
        let patio = try #require(device.mixer(for: "patio")?.claimSlot(gain: 1))
        #expect(device.mixer(for: "kitchen")?.channels == 1)
        feed(kitchen, Signals.sine(frequency: 440, rate: 48_000, frames: 24_000, channels: 1))
        feed(patio, Signals.sine(frequency: 1000, rate: 48_000, frames: 24_000, channels: 1))
        device.start()
        #expect(waitUntil { kitchen.isDrained && patio.isDrained })
        device.stop()
        let out = ALSATestRig.readS16(a.file)
        let left = Signals.channel(out, 0, of: 2)
        let right = Signals.channel(out, 1, of: 2)
        #expect(Signals.windowedToneLevel(left[0..<24_000], frequency: 440, rate: 48_000) > 0.49)
        #expect(Signals.windowedToneLevel(left[0..<24_000], frequency: 1000, rate: 48_000) < 0.001)
        #expect(Signals.windowedToneLevel(right[0..<24_000], frequency: 1000, rate: 48_000) > 0.49)
        #expect(Signals.windowedToneLevel(right[0..<24_000], frequency: 440, rate: 48_000) < 0.001)
    }

    /// A zone's volume scales its whole mix and ramps to a new value without a click.
    @Test func zoneVolumeScalesTheMix() throws {
        let mixer = ZoneMixer(channels: 1, periodFrames: 100, slotCount: 2, ringSamples: 1 << 14, rampFrames: 100)
        mixer.setInitialVolume(0.5)
        let slot = try #require(mixer.claimSlot(gain: 1))
        let dc = [Float](repeating: 0.8, count: 5_000)
        dc.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        mixer.render()
        #expect(mixer.mix[50] == 0.4)
        mixer.setVolume(1)
        var out: [Float] = []
        for _ in 0..<3 {
            mixer.render()
            out += (0..<100).map { mixer.mix[$0] }
        }
        #expect(out.last == 0.8)
        #expect(zip(out, out.dropFirst()).allSatisfy { abs($1 - $0) <= 0.8 / 100 + 1e-6 }, "ramped")
        #expect(mixer.appliedVolume == 1)
    }
}
