import ALSA
import BatonTesting
import Engine
import Glibc
import Testing

/// Zone outputs through the real alsa-lib, writing into `file` PCMs whose bytes the tests read back.
@Suite struct ZoneOutputTests {
    func spec(_ pcm: String, rate: Int = 48_000, clock: ZoneClock = .device, format: SampleFormat = .s16LE) -> ZoneOutputSpec {
        ZoneOutputSpec(zone: pcm, pcm: PCMRequest(name: pcm, rate: rate, channels: 2, format: format,
                                                  periodFrames: rate / 100, bufferFrames: rate / 25),
                       clock: clock, realtimePriority: 0)
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
        let a = ALSATestRig.makePCM(), b = ALSATestRig.makePCM()
        let zoneA = ZoneOutput(spec(a.name)), zoneB = ZoneOutput(spec(b.name))
        let slot = try #require(zoneA.mixer.claimSlot(gain: 1))
        let tone = Signals.sine(frequency: 1000, rate: 48_000, frames: 24_000, channels: 2)
        feed(slot, tone)
        zoneA.start(); zoneB.start()
        #expect(waitUntil { slot.isDrained })
        zoneA.stop(); zoneB.stop()

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
        let zone = ZoneOutput(spec(a.name, format: .s32LE))
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
        let broken = ZoneOutput(spec(ALSATestRig.missingPCM))
        let zone = ZoneOutput(spec(good.name))
        broken.start(); zone.start()
        #expect(waitUntil { zone.snapshot().framesPlayed > 48_000 })
        #expect(waitUntil { broken.openAttemptCount >= 2 }, "retried with backoff")
        let s = broken.snapshot()
        #expect(!s.available)
        #expect(s.lastError < 0)
        #expect(s.framesPlayed == 0)
        #expect(zone.snapshot().available)
        broken.stop(); zone.stop()
    }

    /// A system-clocked zone plays 5 s of audio in 5 s ± 2 %, not all at once.
    @Test func systemClockPacesInRealTime() throws {
        let a = ALSATestRig.makePCM()
        let zone = ZoneOutput(spec(a.name, rate: 44_100, clock: .system))
        var t0 = timespec(), t1 = timespec()
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
        let zone = ZoneOutput(spec(a.name))
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
        while !result.done { feeder.topUp(); usleep(200) }
        zone.stop()
        #expect(result.count == 0, "allocations on the output thread over 1,000 cycles")
    }
}

/// Counts allocations on the output thread between two cycle numbers (set from the thread itself).
final class AllocationProbe: @unchecked Sendable {  // @unchecked: written by the output thread only; read after `done`
    let from: Int, cycles: Int
    nonisolated(unsafe) var count: UInt64 = .max
    private let finished = UnsafeMutablePointer<Bool>.allocate(capacity: 1)
    init(from: Int, cycles: Int) { self.from = from; self.cycles = cycles; finished.initialize(to: false) }
    var done: Bool { finished.pointee }
    func observe(_ cycle: Int) {
        if cycle == from { allocationCountStart() }
        if cycle == from + cycles { count = allocationCountStop(); finished.pointee = true }
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
