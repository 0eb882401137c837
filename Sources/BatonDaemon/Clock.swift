import Glibc

/// Monotonic time in nanoseconds. Any thread.
func monotonicNanoseconds() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}
