import BatonTesting
import Glibc
import MQTT
import Synchronization
import Testing

/// What a client's callbacks saw, collected on its network thread and read by the test.
final class Recorder: Sendable {
    let messages = Mutex<[(topic: String, payload: String)]>([])
    let statuses = Mutex<[MQTTStatus]>([])

    func client(_ configuration: MQTTConfiguration) throws -> MQTTClient {
        try MQTTClient(
            configuration: configuration,
            onMessage: { topic, payload, _, _ in
                self.messages.withLock { $0.append((topic, String(decoding: payload, as: UTF8.self))) }
            },
            onStatusChange: { status in self.statuses.withLock { $0.append(status) } })
    }

    var received: [String] { messages.withLock { $0.map { "\($0.topic) \($0.payload)" } } }
}

/// A configuration for `broker`, reconnecting quickly.
func configuration(_ broker: MosquittoBroker, clientID: String = "baton-test") throws -> MQTTConfiguration {
    var configuration = MQTTConfiguration(broker: try MQTTURL(parsing: broker.url), clientID: clientID)
    configuration.minimumReconnectDelay = .milliseconds(100)
    configuration.maximumReconnectDelay = .milliseconds(400)
    configuration.keepAlive = .seconds(5)
    return configuration
}

/// Against a real mosquitto broker on 127.0.0.1 (one per test, on a free port), with `mosquitto_pub`
/// and `mosquitto_sub` as independent peers.
@Suite(.ownThread) struct MQTTClientTests {
    /// A message published by the client is received by mosquitto_sub.
    @Test func publishesToAnotherClient() throws {
        let broker = try MosquittoBroker()
        let client = try Recorder().client(configuration(broker))
        defer { client.stop() }
        client.start()
        #expect(waitUntil { client.status.isConnected }, "\(client.status)\n\(broker.log)")
        let subscription = try broker.subscribe(topic: "baton/kitchen/events")
        try client.publish("baton/kitchen/events", text: "{\"event\":\"chime\"}", qos: .atLeastOnce)
        #expect(subscription.messages() == ["baton/kitchen/events {\"event\":\"chime\"}"])
    }

    /// A message from mosquitto_pub reaches the handler, with its topic, for a wildcard subscription.
    @Test func deliversMessagesFromAnotherClient() throws {
        let broker = try MosquittoBroker()
        let recorder = Recorder()
        let client = try recorder.client(configuration(broker))
        defer { client.stop() }
        try client.subscribe("baton/kitchen/music/+")
        client.start()
        #expect(waitUntil { client.status.isConnected }, "\(client.status)")
        try broker.publish(topic: "baton/kitchen/music/pause", message: "")
        try broker.publish(topic: "baton/kitchen/music/volume", message: "40")
        try broker.publish(topic: "baton/kitchen/other", message: "not for us")
        #expect(waitUntil { recorder.received.count >= 2 })
        #expect(recorder.received == ["baton/kitchen/music/pause ", "baton/kitchen/music/volume 40"])
    }

    /// A message longer than `maximumPayload` reaches the handler cut to it, with its whole length:
    /// its receiver refuses it without a second copy of it all.
    @Test func aLongMessageComesCutWithItsLength() throws {
        let broker = try MosquittoBroker()
        let got = Mutex<[(count: Int, length: Int)]>([])
        var settings = try configuration(broker)
        settings.maximumPayload = 10
        let client = try MQTTClient(
            configuration: settings,
            onMessage: { _, payload, length, _ in got.withLock { $0.append((payload.count, length)) } },
            onStatusChange: { _ in })
        defer { client.stop() }
        try client.subscribe("baton/kitchen/+")
        client.start()
        #expect(waitUntil { client.status.isConnected })
        try broker.publish(topic: "baton/kitchen/notify", message: String(repeating: "x", count: 5_000))
        try broker.publish(topic: "baton/kitchen/pause", message: "short")
        #expect(waitUntil { got.withLock { $0.count } == 2 })
        #expect(got.withLock { $0.map { "\($0.count)/\($0.length)" } } == ["10/5000", "5/5"])
    }

    /// A started client of `broker` with `availability` as its availability topic, connected, and
    /// its `online` retained there (a subscriber that comes later still sees it); with the
    /// recorder of its statuses.
    func onlineClient(_ broker: MosquittoBroker, availability: String) throws -> (MQTTClient, Recorder) {
        var settings = try configuration(broker)
        settings.availabilityTopic = availability
        let recorder = Recorder()
        let client = try recorder.client(settings)
        client.start()
        #expect(waitUntil { client.status.isConnected })
        #expect(try broker.subscribe(topic: availability).messages() == ["\(availability) online"])
        return (client, recorder)
    }

