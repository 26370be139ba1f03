/*
 * t_loop.c - runs, results, pass order, poll versus wait, timeouts, stop, nested runs, rl_run,
 * blocks, copy_* queries, counters, main versus current loop, teardown at thread exit.
 */
#include "ttrace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEF RL_DEFAULT_MODE

/* ---- results, empty modes ------------------------------------------------------------------ */

RLT_TEST(loop_empty_mode_finishes_at_once_without_callouts) {
    RLT_CHECK(tt_add_observer(DEF, RL_ALL_ACTIVITIES, 0, "") != NULL);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_FINISHED);
    RLT_CHECK(rl_time_now() - t0 < 2.0);
    TT_EXPECT("");
}

RLT_TEST(loop_unknown_mode_finishes_at_once) {
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_observer(RL_COMMON_MODES, RL_ALL_ACTIVITIES, 0, "") != NULL);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode("loop.no.such.mode", 10.0, false), RL_RUN_FINISHED);
    RLT_CHECK(rl_time_now() - t0 < 2.0);
    TT_EXPECT("");
}

RLT_TEST(loop_pass_order_with_source_and_due_timer) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_add_observer(DEF, RL_ALL_ACTIVITIES, 0, "") != NULL);
    rl_source_t *s = tt_add_source(DEF, 0, "src");
    RLT_CHECK(s != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() - 1.0, 0, 0, tt_stop_cb, "tmr") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, tt_block_cb, "blk"), 0);
    rl_source_signal(s);
    tt_sleep(0.02);
    /* The handled source makes step 7 a poll (no BEFORE_WAITING), the due timer fires in step 9,
     * and the stop is seen at the exit check. */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    TT_EXPECT("E T S blk src tmr X");
}

RLT_TEST(loop_pass_order_when_waiting_for_timer) {
    RLT_CHECK(tt_add_observer(DEF, RL_ALL_ACTIVITIES, 0, "") != NULL);
    double t0 = rl_time_now();
    RLT_CHECK(tt_add_timer(DEF, t0 + 0.05, 0, 0, tt_stop_cb, "tmr") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    double el = rl_time_now() - t0;
    TT_EXPECT("E T S W A tmr X");
    TT_GE(el, 0.05);
    RLT_CHECK(el < 5.0);
}

RLT_TEST(loop_poll_has_no_waiting_callouts) {
    RLT_CHECK(tt_add_observer(DEF, RL_ALL_ACTIVITIES, 0, "") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("E T S X");
    tt_reset();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, -1.0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("E T S X");
}

RLT_TEST(loop_poll_still_fires_due_timer) {
    RLT_CHECK(tt_add_observer(DEF, RL_ALL_ACTIVITIES, 0, "") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() - 0.5, 0, 0, NULL, "tmr") != NULL);
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("E T S tmr X");
}

RLT_TEST(loop_timeout_is_honoured) {
    int waits = 0;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_observer(DEF, RL_BEFORE_WAITING, 0, "") != NULL);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.2, false), RL_RUN_TIMED_OUT);
    double el = rl_time_now() - t0;
    TT_GE(el, 0.199);
    RLT_CHECK(el < 3.0);
    for (const char *p = tt_get(); *p; p++) waits += *p == 'W';
    RLT_CHECK(waits >= 1);
}

RLT_TEST(loop_return_after_source_handled) {
    rl_source_t *s = tt_add_source(DEF, 0, "src");
    RLT_CHECK(s != NULL);
    rl_source_signal(s);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK(rl_time_now() - t0 < 3.0);
    TT_EXPECT("src");
}

/* ---- stop ---------------------------------------------------------------------------------- */

