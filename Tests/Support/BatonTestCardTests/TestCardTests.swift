import ALSA
import BatonTesting
import CALSA
import CBatonTestCard
import CThreadAffinity
import Glibc
import Synchronization
import Testing

import class OSThread.OSThread

// The virtual sound card through the real alsa-lib API. The suite is serialized: its tests measure
// time against the card's clock. Tests that are not about underruns give the card a 100 ms buffer
// (`roomy`), so that a writer descheduled for tens of milliseconds on a busy two-core machine (seen
// with the whole suite running) does not underrun where the test did not mean it to.
@Suite(.serialized, .ownThread)
struct TestCardTests {
    /// 480-frame periods in a 4800-frame buffer: ten periods of headroom.
    static let roomy = 4800
    /// Periods that fill a roomy buffer and start the card, plus two it had to wait for.
    static let startPeriods = roomy / 480 + 2

    /// What was buffered at `xrun` was dropped: the record is the frames written up to where the card
    /// stopped, then the last `frames` written (after the prepare), exactly.
    static func expectPlayed(upTo xrun: TestCard.Event, thenTheLast frames: Int, of writer: CardWriter) {
        let fb = writer.card.frameBytes
        let recorded = writer.card.recordedBytes()
        #expect(recorded.count == (xrun.frames + frames) * fb)
        #expect(Array(recorded[0..<(xrun.frames * fb)]) == Array(writer.written[0..<(xrun.frames * fb)]))
        #expect(Array(recorded.suffix(frames * fb)) == Array(writer.written.suffix(frames * fb)))
    }

