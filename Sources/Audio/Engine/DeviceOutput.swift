import ALSA
import AudioCore
import Glibc
import OSThread
import Synchronization

/// A device's output: one dedicated thread that owns one ALSA PCM (or one Snapcast stream source,
/// see ``StreamSink``), pulls one period from each of its zones' `ZoneMixer`s, places each zone's
/// channels on the device's channels, converts to the device format and writes it. Zones on one device share its clock, its availability and its
/// counters; a device with one zone is the common case.
///
/// The output thread never allocates, locks, logs or awaits once running; every buffer is allocated
/// before it starts. It reports through atomics, read by `snapshot()` on any thread.
/// A PCM that cannot be opened, or disappears, makes the zone unavailable; the thread retries with
/// backoff (0.25 s doubling to 8 s) while other zones play on.
///
/// A stream output (`spec.stream`) never stops rendering: it is paced by the system clock and
/// drops what the server cannot take, so its zone's timeline goes on through a server outage; it is
/// `available` while connected, its `delayFrames` is the server's buffer and `reopens` counts
/// reconnects.
// @unchecked: fields shared with the output thread are atomics or immutable; the PCM and the byte
// buffer belong to the output thread alone.
public final class DeviceOutput: @unchecked Sendable {
    /// What a device reports. Any thread.
    public struct Snapshot: Sendable, Equatable {
        public var available: Bool
        /// The last ALSA error (negative errno), 0 when none.
        public var lastError: Int32
        /// The call that met it: "open", a setting the device refused as it was set up ("set rate
        /// 44100 Hz", "set format S32_LE", "set 2 channels", "set period 480 frames", "set buffer
        /// 1920 frames", "set interleaved access", "apply hw params", "apply sw params", "set up"),
        /// "write" (the stream failed while playing), "start" (a filled stream that would not
        /// start), "prepare" (preparing it after its set-up, restarting after an xrun or a suspend,
        /// or waking from idle), "status" (the idle card asked, and gone).
        public var failedCall: String = "open"
        public var framesPlayed: Int
        public var xruns: Int
        public var suspends: Int
        /// Late cycles. System clock: woke up later than a whole buffer behind. Device clock: found
        /// less than a period left in the device buffer after it had been full (nearly ran dry).
        public var lateCycles: Int
        public var reopens: Int
        /// Frames written but not yet heard: `snd_pcm_delay` plus what an ALSA `file` plugin holds back (one buffer).
        public var delayFrames: Int
        /// The zone frame that is audible now: `framesPlayed - delayFrames`.
        public var audibleFrame: Int { framesPlayed - delayFrames }
        public var realtime: Bool
        /// The period and buffer the device granted (0 until it opened).
        public var periodFrames: Int
        public var bufferFrames: Int
        /// A device-clocked zone: the card's rate relative to its nominal one, in ppm (positive: it
        /// consumes faster), measured from its consumption against CLOCK_MONOTONIC; nil until known.
        public var rateEstimatePPM: Double? = nil
        /// The zone renders ahead and takes back (`DeviceSpec.rendersAhead`), as configured until
        /// the output found that its PCM cannot take back (then false: it plays as without the
        /// setting, and `renderAheadOff` says why).
        public var rendersAhead: Bool = false
        /// Why a zone set to render ahead does not; nil while it does, or is not set to.
        public var renderAheadOff: RenderAheadOff? = nil
    }

    /// Why a zone set to render ahead (`DeviceSpec.rendersAhead`) plays as without the setting.
    public enum RenderAheadOff: Sendable, Equatable {
        /// `snd_pcm_rewindable` answered 0 while the PCM held more than it keeps: alsa-lib's `rate`
        /// plugin (a `plug` that converts the rate). Asked again at each open of the PCM.
        case cannotRewind
        /// A take-back failed: `snd_pcm_rewind` returned this negative errno, or the stream stopped
        /// at once after it with frames still in it (-EPIPE; a card that ran dry did not) — a driver
        /// that copies ahead to its hardware, as the Raspberry Pi's bcm2835 does (the kernel's
        /// indirect-PCM helpers: -EINVAL, and since Linux 6.4 -EPIPE with the stream stopped).
        /// Found before the card first plays, by taking back a period of silence
        /// (`refusalBeforeStart`: no xrun), or at a take-back while it plays (one xrun), for a
        /// driver that refuses only then. Kept for the life of the output: not asked again at a
        /// reopen.
        case refused(Int32)
        /// Before it first played, the PCM took back the period of silence it was given
        /// (`snd_pcm_rewind` said so) but still counted it as to be played (`snd_pcm_delay` above
        /// 0, or failing for 50 ms): a plugin that hands frames on at once, as PulseAudio's `pulse`
        /// PCM does — alsa-lib's I/O plugins take back by moving the application pointer only, and
        /// the plugin is not told, so what it handed on would play twice. Found by
        /// `refusalBeforeStart`; kept for the life of the output.
        case keptWhatItTookBack
        /// The device's own period is too long for the buffer asked: two of its periods are never
        /// taken back (`DeviceOutput.keptFrames`), and the buffer holds no more than that and a
        /// period (dmix's 1,024 frames against the default 40 ms). Asked again at each open.
        case periodTooLong

        /// As stored in `DeviceOutput.renderAheadOffCode`: 0 none, 1 `cannotRewind`, 2
        /// `keptWhatItTookBack`, 3 `periodTooLong`, else the (negative) errno.
        init?(code: Int32) {
            switch code {
            case 0: return nil
            case 1: self = .cannotRewind
            case 2: self = .keptWhatItTookBack
            case 3: self = .periodTooLong
            default: self = .refused(code)
            }
        }

        var code: Int32 {
            switch self {
            case .cannotRewind: 1
            case .keptWhatItTookBack: 2
            case .periodTooLong: 3
            case .refused(let errno): errno
            }
        }
    }

    public let spec: DeviceSpec
    /// One mixer per zone, in `spec.zones` order.
    public let mixers: [ZoneMixer]
    /// The first zone's mixer (the only one on a single-zone device).
    public var mixer: ZoneMixer { mixers[0] }

    /// The mixer of the zone named `zone`, if it is on this device.
    public func mixer(for zone: String) -> ZoneMixer? {
        spec.zones.firstIndex { $0.name == zone }.map { mixers[$0] }
    }

