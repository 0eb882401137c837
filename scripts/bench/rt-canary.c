// rt-canary: what this machine does to real-time threads with nothing of Baton's running — the
// soak's RealtimeCanary (Tests/Support/BatonTesting) alone. One SCHED_FIFO thread at priority 80
// (above batond's output threads, 70) pinned to each CPU the process may use sleeps to absolute
// CLOCK_MONOTONIC deadlines 5 ms apart for SECONDS; at the end it prints every wake-up 20 ms late or
// more, with how long the other CPUs' canaries were held over the same span (a VM's CPUs are held
// one at a time: one CPU held 29 ms while the other was held 11 ms was seen here), then each CPU's
// longest and counts. On a machine that runs its real-time threads on time it prints only the counts.
// Needs CAP_SYS_NICE (root).
//   cc -O2 -pthread -o rt-canary scripts/bench/rt-canary.c && ./rt-canary SECONDS
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_CPUS = 64, MAX_LATE = 100000 };
static const long long interval = 5000000;

typedef struct {
    int cpu, failed, count, over10, over20;
    long long seconds, wakeups, longest;
    long long at[MAX_LATE], late[MAX_LATE];  // wake-ups 2 ms late or more: when, how late (ns)
} canary_t;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *run(void *arg) {
    canary_t *c = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c->cpu, &set);
    struct sched_param param = {.sched_priority = 80};
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0 ||
        pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) != 0) {
        c->failed = 1;
        return NULL;
    }
    long long start = now_ns(), deadline = start + interval;
    while (now_ns() - start < c->seconds * 1000000000LL) {
        struct timespec t = {deadline / 1000000000LL, deadline % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0) {}
        long long now = now_ns(), late = now - deadline;
        c->wakeups++;
        if (late > c->longest) c->longest = late;
        if (late >= 20000000) c->over20++;
        else if (late >= 10000000) c->over10++;
        if (late >= 2000000 && c->count < MAX_LATE) {
            c->at[c->count] = now;
            c->late[c->count++] = late;
        }
        deadline += interval;
        if (deadline < now) deadline = now + interval / 2;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: rt-canary SECONDS\n");
        return 2;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        perror("rt-canary: sched_getaffinity");
        return 1;
    }
    static canary_t canaries[MAX_CPUS];
    pthread_t threads[MAX_CPUS];
    int n = 0;
    for (int cpu = 0; cpu < MAX_CPUS; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        canaries[n].cpu = cpu;
        canaries[n].seconds = atoi(argv[1]);
        if (pthread_create(&threads[n], NULL, run, &canaries[n]) != 0) {
            perror("rt-canary: pthread_create");
            return 1;
        }
        n++;
    }
    long long start = now_ns() - interval;
    for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < n; i++) {
        if (canaries[i].failed) {
            fprintf(stderr, "rt-canary: CPU %d: no SCHED_FIFO or affinity (needs CAP_SYS_NICE)\n", canaries[i].cpu);
            return 1;
        }
    }
    for (int i = 0; i < n; i++) {
        const canary_t *c = &canaries[i];
        for (int k = 0; k < c->count; k++) {
            if (c->late[k] < 20000000) continue;
            long long began = c->at[k] - c->late[k], ended = c->at[k];
            printf("CPU %d held %.1f ms at %.1f s; over the same span", c->cpu, c->late[k] / 1e6, (ended - start) / 1e9);
            for (int j = 0; j < n; j++) {
                if (j == i) continue;
                long long other = 0;
                for (int m = 0; m < canaries[j].count; m++) {
                    long long b = canaries[j].at[m] - canaries[j].late[m];
                    if (b < ended && canaries[j].at[m] > began && canaries[j].late[m] > other) other = canaries[j].late[m];
                }
                printf(" CPU %d %.1f ms", canaries[j].cpu, other / 1e6);
            }
            printf("\n");
        }
    }
    for (int i = 0; i < n; i++) {
        const canary_t *c = &canaries[i];
        printf("CPU %d: %lld wake-ups in %lld s: longest %.1f ms late; >= 20 ms: %d, 10-20 ms: %d\n", c->cpu,
               c->wakeups, c->seconds, c->longest / 1e6, c->over20, c->over10);
    }
    return 0;
}
