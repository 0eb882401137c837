import ALSA
import AudioCore
import Glibc
import Synchronization

/// Who paces a zone.
public enum ZoneClock: String, Sendable {
    /// The device blocks in `snd_pcm_writei` when its buffer is full (a real sound card).
    case device
    /// Baton paces the zone period by period from CLOCK_MONOTONIC, for PCMs that never block
    /// (ALSA `null` and `file` PCMs, pipes).
    case system
}

/// Everything a zone output needs to start.
public struct ZoneOutputSpec: Sendable {
    public var zone: String
    public var pcm: PCMRequest
    public var clock: ZoneClock
    /// Frames a full 0↔1 gain change takes.
    public var rampFrames: Int
    /// How many sources the zone can mix at once.
    public var slotCount: Int
    /// Each slot's ring, in frames.
    public var ringFrames: Int
    /// SCHED_FIFO priority to ask for (0: do not ask).
    public var realtimePriority: Int32

    public init(zone: String, pcm: PCMRequest, clock: ZoneClock, rampFrames: Int? = nil, slotCount: Int = 8,
                ringFrames: Int? = nil, realtimePriority: Int32 = 70) {
        self.zone = zone
        self.pcm = pcm
        self.clock = clock
        self.rampFrames = rampFrames ?? max(1, pcm.rate / 100)          // 10 ms
        self.slotCount = slotCount
        self.ringFrames = ringFrames ?? max(pcm.rate / 2, pcm.periodFrames * 4)  // 500 ms
        self.realtimePriority = realtimePriority
    }
}

/// A zone's output: one dedicated thread that owns one ALSA PCM, pulls one period from the zone's
/// `ZoneMixer`, converts it to the device format and writes it.
///
/// The output thread never allocates, locks, logs or awaits once running; every buffer is allocated
/// before it starts. It reports through atomics, read by `snapshot()` on any thread.
/// A PCM that cannot be opened, or disappears, makes the zone unavailable; the thread retries with
/// backoff (0.25 s doubling to 8 s) while other zones play on.
// @unchecked: fields shared with the output thread are atomics or immutable; the PCM and the byte
// buffer belong to the output thread alone.
public final class ZoneOutput: @unchecked Sendable {
    /// What a zone reports. Any thread.
    public struct Snapshot: Sendable, Equatable {
        public var available: Bool
        /// The last ALSA error (negative errno), 0 when none.
        public var lastError: Int32
        public var framesPlayed: Int
        public var xruns: Int
        public var suspends: Int
        /// Cycles that woke up later than a whole buffer behind (system clock only).
        public var lateCycles: Int
        public var reopens: Int
        /// Frames written but not yet heard (`snd_pcm_delay`; 0 on a system-paced zone).
        public var delayFrames: Int
        /// The zone frame that is audible now: `framesPlayed - delayFrames`.
        public var audibleFrame: Int { framesPlayed - delayFrames }
        public var realtime: Bool
        /// The period and buffer the device granted (0 until it opened).
        public var periodFrames: Int
        public var bufferFrames: Int
    }

    public let spec: ZoneOutputSpec
    public let mixer: ZoneMixer

    private let bytes: UnsafeMutableRawPointer
    private let stopFlag = Atomic<Bool>(false)
    private let available = Atomic<Bool>(false)
    private let lastError = Atomic<Int32>(0)
    private let framesPlayed = Atomic<Int>(0)
    private let xruns = Atomic<Int>(0)
    private let suspends = Atomic<Int>(0)
    private let lateCycles = Atomic<Int>(0)
    private let reopens = Atomic<Int>(0)
    private let delayFrames = Atomic<Int>(0)
    private let realtime = Atomic<Bool>(false)
    private let grantedPeriod = Atomic<Int>(0)
    private let grantedBuffer = Atomic<Int>(0)
    private let openAttempts = Atomic<Int>(0)
    private var thread: pthread_t?

    /// Called by the output thread at the top of every render cycle with the cycle number, before
    /// it renders. For tests that count allocations on the real output thread; must be real-time safe.
    /// Set before `start`.
    public nonisolated(unsafe) var cycleObserver: (@Sendable (Int) -> Void)?

    /// Creates the zone and allocates every buffer. Control thread.
    public init(_ spec: ZoneOutputSpec) {
        self.spec = spec
        mixer = ZoneMixer(channels: spec.pcm.channels, periodFrames: spec.pcm.periodFrames,
                          slotCount: spec.slotCount, ringSamples: spec.ringFrames * spec.pcm.channels,
                          rampFrames: spec.rampFrames)
        bytes = .allocate(byteCount: spec.pcm.periodFrames * spec.pcm.channels * 4, alignment: 16)
    }

    deinit { bytes.deallocate() }

