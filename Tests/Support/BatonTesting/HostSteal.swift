import Glibc
import OSThread
import Synchronization

/// What the hypervisor took from this virtual machine's CPUs, and when: `/proc/stat`'s steal time
/// (all CPUs, in its 1/100 s units) read every 5 ms on a thread of its own, stamped with
/// CLOCK_MONOTONIC. A real-time thread cannot keep a card fed while the host does not run the VM
/// at all; the soak asks this whether the host took the CPU just before a card nearly ran dry.
/// On a machine that is not a VM the steal time stays 0.
public final class HostSteal: Sendable {
    /// One reading: when (monotonic ns), and the steal time so far (s).
    public struct Reading: Sendable {
        public var nanoseconds: Int
        public var seconds: Double
    }

    private let readings = Mutex<[Reading]>([])
    private let stopping = Atomic<Bool>(false)
    private let thread = Mutex<OSThread?>(nil)

    public init() {}

    /// The steal time so far (s), all CPUs. Any thread.
    public static func now() -> Double {
        // "cpu  user nice system idle iowait irq softirq steal ..."
        let fields = (FileIO.firstLine("/proc/stat") ?? "").split(separator: " ").dropFirst().compactMap { Double($0) }
        return fields.count > 7 ? fields[7] / Double(sysconf(Int32(_SC_CLK_TCK))) : 0
    }

    /// Starts reading every 5 ms.
    public func start() {
        thread.withLock {
            $0 = OSThread.start(name: "host-steal") { [self] in
                while !stopping.load(ordering: .acquiring) {
                    let reading = Reading(nanoseconds: monotonicNanoseconds(), seconds: Self.now())
                    readings.withLock { $0.append(reading) }
                    usleep(5_000)
                }
            }
        }
    }

    /// Stops reading and returns every reading.
    @discardableResult
    public func stop() -> [Reading] {
        stopping.store(true, ordering: .releasing)
        thread.withLock {
            $0?.join()
            $0 = nil
        }
        return readings.withLock { $0 }
    }

    /// Seconds of steal accounted between two monotonic instants (the readings that bracket them;
    /// the accounting moves in 10 ms steps).
    public static func stolen(_ readings: [Reading], from: Int, to: Int) -> Double {
        guard let first = readings.last(where: { $0.nanoseconds <= from }) ?? readings.first,
            let last = readings.first(where: { $0.nanoseconds >= to }) ?? readings.last
        else { return 0 }
        return max(0, last.seconds - first.seconds)
    }
}
