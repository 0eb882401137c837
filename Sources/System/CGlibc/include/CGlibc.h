// SPDX-License-Identifier: MIT
// glibc calls that Swift's Glibc module hides (GNU extensions, declared only under _GNU_SOURCE),
// compiled here with it. OSThread is their one Swift wrapper.
#ifndef BATON_CGLIBC_H
#define BATON_CGLIBC_H

#include <semaphore.h>
#include <spawn.h>
#include <time.h>

/// sem_clockwait on CLOCK_MONOTONIC: waits for `sem` until the monotonic time `deadline`, which a
/// step of the wall clock does not move (sem_timedwait's CLOCK_REALTIME deadline does). 0 when it
/// took a post, else -1 with errno (ETIMEDOUT, EINTR).
int baton_sem_wait_monotonic(sem_t *sem, const struct timespec *deadline);

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the child closes every descriptor from
/// `from` up before it runs the program. 0, or an error number.
int baton_spawn_close_from(posix_spawn_file_actions_t *actions, int from);

#endif
