/*
 * t_lag.c - loop lag (rl_loop_get_lag): the lateness histogram's buckets, the longest callout
 * and its kind for each kind of callout, a phase of several callouts, reset, bad input, the
 * struct's size contract, a dead loop's figures, and reading (and resetting) from another
 * thread while the loop runs.
 */
#include "ttrace.h"

#include <unistd.h>

#define DEF RL_DEFAULT_MODE

/* The bucket of a lateness in seconds, computed apart from the library (crunloop.h's table). */
static int bucket_of(double seconds) {
    double us = seconds * 1e6;
    if (us < 1) return 0;
    int k = (int)floor(log2(us)) + 1;
    return k > RL_LAG_BUCKETS - 1 ? RL_LAG_BUCKETS - 1 : k;
}

static int get_lag(rl_loop_lag_t *lag, unsigned flags) {
    return rl_loop_get_lag(rl_loop_get_current(), lag, sizeof *lag, flags);
}

static void sleep_perform(void *info) { tt_sleep(*(double *)info); }
static void sleep_block(void *arg) { tt_sleep(*(double *)arg); }
static void sleep_timer(rl_timer_t *t, void *info) { (void)t, tt_sleep(*(double *)info); }
static void sleep_observer(rl_observer_t *o, unsigned activity, void *info) {
    (void)o, (void)activity;
    tt_sleep(*(double *)info);
}
static void sleep_fd(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s, (void)fd, (void)events;
    tt_sleep(*(double *)info);
}

/* A one-shot timer due now whose callout sleeps *nap seconds, in mode DEF; borrowed. */
static rl_timer_t *add_sleeper(double *nap) {
    rl_context_t c = { nap, NULL, NULL };
    rl_timer_t *t = rl_timer_create(0, 0, 0, sleep_timer, &c);
    if (t && rl_loop_add_timer(rl_loop_get_current(), t, DEF) != 0) {
        rl_release(t);
        return NULL;
    }
    rl_release(t);
    return t;
}

typedef struct { double fire_date, called_at; } late_probe_t;

static void note_call(rl_timer_t *t, void *info) {
    (void)t;
    ((late_probe_t *)info)->called_at = rl_time_now();
}

/* A timer made late by a callout before it, in the same pass: a version-0 source performed
 * before the timer phase sleeps 20 ms past the timer's date. The bucket lies between those of
 * the least lateness it can have (the sleep) and the most (its callout's own start). */
RLT_TEST(lag_timer_made_late_by_an_earlier_callout_lands_in_its_bucket) {
    rl_loop_lag_t lag;
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    double nap = 0.02;
    rl_source_context_t sc = { &nap, NULL, NULL, NULL, NULL, sleep_perform };
    rl_source_t *s = rl_source_create(0, &sc);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    late_probe_t p = { 0, 0 };
    rl_context_t c = { &p, NULL, NULL };
    rl_timer_t *t = rl_timer_create(0, 0, 0, note_call, &c); /* due now */
    RLT_CHECK(t != NULL);
    p.fire_date = rl_timer_get_next_fire_date(t);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    rl_source_signal(s);
    double before = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(p.called_at > 0);

    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    RLT_CHECK_EQ(lag.timers_fired, 1);
    int lo = bucket_of(before + nap - p.fire_date), hi = bucket_of(p.called_at - p.fire_date);
    int found = -1;
    for (int k = 0; k < RL_LAG_BUCKETS; k++)
        if (lag.late[k]) {
            RLT_CHECK_EQ(lag.late[k], 1);
            found = k;
        }
    TT_GE(found, lo);
    TT_GE(hi, found);
    TT_GE(found, 15); /* 20 ms is in [2^14, 2^15) us */
    rl_source_invalidate(s);
    rl_release(s);
    rl_release(t);
}

typedef struct { double nap; late_probe_t probe; rl_timer_t *second; } chain_t;

/* Adds a second timer due 2 ms from now, then sleeps 5 ms: the second is not among this pass's
 * due timers (it was added after they were taken), so the next pass fires it 3 ms late at least. */
