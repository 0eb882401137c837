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
