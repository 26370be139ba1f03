/* crunloop.c - the adapter for this project's core (linked statically, build/.../libcrunloop.a). */
#include "peer.h"
#include <crunloop.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    rl_loop_t *rl;
    int stopped;
    double tolerance;
} cr_loop_t;

typedef struct {
    cr_loop_t *loop;
    void *obj;          /* rl_source_t or rl_timer_t */
    bench_cb cb;
    void *arg;
    int in_mode;        /* a timeout: whether it is in the default mode (stop removes it) */
} cr_item_t;

/* BENCH_CRUNLOOP_SPIN_US=W: every loop this adapter makes gets a spin window of W us
 * (rl_loop_set_spin) instead of the default 5 us; the version string says so (and so the JSON).
 * For comparing runs with and without a spin (benchmarks/compare's tests); unset normally. */
static double spin_override(void)
{
    const char *s = getenv("BENCH_CRUNLOOP_SPIN_US");
    return s && *s ? atof(s) * 1e-6 : -1;
}

static int cr_load(peer_t *self)
{
    if (spin_override() >= 0)
        snprintf(self->version, sizeof self->version, "%s (BENCH_CRUNLOOP_SPIN_US=%s)",
                 rl_version_string(), getenv("BENCH_CRUNLOOP_SPIN_US"));
    else copy_str(self->version, sizeof self->version, rl_version_string());
    return 0;
}

static void *cr_loop_new(void)
{
    cr_loop_t *l = calloc(1, sizeof *l);
    double spin = spin_override();
    l->rl = rl_loop_get_current();
    if (spin >= 0) rl_loop_set_spin(l->rl, spin);
    return l;
}

static void cr_loop_free(void *l) { free(l); }   /* the rl loop goes with its thread */

static void cr_run(void *lp)
{
    cr_loop_t *l = lp;
    l->stopped = 0;
    while (!l->stopped)
        if (rl_run_in_mode(RL_DEFAULT_MODE, HUGE_VAL, false) == RL_RUN_FINISHED) break;
}

static void cr_stop(void *lp)
{
    cr_loop_t *l = lp;
    l->stopped = 1;
    rl_loop_stop(l->rl);
}

static void cr_pass(void *lp)
{
    (void)lp;
    rl_run_in_mode(RL_DEFAULT_MODE, 0, false);
}

static void cr_perform(void *info)
{
    cr_item_t *it = info;
    it->cb(it->arg);
}

static void *cr_async_new(void *lp, bench_cb cb, void *arg)
{
    cr_loop_t *l = lp;
    cr_item_t *it = calloc(1, sizeof *it);
    rl_source_context_t ctx = { .info = it, .perform = cr_perform };
    *it = (cr_item_t){ .loop = l, .cb = cb, .arg = arg };
    it->obj = rl_source_create(0, &ctx);
    if (!it->obj || rl_loop_add_source(l->rl, it->obj, RL_DEFAULT_MODE) != 0) {
        rl_release(it->obj);
        free(it);
        return NULL;
    }
    return it;
}

static void cr_async_send(void *a)
{
    cr_item_t *it = a;
    rl_source_signal(it->obj);
    rl_loop_wakeup(it->loop->rl);
}

static void cr_async_free(void *a)
{
    cr_item_t *it = a;
    rl_source_invalidate(it->obj);
    rl_release(it->obj);
    free(it);
}

static void cr_timer_fired(rl_timer_t *t, void *info)
{
    (void)t;
    cr_perform(info);
}

/* A timer's item holds the timer itself (rl_timer_create_in), as libev's adapter holds its
 * ev_timer: one allocation per timer. The item is freed once the adapter let it go (FREED) and
 * the timer in it is gone (BUSY clear: its done ran), whichever comes last, on whichever thread. */
enum { CR_BUSY = 1, CR_FREED = 2 };
typedef struct {
    cr_item_t item;
    atomic_int state;
    _Alignas(8) unsigned char storage[RL_TIMER_STORAGE_SIZE];
} cr_timer_item_t;

static void cr_storage_done(void *memory)
{
    cr_timer_item_t *ti = (cr_timer_item_t *)((char *)memory - offsetof(cr_timer_item_t, storage));
    if (atomic_fetch_and(&ti->state, ~CR_BUSY) & CR_FREED) free(ti);
}

