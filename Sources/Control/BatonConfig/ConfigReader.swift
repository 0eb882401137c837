import YAML

/// A key path such as `zones.kitchen.period`, for messages.
struct ConfigPath: CustomStringConvertible {
    var components: [String] = []

    static let root = ConfigPath()

    func appending(_ key: String) -> ConfigPath {
        ConfigPath(components: components + [key])
    }

    /// A key that would not read as one (empty, or with a dot, a space or a quote in it) is quoted:
    /// `zones."".pcm`, `zones."living room"`. A long one is cut (`ConfigSyntax.shortened`): every
    /// issue under it repeats it.
    var description: String {
        components.map { whole in
            let key = ConfigSyntax.shortened(whole)
            return key.isEmpty || key.contains(where: { ". \"".contains($0) })
                ? "\"\(key.replacing("\"", with: "\\\""))\"" : key
        }.joined(separator: ".")
    }
}

/// How to read one kind of scalar value: its name for type errors and a conversion that either
/// succeeds or says what is wrong with the text.
struct ValueKind<Value> {
    /// "an integer", "a duration": completes "expected …, found a mapping".
    var name: String
    var convert: (String) -> Result<Value, ValueProblem>
}

/// Why a scalar's text is not a valid value; the message completes "path: …".
struct ValueProblem: Error {
    var message: String
}

/// The entries of one mapping in the file, after unknown keys were reported.
struct Fields {
    /// The mapping's key path.
    var path: ConfigPath
    /// Where to point when a required key is missing: the mapping's own key, or the top of the file.
    var anchor: Mark
    /// Known keys with non-null values.
    var values: [String: YAMLPair]
    /// Known keys written with a null value (`key:` alone), treated as absent except for required keys.
    var nulls: [String: YAMLPair]
}

/// Walks the YAML tree and collects every problem instead of stopping at the first.
struct ConfigReader {
    let file: String
    private(set) var issues: [ConfigIssue] = []
    /// What the file says that is taken another way than written, or not taken (a fractional
    /// keepalive, a `bus` beside `mpd`): the file still loads. Files that started before these
    /// were said must still start: batond exits 1 on an error, and systemd does not restart it.
    private(set) var warnings: [ConfigIssue] = []
    /// Board profiles looked up while reading zones (configuration files only).
    var boards = BoardLookup()
    /// Whether the files a start opens are checked too (`api.token-file`, `alsa-config`,
    /// `output-dir`): for `batond` (start, `--check`, reload), not for text parsed alone.
    var checksFiles = false

    init(file: String) { self.file = file }

    /// Records problems found in another file (a board profile), which keep their own file name.
    mutating func append(_ other: [ConfigIssue]) {
        issues += other
    }

    /// Records a problem.
    mutating func report(_ mark: Mark?, _ path: ConfigPath, _ message: String) {
        issues.append(
            ConfigIssue(
                file: file, line: mark?.line, column: mark?.column,
                path: path.description, message: message))
    }

    /// Records a warning: the file loads, and batond says it at start, `--check` prints it and a
    /// reload reports it (``BatonConfiguration/warnings``).
    mutating func warn(_ mark: Mark?, _ path: ConfigPath, _ message: String) {
        warnings.append(
            ConfigIssue(
                file: file, line: mark?.line, column: mark?.column,
                path: path.description, message: message))
    }

    /// The fields of a mapping node, reporting a non-mapping node and every key not in `allowed`
    /// (with the closest allowed key as a suggestion). A null node reads as an empty mapping.
    mutating func fields(of node: YAMLNode, at path: ConfigPath, anchor: Mark, allowed: [String]) -> Fields? {
        var fields = Fields(path: path, anchor: anchor, values: [:], nulls: [:])
        if node.isNull { return fields }
        guard let pairs = node.mapping else {
            report(node.mark, path, "expected a mapping, found \(node.kindDescription)")
            return nil
        }
        for pair in pairs where !isMergeKey(pair, at: path) {
            guard allowed.contains(pair.key) else {
                reportUnknownKey(pair, at: path, allowed: allowed)
                continue
            }
            if pair.value.isNull {
                fields.nulls[pair.key] = pair
            } else {
                fields.values[pair.key] = pair
            }
        }
        return fields
    }

