// The effective configuration as JSON for `GET /api/v1/config`: the same keys as the YAML file, and
// every value in the text form the file accepts (durations "10ms", sizes "64KiB", levels "-15dB"),
// so the output is itself a valid configuration. JSON is YAML: `BatonConfiguration.parse(text:file:)`
// reads it back, with the same checks and messages. There is deliberately no `Decodable`: a decoder
// would be a second, unchecked way in.
//
// Zones and classes are JSON objects keyed by name; JSON objects are unordered, so consumers that
// care about file order should not rely on key order.

import OSThread

extension BatonConfiguration: Encodable {
    private enum CodingKeys: String, CodingKey {
        case api, zones, groups, board
        case boardsDir = "boards-dir"
        case sounds, resampler
        case alsaConfig = "alsa-config"
        case outputDir = "output-dir"
        case stateDir = "state-dir"
        case policy, music, device, mqtt, gpio, intercom, speech, announce
        case externalSources = "external-sources"
        case silenceAlarm = "silence-alarm"
    }

    /// Encodes with the YAML file's key names; optional paths are left out when unset.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(api, forKey: .api)
        var zonesContainer = container.nestedContainer(keyedBy: AnyCodingKey.self, forKey: .zones)
        for zone in zones {
            try zonesContainer.encode(zone, forKey: AnyCodingKey(zone.name))
        }
        if !groups.isEmpty {
            var groupsContainer = container.nestedContainer(keyedBy: AnyCodingKey.self, forKey: .groups)
            for group in groups {
                try groupsContainer.encode(group.zones, forKey: AnyCodingKey(group.name))
            }
        }
        try container.encodeIfPresent(board, forKey: .board)
        try container.encodeIfPresent(boardsDir, forKey: .boardsDir)
        try container.encode(sounds, forKey: .sounds)
        try container.encode(resampler, forKey: .resampler)
        try container.encodeIfPresent(alsaConfig, forKey: .alsaConfig)
        try container.encodeIfPresent(outputDir, forKey: .outputDir)
        try container.encodeIfPresent(stateDir, forKey: .stateDir)
        try container.encode(policy, forKey: .policy)
        try container.encodeIfPresent(music, forKey: .music)
        try container.encode(device, forKey: .device)
        try container.encodeIfPresent(mqtt, forKey: .mqtt)
        if !gpio.isEmpty { try container.encode(gpio, forKey: .gpio) }
        try container.encodeIfPresent(intercom, forKey: .intercom)
        try container.encodeIfPresent(externalSources, forKey: .externalSources)
        try container.encode(speech, forKey: .speech)
        try container.encode(announce, forKey: .announce)
        try container.encode(ConfigSyntax.format(silenceAlarm), forKey: .silenceAlarm)
    }
}

extension APIConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case listen
        case maxBody = "max-body"
        case tokenFile = "token-file"
        case allowedHosts = "allowed-hosts"
        case connectionsPerClient = "connections-per-client"
    }

    /// `{"listen": "127.0.0.1:8470", "max-body": "64KiB"}`, with `token-file` (the path) when set.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(listen.description, forKey: .listen)
        try container.encode(ConfigSyntax.formatByteSize(maxBody), forKey: .maxBody)
        try container.encodeIfPresent(tokenFile, forKey: .tokenFile)
        if !allowedHosts.isEmpty { try container.encode(allowedHosts, forKey: .allowedHosts) }
        if connectionsPerClient != 16 { try container.encode(connectionsPerClient, forKey: .connectionsPerClient) }
    }
}

extension ZoneConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case pcm, board, rate, channels
        case deviceChannels = "device-channels"
        case format, period, buffer, clock
        case renderAhead = "render-ahead"
        case resampler
        case volume
        case maxVolume = "max-volume"
        case mixer, snapcast
    }

    /// The zone without its name (the name is its key in `zones`); `resampler` is `"auto"` when unset.
    /// `channels` is a count, or for a zone driving some device channels their names with
    /// `device-channels`; volumes are percentages (`"80%"`) when whole, else fractions. `volume` only
    /// when written: read back, one written out would no longer follow `max-volume` at a reload.
    /// A Snapcast zone has `snapcast` instead of the ALSA keys (pcm, board, format, buffer, clock, mixer).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let snapcast {
            try container.encode(snapcast, forKey: .snapcast)
            try container.encode(rate, forKey: .rate)
            try container.encode(channels, forKey: .channels)
            try container.encode(ConfigSyntax.format(period), forKey: .period)
            try container.encode(resampler?.rawValue ?? "auto", forKey: .resampler)
            try container.encodeIfPresent(configuredVolume.map(ConfigSyntax.formatVolume), forKey: .volume)
            try container.encode(ConfigSyntax.formatVolume(maxVolume), forKey: .maxVolume)
            return
        }
        try container.encode(pcm, forKey: .pcm)
        try container.encodeIfPresent(board, forKey: .board)
        try container.encode(rate, forKey: .rate)
        if let deviceChannels {
            try container.encode(deviceChannels.map { DeviceChannel(rawValue: $0)?.name ?? "\($0)" }, forKey: .channels)
            try container.encode(deviceChannelCount, forKey: .deviceChannels)
        } else {
            try container.encode(channels, forKey: .channels)
        }
        try container.encode(format, forKey: .format)
        try container.encode(ConfigSyntax.format(period), forKey: .period)
        try container.encode(ConfigSyntax.format(buffer), forKey: .buffer)
        try container.encode(clock, forKey: .clock)
        if renderAhead { try container.encode(true, forKey: .renderAhead) }
        try container.encode(resampler?.rawValue ?? "auto", forKey: .resampler)
        try container.encodeIfPresent(configuredVolume.map(ConfigSyntax.formatVolume), forKey: .volume)
        try container.encode(ConfigSyntax.formatVolume(maxVolume), forKey: .maxVolume)
        // Software gain on a board's zone is written out: without it, read back, the board's
        // mixer would apply.
        try container.encodeIfPresent(mixer ?? (board == nil ? nil : "none"), forKey: .mixer)
    }
}

