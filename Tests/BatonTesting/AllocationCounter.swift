import CAllocCounter

/// Counts the heap allocations the calling thread makes while `body` runs.
/// Any thread may call it; only that thread's allocations are counted.
public func countAllocations(_ body: () throws -> Void) rethrows -> UInt64 {
    baton_alloc_count_start()
    defer { _ = baton_alloc_count_stop() }
    try body()
    return baton_alloc_count_stop()
}
