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
@Suite struct StreamOutputTests {
    static let rate = 48_000

    func output(
        port: Int, latencyFrames: Int = 48_000, awaitsServer: Bool = false, stopsWhenIdle: Bool = false
    ) -> DeviceOutput {
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
                stream: stream, stopsWhenIdle: stopsWhenIdle))
    }

    /// With nothing to play for 5 s the zone closes its connection (snapserver then encodes and
    /// sends nothing) and its thread sleeps: no bytes, no frames, still available. A sound opens a
    /// new connection — one server buffer (here 0.2 s) plus 0.1 s after the close at the soonest
    /// (a snapclient still playing the old connection's audio would play the new one right after
    /// it: early) — before anything is rendered, the server's answer awaited as on any new
    /// connection (the output telling whoever answers), so the server receives the 20 ms pre-fill
    /// and then at once the sound's first frame, none of it dropped; then it closes again.
    @Test func closesWhenIdleAndReconnectsBeforeTheNextSound() throws {
        let port = try FreePort.next()
        let latency = Self.rate / 5
        let zone = output(port: port, latencyFrames: latency, awaitsServer: true, stopsWhenIdle: true)
        let listener = try PCMListener(port: port)
        defer { listener.close() }
        let asked = Atomic<Int>(0)
        // Stands in for the Snapcast keeper: answers at once when the output says it waits.
        zone.connectionObserver = { [unowned zone] in
            if zone.awaitsServer {
                asked.add(1, ordering: .relaxed)
                zone.serverAnswered(callStartedAt: monotonicNanoseconds())
            }
        }
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 3) { zone.snapshot().available })
        let opened = monotonicNanoseconds()
        #expect(waitUntil(seconds: 8) { zone.isStoppedIdle && listener.hangUps == 1 }, "closed with nothing to play")
        let idleAfter = Double(monotonicNanoseconds() - opened) / 1e9
        #expect(idleAfter > 4.9 && idleAfter < 5.5, "after 5 s of nothing (\(idleAfter) s)")
        #expect(listener.connections == 1 && asked.load(ordering: .relaxed) == 1)
        let idle = zone.snapshot()
        #expect(listener.bytesOver(seconds: 0.3) == 0, "nothing sent while idle")
        #expect(zone.snapshot().framesPlayed == idle.framesPlayed, "nor played")
        #expect(zone.snapshot().available, "a zone closed for want of audio is still available")
        let dropped = zone.droppedFrames

        let frames = 9_600
        let sound = [Float](repeating: 0.25, count: frames * 2)
        let slot = try #require(zone.mixer.claimSlot(gain: 1))
        #expect(sound.withUnsafeBufferPointer { slot.ring.write($0.baseAddress!, count: $0.count) } == frames * 2)
        slot.finish()
        zone.wake()
        #expect(waitUntil(seconds: 3) { slot.isDrained }, "the sound was played")
        #expect(listener.connections == 2 && asked.load(ordering: .relaxed) == 2, "a new connection for the sound")
        let gap = Double(listener.acceptedAt(1) - listener.hungUpAt(0)) / 1e6
        #expect(gap >= 290 && gap < 400, "reconnected a buffer and 0.1 s after the close, not sooner (\(gap) ms)")
        #expect(zone.droppedFrames == dropped, "nothing of the sound was dropped")
        zone.mixer.release(slot)
        #expect(waitUntil(seconds: 8) { zone.idleStops == 2 && listener.hangUps == 2 }, "closed again after it")
        let received = listener.lastConnectionBytes
        let values = (0..<received.count / 2).map { i in
            Int16(bitPattern: UInt16(received[2 * i]) | UInt16(received[2 * i + 1]) << 8)
        }
        let prefill = Self.rate / 50 * 2
        let firstSound = values.firstIndex { $0 != 0 }
        #expect(
            firstSound == prefill,
            "the pre-fill, then at once the sound (its first sample at \(String(describing: firstSound)))")
        #expect(values.filter { $0 != 0 }.count == frames * 2, "every frame of the sound, once")
    }

    /// A zone closed for want of audio says it is unavailable once a call to the server failed,
    /// and available again once one is answered (the Snapcast keeper makes those calls).
    @Test func anIdleZoneFollowsTheServersAnswers() throws {
        let port = try FreePort.next()
        let zone = output(port: port, latencyFrames: Self.rate / 5, stopsWhenIdle: true)
        let listener = try PCMListener(port: port)
        defer { listener.close() }
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 8) { zone.isStoppedIdle })
        #expect(zone.snapshot().available)
        zone.serverUnreachable()
        #expect(!zone.snapshot().available, "the server did not answer")
        zone.serverAnswered(callStartedAt: monotonicNanoseconds())
        #expect(zone.snapshot().available, "it answered again")
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
        let told = Mutex<[Bool]>([])
        zone.connectionObserver = { [unowned zone] in told.withLock { $0.append(zone.awaitsServer) } }
        let beforeConnect = monotonicNanoseconds()
        zone.start()
        defer { zone.stop() }
        #expect(waitUntil(seconds: 3) { zone.awaitsServer }, "connected, waiting for the server")
        #expect(told.withLock { $0 } == [true], "the output told that it waits")
        zone.serverAnswered(callStartedAt: beforeConnect)
        #expect(listener.bytesOver(seconds: 0.3) == 0, "an answer to a call made before the connect opens nothing")
        let waiting = zone.snapshot()
        #expect(!waiting.available && waiting.reopens == 0 && zone.awaitsServer)
        zone.serverAnswered(callStartedAt: monotonicNanoseconds())
        #expect(waitUntil(seconds: 1) { zone.snapshot().available }, "an answer to a later call opens it")
        #expect(!zone.awaitsServer)
        #expect(told.withLock { $0 } == [true, false], "and then that it carries audio")
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
        let directory = WAVWriter.temporaryDirectory("stream-fifo")
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

