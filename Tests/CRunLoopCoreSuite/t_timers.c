/*
 * t_timers.c - fire-date order, one-shot and repeating timers, the repeating grid after a stall,
 * moving fire dates, invalidating and removing timers inside callouts, timers in several modes,
 * context retain/release, one loop per timer, getters.
 */
#include "ttrace.h"
#include "../../Sources/CRunLoopCore/internal.h"

#include <pthread.h>

#include <stdint.h>

#define DEF RL_DEFAULT_MODE

/* true when x is within eps of base + k*step for some integer k >= kmin */
static bool on_grid(double x, double base, double step, long kmin, double eps) {
    double k = round((x - base) / step);
    return k >= (double)kmin && fabs(x - (base + k * step)) <= eps;
}

RLT_TEST(timer_fires_in_fire_date_order) {
    double now = rl_time_now();
    RLT_CHECK(tt_add_timer(DEF, now + 0.09, 0, 0, NULL, "c") != NULL);
    RLT_CHECK(tt_add_timer(DEF, now + 0.03, 0, 2, NULL, "a") != NULL);
    RLT_CHECK(tt_add_timer(DEF, now + 0.06, 0, 1, NULL, "b") != NULL);
    RLT_CHECK_EQ(rl_run(), RL_RUN_FINISHED);
    TT_EXPECT("a b c");
}

/* A timer moved to the date its children in the heap have, after one of them left (a hole among
 * them): the heap keeps dates in order only, and the pass fires by the whole key, so the moved
 * timer (armed last) fires after the others of that date. The harness verifies the loop after
 * the test (a heap that kept whole keys through holes broke there). */
RLT_TEST(timer_moved_to_its_childrens_date_after_one_left_fires_after_them) {
    double base = rl_time_now();
    rl_timer_t *t0 = tt_add_timer(DEF, base + 0.01, 0, 0, NULL, "t0");
    rl_timer_t *t1 = tt_add_timer(DEF, base + 0.05, 0, 0, NULL, "t1");
    RLT_CHECK(t0 && t1);
    RLT_CHECK(tt_add_timer(DEF, base + 0.05, 0, 0, NULL, "t2") != NULL);
    RLT_CHECK(tt_add_timer(DEF, base + 0.05, 0, 0, NULL, "t3") != NULL);
    RLT_CHECK(tt_add_timer(DEF, base + 0.05, 0, 0, NULL, "t4") != NULL);
    rl_timer_invalidate(t1);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t0, base + 0.05), 0);
    char report[256];
    RLT_CHECK_EQ(rl_loop_verify(rl_loop_get_current(), report, sizeof report), 0);
    RLT_CHECK_EQ(rl_run(), RL_RUN_FINISHED);
    TT_EXPECT("t2 t3 t4 t0");
}

RLT_TEST(timer_due_timers_fire_in_date_order_in_one_pass) {
    double now = rl_time_now();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_timer(DEF, now + 0.03, 0, 5, NULL, "b") != NULL);
    RLT_CHECK(tt_add_timer(DEF, now + 0.04, 0, 0, NULL, "c") != NULL);
    RLT_CHECK(tt_add_timer(DEF, now + 0.02, 0, 9, NULL, "a") != NULL);
    tt_sleep(0.08); /* all three due before the pass */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("a b c");
}

typedef struct { double date, fired_at; int n; bool valid_inside, contained_inside; } probe_t;

static void probe_timer(rl_timer_t *t, void *info) {
    probe_t *p = info;
    p->fired_at = rl_time_now();
    p->n++;
    p->valid_inside = rl_timer_is_valid(t);
    p->contained_inside = rl_loop_contains_timer(rl_loop_get_current(), t, RL_DEFAULT_MODE);
}

RLT_TEST(timer_never_fires_before_its_date) {
    probe_t p = { 0 };
    p.date = rl_time_now() + 0.05;
    rl_context_t c = { &p, NULL, NULL };
    rl_timer_t *t = rl_timer_create(p.date, 0, 0, probe_timer, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_timer_set_tolerance(t, 0.04), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(p.n, 1);
    TT_GE(p.fired_at, p.date);
    rl_release(t);
}

RLT_TEST(timer_one_shot_valid_inside_callout_invalid_after) {
    probe_t p = { 0 };
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t c = { &p, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.02, 0, 0, probe_timer, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK(rl_timer_is_valid(t));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(p.n, 1);
    RLT_CHECK(p.valid_inside);
    RLT_CHECK(p.contained_inside);
    RLT_CHECK(!rl_timer_is_valid(t));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, DEF) == 0);
    rl_release(t);
}

typedef struct { int n, stop_at; double at[8]; } rep_t;

