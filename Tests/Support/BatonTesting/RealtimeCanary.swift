import CThreadAffinity
import Glibc
import OSThread
import Synchronization

/// Real-time threads of the harness's own, one pinned to each CPU the process may run on, that wake
/// every 5 ms and note each wake-up 2 ms late or more. They run SCHED_FIFO above batond's output
/// threads (priority 70), so nothing batond does can hold them: when one is held, the machine held
/// that CPU and every real-time thread on it — the kernel, or a virtual machine's CPU stopped in a
/// way its steal time does not show. One per CPU because a VM's CPUs are held one at a time: on this
/// 2-CPU VM one was held 29 ms while the other was held 11 ms (`scripts/bench/rt-canary.c`), and a
/// single canary, wherever the scheduler put it, saw only one of the two. The soak asks them whether
/// such a stall came just before a card ran dry. Without the right to SCHED_FIFO (`isRealtime`
/// false) their wake-ups mean nothing under load and are not used.
public final class RealtimeCanary: Sendable {
    /// A late wake-up: on which CPU, when the canary woke (monotonic ns) and how late (ns).
    public struct Late: Sendable {
        public var cpu: Int
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
    private let started = Atomic<Int>(0)
    private let granted = Atomic<Int>(0)
    private let threads = Mutex<[OSThread]>([])

    public init() {}

    /// True when every canary got SCHED_FIFO and its CPU (ask once they are stopped).
    public var isRealtime: Bool {
        let n = started.load(ordering: .acquiring)
        return n > 0 && granted.load(ordering: .acquiring) == n
    }

    /// The CPUs this process may run on (its affinity mask).
    public static var cpus: [Int] {
        var cpus = [Int32](repeating: 0, count: 1_024)
        let n = baton_allowed_cpus(&cpus, Int32(cpus.count))
        return n > 0 ? cpus[..<Int(n)].map(Int.init) : []
    }

    /// Starts one thread per CPU.
    public func start() {
        lates.withLock { $0.reserveCapacity(1_024) }
        let cpus = Self.cpus
        started.store(cpus.count, ordering: .releasing)
        threads.withLock { threads in
            threads = cpus.map { cpu in
                OSThread.start(name: "canary\(cpu)") { [self] in
                    if Self.pin(to: cpu) { granted.add(1, ordering: .releasing) }
                    run(cpu: cpu)
                }
            }
        }
    }

    /// This thread on `cpu` alone, SCHED_FIFO at `priority`; false if either is refused.
    private static func pin(to cpu: Int) -> Bool {
        var param = sched_param()
        param.sched_priority = priority
        let pinned = baton_pin_calling_thread(Int32(cpu)) == 0
        return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0 && pinned
    }

    private func run(cpu: Int) {
        var deadline = monotonicNanoseconds() + Self.interval
        while !stopping.load(ordering: .acquiring) {
            var ts = timespec(tv_sec: deadline / 1_000_000_000, tv_nsec: deadline % 1_000_000_000)
            while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
            let now = monotonicNanoseconds()
            if now - deadline >= Self.noted {
                let late = Late(cpu: cpu, nanoseconds: now, late: now - deadline)
                lates.withLock { $0.append(late) }
            }
            deadline = max(deadline + Self.interval, now + Self.interval / 2)
        }
    }

    /// Stops the threads and returns every late wake-up, in the order they were noted.
    @discardableResult
    public func stop() -> [Late] {
        stopping.store(true, ordering: .releasing)
        threads.withLock {
            for thread in $0 { thread.join() }
            $0 = []
        }
        return lates.withLock { $0 }
    }

    /// The longest stall that held a canary (its late wake-up: which CPU, how long) at some instant
    /// between `from` and `to` (monotonic ns), nil if none.
    public static func longestStall(_ lates: [Late], overlapping from: Int, _ to: Int) -> Late? {
        lates.filter { $0.began <= to && $0.nanoseconds >= from }.max { $0.late < $1.late }
    }
}
