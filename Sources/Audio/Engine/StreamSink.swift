import AudioCore
import Glibc
import Synchronization

/// Writes a zone's periods into a Snapcast stream source (a TCP `mode=server` source or a FIFO),
/// never blocking and never queueing.
///
/// Every call is non-blocking: the connect is started and later polled; a write the kernel cannot
/// take at once is dropped. Audio that falls due while the server is away (refused, restarting,
/// stalled) is dropped, so when it comes back Baton is again only one period ahead of the server
/// and the listener hears the zone one server `buffer` after it was mixed, as before the outage.
/// With `awaitsServer`, a new connection carries nothing (the audio is dropped) until the server
/// is seen to run — a JSON-RPC call made after the connect was answered (`serverAnswered`) — as
/// a server that listens but does not read yet (snapserver starting) would leave what was written
/// unread in its socket, heard that much later for as long as the connection lasts.
/// Reconnects back off from `backoffNanoseconds` doubling to `maxBackoffNanoseconds`, and start
/// from the first again only after a connection that carried audio for `steadyNanoseconds` broke.
///
/// The socket/FIFO belongs to the output thread; the counters are atomics, read by any thread.
/// The address and path are prepared in `init` (control thread), so the output thread never
/// resolves, converts or allocates.
// @unchecked: the descriptor, state and buffers belong to the output thread alone; what other threads
// read is atomic or immutable.
final class StreamSink: PeriodSink, @unchecked Sendable {
    private enum State { case closed, connecting, awaitingServer, open }

    let spec: StreamSpec
    private let frameBytes: Int
    /// sockaddr_in / sockaddr_in6 for a TCP target; the NUL-terminated path for a FIFO.
    private let address: UnsafeMutableRawPointer
    private let addressLength: socklen_t
    private let family: Int32
    /// Zeros for the pre-fill after a connect.
    private let silence: UnsafeMutableRawPointer
    private let silenceBytes: Int
    /// The rest of a frame a short write left unsent (the stream must stay frame-aligned).
    private let owed: UnsafeMutableRawPointer
    private var owedOffset = 0
    private var owedCount = 0

    private var fd: Int32 = -1
    private var state = State.closed
    private var retryAt = 0
    private var connectStarted = 0
    /// When the connection awaiting the server completed.
    private var openedAt = 0
    /// Since when (monotonic ns) the connection carries audio; 0 while it does not.
    private var carryingSince = 0
    private var backoff: Int

    private let connected = Atomic<Bool>(false)
    private let lastErrorCode = Atomic<Int32>(0)
    private let connectCount = Atomic<Int>(0)
    private let droppedFrameCount = Atomic<Int>(0)
    /// When the latest call the server answered was made (monotonic ns; `Int.min`: none yet).
    private let answeredCallAt = Atomic<Int>(Int.min)
    private let awaiting = Atomic<Bool>(false)
    private let stalledFlag = Atomic<Bool>(false)
    /// Set while the server's last good answer had none of the zone's speakers connected, on its
    /// stream and heard there (`listenersConnected`): what it takes reaches no one.
    private let noListener = Atomic<Bool>(false)
    private let elsewhere = Atomic<Bool>(false)
    private let muted = Atomic<Bool>(false)

    /// Where the zone's audio does not reach its listeners: "on" at the zone frame of the first
    /// frame dropped (no connection, a connection not carrying audio yet, a stall) or, once the
    /// server says none of the zone's speakers is connected, at the frame heard then; "off" at the
    /// first frame sent again to a server with a speaker. Written by the output thread, read by any.
    let outage = Timeline()
    /// Zone frames given to `write` so far: the zone frame of the next one. Output thread.
    private var position = 0
    /// The zone frame where the current run of frames a connection could not take began, and when
    /// (monotonic ns); nil while everything is taken. Output thread.
    private var refusedFrom: (frame: Int, at: Int)?
    private var outageOn = false
    /// Where the last outage ended (zone frame). Output thread.
    private var lastOutageOff = 0
    /// A connection that carried audio broke (`fail` from `.open`): the outage it brings starts at
    /// the frame heard now, not at the one written now. Output thread.
    private var brokeWhileCarrying = false
    /// The connection changed in this `write`: `connectionObserver` is called at its end, once the
    /// outage it brings is recorded. Output thread.
    private var notifyPending = false

