/*
 * t_timeouts.c - the timeout idiom of the header's TIMEOUTS section: a timeout stays valid and
 * dormant after it fires and is armed again by the same call before or after; rl_timer_disarm
 * parks any timer; rl_timer_rearm counts from the loop's time inside a callout of the timer's
 * loop and from the clock elsewhere; dormant timers share the heap without disturbing it.
 */
#include "ttrace.h"

#include <pthread.h>

#define DEF RL_DEFAULT_MODE

typedef struct {
    int fired;
    int rearm_times; /* the callout arms the timer again this many times */
    double rearm_in;
    bool disarm;     /* the callout disarms the timer */
    bool stop;       /* the callout stops the loop */
} timeout_t;

static void on_timeout(rl_timer_t *t, void *info) {
    timeout_t *w = info;
    w->fired++;
    if (w->rearm_times > 0) {
        w->rearm_times--;
        (void)rl_timer_rearm(t, w->rearm_in);
    }
    if (w->disarm) (void)rl_timer_disarm(t);
    if (w->stop) rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(timeout_is_dormant_after_it_fires_and_fires_again_when_armed) {
    rl_loop_t *loop = rl_loop_get_current();
    timeout_t w = {.stop = true};
    rl_context_t c = {&w, NULL, NULL};
    rl_timer_t *t = rl_timer_create_timeout(rl_time_now() + 0.01, 0, on_timeout, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK(rl_timer_is_timeout(t));
    RLT_CHECK(!rl_timer_does_repeat(t));
    RLT_CHECK(rl_timer_is_armed(t));
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(w.fired, 1);
    /* fired: valid, still in its mode, dormant; the mode is not empty because of it */
    RLT_CHECK(rl_timer_is_valid(t));
    RLT_CHECK(!rl_timer_is_armed(t));
    RLT_CHECK(rl_timer_get_next_fire_date(t) == INFINITY);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(w.fired, 1);
    /* armed again after it fired, by each of the three calls */
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, 0.005), 0);
    RLT_CHECK(rl_timer_is_armed(t));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(w.fired, 2);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t, rl_time_now() + 0.005), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(w.fired, 3);
    RLT_CHECK_EQ(rl_timer_rearm(t, 0.005), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(w.fired, 4);
    rl_timer_invalidate(t);
    RLT_CHECK(!rl_timer_is_armed(t));
    RLT_CHECK_EQ(rl_timer_rearm(t, 1), -EINVAL);
    RLT_CHECK_EQ(rl_timer_disarm(t), -EINVAL);
    rl_release(t);
}

RLT_TEST(timeout_made_dormant_waits_until_armed) {
    rl_loop_t *loop = rl_loop_get_current();
    timeout_t w = {.stop = true};
    rl_context_t c = {&w, NULL, NULL};
    rl_timer_t *t = rl_timer_create_timeout(INFINITY, 0, on_timeout, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK(!rl_timer_is_armed(t));
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    /* the mode holds a timer, so the run waits for its time instead of finishing */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.03, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(w.fired, 0);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, 0), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(w.fired, 1);
    rl_timer_invalidate(t);
    rl_release(t);
}

RLT_TEST(timeout_armed_inside_its_callout_fires_again) {
    rl_loop_t *loop = rl_loop_get_current();
    timeout_t w = {.rearm_times = 2, .rearm_in = 0.001};
    rl_context_t c = {&w, NULL, NULL};
    rl_timer_t *t = rl_timer_create_timeout(rl_time_now(), 0, on_timeout, &c);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    double end = rl_time_now() + 10;
    while (w.fired < 3 && rl_time_now() < end) rl_run_in_mode(DEF, 0.01, false);
    RLT_CHECK_EQ(w.fired, 3); /* the first fire, then the two the callouts armed */
    RLT_CHECK(!rl_timer_is_armed(t)); /* the third callout did not arm it: dormant */
    RLT_CHECK(rl_timer_is_valid(t));
    rl_timer_invalidate(t);
    rl_release(t);
}