static void rep_timer(rl_timer_t *t, void *info) {
    (void)t;
    rep_t *r = info;
    if (r->n < 8) r->at[r->n] = rl_time_now();
    r->n++;
    if (r->n == r->stop_at) rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(timer_repeating_keeps_its_grid) {
    rep_t r = { 0, 3, { 0 } };
    double t0 = rl_time_now() + 0.05, iv = 0.1;
    rl_context_t c = { &r, NULL, NULL };
    rl_timer_t *t = rl_timer_create(t0, iv, 0, rep_timer, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(r.n, 3);
    for (int k = 0; k < 3; k++) TT_GE(r.at[k], t0 + k * iv);
    double next = rl_timer_get_next_fire_date(t);
    RLT_CHECK(next > r.at[2]);
    RLT_CHECK(on_grid(next, t0, iv, 3, 1e-6));
    RLT_CHECK(rl_timer_is_valid(t));
    rl_timer_invalidate(t);
    rl_release(t);
}

RLT_TEST(timer_repeating_after_stall_fires_once_then_next_grid_point) {
    rep_t r = { 0, 2, { 0 } };
    double t0 = rl_time_now() + 0.05, iv = 0.1;
    rl_context_t c = { &r, NULL, NULL };
    rl_timer_t *t = rl_timer_create(t0, iv, 0, rep_timer, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    tt_sleep(0.40); /* misses t0, t0+0.1, t0+0.2, t0+0.3 */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    double after = rl_time_now();
    RLT_CHECK_EQ(r.n, 1);
    double next = rl_timer_get_next_fire_date(t);
    RLT_CHECK(on_grid(next, t0, iv, 1, 1e-6));
    RLT_CHECK(next > r.at[0]);    /* strictly in the future of the callout */
    RLT_CHECK(next - iv <= after); /* and the first such grid point */
    double before = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    if (before < next - 0.001) RLT_CHECK_EQ(r.n, 1); /* not due again yet */
    if (r.n == 1) {
        RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
        RLT_CHECK_EQ(r.n, 2);
        TT_GE(r.at[1], next);
    }
    double next2 = rl_timer_get_next_fire_date(t);
    RLT_CHECK(next2 > r.at[1]);
    RLT_CHECK(on_grid(next2, t0, iv, 2, 1e-6));
    rl_timer_invalidate(t);
    rl_release(t);
}

RLT_TEST(timer_set_next_fire_date_outside_callout) {
    rl_timer_t *t = tt_add_timer(DEF, rl_time_now() + 1000, 0, 0, tt_stop_cb, "t");
    RLT_CHECK(t != NULL);
    double t0 = rl_time_now(), d = t0 + 0.05;
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t, d), 0);
    TT_NEAR(rl_timer_get_next_fire_date(t), d, 1e-6);
    TT_NEAR(rl_loop_get_next_timer_fire_date(rl_loop_get_current(), DEF), d, 1e-6);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 20.0, false), RL_RUN_STOPPED);
    double el = rl_time_now() - t0;
    TT_EXPECT("t");
    TT_GE(el, 0.05);
    RLT_CHECK(el < 5.0);
}

RLT_TEST(timer_set_next_fire_date_later_moves_a_timer_back) {
    /* a timer due soon moved an hour later does not fire */
    rl_timer_t *t = tt_add_timer(DEF, rl_time_now() + 0.03, 0, 0, NULL, "t");
    RLT_CHECK(t != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t, rl_time_now() + 3600), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.2, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("");
    RLT_CHECK(rl_timer_is_valid(t));
}

typedef struct { int n; double set_to, second_at; } move_t;

static void move_later_timer(rl_timer_t *t, void *info) {
    move_t *m = info;
    m->n++;
    if (m->n == 1) {
        m->set_to = rl_time_now() + 0.05;
        rl_timer_set_next_fire_date(t, m->set_to);
    } else {
        m->second_at = rl_time_now();
        rl_loop_stop(rl_loop_get_current());
    }
}

