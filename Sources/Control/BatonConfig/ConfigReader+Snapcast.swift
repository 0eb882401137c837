import AudioCore
import OSThread
import Snapcast
import YAML

extension ConfigReader {
    static let snapcastKeys = ["source", "control", "stream", "clients", "buffer"]
    static let clientKeys = ["id", "volume", "latency"]
    /// Zone keys that make no sense for a Snapcast zone, and why.
    static let keysNotForSnapcast: [(key: String, why: String)] = [
        ("pcm", "its audio goes to snapcast.source"),
        ("board", "its speakers are snapclients"),
        ("device-channels", "it owns its stream"),
        ("mixer", "set each speaker's volume in snapcast.clients"),
        ("buffer", "the latency is the server's buffer: write it as snapcast.buffer"),
        ("render-ahead", "snapserver reads its stream in real time: nothing can be taken back"),
    ]

    /// A zone with a `snapcast:` section: the zone keys that apply (rate, channels, period,
    /// resampler, volume, max-volume; format only S16_LE, clock only system) and the section.
    mutating func snapcastZone(
        _ name: String, _ zone: Fields, _ section: YAMLPair, at path: ConfigPath,
        issuesBefore: Int
    ) -> ZoneSource? {
        for (key, why) in Self.keysNotForSnapcast {
            if let pair = zone.values[key] {
                report(pair.keyMark, path.appending(key), "not used by a Snapcast zone (\(why))")
            }
        }
        let rate = value(zone, "rate", .integer(ZoneConfig.rateRange), default: 48000)
        var channels: Int? = 2
        if let pair = zone.values["channels"] {
            if pair.value.sequence != nil {
                report(
                    pair.value.mark, path.appending("channels"),
                    "a Snapcast zone owns its stream: give a count (the stream's channels), not a list")
                channels = nil
            } else {
                channels = optional(zone, "channels", .integer(ZoneConfig.channelRange))
            }
        }
        let format = value(zone, "format", .choice(ZoneConfig.SampleFormat.self, "format"), default: .s16LE)
        if format == .s32LE {
            report(
                zone.values["format"]?.value.mark, path.appending("format"),
                "a Snapcast zone writes S16_LE (the source's sampleformat must be RATE:16:CHANNELS)")
        }
        let clock = value(zone, "clock", .choice(ZoneConfig.Clock.self, "clock"), default: .system)
        if clock == .device {
            report(
                zone.values["clock"]?.value.mark, path.appending("clock"),
                "a Snapcast zone is paced by the system clock (the server reads in real time)")
        }
        let period = value(zone, "period", .duration(ZoneConfig.periodRange), default: .milliseconds(10))
        let resampler = value(zone, "resampler", .choice(ZoneResampler.self, "resampler"), default: .auto)
        let maxVolume = value(zone, "max-volume", .volume, default: 1)
        let volume = optional(zone, "volume", .volume)
        if let volume, let maxVolume, volume > maxVolume {
            report(
                zone.values["volume"]?.value.mark, path.appending("volume"),
                "\(ConfigSyntax.formatVolume(volume)) is above max-volume \(ConfigSyntax.formatVolume(maxVolume))")
        }
        let snapcast = snapcastSection(section, zoneName: name, at: path.appending("snapcast"))
        guard let snapcast else { return nil }
        let config = ZoneConfig(
            name: name, pcm: snapcast.source.description, rate: rate ?? 48000, channels: channels ?? 2,
            format: .s16LE, period: period ?? .milliseconds(10), buffer: .milliseconds(40), clock: .system,
            resampler: resampler?.resampler, volume: volume, maxVolume: maxVolume ?? 1,
            snapcast: snapcast)
        return ZoneSource(zone: config, fields: zone, isClean: issues.count == issuesBefore)
    }

