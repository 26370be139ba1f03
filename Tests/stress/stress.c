/*
 * stress.c - a seeded multi-thread stress test of the C core (crunloop.h).
 *
 *   stress [--seed N|random] [--seconds S] [--threads T] [--name NAME] [--quiet]
 *
 * Built by `make stress` (mk/stress.mk) together with the core's sources, with -DRL_DEBUG, under
 * ASan+UBSan and under TSan. Prints one summary line (after it, on failure, one line counting the
 * failures by kind; each failure is also reported on stderr as it happens); exits 1 on any failure.
 *
 * WHAT IS EXERCISED
 *   - One loop runs on a thread of its own, alternating short runs (timeouts 0 to 20 ms, some
 *     returning after a handled source) between RL_DEFAULT_MODE and "stress.common", a mode that
 *     mutator 0 marks common early in the run (items already in RL_COMMON_MODES then join it).
 *     Callouts now and then run the loop again (nested runs, up to two deep, in any of the three
 *     modes, including "stress.private", which is never common), re-signal or invalidate their
 *     source, rearm or invalidate their timer, queue blocks, and call rl_loop_verify().
 *   - T mutator threads (default 3), each with an RNG derived from the seed, work on shared pools
 *     of version-0 sources (16), timers (12: one-shot and repeating at 1-20 ms, some with a
 *     tolerance) and observers (6): add to / remove from a mode (default, stress.common,
 *     stress.private or RL_COMMON_MODES), invalidate, replace (the slot gets a new object; the
 *     old one is invalidated, or left to the loop, which then holds its last reference), signal
 *     sources (+ rl_loop_wakeup), rearm timers from another thread (rl_timer_set_next_fire_date),
 *     set tolerances, queue blocks (rl_loop_perform + rl_loop_wakeup), wake and stop the loop,
 *     query it (contains, description, modes, stats, next timer date), and call rl_loop_verify()
 *     every 256 operations. They alternate storms (back to back) and calm spells (short sleeps,
 *     so that the loop really sleeps and wakeups write to its eventfd). Sources 0-3 are "stable":
 *     each stays in one mode and is only signalled, so a lost signal is not healed by a re-add.
 *   - The end: the mutators are joined; the loop thread drains (runs every mode, with an idle
 *     timer in each so none is empty, until every signal and block is delivered), checks, and
 *     then, while an "exit storm" of T threads wakes, stops, signals, adds, removes and queues
 *     blocks, makes a few last runs that sleep, queues blocks its teardown must drop, and exits.
 *     Then every reference is given back and the books are checked.
 *
 * WHAT IS CHECKED
 *   - No lost signal. A signaller takes a ticket (ticket counter + 1) before rl_source_signal; a
 *     perform records the ticket counter it sees (performed = the highest ticket it covers: the
 *     loop clears the signalled flag before the perform, so every signal made before that is
 *     covered). After the drain, every source still valid and in one of the three modes must
 *     have performed >= tickets. A missing ticket taken after the source's last removal is
 *     "lost"; one taken before a removal (the signal stays pending, and the re-add must deliver
 *     it) is "stale"; both fail. During the run, a stable source in a mode the loop keeps
 *     running (default, common) must perform a ticket within LATE_SECONDS (5 s).
 *   - Timers: a one-shot fires at most once; no timer fires before its fire date; a repeating
 *     timer never fires twice for one grid point (the date being fired is later than its previous
 *     callout) and keeps to its grid (previous date + k * interval, k >= 1). A rearm from another
 *     thread races with firing, so the two fires after a rearm are only checked against the
 *     lowest date the timer had since (timer_rearm). After the drain, no valid timer of a mode
 *     that just ran may still be due.
 *   - Blocks run exactly once, in the mode they were queued for (any common mode for
 *     RL_COMMON_MODES); blocks queued after the loop's last run never run (the teardown drops
 *     them); blocks queued during the exit run at most once; after the exit rl_loop_perform is
 *     refused (-EINVAL), and so is adding an item.
 *   - Contexts: every context's release runs exactly once (and retain once, when set), counted per
 *     info once its object is gone (during the run) or after the loop's thread has exited and
 *     every reference was given back (at the end); no callout comes after the release; schedule
 *     and cancel callouts balance; observers are not re-entered, are called only for their
 *     activities, and non-repeating ones once. Leaks: LeakSanitizer (ASan build).
 *   - Return values (-EINVAL only for an invalid item or a dead loop, never -EBUSY, ...), and the
 *     results of rl_run_in_mode (no early RL_RUN_TIMED_OUT, RL_RUN_HANDLED_SOURCE only if asked).
 *   - rl_loop_verify() finds nothing: from the mutators, callouts and the exit storm, after the
 *     drain, and on the dead loop.
 *   - Every thread ends (a watchdog aborts with the seed after 3 x S + 120 s).
 *
 * REPRODUCING A FAILURE
 *   Every failure message and the summary carry the seed. Run the same binary with the same
 *   arguments, e.g. build/stress-tsan/stress --seed N --seconds S --threads T, or
 *   `make stress STRESS_SEED=N STRESS_SECONDS=S STRESS_THREADS=T`. Each thread draws its
 *   operations from its own RNG derived from the seed, so a seed replays the same operation
 *   sequences; the interleaving is up to the scheduler, so a rare race may take a few runs.
 */
#include <crunloop.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The core's invariant check (internal.h, verify.c): hidden, reachable because the core's sources
 * are compiled into this program. Returns the number of violations, one line each in report. */
__attribute__((visibility("hidden"))) int rl_loop_verify(rl_loop_t *loop, char *report, size_t size);

/* ---- Settings, RNG, failures ------------------------------------------------------------------- */

static uint64_t seed = 4242;
static double seconds = 5;
static int nthreads = 3;
static const char *name = "stress";
static bool quiet;

enum { MAX_THREADS = 64, NSRC = 16, NTMR = 12, NOBS = 6, MAX_ORPHANS = 48, MAX_NESTING = 2 };
/* Source slots 0..NSTABLE-1 hold stable sources: added to one mode when created (slot i: the
 * mode stable_mode(i)) and never removed, so that a signal they lose is not healed by a re-add.
 * Stable sources in modes the loop runs all the time must be performed within LATE_SECONDS. */
enum { NSTABLE = 4 };
#define LATE_SECONDS 5.0
/* Blocks are numbered; their records live in chunks allocated as needed. */
#define BLOCK_CHUNK ((size_t)1 << 20)
#define MAX_BLOCKS (BLOCK_CHUNK * 256)

typedef struct { uint64_t s; } rng_t;

