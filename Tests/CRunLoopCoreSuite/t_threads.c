/*
 * t_threads.c - thread safety: other threads adding, removing, signalling, waking, stopping and
 * queueing blocks on a running loop; no lost signal, block or stop; cross-thread timers and fd
 * sources wake a sleeping loop by themselves; loop teardown at thread exit; wakeup coalescing; a
 * source shared by two loops. Everything the tests share between threads is atomic (TSan runs
 * these).
 */
#include <crunloop.h>
#include <rlt.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DM RL_DEFAULT_MODE

static void nap(double s) {
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* A version-0 source that is never signalled: keeps a mode non-empty so that runs wait. */
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

/* Wait (bounded) until the loop is asleep, as seen from another thread. */
static bool wait_until_waiting(rl_loop_t *loop, double timeout) {
    double deadline = rl_time_now() + timeout;
    while (!rl_loop_is_waiting(loop)) {
        if (rl_time_now() > deadline) return false;
        nap(0.0002);
    }
    return true;
}

/* ---- a thread running its own loop ---------------------------------------------------------- */

typedef struct {
    pthread_t th;
    _Atomic(rl_loop_t *) loop;
    atomic_bool quit;
    atomic_bool exited;
} runner_t;

static void *runner_main(void *arg) {
    runner_t *r = arg;
    rl_loop_t *l = rl_loop_get_current();
    rl_retain(l);
    rl_source_t *keep = add_keepalive(l, DM);
    atomic_store(&r->loop, l);
    double deadline = rl_time_now() + 20.0; /* safety bound */
    while (!atomic_load(&r->quit) && rl_time_now() < deadline) rl_run_in_mode(DM, 0.2, false);
    drop_keepalive(l, keep, DM);
    atomic_store(&r->exited, true);
    return NULL;
}
static rl_loop_t *runner_start(runner_t *r) {
    atomic_init(&r->loop, NULL);
    atomic_init(&r->quit, false);
    atomic_init(&r->exited, false);
    if (pthread_create(&r->th, NULL, runner_main, r) != 0) return NULL;
    double deadline = rl_time_now() + 2.0;
    while (!atomic_load(&r->loop) && rl_time_now() < deadline) nap(0.0005);
    return atomic_load(&r->loop);
}
/* Stops the runner's loop, joins the thread (its loop is torn down) and drops our reference. */
static void runner_stop(runner_t *r) {
    rl_loop_t *l = atomic_load(&r->loop);
    atomic_store(&r->quit, true);
    if (l) rl_loop_stop(l);
    pthread_join(r->th, NULL);
    if (l) rl_release(l);
}

/* ---- many threads mutating one running loop ------------------------------------------------- */

#define SW 4    /* worker threads */
#define SN 120  /* iterations each */

typedef struct {
    atomic_int performs, schedules, cancels, releases;
    _Atomic(rl_loop_t *) cancel_loop;
} sstate_t;

static void ss_release(const void *info) { atomic_fetch_add(&((sstate_t *)info)->releases, 1); }
static void ss_schedule(void *info, rl_loop_t *l, const char *m) {
    (void)l; (void)m;
    atomic_fetch_add(&((sstate_t *)info)->schedules, 1);
}
static void ss_cancel(void *info, rl_loop_t *l, const char *m) {
    (void)m;
    atomic_store(&((sstate_t *)info)->cancel_loop, l);
    atomic_fetch_add(&((sstate_t *)info)->cancels, 1);
}
static void ss_perform(void *info) { atomic_fetch_add(&((sstate_t *)info)->performs, 1); }
static rl_source_context_t ss_ctx(sstate_t *st) {
    rl_source_context_t c = { st, NULL, ss_release, ss_schedule, ss_cancel, ss_perform };
    return c;
}
static void ss_init(sstate_t *st) {
    atomic_init(&st->performs, 0); atomic_init(&st->schedules, 0);
    atomic_init(&st->cancels, 0); atomic_init(&st->releases, 0);
    atomic_init(&st->cancel_loop, NULL);
}

typedef struct {
    rl_loop_t *loop;
    sstate_t st[SW * SN];
    rl_source_t *kept[SW * SN];
    atomic_int timers_fired, blocks_run, errors, workers_done;
} stress_t;

typedef struct { stress_t *s; int w; } stress_arg_t;

static void stress_timer(rl_timer_t *t, void *info) { (void)t; atomic_fetch_add(&((stress_t *)info)->timers_fired, 1); }
static void stress_block(void *arg) { atomic_fetch_add(&((stress_t *)arg)->blocks_run, 1); }

static void *stress_worker(void *arg) {
    stress_arg_t *a = arg;
    stress_t *s = a->s;
    rl_context_t tcx = { s, NULL, NULL };
    for (int i = 0; i < SN; i++) {
        int k = a->w * SN + i;
        rl_source_context_t sc = ss_ctx(&s->st[k]);
        rl_source_t *src = rl_source_create(k % 7, &sc);
        if (!src) { atomic_fetch_add(&s->errors, 1); continue; }
        if (rl_loop_add_source(s->loop, src, DM) != 0) atomic_fetch_add(&s->errors, 1);
        rl_source_signal(src);
        rl_loop_wakeup(s->loop);
        if (i % 2 == 0) {
            if (rl_loop_remove_source(s->loop, src, DM) != 0) atomic_fetch_add(&s->errors, 1);
            rl_release(src);
            s->kept[k] = NULL;
        } else {
            s->kept[k] = src;
        }
        rl_timer_t *t = rl_timer_create(rl_time_now() + (i % 5) * 0.001, 0, i % 3, stress_timer, &tcx);
        if (!t || rl_loop_add_timer(s->loop, t, DM) != 0) atomic_fetch_add(&s->errors, 1);
        rl_release(t);
        if (rl_loop_perform(s->loop, DM, stress_block, s) != 0) atomic_fetch_add(&s->errors, 1);
        rl_loop_wakeup(s->loop);
        if (i % 29 == 0) rl_loop_stop(s->loop);
        if (i % 3 == 0) sched_yield();
    }
    atomic_fetch_add(&s->workers_done, 1);
    return NULL;
}

RLT_TEST(threads_concurrent_mutation_of_running_loop) {
    stress_t *s = calloc(1, sizeof *s);
    RLT_CHECK(s != NULL);
    s->loop = rl_loop_get_current();
    for (int k = 0; k < SW * SN; k++) ss_init(&s->st[k]);
    atomic_init(&s->timers_fired, 0); atomic_init(&s->blocks_run, 0);
    atomic_init(&s->errors, 0); atomic_init(&s->workers_done, 0);
    rl_source_t *keep = add_keepalive(s->loop, DM);
    RLT_CHECK(keep != NULL);

    pthread_t th[SW];
    stress_arg_t args[SW];
    for (int w = 0; w < SW; w++) {
        args[w].s = s;
        args[w].w = w;
        RLT_CHECK(pthread_create(&th[w], NULL, stress_worker, &args[w]) == 0);
    }
    double deadline = rl_time_now() + 20.0;
    int bad_result = 0;
    while (atomic_load(&s->workers_done) < SW && rl_time_now() < deadline) {
        int r = rl_run_in_mode(DM, 0.05, false);
        if (r != RL_RUN_TIMED_OUT && r != RL_RUN_STOPPED) bad_result = r;
    }
    for (int w = 0; w < SW; w++) pthread_join(th[w], NULL);
    RLT_CHECK_EQ(bad_result, 0);
    RLT_CHECK_EQ(atomic_load(&s->errors), 0);

    /* Drain: everything queued must get done. */
    const int total = SW * SN;
    deadline = rl_time_now() + 3.0;
    for (;;) {
        bool all = atomic_load(&s->timers_fired) == total && atomic_load(&s->blocks_run) == total;
        for (int k = 0; all && k < total; k++)
            if (s->kept[k] && atomic_load(&s->st[k].performs) == 0) all = false;
        if (all || rl_time_now() > deadline) break;
        rl_run_in_mode(DM, 0.02, false);
    }
    RLT_CHECK_EQ(atomic_load(&s->timers_fired), total);
    RLT_CHECK_EQ(atomic_load(&s->blocks_run), total);
    for (int k = 0; k < total; k++) {
        sstate_t *st = &s->st[k];
        RLT_CHECK_EQ(atomic_load(&st->schedules), 1);
        if (s->kept[k]) {
            RLT_CHECK_EQ(atomic_load(&st->performs), 1); /* signalled once: performed once */
            RLT_CHECK_EQ(atomic_load(&st->cancels), 0);
            RLT_CHECK(rl_loop_contains_source(s->loop, s->kept[k], DM));
            RLT_CHECK_EQ(rl_loop_remove_source(s->loop, s->kept[k], DM), 0);
            rl_release(s->kept[k]);
        } else {
            RLT_CHECK(atomic_load(&st->performs) <= 1);
        }
        RLT_CHECK_EQ(atomic_load(&st->cancels), 1);
        RLT_CHECK(atomic_load(&st->cancel_loop) == s->loop);
        RLT_CHECK_EQ(atomic_load(&st->releases), 1);
    }
    drop_keepalive(s->loop, keep, DM);
    free(s);
}

/* ---- one shared source, timer and observer, many threads, many modes ------------------------ */

#define MW 4
#define MN 200

typedef struct {
    rl_loop_t *loop;
    rl_source_t *src;
    rl_timer_t *tm;
    rl_observer_t *ob;
    atomic_int errors;
} shared_t;
typedef struct { shared_t *sh; int w; } shared_arg_t;

static void noop_timer(rl_timer_t *t, void *info) { (void)t; (void)info; }
static void noop_observer(rl_observer_t *o, unsigned a, void *info) { (void)o; (void)a; (void)info; }

static void *shared_worker(void *arg) {
    shared_arg_t *a = arg;
    shared_t *sh = a->sh;
    char mode[32];
    snprintf(mode, sizeof mode, "threads-mode-%d", a->w);
    for (int i = 0; i < MN; i++) {
        if (rl_loop_add_source(sh->loop, sh->src, mode) != 0) atomic_fetch_add(&sh->errors, 1);
        if (rl_loop_add_timer(sh->loop, sh->tm, mode) != 0) atomic_fetch_add(&sh->errors, 1);
        if (rl_loop_add_observer(sh->loop, sh->ob, mode) != 0) atomic_fetch_add(&sh->errors, 1);
        rl_source_signal(sh->src);
        rl_timer_set_next_fire_date(sh->tm, rl_time_now() + 0.0005 * (i % 4));
        rl_loop_wakeup(sh->loop);
        if (!rl_loop_contains_source(sh->loop, sh->src, mode)) atomic_fetch_add(&sh->errors, 1);
        if (rl_loop_remove_source(sh->loop, sh->src, mode) != 0) atomic_fetch_add(&sh->errors, 1);
        if (rl_loop_remove_timer(sh->loop, sh->tm, mode) != 0) atomic_fetch_add(&sh->errors, 1);
        if (rl_loop_remove_observer(sh->loop, sh->ob, mode) != 0) atomic_fetch_add(&sh->errors, 1);
    }
    return NULL;
}

RLT_TEST(threads_shared_items_many_modes) {
    shared_t sh;
    sstate_t st;
    ss_init(&st);
    atomic_init(&sh.errors, 0);
    sh.loop = rl_loop_get_current();
    rl_source_context_t sc = ss_ctx(&st);
    rl_context_t nc = { NULL, NULL, NULL };
    sh.src = rl_source_create(0, &sc);
    sh.tm = rl_timer_create(rl_time_now() + 0.001, 0.001, 0, noop_timer, &nc);
    sh.ob = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, noop_observer, &nc);
    RLT_CHECK(sh.src && sh.tm && sh.ob);
    rl_source_t *keep = add_keepalive(sh.loop, "threads-mode-0");
    RLT_CHECK(keep != NULL);

    pthread_t th[MW];
    shared_arg_t args[MW];
    for (int w = 0; w < MW; w++) {
        args[w].sh = &sh;
        args[w].w = w;
        RLT_CHECK(pthread_create(&th[w], NULL, shared_worker, &args[w]) == 0);
    }
    /* The loop runs mode 0 (where worker 0 keeps adding and removing) while they work. */
    double until = rl_time_now() + 0.3;
    while (rl_time_now() < until) rl_run_in_mode("threads-mode-0", 0.02, false);
    for (int w = 0; w < MW; w++) pthread_join(th[w], NULL);

    RLT_CHECK_EQ(atomic_load(&sh.errors), 0);
    RLT_CHECK_EQ(atomic_load(&st.schedules), MW * MN);
    RLT_CHECK_EQ(atomic_load(&st.cancels), MW * MN);
    for (int w = 0; w < MW; w++) {
        char mode[32];
        snprintf(mode, sizeof mode, "threads-mode-%d", w);
        RLT_CHECK(!rl_loop_contains_source(sh.loop, sh.src, mode));
        RLT_CHECK(!rl_loop_contains_timer(sh.loop, sh.tm, mode));
        RLT_CHECK(!rl_loop_contains_observer(sh.loop, sh.ob, mode));
    }
    rl_release(sh.src);
    RLT_CHECK_EQ(atomic_load(&st.releases), 1);
    rl_release(sh.tm);
    rl_release(sh.ob);
    drop_keepalive(sh.loop, keep, "threads-mode-0");
}

