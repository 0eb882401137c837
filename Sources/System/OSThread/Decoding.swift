/// A coding key made from any string: for JSON objects whose keys are data (zone names), or that
/// are read a key at a time (Subsonic's payloads under the endpoint's own key, a request body's
/// names checked before it is decoded, a state file read part by part).
public struct AnyCodingKey: CodingKey, Sendable {
    public var stringValue: String
    public var intValue: Int? { nil }
    public init(_ string: String) { stringValue = string }
    public init(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) { nil }
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
