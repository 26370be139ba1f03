/*
 * t_held.c - timers that hold their context only while a loop holds them
 * (rl_timer_create_held): retain as a loop claims the timer, release as it leaves the loop, in
 * every way it can leave; the release runs with no lock held; info lives through every callout
 * even when another thread removes the timer meanwhile.
 */
#include "ttrace.h"

#define DEF RL_DEFAULT_MODE

/* What a held context's info is: counts, and what the release checks. */
typedef struct {
    tt_count_t count;
    rl_loop_t *loop;   /* when set, release asks it whether it holds timer: a deadlock if the */
    rl_timer_t *timer; /* loop's lock were held */
    atomic_int calls;
} held_t;

static void held_release(const void *info) {
    held_t *h = (held_t *)info;
    if (h->loop && h->timer) (void)rl_loop_contains_timer(h->loop, h->timer, DEF);
    tt_count_release(info);
}

static void held_fired(rl_timer_t *t, void *info) {
    (void)t;
    atomic_fetch_add(&((held_t *)info)->calls, 1);
}

static rl_timer_t *held_timer(held_t *h, double delay, double interval) {
    rl_context_t c = {h, tt_count_retain, held_release};
    return rl_timer_create_held(rl_time_now() + delay, interval, 0, held_fired, &c);
}

#define RETAINS(h) atomic_load(&(h)->count.retains)
#define RELEASES(h) atomic_load(&(h)->count.releases)

RLT_TEST(held_timer_context_is_not_held_by_creation) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_timer_t *t = held_timer(&h, 100, 0);
    RLT_CHECK(t != NULL);
    RLT_CHECK(rl_timer_is_valid(t));
    rl_release(t);
    RLT_CHECK_EQ(RETAINS(&h), 0);
    RLT_CHECK_EQ(RELEASES(&h), 0);
}

RLT_TEST(held_timer_without_retain_or_release_is_an_ordinary_timer) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_context_t c = {&h, NULL, NULL};
    rl_timer_t *t = rl_timer_create_held(rl_time_now(), 0, 0, held_fired, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK(rl_timer_create_held(-1, 0, 0, held_fired, &c) == NULL && errno == EINVAL);
    rl_context_t counting = {&h, tt_count_retain, tt_count_release};
    RLT_CHECK(rl_timer_create_held(0, NAN, 0, held_fired, &counting) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_held(0, 0, 0, NULL, &counting) == NULL && errno == EINVAL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(atomic_load(&h.calls), 1);
    rl_release(t);
}

RLT_TEST(held_timer_context_follows_its_loop_membership) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = held_timer(&h, 100, 1);
    RLT_CHECK(t != NULL);
    h.loop = loop;
    h.timer = t;
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(RETAINS(&h), 1);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "other"), 0); /* a second mode: no second retain */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), -EEXIST);
    RLT_CHECK_EQ(RETAINS(&h), 1);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(RELEASES(&h), 0); /* still in "other" */
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "other"), 0);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "other"), -ENOENT);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    /* Again, then through the common modes: the common set holds it too. */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(RETAINS(&h), 2);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(RELEASES(&h), 2);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(RETAINS(&h), 3);
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "late"), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, "late"), 0);
    RLT_CHECK_EQ(RELEASES(&h), 2); /* in no mode, but still in the common set */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(RETAINS(&h), 3);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(RELEASES(&h), 3);
    /* A failed add claims nothing: another loop owns it, or it is invalid. */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    rl_timer_invalidate(t);
    RLT_CHECK_EQ(RETAINS(&h), 4);
    RLT_CHECK_EQ(RELEASES(&h), 4);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), -EINVAL);
    RLT_CHECK_EQ(RETAINS(&h), 4);
    rl_release(t);
    RLT_CHECK_EQ(RELEASES(&h), 4);
}

RLT_TEST(held_timer_released_once_a_one_shot_fired) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = held_timer(&h, 0, 0);
    RLT_CHECK(t != NULL);
    h.loop = loop;
    h.timer = t;
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(atomic_load(&h.calls), 1);
    RLT_CHECK_EQ(RETAINS(&h), 1);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    RLT_CHECK(!rl_timer_is_valid(t));
    rl_release(t);
    RLT_CHECK_EQ(RELEASES(&h), 1);
}

