import YAML

// `device:`, `mqtt:`, `gpio:`, `intercom:` and `speech:`: what starts announcements and calls.

extension ConfigReader {
    static let mqttKeys = [
        "broker", "username", "password-file", "ca-file", "cert-file", "key-file", "discovery",
        "discovery-prefix", "topic-prefix", "keepalive",
    ]
    static let gpioKeys = ["chip", "line", "edge", "bias", "debounce", "announce"]
    static let announceKeys = ["sound", "text", "zones", "volume"]
    static let intercomKeys = ["rtp"]
    static let rtpKeys = ["listen", "zones", "silence-timeout", "payload-type", "channels"]
    static let speechKeys = ["voice", "speed", "command", "max-length"]

    /// The accepted `intercom.rtp.channels`: mono or stereo.
    static let intercomChannelsRange = 1...2

    /// `mqtt:`; `nil` when it is not a mapping or has no usable `broker` (reported).
    mutating func readMQTT(_ pair: YAMLPair, baseDirectory: String) -> MQTTConfig? {
        let path = ConfigPath.root.appending("mqtt")
        guard let mqtt = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.mqttKeys) else {
            return nil
        }
        let resolve = { (file: String) in BatonConfiguration.resolve(file, against: baseDirectory) }
        let defaults = MQTTConfig(broker: "")
        let broker = required(mqtt, "broker", .mqttBroker)
        let username = optional(mqtt, "username", .string)
        let passwordFile = optional(mqtt, "password-file", .string)
        let caFile = optional(mqtt, "ca-file", .string)
        let certFile = optional(mqtt, "cert-file", .string)
        let keyFile = optional(mqtt, "key-file", .string)
        let discovery = value(mqtt, "discovery", .boolean, default: defaults.discovery)
        let discoveryPrefix = value(mqtt, "discovery-prefix", .topicPrefix, default: defaults.discoveryPrefix)
        let topicPrefix = value(mqtt, "topic-prefix", .topicPrefix, default: defaults.topicPrefix)
        var keepalive = value(mqtt, "keepalive", .duration(MQTTConfig.keepaliveRange), default: defaults.keepalive)
        // The broker is told whole seconds (MQTT's keepalive is a 16-bit count of them): 7.5s was
        // cut to 7s unsaid. Rounded, and said; not refused: a file that started must still start.
        if let given = keepalive, given.wholeNanoseconds % 1_000_000_000 != 0,
            let node = mqtt.values["keepalive"]?.value
        {
            let rounded = Duration.seconds((given.wholeNanoseconds + 500_000_000) / 1_000_000_000)
            warn(
                node.mark, path.appending("keepalive"),
                "\(ConfigSyntax.shortened(node.scalar?.value ?? "")) is not a whole number of seconds: "
                    + "\(ConfigSyntax.format(rounded)) is used (MQTT's keepalive is counted in seconds)")
            keepalive = rounded
        }

