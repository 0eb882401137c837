import Glibc
import OSThread
import Synchronization

/// A real-time thread of the harness's own that wakes every 5 ms and notes each wake-up 2 ms late or
/// more. It runs SCHED_FIFO above batond's output threads (priority 70), so nothing batond does can
/// hold it: when it is held too, the machine held every real-time thread — the kernel, or a virtual
/// machine stopped in a way its steal time does not show (its memory taken back by the host, say).
/// The soak asks it whether such a stall came just before a card ran dry. Without the right to
/// SCHED_FIFO (`isRealtime` false) its wake-ups mean nothing under load and are not used.
public final class RealtimeCanary: Sendable {
    /// A late wake-up: when the canary woke (monotonic ns) and how late (ns).
    public struct Late: Sendable {
        public var nanoseconds: Int
        public var late: Int
        /// When the stall that held it began: its deadline.
        public var began: Int { nanoseconds - late }
    }

    public static let priority: Int32 = 80
    static let interval = 5_000_000
    static let noted = 2_000_000

    private let lates = Mutex<[Late]>([])
    private let stopping = Atomic<Bool>(false)
    private let realtime = Atomic<Bool>(false)
    private let thread = Mutex<OSThread?>(nil)

    public init() {}

    /// True when the thread got SCHED_FIFO.
    public var isRealtime: Bool { realtime.load(ordering: .acquiring) }

    /// Starts the thread.
    public func start() {
        thread.withLock {
            $0 = OSThread.start(name: "canary") { [self] in
                var param = sched_param()
                param.sched_priority = Self.priority
                realtime.store(pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0, ordering: .releasing)
                lates.withLock { $0.reserveCapacity(1_024) }
                var deadline = monotonicNanoseconds() + Self.interval
                while !stopping.load(ordering: .acquiring) {
                    var ts = timespec(tv_sec: deadline / 1_000_000_000, tv_nsec: deadline % 1_000_000_000)
                    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
                    let now = monotonicNanoseconds()
                    if now - deadline >= Self.noted {
                        let late = Late(nanoseconds: now, late: now - deadline)
                        lates.withLock { $0.append(late) }
                    }
                    deadline = max(deadline + Self.interval, now + Self.interval / 2)
                }
            }
        }
    }

    /// Stops the thread and returns every late wake-up.
    @discardableResult
    public func stop() -> [Late] {
        stopping.store(true, ordering: .releasing)
        thread.withLock {
            $0?.join()
            $0 = nil
        }
        return lates.withLock { $0 }
    }

    /// The longest stall (ns) that held the canary at some instant between `from` and `to`
    /// (monotonic ns), 0 if none.
    public static func longestStall(_ lates: [Late], overlapping from: Int, _ to: Int) -> Int {
        lates.filter { $0.began <= to && $0.nanoseconds >= from }.map(\.late).max() ?? 0
    }
}