static void perform_stop(void *info) {
    tt("%s", (const char *)info);
    rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(loop_exit_check_order) {
    rl_source_context_t c = { "p", NULL, NULL, NULL, NULL, perform_stop };
    rl_source_t *s = rl_source_create(0, &c);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    /* handled + return_after beats timeout and stop */
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, true), RL_RUN_HANDLED_SOURCE);
    /* timed out (a poll) beats stop */
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    /* stop with time left */
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    TT_EXPECT("p p p");
    rl_source_invalidate(s);
    rl_release(s);
}

RLT_TEST(loop_stop_beats_finished) {
    /* the only timer stops the loop: the mode is empty after it, but stop is checked first */
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() + 0.02, 0, 0, tt_stop_cb, "t") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("t");
}

RLT_TEST(loop_stop_while_not_running_is_forgotten) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_loop_stop(loop);
    rl_loop_stop(loop);
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.15, false), RL_RUN_TIMED_OUT);
    TT_GE(rl_time_now() - t0, 0.149);
}

RLT_TEST(loop_stop_left_over_from_a_timed_out_run_is_forgotten) {
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() - 1.0, 0, 0, tt_stop_cb, "t") != NULL);
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("t");
    double t0 = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.15, false), RL_RUN_TIMED_OUT);
    TT_GE(rl_time_now() - t0, 0.149);
}

static void stop_at_entry_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)o; (void)info;
    tt("%c", tt_act(act));
    if (act == RL_ENTRY) rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(loop_stop_inside_entry_observer_returns_before_any_pass) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_stats_t a, b;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_observer_t *o = rl_observer_create(RL_ALL_ACTIVITIES, true, 0, stop_at_entry_obs, NULL);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, DEF), 0);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &a), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &b), 0);
    TT_EXPECT("E X");
    RLT_CHECK_EQ(b.passes - a.passes, 0);
    rl_release(o);
}

static void *stop_when_sleeping(void *arg) {
    rl_loop_t *loop = arg;
    if (tt_wait_sleeping(loop, 5.0)) rl_loop_stop(loop);
    return NULL;
}

RLT_TEST(loop_stop_from_another_thread_wakes_it) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    pthread_t th = tt_spawn(stop_when_sleeping, loop);
    double t0 = rl_time_now();
    int r = rl_run_in_mode(DEF, 20.0, false);
    double el = rl_time_now() - t0;
    tt_join(th);
    RLT_CHECK_EQ(r, RL_RUN_STOPPED);
    RLT_CHECK(el < 8.0);
}

/* ---- nested runs --------------------------------------------------------------------------- */

static void trace_mode(const char *tag) {
    char *m = rl_loop_copy_current_mode(rl_loop_get_current());
    tt("%s:%s", tag, m ? m : "(null)");
    free(m);
}

static void entry_exit_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)o; (void)info;
    trace_mode(act == RL_ENTRY ? "E" : act == RL_EXIT ? "X" : "?");
}

static void inner_stop_timer(rl_timer_t *t, void *info) {
    (void)t; (void)info;
    trace_mode("B");
    rl_loop_stop(rl_loop_get_current());
}

static void outer_nesting_timer(rl_timer_t *t, void *info) {
    (void)t; (void)info;
    trace_mode("A");
    int r = rl_run_in_mode("inner", 10.0, false);
    tt("R:%d", r);
    trace_mode("A2");
}

RLT_TEST(loop_nested_runs_have_own_entry_exit_and_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_observer_t *o = rl_observer_create(RL_ENTRY | RL_EXIT, true, 0, entry_exit_obs, NULL);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, "inner"), 0);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() + 0.01, 0, 0, outer_nesting_timer, NULL) != NULL);
    RLT_CHECK(tt_add_timer("inner", rl_time_now() + 0.05, 0, 0, inner_stop_timer, NULL) != NULL);
    RLT_CHECK(rl_loop_copy_current_mode(loop) == NULL);
    /* the stop ends only the inner run; the outer one finishes when its last timer is gone */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_FINISHED);
    TT_EXPECT("E:kCFRunLoopDefaultMode A:kCFRunLoopDefaultMode E:inner B:inner X:inner R:2 "
              "A2:kCFRunLoopDefaultMode X:kCFRunLoopDefaultMode");
    RLT_CHECK(rl_loop_copy_current_mode(loop) == NULL);
    rl_release(o);
}

