/*
 * loop.c - loops as objects: one per thread, created on first use and torn down at thread exit;
 * the main thread's loop; item ownership; stop; counters. (Waking a loop is wake.c's.)
 */
#include "internal.h"
#include "sort.h"
#include "wait.h"
#include "fd_table.h"
#include "wake.h"
#include "lag.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#endif

RL_HIDDEN _Thread_local rl_loop_t *rl_tls_loop __attribute__((tls_model("initial-exec")));

/* The main loop: created once under main_lock, then read without it. */
static pthread_mutex_t main_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(rl_loop_t *) main_loop;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static int key_error; /* pthread_key_create's error, if it failed */

static bool on_main_thread(void) { return gettid() == getpid(); }

/* A new loop, or NULL with errno (ENOMEM, EMFILE, ENFILE). */
static rl_loop_t *loop_create(void) {
    rl_loop_t *loop = rl_aligned_alloc(_Alignof(rl_loop_t), sizeof *loop);
    if (!loop) {
        errno = ENOMEM;
        return NULL;
    }
    memset(loop, 0, sizeof *loop);
    rl_object_init(&loop->obj, RL_TYPE_LOOP);
    rl_ptrvec_init(&loop->modes);
    rl_ptrvec_init(&loop->fds.parked);
    rl_ptrvec_init(&loop->signal_links);
    sigemptyset(&loop->signal_accept);
    int rc = rl_wait_init(&loop->wait);
    if (rc == 0 && !(loop->default_mode = rl_mode_find(loop, RL_DEFAULT_MODE, true))) rc = -ENOMEM;
    if (rc) {
        rl_wait_destroy(&loop->wait);
        rl_ptrvec_free(&loop->modes);
        free(loop);
        errno = -rc;
        return NULL;
    }
    pthread_mutex_init(&loop->lock, NULL);
    loop->default_mode->common = true;
    atomic_init(&loop->spin, rl_wake_default_spin());
    loop->time = rl_time_now();
    (void)rl_bias_available(); /* registered once, here rather than under a loop's lock */
    rl_loops_register(loop);
    return loop;
}

static void thread_exited(void *value) {
    rl_loop_t *loop = value;
    rl_loop_teardown(loop);
    rl_tls_loop = NULL;
    rl_release(loop);
}

static void make_key(void) { key_error = pthread_key_create(&exit_key, thread_exited); }

/* The thread's first call: out of line, so that every later call is a load and a return with no
 * registers to save. */
static __attribute__((noinline)) rl_loop_t *make_current(void) {
    pthread_once(&key_once, make_key);
    if (key_error) {
        errno = key_error; /* EAGAIN: the process has no thread-specific key left */
        return NULL;
    }
    rl_loop_t *loop;
    if (on_main_thread()) {
        loop = rl_retain(rl_loop_get_main()); /* the thread's reference, dropped at its exit */
    } else {
        loop = loop_create();
    }
    if (!loop) return NULL; /* errno says why; a later call tries again */
    if ((errno = pthread_setspecific(exit_key, loop)) != 0) {
        int err = errno;
        if (loop != atomic_load(&main_loop)) rl_loop_teardown(loop); /* nobody else knows it */
        rl_release(loop);
        errno = err;
        return NULL;
    }
    rl_tls_loop = loop;
#if RL_BIAS
    /* Biased from the start: a loop is mostly armed by its own thread before it first runs (a
     * server's setup, a batch of timeouts), and another thread's first lock pays the one
     * membarrier that takes the bias away. Set under the mutex, as a re-bias is (internal.h). */
    pthread_mutex_lock(&loop->lock);
    if (rl_bias_ready()) atomic_store_explicit(&loop->bias, true, memory_order_relaxed);
    pthread_mutex_unlock(&loop->lock);
#endif
    return loop;
}

rl_loop_t *rl_loop_get_current(void) {
    rl_loop_t *loop = rl_tls_loop;
    return loop ? loop : make_current();
}

rl_loop_t *rl_loop_get_main(void) {
    rl_loop_t *loop = atomic_load_explicit(&main_loop, memory_order_acquire);
    if (loop) return loop;
    pthread_mutex_lock(&main_lock);
    loop = atomic_load_explicit(&main_loop, memory_order_relaxed);
    if (!loop && (loop = loop_create())) atomic_store_explicit(&main_loop, loop, memory_order_release);
    int err = errno;
    pthread_mutex_unlock(&main_lock);
    errno = err;
    return loop;
}

