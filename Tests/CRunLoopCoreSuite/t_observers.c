/*
 * t_observers.c - observer order, non-repeating observers, activity masks, removing and
 * invalidating observers inside callouts, no re-entry during the observer's own nested run.
 */
#include "ttrace.h"

#define DEF RL_DEFAULT_MODE

RLT_TEST(observer_called_in_ascending_order) {
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_observer(DEF, RL_BEFORE_TIMERS | RL_EXIT, 5, "c") != NULL);
    RLT_CHECK(tt_add_observer(DEF, RL_BEFORE_TIMERS | RL_EXIT, -1, "a") != NULL);
    RLT_CHECK(tt_add_observer(DEF, RL_BEFORE_TIMERS | RL_EXIT, 2, "b") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("aT bT cT aX bX cX");
}

RLT_TEST(observer_called_once_per_pass) {
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_observer(DEF, RL_BEFORE_SOURCES, 0, "") != NULL);
    for (int i = 0; i < 3; i++) RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("S S S");
}

static void count_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)o;
    tt("%c:%s", tt_act(act), atomic_load(&((tt_count_t *)info)->retains) == 1 ? "ok" : "bad");
}

RLT_TEST(observer_non_repeating_invalidated_after_first_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_count_t cnt;
    atomic_init(&cnt.retains, 0);
    atomic_init(&cnt.releases, 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_context_t c = { &cnt, tt_count_retain, tt_count_release };
    rl_observer_t *o = rl_observer_create(RL_BEFORE_TIMERS | RL_BEFORE_SOURCES, false, 0,
                                          count_obs, &c);
    RLT_CHECK(o != NULL);
    RLT_CHECK(!rl_observer_does_repeat(o));
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, DEF), 0);
    rl_retain(o);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(!rl_observer_is_valid(o));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, DEF));
    rl_release(o);
    RLT_CHECK_EQ(atomic_load(&cnt.releases), 0); /* our creation reference is still held */
    rl_release(o);
    RLT_CHECK_EQ(atomic_load(&cnt.retains), 1);
    RLT_CHECK_EQ(atomic_load(&cnt.releases), 1);
    TT_EXPECT("T:ok");
}

RLT_TEST(observer_activity_mask_waiting_only) {
    RLT_CHECK(tt_add_observer(DEF, RL_BEFORE_WAITING | RL_AFTER_WAITING, 0, "") != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() + 0.03, 0, 0, tt_stop_cb, "t") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    TT_EXPECT("W A t");
}

RLT_TEST(observer_activity_mask_entry_exit_only) {
    RLT_CHECK(tt_add_observer(DEF, RL_ENTRY | RL_EXIT, 0, "") != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() + 0.03, 0, 0, NULL, "t") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("E t X");
}

static void remove_self_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)info;
    tt("%c", tt_act(act));
    rl_loop_remove_observer(rl_loop_get_current(), o, RL_DEFAULT_MODE);
}

RLT_TEST(observer_remove_self_inside_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_observer_t *o = rl_observer_create(RL_BEFORE_TIMERS | RL_BEFORE_SOURCES | RL_EXIT, true, 0,
                                          remove_self_obs, NULL);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("T");
    RLT_CHECK(rl_observer_is_valid(o));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, DEF));
    rl_release(o);
}

static void invalidate_other_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)o;
    tt("1%c", tt_act(act));
    rl_observer_invalidate((rl_observer_t *)info);
}

RLT_TEST(observer_invalidate_other_inside_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_observer_t *two = tt_add_observer(DEF, RL_BEFORE_TIMERS | RL_EXIT, 2, "2");
    RLT_CHECK(two != NULL);
    rl_retain(two);
    rl_context_t c = { two, NULL, NULL };
    rl_observer_t *one = rl_observer_create(RL_BEFORE_TIMERS, true, 1, invalidate_other_obs, &c);
    RLT_CHECK(one != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, one, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("1T");
    RLT_CHECK(!rl_observer_is_valid(two));
    RLT_CHECK(!rl_loop_contains_observer(loop, two, DEF));
    rl_release(one);
    rl_release(two);
}

static void remove_other_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)o;
    tt("1%c", tt_act(act));
    rl_loop_remove_observer(rl_loop_get_current(), (rl_observer_t *)info, RL_DEFAULT_MODE);
}

RLT_TEST(observer_removed_by_another_misses_later_activities) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_observer_t *two = tt_add_observer(DEF, RL_BEFORE_SOURCES | RL_EXIT, 2, "2");
    RLT_CHECK(two != NULL);
    rl_retain(two);
    rl_context_t c = { two, NULL, NULL };
    rl_observer_t *one = rl_observer_create(RL_BEFORE_TIMERS, true, 1, remove_other_obs, &c);
    RLT_CHECK(one != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, one, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("1T");
    RLT_CHECK(rl_observer_is_valid(two));
    RLT_CHECK(!rl_loop_contains_observer(loop, two, DEF));
    rl_release(one);
    rl_release(two);
}

typedef struct { int depth; } nest_t;

