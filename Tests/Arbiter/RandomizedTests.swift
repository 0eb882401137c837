import Arbiter
import Testing

/// One step of a random trace.
enum Operation: CustomStringConvertible {
    case request(Request)
    case release(SourceID)
    case user(SourceID, UserCommand)
    case vanish(SourceID)
    case advance(Duration)
    case policy(Int)

    var description: String {
        switch self {
        case .request(let r):
            "request \(r.source) \(r.sourceClass) \(r.zones) \(r.kind.map { "\($0)" } ?? "-") key=\(r.coalesceKey ?? "-")"
        case .release(let s): "release \(s)"
        case .user(let s, let c): "user \(c) \(s)"
        case .vanish(let s): "vanish \(s)"
        case .advance(let d): "advance \(d) + tick"
        case .policy(let n): "policy variant \(n)"
        }
    }
}

/// The policies a random trace switches between: the default with a short resume-within for music (so it is
/// exceeded often), and the same with announcements ducking instead of interrupting.
let randomPolicies: [Policy] = {
    var base = Policy.default
    base.classes[.music]?.resumeWithin = .seconds(60)
    var ducking = base
    ducking.classes[.announcement]?.lower = .duck
    return [base, ducking]
}()

/// An independent model of what the effects said, checking the contract after every step.
struct ContractChecker {
    struct Granted {
        var sourceClass: SourceClass
        var kind: RequestKind
        var zones: [ZoneID]
        var paused = false
        var muted: Set<ZoneID> = []
        var duck: [ZoneID: Decibels] = [:]
    }

    struct Open {
        var began: ManualInstant
        var wasPlaying: Bool
        /// When a higher permanent interrupter was first seen covering it.
        var permanentSince: Int?
        /// The permanent sources covering it at the last step.
        var covering: Set<SourceID> = []
        /// A seek or change meanwhile.
        var userChanged = false
        /// The last play or pause meanwhile, when, and at which step.
        var playOrPause: (command: UserCommand, at: ManualInstant, step: Int)?

        /// Whether it resumes if the cover ends at `now` (nil: resume-within not looked at).
        func resumes(limit: Duration?, now: ManualInstant?) -> Bool {
            if let (command, at, step) = playOrPause {
                // The user's last word, unless a takeover came after a play, or the window ran out since.
                guard command == .play else { return false }
                if let since = permanentSince, since > step { return false }
                if let limit, let now, at.duration(to: now) > limit { return false }
                return true
            }
            if let limit, let now, began.duration(to: now) > limit { return false }
            return wasPlaying && permanentSince == nil && !userChanged
        }
    }

    struct Waiting {
        var sourceClass: SourceClass
        var zones: [ZoneID]
        var at: ManualInstant
        var order: Int
        /// Paused (or played) while it waited: it is granted so.
        var paused = false
    }

    var policy: Policy
    var lastRequest: [SourceID: Request] = [:]
    var granted: [SourceID: Granted] = [:]
    var queued: [SourceID: Waiting] = [:]
    var open: [SourceID: Open] = [:]
    var timer: ManualInstant?
    /// Operations checked so far: orders what happened at one instant.
    var step = 0
    /// Requests with a coalesce key that were granted or queued, oldest first.
    var accepted: [(source: SourceID, key: String, at: ManualInstant)] = []
    var order = 0
    var beganCount = 0
    var endedCount = 0
    var resumedCount = 0
    var duckCount = 0
    var muteCount = 0
    var coalescedCount = 0
    var expiredCount = 0

    func priority(_ c: SourceClass) -> Int { policy[c]!.priority }

    /// A granted source with its class's rules looked up once per step.
    struct Row {
        var id: SourceID
        var granted: Granted
        var priority: Int
        var lower: LowerAction
        var duck: Decibels
    }

    /// The verdict for a granted source in one zone, computed from the model: silenced if any higher-priority
    /// granted class interrupts there, else ducked at the deepest higher-priority duck there.
    static func expected(_ row: Row, in zone: ZoneID, among rows: [Row]) -> (silenced: Bool, duck: Decibels?) {
        var duck: Decibels?
        for other in rows where other.priority > row.priority && other.granted.zones.contains(zone) {
            switch other.lower {
            case .interrupt: return (true, nil)
            case .duck: if duck == nil || other.duck < duck! { duck = other.duck }
            case .mix: break
            }
        }
        return (false, duck)
    }