void rl_main_lock_for_fork(bool lock) {
    if (lock) pthread_mutex_lock(&main_lock);
    else pthread_mutex_unlock(&main_lock);
}

void rl_main_loop_after_fork_child(void) {
    /* The forking thread is the child's only thread, and so its main thread (its id is the
     * process id): its loop, if it has one, is the main loop. The old main loop, if another, is
     * dead here; its reference is kept, since borrowed pointers to it may be around. */
    rl_loop_t *old = atomic_load_explicit(&main_loop, memory_order_relaxed);
    if (old == rl_tls_loop) return;
    atomic_store_explicit(&main_loop, rl_tls_loop ? rl_retain(rl_tls_loop) : NULL, memory_order_release);
}

bool rl_loop_is_dead(rl_loop_t *loop) {
    return !loop || atomic_load(&loop->dead);
}

/* rl_loop_is_current on a thread that has no loop yet: out of line (two system calls), so that
 * the usual answer, from the thread's loop, needs no frame (every Swift run asks it). */
static __attribute__((noinline)) bool is_main_loop_here(rl_loop_t *loop) {
    return on_main_thread() && loop == atomic_load_explicit(&main_loop, memory_order_acquire);
}

bool rl_loop_is_main(rl_loop_t *loop) {
    return loop && loop == atomic_load_explicit(&main_loop, memory_order_acquire);
}

bool rl_loop_is_current(rl_loop_t *loop) {
    if (!loop) return false;
    rl_loop_t *here = rl_tls_loop;
    if (here) return here == loop;
    return is_main_loop_here(loop);
}

/*
 * Ownership of timers and observers, with no lock shared between loops on the paths a loop's
 * own work takes. The owner pointer is NULL (no loop), a loop, or RL_OWNER_BUSY (a thread is
 * changing the fields of an unowned item). It moves:
 *   NULL -> loop   claim, by compare-and-swap, with loop locked (it waits out a BUSY);
 *   loop -> NULL   clear, a plain store, with loop locked;
 *   NULL <-> BUSY  rl_owner_lock on an unowned item, with its item stripe held.
 * A thread other than the owner's reads the pointer under the item stripe and retains the loop
 * unless it is already being destroyed; rl_loop_destroy takes every stripe once before freeing
 * the loop (rl_items_quiesce), so a loop read under a stripe is still there to be retained or
 * refused. BUSY is only set with a stripe held, so fork (which takes every stripe) never leaves
 * an item BUSY in the child.
 */
/* membarrier(2): 1 works (registered), -1 does not, 0 not asked yet. */
static atomic_int bias_state;
/* A page whose protection the fallback fence changes (fence_by_tlb_shootdown). */
static void *fence_page;
static size_t fence_page_size;
bool rl_bias_fallback_only; /* tests: revoke with the fallback fence alone */

bool rl_bias_available(void) {
    int state = atomic_load_explicit(&bias_state, memory_order_acquire);
    if (state) return state > 0;
#if RL_BIAS && defined(__NR_membarrier)
    long commands = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    state = commands >= 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                    syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0
                ? 1
                : -1;
    if (state > 0 && !fence_page) {
        size_t size = (size_t)sysconf(_SC_PAGESIZE);
        void *page = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) {
            state = -1;
        } else {
            fence_page_size = size;
            fence_page = page;
        }
    }
#else
    state = -1;
#endif
    atomic_store_explicit(&bias_state, state, memory_order_release);
    return state > 0;
}

bool rl_bias_ready(void) { return atomic_load_explicit(&bias_state, memory_order_relaxed) > 0; }

void rl_bias_after_fork_child(void) {
    /* The registration belongs to the process: make it again (the fence page is inherited). */
    atomic_store_explicit(&bias_state, 0, memory_order_relaxed);
    (void)rl_bias_available();
}

/* The fallback fence: taking write access away from a page this thread just wrote makes the
 * kernel flush that page from the TLB of every CPU that may run this process, by interrupting
 * them, and an interrupt is a full barrier on the CPU it lands on (the way to an asymmetric
 * fence on kernels without membarrier). */