RLT_TEST(timer_set_next_fire_date_later_inside_callout_is_kept) {
    move_t m = { 0, 0, 0 };
    rl_context_t c = { &m, NULL, NULL };
    double t0 = rl_time_now();
    rl_timer_t *t = rl_timer_create(t0 + 0.01, 10.0, 0, move_later_timer, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 20.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(m.n, 2);
    TT_GE(m.second_at, m.set_to);
    RLT_CHECK(rl_time_now() - t0 < 5.0);
    rl_timer_invalidate(t);
    rl_release(t);
}

typedef struct { double t0; int n; } early_t;

static _Thread_local double past_second_fire;
static void move_into_past_timer(rl_timer_t *t, void *info) {
    early_t *e = info;
    if (++e->n == 1) {
        rl_timer_set_next_fire_date(t, e->t0 - 0.05); /* counts as now, later than t0: kept */
    } else {
        past_second_fire = rl_time_now();
        rl_loop_stop(rl_loop_get_current());
    }
}

/* As in CF: a past date set inside the callout counts as now, which is later than the date
 * being fired, so it is kept and the timer fires again at once instead of at t0 + interval. */
RLT_TEST(timer_set_past_date_inside_callout_fires_again_at_once) {
    early_t e = { rl_time_now() + 0.02, 0 };
    rl_context_t c = { &e, NULL, NULL };
    rl_timer_t *t = rl_timer_create(e.t0, 3.0, 0, move_into_past_timer, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(e.n, 2);
    RLT_CHECK(past_second_fire < e.t0 + 1.5); /* the grid point would be t0 + 3 s */
    rl_timer_invalidate(t);
    rl_release(t);
}

RLT_TEST(timer_past_date_counts_as_now) {
    double before = rl_time_now();
    rl_timer_t *t = rl_timer_create(before - 100.0, 0, 0, tt_timer_cb, NULL);
    RLT_CHECK(t != NULL);
    RLT_CHECK(rl_timer_get_next_fire_date(t) >= before);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t, 1.0), 0);
    RLT_CHECK(rl_timer_get_next_fire_date(t) >= before);
    rl_release(t);
}

static void invalidate_self(rl_timer_t *t, void *info) {
    (void)info;
    tt("fire");
    rl_timer_invalidate(t);
}

RLT_TEST(timer_invalidate_self_inside_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = tt_add_timer(DEF, rl_time_now() + 0.01, 0.02, 0, invalidate_self, NULL);
    RLT_CHECK(t != NULL);
    rl_retain(t);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.25, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("fire");
    RLT_CHECK(!rl_timer_is_valid(t));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    rl_release(t);
}

static void invalidate_other(rl_timer_t *t, void *info) {
    (void)t;
    tt("A");
    rl_timer_invalidate((rl_timer_t *)info);
}

RLT_TEST(timer_invalidate_other_due_timer_inside_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    double now = rl_time_now();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_timer_t *b = tt_add_timer(DEF, now + 0.03, 0, 0, NULL, "B");
    RLT_CHECK(b != NULL);
    rl_retain(b);
    rl_context_t c = { b, NULL, NULL };
    rl_timer_t *a = rl_timer_create(now + 0.02, 0, 0, invalidate_other, &c);
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    tt_sleep(0.08); /* both due before the pass */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A");
    RLT_CHECK(!rl_timer_is_valid(b));
    RLT_CHECK(!rl_loop_contains_timer(loop, b, DEF));
    rl_release(a);
    rl_release(b);
}

static void remove_self(rl_timer_t *t, void *info) {
    (void)info;
    tt("fire");
    rl_loop_remove_timer(rl_loop_get_current(), t, RL_DEFAULT_MODE);
}

RLT_TEST(timer_remove_self_inside_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.01, 0.02, 0, remove_self, NULL);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.25, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("fire");
    RLT_CHECK(rl_timer_is_valid(t)); /* removed, not invalidated */
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    rl_timer_invalidate(t);
    rl_release(t);
}

static void remove_other(rl_timer_t *t, void *info) {
    (void)t;
    tt("A");
    rl_loop_remove_timer(rl_loop_get_current(), (rl_timer_t *)info, RL_DEFAULT_MODE);
}

RLT_TEST(timer_remove_other_inside_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    double now = rl_time_now();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_context_t bc = tt_label("B");
    rl_timer_t *b = rl_timer_create(now + 0.08, 0.02, 0, tt_timer_cb, &bc);
    RLT_CHECK(b != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, b, DEF), 0);
    rl_context_t c = { b, NULL, NULL };
    rl_timer_t *a = rl_timer_create(now + 0.02, 0, 0, remove_other, &c);
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    rl_release(a);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.3, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A");
    RLT_CHECK(rl_timer_is_valid(b));
    RLT_CHECK(!rl_loop_contains_timer(loop, b, DEF));
    rl_timer_invalidate(b);
    rl_release(b);
}

RLT_TEST(timer_repeating_in_two_modes_fires_in_each) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t c = tt_label("r");
    rl_timer_t *t = rl_timer_create(rl_time_now() - 0.001, 0.05, 0, tt_timer_cb, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "m2"), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(rl_loop_contains_timer(loop, t, "m2"));
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("r");
    tt_sleep(0.08);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("r r");
    /* removing it from one mode leaves it in the other */
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(rl_loop_contains_timer(loop, t, "m2"));
    RLT_CHECK(rl_timer_is_valid(t));
    rl_timer_invalidate(t);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "m2"));
    rl_release(t);
}