    /// Whether the effect's reason is one its action can have, names a contender of the right priority, and
    /// agrees with the operation that caused it (point 8: each decision carries its reason).
    func reasonProblem(_ effect: TestEffect, _ op: Operation) -> String? {
        let mine =
            effect.action.source.flatMap { granted[$0]?.sourceClass ?? lastRequest[$0]?.sourceClass }
            .map(priority) ?? 0
        let fits: Bool =
            switch (effect.action, effect.reason) {
            case (.granted, .outranks(let lower)): lower.allSatisfy { $0.priority < mine }
            case (.granted, .waited): true
            case (.queued, .queuedBehind(let c)): c.priority == mine
            case (.queued, .delayedBy(let c)), (.rejected, .higherRejects(let c)): c.priority > mine
            case (.rejected, .sameRejects(let c)): c.priority == mine
            case (.rejected, .queueFull(let limit)):
                limit == policy[lastRequest[effect.action.source!]!.sourceClass]?.queueLimit
            case (.coalesced, .coalesceWindow), (.expired, .ttlElapsed), (.lostForGood, .classRemoved): true
            case (.lostForGood, .replacedBy(let c)): c.priority == mine
            case (.finished(let s), .released): if case .release(s) = op { true } else { false }
            case (.finished(let s), .vanished): if case .vanish(s) = op { true } else { false }
            case (.finished(let s), .userStopped): if case .user(s, .stop) = op { true } else { false }
            case (.finished(let s), .superseded): if case .request(let r) = op { r.source == s } else { false }
            case (.interruptionBegan, .interruptedBy(let c)), (.muted, .interruptedBy(let c)),
                (.duckBegan, .duckedBy(let c)):
                c.priority > mine
            case (.interruptionEnded(_, true), .interruptionOver): true
            case (.interruptionEnded(_, true), .userCommand(.play)): true
            case (.interruptionEnded(_, false), .userCommand(let c)): c != .play
            case (.interruptionEnded(_, false), .notPlayingWhenBegan),
                (.interruptionEnded(_, false), .resumeWindowExceeded):
                true
            case (.interruptionEnded(_, false), .permanentTakeover(let c)): c.priority > mine && c.kind == .permanent
            case (.duckEnded, .restored), (.unmuted, .restored), (.scheduleTimer, .nextExpiry): true
            default: false
            }
        return fits ? nil : "reason \(effect.reason) does not fit \(effect.action) after \(op)"
    }

