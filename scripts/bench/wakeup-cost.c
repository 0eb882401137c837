// wakeup-cost: what one timer wake-up of a thread costs on this machine, with no audio work at all
// (scripts/bench-wakeups.sh). The thread sleeps to absolute CLOCK_MONOTONIC deadlines PERIOD_US
// apart (as batond's output thread does on a `clock: system` zone), optionally touching TOUCH bytes
// per wake-up (the cache lines a period's render reads and writes), for SECONDS; it prints its own
// CPU time per wake-up and per second from /proc/thread-self/schedstat (run time, ns) and its
// timeslices.
//   cc -O2 -o wakeup-cost wakeup-cost.c ; wakeup-cost PERIOD_US SECONDS FIFO(0|1) TOUCH_BYTES
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int schedstat(long long *run_ns, long long *slices) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    long long wait_ns;
    if (!f) return -1;
    int n = fscanf(f, "%lld %lld %lld", run_ns, &wait_ns, slices);
    fclose(f);
    return n == 3 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: wakeup-cost PERIOD_US SECONDS FIFO(0|1) TOUCH_BYTES\n"); return 2; }
    long period_us = atol(argv[1]), seconds = atol(argv[2]);
    int fifo = atoi(argv[3]);
    size_t touch = (size_t)atol(argv[4]);
    if (period_us <= 0 || seconds <= 0) { fprintf(stderr, "wakeup-cost: PERIOD_US and SECONDS must be > 0\n"); return 2; }
    if (fifo) {
        struct sched_param p = {.sched_priority = 70};
        int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
        if (err) { fprintf(stderr, "wakeup-cost: SCHED_FIFO: %s\n", strerror(err)); return 1; }
    }
    volatile unsigned char *buffer = touch ? malloc(touch) : NULL;
    if (touch && !buffer) return 1;
    for (size_t i = 0; i < touch; i++) buffer[i] = (unsigned char)i;
    long long run0, slices0, run1, slices1;
    if (schedstat(&run0, &slices0)) { perror("schedstat"); return 1; }
    long long deadline = now_ns();
    long cycles = seconds * 1000000 / period_us;
    for (long c = 0; c < cycles; c++) {
        for (size_t i = 0; i < touch; i += 64) buffer[i]++;
        deadline += period_us * 1000LL;
        struct timespec t = {deadline / 1000000000LL, deadline % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0) {}
    }
    if (schedstat(&run1, &slices1)) { perror("schedstat"); return 1; }
    printf("%ld %d %zu %.1f %.5f %.0f\n", period_us, fifo, touch, (run1 - run0) / 1000.0 / cycles,
           (run1 - run0) / 1e9 / seconds, (slices1 - slices0) / (double)seconds);
    return 0;
}
