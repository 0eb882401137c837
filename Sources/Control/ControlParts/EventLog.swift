import AudioCore
import FoundationEssentials
import OSThread
import Synchronization

/// Receives every new event (an SSE stream, the MQTT bridge). `deliver` is called on the thread that
/// published, in order, and must not block; returning false drops the subscriber (a slow client).
public protocol EventSubscriber: AnyObject, Sendable {
    func deliver(_ event: Event) -> Bool
}

/// Keeps the recent events (for the status timeline) and fans every new one out to the
/// subscribers. Thread: any; `publish` never blocks.
public final class EventLog: Sendable {
    private struct State {
        package var recent: [Event] = []
        package var next = 1
        package var subscribers: [Int: any EventSubscriber] = [:]
        package var nextSubscriber = 0
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
    public func publish(
        type: String, source: String? = nil, zones: [String]? = nil, reason: String? = nil,
        shouldResume: Bool? = nil, level: Double? = nil, into: String? = nil,
        zoneFrames: [String: Int]? = nil
    ) -> Event {
        let uptime = uptimeMs
        let now = Date.now.formatted(
            .iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: true).timeSeparator(
                .colon))
        let (event, subscribers): (Event, [(Int, any EventSubscriber)]) = state.withLock { s in
            let e = Event(
                seq: s.next, time: now + "Z", uptimeMs: uptime, type: type, source: source, zones: zones,
                reason: reason, shouldResume: shouldResume, level: level, into: into,
                zoneFrames: zoneFrames)
            s.next += 1
            s.recent.append(e)
            if s.recent.count > capacity { s.recent.removeFirst(s.recent.count - capacity) }
            return (e, s.subscribers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        }
        for (id, subscriber) in subscribers where !subscriber.deliver(event) { unsubscribe(id) }
        return event
    }

    /// The events still kept, oldest first; only those after `seq` when given.
    public func recent(after seq: Int = 0) -> [Event] {
        state.withLock { s in s.recent.filter { $0.seq > seq } }
    }

    /// Adds a subscriber: first it gets the kept events after `lastEventID` (so a reconnecting client
    /// misses nothing still kept), then every new one. Returns its id for `unsubscribe`.
    @discardableResult
    public func subscribe(_ subscriber: any EventSubscriber, after lastEventID: Int?) -> Int {
        state.withLock { s in
            s.nextSubscriber += 1
            if let lastEventID {
                for e in s.recent where e.seq > lastEventID { _ = subscriber.deliver(e) }
            }
            s.subscribers[s.nextSubscriber] = subscriber
            return s.nextSubscriber
        }
    }

    public func unsubscribe(_ id: Int) {
        state.withLock { s in _ = s.subscribers.removeValue(forKey: id) }
    }

    /// How many subscribers are connected.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }
}

extension JSONEncoder {
    /// Sorted keys, so API output is stable and diffable.
    public static var baton: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }
}
