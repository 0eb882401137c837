/// Hides credentials in URLs before they reach a log line, an error or a description.
///
/// Subsonic servers take the password (`p`), its token (`t`) and salt (`s`), or an API key (`apiKey`)
/// as query parameters; a URL may also carry `user:password@`. All of those values become `***`.
///
/// Pure functions: safe to use from any thread.
public enum URLRedaction {
    /// The query parameters whose values are secrets (compared case-sensitively, as servers do).
    public static let secretParameters: Set<String> = ["p", "t", "s", "apiKey", "password", "token"]

    /// `url` with the values of ``secretParameters`` and any userinfo password replaced by `***`.
    public static func redact(_ url: String) -> String {
        var base = Substring(url)
        var fragment: Substring = ""
        if let hash = base.firstIndex(of: "#") {
            fragment = base[hash...]
            base = base[..<hash]
        }
        var query: Substring? = nil
        if let question = base.firstIndex(of: "?") {
            query = base[base.index(after: question)...]
            base = base[..<question]
        }
        var result = redactUserInfo(base)
        if let query {
            let parts = query.split(separator: "&", omittingEmptySubsequences: false).map { part -> String in
                guard let equals = part.firstIndex(of: "=") else { return String(part) }
                let name = part[..<equals]
                return secretParameters.contains(String(name)) ? "\(name)=***" : String(part)
            }
            result += "?" + parts.joined(separator: "&")
        }
        return result + fragment
    }

    /// `text` — not a URL: a server's error message or page, which may echo the request's query —
    /// with the value of each `name=value` whose name is one of ``secretParameters`` replaced by
    /// `***` (`…&t=3f2a…&s=9c01…` → `…&t=***&s=***`: a token and its salt can be sent again). A name
    /// counts where it begins the text or follows a character that is not part of a name (`?`, `&`,
    /// `;`, a space, a quote): `sp=1` and `posts=2` stay. The value runs to `&`, white space, a
    /// quote, `<`, `>`, `#` or `;`.
    public static func redactParameters(in text: String) -> String {
        let bytes = Array(text.utf8)
        let names = secretParameters.map { Array($0.utf8) + [UInt8(ascii: "=")] }
        func inName(_ byte: UInt8) -> Bool {
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7a) || byte == 0x5f
                || byte == 0x2d || byte == 0x2e
        }
        let ends: Set<UInt8> = Set("&\"' \t\r\n<>#;".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if i == 0 || !inName(bytes[i - 1]),
                let name = names.first(where: { bytes[i...].starts(with: $0) })
            {
                out += name + Array("***".utf8)
                i += name.count
                while i < bytes.count && !ends.contains(bytes[i]) { i += 1 }
                continue
            }
            out.append(bytes[i])
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `scheme://user:secret@host/...` → `scheme://user:***@host/...`.
    private static func redactUserInfo(_ base: Substring) -> String {
        guard let schemeEnd = base.firstRange(of: "://") else { return String(base) }
        let authorityStart = schemeEnd.upperBound
        let authorityEnd = base[authorityStart...].firstIndex(of: "/") ?? base.endIndex
        let authority = base[authorityStart..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else {
            return String(base)
        }
        return String(base[..<authority.index(after: colon)]) + "***" + String(base[at...])
    }
}
