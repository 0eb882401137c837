import BatonDaemon
import ControlParts
import FoundationEssentials
import OSThread

/// Decodes API request bodies strictly: a JSON object, only the known keys, each of the right type,
/// with an error message that names the field. Any thread.
enum JSONBody {
    struct Problem: Error { var message: String }

    /// Decodes like `decode`, with a malformed body as a bad request.
    static func command<T: Decodable>(_ type: T.Type, _ body: [UInt8], keys: Set<String>) throws(ControlError) -> T {
        do { return try decode(type, from: body, keys: keys) } catch { throw ControlError(.badRequest, error.message) }
    }

    private struct Keys: Decodable {
        var names: [String]
        init(from decoder: any Decoder) throws {
            names = try decoder.container(keyedBy: AnyCodingKey.self).allKeys.map(\.stringValue)
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

    fileprivate static func name(of type: Any.Type) -> String {
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

/// A number field of a request body, read so that a number the field cannot hold is an error that
/// names the field. FoundationEssentials' `JSONDecoder` reports one (1.5 for an `Int`, 1e39 for a
/// `Float`, 1e400 for any) as "The given data was not valid JSON." with no coding path: untrue, and
/// it does not say where (inside, it is an error of its own, `numberIsNotRepresentableInSwift`).
struct BodyNumber<Value: Decodable & Sendable>: Decodable, Sendable {
    var value: Value

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        do {
            value = try container.decode(Value.self)
        } catch let error as DecodingError {
            throw error  // not a number (a string, null): the decoder names the field itself
        } catch {
            // The decoder's own error for a number the type cannot hold, which it would turn into
            // a pathless "not valid JSON" at the top.
            let problem: String
            if let number = try? container.decode(Double.self) {
                let whole = number.rounded(.towardZero) == number
                problem =
                    whole || Value.self is any BinaryFloatingPoint.Type
                    ? "\(number) is out of range" : "expected \(JSONBody.name(of: Value.self)), got \(number)"
            } else {
                problem = "the number is too large to read"
            }
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: problem))
        }
    }
}