/* ---- no lost signal, no lost block ---------------------------------------------------------- */

typedef struct {
    rl_loop_t *loop;
    rl_source_t *src;
    bool blocks;
    int rounds;
    atomic_int performs;
    atomic_int failed_round;
    atomic_bool done, loop_exited;
} nls_t;

static void nls_perform(void *info) {
    nls_t *n = info;
    int c = atomic_fetch_add(&n->performs, 1);
    /* Linger a varying little while, so that some signals arrive during the callout. */
    for (volatile int j = 0; j < (c % 8) * 200; j++) {}
}

/* Widens the window between the loop's last look at its sources and its sleep. */
static void nls_before_waiting(rl_observer_t *o, unsigned a, void *info) {
    (void)o; (void)a;
    nls_t *n = info;
    int c = atomic_load(&n->performs);
    for (volatile int j = 0; j < (c % 5) * 300; j++) {}
}

static void *nls_producer(void *arg) {
    nls_t *n = arg;
    atomic_store(&n->failed_round, -1);
    for (int r = 0; r < n->rounds; r++) {
        int before = atomic_load(&n->performs);
        /* A varying delay after the previous perform was observed: the signal lands in
         * different phases of the loop's pass (callout, exit checks, before/in the wait). */
        for (volatile int j = 0; j < (r * 37 % 64) * 40; j++) {}
        if (r % 16 == 5) nap(0.0003);
        if (n->blocks) {
            rl_loop_perform(n->loop, DM, nls_perform, n);
        } else {
            rl_source_signal(n->src);
        }
        rl_loop_wakeup(n->loop);
        double deadline = rl_time_now() + 1.5;
        while (atomic_load(&n->performs) == before) {
            if (rl_time_now() > deadline) {
                atomic_store(&n->failed_round, r);
                goto out;
            }
            sched_yield();
        }
    }
out:
    atomic_store(&n->done, true);
    while (!atomic_load(&n->loop_exited)) {
        rl_loop_stop(n->loop);
        nap(0.001);
    }
    return NULL;
}

