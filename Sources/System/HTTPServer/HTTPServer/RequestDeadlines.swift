import CMicroHTTPD
import Glibc
import OSThread
import Synchronization

/// The whole-request limit (`HTTPServer.Limits.requestSeconds`): each open connection's socket and
/// when its request must have arrived whole (or its answer of bytes been sent), and a thread that
/// shuts down the connections past it.
///
/// libmicrohttpd calls Baton only once a request's head is in, and then per body fragment: while it
/// reads a request line, headers, chunk-size lines or trailers, only its idle timeout applies, which
/// each byte restarts, so a byte every 25 s held a connection (a thread, one of 64 slots) for days.
///
/// A connection is noted at its start (libmicrohttpd's connection notification, on its accepting
/// thread), its deadline cleared when its request has arrived (the handler is about to run: a slow
/// handler is not cut), set again when an answer of bytes is queued (it must be sent within the
/// limit; an event stream has none, however long it lasts) and when the request completes (the
/// next request on a kept-alive connection), and the connection forgotten at its close
/// notification, which libmicrohttpd sends before it closes the socket. A slow reader is like a
/// slow sender: libmicrohttpd's idle timeout restarts at each byte sent, so a client taking a few
/// bytes of an answer every 25 s held its connection for as long as the answer lasted, and with
/// keep-alive for ever. The reaper shuts a
/// socket (`shutdown`, which wakes the connection's thread; libmicrohttpd then closes it as it would
/// a client's hang-up) only under the table's lock, so it never touches a descriptor reused since.
///
/// The reaper sleeps until the earliest deadline, or while there is none (an idle daemon wakes for
/// it once a day, not every second: no polling loop); a deadline set earlier than the one it sleeps
/// for wakes it. Deadlines only move later (each is now + the limit), so that is a connection
/// opened or answered while it sleeps with none.
final class RequestDeadlines: Sendable {
    private struct Entry {
        let fd: Int32
        var due: ContinuousClock.Instant?
        /// The deadline is an answer's: the connection is reset, its unsent bytes dropped, not
        /// left in the kernel for a reader that takes them a few at a time.
        var answering = false
    }

    private struct Table {
        var entries: [Int: Entry] = [:]
        /// True once the server stops: the reaper ends.
        var stopped = false
        /// The reaper sleeps until `sleepsUntil` (nil: with no deadline); `woken`: told to look again.
        var sleeps = false
        var sleepsUntil: ContinuousClock.Instant?
        var woken = false

        /// Notes a deadline set: true when the reaper, asleep past it, must be woken.
        mutating func wakes(for due: ContinuousClock.Instant) -> Bool {
            guard sleeps, !woken, sleepsUntil.map({ due < $0 }) ?? true else { return false }
            woken = true
            return true
        }
    }

    let limit: Duration
    /// How many times the reaper woke (`HTTPServer.requestDeadlineLooks`).
    let looks = Atomic(0)
    private let table = ConditionLock(Table())
    private let reaper = Mutex<OSThread?>(nil)

    init(limit: Duration) {
        self.limit = limit
    }

    private static func key(_ connection: OpaquePointer) -> Int { Int(bitPattern: connection) }

    /// A connection opened on `fd`: its first request must arrive within the limit.
    func opened(_ connection: OpaquePointer, fd: Int32) {
        let due = ContinuousClock.now + limit
        let wake = table.withLock { t in
            t.entries[Self.key(connection)] = Entry(fd: fd, due: fd >= 0 ? due : nil)
            return fd >= 0 && t.wakes(for: due)
        }
        if wake { table.signal() }
    }

    /// The connection's request has arrived, or is answered with a stream: no deadline while the
    /// handler runs or the stream lasts.
    func arrived(_ connection: OpaquePointer) {
        table.withLock { $0.entries[Self.key(connection)]?.due = nil }
    }

    /// The connection's request is answered with bytes: they must be sent within the limit (a
    /// client reading a few bytes now and then, each send restarting the idle timeout, held its
    /// thread for ever).
    func answering(_ connection: OpaquePointer) {
        due(connection, answering: true)
    }

    /// The connection's request completed: the next one on it must arrive within the limit.
    func completed(_ connection: OpaquePointer) {
        due(connection, answering: false)
    }

    private func due(_ connection: OpaquePointer, answering: Bool) {
        let due = ContinuousClock.now + limit
        let wake = table.withLock { t in
            guard t.entries[Self.key(connection)] != nil else { return false }
            t.entries[Self.key(connection)]?.due = due
            t.entries[Self.key(connection)]?.answering = answering
            return t.wakes(for: due)
        }
        if wake { table.signal() }
    }

    /// The connection is closing (its socket is closed right after): forgotten.
    func closed(_ connection: OpaquePointer) {
        _ = table.withLock { $0.entries.removeValue(forKey: Self.key(connection)) }
    }

    /// Shuts every connection past its deadline; how many.
    @discardableResult
    func reap(now: ContinuousClock.Instant = .now) -> Int {
        table.withLock { t in
            var count = 0
            for (key, entry) in t.entries {
                guard let due = entry.due, due <= now else { continue }
                if entry.answering {
                    // Closed with a reset (libmicrohttpd closes it once the shutdown wakes it).
                    var reset = linger(l_onoff: 1, l_linger: 0)
                    setsockopt(entry.fd, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
                }
                shutdown(entry.fd, Int32(SHUT_RDWR))
                t.entries[key]?.due = nil
                count += 1
            }
            return count
        }
    }

    /// Starts the reaper.
    func start() {
        let thread = OSThread.start(name: "http-deadlines") { [self] in
            while true {
                let next = table.withLock { t in
                    let next = t.entries.values.compactMap(\.due).min()
                    (t.sleeps, t.sleepsUntil, t.woken) = (true, next, false)
                    return next
                }
                let stop = table.wait(
                    timeout: next.map { $0 - .now } ?? .seconds(86_400), until: { $0.stopped || $0.woken }
                ) { t in
                    t.sleeps = false
                    return t.stopped
                }
                if stop { return }
                looks.add(1, ordering: .relaxed)
                reap()
            }
        }
        reaper.withLock { $0 = thread }
    }

    /// Ends the reaper and waits for it. Idempotent.
    func stop() {
        table.withLock { $0.stopped = true }
        table.signal()
        reaper.withLock { t -> OSThread? in
            defer { t = nil }
            return t
        }?.join()
    }
}

/// Connection notification: a connection started (accepting thread) or is closing (its own thread
/// or `MHD_stop_daemon`'s), before its socket is closed.
func mhdConnectionNotify(
    _ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
    _ socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ code: MHD_ConnectionNotificationCode
) {
    guard let cls, let connection else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    if code.rawValue == 0 {  // MHD_CONNECTION_NOTIFY_STARTED
        core.deadlines.opened(connection, fd: baton_mhd_connection_fd(connection))
    } else {
        core.deadlines.closed(connection)
    }
}
