import AudioCore
import Glibc
import Synchronization

/// Moves a receiver's audio into zone rings at each zone's rate: a thread that keeps every ring filled
/// to `lead` of audio, pulling 48 kHz frames from the receiver, copying mono (or stereo) to the zone's
/// channels and resampling to the zone's rate. The output threads read the rings as usual, so the
/// output device paces the call; the jitter buffer absorbs the sender's clock.
///
/// Threads: `init`, `start`, `stop` on the control thread; the pump runs on its own thread, and is the
/// receiver's only consumer while it runs. Allocates in `init` only (and when a zone rejoins: `Target.inStep`).
// @unchecked: `targets` (with their non-Sendable resamplers) and the buffers are used only by the pump
// thread between `start` and `stop`; `thread` only by the control thread; the rest is atomics.
public final class IntercomPump: @unchecked Sendable {
    /// One zone's ring.
    public struct Target {
        public let ring: FloatRing
        public let channels: Int
        public let rate: Int
        /// A 48 kHz → `rate` converter for `channels` channels (Media's `makeResampler`); nil when the
        /// zone runs at 48 kHz.
        public let resampler: (any Resampler)?
        /// Called on the pump thread after frames were written into `ring` (the slot's
        /// `SourceSlot.wrote`: it wakes an output stopped while idle for the call's first frames).
        public let wrote: @Sendable () -> Void
        /// Whether the zone does not take the call now (its slot paused: the call interrupted by a
        /// policy that lets something over it, or paused by the user; or its card lost, its output
        /// reading nothing). Any thread.
        public let isHeld: @Sendable () -> Bool
        /// Whether the zone takes the call's next frames with the others (`SourceOutput`'s
        /// `isLeftBehind` and `rejoins`): false while its card is lost and another zone plays, and
        /// after, until it is back in step. Called once per block on the pump thread (it may drop
        /// what the zone's ring held, and pad it to the others' place). Its ring's level then does
        /// not count, and its frames go to `drop`.
        public let inStep: @Sendable () -> Bool
        /// Counts frames that zone did not take (`SourceOutput.drop`). Pump thread.
        public let drop: @Sendable (Int) -> Void

        public init(
            ring: FloatRing, channels: Int, rate: Int, resampler: (any Resampler)?,
            wrote: @escaping @Sendable () -> Void = {}, isHeld: @escaping @Sendable () -> Bool = { false },
            inStep: @escaping @Sendable () -> Bool = { true }, drop: @escaping @Sendable (Int) -> Void = { _ in }
        ) {
            self.ring = ring
            self.channels = channels
            self.rate = rate
            self.resampler = resampler
            self.wrote = wrote
            self.isHeld = isHeld
            self.inStep = inStep
            self.drop = drop
        }
    }

    /// Audio kept in the emptiest ring (ns): the latency the pump adds beyond the jitter buffer.
    public let lead: Int
    /// How long the pump sleeps once the rings hold `lead` (ns): the zones' output wake-up interval
    /// (`DeviceOutput.burstNanoseconds`), 2…10 ms. An output takes at most that much per interval,
    /// so a ring refilled once per interval never holds less than `lead` minus it. (It used to look
    /// every 2 ms: 500 wake-ups a second during a call.)
    public let interval: Int
    private let receiver: RTPReceiver
    private let targets: [Target]
    private let clock: @Sendable () -> Int
    private let running = Atomic<Bool>(false)
    private let overflow = Atomic<Int>(0)
    private var thread: OSThread?
    private var pcm: [Float]
    private var mapped: [Float]
    private var resampled: [Float]
    /// Whether each target takes the block being pumped (`Target.inStep`, asked once per look).
    private var taking: [Bool]
    private static let block = 240  // 5 ms at 48 kHz
    private static let blockNanoseconds = block * 1_000_000_000 / 48_000

    public init(
        receiver: RTPReceiver, targets: [Target], lead: Int = 30_000_000, interval: Int = 10_000_000,
        clock: @escaping @Sendable () -> Int = monotonicNanoseconds
    ) {
        self.receiver = receiver
        self.targets = targets
        self.lead = lead
        self.interval = min(10_000_000, max(2_000_000, interval))
        self.clock = clock
        let maxChannels = targets.map(\.channels).max() ?? 1
        pcm = [Float](repeating: 0, count: Self.block * receiver.configuration.channels)
        mapped = [Float](repeating: 0, count: Self.block * maxChannels)
        let maxRate = targets.map(\.rate).max() ?? 48_000
        resampled = [Float](repeating: 0, count: (Self.block * maxRate / 48_000 + 64) * maxChannels)
        taking = [Bool](repeating: true, count: targets.count)
    }

    /// Samples that did not fit into a full ring (a zone that stopped reading). Any thread.
    public var overflowSamples: Int { overflow.load(ordering: .relaxed) }

