import YAML

extension BatonConfiguration {
    /// Reads and checks the configuration file at `path`.
    ///
    /// Relative paths inside it (`sounds`, `alsa-config`, `output-dir`) are resolved against the
    /// directory that contains `path`.
    ///
    /// Thread safety: any thread; no shared state.
    /// - Throws: ``ConfigError`` with every problem found, each naming `path`, line, column and key
    ///   path; or a single issue if the file cannot be read or is not valid YAML.
    public static func load(path: String) throws(ConfigError) -> BatonConfiguration {
        switch FileReader.read(path: path) {
        case .success(let bytes):
            return try parse(utf8: bytes, file: path, baseDirectory: directory(of: path))
        case .failure(let error):
            throw ConfigError(issues: [ConfigIssue(file: path, line: nil, column: nil, path: "",
                                                   message: "cannot read the file: \(error.message)")])
        }
    }

    /// Checks configuration text.
    ///
    /// - Parameters:
    ///   - text: the YAML source.
    ///   - file: the name used in messages (not opened).
    ///   - baseDirectory: the directory relative paths are resolved against; defaults to the
    ///     directory part of `file` (`""`, the current directory, when it has none).
    ///
    /// Thread safety: any thread; no shared state.
    /// - Throws: ``ConfigError`` with every problem found.
    public static func parse(text: String, file: String, baseDirectory: String? = nil) throws(ConfigError)
        -> BatonConfiguration {
        try parse(utf8: Array(text.utf8), file: file, baseDirectory: baseDirectory ?? directory(of: file))
    }

    private static func parse(utf8 bytes: [UInt8], file: String, baseDirectory: String) throws(ConfigError)
        -> BatonConfiguration {
        let root: YAMLNode?
        do {
            root = try YAMLParser.parse(utf8: bytes, file: file)
        } catch {
            throw ConfigError(issues: [ConfigIssue(file: file, line: error.mark.line, column: error.mark.column,
                                                   path: error.path, message: error.message)])
        }
        guard let root, !root.isNull else {
            throw ConfigError(issues: [ConfigIssue(file: file, line: nil, column: nil, path: "",
                                                   message: "the configuration is empty; at least one zone is required")])
        }
        var reader = ConfigReader(file: file)
        let configuration = reader.configuration(root, baseDirectory: baseDirectory)
        guard let configuration, reader.issues.isEmpty else {
            let sorted = reader.issues.enumerated().sorted { a, b in
                let left = (a.element.line ?? 0, a.element.column ?? 0, a.offset)
                let right = (b.element.line ?? 0, b.element.column ?? 0, b.offset)
                return left < right
            }.map(\.element)
            throw ConfigError(issues: sorted)
        }
        return configuration
    }

    /// `config` for `config/baton.yaml`, `/` for `/baton.yaml`, `""` for `baton.yaml`.
    static func directory(of file: String) -> String {
        guard let slash = file.lastIndex(of: "/") else { return "" }
        return slash == file.startIndex ? "/" : String(file[..<slash])
    }

    /// `path` if absolute, else `path` inside `directory`.
    static func resolve(_ path: String, against directory: String) -> String {
        if path.hasPrefix("/") || directory.isEmpty || directory == "." { return path }
        return directory.hasSuffix("/") ? directory + path : directory + "/" + path
    }
}

// MARK: - The schema

extension ConfigReader {
    static let topKeys = ["api", "zones", "sounds", "resampler", "alsa-config", "output-dir", "policy"]
    static let apiKeys = ["listen", "max-body"]
    static let zoneKeys = ["pcm", "rate", "channels", "format", "period", "buffer", "clock", "resampler"]
    static let resamplerKeys = ["music", "announcements"]
    static let policyKeys = ["classes", "duck"]
    static let classKeys = ["priority", "kind", "lower", "same", "during-higher", "resume-within", "coalesce",
                            "ttl", "queue-limit"]
    static let duckKeys = ["level", "attack", "release"]