static void nested_poll_timer(rl_timer_t *t, void *info) {
    (void)t; (void)info;
    tt("in");
    tt("r%d", rl_run_in_mode(DEF, 0, false));
    tt("out");
}

RLT_TEST(loop_nested_run_in_same_mode) {
    RLT_CHECK(tt_add_observer(DEF, RL_ENTRY | RL_EXIT, 0, "") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() - 1.0, 0, 0, nested_poll_timer, NULL) != NULL);
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("E in E X r3 out X");
}

/* ---- rl_run -------------------------------------------------------------------------------- */

RLT_TEST(loop_rl_run_until_finished) {
    double now = rl_time_now();
    RLT_CHECK(tt_add_timer(DEF, now + 0.06, 0, 0, NULL, "b") != NULL);
    RLT_CHECK(tt_add_timer(DEF, now + 0.02, 0, 0, NULL, "a") != NULL);
    RLT_CHECK_EQ(rl_run(), RL_RUN_FINISHED);
    TT_EXPECT("a b");
    TT_GE(rl_time_now() - now, 0.06);
}

static void stop_on_third(rl_timer_t *t, void *info) {
    (void)t;
    int *n = info;
    tt("f%d", ++*n);
    if (*n == 3) rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(loop_rl_run_until_stopped) {
    int n = 0;
    rl_context_t c = { &n, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.02, 0.02, 0, stop_on_third, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_run(), RL_RUN_STOPPED);
    TT_EXPECT("f1 f2 f3");
    RLT_CHECK(rl_timer_is_valid(t));
    rl_timer_invalidate(t);
    rl_release(t);
}

/* ---- blocks -------------------------------------------------------------------------------- */

static void block_queue_more(void *arg) {
    tt("%s", (const char *)arg);
    rl_loop_perform(rl_loop_get_current(), DEF, tt_block_cb, "c");
}

RLT_TEST(loop_blocks_run_once_in_order) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, block_queue_more, "a"), 0);
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, tt_block_cb, "b"), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("a b c");
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("a b c");
}

RLT_TEST(loop_block_for_other_mode_waits_for_it) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_keepalive("m2") != NULL);
    RLT_CHECK_EQ(rl_loop_perform(loop, "m2", tt_block_cb, "x"), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("");
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("x");
}

RLT_TEST(loop_common_mode_block_runs_once_in_a_common_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_keepalive("m2") != NULL);
    RLT_CHECK(tt_keepalive("m3") != NULL);
    RLT_CHECK_EQ(rl_loop_perform(loop, RL_COMMON_MODES, tt_block_cb, "common"), 0);
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, tt_block_cb, "def"), 0);
    RLT_CHECK_EQ(rl_run_in_mode("m3", 0, false), RL_RUN_TIMED_OUT); /* not common */
    TT_EXPECT("");
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT); /* common, not default */
    TT_EXPECT("common");
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("common def");
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("common def");
}

static void perform_queue_block(void *info) {
    tt("%s", (const char *)info);
    rl_loop_perform(rl_loop_get_current(), DEF, tt_block_cb, "blk");
}

RLT_TEST(loop_block_queued_by_source_runs_before_timers) {
    rl_source_context_t c = { "src", NULL, NULL, NULL, NULL, perform_queue_block };
    rl_source_t *s = rl_source_create(0, &c);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() - 1.0, 0, 0, NULL, "tmr") != NULL);
    tt_sleep(0.01);
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("src blk tmr");
    rl_source_invalidate(s);
    rl_release(s);
}

static void block_stop(void *arg) {
    tt("%s", (const char *)arg);
    rl_loop_stop(rl_loop_get_current());
}

