/// A gain in decibels. 0 dB is unity gain; negative values attenuate.
public struct Decibels: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The gain in dB.
    public var value: Double

    /// Creates a gain of `value` dB.
    public init(_ value: Double) { self.value = value }

    /// Unity gain: the duck stage does nothing.
    public static let unity = Decibels(0)

    public static func < (lhs: Decibels, rhs: Decibels) -> Bool { lhs.value < rhs.value }

    public var description: String { "\(value) dB" }
}

/// Whether a request is a short interruption or a takeover.
public enum RequestKind: String, Hashable, Sendable, CaseIterable {
    /// Ends by itself (announcement, call): whoever it interrupts may resume afterwards.
    case transient
    /// Started by a user to stay (music): whoever it interrupts is not told to resume.
    case permanent
}

/// What a class does to sources of lower priority in the zones it plays in.
public enum LowerAction: String, Hashable, Sendable, CaseIterable {
    /// The lower source is silenced (muted in that zone; told `interruptionBegan` when heard nowhere).
    case interrupt
    /// The lower source keeps playing, attenuated by the duck gain stage.
    case duck
    /// Both play at full level.
    case mix
}

/// What a class does when a request of the same priority arrives while another holds or waits for the zone.
/// The rule of the *arriving* request's class applies.
public enum SameAction: String, Hashable, Sendable, CaseIterable {
    /// The new request waits, first in first out.
    case queue
    /// The newest wins; the old one is told it lost for good.
    case replace
    /// Both play.
    case mix
    /// The new request is refused.
    case reject
}

/// What a class does when it is requested while a higher-priority source interrupts it in every zone it names.
public enum DuringHigherAction: String, Hashable, Sendable, CaseIterable {
    /// The request waits and is granted when a zone is free (like Android's delayed focus).
    case queue
    /// The request is refused.
    case reject
}

/// How a ducked source is attenuated: its own gain stage, apart from the user's volume.
public struct DuckPolicy: Hashable, Sendable {
    /// The gain applied to the ducked source, e.g. -15 dB.
    public var level: Decibels
    /// How long the ramp down to `level` takes.
    public var attack: Duration
    /// How long the ramp back to 0 dB takes.
    public var release: Duration

    /// Creates a duck policy.
    public init(level: Decibels, attack: Duration, release: Duration) {
        self.level = level
        self.attack = attack
        self.release = release
    }

    /// -15 dB, 50 ms attack, 300 ms release.
    public static let `default` = DuckPolicy(
        level: Decibels(-15), attack: .milliseconds(50), release: .milliseconds(300))
}

/// The rules of one class of sources.
public struct ClassPolicy: Hashable, Sendable {
    /// Higher wins. Classes of equal priority follow ``same``.
    public var priority: Int
    /// The kind a request of this class has unless it says otherwise.
    public var kind: RequestKind
    /// What this class does to lower-priority sources.
    public var lower: LowerAction
    /// What a new request of this class does when one of the same priority holds or waits for its zones.
    public var same: SameAction
    /// What a new request of this class does when higher-priority sources interrupt it in all its zones.
    public var duringHigher: DuringHigherAction
    /// A source of this class interrupted for longer than this is told `shouldResume: false`.
    /// `nil` means no limit.
    public var resumeWithin: Duration?
    /// A request with the same coalesce key within this time of the last accepted one is merged into it.
    /// `nil` disables coalescing.
    public var coalesceWindow: Duration?
    /// A request of this class waiting in the queue longer than this expires. `nil` means never.
    public var ttl: Duration?
    /// At most this many requests of this class wait in the queue; more are rejected. `nil` means unbounded.
    public var queueLimit: Int?
    /// The duck used when this class ducks lower sources; `nil` uses the policy's ``Policy/duck``.
    public var duck: DuckPolicy?

    /// Creates the rules of a class. Defaults describe a transient class that interrupts lower ones,
    /// queues its equals, waits behind higher ones and never coalesces or expires.
    public init(
        priority: Int, kind: RequestKind = .transient, lower: LowerAction = .interrupt,
        same: SameAction = .queue, duringHigher: DuringHigherAction = .queue,
        resumeWithin: Duration? = nil, coalesceWindow: Duration? = nil, ttl: Duration? = nil,
        queueLimit: Int? = nil, duck: DuckPolicy? = nil
    ) {
        self.priority = priority
        self.kind = kind
        self.lower = lower
        self.same = same
        self.duringHigher = duringHigher
        self.resumeWithin = resumeWithin
        self.coalesceWindow = coalesceWindow
        self.ttl = ttl
        self.queueLimit = queueLimit
        self.duck = duck
    }
}

/// The whole arbitration policy: the classes and the default duck.
///
/// A value; the configuration parses into it and hands it to ``Arbiter/init(policy:)`` or
/// ``Arbiter/setPolicy(_:at:)``.
public struct Policy: Hashable, Sendable {
    /// The rules per class.
    public var classes: [SourceClass: ClassPolicy]
    /// The duck used by classes that duck and name none of their own.
    public var duck: DuckPolicy

    /// Creates a policy.
    public init(classes: [SourceClass: ClassPolicy], duck: DuckPolicy = .default) {
        self.classes = classes
        self.duck = duck
    }

    /// The rules of `sourceClass`, or `nil` if the policy does not declare it.
    public subscript(_ sourceClass: SourceClass) -> ClassPolicy? { classes[sourceClass] }

    /// Baton's defaults, the same as the daemon's (`PolicyConfig.defaultClasses`, the shipped
    /// `config/baton.yaml`) and docs/ARBITER.md's:
    ///
    /// | class        | priority | kind      | lower     | same    | during higher | resume within | coalesce | ttl | queue |
    /// |--------------|----------|-----------|-----------|---------|---------------|---------------|----------|-----|-------|
    /// | music        | 10       | permanent | interrupt | replace | queue         | 5 min         | –        | –   | –     |
    /// | announcement | 50       | transient | interrupt | queue   | queue         | –             | 3 s      | 30 s| 16    |
    /// | call         | 90       | transient | interrupt | reject  | reject        | –             | –        | –   | –     |
    ///
    /// Duck (for classes set to `duck`): -15 dB, 50 ms attack, 300 ms release.
    public static let `default` = Policy(
        classes: [
            .music: ClassPolicy(
                priority: 10, kind: .permanent, lower: .interrupt, same: .replace, duringHigher: .queue,
                resumeWithin: .seconds(300)),
            .announcement: ClassPolicy(
                priority: 50, kind: .transient, lower: .interrupt, same: .queue,
                duringHigher: .queue, coalesceWindow: .seconds(3), ttl: .seconds(30), queueLimit: 16),
            .call: ClassPolicy(priority: 90, kind: .transient, lower: .interrupt, same: .reject, duringHigher: .reject),
        ], duck: .default)
}
