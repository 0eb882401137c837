import Glibc
import Synchronization

/// A dedicated, joinable OS thread (not a Task: what runs on it may block). The one thread type of
/// the project: whoever starts a thread keeps its `OSThread` and joins it there, once.
///
/// Thread: `start` any thread (allocates); `join` any thread but the one it joins, at most once
/// (a second call returns at once).
public final class OSThread: Sendable {
    private let handle: pthread_t
    private let joined = Atomic<Bool>(false)

    private init(handle: pthread_t) { self.handle = handle }

    /// Starts a thread that runs `body`.
    public static func start(_ body: @escaping @Sendable () -> Void) -> OSThread {
        OSThread(handle: startThread(body))
    }

    /// Waits for the thread's body to return. Idempotent.
    public func join() {
        guard !joined.exchange(true, ordering: .acquiringAndReleasing) else { return }
        pthread_join(handle, nil)
    }

    /// True on the thread itself. Any thread.
    public var isCurrent: Bool { pthread_equal(handle, pthread_self()) != 0 }

    /// Starts a thread nobody waits for: short jobs that end by themselves (a server call).
    public static func detach(_ body: @escaping @Sendable () -> Void) {
        pthread_detach(startThread(body))
    }
}

/// Starts a joinable OS thread that runs `body`; the caller owns joining it (prefer `OSThread`,
/// which does). Any thread; allocates.
public func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    let rc = pthread_create(
        &thread, nil,
        { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, context)
    precondition(rc == 0, "pthread_create failed: \(rc)")
    return thread
}

/// Monotonic time in nanoseconds. Any thread; real-time safe.
@inline(__always)
public func monotonicNanoseconds() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}
