import CAllocCounter

/// Counts the heap allocations the calling thread makes while `body` runs.
/// Any thread may call it; only that thread's allocations are counted.
public func countAllocations(_ body: () throws -> Void) rethrows -> UInt64 {
    baton_alloc_count_start()
    do {
        try body()
    } catch {
        _ = baton_alloc_count_stop()
        throw error
    }
    return baton_alloc_count_stop()
}

/// Starts counting allocations on the calling thread. Real-time safe (no allocation itself).
public func allocationCountStart() { baton_alloc_count_start() }

/// Stops counting on the calling thread and returns the count since `allocationCountStart`.
public func allocationCountStop() -> UInt64 { baton_alloc_count_stop() }
