import OSThread

/// The triggers and calls of a speaker: MQTT (`mqtt:`), GPIO buttons (`gpio:`), the RTP intercom
/// (`intercom:`) and spoken announcements (`speech:`). Plain values: safe to share between threads.

/// `mqtt:` — the broker Baton connects to.
public struct MQTTConfig: Sendable, Equatable {
    /// `mqtt://host:port` (default port 1883) or `mqtts://host:port` (TLS, default 8883), as written.
    public var broker: String
    public var username: String?
    /// The file holding the password (resolved path); the daemon reads it.
    public var passwordFile: String?
    /// TLS: CA certificate file, client certificate and key (resolved paths).
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    /// Home Assistant MQTT discovery (default true).
    public var discovery: Bool
    /// The discovery prefix Home Assistant listens on (default `homeassistant`).
    public var discoveryPrefix: String
    /// The first topic level (default `baton`): topics are `<prefix>/<device>/...`.
    public var topicPrefix: String
    /// MQTT keepalive (default 30 s).
    public var keepalive: Duration

    public init(
        broker: String, username: String? = nil, passwordFile: String? = nil, caFile: String? = nil,
        certFile: String? = nil, keyFile: String? = nil, discovery: Bool = true,
        discoveryPrefix: String = "homeassistant", topicPrefix: String = "baton", keepalive: Duration = .seconds(30)
    ) {
        self.broker = broker
        self.username = username
        self.passwordFile = passwordFile
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.discovery = discovery
        self.discoveryPrefix = discoveryPrefix
        self.topicPrefix = topicPrefix
        self.keepalive = keepalive
    }

    /// The accepted keepalive: 5 s to 1 h.
    public static let keepaliveRange = Duration.seconds(5)...Duration.seconds(3600)
}

/// What a trigger announces: a sound (or a text to speak) on zones.
public struct AnnounceAction: Sendable, Equatable {
    /// A sound of the sounds directory; exactly one of `sound` and `text` is set.
    public var sound: String?
    /// A text spoken by espeak-ng.
    public var text: String?
    /// Zones, groups or `all`, as written (default `[all]`).
    public var zones: [String]
    /// 0...1 (default 1).
    public var volume: Double

    public init(sound: String? = nil, text: String? = nil, zones: [String] = [GroupConfig.all], volume: Double = 1) {
        self.sound = sound
        self.text = text
        self.zones = zones
        self.volume = volume
    }
}

/// One `gpio:` entry: a button on a GPIO line that triggers an announcement.
public struct GPIOButtonConfig: Sendable, Equatable {
    public enum Edge: String, Sendable, Equatable, CaseIterable, Codable { case rising, falling, both }
    public enum Bias: String, Sendable, Equatable, CaseIterable, Codable {
        case pullUp = "pull-up"
        case pullDown = "pull-down"
        case disabled
        case asIs = "as-is"
    }
    /// `gpiochip0` or a path (`/dev/gpiochip0`).
    public var chip: String
    /// The line offset on the chip (BCM number on a Pi: GPIO17 → 17).
    public var line: Int
    /// Default `falling` (a button to ground with a pull-up).
    public var edge: Edge
    /// Default `pull-up`.
    public var bias: Bias
    /// A selected edge is a press only when the line was quiet (no edge of either kind, accepted or
    /// not) for this long before it; the others are bounce (default 50 ms).
    public var debounce: Duration
    public var announce: AnnounceAction

    public init(
        chip: String = "gpiochip0", line: Int, edge: Edge = .falling, bias: Bias = .pullUp,
        debounce: Duration = .milliseconds(50), announce: AnnounceAction
    ) {
        self.chip = chip
        self.line = line
        self.edge = edge
        self.bias = bias
        self.debounce = debounce
        self.announce = announce
    }

    public static let lineRange = 0...1023
    public static let debounceRange = Duration.zero...Duration.seconds(5)
}

/// `intercom.rtp:` — an Opus RTP receiver whose stream plays as a `call`.
public struct IntercomConfig: Sendable, Equatable {
    /// IPv4 `address:port` to bind (default `0.0.0.0:5004`).
    public var listen: ListenAddress
    /// Zones, groups or `all`, as written (default `[all]`).
    public var zones: [String]
    /// No packet for this long ends the call (default 2 s).
    public var silenceTimeout: Duration
    /// Accept only this RTP payload type (96...127); nil: the first dynamic type seen.
    public var payloadType: Int?
    /// Mono (1, default) or stereo (2) decoding.
    public var channels: Int

    public init(
        listen: ListenAddress = ListenAddress(host: "0.0.0.0", port: 5004), zones: [String] = [GroupConfig.all],
        silenceTimeout: Duration = .seconds(2), payloadType: Int? = nil, channels: Int = 1
    ) {
        self.listen = listen
        self.zones = zones
        self.silenceTimeout = silenceTimeout
        self.payloadType = payloadType
        self.channels = channels
    }

    public static let silenceTimeoutRange = Duration.milliseconds(200)...Duration.seconds(60)
    public static let payloadTypeRange = 96...127
}

/// `speech:` — spoken announcements rendered by espeak-ng.
public struct SpeechConfig: Sendable, Equatable {
    /// The espeak-ng voice (default `en`).
    public var voice: String
    /// Words per minute (default 160).
    public var speed: Int
    /// The espeak-ng executable (default `espeak-ng`, looked up in PATH).
    public var command: String
    /// The longest text accepted, in characters (default 500).
    public var maxLength: Int

    public init(voice: String = "en", speed: Int = 160, command: String = "espeak-ng", maxLength: Int = 500) {
        self.voice = voice
        self.speed = speed
        self.command = command
        self.maxLength = maxLength
    }

    public static let `default` = SpeechConfig()
    public static let speedRange = 80...450
    public static let maxLengthRange = 1...5000

    /// A voice name espeak-ng could know: letters, digits, `-`, `_`, `+` and `/` (e.g. `en-us`,
    /// `de`, `en+f3`), at most 40 characters, not starting with `-` (never an option). The rule for
    /// `speech.voice` and for a request's voice alike.
    public static func isValidVoice(_ voice: String) -> Bool {
        !voice.isEmpty && voice.utf8.count <= 40 && !voice.hasPrefix("-")
            && voice.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D
                    || c == 0x5F || c == 0x2B || c == 0x2F
            }
    }

    /// Why `text` cannot be spoken whatever the settings: nothing but white space, or a control
    /// character other than a tab or a line end (the synthesizer takes the text as a C string: a
    /// NUL would end it there, unseen); nil when it can. For a request's text and a button's alike.
    public static func whyUnspeakable(_ text: String) -> String? {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else { return "text is empty" }
        guard
            let control = trimmed.unicodeScalars.first(where: {
                $0.properties.generalCategory == .control && $0 != "\n" && $0 != "\t" && $0 != "\r"
            })
        else { return nil }
        let hex = String(control.value, radix: 16, uppercase: true)
        return "text has a control character (U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex))"
    }
}