/* The entries of further modes hang in a chain: taking the timer out of the middle one of three
 * (neither the entry inside the timer nor the chain's last) leaves the other two whole. */
RLT_TEST(timer_in_three_modes_removed_from_the_middle_one) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t c = tt_label("r");
    rl_timer_t *t = rl_timer_create(rl_time_now() - 0.001, 0.05, 0, tt_timer_cb, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "m2"), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "m3"), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "m2"), -EEXIST);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "m2"), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "m2"), -ENOENT);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "m2"));
    RLT_CHECK(rl_loop_contains_timer(loop, t, "m3"));
    RLT_CHECK(rl_timer_does_repeat(t));
    RLT_CHECK(rl_timer_get_interval(t) == 0.05);
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode("m3", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("r");
    tt_sleep(0.06);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("r r");
    /* then out of the first (the timer's own entry) and back into the middle one */
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, "m3"));
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "m2"), 0);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t, rl_time_now() + 1000), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, "m2") && rl_loop_contains_timer(loop, t, "m3"));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    rl_timer_invalidate(t);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "m2") && !rl_loop_contains_timer(loop, t, "m3"));
    rl_release(t);
}

/* A tolerance lives in storage a timer gets the first time it needs it; setting it back to 0
 * is a tolerance of 0 again, and 0 on a timer that never had one is a no-op that succeeds. */
RLT_TEST(timer_tolerance_set_then_cleared) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = tt_add_timer(DEF, rl_time_now() + 0.02, 0, 0, NULL, "t");
    RLT_CHECK(t != NULL);
    rl_retain(t);
    RLT_CHECK(rl_timer_get_tolerance(t) == 0);
    RLT_CHECK_EQ(rl_timer_set_tolerance(t, 0), 0);
    RLT_CHECK(rl_timer_get_tolerance(t) == 0);
    RLT_CHECK_EQ(rl_timer_set_tolerance(t, 0.25), 0);
    RLT_CHECK(rl_timer_get_tolerance(t) == 0.25);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "m2"), 0); /* the chain shares the tolerance's storage */
    RLT_CHECK_EQ(rl_timer_set_tolerance(t, 0), 0);
    RLT_CHECK(rl_timer_get_tolerance(t) == 0);
    RLT_CHECK_EQ(rl_timer_set_tolerance(t, -1), -EINVAL);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "m2"), 0);
    RLT_CHECK(rl_timer_get_tolerance(t) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    TT_EXPECT("t");
    RLT_CHECK(!rl_timer_is_valid(t));
    rl_release(t);
}

RLT_TEST(timer_one_shot_in_two_modes_fires_once) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = tt_add_timer(DEF, rl_time_now() - 0.001, 0, 0, NULL, "t");
    RLT_CHECK(t != NULL);
    rl_retain(t); /* borrowed from the loop, which lets go of it when it fires */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "m2"), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_keepalive("m2") != NULL);
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("t");
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "m2"));
    RLT_CHECK(!rl_timer_is_valid(t));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("t");
    rl_release(t);
}

RLT_TEST(timer_next_timer_fire_date_of_a_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    double now = rl_time_now();
    rl_timer_t *t1 = tt_add_timer(DEF, now + 50, 0, 0, NULL, "1");
    rl_timer_t *t2 = tt_add_timer(DEF, now + 30, 0, 0, NULL, "2");
    rl_timer_t *t3 = tt_add_timer("m2", now + 10, 0, 0, NULL, "3");
    RLT_CHECK(t1 && t2 && t3);
    TT_NEAR(rl_loop_get_next_timer_fire_date(loop, DEF), now + 30, 1e-6);
    TT_NEAR(rl_loop_get_next_timer_fire_date(loop, "m2"), now + 10, 1e-6);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "no.timers.here") == 0);
    rl_timer_invalidate(t2);
    TT_NEAR(rl_loop_get_next_timer_fire_date(loop, DEF), now + 50, 1e-6);
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t1, now + 20), 0);
    TT_NEAR(rl_loop_get_next_timer_fire_date(loop, DEF), now + 20, 1e-6);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t3, DEF), 0);
    TT_NEAR(rl_loop_get_next_timer_fire_date(loop, DEF), now + 10, 1e-6);
}

