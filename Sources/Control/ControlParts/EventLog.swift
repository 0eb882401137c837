import AudioCore
import FoundationEssentials
import Glibc
import OSThread
import Synchronization

/// Receives every new event (an SSE stream, the MQTT bridge). `deliver` is called on the thread that
/// published, in sequence order (never two at once), and must not block nor publish; returning false
/// drops the subscriber (a slow client).
public protocol EventSubscriber: AnyObject, Sendable {
    func deliver(_ event: Event) -> Bool
    /// Events after `after` up to `next` (excluded) are no longer kept: the subscriber resumed
    /// from an id older than the log holds, and what it gets next begins at `next`.
    func missed(after: Int, next: Int)
}

extension EventSubscriber {
    public func missed(after: Int, next: Int) {}
}

/// Keeps the recent events (for the status timeline) and fans every new one out to the
/// subscribers, in sequence order: two threads publishing at once cannot hand a subscriber seq 101
/// before seq 100 (a client that then resumes with `Last-Event-ID: 101` would never get 100).
/// Thread: any; `publish` waits only for another publish's delivery, which never blocks.
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
    /// Held from numbering an event until it is delivered, and while a new subscriber gets the
    /// replay and joins: deliveries go out one at a time, in sequence order. Never held by a
    /// subscriber's `deliver` (which may `unsubscribe`: that takes `state` only).
    private let delivery = Mutex(())
    private let startNanoseconds = monotonicNanoseconds()
    /// Names this run of the daemon (16 random hex digits): sequence numbers start again at 1 with
    /// each run, so a client that kept an event id tells by this whether the id is of this run.
    public let run: String

    public init(capacity: Int = 2_000) {
        self.capacity = capacity
        let id = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        run = String(repeating: "0", count: 16 - id.count) + id
    }

    /// Milliseconds since this log was created (monotonic).
    public var uptimeMs: Int { (monotonicNanoseconds() - startNanoseconds) / 1_000_000 }

    /// Records an event, stamping its sequence number and times, and sends it to every subscriber.
    @discardableResult
    public func publish(
        type: EventType, source: String? = nil, zones: [String]? = nil, reason: String? = nil,
        shouldResume: Bool? = nil, level: Double? = nil, into: String? = nil,
        zoneFrames: [String: Int]? = nil
    ) -> Event {
        let uptime = uptimeMs
        let now = Self.utcTime()
        return delivery.withLock { _ in
            let (event, subscribers): (Event, [(Int, any EventSubscriber)]) = state.withLock { s in
                let e = Event(
                    seq: s.next, time: now, uptimeMs: uptime, type: type.rawValue, source: source, zones: zones,
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
    }

    /// The wall-clock time in UTC, ISO 8601 to the millisecond (`2026-11-29T20:09:18.269Z`, the
    /// events' `time`); `at` is a `CLOCK_REALTIME` reading, now when nil. Written out from
    /// `gmtime_r`: FoundationEssentials' `ISO8601FormatStyle` ran its Gregorian calendar, time zone
    /// and locale code for it (83 of its functions batond no longer runs, by the symbol order made
    /// before and after), whose pages were resident for this alone.
    public static func utcTime(at time: timespec? = nil) -> String {
        var ts = timespec()
        if let time { ts = time } else { clock_gettime(CLOCK_REALTIME, &ts) }
        var seconds = ts.tv_sec
        var t = tm()
        gmtime_r(&seconds, &t)
        func digits(_ value: Int, _ width: Int) -> String {
            let s = String(value)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        let date = "\(digits(Int(t.tm_year) + 1900, 4))-\(digits(Int(t.tm_mon) + 1, 2))-\(digits(Int(t.tm_mday), 2))"
        let clock = "\(digits(Int(t.tm_hour), 2)):\(digits(Int(t.tm_min), 2)):\(digits(Int(t.tm_sec), 2))"
        return "\(date)T\(clock).\(digits(ts.tv_nsec / 1_000_000, 3))Z"
    }

    /// The events still kept, oldest first; only those after `seq` when given — all of them when
    /// this run has not reached `seq` (another run's id, as `subscribe` takes it).
    public func recent(after seq: Int = 0) -> [Event] { kept(after: seq).events }

    /// The events still kept after `seq` as `recent` reads it, and the seq that read means in this
    /// run (0 for another run's).
    private func kept(after seq: Int) -> (events: [Event], after: Int) {
        state.withLock { s in
            let after = seq >= s.next ? 0 : seq
            return (s.recent.filter { $0.seq > after }, after)
        }
    }

    /// Adds a subscriber: first it gets the kept events after `lastEventID` (so a reconnecting client
    /// misses nothing still kept), then every new one. Returns its id for `unsubscribe`. An id this
    /// run has not reached yet is another run's (a browser reconnecting to a restarted daemon sends
    /// the last id it saw): that client gets every kept event of this run, not only those numbered
    /// above the old id.
    ///
    /// The replay (up to `capacity` events, each encoded by an SSE subscriber) is delivered first
    /// without holding up publishers — the monitor publishes under the control plane's lock, and a
    /// phone's browser reconnecting made it wait for all of it —; then, with them held, the events
    /// published meanwhile, and the subscriber joins.
    @discardableResult
    public func subscribe(_ subscriber: any EventSubscriber, after lastEventID: Int?) -> Int {
        var last = lastEventID
        if let lastEventID {
            // Another run's id read once: this run may reach it meanwhile, and then means "after".
            let (missed, after) = kept(after: lastEventID)
            last = after
            Self.sayGap(to: subscriber, after: after, before: missed.first)
            for e in missed {
                _ = subscriber.deliver(e)
                last = e.seq
            }
        }
        // More than `capacity` events published during the replay leave a gap too (the oldest
        // go first; at the daemon's rates 2 000 events take hours): said as one.
        return delivery.withLock { _ in
            let missed = last.map { recent(after: $0) } ?? []
            if let last { Self.sayGap(to: subscriber, after: last, before: missed.first) }
            for e in missed { _ = subscriber.deliver(e) }
            return state.withLock { s in
                s.nextSubscriber += 1
                s.subscribers[s.nextSubscriber] = subscriber
                return s.nextSubscriber
            }
        }
    }

    /// Tells `subscriber` that events after `after` are gone when the first it is given is not the
    /// next (a client resuming from an id older than the log keeps: it had gone without a word).
    /// Nothing for a first connection (`after` 0: it asked for all that is kept).
    private static func sayGap(to subscriber: any EventSubscriber, after: Int, before first: Event?) {
        guard after > 0, let first, first.seq > after + 1 else { return }
        subscriber.missed(after: after, next: first.seq)
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
