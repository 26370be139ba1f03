/*
 * t_storage.c - timers in the caller's memory (rl_timer_create_in): the memory is handed back by
 * done exactly once, after the context's release, when the last reference goes, whoever drops it
 * (the caller, a loop after a one-shot callout, a loop that ends with its thread); the library
 * touches it no more after done (done frees it here, so AddressSanitizer would see a later
 * touch); errors write nothing.
 */
#include "ttrace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEF RL_DEFAULT_MODE

/* A connection as a C server would have it: the timer inside the struct that owns it. */
typedef struct conn {
    tt_count_t count;          /* the context's retains and releases */
    int fired;
    bool rearm;                /* the callout re-arms the timer (a timeout) */
    atomic_int *done_calls;    /* outside the struct: it is freed by done */
    atomic_int *releases_at_done; /* the context's releases done had seen */
    _Alignas(8) unsigned char timer[RL_TIMER_STORAGE_SIZE];
} conn;

static void conn_done(void *memory) {
    conn *c = (conn *)((char *)memory - offsetof(conn, timer));
    atomic_store(c->releases_at_done, atomic_load(&c->count.releases));
    atomic_fetch_add(c->done_calls, 1);
    free(c);
}

static void conn_fired(rl_timer_t *t, void *info) {
    conn *c = info;
    c->fired++;
    if (c->rearm) {
        c->rearm = false;
        RLT_CHECK_EQ(rl_timer_rearm(t, 0), 0);
    }
}

static conn *new_conn(atomic_int *done_calls, atomic_int *releases_at_done) {
    conn *c = calloc(1, sizeof *c);
    if (c) {
        c->done_calls = done_calls;
        c->releases_at_done = releases_at_done;
    }
    return c;
}

static rl_timer_t *conn_timer(conn *c, unsigned flags, double fire_date, double interval) {
    rl_timer_storage s = {c->timer, sizeof c->timer, conn_done};
    rl_context_t ctx = {c, tt_count_retain, tt_count_release};
    return rl_timer_create_in(&s, flags, fire_date, interval, 0, conn_fired, &ctx);
}

RLT_TEST(timer_in_storage_is_the_memory_and_is_handed_back_by_its_last_release) {
    atomic_int done_calls = 0, releases_at_done = -1;
    conn *c = new_conn(&done_calls, &releases_at_done);
    RLT_CHECK(c != NULL);
    rl_timer_t *t = conn_timer(c, 0, rl_time_now() + 100, 0);
    RLT_CHECK(t != NULL);
    RLT_CHECK((void *)t == (void *)c->timer);
    /* not held: the context is retained at creation, as rl_timer_create's */
    RLT_CHECK_EQ(atomic_load(&c->count.retains), 1);
    RLT_CHECK(rl_timer_is_valid(t));
    RLT_CHECK(!rl_timer_is_timeout(t));
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    rl_retain(t);
    rl_release(t);
    rl_release(t); /* the caller's; the loop still holds it */
    RLT_CHECK_EQ(atomic_load(&done_calls), 0);
    rl_timer_invalidate(t); /* the loop's: the last */
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);
    /* the context was released first, and once */
    RLT_CHECK_EQ(atomic_load(&releases_at_done), 1);
}

RLT_TEST(one_shot_timer_in_storage_is_handed_back_after_its_callout_by_the_loop) {
    atomic_int done_calls = 0, releases_at_done = -1;
    conn *c = new_conn(&done_calls, &releases_at_done);
    RLT_CHECK(c != NULL);
    rl_timer_t *t = conn_timer(c, 0, 0, 0);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    rl_release(t);
    RLT_CHECK_EQ(atomic_load(&done_calls), 0);
    /* The callout reads the struct (fired++), then the loop drops the last reference: done
     * frees the struct, and nothing may touch it after that (ASan). */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);
    RLT_CHECK_EQ(atomic_load(&releases_at_done), 1);
}

