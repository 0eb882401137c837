import Arbiter
import BatonConfig

extension Policy {
    /// The arbiter's policy from the config file's `policy:` section.
    init(_ config: PolicyConfig) {
        var classes: [SourceClass: ClassPolicy] = [:]
        let duck = DuckPolicy(level: Decibels(config.duck.level), attack: config.duck.attack, release: config.duck.release)
        for c in config.classes {
            classes[SourceClass(c.name)] = ClassPolicy(
                priority: c.priority,
                kind: RequestKind(rawValue: c.kind.rawValue) ?? .transient,
                lower: LowerAction(rawValue: c.lower.rawValue) ?? .interrupt,
                same: SameAction(rawValue: c.same.rawValue) ?? .queue,
                duringHigher: DuringHigherAction(rawValue: c.duringHigher.rawValue) ?? .queue,
                resumeWithin: c.resumeWithin, coalesceWindow: c.coalesce, ttl: c.ttl, queueLimit: c.queueLimit,
                duck: nil)
        }
        self.init(classes: classes, duck: duck)
    }
}