RLT_TEST(timer_disarmed_stays_valid_and_silent_in_its_modes) {
    rl_loop_t *loop = rl_loop_get_current();
    timeout_t w = {0};
    rl_context_t c = {&w, NULL, NULL};
    /* a CF-style one-shot and a repeating timer park alike */
    rl_timer_t *once = rl_timer_create(rl_time_now() + 0.005, 0, 0, on_timeout, &c);
    rl_timer_t *every = rl_timer_create(rl_time_now() + 0.005, 0.005, 0, on_timeout, &c);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, once, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, every, DEF), 0);
    RLT_CHECK_EQ(rl_timer_disarm(once), 0);
    RLT_CHECK_EQ(rl_timer_disarm(every), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(w.fired, 0);
    RLT_CHECK(rl_timer_is_valid(once) && rl_timer_is_valid(every));
    RLT_CHECK(rl_loop_contains_timer(loop, once, DEF));
    RLT_CHECK(!rl_timer_is_armed(once) && !rl_timer_is_armed(every));
    RLT_CHECK_EQ(rl_timer_disarm(NULL), -EINVAL);
    RLT_CHECK(!rl_timer_is_armed(NULL));
    RLT_CHECK(!rl_timer_is_timeout(NULL) && !rl_timer_is_timeout(once));
    /* armed again, the one-shot fires once and is invalidated, as in CF */
    w.stop = true;
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(once, 0), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(w.fired, 1);
    RLT_CHECK(!rl_timer_is_valid(once));
    /* a repeating timer disarmed inside its own callout stays parked (a later date is kept) */
    w.disarm = true;
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(every, 0), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(w.fired, 2);
    RLT_CHECK(rl_timer_is_valid(every) && !rl_timer_is_armed(every));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.03, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(w.fired, 2);
    rl_timer_invalidate(every);
    rl_release(once);
    rl_release(every);
}

/* rl_timer_rearm's base: the callout phase's clock reading inside a callout of the loop. */
typedef struct {
    rl_timer_t *target;
    double busy;                 /* the callout runs this long before it re-arms */
    double before, after, date;  /* the clock around the call, the date it set */
    double date_after_nested;    /* the date set again after a nested run in the same callout */
} rearm_probe_t;

static void busy_for(double seconds) {
    double end = rl_time_now() + seconds;
    while (rl_time_now() < end) {}
}

static void probe_rearm(rl_timer_t *self, void *info) {
    (void)self;
    rearm_probe_t *p = info;
    busy_for(p->busy);
    p->before = rl_time_now();
    (void)rl_timer_rearm(p->target, 1.0);
    p->after = rl_time_now();
    p->date = rl_timer_get_next_fire_date(p->target);
    (void)rl_run_in_mode("com.crunloop.test.nested", 0, false); /* a nested run: its phases end */
    double nested_before = rl_time_now();
    (void)rl_timer_rearm(p->target, 1.0);
    p->date_after_nested = rl_timer_get_next_fire_date(p->target) - nested_before;
    rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(timer_rearm_counts_from_the_loops_time_inside_its_callouts) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *target = rl_timer_create_timeout(INFINITY, 0, on_timeout, NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, target, DEF), 0);
    /* outside a callout: from the clock */
    double before = rl_time_now();
    RLT_CHECK_EQ(rl_timer_rearm(target, 1.0), 0);
    double date = rl_timer_get_next_fire_date(target);
    RLT_CHECK(date >= before + 1.0 && date <= rl_time_now() + 1.0);
    /* inside a callout that ran 20 ms first: from when its phase began, 20 ms or more before */
    rearm_probe_t p = {.target = target, .busy = 0.02};
    rl_context_t c = {&p, NULL, NULL};
    rl_timer_t *probe = rl_timer_create(rl_time_now(), 0, 0, probe_rearm, &c);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, probe, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK(p.date <= p.before + 1.0 - 0.02);
    RLT_CHECK(p.date >= p.before + 1.0 - 5.0); /* loosely: not from some other time */
    /* after a nested run inside the same callout, the phase it began is over: the clock */
    RLT_CHECK(p.date_after_nested >= 1.0);
    RLT_CHECK_EQ(rl_timer_rearm(target, INFINITY), 0);
    RLT_CHECK(!rl_timer_is_armed(target));
    RLT_CHECK_EQ(rl_timer_rearm(target, -1), -EINVAL);
    RLT_CHECK_EQ(rl_timer_rearm(target, NAN), -EINVAL);
    RLT_CHECK_EQ(rl_timer_rearm(NULL, 1), -EINVAL);
    rl_timer_invalidate(target);
    rl_release(target);
    rl_release(probe);
}

/* Another thread arms a dormant timeout of a loop that sleeps with no deadline. */
typedef struct {
    rl_timer_t *t;
    int rc;
} arm_from_t;

static void *arm_later(void *arg) {
    arm_from_t *a = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    a->rc = rl_timer_rearm(a->t, 0.001); /* not the loop's thread: from the clock */
    return NULL;
}

RLT_TEST(timeout_armed_from_another_thread_wakes_a_sleeping_loop) {
    rl_loop_t *loop = rl_loop_get_current();
    timeout_t w = {.stop = true};
    rl_context_t c = {&w, NULL, NULL};
    rl_timer_t *t = rl_timer_create_timeout(INFINITY, 0, on_timeout, &c);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    arm_from_t a = {t, -1};
    pthread_t th;
    RLT_CHECK_EQ(pthread_create(&th, NULL, arm_later, &a), 0);
    int rc = rl_run_in_mode(DEF, 30.0, false);
    pthread_join(th, NULL);
    RLT_CHECK_EQ(a.rc, 0);
    RLT_CHECK_EQ(rc, RL_RUN_STOPPED);
    RLT_CHECK_EQ(w.fired, 1);
    rl_timer_invalidate(t);
    rl_release(t);
}