RLT_TEST(timer_moves_between_modes) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t c = tt_label("t");
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.02, 0, 0, tt_timer_cb, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "m2"), 0);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED); /* default is empty now */
    TT_EXPECT("");
    RLT_CHECK_EQ(rl_run_in_mode("m2", 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("t");
    rl_release(t);
}

static void count_info_timer(rl_timer_t *t, void *info) {
    (void)t;
    tt("%s", info ? "info" : "null");
}

RLT_TEST(timer_context_retain_release_balanced) {
    tt_count_t cnt;
    atomic_init(&cnt.retains, 0);
    atomic_init(&cnt.releases, 0);
    rl_context_t c = { &cnt, tt_count_retain, tt_count_release };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.02, 0, 0, count_info_timer, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(atomic_load(&cnt.retains), 1);
    RLT_CHECK_EQ(atomic_load(&cnt.releases), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, "m2"), 0);
    rl_retain(t);
    rl_release(t);
    rl_release(t); /* the loop still holds it */
    RLT_CHECK_EQ(atomic_load(&cnt.releases), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("info");
    /* fired, invalidated, removed from both modes: the last reference is gone */
    RLT_CHECK_EQ(atomic_load(&cnt.retains), 1);
    RLT_CHECK_EQ(atomic_load(&cnt.releases), 1);
}

static void which_info_timer(rl_timer_t *t, void *info) { (void)t; tt("%s", (const char *)info); }

RLT_TEST(timer_context_is_copied_at_creation) {
    rl_context_t c = { "original", NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now() - 0.001, 0, 0, which_info_timer, &c);
    RLT_CHECK(t != NULL);
    c.info = "changed";
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("original");
    rl_release(t);
}

RLT_TEST(timer_belongs_to_one_loop) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_live_t live;
    tt_live_start(&live); /* another thread's loop, alive until tt_live_stop */
    rl_loop_t *other = live.loop;
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    rl_timer_t *u = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    int r[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
    bool other_has_t = true, loop_has_t = false, loop_has_u = true, other_has_u = false;
    if (t && u && other) {
        r[0] = rl_loop_add_timer(loop, t, DEF);
        r[1] = rl_loop_add_timer(other, t, DEF);
        r[2] = rl_loop_add_timer(other, t, "m2");
        other_has_t = rl_loop_contains_timer(other, t, DEF);
        loop_has_t = rl_loop_contains_timer(loop, t, DEF);
        r[3] = rl_loop_add_timer(loop, t, "m2"); /* several modes of one loop are fine */
        r[4] = rl_loop_add_timer(loop, t, DEF);
        r[5] = rl_loop_add_timer(other, u, DEF);
        r[6] = rl_loop_add_timer(loop, u, DEF);
        loop_has_u = rl_loop_contains_timer(loop, u, DEF);
        other_has_u = rl_loop_contains_timer(other, u, DEF);
        rl_timer_invalidate(t);
        rl_timer_invalidate(u);
    }
    tt_live_stop(&live);
    RLT_CHECK(other != NULL && other != loop);
    RLT_CHECK(t && u);
    rl_release(t);
    rl_release(u);
    RLT_CHECK_EQ(r[0], 0);
    RLT_CHECK_EQ(r[1], -EBUSY);
    RLT_CHECK_EQ(r[2], -EBUSY);
    RLT_CHECK(!other_has_t);
    RLT_CHECK(loop_has_t);
    RLT_CHECK_EQ(r[3], 0);
    RLT_CHECK_EQ(r[4], -EEXIST);
    RLT_CHECK_EQ(r[5], 0);
    RLT_CHECK_EQ(r[6], -EBUSY);
    RLT_CHECK(!loop_has_u);
    RLT_CHECK(other_has_u);
}

RLT_TEST(timer_getters_and_tolerance) {
    rl_timer_t *r = rl_timer_create(rl_time_now() + 1000, 0.25, -7, tt_timer_cb, NULL);
    rl_timer_t *o = rl_timer_create(rl_time_now() + 1000, 0, 3, tt_timer_cb, NULL);
    RLT_CHECK(r && o);
    RLT_CHECK(rl_timer_get_interval(r) == 0.25);
    RLT_CHECK(rl_timer_does_repeat(r));
    RLT_CHECK_EQ(rl_timer_get_order(r), -7);
    RLT_CHECK(rl_timer_get_interval(o) == 0);
    RLT_CHECK(!rl_timer_does_repeat(o));
    RLT_CHECK_EQ(rl_timer_get_order(o), 3);
    RLT_CHECK(rl_timer_get_tolerance(r) == 0);
    RLT_CHECK_EQ(rl_timer_set_tolerance(r, 0.05), 0);
    TT_NEAR(rl_timer_get_tolerance(r), 0.05, 1e-9);
    RLT_CHECK_EQ(rl_timer_set_tolerance(o, 0.002), 0);
    TT_NEAR(rl_timer_get_tolerance(o), 0.002, 1e-9);
    RLT_CHECK(rl_timer_is_valid(o));
    rl_timer_invalidate(o);
    RLT_CHECK(!rl_timer_is_valid(o));
    rl_release(r);
    rl_release(o);
}

RLT_TEST(timer_with_past_date_fires_at_next_pass) {
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() - 5.0, 0, 0, NULL, "old") != NULL);
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("old");
}