    /// Applies one operation's effects to the model and returns the first contract violation, if any.
    mutating func check(_ op: Operation, _ effects: [TestEffect], now: ManualInstant, arbiter: TestArbiter) -> String? {
        step += 1
        switch op {
        case .request(let r): lastRequest[r.source] = r
        case .policy(let n): policy = randomPolicies[n]
        case .user(let s, let c):
            if c == .seek || c == .change, open[s] != nil { open[s]!.userChanged = true }
            if c == .play || c == .pause, open[s] != nil { open[s]!.playOrPause = (c, now, step) }
            if c == .pause || c == .play {
                granted[s]?.paused = c == .pause
                queued[s]?.paused = c == .pause
            }
        default: break
        }
        if case .request(let r) = op, let key = r.coalesceKey,
            effects.contains(where: {
                $0.action == .granted(r.source, zones: Array(Set(r.zones)).sorted()) || $0.action == .queued(r.source)
            })
        {
            accepted.append((r.source, key, now))
            if accepted.count > 64 { accepted.removeFirst() }
        }
        for effect in effects {
            if effect.at != now { return "effect \(effect) stamped \(effect.at), not \(now)" }
            if let problem = reasonProblem(effect, op) { return problem }
            switch effect.action {
            case .granted(let s, let zones):
                guard let r = lastRequest[s] else { return "granted unknown \(s)" }
                if granted[s] != nil { return "granted twice \(s)" }
                let waited = queued.removeValue(forKey: s)
                if let w = waited {
                    // FIFO: no earlier request of the same priority sharing a zone may still wait.
                    if let earlier = queued.first(where: { _, o in
                        o.order < w.order && priority(o.sourceClass) == priority(w.sourceClass)
                            && o.zones.contains(where: w.zones.contains)
                    }) {
                        return "FIFO broken: \(s) granted before \(earlier.key)"
                    }
                }
                granted[s] = Granted(
                    sourceClass: r.sourceClass, kind: r.kind ?? policy[r.sourceClass]!.kind,
                    zones: zones, paused: waited?.paused ?? false)
            case .queued(let s):
                guard let r = lastRequest[s] else { return "queued unknown \(s)" }
                order += 1
                queued[s] = Waiting(
                    sourceClass: r.sourceClass, zones: Array(Set(r.zones)).sorted(), at: now,
                    order: order)
            case .rejected:
                break
            case .coalesced(let s, let into):
                coalescedCount += 1
                guard let key = lastRequest[s]?.coalesceKey,
                    let window = policy[lastRequest[s]!.sourceClass]?.coalesceWindow,
                    accepted.contains(where: { $0.source == into && $0.key == key && $0.at.duration(to: now) < window })
                else { return "coalesced \(s) into \(into) without an accepted request of its key in the window" }
            case .expired(let s):
                guard let w = queued.removeValue(forKey: s) else { return "expired unqueued \(s)" }
                if let ttl = policy[w.sourceClass]?.ttl, w.at.duration(to: now) < ttl { return "expired early \(s)" }
                expiredCount += 1
            case .lostForGood(let s), .finished(let s):
                granted[s] = nil
                queued[s] = nil
                open[s] = nil  // went away: no ended owed
            case .interruptionBegan(let s, _):
                guard let g = granted[s] else { return "began for ungranted \(s)" }
                if open[s] != nil { return "second began for \(s) without ended (nesting not coalesced)" }
                open[s] = Open(began: now, wasPlaying: !g.paused)
                beganCount += 1
            case .interruptionEnded(let s, let shouldResume):
                guard let o = open.removeValue(forKey: s) else { return "ended without began for \(s)" }
                let limit = policy[granted[s]!.sourceClass]!.resumeWithin
                let expect = o.resumes(limit: limit, now: now)
                if shouldResume != expect {
                    return
                        "ended(shouldResume: \(shouldResume)) for \(s), expected \(expect) (\(o)); reason \(effect.reason)"
                }
                if case .interruptionOver = effect.reason, !shouldResume { return "reason/resume mismatch" }
                if let c = o.playOrPause?.command, c == .pause || shouldResume, effect.reason != .userCommand(c) {
                    return "ended for \(s) after the user's \(c): reason \(effect.reason)"
                }
                granted[s]!.paused = !shouldResume
                endedCount += 1
                if shouldResume { resumedCount += 1 }
            case .duckBegan(let s, let zone, let level, _):
                granted[s]!.duck[zone] = level
                duckCount += 1
            case .duckEnded(let s, let zone, _):
                if granted[s]!.duck.removeValue(forKey: zone) == nil { return "duckEnded without duck \(s) \(zone)" }
            case .muted(let s, let zone):
                if !granted[s]!.muted.insert(zone).inserted { return "muted twice \(s) \(zone)" }
                muteCount += 1
            case .unmuted(let s, let zone):
                if granted[s]!.muted.remove(zone) == nil { return "unmuted while not muted \(s) \(zone)" }
            case .scheduleTimer(let at):
                timer = at
            }
        }
        return invariants(now: now, arbiter: arbiter)
    }

