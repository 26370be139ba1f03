/*
 * t_fast.c - the loop's fast section (internal.h, "The loop's lock, in two halves"): on the
 * loop's own thread, timer operations take no mutex while no other thread holds it, and wait for
 * one that does; from other threads, the same timers may be added, removed, re-armed and
 * invalidated while the loop's thread works on them, and the heaps stay whole (rl_loop_verify)
 * and references balance. Run under ThreadSanitizer (make check-tsan), a fast section that did
 * not exclude the other threads' locked sections shows as a data race on the heap.
 */
#include "ttrace.h"
#include "../../Sources/CRunLoopCore/internal.h"

#include <pthread.h>
#include <stdlib.h>

#define DEF RL_DEFAULT_MODE

static void never_fires(rl_timer_t *t, void *info) { (void)t, (void)info; }

typedef struct {
    rl_loop_t *loop;
    bool handshake;          /* take the lock as the library's other threads do */
    atomic_bool locked, released;
} holder_t;

/* Hold loop's mutex for a while: bare (as only the loop's own thread may), or with the
 * handshake every other thread makes (rl_loop_lock_mutex). */
static void *hold_lock(void *arg) {
    holder_t *h = arg;
    if (h->handshake) rl_loop_lock_mutex(h->loop);
    else pthread_mutex_lock(&h->loop->lock);
    atomic_store(&h->locked, true);
    tt_sleep(0.2);
    atomic_store(&h->released, true);
    if (h->handshake) rl_loop_unlock(h->loop);
    else pthread_mutex_unlock(&h->loop->lock);
    return NULL;
}

static void start_holder(holder_t *h, pthread_t *th) {
    if (pthread_create(th, NULL, hold_lock, h) != 0) abort();
    while (!atomic_load(&h->locked)) tt_sleep(0.001);
}

/* The mechanism: the loop's own thread re-arms, disarms, adds and removes its timers without the
 * mutex. Another thread holds the bare mutex (which the library's other threads never do: they
 * make the handshake) and every call returns before it lets go. Not in debug builds, whose
 * verification after each change takes the lock (and so does each RLT_CHECK). */
#ifndef RL_DEBUG
RLT_TEST(loop_thread_timer_calls_take_no_mutex_when_no_other_thread_holds_it) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = rl_timer_create_timeout(INFINITY, 0, never_fires, NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    holder_t h = {.loop = loop, .handshake = false};
    pthread_t th;
    start_holder(&h, &th);
    int rc[5];
    rc[0] = rl_timer_rearm(t, 100);
    rc[1] = rl_timer_set_next_fire_in(t, 200);
    rc[2] = rl_timer_disarm(t);
    rc[3] = rl_loop_remove_timer(loop, t, DEF);
    rc[4] = rl_loop_add_timer(loop, t, DEF);
    bool released = atomic_load(&h.released);
    pthread_join(th, NULL);
    RLT_CHECK(!released);
    for (int i = 0; i < 5; i++) RLT_CHECK_EQ(rc[i], 0);
    rl_timer_invalidate(t);
    rl_release(t);
}
#endif

/* The exclusion: a thread that took the lock the library's way keeps the loop's thread out
 * until it unlocks (the fast section sees it and waits on the mutex). */
RLT_TEST(loop_thread_timer_calls_wait_for_another_thread_holding_the_lock) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = rl_timer_create_timeout(INFINITY, 0, never_fires, NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    holder_t h = {.loop = loop, .handshake = true};
    pthread_t th;
    start_holder(&h, &th);
    int rc = rl_timer_rearm(t, 100);
    bool released = atomic_load(&h.released);
    pthread_join(th, NULL);
    RLT_CHECK_EQ(rc, 0);
    RLT_CHECK(released);
    /* and with nobody holding it, the next call takes the fast section again */
    RLT_CHECK(!atomic_load(&loop->fast_out));
    RLT_CHECK_EQ(rl_timer_disarm(t), 0);
    rl_timer_invalidate(t);
    rl_release(t);
}

/* ---- The bias (internal.h, "The bias") ---- */

/* A loop's passes bias it once other threads keep away, and another thread's lock clears the
 * bias again (with the fence it owes the loop's thread). Where membarrier is missing (valgrind)
 * or under ThreadSanitizer nothing is ever biased. */
RLT_TEST(a_loop_is_biased_after_quiet_passes_and_unbiased_by_another_threads_lock) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *keep = tt_keepalive(DEF);
    for (int i = 0; i < 4 * RL_BIAS_QUIET; i++) rl_run_in_mode(DEF, 0, false);
    bool can = RL_BIAS && rl_bias_available();
    RLT_CHECK_EQ(atomic_load(&loop->bias), can);
    holder_t h = {.loop = loop, .handshake = true};
    pthread_t th;
    start_holder(&h, &th);
    RLT_CHECK(!atomic_load(&loop->bias));
    pthread_join(th, NULL);
    rl_run_in_mode(DEF, 0, false); /* one quiet pass is not enough */
    RLT_CHECK(!atomic_load(&loop->bias));
    for (int i = 0; i < 4 * RL_BIAS_QUIET; i++) rl_run_in_mode(DEF, 0, false);
    RLT_CHECK_EQ(atomic_load(&loop->bias), can);
    rl_timer_invalidate(keep); /* borrowed: the loop held the only reference */
}