static void add_later_timer(rl_timer_t *t, void *info) {
    (void)t; (void)info;
    tt("A");
    tt_add_timer(RL_DEFAULT_MODE, rl_time_now() + 0.05, 0, 0, tt_stop_cb, "B");
}

RLT_TEST(timer_added_inside_callout_fires_in_same_run) {
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() + 0.01, 0, 0, add_later_timer, NULL) != NULL);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 20.0, false), RL_RUN_STOPPED);
    TT_EXPECT("A B");
    RLT_CHECK(rl_time_now() - t0 < 5.0);
}

/* A nested run of the same mode inside a timer's callout must sleep, not spin on the past fire
 * date of the timer whose callout is running (CF passes over firing timers when it arms). */
static _Thread_local rl_loop_stats_t nested_delta;
static void nested_same_mode_cb(rl_timer_t *t, void *info) {
    (void)info;
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_stats_t a, b;
    rl_loop_get_stats(loop, &a);
    tt("run=%d", rl_run_in_mode("m", 0.2, false));
    rl_loop_get_stats(loop, &b);
    nested_delta.passes = b.passes - a.passes;
    nested_delta.waits = b.waits - a.waits;
    rl_timer_invalidate(t);
}

RLT_TEST(nested_run_inside_a_timer_callout_sleeps_instead_of_spinning) {
    rl_source_t *keep = tt_add_source("m", 0, "keep");
    rl_timer_t *t = tt_add_timer("m", rl_time_now() + 0.01, 1.0, 0, nested_same_mode_cb, NULL);
    RLT_CHECK(keep && t);
    RLT_CHECK_EQ(rl_run_in_mode("m", 0.5, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("run=3");
    RLT_CHECK(nested_delta.waits >= 1);
    RLT_CHECK(nested_delta.passes < 50); /* a spin makes hundreds of thousands */
}

/* The same with another thread adding a timer to that mode while the nested run sleeps: its
 * reckoning of the wake date must pass over the timer whose callout is running too (the loop's
 * thread makes it known as the nested run waits), or it would arm the wait for that timer's past
 * date, and the nested run would make a pass that CF does not (a wakeup for nothing). */
typedef struct {
    rl_loop_t *loop;
    rl_timer_t *added;
} adder_t;
static void *add_far_timer_later(void *arg) {
    adder_t *a = arg;
    tt_sleep(0.02);
    a->added = rl_timer_create(rl_time_now() + 3600, 0, 0, tt_timer_cb, NULL);
    if (a->added) (void)rl_loop_add_timer(a->loop, a->added, "m");
    return NULL;
}
static _Thread_local unsigned long long nested_passes_with_adder;
static void nested_with_adder_cb(rl_timer_t *t, void *info) {
    (void)t;
    adder_t *a = info;
    rl_loop_stats_t before, after;
    pthread_t th;
    rl_loop_get_stats(a->loop, &before);
    if (pthread_create(&th, NULL, add_far_timer_later, a) != 0) return;
    (void)rl_run_in_mode("m", 0.1, false);
    pthread_join(th, NULL);
    rl_loop_get_stats(a->loop, &after);
    nested_passes_with_adder = after.passes - before.passes;
}

RLT_TEST(nested_run_inside_a_timer_callout_is_not_woken_for_it_by_another_threads_change) {
    adder_t a = {rl_loop_get_current(), NULL};
    rl_context_t c = {&a, NULL, NULL};
    rl_source_t *keep = tt_add_source("m", 0, "keep");
    rl_timer_t *t = rl_timer_create_timeout(rl_time_now(), 0, nested_with_adder_cb, &c);
    RLT_CHECK(keep && t);
    RLT_CHECK_EQ(rl_loop_add_timer(a.loop, t, "m"), 0);
    nested_passes_with_adder = 0;
    RLT_CHECK_EQ(rl_run_in_mode("m", 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(a.added != NULL);
    RLT_CHECK_EQ(nested_passes_with_adder, 1); /* one wait, to the nested run's timeout */
    RLT_CHECK(!rl_timer_is_armed(t));           /* fired once, dormant */
    rl_timer_invalidate(a.added);
    rl_release(a.added);
    rl_timer_invalidate(t);
    rl_release(t);
}

/* More due timers than the timer phase sorts without allocating, many with one fire date: they
 * fire in (date, order, scheduling) order, each once, in one pass. 150 take the in-place sort;
 * 1500 take the radix sort, and with every fifth removed before the pass the due part of the
 * heap is full of holes (lazy removal) that the phase must walk through. */
enum { MANY = 1500 };
typedef struct { int fired[MANY], n; } fire_log;
static fire_log the_log;
static void log_fire_id(rl_timer_t *t, void *info) {
    (void)t;
    the_log.fired[the_log.n++] = (int)(intptr_t)info;
}

static void fire_many(int n, bool remove_some) {
    static double date[MANY];
    static long order[MANY];
    static bool removed[MANY];
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *timers[MANY];
    double now = rl_time_now(), shared = now + 0.02;
    int expected = 0;
    the_log.n = 0;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    for (int i = 0; i < n; i++) {
        double asked = i % 3 == 0 ? now + 0.001 * (double)(i % 7) : shared; /* 2 in 3 share a date */
        order[i] = (long)((i * 7) % 5);
        rl_context_t c = {(void *)(intptr_t)i, NULL, NULL};
        rl_timer_t *t = timers[i] = rl_timer_create(asked, 0, order[i], log_fire_id, &c);
        RLT_CHECK(t != NULL);
        date[i] = rl_timer_get_next_fire_date(t); /* a date in the past became its creation time */
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    }
    for (int i = 0; i < n; i++) {
        removed[i] = remove_some && i % 5 == 2;
        if (removed[i]) RLT_CHECK_EQ(rl_loop_remove_timer(loop, timers[i], DEF), 0);
        else expected++;
        rl_release(timers[i]);
    }
    tt_sleep(0.03);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(the_log.n, expected);
    for (int k = 0; k < the_log.n; k++) {
        int a = k ? the_log.fired[k - 1] : -1, b = the_log.fired[k];
        /* scheduled in index order, so a tie of date and order goes by index */
        bool in_order = a < 0 || date[a] < date[b] || (date[a] == date[b] && (order[a] < order[b] ||
                                                        (order[a] == order[b] && a < b)));
        if (!in_order || removed[b]) {
            rlt_fail(__FILE__, __LINE__, "timer %d fired after %d%s", b, a, removed[b] ? " (it was removed)" : "");
            break;
        }
    }
    /* Only the keep-alive timer is left: the holes the fired ones left are no timer's date. */
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, DEF) > now + 1000);
}

RLT_TEST(many_due_timers_fire_by_date_then_order_then_scheduling) { fire_many(150, false); }
RLT_TEST(thousands_of_due_timers_fire_in_order_through_removed_ones) { fire_many(MANY, true); }

/* A batch armed for one date (from the loop's time, which reads no clock: every date the same)
 * and of one order: a tie the radix sort breaks by seq alone. They fire in the order they were
 * armed, which the shuffle makes unlike their order of creation and their places in the heap. */
RLT_TEST(a_long_run_of_one_date_fires_in_the_order_it_was_armed) {
    enum { N = 600 };
    static int armed[N];
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *timers[N];
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    for (int i = 0; i < N; i++) {
        rl_context_t c = {(void *)(intptr_t)i, NULL, NULL};
        RLT_CHECK((timers[i] = rl_timer_create_timeout(INFINITY, 0, log_fire_id, &c)) != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, timers[i], DEF), 0);
        armed[i] = i;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = N - 1; i > 0; i--) { /* a fixed shuffle */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1)), k = armed[i];
        armed[i] = armed[j];
        armed[j] = k;
    }
    for (int k = 0; k < N; k++) RLT_CHECK_EQ(rl_timer_rearm_from_loop_time(timers[armed[k]], 0), 0);
    double date = rl_timer_get_next_fire_date(timers[0]);
    for (int i = 0; i < N; i++) RLT_CHECK(rl_timer_get_next_fire_date(timers[i]) == date);
    the_log.n = 0;
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(the_log.n, N);
    for (int k = 0; k < the_log.n; k++)
        if (the_log.fired[k] != armed[k]) {
            rlt_fail(__FILE__, __LINE__, "fire %d was timer %d, armed %d-th was %d", k, the_log.fired[k], k, armed[k]);
            break;
        }
    for (int i = 0; i < N; i++) {
        rl_timer_invalidate(timers[i]);
        rl_release(timers[i]);
    }
}