    /// The interleaved device period when zones have to be placed on channels (nil: one zone owns
    /// the device with channels in order, and its mix is used directly).
    private let device: UnsafeMutablePointer<Float>?
    private let stopFlag = Atomic<Bool>(false)
    private let available = Atomic<Bool>(false)
    /// An ALSA device's losses, in zone frames: "on" at the first frame it did not play when it
    /// was lost, "off" at the first frame written after it was opened again (the same frame: what
    /// it dropped is written first). Output thread writes.
    let deviceOutage = Timeline()
    let lastError = LastError()
    /// The device stalled (`stalled`: no frame taken for 2 s), or stopped again at each of
    /// `recoveryLimit` restarts in a row (`deliver`), and has not taken a frame since. Set by the
    /// output thread.
    let deviceStalled = Atomic<Bool>(false)
    /// Why: it stopped again at each of `recoveryLimit` restarts (not a 2 s stall). Set with
    /// `deviceStalled` by the output thread.
    let stoppedAtEachRestart = Atomic<Bool>(false)
    /// The pause before a stalled device is opened again, doubling at each stall until it takes
    /// frames (`progressed`). Output thread only.
    private var stallBackoff = 250_000_000
    /// The first frame written to a device reopened after a stall: heard from there once it takes
    /// frames (`progressed`). Output thread only.
    var reopenedAt: Int?
    /// When a device reopened after it was lost soon after its open twice in a row
    /// (`shortLivedNanoseconds`) was opened: it is on probation, unavailable and keeping its loss's
    /// error until it has taken frames that long (`progressed`). Output thread only.
    var unprovenSince: Int?
    let framesPlayed = Atomic<Int>(0)
    let xruns = Atomic<Int>(0)
    let suspends = Atomic<Int>(0)
    let lateCycles = Atomic<Int>(0)
    private let reopens = Atomic<Int>(0)
    let delayFrames = Atomic<Int>(0)
    /// A sequence lock over `framesPlayed` and `delayFrames` (odd while the output thread changes
    /// them), so that `snapshot()` reads a pair that belongs together: the audible frame is their
    /// difference, and a cycle that wrote (or took back) a whole buffer would otherwise show it
    /// jumping by that much for an instant.
    private let countersSequence = Atomic<Int>(0)
    /// Rendering ahead: when `delayFrames` was measured on a running card (CLOCK_MONOTONIC ns; 0:
    /// not running, or not rendering ahead). The thread measures only when it wakes, every ~90 ms
    /// with a 120 ms buffer, so `snapshot()` takes off what the card has played since, at its rate:
    /// the audible frame moves with the card, not in steps of a wake-up.
    let delayMeasuredAt = Atomic<Int>(0)
    /// Rendering ahead: the most `snapshot()` takes off the delay measured at `delayMeasuredAt`
    /// (frames): what the card plays until the thread should wake again (down to its low water, and
    /// a period). A card that stalls while running says nothing until then; its audible frame was
    /// moved on to everything written.
    let extrapolationLimit = Atomic<Int>(0)
    private let realtime = Atomic<Bool>(false)
    private let grantedPeriod = Atomic<Int>(0)
    private let grantedBuffer = Atomic<Int>(0)
    private let openAttempts = Atomic<Int>(0)
    private var thread: OSThread?
    /// Output-thread state for writing and recovery (DeviceOutput+Delivery.swift).
    let history: WrittenFrames
    var rateEstimator: RateEstimator
    let rateEstimateBits = Atomic<UInt64>(Double.nan.bitPattern)
    var framesSincePrepare = 0
    var lastDelayAfterWrite = 0
    var deliveredThisCycle = 0
    /// The device is written again what it dropped (`deliver`): each write only what it has room
    /// for until nothing is pending. Output thread.
    var catchingUp = false
    /// The part of the device's buffer beyond the one asked for, never filled (`usableBuffer`).
    /// Output thread.
    var unusedFrames = 0

    /// Room in the device for what this output keeps there: its `avail` less `unusedFrames`; a
    /// negative errno as it is. Output thread; real-time safe.
    func room<Sink: PeriodSink>(in pcm: Sink) -> Int {
        let avail = pcm.avail()
        return avail < 0 ? avail : max(0, avail - unusedFrames)
    }

    /// The buffer the output keeps filled on a device that granted `granted` frames: at most the
    /// one asked for (at least two periods, as asked). A device may grant more — dmix its own
    /// sizes, a driver its steps —; filled whole, every request waited for all of it, and a
    /// wake-up rendered more than the history of written frames (sized for the buffer asked)
    /// holds, which dropped the oldest before they were written. Any thread.
    ///
    /// At least two of the device's own periods (dmix hands out its slave's, often 1024 frames:
    /// kept at the 20 ms asked, such a device underran at every period), within what the history
    /// holds beside a wake-up's periods.
    func usableBuffer(granted: Int, grantedPeriod: Int) -> Int {
        let asked = max(spec.pcm.bufferFrames, 2 * spec.pcm.periodFrames, 2 * grantedPeriod)
        return min(granted, asked, history.capacity - 2 * spec.pcm.periodFrames)
    }
    /// `history.sent` less the device's delay at its last measure: what it had surely played by
    /// then (`unplayed`, for a device that cannot say). Output thread.
    var playedAtLastMeasure = 0
    /// The Snapcast sink of a stream output; nil for an ALSA device.
    private let streamSink: StreamSink?
    /// A `clock: system` zone that renders ahead: the buffer the system clock plays, in front of
    /// its PCM (made here, so the output thread does not allocate it at every open).
    private let clockedBuffer: ClockedBuffer?
    /// A card rendered ahead: a period of silence in its format, which it is written and asked to
    /// take back before it first plays (`refusalBeforeStart`).
    let probeSilence: UnsafeMutableRawPointer?

    /// Called on the output thread when the device becomes available or unavailable (the PCM opened,
    /// or was lost); must be quick and must not block. Set before `start`.
    public nonisolated(unsafe) var availabilityObserver: (@Sendable () -> Void)?
    /// Called on the output thread after a period in which what a zone mixes changed (a source's
    /// frames began or stopped being mixed, a ring ran dry, the loudness crossed the meter's
    /// threshold: `ZoneMixer.takeChanged`), so that whoever follows the audio looks again instead
    /// of polling; must be quick and must not block. Set before `start`.
    public nonisolated(unsafe) var audioObserver: (@Sendable () -> Void)?
    /// Called on the output thread when a stream output's connection changes: it opened (with
    /// `StreamSpec.awaitsServer`, it now waits for `serverAnswered`), carries audio, or was lost.
    /// Must be quick and real-time safe (a semaphore post). Set before `start`.
    public nonisolated(unsafe) var connectionObserver: (@Sendable () -> Void)?
    /// Wakes the output thread while it waits with nothing to play (`stopsWhenIdle`), or, rendering
    /// ahead, to take back what it rendered when something changed (`DeviceSpec.rendersAhead`).
    let bell = ChangeBell()
    var doorbell: WakeFD { bell.fd }
    private let idleStopCount = Atomic<Int>(0)
    /// Rendering ahead: how many times the output took periods back, and how many frames in all.
    let rewinds = Atomic<Int>(0)
    let framesTakenBack = Atomic<Int>(0)
    /// Rendering ahead: the PCM was found unable to take back (`RenderAheadOff.code`; 0 while it
    /// can or has not been asked), so the output keeps only its low water and a period there.
    let renderAheadOffCode = Atomic<Int32>(0)
    /// Cycles of the output loop: how often the thread woke to render and write.
    let wakeUps = Atomic<Int>(0)
    private let stoppedIdle = Atomic<Bool>(false)

