import ALSA
import AudioCore
import BatonTesting
import Glibc
import Synchronization
import Testing

@testable import Engine

/// Stream outputs (Snapcast zones) against a plain TCP listener standing in for snapserver's
/// `mode=server` source: a server that is absent, present, or goes away never blocks the zone, and
/// nothing that fell due meanwhile is sent later.
@Suite(.ownThread) struct StreamOutputTests {
    static let rate = 48_000

    func output(port: Int, latencyFrames: Int = 48_000, awaitsServer: Bool = false) -> DeviceOutput {
        let pcm = PCMRequest(
            name: "tcp://127.0.0.1:\(port)", rate: Self.rate, channels: 2, format: .s16LE,
            periodFrames: Self.rate / 100, bufferFrames: Self.rate / 25)
        let stream = StreamSpec(
            target: .tcp(host: "127.0.0.1", port: port), latencyFrames: latencyFrames,
            prefillFrames: Self.rate / 50, awaitsServer: awaitsServer, backoffNanoseconds: 50_000_000,
            maxBackoffNanoseconds: 200_000_000)
        return DeviceOutput(
            DeviceSpec(
                pcm: pcm, clock: .device, realtimePriority: 0,
                zones: [ZoneSpec(name: "upstairs", deviceChannels: [0, 1], rampFrames: 480, ringFrames: 24_000)],
                stream: stream))
    }

