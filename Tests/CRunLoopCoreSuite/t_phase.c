/*
 * t_phase.c - the timer phase holds its due timers without a reference of its own (timer.c,
 * RL_TIMER_TAKEN): a removal of a timer it took leaves one reference to the phase, which lets it
 * go as it ends. So a timer that an earlier callout of the phase (or another thread, or a nested
 * run, or a move to another loop) removes, invalidates and releases is neither fired nor touched
 * once its memory is gone, and its done runs exactly once, at the end of the phase. The timers
 * here live in memory of their own that done frees (rl_timer_create_in), so that
 * AddressSanitizer sees any touch after it; rl_loop_verify checks that no timer stays marked
 * taken after a phase.
 */
#include "ttrace.h"
#include "../../Sources/CRunLoopCore/internal.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#define DEF RL_DEFAULT_MODE

/* ---- A timer in a struct of its own, freed by its done ---- */

/* What outlives a box: how often its timer fired, its context's retains and releases, its done. */
typedef struct {
    atomic_int fired, retains, releases, dones, releases_at_done;
} tally_t;

typedef struct box {
    tally_t *tally;
    void (*also)(struct box *, rl_timer_t *); /* more for the callout to do */
    void *arg;
    _Alignas(8) unsigned char timer[RL_TIMER_STORAGE_SIZE];
} box_t;

static const void *box_retain(const void *info) {
    atomic_fetch_add(&((const box_t *)info)->tally->retains, 1);
    return info;
}
static void box_release(const void *info) { atomic_fetch_add(&((const box_t *)info)->tally->releases, 1); }

static void box_done(void *memory) {
    box_t *b = (box_t *)((char *)memory - offsetof(box_t, timer));
    tally_t *n = b->tally;
    atomic_store(&n->releases_at_done, atomic_load(&n->releases));
    memset(b, 0x5a, sizeof *b);
    free(b);
    atomic_fetch_add(&n->dones, 1);
}

static void box_fired(rl_timer_t *t, void *info) {
    box_t *b = info;
    atomic_fetch_add(&b->tally->fired, 1);
    if (b->also) b->also(b, t);
}

/* A timer in a new box, due at date, made with flags; the caller owns the reference returned.
 * (A date in the past counts as the time of the call: timers made one after the other with past
 * dates fire in the order they were made.) */
static rl_timer_t *box_timer(tally_t *tally, unsigned flags, double date, long order,
                             void (*also)(box_t *, rl_timer_t *), void *arg) {
    box_t *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->tally = tally;
    b->also = also;
    b->arg = arg;
    rl_timer_storage s = {b->timer, sizeof b->timer, box_done};
    rl_context_t c = {b, box_retain, box_release};
    rl_timer_t *t = rl_timer_create_in(&s, flags, date, 0, order, box_fired, &c);
    if (!t) free(b);
    return t;
}

/* The tally of a timer made once, gone now: fired `fired` times, its context released once
 * (before done, which ran once). */
#define CHECK_GONE(tally, fired_n)                                                             \
    do {                                                                                       \
        RLT_CHECK_EQ(atomic_load(&(tally).fired), (fired_n));                                  \
        RLT_CHECK_EQ(atomic_load(&(tally).dones), 1);                                          \
        RLT_CHECK_EQ(atomic_load(&(tally).releases), atomic_load(&(tally).retains));           \
        RLT_CHECK_EQ(atomic_load(&(tally).releases), 1);                                       \
        RLT_CHECK_EQ(atomic_load(&(tally).releases_at_done), 1);                               \
    } while (0)

static bool loop_ok(rl_loop_t *loop) {
    char report[1024];
    if (rl_loop_verify(loop, report, sizeof report) == 0) return true;
    rlt_fail(__FILE__, __LINE__, "rl_loop_verify: %s", report);
    return false;
}

/* ---- An earlier callout of the phase lets a later due timer go ---- */

typedef struct {
    rl_timer_t *victim;
    tally_t *tally;
    int how;          /* 0: invalidate; 1: remove from the default mode */
    int dones_inside; /* the victim's dones as the callout returned */
} killer_t;

static void kill_victim(rl_timer_t *t, void *info) {
    (void)t;
    killer_t *k = info;
    tt("A");
    if (k->how == 0) rl_timer_invalidate(k->victim);
    else RLT_CHECK_EQ(rl_loop_remove_timer(rl_loop_get_current(), k->victim, DEF), 0);
    rl_release(k->victim); /* the last reference but the phase's */
    k->dones_inside = atomic_load(&k->tally->dones);
}