/* A timer in three modes is one object with chained entries: removing it from the middle mode
 * keeps the others, and it fires once per run of each mode it is still in. */
RLT_TEST(timer_in_three_modes_leaves_one_and_keeps_the_others) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = rl_timer_create(rl_time_now(), 0.001, 0, tt_timer_cb, NULL);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "a"), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "b"), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "c"), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "b"), -EEXIST);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "b"), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, "a"));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "b"));
    RLT_CHECK(rl_loop_contains_timer(loop, t, "c"));
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "a"), 0); /* the inline entry goes, c's stays */
    RLT_CHECK(rl_loop_contains_timer(loop, t, "c"));
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "a"), 0);    /* and comes back */
    double when = rl_timer_get_next_fire_date(t);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "a") == when);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "c") == when);
    RLT_CHECK_EQ(rl_run_in_mode("c", 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(rl_timer_get_next_fire_date(t) > when); /* fired in c, moved in both */
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "a") == rl_timer_get_next_fire_date(t));
    rl_timer_invalidate(t);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "a"));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "c"));
    rl_release(t);
}

/* ---- a timer removed by name from its last mode while in the common set ---------------------- */

typedef struct {
    rl_timer_t *other;
    int first, other_fired;
} idle_case;

static void remove_other_by_name(rl_timer_t *t, void *info) {
    (void)t;
    idle_case *c = info;
    c->first++;
    RLT_CHECK_EQ(rl_loop_remove_timer(rl_loop_get_current(), c->other, RL_DEFAULT_MODE), 0);
}

