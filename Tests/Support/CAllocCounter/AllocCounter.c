// Allocation counting for the real-time tests (see shared notes "counting-allocations").
// Both flag and counter are thread-local: tests run in parallel and must not see each other's work.
#include "CAllocCounter.h"
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static __thread int counting;
static __thread uint64_t count;

static inline void note(void) { if (counting) count++; }

void baton_alloc_count_start(void) { count = 0; counting = 1; }
uint64_t baton_alloc_count_stop(void) { counting = 0; return count; }

void *malloc(size_t n) { note(); return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { note(); return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { note(); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
int posix_memalign(void **out, size_t align, size_t n) {
    note();
    void *p = __libc_memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t n) { note(); return __libc_memalign(align, n); }
void *memalign(size_t align, size_t n) { note(); return __libc_memalign(align, n); }
