import FoundationEssentials
import Glibc
import OSThread
import Synchronization

/// Records what a running batond says, for judging against what its zones wrote
/// (``TruthJudge``): every event of its SSE stream, and a status sample every period.
/// Talks to the API over loopback only, so it works on an in-process daemon and on the process.
///
/// Thread: `start` and `stop` from the test; the recording runs on two threads of its own.
public final class TruthRecorder: @unchecked Sendable {
    // @unchecked: the recording is behind `shared`; the rest is immutable after init.
    /// One event as the stream carried it.
    public struct Event: Codable, Sendable, Equatable {
        public var seq: Int
        public var type: String
        public var source: String?
        public var zones: [String]?
        public var shouldResume: Bool?
        public var zoneFrames: [String: Int]?
    }

    /// One status sample: per zone, the audible frame and who is reported heard; per source, its
    /// class and state.
    public struct Sample: Codable, Sendable {
        public struct Zone: Codable, Sendable {
            public var name: String
            public var rate: Int
            public var audibleFrame: Int
            public var state: String
            public var audible: [String]
            public var xruns: Int
            public var lateCycles: Int
            public var reopens: Int
            /// The zone's slot rings in memory (a ring is paged in when its slot is first used).
            public var ringBytes: Int
        }
        public struct Source: Codable, Sendable {
            public var id: String
            public var `class`: String
            public var state: String
        }
        public var zones: [Zone]
        public var sources: [Source]
        public var uptimeMs: Int
        /// When the answer was read (CLOCK_MONOTONIC ns; set by the recorder, not in the JSON).
        public var takenAt: Int?
    }

    /// Everything recorded.
    public struct Recording: Sendable {
        public var events: [Event]
        public var samples: [Sample]
        /// Status requests that failed (the daemon was busy reloading, or gone).
        public var failedSamples: Int
    }

    private struct Shared {
        var events: [Event] = []
        var samples: [Sample] = []
        var failed = 0
    }

    public let port: Int
    public let intervalNanoseconds: Int
    private let shared = Mutex(Shared())
    private let stopping = Atomic<Bool>(false)
    private var threads: [OSThread] = []

    /// - Parameters:
    ///   - port: the API's loopback port.
    ///   - intervalMilliseconds: how often to sample status: the zones' period.
    public init(port: Int, intervalMilliseconds: Int = 10) {
        self.port = port
        intervalNanoseconds = intervalMilliseconds * 1_000_000
    }

    /// Starts recording; returns once the event stream is connected.
    public func start() {
        let connected = Atomic<Bool>(false)
        threads.append(OSThread.start { [self] in streamEvents(connected: connected) })
        _ = waitUntil(seconds: 5) { connected.load(ordering: .acquiring) }
        threads.append(OSThread.start { [self] in sampleStatus() })
    }

    /// Stops both threads and returns what was recorded.
    public func stop() -> Recording {
        stopping.store(true, ordering: .releasing)
        for t in threads { t.join() }
        threads = []
        return shared.withLock { Recording(events: $0.events, samples: $0.samples, failedSamples: $0.failed) }
    }

    private var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// Reads `GET /api/v1/events`, reconnecting with `Last-Event-ID` (the daemon replays what was
    /// missed) after the client's 5 s read timeout or a dropped connection.
    private func streamEvents(connected: borrowing Atomic<Bool>) {
        var last: Int?
        while !isStopping {
            guard let client = try? RawClient(port: port) else {
                usleep(20_000)
                continue
            }
            let resume = last.map { "Last-Event-ID: \($0)\r\n" } ?? ""
            client.send("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\(resume)\r\n")
            guard (try? client.readHead())?.status == 200 else {
                usleep(20_000)
                continue
            }
            connected.store(true, ordering: .releasing)
            while !isStopping, let e = try? client.readServerSentEvent() {
                guard let event = try? JSONDecoder().decode(Event.self, from: Data(e.data.utf8)) else { continue }
                if let last, event.seq <= last { continue }
                last = event.seq
                shared.withLock { $0.events.append(event) }
            }
            client.close()
        }
    }

    /// One `GET /api/v1/status` of the batond whose API is on `port`; nil when it does not answer.
    public static func status(port: Int) -> Sample? {
        (try? RawClient(port: port).get("/api/v1/status"))?.flatMap {
            try? JSONDecoder().decode(Sample.self, from: Data($0))
        }
    }

    /// Samples `GET /api/v1/status` once per interval, on a monotonic schedule.
    private func sampleStatus() {
        var next = monotonicNanoseconds()
        while !isStopping {
            var sample = Self.status(port: port)
            sample?.takenAt = monotonicNanoseconds()
            shared.withLock {
                if let sample { $0.samples.append(sample) } else { $0.failed += 1 }
            }
            next += intervalNanoseconds
            let now = monotonicNanoseconds()
            if next > now {
                var ts = timespec(tv_sec: next / 1_000_000_000, tv_nsec: next % 1_000_000_000)
                while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
            } else {
                next = now
            }
        }
    }
}

extension RawClient {
    /// `GET path` on a fresh connection: the body when the status is 200, else nil.
    func get(_ path: String) throws -> [UInt8]? {
        send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let r = try readResponse()
        close()
        return r.status == 200 ? r.body : nil
    }
}
