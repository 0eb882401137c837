import Glibc

/// The control API's settings (`api:` in the file).
public struct APIConfig: Sendable, Equatable {
    /// Where the HTTP server listens. Default `127.0.0.1:8470`.
    public var listen: ListenAddress
    /// The largest request body accepted, in bytes. Default 64 KiB.
    public var maxBody: Int
    /// The file holding the bearer token API clients must send (`token-file`), resolved like other
    /// paths; required when ``requiresToken``. The daemon reads it; the configuration holds only the path.
    public var tokenFile: String?
    /// More names the API answers to (`allowed-hosts`), beside its own (the listen address,
    /// `localhost`, the loopback addresses, the machine's host names and addresses): a request whose
    /// `Host` is none of them is refused (DNS rebinding). Lowercased host names or addresses, no port.
    public var allowedHosts: [String]
    /// Connections at once from one client address (`connections-per-client`, of the 64 in all):
    /// one host cannot take every slot from the others. Default 16; behind a reverse proxy every
    /// client comes from the proxy's address, which may need more.
    public var connectionsPerClient: Int

    /// Creates API settings.
    public init(
        listen: ListenAddress = .default, maxBody: Int = 64 * 1024, tokenFile: String? = nil,
        allowedHosts: [String] = [], connectionsPerClient: Int = 16
    ) {
        self.listen = listen
        self.maxBody = maxBody
        self.tokenFile = tokenFile
        self.allowedHosts = allowedHosts
        self.connectionsPerClient = connectionsPerClient
    }

    /// True when the API is reached from beyond this machine — it listens on an address that is not
    /// a loopback one, or `allowed-hosts` names hosts it is reached by (a reverse proxy's name in
    /// front of a loopback listener: every request then comes from the proxy, on loopback) — so
    /// anyone who can reach it could drive the speakers: a token is then required.
    public var requiresToken: Bool { !listen.isLoopback || !allowedHosts.isEmpty }

    /// `127.0.0.1:8470`, 64 KiB bodies.
    public static let `default` = APIConfig()

    /// The accepted range for `max-body`: 1 byte to 16 MiB.
    public static let maxBodyRange = 1...(16 * 1024 * 1024)
    /// The accepted range for `connections-per-client` (64 connections in all).
    public static let connectionsPerClientRange = 1...64
}

/// A `host:port` pair. The host is an IPv4 address, a bracketed IPv6 address (`[::1]`) or a host
/// name; the port is 1...65535.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host, without brackets for IPv6.
    public var host: String
    /// The TCP port.
    public var port: UInt16

    /// Creates an address without checking it.
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// `127.0.0.1:8470`.
    public static let `default` = ListenAddress(host: "127.0.0.1", port: 8470)

    /// Parses `host:port`, `[v6]:port`; `nil` if the text is not one.
    public init?(parsing text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
            guard !host.isEmpty, host.contains(":"),
                host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." })
            else { return nil }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard Self.isIPv4(host) || Self.isHostName(host) else { return nil }
        }
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCIIDigit),
            let port = Int(portText), (1...65535).contains(port)
        else { return nil }
        self.init(host: String(host), port: UInt16(port))
    }

    /// True for an IPv4 or IPv6 address a socket can take (`inet_pton`: `127.000.000.001` and
    /// `[1:2]` are not), false for a host name.
    public var isNumeric: Bool {
        var address = in6_addr()
        return inet_pton(host.contains(":") ? AF_INET6 : AF_INET, host, &address) == 1
    }

    /// True for `localhost`, 127.0.0.0/8 and `::1` (in any spelling): addresses only this machine reaches.
    public var isLoopback: Bool {
        if host.lowercased() == "localhost" { return true }
        if Self.isIPv4(Substring(host)) { return host.hasPrefix("127.") }
        return Self.ipv6Groups(host) == [0, 0, 0, 0, 0, 0, 0, 1]
    }

    /// The eight 16-bit groups of an IPv6 address in hex notation, with `::` expanded; `nil` for
    /// anything else (including embedded IPv4, which is never treated as loopback).
    private static func ipv6Groups(_ text: String) -> [Int]? {
        let halves = text.split(separator: "::", maxSplits: 1, omittingEmptySubsequences: false)
            .map { $0.isEmpty ? [] : $0.split(separator: ":", omittingEmptySubsequences: false) }
        guard halves.count <= 2 else { return nil }
        var groups: [Int] = []
        for (position, half) in halves.enumerated() {
            for part in half {
                guard (1...4).contains(part.count), let value = Int(part, radix: 16) else { return nil }
                groups.append(value)
            }
            if position == 0, halves.count == 2 {
                let missing = 8 - halves.map(\.count).reduce(0, +)
                guard missing >= 1 else { return nil }
                groups += Array(repeating: 0, count: missing)
            }
        }
        return groups.count == 8 ? groups : nil
    }

    /// `host:port`, with brackets around an IPv6 host.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Four decimal numbers 0…255 joined by dots (`192.168.1.20`), none with a leading zero
    /// (`inet_pton`, which batond connects and listens with, refuses `010.0.0.1`).
    static func isIPv4(_ text: Substring) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy { part in
                !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCIIDigit) && Int(part)! <= 255
                    && (part.count == 1 || part.first != "0")
            }
    }

    private static func isHostName(_ text: Substring) -> Bool {
        guard !text.isEmpty, text.count <= 253 else { return false }
        // All-numeric dotted names are malformed IPv4 addresses, not host names.
        if text.allSatisfy({ $0.isASCIIDigit || $0 == "." }) { return false }
        return text.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCIILetterOrDigit || $0 == "-" }
        }
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
    var isASCIILetterOrDigit: Bool { isASCII && (isLetter || isNumber) }
}
