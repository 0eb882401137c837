import BatonConfig
import BatonTesting
import FoundationEssentials
import Testing

/// Every trigger key, after minimalZone (lines 4...).
private let fullTriggers = """
    groups:
      inside: [kitchen]
    device: living-room
    mqtt:
      broker: mqtts://broker.local:8884
      username: baton
      password-file: secrets/mqtt.password
      ca-file: /etc/ssl/certs/ca.pem
      cert-file: tls/client.pem
      key-file: tls/client.key
      discovery: false
      discovery-prefix: ha
      topic-prefix: home/baton
      keepalive: 1m
    gpio:
      - chip: gpiochip0
        line: 17
        edge: falling
        bias: pull-up
        debounce: 50ms
        announce: {sound: doorbell, zones: [all]}
      - chip: /dev/gpiochip1
        line: 17
        edge: both
        bias: as-is
        debounce: 0ms
        announce: {text: "Someone is at the door", zones: [inside, kitchen], volume: 60%}
    intercom:
      rtp:
        listen: 192.168.1.20:6000
        zones: [inside]
        silence-timeout: 1500ms
        payload-type: 111
        channels: 2
    speech:
      voice: en-us
      speed: 175
      command: /usr/local/bin/espeak-ng
      max-length: 200

    """

/// A valid mqtt section after minimalZone (lines 4...5).
private let mqttSection = "mqtt:\n  broker: mqtt://127.0.0.1:1883\n"
/// The same with TLS.
private let mqttsSection = "mqtt:\n  broker: mqtts://127.0.0.1\n"
/// A valid gpio section after minimalZone (lines 4...6); tests replace or append lines.
private let gpioSection = "gpio:\n  - line: 17\n    announce: {sound: doorbell}\n"
/// A valid intercom section after minimalZone (lines 4...5); tests append keys at line 6.
private let intercomSection = "intercom:\n  rtp:\n"

