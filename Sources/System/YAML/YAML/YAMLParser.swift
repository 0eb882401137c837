import CYAML

/// Parses YAML text into a ``YAMLNode`` tree with libyaml's event API.
///
/// Thread safety: any thread may call these functions at the same time; each call owns its own
/// libyaml parser and there is no shared state.
public enum YAMLParser {
    /// The most nodes a document may expand to once aliases are resolved. Guards against
    /// "billion laughs" documents; a Baton configuration has a few hundred.
    public static let nodeLimit = 100_000
    /// The most scalar text, in UTF-8 bytes, a document may expand to once aliases are resolved.
    /// Nodes alone did not bound it: an alias of a 3.5 MB scalar counts as one node, and 10 000
    /// of them made 35 GB of text (in error messages) at a reload. A file holds at most 4 MiB.
    public static let textLimit = 16 << 20
    /// The deepest nesting of sequences and mappings accepted. A Baton configuration nests 5 deep;
    /// libyaml's time grows with the square of the depth (a 100 KB line of `[` took 17 s), so the
    /// parse stops at the first collection past it.
    public static let depthLimit = 64

    /// Parses one YAML document from text.
    ///
    /// - Parameters:
    ///   - text: the YAML source.
    ///   - file: the name to put in error messages (not opened).
    /// - Returns: the document's root node, or `nil` when the text holds no document (it is empty,
    ///   or only comments and blank lines).
    /// - Throws: ``YAMLError`` for a syntax error (with libyaml's problem text), a duplicate key, a
    ///   non-scalar key, an undefined alias, more than one document, too many nodes or too much
    ///   text once aliases are resolved.
    public static func parse(text: String, file: String) throws(YAMLError) -> YAMLNode? {
        try parse(utf8: Array(text.utf8), file: file)
    }

    /// Parses one YAML document from raw bytes (UTF-8, or UTF-16 with a byte order mark).
    ///
    /// Invalid UTF-8 is reported as a syntax error at its position, not replaced.
    /// Same result and errors as ``parse(text:file:)``.
    public static func parse(utf8 bytes: [UInt8], file: String) throws(YAMLError) -> YAMLNode? {
        // libyaml keeps a pointer to the input until the parser is deleted: copy it into memory
        // whose lifetime we control instead of relying on a closure-scoped array pointer.
        let input = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        defer { input.deallocate() }
        _ = input.initialize(from: bytes)

        // yaml_parser_t is large and libyaml keeps pointers into it: give it a stable address.
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) == 1 else {
            throw YAMLError(file: file, mark: .start, reason: .outOfMemory)
        }
        defer { yaml_parser_delete(parser) }
        yaml_parser_set_input_string(parser, input.baseAddress, bytes.count)

        let event = UnsafeMutablePointer<yaml_event_t>.allocate(capacity: 1)
        defer { event.deallocate() }

        var builder = TreeBuilder(file: file)
        while true {
            guard yaml_parser_parse(parser, event) == 1 else {
                throw syntaxError(parser.pointee, input: bytes, file: file)
            }
            let finished: Bool
            do {
                finished = try builder.handle(event.pointee)
            } catch {
                yaml_event_delete(event)
                throw error
            }
            yaml_event_delete(event)
            if finished { return builder.root }
        }
    }

    /// Turns libyaml's error fields into a ``YAMLError``.
    private static func syntaxError(_ parser: yaml_parser_t, input: [UInt8], file: String) -> YAMLError {
        if parser.error == YAML_MEMORY_ERROR {
            return YAMLError(file: file, mark: .start, reason: .outOfMemory)
        }
        var problem = parser.problem.map { String(cString: $0) } ?? "invalid YAML"
        let mark: Mark
        if parser.error == YAML_READER_ERROR {
            // Reader errors (bad encoding) carry a byte offset instead of a mark.
            mark = markOf(byteOffset: parser.problem_offset, in: input)
            if parser.problem_value != -1 {
                problem += " (byte 0x\(String(UInt32(bitPattern: parser.problem_value), radix: 16)))"
            }
        } else {
            mark = Mark(parser.problem_mark)
        }
        let context = parser.context.map { String(cString: $0) }
        let contextMark = context == nil ? nil : Mark(parser.context_mark)
        return YAMLError(
            file: file, mark: mark,
            reason: .syntax(problem: problem, context: context, contextMark: contextMark))
    }

    /// The 1-based line and column of a byte offset, counting columns in UTF-8 lead bytes.
    private static func markOf(byteOffset: Int, in input: [UInt8]) -> Mark {
        var line = 1
        var column = 1
        for byte in input.prefix(byteOffset) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return Mark(line: line, column: column)
    }
}

extension Mark {
    /// Converts libyaml's 0-based mark.
    init(_ mark: yaml_mark_t) {
        self.init(line: mark.line + 1, column: mark.column + 1)
    }
}

/// Builds the tree from parser events: a stack of open collections, anchors seen so far, and a
/// count of nodes and of scalar bytes for the alias-expansion limits.
private struct TreeBuilder {
    /// A sequence or mapping whose end event has not arrived yet.
    struct Frame {
        var mark: Mark
        var anchor: String?
        var isMapping: Bool
        var items: [YAMLNode] = []
        var pairs: [YAMLPair] = []
        /// The key whose value comes next (mappings only).
        var pendingKey: (text: String, mark: Mark)?
        /// Where each key was first seen, for duplicate detection.
        var keyMarks: [String: Mark] = [:]
        /// Nodes in this subtree so far, counting the frame itself.
        var size = 1
        /// Scalar bytes (keys and values) in this subtree so far.
        var bytes = 0
    }