static void no_lost_case(bool blocks) {
    nls_t *n = calloc(1, sizeof *n);
    RLT_CHECK(n != NULL);
    n->loop = rl_loop_get_current();
    n->blocks = blocks;
    n->rounds = 1500;
    atomic_init(&n->performs, 0);
    atomic_init(&n->failed_round, -1);
    atomic_init(&n->done, false);
    atomic_init(&n->loop_exited, false);
    rl_source_context_t sc = { n, NULL, NULL, NULL, NULL, nls_perform };
    n->src = rl_source_create(0, &sc);
    RLT_CHECK(n->src != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(n->loop, n->src, DM), 0); /* also keeps the mode non-empty */
    rl_context_t ocx = { n, NULL, NULL };
    rl_observer_t *bw = rl_observer_create(RL_BEFORE_WAITING, true, 0, nls_before_waiting, &ocx);
    RLT_CHECK(bw != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(n->loop, bw, DM), 0);

    pthread_t th;
    RLT_CHECK(pthread_create(&th, NULL, nls_producer, n) == 0);
    double deadline = rl_time_now() + 30.0;
    /* Long timeouts: a lost wakeup would leave the loop asleep, and the producer notices. */
    while (!atomic_load(&n->done) && rl_time_now() < deadline) rl_run_in_mode(DM, 10.0, false);
    atomic_store(&n->loop_exited, true);
    pthread_join(th, NULL);

    int failed = atomic_load(&n->failed_round);
    int performs = atomic_load(&n->performs);
    RLT_CHECK_EQ(rl_loop_remove_source(n->loop, n->src, DM), 0);
    rl_release(n->src);
    RLT_CHECK_EQ(rl_loop_remove_observer(n->loop, bw, DM), 0);
    rl_release(bw);
    int rounds = n->rounds;
    free(n);
    RLT_CHECK_EQ(failed, -1);
    RLT_CHECK(performs >= rounds);
}

RLT_TEST(threads_no_lost_signal) { no_lost_case(false); }
RLT_TEST(threads_no_lost_block) { no_lost_case(true); }

/* ---- cross-thread changes wake a sleeping loop by themselves -------------------------------- */

typedef struct {
    rl_loop_t *loop;
    int kind;                /* 0: add a timer, 1: rearm a timer earlier, 2: add an fd source,
                                3: change an fd source's events */
    rl_timer_t *far_timer;   /* kind 1 */
    int fd;                  /* kind 2 */
    rl_source_t *fd_source;  /* kind 2: created by the helper, removed by the test */
    atomic_bool saw_waiting;
    atomic_int fired;
    _Atomic double fire_date, fired_at;
} xwake_t;

static void xwake_timer(rl_timer_t *t, void *info) {
    (void)t;
    xwake_t *x = info;
    atomic_store(&x->fired_at, rl_time_now());
    atomic_fetch_add(&x->fired, 1);
    rl_loop_stop(rl_loop_get_current());
}
static void xwake_fd(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s;
    xwake_t *x = info;
    char buf[16];
    if (events & RL_FD_READABLE) { ssize_t r = read(fd, buf, sizeof buf); (void)r; }
    atomic_fetch_add(&x->fired, 1);
    rl_loop_stop(rl_loop_get_current());
}

static void *xwake_helper(void *arg) {
    xwake_t *x = arg;
    atomic_store(&x->saw_waiting, wait_until_waiting(x->loop, 1.5));
    nap(0.01); /* let it settle in its sleep */
    rl_context_t cx = { x, NULL, NULL };
    double when = rl_time_now() + 0.05;
    atomic_store(&x->fire_date, when);
    if (x->kind == 0) {
        rl_timer_t *t = rl_timer_create(when, 0, 0, xwake_timer, &cx);
        if (t) {
            rl_loop_add_timer(x->loop, t, DM);
            rl_release(t);
        }
    } else if (x->kind == 1) {
        rl_timer_set_next_fire_date(x->far_timer, when);
    } else if (x->kind == 2) {
        x->fd_source = rl_source_create_fd(x->fd, RL_FD_READABLE, 0, xwake_fd, &cx);
        if (x->fd_source) rl_loop_add_source(x->loop, x->fd_source, DM);
    } else {
        rl_source_set_fd_events(x->fd_source, RL_FD_WRITABLE);
    }
    return NULL;   /* no rl_loop_wakeup() */
}

