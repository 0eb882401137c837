#pragma once
// Network namespaces for tests that need a network of their own (no route, then one): glibc declares
// unshare and setns only under _GNU_SOURCE, which Swift's Glibc module does not define.

/// Moves the calling thread alone into a new network namespace (only `lo`, down); returns a
/// descriptor of it (for `baton_enter_network`), or -errno. Needs CAP_SYS_ADMIN (root).
int baton_new_network(void);

/// Moves the calling thread into the network namespace `fd` (from `baton_new_network`); returns 0 or
/// an errno.
int baton_enter_network(int fd);
