/// A broker address parsed from `mqtt://host[:port]` or `mqtts://host[:port]`.
///
/// `mqtts` selects TLS. The port defaults to 1883 (`mqtt`) or 8883 (`mqtts`). An IPv6 literal is
/// written in brackets (`mqtt://[::1]:1883`). Credentials never go in the URL (the password is read
/// from a file by the daemon), and a path or query is refused rather than ignored.
///
/// A plain value: safe to use from any thread.
public struct MQTTURL: Sendable, Equatable, CustomStringConvertible {
    /// The host name or address, without brackets.
    public var host: String
    /// The TCP port, 1...65535.
    public var port: Int
    /// Whether the connection uses TLS (`mqtts://`).
    public var usesTLS: Bool

    /// The default port of plain MQTT.
    public static let defaultPort = 1883
    /// The default port of MQTT over TLS.
    public static let defaultTLSPort = 8883

    /// Creates an address from its parts (not validated; use ``init(parsing:)`` for user input).
    public init(host: String, port: Int, usesTLS: Bool = false) {
        self.host = host
        self.port = port
        self.usesTLS = usesTLS
    }

    /// Parses `text`.
    /// - Throws: ``MQTTError/invalidURL(url:reason:)`` saying what is wrong: the scheme, a missing
    ///   host, a bad port, credentials, a path.
    public init(parsing text: String) throws(MQTTError) {
        func fail(_ reason: String) -> MQTTError { .invalidURL(url: text, reason: reason) }
        let parts = text.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw fail("expected mqtt://host:port or mqtts://host:port") }
        let scheme = parts[0].lowercased()
        switch scheme {
        case "mqtt": usesTLS = false
        case "mqtts": usesTLS = true
        default: throw fail("the scheme must be mqtt:// or mqtts://, not \"\(scheme)://\"")
        }
        var rest = parts[1]
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("@") {
            throw fail("credentials do not belong in the URL: set the username and the password file")
        }
        if let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            throw fail("unexpected \"\(rest[slash...])\" after the host and port")
        }
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw fail("the IPv6 address has no closing \"]\"") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("unexpected \"\(after)\" after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.firstIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        guard !host.isEmpty else { throw fail("the host is missing") }
        guard !host.contains(where: { $0.isWhitespace || $0 == ":" && !rest.hasPrefix("[") }) else {
            throw fail("the host \"\(host)\" is not a host name or address")
        }
        if let portText {
            guard let port = Int(portText), (1...65535).contains(port) else {
                throw fail("the port \"\(portText)\" is not a number from 1 to 65535")
            }
            self.port = port
        } else {
            port = usesTLS ? Self.defaultTLSPort : Self.defaultPort
        }
    }

    /// `mqtt://host:port`, or `mqtts://[::1]:8883`.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(usesTLS ? "mqtts" : "mqtt")://\(shownHost):\(port)"
    }
}