        if mqtt.values["password-file"] != nil, mqtt.values["username"] == nil {
            report(
                mqtt.anchor, path,
                "missing required key \"username\": password-file is set, and the broker "
                    + "checks a password together with a user name")
        }
        let tlsKeys = ["ca-file", "cert-file", "key-file"]
        if let broker, let endpoint = MQTTConfig.Endpoint(parsing: broker), !endpoint.useTLS {
            for key in tlsKeys {
                guard let keyPair = mqtt.values[key] else { continue }
                report(
                    keyPair.keyMark, path.appending(key),
                    "only used with TLS, and the broker \(broker) is not "
                        + "mqtts://")
            }
        } else {
            switch (mqtt.values["cert-file"], mqtt.values["key-file"]) {
            case (_?, nil):
                report(
                    mqtt.anchor, path,
                    "missing required key \"key-file\": cert-file is set, and a client "
                        + "certificate needs its private key")
            case (nil, _?):
                report(
                    mqtt.anchor, path,
                    "missing required key \"cert-file\": key-file is set, and a private key "
                        + "needs its client certificate")
            default:
                break
            }
        }
        guard let broker else { return nil }
        return MQTTConfig(
            broker: broker, username: username, passwordFile: passwordFile.map(resolve),
            caFile: caFile.map(resolve), certFile: certFile.map(resolve), keyFile: keyFile.map(resolve),
            discovery: discovery ?? defaults.discovery,
            discoveryPrefix: discoveryPrefix ?? defaults.discoveryPrefix,
            topicPrefix: topicPrefix ?? defaults.topicPrefix, keepalive: keepalive ?? defaults.keepalive)
    }

    /// `gpio:`: a list of buttons, each on its own chip line. Entries with problems are reported and
    /// left out.
    mutating func readGPIO(
        _ pair: YAMLPair, zoneNames: [String], groupNames: [String],
        speech: SpeechConfig
    ) -> [GPIOButtonConfig] {
        let path = ConfigPath.root.appending("gpio")
        guard let nodes = items(of: pair, at: path) else { return [] }
        var buttons: [GPIOButtonConfig] = []
        var owners: [String: ConfigPath] = [:]  // "gpiochip0:17" → the entry that uses it first
        for (index, node) in nodes.enumerated() {
            let entryPath = path.item(index)
            guard let entry = fields(of: node, at: entryPath, anchor: node.mark, allowed: Self.gpioKeys) else {
                continue
            }
            let defaults = GPIOButtonConfig(line: 0, announce: AnnounceAction())
            let chip = value(entry, "chip", .gpioChip, default: defaults.chip)
            let line = required(entry, "line", .integer(GPIOButtonConfig.lineRange))
            let edge = value(entry, "edge", .choice(GPIOButtonConfig.Edge.self, "edge"), default: defaults.edge)
            let bias = value(entry, "bias", .choice(GPIOButtonConfig.Bias.self, "bias"), default: defaults.bias)
            let debounce = value(
                entry, "debounce", .duration(GPIOButtonConfig.debounceRange),
                default: defaults.debounce)
            var announce: AnnounceAction?
            if let announcePair = entry.values["announce"] {
                announce = readAnnounce(
                    announcePair, at: entryPath.appending("announce"), zoneNames: zoneNames,
                    groupNames: groupNames, speech: speech)
            } else if let null = entry.nulls["announce"] {
                report(null.value.mark, entryPath.appending("announce"), "a value is required")
            } else {
                report(entry.anchor, entryPath, "missing required key \"announce\"")
            }
            if let chip, let line {
                let chipName = chip.hasPrefix("/dev/") ? String(chip.dropFirst(5)) : chip
                if let owner = owners["\(chipName):\(line)"] {
                    report(
                        entry.values["line"]?.value.mark, entryPath.appending("line"),
                        "line \(line) of \(chipName) is already used by \(owner)")
                } else {
                    owners["\(chipName):\(line)"] = entryPath
                }
            }
            guard let line, let announce else { continue }
            buttons.append(
                GPIOButtonConfig(
                    chip: chip ?? defaults.chip, line: line, edge: edge ?? defaults.edge,
                    bias: bias ?? defaults.bias, debounce: debounce ?? defaults.debounce,
                    announce: announce))
        }
        return buttons
    }

    /// An `announce:` mapping; `nil` when it is not a mapping or names neither or both of sound and
    /// text (reported).
    private mutating func readAnnounce(
        _ pair: YAMLPair, at path: ConfigPath, zoneNames: [String],
        groupNames: [String], speech: SpeechConfig
    ) -> AnnounceAction? {
        guard let announce = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.announceKeys) else {
            return nil
        }
        let defaults = AnnounceAction()
        let sound = optional(announce, "sound", .soundName)
        let text = optional(announce, "text", .string)
        let zones =
            announce.values["zones"].map {
                zoneList($0, at: path.appending("zones"), zoneNames: zoneNames, groupNames: groupNames)
            } ?? defaults.zones
        let volume = value(announce, "volume", .volume, default: defaults.volume)
        switch (announce.values["sound"], announce.values["text"]) {
        case (_?, let textPair?):
            report(textPair.keyMark, path.appending("text"), "sound and text are both set; set exactly one")
            return nil
        case (nil, nil):
            report(announce.anchor, path, "missing required key \"sound\" or \"text\"")
            return nil
        default:
            break
        }
        // What no speech settings can say is refused here, not at the first press (a visitor's
        // ring, silent): the voice and the program are tried once batond runs (`Triggers`).
        if let text, let why = SpeechConfig.whyUnspeakable(text) {
            report(announce.values["text"]?.value.mark, path.appending("text"), "\(why): a press would say nothing")
        } else if let text, text.count > speech.maxLength {
            report(
                announce.values["text"]?.value.mark, path.appending("text"),
                "the text is \(text.count) characters long, more than speech.max-length (\(speech.maxLength))")
        }
        guard sound != nil || text != nil else { return nil }
        return AnnounceAction(sound: sound, text: text, zones: zones, volume: volume ?? defaults.volume)
    }

    /// `intercom:`; `nil` when it is not a mapping or has no usable `rtp` (reported).
    mutating func readIntercom(_ pair: YAMLPair, zoneNames: [String], groupNames: [String]) -> IntercomConfig? {
        let path = ConfigPath.root.appending("intercom")
        guard let intercom = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.intercomKeys) else {
            return nil
        }
        guard let rtpPair = intercom.values["rtp"] else {
            if let null = intercom.nulls["rtp"] {
                report(null.value.mark, path.appending("rtp"), "a value is required (rtp: {} for the defaults)")
            } else {
                report(
                    intercom.anchor, path,
                    "missing required key \"rtp\" (the only kind of intercom; "
                        + "rtp: {} for the defaults)")
            }
            return nil
        }
        let rtpPath = path.appending("rtp")
        guard let rtp = fields(of: rtpPair.value, at: rtpPath, anchor: rtpPair.keyMark, allowed: Self.rtpKeys) else {
            return nil
        }
        let defaults = IntercomConfig()
        let listen = value(rtp, "listen", .ipv4Address, default: defaults.listen)
        let zones =
            rtp.values["zones"].map {
                zoneList($0, at: rtpPath.appending("zones"), zoneNames: zoneNames, groupNames: groupNames)
            } ?? defaults.zones
        let silenceTimeout = value(
            rtp, "silence-timeout", .duration(IntercomConfig.silenceTimeoutRange),
            default: defaults.silenceTimeout)
        let payloadType = optional(rtp, "payload-type", .integer(IntercomConfig.payloadTypeRange))
        let channels = value(rtp, "channels", .integer(Self.intercomChannelsRange), default: defaults.channels)
        return IntercomConfig(
            listen: listen ?? defaults.listen, zones: zones,
            silenceTimeout: silenceTimeout ?? defaults.silenceTimeout, payloadType: payloadType,
            channels: channels ?? defaults.channels)
    }

    /// `speech:`; the defaults in place of anything wrong (reported).
    mutating func readSpeech(_ pair: YAMLPair) -> SpeechConfig {
        let defaults = SpeechConfig.default
        guard
            let speech = fields(
                of: pair.value, at: ConfigPath.root.appending("speech"), anchor: pair.keyMark,
                allowed: Self.speechKeys)
        else { return defaults }
        return SpeechConfig(
            voice: value(speech, "voice", .voiceName, default: defaults.voice) ?? defaults.voice,
            speed: value(speech, "speed", .integer(SpeechConfig.speedRange), default: defaults.speed) ?? defaults.speed,
            command: value(speech, "command", .command, default: defaults.command) ?? defaults.command,
            maxLength: value(speech, "max-length", .integer(SpeechConfig.maxLengthRange), default: defaults.maxLength)
                ?? defaults.maxLength)
    }
}

