/*
 * t_blocks.c - rl_loop_perform_context: a queued block with a reference to its info. retain runs
 * when it is queued, release exactly once: after perform, or when the block is dropped with its
 * loop; failures leave retain and release balanced; spent blocks are reused.
 */
#include <crunloop.h>
#include <rlt.h>

#include "ttrace.h"
#include "../../Sources/CRunLoopCore/internal.h" /* spare_count: reuse without a malloc hook */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define DEF RL_DEFAULT_MODE

/* An info that counts what happened to it and where. */
typedef struct {
    const char *label;
    atomic_int retains, releases, performs;
    pthread_t release_thread;
    const void *retained_as; /* what retain returned; perform and release must get this */
    int performs_at_release;
} bctx_t;

static const void *b_retain(const void *info) {
    bctx_t *b = (bctx_t *)info;
    atomic_fetch_add(&b->retains, 1);
    tt("retain-%s", b->label);
    return b->retained_as ? b->retained_as : info;
}

/* info is what retain returned: the bctx_t itself, or the one retained_as names. */
static bctx_t *owner_of(const void *info) { return (bctx_t *)info; }

static void b_release(const void *info) {
    bctx_t *b = owner_of(info);
    atomic_fetch_add(&b->releases, 1);
    b->release_thread = pthread_self();
    b->performs_at_release = atomic_load(&b->performs);
    tt("release-%s", b->label);
}

static void b_perform(void *info) {
    bctx_t *b = owner_of(info);
    atomic_fetch_add(&b->performs, 1);
    tt("perform-%s", b->label);
}

static rl_block_context_t ctx_of(bctx_t *b) {
    rl_block_context_t c = { b, b_retain, b_release, b_perform };
    return c;
}

RLT_TEST(block_context_retained_when_queued_released_after_perform) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    bctx_t a = { .label = "a" }, b = { .label = "b" };
    rl_block_context_t ca = ctx_of(&a), cb = ctx_of(&b);
    RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, &ca), 0);
    RLT_CHECK_EQ(rl_loop_perform(loop, DEF, tt_block_cb, "plain"), 0);
    RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, &cb), 0);
    tt("|");
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("retain-a retain-b | perform-a release-a plain perform-b release-b");
    RLT_CHECK(pthread_equal(a.release_thread, pthread_self()));
    /* Nothing more at the next pass. */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&a.performs), 1);
    RLT_CHECK_EQ(atomic_load(&a.releases), 1);
    RLT_CHECK_EQ(atomic_load(&b.releases), 1);
}

RLT_TEST(block_context_without_retain_or_release) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    bctx_t a = { .label = "a" };
    rl_block_context_t c = { &a, NULL, NULL, b_perform };
    RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, &c), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("perform-a");
    bctx_t r = { .label = "r" };
    rl_block_context_t cr = { &r, NULL, b_release, b_perform }; /* the caller's reference, handed over */
    RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, &cr), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("perform-a perform-r release-r");
}

/* retain may return another pointer (CF's convention): perform and release get that one. */
static bctx_t swapped_target = { .label = "swapped" };

RLT_TEST(block_context_perform_and_release_get_what_retain_returned) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    bctx_t a = { .label = "a", .retained_as = &swapped_target };
    atomic_store(&swapped_target.performs, 0);
    atomic_store(&swapped_target.releases, 0);
    rl_block_context_t c = ctx_of(&a);
    RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, &c), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("retain-a perform-swapped release-swapped");
    RLT_CHECK_EQ(atomic_load(&a.performs), 0);
    RLT_CHECK_EQ(atomic_load(&swapped_target.releases), 1);
}

RLT_TEST(block_context_the_context_is_copied) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    bctx_t a = { .label = "a" }, b = { .label = "b" };
    rl_block_context_t c = ctx_of(&a);
    RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, &c), 0);
    c = ctx_of(&b); /* reusing the caller's struct does not change the queued block */
    c.retain = NULL;
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("retain-a perform-a release-a");
}

RLT_TEST(block_context_bad_arguments_call_nothing) {
    rl_loop_t *loop = rl_loop_get_current();
    bctx_t a = { .label = "a" };
    rl_block_context_t c = ctx_of(&a), no_perform = ctx_of(&a);
    no_perform.perform = NULL;
    RLT_CHECK_EQ(rl_loop_perform_context(NULL, DEF, &c), -EINVAL);
    RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, NULL), -EINVAL);
    RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, &no_perform), -EINVAL);
    RLT_CHECK_EQ(rl_loop_perform_context(loop, NULL, &c), -EINVAL);
    RLT_CHECK_EQ(rl_loop_perform_context(loop, "", &c), -EINVAL);
    TT_EXPECT("");
    RLT_CHECK_EQ(atomic_load(&a.retains), 0);
}

/* The loop's thread exits with blocks queued: each is released once, never performed, on the
 * exiting thread; a block queued to the dead loop is refused with retain and release balanced. */
typedef struct {
    rl_loop_t *loop;
    bctx_t own, common, other;
} exit_case_t;

static void *queue_and_exit(void *arg) {
    exit_case_t *e = arg;
    e->loop = rl_retain(rl_loop_get_current());
    rl_block_context_t a = ctx_of(&e->own), b = ctx_of(&e->common), c = ctx_of(&e->other);
    if (rl_loop_perform_context(e->loop, DEF, &a) || rl_loop_perform_context(e->loop, RL_COMMON_MODES, &b) ||
        rl_loop_perform_context(e->loop, "elsewhere", &c))
        e->loop = NULL;
    return NULL; /* no run: the teardown drops all three */
}

