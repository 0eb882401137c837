/// One node of a parsed YAML document: a scalar, a sequence or a mapping, with the position where
/// it starts in the source.
///
/// Mappings keep their entries in source order and never hold two equal keys (the parser rejects
/// duplicates). Aliases are already resolved: an alias becomes a copy of the node it names, with the
/// marks of the anchored original, so errors point at the text that holds the value.
///
/// A plain value: safe to use from any thread.
public struct YAMLNode: Sendable, Equatable {
    /// What the node holds.
    public enum Content: Sendable, Equatable {
        /// A scalar: text with its style; YAML does no type resolution here.
        case scalar(YAMLScalar)
        /// A sequence of nodes, in source order.
        case sequence([YAMLNode])
        /// A mapping with scalar keys, in source order, without duplicate keys.
        case mapping([YAMLPair])
    }

    /// What the node holds.
    public var content: Content
    /// Where the node starts in the source (for a block mapping: its first key).
    public var mark: Mark

    /// Creates a node.
    public init(_ content: Content, mark: Mark) {
        self.content = content
        self.mark = mark
    }

    /// The scalar, if the node is one.
    public var scalar: YAMLScalar? {
        if case .scalar(let scalar) = content { return scalar }
        return nil
    }

    /// The items, if the node is a sequence.
    public var sequence: [YAMLNode]? {
        if case .sequence(let items) = content { return items }
        return nil
    }

    /// The entries, if the node is a mapping.
    public var mapping: [YAMLPair]? {
        if case .mapping(let pairs) = content { return pairs }
        return nil
    }

    /// True for a plain, untagged `~`, `null`, `Null`, `NULL` or empty scalar (as in `key:` with
    /// nothing after it).
    public var isNull: Bool { scalar?.isNull ?? false }

    /// The value of `key`, if the node is a mapping that holds it.
    public subscript(key: String) -> YAMLNode? {
        mapping?.first { $0.key == key }?.value
    }

    /// "a scalar", "a sequence", "a mapping" or "null": for messages such as
    /// "expected a mapping, found a sequence".
    public var kindDescription: String {
        switch content {
        case .scalar(let scalar): scalar.isNull ? "null" : "a scalar"
        case .sequence: "a sequence"
        case .mapping: "a mapping"
        }
    }
}

/// The text of a scalar node and how it was written.
public struct YAMLScalar: Sendable, Equatable {
    /// How a scalar was written in the source.
    public enum Style: Sendable, Equatable {
        /// `value`
        case plain
        /// `'value'`
        case singleQuoted
        /// `"value"`
        case doubleQuoted
        /// `|` block
        case literal
        /// `>` block
        case folded
    }

    /// The text after YAML's unescaping and line folding.
    public var value: String
    /// How it was written.
    public var style: Style
    /// The explicit tag (`!!str`, `!custom`) in its resolved form, if one was written.
    public var tag: String?

    /// Creates a scalar.
    public init(_ value: String, style: Style = .plain, tag: String? = nil) {
        self.value = value
        self.style = style
        self.tag = tag
    }

    /// True for a plain, untagged `~`, `null`, `Null`, `NULL` or empty scalar.
    public var isNull: Bool {
        style == .plain && tag == nil && ["", "~", "null", "Null", "NULL"].contains(value)
    }
}

/// One entry of a mapping: a scalar key with its position, and its value.
public struct YAMLPair: Sendable, Equatable {
    /// The key's text.
    public var key: String
    /// Where the key starts in the source.
    public var keyMark: Mark
    /// The value.
    public var value: YAMLNode

    /// Creates an entry.
    public init(key: String, keyMark: Mark, value: YAMLNode) {
        self.key = key
        self.keyMark = keyMark
        self.value = value
    }
}