    /// The state after the step: interruptions, mutes and ducks match the grants; queue bounds and ttl hold.
    mutating func invariants(now: ManualInstant, arbiter: TestArbiter) -> String? {
        let rows = granted.sorted { $0.key < $1.key }.map { id, g in
            let rules = policy[g.sourceClass]!
            return Row(
                id: id, granted: g, priority: rules.priority, lower: rules.lower,
                duck: (rules.duck ?? policy.duck).level)
        }
        for row in rows {
            let s = row.id
            let g = row.granted
            let verdicts = g.zones.map { Self.expected(row, in: $0, among: rows) }
            let heard = verdicts.contains { !$0.silenced }
            // A higher permanent interrupter in any zone while interrupted forbids the resume; one that
            // was not covering at the last step began a takeover now.
            if open[s] != nil {
                let covering = Set(
                    rows.filter { o in
                        o.granted.kind == .permanent && o.lower == .interrupt && o.priority > row.priority
                            && o.granted.zones.contains(where: g.zones.contains)
                    }.map(\.id))
                if !covering.isSubset(of: open[s]!.covering) { open[s]!.permanentSince = step }
                open[s]!.covering = covering
            }
            if heard == (open[s] != nil) {
                return heard
                    ? "\(s) heard somewhere but still interrupted (ended missing)"
                    : "\(s) heard nowhere but not interrupted (began missing)"
            }
            let state = arbiter.state(of: s)
            if open[s] != nil {
                let want: SourceState = open[s]!.resumes(limit: nil, now: nil) ? .interrupted : .paused
                if state != want { return "\(s) interrupted but state \(String(describing: state)), want \(want)" }
                continue
            }
            var ducked = false
            for (zone, v) in zip(g.zones, verdicts) {
                if g.muted.contains(zone) != v.silenced {
                    return "\(s) mute in \(zone) is \(!v.silenced), want \(v.silenced)"
                }
                if !v.silenced {
                    if g.duck[zone] != v.duck {
                        return
                            "\(s) duck in \(zone) is \(String(describing: g.duck[zone])), want \(String(describing: v.duck))"
                    }
                    if arbiter.duckGain(of: s, in: zone) != (v.duck ?? .unity) {
                        return "\(s) duck gain query wrong in \(zone)"
                    }
                    if v.duck != nil { ducked = true }
                }
            }
            let want: SourceState = g.paused ? .paused : ducked ? .ducked : .playing
            if state != want { return "\(s) state \(String(describing: state)), want \(want)" }
        }
        var counts: [SourceClass: Int] = [:]
        var earliest: ManualInstant?
        for (s, w) in queued {
            if arbiter.state(of: s) != .queued {
                return "\(s) queued but state \(String(describing: arbiter.state(of: s)))"
            }
            counts[w.sourceClass, default: 0] += 1
            if let ttl = policy[w.sourceClass]?.ttl {
                let expiry = w.at.advanced(by: ttl)
                if expiry <= now { return "\(s) outlived its ttl" }
                if earliest == nil || expiry < earliest! { earliest = expiry }
            }
        }
        for (c, n) in counts where n > (policy[c]?.queueLimit ?? .max) { return "queue of \(c) holds \(n)" }
        if let earliest, timer != earliest { return "timer \(String(describing: timer)) but next expiry \(earliest)" }
        if arbiter.sourceIDs.count != granted.count + queued.count {
            return "arbiter knows \(arbiter.sourceIDs.count) sources, model \(granted.count + queued.count)"
        }
        return nil
    }
}

@Suite("Randomized traces")
struct RandomizedTests {
    static let musics: [SourceID] = ["m0", "m1"]
    static let announcements: [SourceID] = (0..<6).map { SourceID("a\($0)") }
    static let calls: [SourceID] = ["c0", "c1"]
    static let zones: [ZoneID] = ["z0", "z1", "z2"]
    static let everyone = musics + announcements + calls