static void add_then_stall(rl_timer_t *t, void *info) {
    (void)t;
    chain_t *c = info;
    rl_context_t pc = { &c->probe, NULL, NULL };
    c->second = rl_timer_create(rl_time_now() + 0.002, 0, 0, note_call, &pc);
    if (!c->second) return;
    c->probe.fire_date = rl_timer_get_next_fire_date(c->second);
    if (rl_loop_add_timer(rl_loop_get_current(), c->second, DEF) == 0) tt_sleep(c->nap);
}

RLT_TEST(lag_timer_delayed_by_an_earlier_pass_counts_the_delay) {
    rl_loop_lag_t lag;
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    chain_t ch;
    memset(&ch, 0, sizeof ch);
    ch.nap = 0.005;
    rl_context_t c = { &ch, NULL, NULL };
    rl_timer_t *a = rl_timer_create(0, 0, 0, add_then_stall, &c);
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), a, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(ch.second != NULL && ch.probe.called_at == 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(ch.probe.called_at > 0);
    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    RLT_CHECK_EQ(lag.timers_fired, 2);
    int late_bucket = -1;
    for (int k = bucket_of(0.003); k < RL_LAG_BUCKETS; k++)
        if (lag.late[k]) late_bucket = k;
    TT_GE(late_bucket, bucket_of(0.003));
    TT_GE(bucket_of(ch.probe.called_at - ch.probe.fire_date), late_bucket);
    rl_release(a);
    rl_release(ch.second);
}

/* After a reset, one callout of a kind sleeping 4 ms: the record is that callout, alone. */
static bool one_callout_recorded(rl_loop_lag_t *lag, int kind, double at_least, double after) {
    return get_lag(lag, 0) == 0 && lag->longest_callout_kind == kind && lag->longest_callout_count == 1 &&
           lag->longest_callout >= at_least && lag->longest_callout_end >= after + at_least &&
           lag->longest_callout_end <= rl_time_now();
}

RLT_TEST(lag_longest_callout_names_its_kind) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_lag_t lag;
    double nap = 0.004, before;
    RLT_CHECK(tt_keepalive(DEF) != NULL);

    /* A timer. */
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    RLT_CHECK_EQ(lag.size, sizeof lag);
    RLT_CHECK(add_sleeper(&nap) != NULL);
    before = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(one_callout_recorded(&lag, RL_CALLOUT_TIMER, nap, before));

    /* A version-0 source. */
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    rl_source_context_t sc = { &nap, NULL, NULL, NULL, NULL, sleep_perform };
    rl_source_t *s = rl_source_create(0, &sc);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), 0);
    rl_source_signal(s);
    before = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(one_callout_recorded(&lag, RL_CALLOUT_SOURCE, nap, before));
    rl_source_invalidate(s);
    rl_release(s);

    /* An fd source. */
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    int fds[2];
    RLT_CHECK_EQ(pipe(fds), 0);
    RLT_CHECK_EQ(write(fds[1], "x", 1), 1);
    rl_context_t c = { &nap, NULL, NULL };
    s = rl_source_create_fd(fds[0], RL_FD_READABLE, 0, sleep_fd, &c);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), 0);
    before = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(one_callout_recorded(&lag, RL_CALLOUT_FD_SOURCE, nap, before));
    rl_source_invalidate(s);
    rl_release(s);
    close(fds[0]);
    close(fds[1]);

    /* An observer. */
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    rl_observer_t *o = rl_observer_create(RL_BEFORE_SOURCES, false, 0, sleep_observer, &c);
    RLT_CHECK(o != NULL);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, DEF), 0);
    before = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(one_callout_recorded(&lag, RL_CALLOUT_OBSERVER, nap, before));
    rl_release(o);

    /* A block. */
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, sleep_block, &nap), 0);
    before = rl_time_now();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(one_callout_recorded(&lag, RL_CALLOUT_BLOCK, nap, before));
}

static void quick_block(void *arg) { (void)arg; }

