#define _GNU_SOURCE
#include "CNetworkNamespace.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>

int baton_new_network(void) {
    // CLONE_NEWNET moves the calling thread only (the process's other threads stay where they are).
    if (unshare(CLONE_NEWNET) != 0) return -errno;
    int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int baton_enter_network(int fd) { return setns(fd, CLONE_NEWNET) == 0 ? 0 : errno; }
