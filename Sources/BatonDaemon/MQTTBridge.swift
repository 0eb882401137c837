import AudioCore
import BatonConfig
import FoundationEssentials
import Glibc
import HTTPServer
import MQTT
import Synchronization

/// Baton on an MQTT broker (`mqtt:`): commands in, state and events out, Home Assistant discovery.
///
/// Topics, with `<base>` = `<topic-prefix>/<device>` (`baton/living-room`):
/// - subscribed: `<base>/announce` (the JSON of `POST /api/v1/announce`), `<base>/music/<command>`
///   (play, pause, resume, next, previous, stop, seek: the JSON of the HTTP body, may be empty),
///   `<base>/zones/<zone>/volume/set` (0–100 as Home Assistant sends it, or `{"volume": 0.4}`),
///   `<base>/call/start`, `<base>/call/end`, `<base>/reload`;
/// - published: `<base>/availability` (`online`/`offline`, retained, the last will), `<base>/state`
///   (retained JSON: every zone and source), `<base>/zones/<zone>/state` (retained, `state` is
///   `idle`, `music`, `announcement`, `call` or `unavailable`), `<base>/zones/<zone>/volume` (retained
///   0–100), `<base>/events` (every event as in `GET /api/v1/events`), `<base>/errors` (a command that
///   failed: its topic, status and message).
///
/// A command is carried out exactly as the HTTP request it mirrors (same validation, same errors).
/// Commands run in arrival order on the bridge's own thread, which also publishes events (polled
/// every 50 ms) and state whenever it changes; on every (re)connect the retained topics and the
/// discovery messages are published again.
///
/// Thread: created, started and stopped by the control thread; the MQTT client's network thread only
/// queues commands.
final class MQTTBridge: @unchecked Sendable {
    // @unchecked: mutable state is in `shared` (a mutex) and `running` (an atomic); the rest is
    // immutable after init.
    let base: String
    private let daemon: Daemon
    private let api: API
    private let client: MQTTClient
    private let config: MQTTConfig
    private let logger: Logger
    private let running = Atomic<Bool>(false)
    private var thread: pthread_t?
    private struct Shared {
        var commands: [(topic: String, payload: [UInt8])] = []
        /// Set on connect: every retained topic is published again.
        var republish = true
        var lastEventSeq = 0
        var retained: [String: String] = [:]
    }
    /// Shared with the client's callbacks, which exist before `self` does. A command wakes the
    /// bridge's thread at once through the semaphore.
    private final class Inbox: Sendable {
        let shared = Mutex(Shared())
        let wake = Semaphore()
    }
    private let inbox = Inbox()

    /// Connects to the configured broker (in the background; failures are retried and shown in
    /// `status`). Throws when the settings cannot make a client (bad URL, unreadable password file).
    init(daemon: Daemon, config: MQTTConfig, device: String, logger: Logger) throws(Daemon.RequestError) {
        self.daemon = daemon
        self.config = config
        self.logger = logger
        api = API(daemon: daemon)
        base = "\(config.topicPrefix)/\(device)"
        guard let endpoint = config.endpoint else {
            throw Daemon.RequestError(status: 500, message: "mqtt.broker \"\(config.broker)\" is not mqtt://host[:port] or mqtts://host[:port]")
        }
        var c = MQTTConfiguration(broker: MQTTURL(host: endpoint.host, port: Int(endpoint.port), usesTLS: endpoint.useTLS),
                                  clientID: "baton-\(device)")
        c.username = config.username
        if let file = config.passwordFile {
            guard let password = Service.readSecret(file) else {
                throw Daemon.RequestError(status: 500, message: "mqtt.password-file \(file): cannot read: \(String(cString: strerror(errno)))")
            }
            c.password = password
        }
        c.keepAlive = config.keepalive
        c.tls = MQTTTLSFiles(caFile: config.caFile, certFile: config.certFile, keyFile: config.keyFile)
        c.availabilityTopic = "\(base)/availability"
        let inbox = self.inbox
        do {
            client = try MQTTClient(configuration: c, onMessage: { topic, payload in
                inbox.shared.withLock { $0.commands.append((topic, payload)) }
                inbox.wake.post()
            }, onStatusChange: { status in
                if status.connection == .connected { inbox.shared.withLock { $0.republish = true } }
            })
            for filter in ["announce", "music/+", "zones/+/volume/set", "call/+", "reload"] {
                try client.subscribe("\(base)/\(filter)")
            }
        } catch {
            throw Daemon.RequestError(status: 500, message: "mqtt: \(error)")
        }
        inbox.shared.withLock { $0.lastEventSeq = daemon.events.recent().last?.seq ?? 0 }
    }

    /// The connection as the client sees it. Any thread.
    var status: MQTTStatus { client.status }

    func start() {
        running.store(true, ordering: .releasing)
        client.start()
        thread = startThread { [self] in run() }
        logger.info("mqtt: connecting to \(config.broker) as \(base)")
    }

    /// Publishes `offline`, disconnects and ends the bridge thread. Control thread.
    func stop() {
        running.store(false, ordering: .releasing)
        if let thread { pthread_join(thread, nil) }
        thread = nil
        client.stop()
    }

