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
        if let repeated = repeatedKey(in: body) {
            throw Problem(message: "field \"\(repeated)\" is given more than once")
        }
        do {
            return try decoder.decode(T.self, from: data)
        } catch let error as DecodingError {
            throw Problem(message: describe(error))
        } catch {
            throw Problem(message: "invalid request body")
        }
    }

    /// The first key the top-level object of `body` (valid JSON, an object) gives twice, as the
    /// decoder reads keys (escapes decoded): `{"volume": 0.2, "volume": 5}` was decoded with one of
    /// them, without a word.
    static func repeatedKey(in body: [UInt8]) -> String? {
        var seen: Set<String> = []
        var depth = 0
        var expectingKey = false
        var i = 0
        while i < body.count {
            switch body[i] {
            case UInt8(ascii: "\""):
                let (text, end) = string(in: body, from: i)
                if depth == 1 && expectingKey {
                    if !seen.insert(text).inserted { return text }
                    expectingKey = false
                }
                i = end
                continue
            case UInt8(ascii: "{"):
                depth += 1
                if depth == 1 { expectingKey = true }
            case UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            case UInt8(ascii: ","): if depth == 1 { expectingKey = true }
            default: break
            }
            i += 1
        }
        return nil
    }

    /// The JSON string starting at `start` (its opening quote), decoded, and the index after it.
    private static func string(in b: [UInt8], from start: Int) -> (String, Int) {
        var out: [UInt8] = []
        var i = start + 1
        func hex(_ at: Int) -> UInt32? {
            guard at + 4 <= b.count, let text = String(validating: b[at..<at + 4], as: UTF8.self) else { return nil }
            return UInt32(text, radix: 16)
        }
        while i < b.count && b[i] != UInt8(ascii: "\"") {
            guard b[i] == UInt8(ascii: "\\"), i + 1 < b.count else {
                out.append(b[i])
                i += 1
                continue
            }
            let escape = b[i + 1]
            i += 2
            switch escape {
            case UInt8(ascii: "b"): out.append(8)
            case UInt8(ascii: "f"): out.append(12)
            case UInt8(ascii: "n"): out.append(10)
            case UInt8(ascii: "r"): out.append(13)
            case UInt8(ascii: "t"): out.append(9)
            case UInt8(ascii: "u"):
                guard var unit = hex(i) else { continue }
                i += 4
                // A surrogate pair: the high half and, escaped after it, the low.
                if (0xD800..<0xDC00).contains(unit), i + 1 < b.count, b[i] == UInt8(ascii: "\\"),
                    b[i + 1] == UInt8(ascii: "u"), let low = hex(i + 2), (0xDC00..<0xE000).contains(low)
                {
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                out.append(contentsOf: Array(String(Unicode.Scalar(unit).map(Character.init) ?? "\u{FFFD}").utf8))
            default: out.append(escape)
            }
        }
        return (String(decoding: out, as: UTF8.self), i + 1)
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ c: DecodingError.Context) -> String {
            let p = c.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return p.isEmpty ? "body" : "field \"\(p)\""
        }
        switch error {
        case .typeMismatch(let type, let c): return "\(path(c)): expected \(name(of: type))"
        case .valueNotFound(let type, let c):
            // `null` for the whole body: valid JSON, but not the object every command takes.
            return c.codingPath.isEmpty
                ? "the body must be a JSON object, not null" : "\(path(c)): expected \(name(of: type)), got null"
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
