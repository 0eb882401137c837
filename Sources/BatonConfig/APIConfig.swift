/// The control API's settings (`api:` in the file).
public struct APIConfig: Sendable, Equatable {
    /// Where the HTTP server listens. Default `127.0.0.1:8470`.
    public var listen: ListenAddress
    /// The largest request body accepted, in bytes. Default 64 KiB.
    public var maxBody: Int

    /// Creates API settings.
    public init(listen: ListenAddress = .default, maxBody: Int = 64 * 1024) {
        self.listen = listen
        self.maxBody = maxBody
    }

    /// `127.0.0.1:8470`, 64 KiB bodies.
    public static let `default` = APIConfig()

    /// The accepted range for `max-body`: 1 byte to 16 MiB.
    public static let maxBodyRange = 1...(16 * 1024 * 1024)
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
                  host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard Self.isIPv4(host) || Self.isHostName(host) else { return nil }
        }
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCIIDigit),
              let port = Int(portText), (1...65535).contains(port) else { return nil }
        self.init(host: String(host), port: UInt16(port))
    }

    /// `host:port`, with brackets around an IPv6 host.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    private static func isIPv4(_ text: Substring) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCIIDigit) && Int(part)! <= 255
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
