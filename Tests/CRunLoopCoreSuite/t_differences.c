/*
 * t_differences.c - one or more tests for each deliberate difference from CFRunLoop listed in
 * crunloop.h: tolerance honoured, order among equal fire dates, every ready event handled in
 * one pass, no wakeup left behind by a removed last timer, blocks keep the loop awake but do not
 * make a mode non-empty, mode names by content, repeating timers after a stall, fds never read,
 * no thread or timer object per run.
 */
#include <crunloop.h>
#include <rlt.h>

#include "ttrace.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void nap(double s) {
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

static rl_source_t *add_keepalive(rl_loop_t *loop, const char *mode) {
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    rl_source_t *s = rl_source_create(1000, &sc);
    if (s && rl_loop_add_source(loop, s, mode) != 0) { rl_release(s); return NULL; }
    return s;
}
static void drop_keepalive(rl_loop_t *loop, rl_source_t *s, const char *mode) {
    if (!s) return;
    rl_loop_remove_source(loop, s, mode);
    rl_release(s);
}

/* ---- an observer that counts waits ---------------------------------------------------------- */

#define MAXAW 64
typedef struct {
    int before_waiting, after_waiting;
    int n_aw;
    double aw_time[MAXAW];
} passes_t;

static void passes_cb(rl_observer_t *o, unsigned activity, void *info) {
    (void)o;
    passes_t *p = info;
    if (activity == RL_BEFORE_WAITING) p->before_waiting++;
    if (activity == RL_AFTER_WAITING) {
        if (p->n_aw < MAXAW) p->aw_time[p->n_aw++] = rl_time_now();
        p->after_waiting++;
    }
}
static rl_observer_t *add_passes(rl_loop_t *loop, const char *mode, passes_t *p) {
    memset(p, 0, sizeof *p);
    rl_context_t cx = { p, NULL, NULL };
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING | RL_AFTER_WAITING, true, 0, passes_cb, &cx);
    if (o && rl_loop_add_observer(loop, o, mode) != 0) { rl_release(o); return NULL; }
    return o;
}
static void drop_observer(rl_loop_t *loop, rl_observer_t *o, const char *mode) {
    if (!o) return;
    rl_loop_remove_observer(loop, o, mode);
    rl_release(o);
}

/* ---- a timer that records when it fired ----------------------------------------------------- */

typedef struct {
    passes_t *passes;
    double date;
    double fired_at;
    int aw_at;      /* passes->after_waiting when it fired */
    int fires;
    int label;
    int *seq, *nseq; /* firing order */
} trec_t;

static void trec_cb(rl_timer_t *t, void *info) {
    (void)t;
    trec_t *r = info;
    r->fired_at = rl_time_now();
    r->aw_at = r->passes ? r->passes->after_waiting : -1;
    r->fires++;
    if (r->seq) r->seq[(*r->nseq)++] = r->label;
}
static rl_timer_t *add_trec(rl_loop_t *loop, const char *mode, trec_t *r, double date,
                            double tolerance, long order) {
    r->date = date;
    rl_context_t cx = { r, NULL, NULL };
    rl_timer_t *t = rl_timer_create(date, 0, order, trec_cb, &cx);
    if (!t) return NULL;
    if (tolerance > 0 && rl_timer_set_tolerance(t, tolerance) != 0) { rl_release(t); return NULL; }
    if (rl_loop_add_timer(loop, t, mode) != 0) { rl_release(t); return NULL; }
    rl_release(t); /* the loop holds it; a one-shot goes away after firing */
    return t;
}

/* ---- tolerance ------------------------------------------------------------------------------ */

