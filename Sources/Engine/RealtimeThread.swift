import Glibc

/// Starts dedicated OS threads for audio output (not Tasks: an output thread must never wait on the
/// cooperative pool) and asks for real-time scheduling.
enum RealtimeThread {
    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Starts a joinable thread that runs `body`.
    /// Control thread; allocates.
    static func start(_ body: @escaping () -> Void) -> pthread_t {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        let rc = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, context)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        return thread
    }

    /// Asks for SCHED_FIFO at `priority` for the calling thread. Returns 0 or the errno (EPERM when
    /// the process has no CAP_SYS_NICE / RLIMIT_RTPRIO), so the caller can warn and run on.
    static func requestRealtime(priority: Int32) -> Int32 {
        var param = sched_param()
        param.sched_priority = priority
        return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param)
    }
}

/// Monotonic time in nanoseconds. Any thread; real-time safe.
@inline(__always)
func monotonicNanoseconds() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Sleeps until the monotonic time `deadline` (ns). Any thread; real-time safe (a syscall only).
@inline(__always)
func sleepUntil(_ deadline: Int) {
    var ts = timespec(tv_sec: deadline / 1_000_000_000, tv_nsec: deadline % 1_000_000_000)
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}
