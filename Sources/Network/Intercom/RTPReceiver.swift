import AudioCore
import Glibc
import OpusCodec
import Synchronization

/// Receives one Opus RTP stream on a UDP port: the intercom's `call` source.
///
/// A receive thread reads datagrams, feeds the `JitterBuffer` and runs the `CallMonitor`; the consumer
/// pulls decoded 48 kHz audio with `pull(into:now:)` (or lets an `IntercomPump` do it for zone rings).
///
/// Threads:
/// - `init`, `start`, `stop`, `counters`, `delays`, `isInCall`, `endCall`: any thread (the control thread).
/// - `pull`: one consumer thread at a time (the pump's thread). Never blocks for long: it takes the
///   state mutex for a few microseconds per packet and decodes outside it. Not for the real-time
///   output thread (it decodes and takes a mutex).
/// - `onEvent` is called on the receive thread only, in order: `callStarted`, then one `callEnded`.
///   It must return quickly and must not call `stop` (which joins that thread).
///
/// Memory: the jitter buffer's slots (192 000 bytes by default) plus one packet and 120 ms of PCM;
/// all allocated in `init`.
// @unchecked: mutable state is in `state` (a mutex) or atomics; `playout` is used by the one consumer
// thread only (documented above); `thread` is touched by `start` and `stop` on the control thread;
// `joinTries` by `init`, then by the receive thread only.
public final class RTPReceiver: @unchecked Sendable {
    public struct Configuration: Sendable, Equatable {
        /// The IPv4 address to bind (e.g. "0.0.0.0", "127.0.0.1"); a multicast group (224.0.0.0/4,
        /// e.g. "239.1.2.3") is bound and joined on the interface the kernel routes it to — and,
        /// while no interface routes it (the network is not up yet), joined again every
        /// `joinRetry` (`waitingForGroup`).
        public var host: String
        /// The UDP port; 0 picks a free one (see `port`).
        public var port: UInt16
        /// Output channels of the decoded audio (1 or 2); libopus mixes the stream to this.
        public var channels: Int
        /// No packets for this long ends the call (ns).
        public var silenceTimeout: Int
        public var jitter: JitterBuffer.Configuration
        /// How often a multicast group not yet joined is tried again (ns).
        public var joinRetry: Int

        public init(
            host: String = "0.0.0.0", port: UInt16 = 5004, channels: Int = 1,
            silenceTimeout: Int = 2_000_000_000, jitter: JitterBuffer.Configuration = .init(),
            joinRetry: Int = 5_000_000_000
        ) {
            self.host = host
            self.port = port
            self.channels = channels
            self.silenceTimeout = silenceTimeout
            self.jitter = jitter
            self.joinRetry = joinRetry
        }
    }

    struct State {
        var jitter: JitterBuffer
        var monitor: CallMonitor
        var endRequested = false
        /// The last datagram refused: its sender and why (said by `lastRefused`; kept as values, so
        /// that a flood of them costs no text per datagram under the lock).
        var lastRefused: (from: sockaddr_in, why: Refusal)?
        /// Why the multicast group is not joined yet (the last join's errno) and when it is tried
        /// again (ns); nil: joined, or not a group.
        var unjoined: (errno: Int32, retry: Int)?
    }

    public let configuration: Configuration
    /// The UDP port actually bound.
    public let port: UInt16
    private let socket: Int32
    private let clock: @Sendable () -> Int
    private let onEvent: @Sendable (CallEvent) -> Void
    private let onJoined: @Sendable (_ tries: Int) -> Void
    /// The multicast group to join (nil: the address is not one).
    private let group: in_addr?
    /// Joins tried so far (the receive thread's, after `init`'s).
    private var joinTries = 1
    private let state: Mutex<State>
    private let playout: PacketPlayout
    private let running = Atomic<Bool>(false)
    private var thread: OSThread?
    /// Posted by `endCall` and `stop`: the receive thread sleeps in poll on it and the socket.
    private let pokes = WakeFD()