static void count_other(rl_timer_t *t, void *info) {
    (void)t;
    ((idle_case *)info)->other_fired++;
}

/* As in CF (a timer whose last mode goes has no run loop): the pass that took both as due fires
 * the first, whose callout removes the second from the default mode, its only mode, by name; the
 * second stays in the common set but must not fire. Added back to a mode, it fires again. */
RLT_TEST(timer_removed_from_its_last_mode_while_common_does_not_fire) {
    rl_loop_t *loop = rl_loop_get_current();
    idle_case c = {0};
    rl_context_t ctx = {.info = &c};
    double now = rl_time_now();
    rl_timer_t *first = rl_timer_create(now - 1, 0, 1, remove_other_by_name, &ctx);
    c.other = rl_timer_create(now - 1, 0, 2, count_other, &ctx);
    RLT_CHECK(first && c.other);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, first, RL_DEFAULT_MODE), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, c.other, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(c.first, 1);
    RLT_CHECK_EQ(c.other_fired, 0);
    RLT_CHECK(rl_loop_contains_timer(loop, c.other, RL_COMMON_MODES));
    RLT_CHECK(!rl_loop_contains_timer(loop, c.other, RL_DEFAULT_MODE));
    RLT_CHECK(rl_timer_is_valid(c.other));
    /* Back in the common modes (it rejoins the one it left): due, it fires. */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, c.other, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(c.other_fired, 1);
    rl_timer_invalidate(first);
    rl_timer_invalidate(c.other);
    rl_release(first);
    rl_release(c.other);
}

/* ---- the header's timeout idiom: a repeating timer with an interval never reached ---------- */

static void dormant_timer(rl_timer_t *t, void *info) {
    (void)t;
    (*(int *)info)++;
    rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(timer_one_shot_set_date_inside_callout_is_dropped) {
    /* what the header says of rl_timer_set_next_fire_date in a one-shot's own callout */
    rl_loop_t *loop = rl_loop_get_current();
    int n = 0;
    rl_context_t c = { &n, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now(), 0, 0, dormant_timer, &c);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(n, 1);
    RLT_CHECK(!rl_timer_is_valid(t));
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t, rl_time_now()), -EINVAL);
    rl_release(t);
}

RLT_TEST(timer_far_interval_is_a_timeout_rearmed_after_it_fired) {
    rl_loop_t *loop = rl_loop_get_current();
    int n = 0;
    rl_context_t c = { &n, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.01, 1e15, 0, dormant_timer, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(n, 1);
    /* fired: valid, dormant at a date never reached, and the loop does not wake for it */
    RLT_CHECK(rl_timer_is_valid(t));
    RLT_CHECK(rl_timer_get_next_fire_date(t) > rl_time_now() + 1e14);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(n, 1);
    /* re-armed after it fired */
    RLT_CHECK_EQ(rl_timer_set_next_fire_date(t, rl_time_now() + 0.01), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(n, 2);
    rl_timer_invalidate(t);
    rl_release(t);
}

RLT_TEST(timer_set_next_fire_in_rearms_relative_to_now) {
    rl_loop_t *loop = rl_loop_get_current();
    int n = 0;
    rl_context_t c = { &n, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 3600, 1e15, 0, dormant_timer, &c);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    double before = rl_time_now();
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, 0.02), 0);
    double date = rl_timer_get_next_fire_date(t);
    RLT_CHECK(date >= before + 0.02 && date <= rl_time_now() + 0.02);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(n, 1);
    RLT_CHECK(rl_time_now() >= before + 0.02);
    /* after it fired (dormant), again */
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, 0), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(n, 2);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, INFINITY), 0);
    RLT_CHECK(rl_timer_get_next_fire_date(t) == INFINITY);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, -1), -EINVAL);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, NAN), -EINVAL);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(NULL, 1), -EINVAL);
    rl_timer_invalidate(t);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, 1), -EINVAL);
    rl_release(t);
}