static void *cr_timer_new(void *lp, bench_cb cb, void *arg)
{
    cr_timer_item_t *ti = calloc(1, sizeof *ti);
    if (!ti) return NULL;
    ti->item = (cr_item_t){ .loop = lp, .cb = cb, .arg = arg };
    return ti;
}

/* A new timer for it: in its item while the item's storage is free, else (the previous timer's
 * callout still holds it) a timer of its own. */
static rl_timer_t *cr_make_timer(cr_timer_item_t *ti, double date, double repeat)
{
    rl_context_t ctx = { .info = &ti->item };
    /* BUSY clear: no timer holds the storage, so no done can write the state until a timer is
     * made here, and FREED is written only by cr_timer_free, which the benchmarks never run
     * during a start of the same item: a plain store claims it (the acquiring load orders the
     * last timer's done before the reuse), with no locked instruction per timer for the
     * adapter's own bookkeeping. */
    int state = atomic_load_explicit(&ti->state, memory_order_acquire);
    if (!(state & CR_BUSY)) {
        atomic_store_explicit(&ti->state, state | CR_BUSY, memory_order_relaxed);
        rl_timer_storage st = { ti->storage, sizeof ti->storage, cr_storage_done };
        rl_timer_t *t = rl_timer_create_in(&st, repeat == 0 ? RL_TIMER_IN_TIMEOUT | RL_TIMER_IN_DATE_AS_GIVEN : 0,
                                           date, repeat, 0, cr_timer_fired, &ctx);
        if (t) return t;
        atomic_fetch_and(&ti->state, ~CR_BUSY);
        return NULL;
    }
    return repeat == 0 ? rl_timer_create_timeout(date, 0, cr_timer_fired, &ctx)
                       : rl_timer_create(date, repeat, 0, cr_timer_fired, &ctx);
}

/* The idioms of the header's TIMEOUTS section, from the loop's time as libev's ev_timer_start
 * and libuv's uv_timer_start arm (no clock reading): a one-shot start makes a timeout at
 * rl_loop_get_time() + delay (RL_TIMER_IN_DATE_AS_GIVEN) and adds it; the timeout stays valid
 * after it fired, so a restart is rl_timer_rearm_from_loop_time (no allocation, no reference
 * counting); a stop is rl_timer_disarm (O(1): the timer stays in its mode, parked at INFINITY
 * until armed again). Only a repeating start, whose interval is fixed at creation, makes a new
 * timer. */
static void cr_timer_start(void *tp, double delay, double repeat)
{
    cr_item_t *it = tp;
    if (repeat == 0 && it->obj && rl_timer_is_timeout(it->obj)) {
        if (!it->in_mode) it->in_mode = rl_loop_add_timer(it->loop->rl, it->obj, RL_DEFAULT_MODE) == 0;
        rl_timer_rearm_from_loop_time(it->obj, delay);
        return;
    }
    if (it->obj) {
        rl_timer_invalidate(it->obj);
        rl_release(it->obj);
    }
    it->obj = cr_make_timer((cr_timer_item_t *)it,
                            (repeat == 0 ? rl_loop_get_time(it->loop->rl) : rl_time_now()) + delay, repeat);
    if (!it->obj) return;
    if (it->loop->tolerance > 0) rl_timer_set_tolerance(it->obj, it->loop->tolerance);
    it->in_mode = rl_loop_add_timer(it->loop->rl, it->obj, RL_DEFAULT_MODE) == 0;
}

/* Re-arm a pending timer delay seconds from the loop's time (the clock as the callout phase
 * began, inside a callout): the idle-timeout idiom. */
static void cr_timer_again(void *tp, double delay)
{
    cr_item_t *it = tp;
    rl_timer_rearm(it->obj, delay);
}

static void cr_timer_stop(void *tp)
{
    cr_item_t *it = tp;
    if (!it->obj) return;
    if (rl_timer_is_timeout(it->obj)) rl_timer_disarm(it->obj);
    else if (rl_loop_remove_timer(it->loop->rl, it->obj, RL_DEFAULT_MODE) == 0) it->in_mode = 0;
}