static void victim_let_go_by_an_earlier_callout(int how) {
    rl_loop_t *loop = rl_loop_get_current();
    tally_t tally = {0};
    killer_t k = {NULL, &tally, how, -1};
    rl_context_t c = {&k, NULL, NULL};
    rl_timer_t *a = rl_timer_create(0, 0, 0, kill_victim, &c); /* due before b */
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    rl_release(a);
    rl_timer_t *b = k.victim = box_timer(&tally, 0, 0, 0, NULL, NULL);
    RLT_CHECK(b != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, b, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A");
    /* b lived until the phase ended, then went: once, not fired. */
    RLT_CHECK_EQ(k.dones_inside, 0);
    CHECK_GONE(tally, 0);
    RLT_CHECK(loop_ok(loop));
}

RLT_TEST(phase_timer_invalidated_and_released_by_an_earlier_callout_is_not_fired_nor_touched) {
    victim_let_go_by_an_earlier_callout(0);
}

RLT_TEST(phase_timer_removed_and_released_by_an_earlier_callout_is_not_fired_nor_touched) {
    victim_let_go_by_an_earlier_callout(1);
}

/* The victim in two modes, the running one its second (a chained entry, freed as it leaves the
 * mode): the first removal (from the running mode) hands the phase its reference, the
 * invalidation drops the rest. */
static void remove_then_invalidate(rl_timer_t *t, void *info) {
    (void)t;
    killer_t *k = info;
    tt("A");
    RLT_CHECK_EQ(rl_loop_remove_timer(rl_loop_get_current(), k->victim, DEF), 0);
    rl_timer_invalidate(k->victim);
    rl_release(k->victim);
    k->dones_inside = atomic_load(&k->tally->dones);
}

RLT_TEST(phase_timer_in_two_modes_removed_from_one_then_invalidated_by_an_earlier_callout) {
    rl_loop_t *loop = rl_loop_get_current();
    tally_t tally = {0};
    killer_t k = {NULL, &tally, 0, -1};
    rl_context_t c = {&k, NULL, NULL};
    rl_timer_t *a = rl_timer_create(0, 0, 0, remove_then_invalidate, &c);
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    rl_release(a);
    rl_timer_t *b = k.victim = box_timer(&tally, 0, 0, 0, NULL, NULL);
    RLT_CHECK(b != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, b, "other"), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, b, DEF), 0); /* chained */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A");
    RLT_CHECK_EQ(k.dones_inside, 0);
    CHECK_GONE(tally, 0);
    RLT_CHECK(loop_ok(loop));
}

/* ---- Removed and added again in the same phase ---- */

typedef struct {
    rl_timer_t *again, *twice, *timeout; /* re-added; re-added and removed again; a re-added timeout */
    tally_t *tallies;                    /* theirs, in that order */
    int dones_inside;
} readd_t;

static void readd_others(rl_timer_t *t, void *info) {
    (void)t;
    readd_t *r = info;
    rl_loop_t *loop = rl_loop_get_current();
    tt("A");
    rl_timer_t *all[3] = {r->again, r->twice, r->timeout};
    for (int i = 0; i < 3; i++) {
        RLT_CHECK_EQ(rl_loop_remove_timer(loop, all[i], DEF), 0);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, all[i], DEF), 0);
    }
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, r->twice, DEF), 0); /* a second removal releases all it drops */
    rl_release(r->again);
    rl_release(r->twice);
    r->dones_inside = atomic_load(&r->tallies[0].dones) + atomic_load(&r->tallies[1].dones);
}

RLT_TEST(phase_timer_removed_and_added_again_by_an_earlier_callout_fires_once_and_goes_once) {
    rl_loop_t *loop = rl_loop_get_current();
    tally_t tallies[3] = {{0}};
    readd_t r = {0};
    r.tallies = tallies;
    rl_context_t c = {&r, NULL, NULL};
    rl_timer_t *a = rl_timer_create(0, 0, 0, readd_others, &c);
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    rl_release(a);
    r.again = box_timer(&tallies[0], 0, 0, 0, NULL, NULL);
    r.twice = box_timer(&tallies[1], 0, 0, 1, NULL, NULL);
    r.timeout = box_timer(&tallies[2], RL_TIMER_IN_TIMEOUT, 0, 2, NULL, NULL);
    RLT_CHECK(r.again && r.twice && r.timeout);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, r.again, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, r.twice, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, r.timeout, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A");
    RLT_CHECK_EQ(r.dones_inside, 0);
    /* Added again while still due, as CF would fire it: it fires in the same phase. */
    CHECK_GONE(tallies[0], 1);
    CHECK_GONE(tallies[1], 0);
    RLT_CHECK_EQ(atomic_load(&tallies[2].fired), 1); /* and is dormant now */
    RLT_CHECK_EQ(atomic_load(&tallies[2].dones), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, r.timeout, DEF));
    RLT_CHECK(loop_ok(loop));
    rl_timer_invalidate(r.timeout);
    RLT_CHECK_EQ(atomic_load(&tallies[2].dones), 0);
    rl_release(r.timeout);
    CHECK_GONE(tallies[2], 1);
}

/* ---- A nested run fires the outer phase's remaining due timers ---- */

typedef struct {
    rl_timer_t *oneshot, *timeout;
    tally_t *tallies;
    int fired_inside, dones_inside;
} nest_t;

static void run_nested(rl_timer_t *t, void *info) {
    (void)t;
    nest_t *n = info;
    tt("A");
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT); /* fires both */
    n->fired_inside = atomic_load(&n->tallies[0].fired) + atomic_load(&n->tallies[1].fired);
    /* The timeout went dormant in the nested phase: the outer phase still holds it by its
     * memberships, so letting them go now leaves it to the outer phase. */
    rl_timer_invalidate(n->timeout);
    rl_release(n->timeout);
    n->dones_inside = atomic_load(&n->tallies[0].dones) + atomic_load(&n->tallies[1].dones);
}