    /// With no server the zone runs on its own clock (real time, not faster, never stuck), reports
    /// itself unavailable with the connect error, and drops what it mixes.
    @Test func runsOnItsClockWithoutAServer() throws {
        let port = try FreePort.next()
        let zone = output(port: port)
        #expect(zone.spec.clock == .system, "a stream output is paced by the system clock")
        let t0 = monotonicNanoseconds()
        zone.start()
        usleep(500_000)
        let snap = zone.snapshot()
        let elapsed = Double(monotonicNanoseconds() - t0) / 1e9
        zone.stop()
        #expect(!snap.available)
        #expect(snap.lastError == ECONNREFUSED)
        #expect(
            abs(Double(snap.framesPlayed) / Double(Self.rate) - elapsed) < 0.05,
            "\(snap.framesPlayed) frames in \(elapsed) s")
        #expect(zone.droppedFrames >= snap.framesPlayed - 480)
        #expect(snap.delayFrames == 48_000 && snap.audibleFrame == snap.framesPlayed - 48_000)
    }

    /// A peer that accepts each connection and closes it at once (Docker's proxy while snapserver's
    /// container is down) is retried with the backoff doubling, as a refused connect is: 50, 100,
    /// 200 ms here. Each connect used to start the backoff again: a retry every 50 ms for ever, the
    /// zone flipping available and unavailable at each.
    @Test func aPeerThatHangsUpAtOnceIsRetriedWithTheBackoff() throws {
        let port = try FreePort.next()
        let listener = try PCMListener(port: port, hangsUp: true)
        defer { listener.close() }
        let zone = output(port: port)
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 3) { listener.hungUp >= 1 }, "never connected")
        let first = monotonicNanoseconds()
        while monotonicNanoseconds() - first < 2_000_000_000 { usleep(100_000) }
        // 50 + 100 + 200 ms and then every 200 ms (and a period or two to see each hang-up): about 10.
        #expect(listener.hungUp <= 13, "\(listener.hungUp) connections in 2 s")
        #expect(zone.snapshot().reopens <= 13)
    }

    /// The server receives audio in real time plus the pre-fill; after an outage the zone
    /// reconnects and sends, again, only what is due — never the audio of the outage.
    @Test func sendsNoBacklogAfterAnOutage() throws {
        let port = try FreePort.next()
        let zone = output(port: port)
        var listener = try PCMListener(port: port)
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 3) { zone.snapshot().available })
        let first = listener.bytesOver(seconds: 1.0)
        listener.close()
        #expect(waitUntil(seconds: 3) { !zone.snapshot().available }, "the outage is noticed")
        usleep(500_000)
        listener = try PCMListener(port: port)
        #expect(waitUntil(seconds: 3) { zone.snapshot().available })
        #expect(zone.snapshot().reopens == 1)
        let second = listener.bytesOver(seconds: 1.0)
        listener.close()
        let perSecond = Double(Self.rate * 4)
        #expect(abs(Double(first) / perSecond - 1) < 0.06, "1 s of audio in 1 s (got \(Double(first) / perSecond) s)")
        #expect(
            abs(Double(second) / perSecond - 1) < 0.06,
            "no backlog after the outage (got \(Double(second) / perSecond) s)")
        #expect(zone.droppedFrames > Self.rate / 3, "the outage's audio was dropped")
    }

    /// A server that reads, but slower than real time (half of it), takes part of each
    /// period: not a stall. The zone stays available and no outage is recorded (what it cannot take
    /// is dropped and counted). It used to be called stalled after 0.1 s of partial takes. (A FIFO
    /// with 100 ms periods: writes above PIPE_BUF may be partial, and are, when the reader lags.)
    @Test func aServerThatReadsSlowlyIsNotStalled() throws {
        let path = TestDirectory.make("stream-slow") + "/upstairs.fifo"
        #expect(mkfifo(path, 0o644) == 0)
        let period = Self.rate / 10
        let pcm = PCMRequest(
            name: path, rate: Self.rate, channels: 2, format: .s16LE, periodFrames: period, bufferFrames: 4 * period)
        let zone = DeviceOutput(
            DeviceSpec(
                pcm: pcm, clock: .system, realtimePriority: 0,
                zones: [ZoneSpec(name: "upstairs", deviceChannels: [0, 1], rampFrames: 480, ringFrames: 48_000)],
                stream: StreamSpec(
                    target: .fifo(path: path), latencyFrames: 0, prefillFrames: period,
                    backoffNanoseconds: 20_000_000, maxBackoffNanoseconds: 50_000_000)))
        zone.start()
        defer { zone.stop() }
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        defer { close(reader) }
        try #require(waitUntil(seconds: 2) { zone.snapshot().available })
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var total = 0
        var looks = 0
        var stalled: [String] = []
        let t0 = monotonicNanoseconds()
        let rate = Double(Self.rate * 4) / 2
        while monotonicNanoseconds() - t0 < 2_000_000_000 {
            let due = Int(rate * Double(monotonicNanoseconds() - t0) / 1e9) - total
            if due > 0 {
                let n = buffer.withUnsafeMutableBytes { read(reader, $0.baseAddress, min(due, $0.count)) }
                if n > 0 { total += n }
            }
            looks += 1
            if !zone.snapshot().available || zone.isStalled || zone.outage.isOn {
                stalled.append("\(Double(monotonicNanoseconds() - t0) / 1e9) s")
            }
            usleep(2_000)
        }
        #expect(
            stalled.isEmpty,
            "unavailable or in an outage at \(stalled.count) of \(looks) looks, from \(stalled.first ?? "")")
        #expect(zone.droppedFrames > Self.rate / 4, "a slow reader's excess is dropped: \(zone.droppedFrames)")
    }

    /// With `awaitsServer`, a connection the kernel completed carries nothing until the server is
    /// seen running by a call made after the connect (an answer to an earlier call proves nothing:
    /// the server may have restarted since); then it carries real time, not the audio of the wait.
    /// The output says when it starts waiting and when it carries audio (its connection observer,
    /// which wakes the Snapcast keeper to answer at once).
    @Test func awaitsTheServerBeforeSendingAudio() throws {
        let port = try FreePort.next()
        let zone = output(port: port, awaitsServer: true)
        let listener = try PCMListener(port: port)
        defer { listener.close() }
        // What the output says when it tells: waiting, and whether its outage is on — told only once
        // the outage has the change (the monitor, woken by it, reads it).
        let told = Mutex<[String]>([])
        zone.connectionObserver = { [unowned zone] in
            told.withLock { $0.append("\(zone.awaitsServer ? "waiting" : "carrying"), outage \(zone.outage.isOn)") }
        }
        let beforeConnect = monotonicNanoseconds()
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 3) { zone.awaitsServer }, "connected, waiting for the server")
        // The output publishes its state, then tells: wait for the telling, not just the state.
        #expect(
            waitUntil(seconds: 1) { told.withLock { $0 } == ["waiting, outage true"] }, "the output told that it waits")
        zone.serverAnswered(callStartedAt: beforeConnect)
        #expect(listener.bytesOver(seconds: 0.3) == 0, "an answer to a call made before the connect opens nothing")
        let waiting = zone.snapshot()
        #expect(!waiting.available && waiting.reopens == 0 && zone.awaitsServer)
        zone.serverAnswered(callStartedAt: monotonicNanoseconds())
        #expect(waitUntil(seconds: 1) { zone.snapshot().available }, "an answer to a later call opens it")
        #expect(!zone.awaitsServer)
        #expect(
            waitUntil(seconds: 1) { told.withLock { $0 } == ["waiting, outage true", "carrying, outage false"] },
            "and then that it carries audio: \(told.withLock { $0 })")
        let perSecond = Double(Self.rate * 4)
        let sent = Double(listener.bytesOver(seconds: 1.0)) / perSecond
        #expect(abs(sent - 1) < 0.06, "1 s of audio in 1 s, none of the wait (got \(sent) s)")
        #expect(zone.droppedFrames > Self.rate / 4, "the wait's audio was dropped")
    }

    /// A connection that waits for the server and sends nothing still notices the server going
    /// away (no write would): it reconnects to the next server, and waits for that one.
    @Test func aWaitingConnectionNoticesTheServerLeaving() throws {
        let port = try FreePort.next()
        let zone = output(port: port, awaitsServer: true)
        var listener = try PCMListener(port: port)
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 3) { listener.accepted && zone.awaitsServer })
        listener.close()
        #expect(waitUntil(seconds: 3) { !zone.awaitsServer }, "the closed connection is seen")
        listener = try PCMListener(port: port)
        defer { listener.close() }
        #expect(waitUntil(seconds: 3) { listener.accepted && zone.awaitsServer }, "a new connection, waiting again")
        #expect(listener.bytesOver(seconds: 0.2) == 0 && !zone.snapshot().available)
    }

    /// A FIFO source: without a reader the open fails at once (ENXIO, never blocking); once the
    /// server reads, real time flows; a regular file at the path is refused, never written.
    @Test func writesIntoAFIFOWithoutBlocking() throws {
        let directory = TestDirectory.make("stream-fifo")
        let path = "\(directory)/upstairs.fifo"
        #expect(mkfifo(path, 0o644) == 0)
        let pcm = PCMRequest(
            name: path, rate: Self.rate, channels: 2, format: .s16LE, periodFrames: 480, bufferFrames: 1_920)
        let stream = StreamSpec(
            target: .fifo(path: path), latencyFrames: 0, prefillFrames: 960,
            backoffNanoseconds: 20_000_000, maxBackoffNanoseconds: 50_000_000)
        let zone = DeviceOutput(
            DeviceSpec(
                pcm: pcm, clock: .system, realtimePriority: 0,
                zones: [ZoneSpec(name: "upstairs", deviceChannels: [0, 1], rampFrames: 480, ringFrames: 24_000)],
                stream: stream))
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 2) { zone.snapshot().lastError == ENXIO })
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        defer { close(reader) }
        #expect(waitUntil(seconds: 2) { zone.snapshot().available })
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var total = 0
        let t0 = monotonicNanoseconds()
        while monotonicNanoseconds() - t0 < 1_000_000_000 {
            let n = buffer.withUnsafeMutableBytes { read(reader, $0.baseAddress, $0.count) }
            if n > 0 { total += n } else { usleep(2_000) }
        }
        let seconds = Double(total) / Double(Self.rate * 4)
        #expect(abs(seconds - 1) < 0.08, "about 1 s of audio (plus the pre-fill) in 1 s: \(seconds) s")

        let plain = "\(directory)/plain.raw"
        writeNothing(to: plain)
        let wrong = DeviceOutput(
            DeviceSpec(
                pcm: pcm, clock: .system, realtimePriority: 0,
                zones: [ZoneSpec(name: "upstairs", deviceChannels: [0, 1], rampFrames: 480, ringFrames: 24_000)],
                stream: StreamSpec(target: .fifo(path: plain), latencyFrames: 0, prefillFrames: 960)))
        wrong.start()
        #expect(waitUntil(seconds: 2) { wrong.snapshot().lastError == ENOTSUP })
        wrong.stop()
        var info = stat()
        #expect(stat(plain, &info) == 0 && info.st_size == 0, "nothing written into a regular file")
    }

    /// A socket bound to a port and connected to that same port reaches itself (TCP simultaneous
    /// open): what a zone's connect can do when nothing listens on a port of the ephemeral range.
    /// The sink sees it and does not take it for a server; a real connection it takes.
    @Test func tellsAConnectionToItselfFromAServer() throws {
        let port = try FreePort.next()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        func withAddress(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        let selfish = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(selfish) }
        #expect(withAddress { bind(selfish, $0, $1) } == 0)
        #expect(withAddress { connect(selfish, $0, $1) } == 0, "connect to itself: \(String(cString: strerror(errno)))")
        #expect(StreamSink.isConnectedToItself(selfish))

        let listener = try PCMListener(port: try FreePort.next())
        defer { listener.close() }
        address.sin_port = UInt16(listener.port).bigEndian
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        #expect(withAddress { connect(client, $0, $1) } == 0)
        #expect(!StreamSink.isConnectedToItself(client))
    }

    func writeNothing(to path: String) {
        let f = fopen(path, "w")
        fclose(f)
    }

    /// The output thread makes no heap allocation across 300 cycles (3 s) that include failed
    /// connects, a connect, writes (or, awaiting the server, the looks for a hang-up), a broken
    /// connection and reconnect attempts.
    @Test(arguments: [false, true]) func streamOutputThreadDoesNotAllocate(awaitsServer: Bool) throws {
        let port = try FreePort.next()
        let zone = output(port: port, awaitsServer: awaitsServer)
        let result = AllocationProbe(from: 20, cycles: 300)
        zone.cycleObserver = { cycle in result.observe(cycle) }
        let slot = try #require(zone.mixer.claimSlot(gain: 0.5))
        let feeder = FeedLoop(
            slots: [slot], block: Signals.sine(frequency: 440, rate: Self.rate, frames: 4_800, channels: 2))
        zone.start()
        let t0 = monotonicNanoseconds()
        var listener: PCMListener?
        var phase = 0
        while !result.done {
            feeder.topUp()
            let t = monotonicNanoseconds() - t0
            if phase == 0 && t > 800_000_000 {
                listener = try PCMListener(port: port)
                phase = 1
            }
            if phase == 1 && t > 1_800_000_000 {
                listener?.close()
                listener = nil
                phase = 2
            }
            usleep(1_000)
        }
        zone.stop()
        #expect(zone.snapshot().reopens == 0 && zone.droppedFrames > 0)
        #expect(result.count == 0, "allocations on the stream output thread over 300 cycles")
    }
}