/* A callout that removes its own timer: the release waits for the callout's end. */
static void remove_self(rl_timer_t *t, void *info) {
    held_t *h = info;
    atomic_fetch_add(&h->calls, 1);
    (void)rl_loop_remove_timer(h->loop, t, DEF);
    if (atomic_load(&h->count.releases) != 0) tt("released-inside");
    if (atomic_load(&h->calls) == 2) rl_timer_invalidate(t);
    else (void)rl_loop_add_timer(h->loop, t, DEF); /* a claim takes back the release still due */
}

RLT_TEST(held_timer_removed_by_its_own_callout_is_released_after_it) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t c = {&h, tt_count_retain, held_release};
    rl_timer_t *t = rl_timer_create_held(rl_time_now(), 0.001, 0, remove_self, &c);
    RLT_CHECK(t != NULL);
    h.loop = loop;
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    TT_EXPECT("");
    RLT_CHECK_EQ(atomic_load(&h.calls), 2);
    RLT_CHECK_EQ(RETAINS(&h), 1);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    rl_release(t);
}

/* A one-shot timer's callout takes it out of the loop and puts it back (a claim during the
 * callout, which takes back the release that the removal made due). */
static void remove_and_add_back(rl_timer_t *t, void *info) {
    held_t *h = info;
    atomic_fetch_add(&h->calls, 1);
    if (rl_loop_remove_timer(h->loop, t, DEF) != 0) tt("remove-failed");
    if (rl_loop_add_timer(h->loop, t, DEF) != 0) tt("add-failed");
    if (atomic_load(&h->count.releases) != 0) tt("released-inside");
}

RLT_TEST(held_one_shot_timer_put_back_by_its_own_callout_still_ends_after_it) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t c = {&h, tt_count_retain, held_release};
    rl_timer_t *t = rl_timer_create_held(rl_time_now(), 0, 0, remove_and_add_back, &c);
    RLT_CHECK(t != NULL);
    h.loop = loop;
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    TT_EXPECT("");
    RLT_CHECK_EQ(atomic_load(&h.calls), 1);
    RLT_CHECK_EQ(RETAINS(&h), 1);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    RLT_CHECK(!rl_timer_is_valid(t));
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    rl_release(t);
}

/* A release that asks whether it is its timer's final one. */
static rl_timer_t *final_timer;
static int final_answers; /* 1: final, 2: not final, per release, in decimal digits */
static void final_asking_release(const void *info) {
    final_answers = final_answers * 10 + (rl_timer_context_release_is_final(final_timer) ? 1 : 2);
    tt_count_release(info);
}

RLT_TEST(held_timer_release_is_final_only_after_a_one_shot_callout) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_loop_t *loop = rl_loop_get_current();
    rl_context_t c = {&h, tt_count_retain, final_asking_release};
    final_answers = 0;
    /* fired: the loop invalidated it and let it go as its callout returned */
    final_timer = rl_timer_create_held(0, 0, 0, held_fired, &c);
    RLT_CHECK(final_timer != NULL);
    RLT_CHECK(!rl_timer_context_release_is_final(final_timer)); /* outside a release */
    RLT_CHECK_EQ(rl_loop_add_timer(loop, final_timer, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(final_answers, 1);
    RLT_CHECK(!rl_timer_context_release_is_final(final_timer));
    rl_release(final_timer);
    /* removed, then invalidated by a call: neither release is final */
    final_timer = rl_timer_create_held(rl_time_now() + 100, 0, 0, held_fired, &c);
    RLT_CHECK(final_timer != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, final_timer, DEF), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, final_timer, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, final_timer, DEF), 0);
    rl_timer_invalidate(final_timer);
    RLT_CHECK_EQ(final_answers, 122);
    RLT_CHECK(!rl_timer_context_release_is_final(NULL));
    rl_release(final_timer);
    final_timer = NULL;
}

typedef struct {
    held_t *h;
    atomic_int stage;
} torn_t;

static void *add_and_exit(void *arg) {
    torn_t *x = arg;
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = x->h->timer;
    x->h->loop = loop;
    if (rl_loop_add_timer(loop, t, DEF) == 0 && rl_loop_add_timer(loop, t, RL_COMMON_MODES) == 0) atomic_store(&x->stage, 1);
    return NULL; /* the loop's teardown lets the timer go */
}

