import BatonConfig
import BatonDaemon
import ControlParts
import FoundationEssentials
import Glibc
import MQTT
import OSThread
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
///   `idle`, `music`, `announcement`, `call`, `silent` or `unavailable`; `level` the final mix's
///   peak and RMS in whole dBFS), `<base>/zones/<zone>/volume` (retained
///   0–100), `<base>/events` (every event as in `GET /api/v1/events`), `<base>/errors` (a command that
///   failed: its topic, status and message).
///
/// A command is carried out by the same `Commands` as the HTTP request it mirrors (same validation,
/// same errors). Commands run in arrival order on the bridge's own thread, which also publishes
/// events (it subscribes to the event log: woken by each one) and state whenever it changes (looked
/// at every 50 ms at most); on every (re)connect the retained topics and the discovery messages are
/// published again.
///
/// Thread: created, started and stopped by the control thread; the MQTT client's network thread only
/// queues commands.
final class MQTTBridge: @unchecked Sendable {
    // @unchecked: mutable state is in `shared` (a mutex) and `running` (an atomic); the rest is
    // immutable after init.
    let base: String
    private let daemon: Daemon
    private let commands: Commands
    private let client: MQTTClient
    private let config: MQTTConfig
    private let logger: Logger
    private let running = Atomic<Bool>(false)
    private var thread: OSThread?
    private var subscription: Int?
    private struct Shared {
        var commands: [(topic: String, payload: [UInt8])] = []
        /// Set on connect: every retained topic is published again.
        var republish = true
        var events: [Event] = []
        var retained: [String: String] = [:]
        /// The sound chosen in Home Assistant's select (nil: the default, see `selectedSound`).
        var selectedSound: String?
    }
    /// Shared with the client's callbacks, which exist before `self` does. A command wakes the
    /// bridge's thread at once through the semaphore.
    private final class Inbox: EventSubscriber {
        let shared = Mutex(Shared())
        let wake = Semaphore()
        func deliver(_ event: Event) -> Bool {
            shared.withLock { $0.events.append(event) }
            wake.post()
            return true
        }
    }
    private let inbox = Inbox()

    /// Connects to the configured broker (in the background; failures are retried and shown in
    /// `status`). Throws when the settings cannot make a client (bad URL, unreadable password file).
    init(daemon: Daemon, config: MQTTConfig, device: String, logger: Logger) throws(ControlError) {
        self.daemon = daemon
        self.config = config
        self.logger = logger
        commands = Commands(daemon: daemon)
        base = "\(config.topicPrefix)/\(device)"
        guard let endpoint = config.endpoint else {
            throw ControlError(
                .misconfigured, "mqtt.broker \"\(config.broker)\" is not mqtt://host[:port] or mqtts://host[:port]")
        }
        var c = MQTTConfiguration(
            broker: MQTTURL(host: endpoint.host, port: Int(endpoint.port), usesTLS: endpoint.useTLS),
            clientID: "baton-\(device)")
        c.username = config.username
        if let file = config.passwordFile {
            guard let password = FileIO.firstLine(file) else {
                throw ControlError(
                    .misconfigured, "mqtt.password-file \(file): cannot read: \(String(cString: strerror(errno)))")
            }
            c.password = password
        }
        c.keepAlive = config.keepalive
        c.tls = MQTTTLSFiles(caFile: config.caFile, certFile: config.certFile, keyFile: config.keyFile)
        c.availabilityTopic = "\(base)/availability"
        let inbox = self.inbox
        do {
            client = try MQTTClient(
                configuration: c,
                onMessage: { topic, payload in
                    inbox.shared.withLock { $0.commands.append((topic, payload)) }
                    inbox.wake.post()
                },
                onStatusChange: { status in
                    if status.connection == .connected {
                        inbox.shared.withLock { $0.republish = true }
                        inbox.wake.post()
                    }
                })
            for filter in ["announce", "music/+", "zones/+/volume/set", "call/+", "reload"] + Self.homeAssistantTopics {
                try client.subscribe("\(base)/\(filter)")
            }
        } catch {
            throw ControlError(.misconfigured, "mqtt: \(error)")
        }
    }

    /// The connection as the client sees it. Any thread.
    var status: MQTTStatus { client.status }

    func start() {
        running.store(true, ordering: .releasing)
        subscription = daemon.events.subscribe(inbox, after: nil)
        client.start()
        thread = OSThread.start(name: "mqtt-bridge") { [self] in run() }
        logger.info("mqtt: connecting to \(config.broker) as \(base)")
    }

