/*
 * t_errors.c - bad input for every public function, and that a rejected call loses no work:
 * the item stays where it was, its reference count stays balanced (the context's release runs
 * exactly once, after the last rl_release), queued work still runs.
 */
#include <crunloop.h>
#include <rlt.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#define EM "errors-mode"

/* ---- counting contexts ---------------------------------------------------------------------- */

typedef struct {
    atomic_int retains, releases;
    atomic_int schedules, cancels, performs, fires;
} counts_t;

static const void *c_retain(const void *info) {
    atomic_fetch_add(&((counts_t *)info)->retains, 1);
    return info;
}
static void c_release(const void *info) { atomic_fetch_add(&((counts_t *)info)->releases, 1); }
static void c_schedule(void *info, rl_loop_t *loop, const char *mode) {
    (void)loop; (void)mode;
    atomic_fetch_add(&((counts_t *)info)->schedules, 1);
}
static void c_cancel(void *info, rl_loop_t *loop, const char *mode) {
    (void)loop; (void)mode;
    atomic_fetch_add(&((counts_t *)info)->cancels, 1);
}
static void c_perform(void *info) { atomic_fetch_add(&((counts_t *)info)->performs, 1); }
static void c_timer(rl_timer_t *t, void *info) { (void)t; atomic_fetch_add(&((counts_t *)info)->fires, 1); }
static void c_observer(rl_observer_t *o, unsigned activity, void *info) {
    (void)o; (void)activity;
    atomic_fetch_add(&((counts_t *)info)->fires, 1);
}
static void c_fd(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s; (void)fd; (void)events;
    atomic_fetch_add(&((counts_t *)info)->fires, 1);
}
static void c_block(void *arg) { atomic_fetch_add(&((counts_t *)arg)->performs, 1); }

static void counts_init(counts_t *c) {
    atomic_init(&c->retains, 0); atomic_init(&c->releases, 0);
    atomic_init(&c->schedules, 0); atomic_init(&c->cancels, 0);
    atomic_init(&c->performs, 0); atomic_init(&c->fires, 0);
}
static rl_context_t ctx_of(counts_t *c) {
    rl_context_t x = { c, c_retain, c_release };
    return x;
}
static rl_source_context_t sctx_of(counts_t *c) {
    rl_source_context_t x = { c, c_retain, c_release, c_schedule, c_cancel, c_perform };
    return x;
}
#define GET(c, f) atomic_load(&(c).f)

/* A thread that owns a second loop and parks until told to exit. */
typedef struct {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rl_loop_t *loop;
    bool ready, quit;
} parked_t;

static void *parked_main(void *arg) {
    parked_t *p = arg;
    rl_loop_t *l = rl_retain(rl_loop_get_current());
    pthread_mutex_lock(&p->mu);
    p->loop = l;
    p->ready = true;
    pthread_cond_broadcast(&p->cv);
    while (!p->quit) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}
