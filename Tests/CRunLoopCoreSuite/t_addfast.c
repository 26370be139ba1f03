/*
 * t_addfast.c - the loop's own thread's short paths for adding a timer and disarming one
 * (timer.c: add_unowned_own, disarm_own), and every case they hand to the generic path: they
 * must behave exactly as the generic calls do. The add's short path takes a valid timer, held or
 * not, owned by no loop, to one mode named by name; the generic path takes the common modes
 * (by the RL_COMMON_MODES pointer or a copy of the name), timers of this loop or another, and
 * the calls of other threads; an invalid timer is refused first. The disarm's short path parks a timer
 * of the caller's loop in one mode; a timer in several modes or none, in another loop or in none,
 * and the calls of other threads take the generic path. Their races with other threads are in
 * t_threads.c (threads_*_invalidated_while_its_loop_adds_it_stays_out), their failures to
 * allocate in the fault sweep (Tests/faults).
 */
#include "ttrace.h"
#include "../../Sources/CRunLoopCore/internal.h"

#include <math.h>
#include <string.h>

#define DEF RL_DEFAULT_MODE

static void count_fired(rl_timer_t *t, void *info) {
    (void)t;
    ++*(int *)info;
}

/* Run DEF until the loop has fired *fired >= want times, or for limit seconds. */
static void run_until_fired(const int *fired, int want, double limit) {
    double until = rl_time_now() + limit;
    while (*fired < want && rl_time_now() < until) (void)rl_run_in_mode(DEF, 0.01, false);
}

static int verify(rl_loop_t *loop) { return rl_loop_verify(loop, NULL, 0); }

/* A context whose release counts: a timer's (not held) runs when the timer is destroyed. */
static rl_context_t counting(tt_count_t *c) {
    memset(c, 0, sizeof *c);
    return (rl_context_t){c, NULL, tt_count_release};
}

/* The short path: the timer is in the mode (and only there), the loop holds one reference (a
 * remove drops it, the caller's keeps the timer), and it fires. */
RLT_TEST(addfast_own_thread_add_joins_one_mode_holds_one_reference_and_fires) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_count_t c;
    rl_context_t ctx = counting(&c);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, count_fired, &ctx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, RL_COMMON_MODES));
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, DEF) == rl_timer_get_next_fire_date(t));
    RLT_CHECK_EQ(verify(loop), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(atomic_load(&c.releases), 0); /* the caller's reference is left */
    rl_release(t);
    RLT_CHECK_EQ(atomic_load(&c.releases), 1);

    int fired = 0;
    rl_context_t fc = {&fired, NULL, NULL};
    rl_timer_t *u = rl_timer_create(rl_time_now(), 0, 0, count_fired, &fc);
    RLT_CHECK(u != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, u, DEF), 0);
    run_until_fired(&fired, 1, 2.0);
    RLT_CHECK_EQ(fired, 1);
    RLT_CHECK(!rl_timer_is_valid(u)); /* a one-shot timer: invalid after its callout */
    RLT_CHECK(!rl_loop_contains_timer(loop, u, DEF));
    rl_release(u);
    RLT_CHECK_EQ(verify(loop), 0);
}

/* A mode named by a string other than the RL_DEFAULT_MODE pointer: made by the add when new,
 * found by its content otherwise (a copy of the default mode's name is the default mode). */
RLT_TEST(addfast_own_thread_add_to_a_named_mode_makes_or_finds_it) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    rl_timer_t *u = rl_timer_create(rl_time_now() + 2000, 0, 0, tt_timer_cb, NULL);
    RLT_CHECK(t && u);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "addfast.new"), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, "addfast.new"));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "addfast.new") == rl_timer_get_next_fire_date(t));
    char def[64];
    snprintf(def, sizeof def, "%s", RL_DEFAULT_MODE);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, u, def), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, u, DEF));
    RLT_CHECK_EQ(verify(loop), 0);
    rl_timer_invalidate(t);
    rl_timer_invalidate(u);
    rl_release(t);
    rl_release(u);
}