extension SnapcastConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case source, control, stream, clients, buffer
    }

    private enum ClientKeys: String, CodingKey {
        case id, volume, latency
    }

    /// `{"source": "tcp://127.0.0.1:4953", "control": "http://127.0.0.1:1780", "stream": "upstairs",
    /// "clients": ["bath-pi", {"id": "bedroom-pi", "volume": "80%", "latency": "20ms"}], "buffer": "1s"}`:
    /// a speaker without trims is its bare ID.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(source.description, forKey: .source)
        try container.encodeIfPresent(control, forKey: .control)
        try container.encode(stream, forKey: .stream)
        var list = container.nestedUnkeyedContainer(forKey: .clients)
        for client in clients {
            if client.volume == nil && client.latency == nil {
                try list.encode(client.id)
            } else {
                var entry = list.nestedContainer(keyedBy: ClientKeys.self)
                try entry.encode(client.id, forKey: .id)
                try entry.encodeIfPresent(client.volume.map(ConfigSyntax.formatVolume), forKey: .volume)
                try entry.encodeIfPresent(client.latency.map(ConfigSyntax.format), forKey: .latency)
            }
        }
        try container.encode(ConfigSyntax.format(buffer), forKey: .buffer)
    }
}

extension MusicConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case subsonic
        case replayGain = "replay-gain"
        case zones, retry
    }

    private enum RetryKeys: String, CodingKey {
        case limit
    }

    /// `{"subsonic": {...}, "replay-gain": "track", "zones": ["all"], "retry": {"limit": "2m"}}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(subsonic, forKey: .subsonic)
        try container.encode(replayGain, forKey: .replayGain)
        try container.encode(zones, forKey: .zones)
        var retry = container.nestedContainer(keyedBy: RetryKeys.self, forKey: .retry)
        try retry.encode(ConfigSyntax.format(retryLimit), forKey: .limit)
    }
}

extension SubsonicConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case url, user
        case passwordFile = "password-file"
        case passwordEnv = "password-env"
        case format
        case maxBitrate = "max-bitrate"
        case apiKeyFile = "api-key-file"
    }

    /// The server with the password's file or variable name (never a password).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(url, forKey: .url)
        try container.encode(user, forKey: .user)
        switch password {
        case .file(let path): try container.encode(path, forKey: .passwordFile)
        case .environment(let name): try container.encode(name, forKey: .passwordEnv)
        }
        try container.encode(format, forKey: .format)
        try container.encode(maxBitrate, forKey: .maxBitrate)
        try container.encodeIfPresent(apiKeyFile, forKey: .apiKeyFile)
    }
}

extension ResamplerConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case music, announcements
    }

    /// `{"music": "soxr-hq", "announcements": "soxr-hq"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(music, forKey: .music)
        try container.encode(announcements, forKey: .announcements)
    }
}

extension PolicyConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case classes, duck
    }

    /// `{"classes": {"music": {...}, ...}, "duck": {...}}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        var classesContainer = container.nestedContainer(keyedBy: AnyCodingKey.self, forKey: .classes)
        for audioClass in classes {
            try classesContainer.encode(audioClass, forKey: AnyCodingKey(audioClass.name))
        }
        try container.encode(duck, forKey: .duck)
    }
}

extension ClassConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case priority, kind, lower, same
        case duringHigher = "during-higher"
        case resumeWithin = "resume-within"
        case coalesce, ttl
        case queueLimit = "queue-limit"
    }

    /// The class without its name (its key in `classes`); unset optional values are left out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(priority, forKey: .priority)
        try container.encode(kind, forKey: .kind)
        try container.encode(lower, forKey: .lower)
        try container.encode(same, forKey: .same)
        try container.encode(duringHigher, forKey: .duringHigher)
        try container.encodeIfPresent(resumeWithin.map(ConfigSyntax.format), forKey: .resumeWithin)
        try container.encodeIfPresent(coalesce.map(ConfigSyntax.format), forKey: .coalesce)
        try container.encodeIfPresent(ttl.map(ConfigSyntax.format), forKey: .ttl)
        try container.encodeIfPresent(queueLimit, forKey: .queueLimit)
    }
}

extension DuckConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case level, attack, release
    }

    /// `{"level": "-15dB", "attack": "50ms", "release": "300ms"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ConfigSyntax.formatDecibels(level), forKey: .level)
        try container.encode(ConfigSyntax.format(attack), forKey: .attack)
        try container.encode(ConfigSyntax.format(release), forKey: .release)
    }
}