static int parked_start(parked_t *p) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->th, NULL, parked_main, p) != 0) return -1;
    pthread_mutex_lock(&p->mu);
    while (!p->ready) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return 0;
}
/* Ends the thread (its loop is torn down) and drops our reference to the loop. */
static void parked_stop(parked_t *p) {
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    rl_release(p->loop);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

/* ---- NULL handles --------------------------------------------------------------------------- */

RLT_TEST(errors_null_handles_int_functions) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t c; counts_init(&c);
    rl_source_context_t sc = sctx_of(&c);
    rl_context_t cx = ctx_of(&c);
    rl_source_t *src = rl_source_create(0, &sc);
    rl_timer_t *tm = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, &cx);
    rl_observer_t *ob = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, c_observer, &cx);
    RLT_CHECK(loop && src && tm && ob);
    RLT_CHECK_EQ(GET(c, retains), 3);

    RLT_CHECK_EQ(rl_loop_add_source(NULL, src, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, NULL, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_remove_source(NULL, src, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, NULL, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_timer(NULL, tm, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, NULL, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_remove_timer(NULL, tm, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, NULL, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_observer(NULL, ob, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, NULL, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_remove_observer(NULL, ob, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, NULL, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(NULL, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_perform(NULL, EM, c_block, &c), -EINVAL);
    RLT_CHECK_EQ(rl_loop_perform(loop, EM, NULL, &c), -EINVAL);
    rl_loop_stats_t st;
    RLT_CHECK_EQ(rl_loop_get_stats(NULL, &st), -EINVAL);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, NULL), -EINVAL);
    RLT_CHECK_EQ(rl_source_set_fd_events(NULL, RL_FD_READABLE), -EINVAL);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(NULL, rl_time_now() + 1), -EINVAL);
    RLT_CHECK_EQ(rl_timer_set_tolerance(NULL, 0.1), -EINVAL);
    RLT_CHECK_EQ(rl_run_in_mode(NULL, 0, false), -EINVAL);

    /* None of it touched the items or the loop. */
    RLT_CHECK_EQ(GET(c, schedules), 0);
    RLT_CHECK(!rl_loop_contains_source(loop, src, EM));
    RLT_CHECK(!rl_loop_contains_timer(loop, tm, EM));
    RLT_CHECK(!rl_loop_contains_observer(loop, ob, EM));
    RLT_CHECK(rl_source_is_valid(src) && rl_timer_is_valid(tm) && rl_observer_is_valid(ob));
    RLT_CHECK_EQ(rl_run_in_mode(EM, 0, false), RL_RUN_FINISHED); /* the block was not queued */
    RLT_CHECK_EQ(GET(c, performs), 0);
    RLT_CHECK_EQ(GET(c, releases), 0);
    rl_release(src);
    rl_release(tm);
    rl_release(ob);
    RLT_CHECK_EQ(GET(c, releases), 3);
}

RLT_TEST(errors_null_handles_queries) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t c; counts_init(&c);
    rl_source_context_t sc = sctx_of(&c);
    rl_context_t cx = ctx_of(&c);
    rl_source_t *src = rl_source_create(0, &sc);
    rl_timer_t *tm = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, &cx);
    rl_observer_t *ob = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, c_observer, &cx);
    RLT_CHECK(src && tm && ob);

    RLT_CHECK(!rl_loop_is_current(NULL));
    RLT_CHECK(!rl_loop_is_main(NULL));
    RLT_CHECK(!rl_loop_is_waiting(NULL));
    RLT_CHECK(rl_loop_copy_current_mode(NULL) == NULL);
    RLT_CHECK(rl_loop_copy_description(NULL) == NULL);
    size_t count = 77;
    errno = 0;
    RLT_CHECK(rl_loop_copy_all_modes(NULL, &count) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(NULL, RL_DEFAULT_MODE) == 0);

    RLT_CHECK(!rl_loop_contains_source(NULL, src, EM));
    RLT_CHECK(!rl_loop_contains_source(loop, NULL, EM));
    RLT_CHECK(!rl_loop_contains_timer(NULL, tm, EM));
    RLT_CHECK(!rl_loop_contains_timer(loop, NULL, EM));
    RLT_CHECK(!rl_loop_contains_observer(NULL, ob, EM));
    RLT_CHECK(!rl_loop_contains_observer(loop, NULL, EM));

    /* The header: queries given NULL return 0; -1 ("no fd") is tolerated for the fd. */
    int fd = rl_source_get_fd(NULL);
    RLT_CHECK(fd == 0 || fd == -1);
    RLT_CHECK_EQ(rl_source_get_fd_events(NULL), 0);
    RLT_CHECK(!rl_source_is_signalled(NULL));
    RLT_CHECK(!rl_source_is_valid(NULL));
    RLT_CHECK_EQ(rl_source_get_order(NULL), 0);

    RLT_CHECK(!rl_timer_is_valid(NULL));
    RLT_CHECK(rl_timer_get_next_fire_date(NULL) == 0);
    RLT_CHECK(rl_timer_get_interval(NULL) == 0);
    RLT_CHECK(!rl_timer_does_repeat(NULL));
    RLT_CHECK(rl_timer_get_tolerance(NULL) == 0);
    RLT_CHECK_EQ(rl_timer_get_order(NULL), 0);

    RLT_CHECK(!rl_observer_is_valid(NULL));
    RLT_CHECK_EQ(rl_observer_get_activities(NULL), 0);
    RLT_CHECK(!rl_observer_does_repeat(NULL));
    RLT_CHECK_EQ(rl_observer_get_order(NULL), 0);

    rl_release(src);
    rl_release(tm);
    rl_release(ob);
    RLT_CHECK_EQ(GET(c, releases), 3);
}

RLT_TEST(errors_null_handles_void_functions) {
    /* None of these may crash. */
    rl_loop_stop(NULL);
    rl_loop_wakeup(NULL);
    rl_source_signal(NULL);
    rl_source_invalidate(NULL);
    rl_timer_invalidate(NULL);
    rl_observer_invalidate(NULL);
    rl_release(NULL);
    RLT_CHECK(rl_retain(NULL) == NULL);

    /* rl_retain returns its argument and needs a matching rl_release. */
    static counts_t c; counts_init(&c);
    rl_context_t cx = ctx_of(&c);
    rl_timer_t *tm = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, &cx);
    RLT_CHECK(tm != NULL);
    RLT_CHECK(rl_retain(tm) == tm);
    rl_release(tm);
    RLT_CHECK_EQ(GET(c, releases), 0);
    RLT_CHECK(rl_timer_is_valid(tm));
    rl_release(tm);
    RLT_CHECK_EQ(GET(c, releases), 1);
    RLT_CHECK_EQ(GET(c, retains), 1);
}

/* ---- mode names ----------------------------------------------------------------------------- */

