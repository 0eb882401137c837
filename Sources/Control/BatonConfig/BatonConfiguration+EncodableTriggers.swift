// The effective configuration as JSON (`GET /api/v1/config`), continued: triggers, calls, speech,
// external sources (see BatonConfiguration+Encodable.swift).

import OSThread

extension MQTTConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case broker, username
        case passwordFile = "password-file"
        case caFile = "ca-file"
        case certFile = "cert-file"
        case keyFile = "key-file"
        case discovery
        case discoveryPrefix = "discovery-prefix"
        case topicPrefix = "topic-prefix"
        case keepalive
    }

    /// The broker with the password's file (never a password); unset optional values are left out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(broker, forKey: .broker)
        try container.encodeIfPresent(username, forKey: .username)
        try container.encodeIfPresent(passwordFile, forKey: .passwordFile)
        try container.encodeIfPresent(caFile, forKey: .caFile)
        try container.encodeIfPresent(certFile, forKey: .certFile)
        try container.encodeIfPresent(keyFile, forKey: .keyFile)
        try container.encode(discovery, forKey: .discovery)
        try container.encode(discoveryPrefix, forKey: .discoveryPrefix)
        try container.encode(topicPrefix, forKey: .topicPrefix)
        try container.encode(ConfigSyntax.format(keepalive), forKey: .keepalive)
    }
}

extension GPIOButtonConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case chip, line, edge, bias, debounce, announce
    }

    /// `{"chip": "gpiochip0", "line": 17, "edge": "falling", "bias": "pull-up", "debounce": "50ms", "announce": {...}}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(chip, forKey: .chip)
        try container.encode(line, forKey: .line)
        try container.encode(edge, forKey: .edge)
        try container.encode(bias, forKey: .bias)
        try container.encode(ConfigSyntax.format(debounce), forKey: .debounce)
        try container.encode(announce, forKey: .announce)
    }
}

extension AnnounceAction: Encodable {
    private enum CodingKeys: String, CodingKey {
        case sound, text, zones, volume
    }

    /// `{"sound": "doorbell", "zones": ["all"], "volume": "100%"}`, or `text` in place of `sound`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(sound, forKey: .sound)
        try container.encodeIfPresent(text, forKey: .text)
        try container.encode(zones, forKey: .zones)
        try container.encode(ConfigSyntax.formatVolume(volume), forKey: .volume)
    }
}

extension IntercomConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case rtp
    }

    private enum RTPKeys: String, CodingKey {
        case listen, zones
        case silenceTimeout = "silence-timeout"
        case payloadType = "payload-type"
        case channels
    }

    /// `{"rtp": {"listen": "0.0.0.0:5004", "zones": ["all"], "silence-timeout": "2s", "channels": 1}}`, with
    /// `payload-type` when set.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        var rtp = container.nestedContainer(keyedBy: RTPKeys.self, forKey: .rtp)
        try rtp.encode(listen.description, forKey: .listen)
        try rtp.encode(zones, forKey: .zones)
        try rtp.encode(ConfigSyntax.format(silenceTimeout), forKey: .silenceTimeout)
        try rtp.encodeIfPresent(payloadType, forKey: .payloadType)
        try rtp.encode(channels, forKey: .channels)
    }
}

extension SpeechConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case voice, speed, command
        case maxLength = "max-length"
    }

    /// `{"voice": "en", "speed": 160, "command": "espeak-ng", "max-length": 500}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(voice, forKey: .voice)
        try container.encode(speed, forKey: .speed)
        try container.encode(command, forKey: .command)
        try container.encode(maxLength, forKey: .maxLength)
    }
}

extension ExternalSourcesConfig: Encodable {
    /// `{"socket": "/run/baton/sources.sock", "mpd": {"class": "music", ...}}`, the socket when set.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyCodingKey.self)
        try container.encodeIfPresent(socket, forKey: AnyCodingKey("socket"))
        for source in sources { try container.encode(source, forKey: AnyCodingKey(source.name)) }
    }
}

extension ExternalSourceConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case `class`, zones, control
        case whenInterrupted = "when-interrupted"
        case idleRelease = "idle-release"
    }
    private enum ControlKeys: String, CodingKey { case mpris, bus, mpd, command }
    private enum CommandKeys: String, CodingKey { case pause, resume }

    /// `{"class": "music", "zones": ["all"], "when-interrupted": "pause", "control": {"mpd": "127.0.0.1:6600"},
    /// "idle-release": "5s"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sourceClass, forKey: .class)
        try container.encode(zones, forKey: .zones)
        try container.encode(whenInterrupted.rawValue, forKey: .whenInterrupted)
        try container.encode(ConfigSyntax.format(idleRelease), forKey: .idleRelease)
        guard let control else { return }
        var c = container.nestedContainer(keyedBy: ControlKeys.self, forKey: .control)
        switch control {
        case .mpris(let busName, let systemBus):
            try c.encode(busName, forKey: .mpris)
            try c.encode(systemBus ? "system" : "session", forKey: .bus)
        case .mpd(let host, let port):
            try c.encode("\(host):\(port)", forKey: .mpd)
        case .command(let pause, let resume):
            var command = c.nestedContainer(keyedBy: CommandKeys.self, forKey: .command)
            try command.encode(pause, forKey: .pause)
            try command.encode(resume, forKey: .resume)
        }
    }
}