static uint64_t rnd(rng_t *g) { /* splitmix64 */
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static unsigned below(rng_t *g, unsigned n) { return (unsigned)(rnd(g) % n); }
static double uniform(rng_t *g) { return (double)(rnd(g) >> 11) * 0x1.0p-53; }
static rng_t rng_for(unsigned stream) {
    rng_t g = {seed ^ (0x5851f42d4c957f2dull * (stream + 1))};
    (void)rnd(&g);
    return g;
}

enum fail_kind { F_LOST, F_STALE, F_DOUBLE, F_EARLY, F_GRID, F_OVERDUE, F_BLOCK, F_CONTEXT, F_OBSERVER,
                 F_API, F_RUN, F_VERIFY, F_TEARDOWN, F_KINDS };
static const char *const fail_names[F_KINDS] = {"lost signal", "stale signal", "double fire", "early fire",
    "off-grid fire", "overdue timer", "block", "context", "observer", "api", "run", "rl_loop_verify",
    "teardown"};
static atomic_long failures[F_KINDS], failures_total;

__attribute__((format(printf, 2, 3))) static void fail(enum fail_kind kind, const char *format, ...) {
    atomic_fetch_add(&failures[kind], 1);
    long n = atomic_fetch_add(&failures_total, 1);
    if (n >= 40) {
        if (n == 40) fprintf(stderr, "%s: FAIL (seed %" PRIu64 "): more failures not shown\n", name, seed);
        return;
    }
    char text[1024];
    va_list ap;
    va_start(ap, format);
    vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    fprintf(stderr, "%s: FAIL (seed %" PRIu64 "): %s: %s\n", name, seed, fail_names[kind], text);
}

/* ---- Records: the test's side of every object, its context info ------------------------------- */

enum kind { K_SOURCE, K_TIMER, K_OBSERVER };
static const char *const kind_names[] = {"source", "timer", "observer"};

typedef struct rec {
    enum kind kind;
    unsigned id;
    void *obj;                  /* set before the object is published; the object itself */
    bool use_retain, created, stable;
    atomic_int retains, releases;
    /* Sources. */
    atomic_ullong ticket;       /* tickets taken by signallers */
    atomic_ullong performed;    /* the highest ticket a perform saw */
    atomic_ullong removed_at;   /* the ticket counter after the latest successful removal */
    atomic_int schedules, cancels;
    /* Timers: under mu (callouts and rearms). */
    pthread_mutex_t mu;
    double interval;
    unsigned fires;
    int lenient;                /* fires left for which only the lower bound applies */
    double lb;                  /* no date the timer had since the last strict fire is earlier */
    double last_cb_now, last_fd;
    bool last_fd_exact;
    /* Observers. */
    unsigned activities;
    bool repeats;
    atomic_uint calls;
    atomic_bool in_callout;
} rec;

/* Every record, until reap() has checked and freed it (once its object is gone). */
static pthread_mutex_t recs_mu = PTHREAD_MUTEX_INITIALIZER;
static rec **recs;
static size_t nrecs, caprecs;
static unsigned next_id;

static rec *rec_new(enum kind kind, bool use_retain) {
    rec *r = calloc(1, sizeof *r);
    if (!r) abort();
    r->kind = kind;
    r->use_retain = use_retain;
    pthread_mutex_init(&r->mu, NULL);
    r->lb = INFINITY;
    r->last_cb_now = -INFINITY;
    return r;
}

/* Register r once its object exists (then reap() may free it once the object is gone); a record
 * whose object could not be created is freed, and NULL returned. */
static rec *rec_register(rec *r) {
    if (!r->obj) {
        pthread_mutex_destroy(&r->mu);
        free(r);
        return NULL;
    }
    r->created = true;
    pthread_mutex_lock(&recs_mu);
    if (nrecs == caprecs) {
        caprecs = caprecs ? caprecs * 2 : 1024;
        recs = realloc(recs, caprecs * sizeof *recs);
        if (!recs) abort();
    }
    r->id = next_id++;
    recs[nrecs++] = r;
    pthread_mutex_unlock(&recs_mu);
    return r;
}

/* A snapshot of the records. reap() frees records, but only main calls it: during the run, when
 * nobody takes snapshots (the loop thread takes them while it drains), and at the very end. */
static rec **recs_snapshot(size_t *count) {
    pthread_mutex_lock(&recs_mu);
    rec **copy = malloc((nrecs + 1) * sizeof *copy);
    if (!copy) abort();
    memcpy(copy, recs, nrecs * sizeof *copy);
    *count = nrecs;
    pthread_mutex_unlock(&recs_mu);
    return copy;
}

static const void *ctx_retain(const void *info) {
    rec *r = (rec *)info;
    atomic_fetch_add(&r->retains, 1);
    return info;
}

static void ctx_release(const void *info) {
    rec *r = (rec *)info;
    enum kind kind = r->kind;
    unsigned id = r->id;
    /* Nothing of r is touched after this: reap() may free it as soon as it sees the count. */
    if (atomic_fetch_add(&r->releases, 1) != 0) fail(F_CONTEXT, "%s #%u: release ran twice", kind_names[kind], id);
}

static void check_alive(rec *r, const char *what) {
    if (atomic_load(&r->releases))
        fail(F_CONTEXT, "%s #%u: %s callout after its context's release", kind_names[r->kind], r->id, what);
}

/* The books of an object that is gone: its context's retain and release ran once each, its
 * schedule and cancel callouts balance. Then the record is freed. */
static atomic_ullong fires_total, unbalanced_total;

static void account(rec *r) {
    int rel = atomic_load(&r->releases), ret = atomic_load(&r->retains);
    if (rel != 1 || ret != (r->use_retain ? 1 : 0)) {
        atomic_fetch_add(&unbalanced_total, 1);
        fail(F_CONTEXT, "%s #%u: retain ran %d times, release %d times (expected %d and 1)", kind_names[r->kind],
             r->id, ret, rel, r->use_retain ? 1 : 0);
    }
    if (r->kind == K_SOURCE && atomic_load(&r->schedules) != atomic_load(&r->cancels)) {
        atomic_fetch_add(&unbalanced_total, 1);
        fail(F_CONTEXT, "source #%u: %d schedule callouts, %d cancel callouts (expected as many)", r->id,
             atomic_load(&r->schedules), atomic_load(&r->cancels));
    }
    pthread_mutex_lock(&r->mu);
    atomic_fetch_add(&fires_total, r->fires);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Check and free the records of objects that are gone (all = every record, at the very end). */
static void reap(bool all) {
    pthread_mutex_lock(&recs_mu);
    size_t kept = 0;
    for (size_t i = 0; i < nrecs; i++) {
        rec *r = recs[i];
        if (all || atomic_load(&r->releases)) account(r);
        else recs[kept++] = r;
    }
    nrecs = kept;
    pthread_mutex_unlock(&recs_mu);
}

/* ---- Shared state ------------------------------------------------------------------------------ */

static const char *const MODE_COMMON2 = "stress.common";   /* marked common early in the run */
static const char *const MODE_PRIVATE = "stress.private";  /* never common */
enum { M_DEFAULT, M_COMMON2, M_PRIVATE, M_COMMON, M_COUNT };
static const char *mode_name(int m) {
    return m == M_DEFAULT ? RL_DEFAULT_MODE : m == M_COMMON2 ? MODE_COMMON2 : m == M_PRIVATE ? MODE_PRIVATE : RL_COMMON_MODES;
}
static int stable_mode(unsigned slot_index) {
    static const int modes[NSTABLE] = {M_DEFAULT, M_COMMON, M_COMMON2, M_PRIVATE};
    return slot_index < NSTABLE ? modes[slot_index] : -1;
}
static int mode_index(const char *mode) {
    for (int m = 0; m < M_COUNT; m++)
        if (strcmp(mode, mode_name(m)) == 0) return m;
    return -1;
}

static _Atomic(rl_loop_t *) the_loop;   /* the loop thread's loop, retained by main */
static atomic_bool common2_marked;
enum { PHASE_RUN, PHASE_DRAIN, PHASE_FINAL };
static atomic_int phase;
static atomic_bool mutators_stop, loop_drained, loop_may_exit;
static atomic_int orphans[3];
static atomic_ullong verify_calls;

typedef struct {
    pthread_mutex_t mu;
    rec *r; /* owns the creation reference of r->obj */
} slot;
static slot src_slots[NSRC], tmr_slots[NTMR], obs_slots[NOBS];

/* Blocks: arg is an index into this table. */
/* B_QUEUED: must run once; B_DROP: queued for the teardown to drop, must never run; B_LATE:
 * queued while the loop's thread exits, runs at most once. */
enum { B_UNUSED, B_QUEUED, B_REFUSED, B_DROP, B_LATE };
typedef struct {
    atomic_uchar runs, state;
    unsigned char mode;
} blk;
static _Atomic(blk *) block_chunks[MAX_BLOCKS / BLOCK_CHUNK];

static blk *block_at(size_t i) {
    _Atomic(blk *) *chunk = &block_chunks[i / BLOCK_CHUNK];
    blk *c = atomic_load(chunk);
    if (!c) {
        blk *fresh = calloc(BLOCK_CHUNK, sizeof *fresh);
        if (!fresh) abort();
        if (atomic_compare_exchange_strong(chunk, &c, fresh)) c = fresh;
        else free(fresh);
    }
    return &c[i % BLOCK_CHUNK];
}
static atomic_size_t nblocks;
static atomic_ullong blocks_queued, blocks_ran;

/* Counters of the loop thread (read by main after joining it). */
static struct {
    unsigned long long performs, fires, observer_calls, blocks_run, runs, nested;
} lc;

typedef struct {
    unsigned long long ops, creates, adds, removes, invalidates, signals, wakeups, stops, rearms, blocks,
        queries, verifies;
} mcount;

static void verify_now(const char *where) {
    rl_loop_t *loop = atomic_load(&the_loop);
    char report[8192];
    int n = rl_loop_verify(loop, report, sizeof report);
    atomic_fetch_add(&verify_calls, 1);
    if (n) fail(F_VERIFY, "%s: %d violation(s), expected none:\n%s", where, n, report);
}

static void atomic_max(atomic_ullong *a, unsigned long long v) {
    unsigned long long cur = atomic_load(a);
    while (cur < v && !atomic_compare_exchange_weak(a, &cur, v)) {}
}

/* ---- The loop thread's callouts ---------------------------------------------------------------- */

static rng_t loop_rng;       /* used on the loop thread only */
static int nesting;          /* runs of the loop thread in progress */

static int do_run(int m, double secs, bool return_after) {
    double start = rl_time_now();
    nesting++;
    int r = rl_run_in_mode(mode_name(m), secs, return_after);
    nesting--;
    double elapsed = rl_time_now() - start;
    lc.runs++;
    if (nesting) lc.nested++;
    if (r < RL_RUN_FINISHED || r > RL_RUN_HANDLED_SOURCE) {
        fail(F_RUN, "rl_run_in_mode(%s, %g, %d) returned %d, expected an RL_RUN_* result", mode_name(m), secs,
             return_after, r);
        return r;
    }
    if (r == RL_RUN_HANDLED_SOURCE && !return_after)
        fail(F_RUN, "rl_run_in_mode(%s) returned RL_RUN_HANDLED_SOURCE unasked", mode_name(m));
    if (r == RL_RUN_TIMED_OUT && secs > 0 && elapsed < secs - 1e-9)
        fail(F_RUN, "rl_run_in_mode(%s, %g) timed out after %g s, expected not before its timeout", mode_name(m), secs,
             elapsed);
    return r;
}

/* What a callout may do besides its job, while the mutators run. */
static void callout_extras(void) {
    if (atomic_load(&phase) != PHASE_RUN) return;
    unsigned x = below(&loop_rng, 1000);
    if (x < 15 && nesting < 1 + MAX_NESTING) {
        double secs = below(&loop_rng, 4) == 0 ? 0 : uniform(&loop_rng) * 0.002;
        do_run((int)below(&loop_rng, 3), secs, below(&loop_rng, 3) == 0);
    } else if (x < 20) {
        verify_now("callout");
    }
}

static void block_fn(void *arg);

static int queue_block(rl_loop_t *loop, int m, unsigned char state) {
    size_t i = atomic_fetch_add(&nblocks, 1);
    if (i >= MAX_BLOCKS) return -ENOSPC;
    blk *b = block_at(i);
    b->mode = (unsigned char)m;
    atomic_store(&b->state, state);
    int rc = rl_loop_perform(loop, mode_name(m), block_fn, (void *)(uintptr_t)i);
    if (rc) atomic_store(&b->state, B_REFUSED);
    else if (state == B_QUEUED) atomic_fetch_add(&blocks_queued, 1);
    return rc;
}

static void block_fn(void *arg) {
    size_t i = (uintptr_t)arg;
    blk *b = block_at(i);
    lc.blocks_run++;
    atomic_fetch_add(&blocks_ran, 1);
    if (atomic_fetch_add(&b->runs, 1)) fail(F_BLOCK, "block %zu ran twice", i);
    unsigned state = atomic_load(&b->state);
    if (state != B_QUEUED && state != B_LATE)
        fail(F_BLOCK, "block %zu ran, though %s", i, state == B_DROP ? "queued for the teardown to drop" : "refused");
    char *current = rl_loop_copy_current_mode(atomic_load(&the_loop));
    int cm = current ? mode_index(current) : -1;
    bool ok = b->mode == M_COMMON ? (cm == M_DEFAULT || (cm == M_COMMON2 && atomic_load(&common2_marked)))
                                  : cm == b->mode;
    if (!ok) fail(F_BLOCK, "block %zu queued for %s ran in %s", i, mode_name(b->mode), current ? current : "(no run)");
    free(current);
    if (atomic_load(&phase) == PHASE_RUN && below(&loop_rng, 100) < 3)
        (void)queue_block(atomic_load(&the_loop), (int)below(&loop_rng, M_COUNT), B_QUEUED);
    callout_extras();
}

static void src_schedule(void *info, rl_loop_t *loop, const char *mode) {
    rec *r = info;
    check_alive(r, "schedule");
    atomic_fetch_add(&r->schedules, 1);
    if (loop != atomic_load(&the_loop) || mode_index(mode) < 0 || mode_index(mode) == M_COMMON)
        fail(F_API, "source #%u: schedule for loop %p mode %s, expected loop %p and a mode it was added to", r->id,
             (void *)loop, mode, (void *)atomic_load(&the_loop));
}

static void src_cancel(void *info, rl_loop_t *loop, const char *mode) {
    rec *r = info;
    check_alive(r, "cancel");
    atomic_fetch_add(&r->cancels, 1);
    if (loop != atomic_load(&the_loop) || mode_index(mode) < 0 || mode_index(mode) == M_COMMON)
        fail(F_API, "source #%u: cancel for loop %p mode %s, expected loop %p and a mode it was added to", r->id,
             (void *)loop, mode, (void *)atomic_load(&the_loop));
}

static void src_perform(void *info) {
    rec *r = info;
    check_alive(r, "perform");
    lc.performs++;
    /* Every signal whose rl_source_signal came before the loop cleared the signalled flag took
     * its ticket before that, so this load covers it. */
    atomic_max(&r->performed, atomic_load(&r->ticket));
    if (atomic_load(&phase) != PHASE_RUN) return;
    unsigned x = below(&loop_rng, 1000);
    if (x < 40) {
        atomic_fetch_add(&r->ticket, 1); /* signalled again from its own perform */
        rl_source_signal(r->obj);
    } else if (x < 43 && !r->stable) {
        rl_source_invalidate(r->obj);
    }
    callout_extras();
}

/*
 * Timers. A rearm from another thread races with firing: the loop may have decided to fire the
 * old date when the rearm lands (then the callout sees the new date), and the new date is kept
 * after that callout and fires next. So after a rearm, the next two fires are lenient: they must
 * only not be earlier than lb, the lowest date the timer had since. Other fires are strict: the
 * date read in the callout is the date being fired (nobody else changes it), which must be <= now,
 * later than the previous callout, and on the grid of the previous strict date.
 */
static void timer_rearm(rec *r, double date) {
    pthread_mutex_lock(&r->mu);
    double cur = rl_timer_get_next_fire_date(r->obj);
    double before = rl_time_now();
    int rc = rl_timer_set_next_fire_date(r->obj, date);
    if (rc == 0) {
        double set = date > before ? date : before; /* a past date counts as now (>= before) */
        if (cur < r->lb) r->lb = cur;
        if (set < r->lb) r->lb = set;
        r->lenient = 2;
    } else if (rc != -EINVAL || rl_timer_is_valid(r->obj)) {
        fail(F_API, "timer #%u: rl_timer_set_next_fire_date returned %d, expected 0 (-EINVAL once invalid)", r->id, rc);
    }
    pthread_mutex_unlock(&r->mu);
}

static void timer_cb(rl_timer_t *t, void *info) {
    rec *r = info;
    check_alive(r, "timer");
    lc.fires++;
    if (r->obj != t) fail(F_API, "timer #%u: callout for timer %p, expected %p", r->id, (void *)t, r->obj);
    pthread_mutex_lock(&r->mu);
    double now = rl_time_now(), fd = rl_timer_get_next_fire_date(t);
    r->fires++;
    if (r->interval == 0 && r->fires > 1)
        fail(F_DOUBLE, "one-shot timer #%u fired %u times, expected at most once", r->id, r->fires);
    if (r->lenient > 0) {
        if (now < r->lb) fail(F_EARLY, "timer #%u fired at %.9f, before %.9f (after a rearm)", r->id, now, r->lb);
        r->last_fd_exact = false;
        if (--r->lenient == 0) r->lb = INFINITY;
    } else {
        if (now < fd) fail(F_EARLY, "timer #%u fired %.3f us before its date %.9f", r->id, (fd - now) * 1e6, fd);
        if (r->interval > 0 && fd <= r->last_cb_now)
            fail(F_DOUBLE, "timer #%u fired for %.9f, not after its previous callout at %.9f", r->id, fd,
                 r->last_cb_now);
        if (r->interval > 0 && r->last_fd_exact) {
            double k = round((fd - r->last_fd) / r->interval);
            double off = fd - (r->last_fd + k * r->interval);
            if (k < 1 || fabs(off) > 1e-6)
                fail(F_GRID, "timer #%u (interval %g) fired for %.9f, previous %.9f: k %g, off by %g s", r->id,
                     r->interval, fd, r->last_fd, k, off);
        }
        r->last_fd = fd;
        r->last_fd_exact = true;
        r->lb = INFINITY;
    }
    r->last_cb_now = now;
    pthread_mutex_unlock(&r->mu);
    if (atomic_load(&phase) != PHASE_RUN) return;
    unsigned x = below(&loop_rng, 1000);
    if (x < 20) timer_rearm(r, rl_time_now() + uniform(&loop_rng) * 0.01); /* from its own callout */
    else if (x < 25) rl_timer_invalidate(t);
    callout_extras();
}

static void observer_cb(rl_observer_t *o, unsigned activity, void *info) {
    rec *r = info;
    check_alive(r, "observer");
    lc.observer_calls++;
    if (r->obj != o) fail(F_API, "observer #%u: callout for observer %p, expected %p", r->id, (void *)o, r->obj);
    if (!(activity & r->activities))
        fail(F_OBSERVER, "observer #%u (activities %#x) called for %#x", r->id, r->activities, activity);
    if (atomic_exchange(&r->in_callout, true)) fail(F_OBSERVER, "observer #%u re-entered", r->id);
    unsigned calls = atomic_fetch_add(&r->calls, 1) + 1;
    if (!r->repeats && calls > 1)
        fail(F_OBSERVER, "non-repeating observer #%u called %u times, expected at most once", r->id, calls);
    callout_extras();
    atomic_store(&r->in_callout, false);
}

/* ---- Creating objects -------------------------------------------------------------------------- */

static rec *new_source(rng_t *g) {
    rec *r = rec_new(K_SOURCE, below(g, 2));
    rl_source_context_t c = {r, r->use_retain ? ctx_retain : NULL, ctx_release, src_schedule, src_cancel,
                             src_perform};
    r->obj = rl_source_create((long)below(g, 11) - 5, &c);
    if (!r->obj) fail(F_API, "rl_source_create: %s", strerror(errno));
    return rec_register(r);
}

static rec *new_timer(rng_t *g) {
    rec *r = rec_new(K_TIMER, below(g, 2));
    r->interval = below(g, 10) < 6 ? 0.001 + uniform(g) * 0.019 : 0;
    rl_context_t c = {r, r->use_retain ? ctx_retain : NULL, ctx_release};
    double date = rl_time_now() + uniform(g) * 0.022 - 0.002;
    r->obj = rl_timer_create(date, r->interval, (long)below(g, 7) - 3, timer_cb, &c);
    if (!r->obj) fail(F_API, "rl_timer_create: %s", strerror(errno));
    else if (below(g, 4) == 0) (void)rl_timer_set_tolerance(r->obj, uniform(g) * 0.005);
    return rec_register(r);
}

static rec *new_observer(rng_t *g) {
    static const unsigned acts[] = {RL_ENTRY, RL_BEFORE_TIMERS, RL_BEFORE_SOURCES, RL_BEFORE_WAITING,
                                    RL_AFTER_WAITING, RL_EXIT};
    rec *r = rec_new(K_OBSERVER, below(g, 2));
    if (below(g, 5) == 0) {
        r->activities = RL_ALL_ACTIVITIES;
    } else {
        do
            for (int i = 0; i < 6; i++)
                if (below(g, 3) == 0) r->activities |= acts[i];
        while (!r->activities);
    }
    r->repeats = below(g, 5) != 0;
    rl_context_t c = {r, r->use_retain ? ctx_retain : NULL, ctx_release};
    r->obj = rl_observer_create(r->activities, r->repeats, (long)below(g, 7) - 3, observer_cb, &c);
    if (!r->obj) fail(F_API, "rl_observer_create: %s", strerror(errno));
    return rec_register(r);
}

static rec *new_rec(enum kind k, rng_t *g) {
    return k == K_SOURCE ? new_source(g) : k == K_TIMER ? new_timer(g) : new_observer(g);
}

/* ---- Mutators ---------------------------------------------------------------------------------- */

static slot *slots_of(enum kind k, unsigned *n) {
    *n = k == K_SOURCE ? NSRC : k == K_TIMER ? NTMR : NOBS;
    return k == K_SOURCE ? src_slots : k == K_TIMER ? tmr_slots : obs_slots;
}

/* The record in a slot, its object retained for the caller (put() gives it back). */
static rec *take_slot(slot *s) {
    pthread_mutex_lock(&s->mu);
    rec *r = s->r;
    rl_retain(r->obj);
    pthread_mutex_unlock(&s->mu);
    return r;
}
static void put(rec *r) { rl_release(r->obj); }

static bool is_valid(rec *r) {
    return r->kind == K_SOURCE ? rl_source_is_valid(r->obj)
         : r->kind == K_TIMER  ? rl_timer_is_valid(r->obj)
                               : rl_observer_is_valid(r->obj);
}

static void invalidate(rec *r) {
    if (r->kind == K_SOURCE) rl_source_invalidate(r->obj);
    else if (r->kind == K_TIMER) rl_timer_invalidate(r->obj);
    else rl_observer_invalidate(r->obj);
}

/* Swap the slot's object for a new one; the old one is invalidated, or left to the loop. */
static void replace(slot *s, enum kind k, rng_t *g, mcount *c) {
    rec *fresh = new_rec(k, g);
    c->creates++;
    if (!fresh) return;
    int stable = k == K_SOURCE ? stable_mode((unsigned)(s - src_slots)) : -1;
    if (stable >= 0) {
        fresh->stable = true;
        int rc = rl_loop_add_source(atomic_load(&the_loop), fresh->obj, mode_name(stable));
        c->adds++;
        if (rc)
            fail(F_API, "source #%u: add(%s) of a new stable source returned %d, expected 0", fresh->id,
                 mode_name(stable), rc);
    }
    pthread_mutex_lock(&s->mu);
    rec *old = s->r;
    s->r = fresh;
    pthread_mutex_unlock(&s->mu);

    if (below(g, 4) != 0 || atomic_fetch_add(&orphans[k], 1) >= MAX_ORPHANS) {
        invalidate(old);
        c->invalidates++;
    }
    rl_release(old->obj); /* the slot's reference; the loop may still hold the object */
}

static int pick_mode(rng_t *g) {
    unsigned x = below(g, 100);
    return x < 30 ? M_DEFAULT : x < 55 ? M_COMMON2 : x < 70 ? M_PRIVATE : M_COMMON;
}

static void check_rc(rec *r, const char *what, int m, int rc, bool add) {
    bool ok = rc == 0 || (add ? rc == -EEXIST : rc == -ENOENT);
    if (add && rc == -EINVAL && !is_valid(r)) ok = true; /* valid never comes back, so it was invalid */
    if (!ok)
        fail(F_API, "%s #%u: %s(%s) returned %d (%s), expected 0 or %s%s", kind_names[r->kind], r->id, what,
             mode_name(m), rc, strerror(-rc), add ? "-EEXIST" : "-ENOENT", add ? " (-EINVAL once invalid)" : "");
}

static void op_item(enum kind k, unsigned x, rng_t *g, mcount *c, rl_loop_t *loop) {
    unsigned n;
    slot *slots = slots_of(k, &n);
    slot *s = &slots[below(g, n)];
    rec *r = take_slot(s);
    if (!is_valid(r) && below(g, 16) == 0) { /* invalid (invalidated, or a one-shot that fired) */
        put(r);
        replace(s, k, g, c);
        return;
    }
    int m = pick_mode(g);
    int rc;
    /* Stable sources are only signalled, and seldom replaced or invalidated. */
    if (k == K_SOURCE && s - slots < NSTABLE && (x < 2 || below(g, 200) != 0)) x = 5;
    switch (x) {
    case 0: /* add */
        c->adds++;
        if (k == K_SOURCE) rc = rl_loop_add_source(loop, r->obj, mode_name(m));
        else if (k == K_TIMER) rc = rl_loop_add_timer(loop, r->obj, mode_name(m));
        else rc = rl_loop_add_observer(loop, r->obj, mode_name(m));
        check_rc(r, "add", m, rc, true);
        break;
    case 1: /* remove */
        c->removes++;
        if (k == K_SOURCE) {
            rc = rl_loop_remove_source(loop, r->obj, mode_name(m));
            if (rc == 0) atomic_max(&r->removed_at, atomic_load(&r->ticket));
        } else if (k == K_TIMER) {
            rc = rl_loop_remove_timer(loop, r->obj, mode_name(m));
        } else {
            rc = rl_loop_remove_observer(loop, r->obj, mode_name(m));
        }
        check_rc(r, "remove", m, rc, false);
        break;
    case 5: /* signal */
        c->signals++;
        atomic_fetch_add(&r->ticket, 1);
        rl_source_signal(r->obj);
        rl_loop_wakeup(loop);
        c->wakeups++;
        break;
    case 2: /* invalidate */
        c->invalidates++;
        invalidate(r);
        if (is_valid(r)) fail(F_API, "%s #%u: valid after invalidation, expected invalid", kind_names[k], r->id);
        break;
    case 3: /* replace */
        put(r);
        replace(s, k, g, c);
        return;
    case 4: /* rearm (timers), tolerance */
        if (k != K_TIMER) break;
        if (below(g, 8) == 0) {
            rc = rl_timer_set_tolerance(r->obj, below(g, 2) ? 0 : uniform(g) * 0.005);
            if (rc && (rc != -EINVAL || is_valid(r)))
                fail(F_API, "timer #%u: set_tolerance returned %d, expected 0 (-EINVAL once invalid)", r->id, rc);
        } else {
            c->rearms++;
            timer_rearm(r, rl_time_now() + uniform(g) * 0.015 - 0.003);
            if (below(g, 4) == 0) {
                rl_loop_wakeup(loop);
                c->wakeups++;
            }
        }
        break;
    }
    put(r);
}

static void op_signal(rng_t *g, mcount *c, rl_loop_t *loop) {
    rec *r = take_slot(&src_slots[below(g, NSRC)]);
    c->signals++;
    atomic_fetch_add(&r->ticket, 1); /* the ticket first, then the signal */
    rl_source_signal(r->obj);
    if (below(g, 10) != 0) {
        rl_loop_wakeup(loop);
        c->wakeups++;
    }
    put(r);
}

static void op_query(rng_t *g, mcount *c, rl_loop_t *loop) {
    c->queries++;
    switch (below(g, 8)) {
    case 0: {
        char *d = below(g, 20) == 0 ? rl_loop_copy_description(loop) : NULL;
        free(d);
        break;
    }
    case 1: {
        size_t n = 0;
        char **names = rl_loop_copy_all_modes(loop, &n);
        if (!names) fail(F_API, "rl_loop_copy_all_modes returned NULL (%s), expected the modes", strerror(errno));
        for (size_t i = 0; names && i < n; i++) free(names[i]);
        free(names);
        break;
    }
    case 2: free(rl_loop_copy_current_mode(loop)); break;
    case 3: {
        rl_loop_stats_t st;
        int rc = rl_loop_get_stats(loop, &st);
        if (rc) fail(F_API, "rl_loop_get_stats returned %d, expected 0", rc);
        break;
    }
    case 4: (void)rl_loop_get_next_timer_fire_date(loop, mode_name((int)below(g, 3))); break;
    case 5: (void)rl_loop_is_waiting(loop); break;
    default: {
        enum kind k = (enum kind)below(g, 3);
        unsigned n;
        slot *slots = slots_of(k, &n);
        rec *r = take_slot(&slots[below(g, n)]);
        const char *m = mode_name(pick_mode(g));
        if (k == K_SOURCE) {
            (void)rl_loop_contains_source(loop, r->obj, m);
            (void)rl_source_is_signalled(r->obj);
        } else if (k == K_TIMER) {
            (void)rl_loop_contains_timer(loop, r->obj, m);
            (void)rl_timer_get_next_fire_date(r->obj);
        } else {
            (void)rl_loop_contains_observer(loop, r->obj, m);
        }
        put(r);
    }
    }
}

typedef struct {
    int index;
    pthread_t thread;
    mcount count;
} mutator;

static double start_time;
static double mark_common_after;

static void *mutator_main(void *arg) {
    mutator *mu = arg;
    rng_t g = rng_for((unsigned)mu->index);
    mcount *c = &mu->count;
    rl_loop_t *loop = atomic_load(&the_loop);
    bool marked = mu->index != 0, storm = false;
    double next_switch = 0;
    while (!atomic_load_explicit(&mutators_stop, memory_order_relaxed)) {
        c->ops++;
        /* Storms (back-to-back operations, the loop seldom sleeps) alternate with calm spells
         * (short sleeps between bursts, so the loop goes to sleep and is woken up). */
        if ((c->ops & 15) == 0 && rl_time_now() >= next_switch) {
            storm = below(&g, 3) == 0;
            next_switch = rl_time_now() + 0.01 + uniform(&g) * 0.09;
        }
        if (!storm && below(&g, 32) == 0)
            nanosleep(&(struct timespec){0, 50000 + (long)below(&g, 450000)}, NULL);
        if (!marked && rl_time_now() - start_time >= mark_common_after) {
            marked = true;
            atomic_store(&common2_marked, true);
            int rc = rl_loop_add_common_mode(loop, MODE_COMMON2);
            if (rc) fail(F_API, "rl_loop_add_common_mode returned %d, expected 0", rc);
        }
        if ((c->ops & 255) == 0) {
            c->verifies++;
            verify_now("mutator");
        }
        unsigned x = below(&g, 1000);
        if (x < 300) op_signal(&g, c, loop);
        else if (x < 420) op_item(K_SOURCE, 0, &g, c, loop);
        else if (x < 510) op_item(K_SOURCE, 1, &g, c, loop);
        else if (x < 514) op_item(K_SOURCE, 2, &g, c, loop);
        else if (x < 516) op_item(K_SOURCE, 3, &g, c, loop);
        else if (x < 596) op_item(K_TIMER, 0, &g, c, loop);
        else if (x < 646) op_item(K_TIMER, 1, &g, c, loop);
        else if (x < 650) op_item(K_TIMER, 2, &g, c, loop);
        else if (x < 653) op_item(K_TIMER, 3, &g, c, loop);
        else if (x < 698) op_item(K_TIMER, 4, &g, c, loop);
        else if (x < 723) op_item(K_OBSERVER, 0, &g, c, loop);
        else if (x < 743) op_item(K_OBSERVER, 1, &g, c, loop);
        else if (x < 746) op_item(K_OBSERVER, 2, &g, c, loop);
        else if (x < 747) op_item(K_OBSERVER, 3, &g, c, loop);
        else if (x < 775) op_query(&g, c, loop);
        else if (x < 900) {
            c->blocks++;
            int rc = queue_block(loop, pick_mode(&g), B_QUEUED);
            if (rc && rc != -ENOSPC) fail(F_API, "rl_loop_perform returned %d, expected 0", rc);
            if (below(&g, 10) != 0) {
                rl_loop_wakeup(loop);
                c->wakeups++;
            }
        } else if (x < 990) {
            c->wakeups++;
            rl_loop_wakeup(loop);
        } else {
            c->stops++;
            rl_loop_stop(loop);
        }
    }
    return NULL;
}

/* While the loop's thread exits: everything another thread may do to a loop at any time. */
static atomic_bool storm_stop;

static void *storm_main(void *arg) {
    mutator *mu = arg;
    rng_t g = rng_for(100 + (unsigned)mu->index);
    mcount *c = &mu->count;
    rl_loop_t *loop = atomic_load(&the_loop);
    while (!atomic_load_explicit(&storm_stop, memory_order_relaxed)) {
        c->ops++;
        unsigned x = below(&g, 100);
        if (x < 25) {
            c->wakeups++;
            rl_loop_wakeup(loop);
        } else if (x < 30) {
            c->stops++;
            rl_loop_stop(loop);
        } else if (x < 45) {
            c->blocks++;
            int rc = queue_block(loop, pick_mode(&g), B_LATE);
            if (rc && rc != -EINVAL && rc != -ENOSPC)
                fail(F_API, "exit storm: rl_loop_perform returned %d, expected 0 or -EINVAL", rc);
        } else if (x < 95) {
            enum kind k = x < 65 ? K_SOURCE : x < 80 ? K_TIMER : K_OBSERVER;
            unsigned n;
            slot *slots = slots_of(k, &n);
            rec *r = take_slot(&slots[below(&g, n)]);
            int m = pick_mode(&g), rc = 0;
            bool add = below(&g, 3) != 0;
            if (k == K_SOURCE && below(&g, 2)) {
                c->signals++;
                atomic_fetch_add(&r->ticket, 1);
                rl_source_signal(r->obj);
            } else if (add) {
                c->adds++;
                rc = k == K_SOURCE ? rl_loop_add_source(loop, r->obj, mode_name(m))
                   : k == K_TIMER  ? rl_loop_add_timer(loop, r->obj, mode_name(m))
                                   : rl_loop_add_observer(loop, r->obj, mode_name(m));
                if (rc && rc != -EEXIST && rc != -EINVAL)
                    fail(F_API, "exit storm: %s #%u: add(%s) returned %d, expected 0, -EEXIST or -EINVAL",
                         kind_names[k], r->id, mode_name(m), rc);
            } else {
                c->removes++;
                rc = k == K_SOURCE ? rl_loop_remove_source(loop, r->obj, mode_name(m))
                   : k == K_TIMER  ? rl_loop_remove_timer(loop, r->obj, mode_name(m))
                                   : rl_loop_remove_observer(loop, r->obj, mode_name(m));
                if (rc && rc != -ENOENT)
                    fail(F_API, "exit storm: %s #%u: remove(%s) returned %d, expected 0 or -ENOENT", kind_names[k],
                         r->id, mode_name(m), rc);
            }
            put(r);
        } else {
            c->verifies++;
            verify_now("exit storm");
        }
    }
    return NULL;
}

/* ---- The loop thread --------------------------------------------------------------------------- */

static bool alive(rec *r) { return r->created && atomic_load(&r->releases) == 0; }

static bool source_in_loop(rl_loop_t *loop, rec *r) {
    for (int m = 0; m < 3; m++)
        if (rl_loop_contains_source(loop, r->obj, mode_name(m))) return true;
    return false;
}

/* Whether every valid source in a mode has seen all its tickets; report the others when final.
 * Only the loop thread changes anything now, so the checks are stable. */
static bool sources_caught_up(rl_loop_t *loop, bool final, unsigned long long *lost, unsigned long long *stale) {
    size_t n;
    rec **all = recs_snapshot(&n);
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        rec *r = all[i];
        if (r->kind != K_SOURCE || !alive(r) || !rl_source_is_valid(r->obj) || !source_in_loop(loop, r)) continue;
        unsigned long long t = atomic_load(&r->ticket), p = atomic_load(&r->performed), rm = atomic_load(&r->removed_at);
        if (p >= t) continue;
        ok = false;
        if (!final) break;
        bool after_removal = t > rm;
        if (after_removal) ++*lost;
        else ++*stale;
        fail(after_removal ? F_LOST : F_STALE,
             "source #%u: %llu ticket(s) taken, performs saw up to %llu, expected all (last removal at ticket %llu); "
             "signalled flag %d; in default %d, %s %d, %s %d",
             r->id, t, p, rm, rl_source_is_signalled(r->obj), rl_loop_contains_source(loop, r->obj, RL_DEFAULT_MODE),
             MODE_COMMON2, rl_loop_contains_source(loop, r->obj, MODE_COMMON2), MODE_PRIVATE,
             rl_loop_contains_source(loop, r->obj, MODE_PRIVATE));
    }
    free(all);
    return ok;
}

/* After a run in mode m that started at since: no valid timer of m may still be due before since. */
static void check_overdue(rl_loop_t *loop, int m, double since) {
    size_t n;
    rec **all = recs_snapshot(&n);
    for (size_t i = 0; i < n; i++) {
        rec *r = all[i];
        if (r->kind != K_TIMER || !alive(r) || !rl_timer_is_valid(r->obj)) continue;
        if (!rl_loop_contains_timer(loop, r->obj, mode_name(m))) continue;
        double date = rl_timer_get_next_fire_date(r->obj);
        if (date < since)
            fail(F_OVERDUE, "timer #%u in %s still due at %.9f after a run that started at %.9f, expected fired",
                 r->id, mode_name(m), date, since);
    }
    free(all);
}

static unsigned long long lost_count, stale_count;

/* During the run (main thread): a ticket of a stable source in a mode the loop keeps running
 * (default, common) must be performed within LATE_SECONDS. */
static void watch_stable_sources(rl_loop_t *loop) {
    /* The record watched, by id (a freed record's address may come back for a new one). */
    static struct { unsigned id; bool set; unsigned long long ticket; double since; } w[NSTABLE];
    double now = rl_time_now();
    for (unsigned i = 0; i < NSTABLE; i++) {
        int m = stable_mode(i);
        if (m == M_PRIVATE) continue;
        rec *r = take_slot(&src_slots[i]);
        unsigned long long t = atomic_load(&r->ticket), p = atomic_load(&r->performed);
        if (!w[i].set || w[i].id != r->id || p >= w[i].ticket) {
            w[i].set = true;
            w[i].id = r->id;
            w[i].ticket = t; /* outstanding now (or already done) */
            w[i].since = now;
        } else if (now - w[i].since > LATE_SECONDS && rl_source_is_valid(r->obj) &&
                   rl_loop_contains_source(loop, r->obj, mode_name(m == M_COMMON ? M_DEFAULT : m))) {
            lost_count++;
            fail(F_LOST, "stable source #%u in %s: ticket %llu not performed after %.1f s, expected within %.0f s "
                 "(performs saw up to %llu; signalled flag %d)", r->id, mode_name(m), w[i].ticket, now - w[i].since,
                 LATE_SECONDS, p, rl_source_is_signalled(r->obj));
            w[i].ticket = t;
            w[i].since = now;
        }
        put(r);
    }
}

static rec *drain(rl_loop_t *loop) {
    /* An idle timer in each mode, so that no mode is empty and every queued block gets its run. */
    rec *anchor = rec_new(K_TIMER, false);
    anchor->interval = 3600;
    rl_context_t c = {anchor, NULL, ctx_release};
    anchor->obj = rl_timer_create(rl_time_now() + 3600, 3600, 0, timer_cb, &c);
    if (!rec_register(anchor)) {
        fail(F_API, "drain: rl_timer_create: %s", strerror(errno));
        anchor = NULL;
    }
    for (int m = 0; anchor && m < 3; m++) {
        int rc = rl_loop_add_timer(loop, anchor->obj, mode_name(m));
        if (rc) fail(F_API, "drain: rl_loop_add_timer(%s) returned %d, expected 0", mode_name(m), rc);
    }
    double limit = rl_time_now() + 10;
    unsigned long long dummy_lost = 0, dummy_stale = 0;
    for (int round = 0;; round++) {
        for (int m = 0; m < 3; m++) do_run(m, 0.002, false);
        bool blocks_done = atomic_load(&blocks_ran) >= atomic_load(&blocks_queued);
        if (round >= 3 && blocks_done && sources_caught_up(loop, false, &dummy_lost, &dummy_stale)) break;
        if (rl_time_now() > limit) break;
    }
    for (int m = 0; m < 3; m++) {
        double since = rl_time_now();
        if (do_run(m, 0.002, false) == RL_RUN_TIMED_OUT) check_overdue(loop, m, since);
    }
    (void)sources_caught_up(loop, true, &lost_count, &stale_count);
    unsigned long long queued = atomic_load(&blocks_queued), ran = atomic_load(&blocks_ran);
    if (ran != queued) fail(F_BLOCK, "%llu blocks queued, %llu ran after the drain, expected all", queued, ran);
    verify_now("after the drain");
    return anchor;
}

static void *loop_main(void *arg) {
    (void)arg;
    rl_loop_t *loop = rl_loop_get_current();
    atomic_store(&the_loop, rl_retain(loop)); /* main's reference, given back at the end */
    unsigned k = 0, finished = 0;
    while (atomic_load(&phase) == PHASE_RUN) {
        if (below(&loop_rng, 4) != 0) k++;
        double secs = below(&loop_rng, 10) == 0 ? 0 : uniform(&loop_rng) * 0.02;
        int r = do_run(k & 1 ? M_COMMON2 : M_DEFAULT, secs, below(&loop_rng, 5) == 0);
        if (r == RL_RUN_FINISHED && ++finished >= 2) {
            nanosleep(&(struct timespec){0, 200000}, NULL); /* both modes empty: do not spin */
            finished = 0;
        } else if (r != RL_RUN_FINISHED) {
            finished = 0;
        }
    }
    rec *anchor = drain(loop);
    atomic_store(&loop_drained, true);
    while (!atomic_load(&loop_may_exit)) nanosleep(&(struct timespec){0, 1000000}, NULL);
    /* The exit storm is on (threads waking, stopping, signalling, adding, queueing): a few last
     * runs that sleep, so that the exit follows a wait closely. */
    for (int i = 0; i < 10; i++) do_run(i & 1 ? M_COMMON2 : M_DEFAULT, 0.001 + uniform(&loop_rng) * 0.002, false);
    /* Blocks the teardown must drop: queued after the last run, never run. */
    for (int i = 0; i < 6; i++) (void)queue_block(loop, (int)below(&loop_rng, M_COUNT), B_DROP);
    if (anchor) rl_release(anchor->obj); /* still in three modes: the teardown lets go of it */
    return NULL; /* the thread's exit tears the loop down */
}

/* ---- Watchdog ---------------------------------------------------------------------------------- */

static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cv = PTHREAD_COND_INITIALIZER;
static bool watch_done;
static const char *_Atomic stage = "starting";

static void *watchdog_main(void *arg) {
    double limit = *(double *)arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)limit;
    pthread_mutex_lock(&watch_mu);
    while (!watch_done)
        if (pthread_cond_timedwait(&watch_cv, &watch_mu, &until) == ETIMEDOUT) break;
    bool done = watch_done;
    pthread_mutex_unlock(&watch_mu);
    if (!done) {
        fprintf(stderr, "%s: FAIL (seed %" PRIu64 "): hung for %g s (stage: %s)\n", name, seed, limit,
                atomic_load(&stage));
        abort();
    }
    return NULL;
}

