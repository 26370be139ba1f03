/* allocs.c - the malloc family, defined in the benchmark program so that it can count the heap
 * allocations a benchmark makes: the core is linked into this executable, and the dlopen'ed
 * peers (CF included) bind malloc to the executable's definition before libc's, so every
 * allocation of the process comes through here. Each one forwards to glibc's own entry point
 * (__libc_malloc...). While counting is off this costs one relaxed load per call, which every
 * peer pays alike. */
#include "bench.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);

static _Atomic int counting;
static _Atomic unsigned long long n_allocs, n_frees, n_bytes;

static inline void count_alloc(size_t n)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&n_bytes, n, memory_order_relaxed);
    }
}

static inline void count_free(void *p)
{
    if (p && atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&n_frees, 1, memory_order_relaxed);
}

void *malloc(size_t n)
{
    count_alloc(n);
    return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
    count_alloc(k * n);
    return __libc_calloc(k, n);
}

/* A realloc may move the block: it counts as an allocation (and, with size 0, as a free). */
void *realloc(void *p, size_t n)
{
    if (p && !n) count_free(p);
    else count_alloc(n);
    return __libc_realloc(p, n);
}

void free(void *p)
{
    count_free(p);
    __libc_free(p);
}

void *memalign(size_t align, size_t n)
{
    count_alloc(n);
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    count_alloc(n);
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    void *p;
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    count_alloc(n);
    if (!(p = __libc_memalign(align, n))) return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    count_alloc(n);
    return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), n);
}

void alloc_count_start(void)
{
    atomic_store(&n_allocs, 0);
    atomic_store(&n_frees, 0);
    atomic_store(&n_bytes, 0);
    atomic_store(&counting, 1);
}

void alloc_count_stop(alloc_counts_t *out)
{
    atomic_store(&counting, 0);
    out->allocs = atomic_load(&n_allocs);
    out->frees = atomic_load(&n_frees);
    out->bytes = atomic_load(&n_bytes);
}

long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}