/* A thread's loop is biased from its first call, before any pass: the timeouts a thread arms
 * before it runs (a server's setup) take no locked instruction either. */
static void *first_call_bias(void *arg) {
    rl_loop_t *loop = rl_loop_get_current();
    *(int *)arg = atomic_load(&loop->bias) ? 1 : 0;
    return NULL;
}

RLT_TEST(a_threads_loop_is_biased_from_its_first_call) {
    int biased = -1;
    pthread_t th;
    RLT_CHECK_EQ(pthread_create(&th, NULL, first_call_bias, &biased), 0);
    pthread_join(th, NULL);
    RLT_CHECK_EQ(biased, RL_BIAS && rl_bias_available() ? 1 : 0);
}

/* Mutual exclusion across the bias's revocations: the loop's thread keeps entering its fast
 * section (biased whenever it can, since it runs quiet passes in between) and another thread
 * takes the lock the library's way now and then, each time finding the loop biased again and
 * revoking it; both add to a plain counter inside, a read and a write apart. A fast section that
 * the revoker failed to wait out loses increments. */
typedef struct {
    rl_loop_t *loop;
    atomic_bool stop;
    long count, others;
} bias_race_t;

static void slow_increment(long *counter) {
    long v = *(volatile long *)counter;
    for (volatile int k = 0; k < 20; k++) {}
    *(volatile long *)counter = v + 1;
}

static void *lock_now_and_then(void *arg) {
    bias_race_t *r = arg;
    while (!atomic_load(&r->stop)) {
        rl_loop_lock_mutex(r->loop);
        slow_increment(&r->count);
        r->others++;
        rl_loop_unlock(r->loop);
        tt_sleep(0.0002); /* long enough for the loop to bias again */
    }
    return NULL;
}

static void exclusion_across_revocations(void) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *keep = tt_keepalive(DEF);
    bias_race_t r = {.loop = loop};
    atomic_init(&r.stop, false);
    size_t revoked_before = loop->bias_revoked;
    pthread_t th;
    RLT_CHECK_EQ(pthread_create(&th, NULL, lock_now_and_then, &r), 0);
    long own = 0;
    double end = rl_time_now() + 1.0;
    while (rl_time_now() < end) {
        for (int i = 0; i < 20; i++) {
            rl_loop_lock_own(loop);
            slow_increment(&r.count);
            own++;
            rl_loop_unlock_own(loop);
        }
        rl_run_in_mode(DEF, 0, false);
    }
    atomic_store(&r.stop, true);
    pthread_join(th, NULL);
    RLT_CHECK_EQ(r.count, own + r.others);
    RLT_CHECK(r.others > 0);
    if (RL_BIAS && rl_bias_available()) RLT_CHECK(loop->bias_revoked - revoked_before > 10);
    rl_timer_invalidate(keep); /* borrowed: the loop held the only reference */
}

RLT_TEST(fast_sections_exclude_another_threads_lock_across_bias_revocations) { exclusion_across_revocations(); }

/* The same with the fallback fence (the TLB shootdown a refused membarrier leads to): the path
 * works and loses nothing. Unlike the test above (which fails without the membarrier), this one
 * does not fail on this machine with the fallback's mprotect taken out: the few more instructions
 * of that path before the load of fast close the window; that the shootdown fences is the
 * kernel's (and folly's asymmetric barrier relies on it). */
RLT_TEST(fast_sections_exclude_another_threads_lock_across_revocations_by_the_fallback_fence) {
    rl_bias_fallback_only = true;
    exclusion_across_revocations();
    rl_bias_fallback_only = false;
}

/* ---- Many threads on the same timers ---- */

enum { SHARED = 64, OTHERS = 2 };

typedef struct {
    rl_loop_t *loop;
    rl_timer_t *t[SHARED];
    atomic_bool done;
    atomic_long fired;
    unsigned seed;
} shared_t;

static unsigned next_rand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Another thread: adds, removes, re-arms (earlier and later), disarms the shared timers, and
 * adds and removes timers of its own in the same mode, until the loop's thread is done. */
typedef struct {
    shared_t *s;
    unsigned seed;
} other_t;