RLT_TEST(held_timer_released_by_its_loops_teardown) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_timer_t *t = held_timer(&h, 100, 1);
    RLT_CHECK(t != NULL);
    h.timer = t;
    torn_t x = {.h = &h};
    tt_join(tt_spawn(add_and_exit, &x));
    RLT_CHECK_EQ(atomic_load(&x.stage), 1);
    RLT_CHECK_EQ(RETAINS(&h), 1);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    RLT_CHECK(rl_timer_is_valid(t)); /* it may join another loop */
    h.loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_timer(h.loop, t, DEF), 0);
    RLT_CHECK_EQ(RETAINS(&h), 2);
    rl_timer_invalidate(t);
    RLT_CHECK_EQ(RELEASES(&h), 2);
    rl_release(t);
}

typedef struct {
    rl_timer_t *timer;
    _Atomic(rl_loop_t *) loop;
    atomic_bool quit;
} other_t;

static void *run_other(void *arg) {
    other_t *o = arg;
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *keep = rl_timer_create(rl_time_now() + 1000, 0, 0, tt_timer_cb, NULL);
    (void)rl_loop_add_timer(loop, keep, DEF);
    atomic_store(&o->loop, loop);
    while (!atomic_load(&o->quit)) rl_run_in_mode(DEF, 0.01, false);
    rl_timer_invalidate(keep);
    rl_release(keep);
    return NULL;
}

RLT_TEST(held_timer_invalidated_from_another_thread) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    other_t o = {0};
    pthread_t th = tt_spawn(run_other, &o);
    while (!atomic_load(&o.loop)) tt_sleep(0.001);
    rl_timer_t *t = held_timer(&h, 0.001, 0.001); /* firing on the other loop meanwhile */
    RLT_CHECK(t != NULL);
    h.loop = atomic_load(&o.loop);
    h.timer = t;
    RLT_CHECK_EQ(rl_loop_add_timer(h.loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), -EBUSY);
    RLT_CHECK_EQ(RETAINS(&h), 1);
    for (int i = 0; i < 1000 && atomic_load(&h.calls) < 3; i++) tt_sleep(0.001);
    rl_timer_invalidate(t);
    atomic_store(&o.quit, true);
    tt_join(th);
    RLT_CHECK(atomic_load(&h.calls) >= 3);
    RLT_CHECK_EQ(RETAINS(&h), 1);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    rl_release(t);
}

/* ---- info alive through every callout while another thread removes the timer ---- */

/* An info that frees itself at its last release: a callout that outlived it would touch freed
 * memory (ASan, TSan, valgrind see it). */
typedef struct {
    atomic_int refs;
    atomic_int *freed;
    atomic_int *in_callout; /* the callouts running now */
    atomic_int *released_inside;
    long touched;
} owned_info_t;

static const void *owned_retain(const void *info) {
    atomic_fetch_add(&((owned_info_t *)info)->refs, 1);
    return info;
}

static void owned_release(const void *info) {
    owned_info_t *o = (owned_info_t *)info;
    if (atomic_fetch_sub(&o->refs, 1) != 1) return;
    if (atomic_load(o->in_callout)) atomic_fetch_add(o->released_inside, 1);
    atomic_fetch_add(o->freed, 1);
    free(o);
}

static void owned_fired(rl_timer_t *t, void *info) {
    (void)t;
    owned_info_t *o = info;
    atomic_fetch_add(o->in_callout, 1);
    for (int i = 0; i < 200; i++) o->touched++; /* a window for the other thread's removal */
    atomic_fetch_sub(o->in_callout, 1);
}

typedef struct {
    rl_loop_t *loop;
    rl_timer_t *_Atomic timer;
    atomic_bool quit;
} remover_t;

static void *remove_soon(void *arg) {
    remover_t *r = arg;
    while (!atomic_load(&r->quit)) {
        rl_timer_t *t = atomic_exchange(&r->timer, NULL);
        if (!t) {
            sched_yield();
            continue;
        }
        for (int spin = rand() % 2000; spin > 0; spin--) __asm__ volatile("");
        (void)rl_loop_remove_timer(r->loop, t, DEF);
        rl_release(t);
    }
    return NULL;
}