static int held_fires;
static void dormant_counting(rl_timer_t *t, void *info) {
    (void)t, (void)info;
    held_fires++;
}

RLT_TEST(timeout_held_keeps_its_context_across_fires_until_it_leaves) {
    rl_loop_t *loop = rl_loop_get_current();
    static tt_count_t count;
    count = (tt_count_t){0};
    held_fires = 0;
    rl_context_t c = {&count, tt_count_retain, tt_count_release};
    rl_timer_t *t = rl_timer_create_timeout_held(rl_time_now(), 0, dormant_counting, &c);
    RLT_CHECK(t != NULL && rl_timer_is_timeout(t));
    RLT_CHECK_EQ(atomic_load(&count.retains), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(atomic_load(&count.retains), 1);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.02, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, 0), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.02, false), RL_RUN_TIMED_OUT);
    /* fired twice, dormant, still the loop's: the context is held, once */
    RLT_CHECK_EQ(held_fires, 2);
    RLT_CHECK_EQ(atomic_load(&count.retains), 1);
    RLT_CHECK_EQ(atomic_load(&count.releases), 0);
    rl_timer_invalidate(t);
    RLT_CHECK_EQ(atomic_load(&count.releases), 1);
    rl_release(t);
}

/* Dormant timers among armed ones: the armed fire in date order, the dormant never, and the
 * heap stays consistent (the suite verifies the loop after every check in debug builds) while
 * timers are parked and armed by the hundred. */
static int order_log[64], order_n;
static void log_order(rl_timer_t *t, void *info) {
    (void)t;
    if (order_n < 64) order_log[order_n++] = (int)(intptr_t)info;
}

RLT_TEST(dormant_timers_share_the_heap_without_disturbing_the_order) {
    rl_loop_t *loop = rl_loop_get_current();
    enum { N = 400 };
    static rl_timer_t *t[N];
    order_n = 0;
    /* far enough ahead that no date is in the past once all are made (a date in the past
     * counts as now: under a sanitizer, making 400 timers takes a while) */
    double base = rl_time_now() + 0.5;
    for (int i = 0; i < N; i++) {
        rl_context_t c = {(void *)(intptr_t)i, NULL, NULL};
        t[i] = rl_timer_create_timeout(base + 0.001 * (i % 7), 0, log_order, &c);
        RLT_CHECK(t[i] != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t[i], DEF), 0);
    }
    /* park all but every 50th, in an order unlike the dates' */
    for (int i = N - 1; i >= 0; i--)
        if (i % 50) RLT_CHECK_EQ(rl_timer_disarm(t[i]), 0);
    /* the 8 left: dates base + (i % 7) ms; equal dates go by when they were scheduled */
    double end = rl_time_now() + 10;
    while (order_n < 8 && rl_time_now() < end) rl_run_in_mode(DEF, 0.005, false);
    RLT_CHECK_EQ(order_n, 8);
    /* i = 0,50,...,350: i % 7 = 0,1,2,3,4,5,6,0 -> dates 0:{0,350} 1:{50} 2:{100} ... 6:{300} */
    static const int expected[8] = {0, 350, 50, 100, 150, 200, 250, 300};
    for (int k = 0; k < 8; k++) RLT_CHECK_EQ(order_log[k], expected[k]);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.02, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(order_n, 8);
    for (int i = 0; i < N; i++) {
        rl_timer_invalidate(t[i]);
        rl_release(t[i]);
    }
}

/* The loop's time (rl_loop_get_time) and rl_timer_rearm_from_loop_time, which arms from it with no
 * clock reading: outside a callout it is the clock as the loop last read it, and lags the clock
 * by what the thread did since; inside a callout it is rl_timer_rearm's base. */
typedef struct {
    rl_timer_t *target, *other;
    double phase, rearm_date, from_loop_date, updated, after_update;
} loop_time_probe_t;

static void probe_loop_time(rl_timer_t *self, void *info) {
    (void)self;
    loop_time_probe_t *p = info;
    rl_loop_t *loop = rl_loop_get_current();
    busy_for(0.02);
    p->phase = rl_loop_get_time(loop);
    (void)rl_timer_rearm(p->other, 1.0);
    (void)rl_timer_rearm_from_loop_time(p->target, 1.0);
    p->rearm_date = rl_timer_get_next_fire_date(p->other);
    p->from_loop_date = rl_timer_get_next_fire_date(p->target);
    p->updated = rl_loop_update_time(loop); /* moves both bases for the rest of the phase */
    (void)rl_timer_rearm(p->other, 1.0);
    p->after_update = rl_timer_get_next_fire_date(p->other);
    rl_loop_stop(loop);
}