    let file: String
    var stack: [Frame] = []
    var anchors: [String: (node: YAMLNode, size: Int, bytes: Int)] = [:]
    var root: YAMLNode?
    var documents = 0
    var totalNodes = 0
    var totalBytes = 0

    init(file: String) { self.file = file }

    /// Handles one event; returns true at the end of the stream.
    mutating func handle(_ event: yaml_event_t) throws(YAMLError) -> Bool {
        let mark = Mark(event.start_mark)
        switch event.type {
        case YAML_STREAM_END_EVENT:
            return true
        case YAML_DOCUMENT_START_EVENT:
            documents += 1
            if documents > 1 { throw error(at: mark, .multipleDocuments) }
        case YAML_SCALAR_EVENT:
            let data = event.data.scalar
            let value = string(data.value, count: data.length)
            let tag = data.tag.map { String(cString: $0) }
            let node = YAMLNode(.scalar(YAMLScalar(value, style: Self.style(data.style), tag: tag)), mark: mark)
            try count(bytes: data.length, at: mark)
            try add(node, size: 1, bytes: data.length, anchor: data.anchor.map { String(cString: $0) })
        case YAML_ALIAS_EVENT:
            let name = String(cString: event.data.alias.anchor)
            guard let anchored = anchors[name] else { throw error(at: mark, .undefinedAlias(name)) }
            try count(bytes: anchored.bytes, at: mark)
            try add(anchored.node, size: anchored.size, bytes: anchored.bytes, anchor: nil)
        case YAML_SEQUENCE_START_EVENT:
            guard stack.count < YAMLParser.depthLimit else {
                throw error(at: mark, .tooDeep(limit: YAMLParser.depthLimit))
            }
            let anchor = event.data.sequence_start.anchor.map { String(cString: $0) }
            stack.append(Frame(mark: mark, anchor: anchor, isMapping: false))
        case YAML_MAPPING_START_EVENT:
            guard stack.count < YAMLParser.depthLimit else {
                throw error(at: mark, .tooDeep(limit: YAMLParser.depthLimit))
            }
            let anchor = event.data.mapping_start.anchor.map { String(cString: $0) }
            stack.append(Frame(mark: mark, anchor: anchor, isMapping: true))
        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            let frame = stack.removeLast()
            let content: YAMLNode.Content = frame.isMapping ? .mapping(frame.pairs) : .sequence(frame.items)
            try add(YAMLNode(content, mark: frame.mark), size: frame.size, bytes: frame.bytes, anchor: frame.anchor)
        default:
            break  // stream start, document end: nothing to build
        }
        return false
    }

    /// Counts the scalar text a scalar or an alias (at `mark`) adds to the document.
    private mutating func count(bytes: Int, at mark: Mark) throws(YAMLError) {
        totalBytes += bytes
        if totalBytes > YAMLParser.textLimit { throw error(at: mark, .tooMuchText(limit: YAMLParser.textLimit)) }
    }

    /// Adds a finished node to the open collection, or makes it the root.
    private mutating func add(_ node: YAMLNode, size: Int, bytes: Int, anchor: String?) throws(YAMLError) {
        totalNodes += size
        if totalNodes > YAMLParser.nodeLimit {
            throw error(at: node.mark, .tooManyNodes(limit: YAMLParser.nodeLimit))
        }
        if let anchor { anchors[anchor] = (node, size, bytes) }
        guard !stack.isEmpty else {
            root = node
            return
        }
        stack[stack.count - 1].size += size
        stack[stack.count - 1].bytes += bytes
        let top = stack.count - 1
        if !stack[top].isMapping {
            stack[top].items.append(node)
        } else if let key = stack[top].pendingKey {
            stack[top].pairs.append(YAMLPair(key: key.text, keyMark: key.mark, value: node))
            stack[top].pendingKey = nil
        } else {
            guard let scalar = node.scalar else { throw error(at: node.mark, .nonScalarKey) }
            if let first = stack[top].keyMarks[scalar.value] {
                stack[top].pendingKey = (scalar.value, node.mark)  // so the path names the key
                throw error(at: node.mark, .duplicateKey(scalar.value, first: first))
            }
            stack[top].keyMarks[scalar.value] = node.mark
            stack[top].pendingKey = (scalar.value, node.mark)
        }
    }

    /// An error at `mark`, with the key path of the node being built.
    private func error(at mark: Mark, _ reason: YAMLError.Reason) -> YAMLError {
        YAMLError(file: file, mark: mark, path: path, reason: reason)
    }

    /// `zones.kitchen.rate`, `items[2]`: where the builder is in the tree.
    private var path: String {
        var result = ""
        for frame in stack {
            if frame.isMapping {
                guard let key = frame.pendingKey else { break }
                result += result.isEmpty ? key.text : ".\(key.text)"
            } else {
                result += "[\(frame.items.count)]"
            }
        }
        return result
    }

    private func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?, count: Int) -> String {
        guard let pointer else { return "" }
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    private static func style(_ style: yaml_scalar_style_t) -> YAMLScalar.Style {
        switch style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: .literal
        case YAML_FOLDED_SCALAR_STYLE: .folded
        default: .plain
        }
    }
}
