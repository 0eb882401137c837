import ALSA
import BatonTesting
import Glibc
import Testing

@testable import Engine

/// What a zone counts as heard when its device goes away as a kernel card does: the virtual card
/// (`batontest`) still answers `snd_pcm_status` after its unplug (alsa-lib's ioplug cannot fail
/// it), a USB card on a kernel fails every call with -ENODEV. So a sink that behaves so, driven
/// through the output's own cycle (render, deliver, measure) on the test's thread.
@Suite(.ownThread) struct LostDeviceTests {
    static let period = 480
    static let buffer = 1_920

    /// A device that takes frames into a buffer and plays them when told, and fails as a kernel
    /// card can: once `gone`, -ENODEV to writes and no answer to `snd_pcm_status` or `snd_pcm_delay`;
    /// with `stopsAtEveryStart`, never running — each start stops it at once (an xrun) until the
    /// next prepare.
    final class KernelCard: PeriodSink {
        var held = 0
        var played = 0
        var gone = false
        let stopsAtEveryStart: Bool
        var inXrun = false
        var starts = 0
        init(stopsAtEveryStart: Bool = false) { self.stopsAtEveryStart = stopsAtEveryStart }
        func write(_ bytes: UnsafeRawPointer, frames: Int) -> Int {
            if gone { return -Int(ENODEV) }
            if inXrun { return -Int(EPIPE) }
            let taken = min(frames, LostDeviceTests.buffer - held)
            held += taken
            return taken
        }
        func recover(_ code: Int32) -> Int32 { code }
        func delay() -> Int? { gone ? nil : held }
        var hiddenDelayFrames: Int { 0 }
        func unplayedFrames() -> Int? { gone ? nil : held }
        func prepare() -> Int32 {
            inXrun = false
            held = 0
            return 0
        }
        var isInXrun: Bool { inXrun }
        var isRunning: Bool { !gone && !stopsAtEveryStart }
        func avail() -> Int {
            gone ? -Int(ENODEV) : inXrun ? -Int(EPIPE) : LostDeviceTests.buffer - held
        }
        func start() -> Int32 {
            starts += 1
            if stopsAtEveryStart { inXrun = true }
            return 0
        }
        func play(_ frames: Int) {
            let n = min(frames, held)
            held -= n
            played += n
        }
    }

    /// A card suspended before its first write that answers `snd_pcm_resume` with -EAGAIN (still
    /// waking up) for `wakesAfter` ns from the first ask, then resumes; a prepare wakes it at once.
    /// (The virtual card cannot say -EAGAIN: alsa-lib's ioplug answers every resume with 0.)
    final class SuspendedCard: PeriodSink {
        let wakesAfter: Int
        var suspended = true
        var firstResumeAt: Int?
        var resumes = 0
        var prepares = 0
        var held = 0
        /// Called at each resume (before it answers).
        var onResume: (() -> Void)?
        init(wakesAfter: Int) { self.wakesAfter = wakesAfter }
        func write(_ bytes: UnsafeRawPointer, frames: Int) -> Int {
            if suspended { return -Int(ESTRPIPE) }
            let taken = min(frames, LostDeviceTests.buffer - held)
            held += taken
            return taken
        }
        func recover(_ code: Int32) -> Int32 { code }
        func delay() -> Int? { suspended ? nil : held }
        var hiddenDelayFrames: Int { 0 }
        func unplayedFrames() -> Int? { held }
        func resume() -> Int32 {
            onResume?()
            resumes += 1
            let now = DeviceCardTests.now()
            let first = firstResumeAt ?? Int(now)
            firstResumeAt = first
            guard Int(now) - first >= wakesAfter else { return -EAGAIN }
            suspended = false
            return 0
        }
        func prepare() -> Int32 {
            prepares += 1
            suspended = false
            held = 0
            return 0
        }
        var isRunning: Bool { false }
        func avail() -> Int { suspended ? -Int(ESTRPIPE) : LostDeviceTests.buffer - held }
    }

    /// A zone of one stereo `clock: device` output, not started: the test runs its cycle.
    static func output(_ zone: String) -> DeviceOutput {
        DeviceOutput(
            DeviceSpec(
                zone: zone,
                pcm: PCMRequest(
                    name: "null", rate: 48_000, channels: 2, format: .s16LE, periodFrames: period,
                    bufferFrames: buffer),
                clock: .device, realtimePriority: 0))
    }

