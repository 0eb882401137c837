import AudioCore
import Glibc

/// A zone heard on Snapcast speakers (`zones.<name>.snapcast:`): Baton writes the zone's mix into a
/// snapserver stream source, and keeps the zone's speakers (snapclients) grouped on that stream.
///
/// A plain value: safe to share between threads.
public struct SnapcastConfig: Sendable, Equatable {
    /// One speaker of the zone (`clients:` item): a snapclient host ID, with optional trims.
    public struct Client: Sendable, Equatable {
        /// The client's host ID (`snapclient --hostID`).
        public var id: String
        /// The speaker's volume, 0...1, set each time it connects; nil leaves it to the listener.
        public var volume: Double?
        /// How much earlier the speaker plays (its DAC's delay), 0...2 s in whole ms; nil leaves it.
        public var latency: Duration?

        public init(id: String, volume: Double? = nil, latency: Duration? = nil) {
            self.id = id
            self.volume = volume
            self.latency = latency
        }
    }

    /// Where Baton writes the zone's raw S16_LE PCM (`localhost` is read as 127.0.0.1).
    public var source: StreamTarget
    /// snapserver's JSON-RPC over HTTP (`http://127.0.0.1:1780`); nil: Baton only feeds the stream.
    public var control: String?
    /// The stream's name in snapserver (`name=` of the source). Default: the zone's name.
    public var stream: String
    /// The speakers that form the zone (needs `control`).
    public var clients: [Client]
    /// The server's `[stream] buffer`: how long after Baton mixes a frame it is heard. Must match
    /// the server's setting. Default 1000 ms.
    public var buffer: Duration

    public init(
        source: StreamTarget, control: String? = nil, stream: String, clients: [Client] = [],
        buffer: Duration = .milliseconds(1000)
    ) {
        self.source = source
        self.control = control
        self.stream = stream
        self.clients = clients
        self.buffer = buffer
    }

    /// Whether Baton keeps the speakers grouped (there is a `control` URL and speakers): then its
    /// answers also tell that the server runs, and the zone's audio waits for that after each
    /// connect (`StreamSpec.awaitsServer`).
    public var keepsSpeakers: Bool { control != nil && !clients.isEmpty }

    /// The accepted server buffers.
    public static let bufferRange = Duration.milliseconds(20)...Duration.seconds(10)
    /// The accepted latency trims.
    public static let latencyRange = Duration.zero...Duration.seconds(2)

    /// The buffer in frames at `rate`.
    public func bufferFrames(rate: Int) -> Int { ZoneConfig.frames(buffer, rate: rate) }

    /// Reads `tcp://HOST:PORT` (numeric host, `[v6]`, or `localhost`) or an absolute FIFO path;
    /// the reason otherwise.
    static func parseSource(_ text: String) -> Result<StreamTarget, ValueProblem> {
        let expected =
            "expected tcp://ADDRESS:PORT (a numeric address, e.g. tcp://127.0.0.1:4953) or the absolute path of the source's FIFO"
        if text.hasPrefix("/") { return .success(.fifo(path: text)) }
        guard text.hasPrefix("tcp://") else {
            return .failure(ValueProblem(message: "\(ConfigSyntax.quoted(text)): \(expected)"))
        }
        var rest = Substring(text.dropFirst(6))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        let host: Substring
        let portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]"), rest[rest.index(after: close)...].hasPrefix(":") else {
                return .failure(ValueProblem(message: "\(ConfigSyntax.quoted(text)): \(expected)"))
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            portText = rest[rest.index(close, offsetBy: 2)...]
        } else {
            guard let colon = rest.lastIndex(of: ":") else {
                return .failure(
                    ValueProblem(message: "\(ConfigSyntax.quoted(text)): the port is missing (\(expected))"))
            }
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        }
        guard let port = Int(portText), (1...65535).contains(port) else {
            return .failure(
                ValueProblem(
                    message: "\(ConfigSyntax.quoted(text)): \(ConfigSyntax.quoted(portText)) is not a port (1...65535)")
            )
        }
        if host == "localhost" { return .success(.tcp(host: "127.0.0.1", port: port)) }
        guard isNumericAddress(host) else {
            if host.allSatisfy({ $0.isASCIIDigit || $0 == "." }) {
                return .failure(
                    ValueProblem(
                        message:
                            "\(ConfigSyntax.quoted(text)): \(ConfigSyntax.quoted(host)) is not an IPv4 address (four numbers 0...255, none with a leading zero)"
                    ))
            }
            return .failure(
                ValueProblem(
                    message:
                        "\(ConfigSyntax.quoted(text)): \(ConfigSyntax.quoted(host)) is not a numeric address (Baton's output thread never resolves names; write the server's IP address)"
                ))
        }
        return .success(.tcp(host: String(host), port: port))
    }

    /// True for a dotted IPv4 address or an IPv6 address, as the output's connect will read it
    /// (`inet_pton`: `1:2` is hex and colons, but not an address).
    static func isNumericAddress(_ host: Substring) -> Bool {
        // Leading zeros refused, as `inet_pton` does (`010.0.0.5` passed here and failed every connect).
        if ListenAddress.isIPv4(host) { return true }
        var address = in6_addr()
        return host.contains(":") && inet_pton(AF_INET6, String(host), &address) == 1
    }
}
