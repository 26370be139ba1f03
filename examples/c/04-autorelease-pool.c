/*
 * 04-autorelease-pool.c - autorelease-pool observers, as Apple's main thread installs them.
 *
 * Pattern: three observers scope a memory pool to the loop's passes. An RL_ENTRY observer at the
 * lowest order pushes a pool before anything else of the run is called; an RL_BEFORE_WAITING
 * observer at the highest order pops it (freeing what the passes since allocated) and pushes a
 * new one, after every other observer of that activity, just before the loop sleeps; an
 * RL_EXIT observer at the highest order pops the last one. Callouts allocate "autoreleased"
 * scratch memory from the pool and never free it themselves.
 *
 * Here the pool is a real arena: allocation bumps a pointer in 64 KB chunks, a push records the
 * position, a pop frees every chunk allocated since and rewinds. The work is a block that an
 * ordinary before-waiting observer queues for every pass (as a UI queues its redraw for the
 * next turn of the loop), so that the loop never sleeps: each pass gets ready to wait (the pool
 * pops and pushes), finds the block, and runs it after the wait it skipped. It allocates up to
 * 40 KB of scratch a pass, over 1e5 passes in 10 runs (so entry and exit pair up ten times).
 *
 * What to watch for: the arena's high-water mark is exactly the most one pass allocated (never
 * two passes' garbage at once), nothing is left live at the end, and malloc's bytes in use
 * (mallinfo2) are back where they started. The same work with the observers left out grows the
 * arena with every pass (the control run, 2000 passes): that is what the observers prevent.
 */
#include <crunloop.h>

#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "04-autorelease-pool: check failed: %s (line %d)\n", #cond, __LINE__); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* ---- The arena: chunks in a list, a stack of marks (one per pushed pool) ---- */

enum { CHUNK = 64 * 1024, MAX_DEPTH = 16 };

typedef struct chunk {
    struct chunk *prev;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} chunk;

typedef struct {
    chunk *top;                   /* the chunk allocation bumps in */
    chunk *spare;                 /* one freed chunk kept for the next pass (no malloc churn) */
    size_t live, high_water;      /* bytes handed out and not yet freed by a pop; the peak */
    struct { chunk *top; size_t used, live; } marks[MAX_DEPTH];
    int depth;
    unsigned long long pushes, pops;
} arena;

static arena pool;

static void *arena_alloc(arena *a, size_t n) {
    CHECK(a->depth > 0); /* autoreleasing with no pool: a leak in Apple's terms */
    n = (n + 15) & ~(size_t)15;
    if (!a->top || a->top->size - a->top->used < n) {
        size_t size = n > CHUNK ? n : CHUNK;
        chunk *c = a->spare;
        if (c && c->size >= size) {
            a->spare = NULL;
        } else {
            c = malloc(sizeof *c + size);
            CHECK(c != NULL);
            c->size = size;
        }
        c->prev = a->top;
        c->used = 0;
        a->top = c;
    }
    void *p = a->top->data + a->top->used;
    a->top->used += n;
    a->live += n;
    if (a->live > a->high_water) a->high_water = a->live;
    return p;
}

static void arena_push(arena *a) {
    CHECK(a->depth < MAX_DEPTH);
    a->marks[a->depth].top = a->top;
    a->marks[a->depth].used = a->top ? a->top->used : 0;
    a->marks[a->depth].live = a->live;
    a->depth++;
    a->pushes++;
}

static void arena_pop(arena *a) {
    CHECK(a->depth > 0);
    a->depth--;
    while (a->top != a->marks[a->depth].top) { /* chunks begun since the push */
        chunk *prev = a->top->prev;
        if (!a->spare && a->top->size == CHUNK) a->spare = a->top;
        else free(a->top);
        a->top = prev;
    }
    if (a->top) a->top->used = a->marks[a->depth].used;
    a->live = a->marks[a->depth].live;
    a->pops++;
}

/* Free the spare chunk (the arena is empty and done with, for now). */
static void arena_trim(arena *a) {
    free(a->spare);
    a->spare = NULL;
}

/* ---- The observers ---- */

static void push_at_entry(rl_observer_t *o, unsigned activity, void *info) {
    (void)o, (void)activity, (void)info;
    arena_push(&pool);
}

static void pop_and_push_or_pop(rl_observer_t *o, unsigned activity, void *info) {
    (void)o, (void)info;
    arena_pop(&pool);
    if (activity == RL_BEFORE_WAITING) arena_push(&pool);
}

/* ---- The work: a block that makes scratch objects every pass ---- */

typedef struct {
    unsigned long long passes, target, rng;
    size_t bytes_after_1000, most_in_a_pass;
} work;

static void make_garbage(void *info) {
    work *w = info;
    /* 1 to 8 objects of 16 bytes to 5 KB: up to 40 KB a pass, now and then over a chunk. */
    w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
    int objects = 1 + (int)((w->rng >> 60) & 7);
    size_t live_before = pool.live;
    for (int i = 0; i < objects; i++) {
        w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 16 + (size_t)((w->rng >> 33) % 5000);
        char *s = arena_alloc(&pool, n);
        memset(s, 'x', n - 1);
        s[n - 1] = '\0';
    }
    if (pool.live - live_before > w->most_in_a_pass) w->most_in_a_pass = pool.live - live_before;
    if (++w->passes == 1000) w->bytes_after_1000 = pool.high_water;
    if (w->passes % (w->target / 10) == 0) rl_loop_stop(rl_loop_get_current());
}