RLT_TEST(diff_tolerance_overlapping_windows_share_one_wakeup) {
    const char *M = "diff-tol";
    rl_loop_t *loop = rl_loop_get_current();
    passes_t p;
    rl_observer_t *o = add_passes(loop, M, &p);
    RLT_CHECK(o != NULL);
    trec_t a = { &p, 0, 0, -1, 0, 0, NULL, NULL };
    trec_t b = a;
    double t0 = rl_time_now();
    /* [t0+.2, t0+.23] and [t0+.21, t0+.21] overlap: one wakeup, at or after t0+.21. */
    RLT_CHECK(add_trec(loop, M, &a, t0 + 0.20, 0.030, 0) != NULL);
    RLT_CHECK(add_trec(loop, M, &b, t0 + 0.21, 0, 0) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(M, 2.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(a.fires, 1);
    RLT_CHECK_EQ(b.fires, 1);
    RLT_CHECK(a.fired_at >= a.date);
    RLT_CHECK(b.fired_at >= b.date);
    RLT_CHECK_EQ(a.aw_at, b.aw_at);
    RLT_CHECK_EQ(p.after_waiting, 1);
    drop_observer(loop, o, M);
}

RLT_TEST(diff_tolerance_never_early_and_not_stretched) {
    const char *M = "diff-tol2";
    rl_loop_t *loop = rl_loop_get_current();
    passes_t p;
    rl_observer_t *o = add_passes(loop, M, &p);
    RLT_CHECK(o != NULL);
    trec_t x = { &p, 0, 0, -1, 0, 0, NULL, NULL };
    trec_t y = x, z = x;
    double t0 = rl_time_now();
    /* x may wait for y (its window covers y's date), y must not fire early with x; z is far
     * outside x's window, so x must not wait for it. */
    RLT_CHECK(add_trec(loop, M, &x, t0 + 0.05, 0.10, 0) != NULL);
    RLT_CHECK(add_trec(loop, M, &y, t0 + 0.08, 0, 0) != NULL);
    RLT_CHECK(add_trec(loop, M, &z, t0 + 0.60, 0, 0) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(M, 3.0, false), RL_RUN_FINISHED);
    RLT_CHECK(x.fires == 1 && y.fires == 1 && z.fires == 1);
    RLT_CHECK(x.fired_at >= x.date);
    RLT_CHECK(y.fired_at >= y.date);
    RLT_CHECK(z.fired_at >= z.date);
    RLT_CHECK_EQ(x.aw_at, y.aw_at);
    RLT_CHECK(z.aw_at > y.aw_at);
    RLT_CHECK(x.fired_at < z.date); /* 0.5 s of margin */
    drop_observer(loop, o, M);
}

typedef struct {
    double first;
    double interval;
    int n;
    int early;   /* callouts before their grid point */
    rl_timer_t *self;
} rep_t;

static void rep_cb(rl_timer_t *t, void *info) {
    rep_t *r = info;
    double now = rl_time_now();
    /* The n-th callout serves grid point k >= n. */
    if (now < r->first + r->n * r->interval) r->early++;
    if (++r->n == 8) rl_timer_invalidate(t);
}

RLT_TEST(diff_tolerance_repeating_timer_never_early) {
    const char *M = "diff-tol3";
    rl_loop_t *loop = rl_loop_get_current();
    rep_t r;
    memset(&r, 0, sizeof r);
    r.interval = 0.02;
    r.first = rl_time_now() + 0.02;
    rl_context_t cx = { &r, NULL, NULL };
    rl_timer_t *t = rl_timer_create(r.first, r.interval, 0, rep_cb, &cx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_timer_set_tolerance(t, 0.015), 0);
    RLT_CHECK(rl_timer_get_tolerance(t) == 0.015);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, M), 0);
    /* Another tolerant timer in between, to tempt grouping. */
    trec_t other = { NULL, 0, 0, -1, 0, 0, NULL, NULL };
    RLT_CHECK(add_trec(loop, M, &other, r.first + 0.031, 0.05, 0) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(M, 3.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(r.n, 8);
    RLT_CHECK_EQ(r.early, 0);
    RLT_CHECK_EQ(other.fires, 1);
    RLT_CHECK(other.fired_at >= other.date);
    rl_release(t);
}

/* ---- equal fire dates ----------------------------------------------------------------------- */

static void equal_dates_case(double date, const int expected[8]) {
    const char *M = "diff-equal";
    rl_loop_t *loop = rl_loop_get_current();
    static const long orders[8] = { 2, 0, 1, 0, 2, 1, 0, 2 };
    int seq[16], nseq = 0;
    trec_t r[8];
    for (int i = 0; i < 8; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].label = i;
        r[i].seq = seq;
        r[i].nseq = &nseq;
        RLT_CHECK(add_trec(loop, M, &r[i], date, 0, orders[i]) != NULL);
    }
    RLT_CHECK_EQ(rl_run_in_mode(M, 2.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(nseq, 8);
    for (int i = 0; i < 8; i++) RLT_CHECK_EQ(seq[i], expected[i]);
}

RLT_TEST(diff_equal_fire_dates_by_order_then_scheduling) {
    static const int by_order_then_scheduling[8] = { 1, 3, 6, 2, 5, 0, 4, 7 };
    equal_dates_case(rl_time_now() + 0.03, by_order_then_scheduling);
}
/* Past dates count as now when set (as in CF), so they are not equal: creation order wins. */
RLT_TEST(past_fire_dates_fire_in_the_order_they_were_set) {
    static const int by_creation[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    equal_dates_case(rl_time_now() - 0.5, by_creation);
}

/* Scheduling order is the order of adding, not of creating. */
RLT_TEST(diff_equal_fire_dates_scheduling_order_is_add_order) {
    const char *M = "diff-equal2";
    rl_loop_t *loop = rl_loop_get_current();
    int seq[8], nseq = 0;
    trec_t r[3];
    rl_timer_t *t[3];
    double date = rl_time_now() + 0.02;
    for (int i = 0; i < 3; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].label = i;
        r[i].seq = seq;
        r[i].nseq = &nseq;
        rl_context_t cx = { &r[i], NULL, NULL };
        t[i] = rl_timer_create(date, 0, 0, trec_cb, &cx);
        RLT_CHECK(t[i] != NULL);
    }
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t[2], M), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t[0], M), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t[1], M), 0);
    RLT_CHECK_EQ(rl_run_in_mode(M, 2.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(nseq, 3);
    RLT_CHECK_EQ(seq[0], 2);
    RLT_CHECK_EQ(seq[1], 0);
    RLT_CHECK_EQ(seq[2], 1);
    for (int i = 0; i < 3; i++) rl_release(t[i]);
}

/* ---- every ready event in one pass ---------------------------------------------------------- */

typedef struct {
    passes_t *passes;
    int calls;
    int aw_at;
    int bw_at;
    bool invalidate;
} fdrec_t;

static void fdrec_cb(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)fd; (void)events;
    fdrec_t *r = info;
    r->calls++;
    r->aw_at = r->passes->after_waiting;
    r->bw_at = r->passes->before_waiting;
    if (r->invalidate) rl_source_invalidate(s);
}
static void fdtimer_cb(rl_timer_t *t, void *info) {
    (void)t;
    fdrec_t *r = info;
    r->calls++;
    r->aw_at = r->passes->after_waiting;
    r->bw_at = r->passes->before_waiting;
}

