// SPDX-License-Identifier: MIT
// glibc calls that Swift's Glibc module hides (GNU extensions, declared only under _GNU_SOURCE),
// compiled here with it. OSThread is their one Swift wrapper.
#ifndef BATON_CGLIBC_H
#define BATON_CGLIBC_H

#include <semaphore.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/// sem_clockwait on CLOCK_MONOTONIC: waits for `sem` until the monotonic time `deadline`, which a
/// step of the wall clock does not move (sem_timedwait's CLOCK_REALTIME deadline does). 0 when it
/// took a post, else -1 with errno (ETIMEDOUT, EINTR).
int baton_sem_wait_monotonic(sem_t *sem, const struct timespec *deadline);

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the child closes every descriptor from
/// `from` up before it runs the program. 0, or an error number.
int baton_spawn_close_from(posix_spawn_file_actions_t *actions, int from);

/// mlock2(addr, length, MLOCK_ONFAULT) (glibc 2.27): the range's pages are locked as they are touched,
/// not faulted in now. 0, or -1 with errno.
int baton_mlock_onfault(const void *addr, size_t length);

/// What `baton_each_loaded_segment` tells of a segment: a `PT_LOAD` without `PF_W`, one with it,
/// the `PT_GNU_RELRO` range, or another program header.
enum { BATON_SEGMENT_OTHER = 0, BATON_SEGMENT_READ_ONLY = 1, BATON_SEGMENT_WRITABLE = 2, BATON_SEGMENT_RELRO = 3 };

/// One program header of one loaded object, at its address in this process.
struct baton_loaded_segment {
    /// The object's name as the loader has it ("" for the executable); valid during the call only.
    const char *object;
    /// The object's place in the loader's list: 0 is the executable.
    unsigned object_index;
    /// The object has text relocations (DT_TEXTREL, or DF_TEXTREL in DT_FLAGS).
    int text_relocations;
    int kind;
    /// Where the object is loaded (dlpi_addr: its addresses' offset from the file's).
    uintptr_t base;
    /// The segment in memory (`p_memsz`), and where the file's bytes end in it (`p_filesz`): past
    /// that the loader zero-filled the rest of the page, which holds no file bytes.
    uintptr_t start, end, file_end;
};

/// dlopen(name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE): the library loaded under `name` is
/// counted once more (never closed) and never unloaded. Its load address (the link map's l_addr),
/// or 0 when no library is loaded under that name.
uintptr_t baton_pin_loaded(const char *name);

/// dl_iterate_phdr (a GNU extension): `visit` is called for every program header of every object
/// loaded now, under the loader's lock (no dlopen or dlclose in `visit`).
void baton_each_loaded_segment(void (*visit)(const struct baton_loaded_segment *, void *), void *context);

#endif