RLT_TEST(phase_timers_fired_and_let_go_by_a_nested_run_outlive_the_outer_phase) {
    rl_loop_t *loop = rl_loop_get_current();
    tally_t tallies[2] = {{0}};
    nest_t n = {0};
    n.tallies = tallies;
    rl_context_t c = {&n, NULL, NULL};
    rl_timer_t *a = rl_timer_create(0, 0, 0, run_nested, &c);
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    rl_release(a);
    n.oneshot = box_timer(&tallies[0], 0, 0, 0, NULL, NULL);
    n.timeout = box_timer(&tallies[1], RL_TIMER_IN_TIMEOUT, 0, 1, NULL, NULL);
    RLT_CHECK(n.oneshot && n.timeout);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, n.oneshot, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, n.timeout, DEF), 0);
    rl_release(n.oneshot); /* the loop's reference is its last: it goes after its callout */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A");
    RLT_CHECK_EQ(n.fired_inside, 2);
    RLT_CHECK_EQ(n.dones_inside, 0); /* the outer phase still had both in its list */
    CHECK_GONE(tallies[0], 1);
    CHECK_GONE(tallies[1], 1);
    RLT_CHECK(loop_ok(loop));
}

/* ---- A timer moved to another loop, on another thread, during the phase ---- */

typedef struct {
    rl_timer_t *b;
    tally_t *tally;
    atomic_int step; /* 1: go (add b to your loop and run it); 2: b's callout runs there; 3: the
                      * first loop's phase ended */
} move_t;

static void wait_step(atomic_int *step, int at_least) {
    while (atomic_load(step) < at_least) tt_sleep(0.0005);
}

/* b's callout on the second loop: waits until the first loop's phase has ended, then lets b go
 * (its last references but the second phase's). */
static void moved_fired(box_t *bx, rl_timer_t *t) {
    move_t *m = bx->arg;
    atomic_store(&m->step, 2);
    wait_step(&m->step, 3);
    rl_timer_invalidate(t);
    rl_release(t); /* the reference handed over with it */
}

static void *second_loop(void *arg) {
    move_t *m = arg;
    wait_step(&m->step, 1);
    if (rl_loop_add_timer(rl_loop_get_current(), m->b, DEF) != 0) abort();
    (void)rl_run_in_mode(DEF, 0, false); /* fires b: the second loop's phase takes it */
    return NULL;
}

static void move_away(rl_timer_t *t, void *info) {
    (void)t;
    move_t *m = info;
    tt("A");
    RLT_CHECK_EQ(rl_loop_remove_timer(rl_loop_get_current(), m->b, DEF), 0);
    atomic_store(&m->step, 1);
    wait_step(&m->step, 2); /* b is in the second loop's phase, its callout running */
}

RLT_TEST(phase_timer_moved_to_another_loop_during_the_phase_is_left_to_that_loop) {
    rl_loop_t *loop = rl_loop_get_current();
    tally_t tally = {0};
    move_t m = {.tally = &tally};
    rl_context_t c = {&m, NULL, NULL};
    rl_timer_t *a = rl_timer_create(0, 0, 0, move_away, &c);
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    rl_release(a);
    m.b = box_timer(&tally, 0, 0, 0, moved_fired, &m);
    RLT_CHECK(m.b != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, m.b, DEF), 0);
    pthread_t th = tt_spawn(second_loop, &m);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    /* This phase passed b over (another loop owns it) and left its mark, which is that loop's
     * phase's, alone: that phase must keep b for itself while b's callout lets it go. */
    RLT_CHECK(loop_ok(loop));
    RLT_CHECK_EQ(atomic_load(&tally.dones), 0);
    atomic_store(&m.step, 3);
    tt_join(th);
    TT_EXPECT("A");
    CHECK_GONE(tally, 1);
}

/* ---- Another thread lets timers go while the loop fires them ---- */

enum { RACE_TIMERS = 48, RACE_ROUNDS = 30 };

typedef struct {
    rl_loop_t *loop;
    rl_timer_t *t[RACE_TIMERS];
    atomic_bool phase_began, go;
    atomic_int let_go;
} race_t;

static void race_fired(box_t *bx, rl_timer_t *t) {
    race_t *r = bx->arg;
    atomic_store(&r->phase_began, true);
    for (volatile int i = 0; i < 200; i++) {}
    if (rl_timer_is_timeout(t)) (void)rl_timer_rearm(t, INFINITY);
}

/* Invalidates, or removes, and releases every timer, from the last (which the loop fires last),
 * once the loop's phase has begun. */
static void *let_go_all(void *arg) {
    race_t *r = arg;
    while (!atomic_load(&r->go)) tt_sleep(0.0002);
    while (!atomic_load(&r->phase_began)) {}
    for (int i = RACE_TIMERS - 1; i >= 0; i--) {
        rl_timer_t *t = r->t[i];
        if (i % 3) rl_timer_invalidate(t);
        else (void)rl_loop_remove_timer(r->loop, t, DEF); /* -ENOENT once a one-shot timer fired */
        rl_release(t);
        atomic_fetch_add(&r->let_go, 1);
    }
    return NULL;
}