extension ConfigPath {
    /// `gpio[2]`: the item at `index` (from 0) of the sequence at this path.
    func item(_ index: Int) -> ConfigPath {
        var components = components
        components[components.count - 1] += "[\(index)]"
        return ConfigPath(components: components)
    }
}

// MARK: - Value kinds

extension ValueKind {
    /// `device:`: `[a-z0-9_-]+`, 1...64 characters.
    static var deviceName: ValueKind<String> {
        ValueKind<String>(name: "a name") { text in
            guard ZoneConfig.isValidName(text) else {
                return .failure(
                    ValueProblem(
                        message: "device name \(ConfigSyntax.quoted(text)) must match [a-z0-9_-]+ (it appears in "
                            + "MQTT topics and Home Assistant)"))
            }
            guard text.count <= 64 else {
                return .failure(
                    ValueProblem(message: "device name is \(text.count) characters long (expected at most 64)"))
            }
            return .success(text)
        }
    }

    /// `true` or `false`.
    static var boolean: ValueKind<Bool> {
        ValueKind<Bool>(name: "a boolean") { text in
            switch text {
            case "true": .success(true)
            case "false": .success(false)
            default:
                .failure(
                    ValueProblem(message: "\(ConfigSyntax.quoted(text)) is not a boolean (expected true or false)"))
            }
        }
    }

