import YAML

extension ConfigReader {
    static let externalSourceKeys = ["class", "zones", "when-interrupted", "control", "idle-release"]
    static let externalControlKeys = ["mpris", "mpd", "command", "bus"]
    static let externalCommandKeys = ["pause", "resume"]

    /// `external-sources:` — `socket:` and one entry per source name.
    mutating func readExternalSources(
        _ pair: YAMLPair, zoneNames: [String], groupNames: [String], classNames: [String], baseDirectory: String
    ) -> ExternalSourcesConfig? {
        let path = ConfigPath.root.appending("external-sources")
        guard let entries = namedEntries(of: pair.value, at: path) else { return nil }
        var config = ExternalSourcesConfig(sources: [])
        for entry in entries {
            let entryPath = path.appending(entry.key)
            if entry.key == "socket" {
                // `socket:` alone is absent, as a null is for every other optional key.
                if entry.value.isNull { continue }
                config.socket = convert(entry.value, at: entryPath, .string).map {
                    BatonConfiguration.resolve($0, against: baseDirectory)
                }
                continue
            }
            guard Self.isSourceName(entry.key) else {
                report(
                    entry.keyMark, entryPath,
                    "a source name is letters, digits, - and _ (it becomes the ALSA PCM baton_\(entry.key))")
                continue
            }
            guard
                let fields = fields(
                    of: entry.value, at: entryPath, anchor: entry.keyMark, allowed: Self.externalSourceKeys)
            else { continue }
            let defaults = ExternalSourceConfig(name: entry.key)
            let sourceClass = value(fields, "class", .string, default: "music") ?? "music"
            if !classNames.contains(sourceClass) {
                report(
                    fields.values["class"]?.value.mark ?? entry.keyMark, entryPath.appending("class"),
                    Self.unknownName(sourceClass, "class", among: classNames))
            }
            let zones =
                fields.values["zones"].map {
                    zoneList($0, at: entryPath.appending("zones"), zoneNames: zoneNames, groupNames: groupNames)
                } ?? defaults.zones
            let mode = value(
                fields, "when-interrupted", .choice(ExternalSourceConfig.WhenInterrupted.self, "when-interrupted"),
                default: .hold)
            let idle = value(
                fields, "idle-release", .duration(ExternalSourceConfig.idleReleaseRange), default: defaults.idleRelease)
            let control = fields.values["control"].flatMap {
                readExternalControl($0, at: entryPath.appending("control"), pausing: mode == .pause)
            }
            // Not beside a control that is given but wrong: that one's error says what is wrong.
            if mode == .pause && control == nil && fields.values["control"] == nil {
                report(
                    fields.values["when-interrupted"]?.value.mark, entryPath.appending("when-interrupted"),
                    "pause needs a control (mpris, mpd or command) to tell the player")
            }
            if config.sources.contains(where: { $0.name == entry.key }) {
                report(entry.keyMark, entryPath, "source \(entry.key) is defined twice")
            }
            config.sources.append(
                ExternalSourceConfig(
                    name: entry.key, sourceClass: sourceClass, zones: zones, whenInterrupted: mode ?? .hold,
                    control: control, idleRelease: idle ?? defaults.idleRelease))
        }
        return config
    }

