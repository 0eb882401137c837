import BatonConfig
import BatonTesting
import FoundationEssentials
import Testing

private let dacplus = """
    name: Test DAC+ (PCM5122)
    pcm: hw:CARD=testdac,DEV=0
    rates: [44100, 48000, 96000]
    formats: [S16_LE, S32_LE]
    channels: 2
    mixer: Digital
    dtoverlay: dtoverlay=hifiberry-dacplus
    period: 5ms
    buffer: 20ms
    notes: >
      For tests.

    """

private let hires = """
    name: Test hi-res DAC
    pcm: hw:CARD=hires,DEV=0
    rates: [96000, 192000]
    formats: [S32_LE]
    channels: 2
    period: 10ms
    buffer: 40ms
    clock: device

    """

/// A fresh boards directory holding `dacplus.yaml`, `hires.yaml` and a README that is not a profile.
private func boardsDirectory() -> String {
    let directory = TestDirectory.make("config-test")
    writeFile(directory + "/dacplus.yaml", dacplus)
    writeFile(directory + "/hires.yaml", hires)
    writeFile(directory + "/README.md", "not a profile\n")
    return directory
}

/// The issue lines for a configuration whose `boards-dir` is `directory` (line 1), followed by `text`.
private func boardIssues(_ text: String, directory: String) -> [String]? {
    issueLines("boards-dir: \(directory)\n" + text)
}

