import YAML

/// A zone as read, with what the device checks need: where its keys are and whether it was clean.
struct ZoneSource {
    var zone: ZoneConfig
    var fields: Fields
    /// False when reading the zone reported a problem: device checks then skip it, so a value already
    /// reported is not reported again as a disagreement.
    var isClean: Bool

    /// Where `key`'s value is written, or the zone's name when it is not (a default or a board's).
    func mark(_ key: String) -> Mark { fields.values[key]?.value.mark ?? fields.anchor }
}

/// A zone's `channels:` value.
private enum ChannelsValue {
    /// The zone owns a device with this many channels.
    case count(Int)
    /// The zone drives these device channels.
    case list([Int])
}

extension ConfigReader {
    static let zoneKeys = [
        "pcm", "board", "rate", "channels", "device-channels", "format", "period", "buffer",
        "clock", "render-ahead", "resampler", "volume", "max-volume", "mixer", "snapcast",
    ]

    /// The zones, and the names of every zone entry (also those too broken to read), for checking
    /// names elsewhere without piling up follow-on errors.
    mutating func zones(in top: Fields, board: String?) -> ([ZoneConfig], [String]) {
        let path = ConfigPath.root.appending("zones")
        let entries: [YAMLPair]
        if let pair = top.values["zones"] {
            guard let named = namedEntries(of: pair.value, at: path) else { return ([], []) }
            entries = named
            if entries.isEmpty { report(pair.value.mark, path, "at least one zone is required") }
        } else {
            let mark = top.nulls["zones"]?.value.mark ?? top.anchor
            report(mark, path, "at least one zone is required")
            entries = []
        }
        var sources = entries.compactMap { zone($0, at: path.appending($0.key), topBoard: board) }
        sharedDevicesUseSoftwareGain(&sources, at: path)
        checkDevices(sources.filter { $0.zone.snapcast == nil }, at: path)
        checkSnapcastSources(sources, at: path)
        return (sources.map(\.zone), entries.map(\.key))
    }

    mutating func zone(_ pair: YAMLPair, at path: ConfigPath, topBoard: String?) -> ZoneSource? {
        let issuesBefore = issues.count
        if !ZoneConfig.isValidName(pair.key) {
            report(
                pair.keyMark, path,
                "zone name \(ConfigSyntax.quoted(pair.key)) must match [a-z0-9_-]+ (it appears in URLs and MQTT topics)"
            )
        } else if pair.key == GroupConfig.all {
            // Every zone list reads `all` as every zone: such a zone could never be named alone.
            report(pair.keyMark, path, "\"all\" is reserved: it always means every zone")
        }
        guard let zone = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.zoneKeys) else {
            return nil
        }
        if let snapcast = zone.values["snapcast"] {
            return snapcastZone(pair.key, zone, snapcast, at: path, issuesBefore: issuesBefore)
        }

        let ownBoard = optional(zone, "board", .name("board", why: "it names a file in the boards directory"))
        let boardName = ownBoard ?? (zone.values["board"] == nil ? topBoard : nil)
        let profile = boardName.flatMap { name in
            boardProfile(
                named: name, at: zone.values["board"]?.value.mark, path.appending("board"),
                report: ownBoard != nil)
        }
        let defaults = ZoneConfig(
            name: pair.key, pcm: profile?.pcm ?? "", rate: profile?.defaultRate ?? 48000,
            channels: profile?.channels ?? 2, format: profile?.defaultFormat ?? .s16LE,
            period: profile?.period ?? .milliseconds(10),
            buffer: profile?.buffer ?? .milliseconds(40), clock: profile?.clock ?? .device,
            mixer: profile?.volume == .hardware ? profile?.mixer : nil)

        // With a board (even one that failed to load or has a bad name) the PCM may come from it.
        let namesBoard = zone.values["board"] != nil || boards.topLevelWritten
        let pcm = namesBoard ? optional(zone, "pcm", .string) ?? defaults.pcm : required(zone, "pcm", .string)
        let rate = value(zone, "rate", .integer(ZoneConfig.rateRange), default: defaults.rate)
        let format = value(zone, "format", .choice(ZoneConfig.SampleFormat.self, "format"), default: defaults.format)
        let period = value(zone, "period", .duration(ZoneConfig.periodRange), default: defaults.period)
        let buffer = value(zone, "buffer", .duration(ZoneConfig.bufferRange), default: defaults.buffer)
        let clock = value(zone, "clock", .choice(ZoneConfig.Clock.self, "clock"), default: defaults.clock)
        let renderAhead = value(zone, "render-ahead", .boolean, default: false)
        let resampler = value(zone, "resampler", .choice(ZoneResampler.self, "resampler"), default: .auto)
        let maxVolume = value(zone, "max-volume", .volume, default: 1)
        // Without a volume of its own a zone starts at its cap (kept unwritten: a reload tells a
        // changed `volume` from a changed cap).
        let volume = optional(zone, "volume", .volume)
        // `mixer: none` (or a board with software volume) means Baton's own gain.
        let mixer = (optional(zone, "mixer", .string) ?? defaults.mixer).flatMap { $0 == "none" ? nil : $0 }
        let deviceChannelCount = optional(zone, "device-channels", .integer(ZoneConfig.channelRange))
        let channels = channelsValue(zone, default: defaults.channels)