/// A TCP listener on 127.0.0.1 that accepts a connection at a time and counts what it reads, on its
/// own thread; after the client closes it accepts the next one. Keeps the first 256 KiB of the
/// latest connection and when each connection came and ended. Stands in for snapserver's
/// `mode=server` source.
final class PCMListener: @unchecked Sendable {
    // @unchecked: `thread` is touched only by the test's thread; the counters are atomics.
    private let fd: Int32
    private let received = Atomic<Int>(0)
    private let acceptedFlag = Atomic<Bool>(false)
    private let connectionCount = Atomic<Int>(0)
    private let hangUpCount = Atomic<Int>(0)
    private let latest = Mutex<[UInt8]>([])
    private let times = Mutex<(accepted: [Int], hungUp: [Int])>(([], []))
    private let stopping = Atomic<Bool>(false)
    private var thread: pthread_t?
    let port: Int

    init(port: Int) throws {
        self.port = port
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
    /// Connections accepted so far.
    var connections: Int { connectionCount.load(ordering: .acquiring) }
    /// Connections the client closed so far.
    var hangUps: Int { hangUpCount.load(ordering: .acquiring) }
    /// The first bytes (at most 256 KiB) the latest connection brought.
    var lastConnectionBytes: [UInt8] { latest.withLock { $0 } }
    /// When (monotonic ns) connection `n` (from 0) was accepted.
    func acceptedAt(_ n: Int) -> Int { times.withLock { $0.accepted[n] } }
    /// When (monotonic ns) the client closed connection `n` (from 0).
    func hungUpAt(_ n: Int) -> Int { times.withLock { $0.hungUp[n] } }

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
        while !stopping.load(ordering: .acquiring) {
            var client: Int32 = -1
            while client < 0 && !stopping.load(ordering: .acquiring) {
                if poll(&p, 1, 20) > 0 { client = accept(fd, nil, nil) }
            }
            guard client >= 0 else { return }
            let now = monotonicNanoseconds()
            latest.withLock { $0 = [] }
            times.withLock { $0.accepted.append(now) }
            connectionCount.add(1, ordering: .releasing)
            acceptedFlag.store(true, ordering: .releasing)
            let hungUp = read(client)
            Glibc.close(client)
            if hungUp {
                let end = monotonicNanoseconds()
                times.withLock { $0.hungUp.append(end) }
                hangUpCount.add(1, ordering: .releasing)
            }
        }
    }

    /// Reads a connection until the client closes it (true) or the listener stops (false).
    private func read(_ client: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var c = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
        while !stopping.load(ordering: .acquiring) {
            if poll(&c, 1, 20) <= 0 { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(client, $0.baseAddress, $0.count) }
            if n <= 0 { return true }
            latest.withLock { kept in
                if kept.count < 262_144 { kept.append(contentsOf: buffer[..<min(n, 262_144 - kept.count)]) }
            }
            received.add(n, ordering: .releasing)
        }
        return false
    }
}

struct ListenError: Error, CustomStringConvertible {
    var port: Int
    var description: String { "cannot listen on 127.0.0.1:\(port)" }
}
