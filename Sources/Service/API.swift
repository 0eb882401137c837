import BatonDaemon
import FoundationEssentials
import HTTPServer
import Synchronization

/// The control API (`/api/v1/...`) over the control plane. Documented in docs/API.md.
/// Thread: `handle` runs on libmicrohttpd's connection threads, any number at once.
public struct API: Sendable {
    let daemon: Daemon
    let commands: Commands
    /// The bearer token every request must carry, when the API is reachable beyond loopback.
    let token: String?
    /// The MQTT bridge and GPIO buttons, for their part of the status.
    let triggers: Triggers?
    /// The Host, Content-Type and Origin rules (cross-site safety), from `api:` at start.
    let crossSite: CrossSiteGuard

    public init(daemon: Daemon, token: String? = nil, triggers: Triggers? = nil) {
        self.daemon = daemon
        commands = Commands(daemon: daemon)
        self.token = token
        self.triggers = triggers
        crossSite = CrossSiteGuard(config: daemon.config.api)
    }

    /// Compares in time independent of where the strings differ.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }

    private static let readable: Set<String> = [
        "/api/v1/status", "/api/v1/events", "/api/v1/events/recent", "/api/v1/sounds", "/api/v1/config",
    ]

    /// Answers one request.
    public func handle(_ r: HTTPRequest) -> HTTPResponse {
        if let refusal = crossSite.refusal(r) { return refusal }
        // The status page itself holds no data: it asks for the token and sends it with its requests.
        if let token, !(r.method == "GET" && r.path == "/") {
            let header = r.headers["authorization"] ?? ""
            // A browser's EventSource cannot set headers: GET requests may carry `?access_token=`.
            let given =
                header.hasPrefix("Bearer ")
                ? String(header.dropFirst(7)) : r.method == "GET" ? r.query["access_token"] ?? "" : ""
            guard !given.isEmpty, Self.constantTimeEqual(given, token) else {
                var response = HTTPResponse.error(
                    401, "a bearer token is required (Authorization: Bearer <token from api.token-file>)")
                response.headers.append((name: "WWW-Authenticate", value: "Bearer"))
                return response
            }
        }
        let name = r.path.hasPrefix("/api/v1/") ? String(r.path.dropFirst("/api/v1/".count)) : ""
        let isCommand = Commands.names.contains(name) || (name.hasPrefix("zones/") && name.hasSuffix("/volume"))
        switch (r.method, r.path) {
        case ("GET", "/api/v1/status"):
            var status = daemon.status()
            if let triggers {
                status.mqtt = triggers.mqttStatus
                let gpio = triggers.gpioStatus
                status.gpio = gpio.isEmpty ? nil : gpio
            }
            return json(200, status)
        case ("GET", "/api/v1/events"):
            let last = r.headers["last-event-id"].flatMap { Int($0) } ?? r.query["after"].flatMap { Int($0) }
            return .eventStream(EventStream.open(daemon.events, after: last))
        case ("GET", "/api/v1/events/recent"):
            return json(200, daemon.events.recent(after: r.query["after"].flatMap { Int($0) } ?? 0))
        case ("GET", "/api/v1/sounds"):
            return json(200, ["sounds": daemon.sounds.names()])
        case ("GET", "/api/v1/config"):
            return json(200, daemon.config.redacted())
        case ("POST", _) where isCommand:
            do {
                switch try commands.run(name, body: r.body) {
                case .accepted(let answer): return json(202, answer)
                case .done(let answer): return json(200, answer)
                case .reload(let report): return json(report.applied ? 200 : 422, report)
                }
            } catch {
                return .error(error.kind.httpStatus, error.message)
            }
        case (_, _) where isCommand && !name.hasPrefix("zones/"), (_, _) where Self.readable.contains(r.path):
            return .error(405, "method \(r.method) not allowed on \(r.path)")
        case ("GET", "/"):
            return .html(200, StatusPage.html)
        default:
            return .error(404, "no such endpoint: \(r.method) \(r.path) (see docs/API.md)")
        }
    }

    private func json<T: Encodable>(_ status: Int, _ value: T) -> HTTPResponse {
        guard let data = try? JSONEncoder.baton.encode(value) else { return .error(500, "cannot encode the response") }
        return HTTPResponse(
            status: status, headers: [(name: "Content-Type", value: "application/json")], body: .bytes(Array(data)))
    }
}

/// One Server-Sent Events stream of the event log: an `EventSubscriber` writing into the HTTP
/// server's chunk queue, unsubscribed when the client goes away.
final class EventStream: EventSubscriber {
    private let queue: HTTPChunkQueue

    private init(queue: HTTPChunkQueue) { self.queue = queue }

    static func open(_ log: EventLog, after lastEventID: Int?) -> HTTPChunkQueue {
        let id = Mutex<Int?>(nil)
        let queue = HTTPChunkQueue(
            capacity: 4_096,
            onClose: { [weak log] in
                if let subscriber = id.withLock({ $0 }) { log?.unsubscribe(subscriber) }
            })
        queue.send(": baton events\n\n")
        id.withLock { $0 = log.subscribe(EventStream(queue: queue), after: lastEventID) }
        return queue
    }

    func deliver(_ event: Event) -> Bool {
        guard let data = try? JSONEncoder.baton.encode(event), let text = String(data: data, encoding: .utf8) else {
            return true
        }
        return queue.send(ServerSentEvent.encode(event: event.type, id: String(event.seq), data: text))
    }
}