        if let period, let buffer { checkBuffer(buffer, period: period, in: zone) }
        if let volume, let maxVolume, volume > maxVolume {
            report(
                zone.values["volume"]?.value.mark, path.appending("volume"),
                "\(ConfigSyntax.formatVolume(volume)) is above max-volume \(ConfigSyntax.formatVolume(maxVolume))")
        }
        if let profile {
            check(rate, in: profile.rates, of: profile, zone, "rate")
            check(format, in: profile.formats, of: profile, zone, "format")
        }

        var deviceChannels: [Int]?
        var deviceCount: Int
        switch channels {
        case .count(let count)?:
            deviceCount = count
            if let deviceChannelCount, deviceChannelCount != count {
                report(
                    zone.values["device-channels"]?.value.mark, path.appending("device-channels"),
                    "\(deviceChannelCount) differs from channels \(count): a zone that owns its device drives "
                        + "all its channels (to drive some, list them, e.g. channels: [left])")
            }
            if let profile, count > profile.channels {
                report(
                    zone.values["channels"]?.value.mark, path.appending("channels"),
                    "\(count) is more than board \(ConfigSyntax.quoted(profile.id)) has (\(profile.channels) channels)")
            } else if let profile, count < profile.channels, pcm == profile.pcm {
                // The board's `hw:` device takes its own channel count only: the zone was refused
                // at every open, unavailable, where this could say so at load.
                report(
                    zone.values["channels"]?.value.mark, path.appending("channels"),
                    "board \(ConfigSyntax.quoted(profile.id))'s device \(profile.pcm) takes \(profile.channels) channels, not \(count) "
                        + "(to drive some of them, list them: channels: [left])")
            }
        case .list(let list)?:
            deviceChannels = list
            deviceCount = deviceChannelCount ?? profile?.channels ?? ZoneConfig.defaultDeviceChannelCount(for: list)
            if let profile, let deviceChannelCount, deviceChannelCount != profile.channels, pcm == profile.pcm {
                report(
                    zone.values["device-channels"]?.value.mark, path.appending("device-channels"),
                    "board \(ConfigSyntax.quoted(profile.id))'s device \(profile.pcm) takes \(profile.channels) channels, not "
                        + "\(deviceChannelCount)")
            }
            if let beyond = list.first(where: { $0 >= deviceCount }) {
                report(
                    zone.values["channels"]?.value.mark, path.appending("channels"),
                    "channel \(DeviceChannel.describe(beyond)) does not exist on a \(deviceCount)-channel device "
                        + "(expected 0...\(deviceCount - 1))")
            }
        case nil:
            deviceCount = deviceChannelCount ?? defaults.channels
        }

