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

    /// Starts a thread that runs `body`, named `name` (see `startThread`).
    public static func start(name: String? = nil, _ body: @escaping @Sendable () -> Void) -> OSThread {
        OSThread(handle: startThread(name: name, body))
    }

    /// Waits for the thread's body to return. Idempotent.
    public func join() {
        guard !joined.exchange(true, ordering: .acquiringAndReleasing) else { return }
        pthread_join(handle, nil)
    }

    /// Lets the thread end by itself, unwaited for (a thread stuck in a call that cannot be cut
    /// short, at a stop that cannot wait): its resources go when it ends. Instead of `join`.
    public func abandon() {
        guard !joined.exchange(true, ordering: .acquiringAndReleasing) else { return }
        pthread_detach(handle)
    }

    /// True on the thread itself. Any thread.
    public var isCurrent: Bool { pthread_equal(handle, pthread_self()) != 0 }

    /// Starts a thread nobody waits for: short jobs that end by themselves (a server call).
    public static func detach(name: String? = nil, _ body: @escaping @Sendable () -> Void) {
        pthread_detach(startThread(name: name, body))
    }
}

/// Starts a joinable OS thread that runs `body`; the caller owns joining it (prefer `OSThread`,
/// which does). With a `name`, the thread names itself (`pthread_setname_np`; the kernel keeps 15
/// bytes) before `body` runs, so `top -H`, `ps -L` and `/proc/PID/task/*/comm` tell the threads
/// apart; without one it keeps the creator's name. Any thread; allocates.
public func startThread(name: String? = nil, _ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box: Sendable {
        let name: String?
        let body: @Sendable () -> Void
        init(_ name: String?, _ body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Box(name, body)).toOpaque()
    let rc = pthread_create(
        &thread, nil,
        { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            if let name = box.name { setCurrentThreadName(name) }
            box.body()
            return nil
        }, context)
    precondition(rc == 0, "pthread_create failed: \(rc)")
    return thread
}

/// Names the calling thread: its first 15 bytes (cut at a character boundary), the kernel's limit,
/// written to `/proc/thread-self/comm` (what `pthread_setname_np` does; Swift's Glibc does not
/// export it). Nothing happens where /proc is not mounted. Any thread; allocates.
public func setCurrentThreadName(_ name: String) {
    var bytes: [UInt8] = []
    for c in name.unicodeScalars {
        let utf8 = Array(String(c).utf8)
        if bytes.count + utf8.count > 15 { break }
        bytes += utf8
    }
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

/// Monotonic time in nanoseconds. Any thread; real-time safe.
@inline(__always)
public func monotonicNanoseconds() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}
