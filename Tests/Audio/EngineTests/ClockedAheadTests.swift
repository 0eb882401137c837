import ALSA
import BatonTesting
import Glibc
import Testing

@testable import Engine

/// A `clock: system` zone that renders ahead (`DeviceSpec.rendersAhead` with `ZoneClock.system`):
/// its output keeps a 120 ms ``ClockedBuffer`` filled, which the system clock plays into the zone's
/// `file` PCM, wakes about every 90 ms instead of every period, and takes back what the clock has
/// not reached when something changes. The file records what was played, take-backs included.
@Suite(.ownThread) struct ClockedAheadTests {
    static let rate = 48_000
    static let period = 480
    static let buffer = 5_760

    static func output(_ pcm: String, stopsWhenIdle: Bool = false) -> DeviceOutput {
        DeviceOutput(
            DeviceSpec(
                pcm: PCMRequest(
                    name: pcm, rate: rate, channels: 2, format: .s16LE, periodFrames: period, bufferFrames: buffer),
                clock: .system, realtimePriority: 70,
                zones: [ZoneSpec(name: "zone", deviceChannels: [0, 1], rampFrames: 480, ringFrames: rate / 2)],
                stopsWhenIdle: stopsWhenIdle, rendersAhead: true))
    }

    /// Three seconds of music with a change every 37 ms that leaves the samples as they are (the
    /// music's gain set to what it is, a silent second source): each is a take-back, yet the file
    /// holds every frame once, in order; the audible frame, sampled every 3 ms, is what the file
    /// holds then (the PCM is given what the clock played at the output's wake-ups, so both step
    /// together), within a period; and the thread wakes a fraction as often as the periods.
    @Test func everyFrameOnceThroughTakeBacks() throws {
        let pcm = ALSATestRig.makePCM()
        let output = Self.output(pcm.name)
        let music = try #require(output.mixer.claimSlot(gain: 1))
        let feeder = SlotFeeder([music])
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= 2 * Self.buffer })
        let first = output.snapshot().framesPlayed
        let wakesBefore = output.wakeUpCount
        var lowest = Int.max
        var highest = Int.min
        var silent: SourceSlot? = nil
        var lastChange = DeviceCardTests.now()
        #expect(
            waitUntil(seconds: 8) {
                let before = Self.fileFrames(pcm.file)
                let audible = output.snapshot().audibleFrame
                let after = Self.fileFrames(pcm.file)
                guard before == after else { return false }  // the file grew meanwhile: look again
                lowest = min(lowest, audible - after)
                highest = max(highest, audible - after)
                let now = DeviceCardTests.now()
                if now - lastChange >= 37_000_000 {
                    lastChange = now
                    DeviceAheadTests.askForAChange(output, music: music, silent: &silent)
                }
                usleep(3_000)
                return output.snapshot().framesPlayed >= first + 3 * Self.rate
            })
        let wakes = output.wakeUpCount - wakesBefore
        let played = output.snapshot().framesPlayed - first
        let takeBacks = output.takeBacks
        let snapshot = output.snapshot()
        output.stop()
        feeder.stop()
        #expect(IndexSignal.firstBreak(in: ALSATestRig.readBytes(pcm.file)) == nil, "every frame once, in order")
        #expect(takeBacks.count >= 30, "the changes were rendered in by taking back (\(takeBacks))")
        #expect(snapshot.xruns == 0 && snapshot.lateCycles == 0)
        #expect(snapshot.bufferFrames == Self.buffer, "the clocked buffer is the configured one")
        #expect(
            lowest >= -Self.period && highest <= Self.period,
            "audible frame vs the file's frames: \(lowest)...\(highest)")
        let periods = played / Self.period
        #expect(wakes < periods / 2, "\(wakes) wake-ups for \(periods) periods")
        print(
            "system clock, rendering ahead: \(wakes) wake-ups for \(periods) periods, \(takeBacks.count) take-backs "
                + "(\(takeBacks.frames) frames), audible frame vs the file \(lowest)...\(highest)")
    }

    /// An announcement asked for while 120 ms of the zone's (silent) mix wait in the buffer starts
    /// at the frame `nextFrame` gave, within a period (a period after the clock), and reaches the
    /// file — whose frames the status calls audible — within 150 ms of the request, each of five
    /// times: a period kept, up to a period of rounding, up to a wake-up (about 90 ms) before the
    /// PCM is given what the clock played, and the `file` PCM's own 20 ms. The file has it there.
    @Test func anAnnouncementReachesTheFileWithinAWakeUp() throws {
        let pcm = ALSATestRig.makePCM()
        let output = Self.output(pcm.name)
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= 2 * Self.buffer })
        var latencies: [Double] = []
        let requests = try DeviceAheadTests.chimeFiveTimes(output) { slot, requested in
            #expect(waitUntil { slot.firstFrameAt.map { Self.fileFrames(pcm.file) > $0 } ?? false })
            latencies.append(Double(DeviceCardTests.now() - requested) / 1e6)
        }
        var starts: [Int] = []
        for r in requests {
            let at = try #require(r.firstFrame)
            #expect(abs(at - r.nextFrame) <= Self.period, "started at \(at), nextFrame said \(r.nextFrame)")
            starts.append(at)
        }
        usleep(150_000)
        output.stop()
        #expect(latencies.allSatisfy { $0 > 0 && $0 < 150 }, "request to first frame in the file: \(latencies) ms")
        let samples = ALSATestRig.readS16(pcm.file)
        for at in starts {
            #expect(samples.count >= 2 * (at + 1))
            guard samples.count >= 2 * (at + 1) else { continue }
            #expect(samples[2 * at] == 0.25 && (at == 0 || samples[2 * at - 2] == 0), "the chime starts at \(at)")
        }
        print(
            "system clock, rendering ahead: announcements in the file \(latencies.map { ($0 * 10).rounded() / 10 }) ms after the request"
        )
    }

    /// A zone with nothing to play stops (its buffer played out by the clock first) and a chime
    /// then starts it again: the file holds the chime whole, after the silence.
    @Test func stopsWhenIdleAndStartsForAChime() throws {
        let pcm = ALSATestRig.makePCM()
        let output = Self.output(pcm.name, stopsWhenIdle: true)
        output.start()
        #expect(waitUntil { output.isStoppedIdle })
        let wakes = output.wakeUpCount
        usleep(100_000)
        #expect(output.wakeUpCount == wakes, "no wake-ups while stopped")
        let slot = try #require(output.mixer.claimSlot(gain: 1))
        let tone = Signals.sine(frequency: 1000, rate: Self.rate, frames: 4_800, channels: 2)
        tone.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        slot.finish()
        output.wake()
        #expect(waitUntil { slot.isDrained })
        output.mixer.release(slot)
        #expect(waitUntil { output.isStoppedIdle && output.idleStops == 2 })
        output.stop()
        let samples = ALSATestRig.readS16(pcm.file)
        let at = try #require(slot.firstFrameAt)
        #expect(samples.count >= 2 * at + tone.count)
        guard samples.count >= 2 * at + tone.count else { return }
        let exact = zip(tone, samples[(2 * at)...]).allSatisfy {
            Int16(($0 * 32767).rounded()) == Int16(($1 * 32768).rounded())
        }
        #expect(exact, "the chime, sample for sample, at frame \(at)")
        #expect(samples[..<(2 * at)].allSatisfy { $0 == 0 })
    }

    /// The output thread makes no heap allocation over 300 cycles rendering ahead on the system
    /// clock, with two sources whose gains and the zone volume change every 100 ms (each change a
    /// take-back).
    @Test func outputThreadDoesNotAllocate() throws {
        let pcm = ALSATestRig.makePCM()
        let output = Self.output(pcm.name)
        let slots = [try #require(output.mixer.claimSlot(gain: 0.25)), try #require(output.mixer.claimSlot(gain: 0.5))]
        let feeder = SlotFeeder(slots)
        let probe = AllocationProbe(from: 30, cycles: 300)
        output.cycleObserver = { probe.observe($0) }
        output.start()
        var flip = false
        #expect(
            waitUntil(seconds: 10) {
                flip.toggle()
                output.holdChanges()
                for (i, slot) in slots.enumerated() { slot.setGain(flip == (i == 0) ? 0.1 : 0.4, overFrames: 24_000) }
                output.mixer.setVolume(flip ? 0.5 : 0.9)
                output.releaseChanges()
                usleep(100_000)
                return probe.done
            })
        output.stop()
        feeder.stop()
        #expect(probe.count == 0, "allocations on the output thread over 300 cycles")
        #expect(output.takeBacks.count >= 10, "changes were rendered in by taking back periods")
        #expect(slots.allSatisfy { $0.starvedPeriods == 0 })
    }

    /// Frames in a raw stereo S16 file now (0 before it exists).
    static func fileFrames(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) / 4 : 0
    }

    // MARK: The buffer on its own, by a clock the test moves

    final class Clock: @unchecked Sendable {
        var now = 1_000_000_000
    }

    /// Written frames are played by the clock into the PCM behind it; what the clock has not reached
    /// is taken back and replaced; when the clock passes the last frame written it underruns (-EPIPE,
    /// nothing unplayed) and a prepare starts it over. The file records exactly what was played.
    @Test func playsByTheClockTakesBackAndUnderruns() throws {
        let pcm = ALSATestRig.makePCM()
        let clock = Clock()
        let buffer = ClockedBuffer(bufferFrames: 4_800, periodFrames: 480, rate: 48_000, frameBytes: 4) { clock.now }
        let device = try PCM(
            PCMRequest(
                name: pcm.name, rate: 48_000, channels: 2, format: .s16LE, periodFrames: 480, bufferFrames: 4_800))
        buffer.output = device
        buffer.wakeThreshold = 4_800 - 1_440
        func frames(_ range: Range<Int>) -> [Int16] { range.flatMap { [Int16($0 % 30_000), Int16($0 / 30_000)] } }
        func write(_ range: Range<Int>) -> Int {
            frames(range).withUnsafeBytes { buffer.write($0.baseAddress!, frames: range.count) }
        }
        #expect(write(0..<4_000) == 4_000)
        #expect(!buffer.isRunning, "not full: not started")
        #expect(buffer.start() == 0 && buffer.isRunning)
        clock.now += 50_000_000  // 2 400 frames played
        #expect(buffer.rewindable() == 1_600)
        #expect(buffer.delay() == 1_600 + (device.delay() ?? 0))
        #expect(buffer.wait(milliseconds: 0, orUntilReadable: -1) == .timedOut, "holds more than its low water")
        #expect(buffer.rewind(frames: 900) == 900)
        #expect(buffer.avail() == 4_800 - 700)
        #expect(write(3_100..<3_800) == 700, "replaced from frame 3 100 (the index says so)")
        clock.now += 10_000_000  // 480 more: 2 880, holding 920 < 1 440
        #expect(buffer.wait(milliseconds: 0, orUntilReadable: -1) == .ready)
        clock.now += 100_000_000  // past the last frame written
        #expect(buffer.isInXrun && !buffer.isRunning)
        #expect(write(3_800..<4_000) == -Int(EPIPE))
        #expect(buffer.unplayedFrames() == 0, "an underrun proper: everything written was played")
        #expect(buffer.prepare() == 0)
        #expect(write(3_800..<4_000) == 200 && buffer.start() == 0)
        clock.now += 10_000_000
        buffer.drain()
        device.drain()
        let recorded = ALSATestRig.readBytes(pcm.file)
        let expected = frames(0..<3_800) + frames(3_800..<4_000)
        let got = recorded.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        #expect(
            got == expected,
            "recorded \(got.count / 2) frames, the first break at \(IndexSignal.firstBreak(in: recorded) ?? -1)")
    }
}