static void timer_queue_stop_block(rl_timer_t *t, void *info) {
    (void)t;
    tt("%s", (const char *)info);
    rl_loop_perform(rl_loop_get_current(), DEF, block_stop, "blk");
}

RLT_TEST(loop_block_queued_by_timer_runs_in_same_pass) {
    RLT_CHECK(tt_add_observer(DEF, RL_ALL_ACTIVITIES, 0, "") != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() + 0.03, 0, 0, timer_queue_stop_block, "tmr") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    TT_EXPECT("E T S W A tmr blk X");
}

/* ---- copy_* queries ------------------------------------------------------------------------ */

static void trace_mode_timer(rl_timer_t *t, void *info) { (void)t; (void)info; trace_mode("in"); }

RLT_TEST(loop_copy_current_mode_inside_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(rl_loop_copy_current_mode(loop) == NULL);
    char mode[] = "loop.mode.q";
    RLT_CHECK(tt_add_timer(mode, rl_time_now() - 1.0, 0, 0, trace_mode_timer, NULL) != NULL);
    RLT_CHECK(tt_keepalive(mode) != NULL);
    tt_sleep(0.01);
    RLT_CHECK_EQ(rl_run_in_mode("loop.mode.q", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("in:loop.mode.q");
    RLT_CHECK(rl_loop_copy_current_mode(loop) == NULL);
}

RLT_TEST(loop_copy_all_modes_lists_used_modes_once) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_keepalive("modeA") != NULL);
    RLT_CHECK(tt_add_observer("modeB", RL_ENTRY, 0, "") != NULL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "modeC"), 0);
    RLT_CHECK(tt_add_timer(RL_COMMON_MODES, rl_time_now() + 1000, 0, 0, NULL, "c") != NULL);
    size_t n = 0;
    char **names = rl_loop_copy_all_modes(loop, &n);
    RLT_CHECK(names != NULL);
    size_t d = tt_count_name(names, n, DEF), a = tt_count_name(names, n, "modeA"),
           b = tt_count_name(names, n, "modeB"), c = tt_count_name(names, n, "modeC"),
           common = tt_count_name(names, n, RL_COMMON_MODES);
    tt_free_names(names, n);
    RLT_CHECK_EQ(d, 1);
    RLT_CHECK_EQ(a, 1);
    RLT_CHECK_EQ(b, 1);
    RLT_CHECK_EQ(c, 1);
    RLT_CHECK_EQ(common, 0);
    RLT_CHECK_EQ(n, 4);
}

RLT_TEST(loop_copy_description_names_modes) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive("desc.mode.xyz") != NULL);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "desc.common.abc"), 0);
    RLT_CHECK(tt_add_source(RL_COMMON_MODES, 0, "s") != NULL);
    char *d = rl_loop_copy_description(loop);
    RLT_CHECK(d != NULL);
    bool has_x = strstr(d, "desc.mode.xyz") != NULL, has_c = strstr(d, "desc.common.abc") != NULL,
         has_def = strstr(d, DEF) != NULL;
    free(d);
    RLT_CHECK(has_x);
    RLT_CHECK(has_c);
    RLT_CHECK(has_def);
}

/* ---- counters ------------------------------------------------------------------------------ */

