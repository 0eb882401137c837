/// Decides, per zone and by priority, which sources are heard, and tells every source that loses a zone.
///
/// A pure state machine in the style of Hummingbird's connection state machine: every input is a
/// `mutating` call with the current instant, returning the ``Effect``s the daemon must carry out in order.
/// It performs no I/O, never sleeps and reads no clock; when it needs to be woken it returns
/// ``Effect/Action/scheduleTimer(at:)`` and expects ``tick(at:)`` at that instant.
///
/// Deterministic: the same inputs at the same instants give the same effects in the same order
/// (sources are kept in arrival order, zones sorted; no dictionary order leaks out).
///
/// Thread safety: any single thread; the arbiter is a value type with no synchronization.
///
/// `Instant` is any `InstantProtocol` measured in `Duration`: `ContinuousClock.Instant`,
/// `SuspendingClock.Instant`, or a test's manual instant. Instants passed in must never go backwards.
public struct Arbiter<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    var core: ArbiterCore
    /// The instant of the first input: the core counts time from here.
    var epoch: Instant?

    /// Creates an arbiter with no sources.
    public init(policy: Policy = .default) {
        core = ArbiterCore(policy: policy)
    }

    /// The policy in force.
    public var policy: Policy { core.policy }

    /// Handles one input at `now` and returns the effects to carry out, in order.
    public mutating func handle(_ input: Input, at now: Instant) -> [Effect<Instant>] {
        let epoch = self.epoch ?? now
        self.epoch = epoch
        let effects = core.handle(input, at: Moment(epoch.duration(to: now)))
        return effects.map { effect in
            Effect(at: now, action: Self.convert(effect.action, epoch: epoch), reason: effect.reason)
        }
    }

    /// Asks for `source` of `sourceClass` to be heard in `zones`. See ``Request``.
    public mutating func request(
        _ source: SourceID, _ sourceClass: SourceClass, zones: [ZoneID],
        kind: RequestKind? = nil, coalesceKey: String? = nil,
        at now: Instant
    ) -> [Effect<Instant>] {
        handle(
            .request(
                Request(
                    source: source, sourceClass: sourceClass, zones: zones, kind: kind,
                    coalesceKey: coalesceKey)), at: now)
    }

    /// The source finished or gave up; whatever it silenced may resume. `failed`: it ended on a
    /// failure, not played through, so a repeat of its request within the coalesce window plays.
    public mutating func release(_ source: SourceID, failed: Bool = false, at now: Instant) -> [Effect<Instant>] {
        handle(failed ? .failed(source) : .release(source), at: now)
    }

    /// The user acted on `source` (pause, play, stop, seek, change, volume).
    public mutating func user(_ command: UserCommand, on source: SourceID, at now: Instant) -> [Effect<Instant>] {
        handle(.user(source, command), at: now)
    }

    /// The source disappeared without releasing.
    public mutating func sourceVanished(_ source: SourceID, at now: Instant) -> [Effect<Instant>] {
        handle(.vanished(source), at: now)
    }

    /// `source` disappeared without releasing, and `request` takes its place in the same step (see
    /// ``Input/replaced(_:by:)``): `finished` for it, then the request's answer, and only what
    /// neither of them silences any more is told to resume.
    public mutating func sourceVanished(
        _ source: SourceID, replacedBy request: Request, at now: Instant
    ) -> [Effect<Instant>] {
        handle(.replaced(source, by: request), at: now)
    }

    /// The scheduled timer fired (calling it at other times is harmless): expires stale queued requests.
    public mutating func tick(at now: Instant) -> [Effect<Instant>] {
        handle(.tick, at: now)
    }

    /// Replaces the policy; sources of classes it no longer declares lose for good, queues are trimmed to
    /// the new limits, and every zone is re-arbitrated.
    public mutating func setPolicy(_ policy: Policy, at now: Instant) -> [Effect<Instant>] {
        handle(.policy(policy), at: now)
    }

    // MARK: Status

    /// The state of `source`, or `nil` if the arbiter does not know it (never requested, or finished).
    public func state(of source: SourceID) -> SourceState? { core.state(of: source) }

    /// The duck stage of `source` in `zone` as last sent to the daemon: 0 dB when not ducked or unknown.
    /// Independent of the user's volume, which the arbiter never changes.
    public func duckGain(of source: SourceID, in zone: ZoneID) -> Decibels { core.duckGain(of: source, in: zone) }

    /// Whether `source` is muted in `zone` as last sent to the daemon.
    public func isMuted(_ source: SourceID, in zone: ZoneID) -> Bool { core.isMuted(source, in: zone) }

    /// A snapshot of `source`, or `nil` if unknown.
    public func status(of source: SourceID) -> SourceStatus? { core.status(of: source) }

    /// What the end of `source`'s interruption at `now` would decide, by the same rules as
    /// ``Effect/Action/interruptionEnded(_:shouldResume:)`` (`resume-within` included), changing
    /// nothing: whether it would resume, and for how much longer that holds (what remains of its
    /// class's `resume-within`; `nil`: no limit). `nil` when it is not interrupted, or unknown.
    /// `now` must not be before the last input's instant.
    public func wouldResume(_ source: SourceID, at now: Instant) -> (resume: Bool, within: Duration?)? {
        guard let epoch else { return nil }
        return core.wouldResume(source, at: Moment(epoch.duration(to: now)))
    }

    /// How much longer `source`, queued (not granted yet), may wait before it expires at `now`:
    /// its ttl less the time it has waited (`.zero` once past it), and `nil` inside when it has no
    /// ttl. `nil` when it is granted or unknown. A pure read; `now` must not be before the last
    /// input's instant.
    public func remainingWait(of source: SourceID, at now: Instant) -> Duration?? {
        guard let epoch, let i = core.index(of: source), !core.records[i].granted else { return nil }
        guard let ttl = core.records[i].ttl else { return .some(nil) }
        let waited = core.records[i].requestedAt.duration(to: Moment(epoch.duration(to: now)))
        return .some(max(.zero, ttl - waited))
    }

    /// Whether the user's pause is on `source` (`pause` given, no `play` since). For a queued
    /// source its state reads `queued`, and this is the pause it will be granted with. `false` when
    /// unknown. A pure read.
    public func isPaused(_ source: SourceID) -> Bool {
        guard let i = core.index(of: source) else { return false }
        return core.records[i].paused
    }

    /// Every known source (granted or queued), in arrival order.
    public var sourceIDs: [SourceID] { core.records.map(\.id) }

    /// Snapshots of every known source, in arrival order.
    public var sources: [SourceStatus] { core.sources }

    /// Every zone named by a known source, sorted.
    public var zones: [ZoneID] { core.zones }

    /// A snapshot of `zone`: who holds it, who is ducked or silenced there and why, who waits.
    public func status(of zone: ZoneID) -> ZoneStatus { core.status(of: zone) }

    static func convert(_ action: Effect<Moment>.Action, epoch: Instant) -> Effect<Instant>.Action {
        switch action {
        case .granted(let s, let zones): .granted(s, zones: zones)
        case .queued(let s): .queued(s)
        case .rejected(let s): .rejected(s)
        case .coalesced(let s, let into): .coalesced(s, into: into)
        case .expired(let s): .expired(s)
        case .lostForGood(let s): .lostForGood(s)
        case .finished(let s): .finished(s)
        case .interruptionBegan(let s, let zones): .interruptionBegan(s, zones: zones)
        case .interruptionEnded(let s, let resume): .interruptionEnded(s, shouldResume: resume)
        case .duckBegan(let s, let zone, let level, let attack): .duckBegan(s, zone: zone, level: level, attack: attack)
        case .duckEnded(let s, let zone, let release): .duckEnded(s, zone: zone, release: release)
        case .muted(let s, let zone): .muted(s, zone: zone)
        case .unmuted(let s, let zone): .unmuted(s, zone: zone)
        case .scheduleTimer(let at): .scheduleTimer(at: epoch.advanced(by: at.offset))
        }
    }
}