RLT_TEST(lag_shorter_callouts_leave_the_record_and_a_phase_counts_its_callouts) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_lag_t lag;
    double nap = 0.01, small = 0.003;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    RLT_CHECK(add_sleeper(&nap) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    RLT_CHECK_EQ(lag.longest_callout_kind, RL_CALLOUT_TIMER);
    double record = lag.longest_callout, end = lag.longest_callout_end;
    TT_GE(record, nap);

    /* A quicker block does not displace it. */
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, quick_block, NULL), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    RLT_CHECK_EQ(lag.longest_callout_kind, RL_CALLOUT_TIMER);
    RLT_CHECK(lag.longest_callout == record && lag.longest_callout_end == end);

    /* Four blocks of one pass are timed together: 12 ms at least, four callouts. */
    for (int i = 0; i < 4; i++) RLT_CHECK_EQ(rl_loop_perform(loop, DEF, sleep_block, &small), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    if (lag.longest_callout_kind == RL_CALLOUT_BLOCK) { /* beat the 10 ms timer, as it should */
        RLT_CHECK_EQ(lag.longest_callout_count, 4);
        TT_GE(lag.longest_callout, 4 * small);
    } else { /* only if the timer's 10 ms took over 12 */
        RLT_CHECK_EQ(lag.longest_callout_kind, RL_CALLOUT_TIMER);
        TT_GE(record, 4 * small);
    }
}

RLT_TEST(lag_reset_starts_a_new_interval) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_lag_t lag;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    for (int i = 0; i < 3; i++) RLT_CHECK(tt_add_timer(DEF, 0, 0, i, NULL, "t") != NULL);
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, quick_block, NULL), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("t t t");
    RLT_CHECK_EQ(get_lag(&lag, RL_LAG_RESET), 0);
    RLT_CHECK_EQ(lag.timers_fired, 3);
    RLT_CHECK(lag.longest_callout_kind != RL_CALLOUT_NONE && lag.longest_callout_count >= 1);

    /* Nothing since: all zero. */
    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    RLT_CHECK_EQ(lag.timers_fired, 0);
    for (int k = 0; k < RL_LAG_BUCKETS; k++) RLT_CHECK_EQ(lag.late[k], 0);
    RLT_CHECK_EQ(lag.longest_callout_kind, RL_CALLOUT_NONE);
    RLT_CHECK_EQ(lag.longest_callout_count, 0);
    RLT_CHECK(lag.longest_callout == 0 && lag.longest_callout_end == 0);

    /* The next phase that calls out is the record, however short; a read without reset keeps. */
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, quick_block, NULL), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    RLT_CHECK_EQ(lag.longest_callout_kind, RL_CALLOUT_BLOCK);
    RLT_CHECK_EQ(lag.longest_callout_count, 1);
    RLT_CHECK(tt_add_timer(DEF, 0, 0, 0, NULL, "u") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    RLT_CHECK_EQ(lag.timers_fired, 1);
    RLT_CHECK_EQ(get_lag(&lag, 0), 0);
    RLT_CHECK_EQ(lag.timers_fired, 1);
}

RLT_TEST(lag_bad_input_is_refused_and_sizes_are_honoured) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_lag_t lag;
    RLT_CHECK_EQ(rl_loop_get_lag(NULL, &lag, sizeof lag, 0), -EINVAL);
    RLT_CHECK_EQ(rl_loop_get_lag(loop, NULL, sizeof lag, 0), -EINVAL);
    RLT_CHECK_EQ(rl_loop_get_lag(loop, &lag, 0, 0), -EINVAL);
    RLT_CHECK_EQ(rl_loop_get_lag(loop, &lag, sizeof lag - 1, 0), -EINVAL);
    RLT_CHECK_EQ(rl_loop_get_lag(loop, &lag, sizeof lag, 2), -EINVAL);
    RLT_CHECK_EQ(rl_loop_get_lag(loop, &lag, sizeof lag, ~0u), -EINVAL);

    /* A caller built against a later, larger struct: the tail it does not know is zeroed, and
     * size says what was filled. */
    struct { rl_loop_lag_t lag; unsigned char later[40]; } big;
    memset(&big, 0xAB, sizeof big);
    RLT_CHECK_EQ(rl_loop_get_lag(loop, &big.lag, sizeof big, 0), 0);
    RLT_CHECK_EQ(big.lag.size, sizeof(rl_loop_lag_t));
    for (size_t i = 0; i < sizeof big.later; i++) RLT_CHECK_EQ(big.later[i], 0);
    RLT_CHECK_EQ(big.lag.timers_fired, 0);
}