/* ---- Main -------------------------------------------------------------------------------------- */

static int usage(void) {
    fprintf(stderr, "usage: stress [--seed N|random] [--seconds S] [--threads T] [--name NAME] [--quiet]\n");
    return 2;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        }
        if (!v) return usage();
        i++;
        if (strcmp(a, "--seed") == 0) {
            if (strcmp(v, "random") == 0) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                seed = ((uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid()) % 4294967296u;
            } else {
                char *end;
                seed = strtoull(v, &end, 0);
                if (*end) return usage();
            }
        } else if (strcmp(a, "--seconds") == 0) {
            seconds = strtod(v, NULL);
            if (!(seconds > 0 && seconds < 1e6)) return usage();
        } else if (strcmp(a, "--threads") == 0) {
            nthreads = atoi(v);
            if (nthreads < 1 || nthreads > MAX_THREADS) return usage();
        } else if (strcmp(a, "--name") == 0) {
            static char label[64];
            snprintf(label, sizeof label, "stress (%s)", v);
            name = label;
        } else {
            return usage();
        }
    }
    if (!quiet)
        printf("%s: seed %" PRIu64 ", %d threads, %.1f s (reproduce: --seed %" PRIu64 " --seconds %g --threads %d)\n",
               name, seed, nthreads, seconds, seed, seconds, nthreads);
    fflush(stdout);

    double watch_limit = seconds * 3 + 120;
    pthread_t watchdog;
    pthread_create(&watchdog, NULL, watchdog_main, &watch_limit);

    loop_rng = rng_for(999);
    rng_t g = rng_for(998);
    mark_common_after = uniform(&g) * fmin(1.0, seconds / 10);
    for (unsigned i = 0; i < NSRC; i++) pthread_mutex_init(&src_slots[i].mu, NULL), src_slots[i].r = new_source(&g);
    for (unsigned i = 0; i < NTMR; i++) pthread_mutex_init(&tmr_slots[i].mu, NULL), tmr_slots[i].r = new_timer(&g);
    for (unsigned i = 0; i < NOBS; i++) pthread_mutex_init(&obs_slots[i].mu, NULL), obs_slots[i].r = new_observer(&g);
    for (unsigned i = 0; i < NSRC + NTMR + NOBS; i++) {
        rec *r = i < NSRC ? src_slots[i].r : i < NSRC + NTMR ? tmr_slots[i - NSRC].r : obs_slots[i - NSRC - NTMR].r;
        if (!r) return 1; /* reported by fail() */
    }

    atomic_store(&stage, "running");
    pthread_t loop_thread;
    pthread_create(&loop_thread, NULL, loop_main, NULL);
    while (!atomic_load(&the_loop)) nanosleep(&(struct timespec){0, 100000}, NULL);
    rl_loop_t *loop = atomic_load(&the_loop);

    for (unsigned i = 0; i < NSTABLE; i++) {
        src_slots[i].r->stable = true;
        int rc = rl_loop_add_source(loop, src_slots[i].r->obj, mode_name(stable_mode(i)));
        if (rc)
            fail(F_API, "source #%u: add(%s) of a stable source returned %d, expected 0", src_slots[i].r->id,
                 mode_name(stable_mode(i)), rc);
    }

    static mutator mutators[MAX_THREADS];
    start_time = rl_time_now();
    for (int i = 0; i < nthreads; i++) {
        mutators[i].index = i;
        pthread_create(&mutators[i].thread, NULL, mutator_main, &mutators[i]);
    }
    while (rl_time_now() - start_time < seconds && !atomic_load(&failures_total)) {
        nanosleep(&(struct timespec){0, 20000000}, NULL);
        reap(false);
        watch_stable_sources(loop);
    }
    atomic_store(&mutators_stop, true);
    for (int i = 0; i < nthreads; i++) pthread_join(mutators[i].thread, NULL);
    double elapsed = rl_time_now() - start_time;

    atomic_store(&stage, "draining");
    atomic_store(&phase, PHASE_DRAIN);
    rl_loop_stop(loop);
    rl_loop_wakeup(loop);
    while (!atomic_load(&loop_drained)) nanosleep(&(struct timespec){0, 1000000}, NULL);
    /* More blocks for the teardown to drop, queued from another thread (for the private mode,
     * which the loop does not run again). */
    for (int i = 0; i < 6; i++) (void)queue_block(loop, M_PRIVATE, B_DROP);
    atomic_store(&stage, "loop thread exit");
    atomic_store(&phase, PHASE_FINAL);
    static mutator storms[MAX_THREADS];
    for (int i = 0; i < nthreads; i++) {
        storms[i].index = i;
        pthread_create(&storms[i].thread, NULL, storm_main, &storms[i]);
    }
    nanosleep(&(struct timespec){0, 5000000}, NULL);
    atomic_store(&loop_may_exit, true);
    pthread_join(loop_thread, NULL);
    nanosleep(&(struct timespec){0, 10000000}, NULL);
    atomic_store(&storm_stop, true);
    for (int i = 0; i < nthreads; i++) pthread_join(storms[i].thread, NULL);

    /* The loop is dead: it refuses new items and blocks, and holds nothing. */
    atomic_store(&stage, "after the loop thread exited");
    int rc = queue_block(loop, M_DEFAULT, B_QUEUED);
    if (rc != -EINVAL) fail(F_TEARDOWN, "rl_loop_perform on a dead loop returned %d, expected -EINVAL", rc);
    rec *late = new_source(&g);
    if (late) {
        rc = rl_loop_add_source(loop, late->obj, RL_DEFAULT_MODE);
        if (rc != -EINVAL) fail(F_TEARDOWN, "rl_loop_add_source on a dead loop returned %d, expected -EINVAL", rc);
        rl_release(late->obj);
    }
    rl_loop_wakeup(loop);
    rl_loop_stop(loop);
    verify_now("dead loop");
    rl_loop_stats_t stats;
    memset(&stats, 0, sizeof stats);
    (void)rl_loop_get_stats(loop, &stats);
    size_t n;
    rec **all = recs_snapshot(&n);
    for (size_t i = 0; i < n; i++) {
        rec *r = all[i];
        if (!alive(r)) continue;
        for (int m = 0; m < 3; m++) {
            bool in = r->kind == K_SOURCE ? rl_loop_contains_source(loop, r->obj, mode_name(m))
                    : r->kind == K_TIMER  ? rl_loop_contains_timer(loop, r->obj, mode_name(m))
                                          : rl_loop_contains_observer(loop, r->obj, mode_name(m));
            if (in)
                fail(F_TEARDOWN, "%s #%u still in %s of the dead loop, expected in no mode", kind_names[r->kind], r->id,
                     mode_name(m));
        }
    }
    /* Give back every reference: the slots' ones. Nothing else holds any now. */
    slot *pools[] = {src_slots, tmr_slots, obs_slots};
    unsigned sizes[] = {NSRC, NTMR, NOBS};
    for (int p = 0; p < 3; p++)
        for (unsigned i = 0; i < sizes[p]; i++)
            rl_release(pools[p][i].r->obj);
    rl_release(loop);

    /* The books: every object is gone now. */
    free(all);
    reap(true);
    size_t used = atomic_load(&nblocks);
    if (used > MAX_BLOCKS) used = MAX_BLOCKS;
    unsigned long long dropped = 0;
    for (size_t i = 0; i < used; i++) {
        blk *b = block_at(i);
        unsigned state = atomic_load(&b->state), runs = atomic_load(&b->runs);
        if (state == B_DROP) {
            dropped++;
            if (runs) fail(F_BLOCK, "block %zu, queued for the teardown to drop, ran, expected never", i);
        } else if (state == B_QUEUED && runs != 1) {
            fail(F_BLOCK, "block %zu ran %u times, expected once", i, runs);
        } else if (state == B_LATE && runs > 1) {
            fail(F_BLOCK, "block %zu, queued while the loop's thread exited, ran %u times, expected at most once", i,
                 runs);
        } else if (state == B_LATE && !runs) {
            dropped++;
        }
    }

    mcount t = {0};
    for (int i = 0; i < 2 * nthreads; i++) {
        mcount *c = i < nthreads ? &mutators[i].count : &storms[i - nthreads].count;
        t.ops += c->ops, t.creates += c->creates, t.adds += c->adds, t.removes += c->removes;
        t.invalidates += c->invalidates, t.signals += c->signals, t.wakeups += c->wakeups, t.stops += c->stops;
        t.rearms += c->rearms, t.blocks += c->blocks, t.queries += c->queries, t.verifies += c->verifies;
    }
    long total = atomic_load(&failures_total);
    char verify_note[64];
    snprintf(verify_note, sizeof verify_note, "%llu rl_loop_verify calls", atomic_load(&verify_calls));
    printf("%s: seed %" PRIu64 ", %d threads, %.1f s, %llu operations (adds %llu, removes %llu, invalidates %llu, "
           "creates %llu, signals %llu, wakeups %llu, stops %llu, rearms %llu, blocks %llu, queries %llu; "
           "performs %llu, timer fires %llu, observer calls %llu, blocks run %llu, %llu dropped, runs %llu, "
           "nested %llu, waits %llu, wakeup writes %llu), %llu lost, %ld double fires, %ld early fires, contexts %s, %s%s\n",
           name, seed, nthreads, elapsed, t.ops, t.adds, t.removes, t.invalidates, t.creates, t.signals, t.wakeups,
           t.stops, t.rearms, t.blocks, t.queries, lc.performs, atomic_load(&fires_total), lc.observer_calls, lc.blocks_run, dropped, lc.runs,
           lc.nested, stats.waits, stats.wakeup_writes, lost_count + stale_count, atomic_load(&failures[F_DOUBLE]), atomic_load(&failures[F_EARLY]),
           atomic_load(&unbalanced_total) ? "UNBALANCED" : "balanced", verify_note, total ? "" : ": ok");
    if (total) {
        printf("%s: FAILED (seed %" PRIu64 "): %ld failure(s):", name, seed, total);
        for (int k = 0; k < F_KINDS; k++)
            if (atomic_load(&failures[k])) printf(" %s %ld;", fail_names[k], atomic_load(&failures[k]));
        printf(" reproduce with --seed %" PRIu64 " --seconds %g --threads %d\n", seed, seconds, nthreads);
    }
    fflush(stdout);

    free(recs);
    for (size_t i = 0; i < MAX_BLOCKS / BLOCK_CHUNK; i++) free(atomic_load(&block_chunks[i]));
    pthread_mutex_lock(&watch_mu);
    watch_done = true;
    pthread_cond_signal(&watch_cv);
    pthread_mutex_unlock(&watch_mu);
    pthread_join(watchdog, NULL);
    return total ? 1 : 0;
}