static void xwake_case(int kind) {
    xwake_t x;
    memset(&x, 0, sizeof x);
    atomic_init(&x.saw_waiting, false);
    atomic_init(&x.fired, 0);
    atomic_init(&x.fire_date, 0.0);
    atomic_init(&x.fired_at, 0.0);
    x.loop = rl_loop_get_current();
    x.kind = kind;
    int p[2] = { -1, -1 };
    rl_source_t *keep = add_keepalive(x.loop, DM);
    RLT_CHECK(keep != NULL);
    if (kind == 1) {
        rl_context_t cx = { &x, NULL, NULL };
        x.far_timer = rl_timer_create(rl_time_now() + 60, 0, 0, xwake_timer, &cx);
        RLT_CHECK(x.far_timer != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(x.loop, x.far_timer, DM), 0);
    }
    if (kind == 2) {
        RLT_CHECK(pipe(p) == 0);
        RLT_CHECK(write(p[1], "x", 1) == 1);
        x.fd = p[0];
    }
    if (kind == 3) {
        /* The write end of an empty pipe: never readable, always writable. */
        RLT_CHECK(pipe(p) == 0);
        rl_context_t cx = { &x, NULL, NULL };
        x.fd_source = rl_source_create_fd(p[1], RL_FD_READABLE, 0, xwake_fd, &cx);
        RLT_CHECK(x.fd_source != NULL);
        RLT_CHECK_EQ(rl_loop_add_source(x.loop, x.fd_source, DM), 0);
    }
    pthread_t th;
    RLT_CHECK(pthread_create(&th, NULL, xwake_helper, &x) == 0);
    double t0 = rl_time_now();
    int r = rl_run_in_mode(DM, 2.5, false);
    double t1 = rl_time_now();
    pthread_join(th, NULL);

    RLT_CHECK(atomic_load(&x.saw_waiting));
    RLT_CHECK_EQ(r, RL_RUN_STOPPED);
    RLT_CHECK_EQ(atomic_load(&x.fired), 1);
    RLT_CHECK(t1 - t0 < 2.0); /* the run's own timeout (2.5 s) did not end it */
    if (kind < 2) RLT_CHECK(atomic_load(&x.fired_at) >= atomic_load(&x.fire_date));
    if (x.far_timer) {
        rl_timer_invalidate(x.far_timer);
        rl_release(x.far_timer);
    }
    if (x.fd_source) {
        RLT_CHECK_EQ(rl_loop_remove_source(x.loop, x.fd_source, DM), 0);
        rl_release(x.fd_source);
    }
    if (p[0] >= 0) { close(p[0]); close(p[1]); }
    drop_keepalive(x.loop, keep, DM);
}

RLT_TEST(threads_timer_added_from_another_thread_wakes_loop) { xwake_case(0); }
RLT_TEST(threads_timer_rearmed_from_another_thread_wakes_loop) { xwake_case(1); }
RLT_TEST(threads_fd_source_added_from_another_thread_wakes_loop) { xwake_case(2); }
RLT_TEST(threads_fd_events_changed_from_another_thread_wake_loop) { xwake_case(3); }

/* ---- stop from another thread; rl_loop_is_waiting ------------------------------------------- */

typedef struct {
    rl_loop_t *loop;
    atomic_int phase;          /* 1: loop in callout, 2: helper answered */
    atomic_int waiting_in_callout; /* helper's view while the loop was busy: 0/1, -1 unknown */
    atomic_bool saw_waiting;
    atomic_bool callout_self_view;
} stop_t;

static void stop_timer(rl_timer_t *t, void *info) {
    (void)t;
    stop_t *s = info;
    atomic_store(&s->callout_self_view, rl_loop_is_waiting(rl_loop_get_current()));
    atomic_store(&s->phase, 1);
    double deadline = rl_time_now() + 1.5;
    while (atomic_load(&s->phase) != 2 && rl_time_now() < deadline) nap(0.0002);
}

static void *stop_helper(void *arg) {
    stop_t *s = arg;
    double deadline = rl_time_now() + 1.5;
    while (atomic_load(&s->phase) != 1 && rl_time_now() < deadline) nap(0.0002);
    atomic_store(&s->waiting_in_callout, rl_loop_is_waiting(s->loop) ? 1 : 0);
    atomic_store(&s->phase, 2);
    atomic_store(&s->saw_waiting, wait_until_waiting(s->loop, 1.5));
    rl_loop_stop(s->loop);
    return NULL;
}

RLT_TEST(threads_stop_from_another_thread_and_is_waiting) {
    stop_t s;
    s.loop = rl_loop_get_current();
    atomic_init(&s.phase, 0);
    atomic_init(&s.waiting_in_callout, -1);
    atomic_init(&s.saw_waiting, false);
    atomic_init(&s.callout_self_view, true);
    rl_source_t *keep = add_keepalive(s.loop, DM);
    RLT_CHECK(keep != NULL);
    rl_context_t cx = { &s, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.01, 0, 0, stop_timer, &cx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(s.loop, t, DM), 0);
    rl_release(t);

    RLT_CHECK(!rl_loop_is_waiting(s.loop));
    pthread_t th;
    RLT_CHECK(pthread_create(&th, NULL, stop_helper, &s) == 0);
    double t0 = rl_time_now();
    int r = rl_run_in_mode(DM, 3.0, false);
    double t1 = rl_time_now();
    pthread_join(th, NULL);
    RLT_CHECK_EQ(r, RL_RUN_STOPPED);
    RLT_CHECK(t1 - t0 < 2.5);
    RLT_CHECK(!atomic_load(&s.callout_self_view));
    RLT_CHECK_EQ(atomic_load(&s.waiting_in_callout), 0);
    RLT_CHECK(atomic_load(&s.saw_waiting));
    RLT_CHECK(!rl_loop_is_waiting(s.loop));

    /* A stop while the loop is not running is forgotten. */
    rl_loop_stop(s.loop);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0.05, false), RL_RUN_TIMED_OUT);
    drop_keepalive(s.loop, keep, DM);
}

/* ---- thread exit: teardown ------------------------------------------------------------------ */