/// A TCP listener on 127.0.0.1 that accepts one connection and counts what it reads, on its own
/// thread. Stands in for snapserver's `mode=server` source — or, `hangsUp`, for a proxy in front of
/// a server that is down: it accepts every connection and closes it at once, counting them.
final class PCMListener: @unchecked Sendable {
    // @unchecked: `thread` is touched only by the test's thread; the counters are atomics.
    private let fd: Int32
    private let received = Atomic<Int>(0)
    private let acceptedFlag = Atomic<Bool>(false)
    private let hangUps = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private var thread: pthread_t?
    private let hangsUp: Bool
    let port: Int
    init(port: Int, hangsUp: Bool = false) throws {
        self.port = port
        self.hangsUp = hangsUp
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard bound, listen(fd, 1) == 0 else { throw ListenError(port: port) }
        let listening = fd
        thread = startThread { [self] in serve(listening) }
    }

    /// Whether a client's connection was accepted.
    var accepted: Bool { acceptedFlag.load(ordering: .acquiring) }

    /// Connections accepted and closed at once so far (`hangsUp`).
    var hungUp: Int { hangUps.load(ordering: .acquiring) }

    /// Bytes received over the next `seconds`.
    func bytesOver(seconds: Double) -> Int {
        let before = received.load(ordering: .acquiring)
        usleep(UInt32(seconds * 1_000_000))
        return received.load(ordering: .acquiring) - before
    }