RLT_TEST(errors_null_and_empty_mode_names) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t c; counts_init(&c);
    rl_source_context_t sc = sctx_of(&c);
    rl_context_t cx = ctx_of(&c);
    rl_source_t *src = rl_source_create(0, &sc);
    rl_timer_t *tm = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, &cx);
    rl_observer_t *ob = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, c_observer, &cx);
    RLT_CHECK(src && tm && ob);

    const char *bad[2] = { NULL, "" };
    for (int i = 0; i < 2; i++) {
        const char *m = bad[i];
        RLT_CHECK_EQ(rl_loop_add_source(loop, src, m), -EINVAL);
        RLT_CHECK_EQ(rl_loop_remove_source(loop, src, m), -EINVAL);
        RLT_CHECK(!rl_loop_contains_source(loop, src, m));
        RLT_CHECK_EQ(rl_loop_add_timer(loop, tm, m), -EINVAL);
        RLT_CHECK_EQ(rl_loop_remove_timer(loop, tm, m), -EINVAL);
        RLT_CHECK(!rl_loop_contains_timer(loop, tm, m));
        RLT_CHECK_EQ(rl_loop_add_observer(loop, ob, m), -EINVAL);
        RLT_CHECK_EQ(rl_loop_remove_observer(loop, ob, m), -EINVAL);
        RLT_CHECK(!rl_loop_contains_observer(loop, ob, m));
        RLT_CHECK_EQ(rl_loop_add_common_mode(loop, m), -EINVAL);
        RLT_CHECK_EQ(rl_loop_perform(loop, m, c_block, &c), -EINVAL);
        RLT_CHECK_EQ(rl_run_in_mode(m, 0, false), -EINVAL);
        RLT_CHECK_EQ(rl_run_in_mode(m, 0.5, false), -EINVAL);
        RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, m) == 0);
    }
    RLT_CHECK_EQ(GET(c, schedules), 0);
    RLT_CHECK_EQ(GET(c, cancels), 0);
    RLT_CHECK_EQ(GET(c, performs), 0);
    RLT_CHECK_EQ(GET(c, fires), 0);
    RLT_CHECK_EQ(GET(c, releases), 0);
    rl_release(src);
    rl_release(tm);
    rl_release(ob);
    RLT_CHECK_EQ(GET(c, releases), 3);
}

RLT_TEST(errors_common_modes_where_a_real_mode_is_needed) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t c; counts_init(&c);
    rl_context_t cx = ctx_of(&c);
    double when = rl_time_now() + 100;
    rl_timer_t *tm = rl_timer_create(when, 0, 0, c_timer, &cx);
    rl_observer_t *ob = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, c_observer, &cx);
    RLT_CHECK(tm && ob);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, tm, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, ob, RL_COMMON_MODES), 0);

    RLT_CHECK_EQ(rl_run_in_mode(RL_COMMON_MODES, 0, false), -EINVAL);
    RLT_CHECK_EQ(rl_run_in_mode(RL_COMMON_MODES, 0.5, false), -EINVAL);
    RLT_CHECK_EQ(GET(c, fires), 0); /* no RL_ENTRY for a rejected run */
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, RL_COMMON_MODES) == 0);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, RL_DEFAULT_MODE) == when);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, RL_COMMON_MODES), -EINVAL);

    /* Still where they were. */
    RLT_CHECK(rl_loop_contains_timer(loop, tm, RL_DEFAULT_MODE));
    RLT_CHECK(rl_loop_contains_observer(loop, ob, RL_DEFAULT_MODE));
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, tm, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, ob, RL_COMMON_MODES), 0);
    RLT_CHECK(!rl_loop_contains_timer(loop, tm, RL_DEFAULT_MODE));
    RLT_CHECK_EQ(GET(c, releases), 0);
    rl_release(tm);
    rl_release(ob);
    RLT_CHECK_EQ(GET(c, releases), 2);
}

/* ---- times ---------------------------------------------------------------------------------- */