    /// The entries of a mapping whose keys are names chosen by the user (zones, classes).
    mutating func namedEntries(of node: YAMLNode, at path: ConfigPath) -> [YAMLPair]? {
        if node.isNull { return [] }
        guard let pairs = node.mapping else {
            report(node.mark, path, "expected a mapping, found \(node.kindDescription)")
            return nil
        }
        return pairs.filter { !isMergeKey($0, at: path) }
    }

    /// Whether `pair` is a YAML merge key (`<<: *base`), reported: it was read as a key (or a zone,
    /// a class) named `<<`, "unknown key" or "must match [a-z0-9_-]+", which did not say why.
    private mutating func isMergeKey(_ pair: YAMLPair, at path: ConfigPath) -> Bool {
        guard pair.key == "<<" else { return false }
        report(
            pair.keyMark, path.appending(pair.key),
            "merge keys are not supported (write the keys out; an alias such as *base copies a whole node)")
        return true
    }

    mutating func reportUnknownKey(_ pair: YAMLPair, at path: ConfigPath, allowed: [String]) {
        let message =
            if let suggestion = EditDistance.suggestion(for: pair.key, among: allowed) {
                "unknown key; did you mean \(ConfigSyntax.quoted(suggestion))?"
            } else {
                "unknown key (expected one of: \(allowed.joined(separator: ", ")))"
            }
        report(pair.keyMark, path.appending(pair.key), message)
    }

    /// The value of an optional key: `nil` when absent, null or invalid (invalid is reported).
    mutating func optional<Value>(_ fields: Fields, _ key: String, _ kind: ValueKind<Value>) -> Value? {
        guard let pair = fields.values[key] else { return nil }
        return convert(pair, at: fields.path.appending(key), kind)
    }

    /// The value of a key with a default: the default when absent or null, `nil` only when invalid
    /// (and reported), so checks that combine values can skip values already reported.
    mutating func value<Value>(
        _ fields: Fields, _ key: String, _ kind: ValueKind<Value>,
        default defaultValue: Value
    ) -> Value? {
        guard let pair = fields.values[key] else { return defaultValue }
        return convert(pair, at: fields.path.appending(key), kind)
    }

    /// The value of a required key: `nil` (reported) when absent, null or invalid.
    mutating func required<Value>(_ fields: Fields, _ key: String, _ kind: ValueKind<Value>) -> Value? {
        if let pair = fields.values[key] {
            return convert(pair, at: fields.path.appending(key), kind)
        }
        if let pair = fields.nulls[key] {
            report(pair.value.mark, fields.path.appending(key), "a value is required")
        } else {
            report(fields.anchor, fields.path, "missing required key \(ConfigSyntax.quoted(key))")
        }
        return nil
    }

    private mutating func convert<Value>(_ pair: YAMLPair, at path: ConfigPath, _ kind: ValueKind<Value>) -> Value? {
        convert(pair.value, at: path, kind)
    }

    /// One scalar node as `kind`: `nil` (reported) for a non-scalar or null node or an invalid value.
    mutating func convert<Value>(_ node: YAMLNode, at path: ConfigPath, _ kind: ValueKind<Value>) -> Value? {
        guard let scalar = node.scalar, !scalar.isNull else {
            report(node.mark, path, "expected \(kind.name), found \(node.kindDescription)")
            return nil
        }
        switch kind.convert(scalar.value) {
        case .success(let value):
            return value
        case .failure(let problem):
            report(node.mark, path, problem.message)
            return nil
        }
    }

    /// The items of a sequence value: `nil` (reported) when the value is not a sequence.
    mutating func items(of pair: YAMLPair, at path: ConfigPath) -> [YAMLNode]? {
        guard let items = pair.value.sequence else {
            report(pair.value.mark, path, "expected a sequence, found \(pair.value.kindDescription)")
            return nil
        }
        return items
    }

    /// A required, non-empty list of distinct values (`rates: [44100, 48000]`); `nil` when absent or
    /// wrong (reported). Invalid items are reported and left out.
    mutating func requiredList<Value: Equatable & CustomStringConvertible>(
        _ fields: Fields, _ key: String, _ kind: ValueKind<Value>
    ) -> [Value]? {
        let path = fields.path.appending(key)
        guard let pair = fields.values[key] else {
            if let pair = fields.nulls[key] {
                report(pair.value.mark, path, "a value is required")
            } else {
                report(fields.anchor, fields.path, "missing required key \(ConfigSyntax.quoted(key))")
            }
            return nil
        }
        guard let nodes = items(of: pair, at: path) else { return nil }
        if nodes.isEmpty {
            report(pair.value.mark, path, "at least one value is required")
            return nil
        }
        var values: [Value] = []
        for node in nodes {
            guard let value = convert(node, at: path, kind) else { continue }
            if values.contains(value) {
                report(node.mark, path, "\(value) is listed twice")
            } else {
                values.append(value)
            }
        }
        return values.isEmpty ? nil : values
    }
}