@Suite(.ownThread) struct ConfigTriggerTests {
    /// Every key of device, mqtt, gpio, intercom and speech is read; mqtt files resolve against the
    /// config directory.
    @Test func readsEveryTriggerKey() throws {
        let configuration = try load(minimalZone + fullTriggers, file: "config/baton.yaml")
        #expect(configuration.device == "living-room")
        #expect(
            configuration.mqtt
                == MQTTConfig(
                    broker: "mqtts://broker.local:8884", username: "baton",
                    passwordFile: "config/secrets/mqtt.password",
                    caFile: "/etc/ssl/certs/ca.pem", certFile: "config/tls/client.pem",
                    keyFile: "config/tls/client.key",
                    discovery: false, discoveryPrefix: "ha", topicPrefix: "home/baton", keepalive: .seconds(60)))
        #expect(
            configuration.gpio == [
                GPIOButtonConfig(
                    chip: "gpiochip0", line: 17, edge: .falling, bias: .pullUp, debounce: .milliseconds(50),
                    announce: AnnounceAction(sound: "doorbell", zones: ["all"])),
                GPIOButtonConfig(
                    chip: "/dev/gpiochip1", line: 17, edge: .both, bias: .asIs, debounce: .zero,
                    announce: AnnounceAction(
                        text: "Someone is at the door", zones: ["inside", "kitchen"],
                        volume: 0.6)),
            ])
        #expect(
            configuration.intercom
                == IntercomConfig(
                    listen: ListenAddress(host: "192.168.1.20", port: 6000), zones: ["inside"],
                    silenceTimeout: .milliseconds(1500), payloadType: 111, channels: 2))
        #expect(
            configuration.speech
                == SpeechConfig(
                    voice: "en-us", speed: 175, command: "/usr/local/bin/espeak-ng",
                    maxLength: 200))
    }

    /// Minimal sections get the documented defaults; absent sections mean no MQTT, no buttons, no
    /// intercom, device "baton" and the default speech.
    @Test func appliesTriggerDefaults() throws {
        let configuration = try load(minimalZone + mqttSection + gpioSection + "intercom:\n  rtp: {}\nspeech: {}\n")
        #expect(configuration.device == "baton")
        #expect(configuration.mqtt == MQTTConfig(broker: "mqtt://127.0.0.1:1883"))
        let mqtt = try #require(configuration.mqtt)
        #expect(mqtt.username == nil && mqtt.passwordFile == nil && mqtt.caFile == nil && mqtt.discovery)
        #expect(
            mqtt.discoveryPrefix == "homeassistant" && mqtt.topicPrefix == "baton" && mqtt.keepalive == .seconds(30))
        #expect(configuration.gpio == [GPIOButtonConfig(line: 17, announce: AnnounceAction(sound: "doorbell"))])
        let button = try #require(configuration.gpio.first)
        #expect(
            button.chip == "gpiochip0" && button.edge == .falling && button.bias == .pullUp
                && button.debounce == .milliseconds(50) && button.announce.zones == ["all"]
                && button.announce.volume == 1)
        let intercom = try #require(configuration.intercom)
        #expect(intercom == IntercomConfig())
        #expect(
            intercom.listen.description == "0.0.0.0:5004" && intercom.zones == ["all"]
                && intercom.silenceTimeout == .seconds(2) && intercom.payloadType == nil && intercom.channels == 1)
        #expect(configuration.speech == SpeechConfig(voice: "en", speed: 160, command: "espeak-ng", maxLength: 500))

        let plain = try load(minimalZone)
        #expect(
            plain.device == "baton" && plain.mqtt == nil && plain.gpio.isEmpty && plain.intercom == nil
                && plain.speech == .default)
        // Null means absent, as everywhere else.
        #expect(try load(minimalZone + "device:\nmqtt:\ngpio:\nintercom:\nspeech:\n") == plain)
    }

    /// The shipped configuration needs no broker, buttons or intercom.
    @Test func shipsWithoutTriggers() throws {
        let configuration = try BatonConfiguration.load(path: repositoryRoot + "/config/baton.yaml")
        #expect(configuration.mqtt == nil && configuration.gpio.isEmpty && configuration.intercom == nil)
    }

    /// Broker URLs are mqtt:// or mqtts:// with a host and an optional port (1883 and 8883 by default).
    @Test(arguments: [
        ("mqtt://127.0.0.1:1883", MQTTConfig.Endpoint(useTLS: false, host: "127.0.0.1", port: 1883)),
        ("mqtt://broker.local", MQTTConfig.Endpoint(useTLS: false, host: "broker.local", port: 1883)),
        ("mqtts://broker.local", MQTTConfig.Endpoint(useTLS: true, host: "broker.local", port: 8883)),
        ("mqtts://[::1]:8884", MQTTConfig.Endpoint(useTLS: true, host: "::1", port: 8884)),
        ("mqtt://[fe80::2]", MQTTConfig.Endpoint(useTLS: false, host: "fe80::2", port: 1883)),
        ("mqtt://", nil), ("mqtt://host:0", nil), ("mqtt://host:65536", nil), ("mqtt://host:", nil),
        ("tcp://host:1883", nil), ("MQTT://host", nil), ("mqtt://host/topic", nil), ("mqtt://u:p@host", nil),
        ("127.0.0.1:1883", nil), ("mqtt://a b", nil),
    ])
    func parsesBroker(text: String, expected: MQTTConfig.Endpoint?) {
        #expect(MQTTConfig.Endpoint(parsing: text) == expected)
        #expect(MQTTConfig(broker: text).endpoint == expected)
    }

    /// Bad values in the new sections each give one exact message at the value, key or section.
    @Test(arguments: [
        (
            "device: Living Room\n",
            #"test.yaml:4:9: device: device name "Living Room" must match [a-z0-9_-]+ (it appears in MQTT topics and Home Assistant)"#
        ),
        (
            "device: \(String(repeating: "a", count: 65))\n",
            "test.yaml:4:9: device: device name is 65 characters long (expected at most 64)"
        ),
        ("device: [a]\n", "test.yaml:4:9: device: expected a name, found a sequence"),
        // mqtt
        (
            mqttSection.replacing("mqtt://127.0.0.1:1883", with: "http://127.0.0.1:1883"),
            #"test.yaml:5:11: mqtt.broker: "http://127.0.0.1:1883" is not a broker URL (expected mqtt://host[:port] or mqtts://host[:port], e.g. mqtt://127.0.0.1:1883)"#
        ),
        (
            mqttSection.replacing("1883", with: "0"),
            #"test.yaml:5:11: mqtt.broker: "mqtt://127.0.0.1:0" is not a broker URL (expected mqtt://host[:port] or mqtts://host[:port], e.g. mqtt://127.0.0.1:1883)"#
        ),
        (
            mqttSection.replacing("127.0.0.1", with: "baton:secret@broker"),
            #"test.yaml:5:11: mqtt.broker: "mqtt://baton:secret@broker:1883" has a user name or password in it (set username and password-file instead)"#
        ),
        ("mqtt:\n  username: baton\n", #"test.yaml:4:1: mqtt: missing required key "broker""#),
        ("mqtt:\n  broker:\n", "test.yaml:5:10: mqtt.broker: a value is required"),
        (
            mqttSection + "  password-file: mqtt.password\n",
            #"test.yaml:4:1: mqtt: missing required key "username": password-file is set, and the broker checks a password together with a user name"#
        ),
        (
            mqttSection + "  ca-file: ca.pem\n",
            "test.yaml:6:3: mqtt.ca-file: only used with TLS, and the broker mqtt://127.0.0.1:1883 is not mqtts://"
        ),
        (
            mqttsSection + "  cert-file: client.pem\n",
            #"test.yaml:4:1: mqtt: missing required key "key-file": cert-file is set, and a client certificate needs its private key"#
        ),
        (
            mqttsSection + "  key-file: client.key\n",
            #"test.yaml:4:1: mqtt: missing required key "cert-file": key-file is set, and a private key needs its client certificate"#
        ),
        (
            mqttSection + "  discovery: yes\n",
            #"test.yaml:6:14: mqtt.discovery: "yes" is not a boolean (expected true or false)"#
        ),
        (
            mqttSection + "  topic-prefix: baton/#\n",
            #"test.yaml:6:17: mqtt.topic-prefix: "baton/#" is not a topic prefix (expected levels separated by /, without +, #, spaces or empty levels, e.g. baton)"#
        ),
        (
            mqttSection + "  discovery-prefix: /homeassistant\n",
            #"test.yaml:6:21: mqtt.discovery-prefix: "/homeassistant" is not a topic prefix (expected levels separated by /, without +, #, spaces or empty levels, e.g. baton)"#
        ),
        (mqttSection + "  keepalive: 1s\n", "test.yaml:6:14: mqtt.keepalive: 1s is out of range (expected 5s...1h)"),
        ("mqtt: mqtt://127.0.0.1\n", "test.yaml:4:7: mqtt: expected a mapping, found a scalar"),
        // gpio
        ("gpio: {line: 17}\n", "test.yaml:4:7: gpio: expected a sequence, found a mapping"),
        ("gpio:\n  - 17\n", "test.yaml:5:5: gpio[0]: expected a mapping, found a scalar"),
        (
            gpioSection.replacing("17", with: "1024"),
            "test.yaml:5:11: gpio[0].line: 1024 is out of range (expected 0...1023)"
        ),
        ("gpio:\n  - announce: {sound: doorbell}\n", #"test.yaml:5:5: gpio[0]: missing required key "line""#),
        ("gpio:\n  - line: 17\n", #"test.yaml:5:5: gpio[0]: missing required key "announce""#),
        ("gpio:\n  - line: 17\n    announce:\n", "test.yaml:6:14: gpio[0].announce: a value is required"),
        (
            gpioSection + "    chip: gpio0\n",
            #"test.yaml:7:11: gpio[0].chip: "gpio0" is not a GPIO chip (expected gpiochipN or a path such as /dev/gpiochip0)"#
        ),
        (
            gpioSection + "    edge: down\n",
            #"test.yaml:7:11: gpio[0].edge: "down" is not a supported edge (expected rising, falling or both)"#
        ),
        (
            gpioSection + "    bias: pullup\n",
            #"test.yaml:7:11: gpio[0].bias: "pullup" is not a supported bias (expected pull-up, pull-down, disabled or as-is)"#
        ),
        (
            gpioSection + "    debounce: 10s\n",
            "test.yaml:7:15: gpio[0].debounce: 10s is out of range (expected 0ms...5s)"
        ),
        (
            gpioSection.replacing("doorbell", with: "../doorbell"),
            #"test.yaml:6:23: gpio[0].announce.sound: "../doorbell" is not a sound name (expected a file name in the sounds directory without its extension: letters, digits, -, _ and ., e.g. doorbell)"#
        ),
        (
            gpioSection.replacing("sound: doorbell", with: "sound: doorbell, text: hello"),
            "test.yaml:6:33: gpio[0].announce.text: sound and text are both set; set exactly one"
        ),
        (
            gpioSection.replacing("sound: doorbell", with: "zones: [all]"),
            #"test.yaml:6:5: gpio[0].announce: missing required key "sound" or "text""#
        ),
        (
            gpioSection.replacing("sound: doorbell", with: #"text: """#),
            "test.yaml:6:22: gpio[0].announce.text: must not be empty"
        ),
        (
            gpioSection.replacing("sound: doorbell", with: "sound: doorbell, volume: 120%"),
            "test.yaml:6:41: gpio[0].announce.volume: 120% is out of range (expected 0%...100%)"
        ),
        (
            gpioSection.replacing("sound: doorbell", with: "sound: doorbell, zones: [kitchn]"),
            #"test.yaml:6:41: gpio[0].announce.zones: unknown zone or group "kitchn"; did you mean "kitchen"?"#
        ),
        (
            gpioSection.replacing("sound: doorbell", with: "sound: doorbell, zones: []"),
            "test.yaml:6:40: gpio[0].announce.zones: at least one zone or group is required"
        ),
        // A text no speech settings can say, found at the first press before (a visitor's ring, silent).
        (
            gpioSection.replacing("sound: doorbell", with: #"text: "   ""#),
            "test.yaml:6:22: gpio[0].announce.text: text is empty: a press would say nothing"
        ),
        (
            gpioSection.replacing("sound: doorbell", with: #"text: "Ding\adong""#),
            "test.yaml:6:22: gpio[0].announce.text: text has a control character (U+0007): a press would say nothing"
        ),
        (
            "speech: {max-length: 5}\n" + gpioSection.replacing("sound: doorbell", with: "text: hello world"),
            "test.yaml:7:22: gpio[0].announce.text: the text is 11 characters long, more than speech.max-length (5)"
        ),
        // intercom
        (
            "intercom: {}\n",
            #"test.yaml:4:1: intercom: missing required key "rtp" (the only kind of intercom; rtp: {} for the defaults)"#
        ),
        ("intercom:\n  rtp:\n", "test.yaml:5:7: intercom.rtp: a value is required (rtp: {} for the defaults)"),
        (
            intercomSection + "    listen: pi.local:5004\n",
            #"test.yaml:6:13: intercom.rtp.listen: "pi.local:5004" is not an IPv4 address and port (expected e.g. 0.0.0.0:5004; host names and IPv6 are not accepted)"#
        ),
        (
            intercomSection + "    listen: \"[::]:5004\"\n",
            #"test.yaml:6:13: intercom.rtp.listen: "[::]:5004" is not an IPv4 address and port (expected e.g. 0.0.0.0:5004; host names and IPv6 are not accepted)"#
        ),
        (
            intercomSection + "    listen: 0.0.0.0\n",
            #"test.yaml:6:13: intercom.rtp.listen: "0.0.0.0" is not an IPv4 address and port (expected e.g. 0.0.0.0:5004; host names and IPv6 are not accepted)"#
        ),
        (
            intercomSection + "    zones: [garage]\n",
            #"test.yaml:6:13: intercom.rtp.zones: unknown zone or group "garage" (expected one of: all, kitchen)"#
        ),
        (
            intercomSection + "    silence-timeout: 100ms\n",
            "test.yaml:6:22: intercom.rtp.silence-timeout: 100ms is out of range (expected 200ms...1m)"
        ),
        (
            intercomSection + "    payload-type: 95\n",
            "test.yaml:6:19: intercom.rtp.payload-type: 95 is out of range (expected 96...127)"
        ),
        (
            intercomSection + "    channels: 3\n",
            "test.yaml:6:15: intercom.rtp.channels: 3 is out of range (expected 1...2)"
        ),
        // speech
        ("speech:\n  speed: 50\n", "test.yaml:5:10: speech.speed: 50 is out of range (expected 80...450)"),
        ("speech:\n  max-length: 0\n", "test.yaml:5:15: speech.max-length: 0 is out of range (expected 1...5000)"),
        (
            "speech:\n  voice: \"-x\"\n",
            #"test.yaml:5:10: speech.voice: "-x" is not a voice name (expected e.g. en, en-us or en+f3: letters, digits, -, _, + and /, at most 40 characters, not starting with -)"#
        ),
        // Refused for a request's voice, and failing every text when it was the configuration's.
        (
            "speech:\n  voice: en.us\n",
            #"test.yaml:5:10: speech.voice: "en.us" is not a voice name (expected e.g. en, en-us or en+f3: letters, digits, -, _, + and /, at most 40 characters, not starting with -)"#
        ),
        (
            "speech:\n  command: espeak-ng -s 120\n",
            #"test.yaml:5:12: speech.command: "espeak-ng -s 120" is not a command (expected a program name looked up in PATH, e.g. espeak-ng, or an absolute path; no arguments)"#
        ),
        (
            "speech:\n  command: bin/espeak-ng\n",
            #"test.yaml:5:12: speech.command: "bin/espeak-ng" is not a command (expected a program name looked up in PATH, e.g. espeak-ng, or an absolute path; no arguments)"#
        ),
    ])
    func reportsBadTriggerValue(snippet: String, expected: String) {
        #expect(issueLines(minimalZone + snippet) == [expected])
    }

    /// A keepalive that is not whole seconds is rounded to them, with a warning at the key: it was cut
    /// to whole seconds unsaid, then refused, and a file that had started for years then stopped
    /// batond at its next start (exit 1, which systemd does not restart).
    @Test(arguments: [("7.5s", 8, "8s"), ("7400ms", 7, "7s"), ("59.5s", 60, "1m")])
    func roundsAFractionalKeepalive(text: String, seconds: Int64, shown: String) throws {
        let configuration = try load(minimalZone + mqttSection + "  keepalive: \(text)\n")
        #expect(configuration.mqtt?.keepalive == .seconds(seconds))
        #expect(
            configuration.warnings == [
                "test.yaml:6:14: mqtt.keepalive: \(text) is not a whole number of seconds: \(shown) is used (MQTT's keepalive is counted in seconds)"
            ], "\(configuration.warnings)")
        #expect(try load(minimalZone + mqttSection + "  keepalive: 7s\n").warnings.isEmpty)
    }

    /// TLS files belong to an mqtts:// broker: each one given with mqtt:// is reported at its key.
    @Test func rejectsTLSFilesWithoutTLS() {
        #expect(
            issueLines(minimalZone + mqttSection + "  cert-file: c.pem\n  key-file: c.key\n") == [
                "test.yaml:6:3: mqtt.cert-file: only used with TLS, and the broker mqtt://127.0.0.1:1883 is not mqtts://",
                "test.yaml:7:3: mqtt.key-file: only used with TLS, and the broker mqtt://127.0.0.1:1883 is not mqtts://",
            ])
    }

    /// A misspelt key in each new section is matched to that section's keys.
    @Test(arguments: [
        ("devise: kitchen\n", "devise", "device"),
        (mqttSection + "  usrname: baton\n", "mqtt.usrname", "username"),
        (mqttSection + "  keep-alive: 30s\n", "mqtt.keep-alive", "keepalive"),
        (gpioSection + "    debounse: 10ms\n", "gpio[0].debounse", "debounce"),
        (
            gpioSection.replacing("sound: doorbell", with: "sound: doorbell, zone: [all]"), "gpio[0].announce.zone",
            "zones"
        ),
        ("intercom:\n  rpt: {}\n", "intercom.rpt", "rtp"),
        (intercomSection + "    silence-timout: 2s\n", "intercom.rtp.silence-timout", "silence-timeout"),
        ("speech:\n  voise: en\n", "speech.voise", "voice"),
    ])
    func suggestsTriggerKey(snippet: String, path: String, suggestion: String) throws {
        let lines = try #require(issueLines(minimalZone + snippet))
        #expect(lines.contains { $0.hasSuffix("\(path): unknown key; did you mean \"\(suggestion)\"?") }, "\(lines)")
    }

    /// Two buttons on the same line of the same chip are an error at the second, however the chip is
    /// written; the same line number on another chip is fine.
    @Test func rejectsDuplicateGPIOLine() throws {
        let text =
            minimalZone + """
                gpio:
                  - {line: 17, announce: {sound: doorbell}}
                  - {line: 27, announce: {sound: chime}}
                  - {chip: /dev/gpiochip0, line: 17, announce: {text: again}}
                  - {chip: gpiochip1, line: 17, announce: {sound: doorbell}}
                  - {chip: gpiochip1, line: 17, announce: {sound: doorbell}}

                """
        #expect(
            issueLines(text) == [
                "test.yaml:7:34: gpio[2].line: line 17 of gpiochip0 is already used by gpio[0]",
                "test.yaml:9:29: gpio[4].line: line 17 of gpiochip1 is already used by gpio[3]",
            ])
        let lines = try load(minimalZone + gpioSection + "  - {chip: gpiochip1, line: 17, announce: {sound: chime}}\n")
            .gpio
        #expect(lines.map(\.chip) == ["gpiochip0", "gpiochip1"])
    }

    /// Announcement and intercom zones may name zones, groups and all, and expand like music zones.
    @Test func expandsTriggerZones() throws {
        let configuration = try load(
            minimalZone + "  patio:\n    pcm: p\ngroups:\n  outside: [patio]\n"
                + gpioSection.replacing("sound: doorbell", with: "sound: doorbell, zones: [outside, kitchen]")
                + intercomSection + "    zones: [all]\n")
        let button = try #require(configuration.gpio.first)
        #expect(try configuration.expand(button.announce.zones) == ["kitchen", "patio"])
        let intercom = try #require(configuration.intercom)
        #expect(try configuration.expand(intercom.zones) == ["kitchen", "patio"])
    }

    /// Problems in several new sections are all reported in one pass, in file order.
    @Test func reportsEveryTriggerProblemAtOnce() {
        let text =
            minimalZone + """
                device: Den
                mqtt: {broker: "mqtt://h:99999"}
                gpio:
                  - {line: -1, announce: {sound: a, text: b}}
                intercom: {rtp: {channels: 0}}
                speech: {speed: 1000}

                """
        #expect(
            issueLines(text) == [
                #"test.yaml:4:9: device: device name "Den" must match [a-z0-9_-]+ (it appears in MQTT topics and Home Assistant)"#,
                #"test.yaml:5:16: mqtt.broker: "mqtt://h:99999" is not a broker URL (expected mqtt://host[:port] or mqtts://host[:port], e.g. mqtt://127.0.0.1:1883)"#,
                "test.yaml:7:12: gpio[0].line: -1 is out of range (expected 0...1023)",
                "test.yaml:7:37: gpio[0].announce.text: sound and text are both set; set exactly one",
                "test.yaml:8:28: intercom.rtp.channels: 0 is out of range (expected 1...2)",
                "test.yaml:9:17: speech.speed: 1000 is out of range (expected 80...450)",
            ])
    }
}

@Suite(.ownThread) struct ConfigTriggerEncodingTests {
    /// The new sections encode with the file's key names and text forms; the MQTT password and key
    /// appear only as paths.
    @Test func encodesTriggerSections() throws {
        let configuration = try load(minimalZone + fullTriggers, file: "/etc/baton/baton.yaml")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func json(_ value: some Encodable) throws -> String {
            String(decoding: try encoder.encode(value), as: UTF8.self)
        }
        #expect(
            try json(configuration.mqtt) == """
                {"broker":"mqtts://broker.local:8884","ca-file":"/etc/ssl/certs/ca.pem",\
                "cert-file":"/etc/baton/tls/client.pem","discovery":false,"discovery-prefix":"ha",\
                "keepalive":"1m","key-file":"/etc/baton/tls/client.key","password-file":"/etc/baton/secrets/mqtt.password",\
                "topic-prefix":"home/baton","username":"baton"}
                """)
        #expect(
            try json(configuration.gpio) == """
                [{"announce":{"sound":"doorbell","volume":"100%","zones":["all"]},"bias":"pull-up","chip":"gpiochip0",\
                "debounce":"50ms","edge":"falling","line":17},\
                {"announce":{"text":"Someone is at the door","volume":"60%","zones":["inside","kitchen"]},"bias":"as-is",\
                "chip":"/dev/gpiochip1","debounce":"0ms","edge":"both","line":17}]
                """)
        #expect(
            try json(configuration.intercom) == """
                {"rtp":{"channels":2,"listen":"192.168.1.20:6000","payload-type":111,"silence-timeout":"1500ms",\
                "zones":["inside"]}}
                """)
        #expect(
            try json(configuration.speech) == """
                {"command":"/usr/local/bin/espeak-ng","max-length":200,"speed":175,"voice":"en-us"}
                """)
        let whole = try json(configuration)
        #expect(whole.contains(#""device":"living-room""#))
        // Unset optional values are left out; without the sections only device and speech remain.
        #expect(
            try json(IntercomConfig())
                == #"{"rtp":{"channels":1,"listen":"0.0.0.0:5004","silence-timeout":"2s","zones":["all"]}}"#)
        #expect(
            try json(MQTTConfig(broker: "mqtt://h")) == """
                {"broker":"mqtt://h","discovery":true,"discovery-prefix":"homeassistant","keepalive":"30s","topic-prefix":"baton"}
                """)
        let plain = try json(try load(minimalZone))
        #expect(!plain.contains("mqtt") && !plain.contains("gpio") && !plain.contains("intercom"))
    }

    /// redacted() keeps the MQTT secret paths (the daemon reads them) and there is no secret value to hide.
    @Test func keepsMQTTSecretPathsWhenRedacting() throws {
        let configuration = try load(minimalZone + fullTriggers, file: "config/baton.yaml")
        #expect(configuration.redacted() == configuration)
        #expect(configuration.redacted().mqtt?.passwordFile == "config/secrets/mqtt.password")
        #expect(configuration.redacted().mqtt?.keyFile == "config/tls/client.key")
    }

    /// The JSON of a configuration using every new key parses back, as YAML, to an equal configuration.
    @Test func roundTripsTriggersThroughJSON() throws {
        let configuration = try load(minimalZone + fullTriggers, file: "/etc/baton/baton.yaml")
        let json = String(decoding: try JSONEncoder().encode(configuration), as: UTF8.self)
        let reread = try BatonConfiguration.parse(text: json, file: "effective.json", baseDirectory: "")
        var expected = configuration
        expected.policy.classes.sort { $0.name < $1.name }
        var actual = reread
        actual.policy.classes.sort { $0.name < $1.name }
        #expect(actual == expected)
    }
}