    /// Publishes `offline`, disconnects and ends the bridge thread. Control thread.
    func stop() {
        running.store(false, ordering: .releasing)
        inbox.wake.post()
        thread?.join()
        thread = nil
        if let subscription { daemon.events.unsubscribe(subscription) }
        client.stop()
    }

    private func run() {
        while running.load(ordering: .acquiring) {
            let (commands, republish, events) = inbox.shared.withLock { s in
                defer {
                    s.commands.removeAll()
                    s.republish = false
                    s.events.removeAll()
                }
                return (s.commands, s.republish, s.events)
            }
            for command in commands { handle(command.topic, command.payload) }
            if republish {
                inbox.shared.withLock { $0.retained.removeAll() }
                if config.discovery { publishDiscovery() }
            }
            for event in events {
                if let data = try? JSONEncoder.baton.encode(event) {
                    publish("\(base)/events", Array(data), retain: false)
                }
            }
            // While something plays (a source, a call, sound in a zone) the state moves by itself —
            // position, levels — and is looked at every 50 ms. Otherwise only an event or a command
            // changes it, and both post the inbox: the bridge sleeps until one comes (at most 10 s,
            // for anything that changes without an event). It used to look every 50 ms all day:
            // 20 status reports a second, 0.0077 s/s of CPU with nothing playing.
            let moving = publishState()
            inbox.wake.wait(nanoseconds: moving ? 50_000_000 : 10_000_000_000)
        }
    }

    /// Carries out one command as the HTTP request it mirrors; a failure goes to `<base>/errors`.
    private func handle(_ topic: String, _ payload: [UInt8]) {
        guard topic.hasPrefix(base + "/") else { return }
        var name = String(topic.dropFirst(base.count + 1))
        var body = payload
        if name.hasPrefix("zones/") && name.hasSuffix("/volume/set") {
            name = String(name.dropLast("/set".count))
            // Home Assistant's number entity sends 0–100.
            let text = String(String(decoding: payload, as: UTF8.self).filter { !$0.isWhitespace })
            if let percent = Double(text) {
                guard percent.isFinite, (0...100).contains(percent) else {
                    publishError(topic, ControlError(.badRequest, "volume \(text) is not 0–100"))
                    return
                }
                body = Array("{\"volume\": \(percent / 100)}".utf8)
            }
        } else if Self.homeAssistantTopics.contains(name) {
            do throws(ControlError) {
                guard let command = try homeAssistantCommand(name, payload) else { return }
                (name, body) = command
            } catch {
                publishError(topic, error)
                return
            }
        } else if !Commands.names.contains(name) {
            publishError(topic, ControlError(.notFound, "unknown command topic (see docs/MQTT.md)"))
            return
        }
        do throws(ControlError) {
            if case .reload(let report) = try commands.run(name, body: body), !report.applied {
                throw ControlError(.unprocessable, report.errors.joined(separator: "\n"))
            }
        } catch {
            publishError(topic, error)
            logger.warning("mqtt: \(topic): \(error.kind.httpStatus) \(error.message)")
        }
    }

    private func publishError(_ topic: String, _ error: ControlError) {
        struct Failure: Encodable {
            var topic: String
            var status: Int
            var kind: String
            var error: String
        }
        let failure = Failure(
            topic: topic, status: error.kind.httpStatus, kind: error.kind.rawValue, error: error.message)
        if let data = try? JSONEncoder.baton.encode(failure) {
            publish("\(base)/errors", Array(data), retain: false)
        }
    }