RLT_TEST(phase_timers_let_go_by_another_thread_while_the_loop_fires_them_go_once) {
    rl_loop_t *loop = rl_loop_get_current();
    for (int round = 0; round < RACE_ROUNDS; round++) {
        tally_t tallies[RACE_TIMERS];
        memset(tallies, 0, sizeof tallies);
        race_t r;
        memset(&r, 0, sizeof r);
        r.loop = loop;
        for (int i = 0; i < RACE_TIMERS; i++) {
            unsigned flags = i % 2 ? RL_TIMER_IN_TIMEOUT : 0;
            if (i % 4 == 3) flags |= RL_TIMER_IN_HELD;
            r.t[i] = box_timer(&tallies[i], flags, 0, i, race_fired, &r);
            RLT_CHECK(r.t[i] != NULL);
            RLT_CHECK_EQ(rl_loop_add_timer(loop, r.t[i], DEF), 0);
        }
        pthread_t th = tt_spawn(let_go_all, &r);
        atomic_store(&r.go, true);
        RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
        tt_join(th);
        RLT_CHECK_EQ(atomic_load(&r.let_go), RACE_TIMERS);
        for (int i = 0; i < RACE_TIMERS; i++) {
            RLT_CHECK(atomic_load(&tallies[i].fired) <= 1);
            RLT_CHECK_EQ(atomic_load(&tallies[i].dones), 1);
            RLT_CHECK_EQ(atomic_load(&tallies[i].releases), atomic_load(&tallies[i].retains));
            RLT_CHECK_EQ(atomic_load(&tallies[i].releases), 1);
            RLT_CHECK_EQ(atomic_load(&tallies[i].releases_at_done), 1);
        }
        RLT_CHECK(loop_ok(loop));
    }
}

/* A timeout's callout returns, and at once (after a delay that grows from round to round, to meet
 * the loop's thread at each step after the callout) another thread lets the timeout go: the
 * phase is done with it by the time the other thread can take the loop's lock after the callout
 * (fire() ends the callout before it unlocks), or the removal leaves the phase a reference. */
typedef struct {
    rl_loop_t *loop;
    rl_timer_t *t;
    bool invalidate; /* or remove */
    int delay;       /* spins between the callout's return and the other thread's call */
    atomic_int step; /* 1: the other thread waits; 2: the callout is returning */
} returning_t;

static void about_to_return(box_t *bx, rl_timer_t *t) {
    (void)t;
    atomic_store(&((returning_t *)bx->arg)->step, 2);
}

static void *let_go_after_return(void *arg) {
    returning_t *r = arg;
    atomic_store(&r->step, 1);
    while (atomic_load(&r->step) < 2) {}
    for (volatile int i = 0; i < r->delay; i++) {}
    if (r->invalidate) rl_timer_invalidate(r->t);
    else (void)rl_loop_remove_timer(r->loop, r->t, DEF);
    rl_release(r->t);
    return NULL;
}

RLT_TEST(phase_timeout_let_go_by_another_thread_as_its_callout_returns_goes_once) {
    rl_loop_t *loop = rl_loop_get_current();
    for (int round = 0; round < 100; round++) {
        tally_t tally = {0};
        returning_t r = {.loop = loop, .invalidate = round % 4 < 2, .delay = round * 10};
        unsigned flags = RL_TIMER_IN_TIMEOUT | (round % 2 ? RL_TIMER_IN_HELD : 0);
        r.t = box_timer(&tally, flags, 0, 0, about_to_return, &r);
        RLT_CHECK(r.t != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, r.t, DEF), 0);
        pthread_t th = tt_spawn(let_go_after_return, &r);
        while (atomic_load(&r.step) < 1) {}
        RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
        tt_join(th);
        CHECK_GONE(tally, 1);
        RLT_CHECK(loop_ok(loop));
    }
}

/* ---- Held timers ---- */

/* A held timeout's callout removes it from its loop (its context's release becomes due, left to
 * the callout's end) and adds it back (the claim takes that release back): it parks, and its
 * context is held once. */
static void leave_and_return(box_t *bx, rl_timer_t *t) {
    (void)bx;
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
}

/* A held one-shot timer's callout removes it, and the caller's reference goes: its context's
 * release runs as the callout returns, its done at the phase's end. */
static void leave_for_good(box_t *bx, rl_timer_t *t) {
    (void)bx;
    RLT_CHECK_EQ(rl_loop_remove_timer(rl_loop_get_current(), t, DEF), 0);
    rl_release(t);
}

RLT_TEST(phase_held_timers_that_leave_their_loop_in_their_callouts_hold_their_context_once) {
    rl_loop_t *loop = rl_loop_get_current();
    tally_t back = {0}, gone = {0};
    rl_timer_t *t1 = box_timer(&back, RL_TIMER_IN_HELD | RL_TIMER_IN_TIMEOUT, 0, 0, leave_and_return, NULL);
    rl_timer_t *t2 = box_timer(&gone, RL_TIMER_IN_HELD, 0, 1, leave_for_good, NULL);
    RLT_CHECK(t1 && t2);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t1, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t2, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    CHECK_GONE(gone, 1);
    RLT_CHECK_EQ(atomic_load(&back.fired), 1);
    RLT_CHECK_EQ(atomic_load(&back.retains), 1);
    RLT_CHECK_EQ(atomic_load(&back.releases), 0);
    RLT_CHECK(rl_loop_contains_timer(loop, t1, DEF));
    RLT_CHECK(!rl_timer_is_armed(t1));
    RLT_CHECK(loop_ok(loop));
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t1, DEF), 0);
    rl_release(t1);
    CHECK_GONE(back, 1);
}