RLT_TEST(errors_bad_times) {
    static counts_t c; counts_init(&c);
    rl_context_t cx = ctx_of(&c);
    double now = rl_time_now();

    errno = 0;
    RLT_CHECK(rl_timer_create(NAN, 0, 0, c_timer, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_timer_create(-1.0, 0, 0, c_timer, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_timer_create(now + 1, NAN, 0, c_timer, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_timer_create(now + 1, -0.5, 0, c_timer, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_timer_create(now + 1, 0, 0, NULL, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    /* A failed creation keeps the context balanced. */
    RLT_CHECK_EQ(GET(c, retains), GET(c, releases));

    int base_retains = GET(c, retains), base_releases = GET(c, releases);
    rl_timer_t *tm = rl_timer_create(now + 50, 0.25, 0, c_timer, &cx);
    RLT_CHECK(tm != NULL);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(tm, NAN), -EINVAL);
    RLT_CHECK(rl_timer_get_next_fire_date(tm) == now + 50);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(tm, -3.0), -EINVAL);
    RLT_CHECK(rl_timer_get_next_fire_date(tm) == now + 50);
    RLT_CHECK_EQ(rl_timer_set_tolerance(tm, 0.125), 0);
    RLT_CHECK_EQ(rl_timer_set_tolerance(tm, NAN), -EINVAL);
    RLT_CHECK(rl_timer_get_tolerance(tm) == 0.125);
    RLT_CHECK_EQ(rl_timer_set_tolerance(tm, -0.5), -EINVAL);
    RLT_CHECK(rl_timer_get_tolerance(tm) == 0.125);
    RLT_CHECK(rl_timer_get_interval(tm) == 0.25);
    RLT_CHECK(rl_timer_is_valid(tm));
    rl_release(tm);
    RLT_CHECK_EQ(GET(c, retains) - base_retains, 1);
    RLT_CHECK_EQ(GET(c, releases) - base_releases, 1);
}

RLT_TEST(errors_run_seconds_nan_and_negative) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t oc; counts_init(&oc);
    static counts_t tc; counts_init(&tc);
    rl_context_t ocx = ctx_of(&oc), tcx = ctx_of(&tc);

    /* NaN is an error, empty mode or not. */
    RLT_CHECK_EQ(rl_run_in_mode("errors-empty", NAN, false), -EINVAL);
    rl_timer_t *tm = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, &tcx);
    rl_observer_t *ob = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, c_observer, &ocx);
    RLT_CHECK(tm && ob);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, tm, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, ob, EM), 0);
    RLT_CHECK_EQ(rl_run_in_mode(EM, NAN, false), -EINVAL);
    RLT_CHECK_EQ(rl_run_in_mode(EM, NAN, true), -EINVAL);
    RLT_CHECK_EQ(GET(oc, fires), 0);

    /* Negative seconds are a poll, not an error. */
    RLT_CHECK_EQ(rl_run_in_mode("errors-empty", -1.0, false), RL_RUN_FINISHED);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(EM, -1.0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode(EM, -1e300, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(rl_time_now() - t0 < 1.0);
    RLT_CHECK(GET(oc, fires) >= 4); /* at least ENTRY and EXIT of each run */
    RLT_CHECK_EQ(GET(tc, fires), 0);

    RLT_CHECK_EQ(rl_loop_remove_timer(loop, tm, EM), 0);
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, ob, EM), 0);
    rl_release(tm);
    rl_release(ob);
    RLT_CHECK_EQ(GET(tc, releases), 1);
    RLT_CHECK_EQ(GET(oc, releases), 1);
}

/* ---- creation ------------------------------------------------------------------------------- */