    /// The retained state topics, each published only when its text changed (or after a reconnect).
    /// Publishes what changed; true when something plays (the state moves without events).
    @discardableResult
    private func publishState() -> Bool {
        let status = daemon.status()
        struct ZoneState: Encodable {
            var state: String
            var audible: [String]
            var volume: Double
            var sources: [String]
            /// The final mix's level, to the whole dB (not a new state every period).
            var level: StatusReport.Level
        }
        var zones: [(String, ZoneState)] = []
        for zone in status.zones {
            let top = zone.audible.first.flatMap { id in status.sources.first { $0.id == id } }
            let state =
                switch zone.state {
                case "available": top?.class ?? "idle"
                case "silent": "silent"
                default: "unavailable"
                }
            zones.append(
                (
                    zone.name,
                    ZoneState(
                        state: state, audible: zone.audible, volume: zone.volume,
                        sources: zone.sources.map(\.source),
                        level: .init(peakDb: zone.level.peakDb.rounded(), rmsDb: zone.level.rmsDb.rounded()))
                ))
        }
        for (name, z) in zones {
            if let data = try? JSONEncoder.baton.encode(z) {
                retain("\(base)/zones/\(name)/state", String(decoding: data, as: UTF8.self))
            }
            retain("\(base)/zones/\(name)/volume", "\(Int((z.volume * 100).rounded()))")
        }
        struct Summary: Encodable {
            var zones: [String: ZoneState]
            var sources: [StatusReport.Source]
            var intercom: StatusReport.Intercom?
        }
        let summary = Summary(
            zones: Dictionary(uniqueKeysWithValues: zones),
            sources: status.sources.map { s in
                var s = s
                // Not a new state every period.
                s.positionSeconds = s.positionSeconds.map { ($0 * 10).rounded(.down) / 10 }
                return s
            },
            intercom: status.intercom.map {
                var i = $0
                i.received = 0
                i.targetDelayMs = 0
                return i
            })
        if let data = try? JSONEncoder.baton.encode(summary) {
            retain("\(base)/state", String(decoding: data, as: UTF8.self))
        }
        publishHomeAssistantState(status)
        return !status.sources.isEmpty || status.intercom?.inCall == true
            || status.zones.contains { $0.level.peakDb > -200 }
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
            let discovery = try HomeAssistantDiscovery(
                device: String(base.split(separator: "/").last ?? ""),
                name: "Baton \(base.split(separator: "/").last ?? "")",
                zones: daemon.zoneNames, prefix: config.discoveryPrefix,
                topicPrefix: config.topicPrefix, sounds: daemon.sounds.names())
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

// MARK: - Home Assistant's entities (docs/HOME-ASSISTANT.md)

extension MQTTBridge {
    /// Topics of Home Assistant entities that are not an HTTP command of their own: the sound
    /// select (`sound/set`), its announce button (`sound/announce`), the notify entity (`notify`).
    static let homeAssistantTopics = ["sound/set", "sound/announce", "notify"]

    /// Turns an entity's message into the command it stands for (name and JSON body), or carries it
    /// out itself and returns nil (the select's choice). Errors are the commands' own.
    fileprivate func homeAssistantCommand(_ name: String, _ payload: [UInt8]) throws(ControlError) -> (
        String, [UInt8]
    )? {
        let text = String(decoding: payload, as: UTF8.self)
        switch name {
        case "sound/set":
            let sound = String(text.filter { !$0.isWhitespace })
            guard daemon.sounds.names().contains(sound) else {
                throw ControlError(
                    .unknownSound,
                    "unknown sound \"\(sound)\" (the sounds are \(daemon.sounds.names().joined(separator: ", ")))")
            }
            inbox.shared.withLock { $0.selectedSound = sound }
            return nil
        case "sound/announce":
            guard let sound = selectedSound() else {
                throw ControlError(.unknownSound, "no sound to announce: the sounds directory is empty")
            }
            return ("announce", Self.json(["sound": sound]))
        default:  // notify: Home Assistant sends the message as it is.
            return ("announce", Self.json(["text": text]))
        }
    }

    /// The sound the select shows: the one chosen, else `doorbell`, else the first.
    fileprivate func selectedSound() -> String? {
        let names = daemon.sounds.names()
        if let chosen = inbox.shared.withLock({ $0.selectedSound }), names.contains(chosen) { return chosen }
        return names.contains("doorbell") ? "doorbell" : names.first
    }

    private static func json(_ object: [String: String]) -> [UInt8] {
        (try? JSONEncoder.baton.encode(object)).map { Array($0) } ?? []
    }

    /// What the now-playing sensor of a zone shows: the source heard there (else a paused one),
    /// its title, artist, album, position (whole seconds) and state; `idle` when none.
    struct NowPlaying: Encodable, Equatable {
        var state: String
        var title: String?
        var artist: String?
        var album: String?
        var position: Int?
        var source: String?
    }

    /// The retained state of the Home Assistant entities: each zone's now-playing and the sound
    /// select's choice.
    fileprivate func publishHomeAssistantState(_ status: StatusReport) {
        for zone in status.zones {
            let id = zone.audible.first ?? zone.sources.first?.source
            let playing = id.flatMap { id in status.sources.first { $0.id == id } }
            var now = NowPlaying(state: zone.state != "available" ? "unavailable" : playing?.state ?? "idle")
            if let playing {
                now.title = playing.track?.title ?? playing.sound
                now.artist = playing.track?.artist
                now.album = playing.track?.album
                now.position = playing.positionSeconds.map { Int($0.rounded(.down)) }
                now.source = playing.id
            }
            if let data = try? JSONEncoder.baton.encode(now) {
                retain("\(base)/zones/\(zone.name)/now-playing", String(decoding: data, as: UTF8.self))
            }
        }
        if let sound = selectedSound() { retain("\(base)/sound", sound) }
    }
}
