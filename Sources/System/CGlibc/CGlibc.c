// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <semaphore.h>
#include <spawn.h>
#include <sys/mman.h>
#include <time.h>

#include "CGlibc.h"

int baton_sem_wait_monotonic(sem_t *sem, const struct timespec *deadline) {
    return sem_clockwait(sem, CLOCK_MONOTONIC, deadline);
}

int baton_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int baton_mlock_onfault(const void *addr, size_t length) {
    return mlock2(addr, length, MLOCK_ONFAULT);
}

struct walk {
    void (*visit)(const struct baton_loaded_segment *, void *);
    void *context;
    unsigned index;
};

static int each_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct walk *walk = data;
    int text_relocations = 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        const ElfW(Dyn) *entry = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        for (; entry->d_tag != DT_NULL; entry++) {
            if (entry->d_tag == DT_TEXTREL || (entry->d_tag == DT_FLAGS && (entry->d_un.d_val & DF_TEXTREL)))
                text_relocations = 1;
        }
    }
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[i];
        struct baton_loaded_segment segment = {
            .object = info->dlpi_name ? info->dlpi_name : "",
            .object_index = walk->index,
            .text_relocations = text_relocations,
            .kind = header->p_type == PT_GNU_RELRO ? BATON_SEGMENT_RELRO
                    : header->p_type != PT_LOAD     ? BATON_SEGMENT_OTHER
                    : header->p_flags & PF_W        ? BATON_SEGMENT_WRITABLE
                                                    : BATON_SEGMENT_READ_ONLY,
            .base = info->dlpi_addr,
            .start = info->dlpi_addr + header->p_vaddr,
            .end = info->dlpi_addr + header->p_vaddr + header->p_memsz,
            .file_end = info->dlpi_addr + header->p_vaddr + header->p_filesz,
        };
        walk->visit(&segment, walk->context);
    }
    walk->index++;
    return 0;
}

void baton_each_loaded_segment(void (*visit)(const struct baton_loaded_segment *, void *), void *context) {
    struct walk walk = {visit, context, 0};
    dl_iterate_phdr(each_object, &walk);
}

uintptr_t baton_pin_loaded(const char *name) {
    void *handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (!handle) return 0;
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return 0;
    return map->l_addr;
}