RLT_TEST(loop_stats_count_passes_waits_timers_sources) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_stats_t s0, s1, s2, s3;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_source_t *src = tt_add_source(DEF, 0, "src");
    RLT_CHECK(src != NULL);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &s0), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &s1), 0);
    RLT_CHECK_EQ(s1.passes - s0.passes, 1);
    RLT_CHECK_EQ(s1.waits - s0.waits, 0);
    RLT_CHECK_EQ(s1.timers_fired - s0.timers_fired, 0);
    RLT_CHECK_EQ(s1.sources_performed - s0.sources_performed, 0);

    rl_source_signal(src);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &s2), 0);
    RLT_CHECK_EQ(s2.passes - s1.passes, 1);
    RLT_CHECK_EQ(s2.sources_performed - s1.sources_performed, 1);

    /* Due 0.2 s from now and 30 ms of wait asked for: this thread may be held up (a loaded
     * machine, a sanitizer) for most of the time before the wait begins, and the wait still
     * shows. */
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() + 0.2, 0, 0, tt_stop_cb, "t") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &s3), 0);
    RLT_CHECK_EQ(s3.passes - s2.passes, 1);
    RLT_CHECK_EQ(s3.waits - s2.waits, 1);
    RLT_CHECK_EQ(s3.timers_fired - s2.timers_fired, 1);
    RLT_CHECK_EQ(s3.sources_performed - s2.sources_performed, 0);
    TT_GE(s3.time_waiting - s2.time_waiting, 0.03);
    RLT_CHECK(s3.time_waiting - s2.time_waiting < 5.0);
    TT_EXPECT("src t");
}

static void slow_timer(rl_timer_t *t, void *info) { (void)t; (void)info; tt_sleep(0.1); }

RLT_TEST(loop_stats_time_in_callouts) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_stats_t a, b;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(tt_add_timer(DEF, rl_time_now() - 1.0, 0, 0, slow_timer, NULL) != NULL);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &a), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &b), 0);
    TT_GE(b.time_in_callouts - a.time_in_callouts, 0.095);
    RLT_CHECK_EQ(b.timers_fired - a.timers_fired, 1);
}

static void *wake_when_sleeping(void *arg) {
    rl_loop_t *loop = arg;
    if (tt_wait_sleeping(loop, 5.0)) rl_loop_wakeup(loop);
    return NULL;
}

static void after_wait_stop(rl_observer_t *o, unsigned act, void *info) {
    (void)o;
    bool *waiting = info;
    if (rl_loop_is_waiting(rl_loop_get_current())) *waiting = true;
    tt("%c", tt_act(act));
    if (act == RL_AFTER_WAITING) rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(loop_wakeup_ends_a_wait_and_is_counted) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_stats_t a, b, c;
    bool waiting_in_callout = false;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_context_t ctx = { &waiting_in_callout, NULL, NULL };
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING | RL_AFTER_WAITING, true, 0,
                                          after_wait_stop, &ctx);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, DEF), 0);
    RLT_CHECK(!rl_loop_is_waiting(loop));
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &a), 0);
    pthread_t th = tt_spawn(wake_when_sleeping, loop);
    double t0 = rl_time_now();
    int r = rl_run_in_mode(DEF, 20.0, false);
    double el = rl_time_now() - t0;
    tt_join(th);
    RLT_CHECK_EQ(r, RL_RUN_STOPPED);
    RLT_CHECK(el < 8.0);
    TT_EXPECT("W A");
    RLT_CHECK(!waiting_in_callout);
    RLT_CHECK(!rl_loop_is_waiting(loop));
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &b), 0);
    RLT_CHECK_EQ(b.wakeups - a.wakeups, 1);
    RLT_CHECK_EQ(b.wakeup_writes - a.wakeup_writes, 1);
    RLT_CHECK_EQ(b.waits - a.waits, 1);
    /* a loop that does not sleep costs no write */
    rl_loop_wakeup(loop);
    rl_loop_wakeup(loop);
    rl_loop_wakeup(loop);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &c), 0);
    RLT_CHECK_EQ(c.wakeup_writes - b.wakeup_writes, 0);
    rl_observer_invalidate(o);
    rl_release(o);
}

/* ---- main versus current, teardown --------------------------------------------------------- */

typedef struct { rl_loop_t *current, *main; bool current_is_current, main_is_current; } loops_seen_t;

static void *see_loops(void *arg) {
    loops_seen_t *s = arg;
    s->current = rl_loop_get_current();
    s->main = rl_loop_get_main();
    s->current_is_current = rl_loop_is_current(s->current);
    s->main_is_current = rl_loop_is_current(s->main);
    return NULL;
}