    /// A connect that has not completed after this long is abandoned and retried.
    private static let connectTimeout = 2_000_000_000
    /// How long a connection must carry audio for a break of it to be retried at the first backoff.
    static let steadyNanoseconds = 1_000_000_000
    /// How long an open connection may take nothing before the server counts as stalled (the zone
    /// unavailable). A running snapserver reads every chunk (20 ms), and the kernel holds a few
    /// hundred milliseconds in its buffers first, so one refusal is already a server far behind:
    /// this only keeps a moment's hiccup from turning the zone off and on.
    static let stallNanoseconds = 100_000_000

    /// Called on the output thread when the connection changes — it opened (and, with
    /// `awaitsServer`, now waits for the server's answer), carries audio, stalled or took audio
    /// again, or was lost — at the end of that `write`, after `outage` has the change. Must be quick
    /// and real-time safe (a semaphore post). Set before the output thread starts.
    var connectionObserver: (@Sendable () -> Void)?

    /// Prepares the target's address (a numeric IP, or the FIFO path) and the buffers. Control thread.
    /// - Parameter frameBytes: bytes in one frame as written (channels × 2 for S16_LE).
    init(_ spec: StreamSpec, frameBytes: Int) {
        self.spec = spec
        self.frameBytes = frameBytes
        backoff = spec.backoffNanoseconds
        silenceBytes = max(0, spec.prefillFrames) * frameBytes
        silence = .allocate(byteCount: max(silenceBytes, 1), alignment: 16)
        silence.initializeMemory(as: UInt8.self, repeating: 0, count: max(silenceBytes, 1))
        owed = .allocate(byteCount: max(frameBytes, 1), alignment: 16)
        switch spec.target {
        case .tcp(let host, let port):
            let storage = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<sockaddr_in6>.size, alignment: 16)
            storage.initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<sockaddr_in6>.size)
            var v4 = sockaddr_in()
            var v6 = sockaddr_in6()
            if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
                v4.sin_family = sa_family_t(AF_INET)
                v4.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
                storage.storeBytes(of: v4, as: sockaddr_in.self)
                addressLength = socklen_t(MemoryLayout<sockaddr_in>.size)
                family = AF_INET
            } else if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
                v6.sin6_family = sa_family_t(AF_INET6)
                v6.sin6_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
                storage.storeBytes(of: v6, as: sockaddr_in6.self)
                addressLength = socklen_t(MemoryLayout<sockaddr_in6>.size)
                family = AF_INET6
            } else {
                // Not numeric (the configuration checks this): every connect fails with EINVAL.
                addressLength = 0
                family = -1
            }
            address = storage
        case .fifo(let path):
            let bytes = Array(path.utf8) + [0]
            let storage = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
            storage.copyMemory(from: bytes, byteCount: bytes.count)
            address = storage
            addressLength = 0
            family = AF_UNIX
        }
    }

    deinit {
        close()
        address.deallocate()
        silence.deallocate()
        owed.deallocate()
    }

    // MARK: Any thread

    /// True while the server takes the zone's audio. Any thread.
    var isConnected: Bool { connected.load(ordering: .acquiring) }
    /// The errno of the last failed connect or write (0 after a successful connect). Any thread.
    var lastError: Int32 { lastErrorCode.load(ordering: .acquiring) }
    /// Connections that carried audio so far. Any thread.
    var connects: Int { connectCount.load(ordering: .acquiring) }
    /// Frames mixed but dropped (no server, or it did not keep up). Any thread.
    var droppedFrames: Int { droppedFrameCount.load(ordering: .acquiring) }
    /// True while a connection waits for `serverAnswered` before it carries audio. Any thread.
    var isAwaitingServer: Bool { awaiting.load(ordering: .acquiring) }
    /// True while the connection is open but the server has taken nothing for `stallNanoseconds`
    /// or more (snapserver stopped or hung without closing); a write it takes part of ends it. Any thread.
    var isStalled: Bool { stalledFlag.load(ordering: .acquiring) }

    /// True while the server's last good answer had none of the zone's speakers heard (connected,
    /// on its stream, not muted). Any thread.
    var hasNoListener: Bool { noListener.load(ordering: .acquiring) }

    /// With no listener (`hasNoListener`): whether the zone's speakers are connected to the server
    /// but listen to another stream (not moved to the zone's). Any thread.
    var listenersElsewhere: Bool { elsewhere.load(ordering: .acquiring) }

    /// With no listener (`hasNoListener`): whether the zone's speakers are connected on its stream
    /// but every one is muted there (muted, at 0 %, or in a muted group). Any thread.
    var listenersMuted: Bool { muted.load(ordering: .acquiring) }

    /// What the server's latest answer says of the zone's speakers: whether any is connected,
    /// listens to the zone's stream and is heard there, and, if none is, whether some are connected
    /// elsewhere, or on the stream but muted. The output thread follows it at its next period. Any
    /// thread.
    func listenersConnected(_ any: Bool, elsewhere: Bool, muted: Bool) {
        self.elsewhere.store(!any && elsewhere, ordering: .releasing)
        self.muted.store(!any && muted, ordering: .releasing)
        noListener.store(!any, ordering: .releasing)
    }

    /// The server answered a call made at `callStartedAt` (monotonic ns): it runs, and reads what a
    /// connection made before that call is sent. Any thread.
    func serverAnswered(callStartedAt: Int) {
        var seen = answeredCallAt.load(ordering: .relaxed)
        while seen < callStartedAt {
            let (exchanged, original) = answeredCallAt.compareExchange(
                expected: seen, desired: callStartedAt, ordering: .acquiringAndReleasing)
            if exchanged { break }
            seen = original
        }
    }

    // MARK: Output thread

    /// Blocks SIGPIPE on the calling thread, so a FIFO whose reader went away gives EPIPE instead of
    /// killing the process (sockets use MSG_NOSIGNAL). Output thread, once before writing.
    func prepareThread() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Sends the period if the server is there, else drops it; advances the connection by one
    /// non-blocking step. Always takes every frame (the zone's clock goes on). Output thread.
    func write(_ bytes: UnsafeRawPointer, frames: Int) -> Int {
        let now = monotonicNanoseconds()
        let sent = send(bytes, frames: frames, now: now)
        track(sent: sent, of: frames, now: now)
        position += frames
        // Once the outage is recorded: whoever is woken (the keeper, the monitor) reads it as it is.
        if notifyPending {
            notifyPending = false
            connectionObserver?()
        }
        return frames
    }

    /// Sends what the server takes of the period; how many of its frames that was (the rest is
    /// dropped and counted).
    private func send(_ bytes: UnsafeRawPointer, frames: Int, now: Int) -> Int {
        if state == .closed && now >= retryAt { startConnect(now) }
        if state == .connecting { finishConnect(now) }
        if state == .awaitingServer {
            if answeredCallAt.load(ordering: .acquiring) >= openedAt {
                carryAudio(at: now)
            } else if let gone = hungUp() {
                // Nothing is sent while waiting, so no write would notice a server that went away.
                fail(gone, at: now)
            }
        }
        guard state == .open else {
            droppedFrameCount.add(frames, ordering: .relaxed)
            return 0
        }
        // First the rest of a frame a short write split, then the period.
        if owedCount > 0 {
            let n = send(owed + owedOffset, owedCount)
            if n > 0 {
                owedOffset += n
                owedCount -= n
            }
            if owedCount > 0 || state != .open {
                droppedFrameCount.add(frames, ordering: .relaxed)
                return 0
            }
        }
        let total = frames * frameBytes
        let n = send(bytes, total)
        guard n < total else { return frames }
        let sent = max(n, 0)
        let split = sent % frameBytes
        if split > 0 {
            owedOffset = 0
            owedCount = frameBytes - split
            owed.copyMemory(from: bytes + sent, byteCount: owedCount)
        }
        let whole = (sent + frameBytes - 1) / frameBytes
        droppedFrameCount.add(frames - whole, ordering: .relaxed)
        return whole
    }

    /// Follows where the audio stops and starts reaching the server (`outage`, `isStalled`), after
    /// a period of which `sent` of `frames` were sent.
    private func track(sent: Int, of frames: Int, now: Int) {
        let unheard = noListener.load(ordering: .acquiring)
        if sent > 0 && state == .open {
            // The server takes audio (again): heard from the first frame it took, by a speaker.
            if outageOn && !unheard {
                outageOn = false
                lastOutageOff = position
                outage.record(on: nil, off: position)
                notifyPending = true  // what is held there goes on (a speaker back wakes nothing else)
            }
            if stalledFlag.load(ordering: .relaxed) {
                stalledFlag.store(false, ordering: .releasing)
                connected.store(true, ordering: .releasing)
                notifyPending = true
            }
        }
        if unheard && state == .open && !outageOn {
            // No speaker is connected: what the server plays reaches no one — from the frame heard
            // now (the speakers left at the latest by the server's answer), as a server that died.
            outageOn = true
            outage.record(on: max(position - spec.latencyFrames, lastOutageOff), off: nil)
            notifyPending = true
        }
        if sent == frames {
            refusedFrom = nil
            return
        }
        let first = position + sent
        guard state == .open else {
            // No connection carries audio: not heard from the first frame dropped.
            refusedFrom = nil
            if !outageOn {
                outageOn = true
                // A server that died took its buffer with it: the speakers fell silent now, at
                // the frame heard now (a buffer before the one written), not when the frames
                // written last would have come out — what plays there said "playing" for a
                // buffer's length (a second by default) in silence.
                let from = brokeWhileCarrying ? max(first - spec.latencyFrames, lastOutageOff) : first
                outage.record(on: from, off: nil)
            }
            brokeWhileCarrying = false
            return
        }
        // A stall is a run of periods it took nothing of: one it took some of starts the run again.
        if sent > 0 || refusedFrom == nil { refusedFrom = (first, now) }
        if !stalledFlag.load(ordering: .relaxed), let run = refusedFrom, now - run.at >= Self.stallNanoseconds {
            if !outageOn {
                outageOn = true
                outage.record(on: run.frame, off: nil)
            }
            stalledFlag.store(true, ordering: .releasing)
            connected.store(false, ordering: .releasing)
            notifyPending = true
        }
    }

    /// Never needed: a stream sink reports no errors to the loop. Output thread.
    func recover(_ code: Int32) -> Int32 { 0 }

    /// The server's buffer, in frames. Output thread (any thread in fact: it is constant).
    func delay() -> Int? { spec.latencyFrames }

    /// Nothing is held back beyond the server's buffer.
    var hiddenDelayFrames: Int { 0 }

    /// Closes the connection. Output thread, or the control thread after it stopped.
    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        state = .closed
        owedCount = 0
        awaiting.store(false, ordering: .releasing)
        stalledFlag.store(false, ordering: .releasing)
        connected.store(false, ordering: .releasing)
    }

    /// Whether the server closed or reset the connection (it never sends anything, so anything
    /// readable is its end); the error to report, nil while it is open. One non-blocking `poll`.
    private func hungUp() -> Int32? {
        // POLLRDHUP (0x2000, the peer shut its side) is a GNU flag Swift does not import.
        var p = pollfd(fd: fd, events: Int16(POLLIN) | 0x2000, revents: 0)
        guard poll(&p, 1, 0) > 0 else { return nil }
        if p.revents & Int16(POLLERR) != 0 {
            let error = socketError()
            return error != 0 ? error : EPIPE
        }
        return p.revents & (Int16(POLLIN) | Int16(POLLHUP) | 0x2000) != 0 ? ECONNRESET : nil
    }

    /// The socket's pending error (SO_ERROR, which reading clears); 0 when there is none.
    private func socketError() -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error
    }

    /// Writes what the kernel takes now; 0 when it takes nothing; -1 after the connection failed
    /// (closed here, retried after the backoff).
    private func send(_ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        while true {
            let n: Int
            if family == AF_UNIX {
                n = Glibc.write(fd, bytes, count)
            } else {
                n = Glibc.send(fd, bytes, count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n >= 0 { return n }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return 0 }
            fail(e, at: monotonicNanoseconds())
            return -1
        }
    }

    private func startConnect(_ now: Int) {
        switch spec.target {
        case .fifo:
            let f = open(address.assumingMemoryBound(to: CChar.self), O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            guard f >= 0 else { return failConnect(errno, at: now) }
            var info = stat()
            guard fstat(f, &info) == 0, (info.st_mode & S_IFMT) == S_IFIFO else {
                Glibc.close(f)
                return failConnect(ENOTSUP, at: now)  // not a FIFO: never write into a regular file
            }
            // A small pipe: what the server has not read yet is latency (64 KiB would be 341 ms).
            // F_SETPIPE_SZ (1031) is a GNU fcntl Swift does not import.
            _ = fcntl(f, 1031, Int32(max(4096, 4 * spec.prefillFrames * frameBytes)))
            fd = f
            opened(at: now)
        case .tcp:
            guard addressLength > 0 else { return failConnect(EINVAL, at: now) }
            let s = socket(
                family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard s >= 0 else { return failConnect(errno, at: now) }
            // A small send buffer: what waits in it is latency if the server stalls.
            var size = Int32(max(4096, 4 * spec.prefillFrames * frameBytes))
            setsockopt(s, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            var one: Int32 = 1
            setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            fd = s
            let rc = connect(s, address.assumingMemoryBound(to: sockaddr.self), addressLength)
            if rc == 0 {
                connectedTCP(at: now)
            } else if errno == EINPROGRESS || errno == EINTR {
                state = .connecting
                connectStarted = now
            } else {
                let e = errno
                Glibc.close(s)
                fd = -1
                failConnect(e, at: now)
            }
        }
    }

    private func finishConnect(_ now: Int) {
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let ready = poll(&p, 1, 0)
        if ready == 0 {
            if now - connectStarted > Self.connectTimeout { fail(ETIMEDOUT, at: now) }
            return
        }
        let error = socketError()
        if ready < 0 || error != 0 { return fail(error != 0 ? error : errno, at: now) }
        connectedTCP(at: now)
    }

    /// A TCP connect completed: open, unless it reached itself.
    private func connectedTCP(at now: Int) {
        // With nothing listening on a port of this host's ephemeral range, the connect may pick
        // that very port as its own and connect to itself (TCP simultaneous open): it succeeds and
        // every byte comes back, so the zone would say "available" with no server. Refused instead.
        if Self.isConnectedToItself(fd) { return fail(ECONNREFUSED, at: now) }
        opened(at: now)
    }

    /// Whether the socket's local and peer addresses are the same. Any thread; no allocation.
    static func isConnectedToItself(_ fd: Int32) -> Bool {
        var local = sockaddr_storage()
        var peer = sockaddr_storage()
        var localLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        var peerLength = localLength
        let named = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &localLength) == 0 }
        }
        let peered = withUnsafeMutablePointer(to: &peer) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &peerLength) == 0 }
        }
        guard named, peered, localLength == peerLength else { return false }
        return memcmp(&local, &peer, Int(localLength)) == 0
    }

    /// A connect succeeded. The backoff stays: it starts again only once a connection has carried
    /// audio for `steadyNanoseconds` (`fail`) — a peer that accepts and closes at once (Docker's
    /// proxy while the server's container is down) was retried every 0.1 s for ever, the zone
    /// flipping available and unavailable ten times a second.
    private func opened(at now: Int) {
        owedCount = 0
        lastErrorCode.store(0, ordering: .relaxed)
        guard spec.awaitsServer else { return carryAudio(at: now) }
        state = .awaitingServer
        openedAt = now
        awaiting.store(true, ordering: .releasing)
        notifyPending = true
    }

    /// The connection carries audio from now on: the pre-fill first.
    private func carryAudio(at now: Int) {
        state = .open
        carryingSince = now
        awaiting.store(false, ordering: .releasing)
        connectCount.add(1, ordering: .relaxed)
        connected.store(true, ordering: .releasing)
        if silenceBytes > 0 {
            // A short send that splits a frame owes its rest, as a period's does: left out, every
            // byte after it was shifted — noise at the speakers until a reconnect.
            let split = max(0, send(silence, silenceBytes)) % frameBytes
            if split > 0 && state == .open {
                owedOffset = 0
                owedCount = frameBytes - split
                owed.copyMemory(from: silence, byteCount: owedCount)
            }
        }
        notifyPending = true
    }

    /// The connection failed or broke: close it and retry after the backoff.
    private func fail(_ code: Int32, at now: Int) {
        let changes = state != .closed && state != .connecting
        if state == .open { brokeWhileCarrying = true }
        // A connection that carried audio steadily broke: the server was there, retried soon again.
        if state == .open && now - carryingSince >= Self.steadyNanoseconds { backoff = spec.backoffNanoseconds }
        carryingSince = 0
        close()
        failConnect(code, at: now)
        if changes { notifyPending = true }
    }

    private func failConnect(_ code: Int32, at now: Int) {
        lastErrorCode.store(code, ordering: .releasing)
        retryAt = now + backoff
        backoff = min(backoff * 2, spec.maxBackoffNanoseconds)
    }
}
