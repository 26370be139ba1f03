/*
 * alloc.h - every allocation the core makes, and every kernel object it creates, passes one of
 * these points, so that a fault-injection build (-DRL_FAULT_INJECTION, see fault.c) can make any
 * single one of them fail and the tests can check that each failure is reported and leaves
 * nothing behind. In other builds they are the libc calls and cost nothing more.
 */
#ifndef RL_ALLOC_H
#define RL_ALLOC_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifdef RL_FAULT_INJECTION
/* True when the calling thread's next fault point must fail (fault.c). */
__attribute__((visibility("hidden"))) bool rl_fault_now(void);
/* Test control, calling thread only: let `after` points pass, then fail the next `count` points
 * (count < 0: every one from then on); rl_fault_arm(-1, 0) disarms. rl_fault_points() is how many
 * points the thread has passed since it last armed. */
__attribute__((visibility("hidden"))) void rl_fault_arm(long after, long count);
__attribute__((visibility("hidden"))) long rl_fault_points(void);
#else
static inline bool rl_fault_now(void) { return false; }
#endif

static inline bool rl_fault_fails(int err) {
    if (!rl_fault_now()) return false;
    errno = err;
    return true;
}

static inline void *rl_malloc(size_t n) { return rl_fault_fails(ENOMEM) ? NULL : malloc(n); }
static inline void *rl_calloc(size_t n, size_t size) { return rl_fault_fails(ENOMEM) ? NULL : calloc(n, size); }
static inline void *rl_realloc(void *p, size_t n) { return rl_fault_fails(ENOMEM) ? NULL : realloc(p, n); }
static inline void *rl_aligned_alloc(size_t alignment, size_t n) {
    return rl_fault_fails(ENOMEM) ? NULL : aligned_alloc(alignment, n);
}
static inline char *rl_strdup(const char *s) { return rl_fault_fails(ENOMEM) ? NULL : strdup(s); }

#endif