/* ---- The phase's thread ends inside a callout, or forks ---- */

typedef struct {
    tally_t tally;
    rl_timer_t *later;
    atomic_int step; /* 1: the callout is running; 2: may return */
} ending_t;

static void exit_thread(rl_timer_t *t, void *info) {
    (void)t, (void)info;
    pthread_exit(NULL);
}

static void *loop_that_exits_in_a_callout(void *arg) {
    ending_t *e = arg;
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *a = rl_timer_create(0, 0, 0, exit_thread, NULL);
    e->later = box_timer(&e->tally, 0, 0, 0, NULL, NULL);
    if (!e->later || !a || rl_loop_add_timer(loop, e->later, DEF) || rl_loop_add_timer(loop, a, DEF)) abort();
    rl_release(e->later); /* the loop's is its last */
    rl_release(a);
    (void)rl_run_in_mode(DEF, 0, false); /* never returns: a's callout ends the thread */
    abort();
}

/* The loop's teardown at the thread's exit takes the later timer out: the phase it was taken by
 * is gone with the thread's stack, so its last reference goes then, not into that stack. */
RLT_TEST(phase_cut_short_by_its_thread_exiting_in_a_callout_lets_its_timers_go) {
    ending_t e = {0};
    tt_join(tt_spawn(loop_that_exits_in_a_callout, &e));
    CHECK_GONE(e.tally, 0);
}

static ending_t forked;

/* In the child: the later timer, taken by the phase of this same thread, is let go from the
 * callout; the phase goes on in the child, and lets it go at its end. */
static void fork_in_callout(rl_timer_t *t, void *info) {
    (void)t, (void)info;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0) {
        atomic_store(&forked.step, pid > 0 ? pid : -1);
        return;
    }
    alarm(20);
    atomic_store(&forked.step, 0);
    rl_timer_invalidate(forked.later);
    rl_release(forked.later);
    if (atomic_load(&forked.tally.dones) != 0) _exit(2); /* the phase still holds it */
}

RLT_TEST(phase_of_the_forking_thread_goes_on_in_the_child) {
    rl_loop_t *loop = rl_loop_get_current();
    memset(&forked, 0, sizeof forked);
    atomic_store(&forked.step, -2);
    rl_timer_t *a = rl_timer_create(0, 0, 0, fork_in_callout, NULL);
    forked.later = box_timer(&forked.tally, 0, 0, 0, NULL, NULL);
    RLT_CHECK(forked.later && a);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, forked.later, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    rl_release(a);
    (void)rl_run_in_mode(DEF, 0, false);
    int step = atomic_load(&forked.step);
    if (step == 0) { /* the child, after its phase */
        char report[1024];
        bool ok = atomic_load(&forked.tally.fired) == 0 && atomic_load(&forked.tally.dones) == 1 &&
                  rl_loop_verify(loop, report, sizeof report) == 0;
        _exit(ok ? 0 : 1);
    }
    RLT_CHECK(step > 0);
    int status = 0;
    while (waitpid(step, &status, 0) < 0 && errno == EINTR) {}
    tt_report_child(status);
    /* The parent's phase fired it (the child let it go, not the parent). */
    RLT_CHECK_EQ(atomic_load(&forked.tally.fired), 1);
    RLT_CHECK_EQ(atomic_load(&forked.tally.dones), 0);
    rl_release(forked.later);
    CHECK_GONE(forked.tally, 1);
}

/* Another thread's loop is in its phase, blocked in a callout, as this one forks: in the child
 * that loop is dead and its phase will never end, so the timers it took go as soon as they are
 * let go. */
static void block_in_callout(rl_timer_t *t, void *info) {
    (void)t;
    ending_t *e = info;
    atomic_store(&e->step, 1);
    wait_step(&e->step, 2);
}

static ending_t other;
static rl_timer_t *other_first; /* made before other.later, and so due first */

static void *loop_blocked_in_a_callout(void *arg) {
    ending_t *e = arg;
    rl_loop_t *loop = rl_loop_get_current();
    if (rl_loop_add_timer(loop, e->later, DEF) || rl_loop_add_timer(loop, other_first, DEF)) abort();
    rl_release(other_first);
    (void)rl_run_in_mode(DEF, 0, false);
    return NULL;
}

static int child_lets_go_of_the_dead_phase_s_timer(void) {
    rl_timer_invalidate(other.later);
    rl_release(other.later);
    return atomic_load(&other.tally.dones) == 1 ? 0 : 1;
}

RLT_TEST(phase_of_another_thread_is_abandoned_in_the_child_of_fork) {
    memset(&other, 0, sizeof other);
    rl_context_t c = {&other, NULL, NULL};
    other_first = rl_timer_create(0, 0, 0, block_in_callout, &c);
    other.later = box_timer(&other.tally, 0, 0, 0, NULL, NULL);
    RLT_CHECK(other_first && other.later);
    pthread_t th = tt_spawn(loop_blocked_in_a_callout, &other);
    wait_step(&other.step, 1);
    tt_report_child(tt_in_child(child_lets_go_of_the_dead_phase_s_timer));
    atomic_store(&other.step, 2);
    tt_join(th); /* its loop fired the later timer, and let it go as the thread ended */
    RLT_CHECK_EQ(atomic_load(&other.tally.fired), 1);
    RLT_CHECK_EQ(atomic_load(&other.tally.dones), 0); /* this reference is still ours */
    rl_release(other.later);
    CHECK_GONE(other.tally, 1);
}