    private mutating func snapcastSection(_ pair: YAMLPair, zoneName: String, at path: ConfigPath) -> SnapcastConfig? {
        guard let fields = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.snapcastKeys) else {
            return nil
        }
        let source = required(
            fields, "source",
            ValueKind<StreamTarget>(name: "a stream source") {
                SnapcastConfig.parseSource($0)
            })
        let control = optional(fields, "control", .httpURL)
        let stream = value(fields, "stream", .string, default: zoneName)
        let buffer = value(fields, "buffer", .duration(SnapcastConfig.bufferRange), default: .milliseconds(1000))
        var clients: [SnapcastConfig.Client] = []
        if let list = fields.values["clients"], let nodes = items(of: list, at: path.appending("clients")) {
            for (index, node) in nodes.enumerated() {
                guard let client = snapcastClient(node, at: path.appending("clients").appending("\(index)")) else {
                    continue
                }
                if clients.contains(where: { $0.id == client.id }) {
                    report(
                        node.mark, path.appending("clients"),
                        "speaker \(ConfigSyntax.quoted(client.id)) is listed twice")
                    continue
                }
                clients.append(client)
            }
            // Said only when `control` is missing: a wrong one has its own error already.
            if fields.values["control"] == nil && !nodes.isEmpty {
                report(
                    list.keyMark, path.appending("clients"),
                    "grouping speakers needs control: (snapserver's JSON-RPC URL, e.g. http://127.0.0.1:1780)")
            }
        }
        guard let source, let stream, let buffer else { return nil }
        // snapserver keeps a speaker's latency within the stream's buffer: a larger one read back
        // smaller at every poll, and the keeper set it again every 2 s for ever.
        for client in clients {
            guard let latency = client.latency, latency > buffer else { continue }
            report(
                fields.values["clients"]?.value.mark, path.appending("clients"),
                "speaker \(ConfigSyntax.quoted(client.id)): latency \(ConfigSyntax.format(latency)) is more than the stream's buffer \(ConfigSyntax.format(buffer)) (snapserver keeps a speaker's latency within its buffer)"
            )
        }
        return SnapcastConfig(source: source, control: control, stream: stream, clients: clients, buffer: buffer)
    }

    /// `bedroom-pi`, or `{id: bedroom-pi, volume: 80%, latency: 20ms}`.
    private mutating func snapcastClient(_ node: YAMLNode, at path: ConfigPath) -> SnapcastConfig.Client? {
        if node.scalar != nil { return convert(node, at: path, .string).map { SnapcastConfig.Client(id: $0) } }
        guard let fields = fields(of: node, at: path, anchor: node.mark, allowed: Self.clientKeys) else { return nil }
        let id = required(fields, "id", .string)
        let volume = optional(fields, "volume", .volume)
        let latency = optional(fields, "latency", .duration(SnapcastConfig.latencyRange))
        if let latency, latency.wholeNanoseconds % 1_000_000 != 0 {
            report(
                fields.values["latency"]?.value.mark, path.appending("latency"), "snapclient takes whole milliseconds")
        }
        return id.map { SnapcastConfig.Client(id: $0, volume: volume, latency: latency) }
    }

    /// Two Snapcast zones writing into one source would interleave their audio. On one snapserver,
    /// two zones with one `stream`, or one speaker, would fight over it: each zone's keeper regroups
    /// it to its own every few seconds (a speaker flipping between zones, both reading it as theirs).
    mutating func checkSnapcastSources(_ sources: [ZoneSource], at path: ConfigPath) {
        var owners: [String: String] = [:]  // by source; by control URL and stream; by control URL and speaker
        /// The zone that had `key` before `zone`, which takes it if none did.
        func owner(of key: String, for zone: String) -> String? {
            if let owner = owners[key] { return owner }
            owners[key] = zone
            return nil
        }
        for s in sources {
            guard let snapcast = s.zone.snapcast else { continue }
            let mark = s.fields.values["snapcast"]?.value.mark ?? s.fields.anchor
            let at = path.appending(s.zone.name).appending("snapcast")
            let key = snapcast.source.description
            if let owner = owner(of: "source " + key, for: s.zone.name) {
                report(
                    mark, at.appending("source"),
                    "\(key) is also the source of zone \(ConfigSyntax.quoted(owner)) (each Snapcast zone needs its own stream)"
                )
            }
            guard let control = snapcast.control?.description else { continue }
            // Keyed on the server, not on how it is written (`http://127.0.0.1:1780` and
            // `http://localhost:1780/` are one).
            let server = SnapcastControl.identity(control)
            if let owner = owner(of: "stream \(server) \(snapcast.stream)", for: s.zone.name) {
                report(
                    mark, at.appending("stream"),
                    "stream \(ConfigSyntax.quoted(snapcast.stream)) of \(control) is also zone \(ConfigSyntax.quoted(owner))'s (each zone needs its own)"
                )
            }
            for client in snapcast.clients {
                if let owner = owner(of: "speaker \(server) \(client.id)", for: s.zone.name) {
                    report(
                        mark, at.appending("clients"),
                        "speaker \(ConfigSyntax.quoted(client.id)) of \(control) is also in zone \(ConfigSyntax.quoted(owner)) (a speaker plays one zone)"
                    )
                }
            }
        }
    }
}