RLT_TEST(errors_fd_source_create) {
    static counts_t c; counts_init(&c);
    rl_context_t cx = ctx_of(&c);
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    int closed;
    {
        int q[2];
        RLT_CHECK(pipe(q) == 0);
        close(q[1]);
        close(q[0]);
        closed = q[0];
    }
    RLT_CHECK(fcntl(closed, F_GETFD) == -1);

    errno = 0;
    RLT_CHECK(rl_source_create_fd(closed, RL_FD_READABLE, 0, c_fd, &cx) == NULL);
    RLT_CHECK_EQ(errno, EBADF);
    errno = 0;
    RLT_CHECK(rl_source_create_fd(-1, RL_FD_READABLE, 0, c_fd, &cx) == NULL);
    RLT_CHECK_EQ(errno, EBADF);
    errno = 0;
    RLT_CHECK(rl_source_create_fd(1 << 24, RL_FD_READABLE, 0, c_fd, &cx) == NULL);
    RLT_CHECK_EQ(errno, EBADF);
    errno = 0;
    RLT_CHECK(rl_source_create_fd(p[0], 1u << 3, 0, c_fd, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_source_create_fd(p[0], RL_FD_READABLE | 0x80000000u, 0, c_fd, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_source_create_fd(p[0], RL_FD_READABLE, 0, NULL, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    RLT_CHECK_EQ(GET(c, retains), GET(c, releases));

    rl_source_t *s = rl_source_create_fd(p[0], RL_FD_READABLE, 3, c_fd, &cx);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_source_get_fd(s), p[0]);
    RLT_CHECK_EQ(rl_source_get_fd_events(s), RL_FD_READABLE);
    RLT_CHECK_EQ(rl_source_set_fd_events(s, 1u << 4), -EINVAL);
    RLT_CHECK_EQ(rl_source_set_fd_events(s, RL_FD_WRITABLE | 0x100u), -EINVAL);
    RLT_CHECK_EQ(rl_source_get_fd_events(s), RL_FD_READABLE);
    RLT_CHECK_EQ(rl_source_get_order(s), 3);

    /* A version-0 source has no fd events to set. */
    rl_source_context_t sc = sctx_of(&c);
    rl_source_t *v0 = rl_source_create(0, &sc);
    RLT_CHECK(v0 != NULL);
    RLT_CHECK_EQ(rl_source_get_fd(v0), -1);
    RLT_CHECK_EQ(rl_source_get_fd_events(v0), 0);
    RLT_CHECK_EQ(rl_source_set_fd_events(v0, RL_FD_READABLE), -EINVAL);
    RLT_CHECK_EQ(rl_source_get_fd_events(v0), 0);

    int before = GET(c, releases);
    rl_release(s);
    rl_release(v0);
    RLT_CHECK_EQ(GET(c, releases) - before, 2);
    RLT_CHECK_EQ(GET(c, retains), GET(c, releases));
    close(p[0]);
    close(p[1]);
}

RLT_TEST(errors_observer_and_callback_create) {
    static counts_t c; counts_init(&c);
    rl_context_t cx = ctx_of(&c);
    errno = 0;
    RLT_CHECK(rl_observer_create(0, true, 0, c_observer, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_observer_create(RL_ENTRY, true, 0, NULL, &cx) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_observer_create(0x10000000u, false, 0, c_observer, &cx) == NULL); /* unknown bit */
    RLT_CHECK_EQ(errno, EINVAL);
    RLT_CHECK_EQ(GET(c, retains), GET(c, releases));

    rl_observer_t *ob = rl_observer_create(RL_BEFORE_WAITING | RL_EXIT, false, -4, c_observer, &cx);
    RLT_CHECK(ob != NULL);
    RLT_CHECK_EQ(rl_observer_get_activities(ob), RL_BEFORE_WAITING | RL_EXIT);
    RLT_CHECK(!rl_observer_does_repeat(ob));
    RLT_CHECK_EQ(rl_observer_get_order(ob), -4);
    rl_release(ob);
    RLT_CHECK_EQ(GET(c, retains), GET(c, releases));
}

/* ---- added twice, removed when absent ------------------------------------------------------- */

RLT_TEST(errors_source_added_twice) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t c; counts_init(&c);
    rl_source_context_t sc = sctx_of(&c);
    rl_source_t *s = rl_source_create(0, &sc);
    RLT_CHECK(s != NULL);

    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, EM), -ENOENT);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, EM), 0);
    RLT_CHECK_EQ(GET(c, schedules), 1);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, EM), -EEXIST);
    RLT_CHECK_EQ(GET(c, schedules), 1);
    RLT_CHECK(rl_loop_contains_source(loop, s, EM));
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "errors-other-mode"), -ENOENT);

    /* Present once: one signal, one perform. */
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(EM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(GET(c, performs), 1);

    /* Present once: one remove takes it out. */
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, EM), 0);
    RLT_CHECK(!rl_loop_contains_source(loop, s, EM));
    RLT_CHECK_EQ(GET(c, cancels), 1);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, EM), -ENOENT);
    RLT_CHECK_EQ(GET(c, cancels), 1);
    RLT_CHECK_EQ(GET(c, releases), 0);
    rl_release(s);
    RLT_CHECK_EQ(GET(c, releases), 1);

    /* The same through RL_COMMON_MODES. */
    static counts_t d; counts_init(&d);
    rl_source_context_t dc = sctx_of(&d);
    rl_source_t *s2 = rl_source_create(0, &dc);
    RLT_CHECK(s2 != NULL);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s2, RL_COMMON_MODES), -ENOENT);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s2, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s2, RL_COMMON_MODES), -EEXIST);
    RLT_CHECK(rl_loop_contains_source(loop, s2, RL_DEFAULT_MODE));
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s2, RL_COMMON_MODES), 0);
    RLT_CHECK(!rl_loop_contains_source(loop, s2, RL_DEFAULT_MODE));
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s2, RL_COMMON_MODES), -ENOENT);
    RLT_CHECK_EQ(GET(d, schedules), GET(d, cancels));
    rl_release(s2);
    RLT_CHECK_EQ(GET(d, releases), 1);
}

