#pragma once
// Counts heap allocations made by the calling thread between start and stop.
// Linked only into the test executable: it defines malloc & co. for the whole process and forwards
// every call to glibc's __libc_* functions, counting only while the calling thread has asked to.
#include <stdint.h>

/// Starts counting allocations on the calling thread (resets its count to 0).
void baton_alloc_count_start(void);
/// Stops counting on the calling thread and returns how many allocations it made since start.
uint64_t baton_alloc_count_stop(void);