static bool fence_by_tlb_shootdown(void) {
    if (!fence_page) return false;
    *(volatile char *)fence_page = 1;
    return mprotect(fence_page, fence_page_size, PROT_READ) == 0 &&
           mprotect(fence_page, fence_page_size, PROT_READ | PROT_WRITE) == 0;
}

/* The full fence on every thread of the process that the revocation of a bias needs: membarrier,
 * retried while the kernel is short of memory; refused (a seccomp filter installed after the loop
 * biased, say), no loop biases any more and this revocation takes the fallback. If that fails
 * too, the loop's thread could be inside a fast section unseen: a state that cannot be allowed
 * to go on. */
static void fence_every_thread(void) {
#if RL_BIAS && defined(__NR_membarrier)
    for (int tries = 0; !rl_bias_fallback_only && tries < 100; tries++) {
        if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
        if (errno != ENOMEM && errno != EINTR && errno != EAGAIN) break;
        sched_yield();
    }
    if (!rl_bias_fallback_only) atomic_store_explicit(&bias_state, -1, memory_order_relaxed);
#endif
    if (fence_by_tlb_shootdown()) return;
    abort();
}

void rl_loop_exclude_fast(rl_loop_t *loop) {
    atomic_store_explicit(&loop->fast_out, true, memory_order_seq_cst);
    loop->cross_locks++;
    /* A biased loop's thread stores fast with no fence: clear the bias and fence its thread from
     * here (internal.h, "The bias"), once; it biases itself again when other threads keep away. */
    if (atomic_load_explicit(&loop->bias, memory_order_relaxed)) {
        atomic_store_explicit(&loop->bias, false, memory_order_relaxed);
        loop->bias_revoked++;
        fence_every_thread();
    }
    /* A fast section is a few hundred instructions, but its thread may be preempted in it. */
    for (unsigned spins = 0; atomic_load_explicit(&loop->fast, memory_order_seq_cst); spins++) {
        if (spins < 64) rl_cpu_relax();
        else sched_yield();
    }
}