    /// Called by the output thread at the top of every render cycle with the cycle number, before
    /// it renders. For tests that count allocations on the real output thread; must be real-time safe.
    /// Set before `start`.
    public nonisolated(unsafe) var cycleObserver: (@Sendable (Int) -> Void)?

    /// Creates the device and its zones and allocates every buffer. Control thread.
    public init(_ spec: DeviceSpec) {
        precondition(!spec.zones.isEmpty, "a device needs at least one zone")
        self.spec = spec
        let bell = self.bell
        mixers = spec.zones.map { z in
            let m = ZoneMixer(
                channels: z.channels, periodFrames: spec.pcm.periodFrames, slotCount: z.slotCount,
                ringSamples: z.ringFrames * z.channels, rampFrames: z.rampFrames, doorbell: bell,
                rewindPeriods: spec.rendersAhead ? spec.pcm.bufferFrames / spec.pcm.periodFrames + 2 : 0,
                // What a take-back leaves must be refilled at once: up to the low water and a period.
                firstWakeFrames: spec.rendersAhead
                    ? Self.lowWaterFrames(
                        bufferFrames: spec.pcm.bufferFrames, periodFrames: spec.pcm.periodFrames, rate: spec.pcm.rate)
                        + spec.pcm.periodFrames : nil)
            m.setInitialVolume(z.volume)
            return m
        }
        history = WrittenFrames(
            periodFrames: spec.pcm.periodFrames, bufferFrames: spec.pcm.bufferFrames,
            frameBytes: spec.pcm.channels * spec.pcm.format.bytesPerSample)
        rateEstimator = RateEstimator(
            nominalRate: spec.pcm.rate, maximumGapNanoseconds: spec.pcm.bufferFrames * 1_000_000_000 / spec.pcm.rate)
        streamSink = spec.stream.map { StreamSink($0, frameBytes: spec.pcm.channels * spec.pcm.format.bytesPerSample) }
        clockedBuffer =
            spec.rendersAhead && spec.clock == .system
            ? ClockedBuffer(
                bufferFrames: spec.pcm.bufferFrames, periodFrames: spec.pcm.periodFrames, rate: spec.pcm.rate,
                frameBytes: spec.pcm.channels * spec.pcm.format.bytesPerSample)
            : nil
        if spec.rendersAhead && spec.clock == .device {
            let bytes = spec.pcm.periodFrames * spec.pcm.channels * spec.pcm.format.bytesPerSample
            let p = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 16)
            p.initializeMemory(as: UInt8.self, repeating: 0, count: bytes)  // S16 and S32: silence is 0
            probeSilence = p
        } else {
            probeSilence = nil
        }
        let direct = spec.zones.count == 1 && spec.zones[0].deviceChannels == Array(0..<spec.pcm.channels)
        if direct {
            device = nil
        } else {
            let p = UnsafeMutablePointer<Float>.allocate(capacity: spec.pcm.periodFrames * spec.pcm.channels)
            p.initialize(repeating: 0, count: spec.pcm.periodFrames * spec.pcm.channels)
            device = p
        }
    }

    /// Convenience for a device with one whole-device zone.
    public convenience init(zone: String, pcm: PCMRequest, clock: ZoneClock, realtimePriority: Int32 = 70) {
        self.init(DeviceSpec(zone: zone, pcm: pcm, clock: clock, realtimePriority: realtimePriority))
    }

    deinit {
        device?.deallocate()
        probeSilence?.deallocate()
    }

    /// Starts the output thread. Control thread.
    public func start() {
        precondition(thread == nil, "device \(spec.pcm.name) started twice")
        thread = RealtimeThread.start(name: "out:\(spec.pcm.name)") { [self] in run() }
    }

    /// Stops the output thread and waits for it, closing the PCM. Control thread.
    public func stop() {
        stopFlag.store(true, ordering: .releasing)
        doorbell.post()
        thread?.join()
        thread = nil
    }

    /// Rings the output's doorbell: an output stopped with nothing to play (`stopsWhenIdle`) looks
    /// again, and restarts if a zone has something to play — call it once a source has started in
    /// a claimed slot (a sound's frames written, a stream's thread begun); one that renders ahead
    /// takes back and renders the change in. Any thread but the output thread; does not block.
    public func wake() { bell.post() }

    /// Holds the changes the control plane is about to make (posts to this output's bell) until
    /// `releaseChanges`, so they reach the output thread together (`ChangeBell`). Any thread but the
    /// output thread; in pairs.
    public func holdChanges() { bell.hold() }

    /// Ends `holdChanges`: the output thread is woken once for what changed meanwhile.
    public func releaseChanges() { bell.release() }

    /// True while the output thread has stopped its PCM with nothing to play (`stopsWhenIdle`). Any thread.
    public var isStoppedIdle: Bool { stoppedIdle.load(ordering: .acquiring) }
    /// How many times the output thread stopped with nothing to play. Any thread.
    public var idleStops: Int { idleStopCount.load(ordering: .acquiring) }

    /// Rendering ahead (`DeviceSpec.rendersAhead`): how many times the output took back periods it
    /// had rendered, to render a change in, and how many frames in all. Any thread.
    public var takeBacks: (count: Int, frames: Int) {
        (rewinds.load(ordering: .relaxed), framesTakenBack.load(ordering: .relaxed))
    }

    /// How many times the output thread woke: to render and write (cycles of its loop), and, stopped
    /// while idle, for something that left it with nothing to play. Any thread.
    public var wakeUpCount: Int { wakeUps.load(ordering: .relaxed) }

    /// How many times the output thread tried to open the PCM. Any thread.
    public var openAttemptCount: Int { openAttempts.load(ordering: .acquiring) }

    /// Frames a stream output mixed but dropped because the server was away or did not keep up
    /// (0 for an ALSA device). Any thread.
    public var droppedFrames: Int { streamSink?.droppedFrames ?? 0 }

    /// True while a stream output's new connection waits for the server to be seen running
    /// (`StreamSpec.awaitsServer`). Any thread.
    public var awaitsServer: Bool { streamSink?.isAwaitingServer ?? false }

    /// True while a stream output's connection is open but its server has taken nothing for a while
    /// (`StreamSink.stallNanoseconds`), or an ALSA device stalled (`stalled`) or stopped at every
    /// restart (`recoveryLimit`) and, reopened, has not taken a frame yet: the zone is unavailable.
    /// Any thread.
    public var isStalled: Bool { streamSink?.isStalled ?? deviceStalled.load(ordering: .acquiring) }

    /// True while `isStalled` because the device stopped again at each of `recoveryLimit` restarts
    /// in one delivery (an xrun or a suspend the instant it started), not because it took nothing
    /// for 2 s. Any thread.
    public var isStalledByRestarts: Bool { isStalled && stoppedAtEachRestart.load(ordering: .acquiring) }

    /// Where the zone's output did not reach anyone, in zone frames: "on" from the first frame lost,
    /// "off" from the first that reached the output again. A stream output's audio dropped (no
    /// server, or a stalled one); an ALSA device gone (unplugged) until it is opened again. Any thread.
    public var outage: Timeline.Snapshot { streamSink?.outage.snapshot() ?? deviceOutage.snapshot() }

    /// Whether what the zone plays reaches its listeners now: the device plays, and the frame heard
    /// now is not in an outage (a Snapcast zone reconnected is heard again one server buffer
    /// later). Any thread.
    public var isHeard: Bool {
        isAvailable && !outage.isOn(at: snapshot().audibleFrame)
    }

    /// The zone frame heard now (`Snapshot.audibleFrame`), but while the output is lost, the first
    /// frame that did not reach anyone: what was mixed from there on is not heard, and a source's
    /// position stays where the zone lost it. Any thread.
    public var heardFrame: Int {
        let audible = snapshot().audibleFrame
        let lost = outage
        guard lost.isOn(at: audible), let start = lost.runStart(at: audible) else { return audible }
        return min(audible, start)
    }

    /// A stream output's server answered a call made at `callStartedAt` (monotonic ns): a
    /// connection made before it may carry audio (`StreamSpec.awaitsServer`). Any thread.
    public func serverAnswered(callStartedAt: Int) { streamSink?.serverAnswered(callStartedAt: callStartedAt) }

    /// How much audio one wake-up of the output thread takes from each slot ring at once (ns):
    /// `wakePeriods` of the granted buffer (the configured one until the device opened). A producer
    /// that feeds a ring live (a call, an external player) must keep at least this much in it, or
    /// the slot runs dry at every wake-up: 10 ms at the default period and a 40 ms buffer, 50 ms
    /// with a 100 ms buffer. Rendering ahead (`DeviceSpec.rendersAhead`), two periods: beyond what
    /// keeps the card above its low water (one period at a wake-up, two after a take-back) the
    /// output renders only what every source has ready, so a live source sets how far ahead it
    /// goes and is not made to keep the whole buffer in hand. Any thread.
    public var burstNanoseconds: Int {
        let period = spec.pcm.periodFrames
        if spec.rendersAhead { return 2 * period * 1_000_000_000 / max(1, spec.pcm.rate) }
        let granted = grantedBuffer.load(ordering: .acquiring)
        let buffer =
            granted > 0
            ? usableBuffer(granted: granted, grantedPeriod: grantedPeriod.load(ordering: .acquiring))
            : spec.pcm.bufferFrames
        let periods = Self.wakePeriods(bufferFrames: buffer, periodFrames: period, rate: spec.pcm.rate)
        return periods * period * 1_000_000_000 / max(1, spec.pcm.rate)
    }

    /// Changes `framesPlayed` and `delayFrames` in `body` as one (see `countersSequence`). Every
    /// store in `body` is sequentially consistent, as the reader's loads are: in the one total
    /// order, a reader that saw a new value sees the sequence changed too (a relaxed store may be
    /// seen before the first increment, and a new delay paired with an old count). Output thread;
    /// real-time safe.
    @inline(__always)
    func publishingCounters(_ body: () -> Void) {
        countersSequence.add(1, ordering: .sequentiallyConsistent)
        body()
        countersSequence.add(1, ordering: .sequentiallyConsistent)
    }

    /// `framesPlayed` and `delayFrames` as the output thread last published them together; rendering
    /// ahead, the delay less what the card has played since it was measured (`delayMeasuredAt`), at
    /// most `extrapolationLimit`.
    private func counters() -> (played: Int, delay: Int) {
        while true {
            let before = countersSequence.load(ordering: .sequentiallyConsistent)
            if before & 1 == 1 {
                sched_yield()
                continue
            }
            let played = framesPlayed.load(ordering: .sequentiallyConsistent)
            var delay = delayFrames.load(ordering: .sequentiallyConsistent)
            let measuredAt = delayMeasuredAt.load(ordering: .sequentiallyConsistent)
            let limit = extrapolationLimit.load(ordering: .sequentiallyConsistent)
            guard countersSequence.load(ordering: .sequentiallyConsistent) == before else { continue }
            delay = max(0, delay - playedSinceMeasure(at: measuredAt, limit: limit))
            return (played, delay)
        }
    }

    /// Rendering ahead: what the card has played since its delay was measured at `measuredAt`
    /// (`delayMeasuredAt`; 0: nothing), at its rate, at most `limit` (`extrapolationLimit`): what
    /// `counters` takes off the delay. Any thread; real-time safe.
    func playedSinceMeasure(at measuredAt: Int, limit: Int) -> Int {
        guard measuredAt > 0 else { return 0 }
        let since = max(0, monotonicNanoseconds() - measuredAt)
        return min(limit, Int(Int64(since) * Int64(spec.pcm.rate) / 1_000_000_000))
    }

    /// Whether the device plays now (a PCM open, a stream connected to a server with one of the
    /// zone's speakers): `snapshot().available` alone. Any thread.
    public var isAvailable: Bool {
        streamSink.map { $0.isConnected && !$0.hasNoListener } ?? available.load(ordering: .acquiring)
    }

    /// True while a stream output's server takes its audio but says none of the zone's speakers is
    /// connected, on its stream and heard there (`listenersConnected`): the zone is unavailable.
    /// Any thread.
    public var hasNoListener: Bool { streamSink.map { $0.isConnected && $0.hasNoListener } ?? false }

    /// True while `hasNoListener` and the zone's speakers are connected to the server, but to
    /// another stream. Any thread.
    public var listenersElsewhere: Bool { hasNoListener && streamSink?.listenersElsewhere == true }

    /// True while `hasNoListener` and the zone's speakers are connected on its stream, but every one
    /// is muted there (muted, at 0 %, or in a muted group). Any thread.
    public var listenersMuted: Bool { hasNoListener && streamSink?.listenersMuted == true }

    /// What the server's latest good answer says of a stream output's speakers: whether any of the
    /// zone's is connected, listens to its stream and is heard there, and if none is, whether some
    /// are connected to another one (`elsewhere`) or on it but muted (`muted`; the zone's group
    /// keeper tells). Any thread.
    public func listenersConnected(_ any: Bool, elsewhere: Bool, muted: Bool = false) {
        streamSink?.listenersConnected(any, elsewhere: elsewhere, muted: muted)
    }

    /// The zone's counters now. Any thread.
    public func snapshot() -> Snapshot {
        if let sink = streamSink {
            return Snapshot(
                available: sink.isConnected && !sink.hasNoListener, lastError: sink.lastError,
                framesPlayed: framesPlayed.load(ordering: .acquiring), xruns: 0, suspends: 0,
                lateCycles: lateCycles.load(ordering: .acquiring), reopens: max(0, sink.connects - 1),
                delayFrames: sink.spec.latencyFrames, realtime: realtime.load(ordering: .acquiring),
                periodFrames: spec.pcm.periodFrames, bufferFrames: sink.spec.latencyFrames)
        }
        let (played, delay) = counters()
        let failure = lastError.load()
        let off = RenderAheadOff(code: renderAheadOffCode.load(ordering: .acquiring))
        return Snapshot(
            available: available.load(ordering: .acquiring), lastError: failure.code,
            failedCall: failure.call.name(openRequest),
            framesPlayed: played, xruns: xruns.load(ordering: .acquiring),
            suspends: suspends.load(ordering: .acquiring), lateCycles: lateCycles.load(ordering: .acquiring),
            reopens: reopens.load(ordering: .acquiring), delayFrames: delay,
            realtime: realtime.load(ordering: .acquiring), periodFrames: grantedPeriod.load(ordering: .acquiring),
            bufferFrames: grantedBuffer.load(ordering: .acquiring), rateEstimatePPM: rateEstimatePPM,
            rendersAhead: spec.rendersAhead && off == nil, renderAheadOff: off)
    }

    // MARK: Output thread

    var stopping: Bool { stopFlag.load(ordering: .acquiring) }

    /// What the output thread asks of the PCM when it opens it. Behind a clocked buffer the PCM never
    /// holds more than two periods: a `file` PCM writes a period to its file a buffer later
    /// (`hiddenDelayFrames`), and that is what is heard.
    var openRequest: PCMRequest {
        var request = spec.pcm
        if clockedBuffer != nil { request.bufferFrames = 2 * spec.pcm.periodFrames }
        return request
    }

    private func run() {
        if spec.realtimePriority > 0 {
            realtime.store(RealtimeThread.requestRealtime(priority: spec.realtimePriority) == 0, ordering: .releasing)
        }
        var cycle = 0
        if let sink = streamSink {
            sink.connectionObserver = connectionObserver
            sink.prepareThread()
            play(on: sink, bufferFrames: spec.pcm.bufferFrames, cycle: &cycle)
            sink.close()
            return
        }
        let innerRequest = openRequest
        var backoff = 250_000_000
        // Losses soon after the open in a row (`shortLivedNanoseconds`), and the pause after the
        // next, doubling at each.
        var soonLosses = 0
        var shortLivedBackoff = 250_000_000
        // The error the last loss met: what a device on probation says (not a failed open's since).
        var lossError = lastError.load()
        var pauseBeforeOpen = 0
        while !stopping {
            // After a stall: the stalled PCM closed (the last iteration's), then a pause.
            if pauseBeforeOpen > 0 {
                sleepInterruptibly(nanoseconds: pauseBeforeOpen)
                pauseBeforeOpen = 0
                if stopping { break }
            }
            let pcm: PCM
            do {
                openAttempts.add(1, ordering: .relaxed)
                pcm = try PCM(innerRequest)
            } catch {
                // The step that failed, as plain values (the text is made by `snapshot`).
                lastError.store(error.code, .step(error.step))
                setAvailable(false)
                sleepInterruptibly(nanoseconds: backoff)
                backoff = min(backoff * 2, 8_000_000_000)
                continue
            }
            backoff = 250_000_000
            let openedAt = monotonicNanoseconds()
            // Lost soon after its open again and again: available once it has played a while.
            unprovenSince = soonLosses >= 2 ? openedAt : nil
            // Rendering ahead on the system clock: the buffer is the clocked one, as configured.
            let deviceBuffer = clockedBuffer?.bufferFrames ?? pcm.configuration.bufferFrames
            let devicePeriod = clockedBuffer?.periodFrames ?? pcm.configuration.periodFrames
            grantedPeriod.store(devicePeriod, ordering: .relaxed)
            grantedBuffer.store(deviceBuffer, ordering: .relaxed)
            // What is kept filled of it: from here on the output's "buffer".
            let granted = usableBuffer(granted: deviceBuffer, grantedPeriod: devicePeriod)
            unusedFrames = deviceBuffer - granted
            for m in mixers { m.deviceBufferGranted(frames: granted) }
            if framesPlayed.load(ordering: .relaxed) > 0 || reopens.load(ordering: .relaxed) > 0 {
                reopens.add(1, ordering: .relaxed)
            }
            // A device reopened after a stall still says so until it takes frames (`progressed`),
            // not an error an earlier attempt met; one that stopped at every restart says that.
            // One on probation keeps the error of its loss.
            let stalledWith = stoppedAtEachRestart.load(ordering: .relaxed) ? -EPIPE : Self.stallError
            if unprovenSince == nil {
                lastError.store(deviceStalled.load(ordering: .relaxed) ? stalledWith : 0, .write)
            } else {
                lastError.store(lossError.code, lossError.call)
            }
            // Wake when `wakePeriods` are free (see `play`); a device that refuses it wakes every
            // period and is written a period at a time. Rendering ahead: when the card is down to
            // its low water.
            let wake = Self.wakePeriods(bufferFrames: granted, periodFrames: spec.pcm.periodFrames, rate: spec.pcm.rate)
            let lowWater = Self.lowWaterFrames(
                bufferFrames: granted, periodFrames: spec.pcm.periodFrames, rate: spec.pcm.rate)
            if let clockedBuffer {
                clockedBuffer.wakeThreshold = granted - lowWater
                clockedBuffer.output = pcm
                _ = clockedBuffer.prepare()
            } else {
                try? pcm.setWakeThreshold(
                    frames: unusedFrames + (spec.rendersAhead ? granted - lowWater : wake * spec.pcm.periodFrames))
            }
            deviceOpened()
            // A device reopened after a stall is available once it has taken frames (`progressed`):
            // a DAC that stays dead read "available" for two seconds after each reopen. One lost
            // soon after its last open, once it has taken frames for `shortLivedNanoseconds`: one
            // that fails within moments of each open read "available" at each, an event each time.
            if !deviceStalled.load(ordering: .acquiring) && unprovenSince == nil { setAvailable(true) }
            if let clockedBuffer {
                playAhead(on: clockedBuffer, bufferFrames: granted, devicePeriod: devicePeriod, cycle: &cycle)
                clockedBuffer.output = nil
            } else if spec.rendersAhead {
                playAhead(on: pcm, bufferFrames: granted, devicePeriod: devicePeriod, cycle: &cycle)
            } else {
                play(on: pcm, bufferFrames: granted, cycle: &cycle)
            }
            deviceLost()
            setAvailable(false)
            lossError = lastError.load()
            // A device that stalled is opened again after a pause, longer at each stall before it
            // took frames again (`progressed` resets it).
            if deviceStalled.load(ordering: .acquiring) {
                pauseBeforeOpen = stallBackoff
                stallBackoff = min(stallBackoff * 2, 8_000_000_000)
            }
            // One lost soon after it opened a second time in a row (its writes refused: -EIO from a
            // USB DAC in a bad state, a sound server that drops the stream) waits before it is opened
            // again, 0.25 s doubling to 8 s while it keeps doing so: opened again at once, it was
            // reopened for ever on this real-time thread, the zone flapping between available and
            // not. The first such loss is opened again at once, as one that played a while: a card
            // unplugged soon after it opened is back as soon as it is replugged (a failed open backs
            // off on its own).
            if monotonicNanoseconds() - openedAt < Self.shortLivedNanoseconds {
                soonLosses += 1
            } else {
                soonLosses = 0
                shortLivedBackoff = 250_000_000
            }
            if soonLosses >= 2 {
                pauseBeforeOpen = max(pauseBeforeOpen, shortLivedBackoff)
                shortLivedBackoff = min(shortLivedBackoff * 2, 8_000_000_000)
            }
        }
    }

    private func setAvailable(_ value: Bool) {
        if available.exchange(value, ordering: .acquiringAndReleasing) != value { availabilityObserver?() }
    }

    /// Renders and writes periods until stopped or the sink is gone (a stream sink never is).
    /// `bufferFrames`: the sink's buffer (granted by the device), and how late a system-paced cycle
    /// may wake before it counts as late.
    ///
    /// The thread wakes when half the buffer is free, or less when the device would then hold under
    /// 30 ms (`wakePeriods`), and renders then, not before: a device-clocked sink is waited for first
    /// (`snd_pcm_wait`, with `avail_min` at that threshold), then the periods that fit are rendered
    /// and written. So what is rendered reaches the device at once (a request is heard at most a
    /// buffer after it is rendered, not a period more), and with a buffer of at least four periods
    /// and 30 ms + two periods the thread wakes less often than the periods (40 ms / 160 ms: every
    /// 80 ms; 10 ms / 100 ms: every 50 ms; the default 10 ms / 40 ms: every period, the device
    /// holding 30 ms). Frame accounting is by period as before: every
    /// period is rendered, converted and kept on its own.
    /// Output thread; real-time safe.
    private func play<Sink: PeriodSink>(on pcm: Sink, bufferFrames: Int, cycle: inout Int) {
        let period = spec.pcm.periodFrames
        let channels = spec.pcm.channels
        let wake = Self.wakePeriods(bufferFrames: bufferFrames, periodFrames: period, rate: spec.pcm.rate)
        let wakeNanoseconds = wake * period * 1_000_000_000 / spec.pcm.rate
        let bufferNanoseconds = bufferFrames * 1_000_000_000 / spec.pcm.rate
        // A device that stops consuming (a stall) is waited for in steps, so that `stop` is seen.
        let waitMilliseconds = Int32(clamping: max(100, 2 * bufferNanoseconds / 1_000_000))
        var deadline = monotonicNanoseconds()
        var idleFrames = 0
        // Time waited in vain for room while the device ran: each wait that timed out is a whole
        // `waitMilliseconds` (a healthy device has room within a buffer, half the wait).
        var waitedInVain = 0
        while !stopping {
            wakeUps.add(1, ordering: .relaxed)
            var periods = wake
            if spec.clock == .device {
                var tookFrames = false
                periods = periodsToRender(
                    pcm, wake: wake, period: period, waitMilliseconds: waitMilliseconds, tookFrames: &tookFrames)
                if periods == 0 {
                    waitedInVain += Int(waitMilliseconds) * 1_000_000
                    if waitedInVain >= Self.stallLimitNanoseconds { return stalled(pcm) }
                    continue
                }
                if tookFrames {
                    waitedInVain = 0
                    progressed()
                }
                // Catching up (what a fault or a reopen left to write again, `deliver`): the rest
                // of it first, a period more only once there is room for that too — after the wait
                // for room while the device runs; at once into one reopened or prepared (not
                // running: not waited for), which `deliver` starts once full. A period more blocked
                // the write until the device took one (for ever on a device that takes none: a
                // stalled card, reopened); rendering one at every wake-up kept a period pending for
                // good (one a wake-up, room for one), the zone a period behind its buffer.
                if catchingUp && room(in: pcm) - history.pending < period {
                    guard deliver(to: pcm, bufferFrames: bufferFrames) else {
                        deviceLost()
                        return
                    }
                    let delay = pcm.delay()
                    publishingCounters { recordDelay(delay, of: pcm, bufferFrames: bufferFrames) }
                    continue
                }
            }
            for _ in 0..<periods { renderPeriod(period: period, channels: channels, cycle: &cycle) }
            // Gone (-ENODEV) or unrecoverable: reopen with backoff; what the device dropped is kept.
            guard deliver(to: pcm, bufferFrames: bufferFrames) else {
                deviceLost(rendered: periods * period)
                return
            }
            // Asked before the publication, which must not block (`recordDelay`).
            let delay = pcm.delay()
            publishingCounters {
                framesPlayed.add(periods * period, ordering: .sequentiallyConsistent)
                switch spec.clock {
                case .device: recordDelay(delay, of: pcm, bufferFrames: bufferFrames)
                case .system:
                    if let delay { playedAtLastMeasure = history.sent - delay }
                    delayFrames.store(
                        (delay ?? 0) + pcm.hiddenDelayFrames + history.pending, ordering: .sequentiallyConsistent)
                }
            }
            // A system-clocked device on probation has taken what it was given.
            if spec.clock == .system && unprovenSince != nil { progressed() }
            if spec.clock == .system {
                deadline += wakeNanoseconds
                let now = monotonicNanoseconds()
                if now > deadline + bufferNanoseconds {
                    lateCycles.add(1, ordering: .relaxed)
                    deadline = now
                } else {
                    sleepUntil(deadline)
                }
            }
            switch stopIfIdle(pcm, rendered: periods * period, idleFrames: &idleFrames) {
            case .playing: break
            case .restarted: deadline = monotonicNanoseconds()
            case .lost: return
            }
        }
    }

    /// What `stopIfIdle` did.
    enum IdleCheck { case playing, restarted, lost }

    /// After a cycle that rendered `frames` (`stopsWhenIdle`): once every zone has been idle for half
    /// a second of them, calls `beforeStopping` (a zone rendering ahead takes back the silence it
    /// rendered ahead, so that the device plays out only what it keeps), plays out the device and
    /// waits with nothing to play (`waitWhileIdle`). `.restarted` when it stopped and is prepared
    /// again, `.lost` when it could not be prepared (the caller reopens it). Output thread; blocks,
    /// but only with nothing to play.
    func stopIfIdle<Sink: PeriodSink>(
        _ pcm: Sink, rendered frames: Int, idleFrames: inout Int, beforeStopping: () -> Void = {}
    ) -> IdleCheck {
        // Not a device reopened after a stall that has not taken a frame yet: parked idle, it would
        // never show it took them, and stay unavailable (no source could then claim it to wake it).
        // Nor one that still has frames to write (catching up): they would wait, uncounted, for
        // the next start.
        guard spec.stopsWhenIdle, !deviceStalled.load(ordering: .relaxed), unprovenSince == nil, history.pending == 0
        else {
            return .playing
        }
        idleFrames = allZonesIdle ? idleFrames + frames : 0
        guard idleFrames >= spec.pcm.rate / 2 else { return .playing }
        idleFrames = 0
        beforeStopping()
        return waitWhileIdle(pcm) ? .restarted : .lost
    }

    /// Periods rendered per wake-up: as many as fill half the buffer, but never so many that the
    /// device holds less than `minimumHeldNanoseconds` when the thread wakes; at least one.
    /// At the default 10 ms / 40 ms that is one period (the device holds 30 ms, as it did when the
    /// thread rendered before waiting); with 40 ms / 160 ms, two. Any thread.
    static func wakePeriods(bufferFrames: Int, periodFrames: Int, rate: Int) -> Int {
        let held = Int(Int64(minimumHeldNanoseconds) * Int64(rate) / 1_000_000_000)
        let free = min(bufferFrames / 2, bufferFrames - held)
        return max(1, free / max(1, periodFrames))
    }

    /// What the device must still hold when the output thread wakes: 30 ms. The 30-minute soak
    /// (`scripts/soak.sh 30`, stress-ng on both cores) underran once in each of two runs with 20 ms
    /// (a 40 ms buffer woken at half), and not in five of seven with 30 ms (docs/RELIABILITY.md).
    static let minimumHeldNanoseconds = 30_000_000

    /// A device lost sooner than this after it was opened twice in a row is opened again only
    /// after a pause, and is on probation until it has taken frames this long (`run`).
    static let shortLivedNanoseconds = 1_000_000_000

    /// How long a running device may take no frame before it counts as lost: a DAC whose clock
    /// stopped, a DMA that hung. Such a device raises no error (`snd_pcm_wait` only times out), and
    /// the zone stayed "available", its sources "playing", in silence — and, since the stalled
    /// zone's ring stays full, the producer waited on it and starved the source's other zones.
    public static let stallLimitNanoseconds = 2_000_000_000

    /// The device stalled (no frame taken for `stallLimitNanoseconds`, at most a wait more): the
    /// caller closes it and, after a pause, opens it again (a stalled DAC is reset by a reopen, or
    /// stays unavailable, truthfully: `isStalled` until it takes frames again). What it held is
    /// kept as for any loss. Output thread; real-time safe.
    func stalled<Sink: PeriodSink>(_ pcm: Sink) {
        history.rewind(unplayed(pcm))
        stoppedAtEachRestart.store(false, ordering: .releasing)
        deviceStalled.store(true, ordering: .releasing)
        lastError.store(Self.stallError, .write)
    }

    /// `lastError` of a device that stalled (`-ETIMEDOUT`): kept until it takes frames again, unless
    /// a reopen fails with an error of its own.
    public static let stallError = -ETIMEDOUT

    /// The running device took frames: a stall is over (the zone is available again, and the
    /// next stall waits the shortest pause), and a probation once it has lasted
    /// `shortLivedNanoseconds`. Output thread; real-time safe.
    func progressed() {
        if let since = unprovenSince {
            guard monotonicNanoseconds() - since >= Self.shortLivedNanoseconds else { return }
            unprovenSince = nil
        } else if !deviceStalled.load(ordering: .relaxed) {
            return
        }
        // Heard again from the first frame written after the reopen (`deviceOpened`), now that the
        // card takes frames: a reopened card still dead was said to be heard.
        if let frame = reopenedAt {
            deviceOutage.record(on: nil, off: frame)
            reopenedAt = nil
        }
        deviceStalled.store(false, ordering: .releasing)
        stallBackoff = 250_000_000
        lastError.store(0, .write)
        setAvailable(true)
    }

    /// A device-clocked sink: waits until it has room for `wake` periods, then says how many to
    /// render now (0: the wait timed out, look again). A sink that is not running yet (being filled
    /// after a prepare) is not waited for: what fits is rendered, at least one period, whose write
    /// starts it. An error is left to the write (`deliver` recovers from it). Output thread; real-time safe.
    private func periodsToRender<Sink: PeriodSink>(
        _ pcm: Sink, wake: Int, period: Int, waitMilliseconds: Int32, tookFrames: inout Bool
    ) -> Int {
        if pcm.isRunning {
            let waited = pcm.wait(milliseconds: waitMilliseconds)
            if waited == 0 { return 0 }
            // Room made while it ran (or it ran dry: -EPIPE): the device took frames. Another
            // error (-ENODEV, -EIO) is no sign of life; the write meets it.
            tookFrames = waited > 0 || waited == -EPIPE
        }
        // One period per wake-up (the default 10 ms / 40 ms): the room cannot change the answer,
        // so it is not asked for (snd_pcm_avail syncs the hardware pointer: a system call).
        guard wake > 1 else { return 1 }
        let room = self.room(in: pcm) - history.pending
        return min(wake, max(1, room / period))
    }

    /// True when no zone has anything to play until the doorbell rings (`ZoneMixer.isIdle`).
    /// Output thread; real-time safe.
    private var allZonesIdle: Bool {
        for m in mixers where !m.isIdle { return false }
        return true
    }

    /// How often an idle output asks its stopped device whether it is still there
    /// (`waitWhileIdle`): a card unplugged while nothing plays is noticed within this, not at the
    /// next request.
    public static let idleProbeMilliseconds: Int32 = 2_000

    /// Plays out the PCM's buffer, stops it and waits until a zone has something to play or the
    /// thread is told to stop, waking every `idleProbeMilliseconds` only to ask the stopped device
    /// whether it is still there; then prepares the PCM. False when it is gone or cannot be
    /// prepared (the caller reopens it, `lastError` says why). Output thread; blocks, but only with
    /// nothing to play.
    private func waitWhileIdle<Sink: PeriodSink>(_ pcm: Sink) -> Bool {
        pcm.drain()
        // Played out: nothing rendered can be taken back any more (a zone that renders ahead).
        for m in mixers { m.settle(playedThrough: Int.max) }
        publishingCounters {
            delayFrames.store(0, ordering: .sequentiallyConsistent)
            delayMeasuredAt.store(0, ordering: .sequentiallyConsistent)
        }
        idleStopCount.add(1, ordering: .relaxed)
        // Stopped (drained), not prepared, while it waits: a prepared stream is not idle on every
        // driver (USB audio may stream silence, PulseAudio's plugin keeps its sink from suspending).
        // An idle zone whose card was unplugged said "available" until a request woke it.
        stoppedIdle.store(true, ordering: .releasing)
        doorbell.drain()
        // On a deadline of its own: rings that change nothing (a volume published every second)
        // would otherwise put the look off for ever.
        var probeAt = monotonicNanoseconds() + Int(Self.idleProbeMilliseconds) * 1_000_000
        while !stopping && allZonesIdle {
            let left = max(0, (probeAt - monotonicNanoseconds() + 999_999) / 1_000_000)
            guard doorbell.waitForPost(milliseconds: Int32(clamping: left)) else {
                guard !pcm.isGone else {
                    stoppedIdle.store(false, ordering: .releasing)
                    lastError.store(-ENODEV, .status)
                    return false
                }
                probeAt = monotonicNanoseconds() + Int(Self.idleProbeMilliseconds) * 1_000_000
                continue
            }
            // Woken for nothing (what rang changed nothing it plays): a wake-up that cost.
            if !stopping && allZonesIdle { wakeUps.add(1, ordering: .relaxed) }
        }
        stoppedIdle.store(false, ordering: .releasing)
        let r = pcm.prepare()
        if r < 0 {
            lastError.store(r, .prepare)
            return false
        }
        newStream()  // from an empty buffer, everything played out
        return true
    }

    /// Renders one period of every zone, converts it to the device format and keeps it in the history
    /// (to be delivered). Output thread; real-time safe.
    @inline(__always)
    func renderPeriod(period: Int, channels: Int, cycle: inout Int) {
        cycleObserver?(cycle)
        cycle += 1
        let mixed = renderDevice(period: period, channels: channels)
        let bytes = history.nextPeriod
        switch spec.pcm.format {
        case .s16LE: convertToS16(mixed, bytes.assumingMemoryBound(to: Int16.self), count: period * channels)
        case .s32LE: convertToS32(mixed, bytes.assumingMemoryBound(to: Int32.self), count: period * channels)
        }
        history.commit()
    }

    /// Renders every zone and places its channels on the device's. Output thread; real-time safe.
    @inline(__always)
    func renderDevice(period: Int, channels: Int) -> UnsafeMutablePointer<Float> {
        guard let device else {
            mixers[0].render()
            if mixers[0].takeChanged() { audioObserver?() }
            return mixers[0].mix
        }
        device.update(repeating: 0, count: period * channels)
        var changed = false
        for z in 0..<mixers.count {
            let m = mixers[z]
            m.render()
            if m.takeChanged() { changed = true }
            let map = spec.zones[z].deviceChannels
            let zc = m.channels
            for c in 0..<zc {
                let d = map[c]
                var src = c
                var dst = d
                for _ in 0..<period {
                    device[dst] += m.mix[src]
                    src += zc
                    dst += channels
                }
            }
        }
        if changed { audioObserver?() }
        return device
    }

    private func sleepInterruptibly(nanoseconds: Int) {
        let end = monotonicNanoseconds() + nanoseconds
        while !stopping {
            let now = monotonicNanoseconds()
            if now >= end { return }
            // stop() posts it.
            _ = doorbell.waitForPost(milliseconds: Int32(clamping: (end - now + 999_999) / 1_000_000))
        }
    }
}

