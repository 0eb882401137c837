import AudioCore
import Engine
import FoundationEssentials
import HTTPServer
import Synchronization

/// Keeps the recent events (for the status timeline) and fans every new one out to the Server-Sent
/// Events subscribers. Thread: any; `publish` never blocks (a slow subscriber is dropped).
public final class EventLog: Sendable {
    private struct State {
        var recent: [Event] = []
        var next = 1
        var subscribers: [Int: HTTPChunkQueue] = [:]
        var nextSubscriber = 0
    }

    /// How many events `recent` keeps.
    public let capacity: Int
    private let state = Mutex(State())
    private let startNanoseconds = monotonicNanoseconds()

    public init(capacity: Int = 2_000) { self.capacity = capacity }

    /// Milliseconds since this log was created (monotonic).
    public var uptimeMs: Int { (monotonicNanoseconds() - startNanoseconds) / 1_000_000 }

    /// Records an event, stamping its sequence number and times, and sends it to every subscriber.
    @discardableResult
    public func publish(type: String, source: String? = nil, zones: [String]? = nil, reason: String? = nil,
                        shouldResume: Bool? = nil, level: Double? = nil, into: String? = nil,
                        zoneFrames: [String: Int]? = nil) -> Event {
        let uptime = uptimeMs
        let now = Date.now.formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: true).timeSeparator(.colon))
        let (event, queues): (Event, [HTTPChunkQueue]) = state.withLock { s in
            let e = Event(seq: s.next, time: now + "Z", uptimeMs: uptime, type: type, source: source, zones: zones,
                          reason: reason, shouldResume: shouldResume, level: level, into: into,
                          zoneFrames: zoneFrames)
            s.next += 1
            s.recent.append(e)
            if s.recent.count > capacity { s.recent.removeFirst(s.recent.count - capacity) }
            return (e, Array(s.subscribers.values))
        }
        if !queues.isEmpty, let chunk = Self.encode(event) {
            for q in queues where !q.send(chunk) { unsubscribe(q) }
        }
        return event
    }

    /// The events still kept, oldest first; only those after `seq` when given.
    public func recent(after seq: Int = 0) -> [Event] {
        state.withLock { s in s.recent.filter { $0.seq > seq } }
    }

    /// A new SSE stream: first the kept events after `lastEventID` (so a reconnecting client misses
    /// nothing still kept), then every new one.
    public func subscribe(lastEventID: Int?) -> HTTPChunkQueue {
        let id = state.withLock { s in s.nextSubscriber += 1; return s.nextSubscriber }
        let queue = HTTPChunkQueue(capacity: 4_096, onClose: { [weak self] in
            self?.state.withLock { s in _ = s.subscribers.removeValue(forKey: id) }
        })
        state.withLock { s in
            if let lastEventID {
                for e in s.recent where e.seq > lastEventID { if let c = Self.encode(e) { queue.send(c) } }
            }
            s.subscribers[id] = queue
        }
        queue.send(": baton events\n\n")
        return queue
    }

    /// How many SSE clients are connected.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    private func unsubscribe(_ queue: HTTPChunkQueue) {
        state.withLock { s in
            if let key = s.subscribers.first(where: { $0.value === queue })?.key { s.subscribers.removeValue(forKey: key) }
        }
    }

    private static func encode(_ e: Event) -> [UInt8]? {
        guard let data = try? JSONEncoder.baton.encode(e), let text = String(data: data, encoding: .utf8) else { return nil }
        return ServerSentEvent.encode(event: e.type, id: String(e.seq), data: text)
    }
}

extension JSONEncoder {
    /// Sorted keys, so API output is stable and diffable.
    static var baton: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }
}
