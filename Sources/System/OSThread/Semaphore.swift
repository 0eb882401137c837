import CGlibc
import Glibc

/// A POSIX counting semaphore: one thread waits (with a timeout, so it can also notice a stop
/// flag), others post to wake it at once instead of making it poll.
///
/// Thread: `post` from any thread (async-signal-safe); `wait` from any thread but an output thread.
public final class Semaphore: @unchecked Sendable {
    // @unchecked: sem_t is thread-safe by POSIX; the pointer never changes.
    private let semaphore: UnsafeMutablePointer<sem_t>

    public init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    /// Wakes one waiter (or the next one to wait).
    public func post() { sem_post(semaphore) }

    /// Waits until a post, however long it takes.
    public func wait() {
        while sem_wait(semaphore) != 0 && errno == EINTR {}
    }

    /// Takes a post that is already there, without waiting; false when there is none.
    public func tryWait() -> Bool { sem_trywait(semaphore) == 0 }

    /// Takes every post already there (several wake-ups asked for while the waiter was busy: one is
    /// enough).
    public func drain() { while sem_trywait(semaphore) == 0 {} }

    /// Waits until a post or `nanoseconds` have passed (on CLOCK_MONOTONIC); true when a post was
    /// taken. The deadline was on CLOCK_REALTIME (`sem_timedwait`): the wall clock stepped back —
    /// NTP correcting a Pi that has no real-time clock — made every waiter sleep that much longer,
    /// the monitor among them (no reconcile, no save).
    @discardableResult
    public func wait(nanoseconds: Int) -> Bool {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let total = ts.tv_nsec + max(0, nanoseconds)
        ts.tv_sec += total / 1_000_000_000
        ts.tv_nsec = total % 1_000_000_000
        while true {
            if baton_sem_wait_monotonic(semaphore, &ts) == 0 { return true }
            if errno != EINTR { return false }
        }
    }
}