/* ---- Review (s3): the phase's look-ahead in a heap larger than the caches ---- */

/* In a mode whose heap has more than 16384 slots the phase looks a few timers ahead and reads
 * the heap index of a due timer's entry, to prefetch its slot. An entry of a timer's second mode
 * is an allocation of its own (chained), which a removal from that mode frees: a callout that
 * takes later due timers out of the mode frees the entries that the next turns of the phase look
 * ahead at (AddressSanitizer: heap-use-after-free; elsewhere a read of freed memory). The first
 * callout removes twenty such timers, due right after it, so that one sits at whatever distance
 * the phase looks ahead. */
enum { VICTIMS = 20 };
static rl_timer_t *chained_victims[VICTIMS];
static void remove_chained_victims(rl_timer_t *t, void *info) {
    (void)t, (void)info;
    for (int i = 0; i < VICTIMS; i++)
        if (rl_loop_remove_timer(rl_loop_get_current(), chained_victims[i], DEF) != 0) abort();
}
static void count_fired(rl_timer_t *t, void *info) {
    (void)t;
    ++*(int *)info;
}

RLT_TEST(phase_in_a_large_heap_looks_ahead_at_no_entry_a_callout_freed) {
    enum { MANY = 16400 }; /* a heap of 32768 slots */
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t **idle = calloc(MANY, sizeof *idle);
    RLT_CHECK(idle != NULL);
    int fired = 0;
    rl_context_t c = {&fired, NULL, NULL};
    double later = rl_time_now() + 1e6;
    for (size_t i = 0; i < MANY; i++) {
        idle[i] = rl_timer_create(later, 0, 0, count_fired, &c);
        RLT_CHECK(idle[i] != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, idle[i], DEF), 0);
    }
    rl_timer_t *a = rl_timer_create(0, 0, 0, remove_chained_victims, NULL);
    rl_timer_t *b = rl_timer_create(0, 0, VICTIMS + 1, count_fired, &c);
    RLT_CHECK(a && b);
    for (int i = 0; i < VICTIMS; i++) {
        chained_victims[i] = rl_timer_create(0, 0, i + 1, count_fired, &c);
        RLT_CHECK(chained_victims[i] != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, chained_victims[i], "aside"), 0); /* its first entry */
        RLT_CHECK_EQ(rl_loop_add_timer(loop, chained_victims[i], DEF), 0);     /* chained */
    }
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, b, DEF), 0);
    (void)rl_run_in_mode(DEF, 0, false); /* a, then b (looking ahead at the victims' freed entries) */
    RLT_CHECK(!rl_timer_is_valid(a) && !rl_timer_is_valid(b));
    /* b and the victims: taken as due, and still the loop's (in "aside"), they fire, as in CF */
    RLT_CHECK_EQ(fired, VICTIMS + 1);
    for (int i = 0; i < VICTIMS; i++) {
        rl_timer_invalidate(chained_victims[i]);
        rl_release(chained_victims[i]);
    }
    rl_release(a);
    rl_release(b);
    for (size_t i = 0; i < MANY; i++) {
        rl_timer_invalidate(idle[i]);
        rl_release(idle[i]);
    }
    free(idle);
    RLT_CHECK(loop_ok(loop));
}

/* ---- The outermost phase parks what it took before its first callout (timer.c: taken timers) ---- */

typedef struct {
    rl_loop_t *loop;
    rl_timer_t *t[4];
    double date[4];
    int calls;
    bool parked[4], armed[4], dates_kept[4];
    size_t taken_n;
    int verified;   /* rl_loop_verify's answer in the first callout */
    int action;     /* 1: the first callout re-arms t[1] later, disarms t[2], runs the mode */
    int later_fired;
} taken_probe_t;

static bool node_parked(rl_loop_t *loop, rl_timer_t *t) {
    rl_mode *m = rl_mode_find_by_name(loop, DEF, false);
    return m && isinf(rl_heap_when(&m->timers, &t->first.node));
}

static void taken_probe(rl_timer_t *t, void *info) {
    taken_probe_t *p = info;
    if (p->calls++ || t != p->t[0]) {
        if (t == p->t[1]) p->later_fired++;
        return;
    }
    rl_loop_lock_mutex(p->loop);
    for (int i = 0; i < 4; i++) {
        p->parked[i] = node_parked(p->loop, p->t[i]);
        p->armed[i] = rl_timer_is_armed(p->t[i]);
        p->dates_kept[i] = rl_timer_get_next_fire_date(p->t[i]) == p->date[i];
    }
    p->taken_n = p->loop->taken_n;
    rl_loop_unlock(p->loop);
    char report[512];
    p->verified = rl_loop_verify(p->loop, report, sizeof report);
    if (p->action == 1) {
        RLT_CHECK_EQ(rl_timer_rearm(p->t[1], 0.05), 0); /* keyed at its new date at once */
        RLT_CHECK(!node_parked(p->loop, p->t[1]));
        RLT_CHECK_EQ(rl_timer_disarm(p->t[2]), 0); /* parked already: stays */
        RLT_CHECK(node_parked(p->loop, p->t[2]));
        RLT_CHECK_EQ(rl_loop_verify(p->loop, report, sizeof report), 0);
    }
}