    static func randomOperation(_ rng: inout SplitMix64) -> Operation {
        func zones() -> [ZoneID] {
            let picked = Self.zones.filter { _ in Bool.random(using: &rng) }
            return picked.isEmpty ? [Self.zones.randomElement(using: &rng)!] : picked
        }
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<12:
            return .request(Request(source: musics.randomElement(using: &rng)!, sourceClass: .music, zones: zones()))
        case 12..<30:
            let key = [nil, "bell", "tts"].randomElement(using: &rng)!
            let kind: RequestKind? = Int.random(in: 0..<20, using: &rng) == 0 ? .permanent : nil
            return .request(
                Request(
                    source: announcements.randomElement(using: &rng)!, sourceClass: .announcement,
                    zones: zones(), kind: kind, coalesceKey: key))
        case 30..<36:
            return .request(Request(source: calls.randomElement(using: &rng)!, sourceClass: .call, zones: zones()))
        case 36..<56:
            return .release(everyone.randomElement(using: &rng)!)
        case 56..<70:
            return .user(everyone.randomElement(using: &rng)!, UserCommand.allCases.randomElement(using: &rng)!)
        case 70..<74:
            return .vanish(everyone.randomElement(using: &rng)!)
        case 74..<98:
            let steps: [Duration] = [
                .milliseconds(10), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5),
                .seconds(20), .seconds(70),
            ]
            return .advance(steps.randomElement(using: &rng)!)
        default:
            return .policy(Int.random(in: 0..<randomPolicies.count, using: &rng))
        }
    }

    /// Applies an operation to an arbiter like the daemon would: advancing means the clock moved and the timer fired.
    static func apply(_ op: Operation, to arbiter: inout TestArbiter, now: inout ManualInstant) -> [TestEffect] {
        switch op {
        case .request(let r): return arbiter.handle(.request(r), at: now)
        case .release(let s): return arbiter.release(s, at: now)
        case .user(let s, let c): return arbiter.user(c, on: s, at: now)
        case .vanish(let s): return arbiter.sourceVanished(s, at: now)
        case .advance(let d):
            now = now.advanced(by: d)
            return arbiter.tick(at: now)
        case .policy(let n): return arbiter.setPolicy(randomPolicies[n], at: now)
        }
    }

    /// Four seeded traces of 25,000 random operations each (100,000 in all) over 3 zones keep the contract after
    /// every step (one began then one ended, shouldResume by the rules, nesting coalesced, ducks and mutes
    /// matching the grants, began only when heard nowhere, queue bound/ttl/FIFO/timer), and replaying each trace
    /// gives the same effects.
    @Test(arguments: [UInt64(0x5EED), 20_260_101, 7, 0xBA70_0000])
    func keepsContractOverRandomTrace(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var arbiter = TestArbiter(policy: randomPolicies[0])
        var checker = ContractChecker(policy: randomPolicies[0])
        var now = ManualInstant()
        var trace: [(op: Operation, at: ManualInstant, effects: [TestEffect])] = []
        trace.reserveCapacity(25_100)

        func fail(_ message: String) {
            let tail = trace.suffix(25).map { step in
                "  @\(step.at) \(step.op)\n" + step.effects.map { "      → \($0)" }.joined(separator: "\n")
            }.joined(separator: "\n")
            Issue.record("seed \(seed), step \(trace.count): \(message)\nlast operations:\n\(tail)")
        }

        func step(_ op: Operation) -> Bool {
            let effects = Self.apply(op, to: &arbiter, now: &now)
            trace.append((op, now, effects))
            if let message = checker.check(op, effects, now: now, arbiter: arbiter) {
                fail(message)
                return false
            }
            return true
        }

        for _ in 0..<25_000 {
            guard step(Self.randomOperation(&rng)) else { return }
        }
        // Drain: release every call and announcement until none is left; every interruption must have ended.
        while let busy = arbiter.sources.first(where: { $0.contender.sourceClass != .music }) {
            guard step(.release(busy.contender.source)) else { return }
        }
        #expect(checker.open.isEmpty, "interruptions never ended: \(checker.open.keys.sorted())")

        // The trace exercised what it claims to check.
        #expect(checker.beganCount > 300)
        #expect(checker.resumedCount > 30)
        #expect(checker.endedCount - checker.resumedCount > 30)
        #expect(checker.duckCount > 30)
        #expect(checker.muteCount > 30)
        #expect(checker.coalescedCount > 30)
        #expect(checker.expiredCount > 3)

        // Determinism: the same trace into a fresh arbiter gives the same effects.
        var replay = TestArbiter(policy: randomPolicies[0])
        var replayNow = ManualInstant()
        for (index, step) in trace.enumerated() {
            let effects = Self.apply(step.op, to: &replay, now: &replayNow)
            if effects != step.effects {
                Issue.record("replay differs at step \(index) (\(step.op)): \(effects) vs \(step.effects)")
                return
            }
        }
    }
}