/* The common modes, by the pointer or by a copy of the name: the common set and every common
 * mode (the default mode is one), as the generic path does. */
RLT_TEST(addfast_own_thread_add_to_the_common_modes_takes_the_generic_path) {
    rl_loop_t *loop = rl_loop_get_current();
    char common[64];
    snprintf(common, sizeof common, "%s", RL_COMMON_MODES);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "addfast.c"), 0);
    for (int by_copy = 0; by_copy < 2; by_copy++) {
        rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
        RLT_CHECK(t != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t, by_copy ? common : RL_COMMON_MODES), 0);
        RLT_CHECK(rl_loop_contains_timer(loop, t, RL_COMMON_MODES));
        RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
        RLT_CHECK(rl_loop_contains_timer(loop, t, "addfast.c"));
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t, common), -EEXIST);
        RLT_CHECK_EQ(verify(loop), 0);
        rl_timer_invalidate(t);
        rl_release(t);
    }
}

/* A timer already in the loop: -EEXIST for its mode, a second mode joins (one reference each). */
RLT_TEST(addfast_timer_already_in_the_loop_takes_the_generic_path) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_count_t c;
    rl_context_t ctx = counting(&c);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, &ctx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), -EEXIST);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "addfast.second"), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(rl_loop_contains_timer(loop, t, "addfast.second"));
    RLT_CHECK_EQ(verify(loop), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "addfast.second"), 0);
    RLT_CHECK_EQ(atomic_load(&c.releases), 0);
    /* in no loop again: the short path takes it back */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    rl_timer_invalidate(t);
    RLT_CHECK_EQ(atomic_load(&c.releases), 0);
    rl_release(t);
    RLT_CHECK_EQ(atomic_load(&c.releases), 1);
}

/* An invalidated timer: -EINVAL, in no mode, no reference kept. */
RLT_TEST(addfast_invalid_timer_is_refused_and_kept_by_nothing) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_count_t c;
    rl_context_t ctx = counting(&c);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, &ctx);
    RLT_CHECK(t != NULL);
    rl_timer_invalidate(t);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "addfast.invalid"), -EINVAL);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, "addfast.invalid"));
    rl_release(t);
    RLT_CHECK_EQ(atomic_load(&c.releases), 1);
    RLT_CHECK_EQ(verify(loop), 0);
}

/* A held timer takes the short path too: its claim retains the context once (a second mode does
 * not), its removal from its last mode releases it, and an invalid one is refused before any
 * claim, its ended context not retained again. */
RLT_TEST(addfast_held_timer_claim_retains_its_context_once) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_count_t c;
    memset(&c, 0, sizeof c);
    rl_context_t held = {&c, tt_count_retain, tt_count_release};
    rl_timer_t *t = rl_timer_create_held(rl_time_now() + 1000, 0, 0, tt_timer_cb, &held);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(atomic_load(&c.retains), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(atomic_load(&c.retains), 1);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "addfast.held"), 0); /* the generic path: owned */
    RLT_CHECK_EQ(atomic_load(&c.retains), 1);
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK_EQ(verify(loop), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "addfast.held"), 0);
    RLT_CHECK_EQ(atomic_load(&c.releases), 1);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0); /* claimed again: retained again */
    RLT_CHECK_EQ(atomic_load(&c.retains), 2);
    rl_timer_invalidate(t);
    RLT_CHECK_EQ(atomic_load(&c.releases), 2);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), -EINVAL);
    RLT_CHECK_EQ(atomic_load(&c.retains), 2);
    RLT_CHECK_EQ(atomic_load(&c.releases), 2);
    rl_release(t);
    RLT_CHECK_EQ(atomic_load(&c.retains), 2);
    RLT_CHECK_EQ(atomic_load(&c.releases), 2);
    RLT_CHECK_EQ(verify(loop), 0);
}

