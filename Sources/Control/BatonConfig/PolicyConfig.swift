/// The arbitration policy (`policy:` in the file): audio classes and ducking.
///
/// Plain data: the daemon maps it to the arbiter's own types, so this module does not depend on
/// the arbiter.
public struct PolicyConfig: Sendable, Equatable {
    /// The classes, in file order. Names are unique and so are priorities.
    public var classes: [ClassConfig]
    /// How ducking sounds.
    public var duck: DuckConfig

    /// Creates a policy.
    public init(classes: [ClassConfig] = PolicyConfig.defaultClasses, duck: DuckConfig = .default) {
        self.classes = classes
        self.duck = duck
    }

    /// The class named `name`, if there is one.
    public func `class`(named name: String) -> ClassConfig? {
        classes.first { $0.name == name }
    }

    /// `music`, `announcement` and `call`, as in the shipped `config/baton.yaml`.
    public static let defaultClasses: [ClassConfig] = [
        ClassConfig(name: "music", priority: 10, kind: .permanent, same: .replace, resumeWithin: .seconds(300)),
        ClassConfig(
            name: "announcement", priority: 50, kind: .transient, lower: .interrupt, same: .queue,
            duringHigher: .queue, coalesce: .seconds(3), ttl: .seconds(30), queueLimit: 16),
        ClassConfig(
            name: "call", priority: 90, kind: .transient, lower: .interrupt, same: .reject,
            duringHigher: .reject),
    ]

    /// The policy used when the file has no `policy:` section.
    public static let `default` = PolicyConfig()
}

/// One audio class: how its requests are arbitrated against others (`policy.classes.<name>:`).
public struct ClassConfig: Sendable, Equatable {
    /// How long a class holds the zone.
    public enum Kind: String, Sendable, Equatable, CaseIterable, Codable {
        /// Plays until done (announcements, calls).
        case transient
        /// Holds the zone until stopped (music); may resume after an interruption.
        case permanent
    }

    /// What happens to lower-priority audio when this class starts.
    public enum LowerAction: String, Sendable, Equatable, CaseIterable, Codable {
        /// It stops (and may resume afterwards).
        case interrupt
        /// It keeps playing, quieter.
        case duck
        /// It keeps playing at full level.
        case mix
    }

    /// What happens when a request arrives while the same class is playing.
    public enum SameAction: String, Sendable, Equatable, CaseIterable, Codable {
        case queue
        case replace
        case mix
        case reject
    }

    /// What happens when a request arrives while a higher-priority class is playing.
    public enum HigherAction: String, Sendable, Equatable, CaseIterable, Codable {
        case queue
        case reject
    }

    /// The class name: `[a-z0-9_-]+`.
    public var name: String
    /// Higher wins, 0...1000.
    public var priority: Int
    public var kind: Kind
    /// Default `interrupt`.
    public var lower: LowerAction
    /// Default `queue`.
    public var same: SameAction
    /// Default `queue`.
    public var duringHigher: HigherAction
    /// An interrupted permanent source resumes if the interruption ends within this time.
    public var resumeWithin: Duration?
    /// Equal requests within this window play once.
    public var coalesce: Duration?
    /// A queued request is dropped if it has waited this long.
    public var ttl: Duration?
    /// At most this many requests wait in the queue, 1...1024.
    public var queueLimit: Int?

    /// Creates a class; the defaults are those of the file format.
    public init(
        name: String, priority: Int, kind: Kind, lower: LowerAction = .interrupt, same: SameAction = .queue,
        duringHigher: HigherAction = .queue, resumeWithin: Duration? = nil, coalesce: Duration? = nil,
        ttl: Duration? = nil, queueLimit: Int? = nil
    ) {
        self.name = name
        self.priority = priority
        self.kind = kind
        self.lower = lower
        self.same = same
        self.duringHigher = duringHigher
        self.resumeWithin = resumeWithin
        self.coalesce = coalesce
        self.ttl = ttl
        self.queueLimit = queueLimit
    }

    /// The accepted priorities.
    public static let priorityRange = 0...1000
    /// The accepted queue limits.
    public static let queueLimitRange = 1...1024
    /// The accepted `resume-within`, `coalesce` and `ttl` values.
    public static let timeRange = Duration.zero...Duration.seconds(3600)
}

/// How ducked audio sounds (`policy.duck:`).
public struct DuckConfig: Sendable, Equatable {
    /// The gain applied to ducked audio, in dB, -96...0. Default -15 dB.
    public var level: Double
    /// How long the gain takes to fall. Default 50 ms.
    public var attack: Duration
    /// How long the gain takes to come back. Default 300 ms.
    public var release: Duration

    /// Creates duck settings.
    public init(level: Double = -15, attack: Duration = .milliseconds(50), release: Duration = .milliseconds(300)) {
        self.level = level
        self.attack = attack
        self.release = release
    }

    /// -15 dB, 50 ms attack, 300 ms release.
    public static let `default` = DuckConfig()

    /// The accepted levels in dB.
    public static let levelRange = -96.0...0.0
    /// The accepted attack and release times.
    public static let rampRange = Duration.zero...Duration.seconds(10)
}

extension BatonConfiguration {
    /// Everything batond says of a file it runs: the loader's warnings (``loadWarnings``, each
    /// `file:line:column: key: message`), then ``classWarnings``. batond logs them at start and at a
    /// reload, `--check` prints them, and the reload report lists them.
    public var warnings: [String] {
        loadWarnings.map(\.description) + classWarnings
    }

    /// The classes batond itself asks for (`music`, `announcement`, `call`) that the policy leaves
    /// out because a class of the file has their priority: one line each, saying what is refused
    /// for it ("unknown class"). The file loads (refusing it stopped speakers whose file had loaded
    /// for years), but every doorbell press, MQTT announcement or call was then refused at run time
    /// and nothing said why beforehand: batond logs these at start and at a reload, `--check`
    /// prints them, and the reload report lists them.
    public var classWarnings: [String] {
        PolicyConfig.defaultClasses.compactMap { builtIn in
            guard !policy.classes.contains(where: { $0.name == builtIn.name }),
                let taker = policy.classes.first(where: { $0.priority == builtIn.priority })
            else { return nil }
            var users: [String]
            switch builtIn.name {
            case "announcement":
                users = ["the API's announce"]
                if !gpio.isEmpty { users.append("the GPIO buttons") }
                if mqtt != nil { users.append("MQTT announcements") }
            case "call":
                users = ["the API's call/start"]
                if intercom != nil { users.append("the intercom's calls") }
            default:
                users = ["the API's music/play"]
                if music != nil { users.append("music from the server") }
            }
            let list = users.count == 1 ? users[0] : users.dropLast().joined(separator: ", ") + " and " + users.last!
            return "policy.classes: class \"\(builtIn.name)\" is left out (class \"\(taker.name)\" has its priority "
                + "\(builtIn.priority)): \(list) \(users.count == 1 ? "is" : "are") refused (\"unknown class\")"
        }
    }
}
