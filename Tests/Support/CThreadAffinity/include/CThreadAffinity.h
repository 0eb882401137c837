#pragma once
// CPU affinity for the harness's own threads (the soak's per-CPU canaries): glibc declares
// sched_getaffinity, pthread_setaffinity_np and sched_getcpu only under _GNU_SOURCE, which Swift's
// Glibc module does not define.

/// The CPUs this process may run on, ascending, into `cpus` (at most `capacity`); returns how many,
/// or -errno.
int baton_allowed_cpus(int *cpus, int capacity);

/// Pins the calling thread to `cpu` alone; returns 0 or an errno.
int baton_pin_calling_thread(int cpu);

/// The CPU the calling thread runs on now, or -errno.
int baton_current_cpu(void);