typedef struct {
    rl_source_t *src, *fdsrc;
    rl_timer_t *tm;
    rl_observer_t *ob;
    rl_loop_t *loop;   /* retained by the thread for the test */
    atomic_int add_errors;
    atomic_int observer_calls;
} exit_t;

static void exit_observer(rl_observer_t *o, unsigned a, void *info) {
    (void)o; (void)a;
    atomic_fetch_add(&((exit_t *)info)->observer_calls, 1);
}
static void exit_fd(rl_source_t *s, int fd, unsigned ev, void *info) { (void)s; (void)fd; (void)ev; (void)info; }
static void exit_timer(rl_timer_t *t, void *info) { (void)t; (void)info; }

static void *exit_thread(void *arg) {
    exit_t *e = arg;
    rl_loop_t *l = rl_loop_get_current();
    e->loop = rl_retain(l);
    const char *modes[2] = { DM, "threads-exit-other" };
    for (int i = 0; i < 2; i++) {
        if (rl_loop_add_source(l, e->src, modes[i]) != 0) atomic_fetch_add(&e->add_errors, 1);
        if (rl_loop_add_source(l, e->fdsrc, modes[i]) != 0) atomic_fetch_add(&e->add_errors, 1);
        if (rl_loop_add_timer(l, e->tm, modes[i]) != 0) atomic_fetch_add(&e->add_errors, 1);
        if (rl_loop_add_observer(l, e->ob, modes[i]) != 0) atomic_fetch_add(&e->add_errors, 1);
    }
    rl_run_in_mode(DM, 0.01, false);
    return NULL; /* the items are still in the loop */
}

RLT_TEST(threads_exit_tears_down_loop) {
    exit_t e;
    memset(&e, 0, sizeof e);
    atomic_init(&e.add_errors, 0);
    atomic_init(&e.observer_calls, 0);
    sstate_t ss, fs, ts, os;
    ss_init(&ss); ss_init(&fs); ss_init(&ts); ss_init(&os);
    rl_source_context_t sc = ss_ctx(&ss);
    rl_context_t fcx = { &fs, NULL, ss_release };
    rl_context_t tcx = { &ts, NULL, ss_release };
    rl_context_t ocx = { &e, NULL, NULL };
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    e.src = rl_source_create(0, &sc);
    e.fdsrc = rl_source_create_fd(p[0], RL_FD_READABLE, 0, exit_fd, &fcx);
    e.tm = rl_timer_create(rl_time_now() + 60, 1.0, 0, exit_timer, &tcx);
    e.ob = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, exit_observer, &ocx);
    RLT_CHECK(e.src && e.fdsrc && e.tm && e.ob);

    pthread_t th;
    RLT_CHECK(pthread_create(&th, NULL, exit_thread, &e) == 0);
    pthread_join(th, NULL);
    RLT_CHECK(e.loop != NULL);
    RLT_CHECK_EQ(atomic_load(&e.add_errors), 0);
    RLT_CHECK(atomic_load(&e.observer_calls) > 0);

    /* The sources were removed from both modes, cancel ran with that loop. */
    RLT_CHECK_EQ(atomic_load(&ss.schedules), 2);
    RLT_CHECK_EQ(atomic_load(&ss.cancels), 2);
    RLT_CHECK(atomic_load(&ss.cancel_loop) == e.loop);
    const char *modes[2] = { DM, "threads-exit-other" };
    for (int i = 0; i < 2; i++) {
        RLT_CHECK(!rl_loop_contains_source(e.loop, e.src, modes[i]));
        RLT_CHECK(!rl_loop_contains_source(e.loop, e.fdsrc, modes[i]));
        RLT_CHECK(!rl_loop_contains_timer(e.loop, e.tm, modes[i]));
        RLT_CHECK(!rl_loop_contains_observer(e.loop, e.ob, modes[i]));
    }
    /* Timers and observers were let go of, not invalidated. */
    RLT_CHECK(rl_timer_is_valid(e.tm));
    RLT_CHECK(rl_observer_is_valid(e.ob));
    /* Nobody else holds them now: ours is the last reference. */
    RLT_CHECK_EQ(atomic_load(&ss.releases) + atomic_load(&fs.releases) + atomic_load(&ts.releases), 0);

    /* The loop object outlives its thread. */
    RLT_CHECK(!rl_loop_is_current(e.loop));
    RLT_CHECK(!rl_loop_is_waiting(e.loop));
    RLT_CHECK(rl_loop_copy_current_mode(e.loop) == NULL);
    rl_loop_stats_t st;
    RLT_CHECK_EQ(rl_loop_get_stats(e.loop, &st), 0);
    RLT_CHECK(st.passes >= 1);
    char *d = rl_loop_copy_description(e.loop);
    free(d);

    rl_release(e.src);
    rl_release(e.fdsrc);
    rl_release(e.tm);
    rl_release(e.ob);
    RLT_CHECK_EQ(atomic_load(&ss.releases), 1);
    RLT_CHECK_EQ(atomic_load(&fs.releases), 1);
    RLT_CHECK_EQ(atomic_load(&ts.releases), 1);
    rl_release(e.loop);
    close(p[0]);
    close(p[1]);
}

/* ---- a dead thread's loop used from another thread ------------------------------------------ */