    /// Binds the socket (so a busy port fails here) and allocates everything; call `start` to receive.
    /// `clock` gives monotonic ns (the same clock as the `now` passed to `pull`). A multicast group
    /// that cannot be joined yet is no error: the receive thread tries again every `joinRetry`
    /// (`waitingForGroup` says why meanwhile) and calls `onJoined` with the joins tried once one
    /// passes.
    public init(
        configuration: Configuration, clock: @escaping @Sendable () -> Int = monotonicNanoseconds,
        onJoined: @escaping @Sendable (_ tries: Int) -> Void = { _ in },
        onEvent: @escaping @Sendable (CallEvent) -> Void
    ) throws(IntercomError) {
        do {
            playout = try PacketPlayout(
                channels: configuration.channels,
                maximumPayload: configuration.jitter.maximumPayload)
        } catch {
            throw .decoder(error)
        }
        let (socket, port, group) = try Self.bind(host: configuration.host, port: configuration.port)
        self.configuration = configuration
        self.socket = socket
        self.port = port
        self.group = group
        self.clock = clock
        self.onJoined = onJoined
        self.onEvent = onEvent
        // A new stream takes over within half the silence timeout: one that restarts with a new
        // SSRC, no pause, was foreign for the whole takeover (500 ms) and ended a call with a
        // shorter timeout (from 200 ms) though its packets kept coming.
        var jitter = configuration.jitter
        jitter.sourceTakeover = min(jitter.sourceTakeover, configuration.silenceTimeout / 2)
        state = Mutex(
            State(
                jitter: JitterBuffer(configuration: jitter),
                monitor: CallMonitor(silenceTimeout: configuration.silenceTimeout)))
        if let group {
            let e = Self.join(socket, group)
            if e != 0 { state.withLock { $0.unjoined = (e, clock() + configuration.joinRetry) } }
        }
    }

    deinit {
        stop()
        close(socket)
    }

