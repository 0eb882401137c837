import YAML

extension BoardProfile {
    /// Reads and checks the board profile at `path`; its ``id`` is the file name without `.yaml`.
    ///
    /// Thread safety: any thread; no shared state.
    /// - Throws: ``ConfigError`` with every problem found, each naming `path`, line, column and key.
    public static func load(path: String) throws(ConfigError) -> BoardProfile {
        let root = try BatonConfiguration.document(at: path, emptyMessage: "the board profile is empty")
        var reader = ConfigReader(file: path)
        let profile = reader.boardProfile(root, id: id(ofFile: path))
        guard let profile, reader.issues.isEmpty else { throw ConfigError(issues: reader.sortedIssues) }
        return profile
    }

    /// Reads and checks every `*.yaml` file in `directory`, in file name order.
    ///
    /// Thread safety: any thread; no shared state.
    /// - Throws: ``ConfigError`` with the problems of every invalid file, or one issue if the
    ///   directory cannot be read.
    public static func loadAll(directory: String) throws(ConfigError) -> [BoardProfile] {
        let names: [String]
        switch FileReader.names(inDirectory: directory) {
        case .success(let all):
            names = all.filter { $0.hasSuffix(".yaml") }
        case .failure(let error):
            throw ConfigError(issues: [
                ConfigIssue(
                    file: directory, line: nil, column: nil, path: "",
                    message: "cannot read the directory: \(error.message)")
            ])
        }
        var profiles: [BoardProfile] = []
        var issues: [ConfigIssue] = []
        for name in names {
            do {
                profiles.append(try load(path: BatonConfiguration.resolve(name, against: directory)))
            } catch {
                issues += error.issues
            }
        }
        guard issues.isEmpty else { throw ConfigError(issues: issues) }
        return profiles
    }

    /// `pi4-hifiberry-dacplus` for `boards/pi4-hifiberry-dacplus.yaml`.
    static func id(ofFile path: String) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return name.hasSuffix(".yaml") ? String(name.dropLast(5)) : name
    }
}

// MARK: - The schema

extension ConfigReader {
    static let boardKeys = [
        "name", "pcm", "rates", "formats", "channels", "mixer", "volume", "dtoverlay", "period",
        "buffer", "clock", "notes",
    ]

    /// A whole board profile file; `nil` when a required key is missing or wrong (reported).
    mutating func boardProfile(_ root: YAMLNode, id: String) -> BoardProfile? {
        guard root.mapping != nil else {
            report(root.mark, .root, "expected a mapping at the top level, found \(root.kindDescription)")
            return nil
        }
        guard let board = fields(of: root, at: .root, anchor: root.mark, allowed: Self.boardKeys) else { return nil }
        let name = required(board, "name", .string)
        let pcm = required(board, "pcm", .string)
        let rates = requiredList(board, "rates", .integer(ZoneConfig.rateRange))
        let formats = requiredList(board, "formats", .choice(ZoneConfig.SampleFormat.self, "format"))
        let channels = required(board, "channels", .integer(ZoneConfig.channelRange))
        // `mixer: none`, as a zone writes it, is no mixer (it was a control named "none").
        let mixer = optional(board, "mixer", .string).flatMap { $0 == "none" ? nil : $0 }
        let volume = optional(board, "volume", .choice(BoardProfile.VolumeControl.self, "volume control"))
        if volume == .hardware && mixer == nil, let mark = board.values["volume"]?.value.mark {
            report(mark, board.path.appending("volume"), "hardware volume needs a `mixer:` control name")
        }
        let dtoverlay = optional(board, "dtoverlay", .string)
        let period = required(board, "period", .duration(ZoneConfig.periodRange))
        let buffer = required(board, "buffer", .duration(ZoneConfig.bufferRange))
        let clock = value(board, "clock", .choice(ZoneConfig.Clock.self, "clock"), default: .device)
        let notes = optional(board, "notes", .string)
        if let period, let buffer { checkBuffer(buffer, period: period, in: board) }
        guard let name, let pcm, let rates, let formats, let channels, let period, let buffer, let clock else {
            return nil
        }
        return BoardProfile(
            id: id, name: name, pcm: pcm, rates: rates, formats: formats, channels: channels,
            mixer: mixer, dtoverlay: dtoverlay, period: period, buffer: buffer, clock: clock,
            notes: notes, volume: volume ?? (mixer == nil ? .software : .hardware))
    }

    /// Reports a buffer shorter than two periods, at the buffer (or the period when it is the one set).
    mutating func checkBuffer(_ buffer: Duration, period: Duration, in fields: Fields) {
        guard buffer < period * 2 else { return }
        let mark = fields.values["buffer"]?.value.mark ?? fields.values["period"]?.value.mark ?? fields.anchor
        let twice = ConfigSyntax.format(period * 2)
        let message =
            "\(ConfigSyntax.format(buffer)) is shorter than 2 periods (2 × \(ConfigSyntax.format(period)) = \(twice))"
        report(mark, fields.path.appending("buffer"), message)
    }
}

extension ZoneConfig.SampleFormat: CustomStringConvertible {
    /// The name written in files: `S16_LE`.
    public var description: String { rawValue }
}
