/// One problem found in a configuration file, with where it is.
///
/// ``description`` reads like a compiler diagnostic, so editors can jump to it:
/// `config/baton.yaml:7:13: zones.kitchen.format: "S24_LE" is not a supported format (expected S16_LE or S32_LE)`.
///
/// A plain value: safe to use from any thread.
public struct ConfigIssue: Sendable, Equatable, CustomStringConvertible {
    /// The configuration file's path as given to the loader.
    public var file: String
    /// The 1-based line, or `nil` when the problem has no position (unreadable or empty file).
    public var line: Int?
    /// The 1-based column, or `nil` when the problem has no position.
    public var column: Int?
    /// The key path, dot-separated (`zones.kitchen.period`), or empty for the whole file.
    public var path: String
    /// What is wrong, without file, position or path.
    public var message: String

    /// Creates an issue.
    public init(file: String, line: Int?, column: Int?, path: String, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        self.message = message
    }

    /// `file:line:column: path: message`; parts that are absent are left out.
    public var description: String {
        var text = file
        if let line {
            text += ":\(line)"
            if let column { text += ":\(column)" }
        }
        text += ": "
        if !path.isEmpty { text += "\(path): " }
        return text + message
    }
}

/// Why a configuration could not be loaded: every problem found in one pass, in source order.
///
/// A plain value: safe to use from any thread.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The problems, at least one, sorted by position.
    public var issues: [ConfigIssue]

    /// Creates an error from its issues.
    public init(issues: [ConfigIssue]) {
        self.issues = issues
    }

    /// One issue a line.
    public var description: String {
        issues.map(\.description).joined(separator: "\n")
    }
}
