import BatonConfig
import BatonTesting
import Testing

/// Three zones, before any groups.
private let threeZones = """
    zones:
      kitchen: {pcm: a}
      living: {pcm: b}
      patio: {pcm: c}

    """

private let withGroups =
    threeZones + """
        groups:
          downstairs: [living, kitchen]
          outside: [patio]

        """

@Suite(.ownThread) struct ConfigGroupTests {
    /// Groups are read in file order with their zones as listed.
    @Test func readsGroups() throws {
        let configuration = try load(withGroups)
        #expect(
            configuration.groups == [
                GroupConfig(name: "downstairs", zones: ["living", "kitchen"]),
                GroupConfig(name: "outside", zones: ["patio"]),
            ])
        #expect(configuration.group(named: "outside")?.zones == ["patio"])
        #expect(try load(threeZones).groups == [])
    }

    /// Expanding names gives zones in file order, each once; `all` is every zone.
    @Test(arguments: [
        ([String](), [String]()),
        (["all"], ["kitchen", "living", "patio"]),
        (["downstairs"], ["kitchen", "living"]),
        (["patio", "downstairs"], ["kitchen", "living", "patio"]),
        (["kitchen", "downstairs", "kitchen"], ["kitchen", "living"]),
        (["outside", "all"], ["kitchen", "living", "patio"]),
    ])
    func expandsNames(names: [String], zones: [String]) throws {
        #expect(try load(withGroups).expand(names) == zones)
    }

    /// An unknown name is an error listing the zones and groups, with a suggestion when one is close.
    @Test(arguments: [
        (
            ["patoi"],
            #"unknown zone or group "patoi"; did you mean "patio"? (zones: kitchen, living, patio; groups: downstairs, outside; all: every zone)"#
        ),
        (
            ["all", "xyz"],
            #"unknown zone or group "xyz" (zones: kitchen, living, patio; groups: downstairs, outside; all: every zone)"#
        ),
    ])
    func rejectsUnknownName(names: [String], message: String) throws {
        let configuration = try load(withGroups)
        let error = #expect(throws: UnknownZoneError.self) { try configuration.expand(names) }
        #expect(error?.description == message)
    }

    /// With no groups the error says so.
    @Test func saysWhenThereAreNoGroups() throws {
        let error = #expect(throws: UnknownZoneError.self) { try load(threeZones).expand(["x"]) }
        #expect(
            error?.description
                == #"unknown zone or group "x" (zones: kitchen, living, patio; groups: none; all: every zone)"#)
    }

    /// Bad groups each give one exact message.
    @Test(arguments: [
        (
            "  Outside: [patio]\n",
            #"test.yaml:6:3: groups.Outside: group name "Outside" must match [a-z0-9_-]+ (it appears in URLs and MQTT topics)"#
        ),
        ("  all: [patio]\n", #"test.yaml:6:3: groups.all: "all" is reserved: it always means every zone"#),
        ("  kitchen: [patio]\n", #"test.yaml:6:3: groups.kitchen: group name "kitchen" is already a zone name"#),
        ("  outside: []\n", "test.yaml:6:12: groups.outside: a group needs at least one zone"),
        ("  outside:\n", "test.yaml:6:11: groups.outside: a group needs at least one zone"),
        ("  outside: patio\n", "test.yaml:6:12: groups.outside: expected a sequence, found a scalar"),
        ("  outside: [patoi]\n", #"test.yaml:6:13: groups.outside: unknown zone "patoi"; did you mean "patio"?"#),
        (
            "  outside: [garage]\n",
            #"test.yaml:6:13: groups.outside: unknown zone "garage" (expected one of: kitchen, living, patio)"#
        ),
        ("  outside: [patio, patio]\n", #"test.yaml:6:20: groups.outside: zone "patio" is listed twice"#),
        ("  outside: [all]\n", #"test.yaml:6:13: groups.outside: "all" is not a zone: a group lists zones only"#),
        (
            "  outside: [patio]\n  both: [outside]\n",
            #"test.yaml:7:10: groups.both: "outside" is not a zone: a group lists zones only"#
        ),
        ("  outside: [{a: 1}]\n", "test.yaml:6:13: groups.outside: expected a string, found a mapping"),
    ])
    func reportsBadGroup(snippet: String, expected: String) {
        #expect(issueLines(threeZones + "groups:\n" + snippet) == [expected])
    }

    /// A long value is quoted cut, after 80 characters, in the message and in the key path: the
    /// messages quoted it whole (and a long key in the path of every issue under it).
    @Test func longValuesAreCutInMessages() {
        let long = String(repeating: "x", count: 300)
        let cut = String(repeating: "x", count: 80) + "…"
        #expect(
            issueLines(threeZones + "groups:\n  outside: [\(long)]\n") == [
                "test.yaml:6:13: groups.outside: unknown zone \"\(cut)\" (expected one of: kitchen, living, patio)"
            ])
        let key = String(repeating: "X", count: 300)
        let keyCut = String(repeating: "X", count: 80) + "…"
        #expect(
            issueLines(threeZones + "groups:\n  \(key): [garage]\n") == [
                "test.yaml:6:3: groups.\(keyCut): group name \"\(keyCut)\" must match [a-z0-9_-]+ (it appears in URLs and MQTT topics)",
                "test.yaml:6:306: groups.\(keyCut): unknown zone \"garage\" (expected one of: kitchen, living, patio)",
            ])
    }

    /// An unknown zone among many lists the first 10 and says how many more: every zone was
    /// listed in every such message (20,000 zones and as many unknown names in a half-megabyte
    /// file made gigabytes of messages at a reload).
    @Test func anUnknownZoneAmongManyListsTenOfThem() throws {
        let zones = (0..<12).map { "  z\($0): {pcm: p\($0)}\n" }.joined()
        let lines = try #require(issueLines("zones:\n" + zones + "groups:\n  outside: [garage]\n"))
        #expect(
            lines == [
                "test.yaml:15:13: groups.outside: unknown zone \"garage\" (expected one of: "
                    + (0..<10).map { "z\($0)" }.joined(separator: ", ") + ", … and 2 more)"
            ], "\(lines)")
    }

    /// Aliases of a 3.5 MB value, as many as the text limit lets through, each an unknown zone:
    /// refused at once with short messages. Each message held the whole value, and a suggestion
    /// was looked for by an edit distance over all of it, for every zone.
    @Test func aliasesOfALongValueAreRefusedQuickly() throws {
        let value = String(repeating: "a", count: 3_500_000)
        let text = threeZones + "sounds: &a \(value)\ngroups:\n  outside: [*a, *a, *a]\n"
        let started = ContinuousClock.now
        let lines = try #require(issueLines(text))
        #expect(ContinuousClock.now - started < .seconds(3))
        #expect(lines.count == 3 && lines.allSatisfy { $0.utf8.count < 250 }, "\(lines.map { $0.prefix(300) })")
        #expect(
            lines.first?.hasPrefix("test.yaml:5:9: groups.outside: unknown zone \"aaaa") == true,
            "\(lines.map { $0.prefix(300) })")
    }
}

