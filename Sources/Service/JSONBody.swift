import BatonDaemon
import ControlParts
import FoundationEssentials

/// Decodes API request bodies strictly: a JSON object, only the known keys, each of the right type,
/// with an error message that names the field. Any thread.
enum JSONBody {
    struct Problem: Error { var message: String }

    /// Decodes like `decode`, with a malformed body as a bad request.
    static func command<T: Decodable>(_ type: T.Type, _ body: [UInt8], keys: Set<String>) throws(ControlError) -> T {
        do { return try decode(type, from: body, keys: keys) } catch { throw ControlError(.badRequest, error.message) }
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private struct Keys: Decodable {
        var names: [String]
        init(from decoder: any Decoder) throws {
            names = try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)
        }
    }

    /// Decodes `T` from `body`, allowing only `keys`. An empty body decodes as `{}`.
    static func decode<T: Decodable>(_ type: T.Type, from body: [UInt8], keys: Set<String>) throws(Problem) -> T {
        let data = Data(body.isEmpty ? Array("{}".utf8) : body)
        let decoder = JSONDecoder()
        let names: [String]
        do {
            names = try decoder.decode(Keys.self, from: data).names
        } catch let error as DecodingError {
            if case .typeMismatch = error { throw Problem(message: "the request body must be a JSON object") }
            throw Problem(message: "malformed JSON: \(describe(error))")
        } catch {
            throw Problem(message: "malformed JSON")
        }
        if let unknown = names.sorted().first(where: { !keys.contains($0) }) {
            throw Problem(message: "unknown field \"\(unknown)\" (expected: \(keys.sorted().joined(separator: ", ")))")
        }
        do {
            return try decoder.decode(T.self, from: data)
        } catch let error as DecodingError {
            throw Problem(message: describe(error))
        } catch {
            throw Problem(message: "invalid request body")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ c: DecodingError.Context) -> String {
            let p = c.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return p.isEmpty ? "body" : "field \"\(p)\""
        }
        switch error {
        case .typeMismatch(let type, let c): return "\(path(c)): expected \(name(of: type))"
        case .valueNotFound(let type, let c): return "\(path(c)): expected \(name(of: type)), got null"
        case .keyNotFound(let key, _): return "missing field \"\(key.stringValue)\""
        case .dataCorrupted(let c):
            return c.codingPath.isEmpty ? "not valid JSON (\(c.debugDescription))" : "\(path(c)): \(c.debugDescription)"
        @unknown default: return "invalid request body"
        }
    }

    private static func name(of type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is [String].Type: "an array of strings"
        case is Bool.Type: "true or false"
        case is Double.Type, is Float.Type: "a number"
        case is Int.Type: "an integer"
        default: "\(type)"
        }
    }
}