static void keep_alive(rl_timer_t *t, void *info) { (void)t, (void)info; }

static void schedule_work(rl_observer_t *o, unsigned activity, void *info) {
    (void)o, (void)activity;
    CHECK(rl_loop_perform(rl_loop_get_current(), RL_DEFAULT_MODE, make_garbage, info) == 0);
}

static rl_observer_t *observe(unsigned activities, long order, rl_observer_callback_t fn) {
    rl_observer_t *o = rl_observer_create(activities, true, order, fn, NULL);
    CHECK(o != NULL);
    CHECK(rl_loop_add_observer(rl_loop_get_current(), o, RL_COMMON_MODES) == 0);
    return o;
}

/* Runs the loop until the work has made target passes' worth of garbage, in runs of a tenth.
 * A timer an hour away keeps the mode from being empty (blocks do not). */
static void run_passes(work *w) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *t = rl_timer_create(rl_time_now() + 3600, 0, 0, keep_alive, NULL);
    CHECK(t != NULL);
    CHECK(rl_loop_add_timer(loop, t, RL_COMMON_MODES) == 0);
    rl_context_t c = {w, NULL, NULL};
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING, true, 0, schedule_work, &c);
    CHECK(o != NULL);
    CHECK(rl_loop_add_observer(loop, o, RL_COMMON_MODES) == 0);
    while (w->passes < w->target) CHECK(rl_run_in_mode(RL_DEFAULT_MODE, 60.0, false) == RL_RUN_STOPPED);
    rl_observer_invalidate(o);
    rl_release(o);
    rl_timer_invalidate(t);
    rl_release(t);
}

int main(void) {
    rl_loop_t *loop = rl_loop_get_current();
    CHECK(loop != NULL);

    /* The control: no pool observers, one pool pushed by hand around the whole run. */
    work control = {.target = 2000, .rng = 1};
    arena_push(&pool);
    run_passes(&control);
    size_t control_high = pool.high_water;
    arena_pop(&pool);
    arena_trim(&pool);
    printf("without the observers: %llu passes, arena high-water mark %zu KB (%zu KB after 1000)\n",
           control.passes, control_high / 1024, control.bytes_after_1000 / 1024);
    CHECK(pool.live == 0 && pool.top == NULL);
    CHECK(control_high > control.bytes_after_1000 * 3 / 2); /* it grows with the passes */

    /* The pattern: Apple's orders are the extremes of a 32-bit int; here, of a long. */
    struct mallinfo2 before = mallinfo2();
    pool.high_water = 0;
    pool.pushes = pool.pops = 0;
    rl_observer_t *entry = observe(RL_ENTRY, LONG_MIN, push_at_entry);
    rl_observer_t *exit_ = observe(RL_BEFORE_WAITING | RL_EXIT, LONG_MAX, pop_and_push_or_pop);
    rl_loop_stats_t s0, s1;
    CHECK(rl_loop_get_stats(loop, &s0) == 0);
    double t0 = rl_time_now();
    work w = {.target = 100000, .rng = 1};
    run_passes(&w);
    double seconds = rl_time_now() - t0;
    arena_trim(&pool);
    CHECK(rl_loop_get_stats(loop, &s1) == 0);
    struct mallinfo2 after = mallinfo2();

    unsigned long long passes = s1.passes - s0.passes;
    long long heap_growth = (long long)after.uordblks - (long long)before.uordblks;
    printf("with the observers:    %llu passes in %.2f s, %llu pushes, %llu pops\n", passes, seconds,
           pool.pushes, pool.pops);
    printf("  arena high-water mark: %zu KB after 1000 passes, %zu KB after %llu; most in one pass %zu KB\n",
           w.bytes_after_1000 / 1024, pool.high_water / 1024, w.passes, w.most_in_a_pass / 1024);
    printf("  live at the end: %zu bytes; malloc in use: %zu KB before, %zu KB after (%+lld bytes)\n",
           pool.live, before.uordblks / 1024, after.uordblks / 1024, heap_growth);

    CHECK(w.passes >= 100000 && passes >= 100000);
    CHECK(pool.pushes == pool.pops && pool.depth == 0); /* every push popped: entry/exit paired */
    CHECK(pool.pops >= w.passes);                       /* a pop before each wait */
    CHECK(pool.live == 0 && pool.top == NULL);          /* the last pop freed everything */
    CHECK(pool.high_water == w.most_in_a_pass);         /* flat: one pass's garbage at most */
    CHECK(pool.high_water < control_high / 100);
    CHECK(heap_growth < 64 * 1024);                     /* malloc is back where it was */

    rl_observer_invalidate(entry);
    rl_observer_invalidate(exit_);
    rl_release(entry);
    rl_release(exit_);
    printf("ok: memory stays flat over %llu passes\n", w.passes);
    return 0;
}
