/*
 * t_modes.c - common modes (RL_DEFAULT_MODE is common, items in RL_COMMON_MODES join modes made
 * common later, contains/remove with RL_COMMON_MODES), mode names compared by content, unknown
 * and observer-only modes are empty.
 */
#include "ttrace.h"

#define DEF RL_DEFAULT_MODE

RLT_TEST(modes_default_mode_is_common) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = tt_add_timer(RL_COMMON_MODES, rl_time_now() + 0.02, 0, 0, NULL, "t");
    RLT_CHECK(t != NULL);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(rl_loop_contains_timer(loop, t, RL_COMMON_MODES));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "not.common"));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("t");
}

RLT_TEST(modes_common_items_join_modes_made_common_later) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = tt_add_timer(RL_COMMON_MODES, rl_time_now() + 1000, 0, 0, NULL, "t");
    rl_source_t *s = tt_add_source(RL_COMMON_MODES, 0, "s");
    rl_observer_t *o = tt_add_observer(RL_COMMON_MODES, RL_ENTRY, 0, "");
    RLT_CHECK(t && s && o);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "later"));
    RLT_CHECK(!rl_loop_contains_source(loop, s, "later"));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, "later"));
    RLT_CHECK_EQ(rl_run_in_mode("later", 0, false), RL_RUN_FINISHED); /* still empty */
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "later"), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, "later"));
    RLT_CHECK(rl_loop_contains_source(loop, s, "later"));
    RLT_CHECK(rl_loop_contains_observer(loop, o, "later"));
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode("later", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("E s");
    /* items added to common modes afterwards join it too */
    rl_timer_t *u = tt_add_timer(RL_COMMON_MODES, rl_time_now() - 1, 0, 0, NULL, "u");
    RLT_CHECK(u != NULL);
    RLT_CHECK(rl_loop_contains_timer(loop, u, "later"));
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode("later", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("E s E u");
}

RLT_TEST(modes_contains_with_common_modes) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    rl_timer_t *common = tt_add_timer(RL_COMMON_MODES, rl_time_now() + 1000, 0, 0, NULL, "c");
    rl_timer_t *only_def = tt_add_timer(DEF, rl_time_now() + 1000, 0, 0, NULL, "d");
    RLT_CHECK(common && only_def);
    RLT_CHECK(rl_loop_contains_timer(loop, common, RL_COMMON_MODES));
    RLT_CHECK(rl_loop_contains_timer(loop, common, DEF));
    RLT_CHECK(rl_loop_contains_timer(loop, common, "m2"));
    /* an item added to the default mode only is in that mode, not in the common modes */
    RLT_CHECK(rl_loop_contains_timer(loop, only_def, DEF));
    RLT_CHECK(!rl_loop_contains_timer(loop, only_def, "m2"));
    RLT_CHECK(!rl_loop_contains_timer(loop, only_def, RL_COMMON_MODES));
    /* adding to common modes again is -EEXIST */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, common, RL_COMMON_MODES), -EEXIST);
}

RLT_TEST(modes_remove_from_common_modes_removes_from_all) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m3"), 0);
    rl_observer_t *o = tt_add_observer(RL_COMMON_MODES, RL_ENTRY, 0, "");
    RLT_CHECK(o != NULL);
    rl_retain(o);
    RLT_CHECK(rl_loop_contains_observer(loop, o, "m3"));
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, RL_COMMON_MODES), 0);
    RLT_CHECK(!rl_loop_contains_observer(loop, o, DEF));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, "m2"));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, "m3"));
    RLT_CHECK(!rl_loop_contains_observer(loop, o, RL_COMMON_MODES));
    RLT_CHECK_EQ(rl_loop_remove_observer(loop, o, RL_COMMON_MODES), -ENOENT);
    /* and a mode made common afterwards does not get it */
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m4"), 0);
    RLT_CHECK(!rl_loop_contains_observer(loop, o, "m4"));
    RLT_CHECK(rl_observer_is_valid(o));
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("");
    rl_release(o);
}

RLT_TEST(modes_remove_from_one_common_mode_keeps_the_others) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    rl_source_t *s = tt_add_source(RL_COMMON_MODES, 0, "s");
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "m2"), 0);
    RLT_CHECK(!rl_loop_contains_source(loop, s, "m2"));
    RLT_CHECK(rl_loop_contains_source(loop, s, DEF));
    rl_source_signal(s);
    RLT_CHECK(tt_keepalive("m2") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("");
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("s");
}