typedef struct {
    rl_loop_t *loop;
    rl_timer_t *t;
    double before, time, date;
    int rc;
} loop_time_from_t;

static void *loop_time_elsewhere(void *arg) {
    loop_time_from_t *a = arg;
    a->before = rl_time_now();
    a->time = rl_loop_get_time(a->loop);        /* not the loop's thread: the clock */
    a->rc = rl_timer_rearm_from_loop_time(a->t, 1.0);
    a->date = rl_timer_get_next_fire_date(a->t);
    return NULL;
}

RLT_TEST(timer_rearm_from_loop_time_counts_from_the_loops_last_reading_and_reads_no_clock) {
    rl_loop_t *loop = rl_loop_get_current();
    timeout_t w = {0};
    rl_context_t c = {&w, NULL, NULL};
    rl_timer_t *t = rl_timer_create_timeout(INFINITY, 0, on_timeout, &c);
    rl_timer_t *other = rl_timer_create_timeout(INFINITY, 0, on_timeout, NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, other, DEF), 0);

    /* A blocking wait's end is a reading of the loop's: after a 30 ms run that timed out, the
     * loop's time is at least its deadline. */
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.03, false), RL_RUN_TIMED_OUT);
    double last = rl_loop_get_time(loop);
    RLT_CHECK(last >= t0 + 0.03);
    RLT_CHECK(last <= rl_time_now());

    /* Outside a callout it stays there while the thread works: it lags the clock. */
    busy_for(0.02);
    RLT_CHECK(rl_loop_get_time(loop) == last);
    RLT_CHECK(rl_loop_get_time(loop) <= rl_time_now() - 0.02);
    RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(t, 1.0), 0);
    RLT_CHECK(rl_timer_get_next_fire_date(t) == last + 1.0);    /* exactly: no clock read */

    /* A date already gone is kept as it is (no clamp) and fires at the next pass. */
    RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(t, 0.001), 0);
    RLT_CHECK(rl_timer_get_next_fire_date(t) == last + 0.001);
    RLT_CHECK(rl_timer_get_next_fire_date(t) < rl_time_now());
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(w.fired, 1);
    RLT_CHECK(rl_timer_is_valid(t) && !rl_timer_is_armed(t));

    /* rl_loop_update_time brings it to the clock. */
    double before = rl_time_now();
    double updated = rl_loop_update_time(loop);
    RLT_CHECK(updated >= before && updated <= rl_time_now());
    RLT_CHECK(rl_loop_get_time(loop) == updated);
    RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(t, 1.0), 0);
    RLT_CHECK(rl_timer_get_next_fire_date(t) == updated + 1.0);

    /* Inside a callout: the phase's reading, the same base as rl_timer_rearm's, 20 ms or more
     * before the call; rl_loop_update_time moves it. */
    loop_time_probe_t p = {.target = t, .other = other};
    rl_context_t pc = {&p, NULL, NULL};
    rl_timer_t *probe = rl_timer_create(rl_time_now(), 0, 0, probe_loop_time, &pc);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, probe, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK(p.from_loop_date == p.phase + 1.0);
    RLT_CHECK(p.rearm_date == p.phase + 1.0);
    RLT_CHECK(p.updated >= p.phase + 0.02);
    RLT_CHECK(p.after_update == p.updated + 1.0);
    /* Once the run is over, the loop's time is its last reading: the phase's end, or later. */
    RLT_CHECK(rl_loop_get_time(loop) >= p.updated);

    /* From another thread: the clock, for both calls. */
    loop_time_from_t a = {.loop = loop, .t = t, .rc = -1};
    pthread_t th;
    busy_for(0.01);
    RLT_CHECK_EQ(pthread_create(&th, NULL, loop_time_elsewhere, &a), 0);
    pthread_join(th, NULL);
    RLT_CHECK(a.time >= a.before);
    RLT_CHECK_EQ(a.rc, 0);
    RLT_CHECK(a.date >= a.before + 1.0);
    RLT_CHECK(rl_loop_get_time(NULL) > 0);

    /* Errors and parking, as rl_timer_rearm's. */
    RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(t, INFINITY), 0);
    RLT_CHECK(!rl_timer_is_armed(t));
    RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(t, -1), -EINVAL);
    RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(t, NAN), -EINVAL);
    RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(NULL, 1), -EINVAL);
    rl_timer_invalidate(t);
    RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(t, 1), -EINVAL);
    rl_timer_invalidate(other);
    rl_release(t);
    rl_release(other);
    rl_release(probe);
}