    /// Starts the receive thread. Control thread; idempotent.
    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        thread = OSThread.start(name: "rtp") { [self] in receiveLoop() }
    }

    /// Stops the receive thread and waits for it. Control thread; idempotent. A call in progress gets
    /// no `callEnded`: the owner is going away.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing), let thread else { return }
        pokes.post()
        thread.join()
        self.thread = nil
    }

    /// Ends the current call (hang-up), if there is one. The receive thread reports
    /// `callEnded(.explicit)` at once; packets of the same stream are then ignored (counted foreign)
    /// until it has been silent for the silence timeout. Any thread.
    public func endCall() {
        state.withLock { $0.endRequested = true }
        pokes.post()
    }

    /// A call was started by request: it is timed from now, as if a packet had come (one whose
    /// packets never come ends after the silence timeout, as any call), and a stream ignored since
    /// a hang-up is the call's again. Cancels a hang-up not yet carried out (it was the call
    /// before). Any thread.
    public func expectCall() {
        let now = clock()
        state.withLock { s in
            s.endRequested = false
            s.monitor.expect(now: now)
            s.jitter.ignored = nil
        }
        pokes.post()  // the receive thread's sleep is timed from the call now
    }

    /// Sets what the consumer takes from the jitter buffer at once (ns) and the delays that follow
    /// (`JitterBuffer.setConsumerBurst`): the call's pump, at each call, from its zones' outputs. Any
    /// thread.
    public func setConsumerBurst(_ burst: Int) {
        state.withLock { $0.jitter.setConsumerBurst(burst) }
    }

    /// The last datagram refused (malformed, or not the call's), said: its sender and why —
    /// `192.168.1.20:5004: not an Opus packet: …`. Any thread (a snapshot).
    public var lastRefused: String? {
        state.withLock { $0.lastRefused }.map { "\(Self.describe($0.from)): \($0.why)" }
    }

    /// Why a datagram was refused.
    enum Refusal: CustomStringConvertible {
        case malformed(JitterBuffer.MalformedReason)
        case foreign(JitterBuffer.ForeignReason)
        var description: String {
            switch self {
            case .malformed(let why): "\(why)"
            case .foreign(let why): "\(why)"
            }
        }
    }

    /// While the multicast group is not joined, why and how often it is tried again — `waiting for a
    /// route to 239.1.2.3 (No such device); tried again every 5 s` — nil once joined (or not a
    /// group). Any thread (a snapshot).
    public var waitingForGroup: String? {
        guard let e = state.withLock({ $0.unjoined?.errno }) else { return nil }
        let every = Double(configuration.joinRetry) / 1e9
        let seconds = every == every.rounded() ? "\(Int(every))" : "\(every)"
        let why = String(cString: strerror(e))
        return "waiting for a route to \(configuration.host) (\(why)); tried again every \(seconds) s"
    }

    /// Whether a call is in progress. Any thread (a snapshot).
    public var isInCall: Bool { state.withLock { $0.monitor.inCall } }

    /// The jitter buffer's counters. Any thread (a snapshot).
    public var counters: JitterBuffer.Counters { state.withLock { $0.jitter.counters } }

    /// The jitter buffer's target delay and the audio queued now (ns). Any thread (a snapshot).
    public var delays: (target: Int, buffered: Int) {
        state.withLock { ($0.jitter.targetDelay, $0.jitter.bufferedDelay) }
    }

    /// Fills `output` (interleaved, `configuration.channels` per frame) with the call's audio at 48 kHz
    /// as of `now` (monotonic ns from the same clock), silence where there is none. Returns the frames
    /// that came from the call. Consumer thread only (one at a time).
    public func pull(into output: UnsafeMutableBufferPointer<Float>, now: Int) -> Int {
        playout.fill(output, now: now, state: state)
    }

    // MARK: - Receive thread

    /// How long the receive thread may sleep (ms, -1: until a datagram or a poke): during a call until
    /// its silence timeout is due (+1 ms), while the group is not joined until the next join, else
    /// without limit — no call, nothing to time. (It used to look every 20 ms: 50 wake-ups a second
    /// whenever an intercom was configured.)
    private func sleepLimit(now: Int) -> Int32 {
        let due = state.withLock { s in
            let silence = s.monitor.inCall ? s.monitor.lastPacket + configuration.silenceTimeout : nil
            guard let retry = s.unjoined?.retry else { return silence }
            return min(silence ?? retry, retry)
        }
        return due.map { Int32(clamping: max(0, $0 - now) / 1_000_000 + 1) } ?? -1
    }

    /// Joins the group again when it is due and not joined yet. Receive thread.
    private func rejoinIfDue() {
        guard let group else { return }
        let now = clock()
        guard let due = state.withLock({ $0.unjoined?.retry }), now >= due else { return }
        let e = Self.join(socket, group)
        joinTries += 1
        state.withLock { $0.unjoined = e == 0 ? nil : (e, now + configuration.joinRetry) }
        if e == 0 { onJoined(joinTries) }
    }

    private func receiveLoop() {
        var buffer = [UInt8](repeating: 0, count: 2_048)
        var events: [CallEvent] = []
        events.reserveCapacity(4)
        while running.load(ordering: .acquiring) {
            let readable = pokes.wait(for: socket, timeout: sleepLimit(now: clock()), fallback: 20)
            rejoinIfDue()
            housekeeping(&events)
            if readable {
                // Drain what is there, a bounded batch so timeouts stay checked under a flood.
                for _ in 0..<64 {
                    var from = sockaddr_in()
                    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                    let n = buffer.withUnsafeMutableBytes { bytes in
                        withUnsafeMutablePointer(to: &from) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                                recvfrom(
                                    socket, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT | MSG_TRUNC), $0, &length
                                )
                            }
                        }
                    }
                    if n < 0 { break }
                    let now = clock()
                    state.withLock { s in
                        if n > buffer.count {
                            // Truncated: longer than any RTP/Opus packet the buffer accepts.
                            if case .malformed(let why) = s.jitter.rejectOversized(bytes: n, maximum: buffer.count) {
                                s.lastRefused = (from, .malformed(why))
                            }
                            return
                        }
                        let outcome = buffer.withUnsafeBytes {
                            s.jitter.insert(datagram: UnsafeRawBufferPointer(rebasing: $0[0..<n]), now: now)
                        }
                        switch outcome {
                        case .started, .accepted, .reset:
                            if let ssrc = s.jitter.ssrc, let e = s.monitor.packet(ssrc: ssrc, now: now) {
                                events.append(e)
                            }
                        case .malformed(let why):
                            s.lastRefused = (from, .malformed(why))
                        case .foreign(.endedStream):
                            break  // the hung-up call's own stream: expected, and it would hide the rest
                        case .foreign(let why):
                            s.lastRefused = (from, .foreign(why))
                        case .duplicate, .late:
                            break  // no audio: it neither starts nor keeps a call going
                        }
                    }
                    deliver(&events)
                }
            }
        }
    }

    /// Ends the call on request or after the silence timeout.
    private func housekeeping(_ events: inout [CallEvent]) {
        let now = clock()
        state.withLock { s in
            if s.endRequested {
                s.endRequested = false
                // Only a call's stream is ignored: after a silence timeout, one that comes back is
                // a new call.
                if let e = s.monitor.end() {
                    events.append(e)
                    s.jitter.reset(now: now, ignoreUntilQuietFor: configuration.silenceTimeout)
                }
            } else if let e = s.monitor.tick(now: now) {
                events.append(e)
                s.jitter.reset(now: now)
            }
        }
        deliver(&events)
    }

    private func deliver(_ events: inout [CallEvent]) {
        for e in events { onEvent(e) }
        events.removeAll(keepingCapacity: true)
    }

    // MARK: - Socket

    /// `a.b.c.d:port`.
    private static func describe(_ address: sockaddr_in) -> String {
        let ip = UInt32(bigEndian: address.sin_addr.s_addr)
        return "\(ip >> 24).\(ip >> 16 & 0xFF).\(ip >> 8 & 0xFF).\(ip & 0xFF):\(UInt16(bigEndian: address.sin_port))"
    }

    /// Binds `host:port`: the socket, the port bound and, when `host` is a multicast group, the group
    /// (joined by `join`).
    private static func bind(host: String, port: UInt16) throws(IntercomError) -> (Int32, UInt16, in_addr?) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw .invalidAddress(host) }
        let fd = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .socket(operation: "socket", errno: errno) }
        // No SO_REUSEADDR: for UDP it would let a second receiver bind the same port and silently
        // take the packets; a busy port must fail here instead.
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw .socket(operation: "bind \(host):\(port)", errno: e)
        }
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, UInt16(bigEndian: bound.sin_port), isMulticast(address.sin_addr) ? address.sin_addr : nil)
    }

    /// Joins `group` on `fd`: 0, or the errno. Bound to the group's address, the socket takes only
    /// the group's datagrams, but none arrive until the group is joined: the kernel picks the
    /// interface (INADDR_ANY: the one its routes send the group to, the default route's) — with no
    /// route to the group (a network not up yet: DHCP on Wi-Fi not done when batond starts) the join
    /// fails with ENODEV, and passes once there is one.
    private static func join(_ fd: Int32, _ group: in_addr) -> Int32 {
        var request = ip_mreq(imr_multiaddr: group, imr_interface: in_addr(s_addr: INADDR_ANY))
        let joined = setsockopt(
            fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &request, socklen_t(MemoryLayout<ip_mreq>.size))
        // Already a member: joined (not expected — each join is of a fresh socket or after a failure).
        return joined == 0 || errno == EADDRINUSE ? 0 : errno
    }

    /// Whether `address` is an IPv4 multicast group (224.0.0.0/4).
    private static func isMulticast(_ address: in_addr) -> Bool {
        UInt32(bigEndian: address.s_addr) >> 28 == 0xE
    }
}

/// Why a receiver could not be set up.
public enum IntercomError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The listen address is not an IPv4 address.
    case invalidAddress(String)
    /// A socket call failed with `errno`.
    case socket(operation: String, errno: Int32)
    /// libopus refused to create the decoder.
    case decoder(OpusPacketError)
    /// A resampler could not be built or run (the pump).
    case resampler(String)

    public var description: String {
        switch self {
        case .invalidAddress(let host): "listen address \(host) is not an IPv4 address (e.g. 0.0.0.0)"
        case .socket(let operation, let code): "\(operation): \(String(cString: strerror(code)))"
        case .decoder(let e): "\(e)"
        case .resampler(let message): message
        }
    }
}
