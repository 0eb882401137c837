import Glibc
import OSThread
import Synchronization

/// `control: {mpd: HOST:PORT}`: MPD's own protocol over TCP. Commands (`pause 1`, `play`) go on a
/// fresh connection each, from the control's queue; a watcher thread keeps a connection in `idle
/// player` and reads `status` after every change, so a pause or play the user gives MPD (mpc, an app)
/// is seen — and told apart from Baton's own by what Baton asked for last.
///
/// The watcher asks MPD again after `checkSeconds` without a change (`noidle`, then `status`): an
/// MPD on another host that lost power leaves a connection that neither closes nor answers, and the
/// player's state would be shown as last seen for ever. While the watcher cannot follow MPD the state
/// is unknown (nil) and `lastError` says why; once it follows MPD again, that error is gone, and so
/// is a command's that could not reach MPD (one MPD refused, `ACK`, stays).
public final class MPDControl: PlayerControl, @unchecked Sendable {
    // @unchecked: the mutable state is behind Mutexes and atomics; the rest is `let`.
    public let host: String
    public let port: UInt16
    private let queue = ControlQueue()
    private let report: @Sendable (String) -> Void
    /// The last command's failure (cleared by the next command that succeeds) and the watcher's
    /// (cleared when it follows MPD again): `lastError` is the watcher's, else the command's.
    private let failure = Mutex<(command: (why: String, refused: Bool)?, watcher: String?)>((nil, nil))
    private let checkMilliseconds: Int32
    private let states: PlayerStateWatch
    private let running = Atomic<Bool>(true)
    /// Posted by `close`: the watcher waits in `idle` on it and MPD's socket.
    private let closing = WakeFD()

    /// `userChanged` runs on the watcher's thread when it keeps a user change (`takeUserChange`).
    public init(
        host: String, port: UInt16, report: @escaping @Sendable (String) -> Void,
        userChanged: @escaping @Sendable () -> Void = {}, checkSeconds: Double = 30
    ) {
        states = PlayerStateWatch(paused: "pause", playing: "play", changed: userChanged)
        checkMilliseconds = Int32(checkSeconds * 1000)
        self.host = host
        self.port = port
        self.report = report
        OSThread.detach(name: "mpd-control") { [self] in watch() }
    }

    public var description: String { "mpd \(host):\(port)" }
    public var lastError: String? { failure.withLock { $0.watcher ?? $0.command?.why } }
    /// MPD's state as last seen: `play`, `pause`, `stop`.
    public var state: String? { states.state }
    public func takeUserChange() -> PlayerChange? { states.takeUserChange() }

    public func pause() { command("pause 1", expecting: "pause") }
    public func play() { command("play", expecting: "play") }
    public func pauseIfPlaying() { if states.isPlaying { pause() } }
    public var followsPlayer: Bool { true }

    public func close() {
        running.store(false, ordering: .releasing)
        closing.post()
        queue.close()
    }

    private func command(_ line: String, expecting state: String) {
        let ticket = states.expect(state)
        // A command replaced before it ran: nothing of it is to be seen.
        queue.run(dropped: { [states] in states.dropExpectation(ticket) }) { [self] in
            do {
                let connection = try MPDConnection(host: host, port: port, timeoutMilliseconds: 2000)
                defer { connection.close() }
                _ = try connection.run(line)
                states.ran(ticket)
                failure.withLock { $0.command = nil }
            } catch {
                let why = "mpd \(host):\(port): \"\(line)\" failed: \(error)"
                failure.withLock { $0.command = (why, (error as? MPDError)?.refused ?? false) }
                states.dropExpectation(ticket)
                report(why)
            }
        }
    }

    /// Follows MPD's player state until closed, reconnecting every second after a failure.
    private func watch() {
        var reported = false
        var lastHeard = monotonicNanoseconds()
        while running.load(ordering: .acquiring) {
            do {
                let connection = try MPDConnection(host: host, port: port, timeoutMilliseconds: 2000)
                defer { connection.close() }
                var following = false
                while running.load(ordering: .acquiring) {
                    let status = try connection.run("status")
                    if let line = status.first(where: { $0.hasPrefix("state: ") }) {
                        states.saw(String(line.dropFirst(7)))
                    }
                    lastHeard = monotonicNanoseconds()
                    if !following {
                        // Followed again: what failed for want of MPD before, the watcher's error and
                        // a command's that could not reach it, is gone (MPD is back: the state it
                        // reports is what is true now); a command MPD itself refused stays.
                        following = true
                        reported = false
                        failure.withLock { f in
                            f.watcher = nil
                            if f.command?.refused == false { f.command = nil }
                        }
                    }
                    // Until the player changes, close() posts `closing` (it used to wake every
                    // 500 ms to look) or `checkMilliseconds` pass; MPD answers `noidle` with what
                    // changed so far.
                    try connection.idle(until: closing, atMost: checkMilliseconds) { [self] in
                        running.load(ordering: .acquiring)
                    }
                }
            } catch {
                // Not known while not followed: the state last seen may be long gone.
                states.forget(lastHeard: lastHeard)
                if !reported {
                    reported = true
                    let why = "mpd \(host):\(port): cannot follow its state: \(error)"
                    failure.withLock { $0.watcher = why }
                    report(why)
                }
                usleep(1_000_000)
            }
        }
    }
}