RLT_TEST(held_timeout_in_storage_holds_its_context_only_in_a_loop_and_fires_again) {
    atomic_int done_calls = 0, releases_at_done = -1;
    conn *c = new_conn(&done_calls, &releases_at_done);
    RLT_CHECK(c != NULL);
    rl_timer_t *t = conn_timer(c, RL_TIMER_IN_HELD | RL_TIMER_IN_TIMEOUT, 0, 0);
    RLT_CHECK(t != NULL);
    RLT_CHECK(rl_timer_is_timeout(t));
    RLT_CHECK_EQ(atomic_load(&c->count.retains), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(atomic_load(&c->count.retains), 1);
    c->rearm = true; /* fires, re-arms itself from its callout, fires again, then is dormant */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(c->fired, 2);
    RLT_CHECK(rl_timer_is_valid(t));
    RLT_CHECK(!rl_timer_is_armed(t));
    RLT_CHECK_EQ(atomic_load(&c->count.releases), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(atomic_load(&c->count.releases), 1);
    RLT_CHECK_EQ(atomic_load(&done_calls), 0);
    rl_release(t);
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);
    RLT_CHECK_EQ(atomic_load(&releases_at_done), 1);
}

/* A loop on a thread of its own holds the timer when the thread exits. */
static void *run_once(void *arg) {
    rl_timer_t *t = arg;
    if (rl_loop_add_timer(rl_loop_get_current(), t, DEF) != 0) return "add failed";
    rl_release(t);
    return NULL;
}

RLT_TEST(timer_in_storage_is_handed_back_when_its_loop_ends) {
    atomic_int done_calls = 0, releases_at_done = -1;
    conn *c = new_conn(&done_calls, &releases_at_done);
    RLT_CHECK(c != NULL);
    rl_timer_t *t = conn_timer(c, RL_TIMER_IN_HELD, rl_time_now() + 100, 1);
    RLT_CHECK(t != NULL);
    pthread_t thread;
    RLT_CHECK_EQ(pthread_create(&thread, NULL, run_once, t), 0);
    void *result = "not joined";
    RLT_CHECK_EQ(pthread_join(thread, &result), 0);
    RLT_CHECK(result == NULL);
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);
    RLT_CHECK_EQ(atomic_load(&releases_at_done), 1);
}

static void ignore_done(void *memory) { (void)memory; }
static void nothing_fired(rl_timer_t *t, void *info) {
    (void)t;
    (void)info;
}

RLT_TEST(timer_in_storage_errors_write_nothing) {
    _Alignas(8) unsigned char memory[RL_TIMER_STORAGE_SIZE + 8];
    memset(memory, 0xAB, sizeof memory);
    rl_timer_storage ok = {memory, sizeof memory, ignore_done};
    rl_timer_storage small = {memory, RL_TIMER_STORAGE_SIZE - 1, ignore_done};
    rl_timer_storage misaligned = {memory + 1, RL_TIMER_STORAGE_SIZE, ignore_done};
    rl_timer_storage no_done = {memory, sizeof memory, NULL};
    rl_timer_storage no_memory = {NULL, sizeof memory, ignore_done};
    RLT_CHECK(rl_timer_create_in(NULL, 0, 0, 0, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&small, 0, 0, 0, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&misaligned, 0, 0, 0, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&no_done, 0, 0, 0, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&no_memory, 0, 0, 0, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&ok, 16, 0, 0, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&ok, RL_TIMER_IN_OWNED_BY_CONTEXT, 0, 0, 0, nothing_fired, NULL) == NULL &&
              errno == EINVAL); /* without RL_TIMER_IN_HELD */
    RLT_CHECK(rl_timer_create_in(&ok, RL_TIMER_IN_TIMEOUT, 0, 1, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&ok, 0, -1, 0, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&ok, 0, 0, NAN, 0, nothing_fired, NULL) == NULL && errno == EINVAL);
    RLT_CHECK(rl_timer_create_in(&ok, 0, 0, 0, 0, NULL, NULL) == NULL && errno == EINVAL);
    for (size_t i = 0; i < sizeof memory; i++) RLT_CHECK_EQ(memory[i], 0xAB);
    /* and a good call works in the same memory, with a NULL context */
    rl_timer_t *t = rl_timer_create_in(&ok, 0, 0, 0, 0, nothing_fired, NULL);
    RLT_CHECK((void *)t == (void *)memory);
    rl_release(t);
}

/* The same errors with a context, after good calls that left the thread's last record equal to
 * the bad call's (rl_timer_create_in's usual path checks its arguments against that record): a
 * held context and an unheld one, and a record from rl_timer_create (no done), which must not
 * let storage without done through. A good call's retains: none for a held context, one for an
 * unheld one. */