RLT_TEST(diff_every_ready_fd_handled_in_one_pass) {
    const char *M = "diff-fds";
    rl_loop_t *loop = rl_loop_get_current();
    passes_t p;
    rl_observer_t *o = add_passes(loop, M, &p);
    RLT_CHECK(o != NULL);
    int a[2], b[2], c[2];
    RLT_CHECK(pipe(a) == 0 && pipe(b) == 0 && pipe(c) == 0);
    RLT_CHECK(write(a[1], "a", 1) == 1 && write(b[1], "b", 1) == 1 && write(c[1], "c", 1) == 1);
    fdrec_t ra = { &p, 0, -1, -1, true }, rb = ra, rc = ra;
    rl_context_t ca = { &ra, NULL, NULL }, cb = { &rb, NULL, NULL }, cc = { &rc, NULL, NULL };
    rl_source_t *sa = rl_source_create_fd(a[0], RL_FD_READABLE, 0, fdrec_cb, &ca);
    rl_source_t *sb = rl_source_create_fd(b[0], RL_FD_READABLE, 1, fdrec_cb, &cb);
    rl_source_t *sc = rl_source_create_fd(c[0], RL_FD_READABLE, 2, fdrec_cb, &cc);
    RLT_CHECK(sa && sb && sc);
    RLT_CHECK_EQ(rl_loop_add_source(loop, sa, M), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, sb, M), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, sc, M), 0);
    /* Each invalidates itself when called; the mode is empty once all three ran. */
    RLT_CHECK_EQ(rl_run_in_mode(M, 2.0, false), RL_RUN_FINISHED);
    RLT_CHECK(ra.calls == 1 && rb.calls == 1 && rc.calls == 1);
    RLT_CHECK_EQ(ra.aw_at, 1);
    RLT_CHECK_EQ(rb.aw_at, 1);
    RLT_CHECK_EQ(rc.aw_at, 1);
    RLT_CHECK_EQ(p.after_waiting, 1);
    rl_release(sa); rl_release(sb); rl_release(sc);
    drop_observer(loop, o, M);
    for (int i = 0; i < 2; i++) { close(a[i]); close(b[i]); close(c[i]); }
}