RLT_TEST(held_timer_info_lives_through_a_callout_while_another_thread_removes_it) {
    atomic_int freed = 0, in_callout = 0, released_inside = 0;
    rl_loop_t *loop = rl_loop_get_current();
    remover_t r = {.loop = loop};
    pthread_t th = tt_spawn(remove_soon, &r);
    enum { ROUNDS = 300 };
    for (int i = 0; i < ROUNDS; i++) {
        owned_info_t *o = calloc(1, sizeof *o);
        RLT_CHECK(o != NULL);
        *o = (owned_info_t){.refs = 1, .freed = &freed, .in_callout = &in_callout, .released_inside = &released_inside};
        rl_context_t c = {o, owned_retain, owned_release};
        rl_timer_t *t = rl_timer_create_held(rl_time_now(), 1e-6, 0, owned_fired, &c);
        RLT_CHECK(t != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
        owned_release(o); /* from here on only the loop holds it */
        atomic_store(&r.timer, t); /* the remover takes this reference */
        double deadline = rl_time_now() + 5;
        while (atomic_load(&freed) == i && rl_time_now() < deadline) rl_run_in_mode(DEF, 0, false);
        RLT_CHECK_EQ(atomic_load(&freed), i + 1);
    }
    atomic_store(&r.quit, true);
    tt_join(th);
    RLT_CHECK_EQ(atomic_load(&released_inside), 0);
}

/* ---- rl_timer_invalidate_held: whether a release of the context follows the invalidation ---- */

RLT_TEST(held_timer_invalidated_in_no_loop_leaves_the_end_to_the_caller) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = held_timer(&h, 100, 0);
    RLT_CHECK(t != NULL);
    RLT_CHECK(rl_timer_invalidate_held(t)); /* never in a loop: no release follows */
    RLT_CHECK(!rl_timer_is_valid(t));
    RLT_CHECK(!rl_timer_invalidate_held(t)); /* already invalid */
    RLT_CHECK(!rl_timer_invalidate_held(NULL));
    rl_release(t);
    RLT_CHECK_EQ(RETAINS(&h), 0);
    RLT_CHECK_EQ(RELEASES(&h), 0);
    /* Removed from its last mode, then invalidated: the removal's release ran, none follows. */
    h = (held_t){0};
    t = held_timer(&h, 100, 1);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    RLT_CHECK(rl_timer_invalidate_held(t));
    RLT_CHECK_EQ(RELEASES(&h), 1);
    rl_release(t);
    /* An ordinary timer: true when this call invalidated it. */
    rl_timer_t *plain = rl_timer_create(rl_time_now() + 100, 0, 0, held_fired, NULL);
    RLT_CHECK(plain != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, plain, DEF), 0);
    RLT_CHECK(rl_timer_invalidate_held(plain));
    RLT_CHECK(!rl_timer_invalidate_held(plain));
    rl_release(plain);
}

RLT_TEST(held_timer_invalidated_in_a_loop_releases_its_context_inside_the_call) {
    static held_t h; /* static: a failed check returns with the timer still in the loop */
    h = (held_t){0};
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = held_timer(&h, 100, 1);
    RLT_CHECK(t != NULL);
    h.loop = loop;
    h.timer = t;
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, "other"), 0);
    RLT_CHECK_EQ(RELEASES(&h), 0);
    RLT_CHECK(!rl_timer_invalidate_held(t)); /* a release follows: it ran inside the call */
    RLT_CHECK_EQ(RETAINS(&h), 1);
    RLT_CHECK_EQ(RELEASES(&h), 1);
    RLT_CHECK(!rl_loop_contains_timer(loop, t, DEF));
    RLT_CHECK(!rl_timer_invalidate_held(t));
    rl_release(t);
    RLT_CHECK_EQ(RELEASES(&h), 1);
}

/* A callout that invalidates its own timer with rl_timer_invalidate_held: first as it stays in
 * its mode, then (a second timer) after removing it from its last mode; both times the release
 * is due as the callout returns, so the call says that one follows. */
static atomic_int held_said_caller, held_released_inside;
static void invalidate_self_held(rl_timer_t *t, void *info) {
    held_t *h = info;
    atomic_fetch_add(&h->calls, 1);
    if (h->timer) (void)rl_loop_remove_timer(h->loop, t, DEF); /* h->timer: remove first */
    if (rl_timer_invalidate_held(t)) atomic_fetch_add(&held_said_caller, 1);
    if (atomic_load(&h->count.releases) != 0) atomic_fetch_add(&held_released_inside, 1);
}

