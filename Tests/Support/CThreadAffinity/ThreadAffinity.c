#define _GNU_SOURCE
#include "CThreadAffinity.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>

int baton_allowed_cpus(int *cpus, int capacity) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -errno;
    int n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < capacity; cpu++) {
        if (CPU_ISSET(cpu, &set)) cpus[n++] = cpu;
    }
    return n;
}

int baton_pin_calling_thread(int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return EINVAL;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

int baton_current_cpu(void) {
    int cpu = sched_getcpu();
    return cpu < 0 ? -errno : cpu;
}