static void taken_probe_run(taken_probe_t *p) {
    p->loop = rl_loop_get_current();
    rl_context_t c = {p, NULL, NULL};
    double now = rl_time_now();
    for (int i = 0; i < 4; i++) {
        /* All due, t[0] first (a date gone counts as the time of the creation) */
        p->t[i] = rl_timer_create_timeout(now - 1 + i * 1e-3, 0, taken_probe, &c);
        RLT_CHECK(p->t[i] != NULL);
        p->date[i] = rl_timer_get_next_fire_date(p->t[i]);
        RLT_CHECK_EQ(rl_loop_add_timer(p->loop, p->t[i], DEF), 0);
        RLT_CHECK(!node_parked(p->loop, p->t[i]));
    }
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
}

/* In the first callout every timer the phase took, that one's included, is parked while it keeps
 * its date and stays armed; the loop is consistent all the same. Each fired timeout ends parked
 * at INFINITY, and the phase leaves nothing taken. */
RLT_TEST(phase_parks_the_timers_it_took_before_the_first_callout_and_they_keep_their_dates) {
    taken_probe_t p = {0};
    taken_probe_run(&p);
    RLT_CHECK_EQ(p.calls, 4);
    RLT_CHECK_EQ(p.taken_n, (size_t)4);
    RLT_CHECK_EQ(p.verified, 0);
    for (int i = 0; i < 4; i++) {
        RLT_CHECK(p.parked[i]);
        RLT_CHECK(p.armed[i]);
        RLT_CHECK(p.dates_kept[i]);
        RLT_CHECK(node_parked(p.loop, p.t[i]));
        RLT_CHECK(!rl_timer_is_armed(p.t[i]));
    }
    RLT_CHECK_EQ(p.loop->taken_n, (size_t)0);
    RLT_CHECK(loop_ok(p.loop));
    for (int i = 0; i < 4; i++) {
        rl_timer_invalidate(p.t[i]);
        rl_release(p.t[i]);
    }
}

/* An earlier callout re-arms a taken timer to a later date (keyed there at once, not fired by
 * this phase, fired once at that date) and disarms another (left parked, never fired); the
 * phase fires the rest. */
RLT_TEST(phase_timer_moved_by_an_earlier_callout_is_keyed_at_its_new_date_at_once) {
    taken_probe_t p = {0};
    p.action = 1;
    taken_probe_run(&p);
    RLT_CHECK_EQ(p.calls, 2); /* t[0] and t[3] */
    RLT_CHECK_EQ(p.later_fired, 0);
    RLT_CHECK(rl_timer_is_armed(p.t[1]));
    RLT_CHECK(!node_parked(p.loop, p.t[1]));
    RLT_CHECK(!rl_timer_is_armed(p.t[2]) && node_parked(p.loop, p.t[2]));
    RLT_CHECK(loop_ok(p.loop));
    double until = rl_time_now() + 5;
    while (p.later_fired == 0 && rl_time_now() < until) (void)rl_run_in_mode(DEF, 0.01, false);
    RLT_CHECK_EQ(p.later_fired, 1);
    RLT_CHECK_EQ(p.calls, 3);
    RLT_CHECK(loop_ok(p.loop));
    for (int i = 0; i < 4; i++) {
        rl_timer_invalidate(p.t[i]);
        rl_release(p.t[i]);
    }
}

typedef struct {
    rl_timer_t *other;
    int calls, other_fired, verified;
} other_mode_t;

static void remove_from_other_mode(rl_timer_t *t, void *info) {
    other_mode_t *o = info;
    o->calls++;
    if (t == o->other) {
        o->other_fired++;
        return;
    }
    /* o->other is taken, parked in DEF, and in "phase-other" too: its removal from there hands
     * the phase a reference and takes the mark, and it stays parked in DEF until it fires. */
    RLT_CHECK_EQ(rl_loop_remove_timer(rl_loop_get_current(), o->other, "phase-other"), 0);
    char report[512];
    o->verified = rl_loop_verify(rl_loop_get_current(), report, sizeof report);
    if (o->verified) rlt_fail(__FILE__, __LINE__, "rl_loop_verify: %s", report);
}

/* An earlier callout removes a taken timer from its other mode: it fires once in this phase all
 * the same, and the loop stays consistent throughout (fuzz regression
 * taken_timer_removed_from_its_other_mode_in_a_callout_of_the_phase). */
RLT_TEST(phase_taken_timer_removed_from_its_other_mode_by_an_earlier_callout_fires_once) {
    rl_loop_t *loop = rl_loop_get_current();
    other_mode_t o = {0};
    rl_context_t c = {&o, NULL, NULL};
    double now = rl_time_now();
    rl_timer_t *a = rl_timer_create_timeout(now - 1, 0, remove_from_other_mode, &c);
    rl_timer_t *b = o.other = rl_timer_create_timeout(now - 0.5, 0, remove_from_other_mode, &c);
    RLT_CHECK(a && b);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, a, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, b, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, b, "phase-other"), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(o.calls, 2);
    RLT_CHECK_EQ(o.other_fired, 1);
    RLT_CHECK_EQ(o.verified, 0);
    RLT_CHECK(!rl_loop_contains_timer(loop, b, "phase-other"));
    RLT_CHECK(rl_loop_contains_timer(loop, b, DEF) && !rl_timer_is_armed(b));
    RLT_CHECK(loop_ok(loop));
    rl_timer_invalidate(a);
    rl_timer_invalidate(b);
    rl_release(a);
    rl_release(b);
}