RLT_TEST(errors_timer_added_twice) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t c; counts_init(&c);
    rl_context_t cx = ctx_of(&c);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, &cx);
    RLT_CHECK(t != NULL);

    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, EM), -ENOENT);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, EM), -EEXIST);
    RLT_CHECK(rl_loop_contains_timer(loop, t, EM));
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "errors-other-mode"), -ENOENT);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, EM), 0);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, EM));
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, EM), -ENOENT);
    RLT_CHECK(rl_timer_is_valid(t));
    RLT_CHECK_EQ(GET(c, releases), 0);
    rl_release(t);
    RLT_CHECK_EQ(GET(c, releases), 1);

    /* Added twice, it still fires once. */
    static counts_t d; counts_init(&d);
    rl_context_t dx = ctx_of(&d);
    rl_timer_t *t2 = rl_timer_create(rl_time_now() + 0.01, 0, 0, c_timer, &dx);
    RLT_CHECK(t2 != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t2, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t2, EM), -EEXIST);
    rl_release(t2);
    RLT_CHECK_EQ(rl_run_in_mode(EM, 2.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(GET(d, fires), 1);
    RLT_CHECK_EQ(GET(d, releases), 1); /* one-shot: invalidated after firing, loop let go */
}

RLT_TEST(errors_observer_added_twice) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t c; counts_init(&c);
    rl_context_t cx = ctx_of(&c);
    rl_observer_t *o = rl_observer_create(RL_ENTRY, true, 0, c_observer, &cx);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, EM), -ENOENT);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, EM), -EEXIST);
    RLT_CHECK(rl_loop_contains_observer(loop, o, EM));

    /* Called once per RL_ENTRY, not twice. The mode needs a timer to be non-empty. */
    static counts_t tc; counts_init(&tc);
    rl_context_t tcx = ctx_of(&tc);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, &tcx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, EM), 0);
    RLT_CHECK_EQ(rl_run_in_mode(EM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(GET(c, fires), 1);

    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, "errors-other-mode"), -ENOENT);
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, EM), 0);
    RLT_CHECK(!rl_loop_contains_observer(loop, o, EM));
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, EM), -ENOENT);
    RLT_CHECK(rl_observer_is_valid(o));
    RLT_CHECK_EQ(GET(c, releases), 0);
    rl_release(o);
    RLT_CHECK_EQ(GET(c, releases), 1);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, EM), 0);
    rl_release(t);
    RLT_CHECK_EQ(GET(tc, releases), 1);
}

/* ---- another loop: -EBUSY ------------------------------------------------------------------- */

RLT_TEST(errors_timer_and_observer_in_another_loop) {
    rl_loop_t *loop = rl_loop_get_current();
    parked_t other;
    RLT_CHECK(parked_start(&other) == 0);
    RLT_CHECK(other.loop != NULL && other.loop != loop);

    static counts_t tc; counts_init(&tc);
    static counts_t oc; counts_init(&oc);
    static counts_t sc_; counts_init(&sc_);
    rl_context_t tcx = ctx_of(&tc), ocx = ctx_of(&oc);
    rl_source_context_t scx = sctx_of(&sc_);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.02, 0, 0, c_timer, &tcx);
    rl_observer_t *o = rl_observer_create(RL_ENTRY, true, 0, c_observer, &ocx);
    rl_source_t *s = rl_source_create(0, &scx);
    RLT_CHECK(t && o && s);

    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(other.loop, t, EM), -EBUSY);
    RLT_CHECK_EQ(rl_loop_add_timer(other.loop, t, RL_DEFAULT_MODE), -EBUSY);
    RLT_CHECK_EQ(rl_loop_add_observer(other.loop, o, EM), -EBUSY);
    RLT_CHECK(!rl_loop_contains_timer(other.loop, t, EM));
    RLT_CHECK(!rl_loop_contains_observer(other.loop, o, EM));
    /* Removing from the other loop finds nothing, also by the names of modes both loops have
     * (16 of them, made in the same order, so some share their place in each loop's list), and
     * the owner keeps it. */
    rl_timer_t *t2 = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, NULL);
    rl_timer_t *k2 = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, NULL);
    RLT_CHECK(t2 && k2);
    char names[16][16];
    for (int i = 0; i < 16; i++) {
        snprintf(names[i], sizeof names[i], "errors.x%d", i);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t2, names[i]), 0);
        RLT_CHECK_EQ(rl_loop_add_timer(other.loop, k2, names[i]), 0);
    }
    for (int i = 0; i < 16; i++) {
        RLT_CHECK_EQ(rl_loop_remove_timer(other.loop, t2, names[i]), -ENOENT);
        RLT_CHECK(rl_loop_contains_timer(loop, t2, names[i]));
    }
    RLT_CHECK_EQ(rl_loop_remove_timer(other.loop, t, EM), -ENOENT);
    rl_timer_invalidate(t2);
    rl_timer_invalidate(k2);
    rl_release(t2);
    rl_release(k2);
    /* A source, unlike them, may be in two loops. */
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_source(other.loop, s, EM), 0);
    RLT_CHECK_EQ(GET(sc_, schedules), 2);

    /* The failed adds lost nothing: both still work in the first loop. */
    RLT_CHECK(rl_loop_contains_timer(loop, t, EM));
    RLT_CHECK(rl_loop_contains_observer(loop, o, EM));
    RLT_CHECK_EQ(rl_run_in_mode(EM, 0.3, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(GET(tc, fires), 1);
    RLT_CHECK(GET(oc, fires) >= 1);
    RLT_CHECK(!rl_timer_is_valid(t)); /* one-shot, fired */
    RLT_CHECK_EQ(rl_loop_add_timer(other.loop, t, EM), -EINVAL);

    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, EM), 0);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, EM), 0);
    RLT_CHECK_EQ(GET(sc_, cancels), 1);
    parked_stop(&other); /* its teardown removes s from the other loop */
    RLT_CHECK_EQ(GET(sc_, cancels), 2);
    RLT_CHECK_EQ(GET(tc, releases) + GET(oc, releases) + GET(sc_, releases), 0);
    rl_release(t);
    rl_release(o);
    rl_release(s);
    RLT_CHECK_EQ(GET(tc, releases), 1);
    RLT_CHECK_EQ(GET(oc, releases), 1);
    RLT_CHECK_EQ(GET(sc_, releases), 1);
}

