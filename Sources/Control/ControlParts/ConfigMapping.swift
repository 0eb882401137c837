import ALSA
import Arbiter
import BatonConfig
import Engine
import Players

// The one mapping from the configuration's types to the mechanism's. Every switch is exhaustive: a
// case added on either side stops the build here instead of silently becoming a default.

extension Policy {
    /// The arbiter's policy from the config file's `policy:` section.
    package init(_ config: PolicyConfig) {
        var classes: [SourceClass: ClassPolicy] = [:]
        let duck = DuckPolicy(
            level: Decibels(config.duck.level), attack: config.duck.attack, release: config.duck.release)
        for c in config.classes {
            classes[SourceClass(c.name)] = ClassPolicy(
                priority: c.priority, kind: RequestKind(c.kind), lower: LowerAction(c.lower), same: SameAction(c.same),
                duringHigher: DuringHigherAction(c.duringHigher), resumeWithin: c.resumeWithin,
                coalesceWindow: c.coalesce,
                ttl: c.ttl, queueLimit: c.queueLimit, duck: nil)
        }
        self.init(classes: classes, duck: duck)
    }
}

extension RequestKind {
    package init(_ kind: ClassConfig.Kind) {
        switch kind {
        case .transient: self = .transient
        case .permanent: self = .permanent
        }
    }
}

extension LowerAction {
    package init(_ action: ClassConfig.LowerAction) {
        switch action {
        case .interrupt: self = .interrupt
        case .duck: self = .duck
        case .mix: self = .mix
        }
    }
}

extension SameAction {
    package init(_ action: ClassConfig.SameAction) {
        switch action {
        case .queue: self = .queue
        case .replace: self = .replace
        case .mix: self = .mix
        case .reject: self = .reject
        }
    }
}

extension DuringHigherAction {
    package init(_ action: ClassConfig.HigherAction) {
        switch action {
        case .queue: self = .queue
        case .reject: self = .reject
        }
    }
}

extension SampleFormat {
    package init(_ format: ZoneConfig.SampleFormat) {
        switch format {
        case .s16LE: self = .s16LE
        case .s32LE: self = .s32LE
        }
    }
}

extension ZoneClock {
    package init(_ clock: ZoneConfig.Clock) {
        switch clock {
        case .device: self = .device
        case .system: self = .system
        }
    }
}

extension ExternalPlayer.WhenInterrupted {
    package init(_ config: ExternalSourceConfig.WhenInterrupted) {
        switch config {
        case .drop: self = .drop
        case .pause: self = .pause
        case .hold: self = .hold
        }
    }
}
