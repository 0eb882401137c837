import YAML

extension ConfigReader {
    static let musicKeys = ["subsonic", "replay-gain", "zones", "retry"]
    static let subsonicKeys = ["url", "user", "password-file", "password-env", "format", "max-bitrate", "api-key-file"]
    static let retryKeys = ["limit"]

    /// `music:`; `nil` when it is not a mapping or has no usable `subsonic` (reported).
    mutating func readMusic(
        _ pair: YAMLPair, zoneNames: [String], groupNames: [String],
        baseDirectory: String
    ) -> MusicConfig? {
        let path = ConfigPath.root.appending("music")
        guard let music = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.musicKeys) else {
            return nil
        }
        let subsonic: SubsonicConfig?
        if let subsonicPair = music.values["subsonic"] {
            subsonic = readSubsonic(subsonicPair, at: path.appending("subsonic"), baseDirectory: baseDirectory)
        } else {
            subsonic = nil
            report(
                music.nulls["subsonic"]?.value.mark ?? music.anchor,
                music.nulls["subsonic"] == nil ? path : path.appending("subsonic"),
                music.nulls["subsonic"] == nil ? "missing required key \"subsonic\"" : "a value is required")
        }
        let defaults = MusicConfig(subsonic: SubsonicConfig(url: "", user: "", password: .environment("")))
        let replayGain = value(
            music, "replay-gain", .choice(MusicConfig.ReplayGain.self, "replay-gain mode"),
            default: defaults.replayGain)
        let zones =
            music.values["zones"].map {
                zoneList(
                    $0, at: path.appending("zones"), zoneNames: zoneNames,
                    groupNames: groupNames)
            } ?? defaults.zones
        var retryLimit = defaults.retryLimit
        if let retryPair = music.values["retry"],
            let retry = fields(
                of: retryPair.value, at: path.appending("retry"), anchor: retryPair.keyMark,
                allowed: Self.retryKeys)
        {
            retryLimit =
                value(retry, "limit", .duration(MusicConfig.retryLimitRange), default: retryLimit) ?? retryLimit
        }
        guard let subsonic else { return nil }
        return MusicConfig(
            subsonic: subsonic, replayGain: replayGain ?? defaults.replayGain, zones: zones,
            retryLimit: retryLimit)
    }

    private mutating func readSubsonic(_ pair: YAMLPair, at path: ConfigPath, baseDirectory: String) -> SubsonicConfig?
    {
        guard let server = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.subsonicKeys) else {
            return nil
        }
        let resolve = { (file: String) in BatonConfiguration.resolve(file, against: baseDirectory) }
        let url = required(server, "url", .httpURL)
        let user = required(server, "user", .string)
        let passwordFile = optional(server, "password-file", .string)
        let passwordEnv = optional(server, "password-env", .environmentName)
        let format = value(server, "format", .choice(SubsonicConfig.StreamFormat.self, "format"), default: .opus)
        let maxBitrate = value(server, "max-bitrate", .integer(SubsonicConfig.maxBitrateRange), default: 128)
        let apiKeyFile = optional(server, "api-key-file", .string)

        var password: SubsonicConfig.Password?
        switch (server.values["password-file"], server.values["password-env"]) {
        case (_?, let env?):
            report(
                env.keyMark, path.appending("password-env"),
                "password-file and password-env are both set; set exactly one")
        case (_?, nil):
            password = passwordFile.map { .file(resolve($0)) }
        case (nil, _?):
            password = passwordEnv.map { .environment($0) }
        case (nil, nil):
            report(
                server.anchor, path,
                "missing required key \"password-file\" or \"password-env\" (the password "
                    + "itself is never written in this file)")
        }
        guard let url, let user, let password else { return nil }
        return SubsonicConfig(
            url: url, user: user, password: password, format: format ?? .opus,
            maxBitrate: maxBitrate ?? 128, apiKeyFile: apiKeyFile.map(resolve))
    }

    /// A non-empty list of zones, groups or `all` (`music.zones`, `gpio[n].announce.zones`,
    /// `intercom.rtp.zones`), as written; unknown names are reported with the closest suggested.
    mutating func zoneList(
        _ pair: YAMLPair, at path: ConfigPath, zoneNames: [String],
        groupNames: [String]
    ) -> [String] {
        guard let nodes = items(of: pair, at: path) else { return [] }
        if nodes.isEmpty { report(pair.value.mark, path, "at least one zone or group is required") }
        let valid = [GroupConfig.all] + groupNames + zoneNames
        var names: [String] = []
        for node in nodes {
            guard let name = convert(node, at: path, .string) else { continue }
            if valid.contains(name) {
                names.append(name)
            } else {
                report(node.mark, path, Self.unknownName(name, "zone or group", among: valid))
            }
        }
        return names
    }
}