/* ---- invalidated items ---------------------------------------------------------------------- */

RLT_TEST(errors_invalidated_items) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t sc_; counts_init(&sc_);
    static counts_t fc; counts_init(&fc);
    static counts_t tc; counts_init(&tc);
    static counts_t oc; counts_init(&oc);
    rl_source_context_t scx = sctx_of(&sc_);
    rl_context_t fcx = ctx_of(&fc), tcx = ctx_of(&tc), ocx = ctx_of(&oc);
    int p[2];
    RLT_CHECK(pipe(p) == 0);

    rl_source_t *s = rl_source_create(0, &scx);
    rl_source_t *f = rl_source_create_fd(p[1], RL_FD_WRITABLE, 0, c_fd, &fcx);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 100, 1.0, 0, c_timer, &tcx);
    rl_observer_t *o = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, c_observer, &ocx);
    RLT_CHECK(s && f && t && o);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, f, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, EM), 0);

    rl_source_invalidate(s);
    rl_source_invalidate(f);
    rl_timer_invalidate(t);
    rl_observer_invalidate(o);
    RLT_CHECK_EQ(GET(sc_, cancels), 1);
    RLT_CHECK(!rl_source_is_valid(s) && !rl_source_is_valid(f));
    RLT_CHECK(!rl_timer_is_valid(t) && !rl_observer_is_valid(o));
    RLT_CHECK(!rl_loop_contains_source(loop, s, EM));
    RLT_CHECK(!rl_loop_contains_source(loop, f, EM));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, EM));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, EM));
    /* The loop let go of all four; we hold the last references. */
    RLT_CHECK_EQ(GET(sc_, releases) + GET(fc, releases) + GET(tc, releases) + GET(oc, releases), 0);

    RLT_CHECK_EQ(rl_loop_add_source(loop, s, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, f, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, EM), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, RL_COMMON_MODES), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, RL_COMMON_MODES), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, RL_COMMON_MODES), -EINVAL);
    RLT_CHECK_EQ(GET(sc_, schedules), 1);
    RLT_CHECK(!rl_loop_contains_source(loop, s, RL_DEFAULT_MODE));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, RL_DEFAULT_MODE));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, RL_DEFAULT_MODE));
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t, rl_time_now() + 1), -EINVAL);
    RLT_CHECK_EQ(rl_source_set_fd_events(f, RL_FD_READABLE), -EINVAL);
    int r = rl_loop_remove_source(loop, s, EM);
    RLT_CHECK(r == -ENOENT || r == -EINVAL);
    r = rl_loop_remove_timer(loop, t, EM);
    RLT_CHECK(r == -ENOENT || r == -EINVAL);
    r = rl_loop_remove_observer(loop, o, EM);
    RLT_CHECK(r == -ENOENT || r == -EINVAL);

    /* Signalling or invalidating again does nothing. */
    rl_source_signal(s);
    rl_source_invalidate(s);
    rl_source_invalidate(f);
    rl_timer_invalidate(t);
    rl_observer_invalidate(o);
    RLT_CHECK_EQ(GET(sc_, cancels), 1);
    RLT_CHECK_EQ(rl_run_in_mode(EM, 0.2, false), RL_RUN_FINISHED); /* the mode is empty now */
    RLT_CHECK_EQ(GET(sc_, performs), 0);
    RLT_CHECK_EQ(GET(fc, fires) + GET(tc, fires) + GET(oc, fires), 0);

    RLT_CHECK_EQ(GET(sc_, releases) + GET(fc, releases) + GET(tc, releases) + GET(oc, releases), 0);
    rl_release(s);
    rl_release(f);
    rl_release(t);
    rl_release(o);
    RLT_CHECK_EQ(GET(sc_, releases), 1);
    RLT_CHECK_EQ(GET(fc, releases), 1);
    RLT_CHECK_EQ(GET(tc, releases), 1);
    RLT_CHECK_EQ(GET(oc, releases), 1);
    close(p[0]);
    close(p[1]);
}

/* ---- copy functions ------------------------------------------------------------------------- */

typedef struct {
    char *mode_in_callout;
    int nested_nan;
    char *mode_after_nested;
} mode_probe_t;

static void probe_timer(rl_timer_t *t, void *info) {
    (void)t;
    mode_probe_t *p = info;
    rl_loop_t *loop = rl_loop_get_current();
    p->mode_in_callout = rl_loop_copy_current_mode(loop);
    p->nested_nan = rl_run_in_mode(EM, NAN, false);
    p->mode_after_nested = rl_loop_copy_current_mode(loop);
}

