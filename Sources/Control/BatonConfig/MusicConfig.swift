/// Streamed music (`music:` in the file): where it comes from and how it plays.
///
/// The configuration holds no secret values: the Subsonic password is named by a file or an
/// environment variable that the daemon reads, never by the file itself.
public struct MusicConfig: Sendable, Equatable {
    /// ReplayGain applied to streamed tracks.
    public enum ReplayGain: String, Sendable, Equatable, CaseIterable, Codable {
        case off
        /// Each track at its own loudness.
        case track
        /// Albums at their album loudness (quiet tracks stay quiet).
        case album
    }

    /// The Subsonic (or OpenSubsonic, e.g. Navidrome) server.
    public var subsonic: SubsonicConfig
    /// Default `track`.
    public var replayGain: ReplayGain
    /// Where music plays when a request names no zones: zones, groups or `all`, as written. Default
    /// `[all]`. Pass it to ``BatonConfiguration/expand(_:)`` for the zone names.
    public var zones: [String]
    /// How long a failed stream is retried before giving up (`retry.limit`). Default 2 minutes.
    public var retryLimit: Duration

    /// Creates music settings; the defaults are those of the file format.
    public init(
        subsonic: SubsonicConfig, replayGain: ReplayGain = .track, zones: [String] = [GroupConfig.all],
        retryLimit: Duration = .seconds(120)
    ) {
        self.subsonic = subsonic
        self.replayGain = replayGain
        self.zones = zones
        self.retryLimit = retryLimit
    }

    /// The accepted `retry.limit` values: 0 (no retry) to 1 hour.
    public static let retryLimitRange = Duration.zero...Duration.seconds(3600)
}

/// A Subsonic server (`music.subsonic:`).
public struct SubsonicConfig: Sendable, Equatable {
    /// The stream format asked of the server: the original file (`raw`) or a transcoding Baton decodes.
    public enum StreamFormat: String, Sendable, Equatable, CaseIterable, Codable {
        case opus
        case raw
        case mp3
        case flac
    }

    /// Where the password is; the daemon reads it, the loader never does.
    public enum Password: Sendable, Equatable {
        /// A file holding the password (`password-file`), resolved like other paths. Trailing
        /// newlines are the daemon's to strip.
        case file(String)
        /// An environment variable holding it (`password-env`).
        case environment(String)
    }

    /// `http(s)://host[:port][/path]`, as written.
    public var url: String
    /// The Subsonic user name.
    public var user: String
    public var password: Password
    /// Default `opus`.
    public var format: StreamFormat
    /// The highest bit rate asked of the server, in kbit/s, 32...1411. Default 128.
    public var maxBitrate: Int
    /// A file holding an OpenSubsonic API key (`api-key-file`), resolved like other paths.
    public var apiKeyFile: String?

    /// Creates server settings; the defaults are those of the file format.
    public init(
        url: String, user: String, password: Password, format: StreamFormat = .opus, maxBitrate: Int = 128,
        apiKeyFile: String? = nil
    ) {
        self.url = url
        self.user = user
        self.password = password
        self.format = format
        self.maxBitrate = maxBitrate
        self.apiKeyFile = apiKeyFile
    }

    /// The accepted `max-bitrate` values in kbit/s (1411 is CD audio).
    public static let maxBitrateRange = 32...1411

    /// True for `http://` or `https://`, a host (IPv4, `[IPv6]` or a name, no user info), an optional
    /// port 1...65535 and an optional path starting with `/`, without spaces, query or fragment.
    public static func isValidURL(_ text: String) -> Bool {
        let rest: Substring
        if text.hasPrefix("http://") {
            rest = text.dropFirst(7)
        } else if text.hasPrefix("https://") {
            rest = text.dropFirst(8)
        } else {
            return false
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        let path = rest[slash...]
        guard !path.contains(where: { $0 == "?" || $0 == "#" || $0.isWhitespace }) else { return false }
        // ListenAddress checks host and port; a URL without a port gets one for the check.
        let hasPort = authority.hasPrefix("[") ? !authority.hasSuffix("]") : authority.contains(":")
        return ListenAddress(parsing: hasPort ? String(authority) : authority + ":80") != nil
    }

    /// True for an environment variable name: ASCII letters, digits and `_`, not starting with a digit.
    public static func isValidEnvironmentName(_ name: String) -> Bool {
        guard let first = name.first, !first.isASCIIDigit else { return false }
        return name.allSatisfy { $0.isASCIILetterOrDigit || $0 == "_" }
    }
}