    private static func isSourceName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && name.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_")
            }
    }

    /// A D-Bus well-known bus name: at most 255 characters, two or more elements separated by
    /// dots, each of ASCII letters, digits, `_` and `-`, not starting with a digit.
    static func isBusName(_ name: String) -> Bool {
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        return name.utf8.count <= 255 && elements.count >= 2
            && elements.allSatisfy { element in
                guard let first = element.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
                return element.unicodeScalars.allSatisfy {
                    ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
                        || $0 == "-"
                }
            }
    }

    /// `pausing`: the source's `when-interrupted` is `pause`, which a control left out makes `hold`.
    private mutating func readExternalControl(
        _ pair: YAMLPair, at path: ConfigPath, pausing: Bool
    ) -> ExternalSourceConfig.Control? {
        guard let fields = fields(of: pair.value, at: path, anchor: pair.keyMark, allowed: Self.externalControlKeys)
        else {
            return nil
        }
        let kinds = ["mpris", "mpd", "command"].filter { fields.values[$0] != nil }
        guard kinds.count == 1 else {
            report(pair.keyMark, path, "give exactly one of mpris, mpd, command (found \(kinds.count))")
            return nil
        }
        // `bus` is the D-Bus bus of an MPRIS player: beside mpd or command it was ignored unsaid.
        // Still ignored (a file that started must still start), and said.
        if kinds[0] != "mpris", let bus = fields.values["bus"] {
            warn(
                bus.keyMark, path.appending("bus"),
                "bus is only for mpris (the D-Bus bus its player is on): ignored beside \(kinds[0])")
        }
        switch kinds[0] {
        case "mpris":
            let bus = value(fields, "bus", .string, default: "session") ?? "session"
            guard bus == "session" || bus == "system" else {
                report(fields.values["bus"]?.value.mark, path.appending("bus"), "bus is session or system")
                return nil
            }
            guard let name = optional(fields, "mpris", .string) else { return nil }
            // A name sd-bus refuses made every command fail ("Invalid argument") and a `'` broke the
            // watcher's match rule, all unsaid until a doorbell. Said, and the control left out (the
            // player plays through Baton as one without a control): refused, a file that started
            // would stop batond at its next start (exit 1, which systemd does not restart), its
            // other zones silent, for a control that never worked. A `pause` source so left
            // without a control is held at an interruption (it says so: it passed as `pause`).
            guard Self.isBusName(name) else {
                warn(
                    fields.values["mpris"]?.value.mark, path.appending("mpris"),
                    "not a D-Bus bus name (e.g. org.mpris.MediaPlayer2.mpv): the player has no control, "
                        + "Baton cannot pause it" + (pausing ? "; when-interrupted: pause works as hold" : ""))
                return nil
            }
            return .mpris(busName: name, systemBus: bus == "system")
        case "mpd":
            guard let text = optional(fields, "mpd", .string) else { return nil }
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let port = UInt16(parts[1]), port > 0 else {
                report(
                    fields.values["mpd"]?.value.mark, path.appending("mpd"),
                    "expected ADDRESS:PORT (127.0.0.1:6600)")
                return nil
            }
            // Batond reaches MPD by an IPv4 address (it resolves no names): a name passed the check
            // and failed at every command, the player never paused.
            guard parts[0] == "localhost" || ListenAddress.isIPv4(parts[0]) else {
                report(
                    fields.values["mpd"]?.value.mark, path.appending("mpd"),
                    "\(ConfigSyntax.quoted(parts[0])) is not an IPv4 address or localhost: give MPD's address (192.168.1.20:6600)"
                )
                return nil
            }
            return .mpd(host: String(parts[0]), port: port)
        default:
            guard let pair = fields.values["command"],
                let command = self.fields(
                    of: pair.value, at: path.appending("command"), anchor: pair.keyMark,
                    allowed: Self.externalCommandKeys),
                let pause = required(command, "pause", .string), let resume = required(command, "resume", .string)
            else { return nil }
            // One command for both is a toggle (playerctl play-pause, LMS `pause` with no
            // argument): Baton sends the pause at a stop for good, and a player the user had paused
            // itself (a command pair cannot see it) then starts. Said, not refused: a file that
            // started must still start.
            if pause.split(whereSeparator: \.isWhitespace) == resume.split(whereSeparator: \.isWhitespace) {
                warn(
                    command.values["resume"]?.value.mark, path.appending("command").appending("resume"),
                    "pause and resume are the same command: a toggle; Baton may start a player the user "
                        + "paused: give commands that only pause and only play")
            }
            return .command(pause: pause, resume: resume)
        }
    }
}
