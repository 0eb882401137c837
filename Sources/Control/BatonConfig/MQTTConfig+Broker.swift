extension MQTTConfig {
    /// Where a broker URL points: TLS or not, host and port.
    ///
    /// A plain value: safe to share between threads.
    public struct Endpoint: Sendable, Equatable {
        /// True for `mqtts://`.
        public var useTLS: Bool
        /// An IPv4 address, an IPv6 address (without brackets) or a host name.
        public var host: String
        /// As written, else 1883 (`mqtt://`) or 8883 (`mqtts://`).
        public var port: UInt16

        public init(useTLS: Bool, host: String, port: UInt16) {
            self.useTLS = useTLS
            self.host = host
            self.port = port
        }

        /// Parses `mqtt://host[:port]` or `mqtts://host[:port]`; the host is IPv4, `[IPv6]` or a name
        /// (no user info), the port 1...65535; no path. `nil` for anything else.
        public init?(parsing text: String) {
            let useTLS: Bool
            let authority: Substring
            if text.hasPrefix("mqtt://") {
                useTLS = false
                authority = text.dropFirst(7)
            } else if text.hasPrefix("mqtts://") {
                useTLS = true
                authority = text.dropFirst(8)
            } else {
                return nil
            }
            // ListenAddress checks host and port; a URL without a port gets the default for the check.
            let hasPort = authority.hasPrefix("[") ? !authority.hasSuffix("]") : authority.contains(":")
            let defaultPort = useTLS ? 8883 : 1883
            guard let address = ListenAddress(parsing: hasPort ? String(authority) : "\(authority):\(defaultPort)")
            else { return nil }
            self.init(useTLS: useTLS, host: address.host, port: address.port)
        }
    }

    /// ``broker`` parsed; never `nil` for a loaded configuration.
    public var endpoint: Endpoint? { Endpoint(parsing: broker) }
}