static void *grab_loop_thread(void *arg) {
    *(rl_loop_t **)arg = rl_retain(rl_loop_get_current());
    return NULL;
}
static void count_block(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

RLT_TEST(threads_dead_loop_used_from_another_thread) {
    rl_loop_t *dead = NULL;
    pthread_t th;
    RLT_CHECK(pthread_create(&th, NULL, grab_loop_thread, &dead) == 0);
    pthread_join(th, NULL);
    RLT_CHECK(dead != NULL);

    sstate_t ss, ts, os;
    ss_init(&ss); ss_init(&ts); ss_init(&os);
    rl_source_context_t sc = ss_ctx(&ss);
    rl_context_t tcx = { &ts, NULL, ss_release };
    rl_context_t ocx = { &os, NULL, ss_release };
    rl_source_t *s = rl_source_create(0, &sc);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.01, 0, 0, exit_timer, &tcx);
    rl_observer_t *o = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, noop_observer, &ocx);
    RLT_CHECK(s && t && o);
    atomic_int blocks;
    atomic_init(&blocks, 0);

    /* Any result will do, as long as nothing crashes and the books balance. */
    int r1 = rl_loop_add_source(dead, s, DM);
    int r2 = rl_loop_add_timer(dead, t, DM);
    int r3 = rl_loop_add_observer(dead, o, "threads-dead-mode");
    int r4 = rl_loop_perform(dead, DM, count_block, &blocks);
    int r5 = rl_loop_add_common_mode(dead, "threads-dead-mode");
    RLT_CHECK(r1 <= 0 && r2 <= 0 && r3 <= 0 && r4 <= 0 && r5 <= 0);
    rl_source_signal(s);
    rl_loop_wakeup(dead);
    rl_loop_stop(dead);
    RLT_CHECK(!rl_loop_is_waiting(dead));
    RLT_CHECK(!rl_loop_is_current(dead));
    RLT_CHECK(rl_loop_copy_current_mode(dead) == NULL);
    (void)rl_loop_contains_source(dead, s, DM);
    (void)rl_loop_get_next_timer_fire_date(dead, DM);
    size_t n = 0;
    char **names = rl_loop_copy_all_modes(dead, &n);
    if (names) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
    }
    free(rl_loop_copy_description(dead));
    rl_loop_stats_t st;
    RLT_CHECK_EQ(rl_loop_get_stats(dead, &st), 0);
    if (r1 == 0) RLT_CHECK_EQ(rl_loop_remove_source(dead, s, DM), 0);
    nap(0.03); /* the timer's date passes; nobody runs that loop */

    rl_release(s);
    rl_release(t);
    rl_release(o);
    rl_release(dead); /* last reference: whatever it still held goes with it */
    RLT_CHECK_EQ(atomic_load(&blocks), 0);
    RLT_CHECK_EQ(atomic_load(&ss.releases), 1);
    RLT_CHECK_EQ(atomic_load(&ts.releases), 1);
    RLT_CHECK_EQ(atomic_load(&os.releases), 1);
    RLT_CHECK_EQ(atomic_load(&ss.schedules), atomic_load(&ss.cancels));
}

/* ---- wakeup coalescing ---------------------------------------------------------------------- */

typedef struct {
    rl_loop_t *loop;
    atomic_int phase; /* 1: loop busy in callout, 2: helper done */
    atomic_ullong writes_during;
    atomic_bool stats_ok;
} coal_t;

static void coal_timer(rl_timer_t *t, void *info) {
    (void)t;
    coal_t *c = info;
    atomic_store(&c->phase, 1);
    double deadline = rl_time_now() + 1.5;
    while (atomic_load(&c->phase) != 2 && rl_time_now() < deadline) nap(0.0002);
}

static void *coal_helper(void *arg) {
    coal_t *c = arg;
    double deadline = rl_time_now() + 1.5;
    while (atomic_load(&c->phase) != 1 && rl_time_now() < deadline) nap(0.0002);
    rl_loop_stats_t a, b;
    bool ok = rl_loop_get_stats(c->loop, &a) == 0;
    for (int i = 0; i < 1000; i++) rl_loop_wakeup(c->loop);
    ok = ok && rl_loop_get_stats(c->loop, &b) == 0;
    atomic_store(&c->writes_during, b.wakeup_writes - a.wakeup_writes);
    atomic_store(&c->stats_ok, ok);
    atomic_store(&c->phase, 2);
    /* Now while it sleeps: each write must correspond to a wait it ended. */
    if (wait_until_waiting(c->loop, 1.5)) {
        for (int i = 0; i < 1000; i++) rl_loop_wakeup(c->loop);
    }
    nap(0.02);
    rl_loop_stop(c->loop);
    return NULL;
}

RLT_TEST(threads_wakeup_coalescing) {
    coal_t c;
    c.loop = rl_loop_get_current();
    atomic_init(&c.phase, 0);
    atomic_init(&c.writes_during, 0);
    atomic_init(&c.stats_ok, false);
    rl_source_t *keep = add_keepalive(c.loop, DM);
    RLT_CHECK(keep != NULL);
    rl_context_t cx = { &c, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.01, 0, 0, coal_timer, &cx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(c.loop, t, DM), 0);
    rl_release(t);

    rl_loop_stats_t before, after;
    RLT_CHECK_EQ(rl_loop_get_stats(c.loop, &before), 0);
    pthread_t th;
    RLT_CHECK(pthread_create(&th, NULL, coal_helper, &c) == 0);
    double deadline = rl_time_now() + 3.0;
    int r;
    do r = rl_run_in_mode(DM, 2.0, false);
    while (r != RL_RUN_STOPPED && rl_time_now() < deadline);
    pthread_join(th, NULL);
    RLT_CHECK_EQ(rl_loop_get_stats(c.loop, &after), 0);

    RLT_CHECK(atomic_load(&c.stats_ok));
    RLT_CHECK(atomic_load(&c.writes_during) <= 4);
    unsigned long long writes = after.wakeup_writes - before.wakeup_writes;
    unsigned long long wakes = after.wakeups - before.wakeups;
    /* Each eventfd write ends a wait (a stop's own wakeup and one left in flight aside). */
    RLT_CHECK(writes <= wakes + 3);
    RLT_CHECK(writes < 1000);
    drop_keepalive(c.loop, keep, DM);
}

/* ---- one source in two loops on two threads ------------------------------------------------- */

typedef struct {
    _Atomic(rl_loop_t *) a, b;
    atomic_int by_a, by_b, other, total;
    sstate_t st;
} two_t;

static void two_perform(void *info) {
    two_t *t = info;
    rl_loop_t *cur = rl_loop_get_current();
    if (cur == atomic_load(&t->a)) atomic_fetch_add(&t->by_a, 1);
    else if (cur == atomic_load(&t->b)) atomic_fetch_add(&t->by_b, 1);
    else atomic_fetch_add(&t->other, 1);
    atomic_fetch_add(&t->total, 1);
}
static void two_schedule(void *info, rl_loop_t *l, const char *m) { ss_schedule(&((two_t *)info)->st, l, m); }
static void two_cancel(void *info, rl_loop_t *l, const char *m) { ss_cancel(&((two_t *)info)->st, l, m); }
static void two_release(const void *info) { ss_release(&((two_t *)info)->st); }

static bool two_round(two_t *t, rl_source_t *s, rl_loop_t *la, rl_loop_t *lb) {
    int before = atomic_load(&t->total);
    rl_source_signal(s);
    if (la) rl_loop_wakeup(la);
    rl_loop_wakeup(lb);
    double deadline = rl_time_now() + 1.5;
    while (atomic_load(&t->total) == before) {
        if (rl_time_now() > deadline) return false;
        sched_yield();
    }
    return true;
}