// MARK: - Value kinds

extension ValueKind {
    /// Any non-empty text.
    static var string: ValueKind<String> {
        ValueKind<String>(name: "a string") { text in
            text.isEmpty ? .failure(ValueProblem(message: "must not be empty")) : .success(text)
        }
    }

    /// A decimal integer in `range`.
    static func integer(_ range: ClosedRange<Int>) -> ValueKind<Int> {
        ValueKind<Int>(name: "an integer") { text in
            let digits = text.first == "-" ? text.dropFirst() : Substring(text)
            guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(\.isASCIIDigit), let number = Int(text) else {
                return .failure(ValueProblem(message: "\(ConfigSyntax.quoted(text)) is not an integer"))
            }
            guard range.contains(number) else {
                return .failure(
                    ValueProblem(
                        message: "\(number) is out of range (expected \(range.lowerBound)...\(range.upperBound))"))
            }
            return .success(number)
        }
    }

    /// A duration (`500us`, `10ms`, `1.5s`, `5m`, `1h`, or `0`) in `range`.
    static func duration(_ range: ClosedRange<Duration>) -> ValueKind<Duration> {
        ValueKind<Duration>(name: "a duration") { text in
            guard let duration = ConfigSyntax.duration(text) else {
                return .failure(
                    ValueProblem(
                        message:
                            "\(ConfigSyntax.quoted(text)) is not a duration (expected e.g. 500us, 10ms, 1.5s, 5m or 1h)"
                    ))
            }
            guard range.contains(duration) else {
                let bounds = "\(ConfigSyntax.format(range.lowerBound))...\(ConfigSyntax.format(range.upperBound))"
                return .failure(ValueProblem(message: "\(text) is out of range (expected \(bounds))"))
            }
            return .success(duration)
        }
    }

