// rt-canary: what this machine does to a real-time thread with nothing of Baton's running — the
// soak's RealtimeCanary (Tests/Support/BatonTesting) alone. A SCHED_FIFO thread at priority 80
// (above batond's output threads, 70) sleeps to absolute CLOCK_MONOTONIC deadlines 5 ms apart
// for SECONDS and prints every wake-up 20 ms late or more, then the longest and the counts. On a
// machine that runs its real-time threads on time it prints nothing but "longest < 1 ms".
// Needs CAP_SYS_NICE (root).
//   cc -O2 -o rt-canary scripts/bench/rt-canary.c && ./rt-canary SECONDS
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 2 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: rt-canary SECONDS\n");
        return 2;
    }
    struct sched_param param = {.sched_priority = 80};
    if (sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
        perror("rt-canary: SCHED_FIFO");
        return 1;
    }
    const long long interval = 5000000, seconds = atoi(argv[1]);
    long long start = now_ns(), deadline = start + interval, longest = 0;
    int over20 = 0, over10 = 0, wakeups = 0;
    while (now_ns() - start < seconds * 1000000000LL) {
        struct timespec t = {deadline / 1000000000LL, deadline % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0) {}
        long long now = now_ns(), late = now - deadline;
        wakeups++;
        if (late > longest) longest = late;
        if (late >= 20000000) {
            over20++;
            printf("held %.1f ms at %.1f s\n", late / 1e6, (now - start) / 1e9);
        } else if (late >= 10000000) {
            over10++;
        }
        deadline += interval;
        if (deadline < now) deadline = now + interval / 2;
    }
    printf("%d wake-ups in %lld s: longest %.1f ms late; >= 20 ms: %d, 10-20 ms: %d\n", wakeups, seconds,
           longest / 1e6, over20, over10);
    return 0;
}