/* A held repeating timer whose callout takes it out of its only mode (the release falls due at the
 * callout's end) and adds it back (the short path: the claim takes that release back instead of
 * retaining): after the callout the loop holds the context once, as before, and fires it again. */
typedef struct {
    tt_count_t count;
    int calls;
    rl_loop_t *loop;
    int removed, added;
} held_readd_t;

static void readd_self(rl_timer_t *t, void *info) {
    held_readd_t *h = info;
    if (h->calls++ == 0) {
        h->removed = rl_loop_remove_timer(h->loop, t, DEF);
        h->added = rl_loop_add_timer(h->loop, t, DEF);
    }
}

RLT_TEST(addfast_held_timer_put_back_by_its_own_callout_keeps_one_hold) {
    static held_readd_t h; /* static: a failed check returns with the timer still in the loop */
    memset(&h, 0, sizeof h);
    h.loop = rl_loop_get_current();
    /* One info for the callback and the counters: they are its first member. */
    rl_context_t held = {&h, tt_count_retain, tt_count_release};
    rl_timer_t *u = rl_timer_create_held(rl_time_now(), 0.001, 0, readd_self, &held);
    RLT_CHECK(u != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(h.loop, u, DEF), 0);
    RLT_CHECK_EQ(atomic_load(&h.count.retains), 1);
    for (int i = 0; i < 200 && h.calls < 2; i++) (void)rl_run_in_mode(DEF, 0.01, true);
    RLT_CHECK(h.calls >= 2);
    RLT_CHECK_EQ(h.removed, 0);
    RLT_CHECK_EQ(h.added, 0);
    RLT_CHECK_EQ(atomic_load(&h.count.retains), 1);
    RLT_CHECK_EQ(atomic_load(&h.count.releases), 0);
    RLT_CHECK(rl_loop_contains_timer(h.loop, u, DEF));
    RLT_CHECK_EQ(verify(h.loop), 0);
    rl_timer_invalidate(u);
    RLT_CHECK_EQ(atomic_load(&h.count.releases), 1);
    rl_release(u);
    RLT_CHECK_EQ(atomic_load(&h.count.retains), 1);
    RLT_CHECK_EQ(atomic_load(&h.count.releases), 1);
}

/* A timer of another thread's loop: -EBUSY, and it stays there. */
RLT_TEST(addfast_timer_of_another_loop_is_busy) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_live_t live;
    tt_live_start(&live);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    int added = -1, mine = -1, again = -1;
    bool theirs = false, ours = true;
    if (t) {
        added = rl_loop_add_timer(live.loop, t, DEF);
        mine = rl_loop_add_timer(loop, t, DEF);
        again = rl_loop_add_timer(loop, t, "addfast.busy");
        theirs = rl_loop_contains_timer(live.loop, t, DEF);
        ours = rl_loop_contains_timer(loop, t, DEF) || rl_loop_contains_timer(loop, t, "addfast.busy");
        rl_timer_invalidate(t);
    }
    tt_live_stop(&live);
    RLT_CHECK(t != NULL);
    rl_release(t);
    RLT_CHECK_EQ(added, 0);
    RLT_CHECK_EQ(mine, -EBUSY);
    RLT_CHECK_EQ(again, -EBUSY);
    RLT_CHECK(theirs);
    RLT_CHECK(!ours);
    RLT_CHECK_EQ(verify(loop), 0);
}

typedef struct {
    rl_timer_t *timer;
    rl_loop_t *loop;
    int rc;
} other_add_t;

static void *add_from_other_thread(void *arg) {
    other_add_t *a = arg;
    a->rc = rl_loop_add_timer(a->loop, a->timer, DEF);
    return NULL;
}

