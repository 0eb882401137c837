import YAML

/// `announce:` — announcements played from a URL (`POST /api/v1/announce {"url": …}`, Home
/// Assistant's TTS). A plain value: safe to share between threads.
public struct AnnounceConfig: Sendable, Equatable {
    /// The hosts a URL announcement may be fetched from (lower case; a name, an IPv4 address or an
    /// IPv6 address without brackets). Empty (the default): URL announcements are refused.
    public var allowURLHosts: [String]
    /// The largest file fetched, in bytes (default 16 MiB): a larger `Content-Length` is refused,
    /// and a transfer without one stops there.
    public var maxBytes: Int
    /// The longest a URL announcement plays (default 5 minutes); the rest is cut.
    public var maxDuration: Duration
    /// How long the server may take to answer with the first bytes (default 10 s).
    public var firstByteTimeout: Duration

    public init(
        allowURLHosts: [String] = [], maxBytes: Int = 16 << 20, maxDuration: Duration = .seconds(300),
        firstByteTimeout: Duration = .seconds(10)
    ) {
        self.allowURLHosts = allowURLHosts
        self.maxBytes = maxBytes
        self.maxDuration = maxDuration
        self.firstByteTimeout = firstByteTimeout
    }

    public static let `default` = AnnounceConfig()
    public static let maxBytesRange = 64 << 10...1 << 30
    public static let maxDurationRange = Duration.seconds(1)...Duration.seconds(3600)
    public static let firstByteTimeoutRange = Duration.milliseconds(100)...Duration.seconds(60)

    /// Whether `host` (as written in a URL: any case, IPv6 in brackets) is allowed.
    public func allows(host: String) -> Bool {
        var h = host.lowercased()
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        return allowURLHosts.contains(h)
    }
}

extension ConfigReader {
    static let announceSectionKeys = ["allow-url-hosts", "max-bytes", "max-duration", "first-byte-timeout"]

    /// `announce:`; the defaults in place of anything wrong (reported).
    mutating func readAnnounceSection(_ pair: YAMLPair) -> AnnounceConfig {
        let defaults = AnnounceConfig.default
        let path = ConfigPath.root.appending("announce")
        guard let section = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.announceSectionKeys)
        else {
            return defaults
        }
        var hosts: [String] = []
        if let list = section.values["allow-url-hosts"],
            let nodes = items(of: list, at: path.appending("allow-url-hosts"))
        {
            for node in nodes {
                guard let host = convert(node, at: path.appending("allow-url-hosts"), .urlHost) else { continue }
                if hosts.contains(host) {
                    report(node.mark, path.appending("allow-url-hosts"), "\(host) is listed twice")
                } else {
                    hosts.append(host)
                }
            }
        }
        return AnnounceConfig(
            allowURLHosts: hosts,
            maxBytes: value(section, "max-bytes", .byteSize(AnnounceConfig.maxBytesRange), default: defaults.maxBytes)
                ?? defaults.maxBytes,
            maxDuration: value(
                section, "max-duration", .duration(AnnounceConfig.maxDurationRange), default: defaults.maxDuration)
                ?? defaults.maxDuration,
            firstByteTimeout: value(
                section, "first-byte-timeout", .duration(AnnounceConfig.firstByteTimeoutRange),
                default: defaults.firstByteTimeout) ?? defaults.firstByteTimeout)
    }
}

extension ValueKind {
    /// A host a URL may name: a DNS name, an IPv4 address, or an IPv6 address (brackets optional);
    /// no scheme, port or path. Lower-cased.
    static var urlHost: ValueKind<String> {
        ValueKind<String>(name: "a host") { text in
            var host = text.lowercased()
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            let isIPv6 = host.contains(":") && host.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
            let isName =
                !host.isEmpty && host.count <= 253
                && host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
                    !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                        && label.allSatisfy { $0.isASCIILetterOrDigit || $0 == "-" }
                }
            guard isIPv6 || isName else {
                return .failure(
                    ValueProblem(
                        message:
                            "\(ConfigSyntax.quoted(text)) is not a host (expected a name like ha.local or an address, "
                            + "without scheme, port or path)"))
            }
            return .success(host)
        }
    }
}

extension AnnounceConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case allowURLHosts = "allow-url-hosts"
        case maxBytes = "max-bytes"
        case maxDuration = "max-duration"
        case firstByteTimeout = "first-byte-timeout"
    }

    /// `{"allow-url-hosts": ["ha.local"], "max-bytes": "16MiB", "max-duration": "5m", …}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(allowURLHosts, forKey: .allowURLHosts)
        try container.encode(ConfigSyntax.formatByteSize(maxBytes), forKey: .maxBytes)
        try container.encode(ConfigSyntax.format(maxDuration), forKey: .maxDuration)
        try container.encode(ConfigSyntax.format(firstByteTimeout), forKey: .firstByteTimeout)
    }
}