/// A device's last error (a negative errno, 0 when none) and the ALSA call that met it, in one
/// atomic word: a reader never pairs one error with another's call. Any thread; real-time safe.
final class LastError: Sendable {
    /// The call that met an error: a write, a start, a status, or a step of opening and setting up
    /// the PCM (`PCM.init`: which setting the device refused) or a prepare.
    enum Call: Equatable {
        case write, start, status
        case step(ALSAError.Step)

        static let open = Call.step(.open)
        static let prepare = Call.step(.prepare)

        /// Its number in the atomic word: a step's own, the others above them.
        var rawValue: UInt64 {
            switch self {
            case .step(let step): UInt64(step.rawValue)
            case .write: 256
            case .start: 257
            case .status: 258
            }
        }

        init?(rawValue: UInt64) {
            switch rawValue {
            case 256: self = .write
            case 257: self = .start
            case 258: self = .status
            default:
                guard rawValue < 256, let step = ALSAError.Step(rawValue: UInt8(rawValue)) else { return nil }
                self = .step(step)
            }
        }

        /// What the call asked of `request`'s PCM, as `ALSAError.operation` says it ("set rate 44100 Hz").
        func name(_ request: PCMRequest) -> String {
            switch self {
            case .write: "write"
            case .start: "start"
            case .status: "status"
            case .step(let step): step.operation(for: request)
            }
        }
    }
    private let word = Atomic<UInt64>(0)

    func store(_ code: Int32, _ call: Call) {
        word.store(call.rawValue << 32 | UInt64(UInt32(bitPattern: code)), ordering: .releasing)
    }

    func load() -> (code: Int32, call: Call) {
        let w = word.load(ordering: .acquiring)
        return (Int32(bitPattern: UInt32(truncatingIfNeeded: w)), Call(rawValue: w >> 32) ?? .open)
    }

}