RLT_TEST(diff_due_timer_and_ready_fd_in_one_pass) {
    const char *M = "diff-fd-timer";
    rl_loop_t *loop = rl_loop_get_current();
    passes_t p;
    rl_observer_t *o = add_passes(loop, M, &p);
    RLT_CHECK(o != NULL);
    int a[2];
    RLT_CHECK(pipe(a) == 0);
    fdrec_t rf = { &p, 0, -1, -1, true }, rt = { &p, 0, -1, -1, false };
    rl_context_t cf = { &rf, NULL, NULL }, ct = { &rt, NULL, NULL };
    rl_source_t *sf = rl_source_create_fd(a[0], RL_FD_READABLE, 0, fdrec_cb, &cf);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.1, 0, 0, fdtimer_cb, &ct);
    RLT_CHECK(sf && t);
    RLT_CHECK_EQ(rl_loop_add_source(loop, sf, M), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, M), 0);
    /* Both become ready while the loop is busy elsewhere; the next wait returns both. */
    nap(0.15);
    RLT_CHECK(write(a[1], "x", 1) == 1);
    RLT_CHECK_EQ(rl_run_in_mode(M, 2.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(rt.calls, 1);
    RLT_CHECK_EQ(rf.calls, 1);
    RLT_CHECK_EQ(rt.aw_at, 1);
    RLT_CHECK_EQ(rf.aw_at, 1);
    RLT_CHECK_EQ(p.after_waiting, 1);
    rl_release(sf);
    rl_release(t);
    drop_observer(loop, o, M);
    close(a[0]); close(a[1]);
}

/* ---- no wakeup left behind ------------------------------------------------------------------ */

typedef struct {
    rl_timer_t *victim;
    const char *mode;
    bool remove;
    double at;
    int fires;
} killer_t;

static void killer_cb(rl_timer_t *t, void *info) {
    (void)t;
    killer_t *k = info;
    if (k->remove) rl_loop_remove_timer(rl_loop_get_current(), k->victim, k->mode);
    else rl_timer_invalidate(k->victim);
    k->fires++;
    k->at = rl_time_now();
}

/* From a callout: the timer that was next is gone before the loop sleeps again. */
RLT_TEST(diff_invalidated_last_timer_from_callout_leaves_no_wakeup) {
    const char *M = "diff-leftover-callout";
    rl_loop_t *loop = rl_loop_get_current();
    passes_t p;
    rl_observer_t *o = add_passes(loop, M, &p);
    rl_source_t *keep = add_keepalive(loop, M);
    RLT_CHECK(o && keep);
    double t0 = rl_time_now();
    trec_t victim = { NULL, 0, 0, -1, 0, 0, NULL, NULL };
    rl_context_t vc = { &victim, NULL, NULL };
    rl_timer_t *v = rl_timer_create(t0 + 0.15, 0, 0, trec_cb, &vc);
    RLT_CHECK(v != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, v, M), 0);
    killer_t k = { v, M, false, 0, 0 };
    rl_context_t kc = { &k, NULL, NULL };
    rl_timer_t *kt = rl_timer_create(t0 + 0.05, 0, 0, killer_cb, &kc);
    RLT_CHECK(kt != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, kt, M), 0);
    rl_release(kt);

    RLT_CHECK_EQ(rl_run_in_mode(M, 0.4, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(k.fires, 1);
    RLT_CHECK_EQ(victim.fires, 0);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, M) == 0);
    int stray = 0;
    for (int i = 0; i < p.n_aw; i++)
        if (p.aw_time[i] > k.at && p.aw_time[i] < t0 + 0.39) stray++;
    RLT_CHECK_EQ(stray, 0);
    rl_release(v);
    drop_keepalive(loop, keep, M);
    drop_observer(loop, o, M);
}

/* From another thread while the loop sleeps armed for the timer: it must not wake at the
 * timer's old deadline (waking at once, to rearm, would be allowed). */
typedef struct {
    rl_loop_t *loop;
    rl_timer_t *victim;
    const char *mode;
    bool remove;
    atomic_bool saw_waiting;
    _Atomic double done_at;
} xkill_t;

static void *xkill_thread(void *arg) {
    xkill_t *x = arg;
    double deadline = rl_time_now() + 1.0;
    while (!rl_loop_is_waiting(x->loop) && rl_time_now() < deadline) nap(0.0005);
    atomic_store(&x->saw_waiting, rl_loop_is_waiting(x->loop));
    nap(0.03);
    if (x->remove) rl_loop_remove_timer(x->loop, x->victim, x->mode);
    else rl_timer_invalidate(x->victim);
    atomic_store(&x->done_at, rl_time_now());
    return NULL;
}

/* One run; *told when the helper thread's change came in time for the run to say anything. */
static void no_leftover_wakeup_run(bool remove, bool *told) {
    const char *M = remove ? "diff-leftover-remove" : "diff-leftover-invalidate";
    rl_loop_t *loop = rl_loop_get_current();
    passes_t p;
    rl_observer_t *o = add_passes(loop, M, &p);
    rl_source_t *keep = add_keepalive(loop, M);
    RLT_CHECK(o && keep);
    double t0 = rl_time_now();
    const double old_deadline = t0 + 0.4, timeout = 0.75;
    trec_t victim = { NULL, 0, 0, -1, 0, 0, NULL, NULL };
    rl_context_t vc = { &victim, NULL, NULL };
    rl_timer_t *v = rl_timer_create(old_deadline, 0, 0, trec_cb, &vc);
    RLT_CHECK(v != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, v, M), 0);
    xkill_t x;
    x.loop = loop;
    x.victim = v;
    x.mode = M;
    x.remove = remove;
    atomic_init(&x.saw_waiting, false);
    atomic_init(&x.done_at, 0.0);
    pthread_t th;
    RLT_CHECK(pthread_create(&th, NULL, xkill_thread, &x) == 0);
    int r = rl_run_in_mode(M, timeout, false);
    pthread_join(th, NULL);
    double done_at = atomic_load(&x.done_at);
    RLT_CHECK_EQ(r, RL_RUN_TIMED_OUT);
    RLT_CHECK(!rl_loop_contains_timer(loop, v, M));
    /* Else the helper thread was held up (a loaded machine, a sanitizer) and this run's timing
     * says nothing: the timer may have fired, and its wakeup was due. */
    if (done_at < old_deadline - 0.05) {
        RLT_CHECK(atomic_load(&x.saw_waiting));
        RLT_CHECK_EQ(victim.fires, 0);
        /* No wait ended between the old deadline and the run's timeout. */
        int stray = 0;
        for (int i = 0; i < p.n_aw; i++)
            if (p.aw_time[i] >= old_deadline - 0.002 && p.aw_time[i] < t0 + timeout - 0.01) stray++;
        RLT_CHECK_EQ(stray, 0);
        *told = true;
    }
    rl_release(v);
    drop_keepalive(loop, keep, M);
    drop_observer(loop, o, M);
}

