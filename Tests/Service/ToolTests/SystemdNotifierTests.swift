import BatonTesting
import Glibc
import Systemd
import Testing

/// `SystemdNotifier` through the real libsystemd `sd_notify`, received on a datagram socket that stands
/// in for systemd's. Serialized: the tests set `NOTIFY_SOCKET` and `WATCHDOG_*` in this process.
@Suite(.serialized, .ownThread) struct SystemdNotifierTests {
    let notifier = SystemdNotifier()

    /// Runs `body` with `NOTIFY_SOCKET` pointing at a fresh socket, then unsets it.
    func underSystemd(_ kind: NotifySocket.Kind, _ body: (NotifySocket) throws -> Void) throws {
        let socket = NotifySocket(kind)
        setenv("NOTIFY_SOCKET", socket.address, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        try body(socket)
    }

    /// READY=1, STATUS=…, WATCHDOG=1 and STOPPING=1 arrive as datagrams, in order, on a path socket
    /// and on an abstract one (`@name`); each call reports that it was delivered.
    @Test(arguments: NotifySocket.Kind.allCases)
    func sendsEachStateAsADatagram(kind: NotifySocket.Kind) throws {
        try underSystemd(kind) { (socket: NotifySocket) throws in
            #expect(notifier.isUnderSystemd)
            #expect(try notifier.ready())
            #expect(socket.receive() == "READY=1")
            #expect(try notifier.status("2 zones, kitchen playing"))
            #expect(socket.receive() == "STATUS=2 zones, kitchen playing")
            #expect(try notifier.watchdog())
            #expect(socket.receive() == "WATCHDOG=1")
            #expect(try notifier.stopping())
            #expect(socket.receive() == "STOPPING=1")
        }
    }

    /// A status with line breaks stays one STATUS= assignment (a newline would start a new one).
    @Test func statusIsOneLine() throws {
        try underSystemd(.path) { (socket: NotifySocket) throws in
            try notifier.status("zone kitchen unavailable:\nno such device")
            #expect(socket.receive() == "STATUS=zone kitchen unavailable: no such device")
        }
    }

    /// RELOADING=1 carries MONOTONIC_USEC; EXTEND_TIMEOUT_USEC is in microseconds.
    @Test func reloadingAndExtendTimeout() throws {
        try underSystemd(.abstract) { (socket: NotifySocket) throws in
            try notifier.reloading()
            let reloading = try #require(socket.receive())
            #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
            #expect(UInt64(reloading.split(separator: "=").last ?? "") ?? 0 > 0)
            try notifier.extendTimeout(by: .milliseconds(2500))
            #expect(socket.receive() == "EXTEND_TIMEOUT_USEC=2500000")
        }
    }

    /// Outside systemd (no NOTIFY_SOCKET) every call is a no-op that returns false.
    @Test func outsideSystemdEverythingIsANoOp() throws {
        unsetenv("NOTIFY_SOCKET")
        #expect(!notifier.isUnderSystemd)
        #expect(try !notifier.ready())
        #expect(try !notifier.status("x"))
        #expect(try !notifier.watchdog())
        #expect(try !notifier.stopping())
        #expect(notifier.watchdogInterval == nil)
    }

    /// A NOTIFY_SOCKET nobody listens on is an error naming the state and the errno.
    @Test func deadSocketThrows() {
        setenv("NOTIFY_SOCKET", "/nonexistent/baton-notify.sock", 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        #expect(throws: SystemdError.self) { try notifier.ready() }
        do { try notifier.ready() } catch {
            #expect(error.state == "READY=1")
            #expect(error.code == ENOENT)
            #expect(error.description.contains("No such file or directory"))
        }
    }

    /// WatchdogSec= reaches the process as WATCHDOG_USEC (+ WATCHDOG_PID); for another PID it is off.
    @Test func watchdogIntervalFromTheEnvironment() {
        defer {
            unsetenv("WATCHDOG_USEC")
            unsetenv("WATCHDOG_PID")
        }
        setenv("WATCHDOG_USEC", "10000000", 1)
        setenv("WATCHDOG_PID", "\(getpid())", 1)
        #expect(notifier.watchdogInterval == .seconds(10))
        setenv("WATCHDOG_PID", "\(getpid() + 1)", 1)
        #expect(notifier.watchdogInterval == nil)
        unsetenv("WATCHDOG_PID")
        setenv("WATCHDOG_USEC", "not-a-number", 1)
        #expect(notifier.watchdogInterval == nil)
    }

    /// batond under systemd says its zones in the status line (`systemctl status`), and again after
    /// a reload that adds one: it said the start's count for as long as it ran.
    @Test func theStatusLineFollowsAReload() throws {
        let socket = NotifySocket(.path)
        let daemon = try BatondProcess(notifySocket: socket.address)
        defer { daemon.stop() }
        func statusLines(until last: String) -> [String] {
            var lines: [String] = []
            while let message = socket.receive() {
                if message.hasPrefix("STATUS=") { lines.append(message) }
                if message == last { break }
            }
            return lines
        }
        let api = "API on 127.0.0.1:\(daemon.port)"
        #expect(statusLines(until: "STATUS=2 zones; \(api)") == ["STATUS=2 zones; \(api)"])
        let path = daemon.directory + "/baton.yaml"
        let yaml = try #require(TextFile.read(path))
        TextFile.write(
            path,
            yaml.replacing(
                "zones:\n", with: "zones:\n  hall: {pcm: tool_null, rate: 48000, clock: system}\n", maxReplacements: 1))
        kill(daemon.pid, SIGHUP)
        #expect(statusLines(until: "STATUS=3 zones; \(api)") == ["STATUS=3 zones; \(api)"])
    }
}