    init() throws {
        _ = ALSATestRig.directory
        try #require(
            ALSATestRig.cardLibrary != nil,
            "libasound_module_pcm_batontest.so not built (swift build builds it; or set BATON_TESTCARD_LIB)")
    }

    /// One second of audio takes one second to play, and the card records exactly the bytes written,
    /// with one sidecar line per period at the rate's spacing.
    @Test func playsOneSecondInOneSecondAndRecordsItExactly() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        let t0 = monotonicNanoseconds()
        #expect(writer.write(periods: 100) == 0)
        writer.pcm.drain()
        let seconds = Double(monotonicNanoseconds() - t0) / 1e9
        // Never sooner (the card paces in real time); how much later the drain returns is this
        // thread's scheduling beside the suite (11.8 ms once on a fresh clone): the card's own
        // record below pins the timing to the nanosecond.
        #expect(seconds > 0.995 && seconds < 1.1, "took \(seconds) s")
        #expect(card.recordedBytes() == writer.written)

        let start = try #require(card.startNanoseconds)
        let periods = card.events("period")
        #expect(periods.count == 100)
        for (k, p) in periods.enumerated() {
            #expect(p.frames == (k + 1) * 480)
            #expect(abs(p.nanoseconds - start - Int64(k + 1) * 10_000_000) <= 1)
        }
        #expect(card.events("drained").first?.frames == 48000)
    }

    /// The sidecar follows the definition's rate: at 44.1 kHz a period of 441 frames is 10 ms.
    @Test func timestampsFollowTheRate() throws {
        let card = ALSATestRig.makeCard(rate: 44100, periodFrames: 441, bufferFrames: 4410)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: 20) == 0)
        writer.pcm.drain()
        let start = try #require(card.startNanoseconds)
        let periods = card.events("period")
        #expect(periods.count == 20)
        for (k, p) in periods.enumerated() { #expect(abs(p.nanoseconds - start - Int64(k + 1) * 10_000_000) <= 1) }
        #expect(card.recordedBytes() == writer.written)
    }

    /// Once the buffer is full, `snd_pcm_writei` blocks until the card has taken a period.
    @Test func writeBlocksWhileTheBufferIsFull() throws {
        let card = ALSATestRig.makeCard()
        let writer = try CardWriter(card)
        let t0 = monotonicNanoseconds()
        #expect(writer.write(periods: 4) == 0)  // fills the buffer; the card starts
        #expect(monotonicNanoseconds() - t0 < 5_000_000)
        let start = try #require(card.startNanoseconds)
        #expect(writer.writePeriod() == 480)  // waits for the first period to be taken
        let waited = monotonicNanoseconds() - start
        #expect(waited >= 10_000_000 && waited < 20_000_000, "returned \(waited) ns after start")
        #expect(writer.pcm.avail() < 480)
    }

    /// Polling the card (`snd_pcm_wait`) with a full buffer wakes once a period, when the card has
    /// taken one — never before; within 8 ms in the median (one wake-up of the test's thread may come
    /// late beside the whole suite on two cores, and the card has then taken another period).
    @Test func pollWakesOncePerPeriod() throws {
        let card = ALSATestRig.makeCard()
        let writer = try CardWriter(card)
        #expect(writer.write(periods: 4) == 0)
        let start = try #require(card.startNanoseconds)
        let lateness = wakeUps(writer, start: start, periods: 1, times: 8)
        let median = lateness.sorted()[4]
        #expect(median < 8_000_000, "woke \(lateness) ns after the periods")
    }

    /// With `avail_min` at two periods the card wakes its poller once every two periods, as a
    /// kernel driver does (no wake-up at the period between), and a command still wakes a poller at
    /// once: an unplug sent while it waits on a full buffer is reported within a few milliseconds.
    @Test func pollWakesWhenAvailMinIsFree() throws {
        let card = ALSATestRig.makeCard()
        let writer = try CardWriter(card)
        try writer.pcm.setWakeThreshold(frames: 960)
        #expect(writer.write(periods: 4) == 0)
        let start = try #require(card.startNanoseconds)
        let lateness = wakeUps(writer, start: start, periods: 2, times: 4)
        // Within 8 ms in the median: beside the whole suite one wake-up of this thread may come late
        // (the card has then taken a third period, written back at once).
        let median = lateness.sorted()[2]
        #expect(median < 8_000_000, "woke \(lateness) ns after two periods were free")
        // Sent 5 ms into a wait that the clock would end only at 20 ms.
        let sender = OSThread.start {
            usleep(5_000)
            card.send(.unplug)
        }
        let t0 = monotonicNanoseconds()
        #expect(writer.pcm.wait(milliseconds: 100) < 0)
        let waited = monotonicNanoseconds() - t0
        sender.join()
        // Before the 20 ms the clock would take: the command woke it. (Not "within 9 ms": beside the
        // whole suite the sender's 5 ms sleep alone once took 9.8 ms.)
        #expect(waited < 15_000_000, "the unplug woke the poller after \(waited) ns")
    }

    /// Waits on a card kept full `times` times, each until `periods` periods are free (the wake
    /// threshold), writing back whatever is free after each wake-up; returns how late each wake-up
    /// came after `periods` more periods than written since `start` were taken. Each wait must not
    /// come early and must block at most once (`ru_nvcsw`: the card woke its poller when the
    /// threshold was free, not at a period before it).
    func wakeUps(_ writer: CardWriter, start: Int64, periods: Int, times: Int) -> [Int64] {
        func blocks() -> Int {
            var usage = rusage()
            getrusage(__rusage_who_t(1), &usage)  // RUSAGE_THREAD: this thread's own count
            return usage.ru_nvcsw
        }
        var lateness: [Int64] = []
        var written = 0
        for _ in 0..<times {
            let before = blocks()
            #expect(writer.pcm.wait(milliseconds: 100) == 1)
            // At most once: a wake-up at a period before the threshold would block again. (None
            // when the card took a period between the last write and this wait.)
            #expect(blocks() - before <= 1, "blocked \(blocks() - before) times until \(periods) periods were free")
            let late = monotonicNanoseconds() - start - Int64(written + periods) * 10_000_000
            #expect(late >= 0, "woke \(-late) ns before \(periods) periods were free")
            lateness.append(late)
            let room = writer.pcm.avail()
            #expect(room >= periods * 480, "woke with \(room) frames free")
            #expect(writer.write(periods: room / 480) == 0)
            written += room / 480
        }
        return lateness
    }

    /// The control file outlives handles: levels written while no handle is open (a drift) apply to the
    /// next open; one-shot faults written then (an xrun, a stall) are history and do not.
    @Test func levelsApplyAtOpenAndPastFaultsDoNot() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        card.send(.drift(ppm: 250))
        card.send(.xrun)
        card.send(.stall(milliseconds: 500))
        let writer = try CardWriter(card)
        #expect(writer.write(periods: 20) == 0)
        writer.pcm.drain()
        let periods = card.events("period")
        #expect(periods.count == 20)
        // 480 frames at 48 000 × 1.00025 Hz: 9 997 500.6 ns.
        for (a, b) in zip(periods.dropFirst(), periods) { #expect(abs(a.nanoseconds - b.nanoseconds - 9_997_501) <= 1) }
        #expect(card.events("xrun").isEmpty && card.events("stall").isEmpty)
        #expect(card.recordedBytes() == writer.written)
    }

    /// `snd_pcm_delay` is the frames written but not yet consumed, and `snd_pcm_avail` the room left:
    /// both exact to the pointer's granule (a period, or a frame).
    @Test(arguments: [TestCard.Pointer.period, .frame])
    func delayAndAvailAreTrue(pointer: TestCard.Pointer) throws {
        let card = ALSATestRig.makeCard(pointer: pointer)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: 4) == 0)
        let start = try #require(card.startNanoseconds)
        let granule = pointer == .period ? 480 : 1
        for k in 0..<30 {
            if k % 3 == 0 { #expect(writer.writePeriod() == 480) }
            let before = monotonicNanoseconds()
            let delay = try #require(writer.pcm.delay())
            let after = monotonicNanoseconds()
            let avail = writer.pcm.avail()
            let afterAvail = monotonicNanoseconds()
            let consumed = writer.frames - delay
            func granules(_ t: Int64) -> Int {
                let frames = Int((t - start) * 48 / 1_000_000)
                return frames / granule * granule
            }
            let low = granules(before)
            let high = granules(after)
            #expect(consumed >= low - 1 && consumed <= high + 1, "consumed \(consumed), clock says \(low)...\(high)")
            // The room left grows by what the card consumed between the two calls, and by nothing
            // more: the clock bounds it (a test thread preempted between them sees a larger avail).
            let consumedBetween = granules(afterAvail) - low + 2
            #expect(
                avail >= 1920 - delay && avail <= 1920 - delay + consumedBetween,
                "avail \(avail), delay \(delay), the clock allows \(consumedBetween) consumed between")
            #expect(delay >= 0 && delay <= 1920)
        }
    }

    /// `snd_pcm_rewind` takes back written frames the card has not played (ioplug does not tell the
    /// plugin; the card follows the application pointer): the frames written after it replace them,
    /// and the card plays every other frame once, in order.
    @Test func aRewindReplacesTheFramesTakenBack() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: 10) == 0)
        #expect(writer.pcm.rewindable() >= 6 * 480, "the card has not played six periods yet")
        #expect(writer.rewind(frames: 6 * 480) == 6 * 480)
        #expect(writer.write(periods: 8) == 0)
        writer.pcm.drain()
        #expect(card.recordedFrames == 12 * 480)
        #expect(card.recordedBytes() == writer.written)
        #expect(card.events("rewind").map(\.frames) == [4 * 480])
        #expect(card.events("rewind-late").isEmpty)
    }

    /// `rewind xrun`, a card that cannot take back: the rewind is taken (ioplug cannot refuse it),
    /// and the next call finds the stream stopped (-EPIPE) with an xrun `rewind` in the sidecar;
    /// after `snd_pcm_prepare` it plays again. It played what was written before the rewind up to
    /// where it stopped, then what was written after the prepare.
    @Test func aCardThatCannotTakeBackStopsAtARewind() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy, rewind: .xrun)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: 10) == 0)
        #expect(writer.rewind(frames: 3 * 480) == 3 * 480)
        #expect(writer.writePeriod() == -Int(EPIPE))
        let xrun = try #require(card.events("xrun").first)
        #expect(xrun.detail == "rewind")
        #expect(card.events("rewind").count == 1)
        #expect(writer.pcm.prepare() == 0)
        #expect(writer.write(periods: 6) == 0)
        writer.pcm.drain()
        Self.expectPlayed(upTo: xrun, thenTheLast: 6 * 480, of: writer)
    }

    /// `rewind xrun` stops a stream that was only prepared too (the kernel's indirect-PCM helpers
    /// fail the rewind in either state), before it played anything: the next call finds it stopped,
    /// and after `snd_pcm_prepare` it plays what is written then, and nothing of before.
    /// `rewind xrun-running` follows a rewind of a prepared stream (the frames are taken back).
    @Test(arguments: [TestCard.Rewind.xrun, .xrunRunning])
    func aPreparedCardAtARewind(_ mode: TestCard.Rewind) throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy, rewind: mode)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: 2) == 0)
        #expect(writer.rewind(frames: 2 * 480) == 2 * 480)
        let avail = writer.pcm.avail()
        if mode == .xrun {
            #expect(avail == -Int(EPIPE))
            #expect(card.events("xrun").map(\.detail) == ["rewind"])
            #expect(writer.pcm.prepare() == 0)
        } else {
            #expect(avail == Self.roomy, "all taken back")
            #expect(card.events("xrun").isEmpty)
        }
        #expect(card.events("start").isEmpty)
        #expect(writer.write(periods: 10) == 0)
        writer.pcm.drain()
        #expect(card.recordedBytes() == writer.written, "only what was written after the rewind")
        #expect(card.recordedFrames == 10 * 480)
    }

    /// A write of the card's record that the file held (here a pipe nobody reads for 0.5 s, past its
    /// 64 KiB) is noted in the sidecar: a `slow-write` line with how long it took, in µs, at the
    /// instant it began; the record is still every frame.
    @Test func aSlowRecordWriteIsNoted() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        #expect(mkfifo(card.record, 0o644) == 0)
        let read = Mutex<[UInt8]>([])
        let reader = OSThread.start {
            let fd = open(card.record, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            usleep(500_000)
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 65_536) }
                if n <= 0 { break }
                read.withLock { $0 += chunk[0..<n] }
            }
            close(fd)
        }
        var written: [UInt8] = []
        do {
            let writer = try CardWriter(card)
            let began = monotonicNanoseconds()
            while monotonicNanoseconds() - began < 1_000_000_000 { _ = writer.writePeriod() }
            writer.pcm.drain()
            written = writer.written
        }
        reader.join()
        let slow = card.events("slow-write").compactMap { Int($0.detail) }
        #expect(slow.contains { $0 >= 20_000 }, "slow writes (µs): \(slow)")
        print("slow writes (µs): \(slow)")
        let played = read.withLock { $0 }
        #expect(played.count > 0 && written.starts(with: played), "\(played.count) of \(written.count) bytes")
    }

    /// Behind alsa-lib's own `rate` plugin (which maps its slave: the card offers mmap access too),
    /// one second written at 48 kHz is recorded as one second at 44.1 kHz, a 1 kHz tone still 1 kHz;
    /// and that chain cannot take back what it was given.
    @Test func playsBehindAlsaLibsRateConverterWhichCannotRewind() throws {
        let card = ALSATestRig.makeCard(rate: 44100, periodFrames: 441, bufferFrames: 4410)
        let pcm = try PCM(
            PCMRequest(
                name: ALSATestRig.rateConverted(card), rate: 48000, channels: 2, format: .s16LE,
                periodFrames: 480, bufferFrames: 4800))
        #expect(pcm.configuration.periodFrames == 480 && pcm.configuration.bufferFrames == 4800)
        let tone = (0..<48_000).flatMap { i -> [Int16] in
            let s = Int16(8_000 * sin(2 * Double.pi * 1_000 * Double(i) / 48_000))
            return [s, s]
        }
        var at = 0
        while at < 48_000 {
            let n = tone[(2 * at)...].withUnsafeBytes { pcm.write($0.baseAddress!, frames: min(480, 48_000 - at)) }
            try #require(n > 0, "write returned \(n)")
            at += n
            if at == 4 * 480 {
                #expect(pcm.rewindable() == 0)
                #expect(pcm.rewind(frames: 480) == 0)
            }
        }
        pcm.drain()
        let left = Signals.channel(ALSATestRig.readS16(card.record), 0, of: 2)
        #expect(abs(left.count - 44_100) <= 441, "recorded \(left.count) frames")
        // Cycles: rising through ±1/8 of the amplitude (the converter's rounding near zero would
        // count some crossings twice).
        var rising = 0
        var low = false
        for x in left {
            if x < -0.03 { low = true } else if x > 0.03 && low { (rising, low) = (rising + 1, false) }
        }
        #expect(abs(rising - 1_000) <= 2, "\(rising) cycles in \(left.count) frames")
    }

    /// A writer that comes back after the buffer ran empty gets -EPIPE (the underrun happened at the
    /// period the buffer emptied), and the stream stays stopped until prepare.
    @Test func aLateWriterUnderrunsAndRecoversAfterPrepare() throws {
        let card = ALSATestRig.makeCard()
        let writer = try CardWriter(card)
        #expect(writer.write(periods: 4) == 0)
        let start = try #require(card.startNanoseconds)
        sleep(untilNanoseconds: start + 55_000_000)  // 15 ms after the 40 ms buffer ran out
        // The late write from a thread pinned to the last CPU: the card notes where it was found.
        let cpu = try #require(RealtimeCanary.cpus.last)
        let late = Mutex<(pinned: Int32, wrote: Int)>((-1, 0))
        nonisolated(unsafe) let lateWriter = writer  // one thread at a time: this one waits in join
        OSThread.start(name: "late") {
            let pinned = baton_pin_calling_thread(Int32(cpu))
            late.withLock { $0 = (pinned, lateWriter.writePeriod()) }
        }.join()
        #expect(late.withLock { $0 } == (0, -Int(EPIPE)))
        #expect(writer.writePeriod() == -Int(EPIPE))
        #expect(writer.pcm.delay() == nil)
        let xrun = try #require(card.events("xrun").first)
        #expect(xrun.detail == "underrun" && xrun.frames == 1920)
        #expect(abs(xrun.nanoseconds - start - 40_000_000) <= 1)
        let found = try #require(card.events("xrun-found").first)
        #expect(found.detail == "\(cpu)" && found.frames == 1920)
        #expect(found.nanoseconds >= start + 55_000_000)

        #expect(writer.pcm.prepare() == 0)
        #expect(writer.write(periods: 6) == 0)
        writer.pcm.drain()
        #expect(card.recordedBytes() == writer.written)
    }

    /// An injected xrun stops a running stream at once: -EPIPE, then `snd_pcm_recover` prepares it.
    @Test func anInjectedXrunStopsTheStreamUntilRecovered() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        card.send(.xrun)
        #expect(writer.writePeriod() == -Int(EPIPE))
        #expect(writer.pcm.recover(-EPIPE) == 0)
        #expect(writer.write(periods: 6) == 0)
        writer.pcm.drain()
        let xrun = try #require(card.events("xrun").first)
        #expect(xrun.detail == "injected")
        Self.expectPlayed(upTo: xrun, thenTheLast: 6 * 480, of: writer)
    }

    /// A suspend injected by another process gives -ESTRPIPE until `snd_pcm_resume`, which continues
    /// where the card stopped: nothing written is lost.
    @Test func suspendGivesESTRPIPEUntilResume() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        let sh = Subprocess.run("/bin/sh", ["-c", "echo suspend >> '\(card.control)'"])
        #expect(sh.status == 0)
        #expect(writer.writePeriod() == -Int(ESTRPIPE))
        #expect(writer.writePeriod() == -Int(ESTRPIPE))
        #expect(writer.pcm.delay() == nil)
        #expect(writer.pcm.wait(milliseconds: 100) == -ESTRPIPE)
        #expect(writer.pcm.resume() == 0)
        #expect(writer.write(periods: 8) == 0)
        writer.pcm.drain()
        #expect(card.recordedBytes() == writer.written)
        #expect(
            card.events().map(\.kind).filter { ["suspend", "resume", "xrun"].contains($0) } == ["suspend", "resume"])
    }

    /// On a card that cannot resume, the application falls back to prepare: `snd_pcm_recover` first
    /// tries resume (alsa-lib reports success for an ioplug), the next write fails with -EPIPE, and
    /// recovering from that prepares the stream.
    @Test func suspendWithoutResumeNeedsPrepare() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        #expect(baton_testcard_command(card.control, "suspend norecover") == 0)  // the C helper
        #expect(writer.writePeriod() == -Int(ESTRPIPE))
        #expect(writer.pcm.recover(-ESTRPIPE) == 0)
        #expect(writer.writePeriod() == -Int(EPIPE))
        #expect(writer.pcm.recover(-EPIPE) == 0)
        #expect(writer.write(periods: 4) == 0)
        #expect(card.events("resume-refused").count == 1)
    }

    /// Unplugged, every call fails with -ENODEV and the card cannot be opened, also by a new handle,
    /// until it is replugged; then a new handle plays (the old one stays dead, as with a USB DAC).
    @Test func unplugFailsEveryCallAndOpenUntilReplug() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        card.send(.unplug)
        #expect(writer.writePeriod() == -Int(ENODEV))
        #expect(writer.pcm.prepare() == -ENODEV)
        #expect(writer.pcm.delay() == nil)
        #expect(writer.pcm.recover(-ENODEV) == -ENODEV)
        #expect(writer.writePeriod() == -Int(ENODEV))
        do {
            _ = try CardWriter(card)
            Issue.record("opened an unplugged card")
        } catch let error as ALSAError {
            #expect(error.code == -ENODEV && error.isDeviceGone)
        }
        card.send(.replug)
        let again = try CardWriter(card)
        #expect(again.write(periods: Self.startPeriods) == 0)
        again.pcm.drain()
        #expect(writer.writePeriod() == -Int(ENODEV))
        // Events are recorded by the handles that see them: the dead one saw the unplug; the new one
        // opened after the replug (it reads the log's levels at open, not its past events).
        #expect(card.events("unplug").count == 1 && card.events("open").count == 2)
    }

    /// While another program holds the card (its `busy` file), a non-blocking open fails with -EBUSY
    /// at once — so `PCM`, which opens so, says the device is in use — and a blocking open waits until
    /// the card is let go, then opens and plays: the kernel's exclusive open (its `open_wait`).
    @Test func aBusyCardRefusesANonBlockingOpenAndHoldsABlockingOne() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        card.hold()
        var pcm: OpaquePointer?
        let t0 = monotonicNanoseconds()
        #expect(snd_pcm_open(&pcm, card.name, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK) == -EBUSY)
        do {
            _ = try CardWriter(card)
            Issue.record("PCM opened a busy card")
        } catch let error as ALSAError {
            #expect(error.code == -EBUSY && error.isInUse, "\(error)")
            #expect(error.description.contains("in use by another program"), "\(error)")
        }
        #expect(monotonicNanoseconds() - t0 < 1_000_000_000, "a non-blocking open answers at once")
        #expect(card.events("open").isEmpty)

        let letGoAt = Atomic<Int64>(0)
        let other = OSThread.start {
            usleep(300_000)
            letGoAt.store(monotonicNanoseconds(), ordering: .releasing)
            card.letGo()
        }
        #expect(snd_pcm_open(&pcm, card.name, SND_PCM_STREAM_PLAYBACK, 0) == 0)
        let openedAt = monotonicNanoseconds()
        other.join()
        let letGo = letGoAt.load(ordering: .acquiring)
        #expect(letGo > 0 && openedAt >= letGo, "the blocking open returned before the card was let go")
        #expect(openedAt - letGo < 200_000_000, "and soon after: \(Double(openedAt - letGo) / 1e6) ms")
        if let pcm { snd_pcm_close(pcm) }
        // Let go, it opens without waiting and plays.
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        writer.pcm.drain()
        #expect(card.recordedFrames == Self.startPeriods * 480)
    }

    /// A stall stops consumption for its length: a writer keeping the buffer full blocks that long and
    /// never underruns (a stalled card holds its buffer), and afterwards the card runs at its rate again.
    @Test func aStallBlocksTheWriterWithoutAnUnderrun() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        // The clock read before the command: a test thread descheduled between the two would
        // otherwise see a shorter block.
        let t0 = monotonicNanoseconds()
        card.send(.stall(milliseconds: 200))
        #expect(writer.writePeriod() == 480)
        let blocked = monotonicNanoseconds() - t0
        #expect(blocked >= 195_000_000 && blocked < 260_000_000, "blocked \(blocked) ns")
        #expect(writer.write(periods: 10) == 0)
        writer.pcm.drain()
        #expect(card.events("xrun").isEmpty)
        #expect(card.recordedBytes() == writer.written)
        let periods = card.events("period")
        let gaps = zip(periods.dropFirst(), periods).map { $0.nanoseconds - $1.nanoseconds }
        let longest = try #require(gaps.max())
        // The period that straddles the stall took exactly its 10 ms plus the 200 ms.
        #expect(abs(longest - 210_000_000) <= 2, "longest gap \(longest) ns")
        #expect(gaps.filter { $0 != 10_000_000 }.count == 1)
    }

    /// A writer blocked through a long stall still sees a fault within a period: the card's poll
    /// descriptor wakes once a period while a control file is watched. Here another process unplugs the
    /// card 100 ms into a 1 s stall.
    @Test func aBlockedWriterSeesAnUnplugDuringAStall() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        card.send(.stall(milliseconds: 1000))
        let t0 = monotonicNanoseconds()
        let injector = try BackgroundProcess(
            "/bin/sh", ["-c", "sleep 0.1; echo unplug >> '\(card.control)'"],
            outputPath: card.control + ".sh.log")
        // Periods the card consumed before the stall took hold (a test thread preempted after the
        // first writes) leave room: those writes return at once; during the stall the buffer fills
        // and the next write blocks until the unplug.
        var result = writer.writePeriod()
        for _ in 0..<(Self.roomy / 480) where result == 480 { result = writer.writePeriod() }
        #expect(result == -Int(ENODEV))
        let blocked = monotonicNanoseconds() - t0
        #expect(blocked >= 100_000_000 && blocked < 300_000_000, "blocked \(blocked) ns")
        #expect(injector.wait(seconds: 5) == 0)
    }

    /// A card with +500 ppm drift consumes 96 048 frames in 2 s, not 96 000: measured by the test's clock
    /// and `snd_pcm_delay` on a frame-exact pointer. A `drift` command changes the rate from then on.
    @Test func driftChangesTheConsumptionRate() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy, driftPPM: 500, pointer: .frame)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        // When the card consumed what: the reading between the closest pair of clock reads of 20,
        // so that a test thread descheduled around one (CI's busy machine) does not blur it; 3
        // frames are 62 µs.
        func consumedNow() throws -> (t: Double, frames: Int) {
            var best: (window: Int64, t: Double, frames: Int)?
            for _ in 0..<20 {
                let before = monotonicNanoseconds()
                let delay = try #require(writer.pcm.delay())
                let after = monotonicNanoseconds()
                if best == nil || after - before < best!.window {
                    best = (after - before, Double(before + after) / 2e9, writer.frames - delay)
                }
            }
            let reading = try #require(best)
            #expect(reading.window < 20_000, "the closest reads were \(reading.window) ns apart")
            return (reading.t, reading.frames)
        }
        let first = try consumedNow()
        #expect(writer.write(periods: 200) == 0)
        let second = try consumedNow()
        let seconds = second.t - first.t
        let consumed = Double(second.frames - first.frames)
        let expected = 48000 * 1.0005 * seconds
        #expect(abs(consumed - expected) <= 3, "consumed \(consumed) in \(seconds) s, expected \(expected)")
        #expect(abs(consumed - 48000 * seconds) > 40)

        card.send(.drift(ppm: -1000))
        #expect(writer.write(periods: 20) == 0)
        writer.pcm.drain()
        let drift = try #require(card.events("drift").first)
        let after = card.events("period").filter { $0.nanoseconds > drift.nanoseconds + 20_000_000 }
        let spacing = zip(after.dropFirst(), after).map { $0.nanoseconds - $1.nanoseconds }
        #expect(spacing.count > 10)
        // 480 frames at 48 000 × 0.999 Hz: 10 010 010 ns.
        for gap in spacing { #expect(abs(gap - 10_010_010) <= 1) }
        #expect(card.recordedBytes() == writer.written)
    }

    /// A drift of -1 000 000 ppm or less (a clock stopped or running backwards: rate_scale 0 or
    /// below, a writer spun for ever or saw a false xrun) is refused: in the definition with the
    /// card's invalid-value error (the open fails), as a command as an unknown command, the card
    /// running on at its rate.
    @Test(.timeLimit(.minutes(1))) func aDriftThatStopsTheClockIsRefused() throws {
        #expect(throws: (any Error).self) { _ = try CardWriter(ALSATestRig.makeCard(driftPPM: -1_000_000)) }
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        card.send(.drift(ppm: -1_000_000))
        #expect(writer.write(periods: 20) == 0)
        writer.pcm.drain()
        #expect(card.events("unknown-command").map(\.detail) == ["drift"])  // the line up to its argument
        #expect(card.events("drift").isEmpty)
        #expect(card.recordedBytes() == writer.written)
    }

    /// The drift's bounds are the same in every form it comes in: an integer, real or string
    /// `drift-ppm` in the definition and the `drift` command take up to +1 000 000 ppm and refuse
    /// more, and refuse -1 000 000 or less. A string "1000000.5" and the command were taken while
    /// the real 1000000.5 was refused.
    @Test(.timeLimit(.minutes(1))) func theDriftHasTheSameBoundsInEveryForm() throws {
        for taken in [
            "1000000", "1000000.0", "\"1000000\"", "\"1000000.000\"", "-999999", "-999999.999", "\"-999999.999\"",
        ] {
            #expect(throws: Never.self, "drift-ppm \(taken)") { _ = try CardWriter(ALSATestRig.makeCard(drift: taken)) }
        }
        for refused in [
            "1000001", "1000000.5", "\"1000001\"", "\"1000000.5\"", "-1000000", "-1000000.0", "\"-1000000\"",
            "\"-1000000.5\"",
        ] {
            #expect(throws: (any Error).self, "drift-ppm \(refused)") {
                _ = try CardWriter(ALSATestRig.makeCard(drift: refused))
            }
        }
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        card.send(.drift(ppm: 1_000_000.5))
        #expect(writer.write(periods: 20) == 0)
        card.send(.drift(ppm: 1_000_000))
        #expect(writer.write(periods: 20) == 0)
        writer.pcm.drain()
        #expect(card.events("unknown-command").map(\.detail) == ["drift"])
        #expect(card.events("drift").map(\.detail) == ["1000000.000"])
        #expect(card.recordedBytes() == writer.written)
    }

    /// Every sample format and channel count the card takes is recorded byte for byte, at the shape given.
    @Test(arguments: [
        (SampleFormat.s16LE, 1, 48000, 480), (.s32LE, 2, 44100, 441), (.s32LE, 8, 48000, 240),
        (.s16LE, 6, 32000, 320),
    ])
    func recordsEveryFormatExactly(format: SampleFormat, channels: Int, rate: Int, period: Int) throws {
        let card = ALSATestRig.makeCard(
            rate: rate, periodFrames: period, bufferFrames: 10 * period,
            format: format == .s16LE ? .s16LE : .s32LE, channels: channels)
        let writer = try CardWriter(card, sampleFormat: format)
        #expect(writer.pcm.configuration.periodFrames == period && writer.pcm.configuration.bufferFrames == 10 * period)
        #expect(writer.write(periods: 12) == 0)
        writer.pcm.drain()
        #expect(card.recordedBytes() == writer.written)
        #expect(
            card.events("setup").first?.detail
                == "\(rate) \(channels) \(format.rawValue) \(period) \(10 * period) record-offset=0")
    }

    /// The card grants only its own sizes: a request for other ones is answered with the card's.
    @Test func grantsOnlyItsOwnPeriodAndBuffer() throws {
        let card = ALSATestRig.makeCard(periodFrames: 256, bufferFrames: 1024)
        let pcm = try PCM(
            PCMRequest(
                name: card.name, rate: 48000, channels: 2, format: .s16LE, periodFrames: 480,
                bufferFrames: 1920))
        #expect(pcm.configuration.periodFrames == 256 && pcm.configuration.bufferFrames == 1024)
        #expect(throws: ALSAError.self) {
            try PCM(
                PCMRequest(
                    name: card.name, rate: 44100, channels: 2, format: .s16LE, periodFrames: 256,
                    bufferFrames: 1024))
        }
    }

    /// The transfer, pointer, delay, avail and poll paths make no heap allocation on the writing thread.
    @Test func writingDoesNotAllocate() throws {
        let card = ALSATestRig.makeCard(bufferFrames: Self.roomy)
        let writer = try CardWriter(card)
        #expect(writer.write(periods: Self.startPeriods) == 0)
        var failures = 0
        let count = countAllocations {
            for _ in 0..<40 {
                if writer.writePeriodUnrecorded() != 480 { failures += 1 }
                if writer.pcm.delay() == nil { failures += 1 }
                if writer.pcm.avail() < 0 { failures += 1 }
                if writer.pcm.wait(milliseconds: 50) < 0 { failures += 1 }
            }
        }
        #expect(failures == 0)
        #expect(count == 0, "\(count) allocations")
    }

    /// `aplay` plays a WAV through the card (its own parameter choices, drain and close), and the record is
    /// the WAV's data: S16_LE stereo at 48 kHz and FLOAT_LE in 8 channels at 44.1 kHz.
    @Test(arguments: [TestCard.Format.s16LE, .floatLE])
    func aplayPlaysAWAVThroughTheCard(format: TestCard.Format) throws {
        let aplay = "/usr/bin/aplay"
        try #require(access(aplay, X_OK) == 0, "aplay not installed (scripts/install-deps.sh)")
        let float = format == .floatLE
        let (rate, channels, period) = float ? (44100, 8, 441) : (48000, 2, 480)
        let card = ALSATestRig.makeCard(
            rate: rate, periodFrames: period, bufferFrames: 10 * period, format: format,
            channels: channels)
        let frames = 30 * period
        var data: [UInt8] = []
        for i in 0..<(frames * channels) {
            if float {
                let v = Float(sin(Double(i) * 0.001)) * 0.5
                withUnsafeBytes(of: v.bitPattern.littleEndian) { data += $0 }
            } else {
                withUnsafeBytes(of: Int16(truncatingIfNeeded: i &* 37).littleEndian) { data += $0 }
            }
        }
        let wav = "\(ALSATestRig.directory)/aplay-\(format.rawValue).wav"
        writeWAV(data, formatTag: float ? 3 : 1, bits: float ? 32 : 16, rate: rate, channels: channels, to: wav)
        let t0 = monotonicNanoseconds()
        let run = Subprocess.run(
            aplay, ["-q", "-D", card.name, wav],
            environment: ["ALSA_CONFIG_PATH": "\(ALSATestRig.directory)/asound.conf"])
        let seconds = Double(monotonicNanoseconds() - t0) / 1e9
        #expect(run.status == 0, "\(run.output)")
        #expect(card.recordedBytes() == data)
        #expect(seconds >= 0.3, "aplay returned after \(seconds) s for 0.3 s of audio")
        #expect(card.events("drained").count == 1)
    }

    /// A definition the card cannot honour does not open.
    @Test func aBadDefinitionDoesNotOpen() {
        let card = ALSATestRig.makeCard(periodFrames: 500, bufferFrames: 1700)
        #expect(throws: ALSAError.self) { try CardWriter(card) }
    }
}

/// A minimal WAV: `fmt ` (16 bytes) and `data`.
private func writeWAV(_ data: [UInt8], formatTag: Int, bits: Int, rate: Int, channels: Int, to path: String) {
    var bytes: [UInt8] = []
    func u32(_ v: Int) { for k in 0..<4 { bytes.append(UInt8((v >> (8 * k)) & 0xFF)) } }
    func u16(_ v: Int) { for k in 0..<2 { bytes.append(UInt8((v >> (8 * k)) & 0xFF)) } }
    let block = channels * bits / 8
    bytes += Array("RIFF".utf8)
    u32(36 + data.count)
    bytes += Array("WAVE".utf8)
    bytes += Array("fmt ".utf8)
    u32(16)
    u16(formatTag)
    u16(channels)
    u32(rate)
    u32(rate * block)
    u16(block)
    u16(bits)
    bytes += Array("data".utf8)
    u32(data.count)
    bytes += data
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}