    /// The card holds a full buffer (four periods), plays a period, is written one more (measured),
    /// plays one more and is unplugged: the zone's audible frame, and the source's position, are
    /// no later than what it played (960) and no earlier than what it had surely played at the last
    /// measure (480), and what is written again after the reopen starts there. Before, all it held
    /// (1 920 frames, and the period rendered at the loss) counted as heard: the music resumed up to
    /// a buffer past the cut.
    @Test func aKernelCardGoneCountsNothingItHeldAsHeard() throws {
        let output = Self.output("lost")
        let slot = try #require(output.mixer.claimSlot(gain: 1))
        let frames = 10 * Self.period
        let music = [Float](repeating: 0.25, count: 2 * frames)
        #expect(music.withUnsafeBufferPointer { slot.ring.write($0.baseAddress!, count: $0.count) } == music.count)
        let card = KernelCard()
        var cycle = 0
        func playOnePeriod() -> Bool {
            output.renderPeriod(period: Self.period, channels: 2, cycle: &cycle)
            guard output.deliver(to: card, bufferFrames: Self.buffer) else { return false }
            let delay = card.delay()
            output.publishingCounters {
                output.framesPlayed.add(Self.period, ordering: .sequentiallyConsistent)
                output.recordDelay(delay, of: card, bufferFrames: Self.buffer)
            }
            return true
        }
        for _ in 0..<4 { #expect(playOnePeriod()) }
        card.play(Self.period)
        #expect(playOnePeriod())
        card.play(Self.period)
        card.gone = true
        output.renderPeriod(period: Self.period, channels: 2, cycle: &cycle)
        #expect(!output.deliver(to: card, bufferFrames: Self.buffer))
        output.deviceLost(rendered: Self.period)
        let audible = output.snapshot().audibleFrame
        #expect(
            audible >= Self.period && audible <= card.played, "audible frame \(audible), the card played \(card.played)"
        )
        let heard = slot.framesHeard(atZoneFrame: audible)
        #expect(heard >= Self.period && heard <= card.played, "the source heard \(heard) frames")
        #expect(output.history.sent == Self.period, "written again from frame \(output.history.sent)")
        #expect(output.outage.isOn)
    }

    /// A device that stops again at every start (an xrun each time, as a DAC whose clock fails at
    /// once might): one delivery recovers it `recoveryLimit` times, then gives it up as stalled —
    /// reopened after the stall's pause, unavailable until it takes frames — instead of preparing
    /// and starting it for ever on the real-time thread.
    @Test func aDeviceThatStopsAtEveryStartIsGivenUp() throws {
        let output = Self.output("restarts")
        let device = KernelCard(stopsAtEveryStart: true)
        var cycle = 0
        for _ in 0..<5 { output.renderPeriod(period: Self.period, channels: 2, cycle: &cycle) }
        #expect(!output.deliver(to: device, bufferFrames: Self.buffer), "given up")
        #expect(device.starts == DeviceOutput.recoveryLimit + 1)
        #expect(output.snapshot().xruns == DeviceOutput.recoveryLimit)
        #expect(output.isStalledByRestarts && output.snapshot().lastError == -EPIPE)
        #expect(output.history.pending == 5 * Self.period, "nothing it dropped counted as played")
    }

    /// A suspended device that answers every resume with -EAGAIN for 3 s is asked again for at most
    /// `stallLimitNanoseconds`, then prepared (as one that cannot resume) and written what it
    /// dropped: one delivery, recovered. Asked for as long as it said -EAGAIN, it held the output
    /// thread with no limit, the zone "available" and its sources "playing" in silence.
    @Test func aDeviceStillWakingFromASuspendIsRestartedAfterTheStallLimit() throws {
        let output = Self.output("waking")
        let device = SuspendedCard(wakesAfter: 3_000_000_000)
        var cycle = 0
        for _ in 0..<2 { output.renderPeriod(period: Self.period, channels: 2, cycle: &cycle) }
        let start = DeviceCardTests.now()
        #expect(output.deliver(to: device, bufferFrames: Self.buffer), "recovered")
        let took = Int(DeviceCardTests.now() - start)
        let limit = DeviceOutput.stallLimitNanoseconds
        #expect(took >= limit && took <= limit + 500_000_000, "the delivery took \(took / 1_000_000) ms")
        #expect(device.prepares == 1, "prepared once it had not woken within the limit")
        #expect(device.resumes >= 10, "asked again every 10 ms meanwhile (\(device.resumes))")
        #expect(device.held == 2 * Self.period, "what it dropped written again")
        #expect(output.snapshot().suspends == 1 && output.snapshot().xruns == 0)
        #expect(output.history.pending == 0)
    }

    /// While a suspended card wakes (its resume answering -EAGAIN), the zone's audible frame stands
    /// where it was when the suspend was met: not moved on from the card's last measured delay as if
    /// it played (at the card's rate, as between a rendering-ahead output's wake-ups, it ran up to
    /// `extrapolationLimit` ahead of the frozen card for as long as the card took to wake), nor back
    /// to that measure (forgetting what the card had played since it: it stood behind where the card
    /// stopped until it was measured again).
    @Test func aCardWakingFromASuspendIsNotHeardPlayingOn() throws {
        let output = Self.output("asleep")
        // Measured 20 ms ago holding the buffer: heard 20 ms on since, and up to 20 ms more.
        output.publishingCounters {
            output.framesPlayed.add(Self.buffer, ordering: .sequentiallyConsistent)
            output.delayFrames.store(Self.buffer, ordering: .sequentiallyConsistent)
            output.delayMeasuredAt.store(Int(DeviceCardTests.now()) - 20_000_000, ordering: .sequentiallyConsistent)
            output.extrapolationLimit.store(Self.buffer, ordering: .sequentiallyConsistent)
        }
        let device = SuspendedCard(wakesAfter: 100_000_000)
        var audible: [Int] = []
        device.onResume = { audible.append(output.snapshot().audibleFrame) }
        var cycle = 0
        output.renderPeriod(period: Self.period, channels: 2, cycle: &cycle)
        let before = output.snapshot().audibleFrame
        #expect(output.deliver(to: device, bufferFrames: Self.buffer), "resumed")
        #expect(device.prepares == 0 && audible.count >= 2)
        #expect(
            audible.allSatisfy { $0 == audible.first } && (audible.first ?? 0) >= before,
            "the audible frame while it woke: \(Set(audible).sorted()), \(before) just before")
    }
}