static void *other_thread(void *arg) {
    other_t *o = arg;
    shared_t *s = o->s;
    rl_timer_t *own[8] = {0};
    while (!atomic_load(&s->done)) {
        rl_timer_t *t = s->t[next_rand(&o->seed) % SHARED];
        switch (next_rand(&o->seed) % 7) {
        case 0: (void)rl_loop_add_timer(s->loop, t, DEF); break;
        case 1: (void)rl_loop_remove_timer(s->loop, t, DEF); break;
        case 2: (void)rl_timer_set_next_fire_in(t, (next_rand(&o->seed) % 1000) * 1e-5); break;
        case 3: (void)rl_timer_rearm(t, 50 + (next_rand(&o->seed) % 1000) * 1e-3); break;
        case 4: (void)rl_timer_disarm(t); break;
        case 5: (void)rl_loop_add_timer(s->loop, t, "other"); break;
        default: {
            unsigned k = next_rand(&o->seed) % 8;
            if (own[k]) {
                rl_timer_invalidate(own[k]);
                rl_release(own[k]);
                own[k] = NULL;
            } else if ((own[k] = rl_timer_create_timeout(rl_time_now() + 1e-3, 0, never_fires, NULL))) {
                (void)rl_loop_add_timer(s->loop, own[k], DEF);
            }
        }
        }
    }
    for (unsigned k = 0; k < 8; k++)
        if (own[k]) {
            rl_timer_invalidate(own[k]);
            rl_release(own[k]);
        }
    return NULL;
}

/* The shared timers' callout, on the loop's thread: re-arms (itself and others), disarms,
 * removes and adds back, as a server's callouts do. */
static void shared_fired(rl_timer_t *t, void *info) {
    shared_t *s = info;
    atomic_fetch_add(&s->fired, 1);
    for (int i = 0; i < 4; i++) {
        rl_timer_t *u = s->t[next_rand(&s->seed) % SHARED];
        switch (next_rand(&s->seed) % 5) {
        case 0: (void)rl_timer_rearm(u, (next_rand(&s->seed) % 100) * 1e-5); break;
        case 1: (void)rl_timer_set_next_fire_in(u, 10 + (next_rand(&s->seed) % 100) * 1e-3); break;
        case 2: (void)rl_timer_disarm(u); break;
        case 3: (void)rl_loop_remove_timer(s->loop, u, DEF); break;
        default: (void)rl_loop_add_timer(s->loop, u, DEF); break;
        }
    }
    (void)rl_timer_rearm(t, (next_rand(&s->seed) % 100) * 1e-5);
}

/* Keeps the run going while the shared timers come and go. */
static void keep_going(rl_timer_t *t, void *info) { (void)t, (void)info; }

RLT_TEST(loop_and_other_threads_change_the_same_timers_and_the_heap_stays_whole) {
    shared_t s = {.loop = rl_loop_get_current(), .seed = 7};
    tt_count_t count = {0};
    rl_context_t c = {&count, tt_count_retain, tt_count_release};
    rl_context_t sc = {&s, NULL, NULL};
    for (int i = 0; i < SHARED; i++) {
        s.t[i] = rl_timer_create_timeout(rl_time_now() + i * 1e-5, i % 3, shared_fired, &sc);
        RLT_CHECK(s.t[i] != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(s.loop, s.t[i], DEF), 0);
    }
    /* a held timer too, re-armed by both sides, whose context must balance */
    rl_timer_t *held = rl_timer_create_timeout_held(rl_time_now(), 0, keep_going, &c);
    rl_timer_t *keep = rl_timer_create(rl_time_now(), 1e-3, 0, keep_going, NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(s.loop, keep, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(s.loop, held, DEF), 0);
    pthread_t th[OTHERS];
    other_t o[OTHERS];
    for (int k = 0; k < OTHERS; k++) {
        o[k] = (other_t){&s, 1000u + (unsigned)k};
        RLT_CHECK_EQ(pthread_create(&th[k], NULL, other_thread, &o[k]), 0);
    }
    double end = rl_time_now() + 0.5;
    char report[512];
    while (rl_time_now() < end) {
        (void)rl_run_in_mode(DEF, 0.005, false);
        (void)rl_timer_rearm(held, (next_rand(&s.seed) % 100) * 1e-5);
        (void)rl_timer_rearm(s.t[next_rand(&s.seed) % SHARED], 1e-4);
        RLT_CHECK_EQ(rl_loop_verify(s.loop, report, sizeof report), 0);
    }
    atomic_store(&s.done, true);
    for (int k = 0; k < OTHERS; k++) pthread_join(th[k], NULL);
    RLT_CHECK_EQ(rl_loop_verify(s.loop, report, sizeof report), 0);
    RLT_CHECK(atomic_load(&s.fired) > 0);
    for (int i = 0; i < SHARED; i++) {
        rl_timer_invalidate(s.t[i]);
        rl_release(s.t[i]);
    }
    rl_timer_invalidate(held);
    rl_release(held);
    rl_timer_invalidate(keep);
    rl_release(keep);
    RLT_CHECK_EQ(atomic_load(&count.retains), atomic_load(&count.releases));
}
