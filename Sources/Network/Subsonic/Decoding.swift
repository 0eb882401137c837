import FoundationEssentials
import OSThread

/// Lenient readers for the shapes servers actually send: IDs as strings or numbers, numbers as
/// strings, lists as arrays, as a single object (old servers), as `{}` or missing when empty.
extension KeyedDecodingContainer where Key == AnyCodingKey {
    func string(_ key: String) -> String? {
        let k = AnyCodingKey(key)
        if let s = try? decodeIfPresent(String.self, forKey: k) { return s }
        if let i = try? decodeIfPresent(Int64.self, forKey: k) { return String(i) }
        if let d = try? decodeIfPresent(Double.self, forKey: k) { return String(d) }
        return nil
    }

    func requiredString(_ key: String) throws -> String {
        guard let value = string(key) else {
            throw DecodingError.keyNotFound(
                AnyCodingKey(key), .init(codingPath: codingPath, debugDescription: "missing \(key)"))
        }
        return value
    }

    func int(_ key: String) -> Int? {
        let k = AnyCodingKey(key)
        if let i = try? decodeIfPresent(Int.self, forKey: k) { return i }
        if let d = try? decodeIfPresent(Double.self, forKey: k), d.isFinite, abs(d) < 1e15 { return Int(d) }
        if let s = try? decodeIfPresent(String.self, forKey: k) { return Int(s) }
        return nil
    }

    func double(_ key: String) -> Double? {
        let k = AnyCodingKey(key)
        if let d = try? decodeIfPresent(Double.self, forKey: k) { return d }
        if let s = try? decodeIfPresent(String.self, forKey: k) { return Double(s) }
        return nil
    }

    func bool(_ key: String) -> Bool? {
        let k = AnyCodingKey(key)
        if let b = try? decodeIfPresent(Bool.self, forKey: k) { return b }
        if let s = try? decodeIfPresent(String.self, forKey: k) { return s == "true" }
        return nil
    }

    /// A list under `key`: an array, one object, or nothing (`{}`, null, absent) as empty.
    /// Elements that fail to decode make the whole list fail: a half list would mislead. An array
    /// fails with its element's own error (`song[1]`'s missing `id`), not as "not one object".
    func list<T: Decodable>(_ key: String, of type: T.Type = T.self) throws -> [T] {
        let k = AnyCodingKey(key)
        guard contains(k), (try? decodeNil(forKey: k)) != true else { return [] }
        if (try? nestedUnkeyedContainer(forKey: k)) != nil { return try decode([T].self, forKey: k) }
        if let empty = try? nestedContainer(keyedBy: AnyCodingKey.self, forKey: k), empty.allKeys.isEmpty { return [] }
        return [try decode(T.self, forKey: k)]
    }

    /// The object under `key`, or nil when absent or null.
    func object(_ key: String) throws -> KeyedDecodingContainer<AnyCodingKey>? {
        let k = AnyCodingKey(key)
        guard contains(k), (try? decodeNil(forKey: k)) != true else { return nil }
        return try nestedContainer(keyedBy: AnyCodingKey.self, forKey: k)
    }
}

/// What a Subsonic JSON answer says about the server, besides its payload.
struct Envelope {
    var status: String
    var version: String?
    var type: String?
    var serverVersion: String?
    var openSubsonic: Bool
    var errorCode: Int?
    var errorMessage: String?
}

/// Decodes `{"subsonic-response": {...}}`: the envelope fields, and one payload key's value.
struct ResponseDecoder {
    let bytes: [UInt8]

    func envelope() throws -> Envelope {
        try decode(Skip.self, payloadKey: nil).envelope
    }

    func payload<T: Decodable>(_ key: String, as type: T.Type) throws -> (Envelope, T?) {
        let root = try decode(T.self, payloadKey: key)
        return (root.envelope, root.payload)
    }

    private func decode<T: Decodable>(_ type: T.Type, payloadKey: String?) throws -> Root<T> {
        let decoder = JSONDecoder()
        if let payloadKey { decoder.userInfo[Root<T>.payloadKey] = payloadKey }
        return try decoder.decode(Root<T>.self, from: Data(bytes))
    }
}

/// A payload type for when only the envelope matters.
struct Skip: Decodable {}

/// The root object with one payload key, named in the decoder's `userInfo`.
struct Root<T: Decodable>: Decodable {
    static var payloadKey: CodingUserInfoKey { CodingUserInfoKey(rawValue: "baton.subsonic.payloadKey")! }

    var envelope: Envelope
    var payload: T?

    init(from decoder: any Decoder) throws {
        let root = try decoder.container(keyedBy: AnyCodingKey.self)
        guard let response = try root.object("subsonic-response") else {
            throw DecodingError.keyNotFound(
                AnyCodingKey("subsonic-response"),
                .init(codingPath: [], debugDescription: "not a Subsonic response"))
        }
        let error = (try? response.object("error")) ?? nil
        envelope = Envelope(
            status: response.string("status") ?? "", version: response.string("version"),
            type: response.string("type"), serverVersion: response.string("serverVersion"),
            openSubsonic: response.bool("openSubsonic") ?? false,
            errorCode: error?.int("code"), errorMessage: error?.string("message"))
        if let key = decoder.userInfo[Self.payloadKey] as? String, response.contains(AnyCodingKey(key)),
            (try? response.decodeNil(forKey: AnyCodingKey(key))) != true
        {
            payload = try response.decode(T.self, forKey: AnyCodingKey(key))
        }
    }
}