/* Another thread's add to this loop: the generic path (the mutex), and the timer fires here. */
RLT_TEST(addfast_add_from_another_thread_takes_the_generic_path) {
    rl_loop_t *loop = rl_loop_get_current();
    int fired = 0;
    rl_context_t fc = {&fired, NULL, NULL};
    other_add_t a = {rl_timer_create(rl_time_now() + 0.01, 0, 0, count_fired, &fc), loop, -1};
    RLT_CHECK(a.timer != NULL);
    tt_join(tt_spawn(add_from_other_thread, &a));
    RLT_CHECK_EQ(a.rc, 0);
    RLT_CHECK(rl_loop_contains_timer(loop, a.timer, DEF));
    run_until_fired(&fired, 1, 2.0);
    RLT_CHECK_EQ(fired, 1);
    rl_release(a.timer);
    RLT_CHECK_EQ(verify(loop), 0);
}

/* A timer that another loop left idle (in its common set, in none of its modes) and then let go
 * keeps its IDLE bit: the short path clears it as the timer joins a mode here, or the timer would
 * never fire (fire() passes over an idle timer) and the loop would fail rl_loop_verify. */
RLT_TEST(addfast_timer_an_other_loop_left_idle_fires_here) {
    rl_loop_t *loop = rl_loop_get_current();
    tt_live_t live;
    tt_live_start(&live);
    int fired = 0;
    rl_context_t fc = {&fired, NULL, NULL};
    rl_timer_t *t = rl_timer_create(rl_time_now(), 0, 0, count_fired, &fc);
    int rc[3] = {-1, -1, -1};
    unsigned char bits = 0;
    if (t) {
        rc[0] = rl_loop_add_timer(live.loop, t, RL_COMMON_MODES); /* the default mode is common */
        rc[1] = rl_loop_remove_timer(live.loop, t, DEF);           /* idle: in the common set only */
        rc[2] = rl_loop_remove_timer(live.loop, t, RL_COMMON_MODES); /* let go, still marked */
        bits = atomic_load(&t->obj.bits);
    }
    tt_live_stop(&live);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rc[0], 0);
    RLT_CHECK_EQ(rc[1], 0);
    RLT_CHECK_EQ(rc[2], 0);
    RLT_CHECK(bits & RL_TIMER_IDLE); /* what this test is about: else it tests nothing */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK(!(atomic_load(&t->obj.bits) & RL_TIMER_IDLE));
    RLT_CHECK_EQ(verify(loop), 0);
    run_until_fired(&fired, 1, 2.0);
    RLT_CHECK_EQ(fired, 1);
    rl_release(t);
}

/* ---- Disarm ---- */

/* The short path: a timer of this loop in one mode parks (the mode's next date is INFINITY while
 * it is the only timer), twice is the same, and arming it again brings it back. */
RLT_TEST(addfast_own_thread_disarm_parks_a_timer_in_one_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    int fired = 0;
    rl_context_t fc = {&fired, NULL, NULL};
    rl_timer_t *t = rl_timer_create_timeout(rl_time_now() + 1000, 0, count_fired, &fc);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_timer_disarm(t), 0);
    RLT_CHECK(!rl_timer_is_armed(t));
    RLT_CHECK(isinf(rl_timer_get_next_fire_date(t)));
    RLT_CHECK(isinf(rl_loop_get_next_timer_fire_date(loop, DEF)));
    RLT_CHECK(rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK_EQ(verify(loop), 0);
    RLT_CHECK_EQ(rl_timer_disarm(t), 0);
    RLT_CHECK(isinf(rl_loop_get_next_timer_fire_date(loop, DEF)));
    RLT_CHECK_EQ(verify(loop), 0);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, 0), 0);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, DEF) == rl_timer_get_next_fire_date(t));
    run_until_fired(&fired, 1, 2.0);
    RLT_CHECK_EQ(fired, 1);
    RLT_CHECK(rl_timer_is_valid(t)); /* a timeout: dormant after its callout */
    rl_timer_invalidate(t);
    rl_release(t);
    RLT_CHECK_EQ(verify(loop), 0);
}

