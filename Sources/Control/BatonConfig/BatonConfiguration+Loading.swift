import AudioCore
import YAML

extension BatonConfiguration {
    /// Reads and checks the configuration file at `path`.
    ///
    /// Relative paths inside it (`sounds`, `alsa-config`, `output-dir`, `state-dir`, `boards-dir`,
    /// `api.token-file`, the `music.subsonic` files and the `mqtt` files) are resolved against the directory that
    /// contains `path`. Board profiles named by `board:` are read from the boards directory.
    ///
    /// With `checkingFiles`, the files a start of batond opens are checked as well, each problem an
    /// issue at its key: `api.token-file` readable with a token on its first line, `alsa-config`
    /// readable, `output-dir` a directory or one that can be made. batond's start, `--check` and
    /// reload check them, so that what `--check` and a reload accept also starts.
    ///
    /// Thread safety: any thread; no shared state.
    /// - Throws: ``ConfigError`` with every problem found, each naming `path`, line, column and key
    ///   path; or a single issue if the file cannot be read or is not valid YAML.
    public static func load(path: String, checkingFiles: Bool = false) throws(ConfigError) -> BatonConfiguration {
        switch FileReader.read(path: path) {
        case .success(let bytes):
            return try parse(
                utf8: bytes, file: path, baseDirectory: directory(of: path), checkingFiles: checkingFiles)
        case .failure(let error):
            throw ConfigError(issues: [
                ConfigIssue(
                    file: path, line: nil, column: nil, path: "",
                    message: "cannot read the file: \(error.message)")
            ])
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
        -> BatonConfiguration
    {
        try parse(utf8: Array(text.utf8), file: file, baseDirectory: baseDirectory ?? directory(of: file))
    }

    private static func parse(
        utf8 bytes: [UInt8], file: String, baseDirectory: String, checkingFiles: Bool = false
    ) throws(ConfigError) -> BatonConfiguration {
        let root = try document(
            utf8: bytes, file: file,
            emptyMessage: "the configuration is empty; at least one zone is required")
        var reader = ConfigReader(file: file)
        reader.checksFiles = checkingFiles
        let read = reader.configuration(root, baseDirectory: baseDirectory)
        guard var configuration = read, reader.issues.isEmpty else { throw ConfigError(issues: reader.shownIssues) }
        configuration.loadWarnings = ConfigReader.sorted(reader.warnings, file: file)
        return configuration
    }

    /// The YAML document in the file at `path`, not null.
    static func document(at path: String, emptyMessage: String) throws(ConfigError) -> YAMLNode {
        switch FileReader.read(path: path) {
        case .success(let bytes):
            return try document(utf8: bytes, file: path, emptyMessage: emptyMessage)
        case .failure(let error):
            throw ConfigError(issues: [
                ConfigIssue(
                    file: path, line: nil, column: nil, path: "",
                    message: "cannot read the file: \(error.message)")
            ])
        }
    }

    /// The YAML document in `bytes`, not null: a syntax error or an empty document is the one issue.
    static func document(utf8 bytes: [UInt8], file: String, emptyMessage: String) throws(ConfigError) -> YAMLNode {
        let root: YAMLNode?
        do {
            root = try YAMLParser.parse(utf8: bytes, file: file)
        } catch {
            throw ConfigError(issues: [
                ConfigIssue(
                    file: file, line: error.mark.line, column: error.mark.column,
                    path: error.path, message: error.message)
            ])
        }
        guard let root, !root.isNull else {
            throw ConfigError(issues: [ConfigIssue(file: file, line: nil, column: nil, path: "", message: emptyMessage)]
            )
        }
        return root
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
    static let topKeys = [
        "api", "zones", "groups", "board", "boards-dir", "sounds", "resampler", "alsa-config",
        "output-dir", "state-dir", "policy", "music", "device", "mqtt", "gpio", "intercom", "speech",
        "announce",
        "external-sources",
        "silence-alarm",
    ]
    static let apiKeys = ["listen", "max-body", "token-file", "allowed-hosts", "connections-per-client"]
    static let resamplerKeys = ["music", "announcements"]
    static let policyKeys = ["classes", "duck"]
    static let classKeys = [
        "priority", "kind", "lower", "same", "during-higher", "resume-within", "coalesce",
        "ttl", "queue-limit",
    ]
    static let duckKeys = ["level", "attack", "release"]

    /// The most issues an error lists: a hostile file (a mapping of a million unknown keys) made
    /// as many lines, each at a reload in the log, the event and the API's answer.
    static let issueLimit = 50

    /// The first ``issueLimit`` of ``sortedIssues``, then one saying how many more there are.
    var shownIssues: [ConfigIssue] {
        let sorted = sortedIssues
        guard sorted.count > Self.issueLimit else { return sorted }
        let more = ConfigIssue(
            file: file, line: nil, column: nil, path: "",
            message: "and \(sorted.count - Self.issueLimit) more problems, not shown (fix these first)")
        return Array(sorted.prefix(Self.issueLimit)) + [more]
    }

    /// The issues sorted by position, the configuration file's own first (a board profile's follow).
    var sortedIssues: [ConfigIssue] { Self.sorted(issues, file: file) }

    /// `issues` sorted by position, those in `file` first (a board profile's follow).
    static func sorted(_ issues: [ConfigIssue], file: String) -> [ConfigIssue] {
        issues.enumerated().sorted { a, b in
            let left = (a.element.file == file ? 0 : 1, a.element.line ?? 0, a.element.column ?? 0, a.offset)
            let right = (b.element.file == file ? 0 : 1, b.element.line ?? 0, b.element.column ?? 0, b.offset)
            return left < right
        }.map(\.element)
    }

    /// The whole file. `nil` only if the top level is not a mapping; other problems are reported
    /// and a configuration with defaults in their place is returned (and then discarded).
    mutating func configuration(_ root: YAMLNode, baseDirectory: String) -> BatonConfiguration? {
        guard root.mapping != nil else {
            report(root.mark, .root, "expected a mapping at the top level, found \(root.kindDescription)")
            return nil
        }
        guard let top = fields(of: root, at: .root, anchor: root.mark, allowed: Self.topKeys) else { return nil }
        let resolve = { (path: String) in BatonConfiguration.resolve(path, against: baseDirectory) }

        let api = top.values["api"].map { readAPI($0, baseDirectory: baseDirectory) } ?? APIConfig.default
        boards.configured = optional(top, "boards-dir", .string).map(resolve)
        boards.searchList = BoardProfile.searchDirectories(configDirectory: baseDirectory)
        boards.topLevelWritten = top.values["board"] != nil
        let board = optional(top, "board", .name("board", why: "it names a file in the boards directory"))
        if let board {
            _ = boardProfile(
                named: board, at: top.values["board"]?.value.mark, ConfigPath.root.appending("board"),
                report: true)
        }
        let (zones, zoneNames) = zones(in: top, board: board)
        let groups = groups(in: top, zoneNames: zoneNames)
        let sounds = optional(top, "sounds", .string) ?? "sounds"
        let resampler = top.values["resampler"].map { readResamplers($0) } ?? ResamplerConfig.default
        let alsaConfig = optional(top, "alsa-config", .string).map(resolve)
        if let alsaConfig, let pair = top.values["alsa-config"] {
            checkReadable(alsaConfig, at: pair, ConfigPath.root.appending("alsa-config"))
        }
        let outputDir = optional(top, "output-dir", .string).map(resolve)
        if let outputDir, let pair = top.values["output-dir"] {
            checkOutputDirectory(outputDir, at: pair, ConfigPath.root.appending("output-dir"))
        }
        let stateDir = optional(top, "state-dir", .string)
        let policy = top.values["policy"].map { readPolicy($0) } ?? PolicyConfig.default
        let music = top.values["music"].map {
            readMusic($0, zoneNames: zoneNames, groupNames: groups.map(\.name), baseDirectory: baseDirectory)
        }
        let device = value(top, "device", .deviceName, default: "baton") ?? "baton"
        let mqtt = top.values["mqtt"].map { readMQTT($0, baseDirectory: baseDirectory) }
        let speech = top.values["speech"].map { readSpeech($0) } ?? SpeechConfig.default
        let announce = top.values["announce"].map { readAnnounceSection($0) } ?? AnnounceConfig.default
        let gpio =
            top.values["gpio"].map {
                readGPIO($0, zoneNames: zoneNames, groupNames: groups.map(\.name), speech: speech)
            } ?? []
        let intercom = top.values["intercom"].map {
            readIntercom($0, zoneNames: zoneNames, groupNames: groups.map(\.name))
        }
        let externalSources = top.values["external-sources"].map {
            readExternalSources(
                $0, zoneNames: zoneNames, groupNames: groups.map(\.name), classNames: policy.classes.map(\.name),
                baseDirectory: baseDirectory)
        }
        let silenceAlarm =
            value(
                top, "silence-alarm", .duration(BatonConfiguration.silenceAlarmRange),
                default: BatonConfiguration.defaultSilenceAlarm) ?? BatonConfiguration.defaultSilenceAlarm

        return BatonConfiguration(
            api: api, zones: zones, sounds: resolve(sounds), resampler: resampler,
            alsaConfig: alsaConfig, outputDir: outputDir, policy: policy,
            groups: groups, music: music ?? nil, stateDir: stateDir.map(resolve), board: board,
            boardsDir: boards.configured ?? boards.directory ?? nil, device: device, mqtt: mqtt ?? nil, gpio: gpio,
            intercom: intercom ?? nil, speech: speech, announce: announce, externalSources: externalSources ?? nil,
            silenceAlarm: silenceAlarm)
    }

    mutating func readAPI(_ pair: YAMLPair, baseDirectory: String) -> APIConfig {
        guard
            let api = fields(
                of: pair.value, at: ConfigPath.root.appending("api"), anchor: pair.keyMark,
                allowed: Self.apiKeys)
        else { return .default }
        let listen = value(api, "listen", .listenAddress, default: .default)
        let tokenFile = optional(api, "token-file", .string).map {
            BatonConfiguration.resolve($0, against: baseDirectory)
        }
        if let tokenFile, let pair = api.values["token-file"] {
            checkTokenFile(tokenFile, at: pair, api.path.appending("token-file"))
        }
        let configuration = APIConfig(
            listen: listen ?? .default,
            maxBody: value(api, "max-body", .byteSize(APIConfig.maxBodyRange), default: 64 * 1024) ?? 0,
            tokenFile: tokenFile,
            allowedHosts: api.values["allowed-hosts"].map { allowedHosts($0, at: api.path.appending("allowed-hosts")) }
                ?? [],
            connectionsPerClient: value(
                api, "connections-per-client", .integer(APIConfig.connectionsPerClientRange), default: 16) ?? 16)
        if let listen, !listen.isLoopback, tokenFile == nil, api.values["token-file"] == nil {
            report(
                api.anchor, api.path,
                "missing required key \"token-file\": api.listen \(listen) is not a loopback "
                    + "address, so clients must send a token (anyone who can reach it could otherwise control the speakers)"
            )
        } else if !configuration.allowedHosts.isEmpty, tokenFile == nil, api.values["token-file"] == nil {
            report(
                api.anchor, api.path,
                "missing required key \"token-file\": api.allowed-hosts names hosts the API is reached by "
                    + "(a reverse proxy's), so requests come from beyond this machine and clients must send a token "
                    + "(anyone who can reach the proxy could otherwise control the speakers)")
        }
        return configuration
    }

    /// `api.allowed-hosts`: host names or addresses (no port, no scheme), lowercased.
    mutating func allowedHosts(_ pair: YAMLPair, at path: ConfigPath) -> [String] {
        guard let nodes = items(of: pair, at: path) else { return [] }
        var names: [String] = []
        for node in nodes {
            guard let name = convert(node, at: path, .string) else { continue }
            let host = name.hasPrefix("[") && name.hasSuffix("]") ? String(name.dropFirst().dropLast()) : name
            if ListenAddress(parsing: host.contains(":") ? "[\(host)]:1" : "\(host):1") == nil {
                report(
                    node.mark, path,
                    "\(ConfigSyntax.quoted(name)) is not a host name or address (give a name like speaker.example.org or an address, without a port)"
                )
            } else {
                names.append(host.lowercased())
            }
        }
        return names
    }

    mutating func readResamplers(_ pair: YAMLPair) -> ResamplerConfig {
        guard
            let section = fields(
                of: pair.value, at: ConfigPath.root.appending("resampler"), anchor: pair.keyMark,
                allowed: Self.resamplerKeys)
        else { return .default }
        let kind = ValueKind<ResamplerKind>.choice(ResamplerKind.self, "resampler")
        return ResamplerConfig(
            music: value(section, "music", kind, default: .musicDefault) ?? .musicDefault,
            announcements: value(section, "announcements", kind, default: .announcementsDefault)
                ?? .announcementsDefault)
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
                    report(
                        entry.value["priority"]?.mark, classesPath.appending(entry.key).appending("priority"),
                        "priority \(audioClass.priority) is already used by class \(ConfigSyntax.quoted(owner))")
                } else {
                    owners[audioClass.priority] = audioClass.name
                }
            }
        }
        // batond itself asks for music, announcement and call (music, announcements from the API,
        // buttons and MQTT, intercom calls): one the section leaves out is kept at its default, as
        // long as no class given has its priority. Without it the file loaded and every doorbell
        // (or call, or music) was refused at runtime, "unknown class"; refusing such a file at load
        // instead stopped speakers whose file had loaded for years (exit 1: systemd does not
        // restart it). With a priority taken it stays out, as before.
        if policy.values["classes"] != nil && !classes.isEmpty {
            for builtIn in PolicyConfig.defaultClasses where !classes.contains(where: { $0.name == builtIn.name }) {
                if !classes.contains(where: { $0.priority == builtIn.priority }) { classes.append(builtIn) }
            }
        }
        var duck = DuckConfig.default
        if let duckPair = policy.values["duck"],
            let section = fields(
                of: duckPair.value, at: path.appending("duck"), anchor: duckPair.keyMark,
                allowed: Self.duckKeys)
        {
            duck = DuckConfig(
                level: value(section, "level", .decibels(DuckConfig.levelRange), default: duck.level) ?? duck.level,
                attack: value(section, "attack", .duration(DuckConfig.rampRange), default: duck.attack) ?? duck.attack,
                release: value(section, "release", .duration(DuckConfig.rampRange), default: duck.release)
                    ?? duck.release)
        }
        return PolicyConfig(classes: classes, duck: duck)
    }

