import BatonConfig
import BatonTesting
import Testing

@Suite(.ownThread) struct ConfigErrorTests {
    /// An unsupported format names file, line, column (of the value), key path and the choices.
    @Test func reportsUnsupportedFormat() {
        #expect(
            issueLines(minimalZone + "    format: S24_LE\n") == [
                #"test.yaml:4:13: zones.kitchen.format: "S24_LE" is not a supported format (expected S16_LE or S32_LE)"#
            ])
    }

    /// A misspelt key is rejected at the key, with the closest valid key suggested.
    @Test func suggestsClosestKey() {
        #expect(
            issueLines(minimalZone + "    perod: 10ms\n") == [
                #"test.yaml:4:5: zones.kitchen.perod: unknown key; did you mean "period"?"#
            ])
    }

    /// Misspellings across sections are each matched to their own section's keys.
    @Test(arguments: [
        ("  chanels: 2\n", "zones.kitchen.chanels", "channels"),
        ("  Rate: 2\n", "zones.kitchen.Rate", "rate"),
        ("resampler:\n  musik: soxr-hq\n", "resampler.musik", "music"),
        ("alsa_config: a.conf\n", "alsa_config", "alsa-config"),
        ("api:\n  max_body: 1KiB\n", "api.max_body", "max-body"),
        ("policy:\n  duk: {}\n", "policy.duk", "duck"),
    ])
    func suggestsKeyInSection(snippet: String, path: String, suggestion: String) throws {
        // Zone snippets are indented one more level, inside kitchen.
        let text = snippet.hasPrefix("  ") ? minimalZone + "  " + snippet : minimalZone + snippet
        let lines = try #require(issueLines(text))
        #expect(lines.count == 1)
        #expect(lines.first?.hasSuffix("\(path): unknown key; did you mean \"\(suggestion)\"?") == true)
    }

    /// An unknown key with no close match lists the valid keys instead.
    @Test func listsValidKeysWhenNothingIsClose() {
        #expect(
            issueLines(minimalZone + "    speaker: 3\n") == [
                "test.yaml:4:5: zones.kitchen.speaker: unknown key (expected one of: pcm, board, rate, channels, device-channels, format, period, buffer, clock, render-ahead, resampler, volume, max-volume, mixer, snapcast)"
            ])
    }

    /// Bad values each give one exact message at the value's position.
    @Test(arguments: [
        ("rate: 1000", "1000 is out of range (expected 8000...384000)"),
        ("rate: fast", #""fast" is not an integer"#),
        ("rate: 44.1", #""44.1" is not an integer"#),
        ("rate: {a: 1}", "expected an integer, found a mapping"),
        ("rate: [1]", "expected an integer, found a sequence"),
        ("channels: 0", "0 is out of range (expected 1...8)"),
        ("channels: 9", "9 is out of range (expected 1...8)"),
        ("period: 10", #""10" is not a duration (expected e.g. 500us, 10ms, 1.5s, 5m or 1h)"#),
        ("period: 10 ms", #""10 ms" is not a duration (expected e.g. 500us, 10ms, 1.5s, 5m or 1h)"#),
        ("period: 2s", "2s is out of range (expected 1ms...1s)"),
        ("period: 500us", "500us is out of range (expected 1ms...1s)"),
        ("clock: wall", #""wall" is not a supported clock (expected device or system)"#),
        (
            "resampler: best",
            #""best" is not a supported resampler (expected auto, soxr-qq, soxr-lq, soxr-mq, soxr-hq, soxr-vhq, src-fastest, src-medium or src-best)"#
        ),
    ])
    func reportsBadZoneValue(line: String, message: String) {
        let key = line.prefix { $0 != ":" }
        let column = 4 + key.count + 3  // indent, key, ": "
        #expect(
            issueLines(minimalZone + "    \(line)\n") == ["test.yaml:4:\(column): zones.kitchen.\(key): \(message)"])
    }

    /// Bad values outside zones give exact messages too.
    @Test(arguments: [
        (
            "api:\n  listen: localhost\n",
            #"test.yaml:5:11: api.listen: "localhost" is not a valid listen address (expected host:port, e.g. 127.0.0.1:8470 or "[::1]:8470")"#
        ),
        (
            "api:\n  listen: 127.000.000.001:8470\n",
            #"test.yaml:5:11: api.listen: "127.000.000.001:8470" is not a valid listen address (expected host:port, e.g. 127.0.0.1:8470 or "[::1]:8470")"#
        ),
        (
            "api:\n  listen: my-pi.local:8470\n",
            #"test.yaml:5:11: api.listen: "my-pi.local:8470" is not an address to listen on (a host name cannot be; expected e.g. 0.0.0.0:8470 for every interface, 127.0.0.1:8470 for this machine only)"#
        ),
        (
            "api:\n  max-body: 64kb\n",
            #"test.yaml:5:13: api.max-body: "64kb" is not a size (expected e.g. 65536, 512B, 64KiB or 1MiB)"#
        ),
        ("api:\n  max-body: 32MiB\n", "test.yaml:5:13: api.max-body: 32MiB is out of range (expected 1B...16MiB)"),
        (
            "api:\n  connections-per-client: 100\n",
            "test.yaml:5:27: api.connections-per-client: 100 is out of range (expected 1...64)"
        ),
        (
            "resampler:\n  music: sox\n",
            #"test.yaml:5:10: resampler.music: "sox" is not a supported resampler (expected soxr-qq, soxr-lq, soxr-mq, soxr-hq, soxr-vhq, src-fastest, src-medium or src-best)"#
        ),
        (
            "policy:\n  duck: {level: -15}\n",
            #"test.yaml:5:17: policy.duck.level: "-15" is not a level in decibels (expected e.g. -15dB)"#
        ),
        (
            "policy:\n  duck: {level: 6dB}\n",
            "test.yaml:5:17: policy.duck.level: 6dB is out of range (expected -96dB...0dB)"
        ),
        (
            "policy:\n  classes:\n    music: {priority: 10, kind: forever}\n" + builtInClasses,
            #"test.yaml:6:33: policy.classes.music.kind: "forever" is not a supported kind (expected transient or permanent)"#
        ),
        (
            "policy:\n  classes:\n    music: {priority: 10, kind: permanent, ttl: 2h}\n" + builtInClasses,
            "test.yaml:6:49: policy.classes.music.ttl: 2h is out of range (expected 0ms...1h)"
        ),
        (
            "policy:\n  classes:\n    music: {priority: 10, kind: permanent, lower: cork}\n" + builtInClasses,
            #"test.yaml:6:51: policy.classes.music.lower: "cork" is not a supported action (expected interrupt, duck or mix)"#
        ),
        ("sounds: [a]\n", "test.yaml:4:9: sounds: expected a string, found a sequence"),
    ])
    func reportsBadValue(snippet: String, expected: String) {
        #expect(issueLines(minimalZone + snippet) == [expected])
    }

    /// A buffer shorter than two periods is reported at the buffer, with the arithmetic.
    @Test func rejectsBufferShorterThanTwoPeriods() {
        #expect(
            issueLines(minimalZone + "    period: 10ms\n    buffer: 15ms\n") == [
                "test.yaml:5:13: zones.kitchen.buffer: 15ms is shorter than 2 periods (2 × 10ms = 20ms)"
            ])
    }

    /// A config with no zones, or an empty zones mapping, is an error.
    @Test(arguments: [
        ("api:\n  listen: 127.0.0.1:1\n", "test.yaml:1:1: zones: at least one zone is required"),
        ("zones: {}\n", "test.yaml:1:8: zones: at least one zone is required"),
        ("zones:\n", "test.yaml:1:7: zones: at least one zone is required"),
    ])
    func requiresAtLeastOneZone(text: String, expected: String) {
        #expect(issueLines(text) == [expected])
    }

    /// Zone names outside [a-z0-9_-] are rejected at the name; in the key path, a name that would
    /// not read as one key (empty, with a space or a dot) is quoted.
    @Test(arguments: [
        ("Kitchen", "Kitchen", "Kitchen"), ("living room", "living room", #""living room""#),
        ("küche", "küche", "küche"), ("a.b", "a.b", #""a.b""#), (#""""#, "", #""""#),
    ])
    func rejectsBadZoneName(yaml: String, name: String, inPath: String) {
        #expect(
            issueLines("zones:\n  \(yaml):\n    pcm: x\n") == [
                "test.yaml:2:3: zones.\(inPath): zone name \"\(name)\" must match [a-z0-9_-]+ (it appears in URLs and MQTT topics)"
            ])
    }

    /// Class names follow the zone name rule, and an empty classes mapping is an error.
    @Test func rejectsBadClasses() {
        #expect(
            issueLines(minimalZone + "policy:\n  classes:\n    Music: {priority: 1, kind: permanent}\n") == [
                #"test.yaml:6:5: policy.classes.Music: class name "Music" must match [a-z0-9_-]+"#
            ])
        #expect(
            issueLines(minimalZone + "policy:\n  classes: {}\n") == [
                "test.yaml:5:12: policy.classes: at least one class is required"
            ])
    }

    /// A two-letter unknown key gets the list of valid keys, not a far-fetched suggestion.
    @Test func doesNotSuggestForTinyKeys() {
        #expect(
            issueLines(minimalZone + "ab: 1\n") == [
                "test.yaml:4:1: ab: unknown key (expected one of: api, zones, groups, board, boards-dir, sounds, resampler, alsa-config, output-dir, state-dir, policy, music, device, mqtt, gpio, intercom, speech, announce, external-sources, silence-alarm)"
            ])
    }

    /// A zone without a PCM names the zone; a PCM with no value or an empty one points at the value.
    @Test func requiresPCM() {
        #expect(
            issueLines("zones:\n  kitchen:\n    rate: 44100\n") == [
                #"test.yaml:2:3: zones.kitchen: missing required key "pcm""#
            ])
        #expect(
            issueLines("zones:\n  kitchen:\n    pcm:\n") == [
                "test.yaml:3:9: zones.kitchen.pcm: a value is required"
            ])
        #expect(
            issueLines("zones:\n  kitchen:\n    pcm: ''\n") == [
                "test.yaml:3:10: zones.kitchen.pcm: must not be empty"
            ])
    }

    /// A zone written as a scalar is a type error at its value.
    @Test func rejectsScalarZone() {
        #expect(
            issueLines("zones:\n  kitchen: baton\n") == [
                "test.yaml:2:12: zones.kitchen: expected a mapping, found a scalar"
            ])
    }

    /// A duplicate key is reported with both positions and its key path.
    @Test func rejectsDuplicateKey() {
        #expect(
            issueLines(minimalZone + "    pcm: other\n") == [
                #"test.yaml:4:5: zones.kitchen.pcm: duplicate key "pcm" (first at line 3, column 5)"#
            ])
    }

    /// Two classes with the same priority are ambiguous and rejected at the second.
    @Test func rejectsDuplicatePriority() {
        let text =
            minimalZone + """
                policy:
                  classes:
                    music: {priority: 10, kind: permanent}
                    radio: {priority: 10, kind: permanent}
                    announcement: {priority: 50, kind: transient}
                    call: {priority: 90, kind: transient}

                """
        #expect(
            issueLines(text) == [
                #"test.yaml:7:23: policy.classes.radio.priority: priority 10 is already used by class "music""#
            ])
    }

    /// An empty file, or one with only comments, is an error without a position.
    @Test(arguments: ["", "# nothing here\n", "---\n", "~\n"])
    func rejectsEmptyFile(text: String) {
        #expect(issueLines(text) == ["test.yaml: the configuration is empty; at least one zone is required"])
    }

    /// A top level that is not a mapping is reported at its start.
    @Test func rejectsNonMappingTopLevel() {
        #expect(issueLines("- a\n- b\n") == ["test.yaml:1:1: expected a mapping at the top level, found a sequence"])
    }

    /// A YAML syntax error reports libyaml's problem at its line and column.
    @Test func reportsSyntaxErrorPosition() {
        #expect(
            issueLines("zones:\n  kitchen:\n    pcm: a\n   rate: 1\n") == [
                "test.yaml:4:4: did not find expected key (while parsing a block mapping at line 2, column 3)"
            ])
    }

    /// Every problem in a file is reported in one pass, in source order, one per line.
    @Test func collectsAllIssuesInOnePass() throws {
        let text = """
            api:
              listen: nowhere
            zones:
              kitchen:
                pcm: a
                rate: 1
                perod: 5ms
              Patio:
                clock: wall
            """
        let error = try #require(throws: ConfigError.self) { try BatonConfiguration.parse(text: text, file: "c.yaml") }
        #expect(
            error.description == """
                c.yaml:2:11: api.listen: "nowhere" is not a valid listen address (expected host:port, e.g. 127.0.0.1:8470 or "[::1]:8470")
                c.yaml:6:11: zones.kitchen.rate: 1 is out of range (expected 8000...384000)
                c.yaml:7:5: zones.kitchen.perod: unknown key; did you mean "period"?
                c.yaml:8:3: zones.Patio: zone name "Patio" must match [a-z0-9_-]+ (it appears in URLs and MQTT topics)
                c.yaml:8:3: zones.Patio: missing required key "pcm"
                c.yaml:9:12: zones.Patio.clock: "wall" is not a supported clock (expected device or system)
                """)
        #expect(
            error.issues.first
                == ConfigIssue(
                    file: "c.yaml", line: 2, column: 11, path: "api.listen",
                    message:
                        #""nowhere" is not a valid listen address (expected host:port, e.g. 127.0.0.1:8470 or "[::1]:8470")"#
                ))
    }

    /// An out-of-range level is cut in the message as other values are: it has any number of
    /// digits, and the whole of it (megabytes) was echoed.
    @Test func anOutOfRangeLevelIsCut() throws {
        let level = "-1" + String(repeating: "0", count: 100_000) + "dB"
        let lines = try #require(issueLines("policy:\n  duck: {level: \(level)}\n" + minimalZone))
        #expect(lines.count == 1 && lines[0].utf8.count < 300, "\(lines[0].prefix(300))")
        #expect(lines[0].hasPrefix("test.yaml:2:17: policy.duck.level: -100000"), "\(lines[0].prefix(300))")
        #expect(lines[0].hasSuffix("… is out of range (expected -96dB...0dB)"), "\(lines[0].suffix(300))")
    }

    /// A merge key (`<<`) says so where it is: it was read as a key, or a zone, named `<<`.
    @Test func aMergeKeyIsSaidUnsupported() {
        let lines = issueLines(
            """
            zones:
              <<: {pcm: x}
              kitchen:
                pcm: x
                <<: {rate: 48000}

            """)
        let message = "merge keys are not supported (write the keys out; an alias such as *base copies a whole node)"
        #expect(lines == ["test.yaml:2:3: zones.<<: \(message)", "test.yaml:5:5: zones.kitchen.<<: \(message)"])
    }

    /// The problems listed stop at 50, then say how many more there are: a hostile file of a
    /// hundred thousand unknown keys made as many lines.
    @Test func theProblemsListedStopAtFifty() throws {
        var text = minimalZone
        for index in 0..<1000 { text += "    x\(index): 1\n" }
        let lines = try #require(issueLines(text))
        #expect(lines.count == 51)
        #expect(lines.first?.hasPrefix("test.yaml:4:5: zones.kitchen.x0: unknown key") == true, "\(lines[0])")
        #expect(lines.last == "test.yaml: and 950 more problems, not shown (fix these first)")
    }
}