typedef struct {
    rl_loop_t *loop;
    double first_date, asked;
    int calls;
} asker_t;

static void *ask_next_date(void *arg) {
    asker_t *a = arg;
    a->asked = rl_loop_get_next_timer_fire_date(a->loop, DEF);
    return NULL;
}

static void ask_from_another_thread(rl_timer_t *t, void *info) {
    (void)t;
    asker_t *a = info;
    if (a->calls++) return;
    pthread_t th;
    RLT_CHECK_EQ(pthread_create(&th, NULL, ask_next_date, a), 0);
    pthread_join(th, NULL);
}

/* Asked from another thread while the loop fires its due timers (parked as the phase took them),
 * the mode's next fire date is the firing timer's, as in CF: due, not "never" (conformance:
 * next_fire_date_from_another_thread_in_a_later_taken_callout asks in later callouts too). */
RLT_TEST(phase_next_fire_date_asked_from_another_thread_is_the_firing_timers) {
    asker_t a = {rl_loop_get_current(), 0, -1, 0};
    rl_context_t c = {&a, NULL, NULL};
    double now = rl_time_now();
    rl_timer_t *t1 = rl_timer_create_timeout(now - 1, 0, ask_from_another_thread, &c);
    rl_timer_t *t2 = rl_timer_create_timeout(now - 0.5, 0, ask_from_another_thread, &c);
    RLT_CHECK(t1 && t2);
    a.first_date = rl_timer_get_next_fire_date(t1);
    RLT_CHECK_EQ(rl_loop_add_timer(a.loop, t1, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(a.loop, t2, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(a.calls, 2);
    RLT_CHECK(a.asked == a.first_date);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(a.loop, DEF) == INFINITY); /* both dormant now */
    rl_timer_invalidate(t1);
    rl_timer_invalidate(t2);
    rl_release(t1);
    rl_release(t2);
}

/* ---- A timer the phase took, invalidated by another thread during its own callout.
 * rl_timer_invalidate clears VALID first and takes the timer out of its loop after
 * (rl_owner_lock: the item stripe, then the loop's lock). Between the two, the phase sees the
 * timer invalid when its callout returns and leaves it to that removal (fired, not settled): it
 * must put the node back at its date first, or the node would stay parked with a finite date
 * after the phase, and rl_loop_verify (every RL_DEBUG_VERIFY of that loop, on any thread) would
 * call the loop inconsistent until the invalidating thread got the lock. The test holds the
 * timer's item stripe through that window to make it last (found by a review of the phase's
 * parking). ---- */

typedef struct {
    rl_timer_t *t;
} invalidator_t;

static void *invalidate_it(void *arg) {
    rl_timer_invalidate(((invalidator_t *)arg)->t);
    return NULL;
}

typedef struct {
    pthread_t th;
    invalidator_t inv;
    int calls;
} window_t;

static void invalidated_elsewhere_in_its_callout(rl_timer_t *t, void *info) {
    window_t *w = info;
    if (w->calls++) return;
    w->inv.t = t;
    rl_item_lock(t); /* the other thread's rl_owner_lock waits here, VALID cleared already */
    RLT_CHECK_EQ(pthread_create(&w->th, NULL, invalidate_it, &w->inv), 0);
    while (rl_timer_is_valid(t)) sched_yield();
}

static void taken_timer_invalidated_elsewhere_in_its_callout(bool timeout) {
    rl_loop_t *loop = rl_loop_get_current();
    window_t w = {0};
    rl_context_t c = {&w, NULL, NULL};
    double now = rl_time_now();
    rl_timer_t *t = timeout ? rl_timer_create_timeout(now - 1, 0, invalidated_elsewhere_in_its_callout, &c)
                            : rl_timer_create(now - 1, 0, 0, invalidated_elsewhere_in_its_callout, &c);
    rl_timer_t *keep = rl_timer_create(now + 1000, 0, 0, invalidated_elsewhere_in_its_callout, &c);
    RLT_CHECK(t && keep);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, keep, DEF), 0);
    int ran = rl_run_in_mode(DEF, 0, false);
    /* The phase is over; the invalidating thread has not taken t out yet. */
    char report[512];
    int bad = rl_loop_verify(loop, report, sizeof report);
    rl_item_unlock(t); /* first: a failed check ends the test */
    pthread_join(w.th, NULL);
    RLT_CHECK_EQ(ran, RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(w.calls, 1);
    if (bad) rlt_fail(__FILE__, __LINE__, "after the phase, before the invalidation's removal: %s", report);
    RLT_CHECK(loop_ok(loop));
    rl_timer_invalidate(keep);
    rl_release(keep);
    rl_release(t);
}

RLT_TEST(phase_taken_timeout_invalidated_by_another_thread_in_its_callout_leaves_the_loop_consistent) {
    taken_timer_invalidated_elsewhere_in_its_callout(true);
}

RLT_TEST(phase_taken_one_shot_invalidated_by_another_thread_in_its_callout_leaves_the_loop_consistent) {
    taken_timer_invalidated_elsewhere_in_its_callout(false);
}
