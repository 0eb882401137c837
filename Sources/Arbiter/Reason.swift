/// A source as named in a reason: who it is, its class and priority, and its kind.
public struct Contender: Hashable, Sendable, CustomStringConvertible {
    /// The source.
    public var source: SourceID
    /// Its class.
    public var sourceClass: SourceClass
    /// Its class's priority when the decision was made.
    public var priority: Int
    /// Transient or permanent.
    public var kind: RequestKind

    /// Creates a contender.
    public init(source: SourceID, sourceClass: SourceClass, priority: Int, kind: RequestKind) {
        self.source = source
        self.sourceClass = sourceClass
        self.priority = priority
        self.kind = kind
    }

    public var description: String { "\(source) (\(sourceClass), priority \(priority), \(kind))" }
}

/// Why the arbiter emitted an effect: which rule decided, between which classes and priorities.
public enum Reason: Hashable, Sendable, CustomStringConvertible {
    /// Granted at once; it outranks these lower-priority sources in its zones (empty: the zones were free).
    case outranks([Contender])
    /// Granted after waiting this long in the queue.
    case waited(Duration)
    /// Queued behind a request of equal priority (`same: queue`), first in first out.
    case queuedBehind(Contender)
    /// Queued because a higher-priority source interrupts it in every zone (`during-higher: queue`).
    case delayedBy(Contender)
    /// Rejected: an equal-priority source holds or waits for the zones (`same: reject`).
    case sameRejects(Contender)
    /// Rejected: a higher-priority source interrupts it in every zone (`during-higher: reject`).
    case higherRejects(Contender)
    /// Rejected: the class's queue already holds `limit` requests (`queue-limit`).
    case queueFull(limit: Int)
    /// Rejected: the policy declares no such class.
    case unknownClass(SourceClass)
    /// Rejected: the request named no zone.
    case noZones
    /// Coalesced: the same key was accepted less than `window` ago (`coalesce`).
    case coalesceWindow(key: String, window: Duration)
    /// Expired: it waited longer than the class's `ttl`.
    case ttlElapsed(Duration)
    /// Lost for good: a newer request of equal priority replaced it (`same: replace`).
    case replacedBy(Contender)
    /// Lost for good: the new policy no longer declares its class.
    case classRemoved(SourceClass)
    /// Muted in a zone, or interrupted: this higher-priority source's class interrupts lower ones.
    case interruptedBy(Contender)
    /// Ducked: this higher-priority source's class ducks lower ones.
    case duckedBy(Contender)
    /// Unmuted or unducked: nothing of higher priority silences or ducks it there any more.
    case restored
    /// `interruptionEnded(shouldResume: true)`: every rule for resuming held; the interruption lasted this long.
    case interruptionOver(lasted: Duration)
    /// `shouldResume: false`: the source was not audibly playing when the interruption began.
    case notPlayingWhenBegan
    /// `shouldResume: false`: a permanent source took over during the interruption.
    case permanentTakeover(Contender)
    /// The user acted on the source during the interruption: the last play or pause they gave decides
    /// (`play`: `shouldResume: true`; `pause`: false); else a seek or change gives `shouldResume: false`.
    case userCommand(UserCommand)
    /// `shouldResume: false`: the interruption outlasted the class's `resume-within`.
    case resumeWindowExceeded(lasted: Duration, limit: Duration)
    /// Finished: the source released its request.
    case released
    /// Finished: the user stopped it.
    case userStopped
    /// Finished: the source vanished.
    case vanished
    /// Finished: the same source asked again; the old request ends before the new one is decided.
    case superseded
    /// A timer is needed for the earliest queue expiry.
    case nextExpiry

    public var description: String {
        switch self {
        case .outranks(let lower):
            lower.isEmpty ? "zones free" : "outranks " + lower.map(\.description).joined(separator: ", ")
        case .waited(let d): "granted after waiting \(d)"
        case .queuedBehind(let c): "same priority, queued behind \(c)"
        case .delayedBy(let c): "during higher priority \(c), delayed"
        case .sameRejects(let c): "same priority as \(c), class rejects"
        case .higherRejects(let c): "during higher priority \(c), class rejects"
        case .queueFull(let limit): "queue full (\(limit))"
        case .unknownClass(let c): "unknown class \(c)"
        case .noZones: "no zones"
        case .coalesceWindow(let key, let window): "same key \(key) within \(window)"
        case .ttlElapsed(let ttl): "waited longer than ttl \(ttl)"
        case .replacedBy(let c): "replaced by \(c)"
        case .classRemoved(let c): "class \(c) removed from policy"
        case .interruptedBy(let c): "interrupted by \(c)"
        case .duckedBy(let c): "ducked by \(c)"
        case .restored: "nothing higher remains"
        case .interruptionOver(let d): "interruption over after \(d)"
        case .notPlayingWhenBegan: "was not playing when interrupted"
        case .permanentTakeover(let c): "permanent takeover by \(c)"
        case .userCommand(let cmd): "user command \(cmd) during interruption"
        case .resumeWindowExceeded(let lasted, let limit): "interrupted \(lasted), longer than resume-within \(limit)"
        case .released: "released"
        case .userStopped: "stopped by user"
        case .vanished: "source vanished"
        case .superseded: "superseded by a new request from the same source"
        case .nextExpiry: "next queue expiry"
        }
    }
}
