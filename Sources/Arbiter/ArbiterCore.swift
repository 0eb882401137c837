/// The arbiter's state machine on a private time line: instants are `Moment`s, durations since the first
/// input. Not generic, so debug builds do not look up generic metadata on every record access;
/// ``Arbiter`` wraps it for any `InstantProtocol`.
struct ArbiterCore: Sendable {
    typealias Instant = Moment

    /// The policy in force.
    private(set) var policy: Policy

    /// Every source the arbiter knows (granted or queued), in arrival order.
    var records: [Record] = []
    /// Keys accepted recently, oldest first, for coalescing.
    var coalesceMemory: [CoalesceEntry] = []
    /// Arrival counter: orders records and breaks ties.
    var nextSequence: UInt64 = 0
    /// The deadline last sent in a `scheduleTimer`, so it is sent once per change.
    var announcedDeadline: Instant?
    /// Effects of the input being handled.
    var pending: [Effect<Instant>] = []
    /// The instant of the input being handled.
    var now: Instant?
    /// Inputs handled so far, counting the one being handled: orders what happened at one instant.
    var inputCount: UInt64 = 0
    /// Set when the records or grants changed: only then can the queue move or a zone's verdict change.
    /// (User commands, and ticks that expire nothing, leave every verdict as it was.)
    var arbitrationChanged = false

    init(policy: Policy) {
        self.policy = policy
    }

    /// Handles one input at `now` and returns the effects to carry out, in order.
    mutating func handle(_ input: Input, at now: Instant) -> [Effect<Instant>] {
        self.now = now
        inputCount += 1
        pending.removeAll(keepingCapacity: true)
        pruneCoalesceMemory(now: now)
        switch input {
        case .request(let request):
            receive(request, now: now)
        case .release(let source):
            finish(source, reason: .released)
        case .failed(let source):
            coalesceMemory.removeAll { $0.source == source }
            finish(source, reason: .released)
        case .vanished(let source):
            finish(source, reason: .vanished)
        case .replaced(let source, let request):
            finish(source, reason: .vanished)
            receive(request, now: now)
        case .user(let source, let command):
            apply(command, to: source)
        case .tick:
            break
        case .policy(let policy):
            adopt(policy)
        }
        settle(now: now)
        let effects = pending
        pending.removeAll(keepingCapacity: true)
        return effects
    }

    // MARK: - Internals

    mutating func emit(_ action: Effect<Instant>.Action, _ reason: Reason) {
        guard let now else { preconditionFailure("emit outside handle") }
        pending.append(Effect(at: now, action: action, reason: reason))
    }

    func index(of source: SourceID) -> Int? {
        records.withUnsafeBufferPointer { records in
            var j = 0
            while j < records.count {
                if records[j].id == source { return j }
                j += 1
            }
            return nil
        }
    }

    /// After any input: expire, grant what the queue allows, bring every source's zones in line, set the timer.
    mutating func settle(now: Instant) {
        expireQueued(now: now)
        if arbitrationChanged {
            grantQueued(now: now)
            reconcile(now: now)
            arbitrationChanged = false
        }
        scheduleNextExpiry()
    }

    mutating func finish(_ source: SourceID, reason: Reason) {
        guard let i = index(of: source) else { return }
        forgetUnplayed([records.remove(at: i)])
        arbitrationChanged = true
        emit(.finished(source), reason)
    }

    mutating func apply(_ command: UserCommand, to source: SourceID) {
        guard let i = index(of: source) else { return }
        switch command {
        case .stop:
            finish(source, reason: .userStopped)
            return
        case .pause:
            records[i].paused = true
        case .play:
            records[i].paused = false
        case .seek, .change, .volume:
            break
        }
        guard records[i].interruption != nil, let now else { return }
        switch command {
        case .pause, .play: records[i].interruption?.playOrPause = (command, now, inputCount)
        case .seek, .change:
            if records[i].interruption?.userCommand == nil { records[i].interruption?.userCommand = command }
        case .stop, .volume: break
        }
    }

    mutating func adopt(_ newPolicy: Policy) {
        policy = newPolicy
        var kept: [Record] = []
        var lost: [Record] = []
        for record in records {
            if let rules = newPolicy[record.sourceClass] {
                var updated = record
                updated.rules = rules
                kept.append(updated)
            } else {
                lost.append(record)
            }
        }
        records = kept
        forgetUnplayed(lost)
        arbitrationChanged = true
        for record in lost {
            emit(.lostForGood(record.id), .classRemoved(record.sourceClass))
        }
        trimQueues()
    }
}

extension ArbiterCore {
    /// What the arbiter remembers about one source.
    struct Record: Sendable {
        let id: SourceID
        let sourceClass: SourceClass
        let kind: RequestKind
        /// Sorted, unique.
        let zones: [ZoneID]
        let coalesceKey: String?
        let sequence: UInt64
        let requestedAt: Instant
        var rules: ClassPolicy
        /// The request's own ttl (``Request/ttl``), kept across policy changes.
        var ownTTL: Duration? = nil
        var granted: Bool = false
        /// Not playing by the user's command or because it was told not to resume.
        var paused: Bool = false
        /// The gain stages last sent to the daemon, parallel to `zones`.
        var outputs: [ZoneOutput]
        var interruption: Interruption?

        var priority: Int { rules.priority }
        /// How long it may wait in the queue: its request's, else its class's.
        var ttl: Duration? { ownTTL ?? rules.ttl }

        var contender: Contender {
            Contender(source: id, sourceClass: sourceClass, priority: rules.priority, kind: kind)
        }

        func overlaps(_ other: [ZoneID]) -> Bool {
            zones.contains { other.contains($0) }
        }
    }

    /// The per-zone gain stages as last told to the daemon.
    struct ZoneOutput: Sendable, Equatable {
        var muted = false
        var duck: DuckPolicy?
    }

    /// An interruption in progress: began was sent, ended not yet.
    struct Interruption: Sendable {
        let began: Instant
        let wasPlaying: Bool
        let by: Contender
        /// The takeover that began last (`see`), and the input at which it was seen.
        var permanentBy: Contender?
        var permanentSince: UInt64?
        /// The permanent sources covering it at the last look.
        var covering: [SourceID] = []
        /// The first seek or change the user made meanwhile.
        var userCommand: UserCommand?
        /// The last play or pause the user gave meanwhile, when, and at which input: it comes before
        /// the other rules (`resumeDecision`).
        var playOrPause: (command: UserCommand, at: Instant, input: UInt64)?

        init(began: Instant, wasPlaying: Bool, by: Contender) {
            self.began = began
            self.wasPlaying = wasPlaying
            self.by = by
        }

        /// Notes the permanent sources covering it now: one that was not at the last look is a
        /// takeover that began at `input` (a second one, after the first ended, too: a play given
        /// between them does not outlast it).
        mutating func see(takeovers: [Contender], at input: UInt64) {
            if let new = takeovers.first(where: { !covering.contains($0.source) }) {
                permanentBy = new
                permanentSince = input
            }
            covering = takeovers.map(\.source)
        }
    }

    /// A coalesce key accepted at some instant.
    struct CoalesceEntry: Sendable {
        let sourceClass: SourceClass
        let key: String
        let zones: [ZoneID]
        let source: SourceID
        let at: Instant
        let window: Duration
    }
}