/* Up to three runs, one of which must tell. */
static void no_leftover_wakeup_case(bool remove) {
    bool told = false;
    for (int attempt = 0; attempt < 3 && !told; attempt++) no_leftover_wakeup_run(remove, &told);
    RLT_CHECK(told);
}

RLT_TEST(diff_invalidated_last_timer_leaves_no_wakeup) { no_leftover_wakeup_case(false); }
RLT_TEST(diff_removed_last_timer_leaves_no_wakeup) { no_leftover_wakeup_case(true); }

/* ---- blocks --------------------------------------------------------------------------------- */

typedef struct {
    const char *block_mode;
    int blocks_run;
    double ran_at;
    int queued;
    bool stop;
} blk_t;

static void blk_fn(void *arg) {
    blk_t *b = arg;
    b->blocks_run++;
    b->ran_at = rl_time_now();
    if (b->stop) rl_loop_stop(rl_loop_get_current());
}
static void blk_queue_observer(rl_observer_t *o, unsigned activity, void *info) {
    (void)o; (void)activity;
    blk_t *b = info;
    if (b->queued++ == 0) rl_loop_perform(rl_loop_get_current(), b->block_mode, blk_fn, b);
}

static void block_prevents_sleep_case(const char *run_mode, const char *block_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *keep = add_keepalive(loop, run_mode);
    RLT_CHECK(keep != NULL);
    blk_t b = { block_mode, 0, 0, 0, true };
    rl_context_t cx = { &b, NULL, NULL };
    /* Queued from RL_BEFORE_WAITING, the last callout before the wait. */
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING, true, 0, blk_queue_observer, &cx);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, run_mode), 0);
    double t0 = rl_time_now();
    int r = rl_run_in_mode(run_mode, 1.5, false);
    RLT_CHECK(b.queued >= 1);
    RLT_CHECK_EQ(b.blocks_run, 1);
    RLT_CHECK(b.ran_at - t0 < 0.75); /* it did not sleep through the 1.5 s timeout */
    RLT_CHECK_EQ(r, RL_RUN_STOPPED);
    drop_observer(loop, o, run_mode);
    drop_keepalive(loop, keep, run_mode);
}

RLT_TEST(diff_block_for_running_mode_prevents_sleep) {
    block_prevents_sleep_case("diff-block-sleep", "diff-block-sleep");
}
RLT_TEST(diff_block_for_common_modes_prevents_sleep) {
    block_prevents_sleep_case(RL_DEFAULT_MODE, RL_COMMON_MODES);
}

