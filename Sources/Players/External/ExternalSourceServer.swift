import Glibc
import OSThread
import Synchronization

/// The Unix socket the `baton` ALSA PCM connects to (`external-sources.socket`): it accepts
/// programs, checks the source each one names (OPEN) and runs an `ExternalStream` per connection.
///
/// Threads: an accept thread; per connection, one thread for the handshake and then the stream. The
/// `lookup` and `onFrames` closures run on a connection's thread: `lookup` answers quickly; `onFrames`
/// (the program's first frames, the moment to admit it) may take the control plane's lock.
public final class ExternalSourceServer: @unchecked Sendable {
    // @unchecked: `listener` and `thread` are set in start and cleared in stop (control thread);
    // `streams` and `running` are the shared state.
    public let path: String
    /// The socket file `start` made (device, inode): the one `stop` removes.
    private var madeSocket: (device: dev_t, inode: ino_t)?
    private let logger: Logger
    private let lookup: @Sendable (String) -> String?
    private let onFrames: @Sendable (ExternalStream) -> Void
    private var listener: Int32 = -1
    private var thread: OSThread?
    /// Posted by `stop`: the accept thread sleeps in poll on it and the socket (it used to wake every
    /// 50 ms to look at `running`: 20 wake-ups a second, all day, with nothing playing).
    private let stopping = WakeFD()
    private let running = Atomic<Bool>(false)
    private let streams = Mutex<[ObjectIdentifier: ExternalStream]>([:])
    private let handshakes = Atomic<Int>(0)
    /// At most this many connections at once, handshakes and streams together: each has a thread
    /// and a buffer of up to `ExternalWire.maxBufferBytes`, so without a bound any program that may
    /// open the socket could take batond's memory. A speaker has a few players, each one connection
    /// at a time (and one more waiting while another program plays its source).
    public static let maxConnections = 32
    /// The whole OPEN message must arrive within this (ns), however slowly it trickles.
    static let openNanoseconds = 3_000_000_000
    /// After OPEN, the FORMAT must arrive within this (ns) by default (the plugin sends it at
    /// hw_params, right after it connected): else the connection is closed
    /// (`ExternalStream.formatNanoseconds`).
    public static let formatNanoseconds = 30_000_000_000
    private let formatNanoseconds: Int

    /// Why the socket could not be set up.
    public struct SetupError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// - Parameters:
    ///   - lookup: nil when the name is a configured external source, else the sentence to refuse it with.
    ///   - formatNanoseconds: how long a connection may wait after its OPEN before its FORMAT.
    ///   - onFrames: a stream sent its first frames (again, after it was detached).
    public init(
        path: String, logger: Logger, lookup: @escaping @Sendable (String) -> String?,
        formatNanoseconds: Int = ExternalSourceServer.formatNanoseconds,
        onFrames: @escaping @Sendable (ExternalStream) -> Void
    ) {
        self.formatNanoseconds = formatNanoseconds
        self.path = path
        self.logger = logger
        self.lookup = lookup
        self.onFrames = onFrames
    }

