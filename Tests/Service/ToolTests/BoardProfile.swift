import Glibc

/// A board profile (`boards/*.yaml`) read by a small line-based reader and checked against the rules
/// in docs/BOARDS.md. The profiles keep to a subset of YAML so this reader suffices: top-level
/// `key: value` lines, lists in `[a, b]` flow style, and `notes: >` followed by indented lines.
/// The daemon will load them through the real YAML module.
struct BoardProfile {
    static let keys = [
        "name", "pcm", "rates", "formats", "channels", "mixer", "volume", "dtoverlay",
        "period", "buffer", "notes",
    ]
    static let formats: Set<String> = ["S16_LE", "S32_LE"]

    var values: [String: String] = [:]
    var problems: [String] = []

    init(text: String) {
        var foldedKey: String?
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw)
            if line.trimmed.isEmpty || line.trimmed.hasPrefix("#") { continue }
            if line.hasPrefix(" ") {
                guard let key = foldedKey else {
                    problems.append("line \(number + 1): unexpected indentation")
                    continue
                }
                values[key, default: ""] += (values[key]!.isEmpty ? "" : " ") + line.trimmed
                continue
            }
            foldedKey = nil
            guard let colon = line.firstIndex(of: ":") else {
                problems.append("line \(number + 1): expected key: value")
                continue
            }
            let key = String(line[..<colon])
            var value = line[line.index(after: colon)...].trimmed
            if values[key] != nil { problems.append("\(key): given twice") }
            if value == ">" || value == "|" {
                foldedKey = key
                value = ""
            }
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast())
            }
            values[key] = value
        }
        check()
    }

    /// `[a, b]` → ["a", "b"]; nil if not a flow list.
    static func list(_ text: String) -> [String]? {
        guard text.hasPrefix("["), text.hasSuffix("]") else { return nil }
        return text.dropFirst().dropLast().split(separator: ",").map { $0.trimmed }
    }

    /// `500us`, `10ms`, `1.5s` → microseconds.
    static func duration(_ text: String) -> Double? {
        for (unit, scale) in [("us", 1.0), ("ms", 1_000.0), ("s", 1_000_000.0)] where text.hasSuffix(unit) {
            guard let n = Double(text.dropLast(unit.count)), n > 0 else { return nil }
            return n * scale
        }
        return nil
    }

    private mutating func check() {
        for key in values.keys where !Self.keys.contains(key) { problems.append("\(key): unknown key") }
        for key in Self.keys where (values[key] ?? "").isEmpty { problems.append("\(key): missing or empty") }
        if let pcm = values["pcm"], !pcm.isEmpty, !pcm.contains("CARD=") {
            problems.append("pcm: \(pcm) should name the card (hw:CARD=<name>,DEV=0), not its number")
        }
        if let text = values["rates"] {
            let rates = Self.list(text)?.map { Int($0) }
            if rates == nil || rates!.isEmpty
                || rates!.contains(where: { $0 == nil || !(8_000...384_000).contains($0!) })
            {
                problems.append("rates: \(text) must be a list of rates in 8000...384000")
            }
        }
        if let text = values["formats"] {
            let formats = Self.list(text) ?? []
            if formats.isEmpty || !Set(formats).isSubset(of: Self.formats) {
                problems.append("formats: \(text) must be a non-empty list of S16_LE, S32_LE (what Baton writes)")
            }
        }
        if let text = values["channels"], !(Int(text).map { (1...8).contains($0) } ?? false) {
            problems.append("channels: \(text) must be 1...8")
        }
        if let volume = values["volume"], let mixer = values["mixer"] {
            if !["hardware", "software"].contains(volume) {
                problems.append("volume: \(volume) must be hardware or software")
            }
            if (mixer == "none") != (volume == "software") {
                problems.append(
                    "volume: \(volume) with mixer \(mixer): a board without a mixer (none) has software volume, and only then"
                )
            }
        }
        if let line = values["dtoverlay"], line != "none", !line.hasPrefix("dtoverlay="), !line.hasPrefix("dtparam=") {
            problems.append(
                "dtoverlay: \(line) must be a config.txt line starting with dtoverlay= or dtparam=, or none")
        }
        let period = values["period"].flatMap(Self.duration)
        let buffer = values["buffer"].flatMap(Self.duration)
        if values["period"] != nil && (period == nil || !(1_000...1_000_000).contains(period!)) {
            problems.append("period: \(values["period"]!) must be a duration in 1ms...1s")
        }
        if values["buffer"] != nil && (buffer == nil || buffer! > 10_000_000) {
            problems.append("buffer: \(values["buffer"]!) must be a duration up to 10s")
        }
        if let period, let buffer, buffer < 2 * period {
            problems.append("buffer: \(values["buffer"]!) is shorter than 2 periods (\(values["period"]!))")
        }
    }

    /// The `boards/*.yaml` file names, sorted.
    static func files(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix(".yaml") { names.append(name) }
        }
        return names.sorted()
    }
}

extension StringProtocol {
    var trimmed: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0.isNewline }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
