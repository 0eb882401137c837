import AudioCore
import Glibc

/// Starts dedicated OS threads for audio output (not Tasks: an output thread must never wait on the
/// cooperative pool) and asks for real-time scheduling.
enum RealtimeThread {
    /// Starts a joinable thread named `name` that runs `body`. Control thread; allocates.
    static func start(name: String, _ body: @escaping @Sendable () -> Void) -> OSThread {
        OSThread.start(name: name, body)
    }

    /// Asks for SCHED_FIFO at `priority` for the calling thread. Returns 0 or the errno (EPERM when
    /// the process has no CAP_SYS_NICE / RLIMIT_RTPRIO), so the caller can warn and run on.
    static func requestRealtime(priority: Int32) -> Int32 {
        var param = sched_param()
        param.sched_priority = priority
        return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param)
    }
}

/// Sleeps until the monotonic time `deadline` (ns). Any thread; real-time safe (a syscall only).
@inline(__always)
func sleepUntil(_ deadline: Int) {
    var ts = timespec(tv_sec: deadline / 1_000_000_000, tv_nsec: deadline % 1_000_000_000)
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}