/* A timer in two modes: both entries park (the generic update of every entry). */
RLT_TEST(addfast_own_thread_disarm_parks_every_mode_of_a_timer) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "addfast.two"), 0);
    RLT_CHECK_EQ(rl_timer_disarm(t), 0);
    RLT_CHECK(isinf(rl_loop_get_next_timer_fire_date(loop, DEF)));
    RLT_CHECK(isinf(rl_loop_get_next_timer_fire_date(loop, "addfast.two")));
    RLT_CHECK_EQ(verify(loop), 0);
    RLT_CHECK_EQ(rl_timer_set_next_fire_in(t, 500), 0);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, DEF) == rl_timer_get_next_fire_date(t));
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, "addfast.two") == rl_timer_get_next_fire_date(t));
    rl_timer_invalidate(t);
    rl_release(t);
    RLT_CHECK_EQ(verify(loop), 0);
}

/* A timer of this loop in none of its modes (idle in the common set): only its date changes. */
RLT_TEST(addfast_own_thread_disarm_of_an_idle_timer) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t, RL_COMMON_MODES));
    RLT_CHECK_EQ(rl_timer_disarm(t), 0);
    RLT_CHECK(isinf(rl_timer_get_next_fire_date(t)));
    RLT_CHECK_EQ(verify(loop), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0); /* back in a mode, parked */
    RLT_CHECK(isinf(rl_loop_get_next_timer_fire_date(loop, DEF)));
    RLT_CHECK_EQ(verify(loop), 0);
    rl_timer_invalidate(t);
    rl_release(t);
}

typedef struct {
    rl_timer_t *timer;
    int rc;
} other_disarm_t;

static void *disarm_from_other_thread(void *arg) {
    other_disarm_t *d = arg;
    d->rc = rl_timer_disarm(d->timer);
    return NULL;
}

/* The generic path: another thread disarms a timer of this loop; this thread disarms a timer of
 * another loop, and one in no loop; an invalid timer is refused. */
RLT_TEST(addfast_disarm_of_a_timer_of_another_thread_or_none_takes_the_generic_path) {
    rl_loop_t *loop = rl_loop_get_current();
    other_disarm_t d = {rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL), -1};
    RLT_CHECK(d.timer != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, d.timer, DEF), 0);
    tt_join(tt_spawn(disarm_from_other_thread, &d));
    RLT_CHECK_EQ(d.rc, 0);
    RLT_CHECK(isinf(rl_timer_get_next_fire_date(d.timer)));
    RLT_CHECK(isinf(rl_loop_get_next_timer_fire_date(loop, DEF)));
    RLT_CHECK_EQ(verify(loop), 0);

    tt_live_t live;
    tt_live_start(&live);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    int rc[2] = {-1, -1};
    double theirs = 0;
    int their_verify = -1;
    if (t) {
        rc[0] = rl_loop_add_timer(live.loop, t, DEF);
        rc[1] = rl_timer_disarm(t);
        theirs = rl_loop_get_next_timer_fire_date(live.loop, DEF);
        their_verify = verify(live.loop);
        rl_timer_invalidate(t);
    }
    tt_live_stop(&live);
    RLT_CHECK(t != NULL);
    rl_release(t);
    RLT_CHECK_EQ(rc[0], 0);
    RLT_CHECK_EQ(rc[1], 0);
    RLT_CHECK(isinf(theirs));
    RLT_CHECK_EQ(their_verify, 0);

    rl_timer_t *none = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    RLT_CHECK(none != NULL);
    RLT_CHECK_EQ(rl_timer_disarm(none), 0);
    RLT_CHECK(isinf(rl_timer_get_next_fire_date(none)));
    RLT_CHECK_EQ(rl_loop_add_timer(loop, none, "addfast.none"), 0); /* joins parked */
    RLT_CHECK(isinf(rl_loop_get_next_timer_fire_date(loop, "addfast.none")));
    rl_timer_invalidate(none);
    RLT_CHECK_EQ(rl_timer_disarm(none), -EINVAL);
    rl_release(none);
    rl_timer_invalidate(d.timer);
    rl_release(d.timer);
    RLT_CHECK_EQ(verify(loop), 0);
}
