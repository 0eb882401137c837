import Glibc

/// Starts a joinable OS thread that runs `body` (a dedicated thread, not a Task: what runs on it may
/// block). The daemon uses it for its control and streaming threads too. Any thread; allocates.
public func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    let rc = pthread_create(&thread, nil, { raw in
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
