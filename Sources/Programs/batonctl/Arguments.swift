/// One `--name` option of a command: a flag, or an option with a value (`--name VALUE` or
/// `--name=VALUE`).
struct Option: Sendable {
    var name: String
    /// The value's placeholder in help (`ID`, `a,b`); nil for a flag.
    var value: String?
    var help: String

    static func flag(_ name: String, _ help: String) -> Option { Option(name: name, value: nil, help: help) }
    static func value(_ name: String, _ placeholder: String, _ help: String) -> Option {
        Option(name: name, value: placeholder, help: help)
    }
}

/// A parsed command line: positionals in order, option values and flags by name (without `--`).
struct Arguments {
    var positionals: [String] = []
    var values: [String: String] = [:]
    var flags: Set<String> = []

    subscript(_ name: String) -> String? { values[name] }
    func has(_ name: String) -> Bool { flags.contains(name) || values[name] != nil }

    /// Parses `words` against `options`. Options and positionals may come in any order; `--` ends the
    /// options; `-h` is `--help`. An unknown option, a missing value or an option given twice is a
    /// usage error naming `command`.
    init(parsing words: ArraySlice<String>, options: [Option], command: String?) throws(Failure) {
        var rest = words
        var optionsEnded = false
        while let word = rest.popFirst() {
            if optionsEnded || !word.hasPrefix("-") || word == "-" || Self.isNumber(word) {
                positionals.append(word)
                continue
            }
            if word == "--" {
                optionsEnded = true
                continue
            }
            var name = word == "-h" ? "help" : String(word.drop { $0 == "-" })
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard word.hasPrefix("--") || word == "-h", let option = options.first(where: { $0.name == name }) else {
                throw .usage("unknown option \(word)", command: command)
            }
            guard !has(name) else { throw .usage("--\(name) is given twice", command: command) }
            if option.value == nil {
                guard inline == nil else { throw .usage("--\(name) takes no value", command: command) }
                flags.insert(name)
            } else if let inline {
                values[name] = inline
            } else if let next = rest.popFirst() {
                values[name] = next
            } else {
                throw .usage("--\(name) needs a value (\(option.value!))", command: command)
            }
        }
    }

    /// `-5` or `-0.5` is a value, not an option (so `volume kitchen -1` reports a range error).
    private static func isNumber(_ word: String) -> Bool { Double(word) != nil }

    /// A comma-separated list option (`--zones a,b`), without empty items; nil when absent. Given
    /// with nothing in it (`--zones "$ZONE"` with `$ZONE` empty, `--zones ,`) it is a usage error:
    /// sent as an empty list, batond took it for every zone — a doorbell meant for one room rang in
    /// the bedrooms.
    func list(_ name: String, command: String) throws(Failure) -> [String]? {
        guard let text = values[name] else { return nil }
        let items = text.split(separator: ",").map { $0.trimmed }.filter { !$0.isEmpty }
        guard !items.isEmpty else {
            throw .usage(
                "--\(name) \"\(text)\": give at least one name (leave --\(name) out for its default)", command: command)
        }
        return items
    }

    /// A whole-number option within `range`; nil when absent.
    func integer(_ name: String, in range: ClosedRange<Int>, command: String) throws(Failure) -> Int? {
        guard let text = values[name] else { return nil }
        guard let n = Int(text), range.contains(n) else {
            throw .usage(
                "--\(name) \(text): expected a whole number in \(range.lowerBound)...\(range.upperBound)",
                command: command)
        }
        return n
    }
}

/// A volume on the command line: `0`…`1` like the API, or a percentage `0%`…`100%`.
enum Volume {
    static func parse(_ text: String, what: String, command: String) throws(Failure) -> Double {
        let value: Double?
        if text.hasSuffix("%") {
            value = Double(text.dropLast()).map { $0 / 100 }
        } else {
            value = Double(text)
        }
        guard let value, value.isFinite, (0...1).contains(value) else {
            throw .usage(
                "\(what) \"\(text)\": expected 0...1 or a percentage 0%...100% (e.g. 0.4 or 40%)", command: command)
        }
        return value
    }
}