    private func run() {
        while running.load(ordering: .acquiring) {
            let (commands, republish, after) = inbox.shared.withLock { s in
                let c = s.commands
                s.commands.removeAll()
                let r = s.republish
                s.republish = false
                return (c, r, s.lastEventSeq)
            }
            for command in commands { handle(command.topic, command.payload) }
            if republish {
                inbox.shared.withLock { $0.retained.removeAll() }
                if config.discovery { publishDiscovery() }
            }
            let events = daemon.events.recent(after: after)
            for event in events {
                if let data = try? JSONEncoder.baton.encode(event) { publish("\(base)/events", Array(data), retain: false) }
            }
            if let last = events.last { inbox.shared.withLock { $0.lastEventSeq = last.seq } }
            publishState()
            inbox.wake.wait(nanoseconds: 50_000_000)
        }
    }

    /// Carries out one command as the HTTP request it mirrors; a failure goes to `<base>/errors`.
    private func handle(_ topic: String, _ payload: [UInt8]) {
        guard topic.hasPrefix(base + "/") else { return }
        let rest = String(topic.dropFirst(base.count + 1))
        var body = payload
        let path: String
        if rest == "announce" {
            path = "/api/v1/announce"
        } else if rest.hasPrefix("music/") {
            path = "/api/v1/music/" + rest.dropFirst("music/".count)
        } else if rest.hasPrefix("call/") {
            path = "/api/v1/call/" + rest.dropFirst("call/".count)
        } else if rest == "reload" {
            path = "/api/v1/reload"
        } else if rest.hasPrefix("zones/") && rest.hasSuffix("/volume/set") {
            let zone = rest.dropFirst("zones/".count).dropLast("/volume/set".count)
            path = "/api/v1/zones/\(zone)/volume"
            // Home Assistant's number entity sends 0–100.
            let text = String(String(decoding: payload, as: UTF8.self).filter { !$0.isWhitespace })
            if let percent = Double(text) {
                guard percent.isFinite, (0...100).contains(percent) else {
                    publishError(topic, 400, "volume \(text) is not 0–100")
                    return
                }
                body = Array("{\"volume\": \(percent / 100)}".utf8)
            }
        } else {
            publishError(topic, 404, "unknown command topic (see docs/MQTT.md)")
            return
        }
        let response = api.handle(HTTPRequest(method: "POST", path: path, body: body))
        guard (200..<300).contains(response.status) else {
            var message = "failed"
            if case .bytes(let b) = response.body,
               let object = try? JSONDecoder().decode([String: String].self, from: Data(b)), let error = object["error"] {
                message = error
            }
            publishError(topic, response.status, message)
            logger.warning("mqtt: \(topic): \(response.status) \(message)")
            return
        }
    }

    private func publishError(_ topic: String, _ status: Int, _ message: String) {
        struct Failure: Encodable { var topic: String; var status: Int; var error: String }
        if let data = try? JSONEncoder.baton.encode(Failure(topic: topic, status: status, error: message)) {
            publish("\(base)/errors", Array(data), retain: false)
        }
    }

    /// The retained state topics, each published only when its text changed (or after a reconnect).
    private func publishState() {
        let status = daemon.status()
        struct ZoneState: Encodable {
            var state: String
            var audible: [String]
            var volume: Double
            var sources: [String]
        }
        var zones: [(String, ZoneState)] = []
        for zone in status.zones {
            let top = zone.audible.first.flatMap { id in status.sources.first { $0.id == id } }
            let state = zone.state != "available" ? "unavailable" : top?.class ?? "idle"
            zones.append((zone.name, ZoneState(state: state, audible: zone.audible, volume: zone.volume,
                                               sources: zone.sources.map(\.source))))
        }
        for (name, z) in zones {
            if let data = try? JSONEncoder.baton.encode(z) { retain("\(base)/zones/\(name)/state", String(decoding: data, as: UTF8.self)) }
            retain("\(base)/zones/\(name)/volume", "\(Int((z.volume * 100).rounded()))")
        }
        struct Summary: Encodable {
            var zones: [String: ZoneState]
            var sources: [StatusReport.Source]
            var intercom: StatusReport.Intercom?
        }
        let summary = Summary(zones: Dictionary(uniqueKeysWithValues: zones), sources: status.sources.map { s in
            var s = s
            s.positionSeconds = s.positionSeconds.map { ($0 * 10).rounded(.down) / 10 }  // not a new state every period
            return s
        }, intercom: status.intercom.map { var i = $0; i.received = 0; i.targetDelayMs = 0; return i })
        if let data = try? JSONEncoder.baton.encode(summary) { retain("\(base)/state", String(decoding: data, as: UTF8.self)) }
    }

    private func retain(_ topic: String, _ text: String) {
        let changed = inbox.shared.withLock { s -> Bool in
            guard s.retained[topic] != text else { return false }
            s.retained[topic] = text
            return true
        }
        if changed { publish(topic, Array(text.utf8), retain: true) }
    }

    private func publishDiscovery() {
        do {
            let discovery = try HomeAssistantDiscovery(device: String(base.split(separator: "/").last ?? ""), name: "Baton \(base.split(separator: "/").last ?? "")",
                                                       zones: daemon.zones.names, prefix: config.discoveryPrefix,
                                                       topicPrefix: config.topicPrefix)
            for m in discovery.messages() { publish(m.topic, m.payload, retain: true) }
        } catch {
            logger.warning("mqtt: Home Assistant discovery: \(error)")
        }
    }

    private func publish(_ topic: String, _ payload: [UInt8], retain: Bool) {
        do { try client.publish(topic, payload: payload, qos: .atLeastOnce, retain: retain) } catch {
            logger.debug("mqtt: publish \(topic): \(error)")
        }
    }
}