    /// The whole file. `nil` only if the top level is not a mapping; other problems are reported
    /// and a configuration with defaults in their place is returned (and then discarded).
    mutating func configuration(_ root: YAMLNode, baseDirectory: String) -> BatonConfiguration? {
        guard root.mapping != nil else {
            report(root.mark, .root, "expected a mapping at the top level, found \(root.kindDescription)")
            return nil
        }
        guard let top = fields(of: root, at: .root, anchor: root.mark, allowed: Self.topKeys) else { return nil }

        let api = top.values["api"].map { readAPI($0) } ?? APIConfig.default
        let zones = zones(in: top)
        let sounds = optional(top, "sounds", .string) ?? "sounds"
        let resampler = top.values["resampler"].map { readResamplers($0) } ?? ResamplerConfig.default
        let alsaConfig = optional(top, "alsa-config", .string)
        let outputDir = optional(top, "output-dir", .string)
        let policy = top.values["policy"].map { readPolicy($0) } ?? PolicyConfig.default

        return BatonConfiguration(
            api: api, zones: zones,
            sounds: BatonConfiguration.resolve(sounds, against: baseDirectory),
            resampler: resampler,
            alsaConfig: alsaConfig.map { BatonConfiguration.resolve($0, against: baseDirectory) },
            outputDir: outputDir.map { BatonConfiguration.resolve($0, against: baseDirectory) },
            policy: policy)
    }

    mutating func readAPI(_ pair: YAMLPair) -> APIConfig {
        guard let api = fields(of: pair.value, at: ConfigPath.root.appending("api"), anchor: pair.keyMark,
                               allowed: Self.apiKeys) else { return .default }
        return APIConfig(listen: value(api, "listen", .listenAddress, default: .default) ?? .default,
                         maxBody: value(api, "max-body", .byteSize(APIConfig.maxBodyRange), default: 64 * 1024) ?? 0)
    }

    mutating func zones(in top: Fields) -> [ZoneConfig] {
        let path = ConfigPath.root.appending("zones")
        let entries: [YAMLPair]
        if let pair = top.values["zones"] {
            guard let named = namedEntries(of: pair.value, at: path) else { return [] }
            entries = named
            if entries.isEmpty { report(pair.value.mark, path, "at least one zone is required") }
        } else {
            let mark = top.nulls["zones"]?.value.mark ?? top.anchor
            report(mark, path, "at least one zone is required")
            entries = []
        }
        return entries.compactMap { zone($0, at: path.appending($0.key)) }
    }

    mutating func zone(_ pair: YAMLPair, at path: ConfigPath) -> ZoneConfig? {
        if !ZoneConfig.isValidName(pair.key) {
            report(pair.keyMark, path, "zone name \"\(pair.key)\" must match [a-z0-9_-]+ (it appears in URLs and MQTT topics)")
        }
        guard let zone = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.zoneKeys) else { return nil }
        let defaults = ZoneConfig(name: pair.key, pcm: "")
        let pcm = required(zone, "pcm", .string)
        let rate = value(zone, "rate", .integer(ZoneConfig.rateRange), default: defaults.rate)
        let channels = value(zone, "channels", .integer(ZoneConfig.channelRange), default: defaults.channels)
        let format = value(zone, "format", .choice(ZoneConfig.SampleFormat.self, "format"), default: defaults.format)
        let period = value(zone, "period", .duration(ZoneConfig.periodRange), default: defaults.period)
        let buffer = value(zone, "buffer", .duration(ZoneConfig.bufferRange), default: defaults.buffer)
        let clock = value(zone, "clock", .choice(ZoneConfig.Clock.self, "clock"), default: defaults.clock)
        let resampler = value(zone, "resampler", .choice(ZoneResampler.self, "resampler"), default: .auto)

