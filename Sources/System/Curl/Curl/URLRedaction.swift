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