RLT_TEST(threads_source_in_two_loops) {
    two_t *t = calloc(1, sizeof *t);
    RLT_CHECK(t != NULL);
    atomic_init(&t->a, NULL); atomic_init(&t->b, NULL);
    atomic_init(&t->by_a, 0); atomic_init(&t->by_b, 0);
    atomic_init(&t->other, 0); atomic_init(&t->total, 0);
    ss_init(&t->st);
    runner_t ra, rb;
    rl_loop_t *la = runner_start(&ra);
    rl_loop_t *lb = runner_start(&rb);
    RLT_CHECK(la && lb && la != lb);
    atomic_store(&t->a, la);
    atomic_store(&t->b, lb);
    rl_source_context_t sc = { t, NULL, two_release, two_schedule, two_cancel, two_perform };
    rl_source_t *s = rl_source_create(0, &sc);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(la, s, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_source(lb, s, DM), 0);
    RLT_CHECK_EQ(atomic_load(&t->st.schedules), 2);

    const int R1 = 300, R2 = 100;
    int lost1 = 0, lost2 = 0;
    for (int i = 0; i < R1 && !lost1; i++) if (!two_round(t, s, la, lb)) lost1 = i + 1;
    nap(0.05);
    int total1 = atomic_load(&t->total);

    /* Loop A's thread ends: its teardown cancels s there; B does all the work now. */
    runner_stop(&ra);
    int cancels1 = atomic_load(&t->st.cancels);
    rl_loop_t *cancel_loop1 = atomic_load(&t->st.cancel_loop);
    int b_before = atomic_load(&t->by_b);
    for (int i = 0; i < R2 && !lost2; i++) if (!two_round(t, s, NULL, lb)) lost2 = i + 1;
    nap(0.02);
    int remove_b = rl_loop_remove_source(lb, s, DM);
    runner_stop(&rb);

    RLT_CHECK_EQ(lost1, 0);
    RLT_CHECK_EQ(total1, R1); /* each signal performed once, by one loop */
    RLT_CHECK_EQ(atomic_load(&t->other), 0);
    RLT_CHECK_EQ(cancels1, 1);
    RLT_CHECK(cancel_loop1 == la);
    RLT_CHECK_EQ(lost2, 0);
    RLT_CHECK_EQ(atomic_load(&t->by_b) - b_before, R2);
    RLT_CHECK_EQ(atomic_load(&t->total), R1 + R2);
    RLT_CHECK_EQ(remove_b, 0);
    RLT_CHECK_EQ(atomic_load(&t->st.cancels), 2);
    rl_release(s);
    RLT_CHECK_EQ(atomic_load(&t->st.releases), 1);
    free(t);
}

/* ---- a stop that lands between two passes ---------------------------------------------------- */

/* rl_loop_stop from another thread right after a pass performed a source: the stop may land after
 * that pass's exit checks and before the next pass begins (which clears the wakeup that came with
 * it). The next pass must not sleep with the stop pending. Each round stops at a different moment;
 * a stop not seen within 2 s counts as lost (and the loop is woken so that the test goes on). The
 * window is a fraction of a microsecond, hence the many rounds: before the pass looked at the stop
 * flag when deciding to sleep, about one round in 10,000 lost its stop. */
enum { STOP_ROUNDS = 20000 };

typedef struct {
    rl_loop_t *loop;
    rl_source_t *source;
    atomic_int performed, returned, done;
    atomic_long lost;
} stopper_t;

static void stopper_perform(void *info) { atomic_store(&((stopper_t *)info)->performed, 1); }

static void *stopper_main(void *arg) {
    stopper_t *x = arg;
    unsigned r = 12345;
    for (int i = 0; i < STOP_ROUNDS; i++) {
        double limit = rl_time_now() + 2.0;
        while (!rl_loop_is_waiting(x->loop) && rl_time_now() < limit) sched_yield();
        atomic_store(&x->returned, 0);
        atomic_store(&x->performed, 0);
        rl_source_signal(x->source);
        rl_loop_wakeup(x->loop);
        while (!atomic_load(&x->performed) && rl_time_now() < limit) {}
        r = r * 1103515245u + 12345u;
        for (volatile unsigned k = 0, m = (r >> 16) % 1000; k < m; k++) {} /* up to a microsecond or two */
        rl_loop_stop(x->loop);
        limit = rl_time_now() + 2.0;
        while (!atomic_load(&x->returned) && rl_time_now() < limit) sched_yield();
        if (!atomic_load(&x->returned)) {
            atomic_fetch_add(&x->lost, 1);
            rl_loop_wakeup(x->loop);
            while (!atomic_load(&x->returned)) sched_yield();
        }
    }
    double limit = rl_time_now() + 2.0;
    while (!rl_loop_is_waiting(x->loop) && rl_time_now() < limit) sched_yield();
    atomic_store(&x->done, 1);
    rl_loop_stop(x->loop);
    return NULL;
}

RLT_TEST(threads_stop_between_two_passes_is_not_lost) {
    stopper_t x;
    x.loop = rl_loop_get_current();
    atomic_init(&x.performed, 0);
    atomic_init(&x.returned, 0);
    atomic_init(&x.done, 0);
    atomic_init(&x.lost, 0);
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    sc.info = &x;
    sc.perform = stopper_perform;
    x.source = rl_source_create(0, &sc);
    RLT_CHECK(x.source != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(x.loop, x.source, DM), 0);
    pthread_t th;
    RLT_CHECK_EQ(pthread_create(&th, NULL, stopper_main, &x), 0);
    while (!atomic_load(&x.done)) {
        int rc = rl_run_in_mode(DM, 30.0, false);
        if (rc != RL_RUN_STOPPED && !atomic_load(&x.done)) rlt_fail(__FILE__, __LINE__, "a run returned %d", rc);
        atomic_store(&x.returned, 1);
    }
    pthread_join(th, NULL);
    RLT_CHECK_EQ(atomic_load(&x.lost), 0);
    rl_source_invalidate(x.source);
    rl_release(x.source);
}

/* ---- a mode made common while a common source joins and leaves another loop ----------------- */

typedef struct {
    rl_source_t *source;
    atomic_bool stop;
    atomic_int rounds, failures;
} hop_t;

/* On its own loop: add the source to a mode and take it out again, as fast as it can. Each add
 * makes the source a link for this loop (the source's list of links grows and shrinks). */