    /// On connect `online` is retained on the availability topic; a clean stop replaces it with `offline`.
    @Test func publishesOnlineThenOfflineOnStop() throws {
        let broker = try MosquittoBroker()
        let (client, recorder) = try onlineClient(broker, availability: "baton/kitchen/availability")
        let watcher = try broker.subscribe(topic: "baton/kitchen/availability", count: 2)
        client.stop()
        #expect(watcher.messages() == ["baton/kitchen/availability online", "baton/kitchen/availability offline"])
        #expect(client.status.connection == .stopped)
        #expect(
            recorder.statuses.withLock { $0.map(\.connection) } == [.connecting, .connected, .disconnected, .stopped])
    }

    /// A stop right after a burst of QoS 1 messages the broker has not acknowledged (more than the
    /// 20 libmosquitto keeps in flight; a reconnect or reload republishes some 32), the broker frozen
    /// meanwhile: `offline` still reaches it before the clean DISCONNECT (which drops the will) — a
    /// review feared it would wait behind them while the DISCONNECT went out, and the speaker read
    /// online for good. libmosquitto 2.0.11 sends them in order.
    @Test func offlineGoesOutAheadOfTheDisconnectBehindABurst() throws {
        let broker = try MosquittoBroker()
        let (client, _) = try onlineClient(broker, availability: "baton/porch/availability")
        broker.freeze()
        for i in 0..<40 { try client.publish("baton/porch/burst", text: "\(i)", qos: .atLeastOnce) }
        client.stop()
        broker.freeze(false)
        #expect(
            try broker.subscribe(topic: "baton/porch/availability").messages() == ["baton/porch/availability offline"],
            "\(broker.log)")
    }

    /// What is published just before a clean stop reaches the broker: the stop waits (briefly) for
    /// the broker to acknowledge it before the DISCONNECT. batond's last retained states (a zone
    /// unavailable, nothing playing) were lost there, the broker keeping "music playing".
    @Test func whatIsPublishedBeforeAStopReachesTheBroker() throws {
        let broker = try MosquittoBroker()
        let (client, _) = try onlineClient(broker, availability: "baton/hall/availability")
        for i in 0..<10 {
            try client.publish("baton/hall/topic\(i)", text: "last \(i)", qos: .atLeastOnce, retain: true)
        }
        client.stop()
        let kept = try broker.subscribe(topic: "baton/hall/+", count: 11, seconds: 3).messages().sorted()
        #expect(
            kept == ["baton/hall/availability offline"] + (0..<10).map { "baton/hall/topic\($0) last \($0)" }.sorted())
    }

    /// Two clients with one id (a cloned SD card: two batonds with the same `device`): the broker
    /// ends each session as the other connects. The clients say why after three short sessions in a
    /// row — each said only "the connection closed" — and no longer reconnect every second.
    @Test func twoClientsWithOneIDAreSaid() throws {
        let broker = try MosquittoBroker()
        let settings = try configuration(broker)
        let first = try Recorder().client(settings)
        let second = try Recorder().client(settings)
        first.start()
        second.start()
        defer {
            first.stop()
            second.stop()
        }
        let said = { (c: MQTTClient) in
            c.status.lastError?.contains("is another client using the id \(settings.clientID)") == true
        }
        #expect(waitUntil(seconds: 20) { said(first) || said(second) }, "\(first.status) / \(second.status)")
    }

    /// When the process dies without disconnecting, the broker publishes the will: `offline`, retained.
    ///
    /// The dying client runs in an exit test (a child process). No other child of ours may exit
    /// while it runs: swift-testing's exit-test monitor waits with `waitid(P_ALL, WNOWAIT)` and spins
    /// forever on a zombie it does not own. So the watcher subscribes after the exit test, and sees
    /// the retained will.
    @Test func willSaysOfflineWhenTheProcessDies() async throws {
        let broker = try MosquittoBroker()
        let url = broker.url
        await #expect(processExitsWith: .exitCode(7)) { [url = url as String] in
            var settings = MQTTConfiguration(broker: try! MQTTURL(parsing: url), clientID: "baton-hall")
            settings.availabilityTopic = "baton/hall/availability"
            let recorder = Recorder()
            let client = try! recorder.client(settings)
            try! client.subscribe("baton/hall/echo")
            client.start()
            guard waitUntil(seconds: 10, { client.status.isConnected }) else { _exit(3) }
            // `online` was queued before `connected` was reported; our own message, queued after
            // it, coming back proves it reached the broker.
            try! client.publish("baton/hall/echo", text: "ping", qos: .atLeastOnce)
            guard waitUntil(seconds: 10, { recorder.received == ["baton/hall/echo ping"] }) else { _exit(4) }
            _exit(7)  // no DISCONNECT: the broker sees the socket close
        }
        #expect(
            try broker.subscribe(topic: "baton/hall/availability").messages() == ["baton/hall/availability offline"],
            "\(broker.log)")
        #expect(broker.log.contains("baton-hall"), "the child connected: \(broker.log)")
    }

    /// The broker is killed and restarted on the same port: the client reconnects and re-subscribes,
    /// a command sent after the restart is received, and a QoS 1 message published while the broker
    /// was down is delivered after the reconnect, while a QoS 0 one is refused.
    @Test func reconnectsAndResubscribesAfterABrokerRestart() throws {
        let broker = try MosquittoBroker()
        let recorder = Recorder()
        let client = try recorder.client(configuration(broker))
        defer { client.stop() }
        try client.subscribe("baton/kitchen/announce")
        client.start()
        #expect(waitUntil { client.status.isConnected })
        try broker.publish(topic: "baton/kitchen/announce", message: "before")
        #expect(waitUntil { recorder.received == ["baton/kitchen/announce before"] })

        broker.kill()
        #expect(waitUntil { client.status.connection != .connected && client.status.lastError != nil })
        #expect(client.status.lastError?.hasPrefix("\(broker.url): ") == true, "\(client.status)")
        #expect(throws: MQTTError.notConnected(topic: "baton/kitchen/events")) {
            try client.publish("baton/kitchen/events", text: "lost", qos: .atMostOnce)
        }
        try client.publish("baton/kitchen/state", text: "queued while down", qos: .atLeastOnce, retain: true)
        // Refused attempts while the broker is down say why.
        #expect(waitUntil { client.status.lastError == "\(broker.url): Connection refused" }, "\(client.status)")

        try broker.start()
        #expect(waitUntil { client.status.isConnected && client.status.connectCount == 2 }, "\(client.status)")
        try broker.publish(topic: "baton/kitchen/announce", message: "after")
        #expect(waitUntil { recorder.received.count == 2 })
        #expect(recorder.received == ["baton/kitchen/announce before", "baton/kitchen/announce after"])
        // The broker keeps nothing across a restart here, so this retained message was sent after it.
        #expect(
            try broker.subscribe(topic: "baton/kitchen/state").messages() == ["baton/kitchen/state queued while down"])
    }

    /// A wrong password leaves the client disconnected with the broker's reason; the right one connects.
    @Test func reportsAWrongPassword() throws {
        let broker = try MosquittoBroker(users: ["baton": "right-password"])
        var settings = try configuration(broker)
        settings.username = "baton"
        settings.password = "wrong-password"
        let client = try Recorder().client(settings)
        client.start()
        let expected = "\(broker.url): the broker refused the connection: Connection Refused: not authorised."
        #expect(waitUntil { client.status.lastError == expected }, "\(client.status)")
        #expect(!client.status.isConnected)
        client.stop()

        settings.password = "right-password"
        let good = try Recorder().client(settings)
        good.start()
        #expect(waitUntil { good.status.isConnected }, "\(good.status)\n\(broker.log)")
        good.stop()
    }

    /// Stopping while waiting out a long backoff returns at once rather than after the wait.
    @Test func stopsWhileWaitingToReconnect() throws {
        let port = try FreePort.next()  // nothing listens there
        var settings = MQTTConfiguration(broker: MQTTURL(host: "127.0.0.1", port: port), clientID: "baton-test")
        settings.minimumReconnectDelay = .seconds(600)
        settings.maximumReconnectDelay = .seconds(600)
        let client = try Recorder().client(settings)
        client.start()
        #expect(waitUntil { client.status.connection == .disconnected })
        #expect(client.status.lastError == "mqtt://127.0.0.1:\(port): Connection refused")
        let started = ContinuousClock.now
        client.stop()
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(client.status.connection == .stopped)
    }
}
