/// Where a Subsonic server is and how to talk to it.
///
/// The daemon builds this from its configuration (reading the password from a `password-file` or
/// `password-env`); this module never reads files or the environment. ``description`` never shows the
/// password or the API key.
///
/// A plain value: safe to use from any thread.
public struct SubsonicSettings: Sendable, Equatable, CustomStringConvertible {
    /// The server's base URL, e.g. `http://192.168.1.5:4533` or `https://host/music` (no `/rest`).
    public var url: String
    /// The user name.
    public var user: String
    /// The password: used for token auth (`t = md5(password + salt)`), or sent hex-encoded
    /// (`p=enc:…`) to servers that refuse tokens.
    public var password: String
    /// An OpenSubsonic API key, used instead of user and password when the server advertises the
    /// `apiKeyAuthentication` extension.
    public var apiKey: String?
    /// The format to ask `stream` for (`opus`, `mp3`, `raw` for the original file), or nil for the
    /// server's default.
    public var format: String?
    /// The bit rate cap in kbit/s to send with `format` (0 means no limit), or nil.
    public var maxBitRate: Int?
    /// The client name sent as `c=`; servers show it in their "now playing" lists.
    public var clientName: String

    /// Creates a configuration.
    public init(
        url: String, user: String, password: String, apiKey: String? = nil, format: String? = nil,
        maxBitRate: Int? = nil, clientName: String = "baton"
    ) {
        self.url = url
        self.user = user
        self.password = password
        self.apiKey = apiKey
        self.format = format
        self.maxBitRate = maxBitRate
        self.clientName = clientName
    }

    /// `user@url (format opus, max 128 kbit/s)`: no secrets.
    public var description: String {
        var extras: [String] = []
        if let format { extras.append("format \(format)") }
        if let maxBitRate { extras.append("max \(maxBitRate) kbit/s") }
        if apiKey != nil { extras.append("API key") }
        return "\(user)@\(url)" + (extras.isEmpty ? "" : " (\(extras.joined(separator: ", ")))")
    }
}

extension SubsonicSettings {
    /// `url` as the server it names, for telling servers apart: the scheme and host in lower case,
    /// the default port (80 for http, 443 for https) dropped, trailing `/` stripped (the client
    /// strips them when it calls); the path otherwise as written. `http://NAS:80/music/` is the
    /// server `http://nas/music` is. Compared as written, a URL given a trailing slash or its host
    /// in capitals was "another server": the saved queue refused, the kept scrobbles dropped.
    public static func serverIdentity(url: String) -> String {
        var text = Substring(url)
        while text.hasSuffix("/") { text.removeLast() }
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return String(text) }
        let scheme = text[..<colon].lowercased()
        let rest = text[text.index(colon, offsetBy: 3)...]
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var authority = rest[..<end]
        var userInfo = ""
        if let at = authority.lastIndex(of: "@") {
            userInfo = String(authority[...at])
            authority = authority[authority.index(after: at)...]
        }
        var host = authority.lowercased()
        let defaultPort = scheme == "http" ? ":80" : scheme == "https" ? ":443" : nil
        if let defaultPort, host.hasSuffix(defaultPort), !host.hasSuffix("]" + defaultPort.dropFirst()) {
            host.removeLast(defaultPort.count)
        }
        return scheme + "://" + userInfo + host + rest[end...]
    }
}