RLT_TEST(loop_main_is_not_the_current_loop_of_a_secondary_thread) {
    rl_loop_t *cur = rl_loop_get_current(), *main_loop = rl_loop_get_main();
    RLT_CHECK(cur != NULL);
    RLT_CHECK(main_loop != NULL);
    RLT_CHECK(cur != main_loop);
    RLT_CHECK(rl_loop_get_current() == cur);
    RLT_CHECK(rl_loop_get_main() == main_loop);
    RLT_CHECK(rl_loop_is_current(cur));
    RLT_CHECK(!rl_loop_is_current(main_loop));
    loops_seen_t s = { 0 };
    tt_join(tt_spawn(see_loops, &s));
    RLT_CHECK(s.main == main_loop);
    RLT_CHECK(s.current != NULL);
    RLT_CHECK(s.current != cur);
    RLT_CHECK(s.current != main_loop);
    RLT_CHECK(s.current_is_current);
    RLT_CHECK(!s.main_is_current);
}

/* rl_loop_is_main: the main loop's, from any thread; in a child of fork, the forking thread's
 * loop's; and it never makes the main loop (a child forked by a thread with no loop has none). */
typedef struct { rl_loop_t *main, *own; bool main_is_main, own_is_main; } main_seen_t;

static void *see_main(void *arg) {
    main_seen_t *s = arg;
    s->own = rl_loop_get_current();
    s->main_is_main = rl_loop_is_main(s->main);
    s->own_is_main = rl_loop_is_main(s->own);
    return NULL;
}

static int open_fds(void) {
    int n = 0;
    for (int fd = 0; fd < 4096; fd++) n += fcntl(fd, F_GETFD) != -1;
    return n;
}

/* A thread with no loop forks: the child has no main loop, and asking makes none. */
static void *fork_without_a_loop(void *arg) {
    rl_loop_t *old_main = arg;
    pid_t pid = fork();
    if (pid == 0) {
        int before = open_fds();
        bool none = !rl_loop_is_main(old_main) && !rl_loop_is_main(NULL);
        bool made_none = open_fds() == before;
        rl_loop_t *made = rl_loop_get_main(); /* made now, the child's main thread's */
        _exit(none && made_none && made && made != old_main && rl_loop_is_main(made) &&
                      rl_loop_get_current() == made && open_fds() > before
                  ? 0
                  : 1);
    }
    return (void *)(intptr_t)pid;
}

RLT_TEST(loop_is_main_answers_for_the_main_loop_without_making_it) {
    rl_loop_t *cur = rl_loop_get_current(), *main_loop = rl_loop_get_main();
    RLT_CHECK(rl_loop_is_main(main_loop));
    RLT_CHECK(!rl_loop_is_main(cur)); /* the tests run on a secondary thread */
    RLT_CHECK(!rl_loop_is_main(NULL));
    main_seen_t s = {.main = main_loop};
    tt_join(tt_spawn(see_main, &s));
    RLT_CHECK(s.main_is_main);
    RLT_CHECK(s.own && !s.own_is_main);
    /* This thread forks: its loop is the child's main loop. */
    pid_t pid = fork();
    if (pid == 0) _exit(rl_loop_is_main(cur) && !rl_loop_is_main(main_loop) && rl_loop_get_main() == cur ? 0 : 1);
    RLT_CHECK(pid > 0);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    tt_report_child(status);
    RLT_CHECK(rl_loop_is_main(main_loop) && !rl_loop_is_main(cur)); /* the parent's are as they were */
    void *child = NULL;
    pthread_t t = tt_spawn(fork_without_a_loop, main_loop);
    RLT_CHECK_EQ(pthread_join(t, &child), 0);
    pid = (pid_t)(intptr_t)child;
    RLT_CHECK(pid > 0);
    status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    tt_report_child(status);
}