static void *hop_worker(void *arg) {
    hop_t *h = arg;
    rl_loop_t *mine = rl_loop_get_current();
    while (!atomic_load(&h->stop)) {
        if (rl_loop_add_source(mine, h->source, DM) != 0 || rl_loop_remove_source(mine, h->source, DM) != 0)
            atomic_fetch_add(&h->failures, 1);
        atomic_fetch_add(&h->rounds, 1);
    }
    return NULL;
}

/* Making a mode common puts every common item in it, holding only the loop's lock: it must not
 * look at the source's links, which another thread changes under the source's lock (TSan). */
RLT_TEST(threads_common_mode_joins_while_source_changes_loops) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    hop_t h = {.source = rl_source_create(0, &sc)};
    RLT_CHECK(h.source != NULL);
    RLT_CHECK(rl_loop_add_source(loop, h.source, RL_COMMON_MODES) == 0);
    pthread_t th;
    RLT_CHECK(pthread_create(&th, NULL, hop_worker, &h) == 0);
    while (atomic_load(&h.rounds) == 0) sched_yield();
    char name[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "hop-%d", i);
        RLT_CHECK(rl_loop_add_common_mode(loop, name) == 0);
        RLT_CHECK(rl_loop_contains_source(loop, h.source, name));
    }
    atomic_store(&h.stop, true);
    RLT_CHECK(pthread_join(th, NULL) == 0);
    RLT_CHECK(atomic_load(&h.failures) == 0);
    RLT_CHECK(rl_loop_remove_source(loop, h.source, RL_COMMON_MODES) == 0);
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "hop-%d", i);
        RLT_CHECK(!rl_loop_contains_source(loop, h.source, name));
    }
    rl_release(h.source);
}

/* ---- An item invalidated on one thread while another adds it to a loop ---- */

/* The adder checks that the item is valid before it claims it, and the invalidation takes the
 * item out of whichever loop owns it: an invalidation that lands between the adder's check and
 * its claim must still leave no invalid item in the loop (where it would stay, never firing, with
 * the loop's references and a held context's retain, until the loop ends). Either the add fails
 * or the invalidation takes the item out; CF's invalid timers and observers are in no loop. */
enum { RACE_TIMER, RACE_HELD_TIMER, RACE_OBSERVER };

typedef struct {
    int kind;
    bool own;            /* the adder adds to its own loop (timer.c's short path for a timer) */
    rl_loop_t *_Atomic loop;
    void *_Atomic item;
    atomic_int go, done;
} add_race_t;

static void race_fired(rl_timer_t *t, void *info) { (void)t, (void)info; }
static void race_observed(rl_observer_t *o, unsigned activity, void *info) { (void)o, (void)activity, (void)info; }

static void *add_race_adder(void *arg) {
    add_race_t *r = arg;
    if (r->own) atomic_store(&r->loop, rl_loop_get_current());
    for (int round = 1;; round++) {
        int go;
        while ((go = atomic_load(&r->go)) < round)
            if (go < 0) return NULL;
        void *item = atomic_load(&r->item);
        if (r->kind == RACE_OBSERVER) (void)rl_loop_add_observer(r->loop, item, DM);
        else (void)rl_loop_add_timer(r->loop, item, DM);
        atomic_store(&r->done, round);
    }
}

static atomic_int race_retains, race_releases;
static const void *race_retain(const void *info) {
    atomic_fetch_add(&race_retains, 1);
    return info;
}
static void race_release(const void *info) {
    (void)info;
    atomic_fetch_add(&race_releases, 1);
}

/* own: the adder adds to its own loop, this thread invalidates from outside it; else the adder
 * adds to this thread's loop from outside it. */
static void add_race_case(int kind, bool own) {
    atomic_store(&race_retains, 0);
    atomic_store(&race_releases, 0);
    rl_context_t held = {NULL, race_retain, race_release};
    add_race_t r = {.kind = kind, .own = own, .loop = own ? NULL : rl_loop_get_current()};
    pthread_t adder;
    RLT_CHECK_EQ(pthread_create(&adder, NULL, add_race_adder, &r), 0);
    while (!atomic_load(&r.loop)) sched_yield();
    int left = 0, rounds = 0;
    double until = rl_time_now() + 2.0;
    for (int round = 1; round <= 100000 && rl_time_now() < until; round++, rounds++) {
        void *item = kind == RACE_OBSERVER ? (void *)rl_observer_create(RL_ENTRY, true, 0, race_observed, NULL)
                     : kind == RACE_HELD_TIMER ? (void *)rl_timer_create_held(1e12, 0, 0, race_fired, &held)
                                               : (void *)rl_timer_create(1e12, 0, 0, race_fired, NULL);
        RLT_CHECK(item != NULL);
        atomic_store(&r.item, item);
        atomic_store(&r.go, round);
        for (int spin = round & 63; spin > 0; spin--) atomic_signal_fence(memory_order_seq_cst); /* vary the overlap */
        if (kind == RACE_OBSERVER) rl_observer_invalidate(item);
        else rl_timer_invalidate(item);
        while (atomic_load(&r.done) < round) {}
        bool in = kind == RACE_OBSERVER ? rl_loop_contains_observer(r.loop, item, DM)
                                        : rl_loop_contains_timer(r.loop, item, DM);
        if (in) left++;
        rl_release(item);
    }
    atomic_store(&r.go, -1);
    pthread_join(adder, NULL);
    RLT_CHECK(rounds > 0);
    RLT_CHECK_EQ(left, 0);
    /* every retain of the held context released, once the loop lets nothing stay */
    RLT_CHECK_EQ(atomic_load(&race_retains), atomic_load(&race_releases));
}

RLT_TEST(threads_timer_invalidated_while_another_thread_adds_it_stays_out) { add_race_case(RACE_TIMER, false); }
RLT_TEST(threads_held_timer_invalidated_while_another_thread_adds_it_stays_out) { add_race_case(RACE_HELD_TIMER, false); }
RLT_TEST(threads_observer_invalidated_while_another_thread_adds_it_stays_out) { add_race_case(RACE_OBSERVER, false); }
/* The same with the adder on the loop's own thread: a timer there takes the short add (a claim
 * and one heap insertion, timer.c), which must read VALID again after its claim as well. */
RLT_TEST(threads_timer_invalidated_while_its_loop_adds_it_stays_out) { add_race_case(RACE_TIMER, true); }
RLT_TEST(threads_held_timer_invalidated_while_its_loop_adds_it_stays_out) { add_race_case(RACE_HELD_TIMER, true); }
RLT_TEST(threads_observer_invalidated_while_its_loop_adds_it_stays_out) { add_race_case(RACE_OBSERVER, true); }