    /// Starts the pump thread. Control thread.
    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        thread = OSThread.start(name: "call-pump") { [self] in run() }
    }

    /// Stops the pump thread and waits for it (≤ `interval` + 5 ms). Control thread.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing), let thread else { return }
        thread.join()
        self.thread = nil
    }

    /// The most a pump skips at its start to be live (`catchUp`): more than the jitter buffer
    /// holds (128 packets of 20 ms).
    private static let catchUpLimit = 4_000_000_000

    /// Skips what the jitter buffer holds beyond its target delay: a call granted late — queued
    /// behind something its policy lets over it — is heard live, not from where it came in. Nothing
    /// pulled it while it waited: the sender filled the jitter buffer (up to 2.56 s, then again
    /// from its start), the call was heard that far behind the door, and caught up over seconds,
    /// one packet in six dropped. Pump thread, at its start.
    private func catchUp() {
        var skipped = 0
        while skipped < Self.catchUpLimit {
            let (target, buffered) = receiver.delays
            guard buffered > target + Self.blockNanoseconds else { return }
            _ = pcm.withUnsafeMutableBufferPointer { receiver.pull(into: $0, now: clock()) }
            skipped += Self.blockNanoseconds
        }
    }

    private func run() {
        catchUp()
        var heldUntil: Int?
        while running.load(ordering: .acquiring) {
            // Held in every zone (paused, or every zone's card lost), the call goes on where it is
            // said, and is heard live again when it is taken up: its audio is pulled at its pace,
            // and dropped. It used to wait in the jitter buffer, which the sender then overran every
            // 2.56 s (each time taken for another stream, said in `lastRefused`): the call came back
            // up to 2.5 s behind the door, and caught up over seconds.
            if !targets.isEmpty && targets.allSatisfy({ $0.isHeld() }) {
                let now = clock()
                var due = heldUntil ?? now
                while due <= now {
                    _ = pcm.withUnsafeMutableBufferPointer { receiver.pull(into: $0, now: due) }
                    due += Self.blockNanoseconds
                }
                heldUntil = due
                usleep(UInt32(interval / 1_000))
                continue
            }
            // Taken up again: what the jitter buffer gathered beyond its target meanwhile is skipped.
            if heldUntil != nil { catchUp() }
            heldUntil = nil
            // The emptiest ring of a zone in step decides: top it up to `lead`, 5 ms at a time. A
            // zone whose card is lost while another plays is not waited for: its ring, full and
            // unread, kept the call 0.5 s old there once the card was back, the rooms an echo of
            // each other for the rest of the call.
            var lowest = Int.max
            for (k, t) in targets.enumerated() {
                taking[k] = t.inStep()
                if taking[k] { lowest = min(lowest, t.ring.readable / t.channels * 1_000_000_000 / t.rate) }
            }
            if targets.isEmpty || lowest >= lead {
                usleep(UInt32(interval / 1_000))
                continue
            }
            pumpBlock()
        }
    }

    private func pumpBlock() {
        let inChannels = receiver.configuration.channels
        _ = pcm.withUnsafeMutableBufferPointer { receiver.pull(into: $0, now: clock()) }
        for (k, t) in targets.enumerated() {
            // Channel map: mono to every channel; stereo to the first two, their mean to the rest.
            for f in 0..<Self.block {
                for c in 0..<t.channels {
                    let v: Float =
                        inChannels == 1
                        ? pcm[f]
                        : (t.channels == 1
                            ? (pcm[2 * f] + pcm[2 * f + 1]) / 2
                            : (c < 2 ? pcm[2 * f + c] : (pcm[2 * f] + pcm[2 * f + 1]) / 2))
                    mapped[f * t.channels + c] = v
                }
            }
            let count = Self.block * t.channels
            if let r = t.resampler {
                var produced = 0
                mapped.withUnsafeBufferPointer { input in
                    resampled.withUnsafeMutableBufferPointer { output in
                        var offset = 0
                        while offset < count {
                            guard
                                let (c, p) = try? r.process(
                                    input: UnsafeBufferPointer(rebasing: input[offset..<count]),
                                    output: UnsafeMutableBufferPointer(rebasing: output[(produced * t.channels)...]))
                            else { break }
                            offset += c * t.channels
                            produced += p
                            if c == 0 && p == 0 { break }
                        }
                    }
                }
                write(resampled, count: produced * t.channels, to: t, taking: taking[k])
            } else {
                write(mapped, count: count, to: t, taking: taking[k])
            }
        }
    }

    private func write(_ samples: [Float], count: Int, to target: Target, taking: Bool) {
        guard count > 0 else { return }
        // Converted all the same: the converter's state stays the call's, in step when it is back.
        guard taking else { return target.drop(count / target.channels) }
        let n = samples.withUnsafeBufferPointer { target.ring.write($0.baseAddress!, count: count) }
        if n > 0 { target.wrote() }
        if n < count { overflow.add(count - n, ordering: .relaxed) }
    }
}