static bool retain_unless_dying(rl_loop_t *loop) {
    int refs = atomic_load_explicit(&loop->obj.refs, memory_order_relaxed);
    do {
        if (refs <= 0) return false;
    } while (!atomic_compare_exchange_weak_explicit(&loop->obj.refs, &refs, refs + 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

rl_loop_t *rl_owner_lock(const void *item, _Atomic(rl_loop_t *) *owner) {
    for (;;) {
        rl_loop_t *loop = atomic_load(owner);
        if (loop && loop == rl_tls_loop) {
            /* Our own loop cannot go away under us (this thread holds a reference to it until
             * it exits): no stripe and no reference on the loop thread's path, and its fast
             * section rather than the mutex (internal.h). */
            rl_loop_lock(loop);
            if (atomic_load(owner) == loop) return loop;
            rl_loop_unlock(loop);
            continue;
        }
        rl_item_lock(item);
        loop = atomic_load(owner);
        if (loop && loop == rl_tls_loop) { /* it moved to our loop meanwhile: the path above */
            rl_item_unlock(item);
            continue;
        }
        if (!loop) {
            rl_loop_t *expected = NULL;
            bool busy = atomic_compare_exchange_strong(owner, &expected, RL_OWNER_BUSY);
            rl_item_unlock(item);
            if (busy) return NULL; /* unowned, and ours to change until rl_owner_unlock */
            continue;
        }
        bool held = loop != RL_OWNER_BUSY && retain_unless_dying(loop);
        rl_item_unlock(item);
        if (!held) { /* another thread changes it, or its loop is being destroyed: wait */
            sched_yield();
            continue;
        }
        rl_loop_lock_mutex(loop);
        if (atomic_load(owner) == loop) return loop;
        rl_loop_unlock(loop);
        rl_release(loop);
    }
}

void rl_owner_unlock(_Atomic(rl_loop_t *) *owner, rl_loop_t *loop) {
    if (!loop) {
        atomic_store(owner, NULL);
        return;
    }
    rl_loop_unlock(loop);
    rl_owner_put(loop);
}

void rl_owner_put(rl_loop_t *loop) {
    if (loop != rl_tls_loop) rl_release(loop); /* the reference another thread's lock took */
}

int rl_owner_claim(rl_loop_t *loop, _Atomic(rl_loop_t *) *owner) {
    rl_loop_t *now = atomic_load(owner);
    if (now == loop) return loop->dead ? -EINVAL : 0; /* only loop's lock holder clears it */
    if (loop->dead) return -EINVAL;
    for (;;) {
        if (now && now != RL_OWNER_BUSY) return -EBUSY;
        if (!now && atomic_compare_exchange_weak(owner, &now, loop)) return 0;
        if (now == RL_OWNER_BUSY) {
            sched_yield(); /* a few stores under a stripe: over at once */
            now = atomic_load(owner);
        }
    }
}

void rl_owner_clear(_Atomic(rl_loop_t *) *owner) { atomic_store(owner, NULL); }

void rl_loop_stop(rl_loop_t *loop) {
    if (!loop) return;
    rl_loop_lock_mutex(loop);
    bool running = loop->run != NULL;
    if (running) atomic_store(&loop->run->stopped, true);
    rl_loop_unlock(loop);
    if (running) rl_wake_post(loop);
}

double rl_loop_get_next_timer_fire_date(rl_loop_t *loop, const char *mode) {
    if (!loop || rl_mode_check_name(mode) || rl_mode_name_is_common(mode)) return 0;
    rl_loop_lock_mutex(loop);
    /* Asked inside a timer's callout: the phase's timers yet to fire count, as CF's do. */
    if (rl_tls_loop == loop) rl_timers_restore_taken_if_any(loop);
    rl_mode *m = rl_mode_find(loop, mode, false);
    const rl_heap_slot *first = m ? rl_heap_first(&m->timers) : NULL;
    double date = first ? first->when : m && rl_heap_parked_count(&m->timers) ? INFINITY : 0; /* only parked timers: never */
    /* Asked from another thread while the loop fires m's due timers, which it parked as it took
     * them: the date of the one whose callout runs (CF's answer: the list is sorted, the rest
     * are due no earlier, and its keys stay put until the phase ends). */
    if (m && loop->taken_n && loop->taken_mode == m) {
        size_t at = atomic_load_explicit(&loop->taken_at, memory_order_relaxed);
        if (at < loop->taken_n && loop->taken[at].key.when < date) date = loop->taken[at].key.when;
    }
    rl_loop_unlock(loop);
    return date;
}

double rl_loop_get_time(rl_loop_t *loop) {
    if (!loop || rl_tls_loop != loop) return rl_time_now(); /* another thread's: only the clock */
    return loop->phase_time > 0 ? loop->phase_time : loop->time;
}

double rl_loop_update_time(rl_loop_t *loop) {
    double now = rl_time_now();
    if (loop && rl_tls_loop == loop) {
        loop->time = now;
        if (loop->phase_time > 0) loop->phase_time = now; /* rl_timer_rearm's base moves with it */
    }
    return now;
}

int rl_loop_get_stats(rl_loop_t *loop, rl_loop_stats_t *stats) {
    if (!loop || !stats) return -EINVAL;
    rl_counters *c = &loop->counters;
    stats->passes = atomic_load_explicit(&c->passes, memory_order_relaxed);
    stats->waits = atomic_load_explicit(&c->waits, memory_order_relaxed);
    stats->wakeups = atomic_load_explicit(&c->wakeups, memory_order_relaxed);
    stats->wakeup_writes = atomic_load_explicit(&c->wakeup_writes, memory_order_relaxed);
    stats->timers_fired = atomic_load_explicit(&c->timers_fired, memory_order_relaxed);
    stats->sources_performed = atomic_load_explicit(&c->sources_performed, memory_order_relaxed);
    stats->time_waiting = atomic_load_explicit(&c->time_waiting, memory_order_relaxed);
    stats->time_in_callouts = atomic_load_explicit(&c->time_in_callouts, memory_order_relaxed);
    return 0;
}

/* One item of loop still in a mode or a common set, retained; NULL when there is none left. */
static rl_object *any_item(rl_loop_t *loop) {
    rl_object *item = NULL;
    rl_loop_lock_mutex(loop);
    for (size_t i = 0; !item && i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        for (size_t j = 0; !item && j < m->sources.capacity; j++) item = m->sources.slots[j];
        size_t at = 0;
        double when;
        rl_heap_node *node = item ? NULL : rl_heap_next(&m->timers, &at, &when); /* parked ones too */
        if (node) item = &rl_timer_of_node(node)->obj;
        if (!item && m->observers.count) item = m->observers.items[0];
    }
    rl_ptrset *common[] = {&loop->common_sources, &loop->common_timers, &loop->common_observers};
    for (int k = 0; !item && k < 3; k++)
        for (size_t j = 0; !item && j < common[k]->capacity; j++) item = common[k]->slots[j];
    rl_retain(item);
    rl_loop_unlock(loop);
    return item;
}

void rl_loop_teardown(rl_loop_t *loop) {
    rl_loop_lock_mutex(loop);
    loop->dead = true; /* from here on, adds fail: the loop only empties */
    /* A fire phase still published was cut short by the thread's exit inside a callout: its
     * frame is gone, and the removals below must not write into it. */
    rl_timers_abandon_phase(loop);
    rl_loop_unlock(loop);
    rl_blocks_drop_all(loop);
    /* One item at a time, so that nothing is allocated: teardown cannot fail halfway (a timer
     * heap that empties may try to move to a smaller array, and keeps its larger one if that
     * fails). */
    for (rl_object *item; (item = any_item(loop)) != NULL; rl_release(item)) {
        if (item->type == RL_TYPE_SOURCE) rl_source_remove_from_loop(loop, (rl_source_t *)item);
        else if (item->type == RL_TYPE_TIMER) rl_timer_remove_from_loop(loop, (rl_timer_t *)item);
        else rl_observer_remove_from_loop(loop, (rl_observer_t *)item);
    }
    rl_loop_lock_mutex(loop);
    rl_loop_close(loop);
    rl_loop_unlock(loop);
}

void rl_loop_close(rl_loop_t *loop) {
    loop->dead = true;
    rl_wake_quiesce(loop); /* no waker writes to the eventfd from here on */
    rl_wait_destroy(&loop->wait);
    rl_fd_table_free(loop); /* the registrations went with the epoll set */
}

void rl_loop_after_fork_child(rl_loop_t *loop, bool survives) {
    /* Unbiased until its thread finds membarrier registered in this process again. */
    atomic_store_explicit(&loop->bias, false, memory_order_relaxed);
    loop->bias_quiet = 0;
    rl_wake_after_fork(loop);
    rl_lag_after_fork_child(loop);
    if (survives && !loop->dead) {
        /* This thread's loop: its own kernel objects from now on, its fds registered again. */
        if (rl_fd_table_renew(loop) == 0) return;
        /* No fd or memory for them: the thread gets a new loop at its next call instead (its
         * reference to this one is left, since releasing could call out from a fork handler). */
        rl_tls_loop = NULL;
        (void)pthread_setspecific(exit_key, NULL);
    }
    /* A loop of a thread that is not in this process (or one whose objects could not be made
     * again): dead, and nothing of it may reach the parent's kernel objects. Its frames are on a
     * stack no thread runs. */
    loop->run = NULL;
    /* So is its fire phase, if it was in one, and glibc may hand that stack to a new thread. (The
     * forking thread's own phase, when it forked inside a timer callout, goes on on its stack
     * even if its loop could not be renewed.) */
    if (!survives) rl_timers_abandon_phase(loop);
    rl_loop_close(loop);
}

void rl_loop_destroy(rl_loop_t *loop) {
    rl_loop_teardown(loop); /* a loop never bound to a thread may still hold items */
    rl_items_quiesce(); /* no thread still holds this loop's address from an owner pointer */
    rl_loops_unregister(loop);
    for (size_t i = 0; i < loop->modes.count; i++) rl_mode_free(loop->modes.items[i]);
    rl_ptrvec_free(&loop->modes);
    rl_links_free_queued(loop);
    rl_blocks_free_spares(loop);
    rl_timers_free_spare(loop);
    rl_ptrset_free(&loop->common_sources);
    rl_ptrset_free(&loop->common_timers);
    rl_ptrset_free(&loop->common_observers);
    rl_ptrvec_free(&loop->signal_links); /* empty: teardown removed every source */
    pthread_mutex_destroy(&loop->lock);
    free(loop);
}
