import BatonConfig
import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// The Home Assistant entities as HA would see them: the retained discovery payloads read from the
/// real mosquitto broker, checked against HA's MQTT discovery keys per platform, and each entity's
/// command topic driven with `mosquitto_pub` the way HA publishes to it.
@Suite(.serialized, .ownThread) struct HomeAssistantEntityTests {
    let base = "baton/test-speaker"

    /// The keys HA's MQTT integration documents for each platform Baton uses (those shared by every
    /// entity, and each platform's own), and the ones it requires.
    static let commonKeys: Set<String> = [
        "name", "unique_id", "device", "icon", "availability", "availability_topic", "availability_mode",
    ]
    static let platformKeys: [String: (allowed: Set<String>, required: Set<String>)] = [
        "button": (["command_topic", "payload_press"], ["command_topic"]),
        "number": (["command_topic", "state_topic", "min", "max", "step", "mode"], ["command_topic"]),
        "select": (["command_topic", "state_topic", "options"], ["command_topic", "options"]),
        "sensor": (["state_topic", "value_template", "json_attributes_topic"], ["state_topic"]),
        "notify": (["command_topic"], ["command_topic"]),
    ]

    /// One discovery payload: every key it has, and the values the test follows.
    struct Payload: Decodable {
        struct Availability: Decodable {
            var topic: String
            var valueTemplate: String?
            enum CodingKeys: String, CodingKey {
                case topic
                case valueTemplate = "value_template"
            }
        }
        struct Device: Decodable {
            var identifiers: [String]
        }
        var keys: Set<String>
        var commandTopic: String?
        var stateTopic: String?
        var attributesTopic: String?
        var availabilityTopic: String?
        var availability: [Availability]?
        var options: [String]?
        var payloadPress: String?
        var uniqueID: String?
        var device: Device?

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: AnyCodingKey.self)
            keys = Set(c.allKeys.map(\.stringValue))
            commandTopic = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("command_topic"))
            stateTopic = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("state_topic"))
            attributesTopic = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("json_attributes_topic"))
            availabilityTopic = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("availability_topic"))
            availability = try c.decodeIfPresent([Availability].self, forKey: AnyCodingKey("availability"))
            options = try c.decodeIfPresent([String].self, forKey: AnyCodingKey("options"))
            payloadPress = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("payload_press"))
            uniqueID = try c.decodeIfPresent(String.self, forKey: AnyCodingKey("unique_id"))
            device = try c.decodeIfPresent(Device.self, forKey: AnyCodingKey("device"))
        }
    }

    func connected(_ t: TestDaemon) -> Bool {
        waitUntil(seconds: 15) { (try? t.status().mqtt?.connection) == "connected" }
    }

    /// Every retained message under `filter` (as `topic payload` lines) within a few seconds.
    func retained(_ broker: MosquittoBroker, _ filter: String, count: Int) throws -> [(topic: String, payload: String)]
    {
        try broker.subscribe(topic: filter, count: count, seconds: 5).messages().map { line in
            let space = line.firstIndex(of: " ") ?? line.endIndex
            return (String(line[..<space]), String(line[space...].dropFirst()))
        }
    }

    /// Every discovery payload has its platform's required keys and only documented ones, a unique
    /// id and the device; every topic HA reads from (state, attributes, availability) holds a
    /// retained message; every zone entity is unavailable with its zone (the garage's PCM is
    /// missing: its state says `unavailable`, which its availability template turns into offline).
    @Test func discoveryHasHomeAssistantsKeysAndLiveTopics() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil), ("garage", 48_000, ALSATestRig.missingPCM)],
            mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        // The doorbell, play, pause, next, the sound select, its button, notify; volume, state and
        // now playing per zone.
        let expected = 7 + 3 * 2
        let messages = try retained(broker, "homeassistant/#", count: expected)
        #expect(messages.count == expected, "\(messages.map(\.topic))")
        var readTopics: Set<String> = []
        var uniqueIDs: Set<String> = []
        for (topic, text) in messages {
            let platform = String(topic.split(separator: "/")[1])
            let payload = try JSONDecoder().decode(Payload.self, from: Data(text.utf8))
            let keys = try #require(Self.platformKeys[platform], "unexpected platform \(platform)")
            #expect(
                keys.required.isSubset(of: payload.keys), "\(topic): missing \(keys.required.subtracting(payload.keys))"
            )
            let unknown = payload.keys.subtracting(keys.allowed).subtracting(Self.commonKeys)
            #expect(unknown.isEmpty, "\(topic): keys HA does not document for \(platform): \(unknown)")
            #expect(payload.device?.identifiers == ["baton_test-speaker"], "\(topic)")
            let id = try #require(payload.uniqueID, "\(topic)")
            #expect(uniqueIDs.insert(id).inserted, "\(topic): unique_id \(id) twice")
            #expect((payload.availabilityTopic == nil) != (payload.availability == nil), "\(topic): one availability")
            if platform == "select" { #expect(payload.options == t.daemon.sounds.names()) }
            readTopics.formUnion(
                [payload.stateTopic, payload.attributesTopic, payload.availabilityTopic].compactMap { $0 })
            readTopics.formUnion(payload.availability?.map(\.topic) ?? [])
            if topic.contains("/garage_") {
                #expect(payload.availability?.map(\.topic) == ["\(base)/availability", "\(base)/zones/garage/state"])
            }
        }
        for topic in readTopics.sorted() {
            let got = try retained(broker, topic, count: 1)
            #expect(got.count == 1 && !(got.first?.payload.isEmpty ?? true), "nothing retained on \(topic)")
        }
        let garage = try retained(broker, "\(base)/zones/garage/state", count: 1).first?.payload ?? ""
        #expect(garage.contains(#""state":"unavailable""#), "\(garage)")
        let nowPlaying = try retained(broker, "\(base)/zones/garage/now-playing", count: 1).first?.payload ?? ""
        #expect(nowPlaying == #"{"playback":"unavailable","state":"unavailable"}"#, "\(nowPlaying)")
        let kitchen = try retained(broker, "\(base)/zones/kitchen/now-playing", count: 1).first?.payload ?? ""
        #expect(kitchen == #"{"playback":"idle","state":"idle"}"#, "\(kitchen)")
    }

    /// Sounds added to and taken from the directory while batond runs (no reload): the sound
    /// select's options follow, and the doorbell button goes with the `doorbell` sound. The options
    /// were those of the last connect or reload (a new sound chosen in HA's select was not one of
    /// them), and the button was published with no `doorbell` sound, each press failing.
    /// A zone with max-volume 0.5 % gets a slider to 0.5 in steps of 0.1, its state in tenths (not
    /// above the top) and a volume set in tenths carried out; one with 0.05 % gets no volume entity,
    /// and the one an earlier run left retained is removed. The slider went from 0 to 0 (Home
    /// Assistant refuses it: no volume entity) and the state said 0.
    @Test func aZoneBelowOnePercentHasASliderInTenths() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let patio = "homeassistant/number/baton_test-speaker/patio_volume/config"
        try broker.publish(topic: patio, message: #"{"name":"patio volume","max":0,"min":0}"#, retain: true)
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url), maxVolumes: ["kitchen": 0.005, "patio": 0.0005])
        defer { t.stop() }
        #expect(connected(t))
        func kept(_ topic: String) -> String { (try? retained(broker, topic, count: 1).first?.payload) ?? "" }
        let kitchen = kept("homeassistant/number/baton_test-speaker/kitchen_volume/config")
        #expect(kitchen.contains(#""max":0.5,"min":0"#) && kitchen.contains(#""step":0.1"#), "\(kitchen)")
        #expect(kept("\(base)/zones/kitchen/volume") == "0.5")
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "0.3")
        #expect(waitUntil(seconds: 5) { kept("\(base)/zones/kitchen/volume") == "0.3" })
        #expect(abs(((try? t.status().zones.first { $0.name == "kitchen" }?.volume) ?? 0) - 0.003) < 1e-9)
        // Gone from the broker: nothing retained there (the subscription times out, 5 s).
        #expect(!kept(patio).contains("name"), "the patio's slider is removed: \(kept(patio))")
    }

    @Test func theDiscoveryFollowsTheSoundsDirectory() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let select = "homeassistant/select/baton_test-speaker/sound/config"
        let button = "homeassistant/button/baton_test-speaker/doorbell/config"
        func kept(_ topic: String) -> String { (try? retained(broker, topic, count: 1).first?.payload) ?? "" }
        #expect(waitUntil(seconds: 10) { kept(button).contains("doorbell") }, "\(kept(button))")
        #expect(!kept(select).contains("aaa"))
        WAVWriter.write(
            Signals.sine(frequency: 500, rate: 44_100, frames: 4_410, channels: 1, amplitude: 0.5),
            rate: 44_100, channels: 1, to: "\(t.sounds)/aaa.wav")
        #expect(unlink("\(t.sounds)/doorbell.wav") == 0)
        // Something that wakes the bridge (it looks at least every 10 s).
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.5}"#).status == 200)
        #expect(waitUntil(seconds: 5) { kept(select).contains(#""aaa""#) }, "\(kept(select))")
        // Gone from the broker: nothing retained there (the subscription times out, 5 s).
        #expect(!kept(button).contains("payload_press"), "the doorbell button goes: \(kept(button))")
    }

    /// A sounds directory that cannot be read for a while (swapped by a deploy: here a file in its
    /// place) is not an empty one: the sound select and the doorbell button stay. Both were
    /// published empty, which has Home Assistant delete them and what the user set on them.
    @Test func anUnreadableSoundsDirectoryKeepsTheSoundEntities() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let select = "homeassistant/select/baton_test-speaker/sound/config"
        let button = "homeassistant/button/baton_test-speaker/doorbell/config"
        func kept(_ topic: String) -> String { (try? retained(broker, topic, count: 1).first?.payload) ?? "" }
        #expect(waitUntil(seconds: 10) { kept(button).contains("doorbell") }, "\(kept(button))")
        #expect(kept(select).contains("doorbell"))
        // Every message on both topics from now on: the retained ones first.
        let seen = try broker.subscribe(topic: "homeassistant/+/baton_test-speaker/+/config", count: 500, seconds: 4)
        #expect(rename(t.sounds, "\(t.sounds).aside") == 0)
        TextFile.write("\(t.sounds)", "not a directory")
        defer {
            unlink(t.sounds)
            rename("\(t.sounds).aside", t.sounds)
        }
        // Something that wakes the bridge, and its volume published: it looked.
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.5}"#).status == 200)
        #expect(waitUntil(seconds: 5) { kept("\(base)/zones/kitchen/volume") == "50" })
        let emptied = seen.messages().filter { ($0.hasPrefix(select) || $0.hasPrefix(button)) && $0.hasSuffix(" ") }
        #expect(emptied.isEmpty, "\(emptied)")
        #expect(kept(button).contains("doorbell") && kept(select).contains("doorbell"))
    }

    /// A zone a reload removes: its entities go first, then its state topics, all emptied. The
    /// state topics went first, and while its entities still existed Home Assistant rendered their
    /// templates on empty payloads (an error in its log for each, at every such reload).
    @Test func aRemovedZonesEntitiesGoBeforeItsState() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        #expect(
            waitUntil(seconds: 10) {
                (try? retained(broker, "\(base)/zones/patio/state", count: 1).first?.payload.isEmpty) == false
            })
        let all = try broker.subscribe(topic: "#", count: 500, seconds: 4)
        var new = t.config
        new.zones.removeAll { $0.name == "patio" }
        #expect(t.daemon.apply(new).zonesRemoved == ["patio"])
        // `topic payload` lines; an emptied topic's line ends at the space.
        let emptied = all.messages().filter { $0.hasSuffix(" ") && $0.contains("patio") }.map { String($0.dropLast()) }
        let firstState = emptied.firstIndex { $0.hasPrefix("\(base)/zones/patio/") }
        let lastEntity = emptied.lastIndex { $0.hasPrefix("homeassistant/") }
        #expect(firstState != nil && lastEntity != nil, "\(emptied)")
        if let firstState, let lastEntity { #expect(lastEntity < firstState, "\(emptied)") }
    }

    /// Every command topic in the discovery payloads is one Baton acts on: what HA sends there (a
    /// button's `payload_press`, a select option, a number, a message) either makes an event or,
    /// when it cannot be done now (pause with no music), a clear error on `<base>/errors`; the
    /// select's choice shows on its state topic.
    @Test func everyCommandTopicIsCarriedOut() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let entities = try retained(broker, "homeassistant/#", count: 7 + 3).map {
            (topic: $0.topic, payload: try JSONDecoder().decode(Payload.self, from: Data($0.payload.utf8)))
        }
        let commands = entities.filter { $0.payload.commandTopic != nil }
        #expect(commands.count == 8, "\(commands.map(\.topic))")
        for (topic, payload) in commands {
            let command = try #require(payload.commandTopic)
            let platform = topic.split(separator: "/")[1]
            let message =
                switch platform {
                case "button": try #require(payload.payloadPress, "\(topic)")
                case "select": try #require(payload.options?.last, "\(topic)")
                case "number": "30"
                default: "Hello"
                }
            let before = t.daemon.events.recent().count
            let errors = try broker.subscribe(topic: "\(base)/errors", count: 1, seconds: 3)
            try broker.publish(topic: command, message: message)
            if platform == "select" {
                let state = try #require(payload.stateTopic)
                #expect(
                    waitUntil(seconds: 5) { (try? retained(broker, state, count: 1).first?.payload) == message },
                    "\(topic): the choice \(message) is not on \(state)")
                continue
            }
            _ = waitUntil(seconds: 5) {
                t.daemon.events.recent().count > before || !errors.messages(seconds: 0).isEmpty
            }
            let acted = t.daemon.events.recent().count > before
            let error = acted ? nil : errors.messages().first?.replacing(#"\/"#, with: "/")  // JSON escapes "/"
            #expect(
                acted || error?.contains(#""topic":"\#(command)""#) == true,
                "\(topic): nothing happened: \(error ?? "")")
            // Let an announcement end before the next command.
            _ = waitUntil(seconds: 10) { (try? t.status().sources.isEmpty) ?? false }
        }
    }

    /// The sound select and its button: choosing `bell1k` is retained on `<base>/sound`, and the
    /// button announces it (1 kHz in the kitchen); an unknown choice is a clear error and changes
    /// nothing.
    @Test func selectedSoundIsAnnouncedByTheButton() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        #expect(connected(t))
        #expect(try retained(broker, "\(base)/sound", count: 1).first?.payload == "doorbell")
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 1)
        try broker.publish(topic: "\(base)/sound/set", message: "trumpet")
        let error = errors.messages().first ?? ""
        #expect(error.contains(#""status":404"#) && error.contains(#"unknown sound \"trumpet\""#), "\(error)")
        try broker.publish(topic: "\(base)/sound/set", message: "bell1k")
        #expect(
            waitUntil(seconds: 5) { (try? retained(broker, "\(base)/sound", count: 1).first?.payload) == "bell1k" })
        try broker.publish(topic: "\(base)/sound/announce", message: "{}")
        let granted = try #require(t.waitForEvent("granted", seconds: 10))
        #expect(try t.status().sources.first { $0.id == granted.source }?.sound == "bell1k")
        #expect(t.waitForEvent("played", source: granted.source) != nil)
        t.stop()
        let at = try #require(granted.zoneFrames?["kitchen"]) + 882
        #expect(Signals.windowedToneLevel(t.left("kitchen")[at..<(at + 4_410)], frequency: 1000, rate: 44_100) > 0.4)
    }

    /// The sound chosen in the select is kept across a restart (state-dir): it went back to
    /// `doorbell` at each.
    @Test func theChosenSoundIsKeptAcrossARestart() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let dir = TestDirectory.make("chosen-sound")
        let first = try TestDaemon(
            zones: [("kitchen", 44_100, nil)], stateDir: dir, mqtt: MQTTConfig(broker: broker.url))
        #expect(connected(first))
        try broker.publish(topic: "\(base)/sound/set", message: "bell1k")
        #expect(
            waitUntil(seconds: 5) {
                MusicQueueTests.HeldServerQueue.stateText(dir).contains(#""sound":"bell1k""#)
            })
        first.stop()
        // The broker's retained choice is cleared: what the next start says is its own.
        try broker.publish(topic: "\(base)/sound", message: "", retain: true)
        let second = try TestDaemon(
            zones: [("kitchen", 44_100, nil)], stateDir: dir, mqtt: MQTTConfig(broker: broker.url))
        defer { second.stop() }
        #expect(connected(second))
        #expect(
            waitUntil(seconds: 5) { (try? retained(broker, "\(base)/sound", count: 1).first?.payload) == "bell1k" })
    }

    /// `notify.send_message` publishes its message as it is: Baton speaks it (espeak-ng) on every
    /// zone, and the kitchen's file holds speech-level audio after the grant; an empty message is a
    /// clear error.
    @Test func notifySpeaksTheMessage() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        #expect(connected(t))
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 1)
        try broker.publish(topic: "\(base)/notify", message: " ")
        #expect(errors.messages().first?.contains("text is empty") == true)
        try broker.publish(topic: "\(base)/notify", message: "The washing machine is done")
        let granted = try #require(t.waitForEvent("granted", seconds: 15))
        #expect(
            try t.status().sources.first { $0.id == granted.source }?.sound == "speech: The washing machine is done")
        let played = try #require(t.waitForEvent("played", source: granted.source, seconds: 15))
        t.stop()
        let start = try #require(granted.zoneFrames?["kitchen"])
        let end = try #require(played.zoneFrames?["kitchen"])
        let out = t.left("kitchen")
        let loud = stride(from: start, to: end - 2_205, by: 2_205).filter { Signals.rms(out[$0..<($0 + 2_205)]) > 0.02 }
        #expect(loud.count >= 10, "speech in \(loud.count) windows of 50 ms")
    }

    /// Music playing on: the zone's now-playing is not sent again each second (each was a state and
    /// an attributes row in Home Assistant's recorder): its position is given at a time
    /// (`positionAt`), and sent again when it moves otherwise than by playing on — a pause here.
    @Test func nowPlayingIsNotSentEachSecond() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        _ = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
        let topic = "\(base)/zones/kitchen/now-playing"
        #expect(
            waitUntil(seconds: 5) {
                ((try? retained(broker, topic, count: 1))?.first?.payload ?? "").contains(#""state":"playing""#)
            })
        // The retained one, then whatever comes in 3 s of music.
        let sent = try broker.subscribe(topic: topic, count: 10, seconds: 3).messages().filter { $0.hasPrefix(topic) }
        #expect(sent.count == 1, "\(sent)")
        #expect(sent.first?.contains(#""positionAt":""#) == true, "\(sent)")
        let paused = try broker.subscribe(topic: topic, count: 2, seconds: 5)
        #expect(try t.request("POST", "/api/v1/music/pause").status == 200)
        #expect(paused.messages().last?.contains(#""state":"paused""#) == true)
    }

    /// Play, pause and next buttons (payload `{}`) drive the newest music, and the zone's
    /// now-playing sensor follows: playing with its title, then paused, then playing again; the
    /// 440 Hz music stops being heard while paused (the zone writes silence until, half a second
    /// into the pause, it stops its device: at least 0.4 s of it between music before and after).
    /// Next on a local sound is a clear error.
    @Test func musicButtonsAndNowPlaying() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        #expect(connected(t))
        let r = try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
        let id = try #require(r.object["id"])
        func nowPlaying() -> String {
            (try? retained(broker, "\(base)/zones/kitchen/now-playing", count: 1))?.first?.payload ?? ""
        }
        #expect(waitUntil(seconds: 5) { nowPlaying().contains(#""state":"playing""#) }, "\(nowPlaying())")
        #expect(nowPlaying().contains(#""title":"music440""#) && nowPlaying().contains(#""source":"\#(id)""#))
        try broker.publish(topic: "\(base)/music/pause", message: "{}")
        #expect(waitUntil(seconds: 5) { (try? t.status().sources.first?.state) == "paused" })
        #expect(waitUntil(seconds: 5) { nowPlaying().contains(#""state":"paused""#) }, "\(nowPlaying())")
        // Home Assistant drops an attribute named `state` (its MQTT_ATTRIBUTES_BLOCKED): the sensor
        // read the title alone, as if it played. `playback` reaches its attributes.
        #expect(nowPlaying().contains(#""playback":"paused""#), "\(nowPlaying())")
        usleep(500_000)
        try broker.publish(topic: "\(base)/music/resume", message: "{}")
        #expect(waitUntil(seconds: 5) { (try? t.status().sources.first?.state) == "playing" })
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 1)
        try broker.publish(topic: "\(base)/music/next", message: "{}")
        let error = errors.messages().first ?? ""
        #expect(error.contains(#""status":404"#) && error.contains("no music from the server"), "\(error)")
        usleep(300_000)
        t.stop()
        let out = t.left("kitchen")
        // The pause: the longest run of quiet 50 ms windows, with the music before and after it.
        let windows = stride(from: 0, to: out.count - 2_205, by: 2_205).map { Signals.rms(out[$0..<$0 + 2_205]) < 0.01 }
        var longest = (start: 0, count: 0)
        var run = 0
        for (i, quiet) in windows.enumerated() {
            run = quiet ? run + 1 : 0
            if run > longest.count { longest = (i + 1 - run, run) }
        }
        #expect(longest.count >= 8, "\(longest.count) quiet windows of 50 ms in a row")
        let before = longest.start * 2_205
        #expect(
            before >= 8_820
                && Signals.windowedToneLevel(out[(before - 8_820)..<before], frequency: 440, rate: 44_100) > 0.3)
        #expect(Signals.windowedToneLevel(out[(out.count - 8_820)...], frequency: 440, rate: 44_100) > 0.3)
    }

    /// Home Assistant's TTS path over MQTT: `{"url": …}` on `<base>/announce` streams the MP3 from
    /// 127.0.0.1 (1 kHz heard in the kitchen); a host not allowed gets a 403 on `<base>/errors`
    /// naming `announce.allow-url-hosts`.
    @Test func announcesAURLOverMQTT() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let server = try SlowHTTPServer()
        defer { server.stop() }
        server.route("/tts.mp3", .init(contentType: "audio/mpeg", body: try URLAnnounceTests.toneMP3(seconds: 1)))
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url),
            announce: URLAnnounceTests.allowLoopback)
        #expect(connected(t))
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 1)
        try broker.publish(topic: "\(base)/announce", message: #"{"url": "http://ha.local:8123/api/tts_proxy/a.mp3"}"#)
        let error = errors.messages().first ?? ""
        #expect(error.contains(#""status":403"#) && error.contains("announce.allow-url-hosts"), "\(error)")
        try broker.publish(topic: "\(base)/announce", message: #"{"url": "\#(server.url("/tts.mp3"))"}"#)
        let granted = try #require(t.waitForEvent("granted", seconds: 10))
        #expect(t.waitForEvent("played", source: granted.source) != nil)
        t.stop()
        let out = t.left("kitchen")
        let start = try #require(granted.zoneFrames?["kitchen"])
        let first = try #require(Signals.onset(Array(out[start...]), threshold: 0.05)) + start
        #expect(Signals.windowedToneLevel(out[(first + 4_410)..<(first + 8_820)], frequency: 1000, rate: 44_100) > 0.3)
    }
}