RLT_TEST(modes_names_compared_by_content) {
    rl_loop_t *loop = rl_loop_get_current();
    char *name = strdup("modes.heap.name");
    RLT_CHECK(name != NULL);
    rl_timer_t *t = tt_add_timer(name, rl_time_now() + 0.02, 0, 0, NULL, "t");
    RLT_CHECK(t != NULL);
    rl_retain(t);
    memset(name, 'x', strlen(name)); /* the loop must have kept its own copy */
    free(name);
    char other[] = "modes.heap.name";
    RLT_CHECK(rl_loop_contains_timer(loop, t, other));
    RLT_CHECK(rl_loop_contains_timer(loop, t, "modes.heap.name"));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "modes.heap.nam"));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "modes.heap.name2"));
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, other), -EEXIST);
    char def[32];
    snprintf(def, sizeof def, "%s", "kCFRunLoopDefaultMode");
    RLT_CHECK(def != DEF);
    RLT_CHECK(tt_add_timer(def, rl_time_now() - 1, 0, 0, NULL, "d") != NULL);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, DEF) > 0);
    RLT_CHECK_EQ(rl_run_in_mode(other, 10.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("t d");
    rl_release(t);
}

RLT_TEST(modes_common_modes_name_compared_by_content) {
    rl_loop_t *loop = rl_loop_get_current();
    char common[32];
    snprintf(common, sizeof common, "%s", "kCFRunLoopCommonModes");
    RLT_CHECK(common != RL_COMMON_MODES);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    rl_timer_t *t = tt_add_timer(common, rl_time_now() + 1000, 0, 0, NULL, "t");
    RLT_CHECK(t != NULL);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(rl_loop_contains_timer(loop, t, "m2"));
    RLT_CHECK(rl_loop_contains_timer(loop, t, RL_COMMON_MODES));
    RLT_CHECK_EQ(rl_run_in_mode(common, 0, false), -EINVAL);
    size_t n = 0;
    char **names = rl_loop_copy_all_modes(loop, &n);
    RLT_CHECK(names != NULL);
    size_t as_mode = tt_count_name(names, n, "kCFRunLoopCommonModes");
    tt_free_names(names, n);
    RLT_CHECK_EQ(as_mode, 0);
}

RLT_TEST(modes_unknown_mode_is_empty) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_observer(DEF, RL_ALL_ACTIVITIES, 0, "") != NULL);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "modes.unknown") == 0);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode("modes.unknown", 10.0, false), RL_RUN_FINISHED);
    RLT_CHECK(rl_time_now() - t0 < 2.0);
    TT_EXPECT("");
}

RLT_TEST(modes_mode_with_only_observers_is_empty) {
    RLT_CHECK(tt_add_observer("obs.only", RL_ALL_ACTIVITIES, 0, "") != NULL);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode("obs.only", 10.0, false), RL_RUN_FINISHED);
    RLT_CHECK(rl_time_now() - t0 < 2.0);
    TT_EXPECT("");
    /* a timer makes it a real mode; the observers are called then */
    RLT_CHECK(tt_add_timer("obs.only", rl_time_now() - 1, 0, 0, NULL, "t") != NULL);
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode("obs.only", 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("E T S W A t X");
}

RLT_TEST(modes_marking_common_again_is_a_noop) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    rl_source_t *s = tt_add_source(RL_COMMON_MODES, 0, "s");
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    RLT_CHECK(rl_loop_contains_source(loop, s, "m2"));
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, "m2"), -EEXIST);
    size_t n = 0;
    char **names = rl_loop_copy_all_modes(loop, &n);
    RLT_CHECK(names != NULL);
    size_t d = tt_count_name(names, n, DEF), m2 = tt_count_name(names, n, "m2");
    tt_free_names(names, n);
    RLT_CHECK_EQ(d, 1);
    RLT_CHECK_EQ(m2, 1);
    /* still one perform per signal in m2 */
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("s");
}

RLT_TEST(modes_item_in_a_plain_mode_stays_out_of_common_modes) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    rl_source_t *s = tt_add_source(DEF, 0, "s");
    RLT_CHECK(s != NULL);
    RLT_CHECK(!rl_loop_contains_source(loop, s, "m2"));
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m3"), 0);
    RLT_CHECK(!rl_loop_contains_source(loop, s, "m3"));
    rl_source_signal(s);
    RLT_CHECK(tt_keepalive("m2") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("");
}