        if let period, let buffer, buffer < period * 2 {
            let mark = zone.values["buffer"]?.value.mark ?? zone.values["period"]?.value.mark ?? zone.anchor
            let twice = ConfigSyntax.format(period * 2)
            let message = "\(ConfigSyntax.format(buffer)) is shorter than 2 periods (2 × \(ConfigSyntax.format(period)) = \(twice))"
            report(mark, path.appending("buffer"), message)
        }
        return ZoneConfig(name: pair.key, pcm: pcm ?? "", rate: rate ?? defaults.rate,
                          channels: channels ?? defaults.channels, format: format ?? defaults.format,
                          period: period ?? defaults.period, buffer: buffer ?? defaults.buffer,
                          clock: clock ?? defaults.clock, resampler: resampler?.resampler)
    }

    mutating func readResamplers(_ pair: YAMLPair) -> ResamplerConfig {
        guard let section = fields(of: pair.value, at: ConfigPath.root.appending("resampler"), anchor: pair.keyMark,
                                   allowed: Self.resamplerKeys) else { return .default }
        let kind = ValueKind<Resampler>.choice(Resampler.self, "resampler")
        return ResamplerConfig(music: value(section, "music", kind, default: .soxrHQ) ?? .soxrHQ,
                               announcements: value(section, "announcements", kind, default: .soxrHQ) ?? .soxrHQ)
    }

    mutating func readPolicy(_ pair: YAMLPair) -> PolicyConfig {
        let path = ConfigPath.root.appending("policy")
        guard let policy = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.policyKeys) else {
            return .default
        }
        var classes = PolicyConfig.defaultClasses
        if let classesPair = policy.values["classes"] {
            let classesPath = path.appending("classes")
            let entries = namedEntries(of: classesPair.value, at: classesPath) ?? []
            if entries.isEmpty, classesPair.value.mapping != nil || classesPair.value.isNull {
                report(classesPair.value.mark, classesPath, "at least one class is required")
            }
            var owners: [Int: String] = [:]
            classes = []
            for entry in entries {
                guard let (audioClass, priorityIsValid) = audioClass(entry, at: classesPath.appending(entry.key)) else {
                    continue
                }
                classes.append(audioClass)
                guard priorityIsValid else { continue }
                if let owner = owners[audioClass.priority] {
                    report(entry.value["priority"]?.mark, classesPath.appending(entry.key).appending("priority"),
                           "priority \(audioClass.priority) is already used by class \"\(owner)\"")
                } else {
                    owners[audioClass.priority] = audioClass.name
                }
            }
        }
        var duck = DuckConfig.default
        if let duckPair = policy.values["duck"],
           let section = fields(of: duckPair.value, at: path.appending("duck"), anchor: duckPair.keyMark,
                                allowed: Self.duckKeys) {
            duck = DuckConfig(
                level: value(section, "level", .decibels(DuckConfig.levelRange), default: duck.level) ?? duck.level,
                attack: value(section, "attack", .duration(DuckConfig.rampRange), default: duck.attack) ?? duck.attack,
                release: value(section, "release", .duration(DuckConfig.rampRange), default: duck.release) ?? duck.release)
        }
        return PolicyConfig(classes: classes, duck: duck)
    }

    /// One class, and whether its priority was read (not defaulted after an error); `nil` only if
    /// it is not a mapping. Classes with other problems come back with defaults in their place.
    mutating func audioClass(_ pair: YAMLPair, at path: ConfigPath) -> (ClassConfig, priorityIsValid: Bool)? {
        if !ZoneConfig.isValidName(pair.key) {
            report(pair.keyMark, path, "class name \"\(pair.key)\" must match [a-z0-9_-]+")
        }
        guard let entry = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.classKeys) else {
            return nil
        }
        let defaults = ClassConfig(name: pair.key, priority: 0, kind: .transient)
        let time = ValueKind<Duration>.duration(ClassConfig.timeRange)
        let priority = required(entry, "priority", .integer(ClassConfig.priorityRange))
        let audioClass = ClassConfig(
            name: pair.key,
            priority: priority ?? defaults.priority,
            kind: required(entry, "kind", .choice(ClassConfig.Kind.self, "kind")) ?? defaults.kind,
            lower: value(entry, "lower", .choice(ClassConfig.LowerAction.self, "action"), default: defaults.lower) ?? defaults.lower,
            same: value(entry, "same", .choice(ClassConfig.SameAction.self, "action"), default: defaults.same) ?? defaults.same,
            duringHigher: value(entry, "during-higher", .choice(ClassConfig.HigherAction.self, "action"),
                                default: defaults.duringHigher) ?? defaults.duringHigher,
            resumeWithin: optional(entry, "resume-within", time),
            coalesce: optional(entry, "coalesce", time),
            ttl: optional(entry, "ttl", time),
            queueLimit: optional(entry, "queue-limit", .integer(ClassConfig.queueLimitRange)))
        return (audioClass, priority != nil)
    }
}

/// A zone's `resampler:` value: `auto` or a resampler.
enum ZoneResampler: RawRepresentable, CaseIterable {
    case auto
    case fixed(Resampler)

    static var allCases: [ZoneResampler] { [.auto] + Resampler.allCases.map { .fixed($0) } }

    init?(rawValue: String) {
        if rawValue == "auto" {
            self = .auto
        } else if let resampler = Resampler(rawValue: rawValue) {
            self = .fixed(resampler)
        } else {
            return nil
        }
    }

    var rawValue: String {
        switch self {
        case .auto: "auto"
        case .fixed(let resampler): resampler.rawValue
        }
    }

    var resampler: Resampler? {
        if case .fixed(let resampler) = self { return resampler }
        return nil
    }
}