RLT_TEST(timer_in_storage_errors_write_nothing_after_good_calls_with_the_same_context) {
    _Alignas(8) unsigned char good[RL_TIMER_STORAGE_SIZE], memory[RL_TIMER_STORAGE_SIZE + 8];
    memset(memory, 0xAB, sizeof memory);
    tt_count_t count = {0};
    rl_context_t ctx = {&count, tt_count_retain, tt_count_release};
    rl_timer_storage ok = {good, sizeof good, ignore_done};
    rl_timer_storage small = {memory, RL_TIMER_STORAGE_SIZE - 1, ignore_done};
    rl_timer_storage misaligned = {memory + 1, RL_TIMER_STORAGE_SIZE, ignore_done};
    rl_timer_storage no_done = {memory, sizeof memory, NULL};
    rl_timer_storage no_memory = {NULL, sizeof memory, ignore_done};
    rl_timer_storage bad_flags = {memory, sizeof memory, ignore_done};
    static const unsigned flag_sets[] = {RL_TIMER_IN_HELD | RL_TIMER_IN_OWNED_BY_CONTEXT, 0, RL_TIMER_IN_HELD,
                                         RL_TIMER_IN_HELD | RL_TIMER_IN_TIMEOUT | RL_TIMER_IN_DATE_AS_GIVEN};
    for (size_t k = 0; k < sizeof flag_sets / sizeof flag_sets[0]; k++) {
        unsigned flags = flag_sets[k];
        int retains = atomic_load(&count.retains);
        rl_timer_t *t = rl_timer_create_in(&ok, flags, 0, 0, 0, nothing_fired, &ctx);
        RLT_CHECK((void *)t == (void *)good);
        RLT_CHECK_EQ(atomic_load(&count.retains) - retains, (flags & RL_TIMER_IN_HELD) ? 0 : 1);
        rl_release(t); /* the record of (nothing_fired, ctx, ignore_done, flags) is the thread's last */
        RLT_CHECK(rl_timer_create_in(NULL, flags, 0, 0, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&small, flags, 0, 0, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&misaligned, flags, 0, 0, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&no_done, flags, 0, 0, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&no_memory, flags, 0, 0, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&bad_flags, flags | 16, 0, 0, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&bad_flags, (flags & ~(unsigned)RL_TIMER_IN_HELD) | RL_TIMER_IN_OWNED_BY_CONTEXT, 0,
                                     0, 0, nothing_fired, &ctx) == NULL &&
                  errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&bad_flags, flags | RL_TIMER_IN_TIMEOUT, 0, 1, 0, nothing_fired, &ctx) == NULL &&
                  errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&bad_flags, flags, -1, 0, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&bad_flags, flags, NAN, 0, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&bad_flags, flags, 0, NAN, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&bad_flags, flags, 0, -1, 0, nothing_fired, &ctx) == NULL && errno == EINVAL);
        RLT_CHECK(rl_timer_create_in(&bad_flags, flags, 0, 0, 0, NULL, &ctx) == NULL && errno == EINVAL);
    }
    /* A record from rl_timer_create has no done: storage without one is still refused. */
    rl_context_t plain = {&count, NULL, NULL};
    rl_timer_t *m = rl_timer_create(0, 0, 0, nothing_fired, &plain);
    RLT_CHECK(m != NULL);
    rl_release(m);
    RLT_CHECK(rl_timer_create_in(&no_done, 0, 0, 0, 0, nothing_fired, &plain) == NULL && errno == EINVAL);
    for (size_t i = 0; i < sizeof memory; i++) RLT_CHECK_EQ(memory[i], 0xAB);
    RLT_CHECK_EQ(atomic_load(&count.retains), atomic_load(&count.releases));
}

RLT_TEST(release_if_last_drops_only_the_last_reference) {
    atomic_int done_calls = 0, releases_at_done = -1;
    conn *c = new_conn(&done_calls, &releases_at_done);
    RLT_CHECK(c != NULL);
    rl_timer_t *t = conn_timer(c, RL_TIMER_IN_HELD, rl_time_now() + 100, 0);
    RLT_CHECK(t != NULL);
    RLT_CHECK(!rl_release_if_last(NULL));
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    /* the loop holds a reference: nothing changes */
    RLT_CHECK(!rl_release_if_last(t));
    RLT_CHECK(rl_timer_is_valid(t));
    RLT_CHECK(rl_loop_contains_timer(rl_loop_get_current(), t, DEF));
    RLT_CHECK_EQ(atomic_load(&done_calls), 0);
    RLT_CHECK_EQ(rl_loop_remove_timer(rl_loop_get_current(), t, DEF), 0);
    /* now the caller's is the last: it goes, and the memory with it */
    RLT_CHECK(rl_release_if_last(t));
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);
    RLT_CHECK_EQ(atomic_load(&releases_at_done), 1);
    /* any object: a source */
    rl_source_context_t sc = {0};
    rl_source_t *s = rl_source_create(0, &sc);
    RLT_CHECK(s != NULL);
    rl_retain(s);
    RLT_CHECK(!rl_release_if_last(s)); /* two references: both stay */
    rl_release(s);
    RLT_CHECK(rl_release_if_last(s));
}

/* A wrapper's handle as the Swift layer's: the context owns the timer's one reference, the loop
 * holds the context (RL_TIMER_IN_HELD), and the handle goes in the context's release when nothing
 * else holds it. With RL_TIMER_IN_OWNED_BY_CONTEXT the loop's references are gone by then, so the
 * handle's is the last (rl_release_if_last) and done runs inside the release, before the pass
 * ends; nothing touches the freed struct after (ASan). */
typedef struct handle {
    int holds;               /* the loop's retains less its releases */
    int fired;
    bool last_in_release;    /* rl_release_if_last said true in the release */
    atomic_int *done_calls;
    _Alignas(8) unsigned char timer[RL_TIMER_STORAGE_SIZE];
} handle;