RLT_TEST(diff_block_for_other_mode_does_not_prevent_sleep) {
    const char *M = "diff-block-sleep2";
    const char *OTHER = "diff-block-other";
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *keep = add_keepalive(loop, M);
    RLT_CHECK(keep != NULL);
    blk_t b = { OTHER, 0, 0, 0, false };
    rl_context_t cx = { &b, NULL, NULL };
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING, true, 0, blk_queue_observer, &cx);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, M), 0);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(M, 0.3, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(rl_time_now() - t0 >= 0.25);
    RLT_CHECK_EQ(b.blocks_run, 0);
    /* The other mode holds only the block: it is empty, the block stays queued... */
    RLT_CHECK_EQ(rl_run_in_mode(OTHER, 0.5, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(b.blocks_run, 0);
    /* ...until a run of that mode that has something in it. */
    rl_source_t *keep2 = add_keepalive(loop, OTHER);
    RLT_CHECK(keep2 != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(OTHER, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(b.blocks_run, 1);
    drop_keepalive(loop, keep2, OTHER);
    drop_observer(loop, o, M);
    drop_keepalive(loop, keep, M);
}

RLT_TEST(diff_blocks_do_not_make_a_mode_non_empty) {
    const char *M = "diff-blocks-only";
    rl_loop_t *loop = rl_loop_get_current();
    blk_t b = { M, 0, 0, 0, false };
    RLT_CHECK_EQ(rl_loop_perform(loop, M, blk_fn, &b), 0);
    RLT_CHECK_EQ(rl_loop_perform(loop, RL_COMMON_MODES, blk_fn, &b), 0);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(M, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK(rl_time_now() - t0 < 0.9);
    RLT_CHECK_EQ(b.blocks_run, 0); /* an empty mode's run makes no callout */
    /* A due timer makes it non-empty: the block runs then. */
    trec_t tr = { NULL, 0, 0, -1, 0, 0, NULL, NULL };
    RLT_CHECK(add_trec(loop, M, &tr, rl_time_now(), 0, 0) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(M, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(tr.fires, 1);
    RLT_CHECK_EQ(b.blocks_run, 1);
}

/* ---- mode names by content ------------------------------------------------------------------ */

typedef struct { char *mode_seen; int calls; } seen_t;
static void seen_perform(void *info) {
    seen_t *s = info;
    s->calls++;
    free(s->mode_seen);
    s->mode_seen = rl_loop_copy_current_mode(rl_loop_get_current());
}
static void count_block(void *arg) { (*(int *)arg)++; }
static void count_observer(rl_observer_t *o, unsigned a, void *info) { (void)o; (void)a; (*(int *)info)++; }

RLT_TEST(diff_mode_names_compare_by_content) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(strcmp(RL_DEFAULT_MODE, "kCFRunLoopDefaultMode") == 0);
    RLT_CHECK(strcmp(RL_COMMON_MODES, "kCFRunLoopCommonModes") == 0);

    /* A source added under one copy of a name, found and run under others. */
    char *alpha1 = strdup("diff-alpha");
    char alpha2[] = "diff-alpha";
    seen_t seen = { NULL, 0 };
    rl_source_context_t sc = { &seen, NULL, NULL, NULL, NULL, seen_perform };
    rl_source_t *s = rl_source_create(0, &sc);
    RLT_CHECK(alpha1 && s);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, alpha1), 0);
    free(alpha1); /* the loop kept its own copy */
    RLT_CHECK(rl_loop_contains_source(loop, s, alpha2));
    RLT_CHECK(rl_loop_contains_source(loop, s, "diff-alpha"));
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, alpha2), -EEXIST);
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(alpha2, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(seen.calls, 1);
    RLT_CHECK(seen.mode_seen && strcmp(seen.mode_seen, "diff-alpha") == 0);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "diff-alpha"), 0);
    free(seen.mode_seen);
    rl_release(s);

    /* A heap copy of "kCFRunLoopCommonModes" is RL_COMMON_MODES. */
    char *common = strdup("kCFRunLoopCommonModes");
    char *deflt = strdup("kCFRunLoopDefaultMode");
    RLT_CHECK(common && deflt);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "diff-common-x"), 0);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, deflt), 0);
    double when = rl_time_now() + 100;
    trec_t tr = { NULL, 0, 0, -1, 0, 0, NULL, NULL };
    rl_context_t tcx = { &tr, NULL, NULL };
    rl_timer_t *t = rl_timer_create(when, 0, 0, trec_cb, &tcx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, common), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, RL_DEFAULT_MODE));
    RLT_CHECK(rl_loop_contains_timer(loop, t, deflt));
    RLT_CHECK(rl_loop_contains_timer(loop, t, "diff-common-x"));
    RLT_CHECK(rl_loop_contains_timer(loop, t, RL_COMMON_MODES));
    RLT_CHECK(rl_loop_contains_timer(loop, t, common));
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, RL_COMMON_MODES), -EEXIST);
    RLT_CHECK_EQ(rl_run_in_mode(common, 0, false), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, common), -EINVAL);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, common) == 0);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, deflt) == when);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "diff-common-x") == when);

    /* A common mode made later gets the item too. */
    char *later = strdup("diff-common-later");
    RLT_CHECK(later != NULL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, later), 0);
    free(later);
    RLT_CHECK(rl_loop_contains_timer(loop, t, "diff-common-later"));

    /* Blocks and observers for the heap copy go to the common modes. */
    int blocks = 0, entries = 0;
    rl_context_t ocx = { &entries, NULL, NULL };
    rl_observer_t *o = rl_observer_create(RL_ENTRY, true, 0, count_observer, &ocx);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, common), 0);
    RLT_CHECK_EQ(rl_loop_perform(loop, common, count_block, &blocks), 0);
    RLT_CHECK_EQ(rl_run_in_mode(deflt, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(blocks, 1);
    RLT_CHECK_EQ(entries, 1);
    RLT_CHECK_EQ(rl_run_in_mode("diff-common-x", 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(entries, 2);

    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, common), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, common), 0);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, RL_DEFAULT_MODE));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "diff-common-x"));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "diff-common-later"));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, RL_DEFAULT_MODE));
    RLT_CHECK_EQ(tr.fires, 0);
    rl_release(o);
    rl_release(t);
    free(common);
    free(deflt);
}

