/*
 * t_ownership.c - the loop holds each item across every callout to it: a callout that
 * invalidates its own item and drops the caller's last reference still finds its info valid,
 * and the context's release runs once, after the callout returns. One test per kind of callout
 * (source perform, fd source, timer, observer). The Swift layer relies on this to call out
 * through its context box without retaining it.
 */
#include "rlt.h"

#include <crunloop.h>

#include <sys/eventfd.h>
#include <unistd.h>

#define DEF RL_DEFAULT_MODE

typedef struct {
    void *self;            /* the item; the test's only reference once it is in the loop */
    int calls;
    int releases;          /* context release calls */
    int releases_in_callout; /* releases seen at the end of the callout, after letting go */
} owned_t;

/* Called once; its info still unreleased at the callout's end; released once after it. */
#define CHECK_RELEASED_AFTER_THE_CALLOUT(o)      \
    do {                                         \
        RLT_CHECK_EQ((o).calls, 1);              \
        RLT_CHECK_EQ((o).releases_in_callout, 0); \
        RLT_CHECK_EQ((o).releases, 1);           \
    } while (0)

static void owned_release(const void *info) { ((owned_t *)info)->releases++; }

/* What every callout does: invalidate its item, drop the last reference, then read its info. */
static void let_go(owned_t *o, void (*invalidate)(void *)) {
    o->calls++;
    invalidate(o->self);
    rl_release(o->self);
    o->self = NULL;
    o->releases_in_callout = o->releases;
}

static void no_callout(rl_timer_t *t, void *info) { (void)t, (void)info; }
static void invalidate_source(void *s) { rl_source_invalidate(s); }
static void invalidate_timer(void *t) { rl_timer_invalidate(t); }
static void invalidate_observer(void *o) { rl_observer_invalidate(o); }

static void source_perform(void *info) { let_go(info, invalidate_source); }
static void fd_callout(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s, (void)fd, (void)events;
    let_go(info, invalidate_source);
}
static void timer_callout(rl_timer_t *t, void *info) { (void)t, let_go(info, invalidate_timer); }
static void observer_callout(rl_observer_t *ob, unsigned activity, void *info) {
    (void)ob, (void)activity;
    let_go(info, invalidate_observer);
}

RLT_TEST(ownership_source0_perform_outlives_last_release) {
    owned_t o = {0};
    rl_source_context_t c = {.info = &o, .release = owned_release, .perform = source_perform};
    rl_source_t *s = rl_source_create(0, &c);
    RLT_CHECK(s);
    o.self = s;
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT); /* a poll pass, as in CF */
    CHECK_RELEASED_AFTER_THE_CALLOUT(o);
}

RLT_TEST(ownership_fd_callout_outlives_last_release) {
    owned_t o = {0};
    int fd = eventfd(1, EFD_CLOEXEC); /* readable from the start */
    RLT_CHECK(fd >= 0);
    rl_context_t c = {.info = &o, .release = owned_release};
    rl_source_t *s = rl_source_create_fd(fd, RL_FD_READABLE, 0, fd_callout, &c);
    RLT_CHECK(s);
    o.self = s;
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    int rc = rl_run_in_mode(DEF, 1.0, false);
    close(fd);
    RLT_CHECK_EQ(rc, RL_RUN_FINISHED);
    CHECK_RELEASED_AFTER_THE_CALLOUT(o);
}

RLT_TEST(ownership_timer_callout_outlives_last_release) {
    owned_t o = {0};
    rl_context_t c = {.info = &o, .release = owned_release};
    rl_timer_t *t = rl_timer_create(0, 1.0, 0, timer_callout, &c); /* repeating: not auto-invalidated */
    RLT_CHECK(t);
    o.self = t;
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    CHECK_RELEASED_AFTER_THE_CALLOUT(o);
}

RLT_TEST(ownership_observer_callout_outlives_last_release) {
    owned_t o = {0};
    rl_context_t c = {.info = &o, .release = owned_release};
    rl_observer_t *ob = rl_observer_create(RL_ENTRY, true, 0, observer_callout, &c);
    RLT_CHECK(ob);
    o.self = ob;
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_observer(loop, ob, DEF), 0);
    /* The observer alone does not keep the mode from being empty: a timer far away does. */
    rl_timer_t *far = rl_timer_create(rl_time_now() + 3600, 0, 0, no_callout, NULL);
    RLT_CHECK(far);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, far, DEF), 0);
    int rc = rl_run_in_mode(DEF, 0, false);
    rl_timer_invalidate(far);
    rl_release(far);
    RLT_CHECK_EQ(rc, RL_RUN_TIMED_OUT);
    CHECK_RELEASED_AFTER_THE_CALLOUT(o);
}