static void handle_done(void *memory) {
    handle *h = (handle *)((char *)memory - offsetof(handle, timer));
    atomic_fetch_add(h->done_calls, 1);
    free(h);
}
static const void *handle_retain(const void *info) {
    ((handle *)info)->holds++;
    return info;
}
static bool handle_last_in_release;
static void handle_release(const void *info) {
    handle *h = (handle *)info;
    if (--h->holds) return;
    /* The handle's owner let go before the pass: the loop's hold was the handle's last. */
    handle_last_in_release = rl_release_if_last((rl_timer_t *)(void *)h->timer);
    if (!handle_last_in_release) rl_release((rl_timer_t *)(void *)h->timer);
}
static void handle_fired(rl_timer_t *t, void *info) {
    (void)t;
    ((handle *)info)->fired++;
}

RLT_TEST(fired_one_shot_timer_whose_context_owns_it_is_left_before_its_release) {
    atomic_int done_calls = 0;
    handle *h = calloc(1, sizeof *h);
    RLT_CHECK(h != NULL);
    h->done_calls = &done_calls;
    rl_timer_storage s = {h->timer, sizeof h->timer, handle_done};
    rl_context_t ctx = {h, handle_retain, handle_release};
    rl_timer_t *t = rl_timer_create_in(&s, RL_TIMER_IN_HELD | RL_TIMER_IN_OWNED_BY_CONTEXT, 0, 0, 0, handle_fired, &ctx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    RLT_CHECK_EQ(h->holds, 1);
    handle_last_in_release = false;
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK(handle_last_in_release);
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);

    /* Without the flag the phase holds the fired timer until it ends: the handle finds another
     * reference, and done runs as the phase ends. */
    h = calloc(1, sizeof *h);
    RLT_CHECK(h != NULL);
    h->done_calls = &done_calls;
    s = (rl_timer_storage){h->timer, sizeof h->timer, handle_done};
    ctx = (rl_context_t){h, handle_retain, handle_release};
    t = rl_timer_create_in(&s, RL_TIMER_IN_HELD, 0, 0, 0, handle_fired, &ctx);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    handle_last_in_release = true;
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK(!handle_last_in_release);
    RLT_CHECK_EQ(atomic_load(&done_calls), 2);
}

/* ---- Review (rev2): the paths the tests above leave out ---- */

/* A repeating timer whose callout invalidates it and drops the owner's (last but the pass's)
 * reference: done runs after the callout returns, on the loop's thread, once; the pass touches
 * nothing of the freed struct after that (ASan). */
static rl_timer_t *self_timer;
static atomic_int *self_done_calls;
static int self_done_seen_in_callout;

static void invalidating_fired(rl_timer_t *t, void *info) {
    conn *c = info;
    c->fired++;
    rl_timer_invalidate(t);
    rl_release(self_timer); /* the owner's: the pass's is the last now */
    self_timer = NULL;
    self_done_seen_in_callout = atomic_load(self_done_calls);
}

RLT_TEST(timer_in_storage_that_invalidates_itself_in_its_callout_is_handed_back_after_it) {
    atomic_int done_calls = 0, releases_at_done = -1;
    conn *c = new_conn(&done_calls, &releases_at_done);
    RLT_CHECK(c != NULL);
    rl_timer_storage s = {c->timer, sizeof c->timer, conn_done};
    rl_context_t ctx = {c, tt_count_retain, tt_count_release};
    self_done_calls = &done_calls;
    self_done_seen_in_callout = -1;
    self_timer = rl_timer_create_in(&s, 0, 0, 0.001, 0, invalidating_fired, &ctx);
    RLT_CHECK(self_timer != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), self_timer, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(self_done_seen_in_callout, 0); /* not inside the callout: the pass held it */
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);
    RLT_CHECK_EQ(atomic_load(&releases_at_done), 1);
}

/* A held timer in storage removed by another thread while its callout runs, the other
 * references dropped meanwhile: the context's release is deferred to the callout's end, and
 * done comes after it, once. */
typedef struct {
    rl_loop_t *loop;
    rl_timer_t *t;
    atomic_int stage; /* 1: the callout runs; 2: the other thread removed and released */
} remover_t;

static remover_t remover;

static void waiting_fired(rl_timer_t *t, void *info) {
    (void)t;
    conn *c = info;
    c->fired++;
    atomic_store(&remover.stage, 1);
    while (atomic_load(&remover.stage) != 2) tt_sleep(0.0005);
    /* the context is still held: the release waits for this callout's end */
    RLT_CHECK_EQ(atomic_load(&c->count.releases), 0);
}

static void *remove_while_firing(void *arg) {
    (void)arg;
    while (atomic_load(&remover.stage) != 1) tt_sleep(0.0005);
    if (rl_loop_remove_timer(remover.loop, remover.t, DEF) != 0) return "remove failed";
    rl_release(remover.t); /* the owner's */
    atomic_store(&remover.stage, 2);
    return NULL;
}