/* ---- repeating timer after a stall ---------------------------------------------------------- */

typedef struct {
    rl_timer_t *timer;
    double first, interval, stall;
    int fires;
    double stall_end;       /* end of the stalling callout */
    double next_seen;       /* next fire date read at the following RL_BEFORE_TIMERS */
    double next_seen_at;
    bool read;
    int fires_after;
    double last_fire;
    double second_fire_at;
    double run_after;       /* how long to keep it running after the stall */
} stall_t;

static void stall_timer(rl_timer_t *t, void *info) {
    stall_t *s = info;
    double now = rl_time_now();
    s->fires++;
    if (s->fires == 1) {
        nap(s->stall);
        s->stall_end = rl_time_now();
        return;
    }
    if (s->fires == 2) s->second_fire_at = now;
    s->fires_after++;
    s->last_fire = now;
    if (now - s->stall_end >= s->run_after) rl_timer_invalidate(t);
}
static void stall_observer(rl_observer_t *o, unsigned a, void *info) {
    (void)o; (void)a;
    stall_t *s = info;
    if (s->fires == 1 && !s->read) {
        s->next_seen = rl_timer_get_next_fire_date(s->timer);
        s->next_seen_at = rl_time_now();
        s->read = true;
    }
}

static void stall_run(stall_t *s, const char *M) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t cx = { s, NULL, NULL };
    s->timer = rl_timer_create(s->first, s->interval, 0, stall_timer, &cx);
    rl_observer_t *o = rl_observer_create(RL_BEFORE_TIMERS, true, 0, stall_observer, &cx);
    RLT_CHECK(s->timer && o);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, s->timer, M), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, M), 0);
    RLT_CHECK_EQ(rl_run_in_mode(M, 5.0, false), RL_RUN_FINISHED);
    drop_observer(loop, o, M);
    rl_release(s->timer);
}

RLT_TEST(diff_repeating_timer_after_stall_keeps_grid) {
    stall_t s;
    memset(&s, 0, sizeof s);
    s.interval = 0.001;
    s.first = rl_time_now() + 0.01;
    s.stall = 0.3;
    s.run_after = 0.03;
    stall_run(&s, "diff-stall");
    RLT_CHECK(s.read);
    RLT_CHECK(s.fires >= 2);
    /* On the grid... */
    double k = (s.next_seen - s.first) / s.interval;
    RLT_CHECK(fabs(k - nearbyint(k)) < 1e-3);
    /* ...strictly after the stall ended, and the first such point (the one before it is not
     * later than the moment we looked). */
    RLT_CHECK(s.next_seen > s.stall_end);
    RLT_CHECK(s.next_seen - s.interval <= s.next_seen_at + 1e-9);
    RLT_CHECK(k >= 250); /* about 300 points were skipped */
    /* No burst to catch up: no more fires than grid points passed since the stall. */
    RLT_CHECK(s.fires_after <= (int)((s.last_fire - s.stall_end) / s.interval) + 3);
}

RLT_TEST(diff_repeating_timer_after_stall_is_quick) {
    stall_t s;
    memset(&s, 0, sizeof s);
    s.interval = 1e-10;  /* some 3e9 missed points: counting them one by one takes seconds */
    s.first = rl_time_now() + 0.01;
    s.stall = 0.3;
    s.run_after = 0;     /* invalidate at the second fire */
    stall_run(&s, "diff-stall-quick");
    RLT_CHECK(s.read);
    RLT_CHECK_EQ(s.fires, 2);
    RLT_CHECK(s.next_seen > s.stall_end);
    RLT_CHECK(s.second_fire_at - s.stall_end < 0.5);
}

/* ---- fds are never read --------------------------------------------------------------------- */

typedef struct { int calls; int avail[4]; unsigned events; } peek_t;
static void peek_cb(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s;
    peek_t *p = info;
    int n = -1;
    if (ioctl(fd, FIONREAD, &n) != 0) n = -1;
    if (p->calls < 4) p->avail[p->calls] = n;
    p->calls++;
    p->events |= events;
}