typedef struct {
    rl_loop_t *loop;
    tt_count_t timer_count, source_count;
    atomic_int cancels, block_ran;
    atomic_bool dead_in_cancel, alive_before_exit;
    rl_loop_t *cancel_loop;
    char cancel_mode[64];
} teardown_t;

static void td_cancel(void *info, rl_loop_t *loop, const char *mode) {
    teardown_t *td = (teardown_t *)((char *)info - offsetof(teardown_t, source_count));
    atomic_fetch_add(&td->cancels, 1);
    atomic_store(&td->dead_in_cancel, rl_loop_is_dead(loop));
    td->cancel_loop = loop;
    snprintf(td->cancel_mode, sizeof td->cancel_mode, "%s", mode ? mode : "(null)");
}

static void td_block(void *arg) { atomic_fetch_add(&((teardown_t *)arg)->block_ran, 1); }
static void td_timer(rl_timer_t *t, void *info) { (void)t; (void)info; }

static void *td_thread(void *arg) {
    teardown_t *td = arg;
    td->loop = rl_retain(rl_loop_get_current());
    rl_context_t tc = { &td->timer_count, tt_count_retain, tt_count_release };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, td_timer, &tc);
    rl_source_context_t sc = { &td->source_count, tt_count_retain, tt_count_release, NULL,
                               td_cancel, NULL };
    rl_source_t *s = rl_source_create(0, &sc);
    if (t) { rl_loop_add_timer(td->loop, t, RL_DEFAULT_MODE); rl_release(t); }
    if (s) { rl_loop_add_source(td->loop, s, RL_DEFAULT_MODE); rl_release(s); }
    rl_loop_perform(td->loop, RL_DEFAULT_MODE, td_block, td);
    atomic_store(&td->alive_before_exit, !rl_loop_is_dead(td->loop));
    return NULL;
}

RLT_TEST(loop_torn_down_at_thread_exit_while_still_referenced) {
    teardown_t td;
    memset(&td, 0, sizeof td);
    tt_join(tt_spawn(td_thread, &td));
    RLT_CHECK(td.loop != NULL);
    RLT_CHECK(!rl_loop_is_current(td.loop));
    RLT_CHECK(td.loop != rl_loop_get_current());
    /* the teardown removed the source (cancel with loop and mode) and released the items */
    RLT_CHECK_EQ(atomic_load(&td.cancels), 1);
    RLT_CHECK(td.cancel_loop == td.loop);
    TT_STREQ(td.cancel_mode, RL_DEFAULT_MODE);
    /* rl_loop_is_dead: false while the thread ran, true in the teardown's own callouts, after */
    RLT_CHECK(atomic_load(&td.alive_before_exit));
    RLT_CHECK(atomic_load(&td.dead_in_cancel));
    RLT_CHECK(rl_loop_is_dead(td.loop));
    RLT_CHECK(rl_loop_is_dead(NULL));
    RLT_CHECK(!rl_loop_is_dead(rl_loop_get_current()));
    RLT_CHECK_EQ(atomic_load(&td.source_count.retains), 1);
    RLT_CHECK_EQ(atomic_load(&td.source_count.releases), 1);
    RLT_CHECK_EQ(atomic_load(&td.timer_count.retains), 1);
    RLT_CHECK_EQ(atomic_load(&td.timer_count.releases), 1);
    RLT_CHECK(rl_loop_copy_current_mode(td.loop) == NULL);
    RLT_CHECK(!rl_loop_is_waiting(td.loop));
    rl_loop_wakeup(td.loop); /* harmless on a dead loop */
    rl_loop_stop(td.loop);
    RLT_CHECK_EQ(atomic_load(&td.block_ran), 0);
    rl_release(td.loop);
    RLT_CHECK_EQ(atomic_load(&td.block_ran), 0);
    RLT_CHECK_EQ(atomic_load(&td.cancels), 1);
    RLT_CHECK_EQ(atomic_load(&td.timer_count.releases), 1);
}
