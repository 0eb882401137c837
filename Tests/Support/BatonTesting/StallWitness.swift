/// Whether a card that ran dry (or nearly) in a long test on the virtual card was the code's doing
/// or the machine's: one rule for the soak and the long engine tests. Three witnesses run beside the
/// test — the host's steal time (`HostSteal`), the harness's own real-time thread above every output
/// thread (`RealtimeCanary`) and the card's record of its own slow file writes (it writes from the
/// output thread) — and an underrun or a late cycle is not counted, but named, when
/// - the host took at least 20 ms of the VM's CPU within 100 ms of it (the guest accounts a stall's
///   steal when it runs again, after the stall: hence the after),
/// - the card's own write held the output thread at least 20 ms within 150 ms before it, or
/// - a canary — one per CPU — was held at least 20 ms within 60 ms before it (the machine held
///   every real-time thread on that CPU: a VM's CPU stopped in a way its steal time does not show).
///   Any CPU's: an output thread held by one CPU's stall can be found on the other afterwards (all
///   3 underruns of a 10-minute soak were), so where an underrun was found does not say where the
///   thread was held.
/// Anything else is counted. Without SCHED_FIFO for the harness the canary is not asked.
public final class StallWitness: Sendable {
    private let steal = HostSteal()
    private let canary = RealtimeCanary()

    public init() {}

    /// Starts the steal readings and the canary.
    public func start() {
        steal.start()
        canary.start()
    }

    /// Stops both and returns what they saw.
    public func stop() -> Stalls {
        let readings = steal.stop()
        let lates = canary.stop()
        return Stalls(steal: readings, canary: canary.isRealtime ? lates : nil)
    }
}

/// What a `StallWitness` saw, and the rule it judges by.
public struct Stalls: Sendable {
    /// Steal time readings, every 5 ms.
    public let steal: [HostSteal.Reading]
    /// The canary's late wake-ups; nil when it had no SCHED_FIFO (its wake-ups mean nothing then).
    public let canary: [RealtimeCanary.Late]?

    /// One xrun or late cycle, judged.
    public struct Judged: Sendable {
        /// What, when, and what the witnesses saw:
        /// "kitchen xrun at 6.0 s, found 31.2 ms later on CPU 1 (host took 0 ms, the canary on CPU 0 held 34 ms)".
        public var text: String
        /// True when a witness accounts for it (not counted).
        public var excused: Bool
        /// An underrun: whether the card was prepared again after it (the output saw it and went
        /// on; one at a close is not).
        public var recovered = false
    }

    static let threshold = 20

    /// Judges an xrun or a late cycle that happened between `from` and `to` (monotonic ns); `wrote`:
    /// the card's slowest own write just before it (ms).
    public func judge(_ what: String, from: Int, to: Int, wrote: Int = 0) -> Judged {
        let stolen = Int(HostSteal.stolen(steal, from: from - 100_000_000, to: to + 100_000_000) * 1_000)
        let stall = RealtimeCanary.longestStall(canary ?? [], overlapping: from - 60_000_000, to)
        let held = (stall?.late ?? 0) / 1_000_000
        let text =
            "\(what) (host took \(stolen) ms"
            + (wrote > 0 ? ", the card's own write \(wrote) ms" : "")
            + (stall.map { ", the canary on CPU \($0.cpu) held \(held) ms" } ?? "") + ")"
        return Judged(
            text: text, excused: stolen >= Self.threshold || wrote >= Self.threshold || held >= Self.threshold)
    }

    /// Each underrun a card recorded (`events`: its sidecar, `TestCard.events()`, read once by the
    /// caller), judged: when (s since the card opened), when and on which CPU the output thread
    /// found it (how long it was away), how long it then took to prepare it again, and the card's
    /// own slow writes in the 150 ms before it.
    public func underruns(in events: [TestCard.Event], name: String) -> [Judged] {
        guard let opened = events.first?.nanoseconds else { return [] }
        let slow = Self.slowWrites(events)
        var out: [Judged] = []
        for i in events.indices where events[i].kind == "xrun" {
            let at = events[i].nanoseconds
            var text = "\(name) xrun at \(Self.tenths(Double(at - opened) / 1e9)) s"
            // The card notes where its caller found an underrun right after it (an injected xrun: no).
            let found = i + 1 < events.count && events[i + 1].kind == "xrun-found" ? events[i + 1] : nil
            if let found {
                text +=
                    ", found \(Self.tenths(Double(found.nanoseconds - at) / 1e6)) ms later"
                    + (found.detail.isEmpty ? "" : " on CPU \(found.detail)")
            }
            let prepare = events[(i + 1)...].first { $0.kind == "prepare" }
            if let prepare {
                text += ", prepared \(Self.tenths(Double(prepare.nanoseconds - at) / 1e6)) ms later"
            }
            let wrote = slow.filter { $0.nanoseconds <= at && at - $0.nanoseconds < 150_000_000 }.map(\.ms).max() ?? 0
            var judged = judge(text, from: Int(at), to: Int(at), wrote: wrote)
            judged.recovered = prepare != nil
            out.append(judged)
        }
        return out
    }

    /// A card's slowest own write (ms), from its sidecar's `events`.
    public static func slowestWrite(in events: [TestCard.Event]) -> Int { slowWrites(events).map(\.ms).max() ?? 0 }

    /// The longest any canary was held (ms); 0 without SCHED_FIFO.
    public var longestCanaryStall: Int { (canary?.map(\.late).max() ?? 0) / 1_000_000 }

    /// What the canaries saw, for a summary: "the harness's real-time canaries (one per CPU) held at most 34 ms".
    public var canarySummary: String {
        canary == nil
            ? "no real-time canary (no SCHED_FIFO for the harness)"
            : "the harness's real-time canaries (one per CPU) held at most \(longestCanaryStall) ms"
    }

    /// The card's "slow-write" lines (their detail is µs), as ms.
    static func slowWrites(_ events: [TestCard.Event]) -> [(nanoseconds: Int64, ms: Int)] {
        events.filter { $0.kind == "slow-write" }.compactMap { e in Int(e.detail).map { (e.nanoseconds, $0 / 1_000) } }
    }

    public static func tenths(_ x: Double) -> String { "\((x * 10).rounded() / 10)" }
}