RLT_TEST(block_context_dropped_at_thread_exit_is_released_once_unperformed) {
    exit_case_t e = { .own = { .label = "own" }, .common = { .label = "common" }, .other = { .label = "other" } };
    pthread_t th = tt_spawn(queue_and_exit, &e);
    tt_join(th);
    RLT_CHECK(e.loop != NULL);
    bctx_t *all[] = { &e.own, &e.common, &e.other };
    for (int i = 0; i < 3; i++) {
        RLT_CHECK_EQ(atomic_load(&all[i]->retains), 1);
        RLT_CHECK_EQ(atomic_load(&all[i]->releases), 1);
        RLT_CHECK_EQ(atomic_load(&all[i]->performs), 0);
        RLT_CHECK(pthread_equal(all[i]->release_thread, th));
    }
    bctx_t late = { .label = "late" };
    rl_block_context_t c = ctx_of(&late);
    RLT_CHECK_EQ(rl_loop_perform_context(e.loop, DEF, &c), -EINVAL);
    RLT_CHECK_EQ(atomic_load(&late.retains), atomic_load(&late.releases));
    RLT_CHECK_EQ(atomic_load(&late.performs), 0);
    rl_release(e.loop);
}

/* Spent blocks are reused: after a pass ran N blocks, queueing N more takes them all back. */
RLT_TEST(block_context_spent_blocks_are_reused) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    enum { N = 40 };
    bctx_t b = { .label = "x" };
    rl_block_context_t c = { &b, NULL, NULL, b_perform };
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) RLT_CHECK_EQ(rl_loop_perform_context(loop, DEF, &c), 0);
        pthread_mutex_lock(&loop->lock);
        size_t spare_after_queueing = loop->spare_count;
        pthread_mutex_unlock(&loop->lock);
        if (round > 0) RLT_CHECK_EQ(spare_after_queueing, 0); /* all N came from the spares */
        RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
        pthread_mutex_lock(&loop->lock);
        size_t spare_after_run = loop->spare_count;
        pthread_mutex_unlock(&loop->lock);
        RLT_CHECK_EQ(spare_after_run, N);
    }
    RLT_CHECK_EQ(atomic_load(&b.performs), 3 * N);
    /* Never more spares than RL_SPARE_BLOCKS, whatever a pass ran. */
    for (int i = 0; i < RL_SPARE_BLOCKS + 50; i++) RLT_CHECK_EQ(rl_loop_perform(loop, DEF, tt_block_cb, NULL), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    pthread_mutex_lock(&loop->lock);
    size_t spares = loop->spare_count;
    pthread_mutex_unlock(&loop->lock);
    RLT_CHECK_EQ(spares, RL_SPARE_BLOCKS);
}

/* Producers on other threads: every block performed once and released once, on the loop's
 * thread, after its perform. */
enum { PRODUCERS = 3, PER_PRODUCER = 3000 };
typedef struct {
    rl_loop_t *loop;
    atomic_int performed, released, misordered, queued;
} xt_t;
static _Thread_local xt_t *xt_current;
typedef struct { xt_t *x; atomic_int state; } xt_item;

static void xt_perform(void *info) {
    xt_item *it = info;
    if (atomic_exchange(&it->state, 1) != 0) atomic_fetch_add(&it->x->misordered, 1);
    atomic_fetch_add(&it->x->performed, 1);
}
static void xt_release(const void *info) {
    xt_item *it = (xt_item *)info;
    if (atomic_exchange(&it->state, 2) != 1 || xt_current != it->x) atomic_fetch_add(&it->x->misordered, 1);
    atomic_fetch_add(&it->x->released, 1);
}
static xt_item xt_items[PRODUCERS][PER_PRODUCER];
typedef struct { xt_t *x; int index; } xt_producer;

static void *xt_produce(void *arg) {
    xt_producer *p = arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        xt_item *it = &xt_items[p->index][i];
        it->x = p->x;
        atomic_init(&it->state, 0);
        rl_block_context_t c = { it, NULL, xt_release, xt_perform };
        if (rl_loop_perform_context(p->x->loop, (i & 1) ? DEF : RL_COMMON_MODES, &c) == 0)
            atomic_fetch_add(&p->x->queued, 1);
        rl_loop_wakeup(p->x->loop);
    }
    return NULL;
}

RLT_TEST(block_context_from_other_threads_released_once_after_perform) {
    xt_t x = { .loop = rl_loop_get_current() };
    xt_current = &x;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    xt_producer p[PRODUCERS];
    pthread_t th[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        p[i].x = &x;
        p[i].index = i;
        th[i] = tt_spawn(xt_produce, &p[i]);
    }
    double end = rl_time_now() + 20;
    while (atomic_load(&x.released) < PRODUCERS * PER_PRODUCER && rl_time_now() < end)
        rl_run_in_mode(DEF, 0.01, false);
    for (int i = 0; i < PRODUCERS; i++) tt_join(th[i]);
    RLT_CHECK_EQ(atomic_load(&x.queued), PRODUCERS * PER_PRODUCER);
    RLT_CHECK_EQ(atomic_load(&x.performed), PRODUCERS * PER_PRODUCER);
    RLT_CHECK_EQ(atomic_load(&x.released), PRODUCERS * PER_PRODUCER);
    RLT_CHECK_EQ(atomic_load(&x.misordered), 0);
}
