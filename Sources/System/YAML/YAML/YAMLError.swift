/// Why a YAML text could not be turned into a ``YAMLNode`` tree, and where.
///
/// ``description`` reads like a compiler diagnostic:
/// `config/baton.yaml:4:9: zones.kitchen.rate: duplicate key "rate" (first at line 3, column 5)`.
///
/// A plain value: safe to use from any thread.
public struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Reason: Sendable, Equatable {
        /// libyaml rejected the text. `problem` is libyaml's own text ("mapping values are not
        /// allowed in this context"); `context` is what it was doing, with where that started
        /// ("while parsing a block mapping", 2:1), when libyaml says.
        case syntax(problem: String, context: String?, contextMark: Mark?)
        /// A mapping holds the same key twice; `first` is where the first one is.
        case duplicateKey(String, first: Mark)
        /// A mapping key is a sequence or a mapping; only scalar keys are supported.
        case nonScalarKey
        /// An alias (`*name`) names no anchor defined before it.
        case undefinedAlias(String)
        /// The stream holds more than one document (`---`); one is expected.
        case multipleDocuments
        /// Resolving aliases would create more nodes than the limit (an "alias bomb").
        case tooManyNodes(limit: Int)
        /// Resolving aliases would make more scalar text than the limit, in bytes (an alias of a
        /// long string, many times).
        case tooMuchText(limit: Int)
        /// Collections nested deeper than the limit (libyaml slows down quadratically with depth).
        case tooDeep(limit: Int)
        /// libyaml could not allocate memory.
        case outOfMemory
    }

    /// The file name given to the parser, used only in messages.
    public var file: String
    /// Where the problem is.
    public var mark: Mark
    /// The key path of the node being built when the problem was found (`zones.kitchen.rate`,
    /// `items[2]`), or empty for syntax errors and problems at the top level.
    public var path: String
    /// What went wrong.
    public var reason: Reason

    /// Creates an error.
    public init(file: String, mark: Mark, path: String = "", reason: Reason) {
        self.file = file
        self.mark = mark
        self.path = path
        self.reason = reason
    }

    /// The message without file, position or path.
    public var message: String {
        switch reason {
        case .syntax(let problem, let context, let contextMark):
            guard let context else { return problem }
            if let contextMark {
                return "\(problem) (\(context) at line \(contextMark.line), column \(contextMark.column))"
            }
            return "\(problem) (\(context))"
        case .duplicateKey(let key, let first):
            return "duplicate key \"\(key)\" (first at line \(first.line), column \(first.column))"
        case .nonScalarKey:
            return "mapping keys must be scalars, not sequences or mappings"
        case .undefinedAlias(let name):
            return "alias *\(name) refers to no anchor &\(name) defined before it"
        case .multipleDocuments:
            return "expected a single YAML document, found another one"
        case .tooManyNodes(let limit):
            return "the document expands to more than \(limit) nodes (too many aliases)"
        case .tooMuchText(let limit):
            return "the document expands to more than \(limit >> 20) MiB of text (aliases of long values)"
        case .tooDeep(let limit):
            return "collections are nested more than \(limit) deep"
        case .outOfMemory:
            return "libyaml ran out of memory"
        }
    }

    /// `file:line:column: path: message` (the path part only when there is one).
    public var description: String {
        let prefix = path.isEmpty ? "" : "\(path): "
        return "\(file):\(mark.line):\(mark.column): \(prefix)\(message)"
    }
}