static void cr_timer_free(void *tp)
{
    cr_timer_item_t *ti = tp;
    if (ti->item.obj) {
        rl_timer_invalidate(ti->item.obj);
        rl_release(ti->item.obj);
    }
    if (!(atomic_fetch_or(&ti->state, CR_FREED) & CR_BUSY)) free(ti);
}

static void cr_fd_ready(rl_source_t *s, int fd, unsigned events, void *info)
{
    (void)s; (void)fd; (void)events;
    cr_perform(info);
}

static void *cr_fd_new(void *lp, int fd, bench_cb cb, void *arg)
{
    cr_loop_t *l = lp;
    cr_item_t *it = calloc(1, sizeof *it);
    rl_context_t ctx = { .info = it };
    *it = (cr_item_t){ .loop = l, .cb = cb, .arg = arg };
    it->obj = rl_source_create_fd(fd, RL_FD_READABLE, 0, cr_fd_ready, &ctx);
    if (!it->obj || rl_loop_add_source(l->rl, it->obj, RL_DEFAULT_MODE) != 0) {
        rl_release(it->obj);
        free(it);
        return NULL;
    }
    return it;
}

static void cr_observed(rl_observer_t *o, unsigned activity, void *info)
{
    (void)o; (void)activity;
    ++*(unsigned long *)info;
}

static unsigned long observer_calls;

static int cr_observer_add(void *lp)
{
    cr_loop_t *l = lp;
    rl_context_t ctx = { .info = &observer_calls };
    rl_observer_t *o = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, cr_observed, &ctx);
    int rc = o ? rl_loop_add_observer(l->rl, o, RL_DEFAULT_MODE) : -1;
    rl_release(o);   /* the loop keeps it until the thread exits */
    return rc;
}

static int cr_counters(void *lp, unsigned long long *writes, unsigned long long *waits)
{
    rl_loop_stats_t st;
    if (rl_loop_get_stats(((cr_loop_t *)lp)->rl, &st) != 0) return -1;
    *writes = st.wakeup_writes;
    *waits = st.waits;
    return 0;
}

/* The block's info is the caller's arg and its perform the caller's cb (same signature), so
 * queueing allocates nothing in the adapter; retain and release stand for a reference count
 * on the info, the atomic a real caller pays (the Swift layer retains a box). */
static _Atomic long block_refs;

static const void *block_retain(const void *info)
{
    atomic_fetch_add_explicit(&block_refs, 1, memory_order_relaxed);
    return info;
}

static void block_release(const void *info)
{
    (void)info;
    atomic_fetch_sub_explicit(&block_refs, 1, memory_order_acq_rel);
}

static void cr_perform_block(void *lp, bench_cb cb, void *arg, unsigned flags)
{
    cr_loop_t *l = lp;
    if (flags & PERFORM_PLAIN) rl_loop_perform(l->rl, RL_DEFAULT_MODE, cb, arg);
    else {
        rl_block_context_t ctx = { .info = arg, .retain = block_retain, .release = block_release,
                                   .perform = cb };
        rl_loop_perform_context(l->rl, RL_DEFAULT_MODE, &ctx);
    }
    if (flags & PERFORM_WAKE) rl_loop_wakeup(l->rl);
}

static void cr_set_tolerance(void *lp, double tol) { ((cr_loop_t *)lp)->tolerance = tol; }

peer_t peer_crunloop = {
    .name = "CRunLoop", .load = cr_load,
    .loop_new = cr_loop_new, .loop_free = cr_loop_free, .run = cr_run, .stop = cr_stop,
    .pass = cr_pass, .async_new = cr_async_new, .async_send = cr_async_send,
    .async_free = cr_async_free, .timer_new = cr_timer_new, .timer_start = cr_timer_start,
    .timer_stop = cr_timer_stop, .timer_free = cr_timer_free, .timer_again = cr_timer_again, .fd_new = cr_fd_new,
    .fd_free = cr_async_free, .observer_add = cr_observer_add, .counters = cr_counters,
    .set_tolerance = cr_set_tolerance, .timers_any_thread = 1, .perform = cr_perform_block,
};
