extension StringProtocol {
    /// The text without white space (spaces, tabs, line ends, other Unicode spaces) at either end;
    /// none inside is touched. For header values, commands and texts read from outside.
    public func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace })
        else {
            return ""
        }
        return String(self[first...last])
    }
}

extension StringProtocol {
    /// A 64-bit FNV-1a hash of the text's UTF-8, in hex: a short name, stable across runs and
    /// machines, that tells two texts apart (a file name for a longer one, a key that must not show it).
    public var fnv1aHex: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return String(hash, radix: 16)
    }
}

extension DecodingError {
    /// Where in a JSON document the error is and what is wrong, in words:
    /// `result.server.groups[0].clients[1].id: missing`, `songs[0].duration: expected a number`.
    public var summary: String {
        func path(_ keys: [any CodingKey]) -> String {
            var text = ""
            for key in keys {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return text.isEmpty ? "(top level)" : text
        }
        switch self {
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])): missing"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)): expected \(Self.kind(type))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)): expected \(Self.kind(type)), found null"
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return "(top level): not valid JSON (\(context.debugDescription))"
        case .dataCorrupted(let context):
            return "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(self)"
        }
    }

    /// The JSON kind a Swift type decodes from, for messages.
    private static func kind(_ type: Any.Type) -> String {
        let name = "\(type)"
        if name.hasPrefix("Array") { return "an array" }
        if name.hasPrefix("Dictionary") { return "an object" }
        switch name {
        case "String": return "a string"
        case "Bool": return "true or false"
        case "Int", "Int64", "Double", "Float": return "a number"
        default: return "an object"
        }
    }
}
