/// The request target (`/path?query`) as sent, parsed and percent-decoded without libmicrohttpd's help so
/// that invalid escapes and invalid UTF-8 are seen rather than repaired.
struct RequestTarget: Equatable {
    var path: String
    var query: [String: String]

    /// Why a target was refused; the text goes into the 400 answer.
    struct Invalid: Error, Equatable {
        var message: String
    }

    /// Parses an origin-form target (`/a%20b?x=1`) or an absolute-form one (`http://host/a`), dropping any
    /// fragment. Throws for a bad escape, invalid UTF-8 or NUL in the path or query, or a relative target.
    init(raw: [UInt8]) throws(Invalid) {
        var target = raw[...]
        if let hash = target.firstIndex(of: UInt8(ascii: "#")) { target = target[..<hash] }
        if target.first != UInt8(ascii: "/") && target != [UInt8(ascii: "*")] {
            // Absolute form: skip "scheme://authority".
            guard let schemeEnd = target.firstRange(of: Array("://".utf8)) else {
                throw Invalid(message: "request target must start with /")
            }
            let afterAuthority = target[schemeEnd.upperBound...]
            target =
                afterAuthority.firstIndex(of: UInt8(ascii: "/")).map { afterAuthority[$0...] }
                ?? [UInt8(ascii: "/")][...]
        }
        let queryStart = target.firstIndex(of: UInt8(ascii: "?"))
        let rawPath = queryStart.map { target[..<$0] } ?? target
        guard let path = Self.decode(rawPath, plusIsSpace: false) else {
            throw Invalid(message: "request path is not valid percent-encoded UTF-8")
        }
        self.path = path
        self.query = [:]
        guard let queryStart else { return }
        for pair in target[target.index(after: queryStart)...].split(separator: UInt8(ascii: "&")) {
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let rawName = equals.map { pair[..<$0] } ?? pair
            let rawValue = equals.map { pair[pair.index(after: $0)...] } ?? []
            guard let name = Self.decode(rawName, plusIsSpace: true),
                let value = Self.decode(rawValue, plusIsSpace: true)
            else {
                throw Invalid(message: "query is not valid percent-encoded UTF-8")
            }
            // One value per name: `?after=1&after=9` kept the last without a word.
            guard query.updateValue(value, forKey: name) == nil else {
                throw Invalid(message: "query parameter \(name) is given more than once")
            }
        }
    }

    /// Percent-decodes `bytes`; nil for a malformed escape, a NUL, or bytes that are not UTF-8.
    static func decode(_ bytes: ArraySlice<UInt8>, plusIsSpace: Bool) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            var byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard bytes.endIndex - index >= 3,
                    let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
                else { return nil }
                byte = high << 4 | low
                index += 3
            } else {
                if plusIsSpace && byte == UInt8(ascii: "+") { byte = UInt8(ascii: " ") }
                index += 1
            }
            if byte == 0 { return nil }
            out.append(byte)
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