RLT_TEST(held_timer_invalidated_by_its_own_callout_is_released_after_it) {
    static held_t h[2]; /* static: a failed check returns with the timer still in the loop */
    atomic_store(&held_said_caller, 0);
    atomic_store(&held_released_inside, 0);
    rl_loop_t *loop = rl_loop_get_current();
    for (int i = 0; i < 2; i++) {
        h[i] = (held_t){.loop = loop};
        rl_context_t c = {&h[i], tt_count_retain, held_release};
        rl_timer_t *t = rl_timer_create_held(rl_time_now(), 0.001, 0, invalidate_self_held, &c);
        RLT_CHECK(t != NULL);
        if (i == 1) h[i].timer = t;
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
        RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
        RLT_CHECK_EQ(atomic_load(&h[i].calls), 1);
        RLT_CHECK_EQ(RETAINS(&h[i]), 1);
        RLT_CHECK_EQ(RELEASES(&h[i]), 1);
        RLT_CHECK(!rl_timer_is_valid(t));
        rl_release(t);
    }
    RLT_CHECK_EQ(atomic_load(&held_said_caller), 0);
    RLT_CHECK_EQ(atomic_load(&held_released_inside), 0);
}

/* One thread removes a held timer from its last mode while another invalidates it with
 * rl_timer_invalidate_held: between the call's answer and the releases that find the timer
 * invalid, the end falls to someone every time (the call says true, or a release finds it
 * invalid). */
typedef struct {
    atomic_int valid_releases, invalid_releases;
    rl_timer_t *_Atomic timer;
} race_info_t;

static const void *race_retain(const void *info) { return info; }

static void race_release(const void *info) {
    race_info_t *r = (race_info_t *)info;
    if (rl_timer_is_valid(atomic_load(&r->timer))) atomic_fetch_add(&r->valid_releases, 1);
    else atomic_fetch_add(&r->invalid_releases, 1);
}

typedef struct {
    rl_loop_t *loop;
    race_info_t *info;
    atomic_int go, done;
    atomic_bool said_caller, quit;
} race_t;

static void *race_remover(void *arg) {
    race_t *r = arg;
    int seen = 0;
    while (!atomic_load(&r->quit)) {
        int now = atomic_load(&r->go);
        if (now == seen) {
            sched_yield();
            continue;
        }
        seen = now;
        for (int spin = (now * 7) % 64; spin > 0; spin--) __asm__ volatile("");
        (void)rl_loop_remove_timer(r->loop, atomic_load(&r->info->timer), DEF);
        atomic_fetch_add(&r->done, 1);
    }
    return NULL;
}

static void *race_invalidator(void *arg) {
    race_t *r = arg;
    int seen = 0;
    while (!atomic_load(&r->quit)) {
        int now = atomic_load(&r->go);
        if (now == seen) {
            sched_yield();
            continue;
        }
        seen = now;
        for (int spin = (now * 13) % 64; spin > 0; spin--) __asm__ volatile("");
        atomic_store(&r->said_caller, rl_timer_invalidate_held(atomic_load(&r->info->timer)));
        atomic_fetch_add(&r->done, 1);
    }
    return NULL;
}

RLT_TEST(held_timer_removed_and_invalidated_on_two_threads_ends_once) {
    static race_info_t info;
    static race_t r;
    r = (race_t){.loop = rl_loop_get_current(), .info = &info};
    pthread_t remover = tt_spawn(race_remover, &r), invalidator = tt_spawn(race_invalidator, &r);
    int neither = 0;
    enum { ROUNDS = 20000 };
    for (int i = 1; i <= ROUNDS; i++) {
        info = (race_info_t){0};
        rl_context_t c = {&info, race_retain, race_release};
        rl_timer_t *t = rl_timer_create_held(rl_time_now() + 100, 1, 0, held_fired, &c);
        RLT_CHECK(t != NULL);
        atomic_store(&info.timer, t);
        RLT_CHECK_EQ(rl_loop_add_timer(r.loop, t, DEF), 0);
        atomic_store(&r.go, i);
        while (atomic_load(&r.done) != 2 * i) sched_yield();
        int invalid = atomic_load(&info.invalid_releases);
        if (!atomic_load(&r.said_caller) && invalid == 0) neither++;
        RLT_CHECK_EQ(atomic_load(&info.valid_releases) + invalid, 1); /* one hold, one release */
        rl_release(t);
    }
    atomic_store(&r.quit, true);
    tt_join(remover);
    tt_join(invalidator);
    RLT_CHECK_EQ(neither, 0);
}
