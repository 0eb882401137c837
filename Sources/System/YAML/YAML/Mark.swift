/// A position in a YAML source text.
///
/// Both numbers are 1-based, as editors show them: the first character of a file is at line 1,
/// column 1. Columns count Unicode scalars, not bytes (libyaml counts characters).
///
/// A plain value: safe to use from any thread.
public struct Mark: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The line, starting at 1.
    public var line: Int
    /// The column, starting at 1.
    public var column: Int

    /// Creates a mark at a 1-based line and column.
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    /// The start of a text: line 1, column 1.
    public static let start = Mark(line: 1, column: 1)

    /// `line:column`, the form compilers print.
    public var description: String { "\(line):\(column)" }

    public static func < (lhs: Mark, rhs: Mark) -> Bool {
        (lhs.line, lhs.column) < (rhs.line, rhs.column)
    }
}