    /// A byte size (`65536`, `64KiB`, `1MiB`) in `range`.
    static func byteSize(_ range: ClosedRange<Int>) -> ValueKind<Int> {
        ValueKind<Int>(name: "a size") { text in
            guard let bytes = ConfigSyntax.byteSize(text) else {
                return .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) is not a size (expected e.g. 65536, 512B, 64KiB or 1MiB)"
                    ))
            }
            guard range.contains(bytes) else {
                let bounds =
                    "\(ConfigSyntax.formatByteSize(range.lowerBound))...\(ConfigSyntax.formatByteSize(range.upperBound))"
                return .failure(ValueProblem(message: "\(text) is out of range (expected \(bounds))"))
            }
            return .success(bytes)
        }
    }

    /// A level in decibels (`-15dB`) in `range`.
    static func decibels(_ range: ClosedRange<Double>) -> ValueKind<Double> {
        ValueKind<Double>(name: "a level") { text in
            guard let level = ConfigSyntax.decibels(text) else {
                return .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) is not a level in decibels (expected e.g. -15dB)"))
            }
            guard range.contains(level) else {
                let bounds =
                    "\(ConfigSyntax.formatDecibels(range.lowerBound))...\(ConfigSyntax.formatDecibels(range.upperBound))"
                // Cut as a quoted value is: a level has any number of digits (`-000…1dB`, megabytes).
                return .failure(
                    ValueProblem(message: "\(ConfigSyntax.shortened(text)) is out of range (expected \(bounds))"))
            }
            return .success(level)
        }
    }

    /// A `host:port` address.
    static var listenAddress: ValueKind<ListenAddress> {
        ValueKind<ListenAddress>(name: "an address") { text in
            guard let address = ListenAddress(parsing: text) else {
                return .failure(
                    ValueProblem(
                        message:
                            "\(ConfigSyntax.quoted(text)) is not a valid listen address (expected host:port, e.g. 127.0.0.1:8470 or \"[::1]:8470\")"
                    ))
            }
            // Listened on, not connected to: the socket takes an address. A host name passed
            // `--check` and a reload, and the next start failed ("not a numeric address").
            guard address.isNumeric || address.host == "localhost" else {
                return .failure(
                    ValueProblem(
                        message:
                            "\(ConfigSyntax.quoted(text)) is not an address to listen on (a host name cannot be; expected e.g. 0.0.0.0:\(address.port) for every interface, 127.0.0.1:\(address.port) for this machine only)"
                    ))
            }
            return .success(address)
        }
    }

    /// One of an enumeration's raw values; `what` names it in messages ("format").
    static func choice<Choice: RawRepresentable & CaseIterable>(_ type: Choice.Type, _ what: String) -> ValueKind<
        Choice
    >
    where Choice.RawValue == String {
        ValueKind<Choice>(name: ("aeiou".contains(what.first!) ? "an " : "a ") + what) { text in
            if let choice = Choice(rawValue: text) { return .success(choice) }
            let names = Choice.allCases.map(\.rawValue)
            let expected =
                names.count == 1
                ? names[0]
                : names.dropLast().joined(separator: ", ") + " or " + names.last!
            return .failure(
                ValueProblem(message: "\(ConfigSyntax.quoted(text)) is not a supported \(what) (expected \(expected))"))
        }
    }

    /// A volume: `80%` or `0.8`, 0...1.
    static var volume: ValueKind<Double> {
        ValueKind<Double>(name: "a volume") { text in
            guard let (value, isPercent) = ConfigSyntax.volumeParts(text) else {
                return .failure(
                    ValueProblem(message: "\(ConfigSyntax.quoted(text)) is not a volume (expected e.g. 80% or 0.8)"))
            }
            guard ZoneConfig.volumeRange.contains(value) else {
                let expected = isPercent ? "0%...100%" : "0...1, or a percentage such as 80%"
                return .failure(ValueProblem(message: "\(text) is out of range (expected \(expected))"))
            }
            return .success(value)
        }
    }

    /// One device channel: a name (`left`) or an index 0...7.
    static var deviceChannel: ValueKind<Int> {
        ValueKind<Int>(name: "a channel") { text in
            if let channel = DeviceChannel(name: text) { return .success(channel.rawValue) }
            let last = DeviceChannel.allCases.count - 1
            if !text.isEmpty, text.count <= 18, text.allSatisfy(\.isASCIIDigit), let index = Int(text) {
                return index <= last
                    ? .success(index)
                    : .failure(ValueProblem(message: "\(index) is out of range (expected 0...\(last))"))
            }
            let names = DeviceChannel.allCases.map(\.name).joined(separator: ", ")
            return .failure(
                ValueProblem(
                    message: "\(ConfigSyntax.quoted(text)) is not a channel (expected 0...\(last) or \(names))"))
        }
    }

    /// A name of a zone, group or board: `[a-z0-9_-]+`; `what` names it in the message.
    static func name(_ what: String, why: String) -> ValueKind<String> {
        ValueKind<String>(name: "a name") { text in
            ZoneConfig.isValidName(text)
                ? .success(text)
                : .failure(
                    ValueProblem(message: "\(what) name \(ConfigSyntax.quoted(text)) must match [a-z0-9_-]+ (\(why))"))
        }
    }

    /// An `http://` or `https://` URL; the scheme in any case (`HTTP://`: schemes are
    /// case-insensitive, RFC 3986 §3.1), taken in lower case.
    static var httpURL: ValueKind<String> {
        ValueKind<String>(name: "a URL") { written in
            var text = written
            if let end = written.firstRange(of: "://"),
                ["http", "https"].contains(written[..<end.lowerBound].lowercased())
            {
                text = written[..<end.lowerBound].lowercased() + written[end.lowerBound...]
            }
            return SubsonicConfig.isValidURL(text)
                ? .success(text)
                : .failure(
                    ValueProblem(
                        message:
                            "\(ConfigSyntax.quoted(written)) is not an http(s) URL (expected http://host[:port][/path], e.g. http://127.0.0.1:4533)"
                    ))
        }
    }

    /// An environment variable name.
    static var environmentName: ValueKind<String> {
        ValueKind<String>(name: "a variable name") { text in
            SubsonicConfig.isValidEnvironmentName(text)
                ? .success(text)
                : .failure(
                    ValueProblem(
                        message:
                            "\(ConfigSyntax.quoted(text)) is not an environment variable name (expected letters, digits and _, not starting with a digit)"
                    ))
        }
    }
}