static void never_reads_case(int rd, int wr) {
    const char *M = "diff-noread";
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(write(wr, "hello", 5) == 5);
    peek_t p;
    memset(&p, 0, sizeof p);
    rl_context_t cx = { &p, NULL, NULL };
    rl_source_t *s = rl_source_create_fd(rd, RL_FD_READABLE, 0, peek_cb, &cx);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, M), 0);
    RLT_CHECK_EQ(rl_run_in_mode(M, 1.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(rl_run_in_mode(M, 1.0, true), RL_RUN_HANDLED_SOURCE); /* level-triggered */
    RLT_CHECK_EQ(p.calls, 2);
    RLT_CHECK_EQ(p.avail[0], 5);
    RLT_CHECK_EQ(p.avail[1], 5);
    RLT_CHECK(p.events & RL_FD_READABLE);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, M), 0);
    rl_release(s);
    char buf[16];
    RLT_CHECK_EQ(read(rd, buf, sizeof buf), 5);
    RLT_CHECK(memcmp(buf, "hello", 5) == 0);
}

RLT_TEST(diff_loop_never_reads_a_pipe) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    never_reads_case(p[0], p[1]);
    close(p[0]);
    close(p[1]);
}

RLT_TEST(diff_loop_never_reads_a_socket) {
    int sv[2];
    RLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    never_reads_case(sv[0], sv[1]);
    close(sv[0]);
    close(sv[1]);
}

/* ---- no thread, no timer object per run ----------------------------------------------------- */

typedef struct {
    int max_tasks, max_fds;
    int samples;
    int nested_result;
} census_t;

static void census_take(census_t *c) {
    int t = tt_count_dir("/proc/self/task"), f = tt_count_dir("/proc/self/fd");
    if (t > c->max_tasks) c->max_tasks = t;
    if (f > c->max_fds) c->max_fds = f;
    c->samples++;
}
static void census_observer(rl_observer_t *o, unsigned a, void *info) { (void)o; (void)a; census_take(info); }
static void census_timer(rl_timer_t *t, void *info) { (void)t; census_take(info); }
static void census_outer_timer(rl_timer_t *t, void *info) {
    (void)t;
    census_t *c = info;
    census_take(c);
    c->nested_result = rl_run_in_mode("diff-census-inner", 0.1, false);
}

RLT_TEST(diff_finite_timeout_run_creates_no_thread_or_timer) {
    const char *M = "diff-census";
    const char *IN = "diff-census-inner";
    rl_loop_t *loop = rl_loop_get_current();
    census_t c;
    memset(&c, 0, sizeof c);
    rl_context_t cx = { &c, NULL, NULL };
    rl_source_t *keep = add_keepalive(loop, M);
    rl_source_t *keep_in = add_keepalive(loop, IN);
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING | RL_AFTER_WAITING | RL_ENTRY, true, 0,
                                          census_observer, &cx);
    rl_timer_t *far = rl_timer_create(rl_time_now() + 100, 0, 0, census_timer, &cx);
    RLT_CHECK(keep && keep_in && o && far);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, M), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, IN), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, far, M), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, far, IN), 0);
    /* Warm up both modes, so that anything made once per loop or mode exists already. */
    RLT_CHECK_EQ(rl_run_in_mode(M, 0.01, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode(IN, 0.01, false), RL_RUN_TIMED_OUT);

    /* The counts are the process's: under `swift test` other tests run threads meanwhile. One
     * of a few runs with nothing else starting a thread or an fd is enough; a thread or fd of
     * the library's own would show in every run. */
    rl_timer_t *t1 = NULL, *t2 = NULL;
    bool flat = false;
    for (int attempt = 0; attempt < 5 && !flat; attempt++) {
        rl_release(t1);
        rl_release(t2);
        t1 = rl_timer_create(rl_time_now() + 0.05, 0, 0, census_outer_timer, &cx);
        t2 = rl_timer_create(rl_time_now() + 0.02, 0, 0, census_timer, &cx);
        RLT_CHECK(t1 && t2);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t1, M), 0);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t2, IN), 0); /* fires inside the nested run */
        int tasks0 = tt_count_dir("/proc/self/task"), fds0 = tt_count_dir("/proc/self/fd");
        RLT_CHECK(tasks0 > 0 && fds0 > 0);
        c.samples = 0;
        c.max_tasks = c.max_fds = 0;
        RLT_CHECK_EQ(rl_run_in_mode(M, 0.2, false), RL_RUN_TIMED_OUT);
        RLT_CHECK_EQ(c.nested_result, RL_RUN_TIMED_OUT);
        RLT_CHECK(c.samples >= 6);
        flat = c.max_tasks <= tasks0 && c.max_fds <= fds0;
    }
    RLT_CHECK(flat);

    rl_timer_invalidate(far);
    rl_release(far);
    rl_release(t1);
    rl_release(t2);
    drop_observer(loop, o, M);
    rl_loop_remove_observer(loop, o, IN);
    drop_keepalive(loop, keep, M);
    drop_keepalive(loop, keep_in, IN);
}