RLT_TEST(errors_copy_current_mode_when_not_running) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(rl_loop_copy_current_mode(loop) == NULL);
    mode_probe_t probe = { NULL, 0, NULL };
    rl_context_t cx = { &probe, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now(), 0, 0, probe_timer, &cx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, EM), 0);
    rl_release(t);
    RLT_CHECK_EQ(rl_run_in_mode(EM, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK(probe.mode_in_callout != NULL);
    RLT_CHECK(strcmp(probe.mode_in_callout, EM) == 0);
    RLT_CHECK_EQ(probe.nested_nan, -EINVAL);
    RLT_CHECK(probe.mode_after_nested != NULL);
    RLT_CHECK(strcmp(probe.mode_after_nested, EM) == 0);
    free(probe.mode_in_callout);
    free(probe.mode_after_nested);
    RLT_CHECK(rl_loop_copy_current_mode(loop) == NULL);
}

RLT_TEST(errors_copy_all_modes_bad_arguments) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t c; counts_init(&c);
    rl_context_t cx = ctx_of(&c);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 100, 0, 0, c_timer, &cx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, EM), 0);

    errno = 0;
    RLT_CHECK(rl_loop_copy_all_modes(loop, NULL) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);

    size_t n = 0;
    char **names = rl_loop_copy_all_modes(loop, &n);
    RLT_CHECK(names != NULL);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        if (names[i] && strcmp(names[i], EM) == 0) found = true;
        free(names[i]);
    }
    free(names);
    RLT_CHECK(found);

    char *d = rl_loop_copy_description(loop);
    RLT_CHECK(d != NULL);
    free(d);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, EM), 0);
    rl_release(t);
    RLT_CHECK_EQ(GET(c, releases), 1);
}

/* ---- errors lose no work -------------------------------------------------------------------- */

RLT_TEST(errors_failed_calls_lose_no_work) {
    rl_loop_t *loop = rl_loop_get_current();
    static counts_t sc_; counts_init(&sc_);
    static counts_t bc; counts_init(&bc);
    static counts_t oc; counts_init(&oc);
    rl_source_context_t scx = sctx_of(&sc_);
    rl_context_t ocx = ctx_of(&oc);
    rl_source_t *s = rl_source_create(0, &scx);
    rl_observer_t *o = rl_observer_create(RL_ENTRY, true, 0, c_observer, &ocx);
    RLT_CHECK(s && o);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, EM), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, EM), 0);
    rl_release(s); /* the loop now holds the only references */
    rl_release(o);

    /* Rejected calls of every kind while the items sit in EM. */
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, EM), -EEXIST);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, NULL), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, ""), -EINVAL);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "errors-elsewhere"), -ENOENT);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, EM), -EEXIST);
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, "errors-elsewhere"), -ENOENT);
    RLT_CHECK_EQ(rl_loop_perform(loop, NULL, c_block, &bc), -EINVAL);

    /* Queued work survives a rejected run. */
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_loop_perform(loop, EM, c_block, &bc), 0);
    RLT_CHECK_EQ(rl_run_in_mode(EM, NAN, false), -EINVAL);
    RLT_CHECK_EQ(rl_run_in_mode(RL_COMMON_MODES, 0, false), -EINVAL);
    RLT_CHECK(rl_source_is_signalled(s));
    RLT_CHECK_EQ(GET(sc_, performs) + GET(bc, performs) + GET(oc, fires), 0);

    RLT_CHECK_EQ(rl_run_in_mode(EM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(GET(sc_, performs), 1);
    RLT_CHECK_EQ(GET(bc, performs), 1);
    RLT_CHECK_EQ(GET(oc, fires), 1);
    RLT_CHECK(!rl_source_is_signalled(s));
    RLT_CHECK_EQ(GET(sc_, schedules), 1);
    RLT_CHECK_EQ(GET(sc_, releases) + GET(oc, releases), 0);

    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, EM), 0); /* last reference: destroyed */
    RLT_CHECK_EQ(GET(sc_, cancels), 1);
    RLT_CHECK_EQ(GET(sc_, releases), 1);
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, EM), 0);
    RLT_CHECK_EQ(GET(oc, releases), 1);
    RLT_CHECK_EQ(GET(sc_, retains), 1);
    RLT_CHECK_EQ(GET(oc, retains), 1);
}

RLT_TEST(errors_add_common_mode_arguments) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, RL_DEFAULT_MODE), 0);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "errors-common"), 0);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "errors-common"), 0);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, NULL), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, ""), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, RL_COMMON_MODES), -EINVAL);
    /* An unknown mode is simply empty: not an error. */
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "errors-never-used") == 0);
    RLT_CHECK_EQ(rl_run_in_mode("errors-never-used", 0.5, false), RL_RUN_FINISHED);
}
