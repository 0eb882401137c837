/// Decides, per zone and by priority, which sources are heard, and tells every source that loses a zone.
///
/// A pure state machine in the style of Hummingbird's connection state machine: every input is a
/// `mutating` call with the current instant, returning the ``Effect``s the daemon must carry out in order.
/// It performs no I/O, never sleeps and reads no clock; when it needs to be woken it returns
/// ``Effect/Action/scheduleTimer(at:)`` and expects ``tick(at:)`` then.
///
/// Deterministic: the same inputs at the same instants give the same effects, in the same order
/// (sources are kept in arrival order, zones sorted).
///
/// Thread safety: any single thread; the arbiter is a value type with no synchronization.
///
/// `Instant` is any `InstantProtocol` measured in `Duration`: `ContinuousClock.Instant`,
/// `SuspendingClock.Instant`, or a test's manual instant. Instants passed in must never go backwards.
public struct Arbiter<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// The policy in force.
    public private(set) var policy: Policy

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

    /// Creates an arbiter with no sources.
    public init(policy: Policy = .default) {
        self.policy = policy
    }

    /// Handles one input at `now` and returns the effects to carry out, in order.
    public mutating func handle(_ input: Input, at now: Instant) -> [Effect<Instant>] {
        self.now = now
        pending.removeAll(keepingCapacity: true)
        pruneCoalesceMemory(now: now)
        switch input {
        case .request(let request):
            receive(request, now: now)
        case .release(let source):
            finish(source, reason: .released)
        case .vanished(let source):
            finish(source, reason: .vanished)
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

    /// Asks for `source` of `sourceClass` to be heard in `zones`. See ``Request``.
    public mutating func request(_ source: SourceID, _ sourceClass: SourceClass, zones: [ZoneID],
                                 kind: RequestKind? = nil, coalesceKey: String? = nil,
                                 at now: Instant) -> [Effect<Instant>] {
        handle(.request(Request(source: source, sourceClass: sourceClass, zones: zones, kind: kind,
                                coalesceKey: coalesceKey)), at: now)
    }

    /// The source finished or gave up; whatever it silenced may resume.
    public mutating func release(_ source: SourceID, at now: Instant) -> [Effect<Instant>] {
        handle(.release(source), at: now)
    }

    /// The user acted on `source`.
    public mutating func user(_ command: UserCommand, on source: SourceID, at now: Instant) -> [Effect<Instant>] {
        handle(.user(source, command), at: now)
    }

    /// The source disappeared without releasing.
    public mutating func sourceVanished(_ source: SourceID, at now: Instant) -> [Effect<Instant>] {
        handle(.vanished(source), at: now)
    }

    /// The scheduled timer fired (calling it at other times is harmless): expires stale queued requests.
    public mutating func tick(at now: Instant) -> [Effect<Instant>] {
        handle(.tick, at: now)
    }

    /// Replaces the policy; sources of classes it no longer declares lose for good.
    public mutating func setPolicy(_ policy: Policy, at now: Instant) -> [Effect<Instant>] {
        handle(.policy(policy), at: now)
    }

    // MARK: - Internals

    mutating func emit(_ action: Effect<Instant>.Action, _ reason: Reason) {
        guard let now else { preconditionFailure("emit outside handle") }
        pending.append(Effect(at: now, action: action, reason: reason))
    }

    func index(of source: SourceID) -> Int? {
        records.firstIndex { $0.id == source }
    }

    /// After any input: expire, grant what the queue allows, bring every source's zones in line, set the timer.
    mutating func settle(now: Instant) {
        expireQueued(now: now)
        grantQueued(now: now)
        reconcile(now: now)
        scheduleNextExpiry()
    }

    mutating func finish(_ source: SourceID, reason: Reason) {
        guard let i = index(of: source) else { return }
        records.remove(at: i)
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
        if command.changesPlayback, records[i].interruption != nil, records[i].interruption?.userCommand == nil {
            records[i].interruption?.userCommand = command
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
        for record in lost {
            emit(.lostForGood(record.id), .classRemoved(record.sourceClass))
        }
        trimQueues()
    }
}

extension Arbiter {
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
        var granted: Bool = false
        /// Not playing by the user's command or because it was told not to resume.
        var paused: Bool = false
        /// The gain stages last sent to the daemon, parallel to `zones`.
        var outputs: [ZoneOutput]
        var interruption: Interruption?

        var priority: Int { rules.priority }

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
        var permanentBy: Contender?
        var userCommand: UserCommand?
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