static void *fire_one_and_exit(void *arg) {
    rl_loop_t **out = arg;
    *out = rl_retain(rl_loop_get_current());
    if (tt_add_timer(DEF, 0, 0, 0, NULL, "x")) rl_run_in_mode(DEF, 1.0, false);
    return NULL;
}

RLT_TEST(lag_a_dead_loop_keeps_its_figures) {
    rl_loop_t *loop = NULL;
    tt_join(tt_spawn(fire_one_and_exit, &loop));
    RLT_CHECK(loop != NULL);
    rl_loop_lag_t lag;
    RLT_CHECK_EQ(rl_loop_get_lag(loop, &lag, sizeof lag, 0), 0);
    RLT_CHECK_EQ(lag.timers_fired, 1);
    RLT_CHECK_EQ(lag.longest_callout_kind, RL_CALLOUT_TIMER);
    rl_release(loop);
}

/* ---- Reading while the loop runs ---- */

typedef struct {
    rl_loop_t *loop;
    atomic_bool done;
    atomic_long fired;          /* the loop's own count of timer callouts */
    unsigned long long seen;    /* the reader's sum of timers_fired over reads with reset */
    long reads, torn;
} race_t;

/* Each tick queues two blocks, which the same pass runs together: every record is a timer
 * alone or two blocks together, never anything else. */
static void tick(rl_timer_t *t, void *info) {
    race_t *r = info;
    long n = atomic_fetch_add(&r->fired, 1) + 1;
    rl_loop_perform(r->loop, DEF, quick_block, NULL);
    rl_loop_perform(r->loop, DEF, quick_block, NULL);
    if (n == 2000) {
        rl_timer_invalidate(t);
        rl_loop_stop(r->loop);
    }
}

static bool consistent(const rl_loop_lag_t *l) {
    unsigned long long sum = 0;
    for (int k = 0; k < RL_LAG_BUCKETS; k++) sum += l->late[k];
    if (sum != l->timers_fired || l->size != sizeof *l) return false;
    switch (l->longest_callout_kind) {
    case RL_CALLOUT_NONE: return l->longest_callout_count == 0 && l->longest_callout == 0 && l->longest_callout_end == 0;
    case RL_CALLOUT_TIMER: return l->longest_callout_count == 1 && l->longest_callout_end > 0;
    case RL_CALLOUT_BLOCK: return l->longest_callout_count == 2 && l->longest_callout_end > 0;
    default: return false;
    }
}

static void *reader(void *arg) {
    race_t *r = arg;
    rl_loop_lag_t l;
    while (!atomic_load(&r->done)) {
        unsigned flags = (r->reads & 1) ? RL_LAG_RESET : 0;
        if (rl_loop_get_lag(r->loop, &l, sizeof l, flags) != 0 || !consistent(&l)) r->torn++;
        if (flags) r->seen += l.timers_fired;
        r->reads++;
    }
    return NULL;
}

RLT_TEST(lag_is_read_and_reset_from_another_thread_while_the_loop_runs) {
    race_t r;
    memset(&r, 0, sizeof r);
    r.loop = rl_loop_get_current();
    rl_loop_lag_t l;
    RLT_CHECK_EQ(get_lag(&l, RL_LAG_RESET), 0);
    rl_context_t c = { &r, NULL, NULL };
    rl_timer_t *t = rl_timer_create(0, 0.0001, 0, tick, &c);
    RLT_CHECK(t != NULL);
    RLT_CHECK_EQ(rl_loop_add_timer(r.loop, t, DEF), 0);
    pthread_t th = tt_spawn(reader, &r);
    int rc = rl_run_in_mode(DEF, 30.0, false);
    atomic_store(&r.done, true);
    tt_join(th);
    RLT_CHECK_EQ(rc, RL_RUN_STOPPED);
    RLT_CHECK_EQ(r.torn, 0);
    TT_GE(r.reads, 2);
    /* Every fired timer was counted by exactly one reset interval. */
    RLT_CHECK_EQ(get_lag(&l, RL_LAG_RESET), 0);
    RLT_CHECK_EQ(r.seen + l.timers_fired, 2000);
    RLT_CHECK_EQ(atomic_load(&r.fired), 2000);
    rl_release(t);
}