RLT_TEST(held_timer_in_storage_removed_during_its_callout_is_released_then_handed_back) {
    atomic_int done_calls = 0, releases_at_done = -1;
    conn *c = new_conn(&done_calls, &releases_at_done);
    RLT_CHECK(c != NULL);
    rl_timer_storage s = {c->timer, sizeof c->timer, conn_done};
    rl_context_t ctx = {c, tt_count_retain, tt_count_release};
    rl_timer_t *t = rl_timer_create_in(&s, RL_TIMER_IN_HELD, 0, 10, 0, waiting_fired, &ctx);
    RLT_CHECK(t != NULL);
    remover = (remover_t){rl_loop_get_current(), t, 0};
    RLT_CHECK_EQ(rl_loop_add_timer(remover.loop, t, DEF), 0);
    pthread_t thread;
    RLT_CHECK_EQ(pthread_create(&thread, NULL, remove_while_firing, NULL), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 2.0, false), RL_RUN_FINISHED);
    void *result = "not joined";
    RLT_CHECK_EQ(pthread_join(thread, &result), 0);
    RLT_CHECK(result == NULL);
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);
    RLT_CHECK_EQ(atomic_load(&releases_at_done), 1);
}

/* RL_TIMER_IN_DATE_AS_GIVEN keeps a date that has passed (no clock reading); without it the date
 * becomes now, as rl_timer_create's. Both are due at once and fire in date order. */
static int as_given_log[2], as_given_n;
static void as_given_fired(rl_timer_t *t, void *info) {
    (void)t;
    as_given_log[as_given_n++] = (int)(intptr_t)info;
}

RLT_TEST(timer_in_storage_made_from_the_loops_time_keeps_its_date_as_given) {
    _Alignas(8) static unsigned char kept[RL_TIMER_STORAGE_SIZE], clamped[RL_TIMER_STORAGE_SIZE];
    rl_timer_storage a = {kept, sizeof kept, ignore_done}, b = {clamped, sizeof clamped, ignore_done};
    rl_loop_t *loop = rl_loop_get_current();
    double past = rl_time_now() - 5;
    rl_context_t second = {(void *)(intptr_t)2, NULL, NULL}, first = {(void *)(intptr_t)1, NULL, NULL};
    /* made first, due later (now); made second, due earlier (5 s ago, kept) */
    rl_timer_t *c = rl_timer_create_in(&b, 0, past, 0, 0, as_given_fired, &second);
    rl_timer_t *k = rl_timer_create_in(&a, RL_TIMER_IN_DATE_AS_GIVEN | RL_TIMER_IN_TIMEOUT, past, 0, 0,
                                       as_given_fired, &first);
    RLT_CHECK(c != NULL && k != NULL);
    RLT_CHECK(rl_timer_get_next_fire_date(k) == past);
    RLT_CHECK(rl_timer_get_next_fire_date(c) > past + 4);
    RLT_CHECK(rl_timer_is_timeout(k));
    RLT_CHECK_EQ(rl_loop_add_timer(loop, c, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, k, DEF), 0);
    as_given_n = 0;
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(as_given_n, 2);
    RLT_CHECK_EQ(as_given_log[0], 1);
    RLT_CHECK_EQ(as_given_log[1], 2);
    rl_timer_invalidate(k);
    rl_release(k);
    rl_release(c);
}

/* ---- Review (s3): rl_timer_context_release_is_final and memory handed back inside the release ---- */

/* A handle that is its timer's context and owns it (RL_TIMER_IN_OWNED_BY_CONTEXT), in memory that
 * done hands back for reuse (crunloop.h: "done may free it, reuse it for a new timer"). The
 * release that ends the first timer (final) drops the handle's reference, the last (done runs
 * inside it), and makes a second timer in the same memory, which it adds and removes: the second
 * timer's release, nested inside the first's, is not final (a removal, which an invalidation on
 * another thread may race), though its address is the one whose final release is under way. */
typedef struct reuse {
    int holds;
    rl_loop_t *loop;
    _Alignas(8) unsigned char timer[RL_TIMER_STORAGE_SIZE];
} reuse;
static reuse reuse_slot;
static int reuse_dones, reuse_answers; /* per release: 1 final, 2 not, in decimal digits */