@Suite(.ownThread) struct BoardProfileTests {
    /// A profile file is read completely; its id is the file name.
    @Test func loadsProfile() throws {
        let directory = boardsDirectory()
        #expect(
            try BoardProfile.load(path: directory + "/dacplus.yaml")
                == BoardProfile(
                    id: "dacplus", name: "Test DAC+ (PCM5122)", pcm: "hw:CARD=testdac,DEV=0",
                    rates: [44100, 48000, 96000],
                    formats: [.s16LE, .s32LE], channels: 2, mixer: "Digital", dtoverlay: "dtoverlay=hifiberry-dacplus",
                    period: .milliseconds(5), buffer: .milliseconds(20), clock: .device, notes: "For tests.\n"))
    }

    /// `mixer: none` in a profile is no mixer and software volume, as on a zone: it was hardware
    /// volume on a control named "none".
    @Test func aProfilesMixerNoneIsNoMixer() throws {
        let directory = TestDirectory.make("config-test")
        writeFile(directory + "/usb.yaml", hires.replacing("channels: 2\n", with: "channels: 2\nmixer: none\n"))
        let profile = try BoardProfile.load(path: directory + "/usb.yaml")
        #expect(profile.mixer == nil && profile.volume == .software)
    }

    /// loadAll reads every .yaml file in name order and ignores other files.
    @Test func loadsAllProfiles() throws {
        let profiles = try BoardProfile.loadAll(directory: boardsDirectory())
        #expect(profiles.map(\.id) == ["dacplus", "hires"])
        #expect(profiles[1].defaultRate == 96000 && profiles[1].defaultFormat == .s32LE && profiles[1].mixer == nil)
        #expect(profiles[0].defaultRate == 48000 && profiles[0].defaultFormat == .s16LE)
    }

    /// loadAll reports the problems of every bad file at once; an unreadable directory is one issue.
    @Test func collectsProblemsOfAllProfiles() {
        let directory = TestDirectory.make("config-test")
        writeFile(directory + "/a.yaml", dacplus.replacing("channels: 2", with: "channels: 9"))
        writeFile(directory + "/b.yaml", hires.replacing("name: Test hi-res DAC\n", with: ""))
        let error = #expect(throws: ConfigError.self) { try BoardProfile.loadAll(directory: directory) }
        #expect(
            error?.issues.map(\.description) == [
                "\(directory)/a.yaml:5:11: channels: 9 is out of range (expected 1...8)",
                "\(directory)/b.yaml:1:1: missing required key \"name\"",
            ])
        #expect(
            throws: ConfigError(issues: [
                ConfigIssue(
                    file: "/nonexistent", line: nil, column: nil, path: "",
                    message: "cannot read the directory: No such file or directory")
            ])
        ) {
            try BoardProfile.loadAll(directory: "/nonexistent")
        }
    }

    /// Bad profile values give exact messages, with the profile's file name.
    @Test(arguments: [
        ("rates: [44100, 48000, 96000]", "rates: []", "3:8: rates: at least one value is required"),
        ("rates: [44100, 48000, 96000]", "rates: [44100, 44100]", "3:16: rates: 44100 is listed twice"),
        ("rates: [44100, 48000, 96000]", "rates: [4000]", "3:9: rates: 4000 is out of range (expected 8000...384000)"),
        (
            "formats: [S16_LE, S32_LE]", "formats: [S24_LE]",
            #"4:11: formats: "S24_LE" is not a supported format (expected S16_LE or S32_LE)"#
        ),
        ("formats: [S16_LE, S32_LE]", "formats: S16_LE", "4:10: formats: expected a sequence, found a scalar"),
        ("dtoverlay:", "overlay:", #"7:1: overlay: unknown key; did you mean "dtoverlay"?"#),
        ("buffer: 20ms", "buffer: 8ms", "9:9: buffer: 8ms is shorter than 2 periods (2 × 5ms = 10ms)"),
        ("clock: device", "clock: wall", #"8:8: clock: "wall" is not a supported clock (expected device or system)"#),
    ])
    func reportsBadProfile(original: String, replacement: String, expected: String) {
        let directory = TestDirectory.make("config-test")
        let text = expected.hasPrefix("8:8") ? hires : dacplus
        writeFile(directory + "/bad.yaml", text.replacing(original, with: replacement))
        let error = #expect(throws: ConfigError.self) { try BoardProfile.load(path: directory + "/bad.yaml") }
        #expect(error?.issues.map(\.description) == ["\(directory)/bad.yaml:\(expected)"])
    }

    /// A zone with a board takes the board's PCM, channels, mixer, period, buffer and clock, and a
    /// rate and format the board supports.
    @Test func fillsZoneDefaultsFromBoard() throws {
        let directory = boardsDirectory()
        let configuration = try load("boards-dir: \(directory)\nzones:\n  living: {board: dacplus}\n")
        #expect(
            configuration.zones == [
                ZoneConfig(
                    name: "living", pcm: "hw:CARD=testdac,DEV=0", rate: 48000, channels: 2, format: .s16LE,
                    period: .milliseconds(5), buffer: .milliseconds(20), clock: .device, mixer: "Digital",
                    board: "dacplus")
            ])
        #expect(configuration.boardsDir == directory && configuration.board == nil)
    }

    /// The zone's own keys win over the board's.
    @Test func letsZoneOverrideBoard() throws {
        let zone = try load(
            """
            boards-dir: \(boardsDirectory())
            zones:
              living: {board: dacplus, pcm: plughw:1, rate: 96000, format: S32_LE, period: 10ms, buffer: 40ms, mixer: PCM, clock: system}

            """
        ).zones[0]
        #expect(
            zone
                == ZoneConfig(
                    name: "living", pcm: "plughw:1", rate: 96000, channels: 2, format: .s32LE,
                    period: .milliseconds(10), buffer: .milliseconds(40), clock: .system, mixer: "PCM",
                    board: "dacplus"))
    }

    /// A board's own device takes its channel count only: fewer (or another device-channels) is
    /// refused at load, where the zone was unavailable at every open. Through another PCM (a
    /// `plughw:` that converts) it is the zone's to choose.
    @Test func aBoardsDeviceTakesItsOwnChannelCount() {
        let directory = boardsDirectory()
        #expect(
            boardIssues(
                "zones:\n  living: {board: dacplus, channels: 1}\n"
                    + "  den: {board: dacplus, pcm: other, channels: [left], device-channels: 8}\n"
                    + "  loft: {board: dacplus, channels: [left], device-channels: 8}\n",
                directory: directory) == [
                    #"test.yaml:3:38: zones.living.channels: board "dacplus"'s device hw:CARD=testdac,DEV=0 takes 2 channels, not 1 (to drive some of them, list them: channels: [left])"#,
                    #"test.yaml:5:61: zones.loft.device-channels: board "dacplus"'s device hw:CARD=testdac,DEV=0 takes 2 channels, not 8"#,
                ])
        let converted = "zones:\n  living: {board: dacplus, pcm: \"plughw:CARD=testdac\", channels: 1}\n"
        #expect(boardIssues(converted, directory: directory) == nil, "through plughw the zone chooses")
    }

    /// `mixer: none` on a zone turns a board's hardware volume into Baton's software gain, and the
    /// effective configuration says so: it left the mixer out, and read back the board's applied.
    @Test func mixerNoneMeansSoftwareGain() throws {
        let configuration = try load(
            "boards-dir: \(boardsDirectory())\nzones:\n  living: {board: dacplus, mixer: none}\n")
        #expect(configuration.zones[0].mixer == nil)
        let json = String(decoding: try JSONEncoder().encode(configuration), as: UTF8.self)
        let reread = try BatonConfiguration.parse(text: json, file: "effective.json", baseDirectory: "")
        #expect(reread.zones[0].mixer == nil, "\(json)")
    }

    /// Zones sharing a board's device use software gain: the board's mixer control sets every
    /// channel of the card (one zone's volume moved the other's, whose status still said 100 %).
    /// A zone alone on its device keeps the board's mixer.
    @Test func zonesSharingABoardsDeviceUseSoftwareGain() throws {
        let zones = try load(
            """
            boards-dir: \(boardsDirectory())
            board: dacplus
            zones:
              kitchen: {channels: [left]}
              patio: {channels: [right]}
              study: {pcm: "hw:CARD=other,DEV=0"}

            """
        ).zones
        #expect(zones.map(\.mixer) == [nil, nil, "Digital"])
    }

    /// The top-level board applies to zones without their own; a board without 48000 Hz or S16_LE
    /// gives its first rate and format.
    @Test func inheritsTopLevelBoard() throws {
        let configuration = try load(
            """
            boards-dir: \(boardsDirectory())
            board: hires
            zones:
              living: {}
              kitchen: {board: dacplus}

            """)
        #expect(configuration.board == "hires")
        #expect(configuration.zones.map(\.board) == ["hires", "dacplus"])
        #expect(configuration.zones.map(\.rate) == [96000, 48000])
        #expect(configuration.zones.map(\.format) == [.s32LE, .s16LE])
        #expect(configuration.zones.map(\.pcm) == ["hw:CARD=hires,DEV=0", "hw:CARD=testdac,DEV=0"])
    }

    /// Two zones on a board's device by channel: the device count comes from the board.
    @Test func sharesBoardDeviceByChannel() throws {
        let configuration = try load(
            """
            boards-dir: \(boardsDirectory())
            board: dacplus
            zones:
              kitchen: {channels: [left]}
              patio: {channels: [right]}

            """)
        #expect(configuration.devices.count == 1)
        #expect(configuration.devices[0].channels == 2 && configuration.devices[0].period == .milliseconds(5))
        #expect(configuration.devices[0].zones.map(\.deviceChannels) == [[0], [1]])
    }

    /// Board problems give exact messages naming the board and what it allows.
    @Test(arguments: [
        (
            "  living: {board: dacplus, rate: 32000}\n",
            #"test.yaml:3:34: zones.living.rate: 32000 is not supported by board "dacplus" (expected one of: 44100, 48000, 96000)"#
        ),
        (
            "  living: {board: hires, format: S16_LE}\n",
            #"test.yaml:3:34: zones.living.format: S16_LE is not supported by board "hires" (expected one of: S32_LE)"#
        ),
        (
            "  living: {board: dacplus, channels: 4}\n",
            #"test.yaml:3:38: zones.living.channels: 4 is more than board "dacplus" has (2 channels)"#
        ),
        (
            "  living: {board: dacplus, channels: [center]}\n",
            "test.yaml:3:38: zones.living.channels: channel 4 (center) does not exist on a 2-channel device (expected 0...1)"
        ),
        (
            "  living: {board: dacplu}\n",
            #"test.yaml:3:19: zones.living.board: no board profile "dacplu" in DIR; did you mean "dacplus"?"#
        ),
        (
            "  living: {board: pi5}\n",
            #"test.yaml:3:19: zones.living.board: no board profile "pi5" in DIR (available: dacplus, hires)"#
        ),
        (
            "  living: {board: ../dacplus}\n",
            #"test.yaml:3:19: zones.living.board: board name "../dacplus" must match [a-z0-9_-]+ (it names a file in the boards directory)"#
        ),
    ])
    func reportsBoardProblems(zone: String, expected: String) {
        let directory = boardsDirectory()
        #expect(boardIssues("zones:\n" + zone, directory: directory) == [expected.replacing("DIR", with: directory)])
    }

    /// An unknown top-level board is reported once, at the top-level key, not for every zone.
    @Test func reportsUnknownTopLevelBoardOnce() {
        let directory = boardsDirectory()
        #expect(
            boardIssues("board: pi5\nzones:\n  a: {}\n  b: {}\n", directory: directory) == [
                #"test.yaml:2:8: board: no board profile "pi5" in \#(directory) (available: dacplus, hires)"#
            ])
    }

    /// A zone whose board file is invalid is reported, followed by the board file's own problems.
    @Test func reportsInvalidBoardFile() {
        let directory = boardsDirectory()
        writeFile(directory + "/broken.yaml", dacplus.replacing("channels: 2", with: "channels: 0"))
        #expect(
            boardIssues("zones:\n  a: {board: broken}\n  b: {board: broken}\n", directory: directory) == [
                #"test.yaml:3:14: zones.a.board: board profile "broken" is not valid (see \#(directory)/broken.yaml)"#,
                #"test.yaml:4:14: zones.b.board: board profile "broken" is not valid (see \#(directory)/broken.yaml)"#,
                "\(directory)/broken.yaml:5:11: channels: 0 is out of range (expected 1...8)",
            ])
    }

    /// A boards-dir that does not exist is named with the system's reason.
    @Test func reportsMissingBoardsDirectory() {
        #expect(
            boardIssues("zones:\n  a: {board: dacplus}\n", directory: "/nonexistent/boards") == [
                #"test.yaml:3:14: zones.a.board: no board profile "dacplus": cannot read the boards directory /nonexistent/boards: No such file or directory"#
            ])
    }

    /// Without boards-dir, boards are looked for in <config dir>/../boards, then /usr/share/baton/boards.
    @Test func searchesBoardsNextToConfigDirectory() throws {
        #expect(
            BoardProfile.searchDirectories(configDirectory: "/etc/baton") == [
                "/etc/baton/../boards",
                "/usr/share/baton/boards",
            ])
        let root = TestDirectory.make("config-test")
        makeDirectory(root + "/config")
        makeDirectory(root + "/boards")
        writeFile(root + "/boards/dacplus.yaml", dacplus)
        writeFile(root + "/config/baton.yaml", "zones:\n  living: {board: dacplus}\n")
        let configuration = try BatonConfiguration.load(path: root + "/config/baton.yaml")
        #expect(configuration.boardsDir == root + "/config/../boards")
        #expect(configuration.zones[0].pcm == "hw:CARD=testdac,DEV=0")
    }

    /// When no boards directory exists the message lists where it looked.
    @Test(.enabled(if: !isDirectory(BoardProfile.systemDirectory)))
    func reportsNoBoardsDirectory() {
        let root = TestDirectory.make("config-test")
        #expect(
            issueLines("zones:\n  living: {board: dacplus}\n", file: root + "/conf/baton.yaml") == [
                #"\#(root)/conf/baton.yaml:2:19: zones.living.board: no board profile "dacplus": no boards directory (looked in \#(root)/conf/../boards, /usr/share/baton/boards; set boards-dir)"#
            ])
    }

    /// Every board profile in the repository's boards/ loads and is consistent.
    @Test func loadsEveryRepositoryBoard() throws {
        let directory = repositoryRoot + "/boards"
        let files = yamlFiles(in: directory)
        try #require(
            !files.isEmpty,
            "boards/ has no .yaml board profiles yet: every Pi + DAC profile must be a boards/NAME.yaml file")
        let profiles = try BoardProfile.loadAll(directory: directory)
        #expect(profiles.map { $0.id + ".yaml" } == files)
        for profile in profiles {
            #expect(ZoneConfig.isValidName(profile.id), "\(profile.id): board names must match [a-z0-9_-]+")
            // Its defaults make a valid zone.
            _ = try load("boards-dir: \(directory)\nzones:\n  z: {board: \(profile.id)}\n")
        }
    }

    /// The board example loads against a profile of the documented shape, laid out as in the repository.
    @Test func loadsBoardExampleWithDocumentedProfile() throws {
        let root = TestDirectory.make("config-test")
        for directory in ["/boards", "/config", "/config/examples"] { makeDirectory(root + directory) }
        writeFile(
            root + "/boards/pi4-hifiberry-dacplus.yaml",
            """
            name: Raspberry Pi 4 + HiFiBerry DAC+ (PCM5122)
            pcm: hw:CARD=sndrpihifiberry,DEV=0
            rates: [44100, 48000, 88200, 96000, 176400, 192000]
            formats: [S16_LE, S32_LE]
            channels: 2
            mixer: Digital
            dtoverlay: dtoverlay=hifiberry-dacplus
            period: 10ms
            buffer: 40ms
            clock: device
            notes: >
              The DAC+ has a hardware volume control.

            """)
        let example = try #require(readText(repositoryRoot + "/config/examples/pi-hifiberry-board.yaml"))
        writeFile(root + "/config/examples/board.yaml", example)
        let configuration = try BatonConfiguration.load(path: root + "/config/examples/board.yaml")
        #expect(
            configuration.zones == [
                ZoneConfig(
                    name: "living-room", pcm: "hw:CARD=sndrpihifiberry,DEV=0", rate: 48000, channels: 2, format: .s32LE,
                    clock: .device, volume: 0.6, mixer: "Digital", board: "pi4-hifiberry-dacplus")
            ])
        #expect(configuration.stateDir == "/var/lib/baton")
    }
}
