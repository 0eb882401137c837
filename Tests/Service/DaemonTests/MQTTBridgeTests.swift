import BatonConfig
import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// The daemon on a real mosquitto broker (one per test, on a free loopback port), driven and watched
/// by `mosquitto_pub` / `mosquitto_sub` as independent clients.
@Suite(.serialized, .ownThread) struct MQTTBridgeTests {
    static let topicBase = "baton/test-speaker"
    let base = MQTTBridgeTests.topicBase

    static func connected(_ t: TestDaemon) -> Bool {
        waitUntil(seconds: 15) { (try? t.status().mqtt?.connection) == "connected" }
    }
    func connected(_ t: TestDaemon) -> Bool { Self.connected(t) }

    /// An announcement sent over MQTT plays (1 kHz in the kitchen's file); availability, zone state
    /// and Home Assistant discovery are retained on the broker; every event is published.
    @Test func announcesOverMQTTAndPublishesState() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        #expect(connected(t), "\(String(describing: try? t.status().mqtt))")
        let events = try broker.subscribe(topic: "\(base)/events", count: 50, seconds: 3)
        try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        let granted = try #require(t.waitForEvent("granted", seconds: 10))
        #expect(granted.source == "announce-1")
        #expect(events.messages().contains { $0.contains(#""type":"granted""#) && $0.contains("announce-1") })
        #expect(try broker.subscribe(topic: "\(base)/availability").messages() == ["\(base)/availability online"])
        let state = try broker.subscribe(topic: "\(base)/zones/kitchen/state").messages().first ?? ""
        #expect(state.contains(#""state":"#) && state.contains(#""volume":1"#), "\(state)")
        let button =
            try broker.subscribe(topic: "homeassistant/button/baton_test-speaker/doorbell/config").messages().first
            ?? ""
        #expect(button.contains(#""command_topic":"baton/test-speaker/announce""#), "\(button)")
        #expect(t.waitForEvent("played", source: "announce-1") != nil)
        t.stop()
        let out = t.left("kitchen")
        let at = try #require(granted.zoneFrames?["kitchen"]) + 882
        #expect(Signals.windowedToneLevel(out[at..<(at + 4_410)], frequency: 1000, rate: 44_100) > 0.4)
        // A clean stop says offline.
        #expect(try broker.subscribe(topic: "\(base)/availability").messages() == ["\(base)/availability offline"])
    }

    /// Home Assistant's volume number (0–100) sets the zone volume, and the retained volume follows;
    /// a bad command gets a clear error on `<base>/errors` and changes nothing.
    @Test func volumeAndErrors() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "40")
        #expect(waitUntil { abs(((try? t.status().zones.first { $0.name == "kitchen" }?.volume) ?? 0) - 0.4) < 1e-6 })
        #expect(
            waitUntil(seconds: 5) {
                ((try? broker.subscribe(topic: "\(base)/zones/kitchen/volume").messages()) ?? []) == [
                    "\(base)/zones/kitchen/volume 40"
                ]
            })
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 3)
        try broker.publish(topic: "\(base)/announce", message: "ding dong")
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "140")
        try broker.publish(topic: "\(base)/zones/garage/volume/set", message: "10")
        // Each names its topic; commands of different kinds run apart, so the errors come in any order.
        let got = errors.messages()
        #expect(got.count == 3, "\(got)")
        #expect(got.contains { $0.contains(#""status":400"#) && $0.contains(#"test-speaker\/announce""#) }, "\(got)")
        #expect(got.contains { $0.contains("volume 140 is not 0–100") }, "\(got)")
        #expect(got.contains { $0.contains(#""status":404"#) && $0.contains("garage") }, "\(got)")
        #expect(abs((try t.status().zones.first { $0.name == "kitchen" }?.volume ?? 0) - 0.4) < 1e-6)
    }

    /// The broker dies and comes back on the same port: the daemon reconnects, re-subscribes, and a
    /// command sent after the broker is back is carried out.
    @Test func survivesABrokerRestart() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        broker.kill()
        #expect(waitUntil(seconds: 10) { (try? t.status().mqtt?.connection) != "connected" })
        try broker.start()
        #expect(connected(t), "reconnected")
        try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(t.waitForEvent("granted", seconds: 10)?.source == "announce-1")
    }

    /// Messages a broker can hold or carry that are not commands to carry out: a retained announce
    /// (it used to ring at every start and reconnect), one over `api.max-body` (it used to hold the
    /// bridge for seconds while decoded), bytes that are not UTF-8 (spoken as "��"), a volume with a
    /// space or in hex (read as another number). Each is refused on `<base>/errors`, nothing plays,
    /// nothing changes; and the broker going away is said (an `mqtt-error` event).
    @Test func refusesStaleHugeAndGarbledMessagesAndSaysWhenTheBrokerGoes() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k"}"#, retain: true)
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 5, seconds: 30)
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let huge = "{\"text\": \"" + String(repeating: "a", count: 5_000) + "\"}"
        try broker.publish(topic: "\(base)/announce", message: huge)
        let garbled = TestDirectory.make("mqtt") + "/garbled"
        let file = fopen(garbled, "wb")!
        _ = [UInt8]([0xFF, 0xFE, 0x00]).withUnsafeBytes { fwrite($0.baseAddress, 1, 3, file) }
        fclose(file)
        let sent = Subprocess.run(
            MosquittoBroker.publisherPath,
            ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "\(base)/notify", "-f", garbled, "-q", "1"], seconds: 10)
        #expect(sent.status == 0, "\(sent.output)")
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "5 0")
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "0x20")
        let got = errors.messages()
        #expect(got.count == 5, "\(got)")
        #expect(got.first?.contains("a retained message is not carried out") == true, "\(got)")
        #expect(got.contains { $0.contains("a message of 5012 bytes; at most 4096 (api.max-body)") }, "\(got)")
        #expect(got.contains { $0.contains("the message is not UTF-8 text") }, "\(got)")
        #expect(got.contains { $0.contains(#"volume \"5 0\" is not a number 0–100"#) }, "\(got)")
        #expect(got.contains { $0.contains(#"volume \"0x20\" is not a number 0–100"#) }, "\(got)")
        #expect(!t.daemon.events.recent().contains { $0.type == "granted" }, "nothing played")
        #expect(abs((try t.status().zones.first { $0.name == "kitchen" }?.volume ?? 0) - 1) < 1e-6)
        #expect(Self.kept("\(base)/announce", on: broker).isEmpty, "batond cleared the retained announce")

        broker.kill()
        let lost = try #require(t.waitForEvent("mqtt-error", seconds: 10))
        #expect(lost.reason?.hasPrefix("lost \(broker.url):") == true, "\(lost.reason ?? "")")
    }

    /// Home Assistant takes the zone state's fields as its sensor's attributes: while speech plays
    /// the state changes only with what plays (the level, a new value nearly every 50 ms look, made
    /// some 20 new states a second, each a row in HA's recorder), and the level comes on a topic
    /// of its own, at most once a second.
    @Test func theZoneStateDoesNotChangeWithTheLevel() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let states = try broker.subscribe(topic: "\(base)/zones/kitchen/state", count: 1_000, seconds: 4)
        let levels = try broker.subscribe(topic: "\(base)/zones/kitchen/level", count: 1_000, seconds: 4)
        try broker.publish(
            topic: "\(base)/notify", message: "The washing machine is done, and the dryer will be done in an hour")
        let granted = try #require(t.waitForEvent("granted", seconds: 15))
        #expect(t.waitForEvent("audible", source: granted.source, seconds: 5) != nil)
        let stateMessages = states.messages(seconds: 6)
        let levelMessages = levels.messages(seconds: 6)
        #expect(stateMessages.count <= 6, "\(stateMessages.count) states in 4 s: \(stateMessages)")
        #expect(stateMessages.allSatisfy { !$0.contains("rmsDb") }, "\(stateMessages.last ?? "")")
        #expect(
            levelMessages.contains { $0.contains(#""rmsDb":-"#) && !$0.contains("-200") },
            "a level of speech: \(levelMessages)")
        #expect(levelMessages.count <= 6, "\(levelMessages.count) levels in 4 s: \(levelMessages)")
    }

    /// A burst of events (a reload's, a storm of commands') that comes while the bridge looks at the
    /// daemon makes one more pass, not one for each: a pass is a status report under the control
    /// plane's lock. The bridge counted a wake-up for each, and made as many passes.
    @Test func aBurstOfEventsMakesOnePassNotOneForEach() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let bridge = try #require(t.triggers.mqttBridge)
        // The connection's own event (`mqtt-connected`, published after the status said connected)
        // goes out before the burst is looked for: on a loaded machine the bridge published it after
        // the subscription below, the first of its 100 messages, and "burst 99" was not among them.
        #expect(t.waitForEvent("mqtt-connected") != nil)
        let settling = try broker.subscribe(topic: "\(base)/events", count: 1_000, seconds: 20)
        t.daemon.events.publish(type: .volume, reason: "settled")
        #expect(settling.waitFor("settled"), "the bridge publishes events")
        settling.stop()
        let published = try broker.subscribe(topic: "\(base)/events", count: 100, seconds: 10)
        let before = bridge.passes.load(ordering: .relaxed)
        // The control plane held: a pass that began waits at its status report while they come.
        t.daemon.state.withLock { _ in
            for i in 0..<100 { t.daemon.events.publish(type: .volume, reason: "burst \(i)") }
        }
        let messages = published.messages(seconds: 10)
        #expect(messages.count == 100 && messages.last?.contains("burst 99") == true, "\(messages.suffix(1))")
        _ = waitUntil(seconds: 2) { bridge.passes.load(ordering: .relaxed) - before > 10 }
        let made = bridge.passes.load(ordering: .relaxed) - before
        #expect(made <= 4, "\(made) passes for 100 events")
    }

    /// A doorbell sent right after a notification does not wait while the notification's speech is
    /// rendered (espeak-ng: a few hundred ms a paragraph on a Pi; here a synthesizer that takes a
    /// second): spoken text has a lane of its own, as URLs have. They shared one, and the doorbell
    /// was granted after the speech, queued behind it.
    @Test func aDoorbellDoesNotWaitForSpeechToBeRendered() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let slow = try TextFile.script(
            TestDirectory.make("slow-speech") + "/speak", "#!/bin/sh\nsleep 1\nexec espeak-ng \"$@\"\n")
        let t = try TestDaemon(
            zones: [("kitchen", 44_100, nil)], speech: SpeechConfig(command: slow), mqtt: MQTTConfig(broker: broker.url)
        )
        defer { t.stop() }
        #expect(connected(t))
        try broker.publish(topic: "\(base)/notify", message: "The washing machine is done")
        try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(waitUntil(seconds: 20) { t.daemon.events.recent().filter { $0.type == "played" }.count == 2 })
        let events = t.daemon.events.recent()
        let first = try #require(events.first { $0.type == "granted" })
        let played = events.first { $0.type == "played" && $0.source == first.source }
        #expect(played?.reason?.hasPrefix("sound bell1k") == true, "granted first: \(played?.reason ?? "?")")
    }

    /// While music plays, `<base>/state` changes once a second (the positions to the second), not
    /// ten times (they were to 0.1 s: ten retained messages a second on the broker, all day).
    @Test func theStateChangesOnceASecondWhileMusicPlays() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["kitchen"]}"#)
                .object["id"])
        #expect(t.waitForEvent("audible", source: id, seconds: 5) != nil)
        let states = try broker.subscribe(topic: "\(base)/state", count: 1_000, seconds: 3).messages(seconds: 5)
        #expect(states.count >= 2 && states.count <= 6, "\(states.count) states in 3 s")
    }

    /// At a clean stop the retained state topics say the zone is unavailable, nothing heard: they
    /// stay on the broker, and a flow that read them after batond stopped read music playing.
    @Test func aStopLeavesNoRetainedStateSayingMusicPlays() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        #expect(connected(t))
        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "loop": true, "zones": ["kitchen"]}"#)
                .object["id"])
        #expect(t.waitForEvent("audible", source: id, seconds: 5) != nil)
        #expect(
            waitUntil {
                (try? broker.subscribe(topic: "\(base)/zones/kitchen/state").messages().first)??
                    .contains(#""state":"music""#) == true
            })
        t.stop()
        let zone = try broker.subscribe(topic: "\(base)/zones/kitchen/state").messages().first ?? ""
        #expect(zone.contains(#""state":"unavailable""#) && zone.contains(#""audible":[]"#), "\(zone)")
        let now = try broker.subscribe(topic: "\(base)/zones/kitchen/now-playing").messages().first ?? ""
        #expect(now.contains(#""state":"unavailable""#) && !now.contains("music440"), "\(now)")
        let summary = try broker.subscribe(topic: "\(base)/state").messages().first ?? ""
        #expect(summary.contains(#""sources":[]"#) && !summary.contains(id), "\(summary)")
        #expect(try broker.subscribe(topic: "\(base)/availability").messages() == ["\(base)/availability offline"])
    }

    /// batond's own disconnect at its stop is not a lost broker: it was logged as "lost …;
    /// reconnecting" and published as an `mqtt-error` at every stop.
    @Test func aStopIsNotALostBroker() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        #expect(connected(t))
        t.stop()
        let said = t.daemon.events.recent().filter { $0.type == "mqtt-error" }.map { $0.reason ?? "" }
        #expect(said.isEmpty, "\(said)")
    }

    /// A retained `reload` is refused and cleared from the broker by batond, and the empty message
    /// the clearing hands to every subscriber (batond too, as an ordinary message) is not carried out:
    /// an empty body is `reload`'s own. Clearing it by hand, as batond's error advised, reloaded.
    @Test func aRetainedCommandIsClearedWithoutRunningIt() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        try broker.publish(topic: "\(base)/reload", message: "{}", retain: true)
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 2, seconds: 30)
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        #expect(waitUntil(seconds: 10) { Self.kept("\(base)/reload", on: broker).isEmpty }, "cleared")
        // The broker handed the clearing on before this command: the error after the refusal is
        // this one's, not a reload's.
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "0x20")
        let got = errors.messages()
        #expect(got.count == 2 && got[0].contains("a retained message is not carried out"), "\(got)")
        #expect(got.count == 2 && got[1].contains(#"volume \"0x20\" is not a number"#), "\(got)")
        #expect(!t.daemon.events.recent().contains { $0.type == "reloaded" })
    }

    /// The echo of a clear is timed by when it came, not when the bridge got to it: a bridge busy
    /// for 1.5 s right after the clear (here its log line waits, as on a slow journal; on a Pi a
    /// discovery republished from a slow SD card or a control plane held by a reload) handles the
    /// echo that came at once well over a second after the clear. It was refused on
    /// `<base>/errors` as "…taken as the clearing…; send it again" (Home Assistant automations on
    /// errors fired) for an echo that came within milliseconds.
    @Test func anEchoHandledLateByABusyBridgeIsStillTheEcho() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        try broker.publish(topic: "\(base)/reload", message: "{}", retain: true)
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 2, seconds: 30)
        final class Once: Sendable { let done = Atomic<Bool>(false) }
        let slowed = Once()
        let t = try TestDaemon(
            mqtt: MQTTConfig(broker: broker.url),
            triggersLog: { line in
                // The bridge's thread, just after it sent the clear: busy for 1.5 s, once.
                if line.contains("a retained message is not carried out"),
                    !slowed.done.exchange(true, ordering: .relaxed)
                {
                    usleep(1_500_000)
                }
            })
        defer { t.stop() }
        #expect(connected(t))
        #expect(waitUntil(seconds: 10) { Self.kept("\(base)/reload", on: broker).isEmpty }, "cleared")
        let held = slowed.done.load(ordering: .relaxed)
        #expect(held, "the bridge was held after the clear")
        // The echo came before this (the broker hands messages on in order) and is handled first:
        // the second error is this one's, not one for the echo.
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "0x20")
        let got = errors.messages()
        #expect(got.count == 2 && got[0].contains("a retained message is not carried out"), "\(got)")
        #expect(got.count == 2 && got[1].contains(#"volume \"0x20\" is not a number"#), "\(got)")
        #expect(!t.daemon.events.recent().contains { $0.type == "reloaded" })
    }

    /// A broker whose ACL does not let batond publish on its command topics (docs/MQTT.md: clearing
    /// a retained command needs that right): the clear of a retained `music/stop` goes nowhere, and no
    /// echo of it comes. An empty `music/stop` sent a while later, within the echo's window, is taken
    /// for it — and said on `<base>/errors`, "send it again"; sent again, it is carried out. It was
    /// dropped with a line in the log only, nothing on `<base>/errors`.
    @Test func aCommandTakenForTheEchoOfARefusedClearIsSaid() throws {
        let user = (name: "tester", password: "tester-pw")
        let broker = try MosquittoBroker(
            users: ["baton": "baton-pw", user.name: user.password],
            acl: """
                user tester
                topic readwrite #
                user baton
                topic read \(base)/#
                topic write \(base)/errors
                """)
        defer { broker.stop() }
        try broker.publish(topic: "\(base)/music/stop", message: "{}", retain: true, user: user)
        let password = TestDirectory.make("mqtt-acl") + "/password"
        guard case .success = FileIO.writeAtomically(Array("baton-pw\n".utf8), to: password) else {
            throw TestSetupError(message: "cannot write \(password)")
        }
        let refusal = try broker.subscribe(topic: "\(base)/errors", count: 1, seconds: 30, user: user)
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url, username: "baton", passwordFile: password))
        defer { t.stop() }
        #expect(connected(t))
        let refused = refusal.messages().first ?? ""
        #expect(refused.contains("a retained message is not carried out"), "\(refused)")
        #expect(Self.kept("\(base)/music/stop", on: broker, user: user).count == 1, "the broker kept it: no clear")
        // Later than an echo comes (`MQTTBridge.echoWithin`): a person reacting to the error.
        usleep(1_200_000)
        let answers = try broker.subscribe(topic: "\(base)/errors", count: 2, seconds: 15, user: user)
        try broker.publish(topic: "\(base)/music/stop", message: "", user: user)
        // Sent again: carried out (nothing plays: music/stop's own answer).
        try broker.publish(topic: "\(base)/music/stop", message: "", user: user)
        let said = answers.messages()
        #expect(said.count == 2, "\(said)")
        #expect(
            said.first?.contains(
                "was taken as the clearing of that retained command; if it was a command, send it again")
                == true, "\(said)")
        #expect(said.count == 2 && said[1].contains("no music"), "\(said)")
    }

    /// A reload that changes `mqtt:` is not applied by the running bridge, and says so
    /// (`needsRestart`); the status keeps showing the broker the bridge is on. It used to answer
    /// `needsRestart: []` and show the new, unconnected broker as connected.
    @Test func aReloadThatChangesTheBrokerSaysARestartIsNeeded() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        var new = t.config
        new.mqtt = MQTTConfig(broker: "mqtt://127.0.0.1:1")
        new.device = "elsewhere"
        let report = t.daemon.apply(new)
        #expect(report.applied)
        #expect(report.needsRestart == ["mqtt", "device"], "\(report.needsRestart)")
        let mqtt = try #require(try t.status().mqtt)
        #expect(mqtt.broker == broker.url && mqtt.connection == "connected", "\(mqtt)")
    }

    /// What `broker` keeps on `topic` (a retained message comes at once; mosquitto_sub then times out).
    /// A retained command over `api.max-body` (none of its bytes kept): refused as retained, and
    /// cleared from the broker, as a small one is. Its bytes not kept, it was taken for the empty
    /// message that clears a retained command: nothing said, the broker keeping it, back at every
    /// connect. (And one arriving while a clearing's echo was due was taken for that echo, and
    /// the echo, coming after, carried out as a command with an empty body — a `reload`.)
    @Test func aHugeRetainedCommandIsRefusedAndCleared() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let huge = "{\"text\": \"" + String(repeating: "a", count: 5_000) + "\"}"
        try broker.publish(topic: "\(base)/announce", message: huge, retain: true)
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 1, seconds: 10)
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let got = errors.messages()
        #expect(got.first?.contains("a retained message is not carried out") == true, "\(got)")
        #expect(waitUntil(seconds: 10) { Self.kept("\(base)/announce", on: broker).isEmpty }, "cleared")
        #expect(!t.daemon.events.recent().contains { $0.type == "granted" }, "nothing played")
    }

    static func kept(
        _ topic: String, on broker: MosquittoBroker, user: (name: String, password: String)? = nil
    ) -> [String] {
        ((try? broker.subscribe(topic: topic, seconds: 1, user: user).messages(seconds: 3)) ?? ["?"]).filter {
            $0.hasPrefix(topic + " ") || $0 == "?"
        }
    }

    /// After a reload that removes a zone, its retained topics and its Home Assistant entities are
    /// cleared (they stayed, showing a zone that is gone); a silent zone's now-playing says what
    /// plays there (it said `unavailable`).
    @Test func aRemovedZoneIsClearedAndASilentZoneShowsWhatPlays() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url), silenceAlarm: .milliseconds(300))
        defer { t.stop() }
        #expect(connected(t))
        let patioVolume = "homeassistant/number/baton_test-speaker/patio_volume/config"
        #expect(try broker.subscribe(topic: patioVolume, seconds: 5).messages().count == 1)
        #expect(try broker.subscribe(topic: "\(base)/zones/patio/state", seconds: 5).messages().count == 1)
        var new = t.config
        new.zones.removeAll { $0.name == "patio" }
        #expect(t.daemon.apply(new).zonesRemoved == ["patio"])
        func kept(_ topic: String) -> [String] { Self.kept(topic, on: broker) }
        #expect(waitUntil(seconds: 5) { kept("\(base)/zones/patio/state").isEmpty }, "the patio's state is cleared")
        #expect(kept(patioVolume).isEmpty, "the patio's volume entity is removed")
        #expect(kept("\(base)/zones/patio/now-playing").isEmpty)
        #expect(try broker.subscribe(topic: "\(base)/zones/kitchen/state", seconds: 5).messages().count == 1)

        let id = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "zeros", "loop": true, "zones": ["kitchen"]}"#)
                .object["id"])
        #expect(t.waitForEvent("silent-while-playing", source: id, seconds: 5) != nil)
        #expect(
            waitUntil(seconds: 5) {
                let now = (try? broker.subscribe(topic: "\(base)/zones/kitchen/now-playing").messages().first) ?? ""
                return now.contains(#""state":"playing""#)
            }, "the kitchen's now-playing says playing while the zone is silent")
    }

    /// Home Assistant refuses a state out of its number's range (and keeps the old one): a zone at
    /// its max-volume of 0.555 was published as 56 on a slider to 55; it is 55. A reload that leaves
    /// no sounds removes the sound select (its options stayed, each failing).
    @Test func theVolumeIsWithinTheSliderAndAnEmptySoundSelectGoes() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        func kept(_ topic: String) -> [String] { Self.kept(topic, on: broker) }
        let select = "homeassistant/select/baton_test-speaker/sound/config"
        #expect(kept(select).count == 1)
        var new = t.config
        new.zones[0].maxVolume = 0.555
        new.sounds = TestDirectory.make("no-sounds")
        #expect(t.daemon.apply(new).applied)
        #expect(try t.request("POST", "/api/v1/zones/kitchen/volume", #"{"volume": 0.555}"#).status == 200)
        let slider = "homeassistant/number/baton_test-speaker/kitchen_volume/config"
        #expect(waitUntil(seconds: 5) { kept(slider).first?.contains(#""max":55"#) == true }, "\(kept(slider))")
        #expect(waitUntil(seconds: 5) { kept("\(base)/zones/kitchen/volume") == ["\(base)/zones/kitchen/volume 55"] })
        #expect(kept(select).isEmpty, "the sound select is removed")
    }

    /// A zone removed from the file while batond was stopped: at the next start its retained topics
    /// and Home Assistant entities, left by the earlier run, are cleared (they stayed for good,
    /// showing a zone that is gone), and the remaining zone's are kept.
    @Test func aZoneRemovedBetweenRunsIsCleared() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let patioVolume = "homeassistant/number/baton_test-speaker/patio_volume/config"
        do {
            let before = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
            defer { before.stop() }
            #expect(connected(before))
            #expect(try broker.subscribe(topic: patioVolume, seconds: 5).messages().count == 1)
            #expect(try broker.subscribe(topic: "\(base)/zones/patio/state", seconds: 5).messages().count == 1)
        }
        let t = try TestDaemon(zones: [("kitchen", 44_100, nil)], mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        func kept(_ topic: String) -> [String] { Self.kept(topic, on: broker) }
        #expect(waitUntil(seconds: 5) { kept("\(base)/zones/patio/state").isEmpty }, "the patio's state is cleared")
        #expect(kept(patioVolume).isEmpty, "the patio's volume entity is removed")
        #expect(kept("\(base)/zones/patio/volume").isEmpty)
        #expect(try broker.subscribe(topic: "\(base)/zones/kitchen/state", seconds: 5).messages().count == 1)
    }

    /// The seed scenario through MQTT: music started over MQTT, a doorbell over MQTT interrupts it,
    /// and five more presses at once (MQTT and HTTP) coalesce into the one doorbell; the music
    /// resumes after it. Checked on the event stream in order.
    @Test func doorbellOverMQTTInterruptsMusicAndPressesCoalesce() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        try broker.publish(
            topic: "\(base)/music/play", message: #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
        let music = try #require(t.waitForEvent("granted", seconds: 10)?.source)
        for _ in 0..<3 {
            try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        }
        _ = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(waitUntil { t.daemon.events.recent().filter { $0.type == "coalesced" }.count == 3 })
        let ended = try #require(t.waitForEvent("interruption-ended", source: music, seconds: 10))
        #expect(ended.shouldResume == true)
        // The presses coalesce by the class's window (3 s from the first), not by the bell's half
        // second: on a busy machine one may come after the bell ended, so they are counted above
        // and left out of the order.
        let order = t.daemon.events.recent().map(\.type).filter {
            ["granted", "interruption-began", "played", "interruption-ended"].contains($0)
        }
        #expect(order == ["granted", "granted", "interruption-began", "played", "interruption-ended"], "\(order)")
    }

    /// mqtts:// with the broker's CA: the daemon connects over TLS (the certificate is checked against
    /// 127.0.0.1) and takes commands; with a CA that did not sign the broker's certificate it does not
    /// connect, and says why.
    /// A broker that refuses the subscription to the announce topic (mosquitto's dynamic security): Baton is connected (the rest works), and says
    /// which subscription was refused — in status (`mqtt.error`), the log and an `mqtt-error`
    /// event — instead of showing a connection on which doorbell commands silently never come.
    @Test func aRefusedSubscriptionIsNamed() throws {
        let broker = try MosquittoBroker(refusing: ["\(base)/announce"])
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let refused = "refused the subscription to \(base)/announce"
        let error = (try? t.status().mqtt?.error ?? nil) ?? ""
        #expect(error.contains(refused), "\(error)")
        let said = t.waitForEvent("mqtt-error", seconds: 5)?.reason ?? ""
        #expect(said.contains(refused), "\(said)")
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 1)
        try broker.publish(topic: "\(base)/music/pause", message: "{}")
        let answer = errors.messages().first ?? ""
        #expect(answer.contains("no music source"), "the other commands still come: \(answer)")
    }

    @Test func connectsOverTLS() throws {
        let broker = try MosquittoBroker(tls: true)
        defer { broker.stop() }
        let t = try TestDaemon(mqtt: MQTTConfig(broker: broker.url, caFile: broker.caFile))
        #expect(connected(t), "\(String(describing: try? t.status().mqtt))")
        try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(t.waitForEvent("granted", seconds: 10)?.source == "announce-1")
        t.stop()
        let other = try MosquittoBroker(tls: true)
        defer { other.stop() }
        let wrong = try TestDaemon(mqtt: MQTTConfig(broker: broker.url, caFile: other.caFile))
        defer { wrong.stop() }
        #expect(waitUntil(seconds: 10) { (try? wrong.status().mqtt?.error) != nil })
        #expect(try wrong.status().mqtt?.connection != "connected")
    }

    /// A broker that does not answer: MQTT shows `connecting`/`disconnected` with the error, and the
    /// daemon plays on.
    @Test func unreachableBrokerLeavesTheDaemonRunning() throws {
        let port = try FreePort.next()
        let t = try TestDaemon(mqtt: MQTTConfig(broker: "mqtt://127.0.0.1:\(port)"))
        defer { t.stop() }
        #expect(waitUntil(seconds: 5) { (try? t.status().mqtt?.error) != nil })
        #expect(try t.status().mqtt?.connection != "connected")
        #expect(try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k"}"#).status == 202)
    }

    /// A Subsonic server that takes each request and answers only when told (`HeldHTTPServer`),
    /// and the music section for it.
    struct HeldSubsonic {
        let http: HeldHTTPServer
        let music: MusicConfig

        init() throws {
            http = try HeldHTTPServer()
            let dir = TestDirectory.make("held-subsonic")
            _ = FileIO.writeAtomically(Array("secret\n".utf8), to: "\(dir)/password")
            music = MusicConfig(
                subsonic: .init(url: http.url, user: "baton", password: .file("\(dir)/password"), format: .raw))
        }

        func count(_ call: String) -> Int { http.count(call) }
        func holding(_ call: String) -> Int { http.holding(call) }
        func failHeld() { http.failHeld() }
        func close() { http.close() }
    }

    /// A daemon bridged to a broker of its own, its music server one that takes every request and
    /// answers none (`HeldSubsonic`). `stop`: the server goes (a held request fails), then the
    /// daemon, then the broker.
    struct BridgeOnAHeldServer {
        let server: HeldSubsonic
        let broker: MosquittoBroker
        let t: TestDaemon

        init() throws {
            server = try HeldSubsonic()
            broker = try MosquittoBroker()
            do {
                t = try TestDaemon(music: server.music, mqtt: MQTTConfig(broker: broker.url))
            } catch {
                broker.stop()
                throw error
            }
        }

        func stop() {
            server.close()
            t.stop()
            broker.stop()
        }

        /// Once the bridge is connected, follows `<base>/errors` (for `count` messages, at most
        /// `seconds`), and has the bridge ask for music (`music/play`) that the server holds: the
        /// `music` lane busy.
        func holdingAPlay(errors count: Int, seconds: Int) throws -> MosquittoSubscription {
            let base = MQTTBridgeTests.topicBase
            #expect(MQTTBridgeTests.connected(t))
            let errors = try broker.subscribe(topic: "\(base)/errors", count: count, seconds: seconds)
            try broker.publish(topic: "\(base)/music/play", message: #"{"random": 5}"#)
            #expect(waitUntil(seconds: 10) { server.count("getRandomSongs") == 1 })
            return errors
        }
    }

    /// A command that waits on the network holds only the commands of its kind: `music/play`
    /// asking a Subsonic server that takes the request and never answers (up to 30 s), then a
    /// volume change and a doorbell over MQTT — both carried out at once, and the zone's state
    /// published, while the play still waits; its error comes when the server goes. Before, the
    /// bridge ran every command on its one thread: nothing for 30 s.
    @Test func aCommandWaitingOnTheServerHoldsOnlyItsOwnKind() throws {
        let bridge = try BridgeOnAHeldServer()
        defer { bridge.stop() }
        let (server, broker, t) = (bridge.server, bridge.broker, bridge.t)
        let errors = try bridge.holdingAPlay(errors: 1, seconds: 20)
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "30")
        // Followed from before the bell: its state lasts half a second, which a new subscription
        // for each look (a process each) could miss on a busy machine.
        let states = try broker.subscribe(topic: "\(base)/zones/kitchen/state", count: 100, seconds: 20)
        try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        let granted = try #require(t.waitForEvent("granted", seconds: 5))
        #expect(granted.source == "announce-1")
        #expect(
            waitUntil(seconds: 5) {
                abs(((try? t.status().zones.first { $0.name == "kitchen" }?.volume) ?? 0) - 0.3) < 1e-6
            })
        #expect(
            waitUntil(seconds: 5) {
                usleep(10_000)
                return states.messages(seconds: 0).contains { $0.contains(#""state":"announcement""#) }
            })
        #expect(errors.messages(seconds: 0).isEmpty, "the play has not failed yet")
        // The server goes: the play fails (its error on `<base>/errors`), and was never a source.
        server.close()
        let failed = errors.messages()
        #expect(failed.count == 1 && failed[0].contains(#"music\/play"#) && failed[0].contains("502"), "\(failed)")
        #expect(t.daemon.events.recent().allSatisfy { $0.source?.hasPrefix("music") != true })
    }

    /// Stopping the bridge (batond's stop, before the daemon's) waits for the command that runs —
    /// a `music/play` the server holds — up to 2 s, and drops the one queued behind it: no MQTT
    /// command begins once the bridge has stopped. Before, both went on after it, into a daemon
    /// being stopped.
    @Test func aStopWaitsForTheRunningCommandAndDropsTheRest() throws {
        let server = try HeldSubsonic()
        defer { server.close() }
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(music: server.music, mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        try broker.publish(topic: "\(base)/music/play", message: #"{"random": 5}"#)
        #expect(waitUntil(seconds: 10) { server.count("getRandomSongs") == 1 })
        try broker.publish(topic: "\(base)/music/play", message: #"{"random": 6}"#)
        // A volume change after it: once it is made, the bridge has handed the second play to its
        // lane, where it waits behind the first.
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "30")
        #expect(waitUntil { abs(((try? t.status().zones.first { $0.name == "kitchen" }?.volume) ?? 0) - 0.3) < 1e-6 })
        let stopped = Atomic<Bool>(false)
        let triggers = t.triggers
        OSThread.detach(name: "stop") {
            triggers.stop()
            stopped.store(true, ordering: .releasing)
        }
        usleep(300_000)
        let stoppedEarly = stopped.load(ordering: .acquiring)
        #expect(!stoppedEarly, "the stop did not wait for the running command")
        // But not for ever: 2 s, and the stop goes on (systemd gives it 5), the play still held.
        #expect(waitUntil(seconds: 5) { stopped.load(ordering: .acquiring) })
        #expect(server.holding("getRandomSongs") == 1)
        server.failHeld()
        usleep(300_000)
        #expect(server.count("getRandomSongs") == 1, "the queued play ran after the stop")
    }

    /// A flood of commands of one kind while the first waits on the network (a `music/play` the
    /// server holds): the lane keeps 32 waiting and refuses the rest on `<base>/errors`, each
    /// named; those kept still run, in order, once the server lets go. Before, the lane queued
    /// every one without bound.
    @Test func aLaneFullOfWaitingCommandsRefusesTheRest() throws {
        let bridge = try BridgeOnAHeldServer()
        defer { bridge.stop() }
        let (server, broker) = (bridge.server, bridge.broker)
        // 1 held + 32 kept (each failing once the server goes) + 2 refused.
        let errors = try bridge.holdingAPlay(errors: 35, seconds: 40)
        for _ in 0..<34 {
            try broker.publish(topic: "\(base)/music/play", message: #"{"random": 6}"#)
        }
        #expect(
            waitUntil(seconds: 10) {
                usleep(10_000)
                return errors.messages(seconds: 0).count == 2
            })
        let refused = errors.messages(seconds: 0)
        #expect(
            refused.allSatisfy { $0.contains(#""status":503"#) && $0.contains("32 commands of its kind (music)") },
            "\(refused)")
        server.close()
        let all = errors.messages()
        #expect(all.count == 35, "\(all.count) errors")
        #expect(all.dropFirst(2).allSatisfy { $0.contains(#"music\/play"#) && $0.contains("502") })
    }

    /// An announcement that waited in its lane longer than the announcement class's ttl (1 s here)
    /// — behind a URL whose server holds its first byte until `first-byte-timeout` (2 s) — is not
    /// carried out: refused on `<base>/errors`, saying how long it waited, and its URL never asked
    /// for. Before, it played as late as the lane was slow (minutes behind a slow server).
    @Test func anAnnouncementThatWaitedPastItsTTLIsNotCarriedOut() throws {
        let server = try SlowHTTPServer()
        defer { server.stop() }
        let mp3 = try URLAnnounceTests.toneMP3(seconds: 1)
        server.route("/held.mp3", .init(contentType: "audio/mpeg", body: mp3, firstByteDelay: 10))
        server.route("/late.mp3", .init(contentType: "audio/mpeg", body: mp3))
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let policy = try Self.policy(announcementTTL: .seconds(1))
        let t = try TestDaemon(
            policy: policy, mqtt: MQTTConfig(broker: broker.url),
            announce: AnnounceConfig(allowURLHosts: ["127.0.0.1"], firstByteTimeout: .seconds(2)))
        defer { t.stop() }
        #expect(connected(t))
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 2, seconds: 15)
        try broker.publish(
            topic: "\(base)/announce", message: #"{"url": "\#(server.url("/held.mp3"))", "zones": ["kitchen"]}"#)
        #expect(waitUntil(seconds: 5) { server.requests.contains { $0.contains("/held.mp3") } })
        try broker.publish(
            topic: "\(base)/announce", message: #"{"url": "\#(server.url("/late.mp3"))", "zones": ["kitchen"]}"#)
        let said = errors.messages()
        #expect(said.count == 2, "\(said)")
        #expect(
            said.contains { $0.contains(#""status":503"#) && $0.contains("waited") && $0.contains("ttl (1.0 s)") },
            "\(said)")
        #expect(!server.requests.contains { $0.contains("/late.mp3") }, "\(server.requests)")
    }

    /// An announcement's age counts from when it came, not from when the bridge's thread got to it: an
    /// announcement that came while the bridge was busy (here the log line of a refusal before it
    /// waits, as on a slow journal; on a Pi a reload or a discovery read from a slow SD card) for
    /// 2 s, past the announcement class's ttl (1 s), is not carried out but refused on
    /// `<base>/errors`. It was timed from its handling, and played 2 s late.
    @Test func anAnnouncementThatWaitedForABusyBridgePastItsTTLIsNotCarriedOut() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        final class Hold: Sendable {
            let sent = Atomic<Bool>(false)
            let held = Atomic<Bool>(false)
        }
        let hold = Hold()
        let t = try TestDaemon(
            policy: try Self.policy(announcementTTL: .seconds(1)), mqtt: MQTTConfig(broker: broker.url),
            triggersLog: { line in
                // The bridge's thread, refusing the bad volume: busy until the announcement was sent,
                // and 2 s more (once).
                if line.contains("is not a number"), !hold.held.exchange(true, ordering: .relaxed) {
                    _ = waitUntil(seconds: 10) { hold.sent.load(ordering: .relaxed) }
                    usleep(2_000_000)
                }
            })
        defer { t.stop() }
        #expect(connected(t))
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 2, seconds: 10)
        try broker.publish(topic: "\(base)/zones/kitchen/volume/set", message: "0x20")
        try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        hold.sent.store(true, ordering: .relaxed)
        let said = errors.messages()
        let held = hold.held.load(ordering: .relaxed)
        #expect(held, "the bridge was held")
        #expect(said.count == 2 && said[0].contains("is not a number"), "\(said)")
        #expect(
            said.count == 2 && said[1].contains(#""status":503"#) && said[1].contains("since it came")
                && said[1].contains("ttl (1.0 s)"), "\(said)")
        #expect(!t.daemon.events.recent().contains { $0.type == "granted" }, "the announcement not played")
    }

    /// A call that loses every other packet (a poor Wi-Fi) changes the intercom's counters by the
    /// packet (lost, concealed, stretched): `<base>/state` is not published again for each. They were
    /// in the retained state, a new retained message at nearly every 50 ms look of the bridge.
    @Test func aCallsCountersAreNotInTheRetainedState() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let t = try TestDaemon(
            intercom: IntercomConfig(
                listen: ListenAddress(host: "127.0.0.1", port: 0), zones: ["kitchen"],
                silenceTimeout: .milliseconds(600)),
            mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let listen = try #require(try t.status().intercom?.listen)
        let port = try #require(UInt16(listen.split(separator: ":").last ?? ""))
        let states = try broker.subscribe(topic: "\(base)/state", count: 1_000, seconds: 5)
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        // RTP (payload type 96) with a 20 ms CELT packet without audio (its TOC byte alone), every
        // other one never sent: 2 s of a call, in real time.
        for i in stride(from: 0, to: 200, by: 2) {
            let seq = UInt16(1_000 + i)
            let timestamp = UInt32(90_000 + i * 960)
            let bytes: [UInt8] = [
                0x80, 96, UInt8(seq >> 8), UInt8(seq & 0xFF),
                UInt8(timestamp >> 24), UInt8(timestamp >> 16 & 0xFF), UInt8(timestamp >> 8 & 0xFF),
                UInt8(timestamp & 0xFF), 0x12, 0x34, 0x56, 0x78, 0xF8,
            ]
            _ = withUnsafePointer(to: &address) { a in
                a.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            usleep(40_000)
        }
        let status = try #require(try t.status().intercom)
        #expect(status.lost >= 20, "the counters moved during the call: \(status)")
        let said = states.messages()
        #expect(said.contains { $0.contains(#""inCall":true"#) }, "the call is in the state: \(said)")
        #expect(!said.contains { $0.contains(#""lost""#) || $0.contains(#""stretched""#) }, "\(said.last ?? "")")
        #expect(said.count <= 12, "\(said.count) retained states in 5 s")
    }

    /// With `ttl: 0` ("now or never") an announcement that runs at once is carried out: the age
    /// check counts a wait behind others, not the start of the lane's thread.
    @Test func anAnnouncementWithTTLZeroThatWaitedForNothingPlays() throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let policy = try Self.policy(announcementTTL: .zero)
        let t = try TestDaemon(policy: policy, mqtt: MQTTConfig(broker: broker.url))
        defer { t.stop() }
        #expect(connected(t))
        let errors = try broker.subscribe(topic: "\(base)/errors", count: 1, seconds: 3)
        try broker.publish(topic: "\(base)/announce", message: #"{"sound": "bell1k", "zones": ["kitchen"]}"#)
        #expect(t.waitForEvent("granted", seconds: 5)?.source == "announce-1")
        #expect(errors.messages(seconds: 0).isEmpty)
    }

    /// The default policy with the `announcement` class's ttl set to `ttl`.
    static func policy(announcementTTL ttl: Duration) throws -> PolicyConfig {
        var policy = PolicyConfig.default
        let announcement = try #require(policy.classes.firstIndex { $0.name == "announcement" })
        policy.classes[announcement].ttl = ttl
        return policy
    }
}