static void reuse_done(void *memory) {
    (void)memory;
    reuse_dones++;
}
static const void *reuse_retain(const void *info) {
    ((reuse *)info)->holds++;
    return info;
}
static void reuse_answer(void) {
    reuse_answers = reuse_answers * 10 + (rl_timer_context_release_is_final((rl_timer_t *)(void *)reuse_slot.timer) ? 1 : 2);
}
static void reuse_second_release(const void *info) {
    reuse_answer();
    ((reuse *)info)->holds--;
}
static void reuse_first_release(const void *info) {
    reuse *r = (reuse *)info;
    reuse_answer();
    if (--r->holds) return;
    rl_timer_t *t = (rl_timer_t *)(void *)r->timer;
    if (!rl_release_if_last(t)) {
        rl_release(t);
        return;
    }
    /* The memory is back (done ran): a new timer in it, in and out of the loop. */
    rl_timer_storage s = {r->timer, sizeof r->timer, reuse_done};
    rl_context_t c = {r, reuse_retain, reuse_second_release};
    rl_timer_t *again = rl_timer_create_in(&s, RL_TIMER_IN_HELD, INFINITY, 0, 0, nothing_fired, &c);
    if (!again) return;
    if (rl_loop_add_timer(r->loop, again, DEF) == 0) (void)rl_loop_remove_timer(r->loop, again, DEF);
    rl_release(again);
}