    /// Starts the output thread. Control thread.
    public func start() {
        precondition(thread == nil, "zone \(spec.zone) started twice")
        thread = RealtimeThread.start { [self] in run() }
    }

    /// Stops the output thread and waits for it, closing the PCM. Control thread.
    public func stop() {
        stopFlag.store(true, ordering: .releasing)
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// How many times the output thread tried to open the PCM. Any thread.
    public var openAttemptCount: Int { openAttempts.load(ordering: .acquiring) }

    /// The zone's counters now. Any thread.
    public func snapshot() -> Snapshot {
        Snapshot(available: available.load(ordering: .acquiring), lastError: lastError.load(ordering: .acquiring),
                 framesPlayed: framesPlayed.load(ordering: .acquiring), xruns: xruns.load(ordering: .acquiring),
                 suspends: suspends.load(ordering: .acquiring), lateCycles: lateCycles.load(ordering: .acquiring),
                 reopens: reopens.load(ordering: .acquiring), delayFrames: delayFrames.load(ordering: .acquiring),
                 realtime: realtime.load(ordering: .acquiring), periodFrames: grantedPeriod.load(ordering: .acquiring),
                 bufferFrames: grantedBuffer.load(ordering: .acquiring))
    }

    // MARK: Output thread

    private var stopping: Bool { stopFlag.load(ordering: .acquiring) }

    private func run() {
        if spec.realtimePriority > 0 {
            realtime.store(RealtimeThread.requestRealtime(priority: spec.realtimePriority) == 0, ordering: .releasing)
        }
        var backoff = 250_000_000
        var cycle = 0
        while !stopping {
            let pcm: PCM
            do {
                openAttempts.add(1, ordering: .relaxed)
                pcm = try PCM(spec.pcm)
            } catch {
                lastError.store(error.code, ordering: .releasing)
                available.store(false, ordering: .releasing)
                sleepInterruptibly(nanoseconds: backoff)
                backoff = min(backoff * 2, 8_000_000_000)
                continue
            }
            backoff = 250_000_000
            grantedPeriod.store(pcm.configuration.periodFrames, ordering: .relaxed)
            grantedBuffer.store(pcm.configuration.bufferFrames, ordering: .relaxed)
            if framesPlayed.load(ordering: .relaxed) > 0 || reopens.load(ordering: .relaxed) > 0 {
                reopens.add(1, ordering: .relaxed)
            }
            lastError.store(0, ordering: .releasing)
            available.store(true, ordering: .releasing)
            play(on: pcm, cycle: &cycle)
            available.store(false, ordering: .releasing)
        }
    }

    /// Renders and writes periods until stopped or the device is gone. Real-time safe.
    private func play(on pcm: PCM, cycle: inout Int) {
        let period = spec.pcm.periodFrames
        let channels = spec.pcm.channels
        let frameBytes = channels * spec.pcm.format.bytesPerSample
        let periodNanoseconds = period * 1_000_000_000 / spec.pcm.rate
        let bufferNanoseconds = pcm.configuration.bufferFrames * 1_000_000_000 / spec.pcm.rate
        var deadline = monotonicNanoseconds()
        while !stopping {
            cycleObserver?(cycle)
            cycle += 1
            mixer.render()
            switch spec.pcm.format {
            case .s16LE: convertToS16(mixer.mix, bytes.assumingMemoryBound(to: Int16.self), count: period * channels)
            case .s32LE: convertToS32(mixer.mix, bytes.assumingMemoryBound(to: Int32.self), count: period * channels)
            }
            var written = 0
            while written < period {
                let r = pcm.write(bytes + written * frameBytes, frames: period - written)
                if r >= 0 { written += r; continue }
                let code = Int32(r)
                if code == -EAGAIN || code == -EINTR { continue }
                if code == -EPIPE { xruns.add(1, ordering: .relaxed) }
                if code == -ESTRPIPE { suspends.add(1, ordering: .relaxed) }
                if (code == -EPIPE || code == -ESTRPIPE) && pcm.recover(code) == 0 { continue }
                lastError.store(code, ordering: .releasing)
                return  // gone (-ENODEV) or unrecoverable: reopen with backoff
            }
            framesPlayed.add(period, ordering: .releasing)
            switch spec.clock {
            case .device:
                delayFrames.store(pcm.delay() ?? 0, ordering: .relaxed)
            case .system:
                deadline += periodNanoseconds
                let now = monotonicNanoseconds()
                if now > deadline + bufferNanoseconds {
                    lateCycles.add(1, ordering: .relaxed)
                    deadline = now
                } else {
                    sleepUntil(deadline)
                }
            }
        }
    }

    private func sleepInterruptibly(nanoseconds: Int) {
        let end = monotonicNanoseconds() + nanoseconds
        while !stopping {
            let now = monotonicNanoseconds()
            if now >= end { return }
            sleepUntil(min(end, now + 50_000_000))
        }
    }
}
