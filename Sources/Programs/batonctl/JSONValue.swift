/// Any JSON value, for answers batonctl shows without a fixed shape (`config`).
enum JSONValue: Decodable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Double.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    /// The value as block-style YAML, keys sorted: readable, and for `GET /api/v1/config` a valid
    /// Baton configuration again.
    func yaml(indent: Int = 0) -> String {
        let pad = String(repeating: " ", count: indent)
        switch self {
        case .object(let fields) where !fields.isEmpty:
            return fields.keys.sorted().map { key in
                let value = fields[key]!
                switch value {
                case .object(let inner) where !inner.isEmpty:
                    return "\(pad)\(Self.scalar(key)):\n" + value.yaml(indent: indent + 2)
                case .array(let items) where items.contains(where: \.isContainer):
                    return "\(pad)\(Self.scalar(key)):\n" + value.yaml(indent: indent + 2)
                default:
                    return "\(pad)\(Self.scalar(key)): \(value.inline)"
                }
            }.joined(separator: "\n")
        case .array(let items) where items.contains(where: \.isContainer):
            return items.map { item in
                let body = item.yaml(indent: indent + 2)
                return "\(pad)- " + body.dropFirst(indent + 2)
            }.joined(separator: "\n")
        default:
            return pad + inline
        }
    }

    private var isContainer: Bool {
        switch self {
        case .object(let o): !o.isEmpty
        case .array(let a): !a.isEmpty
        default: false
        }
    }

    /// A scalar, an empty container, or a flow list of scalars.
    private var inline: String {
        switch self {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .number(let n): n == n.rounded() && abs(n) < 1e15 ? String(Int(n)) : String(n)
        case .string(let s): Self.scalar(s)
        case .array(let items): "[" + items.map(\.inline).joined(separator: ", ") + "]"
        case .object: "{}"
        }
    }

    /// `text` plain when YAML reads it back as the same string, else double-quoted.
    static func scalar(_ text: String) -> String {
        let plain: (Character) -> Bool = { $0.isLetter || $0.isNumber || "_./:@+-=".contains($0) }
        let reserved = ["true", "false", "null", "yes", "no", "on", "off", "~", "-", ".inf", "-.inf", ".nan"]
        if let first = text.first, first != ":", first != "@", text.last != ":", text.allSatisfy(plain),
            !reserved.contains(text.lowercased()), Double(text) == nil
        {
            return text
        }
        var quoted = "\""
        for ch in text.unicodeScalars {
            switch ch {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case "\n": quoted += "\\n"
            case "\t": quoted += "\\t"
            default:
                if ch.value < 0x20 {
                    quoted += "\\x" + String(ch.value, radix: 16).leftPadded(2)
                } else {
                    quoted.unicodeScalars.append(ch)
                }
            }
        }
        return quoted + "\""
    }
}

extension String {
    func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
