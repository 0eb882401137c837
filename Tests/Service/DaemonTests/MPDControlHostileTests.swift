import BatonTesting
import Glibc
import OSThread
import Synchronization
import Testing

@testable import Players

/// `control: {mpd: …}` pointed at something that is not a working MPD: the control reports what is
/// wrong, and neither memory nor a CPU nor the watcher's thread is taken for good.
@Suite struct MPDControlHostileTests {
    /// A server on 127.0.0.1 that greets like MPD, then runs `behave` on each connection (on a
    /// thread of its own) until it returns. Counts connections.
    final class FakeMPD: @unchecked Sendable {
        // @unchecked: the socket is `let`; the counters are atomics.
        let listener: Listener
        let connections = Atomic<Int>(0)
        let commands = Atomic<Int>(0)
        private let running = Atomic<Bool>(true)

        init(_ behave: @escaping @Sendable (Int32, FakeMPD) -> Void) throws {
            listener = try Listener()
            let fd = listener.fd
            OSThread.detach(name: "fake-mpd") { [self] in
                while running.load(ordering: .acquiring) {
                    let client = accept(fd, nil, nil)
                    guard client >= 0, running.load(ordering: .acquiring) else {
                        if client >= 0 { close(client) }
                        continue
                    }
                    connections.add(1, ordering: .relaxed)
                    OSThread.detach(name: "fake-mpd-conn") { [self] in
                        _ = Self.send(client, "OK MPD 0.23.5\n")
                        behave(client, self)
                        close(client)
                    }
                }
            }
        }

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
            waitUntil(seconds: 5) {
                usleep(20_000)
                return reports.contains("a line longer than 64 KiB: not MPD's protocol")
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
}
