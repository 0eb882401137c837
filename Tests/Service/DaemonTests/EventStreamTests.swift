import BatonTesting
import FoundationEssentials
import Glibc
import OSThread
import Synchronization
import Testing

@testable import BatonDaemon
@testable import BatonService
@testable import ControlParts

/// `GET /api/v1/events`: the arbiter's effects as Server-Sent Events, in order, with reasons.
@Suite(.ownThread) struct EventStreamTests {
    /// Music then a doorbell streams granted → granted → interruption-began → played → finished →
    /// interruption-ended(shouldResume: true), each with its source and reason, and an `audible`
    /// event for each source once its first frame is heard.
    @Test func streamsEveryEffectInOrder() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        let client = try RawClient(port: t.port)
        client.send("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(head.headers["content-type"]?.hasPrefix("text/event-stream") == true)
        #expect(waitUntil { t.daemon.events.subscriberCount == 1 })

        let music = try #require(
            try t.json("POST", "/api/v1/music/play", #"{"sound": "music440", "zones": ["kitchen"], "loop": true}"#)
                .object["id"])
        let bell = try #require(
            try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["kitchen"]}"#).object["id"])
        var seen: [(String, Event)] = []
        while seen.last?.0 != "interruption-ended", let e = try client.readServerSentEvent() {
            let event = try JSONDecoder().decode(Event.self, from: Data(e.data.utf8))
            #expect(event.type == e.type)
            if event.source == music || event.source == bell { seen.append((e.type, event)) }
        }
        // The arbiter's effects, in order; the audio's own events (`audible`: a source's first
        // frame heard) fall in between, each after its source's grant.
        let effects = seen.filter { $0.0 != "audible" }
        #expect(
            effects.map(\.0) == [
                "granted", "granted", "interruption-began", "played", "finished", "interruption-ended",
            ])
        #expect(effects.map { $0.1.source ?? "" } == [music, bell, music, bell, bell, music])
        for id in [music, bell] {
            let granted = try #require(seen.firstIndex { $0.0 == "granted" && $0.1.source == id })
            let audible = try #require(seen.firstIndex { $0.0 == "audible" && $0.1.source == id }, "\(id) heard")
            #expect(granted < audible)
        }
        #expect(seen.allSatisfy { $0.1.reason?.isEmpty == false })
        #expect(seen.last?.1.shouldResume == true)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.1.seq < $1.1.seq }, "sequence numbers increase")
    }

    /// A client reconnecting with Last-Event-ID first receives the kept events it missed.
    /// Four threads publishing at once: a subscriber gets every event exactly once, in sequence
    /// order, also one that joins with a replay halfway (a client that saw seq 101 before 100 and
    /// then resumed with `Last-Event-ID: 101` would have lost 100 for good; the soak caught one).
    @Test func subscribersGetEventsInSequenceOrderWhilePublishersRace() {
        final class Seqs: EventSubscriber {
            let seen = Mutex<[Int]>([])
            func deliver(_ event: Event) -> Bool {
                seen.withLock { $0.append(event.seq) }
                return true
            }
        }
        let log = EventLog(capacity: 20_000)
        let first = Seqs()
        let late = Seqs()
        log.subscribe(first, after: nil)
        let threads = (0..<4).map { n in
            OSThread.start(name: "publish\(n)") {
                for i in 0..<2_000 {
                    log.publish(type: .reloaded, reason: "\(n)/\(i)")
                    if n == 0 && i == 1_000 { log.subscribe(late, after: 1) }
                }
            }
        }
        for t in threads { t.join() }
        /// Where `seen` first differs from `from...8000` (nil: it is exactly that).
        func disorder(_ seen: [Int], from: Int) -> String? {
            for (i, seq) in seen.enumerated() where seq != from + i { return "seq \(seq) where \(from + i) was due" }
            return seen.count == 8_001 - from ? nil : "\(seen.count) events, \(8_001 - from) due"
        }
        #expect(disorder(first.seen.withLock { $0 }, from: 1) == nil)
        #expect(disorder(late.seen.withLock { $0 }, from: 2) == nil)
    }

    /// A subscriber joining with a replay (a phone's browser reconnecting: up to 2 000 events, each
    /// encoded) does not hold up publishers meanwhile — the monitor publishes under the control
    /// plane's lock —, and still gets every event once, in order.
    @Test func aReplayDoesNotHoldPublishers() {
        final class Held: EventSubscriber {
            let entered = Semaphore()
            let release = Semaphore()
            let seen = Mutex<[Int]>([])
            func deliver(_ event: Event) -> Bool {
                if event.seq == 1 {
                    entered.post()
                    release.wait()
                }
                seen.withLock { $0.append(event.seq) }
                return true
            }
        }
        let log = EventLog()
        for _ in 0..<3 { log.publish(type: .reloaded) }
        let held = Held()
        let joiner = OSThread.start { log.subscribe(held, after: 0) }
        held.entered.wait()  // replaying, held in the subscriber's deliver
        let published = Atomic<Bool>(false)
        let publisher = OSThread.start {
            log.publish(type: .reloaded)
            published.store(true, ordering: .releasing)
        }
        #expect(waitUntil(seconds: 2) { published.load(ordering: .acquiring) }, "the publish waited for the replay")
        held.release.post()
        joiner.join()
        publisher.join()
        #expect(held.seen.withLock { $0 } == [1, 2, 3, 4])
    }

    /// A browser reconnecting to a restarted daemon sends the last id of the old run, which this run
    /// may not have reached: it gets every kept event of this run (it got nothing until this run
    /// passed the old id, and the web app's log stood still). An id this run has issued still means
    /// "after this one"; each log names its run, and no two the same.
    @Test func anIdFromAnotherRunGetsThisRunsEvents() {
        final class Seqs: EventSubscriber {
            let seen = Mutex<[Int]>([])
            func deliver(_ event: Event) -> Bool {
                seen.withLock { $0.append(event.seq) }
                return true
            }
        }
        let log = EventLog()
        for _ in 0..<3 { log.publish(type: .reloaded) }
        let fromOldRun = Seqs()
        let fromThisRun = Seqs()
        log.subscribe(fromOldRun, after: 40)
        log.subscribe(fromThisRun, after: 2)
        log.publish(type: .reloaded)
        #expect(fromOldRun.seen.withLock { $0 } == [1, 2, 3, 4])
        #expect(fromThisRun.seen.withLock { $0 } == [3, 4])
        #expect(log.recent(after: 40).map(\.seq) == [1, 2, 3, 4], "recent takes another run's id the same way")
        #expect(log.recent(after: 4).isEmpty && log.recent(after: 3).map(\.seq) == [4])
        #expect(log.run.count == 16 && log.run.allSatisfy(\.isHexDigit), "\(log.run)")
        #expect(EventLog().run != log.run)
    }

    /// An event's `time` is UTC in ISO 8601 to the millisecond, written by hand: the same text as
    /// FoundationEssentials' formatter gives (leap days, year ends, 2100), the millisecond cut, not
    /// rounded (an event never reads later than it was), and now within a second of the clock.
    @Test func eventTimesAreISO8601InUTC() {
        let style = Date.ISO8601FormatStyle.iso8601.year().month().day().dateSeparator(.dash)
            .time(includingFractionalSeconds: true).timeSeparator(.colon)
        let instants: [(Int, Int)] = [
            (0, 0), (951_782_400, 500_000_000), (1_709_164_799, 999_600_000), (1_798_761_599, 400_000),
            (1_798_761_599, 123_400_000), (4_102_444_800, 123_400_000), (1_780_000_000, 5_000_000),
        ]
        for (seconds, nanoseconds) in instants {
            let date = Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9)
            #expect(
                EventLog.utcTime(at: timespec(tv_sec: seconds, tv_nsec: nanoseconds)) == date.formatted(style) + "Z",
                "\(seconds).\(nanoseconds)")
        }
        #expect(
            EventLog.utcTime(at: timespec(tv_sec: 1_798_761_599, tv_nsec: 999_999_999)) == "2026-12-31T23:59:59.999Z")
        let event = EventLog().publish(type: .reloaded)
        let published = Date.now.timeIntervalSince1970
        let parsed = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(event.time)
        #expect(abs((parsed?.timeIntervalSince1970 ?? 0) - published) < 1, "\(event.time)")
    }

    /// Every type of event the daemon publishes is listened to by the web app (an `EventSource` hands
    /// a named event only to a listener for that name: `audible` was missing, so the page showed a
    /// bell `starting` until some other event came) and has its row in docs/API.md's table.
    @Test func everyEventTypeReachesThePageAndTheDocs() throws {
        let types = Set(EventType.allCases.map(\.rawValue))
        let script = WebApp.script
        let list = try #require(
            script.firstRange(of: "const types = [").map { script[$0.upperBound...].prefix { $0 != "]" } },
            "no `const types = [` in app.js")
        let listened = Set(list.split(separator: ",").map { $0.filter { $0 != "'" && $0 != " " } })
        #expect(listened == types, "app.js listens to \(listened.sorted()), the daemon publishes \(types.sorted())")

        let api = try String(contentsOfFile: TestDaemon.repoRoot + "/docs/API.md", encoding: .utf8)
        let table = try #require(api.firstRange(of: "| type | when |").map { api[$0.lowerBound...] }, "no event table")
        let rows = table.split(separator: "\n").prefix { $0.hasPrefix("|") }.dropFirst(2)
        // The first column names the types, `like-this`, one or more to a row.
        let documented = Set(
            rows.flatMap {
                $0.split(separator: "|").first?.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map {
                    String($0.element)
                } ?? []
            })
        #expect(documented == types, "docs/API.md has \(documented.sorted()), the daemon publishes \(types.sorted())")
    }

    @Test func reconnectReplaysMissedEvents() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        _ = try t.json("POST", "/api/v1/announce", #"{"sound": "bell1k", "zones": ["patio"]}"#)
        let all = t.daemon.events.recent()
        let first = try #require(all.first)
        let client = try RawClient(port: t.port)
        client.send("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: \(first.seq)\r\n\r\n")
        _ = try client.readHead()
        let next = try #require(try client.readServerSentEvent())
        let event = try JSONDecoder().decode(Event.self, from: Data(next.data.utf8))
        #expect(event.seq == first.seq + 1)
    }

    /// A client resuming from an id older than the log keeps is told what it missed — an
    /// `events-missed` event without an id (its own last id stays) — before the kept events: the
    /// gap went without a word, and the web app drew a source whose `finished` it missed as heard
    /// for ever. A client that resumes within what is kept is told nothing of the kind.
    @Test func aResumeOlderThanTheLogIsToldTheGap() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        for _ in 0...t.daemon.events.capacity { t.daemon.events.publish(type: .reloaded) }
        let oldest = try #require(t.daemon.events.recent().first).seq
        #expect(oldest > 2)
        let client = try RawClient(port: t.port)
        client.send("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: 1\r\n\r\n")
        _ = try client.readHead()
        let gap = try #require(try client.readServerSentEvent())
        #expect(gap.type == "events-missed" && gap.id == nil)
        #expect(gap.data == #"{"after":1,"next":\#(oldest),"count":\#(oldest - 2)}"#)
        let next = try #require(try client.readServerSentEvent())
        #expect(next.id == "\(oldest)" && next.type == "reloaded")

        let within = try RawClient(port: t.port)
        within.send("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: \(oldest)\r\n\r\n")
        _ = try within.readHead()
        let first = try #require(try within.readServerSentEvent())
        #expect(first.type == "reloaded" && first.id == "\(oldest + 1)")
    }

    /// An event id that is not one — `?after=abc`, `?after=-1`, `Last-Event-ID: nope` — is a 400
    /// naming it, on the stream and on `recent`. Before, it was dropped without a word and every
    /// kept event came back as if none had been asked.
    @Test func aBadEventIdIsAClearError() throws {
        let t = try TestDaemon()
        defer { t.stop() }
        for target in ["/api/v1/events/recent?after=abc", "/api/v1/events/recent?after=-1", "/api/v1/events?after=x"] {
            let r = try t.request("GET", target)
            #expect(r.status == 400, "\(target): \(r.status)")
            #expect(r.text.contains("query parameter after: expected an integer"), "\(target): \(r.text)")
        }
        let client = try RawClient(port: t.port)
        client.send(
            "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: nope\r\nConnection: close\r\n\r\n")
        let r = try client.readResponse()
        #expect(r.status == 400)
        #expect(r.text.contains(#"Last-Event-ID \"nope\" is not an event id"#), "\(r.text)")
        #expect(try t.request("GET", "/api/v1/events/recent?after=0").status == 200)
        // An empty Last-Event-ID (a client that sends the header bare) is none.
        let bare = try RawClient(port: t.port)
        bare.send("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID:\r\n\r\n")
        #expect(try bare.readHead().status == 200)
    }
}