@Suite(.ownThread) struct ConfigVolumeTests {
    /// Volumes are percentages or fractions of 1.
    @Test(arguments: [
        ("80%", 0.8), ("0.8", 0.8), ("100%", 1.0), ("0%", 0.0), ("1", 1.0), ("0", 0.0),
        ("12.5%", 0.125), ("0.05", 0.05),
    ])
    func parsesVolume(text: String, volume: Double) throws {
        #expect(ConfigSyntax.volume(text) == volume)
        #expect(try load(minimalZone + "    volume: \(text)\n").zones[0].volume == volume)
    }

    /// Malformed and out-of-range volumes are rejected.
    @Test(arguments: ["", "%", "80 %", "-1%", "120%", "1.5", "80", "0.8%%", ".5", "5.", "1e-1", "loud"])
    func rejectsBadVolume(text: String) {
        #expect(ConfigSyntax.volume(text) == nil)
    }

    /// Volumes format as whole percentages when they are, else as fractions, else as the shortest
    /// decimals that read back (`12.3%` is 0.12300000000000001, which was written out whole, too
    /// long to read back: the effective configuration did not load), and read back exactly.
    @Test(arguments: [
        (0.8, "80%"), (1.0, "100%"), (0.0, "0%"), (0.855, "0.855"), (0.125, "0.125"), (0.07, "7%"),
        (12.3 / 100, "12.3%"), (57.7 / 100, "57.7%"),
    ])
    func formatsVolume(volume: Double, text: String) {
        #expect(ConfigSyntax.formatVolume(volume) == text)
        #expect(ConfigSyntax.volume(text) == volume)
    }

    /// A zone starts at 100% with no cap and software gain; without its own volume it starts at its cap.
    @Test func appliesVolumeDefaults() throws {
        let zone = try load(minimalZone).zones[0]
        #expect(zone.volume == 1 && zone.maxVolume == 1 && zone.mixer == nil)
        let capped = try load(minimalZone + "    max-volume: 90%\n    mixer: Digital\n").zones[0]
        #expect(capped.volume == 0.9 && capped.maxVolume == 0.9 && capped.mixer == "Digital")
    }

    /// Bad volumes give exact messages at the value.
    @Test(arguments: [
        ("volume: loud", #""loud" is not a volume (expected e.g. 80% or 0.8)"#),
        ("volume: 120%", "120% is out of range (expected 0%...100%)"),
        ("volume: 80", "80 is out of range (expected 0...1, or a percentage such as 80%)"),
        ("max-volume: 1.5", "1.5 is out of range (expected 0...1, or a percentage such as 80%)"),
        ("mixer: ''", "must not be empty"),
    ])
    func reportsBadVolume(line: String, message: String) {
        let key = line.prefix { $0 != ":" }
        let column = 4 + key.count + 3
        #expect(
            issueLines(minimalZone + "    \(line)\n") == ["test.yaml:4:\(column): zones.kitchen.\(key): \(message)"])
    }

    /// A volume above the zone's cap is reported at the volume.
    @Test func rejectsVolumeAboveCap() {
        #expect(
            issueLines(minimalZone + "    volume: 95%\n    max-volume: 90%\n") == [
                "test.yaml:4:13: zones.kitchen.volume: 95% is above max-volume 90%"
            ])
    }
}