    /// An MQTT broker URL, `mqtt://host[:port]` or `mqtts://host[:port]`.
    static var mqttBroker: ValueKind<String> {
        ValueKind<String>(name: "a URL") { text in
            if MQTTConfig.Endpoint(parsing: text) != nil { return .success(text) }
            if text.contains("@") {
                return .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) has a user name or password in it (set username "
                            + "and password-file instead)"))
            }
            return .failure(
                ValueProblem(
                    message: "\(ConfigSyntax.quoted(text)) is not a broker URL (expected mqtt://host[:port] or "
                        + "mqtts://host[:port], e.g. mqtt://127.0.0.1:1883)"))
        }
    }

    /// An MQTT topic prefix: one or more non-empty levels separated by `/`, without the wildcards.
    static var topicPrefix: ValueKind<String> {
        ValueKind<String>(name: "a topic prefix") { text in
            let levels = text.split(separator: "/", omittingEmptySubsequences: false)
            guard !text.isEmpty, levels.allSatisfy({ !$0.isEmpty }),
                !text.contains(where: { $0 == "+" || $0 == "#" || $0.isWhitespace || $0 == "\0" })
            else {
                return .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) is not a topic prefix (expected levels separated by "
                            + "/, without +, #, spaces or empty levels, e.g. baton)"))
            }
            return .success(text)
        }
    }

    /// A GPIO chip: `gpiochipN` or an absolute path under `/dev/`.
    static var gpioChip: ValueKind<String> {
        ValueKind<String>(name: "a GPIO chip") { text in
            let number = text.hasPrefix("gpiochip") ? text.dropFirst(8) : ""
            let isName = !number.isEmpty && number.count <= 4 && number.allSatisfy(\.isASCIIDigit)
            let isPath =
                text.hasPrefix("/dev/") && text.count > 5 && !text.contains("..")
                && !text.contains(where: \.isWhitespace)
            guard isName || isPath else {
                return .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) is not a GPIO chip (expected gpiochipN or a path "
                            + "such as /dev/gpiochip0)"))
            }
            return .success(text)
        }
    }

    /// A sound of the sounds directory: the rule the daemon's sound library applies (letters, digits,
    /// `-`, `_` and `.`, at most 64, not starting with `.`, no `..`), so a name accepted here can be played.
    static var soundName: ValueKind<String> {
        ValueKind<String>(name: "a sound name") { text in
            let isValid =
                !text.isEmpty && text.utf8.count <= 64 && !text.hasPrefix(".") && !text.contains("..")
                && text.allSatisfy { $0.isASCIILetterOrDigit || $0 == "-" || $0 == "_" || $0 == "." }
            return isValid
                ? .success(text)
                : .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) is not a sound name (expected a file name in the sounds "
                            + "directory without its extension: letters, digits, -, _ and ., e.g. doorbell)"))
        }
    }

    /// An IPv4 `address:port` (`0.0.0.0:5004`); host names and IPv6 are not accepted.
    static var ipv4Address: ValueKind<ListenAddress> {
        ValueKind<ListenAddress>(name: "an address") { text in
            // ListenAddress reads all-digit dotted hosts only as IPv4, never as names.
            guard let address = ListenAddress(parsing: text),
                address.host.allSatisfy({ $0.isASCIIDigit || $0 == "." })
            else {
                return .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) is not an IPv4 address and port (expected e.g. "
                            + "0.0.0.0:5004; host names and IPv6 are not accepted)"))
            }
            return .success(address)
        }
    }

    /// An espeak-ng voice (`en`, `en-us`, `en+f3`): the rule a request's voice is held to
    /// (`SpeechConfig.isValidVoice`). Looser here, a voice such as `en.us` passed the file and
    /// failed at every text spoken (a doorbell's first ring, silent).
    static var voiceName: ValueKind<String> {
        ValueKind<String>(name: "a voice") { text in
            guard SpeechConfig.isValidVoice(text) else {
                return .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) is not a voice name (expected e.g. en, en-us or "
                            + "en+f3: letters, digits, -, _, + and /, at most 40 characters, not starting with -)"))
            }
            return .success(text)
        }
    }

    /// A program: a name looked up in PATH (`espeak-ng`) or an absolute path, without arguments.
    static var command: ValueKind<String> {
        ValueKind<String>(name: "a command") { text in
            guard !text.isEmpty, !text.hasPrefix("-"), !text.contains(where: \.isWhitespace),
                !text.contains("/") || text.hasPrefix("/")
            else {
                return .failure(
                    ValueProblem(
                        message: "\(ConfigSyntax.quoted(text)) is not a command (expected a program name looked up "
                            + "in PATH, e.g. espeak-ng, or an absolute path; no arguments)"))
            }
            return .success(text)
        }
    }
}