static void nesting_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)o;
    nest_t *n = info;
    tt("1%c", tt_act(act));
    if (act == RL_BEFORE_TIMERS && n->depth == 0) {
        n->depth++;
        int r = rl_run_in_mode("inner", 0, false);
        tt("r%d", r);
        n->depth--;
    }
}

RLT_TEST(observer_not_reentered_during_its_own_nested_run) {
    rl_loop_t *loop = rl_loop_get_current();
    nest_t n = { 0 };
    rl_context_t c = { &n, NULL, NULL };
    rl_observer_t *one = rl_observer_create(RL_ENTRY | RL_BEFORE_TIMERS | RL_EXIT, true, 1,
                                            nesting_obs, &c);
    RLT_CHECK(one != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, one, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, one, "inner"), 0);
    RLT_CHECK(tt_add_observer("inner", RL_ENTRY | RL_BEFORE_TIMERS | RL_EXIT, 2, "2") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_keepalive("inner") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("1E 1T 2E 2T 2X r3 1X");
    /* once its callout has returned it is called in the inner mode again */
    tt_reset();
    n.depth = 1;
    RLT_CHECK_EQ(rl_run_in_mode("inner", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("1E 2E 1T 2T 1X 2X");
    rl_release(one);
}

RLT_TEST(observer_getters) {
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING | RL_EXIT, true, -3, tt_observer_cb,
                                          NULL);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_observer_get_activities(o), RL_BEFORE_WAITING | RL_EXIT);
    RLT_CHECK(rl_observer_does_repeat(o));
    RLT_CHECK_EQ(rl_observer_get_order(o), -3);
    RLT_CHECK(rl_observer_is_valid(o));
    rl_observer_invalidate(o);
    RLT_CHECK(!rl_observer_is_valid(o));
    rl_release(o);
}

RLT_TEST(observer_in_common_modes_called_in_each_common_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_keepalive("m2") != NULL);
    RLT_CHECK(tt_keepalive("m3") != NULL);
    RLT_CHECK(tt_add_observer(RL_COMMON_MODES, RL_ENTRY, 0, "") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode("m3", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("E E");
}

RLT_TEST(observer_belongs_to_one_loop) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_live_t live;
    tt_live_start(&live); /* another thread's loop, alive until tt_live_stop */
    rl_loop_t *other = live.loop;
    rl_observer_t *o = rl_observer_create(RL_ENTRY, true, 0, tt_observer_cb, NULL);
    int r[4] = { 1, 1, 1, 1 };
    bool other_has = true;
    if (o && other) {
        r[0] = rl_loop_add_observer(loop, o, DEF);
        r[1] = rl_loop_add_observer(loop, o, "m2");
        r[2] = rl_loop_add_observer(loop, o, "m2");
        r[3] = rl_loop_add_observer(other, o, DEF);
        other_has = rl_loop_contains_observer(other, o, DEF);
        rl_observer_invalidate(o);
    }
    tt_live_stop(&live);
    RLT_CHECK(other != NULL && other != loop);
    RLT_CHECK(o != NULL);
    rl_release(o);
    RLT_CHECK_EQ(r[0], 0);
    RLT_CHECK_EQ(r[1], 0);
    RLT_CHECK_EQ(r[2], -EEXIST);
    RLT_CHECK_EQ(r[3], -EBUSY);
    RLT_CHECK(!other_has);
}

static void stop_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)o; (void)info;
    tt("%c", tt_act(act));
    if (act == RL_AFTER_WAITING) rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(observer_may_stop_the_loop) {
    rl_observer_t *o = rl_observer_create(RL_AFTER_WAITING | RL_EXIT, true, 0, stop_obs, NULL);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(rl_loop_get_current(), o, DEF), 0);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() + 0.03, 0, 0, NULL, "t") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    /* the timer still fires in the pass whose AFTER_WAITING asked to stop */
    TT_EXPECT("A t X");
    rl_release(o);
}

/* Equal orders: the order added to the mode (CF), and a mode made common takes the common
 * observers after its own, in the order they were created. */
RLT_TEST(observer_equal_orders_run_in_the_order_added_to_the_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t a = tt_label("A"), b = tt_label("B"), c = tt_label("C");
    rl_observer_t *oa = rl_observer_create(RL_ENTRY, true, 7, tt_observer_cb, &a);
    rl_observer_t *ob = rl_observer_create(RL_ENTRY, true, 7, tt_observer_cb, &b);
    rl_observer_t *oc = rl_observer_create(RL_ENTRY, true, 7, tt_observer_cb, &c);
    RLT_CHECK(oa && ob && oc);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, ob, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, oa, RL_COMMON_MODES), 0);
    RLT_CHECK(tt_keepalive(RL_DEFAULT_MODE) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, oc, "obs.m"), 0);
    RLT_CHECK(tt_keepalive("obs.m") != NULL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "obs.m"), 0);
    RLT_CHECK_EQ(rl_run_in_mode("obs.m", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("BE AE CE AE BE");
    rl_observer_invalidate(oa);
    rl_observer_invalidate(ob);
    rl_observer_invalidate(oc);
    rl_release(oa);
    rl_release(ob);
    rl_release(oc);
}