    /// One class, and whether its priority was read (not defaulted after an error); `nil` only if
    /// it is not a mapping. Classes with other problems come back with defaults in their place.
    mutating func audioClass(_ pair: YAMLPair, at path: ConfigPath) -> (ClassConfig, priorityIsValid: Bool)? {
        if !ZoneConfig.isValidName(pair.key) {
            report(pair.keyMark, path, "class name \(ConfigSyntax.quoted(pair.key)) must match [a-z0-9_-]+")
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
            lower: value(entry, "lower", .choice(ClassConfig.LowerAction.self, "action"), default: defaults.lower)
                ?? defaults.lower,
            same: value(entry, "same", .choice(ClassConfig.SameAction.self, "action"), default: defaults.same)
                ?? defaults.same,
            duringHigher: value(
                entry, "during-higher", .choice(ClassConfig.HigherAction.self, "action"),
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
    case fixed(ResamplerKind)

    static var allCases: [ZoneResampler] { [.auto] + ResamplerKind.allCases.map { .fixed($0) } }

    init?(rawValue: String) {
        if rawValue == "auto" {
            self = .auto
        } else if let resampler = ResamplerKind(rawValue: rawValue) {
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

    var resampler: ResamplerKind? {
        if case .fixed(let resampler) = self { return resampler }
        return nil
    }
}
