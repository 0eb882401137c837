// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <semaphore.h>
#include <spawn.h>
#include <time.h>

#include "CGlibc.h"

int baton_sem_wait_monotonic(sem_t *sem, const struct timespec *deadline) {
    return sem_clockwait(sem, CLOCK_MONOTONIC, deadline);
}

int baton_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