    /// Creates the socket (replacing a stale one), mode 0660 and group `group` when it exists, and
    /// starts accepting. Control thread.
    public func start(group: String = "audio") throws(SetupError) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SetupError(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw SetupError(
                description:
                    "socket path \(path) is longer than \(MemoryLayout.size(ofValue: address.sun_path) - 1) bytes")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        if let directory = path.lastIndex(of: "/").map({ String(path[..<$0]) }), !directory.isEmpty {
            _ = FileIO.makeDirectory(directory, mode: 0o755)
        }
        // Only a socket nobody listens on is replaced (one left by a batond that was killed): a
        // second batond on the same path deleted the running one's socket — every player then
        // failed to reach it, its status saying all was well — and a path naming a file deleted it.
        var existing = stat()
        if lstat(path, &existing) == 0 {
            guard existing.st_mode & S_IFMT == S_IFSOCK else {
                close(fd)
                throw SetupError(
                    description: "\(path) is not a socket: batond does not replace it (external-sources.socket)")
            }
            // Asked on a socket of its own, without blocking (a listener whose backlog is full,
            // a batond that hangs, would hold the start): only a refusal means nobody listens.
            let probe = socket(
                AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
            var why = probe < 0 ? errno : 0
            if probe >= 0 {
                let answered = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
                if answered != 0 { why = errno }
                close(probe)
            }
            guard probe >= 0, why == ECONNREFUSED else {
                close(fd)
                let listens = probe >= 0 && (why == 0 || why == EAGAIN)
                throw SetupError(
                    description: listens
                        ? "another program listens on \(path) (another batond?): it is left to it (external-sources.socket)"
                        : "cannot tell whether another program listens on \(path) (\(String(cString: strerror(why)))): it is left as it is (external-sources.socket)"
                )
            }
            unlink(path)
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let e = errno
            close(fd)
            throw SetupError(description: "cannot listen on \(path): \(String(cString: strerror(e)))")
        }
        // What this server made, so that its stop removes only that: not a socket another batond
        // made there since.
        var made = stat()
        if stat(path, &made) == 0 { madeSocket = (made.st_dev, made.st_ino) }
        // Said when it fails (a system-call filter without chown, no such group): the socket was
        // left to batond's own group, every program of the players' group refused, and the log
        // said only that it listened.
        if chmod(path, 0o660) != 0 {
            logger.warning("external sources: cannot make \(path) 0660: \(String(cString: strerror(errno)))")
        }
        if let g = getgrnam(group) {
            if chown(path, getuid(), g.pointee.gr_gid) != 0 {
                logger.warning(
                    "external sources: cannot give \(path) to group \(group): \(String(cString: strerror(errno))); "
                        + "only programs in batond's own group can play through it")
            }
        } else {
            logger.warning(
                "external sources: there is no group \(group): only programs in batond's own group can play through \(path)"
            )
        }
        listener = fd
        running.store(true, ordering: .releasing)
        thread = OSThread.start(name: "external-accept") { [self] in acceptLoop(fd) }
        logger.info("external sources: listening on \(path)")
    }

    /// Stops accepting, closes every connection (their programs get an error) and removes the socket.
    /// Control thread.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        stopping.post()
        thread?.join()
        thread = nil
        close(listener)
        var now = stat()
        if let made = madeSocket, stat(path, &now) == 0, now.st_dev == made.device, now.st_ino == made.inode {
            unlink(path)
        }
        for s in streams.withLock({ Array($0.values) }) { s.stop() }
        let deadline = monotonicNanoseconds() + 500_000_000
        while (!streams.withLock { $0.isEmpty } || handshakes.load(ordering: .acquiring) > 0)
            && monotonicNanoseconds() < deadline
        {
            usleep(1_000)
        }
    }

    /// The connections open now. Any thread.
    public var connections: [ExternalStream] { streams.withLock { Array($0.values) } }

    /// How long a send to a program may wait for it to read (`SO_SNDTIMEO`): past that the program
    /// is taken to be gone (`ExternalStream.send`). A POSITION is never waited for: it is sent only
    /// when there is room, and the next one says as much.
    static let sendTimeoutSeconds = 2