RLT_TEST(timer_made_in_memory_handed_back_inside_a_final_release_has_no_final_release) {
    memset(&reuse_slot, 0, sizeof reuse_slot);
    reuse_dones = reuse_answers = 0;
    reuse_slot.loop = rl_loop_get_current();
    rl_timer_storage s = {reuse_slot.timer, sizeof reuse_slot.timer, reuse_done};
    rl_context_t c = {&reuse_slot, reuse_retain, reuse_first_release};
    rl_timer_t *t = rl_timer_create_in(&s, RL_TIMER_IN_HELD | RL_TIMER_IN_OWNED_BY_CONTEXT, 0, 0, 0, nothing_fired, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(reuse_slot.loop, t, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(reuse_dones, 2);       /* both timers, each once */
    RLT_CHECK_EQ(reuse_slot.holds, 0);
    RLT_CHECK_EQ(reuse_answers, 12);    /* the first release final, the second (a removal) not */
}

/* ---- Review (s3): one-shot timers whose context owns them, under races ---- */

/* A wrapper's handle as the Swift layer's LoopTimer: the context, with a count of its own (a
 * Swift object's: the loop's hold and its users'), owning the one reference to its timer, which
 * lives in the handle's memory (done frees it, so AddressSanitizer sees a later touch). The
 * handle's end (its closure released) happens once: in a final release by a plain store, as
 * LoopTimer.endAlone does, else by an exchange (LoopTimer.end) from a release that finds the
 * timer invalid or from an rl_timer_invalidate_held that says the end falls to its caller. */
typedef struct owned {
    atomic_int refs;
    atomic_int ended;
    atomic_bool final_seen, invalidated_alone; /* a final release; invalidate_held said true */
    int kind;                                  /* what its callout does */
    rl_loop_t *loop;
    _Alignas(8) unsigned char timer[RL_TIMER_STORAGE_SIZE];
} owned_t;

static atomic_int owned_dones, owned_ends, owned_bad;
static _Thread_local int owned_depth;

static rl_timer_t *owned_timer(owned_t *o) { return (rl_timer_t *)(void *)o->timer; }

static void owned_done(void *memory) {
    owned_t *o = (owned_t *)((char *)memory - offsetof(owned_t, timer));
    if (atomic_load(&o->ended) != 1 || (atomic_load(&o->final_seen) && atomic_load(&o->invalidated_alone)))
        atomic_fetch_add(&owned_bad, 1);
    atomic_fetch_add(&owned_dones, 1);
    free(o);
}
static void owned_end(owned_t *o) {
    if (!atomic_exchange(&o->ended, 1)) atomic_fetch_add(&owned_ends, 1);
}
static void owned_put(owned_t *o) { /* a handle's reference goes; the last: its deinit */
    if (atomic_fetch_sub(&o->refs, 1) != 1) return;
    owned_end(o); /* the closure goes with the handle, if it has not ended */
    rl_timer_t *t = owned_timer(o);
    if (!rl_release_if_last(t)) rl_release(t);
}
static void owned_invalidate(owned_t *o) {
    if (rl_timer_invalidate_held(owned_timer(o))) {
        atomic_store(&o->invalidated_alone, true);
        owned_end(o);
    }
}
static const void *owned_retain(const void *info) {
    atomic_fetch_add(&((owned_t *)info)->refs, 1);
    return info;
}
static void owned_release(const void *info) {
    owned_t *o = (owned_t *)info;
    rl_timer_t *t = owned_timer(o);
    if (rl_timer_context_release_is_final(t)) {
        atomic_store(&o->final_seen, true);
        if (atomic_load_explicit(&o->ended, memory_order_relaxed)) atomic_fetch_add(&owned_bad, 1);
        atomic_store_explicit(&o->ended, 1, memory_order_relaxed);
        atomic_fetch_add(&owned_ends, 1);
    } else if (!rl_timer_is_valid(t)) {
        owned_end(o);
    }
    owned_put(o);
}
static void owned_fired(rl_timer_t *t, void *info) {
    owned_t *o = info;
    switch (o->kind % 6) {
    case 1: owned_invalidate(o); break; /* from its own callout: the release follows */
    case 2:
        (void)rl_loop_remove_timer(o->loop, t, DEF);
        (void)rl_loop_add_timer(o->loop, t, DEF);
        break;
    case 3:
        if (owned_depth < 3) { /* a nested run fires the timers due meanwhile */
            owned_depth++;
            (void)rl_run_in_mode(DEF, 0, false);
            owned_depth--;
        }
        break;
    case 4: (void)rl_loop_remove_timer(o->loop, t, DEF); break;
    case 5: (void)rl_loop_add_timer(o->loop, t, "other"); break; /* a second mode, left as it ends */
    }
}

typedef struct {
    owned_t **h;
    int n;
    unsigned seed;
    rl_loop_t *loop;
    bool *dropped; /* the meddler's reference to h[i] is gone: it touches it no more */
} owned_race_t;

/* The end of a racing thread: it invalidates every handle it still holds and lets it go. */
static void owned_race_end(owned_race_t *r) {
    for (int i = 0; i < r->n; i++) {
        if (r->dropped[i]) continue;
        owned_invalidate(r->h[i]);
        owned_put(r->h[i]);
    }
}

/* A loop's turn: its default mode, then "other" (where callouts put timers too). */
static void owned_turn(void) {
    if (rl_run_in_mode(DEF, 0.001, false) == RL_RUN_FINISHED) sched_yield();
    (void)rl_run_in_mode("other", 0, false);
}

/* Another thread, holding a reference to every handle: invalidates, removes and adds them back
 * at random while the loop fires them; then invalidates each and lets it go. */
static void *owned_meddler(void *arg) {
    owned_race_t *r = arg;
    unsigned s = r->seed;
    for (int k = 0; k < 3 * r->n; k++) {
        s = s * 1103515245u + 12345u;
        unsigned i = (s >> 8) % (unsigned)r->n;
        owned_t *o = r->h[i];
        if (r->dropped[i]) continue;
        switch ((s >> 4) & 7) {
        case 0: owned_invalidate(o); break;
        case 1: (void)rl_loop_remove_timer(r->loop, owned_timer(o), DEF); break;
        case 2: case 3: (void)rl_loop_add_timer(r->loop, owned_timer(o), DEF); break;
        case 4: /* the meddler's reference goes: the loop's hold may be the handle's last */
            r->dropped[i] = true;
            owned_put(o);
            break;
        default: sched_yield(); break;
        }
    }
    owned_race_end(r);
    return NULL;
}

/* n context-owned one-shot timers of round, in loop's default mode, due from now at steps of
 * step seconds; each handle counts two references: its maker's and the racing thread's. */
static void owned_make_all(owned_t **h, int n, int round, rl_loop_t *loop, double now, double step) {
    for (int i = 0; i < n; i++) {
        owned_t *o = calloc(1, sizeof *o);
        RLT_CHECK(o != NULL);
        atomic_init(&o->refs, 2);
        o->kind = i + round;
        o->loop = loop;
        rl_timer_storage s = {o->timer, sizeof o->timer, owned_done};
        rl_context_t c = {o, owned_retain, owned_release};
        RLT_CHECK(rl_timer_create_in(&s, RL_TIMER_IN_HELD | RL_TIMER_IN_OWNED_BY_CONTEXT | RL_TIMER_IN_DATE_AS_GIVEN,
                                     now + (i % 40) * step, 0, i % 3, owned_fired, &c) != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, owned_timer(o), DEF), 0);
        h[i] = o;
    }
}

/* One round of a race: n handles made (owned_make_all), racer(arg) started on a thread of its
 * own, the maker's references let go, and loop run until every handle's memory is handed back
 * (or 20 s pass, racer joined on the way). Returns how many were handed back. */
static int owned_round(owned_t **h, int n, int round, rl_loop_t *loop, double step, void *(*racer)(void *),
                       void *arg) {
    int base = atomic_load(&owned_dones);
    owned_make_all(h, n, round, loop, rl_time_now(), step);
    pthread_t th = tt_spawn(racer, arg);
    for (int i = 0; i < n; i++) owned_put(h[i]); /* the maker's: the loop's hold remains */
    double give_up = rl_time_now() + 20;
    while (atomic_load(&owned_dones) - base < n && rl_time_now() < give_up) owned_turn();
    tt_join(th);
    while (atomic_load(&owned_dones) - base < n && rl_time_now() < give_up) owned_turn();
    return atomic_load(&owned_dones) - base;
}

RLT_TEST(one_shot_timers_whose_context_owns_them_end_once_under_races) {
    enum { N = 400, ROUNDS = 25 };
    rl_loop_t *loop = rl_loop_get_current();
    static owned_t *h[N];
    atomic_store(&owned_dones, 0);
    atomic_store(&owned_ends, 0);
    atomic_store(&owned_bad, 0);
    for (int round = 0; round < ROUNDS; round++) {
        static bool dropped[N];
        memset(dropped, 0, sizeof dropped);
        owned_race_t r = {h, N, 2654435761u * (unsigned)(round + 1), loop, dropped};
        RLT_CHECK_EQ(owned_round(h, N, round, loop, 1e-5, owned_meddler, &r), N);
    }
    RLT_CHECK_EQ(atomic_load(&owned_ends), N * ROUNDS);
    RLT_CHECK_EQ(atomic_load(&owned_bad), 0);
}

/* As crunloop.h says of RL_TIMER_IN_OWNED_BY_CONTEXT: fired by a run nested in another timer's
 * callout, the handle's reference is not the last in its release (the loop's go as without the
 * flag), and done runs once, after it. */
static void run_nested(rl_timer_t *t, void *info) {
    (void)t, (void)info;
    (void)rl_run_in_mode(DEF, 0, false);
}

RLT_TEST(one_shot_timer_whose_context_owns_it_fired_by_a_nested_run_is_let_go_after_its_release) {
    atomic_int done_calls = 0;
    handle *h = calloc(1, sizeof *h);
    RLT_CHECK(h != NULL);
    h->done_calls = &done_calls;
    rl_timer_storage s = {h->timer, sizeof h->timer, handle_done};
    rl_context_t ctx = {h, handle_retain, handle_release};
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *outer = rl_timer_create(0, 0, 0, run_nested, NULL);
    rl_timer_t *t = rl_timer_create_in(&s, RL_TIMER_IN_HELD | RL_TIMER_IN_OWNED_BY_CONTEXT, 0, 0, 1, handle_fired, &ctx);
    RLT_CHECK(outer && t);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, outer, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    handle_last_in_release = true;
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK(!handle_last_in_release);
    RLT_CHECK_EQ(atomic_load(&done_calls), 1);
    rl_release(outer);
}

/* The same with a second loop on another thread: the meddler also moves timers to it (out of the
 * first loop, into the second) while either may be firing them, so that a timer's callout may
 * be under way on one loop while another claims it, and fired one-shot timers leave either. */
typedef struct {
    rl_loop_t *loop;
    atomic_bool ready, stop;
} second_loop_t;

static void *second_loop_main(void *arg) {
    second_loop_t *s = arg;
    s->loop = rl_retain(rl_loop_get_current());
    atomic_store(&s->ready, true);
    while (!atomic_load(&s->stop)) owned_turn();
    return NULL;
}

typedef struct {
    owned_race_t race;
    rl_loop_t *second;
} owned_move_t;

static void *owned_mover(void *arg) {
    owned_move_t *m = arg;
    owned_race_t *r = &m->race;
    unsigned s = r->seed;
    for (int k = 0; k < 3 * r->n; k++) {
        s = s * 1103515245u + 12345u;
        unsigned i = (s >> 8) % (unsigned)r->n;
        owned_t *o = r->h[i];
        rl_timer_t *t = owned_timer(o);
        if (r->dropped[i]) continue;
        switch ((s >> 4) & 7) {
        case 0: owned_invalidate(o); break;
        case 1: (void)rl_loop_remove_timer(r->loop, t, DEF); break;
        case 2: (void)rl_loop_add_timer(r->loop, t, DEF); break;
        case 3:
        case 4:
            (void)rl_loop_remove_timer(r->loop, t, DEF);
            (void)rl_loop_add_timer(m->second, t, DEF);
            break;
        case 5: (void)rl_loop_remove_timer(m->second, t, DEF); break;
        case 6:
            r->dropped[i] = true;
            owned_put(o);
            break;
        default: sched_yield(); break;
        }
    }
    owned_race_end(r);
    return NULL;
}

RLT_TEST(one_shot_timers_whose_context_owns_them_end_once_moving_between_loops) {
    enum { N = 400, ROUNDS = 25 };
    rl_loop_t *loop = rl_loop_get_current();
    static owned_t *h[N];
    static second_loop_t second;
    second = (second_loop_t){0};
    pthread_t other = tt_spawn(second_loop_main, &second);
    while (!atomic_load(&second.ready)) sched_yield();
    atomic_store(&owned_dones, 0);
    atomic_store(&owned_ends, 0);
    atomic_store(&owned_bad, 0);
    for (int round = 0; round < ROUNDS; round++) {
        static bool dropped[N];
        memset(dropped, 0, sizeof dropped);
        owned_move_t m = {{h, N, 2246822519u * (unsigned)(round + 1), loop, dropped}, second.loop};
        RLT_CHECK_EQ(owned_round(h, N, round, loop, 1e-4, owned_mover, &m), N);
    }
    atomic_store(&second.stop, true);
    tt_join(other);
    rl_release(second.loop);
    RLT_CHECK_EQ(atomic_load(&owned_ends), N * ROUNDS);
    RLT_CHECK_EQ(atomic_load(&owned_bad), 0);
}