/// MPD's protocol failed.
struct MPDError: Error, CustomStringConvertible {
    let description: String
    /// MPD answered `ACK`: it refused the command (as opposed to not being reached).
    var refused = false
}

/// One TCP connection to MPD: the greeting, then a command at a time (answers up to `OK` or `ACK`).
/// What comes back is bounded, so that a server that is not MPD (or a broken one) is an error, not
/// memory or a thread taken for good: a line of at most `maxLine` bytes, an answer of at most
/// `maxLines` lines, each answer whole within `answerSeconds`.
final class MPDConnection {
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// SO_RCVTIMEO as said (`2 s`): how long a recv waits for MPD.
    private let receiveTimeout: String
    static let maxLine = 64 << 10
    static let maxLines = 4096
    static let answerSeconds = 5

    init(host: String, port: UInt16, timeoutMilliseconds: Int) throws(MPDError) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &address.sin_addr) == 1 else {
            throw MPDError(description: "\(host) is not an IPv4 address")
        }
        receiveTimeout = Self.seconds(timeoutMilliseconds)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw MPDError(description: "socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: timeoutMilliseconds / 1000, tv_usec: Int(timeoutMilliseconds % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let e = errno
            Glibc.close(fd)
            // SO_SNDTIMEO ran out (a listener whose backlog is full, a host that drops the SYN):
            // strerror read "Operation now in progress", as if it still were.
            if e == EINPROGRESS {
                throw MPDError(description: "did not accept a connection within \(Self.seconds(timeoutMilliseconds))")
            }
            throw MPDError(description: "cannot connect: \(String(cString: strerror(e)))")
        }
        let greeting: String
        do {
            greeting = try readLine(until: Self.deadline())
        } catch {
            Glibc.close(fd)
            throw error
        }
        guard greeting.hasPrefix("OK MPD") else {
            Glibc.close(fd)
            throw MPDError(description: "not MPD (it said \"\(greeting.prefix(60))\")")
        }
    }

    func close() { Glibc.close(fd) }

    /// `2 s`, `0.5 s`: a timeout as said.
    private static func seconds(_ milliseconds: Int) -> String {
        milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(Double(milliseconds) / 1000) s"
    }

    /// Sends one command; the lines before `OK`. `ACK` throws MPD's message.
    func run(_ command: String) throws(MPDError) -> [String] {
        try send(command + "\n")
        return try readAnswer()
    }

    /// `idle player`; returns when the player changed, or (`noidle`) once `keepGoing()` fails after a
    /// post of `wake` (without its descriptor, it looks every 500 ms) or `atMost` ms passed (MPD must
    /// then answer the `noidle` within `answerSeconds`). An answer that names no change, unasked, is
    /// not MPD's (it would have the watcher ask again and again at once).
    func idle(until wake: WakeFD, atMost: Int32, keepGoing: () -> Bool) throws(MPDError) {
        try send("idle player\n")
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = monotonicNanoseconds() + Int(atMost) * 1_000_000
        while keepGoing() && buffer.isEmpty {
            let left = (deadline - monotonicNanoseconds() + 999_999) / 1_000_000
            guard left > 0 else { break }
            if wake.wait(for: fd, timeout: Int32(left), fallback: 500) { break }
        }
        var askedToStop = false
        if buffer.isEmpty && !(poll(&p, 1, 0) > 0) {
            try send("noidle\n")
            askedToStop = true
        }
        let lines = try readAnswer()
        if !askedToStop && !lines.contains(where: { $0.hasPrefix("changed: ") }) {
            throw MPDError(description: "it answered \"idle player\" with no change: not MPD's protocol")
        }
    }

    private static func deadline() -> Int { monotonicNanoseconds() + answerSeconds * 1_000_000_000 }

    private func send(_ text: String) throws(MPDError) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw MPDError(description: "send: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    private func readAnswer() throws(MPDError) -> [String] {
        let deadline = Self.deadline()
        var lines: [String] = []
        while true {
            let line = try readLine(until: deadline)
            if line == "OK" { return lines }
            if line.hasPrefix("ACK") { throw MPDError(description: line, refused: true) }
            guard lines.count < Self.maxLines else {
                throw MPDError(description: "an answer of more than \(Self.maxLines) lines: not MPD's protocol")
            }
            lines.append(line)
        }
    }

    private func readLine(until deadline: Int) throws(MPDError) -> String {
        while true {
            if let end = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeSubrange(...end)
                return line
            }
            guard buffer.count <= Self.maxLine else {
                throw MPDError(description: "a line longer than \(Self.maxLine / 1024) KiB: not MPD's protocol")
            }
            guard monotonicNanoseconds() < deadline else {
                throw MPDError(description: "no whole answer within \(Self.answerSeconds) s")
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let e = errno
                if n == 0 { throw MPDError(description: "MPD closed the connection") }
                // SO_RCVTIMEO ran out: strerror read "Resource temporarily unavailable".
                if e == EAGAIN || e == EWOULDBLOCK { throw MPDError(description: "no answer within \(receiveTimeout)") }
                throw MPDError(description: "no answer (\(String(cString: strerror(e))))")
            }
            buffer += chunk[0..<n]
        }
    }
}
