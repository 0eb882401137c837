import OSThread
import Synchronization

/// The monitor thread: runs the control plane's upkeep (`Daemon.tick`) when something needs it and
/// sleeps otherwise — no polling. It wakes at the soonest of: the deadline the last tick returned
/// (a source's ring falls to its watermark, a source's last frame is played, the next track begins,
/// an arbiter timer is due), a `wake()` (the control plane's state changed, a zone's availability
/// changed), and the next state save (about once a second, which also bounds how late a change
/// nobody announced is noticed). Idle, that is one wake-up a second instead of 200.
final class Monitor: Sendable {
    private let running = Atomic<Bool>(false)
    private let thread = Mutex<OSThread?>(nil)
    private let lastTick = Atomic<Int>(0)
    private let doorbell = Semaphore()
    /// How often the state is saved (and the longest the monitor sleeps).
    static let saveInterval = 1_000_000_000
    /// The shortest sleep between two ticks, whatever a source asks for (no spinning).
    static let minimumSleep = 1_000_000

    /// Marks the monitor as starting; false when it already runs. Control thread.
    func begin() -> Bool { !running.exchange(true, ordering: .acquiringAndReleasing) }

    /// Makes the monitor tick now (or right after the tick it is in). Any thread but an output
    /// thread; does not block.
    func wake() { doorbell.post() }

    /// Starts the thread. `tick` returns the nanoseconds until it needs to run again, or nil when
    /// only a `wake()` or the next save needs it. Control thread, after `begin()`.
    func launch(tick: @escaping @Sendable () -> Int?, save: @escaping @Sendable () -> Void) {
        let started = OSThread.start(name: "monitor") { [self] in
            var lastSave = monotonicNanoseconds()
            while running.load(ordering: .acquiring) {
                lastTick.store(monotonicNanoseconds(), ordering: .releasing)
                doorbell.drain()  // what woke it is served by this tick; a wake() during it makes another
                let next = tick()
                let now = monotonicNanoseconds()
                if now - lastSave >= Self.saveInterval {
                    lastSave = now
                    save()
                }
                let untilSave = lastSave + Self.saveInterval - monotonicNanoseconds()
                doorbell.wait(nanoseconds: max(Self.minimumSleep, min(untilSave, next ?? Int.max)))
            }
        }
        thread.withLock { $0 = started }
    }

    /// Ends the thread and waits for it; false when it was not running. Control thread.
    func stop() -> Bool {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return false }
        doorbell.post()
        thread.withLock { t in
            defer { t = nil }
            return t
        }?.join()
        return true
    }

    /// True while the thread has run within the last 2 s (it runs at least once a second). Any thread.
    var isAlive: Bool { ticked(within: .seconds(2)) }

    /// True when the thread has run within `span` (it runs at least once a second). Any thread.
    func ticked(within span: Duration) -> Bool {
        monotonicNanoseconds() - lastTick.load(ordering: .acquiring) < Int(clamping: span.wholeNanoseconds)
    }
}