    /// Closes the connection and the listening socket: the writer sees the server gone.
    func close() {
        stopping.store(true, ordering: .releasing)
        if let thread { pthread_join(thread, nil) }
        thread = nil
        Glibc.close(fd)
    }

    private func serve(_ fd: Int32) {
        // Non-blocking accept: a connection reset between the poll and the accept must not hold
        // this thread (and `close`, which joins it) until some other connection arrives.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var client: Int32 = -1
        while hangsUp && !stopping.load(ordering: .acquiring) {
            guard poll(&p, 1, 20) > 0 else { continue }
            let c = accept(fd, nil, nil)
            guard c >= 0 else { continue }
            hangUps.add(1, ordering: .releasing)
            Glibc.close(c)
        }
        while client < 0 && !stopping.load(ordering: .acquiring) {
            if poll(&p, 1, 20) > 0 { client = accept(fd, nil, nil) }
        }
        guard client >= 0 else { return }
        acceptedFlag.store(true, ordering: .releasing)
        defer { Glibc.close(client) }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var c = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
        while !stopping.load(ordering: .acquiring) {
            if poll(&c, 1, 20) <= 0 { continue }
            let n = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            received.add(n, ordering: .releasing)
        }
    }
}

struct ListenError: Error, CustomStringConvertible {
    var port: Int
    var description: String { "cannot listen on 127.0.0.1:\(port)" }
}
