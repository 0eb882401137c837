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
///   `idle`, `music`, `announcement`, `call`, `silent` or `unavailable`), `<base>/zones/<zone>/level`
///   (the final mix's peak and RMS in whole dBFS, at most once a second), `<base>/zones/<zone>/volume` (retained
///   0–100), `<base>/events` (every event as in `GET /api/v1/events`), `<base>/errors` (a command that
///   failed: its topic, status and message).
///
/// A command is carried out by the same `Commands` as the HTTP request it mirrors (same validation,
/// same errors). The bridge's own thread checks each command as it comes and hands it to a thread of
/// its lane (`lane(of:body:)`): the commands of one kind run in arrival order, and one that waits on
/// the network holds only those after it of its kind. The bridge's thread also publishes events (it
/// subscribes to the event log: woken by each one) and state whenever it changes (looked at every
/// 50 ms at most); on every (re)connect the retained topics and the discovery messages are published
/// again.
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
    /// How many times the thread has looked at what came (each a status report): tests count them.
    let passes = Atomic<Int>(0)
    private let lanes = CommandLanes(threadName: "mqtt-command")
    /// The most messages that wait for the bridge's thread (`Shared.commands`), and the most bytes
    /// of them (an `api.max-body` of megabytes made 256 of them gigabytes).
    static let inboxLimit = 256
    static let inboxBytesLimit = 8 << 20
    private var thread: OSThread?
    private var subscription: Int?
    private struct Shared {
        /// Each command's topic, payload (cut beyond `api.max-body`), its whole length, whether
        /// the broker kept it and when it came (monotonic ns: a clear's echo is timed by its
        /// arrival, not by when a busy bridge got to it); at most `inboxLimit`, and how many were
        /// dropped beyond it since the bridge last took them.
        var commands: [(topic: String, payload: [UInt8], length: Int, retained: Bool, received: Int)] = []
        var waitingBytes = 0
        var dropped = 0
        /// Set on connect: every retained topic is published again.
        var republish = true
        var events: [Event] = []
        var retained: [String: String] = [:]
        /// The sounds the discovery last published (the select's options, the doorbell button).
        var discoveredSounds: [String]?
        /// The sounds directory could not be read at the last look (said once).
        var soundsUnreadable = false
        /// The zones whose max-volume is too low for a volume slider, as last said (each said once).
        var noVolumeSlider: Set<String> = []
        /// The connection as last reported, and whether its being down was said since it was last
        /// up (to say each change once).
        var connection: MQTTStatus.Connection?
        var saidDown = false
        /// The subscriptions the broker refused, as last said.
        var refused: [String] = []
        /// The zones whose topics were last published (a reload that removes one clears them).
        var publishedZones: [String] = []
        /// Command topics whose retained message batond cleared: how many clearing messages are
        /// expected back (one per clear: a retained command delivered twice is cleared twice), when
        /// the last clear was sent and until when one is expected (monotonic ns). Dropped once that
        /// passed: kept until an empty message came, one came minutes later was still counted off.
        var clearing: [String: (count: Int, sent: Int, until: Int)] = [:]
        /// The bridge is stopping: the connection's end is its own doing, not a lost broker.
        var stopping = false
        /// Each zone's level as last published on `zones/<zone>/level`, and when (monotonic ns).
        var levels: [String: (text: String, at: Int)] = [:]
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
    /// Each zone's now-playing as last sent, and when (monotonic ns): its position is sent again
    /// only when it moved otherwise than by playing on (a seek, a pause, another track). Sent each
    /// second, every second of music was a state and an attributes row in Home Assistant's
    /// recorder, per zone. Bridge thread.
    private let nowPlayingSent = Mutex<[String: (now: NowPlaying, at: Int)]>([:])

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
        // No more than the largest `api.max-body` is copied: the rest is refused by its length.
        c.maximumPayload = APIConfig.maxBodyRange.upperBound + 1
        let inbox = self.inbox
        do {
            client = try MQTTClient(
                configuration: c,
                onMessage: { [weak daemon] topic, payload, length, retained in
                    // Baton's own zone states come back on `zones/+/state` (not retained): nothing
                    // to do, and waking for each made the bridge build a status report at once.
                    if !retained && topic.hasSuffix("/state") && topic.contains("/zones/") { return }
                    // What waits for the bridge is bounded: a message over `api.max-body` keeps none
                    // of its bytes (its length refuses it), and at most `inboxLimit` messages and
                    // `inboxBytesLimit` bytes wait. A flood of large messages while the bridge was
                    // busy (a reload waits up to a second for its zones) was kept whole, 16 MiB
                    // each, without bound.
                    let limit = daemon?.config.api.maxBody ?? 0
                    let kept = length > limit ? 0 : min(payload.count, limit)
                    let received = monotonicNanoseconds()
                    let taken = inbox.shared.withLock { s -> Bool in
                        // One always waits (an api.max-body above the byte bound is a message too).
                        guard
                            s.commands.isEmpty
                                || (s.commands.count < MQTTBridge.inboxLimit
                                    && s.waitingBytes + kept <= MQTTBridge.inboxBytesLimit)
                        else {
                            s.dropped += 1
                            return false
                        }
                        s.waitingBytes += kept
                        s.commands.append(
                            (
                                topic, kept < payload.count ? Array(payload[..<kept]) : payload, length, retained,
                                received
                            ))
                        return true
                    }
                    if taken { inbox.wake.post() }
                },
                onStatusChange: { [logger, broker = config.broker, events = daemon.events] status in
                    // Said once each (the log, an event: the broker's own topics cannot carry that
                    // it is gone): connected; lost, or cannot connect — not every failed retry.
                    let (previous, saidDown, stopping) = inbox.shared.withLock { s in
                        defer {
                            s.connection = status.connection
                            if status.connection == .connected { s.saidDown = false }
                            if status.connection == .disconnected { s.saidDown = true }
                        }
                        return (s.connection, s.saidDown, s.stopping)
                    }
                    // batond's own disconnect at its stop was said as "lost …; reconnecting".
                    if stopping { return }
                    let why = status.lastError ?? "the connection closed"
                    if status.connection == .connected && previous != .connected {
                        logger.info("mqtt: connected to \(broker)")
                        events.publish(type: .mqttConnected, reason: broker)
                    } else if status.connection == .disconnected && previous == .connected {
                        logger.warning("mqtt: lost \(broker): \(why); reconnecting")
                        events.publish(type: .mqttError, reason: "lost \(broker): \(why)")
                    } else if status.connection == .disconnected && !saidDown {
                        logger.warning("mqtt: cannot connect to \(broker): \(why); retrying")
                        events.publish(type: .mqttError, reason: "cannot connect to \(broker): \(why)")
                    }
                    // A subscription the broker refused (its ACL): connected, but those commands do
                    // not come. Said once per connection, in the log and as an event.
                    let refused = inbox.shared.withLock { s in
                        defer { s.refused = status.refusedSubscriptions }
                        return status.refusedSubscriptions.filter { !s.refused.contains($0) }
                    }
                    for filter in refused {
                        let why =
                            "\(broker) refused the subscription to \(filter) (not authorised for it?): "
                            + "what is published there is not received"
                        logger.warning("mqtt: \(why)")
                        events.publish(type: .mqttError, reason: why)
                    }
                    if status.connection == .connected {
                        inbox.shared.withLock { $0.republish = true }
                        inbox.wake.post()
                    }
                })
            // `zones/+/state`: the retained states an earlier run left, to clear those of zones since removed.
            let filters = ["announce", "music/+", "zones/+/volume/set", "call/+", "reload", "zones/+/state"]
            for filter in filters + Self.homeAssistantTopics {
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
        // No MQTT command begins after this (nor into a daemon being stopped): those not begun are
        // dropped, those running are waited for — 2 s at most, within systemd's 5 s for the stop.
        let left = lanes.close(waitingAtMost: 2)
        if left > 0 { logger.warning("mqtt: stopping with \(left) command(s) still waiting on the network") }
        if let subscription { daemon.events.unsubscribe(subscription) }
        inbox.shared.withLock { $0.stopping = true }
        publishStopped()
        client.stop()
    }

    private func run() {
        while running.load(ordering: .acquiring) {
            passes.add(1, ordering: .relaxed)
            // What woke the thread is taken below, all of it: a post for each message and event
            // (hundreds, from a burst of commands or a reload) made as many passes, each a status
            // report under the control plane's lock. One that comes after this makes another.
            inbox.wake.drain()
            // A stop's post may have been the one drained: it is not waited out (10 s, past
            // systemd's 5 s for the stop).
            guard running.load(ordering: .acquiring) else { break }
            let (commands, dropped, republish, events) = inbox.shared.withLock { s in
                defer {
                    s.commands.removeAll()
                    s.waitingBytes = 0
                    s.dropped = 0
                    s.republish = false
                    s.events.removeAll()
                }
                return (s.commands, s.dropped, s.republish, s.events)
            }
            if dropped > 0 {
                let why =
                    "\(dropped) messages dropped: \(Self.inboxLimit) messages or \(Self.inboxBytesLimit >> 20) MiB already waited for batond (a flood on \(base)/…; the broker's message_size_limit and ACLs bound it)"
                logger.warning("mqtt: \(why)")
                daemon.events.publish(type: .mqttError, reason: why)
            }
            for command in commands {
                handle(
                    command.topic, command.payload, length: command.length, retained: command.retained,
                    received: command.received)
            }
            // On connect, and after a reload (zones and sounds may have changed: the entities, the
            // select's options), every retained topic is published again.
            if (republish || events.contains { $0.type == "reloaded" }) && client.status.connection == .connected {
                inbox.shared.withLock { $0.retained.removeAll() }
                clearRemovedZones()
                if config.discovery { publishDiscovery(sounds: soundNames()) }
            }
            // While disconnected, events are not queued (libmosquitto would keep every one, without
            // bound): `GET /api/v1/events/recent` has them, and the retained state is sent again on
            // connect.
            for event in events where client.status.connection == .connected {
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

    /// Carries out one command as the HTTP request it mirrors; a failure goes to `<base>/errors`
    /// and the log. `received`: when the client took it (monotonic ns).
    private func handle(_ topic: String, _ payload: [UInt8], length: Int, retained: Bool, received: Int) {
        guard topic.hasPrefix(base + "/") else { return }
        var name = String(topic.dropFirst(base.count + 1))
        var body = payload
        @Sendable func refuse(_ error: ControlError) {
            publishError(topic, error)
            logger.warning("mqtt: \(topic): \(error.kind.httpStatus) \(error.message)")
        }
        // A zone's state as the broker kept it: one of a zone no longer configured (removed while
        // batond was not running: a reload clears its own) is cleared, with its entities. Baton's
        // own publications come back too, not retained: nothing to do.
        if name.hasPrefix("zones/") && name.hasSuffix("/state") {
            let zone = String(name.dropFirst("zones/".count).dropLast("/state".count))
            if retained && !payload.isEmpty && !zone.contains("/") && !daemon.zoneNames.contains(zone) {
                clear(zone: zone)
            }
            return
        }
        // The empty message that clears a retained command (below) comes back to batond, as to
        // every subscriber, as an ordinary message: carried out, it would run the command (an empty
        // body is `reload`'s, `music/stop`'s).
        // An empty message the broker kept (a broker that hands on the retain flag of a clearing)
        // is nothing to carry out nor clear, and is the clearing's echo if one is due. Empty by its
        // length: one over `api.max-body` keeps none of its bytes, and was taken for the echo (a
        // retained one never refused nor cleared; one before a due echo swallowed, and the echo
        // after it carried out as a command with an empty body — a `reload`).
        // A clear the broker did not carry out (its ACL does not let batond publish on its command
        // topics) comes back as nothing: an empty command in the echo's window is taken for it.
        // That one is said on `<base>/errors` when it came later than an echo does (`echoWithin`):
        // it was dropped with a line in the log only, the stop or reload it asked for not done.
        // Timed by when it came, not when the bridge got to it: a pass that republished discovery
        // (the sounds directory on a slow SD card) or waited on the control plane took a real echo
        // handled over a second after the clear for a command, and said "send it again".
        if length == 0 {
            let clearedAt = inbox.shared.withLock { s -> Int? in
                s.clearing = s.clearing.filter { $0.value.until > received }
                guard let expected = s.clearing[topic] else { return nil }
                if expected.count <= 1 { s.clearing[topic] = nil } else { s.clearing[topic]?.count -= 1 }
                return expected.sent
            }
            if let clearedAt {
                if retained || received - clearedAt <= Self.echoWithin {
                    logger.info("mqtt: \(topic): the empty message that cleared its retained command, not carried out")
                } else {
                    let tenths = (received - clearedAt) / 100_000_000
                    refuse(
                        ControlError(
                            .conflict,
                            "not carried out: an empty message \(tenths / 10).\(tenths % 10) s after batond cleared a "
                                + "retained command here was taken as the clearing of that retained command; if it "
                                + "was a command, send it again"))
                }
                return
            }
            if retained { return }
        }
        // A retained command would run again at every start and reconnect (a doorbell hours late):
        // refused, and the broker asked to clear it (a person clearing it with an empty retained
        // message ran the command: that message reaches the subscribers as an ordinary one).
        guard !retained else {
            // A clear that could not be sent brings no echo: none is expected.
            let now = monotonicNanoseconds()
            if publish(topic, [], retain: true) {
                inbox.shared.withLock {
                    $0.clearing[topic] = ((($0.clearing[topic]?.count) ?? 0) + 1, now, now + Self.echoDue)
                }
            }
            return refuse(
                ControlError(
                    .badRequest,
                    "a retained message is not carried out: it would run again at every connect; batond asked the broker to clear it"
                ))
        }
        // The API's own limit, before anything is decoded: one huge message would hold every other
        // command and all state on this thread while it is read.
        let limit = daemon.config.api.maxBody
        guard length <= limit else {
            return refuse(ControlError(.badRequest, "a message of \(length) bytes; at most \(limit) (api.max-body)"))
        }
        // Not kept when it came, over the limit then (a reload has raised it since).
        guard payload.count == length else {
            return refuse(
                ControlError(
                    .badRequest,
                    "a message of \(length) bytes, over api.max-body when it came (raised since): send it again"))
        }
        guard let text = String(validating: payload, as: UTF8.self) else {
            return refuse(ControlError(.badRequest, "the message is not UTF-8 text"))
        }
        if name.hasPrefix("zones/") && name.hasSuffix("/volume/set") {
            name = String(name.dropLast("/set".count))
            // Home Assistant's number entity sends 0–100 (surrounding spaces allowed, none inside).
            let text = text.trimmingWhitespace()
            // A decimal number only (Double also reads hex, "inf" and "nan").
            if text.allSatisfy({ "0123456789.+-eE".contains($0) }), let percent = Double(text) {
                guard percent.isFinite, (0...100).contains(percent) else {
                    return refuse(ControlError(.badRequest, "volume \(text) is not 0–100"))
                }
                body = Array("{\"volume\": \(percent / 100)}".utf8)
            } else if !text.hasPrefix("{") {
                return refuse(
                    ControlError(.badRequest, "volume \"\(text)\" is not a number 0–100 (or {\"volume\": 0.4})"))
            }
        } else if Self.homeAssistantTopics.contains(name) {
            do throws(ControlError) {
                guard let command = try homeAssistantCommand(name, text) else { return }
                (name, body) = command
            } catch {
                return refuse(error)
            }
        } else if !Commands.names.contains(name) {
            return refuse(ControlError(.notFound, "unknown command topic (see docs/MQTT.md)"))
        }
        let run: @Sendable () -> Void = { [self, name, body] in
            do throws(ControlError) {
                try refuseIfStale(name, askedAt: received)
                if case .reload(let report) = try commands.run(name, body: body), !report.applied {
                    throw ControlError(.unprocessable, report.errors.joined(separator: "\n"))
                }
            } catch {
                refuse(error)
            }
        }
        // Off this thread: a command may wait on the network (`music/play` asking the server, an
        // announcement's URL its first byte) and would hold every other command and all state.
        // A lane full of commands waiting on the network (a flood behind a server that holds the
        // first) refuses the rest: queued without end, each would run as late as the server is slow.
        guard let lane = Self.lane(of: name, body: body) else { return run() }
        if lanes.run(lane, run) == .full {
            refuse(
                ControlError(
                    .unavailable,
                    "not carried out: \(lanes.waitingLimit) commands of its kind (\(lane)) already wait behind the one it runs"
                ))
        }
    }

    /// The lane a command runs in, in arrival order with the others of its kind: `music`, `zones`
    /// (volumes), `call`, `announce` — but an announcement of a URL in `announce-url` and one of
    /// text in `announce-text`, so that a doorbell does not wait for a URL's first byte nor for
    /// speech to be rendered (espeak-ng: a few hundred ms a sentence). Nil for `reload`, which runs
    /// on the bridge's thread: the commands after it see the configuration it made.
    static func lane(of command: String, body: [UInt8]) -> String? {
        struct Announcement: Decodable {
            var url: String?
            var text: String?
        }
        switch command.split(separator: "/").first.map(String.init) ?? "" {
        case "reload": return nil
        case "announce":
            let announcement = try? JSONDecoder().decode(Announcement.self, from: Data(body))
            return announcement?.url != nil ? "announce-url" : announcement?.text != nil ? "announce-text" : "announce"
        case let kind: return kind
        }
    }

    /// An announcement that waited longer than the `announcement` class's ttl since it came (in its
    /// lane, behind URLs a slow server holds or speech being rendered; or for the bridge's thread,
    /// busy with a reload, a discovery read from a slow SD card or the control plane's lock) is not
    /// carried out: it would be heard long after it was asked for — "the front door is open" after it
    /// closed. The arbiter's own ttl counts from the request, which is made only when the command
    /// runs. `askedAt`: when the client took the message (monotonic ns); it was when the bridge's
    /// thread handled it, and the time the message waited for that thread was not counted.
    private func refuseIfStale(_ name: String, askedAt: Int) throws(ControlError) {
        guard name == "announce", let ttl = daemon.config.policy.class(named: "announcement")?.ttl else { return }
        // Half a second at least: with `ttl: 0` ("now or never") a command that ran at once has
        // waited for the bridge's thread and its lane's thread to start, not behind anything.
        let waited = monotonicNanoseconds() - askedAt
        guard waited > max(ttl.wholeNanoseconds, 500_000_000) else { return }
        let tenths = waited / 100_000_000
        throw ControlError(
            .unavailable,
            "not carried out: it waited \(tenths / 10).\(tenths % 10) s since it came (behind the announcements before it, or for a busy batond), longer than the announcement class's ttl (\(Double(ttl.wholeNanoseconds / 1_000_000) / 1000) s)"
        )
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

    /// What `zones/<zone>/state` holds.
    private struct ZoneState: Encodable {
        var state: String
        var audible: [String]
        var volume: Double
        var sources: [String]
    }
    /// What `<base>/state` holds.
    private struct Summary: Encodable {
        var zones: [String: ZoneState]
        var sources: [StatusReport.Source]
        var intercom: IntercomState?
    }
    /// The intercom in `<base>/state`: what changes by the call, not by the packet. Its counters
    /// (received, lost, concealed, stretched, trimmed…) and last refusal are in `GET /api/v1/status`:
    /// in the retained state, each change of one during a call (the jitter buffer stretching and
    /// trimming, a lossy Wi-Fi) was a new retained message, up to 20 a second.
    private struct IntercomState: Encodable {
        var listen: String
        var inCall: Bool
        var error: String?
    }

    /// At a clean stop, before `offline`: every zone's state and now-playing, and the summary, say
    /// `unavailable`, nothing heard. They are retained, and a program that reads them after batond
    /// stopped (a Node-RED or openHAB flow: Home Assistant goes by the availability) read music
    /// playing. A crash cannot say so: they hold only while the availability says `online`.
    private func publishStopped() {
        var zones: [String: ZoneState] = [:]
        for zone in daemon.status().zones {
            zones[zone.name] = ZoneState(state: "unavailable", audible: [], volume: zone.volume, sources: [])
        }
        for (name, zone) in zones {
            if let data = try? JSONEncoder.baton.encode(zone) {
                retain("\(base)/zones/\(name)/state", String(decoding: data, as: UTF8.self))
            }
            if let data = try? JSONEncoder.baton.encode(NowPlaying(state: "unavailable")) {
                retain("\(base)/zones/\(name)/now-playing", String(decoding: data, as: UTF8.self))
            }
        }
        if let data = try? JSONEncoder.baton.encode(Summary(zones: zones, sources: [], intercom: nil)) {
            retain("\(base)/state", String(decoding: data, as: UTF8.self))
        }
    }

    /// The retained state topics, each published only when its text changed (or after a reconnect).
    /// Publishes what changed; true when something plays (the state moves without events).
    @discardableResult
    private func publishState() -> Bool {
        // (`ZoneState`: without the level. Home Assistant takes that topic's fields as the state
        // sensor's attributes, and the level, a new value nearly every look while music plays,
        // made 20 new states a second per zone, each a row in its recorder; it has its own topic.)
        let status = daemon.status()
        var zones: [(String, ZoneState)] = []
        var levels: [(zone: String, text: String)] = []
        for zone in status.zones {
            let top = Self.strongestHeard(in: zone, status)
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
                        sources: zone.sources.map(\.source))
                ))
            let level = StatusReport.Level(peakDb: zone.level.peakDb.rounded(), rmsDb: zone.level.rmsDb.rounded())
            if let data = try? JSONEncoder.baton.encode(level) {
                levels.append((zone.name, String(decoding: data, as: UTF8.self)))
            }
        }
        for (name, z) in zones {
            if let data = try? JSONEncoder.baton.encode(z) {
                retain("\(base)/zones/\(name)/state", String(decoding: data, as: UTF8.self))
            }
            retain("\(base)/zones/\(name)/volume", Self.volumeText(z.volume, maxVolume: daemon.maxVolume(of: name)))
        }
        let summary = Summary(
            zones: Dictionary(uniqueKeysWithValues: zones),
            sources: status.sources.map { s in
                var s = s
                // Not a new state every period, nor ten a second while music plays: whole seconds,
                // as the now-playing topic has it.
                s.positionSeconds = s.positionSeconds.map { $0.rounded(.down) }
                return s
            },
            intercom: status.intercom.map { IntercomState(listen: $0.listen, inCall: $0.inCall, error: $0.error) })
        if let data = try? JSONEncoder.baton.encode(summary) {
            retain("\(base)/state", String(decoding: data, as: UTF8.self))
        }
        // Sounds added to or taken from the directory (read at each look, as the select's choice
        // is): the discovery follows. Its options were those of the last connect or reload: a
        // chosen sound HA did not list was refused there, and the button played what it did not show.
        // A directory that cannot be read now is not an empty one: its select and doorbell button
        // emptied, Home Assistant deleted them (and what the user had set on them), to make them
        // again at the next look.
        let read = soundNames()
        let sounds = read ?? inbox.shared.withLock { $0.discoveredSounds } ?? []
        if let read,
            config.discovery && client.status.connection == .connected
                && inbox.shared.withLock({ $0.discoveredSounds }) != read
        {
            publishDiscovery(sounds: read)
        }
        publishHomeAssistantState(status, sounds: sounds)
        // A source paused, interrupted or queued does not move: what changes it (a command, the
        // arbiter) is an event. It was taken for moving, and music paused overnight had the bridge
        // build 20 status reports a second until morning.
        let still: Set<String> = ["paused", "interrupted", "queued"]
        let moving =
            status.sources.contains { !still.contains($0.state) } || status.intercom?.inCall == true
            || status.zones.contains { $0.level.peakDb > -200 }
        // The last level before the bridge stops looking every 50 ms goes out at once.
        for level in levels { publishLevel(level.zone, level.text, now: !moving) }
        return moving
    }

    /// Publishes a zone's level on `zones/<zone>/level` (not retained) when it changed, at most once
    /// a second — or `now`, when the bridge stops looking every 50 ms.
    private func publishLevel(_ zone: String, _ text: String, now force: Bool) {
        guard client.status.connection == .connected else { return }
        let now = monotonicNanoseconds()
        let due = inbox.shared.withLock { s -> Bool in
            let last = s.levels[zone]
            guard last?.text != text, force || now - (last?.at ?? Int.min / 2) >= 1_000_000_000 else { return false }
            s.levels[zone] = (text, now)
            return true
        }
        if due { publish("\(base)/zones/\(zone)/level", Array(text.utf8), retain: false) }
    }

    /// Publishes `text` retained when it changed. Not while disconnected: on connect every retained
    /// topic is sent again as it is then, rather than every change made meanwhile (libmosquitto
    /// would queue each one, without bound).
    private func retain(_ topic: String, _ text: String) {
        guard client.status.connection == .connected else { return }
        let changed = inbox.shared.withLock { s -> Bool in
            guard s.retained[topic] != text else { return false }
            s.retained[topic] = text
            return true
        }
        if changed { publish(topic, Array(text.utf8), retain: true) }
    }

    /// The sounds directory's names, or nil when it cannot be read now (said once a time).
    private func soundNames() -> [String]? {
        do {
            let names = try daemon.sounds.readListing().names
            if soundsUnreadable(false) { logger.info("mqtt: the sounds directory can be read again") }
            return names
        } catch {
            if soundsUnreadable(true) {
                logger.warning("mqtt: \(error): Home Assistant's sound entities stay as they were")
            }
            return nil
        }
    }

    /// Notes whether the sounds directory can be read now; true when that changed (to say once).
    private func soundsUnreadable(_ unreadable: Bool) -> Bool {
        inbox.shared.withLock { s in
            defer { s.soundsUnreadable = unreadable }
            return s.soundsUnreadable != unreadable
        }
    }

    private func discovery(zones: [String], sounds: [String]) throws -> HomeAssistantDiscovery {
        try HomeAssistantDiscovery(
            device: String(base.split(separator: "/").last ?? ""),
            name: "Baton \(base.split(separator: "/").last ?? "")",
            zones: zones, prefix: config.discoveryPrefix,
            topicPrefix: config.topicPrefix, sounds: sounds,
            maxVolumes: zones.reduce(into: [:]) { m, zone in m[zone] = daemon.maxVolume(of: zone).map { $0 * 100 } })
    }

    /// A zone's volume (0…1) as its `zones/<zone>/volume` topic says it: in percent, on its Home
    /// Assistant slider's steps (whole percents; tenths for a max-volume below 1 %) and not above
    /// its top (the max-volume rounded down): Home Assistant refuses a state out of its number's
    /// range and keeps showing the old one (0.555 of 0.555 was 56 on a slider to 55; 0.4 % was 0).
    static func volumeText(_ volume: Double, maxVolume: Double?) -> String {
        let slider = maxVolume.flatMap { HomeAssistantDiscovery.volumeSlider(maxPercent: $0 * 100) }
        guard let slider, slider.step < 1 else {
            let percent = Int((volume * 100).rounded())
            return "\(slider.map { min(percent, Int($0.max)) } ?? percent)"
        }
        let tenths = min(Int((volume * 1000).rounded()), Int((slider.max * 10).rounded()))
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// Publishes every entity; `sounds` nil (the directory cannot be read now): the sound entities
    /// as last published, none removed.
    private func publishDiscovery(sounds read: [String]?) {
        do {
            let sounds = read ?? inbox.shared.withLock { $0.discoveredSounds } ?? []
            let discovery = try discovery(zones: daemon.zoneNames, sounds: sounds)
            if read != nil { inbox.shared.withLock { $0.discoveredSounds = sounds } }
            for m in discovery.messages() { publish(m.topic, m.payload, retain: true) }
            sayNoVolumeSlider(discovery)
            // No sounds (a reload emptied the directory): the select published before goes, or its
            // options stay in Home Assistant and each fails. So does the doorbell button.
            guard read != nil else { return }
            if discovery.sounds.isEmpty { publish(discovery.soundSelect().topic, [], retain: true) }
            if !discovery.sounds.contains("doorbell") { publish(discovery.doorbellButton().topic, [], retain: true) }
        } catch {
            logger.warning("mqtt: Home Assistant discovery: \(error)")
        }
    }

    /// Logs each zone that gets no volume entity (its max-volume below 0.1 %) once, until that changes.
    private func sayNoVolumeSlider(_ discovery: HomeAssistantDiscovery) {
        let none = Set(
            discovery.zones.filter { zone in
                HomeAssistantDiscovery.volumeSlider(maxPercent: discovery.maxVolumes[zone] ?? 100) == nil
            })
        let new = inbox.shared.withLock { s in
            defer { s.noVolumeSlider = none }
            return none.subtracting(s.noVolumeSlider)
        }
        for zone in new.sorted() {
            let max = daemon.maxVolume(of: zone).map(ConfigSyntax.formatVolume) ?? "0"
            logger.warning(
                "mqtt: zone \(zone): max-volume \(max) is below 0.1%, the smallest step of Home Assistant's volume slider: it gets no volume entity (one published before is removed)"
            )
        }
    }

    /// The retained topics of zones a reload removed, published empty (which removes them from
    /// the broker, and the entities from Home Assistant). Those of zones removed while batond was
    /// not running are cleared as their retained state comes back (`handle`).
    private func clearRemovedZones() {
        let now = daemon.zoneNames
        let gone = inbox.shared.withLock { s in
            defer { s.publishedZones = now }
            return s.publishedZones.filter { !now.contains($0) }
        }
        for zone in gone { clear(zone: zone) }
    }

    /// Publishes `zone`'s Home Assistant entities and then its retained topics empty, which removes
    /// them: the entities first, or Home Assistant renders their templates on empty payloads (an
    /// error in its log for each).
    private func clear(zone: String) {
        if config.discovery, let entities = try? discovery(zones: [], sounds: []).zoneMessages(zone) {
            for m in entities { publish(m.topic, [], retain: true) }
        }
        for suffix in ["state", "volume", "now-playing"] {
            publish("\(base)/zones/\(zone)/\(suffix)", [], retain: true)
        }
        logger.info("mqtt: zone \(zone) is gone: its topics cleared")
    }

    /// Whether the message was handed to the client (sent, or queued for the next connect).
    @discardableResult
    private func publish(_ topic: String, _ payload: [UInt8], retain: Bool) -> Bool {
        do {
            try client.publish(topic, payload: payload, qos: .atLeastOnce, retain: retain)
            return true
        } catch {
            logger.debug("mqtt: publish \(topic): \(error)")
            return false
        }
    }

    /// How long after a clear of a retained command its echo is taken for one (ns): a broker slow
    /// to hand it on.
    static let echoDue = 30_000_000_000
    /// How soon a clear's echo comes when the broker carried the clear out: the broker hands it on
    /// as it takes it (one round trip). An empty message later than this that is taken for the
    /// echo is said on `<base>/errors`: more likely a command after a clear the broker refused.
    static let echoWithin = 1_000_000_000
}

// MARK: - Home Assistant's entities (docs/HOME-ASSISTANT.md)

extension MQTTBridge {
    /// Topics of Home Assistant entities that are not an HTTP command of their own: the sound
    /// select (`sound/set`), its announce button (`sound/announce`), the notify entity (`notify`).
    static let homeAssistantTopics = ["sound/set", "sound/announce", "notify"]

    /// Turns an entity's message into the command it stands for (name and JSON body), or carries it
    /// out itself and returns nil (the select's choice). Errors are the commands' own.
    fileprivate func homeAssistantCommand(_ name: String, _ text: String) throws(ControlError) -> (
        String, [UInt8]
    )? {
        switch name {
        case "sound/set":
            let sound = text.trimmingWhitespace()
            guard daemon.sounds.names().contains(sound) else {
                throw ControlError(
                    .unknownSound,
                    "unknown sound \"\(sound)\" (the sounds are \(daemon.sounds.names().joined(separator: ", ")))")
            }
            // Kept across restarts (state-dir): it went back to `doorbell` at each.
            daemon.chooseAnnounceSound(sound)
            return nil
        case "sound/announce":
            guard let sound = selectedSound(among: daemon.sounds.names()) else {
                throw ControlError(.unknownSound, "no sound to announce: the sounds directory is empty")
            }
            return ("announce", Self.json(["sound": sound]))
        default:  // notify: Home Assistant sends the message as it is.
            return ("announce", Self.json(["text": text]))
        }
    }

    /// The sound the select shows among `names` (the sounds directory's): the one chosen, else
    /// `doorbell`, else the first.
    fileprivate func selectedSound(among names: [String]) -> String? {
        if let chosen = daemon.announceSound, names.contains(chosen) { return chosen }
        return names.contains("doorbell") ? "doorbell" : names.first
    }

    private static func json(_ object: [String: String]) -> [UInt8] {
        (try? JSONEncoder.baton.encode(object)).map { Array($0) } ?? []
    }

    /// What the now-playing sensor of a zone shows: the source heard there (else a paused one),
    /// its title, artist, album, state, and its position (whole seconds) at `positionAt` (UTC, as
    /// Home Assistant's media player gives `media_position_updated_at`); `idle` when none.
    /// The state twice: as `state`, and as `playback` for Home Assistant, which drops an attribute
    /// named `state` from a sensor's JSON attributes (`MQTT_ATTRIBUTES_BLOCKED`): paused music read
    /// there as its title and nothing else, as if it played.
    struct NowPlaying: Encodable, Equatable {
        var state: String {
            didSet { playback = state }
        }
        private(set) var playback: String
        var title: String?
        var artist: String?
        var album: String?
        var position: Int?
        var positionAt: String?
        var source: String?

        init(state: String) {
            self.state = state
            playback = state
        }
    }

    /// The strongest source heard in `zone` (`audible` is strongest first; a released source's
    /// last frames come before all, and are not a source any more).
    static func strongestHeard(in zone: StatusReport.Zone, _ status: StatusReport) -> StatusReport.Source? {
        zone.audible.lazy.compactMap { id in status.sources.first { $0.id == id } }.first
    }

    /// The retained state of the Home Assistant entities: each zone's now-playing and the sound
    /// select's choice among `sounds` (the directory's, read once a look).
    fileprivate func publishHomeAssistantState(_ status: StatusReport, sounds: [String]) {
        for zone in status.zones {
            let playing =
                Self.strongestHeard(in: zone, status)
                ?? zone.sources.first.flatMap { slot in status.sources.first { $0.id == slot.source } }
            var now = NowPlaying(state: zone.state == "unavailable" ? "unavailable" : playing?.state ?? "idle")
            if let playing {
                now.title = playing.track?.title ?? playing.sound
                now.artist = playing.track?.artist
                now.album = playing.track?.album
                now.source = playing.id
                if let seconds = playing.positionSeconds {
                    now.position = Int(seconds.rounded(.down))
                    // When it was at that whole second (it is a fraction of one further now).
                    var at = timespec()
                    clock_gettime(CLOCK_REALTIME, &at)
                    let back = Int((seconds - seconds.rounded(.down)) * 1e9)
                    let ns = at.tv_sec * 1_000_000_000 + at.tv_nsec - back
                    now.positionAt = EventLog.utcTime(
                        at: timespec(tv_sec: ns / 1_000_000_000, tv_nsec: ns % 1_000_000_000))
                    let clock = monotonicNanoseconds()
                    // Where the one sent says it is by now; within 2 s of it, what was sent stands.
                    if let sent = nowPlayingSent.withLock({ $0[zone.name] }), let position = sent.now.position,
                        sent.now.state == now.state, sent.now.source == now.source, sent.now.title == now.title
                    {
                        let moved = now.state == "playing" || now.state == "ducked" ? Double(clock - sent.at) / 1e9 : 0
                        if abs(Double(position) + moved - seconds) < 2 {
                            now.position = position
                            now.positionAt = sent.now.positionAt
                        }
                    }
                    if now.positionAt != nowPlayingSent.withLock({ $0[zone.name] })?.now.positionAt {
                        nowPlayingSent.withLock { $0[zone.name] = (now, clock) }
                    }
                }
            }
            if now.position == nil { nowPlayingSent.withLock { $0[zone.name] = nil } }
            if let data = try? JSONEncoder.baton.encode(now) {
                retain("\(base)/zones/\(zone.name)/now-playing", String(decoding: data, as: UTF8.self))
            }
        }
        if let sound = selectedSound(among: sounds) { retain("\(base)/sound", sound) }
    }
}