    private func acceptLoop(_ fd: Int32) {
        while running.load(ordering: .acquiring) {
            guard stopping.wait(for: fd, timeout: -1, fallback: 50) else { continue }
            let client = accept(fd, nil, nil)
            guard client >= 0 else {
                // Out of descriptors or memory: the listener stays readable, and going straight
                // back to poll took a whole core (beside the output threads), silently. Said once
                // per run of failures; a tenth of a second between tries (a stop ends it).
                let why = errno
                if why != EINTR && why != ECONNABORTED && why != EAGAIN {
                    if !acceptFailing {
                        logger.warning(
                            "external sources: cannot accept a program's connection: \(String(cString: strerror(why))); trying again every 0.1 s"
                        )
                    }
                    acceptFailing = true
                    _ = stopping.wait(for: -1, timeout: 100, fallback: 100)
                }
                continue
            }
            if acceptFailing {
                logger.info("external sources: accepting connections again")
                acceptFailing = false
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            // A program that stops reading cannot hold its thread in a send for longer than this.
            var timeout = timeval(tv_sec: Self.sendTimeoutSeconds, tv_usec: 0)
            _ = setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let open = handshakes.load(ordering: .acquiring) + streams.withLock { $0.count }
            guard open < Self.maxConnections else {
                refuseBusy(client)
                continue
            }
            handshakes.add(1, ordering: .acquiringAndReleasing)
            OSThread.detach(name: "external-stream") { [self] in
                serve(client)
            }
        }
    }

    /// One connection too many: an ERROR with the sentence (the plugin prints it), at most one warning
    /// a second however many there are, and closed. On the accept thread: the send cannot block (a
    /// new socket's buffer is empty).
    private var busyWarnedAt: Int?
    /// `accept` failed last time (accept thread).
    private var acceptFailing = false
    private var busySinceWarning = 0
    private func refuseBusy(_ fd: Int32) {
        let peer = ExternalPeer.of(socket: fd)
        let why = "batond has \(Self.maxConnections) connections from programs already; try again later"
        sendAll(fd, ExternalWire.error(why))
        close(fd)
        busySinceWarning += 1
        let now = monotonicNanoseconds()
        if busyWarnedAt.map({ now - $0 >= 1_000_000_000 }) ?? true {
            logger.warning("external sources: refused \(peer) and \(busySinceWarning - 1) more: \(why)")
            busyWarnedAt = now
            busySinceWarning = 0
        }
    }

    /// How a handshake read ended without the bytes: the deadline passed, or the peer closed (or
    /// its connection failed) — a probe, a second batond's start-up check, a program killed.
    enum ReadFailure: Error {
        case timedOut
        case closed
    }

    /// Why a handshake ended without a source name: the peer closed (said at info, nothing sent),
    /// or the sentence to log and send it.
    enum OpenFailure: Error {
        case closed(String)
        case refused(ExternalStreamError)
    }

    /// The handshake (OPEN → OK or ERROR), then the stream until it ends.
    private func serve(_ fd: Int32) {
        let peer = ExternalPeer.of(socket: fd)
        let opened = readOpen(fd)
        guard case .success(let name) = opened else {
            switch opened {
            case .failure(.closed(let what)):
                // Nobody to tell: an ERROR on a closed socket, and a warning about a timeout that
                // never was ("no OPEN message within 3 s" for a peer that left at once).
                logger.info("external sources: \(peer) \(what)")
            case .failure(.refused(let error)):
                logger.warning("external sources: \(peer): \(error)")
                sendAll(fd, ExternalWire.error(error.description))
            case .success: break
            }
            close(fd)
            handshakes.subtract(1, ordering: .acquiringAndReleasing)
            return
        }
        if let why = lookup(name) {
            logger.warning("external sources: \(peer) asked for \(why)")
            sendAll(fd, ExternalWire.error(why))
            close(fd)
            handshakes.subtract(1, ordering: .acquiringAndReleasing)
            return
        }
        sendAll(fd, ExternalWire.message(.ok))
        let stream = ExternalStream(
            name: name, peer: peer, fd: fd, logger: logger, formatNanoseconds: formatNanoseconds, onFrames: onFrames)
        streams.withLock { $0[ObjectIdentifier(stream)] = stream }
        handshakes.subtract(1, ordering: .acquiringAndReleasing)
        logger.info("external \(name): \(peer) connected")
        if !running.load(ordering: .acquiring) { stream.stop() }
        stream.run()
        streams.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(stream)) }
        logger.info("external \(name): \(peer) disconnected")
    }

    /// Reads the OPEN message (the whole of it within 3 s): the source's name.
    private func readOpen(_ fd: Int32) -> Result<String, OpenFailure> {
        let deadline = monotonicNanoseconds() + Self.openNanoseconds
        let header: [UInt8]
        switch readExactly(fd, 8, before: deadline) {
        case .success(let bytes): header = bytes
        case .failure(.closed): return .failure(.closed("closed its connection before sending OPEN"))
        case .failure(.timedOut): return .failure(.refused(.protocolViolation("no OPEN message within 3 s")))
        }
        let type = ExternalWire.u32(header[...], at: 0)
        let length = Int(ExternalWire.u32(header[...], at: 4))
        guard type == ExternalWire.Message.open.rawValue else {
            return .failure(.refused(.protocolViolation("the first message must be OPEN, not type \(type)")))
        }
        guard (5...260).contains(length) else {
            return .failure(.refused(.protocolViolation("OPEN with a payload of \(length) bytes")))
        }
        let payload: [UInt8]
        switch readExactly(fd, length, before: deadline) {
        case .success(let bytes): payload = bytes
        case .failure(.closed): return .failure(.closed("closed its connection inside its OPEN"))
        case .failure(.timedOut): return .failure(.refused(.protocolViolation("no whole OPEN message within 3 s")))
        }
        let version = ExternalWire.u32(payload[...], at: 0)
        guard version == ExternalWire.version else {
            return .failure(
                .refused(.protocolViolation("protocol version \(version); this batond speaks \(ExternalWire.version)")))
        }
        guard let name = String(validating: payload[4...], as: UTF8.self) else {
            return .failure(.refused(.protocolViolation("the source name is not UTF-8")))
        }
        // Configured names are letters, digits, - and _; anything else (a newline, a NUL) would
        // go into the log and the refusal as it is, so it is refused here, escaped.
        let allowed = name.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_")
        }
        guard allowed else {
            return .failure(
                .refused(.protocolViolation("the source name \(name.debugDescription) is not letters, digits, - and _"))
            )
        }
        return .success(name)
    }

    /// `count` bytes; `closed` when the peer closes or its connection fails, `timedOut` when
    /// `deadline` (CLOCK_MONOTONIC ns) passes first.
    private func readExactly(_ fd: Int32, _ count: Int, before deadline: Int) -> Result<[UInt8], ReadFailure> {
        var bytes = [UInt8](repeating: 0, count: count)
        var have = 0
        while have < count {
            let left = deadline - monotonicNanoseconds()
            guard left > 0 else { return .failure(.timedOut) }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min(left / 1_000_000 + 1, 60_000)))
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { return .failure(.timedOut) }
            guard ready > 0 else { return .failure(.closed) }
            let n = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + have, count - have, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return .failure(.closed) }
            have += n
        }
        return .success(bytes)
    }

    private func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}
