import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

@testable import Players

/// `control: {mpd: …}` pointed at something that is not a working MPD: the control reports what is
/// wrong, and neither memory nor a CPU nor the watcher's thread is taken for good.
@Suite(.ownThread) struct MPDControlHostileTests {
    /// A server on 127.0.0.1 that greets like MPD, then runs `behave` on each connection (on a
    /// thread of its own) until it returns. Counts connections.
    final class FakeMPD: @unchecked Sendable {
        // @unchecked: the socket is `let`; the counters are atomics.
        let listener: Listener
        let connections = Atomic<Int>(0)
        let commands = Atomic<Int>(0)
        private let running = Atomic<Bool>(true)
        /// The connections open now (removed under the lock before they are closed).
        private let open = Mutex<Set<Int32>>([])

        init(_ behave: @escaping @Sendable (Int32, FakeMPD) -> Void) throws {
            listener = try Listener()
            let fd = listener.fd
            OSThread.detach(name: "fake-mpd") { [self] in
                while running.load(ordering: .acquiring) {
                    let client = accept(fd, nil, nil)
                    // Not inherited by the processes other tests start: a child that kept it held the
                    // connection open after this server closed it (`accept4` does not import).
                    if client >= 0 { _ = fcntl(client, F_SETFD, FD_CLOEXEC) }
                    guard client >= 0, running.load(ordering: .acquiring) else {
                        if client >= 0 { close(client) }
                        continue
                    }
                    connections.add(1, ordering: .relaxed)
                    open.withLock { _ = $0.insert(client) }
                    OSThread.detach(name: "fake-mpd-conn") { [self] in
                        _ = Self.send(client, "OK MPD 0.23.5\n")
                        behave(client, self)
                        open.withLock { _ = $0.remove(client) }
                        close(client)
                    }
                }
            }
        }

        /// Ends every open connection (MPD going away): its peer reads the end at once.
        func dropConnections() { open.withLock { for fd in $0 { shutdown(fd, Int32(SHUT_RDWR)) } } }

        static func send(_ fd: Int32, _ text: String) -> Bool {
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                == bytes.count
        }

        deinit {
            running.store(false, ordering: .releasing)
            shutdown(listener.fd, Int32(SHUT_RDWR))
            close(listener.fd)
        }
    }

    final class Reports: Sendable {
        let lines = Mutex<[String]>([])
        func add(_ line: String) { lines.withLock { $0.append(line) } }
        func contains(_ text: String) -> Bool { lines.withLock { $0.contains { $0.contains(text) } } }
    }