        let config = ZoneConfig(
            name: pair.key, pcm: pcm ?? "", rate: rate ?? defaults.rate, channels: deviceCount,
            format: format ?? defaults.format, period: period ?? defaults.period, buffer: buffer ?? defaults.buffer,
            clock: clock ?? defaults.clock, renderAhead: renderAhead ?? false, resampler: resampler?.resampler,
            deviceChannels: deviceChannels,
            deviceChannelCount: deviceCount, volume: volume, maxVolume: maxVolume ?? 1, mixer: mixer,
            board: boardName)
        return ZoneSource(zone: config, fields: zone, isClean: issues.count == issuesBefore)
    }

    /// Reports a zone's explicit `rate` or `format` that its board does not support.
    private mutating func check<Value: Equatable & CustomStringConvertible>(
        _ value: Value?, in allowed: [Value], of profile: BoardProfile, _ zone: Fields, _ key: String
    ) {
        guard let value, !allowed.contains(value), let pair = zone.values[key] else { return }
        let list = allowed.map(\.description).joined(separator: ", ")
        report(
            pair.value.mark, zone.path.appending(key),
            "\(value) is not supported by board \(ConfigSyntax.quoted(profile.id)) (expected one of: \(list))")
    }

    /// `channels:` as a count or a list of device channels; `nil` when invalid (reported).
    private mutating func channelsValue(_ zone: Fields, default defaultCount: Int) -> ChannelsValue? {
        let path = zone.path.appending("channels")
        guard let pair = zone.values["channels"] else { return .count(defaultCount) }
        if pair.value.scalar != nil {
            return optional(zone, "channels", .integer(ZoneConfig.channelRange)).map { .count($0) }
        }
        guard let nodes = pair.value.sequence else {
            report(
                pair.value.mark, path, "expected an integer or a list of channels, found \(pair.value.kindDescription)")
            return nil
        }
        if nodes.isEmpty {
            report(pair.value.mark, path, "at least one channel is required")
            return nil
        }
        var list: [Int] = []
        var isValid = true
        for node in nodes {
            guard let channel = convert(node, at: path, .deviceChannel) else {
                isValid = false
                continue
            }
            if list.contains(channel) {
                report(node.mark, path, "channel \(DeviceChannel.describe(channel)) is listed twice")
                isValid = false
            }
            list.append(channel)
        }
        return isValid ? .list(list) : nil
    }

    /// A hardware mixer control sets every channel of its card: zones sharing a device cannot each
    /// have one (one zone's volume moved the other's, whose status still said 100 %). A `mixer`
    /// written on such a zone is refused; one that comes from the board is left out, so the zone
    /// uses software gain, as docs/CONFIG.md says.
    mutating func sharedDevicesUseSoftwareGain(_ sources: inout [ZoneSource], at path: ConfigPath) {
        var count: [String: Int] = [:]
        for source in sources where source.zone.snapcast == nil && !source.zone.pcm.isEmpty {
            count[source.zone.pcm, default: 0] += 1
        }
        for i in sources.indices {
            let zone = sources[i].zone
            guard let mixer = zone.mixer, zone.snapcast == nil, count[zone.pcm, default: 0] > 1 else { continue }
            if sources[i].fields.values["mixer"] != nil {
                report(
                    sources[i].mark("mixer"), path.appending(zone.name).appending("mixer"),
                    "device \(ConfigSyntax.quoted(zone.pcm)) is shared with other zones, and mixer \(ConfigSyntax.quoted(mixer)) would set the "
                        + "volume of all of them (use software gain: remove mixer, or write mixer: none)")
            }
            sources[i].zone.mixer = nil
        }
    }

    /// Zones on one `pcm` form a device: more than one must each list their channels, without
    /// overlap, and agree on every device setting.
    mutating func checkDevices(_ sources: [ZoneSource], at path: ConfigPath) {
        var order: [String] = []
        var members: [String: [ZoneSource]] = [:]
        for source in sources where !source.zone.pcm.isEmpty {
            if members[source.zone.pcm] == nil { order.append(source.zone.pcm) }
            members[source.zone.pcm, default: []].append(source)
        }
        for pcm in order {
            let all = members[pcm]!
            guard all.count > 1 else { continue }
            let zones = all.filter(\.isClean)
            for source in zones where source.zone.deviceChannels == nil {
                let other = all.first { $0.zone.name != source.zone.name }!.zone.name
                report(
                    source.mark("channels"), path.appending(source.zone.name).appending("channels"),
                    "device \(ConfigSyntax.quoted(pcm)) is shared with zone \(ConfigSyntax.quoted(other)), so this zone must list the device "
                        + "channels it drives (e.g. channels: [left]) instead of a count")
            }
            let listed = zones.filter(\.zone.usesChannelList)
            guard let reference = listed.first else { continue }
            var owners: [Int: String] = [:]
            for source in listed {
                let zonePath = path.appending(source.zone.name)
                for channel in source.zone.channelMap {
                    if let owner = owners[channel] {
                        report(
                            source.mark("channels"), zonePath.appending("channels"),
                            "device channel \(DeviceChannel.describe(channel)) of \(ConfigSyntax.quoted(pcm)) is also driven by zone \(ConfigSyntax.quoted(owner))"
                        )
                    } else {
                        owners[channel] = source.zone.name
                    }
                }
                guard source.zone.name != reference.zone.name else { continue }
                let settings: [(key: String, mine: String, theirs: String)] = [
                    ("rate", "\(source.zone.rate)", "\(reference.zone.rate)"),
                    ("format", source.zone.format.rawValue, reference.zone.format.rawValue),
                    ("period", ConfigSyntax.format(source.zone.period), ConfigSyntax.format(reference.zone.period)),
                    ("buffer", ConfigSyntax.format(source.zone.buffer), ConfigSyntax.format(reference.zone.buffer)),
                    ("clock", source.zone.clock.rawValue, reference.zone.clock.rawValue),
                    ("render-ahead", "\(source.zone.renderAhead)", "\(reference.zone.renderAhead)"),
                    ("device-channels", "\(source.zone.deviceChannelCount)", "\(reference.zone.deviceChannelCount)"),
                ]
                for setting in settings where setting.mine != setting.theirs {
                    report(
                        source.mark(setting.key), zonePath.appending(setting.key),
                        "\(setting.mine) differs from zone \(ConfigSyntax.quoted(reference.zone.name)) (\(setting.theirs)); zones on "
                            + "device \(ConfigSyntax.quoted(pcm)) must agree on \(setting.key)")
                }
            }
        }
    }
}
