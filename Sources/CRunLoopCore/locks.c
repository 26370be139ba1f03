/*
 * locks.c - the library's locks that are not a loop's own, and fork.
 *
 * Sources lock through a fixed array of striped mutexes chosen by address, not a mutex each: a
 * source lock is held only for a few instructions (its list of loops), two sources sharing a
 * stripe rarely meet, and a fixed set is what makes fork safe without a registry of sources.
 * A second set of stripes serves the owner pointers of timers and observers (see loop.c): only
 * a thread reaching another loop's item, or changing an item no loop owns, takes one; a loop
 * adding, firing and removing its own items takes none, so loops on different threads share no
 * lock.
 *
 * fork() in a threaded program copies memory but only the calling thread: a lock another thread
 * held is held for ever in the child, and the data it guarded may be half changed. So the prepare
 * handler takes every lock of the library, in the documented order (internal.h), and both sides
 * release them after. No lock is ever held across a callout or a wait, so prepare waits only for
 * short critical sections. Then, in the child:
 *   - the forking thread's loop gets new kernel objects (an epoll set, eventfd and timerfd shared
 *     with the parent would let the child rearm the parent's timer or steal its wakeups) and its
 *     fds are registered again;
 *   - every other loop belonged to a thread that does not exist in the child: it is dead (takes
 *     no items, runs nothing, holds no kernel object), and its items stay where they are;
 *   - the forking thread is the child's main thread, so its loop (if any) is the main loop.
 */
#include "internal.h"

#include <stdint.h>

/* Enough that unrelated items rarely share one on a machine with a few dozen cores. Kept small
 * also because prepare holds all of them at once (both sets), with every loop's lock, and
 * ThreadSanitizer's deadlock detector tracks at most 64 locks held by one thread. */
enum { STRIPES = 16 };

typedef struct {
    _Alignas(64) pthread_mutex_t lock;
} stripe;

static stripe stripes[STRIPES] = {[0 ... STRIPES - 1] = {PTHREAD_MUTEX_INITIALIZER}};
static stripe item_stripes[STRIPES] = {[0 ... STRIPES - 1] = {PTHREAD_MUTEX_INITIALIZER}};

static pthread_mutex_t rl_loops_lock = PTHREAD_MUTEX_INITIALIZER;
static rl_loop_t *loops; /* every live loop, rl_loops_lock */

static pthread_mutex_t *stripe_of(stripe *set, const void *object) {
    uint64_t h = (uint64_t)(uintptr_t)object * 0x9E3779B97F4A7C15ull;
    return &set[(h >> 40) % STRIPES].lock;
}

void rl_source_lock(const rl_source_t *source) { pthread_mutex_lock(stripe_of(stripes, source)); }
void rl_source_unlock(const rl_source_t *source) { pthread_mutex_unlock(stripe_of(stripes, source)); }
void rl_item_lock(const void *item) { pthread_mutex_lock(stripe_of(item_stripes, item)); }
void rl_item_unlock(const void *item) { pthread_mutex_unlock(stripe_of(item_stripes, item)); }

void rl_items_quiesce(void) {
    for (int i = 0; i < STRIPES; i++) {
        pthread_mutex_lock(&item_stripes[i].lock);
        pthread_mutex_unlock(&item_stripes[i].lock);
    }
}

void rl_loops_register(rl_loop_t *loop) {
    pthread_mutex_lock(&rl_loops_lock);
    loop->registry_prev = NULL;
    loop->registry_next = loops;
    if (loops) loops->registry_prev = loop;
    loops = loop;
    pthread_mutex_unlock(&rl_loops_lock);
}

void rl_loops_unregister(rl_loop_t *loop) {
    pthread_mutex_lock(&rl_loops_lock);
    if (loop->registry_prev) loop->registry_prev->registry_next = loop->registry_next;
    else if (loops == loop) loops = loop->registry_next;
    if (loop->registry_next) loop->registry_next->registry_prev = loop->registry_prev;
    pthread_mutex_unlock(&rl_loops_lock);
}

/* Lock order: main loop's creation lock (loop.c takes it before creating, so it comes first),
 * source stripes, the registry, each loop, item stripes. */
RL_HIDDEN void rl_main_lock_for_fork(bool lock);

static void prepare(void) {
    rl_signals_lock_for_fork(true); /* a leaf, never held with another */
    rl_main_lock_for_fork(true);
    for (int i = 0; i < STRIPES; i++) pthread_mutex_lock(&stripes[i].lock);
    pthread_mutex_lock(&rl_loops_lock);
    for (rl_loop_t *l = loops; l; l = l->registry_next) rl_loop_lock_mutex(l);
    for (int i = 0; i < STRIPES; i++) pthread_mutex_lock(&item_stripes[i].lock);
}

static void release_all(void) {
    for (int i = STRIPES; i-- > 0;) pthread_mutex_unlock(&item_stripes[i].lock);
    for (rl_loop_t *l = loops; l; l = l->registry_next) rl_loop_unlock(l);
    pthread_mutex_unlock(&rl_loops_lock);
    for (int i = STRIPES; i-- > 0;) pthread_mutex_unlock(&stripes[i].lock);
    rl_main_lock_for_fork(false);
    rl_signals_lock_for_fork(false);
}

static void child(void) {
    /* Every lock is held by this thread: fix up each loop under its own lock, then let go. The
     * signal eventfd is replaced first, so that the surviving loop's new set watches the new one. */
    rl_signals_after_fork_child();
    rl_bias_after_fork_child();
    for (rl_loop_t *l = loops; l; l = l->registry_next) rl_loop_after_fork_child(l, l == rl_tls_loop);
    rl_main_loop_after_fork_child();
    release_all();
}

__attribute__((constructor)) static void install_fork_handlers(void) {
    /* Registered at load, before any thread can hold a lock of ours. A failure (ENOMEM at load)
     * leaves fork unprotected; nothing else depends on it. */
    (void)pthread_atfork(prepare, release_all, child);
}
