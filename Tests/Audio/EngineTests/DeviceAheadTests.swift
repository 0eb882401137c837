import ALSA
import BatonTesting
import Engine
import Glibc
import Synchronization
import Testing

/// A `clock: device` zone that renders ahead (`DeviceSpec.rendersAhead`) on the virtual sound card:
/// it keeps the card's 100 ms buffer full and wakes about every 70 ms instead of every period, and
/// when something changes it takes back what the card has not started playing (`snd_pcm_rewind`,
/// which the card follows) and renders the change in — heard about as soon as with a 40 ms buffer,
/// every frame still played once, in order.
@Suite(.ownThread) struct DeviceAheadTests {
    static let rate = DeviceCardTests.rate
    static let period = DeviceCardTests.period

    static func card() -> TestCard { DeviceCardTests.card(bufferFrames: DeviceCardTests.longBuffer) }

    /// A zone rendering ahead whose thread is held off longer than its buffer (the card, or its
    /// clocked buffer on the system clock, runs dry) underruns once and plays on. (Started again
    /// with only the period the restart held, as 769f564 could, it may run dry again at once; here
    /// the rings' bell woke the thread early enough that this test did not see it.)
    @Test(arguments: [ZoneClock.device, .system])
    func aZoneHeldOffUnderrunsOnce(clock: ZoneClock) throws {
        let card = clock == .device ? DeviceCardTests.card(bufferFrames: DeviceCardTests.longBuffer) : nil
        let output =
            card.map { DeviceCardTests.device($0, rendersAhead: true) }
            ?? ClockedAheadTests.output(ALSATestRig.makePCM().name)
        let feeder = SlotFeeder([try #require(output.mixer.claimSlot(gain: 1))])
        let hold = Atomic<Bool>(false)
        output.cycleObserver = { _ in
            if hold.exchange(false, ordering: .acquiringAndReleasing) { usleep(300_000) }  // longer than the buffer
        }
        output.start()
        defer {
            output.stop()
            feeder.stop()
        }
        #expect(waitUntil { output.snapshot().framesPlayed >= Self.rate / 2 })
        hold.store(true, ordering: .releasing)
        #expect(waitUntil { output.snapshot().xruns >= 1 }, "it ran dry")
        let from = output.snapshot().framesPlayed
        #expect(waitUntil(seconds: 4) { output.snapshot().framesPlayed >= from + Self.rate })
        #expect(output.snapshot().xruns == 1, "\(output.snapshot().xruns) xruns")
    }

    /// Three seconds of music with a change asked for every 37 ms that leaves the samples as they
    /// are (the music's gain set to what it is, a silent second source): each is a take-back, yet
    /// the card plays every frame once, in order; the zone's audible frame stays within a period
    /// of what the card consumed; and the thread wakes a fraction as often as the periods.
    /// The same through alsa-lib's plugins in front of the card, which map it and copy the samples
    /// through: `route`, and a `plug` that converts S16 to the card's S32: the take-backs pass
    /// through them to the card.
    @Test(arguments: Chain.allCases) func everyFrameOnceThroughTakeBacks(through chain: Chain) throws {
        let card =
            chain == .plugToS32
            ? ALSATestRig.makeCard(
                rate: Self.rate, periodFrames: Self.period, bufferFrames: DeviceCardTests.longBuffer, format: .s32LE)
            : Self.card()
        let name: String? =
            switch chain {
            case .direct: nil
            case .route: ALSATestRig.routed(card)
            case .plugToS32: ALSATestRig.plugged(card)
            }
        let output = DeviceCardTests.device(card, name: name, rendersAhead: true)
        let music = try #require(output.mixer.claimSlot(gain: 1))
        let feeder = SlotFeeder([music])
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= DeviceCardTests.longBuffer })
        let first = output.snapshot().framesPlayed
        let wakesBefore = output.wakeUpCount
        let start = try #require(card.startNanoseconds)
        var worst = 0
        var samples = 0
        var silent: SourceSlot? = nil
        #expect(
            waitUntil(seconds: 8) {
                let s = output.snapshot()
                worst = max(worst, abs(s.audibleFrame - Self.cardFrames(at: DeviceCardTests.now(), start: start)))
                samples += 1
                Self.askForAChange(output, music: music, silent: &silent)
                usleep(37_000)
                return output.snapshot().framesPlayed >= first + 3 * Self.rate
            })
        let wakes = output.wakeUpCount - wakesBefore
        let played = output.snapshot().framesPlayed - first
        let takeBacks = output.takeBacks
        output.stop()
        feeder.stop()
        let record = chain == .plugToS32 ? Self.s16(fromS32: card.recordedBytes()) : card.recordedBytes()
        #expect(IndexSignal.firstBreak(in: record) == nil, "every frame once, in order")
        #expect(takeBacks.count >= 30, "the changes were rendered in by taking back (\(takeBacks))")
        #expect(
            card.events("rewind").count == takeBacks.count + 1,
            "the card saw the period of silence taken back before it played, then every take-back")
        #expect(card.events("rewind-late").isEmpty, "nothing was taken back that the card had played")
        #expect(output.snapshot().xruns == 0)
        #expect(
            worst <= Self.period + Self.period / 5,
            "audibleFrame vs the card's clock: worst \(worst) frames over \(samples)")
        // Without changes a wake-up every 70 ms; each change adds one.
        let periods = played / Self.period
        #expect(wakes < periods / 2, "\(wakes) wake-ups for \(periods) periods")
        print(
            "rendering ahead: \(wakes) wake-ups for \(periods) periods, \(takeBacks.count) take-backs "
                + "(\(takeBacks.frames) frames), audible within \(worst) frames")
    }

    /// Between wake-ups (about 70 ms apart here) the zone's audible frame moves with the card: the
    /// status is never a wake-up behind what is heard. Sampled every 3 ms for a second against the
    /// card's clock (frames since its start at its rate), it is within a period (the card's pointer
    /// moves a period at a time, so its delay reads up to a period high).
    @Test func theAudibleFrameMovesWithTheCardBetweenWakeUps() throws {
        let card = Self.card()
        let output = DeviceCardTests.device(card, rendersAhead: true)
        let feeder = SlotFeeder([try #require(output.mixer.claimSlot(gain: 1))])
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= 2 * DeviceCardTests.longBuffer })
        let start = try #require(card.startNanoseconds)
        var worst = 0
        var samples = 0
        let wakesBefore = output.wakeUpCount
        let end = DeviceCardTests.now() + 1_000_000_000
        while DeviceCardTests.now() < end {
            let before = DeviceCardTests.now()
            let audible = output.snapshot().audibleFrame
            let after = DeviceCardTests.now()
            worst = max(worst, abs(audible - Self.cardFrames(at: (before + after) / 2, start: start)))
            samples += 1
            usleep(3_000)
        }
        let wakes = output.wakeUpCount - wakesBefore
        output.stop()
        feeder.stop()
        #expect(card.events("start").count == 1 && card.events("xrun").isEmpty)
        #expect(wakes <= 20, "\(wakes) wake-ups in the second sampled")
        #expect(worst <= Self.period + Self.period / 5, "audible frame vs the card's clock: worst \(worst) frames")
        print(
            "rendering ahead: audible frame within \(worst) frames of the card over \(samples) samples, \(wakes) wakes")
    }

    /// A card that stalls but stays running (a DAC whose clock stops for a second) is not heard
    /// playing on: between wake-ups the audible frame moves with the card only as far as the card
    /// should have played before the thread's next wake-up (its low water and a period), and once
    /// that wake-up found the card had not got there (its wait timed out), it stands at the frame
    /// where the card stopped — not sliding on to everything written and back at every wait. It goes
    /// back once, at that first wait that timed out, even though the card played some of that wait
    /// before it stopped: it was moved on again from there for a second whole wait, up to the buffer
    /// (here, where the card's stall command woke the thread: a measure at the stall). When the card
    /// plays again, so does the audible frame.
    @Test func aStalledCardIsNotHeardPlayingOn() throws {
        let card = Self.card()
        let output = DeviceCardTests.device(card, rendersAhead: true)
        let feeder = SlotFeeder([try #require(output.mixer.claimSlot(gain: 1))])
        output.start()
        defer {
            output.stop()
            feeder.stop()
        }
        #expect(waitUntil { output.snapshot().framesPlayed >= 2 * DeviceCardTests.longBuffer })
        // 30 ms after a wake-up: the card stops within a wait, having played some of it.
        let wakes = output.wakeUpCount
        #expect(waitUntil { output.wakeUpCount > wakes })
        let wokeAt = DeviceCardTests.now()
        usleep(30_000)
        card.send(.stall(milliseconds: 1_000))
        var samples: [(ns: Int64, audible: Int)] = []
        let end = DeviceCardTests.now() + 900_000_000
        while DeviceCardTests.now() < end {
            samples.append((DeviceCardTests.now(), output.snapshot().audibleFrame))
            usleep(3_000)
        }
        let stall = try #require(card.events("stall").first)
        let stoppedAt = stall.frames
        // What the card should have played before the thread's next wake-up: down to its low water
        // (30 ms: three periods), and a period.
        let wakeUp = DeviceCardTests.longBuffer - 3 * Self.period + Self.period
        let most = samples.map(\.audible).max() ?? 0
        #expect(most <= stoppedAt + wakeUp, "ran \(most - stoppedAt) frames ahead of the stalled card")
        // Not moved on again from the stall for a whole wait: no further than the wake-up before it
        // allowed (a period more: the card's pointer, and the thread woke before it was seen).
        let sinceWakeUp = Int((stall.nanoseconds - wokeAt) * Int64(Self.rate) / 1_000_000_000)
        #expect(
            most <= stoppedAt - sinceWakeUp + wakeUp + Self.period,
            "ran \(most - stoppedAt) frames ahead of the stalled card, which played \(sinceWakeUp) after the wake-up")
        // From the stall on: back once at most (at the first wait that timed out), and from then on
        // where the card stopped.
        let during = samples.filter { $0.ns >= stall.nanoseconds }.map(\.audible)
        let steps = zip(during.indices, during.dropFirst().indices).filter { during[$1] < during[$0] }.map(\.1)
        let back = steps.map { "\(during[$0 - 1] - stoppedAt)→\(during[$0] - stoppedAt)" }
        #expect(steps.count <= 1, "the audible frame went back \(steps.count) times: \(back) frames past the card")
        let sinceBack = steps.first.map { Array(during[$0...]) } ?? []
        let past = sinceBack.map { $0 - stoppedAt }
        #expect(
            past.allSatisfy { abs($0) <= Self.period },
            "after it went back, vs where the card stopped: \(past.min() ?? 0)...\(past.max() ?? 0) frames")
        // From 300 ms into the stall (the thread has waited in vain since) to its end.
        let settled = samples.filter { $0.ns >= stall.nanoseconds + 300_000_000 }.map(\.audible)
        #expect(settled.count >= 20)
        let off = settled.map { $0 - stoppedAt }
        #expect(
            off.allSatisfy { abs($0) <= Self.period },
            "the audible frame vs where the card stopped: \(off.min() ?? 0)...\(off.max() ?? 0) frames")
        // Playing again after the stall: heard moving again.
        let after = stall.nanoseconds + 1_300_000_000
        while DeviceCardTests.now() < after { usleep(10_000) }
        #expect(output.snapshot().audibleFrame >= stoppedAt + Self.rate / 5)
        #expect(output.snapshot().xruns == 0)
        print("stalled card: at most \(most - stoppedAt) frames ahead, then \(off.min() ?? 0)...\(off.max() ?? 0)")
    }

    /// An injected xrun wakes the output at once (the card's descriptor reports it; the thread does
    /// not sleep out its ~70 ms): the card plays again within 20 ms, and every frame is played once.
    @Test func anXrunIsRecoveredAtOnce() throws {
        let card = Self.card()
        let output = DeviceCardTests.device(card, rendersAhead: true)
        let feeder = SlotFeeder([try #require(output.mixer.claimSlot(gain: 1))])
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= Self.rate / 2 })
        card.send(.xrun)
        #expect(waitUntil { output.snapshot().xruns == 1 })
        let after = output.snapshot().framesPlayed
        #expect(waitUntil { output.snapshot().framesPlayed >= after + Self.rate / 4 })
        output.stop()
        feeder.stop()
        let xrun = try #require(card.events("xrun").first)
        let restart = try #require(card.events("start").first { $0.nanoseconds > xrun.nanoseconds })
        let gap = Double(restart.nanoseconds - xrun.nanoseconds) / 1e6
        #expect(gap < 20, "playing again \(gap) ms after the xrun")
        #expect(IndexSignal.firstBreak(in: card.recordedBytes()) == nil, "every frame once, in order")
        print("rendering ahead: playing again \(gap) ms after an xrun")
    }

    /// An announcement asked for while the card holds up to 100 ms of the zone's (silent) mix is
    /// taken in two periods from what the card was playing: its first frame is heard within 40 ms
    /// of the request, each of five times, and it starts at the frame `nextFrame` said a change
    /// made then would start at, within a period.
    ///
    /// An output thread the machine holds past the periods it would take back misses them (in the
    /// parallel suite, 2026-12-04: one of five heard 49 ms after the request, started two periods
    /// after `nextFrame`, the others 16–19 ms): the soak's witnesses run beside it (`StallWitness`),
    /// and an announcement late while they saw the machine hold a real-time thread is named, not
    /// counted; any other fails.
    @Test func anAnnouncementIsHeardWithinTwoPeriods() throws {
        let card = Self.card()
        let output = DeviceCardTests.device(card, rendersAhead: true)
        let witness = StallWitness()
        witness.start()
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= 2 * DeviceCardTests.longBuffer })
        let requests = try Self.chimeFiveTimes(output)
        usleep(150_000)
        output.stop()
        let stalls = witness.stop()
        let latencies = try Self.heard(on: card, after: requests.map(\.ns))
        var excused: [String] = []
        for (r, latency) in zip(requests, latencies) {
            let at = try #require(r.firstFrame)
            #expect(latency > 0, "heard \(latency) ms after the request")
            guard abs(at - r.nextFrame) > Self.period || latency >= 40 else { continue }
            let judged = stalls.judge(
                "heard \(Stalls.tenths(latency)) ms after the request, started at \(at), nextFrame said \(r.nextFrame)",
                from: Int(r.ns), to: Int(r.ns) + Int(latency * 1e6))
            #expect(judged.excused, "\(judged.text)")
            if judged.excused { excused.append(judged.text) }
        }
        #expect(output.takeBacks.count >= 5)
        print(
            "rendering ahead: announcements heard \(latencies.map { ($0 * 10).rounded() / 10 }) ms after the request; "
                + stalls.canarySummary + excused.map { "; not counted: \($0)" }.joined())
    }

    /// Behind a PCM that cannot take back (the card behind alsa-lib's `rate` plugin, as a `plug`
    /// chain that converts the rate), a zone set to render ahead does not: it finds the PCM cannot
    /// rewind, keeps only its low water and a period there, as without the setting, and says so.
    /// An announcement is then heard within about 50 ms of the request each of five times, not a
    /// 100 ms buffer later.
    @Test func aPCMThatCannotRewindIsNotRenderedAhead() throws {
        let card = ALSATestRig.makeCard(rate: 44_100, periodFrames: 441, bufferFrames: 4_410)
        let output = DeviceOutput(
            DeviceSpec(
                pcm: PCMRequest(
                    name: ALSATestRig.rateConverted(card), rate: Self.rate, channels: 2, format: .s16LE,
                    periodFrames: Self.period, bufferFrames: DeviceCardTests.longBuffer),
                clock: .device, realtimePriority: 70,
                zones: [ZoneSpec(name: "zone", deviceChannels: [0, 1], rampFrames: 480, ringFrames: Self.rate / 2)],
                rendersAhead: true))
        #expect(output.snapshot().rendersAhead)  // as configured, until the PCM says otherwise
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= 2 * DeviceCardTests.longBuffer })
        #expect(!output.snapshot().rendersAhead)
        let requests = try Self.chimeFiveTimes(output)
        usleep(150_000)
        output.stop()
        let latencies = try Self.heard(on: card, after: requests.map(\.ns))
        #expect(latencies.allSatisfy { $0 > 0 && $0 < 65 }, "request to first frame heard: \(latencies) ms")
        #expect(output.takeBacks.count == 0)
        // Nothing taken back: a change starts after all that was rendered, and `nextFrame` says so.
        // It said the card's two kept periods on from what was played, up to 30 ms early.
        for r in requests {
            let first = try #require(r.firstFrame)
            #expect(first >= r.nextFrame && first - r.nextFrame <= Self.period, "said \(r.nextFrame), began \(first)")
        }
        let rounded = latencies.map { ($0 * 10).rounded() / 10 }
        print("a PCM that cannot rewind: announcements heard \(rounded) ms after the request")
    }

    /// A card whose own period is too long for the buffer asked (1,024 frames, as dmix's, against
    /// 480 / 1,920 asked): rendering ahead keeps two of the card's periods from being taken back,
    /// and such a buffer never holds more — render-ahead is off, and says why. It said it was on
    /// and never rendered ahead.
    @Test func aPeriodTooLongForTheBufferTurnsRenderAheadOff() throws {
        let card = ALSATestRig.makeCard(rate: Self.rate, periodFrames: 1_024, bufferFrames: 2_048)
        let pcm = PCMRequest(
            name: card.name, rate: card.rate, channels: card.channels, format: .s16LE, periodFrames: Self.period,
            bufferFrames: 4 * Self.period)
        let output = DeviceOutput(
            DeviceSpec(
                pcm: pcm, clock: .device, realtimePriority: 70,
                zones: [ZoneSpec(name: "zone", deviceChannels: [0, 1], rampFrames: 480, ringFrames: card.rate / 2)],
                rendersAhead: true))
        output.start()
        defer { output.stop() }
        #expect(waitUntil { output.snapshot().framesPlayed >= 4 * 1_024 })
        let snapshot = output.snapshot()
        #expect(snapshot.renderAheadOff == .periodTooLong, "\(String(describing: snapshot.renderAheadOff))")
        #expect(!snapshot.rendersAhead)
        #expect(snapshot.periodFrames == 1_024, "the card's own period")
    }

    /// A card whose own period is long (1,024 frames, as dmix's, against 480 asked) with a buffer
    /// that has room beyond the two it keeps: rendered ahead, and changes taken back, every frame
    /// played once. It was never asked whether it takes back (it never held more than its low
    /// water and a period, less than it keeps), so it never rendered ahead, and the status said
    /// it did. And the default 10 ms / 40 ms: b6b793e turned it off there as "period too long".
    @Test(arguments: [(1_024, 6_144), (480, 1_920)])
    func rendersAheadWhereTheBufferHoldsMoreThanItKeeps(period: Int, buffer: Int) throws {
        let card = ALSATestRig.makeCard(rate: Self.rate, periodFrames: period, bufferFrames: buffer)
        let output = DeviceCardTests.device(card, rendersAhead: true)
        let music = try #require(output.mixer.claimSlot(gain: 1))
        let feeder = SlotFeeder([music])
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= buffer })
        let first = output.snapshot().framesPlayed
        var silent: SourceSlot? = nil
        #expect(
            waitUntil(seconds: 6) {
                Self.askForAChange(output, music: music, silent: &silent)
                usleep(37_000)
                return output.snapshot().framesPlayed >= first + Self.rate
            })
        let snapshot = output.snapshot()
        let takeBacks = output.takeBacks
        output.stop()
        feeder.stop()
        #expect(snapshot.renderAheadOff == nil, "\(String(describing: snapshot.renderAheadOff))")
        #expect(snapshot.rendersAhead)
        #expect(takeBacks.count >= 10, "the changes were rendered in by taking back (\(takeBacks))")
        #expect(IndexSignal.firstBreak(in: card.recordedBytes()) == nil, "every frame once, in order")
        #expect(card.events("rewind-late").isEmpty, "nothing was taken back that the card had played")
        #expect(snapshot.xruns == 0)
    }

    /// On a card that stops at a rewind, as a driver that copies ahead to its hardware does (the
    /// Raspberry Pi's bcm2835 since Linux 6.4, `rewind: .xrun`), the zone finds out before the card
    /// plays, by taking back a period of silence: no xrun, nothing ever taken back, `renderAheadOff`
    /// says why from the start. On a card that stops only once it plays (`.xrunRunning`), the first
    /// take-back costs one xrun, and the zone then renders ahead no more. Either way each of five
    /// announcements is heard within about 50 ms of the request, as without the setting.
    @Test(arguments: [TestCard.Rewind.xrun, .xrunRunning])
    func aCardThatCannotTakeBackIsNotRenderedAhead(_ mode: TestCard.Rewind) throws {
        let card = ALSATestRig.makeCard(
            rate: Self.rate, periodFrames: Self.period, bufferFrames: DeviceCardTests.longBuffer, rewind: mode)
        let output = DeviceCardTests.device(card, rendersAhead: true)
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= 2 * DeviceCardTests.longBuffer })
        let foundBefore = mode == .xrun
        #expect(
            output.snapshot().rendersAhead == !foundBefore, "\(String(describing: output.snapshot().renderAheadOff))")
        let requests = try Self.chimeFiveTimes(output).map(\.ns)
        usleep(150_000)
        output.stop()
        let snapshot = output.snapshot()
        #expect(!snapshot.rendersAhead)
        #expect(snapshot.renderAheadOff == .refused(-EPIPE))
        #expect(snapshot.xruns == (foundBefore ? 0 : 1))
        #expect(output.takeBacks.count == (foundBefore ? 0 : 1))
        let xrun = try #require(card.events("xrun").first)
        #expect(card.events("xrun").map(\.detail) == ["rewind"])
        let start = try #require(card.events("start").first)
        #expect((xrun.nanoseconds < start.nanoseconds) == foundBefore, "the card stopped before it first played")
        let latencies = try Self.heard(on: card, after: requests)
        #expect(latencies.allSatisfy { $0 > 0 && $0 < 65 }, "request to first frame heard: \(latencies) ms")
        let rounded = latencies.map { ($0 * 10).rounded() / 10 }
        print("a card that stops at a take-back (\(mode)): announcements heard \(rounded) ms after the request")
    }

    /// A PCM that hands what it is given on at once — PulseAudio's `pulse`, to a real PulseAudio
    /// server — says yes to a take-back (alsa-lib's I/O plugins only move the application pointer)
    /// though the server already has the frames, and would play them twice. The output finds that
    /// before it plays: after taking back its period of silence the PCM still counts it as to be
    /// played. So it does not render ahead, and music with a change asked for every 37 ms reaches
    /// the server's sink every frame once, in order (its monitor, recorded with `parec`).
    @Test func aPluginThatHandsFramesOnIsNotRenderedAhead() throws {
        let dir = TestDirectory.make("pulse")
        let server = try PulseAudioServer(directory: dir)
        let recording = dir + "/sink.raw"
        let parec = try server.record(into: recording)
        let pcm = PCMRequest(
            name: ALSATestRig.pulse(server: server.address), rate: Self.rate, channels: 2, format: .s16LE,
            periodFrames: Self.period, bufferFrames: DeviceCardTests.longBuffer)
        let output = DeviceOutput(
            DeviceSpec(
                pcm: pcm, clock: .device, realtimePriority: 70,
                zones: [ZoneSpec(name: "zone", deviceChannels: [0, 1], rampFrames: 480, ringFrames: Self.rate / 2)],
                rendersAhead: true))
        let music = try #require(output.mixer.claimSlot(gain: 1))
        let feeder = SlotFeeder([music])
        output.start()
        #expect(waitUntil { output.snapshot().framesPlayed >= Self.rate / 2 })
        var silent: SourceSlot?
        for _ in 0..<40 {
            usleep(37_000)
            Self.askForAChange(output, music: music, silent: &silent)
        }
        usleep(200_000)
        output.stop()
        feeder.stop()
        usleep(300_000)  // what the server still held reaches the sink
        _ = parec.stop(signal: SIGINT)
        let snapshot = output.snapshot()
        #expect(snapshot.renderAheadOff == .keptWhatItTookBack)
        #expect(!snapshot.rendersAhead && output.takeBacks.count == 0 && snapshot.xruns == 0)
        // The music as the sink played it: from its first frame (index 1; index 0 is silence) on,
        // each frame the one before plus one, up to where the output stopped.
        let bytes = ALSATestRig.readBytes(recording)
        let frames = bytes.withUnsafeBytes { raw in
            let s = raw.bindMemory(to: Int16.self)
            return (0..<s.count / 2).map { Int(s[2 * $0 + 1]) * 30_000 + Int(s[2 * $0]) }
        }
        let first = try #require(frames.firstIndex { $0 != 0 }, "the sink played the music")
        let last = try #require(frames.lastIndex { $0 != 0 })
        let played = frames[first...last]
        let breaks = zip(played, played.dropFirst()).filter { $1 != $0 + 1 }.count
        #expect(breaks == 0, "\(breaks) frames not following the one before")
        #expect(played.count >= Self.rate, "\(played.count) frames of music at the sink")
        print(
            "pulse: render-ahead off before it played (\(snapshot.renderAheadOff.map { "\($0)" } ?? "on")), "
                + "\(played.count) frames at the sink, \(breaks) breaks")
    }

    /// A zone that stops while idle takes back the silence it rendered ahead first: the card plays
    /// out only what it keeps (two periods and what it had begun), so it is drained within 40 ms of
    /// the take-back instead of a 100 ms buffer later, and a chime after it is heard whole, once.
    @Test func anIdleStopPlaysOutOnlyWhatItKeeps() throws {
        let card = Self.card()
        let pcm = PCMRequest(
            name: card.name, rate: card.rate, channels: card.channels, format: .s16LE,
            periodFrames: card.periodFrames, bufferFrames: card.bufferFrames)
        let output = DeviceOutput(
            DeviceSpec(
                pcm: pcm, clock: .device, realtimePriority: 70,
                zones: [ZoneSpec(name: "zone", deviceChannels: [0, 1], rampFrames: 480, ringFrames: card.rate / 2)],
                stopsWhenIdle: true, rendersAhead: true))
        let slot = try #require(output.mixer.claimSlot(gain: 1))
        let chime = [Float](repeating: 0.25, count: 2 * 4_800)
        chime.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        slot.finish()
        output.start()
        #expect(waitUntil { slot.isDrained })
        output.mixer.release(slot)
        #expect(waitUntil { output.isStoppedIdle })
        output.stop()
        let events = card.events()
        let drained = try #require(events.last { $0.kind == "drained" })
        let rewind = try #require(events.last { $0.kind == "rewind" && $0.nanoseconds <= drained.nanoseconds })
        let playedOut = Double(drained.nanoseconds - rewind.nanoseconds) / 1e6
        #expect(playedOut < 40, "drained \(playedOut) ms after taking back what was rendered ahead")
        let left = Signals.channel(ALSATestRig.readS16(card.record), 0, of: 2)
        #expect(left.filter { $0 != 0 }.count == 4_800, "the chime, once")
        print("rendering ahead: an idle stop drained \(playedOut) ms after its take-back")
    }

    /// What stands between a zone and the card in `everyFrameOnceThroughTakeBacks`.
    enum Chain: String, CaseIterable, CustomTestStringConvertible {
        case direct, route, plugToS32
        var testDescription: String { rawValue }
    }

    /// An S32 record as S16 (each sample's high half: exact for samples converted up from S16).
    static func s16(fromS32 bytes: [UInt8]) -> [UInt8] {
        stride(from: 0, to: bytes.count - 3, by: 4).flatMap { [bytes[$0 + 2], bytes[$0 + 3]] }
    }

    /// Five 20 ms chimes (0.25; 480-frame periods, 48 kHz), asked for one after the other at
    /// different points of the output's cycle: when each was asked for, the frame `nextFrame` gave
    /// then, and the frame it started at. `whilePlaying` is called after each request (its slot and
    /// when it was asked for), before the chime has drained (`ClockedAheadTests` times the file).
    static func chimeFiveTimes(
        _ output: DeviceOutput, whilePlaying: (SourceSlot, Int64) -> Void = { _, _ in }
    ) throws -> [(ns: Int64, nextFrame: Int, firstFrame: Int?)] {
        let chime = [Float](repeating: 0.25, count: 2 * period * 2)
        var requests: [(ns: Int64, nextFrame: Int, firstFrame: Int?)] = []
        for k in 0..<5 {
            usleep(UInt32(150_000 + k * 13_000))  // at different points of the output's cycle
            let slot = try #require(output.mixer.claimSlot(gain: 1))
            // The request, timed before the sound is written: its end rings a rendering-ahead
            // output's doorbell (`SourceSlot.finish`), then the output is woken as the daemon does
            // after a source starts.
            let ns = DeviceCardTests.now()
            let next = output.mixer.nextFrame
            chime.withUnsafeBufferPointer { _ = slot.write($0.baseAddress!, count: $0.count) }
            slot.finish()
            output.wake()
            whilePlaying(slot, ns)
            #expect(waitUntil { slot.isDrained })
            requests.append((ns, next, slot.firstFrameAt))
            output.mixer.release(slot)
        }
        return requests
    }

    /// How long after each request (monotonic ns) `card` played a sound (its first non-zero frame
    /// after what it had consumed then), in ms, from its record and sidecar.
    /// A frame is timed from the card's last start before it (an xrun stops the card; its
    /// `start` line says how many frames it had consumed then).
    static func heard(on card: TestCard, after requests: [Int64]) throws -> [Double] {
        let bytes = card.recordedBytes()
        let events = card.events()
        let starts = events.filter { $0.kind == "start" }
        return try requests.map { ns in
            let heard = try #require(firstSound(in: bytes, after: DeviceCardTests.consumed(events, at: ns)))
            let start = try #require(starts.last { $0.frames <= heard })
            return Double(start.nanoseconds + Int64(heard - start.frames) * 1_000_000_000 / Int64(card.rate) - ns) / 1e6
        }
    }

    /// Asks `output` for a change that leaves the samples as they are, so that it takes back and
    /// renders again what it rendered ahead: the music's gain set to what it is and, the first time,
    /// a second source at gain 0 (`silent`) that ends (a live one that has no period ready would
    /// stop the rendering ahead).
    static func askForAChange(_ output: DeviceOutput, music: SourceSlot, silent: inout SourceSlot?) {
        music.setGain(1)
        guard silent == nil, let slot = output.mixer.claimSlot(gain: 0) else { return }
        let noise = (0..<4_800).map { Float(($0 * 7_919) % 2_001 - 1_000) / 1_000 }
        noise.withUnsafeBufferPointer { _ = slot.ring.write($0.baseAddress!, count: $0.count) }
        slot.finish()
        output.wake()
        silent = slot
    }

    /// Frames a card that started at `start` (ns) and never stopped has consumed at `nanoseconds`, by
    /// its clock (it consumes at its rate from CLOCK_MONOTONIC; these cards do not drift). Its
    /// sidecar cannot tell: it writes a period's line when it is next called.
    static func cardFrames(at nanoseconds: Int64, start: Int64) -> Int {
        Int(nanoseconds - start) * rate / 1_000_000_000
    }

    /// The first frame at or after `from` whose left sample is not zero, in an S16 stereo record.
    static func firstSound(in bytes: [UInt8], after from: Int) -> Int? {
        bytes.withUnsafeBytes { raw in
            let s = raw.bindMemory(to: Int16.self)
            return (max(0, from)..<(bytes.count / 4)).first { s[2 * $0] != 0 }
        }
    }
}

extension TestCard {
    /// The sidecar's `start` time of the latest stream.
    var startNanoseconds: Int64? { events("start").last?.nanoseconds }
}
