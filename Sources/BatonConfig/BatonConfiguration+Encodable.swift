// The effective configuration as JSON for `GET /api/v1/config`: the same keys as the YAML file, and
// every value in the text form the file accepts (durations "10ms", sizes "64KiB", levels "-15dB"),
// so the output is itself a valid configuration. JSON is YAML: `BatonConfiguration.parse(text:file:)`
// reads it back, with the same checks and messages. There is deliberately no `Decodable`: a decoder
// would be a second, unchecked way in.
//
// Zones and classes are JSON objects keyed by name; JSON objects are unordered, so consumers that
// care about file order should not rely on key order.

/// A coding key made at run time, for mappings keyed by user-chosen names.
private struct NameKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension BatonConfiguration: Encodable {
    private enum CodingKeys: String, CodingKey {
        case api, zones, sounds, resampler, alsaConfig = "alsa-config", outputDir = "output-dir", policy
    }

    /// Encodes with the YAML file's key names; optional paths are left out when unset.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(api, forKey: .api)
        var zonesContainer = container.nestedContainer(keyedBy: NameKey.self, forKey: .zones)
        for zone in zones {
            try zonesContainer.encode(zone, forKey: NameKey(zone.name))
        }
        try container.encode(sounds, forKey: .sounds)
        try container.encode(resampler, forKey: .resampler)
        try container.encodeIfPresent(alsaConfig, forKey: .alsaConfig)
        try container.encodeIfPresent(outputDir, forKey: .outputDir)
        try container.encode(policy, forKey: .policy)
    }
}

extension APIConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case listen, maxBody = "max-body"
    }

    /// `{"listen": "127.0.0.1:8470", "max-body": "64KiB"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(listen.description, forKey: .listen)
        try container.encode(ConfigSyntax.formatByteSize(maxBody), forKey: .maxBody)
    }
}

extension ZoneConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case pcm, rate, channels, format, period, buffer, clock, resampler
    }

    /// The zone without its name (the name is its key in `zones`); `resampler` is `"auto"` when unset.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(pcm, forKey: .pcm)
        try container.encode(rate, forKey: .rate)
        try container.encode(channels, forKey: .channels)
        try container.encode(format, forKey: .format)
        try container.encode(ConfigSyntax.format(period), forKey: .period)
        try container.encode(ConfigSyntax.format(buffer), forKey: .buffer)
        try container.encode(clock, forKey: .clock)
        try container.encode(resampler?.rawValue ?? "auto", forKey: .resampler)
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
        var classesContainer = container.nestedContainer(keyedBy: NameKey.self, forKey: .classes)
        for audioClass in classes {
            try classesContainer.encode(audioClass, forKey: NameKey(audioClass.name))
        }
        try container.encode(duck, forKey: .duck)
    }
}

extension ClassConfig: Encodable {
    private enum CodingKeys: String, CodingKey {
        case priority, kind, lower, same, duringHigher = "during-higher", resumeWithin = "resume-within"
        case coalesce, ttl, queueLimit = "queue-limit"
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