    /// An MPD that does not take the connection (its backlog full: the SYN is dropped) or takes it
    /// and says nothing: the control says how long it waited. It said "cannot connect: Operation
    /// now in progress" (SO_SNDTIMEO's EINPROGRESS) and "no answer (Resource temporarily
    /// unavailable)" (SO_RCVTIMEO's EAGAIN).
    @Test func aTimeoutIsSaidAsOne() throws {
        let full = try Listener()
        defer { close(full.fd) }
        #expect(listen(full.fd, 0) == 0)
        // Filled: connections until one is not taken within 0.2 s.
        var fillers: [Int32] = []
        defer { for fd in fillers { close(fd) } }
        var filled = false
        for _ in 0..<8 where !filled {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            fillers.append(fd)
            var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = full.port.bigEndian
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            filled = rc != 0
        }
        #expect(filled, "the backlog is full")
        let silent = try Listener()  // takes connections into its backlog, never a word
        defer { close(silent.fd) }
        let reports = Reports()
        let refusing = MPDControl(host: "127.0.0.1", port: full.port, report: reports.add)
        defer { refusing.close() }
        let mute = MPDControl(host: "127.0.0.1", port: silent.port, report: reports.add)
        defer { mute.close() }
        refusing.pause()
        mute.pause()
        #expect(
            waitUntil(seconds: 8, every: 0.05) {
                reports.contains(
                    "mpd 127.0.0.1:\(full.port): cannot follow its state: did not accept a connection within 2 s")
                    && reports.contains("mpd 127.0.0.1:\(silent.port): cannot follow its state: no answer within 2 s")
            }, "\(reports.lines.withLock { $0 })")
        #expect(
            refusing.lastError?.hasSuffix("did not accept a connection within 2 s") == true,
            "\(refusing.lastError ?? "")")
        #expect(mute.lastError?.hasSuffix("no answer within 2 s") == true, "\(mute.lastError ?? "")")
    }

    /// A server that never ends a line (64 KiB blocks of "x" after the greeting): the answer is
    /// refused at 64 KiB with a sentence; before, the line grew without end (memory) and each read
    /// scanned it whole (a core), and `close` could not stop it. After `close` no new connection.
    @Test func aLineWithoutEndIsAnErrorNotMemory() throws {
        let block = String(repeating: "x", count: 64 << 10)
        let server = try FakeMPD { fd, _ in
            while FakeMPD.send(fd, block) {}
        }
        let reports = Reports()
        let control = MPDControl(host: "127.0.0.1", port: server.listener.port, report: reports.add)
        #expect(
            waitUntil(seconds: 5, every: 0.02) {
                reports.contains("a line longer than 64 KiB: not MPD's protocol")
            }, "\(reports.lines.withLock { $0 })")
        #expect(reports.contains("mpd 127.0.0.1:\(server.listener.port): cannot follow its state"))
        control.close()
        usleep(1_500_000)  // the watcher's retry pause, after which it sees the close
        let after = server.connections.load(ordering: .relaxed)
        usleep(2_000_000)
        #expect(server.connections.load(ordering: .relaxed) == after, "no new connection after close")
    }

    /// A server that answers `OK` to everything, `idle player` at once with no change: the watcher
    /// calls it an error and tries again a second later; before, it asked again at once, thousands
    /// of commands a second.
    @Test func anIdleAnsweredWithoutAChangeIsAnErrorNotALoop() throws {
        let server = try FakeMPD { fd, fake in
            var byte: UInt8 = 0
            while recv(fd, &byte, 1, 0) == 1 {
                if byte == 0x0A {
                    fake.commands.add(1, ordering: .relaxed)
                    guard FakeMPD.send(fd, "OK\n") else { return }
                }
            }
        }
        let reports = Reports()
        let control = MPDControl(host: "127.0.0.1", port: server.listener.port, report: reports.add)
        defer { control.close() }
        usleep(3_000_000)
        #expect(reports.contains("it answered \"idle player\" with no change: not MPD's protocol"))
        let commands = server.commands.load(ordering: .relaxed)
        #expect(commands <= 10, "\(commands) commands in 3 s")
    }

    /// Answers like a small MPD on `fd` while `healthy()`: `status` with `state: play`, `idle player`
    /// held until `noidle`. Returns when the peer closes, or at once when not healthy (the
    /// connection closes after the greeting). `silentAfterIdle`: once in `idle`, never answers again
    /// (a host that lost power, its connection neither closed nor answered).
    static func serveMPD(
        _ fd: Int32, healthy: () -> Bool, state: () -> String = { "play" }, silentAfterIdle: Bool = false,
        answer: (String) -> String? = { _ in nil }
    ) {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        guard healthy() else { return }
        while recv(fd, &byte, 1, 0) == 1 {
            guard byte == 0x0A else {
                line.append(byte)
                continue
            }
            let command = String(decoding: line, as: UTF8.self)
            line.removeAll()
            if let special = answer(command) {
                guard FakeMPD.send(fd, special) else { return }
                continue
            }
            switch command {
            case "status": guard FakeMPD.send(fd, "volume: 50\nstate: \(state())\nOK\n") else { return }
            case "idle player":
                if silentAfterIdle {
                    while recv(fd, &byte, 1, 0) == 1 {}
                    return
                }
            case "noidle": guard FakeMPD.send(fd, "OK\n") else { return }
            default: guard FakeMPD.send(fd, "OK\n") else { return }
            }
        }
    }

    /// MPD gone, then back: the control's error says it cannot follow MPD and the player's state is
    /// unknown meanwhile; once MPD answers again, the error is gone from `lastError` (status's
    /// `controlError`) — a command's that failed meanwhile too — and the state is MPD's. MPD came
    /// back stopped (restarted): that is a change the user made. Before, the error stayed until a
    /// command succeeded.
    @Test func theErrorIsGoneOnceMPDIsBack() throws {
        let healthy = Atomic<Bool>(true)
        let playing = Atomic<Bool>(true)
        let server = try FakeMPD { fd, _ in
            Self.serveMPD(
                fd, healthy: { healthy.load(ordering: .relaxed) },
                state: { playing.load(ordering: .relaxed) ? "play" : "stop" })
        }
        let reports = Reports()
        let control = MPDControl(host: "127.0.0.1", port: server.listener.port, report: reports.add)
        defer { control.close() }
        #expect(
            waitUntil(seconds: 5, every: 0.01) {
                control.state == "play"
            })
        #expect(control.lastError == nil)
        // MPD goes away.
        healthy.store(false, ordering: .relaxed)
        server.dropConnections()
        #expect(
            waitUntil(seconds: 5, every: 0.02) {
                control.lastError?.contains("cannot follow its state") == true
            }, "\(String(describing: control.lastError))")
        #expect(control.state == nil, "not known while MPD is away")
        control.pause()  // a fresh connection, closed after the greeting: the command fails
        #expect(
            waitUntil(seconds: 5, every: 0.02) {
                reports.contains("\"pause 1\" failed")
            }, "\(reports.lines.withLock { $0 })")
        #expect(control.lastError?.contains("cannot follow its state") == true, "the watcher's error is shown first")
        // MPD is back, restarted: stopped.
        playing.store(false, ordering: .relaxed)
        healthy.store(true, ordering: .relaxed)
        #expect(
            waitUntil(seconds: 5, every: 0.02) {
                control.lastError == nil && control.state == "stop"
            }, "\(String(describing: control.lastError)), \(String(describing: control.state))")
        #expect(control.takeUserChange() == .stopped)
        #expect(reports.lines.withLock { $0.count { $0.contains("cannot follow its state") } } == 1, "said once")
    }

    /// A connection that stops answering in `idle` (MPD's host lost power: no close, no answer) is
    /// noticed at the next check: `cannot follow its state`, the state no longer shown as playing.
    /// Before, the watcher waited in `idle` for ever and the state stayed "play".
    @Test func aConnectionThatGoesSilentIsNoticed() throws {
        // The first connection goes silent in `idle`; later ones end after the greeting (the host
        // is still away), so the state stays unknown.
        let server = try FakeMPD { fd, fake in
            Self.serveMPD(fd, healthy: { fake.connections.load(ordering: .relaxed) == 1 }, silentAfterIdle: true)
        }
        let reports = Reports()
        let control = MPDControl(
            host: "127.0.0.1", port: server.listener.port, report: reports.add, checkSeconds: 0.5)
        defer { control.close() }
        #expect(
            waitUntil(seconds: 5, every: 0.01) {
                control.state == "play"
            })
        #expect(
            waitUntil(seconds: 6, every: 0.02) {
                reports.contains("cannot follow its state: no answer")
            }, "\(reports.lines.withLock { $0 })")
        #expect(control.state == nil)
    }

    /// Baton pauses MPD over a connection of its own while the watcher's hangs (MPD's host busy):
    /// when the watcher, long after, follows MPD again and sees it paused, that is Baton's pause,
    /// not the user's — however long ago it was asked for. (Comparing with the state last seen
    /// across a reconnect made it the user's once Baton's 3 s window had passed.)
    @Test func batonsOwnPauseSeenAfterAReconnectIsNotTheUsers() throws {
        let paused = Atomic<Bool>(false)
        let server = try FakeMPD { fd, fake in
            Self.serveMPD(
                fd, healthy: { true }, state: { paused.load(ordering: .relaxed) ? "pause" : "play" },
                silentAfterIdle: fake.connections.load(ordering: .relaxed) == 1,
                answer: { command in
                    if command == "pause 1" { paused.store(true, ordering: .relaxed) }
                    return nil
                })
        }
        let control = MPDControl(host: "127.0.0.1", port: server.listener.port, report: { _ in }, checkSeconds: 2)
        defer { control.close() }
        #expect(
            waitUntil(seconds: 5, every: 0.01) {
                control.state == "play"
            })
        control.pause()
        #expect(waitUntil(seconds: 5) { paused.load(ordering: .relaxed) })
        // The watcher finds its connection silent (2 s + the 2 s answer limit), comes back after 1 s.
        #expect(
            waitUntil(seconds: 10, every: 0.02) {
                control.state == "pause"
            }, "\(String(describing: control.state))")
        #expect(control.takeUserChange() == nil)
    }

    /// MPD's refusal of `play` (an empty playlist), for `serveMPD`'s `answer`.
    static func refusingPlay(_ command: String) -> String? {
        command == "play" ? "ACK [50@0] {play} the playlist is empty\n" : nil
    }

    /// Once the watcher has seen `state`, Baton's `play`, which `refusingPlay` refuses: its error
    /// shown.
    static func playRefused(_ control: MPDControl, seenFirst state: String) {
        #expect(waitUntil(seconds: 5, every: 0.01) { control.state == state })
        control.play()
        #expect(waitUntil(seconds: 5, every: 0.01) { control.lastError?.contains("the playlist is empty") == true })
    }

    /// A command MPD itself refused (`ACK`) is still the error shown after the watcher, which lost
    /// MPD meanwhile, follows it again: only failures to reach MPD go then.
    @Test func aRefusalByMPDStaysWhenTheWatcherIsBack() throws {
        let server = try FakeMPD { fd, _ in Self.serveMPD(fd, healthy: { true }, answer: Self.refusingPlay) }
        let control = MPDControl(host: "127.0.0.1", port: server.listener.port, report: { _ in })
        defer { control.close() }
        Self.playRefused(control, seenFirst: "play")
        server.dropConnections()  // the watcher loses MPD and follows it again a second later
        #expect(
            waitUntil(seconds: 5, every: 0.02) {
                server.connections.load(ordering: .relaxed) >= 3 && control.state == "play"
                    && control.lastError?.contains("cannot follow") != true
            })
        #expect(
            control.lastError?.contains("the playlist is empty") == true, "\(String(describing: control.lastError))")
    }

    /// A command MPD refused is not what Baton expects to see: when the user then makes MPD play
    /// (while the watcher had lost it), that is the user's play. Before, Baton's refused `play`
    /// stayed expected and the user's was taken for it.
    @Test func aRefusedCommandIsNotTakenForTheChangeThatFollows() throws {
        let playing = Atomic<Bool>(false)
        let server = try FakeMPD { fd, _ in
            Self.serveMPD(
                fd, healthy: { true }, state: { playing.load(ordering: .relaxed) ? "play" : "stop" },
                answer: Self.refusingPlay)
        }
        let control = MPDControl(host: "127.0.0.1", port: server.listener.port, report: { _ in })
        defer { control.close() }
        Self.playRefused(control, seenFirst: "stop")
        playing.store(true, ordering: .relaxed)  // the user, in another MPD client
        server.dropConnections()
        #expect(
            waitUntil(seconds: 5, every: 0.02) {
                control.state == "play"
            })
        #expect(control.takeUserChange() == .played)
    }
}
