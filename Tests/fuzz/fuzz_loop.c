/*
 * fuzz_loop.c - a model-based libFuzzer fuzzer of the C core, differential against Apple's
 * CFRunLoop (the CoreFoundation in the Swift toolchain's libFoundation.so).
 *
 * INPUT
 *   Byte 0 is a flags byte (see FLAG_*), then 4-byte op records [code, a, b, c] (a trailing
 *   partial record is ignored). code % 32 picks the op through op_of_code[]; a, b, c are its
 *   operands. A create op (timer, source, observer, block) takes the next (c & 3) records as
 *   its script instead of running them: the script runs every time the item is called out (at
 *   most SCRIPT_RUNS times per item, at most MAX_DEPTH callouts deep), so callouts add, remove,
 *   invalidate, signal, release, stop and run nested poll passes themselves. Item operands are
 *   `a`: slot (a % 16) % 12 (an empty slot makes the op a no-op), or, when a & 0x10 inside a
 *   callout, the item being called out ("self"). Modes: 0 default, 1-3 FuzzModeA-C, 4
 *   RL_COMMON_MODES (as an add/remove/contains/perform target only). Tests/fuzz/make_seeds.py
 *   writes inputs from a readable form and documents every op's operands.
 *
 *   A difference with CF is run twice more before it counts; a failure aborts with the input
 *   (decoded) and both traces on stderr. Tests/fuzz/regressions/README says how to replay one.
 *
 * WHAT IS COMPARED WITH CF (lockstep)
 *   Each input runs on a fresh pthread (the main thread's CF loop is special; a fresh thread
 *   also gives both libraries fresh loops, so inputs are independent). Every top-level op runs
 *   first against CF, then against crunloop; each side appends to its own trace, and the lines
 *   an op produced must be equal. Traced: every callout (timer fire, source perform, observer
 *   activity, block, schedule and cancel with their mode), every run's mode and result, add/
 *   remove return codes (CF returns nothing: its code is derived from CFRunLoopContains and
 *   validity before the call, which is crunloop's documented -EEXIST/-ENOENT/-EINVAL),
 *   contains, validity, signalled, getters, the current mode, whether a timer and a mode's
 *   next timer are due, far or absent. At thread exit both loops are torn down: the cancel
 *   callouts of that teardown are compared as a multiset, then the validity of the items the
 *   input still holds.
 *
 * WHAT IS CHECKED ON CRUNLOOP ALONE
 *   rl_loop_verify() after every op (top level and in callouts); every context: retain/release
 *   counted per info, release never more than owed, exactly what is owed by the end of the
 *   input (after the thread exit and the input's last releases), and no callout to an item whose
 *   info was released; rl_loop_get_stats() against the callouts and passes seen; leaks (ASan's
 *   leak check; Tests/fuzz/lsan.supp silences CoreFoundation's own). Bad input, against the
 *   header's contract (a small model, crunloop only): NaN, negative and huge times (1e300,
 *   INFINITY, DBL_MAX) for fire dates, intervals, tolerances and run timeouts, NULL handles,
 *   NULL/empty/common mode names, unknown flags, bad fds, -EBUSY through the main loop, a
 *   dead loop after thread exit. Compared timers get the huge dates/intervals on the crunloop
 *   side and "far future" on the CF side (neither ever fires); tolerances go to crunloop only
 *   (polls ignore them).
 *
 * MODELLED INSTEAD OF COMPARED (and why)
 *   - Waiting runs and fd (version-1) sources: CF handles one event per pass and reads 8 bytes
 *     from each fd, and a wait depends on the clock. The RLWAIT op runs crunloop alone in a
 *     private mode holding a ready pipe fd source (whose callout stops the loop), optionally a
 *     due one-shot timer and the huge timers of BAD ops, with timeouts 0, 100 s, 1e300, INFINITY,
 *     DBL_MAX, NaN...; the model predicts the result and the callouts exactly.
 *   - rl_loop_wakeup/rl_loop_stop inside a pass before its wait: invisible to a poll in both
 *     libraries except that CF's wakeup is an eventfd that its one-event-per-pass wait may pick
 *     instead of a due timer. So CF is only stopped/woken where no pass will wait again before
 *     the next run the fuzzer starts (not running; a timer callout; Entry/Exit of the innermost
 *     run, with every outer run past its wait), and before each run the fuzzer starts on CF a
 *     pass in a private, otherwise empty mode consumes any wakeup left over. crunloop is always
 *     stopped/woken.
 *
 * LEFT OUT: the deliberate differences of crunloop.h ("WHERE THIS DIFFERS FROM CFRunLoop")
 *   - Only poll passes (seconds 0) run the compared modes, and fire dates are "already due" or
 *     "far future", so the wall clock never decides anything; tolerance is not given to CF.
 *   - Equal fire dates: past dates are clamped to the time they are set, which differs between
 *     any two timers; far-future timers never fire.
 *   - Blocks count toward a non-empty mode in CF only: before a run in a mode with blocks
 *     pending for it (tracked per side), a callout-less "keeper" source is added to that mode on
 *     both sides and removed after the run, so both run the pass.
 *   - Schedule/cancel callouts of one call come in CF's hash order: they are sorted per call.
 *   - Orders are distinct per item (a base the input picks plus the item's serial): ties among
 *     observers go by creation in crunloop and by insertion in CF.
 *   - The main thread's loop is never run. CF's context release of timers and observers runs at
 *     invalidation, crunloop's at destruction: releases are counted, not traced.
 *
 * LEFT OUT: differences the fuzzer found that crunloop.h does not list (reported; each has a
 * kept input in Tests/fuzz/regressions/, written by make_seeds.py --regressions, which passes
 * here and fails with FUZZ_LOOP_STRICT=1 in the environment, where these exclusions are off)
 *   - CF quirks around an item in the common modes removed by name from one of them: CF's
 *     contains(common) of a timer or observer that is in no mode is false while CF still holds
 *     it in its common set, and CF's invalidation of one leaves it in that set. Removes and
 *     contains with the common modes of such an item, and adds of such timers and observers,
 *     are skipped from the removal by name on (common_partial); adds of sources are compared.
 *   (Two crunloop bugs the fuzzer found are fixed and their inputs kept in regressions/: an
 *   item removed by name from one common mode was not put back by a second add to the common
 *   modes; a run nested in a perform callout did not perform the signalled sources the outer
 *   pass had taken but not yet performed.)
 *   - A run nested in a block callout runs, in crunloop only, blocks of its mode queued before
 *     that callout (per-mode block queues; CF's pass holds the whole block list). Such runs are
 *     skipped while such a block is pending.
 *   - A due timer given a past date inside a run fires in the pass under way in CF, at the
 *     next pass in crunloop (as crunloop.h documents at rl_timer_set_next_fire_date): such a
 *     setdate is skipped.
 *   - A timer with an INFINITY interval is one-shot in crunloop (interval 0), repeating in CF:
 *     CF gets interval 0 for it. The fire date of an invalidated timer (CF: 0) and "signalled"
 *     of an invalidated source (CF: false) are not compared.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <CoreFoundation/CoreFoundation.h>
#include <crunloop.h>

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exported by libFoundation, missing from its header. */
extern Boolean CFRunLoopSourceIsSignalled(CFRunLoopSourceRef source);
/* Sources/CRunLoopCore/internal.h (verify.c): the number of violated invariants, 0 if none. */
int rl_loop_verify(rl_loop_t *loop, char *report, size_t size);

/* ---- Limits ---------------------------------------------------------------------------------- */

enum {
    NSLOT = 12,        /* items the input refers to at once */
    MAXRECS = 40,      /* items created per input, per side */
    MAXBLKS = 48,      /* blocks queued per input, per side */
    MAXSCRIPT = 3,     /* ops in an item's script */
    SCRIPT_RUNS = 4,   /* times an item's script runs */
    MAX_DEPTH = 6,     /* callouts nested */
    MAX_FRAMES = 4,    /* runs nested (the CF drain run not counted) */
    MAX_USER_REFS = 4, /* references the input holds on one item */
    NHUGE = 4,         /* crunloop-only never-firing timers kept for RLWAIT */
    MAXOPS_EXEC = 3000 /* ops executed per side per input, scripts included */
};

enum { CF = 0, RL = 1 };
enum { K_NONE, K_TIMER, K_SOURCE, K_OBSERVER };
enum { NMODES = 4, M_COMMON = 4 };
enum { PH_ENTRY, PH_PRE, PH_POST, PH_EXIT };

/* Flags byte (byte 0). */
enum {
    FLAG_RELEASE_BEFORE_EXIT = 1, /* drop the input's references before the thread exits */
    FLAG_KEEP_LOOP = 2,           /* retain the crunloop loop and use it after the thread exit */
};

typedef struct { uint8_t code, a, b, c; } op_t;

enum opk {
    OP_TIMER, OP_SOURCE, OP_OBSERVER, OP_ADD, OP_REMOVE, OP_INVALIDATE, OP_SIGNAL, OP_BLOCK,
    OP_RUN, OP_SETDATE, OP_COMMON, OP_RETAIN, OP_RELEASE, OP_STOP, OP_WAKEUP, OP_CONTAINS,
    OP_QUERY, OP_BAD, OP_RLWAIT, OP_DESCRIBE, OP_TOLERANCE, OP_COUNT
};
static const char *const op_names[OP_COUNT] = {
    "timer", "source", "observer", "add", "remove", "invalidate", "signal", "block",
    "run", "setdate", "common", "retain", "release", "stop", "wakeup", "contains",
    "query", "bad", "rlwait", "describe", "tolerance"};
/* code % 32 -> op: the frequent ops appear more than once. make_seeds.py mirrors this table. */
static const uint8_t op_of_code[32] = {
    OP_TIMER, OP_SOURCE, OP_OBSERVER, OP_ADD, OP_REMOVE, OP_INVALIDATE, OP_SIGNAL, OP_BLOCK,
    OP_RUN, OP_SETDATE, OP_COMMON, OP_RETAIN, OP_RELEASE, OP_STOP, OP_WAKEUP, OP_CONTAINS,
    OP_QUERY, OP_BAD, OP_RLWAIT, OP_DESCRIBE, OP_TOLERANCE, OP_RUN, OP_RUN, OP_ADD,
    OP_ADD, OP_SIGNAL, OP_TIMER, OP_SOURCE, OP_OBSERVER, OP_RUN, OP_INVALIDATE, OP_BLOCK};

/* ---- Per-side state ---------------------------------------------------------------------------- */

struct side;

/* An item's info on one side: lives for the whole input, so no callout can outlive it. */
struct rec {
    struct side *side;
    int kind, serial, slot; /* slot: -1 once the input dropped its last reference */
    long order;
    op_t script[MAXSCRIPT];
    int script_len, runs;
    bool with_retain;       /* the context has a retain callback */
    bool common_set;        /* added to the common modes and not removed from them since */
    bool common_quirk;      /* was in common_partial()'s state once (it sticks) */
    bool sig_shadow;        /* signalled while valid, not performed or invalidated since */
    unsigned long sig_seq;  /* when it was signalled (s->sig_counter) */
    int retains, releases;
    void *handle;           /* borrowed: valid while the item lives */
};

struct blk {
    struct side *side;
    int serial, mode, script_len;
    op_t script[MAXSCRIPT];
    bool ran;
};

struct item { struct rec *r; void *h; int user_refs; };
struct frame { int mode, phase; };

/* A never-firing crunloop-only timer (BAD ops) and the info of the RLWAIT op's items. */
struct aux { int retains, releases, calls; bool with_retain; int fd; unsigned events; bool stop; };

struct side {
    int id;
    void *loop;
    struct item items[NSLOT];
    struct rec recs[MAXRECS];
    int nrecs;
    struct blk blks[MAXBLKS];
    int nblks;
    char **lines;
    int nlines, cap;
    struct frame frames[MAX_FRAMES];
    int nframes, depth, executed;
    bool common[NMODES];
    void *keeper[NMODES];
    int keeper_depth[NMODES];
    bool cf_wake_pending;
    int in_block, blk_mark; /* block callouts running; blocks queued before the outermost one */
    int in_perform;         /* perform callouts running */
    unsigned long sig_counter, perf_mark; /* signals so far; those before the innermost perform */
    /* crunloop's counters as the fuzzer saw them, for rl_loop_get_stats */
    unsigned long long timer_callouts, performs, passes;
    rl_timer_t *huge[NHUGE]; /* a ring: the infos (huge_aux) never move */
    struct aux huge_aux[NHUGE];
    int huge_next;
    bool teardown;      /* lines from here on belong to the teardown */
    int teardown_mark;
};

/* The input being run (one at a time). */
static struct {
    const uint8_t *data;
    size_t size;
    uint8_t flags;
    op_t *ops;
    int nops;
    struct side side[2];
    char *mismatch;    /* a difference with CF: the input is run again before it counts */
    rl_loop_t *kept_loop;
    int cur_op;
} G;

/* ---- Mode names -------------------------------------------------------------------------------- */

/* FUZZ_LOOP_STRICT=1 in the environment: compare what is excluded as a reported difference
 * ("reported" in the comments), to check a fix against Tests/fuzz/regressions/. */
static bool strict;

static const char *const mode_label[5] = {"D", "A", "B", "C", "*"};
static const char *rl_mode_names[5];
static char rl_mode_copies[5][32]; /* the same names at other addresses (compared by content) */
static CFStringRef cf_mode_names[5];
static CFStringRef cf_drain_mode;
static const char *const RL_WAIT_MODE = "FuzzRLWait";
static const char *const RL_POST_MODE = "FuzzPostExit";

static const char *rl_mode(int m, int variant) { return (variant & 1) ? rl_mode_copies[m] : rl_mode_names[m]; }

static const char *rl_label_of(const char *name) {
    for (int m = 0; m < 5; m++)
        if (name && strcmp(name, rl_mode_names[m]) == 0) return mode_label[m];
    if (name && strcmp(name, RL_WAIT_MODE) == 0) return "W";
    return "?";
}

static const char *cf_label_of(CFStringRef name) {
    for (int m = 0; m < 5; m++)
        if (name && CFEqual(name, cf_mode_names[m])) return mode_label[m];
    return "?";
}

/* ---- Failing ----------------------------------------------------------------------------------- */

static void dump_traces(void) {
    for (int k = 0; k < 2; k++) {
        struct side *s = &G.side[k];
        int from = s->nlines > 80 ? s->nlines - 80 : 0;
        fprintf(stderr, "---- %s trace (%d lines, last %d) ----\n", k == CF ? "CF" : "crunloop", s->nlines,
                s->nlines - from);
        for (int i = from; i < s->nlines; i++) fprintf(stderr, "  %s\n", s->lines[i]);
    }
}

static void dump_ops(void) {
    fprintf(stderr, "---- input: flags %#x, %d ops ----\n", G.flags, G.nops);
    for (int i = 0; i < G.nops; i++) {
        const op_t *o = &G.ops[i];
        fprintf(stderr, "  %3d %-10s a=%3u b=%3u c=%3u%s\n", i, op_names[op_of_code[o->code % 32]], o->a, o->b,
                o->c, i == G.cur_op ? "   <== top-level op being run" : "");
    }
}

/* A crunloop failure against its own contract: deterministic, so abort at once. */
__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\nfuzz_loop: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    dump_ops();
    dump_traces();
    abort();
}

#define CHECK(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)

/* ---- Traces ------------------------------------------------------------------------------------ */

__attribute__((format(printf, 2, 3))) static void tr(struct side *s, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (s->nlines == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->lines = realloc(s->lines, (size_t)s->cap * sizeof *s->lines);
        if (!s->lines) abort();
    }
    char *line = malloc(strlen(buf) + 1 + 2 * (size_t)s->depth);
    if (!line) abort();
    /* indented by callout depth, so nesting is visible in a report */
    memset(line, ' ', 2 * (size_t)s->depth);
    strcpy(line + 2 * s->depth, buf);
    s->lines[s->nlines++] = line;
}

/* Move the last line to index at (a line whose content is known only after the call that
 * produced the lines since at). */
static void move_last_to(struct side *s, int at) {
    char *last = s->lines[s->nlines - 1];
    memmove(s->lines + at + 1, s->lines + at, (size_t)(s->nlines - 1 - at) * sizeof *s->lines);
    s->lines[at] = last;
}

static int cmp_lines(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort the lines appended since mark (the schedule/cancel callouts of one call). */
static void sort_from(struct side *s, int mark) {
    if (s->nlines - mark > 1) qsort(s->lines + mark, (size_t)(s->nlines - mark), sizeof *s->lines, cmp_lines);
}

/* ---- Contexts (shared by both sides: the info is a struct rec) ---------------------------------- */

static int owed(const struct rec *r) { return r->with_retain ? r->retains : 1; }

static const void *ctx_retain(const void *info) {
    struct rec *r = (struct rec *)info;
    r->retains++;
    return info;
}

static void ctx_release(const void *info) {
    struct rec *r = (struct rec *)info;
    r->releases++;
    if (r->releases > owed(r))
        fail("%s: the context of %c%d was released %d times, owed %d", r->side->id == CF ? "CF" : "crunloop",
             "?TSO"[r->kind], r->serial, r->releases, owed(r));
}

static const char *res_name(int r) {
    switch (r) {
    case 1: return "finished";
    case 2: return "stopped";
    case 3: return "timed-out";
    case 4: return "handled";
    default: return "error";
    }
}

static const char *act_name(unsigned a) {
    switch (a) {
    case 1u << 0: return "entry";
    case 1u << 1: return "before-timers";
    case 1u << 2: return "before-sources";
    case 1u << 5: return "before-waiting";
    case 1u << 6: return "after-waiting";
    case 1u << 7: return "exit";
    default: return "?";
    }
}

/* ---- Running ops ------------------------------------------------------------------------------- */

static void exec_op(struct side *s, const op_t *op, const op_t *script, int script_len, struct rec *self,
                    void *selfh);

static void verify_rl(struct side *s, const char *where) {
    if (s->id != RL) return;
    char report[4096];
    int n = rl_loop_verify(s->loop, report, sizeof report);
    if (n) fail("rl_loop_verify: %d violated invariant(s) after %s:\n%s", n, where, report);
}

static void run_script(struct side *s, struct rec *self, void *selfh, const op_t *script, int len) {
    s->depth++;
    for (int i = 0; i < len && s->executed < MAXOPS_EXEC; i++) exec_op(s, &script[i], NULL, 0, self, selfh);
    s->depth--;
}

/* What every callout does: trace it, note the phase of the innermost run, run the script. */
static void callout(struct rec *r, void *h, const char *what, int phase) {
    struct side *s = r->side;
    if (r->releases >= owed(r))
        fail("%s: callout (%s) to %c%d whose context was released", s->id == CF ? "CF" : "crunloop", what,
             "?TSO"[r->kind], r->serial);
    tr(s, "%c%d %s", "?TSO"[r->kind], r->serial, what);
    if (s->nframes && phase >= 0) {
        struct frame *f = &s->frames[s->nframes - 1];
        if (phase > f->phase) f->phase = phase;
    }
    if (r->script_len && r->runs < SCRIPT_RUNS && s->depth < MAX_DEPTH) {
        r->runs++;
        run_script(s, r, h, r->script, r->script_len);
    }
}

static int phase_of_activity(unsigned act) {
    switch (act) {
    case 1u << 0: return PH_ENTRY;
    case 1u << 6: return PH_POST;
    case 1u << 7: return PH_EXIT;
    default: return PH_PRE;
    }
}

static void cf_timer_cb(CFRunLoopTimerRef t, void *info) { callout(info, (void *)t, "fire", PH_POST); }
static void rl_timer_cb(rl_timer_t *t, void *info) {
    G.side[RL].timer_callouts++;
    callout(info, t, "fire", PH_POST);
}
static void cf_observer_cb(CFRunLoopObserverRef o, CFRunLoopActivity act, void *info) {
    callout(info, (void *)o, act_name((unsigned)act), phase_of_activity((unsigned)act));
}
static void rl_observer_cb(rl_observer_t *o, unsigned act, void *info) {
    callout(info, o, act_name(act), phase_of_activity(act));
}
static void perform(struct rec *r) {
    struct side *s = r->side;
    unsigned long mark = s->perf_mark;
    r->sig_shadow = false;
    s->perf_mark = s->sig_counter + 1;
    s->in_perform++;
    callout(r, r->handle, "perform", PH_PRE);
    s->in_perform--;
    s->perf_mark = mark;
}
static void cf_perform_cb(void *info) { perform(info); }
static void rl_perform_cb(void *info) {
    G.side[RL].performs++;
    perform(info);
}

static void sched_line(struct rec *r, const char *what, const char *label) {
    struct side *s = r->side;
    if (r->releases >= owed(r))
        fail("%s: %s callout to S%d whose context was released", s->id == CF ? "CF" : "crunloop", what, r->serial);
    tr(s, "S%d %s %s%s", r->serial, what, label, s->teardown ? " (teardown)" : "");
}
static void cf_schedule_cb(void *info, CFRunLoopRef rl, CFStringRef mode) {
    (void)rl;
    sched_line(info, "schedule", cf_label_of(mode));
}
static void cf_cancel_cb(void *info, CFRunLoopRef rl, CFStringRef mode) {
    (void)rl;
    sched_line(info, "cancel", cf_label_of(mode));
}
static void rl_schedule_cb(void *info, rl_loop_t *loop, const char *mode) {
    (void)loop;
    sched_line(info, "schedule", rl_label_of(mode));
}
static void rl_cancel_cb(void *info, rl_loop_t *loop, const char *mode) {
    (void)loop;
    sched_line(info, "cancel", rl_label_of(mode));
}

static void block_run(struct blk *b) {
    struct side *s = b->side;
    if (b->ran) fail("%s: block B%d ran twice", s->id == CF ? "CF" : "crunloop", b->serial);
    b->ran = true;
    tr(s, "B%d run", b->serial);
    if (s->nframes) {
        struct frame *f = &s->frames[s->nframes - 1];
        if (f->phase < PH_PRE) f->phase = PH_PRE; /* before or after the wait: assume before */
    }
    if (s->in_block++ == 0) s->blk_mark = s->nblks;
    if (b->script_len && s->depth < MAX_DEPTH) run_script(s, NULL, NULL, b->script, b->script_len);
    s->in_block--;
}
static void rl_block_fn(void *arg) { block_run(arg); }

/* ---- Items ------------------------------------------------------------------------------------- */

typedef struct { int slot; struct rec *r; void *h; bool owned; } iref;

static bool get_ref(struct side *s, uint8_t a, struct rec *self, void *selfh, iref *out) {
    if ((a & 0x10) && self) {
        out->r = self;
        out->h = selfh;
        out->slot = (self->slot >= 0 && s->items[self->slot].r == self) ? self->slot : -1;
        out->owned = out->slot >= 0;
        return true;
    }
    int slot = (a & 0x0f) % NSLOT;
    if (!s->items[slot].r) return false;
    out->slot = slot;
    out->r = s->items[slot].r;
    out->h = s->items[slot].h;
    out->owned = true;
    return true;
}

static char kc(const struct rec *r) { return "?TSO"[r->kind]; }

static const long order_base[5] = {LONG_MIN, -100000, 0, 100000, LONG_MAX - 64};
static long pick_order(uint8_t b, int serial) { return order_base[b % 5] + serial; }

static struct rec *new_rec(struct side *s, int kind, long order_b, const op_t *script, int script_len, bool with_retain) {
    if (s->nrecs == MAXRECS) return NULL;
    int slot = -1;
    for (int i = 0; i < NSLOT; i++)
        if (!s->items[i].r) {
            slot = i;
            break;
        }
    if (slot < 0) return NULL;
    struct rec *r = &s->recs[s->nrecs];
    memset(r, 0, sizeof *r);
    r->side = s;
    r->kind = kind;
    r->serial = s->nrecs++;
    r->slot = slot;
    r->order = pick_order((uint8_t)order_b, r->serial);
    r->script_len = script_len;
    if (script_len) memcpy(r->script, script, (size_t)script_len * sizeof *script);
    r->with_retain = s->id == CF ? true : with_retain;
    return r;
}

static void install(struct side *s, struct rec *r, void *h) {
    r->handle = h;
    s->items[r->slot].r = r;
    s->items[r->slot].h = h;
    s->items[r->slot].user_refs = 1;
    tr(s, "create %c%d", kc(r), r->serial);
}

/* Times: "past" and "far future" on both sides; "huge" values go to crunloop only. */
static double cf_now(void) { return CFAbsoluteTimeGetCurrent(); }

static double rl_past(uint8_t v) {
    double now = rl_time_now();
    switch (v % 3) {
    case 0: return 0.0;
    case 1: return now / 2;
    default: return now > 1e-3 ? now - 1e-3 : 0.0;
    }
}

static double rl_huge_value(uint8_t v) {
    static const double huge[4] = {INFINITY, 1e300, DBL_MAX, HUGE_VAL};
    return huge[v % 4];
}

/* kind: 0/3 past, 1 far future, 2 huge (crunloop) / far future (CF). */
static double date_for(struct side *s, int kind, uint8_t variant) {
    if (s->id == CF) return (kind == 0 || kind == 3) ? cf_now() - 10.0 - variant : cf_now() + 1e6 + 1000.0 * variant;
    if (kind == 0 || kind == 3) return rl_past(variant);
    if (kind == 1) return rl_time_now() + 1e6 + 1000.0 * variant;
    return rl_huge_value(variant);
}

static double interval_for(int kind, uint8_t variant) {
    static const double big[4] = {1e300, DBL_MAX, 1e9, INFINITY};
    switch (kind) {
    case 1: return 1e5;
    case 2: return big[variant % 4];
    default: return 0;
    }
}

static void op_create_timer(struct side *s, const op_t *op, const op_t *script, int len) {
    struct rec *r = new_rec(s, K_TIMER, op->b, script, len, op->a & 0x10);
    if (!r) {
        tr(s, "create skip");
        return;
    }
    int dk = op->a & 3, ik = (op->a >> 2) & 3;
    uint8_t variant = (uint8_t)(op->a >> 5);
    double date = date_for(s, dk, variant), interval = interval_for(ik, variant);
    void *h;
    if (s->id == CF) {
        /* crunloop stores an infinite interval as 0 (a one-shot timer: invalidated after it
         * fires, interval 0, does not repeat); CF keeps it (valid, repeating, interval inf).
         * Not in crunloop.h's list of differences: reported, and CF gets the one-shot here. */
        if (isinf(interval) && !strict) interval = 0;
        CFRunLoopTimerContext ctx = {0, r, ctx_retain, ctx_release, NULL};
        h = (void *)CFRunLoopTimerCreate(NULL, date, interval, 0, r->order, cf_timer_cb, &ctx);
    } else {
        rl_context_t ctx = {r, r->with_retain ? ctx_retain : NULL, ctx_release};
        h = rl_timer_create(date, interval, r->order, rl_timer_cb, &ctx);
        CHECK(h, "rl_timer_create(%g, %g) failed: %s", date, interval, strerror(errno));
    }
    install(s, r, h);
}

static void op_create_source(struct side *s, const op_t *op, const op_t *script, int len) {
    struct rec *r = new_rec(s, K_SOURCE, op->b, script, len, op->a & 0x10);
    if (!r) {
        tr(s, "create skip");
        return;
    }
    void *h;
    if (s->id == CF) {
        CFRunLoopSourceContext ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.info = r;
        ctx.retain = ctx_retain;
        ctx.release = ctx_release;
        ctx.schedule = cf_schedule_cb;
        ctx.cancel = cf_cancel_cb;
        ctx.perform = cf_perform_cb;
        h = (void *)CFRunLoopSourceCreate(NULL, r->order, &ctx);
    } else {
        rl_source_context_t ctx = {r, r->with_retain ? ctx_retain : NULL, ctx_release,
                                   rl_schedule_cb, rl_cancel_cb, rl_perform_cb};
        h = rl_source_create(r->order, &ctx);
        CHECK(h, "rl_source_create failed: %s", strerror(errno));
    }
    install(s, r, h);
}

static unsigned activities_of(uint8_t a) {
    unsigned m = a & 0xE7u; /* entry, before-timers, before-sources, before/after-waiting, exit */
    return m ? m : 0xE7u;
}

static void op_create_observer(struct side *s, const op_t *op, const op_t *script, int len) {
    struct rec *r = new_rec(s, K_OBSERVER, op->b, script, len, op->c & 0x10);
    if (!r) {
        tr(s, "create skip");
        return;
    }
    unsigned acts = activities_of(op->a);
    bool repeats = op->c & 4;
    void *h;
    if (s->id == CF) {
        CFRunLoopObserverContext ctx = {0, r, ctx_retain, ctx_release, NULL};
        h = (void *)CFRunLoopObserverCreate(NULL, acts, repeats, r->order, cf_observer_cb, &ctx);
    } else {
        rl_context_t ctx = {r, r->with_retain ? ctx_retain : NULL, ctx_release};
        h = rl_observer_create(acts, repeats, r->order, rl_observer_cb, &ctx);
        CHECK(h, "rl_observer_create(%#x) failed: %s", acts, strerror(errno));
    }
    install(s, r, h);
}

static bool is_valid(struct side *s, const iref *x) {
    if (s->id == CF) {
        switch (x->r->kind) {
        case K_TIMER: return CFRunLoopTimerIsValid(x->h);
        case K_SOURCE: return CFRunLoopSourceIsValid(x->h);
        default: return CFRunLoopObserverIsValid(x->h);
        }
    }
    switch (x->r->kind) {
    case K_TIMER: return rl_timer_is_valid(x->h);
    case K_SOURCE: return rl_source_is_valid(x->h);
    default: return rl_observer_is_valid(x->h);
    }
}

static bool contains(struct side *s, const iref *x, int m, int variant) {
    if (s->id == CF) {
        CFRunLoopRef l = s->loop;
        CFStringRef mode = cf_mode_names[m];
        switch (x->r->kind) {
        case K_TIMER: return CFRunLoopContainsTimer(l, x->h, mode);
        case K_SOURCE: return CFRunLoopContainsSource(l, x->h, mode);
        default: return CFRunLoopContainsObserver(l, x->h, mode);
        }
    }
    const char *mode = rl_mode(m, variant);
    switch (x->r->kind) {
    case K_TIMER: return rl_loop_contains_timer(s->loop, x->h, mode);
    case K_SOURCE: return rl_loop_contains_source(s->loop, x->h, mode);
    default: return rl_loop_contains_observer(s->loop, x->h, mode);
    }
}

/* An item added to the common modes, then removed by name from one of them (the fuzzer's shadow,
 * the same on both sides). Then CF and crunloop differ:
 *   - an add to the common modes puts the item back into every common mode on both sides (a
 *     crunloop bug once; Tests/fuzz/regressions/common_readd_after_remove_by_name), but:
 *   - CF's contains(common modes) of a timer or observer is false once it is in no mode (CF
 *     forgets its loop), though CF still holds it in its common set, so the fuzzer cannot derive
 *     CF's return code of an add or remove, nor compare contains.
 *   - CF's invalidation of such a timer or observer leaves it in CF's common set (contains is
 *     then true in CF, false in crunloop).
 * So removes and contains with the common modes, and adds of timers and observers, are skipped
 * for such an item from the moment it is removed by name from a common mode on (adds of sources
 * are compared: CF's contains is right for them). */
static bool common_partial(struct side *s, const iref *x) {
    if (x->r->common_quirk) return true;
    if (!x->r->common_set) return false;
    for (int mm = 0; mm < NMODES; mm++)
        if (s->common[mm] && !contains(s, x, mm, 0)) return true;
    return false;
}

static void op_add(struct side *s, const op_t *op, struct rec *self, void *selfh, bool add) {
    iref x;
    if (!get_ref(s, op->a, self, selfh, &x)) return;
    int m = op->b % 5, rc;
    if (m == M_COMMON && !(add && x.r->kind == K_SOURCE) && common_partial(s, &x)) {
        tr(s, "%s %c%d * skipped (in the common modes, but removed from one)", add ? "add" : "remove", kc(x.r),
           x.r->serial);
        return;
    }
    if (m == M_COMMON && is_valid(s, &x)) x.r->common_set = add;
    int mark = s->nlines;
    if (s->id == CF) {
        /* CF returns nothing: the code crunloop documents, from CF's state before the call. */
        bool valid = is_valid(s, &x), in = contains(s, &x, m, 0), in_all = in;
        /* An add to the common modes of an item already there that was removed by name from
         * one of them puts it back (0); -EEXIST only when it is in every common mode. */
        for (int mm = 0; add && m == M_COMMON && in_all && mm < NMODES; mm++)
            if (s->common[mm] && !contains(s, &x, mm, 0)) in_all = false;
        rc = add ? (!valid ? -EINVAL : in_all ? -EEXIST : 0) : (in ? 0 : -ENOENT);
        CFRunLoopRef l = s->loop;
        CFStringRef mode = cf_mode_names[m];
        switch (x.r->kind) {
        case K_TIMER: add ? CFRunLoopAddTimer(l, x.h, mode) : CFRunLoopRemoveTimer(l, x.h, mode); break;
        case K_SOURCE: add ? CFRunLoopAddSource(l, x.h, mode) : CFRunLoopRemoveSource(l, x.h, mode); break;
        default: add ? CFRunLoopAddObserver(l, x.h, mode) : CFRunLoopRemoveObserver(l, x.h, mode); break;
        }
    } else {
        const char *mode = rl_mode(m, op->c);
        switch (x.r->kind) {
        case K_TIMER: rc = add ? rl_loop_add_timer(s->loop, x.h, mode) : rl_loop_remove_timer(s->loop, x.h, mode); break;
        case K_SOURCE: rc = add ? rl_loop_add_source(s->loop, x.h, mode) : rl_loop_remove_source(s->loop, x.h, mode); break;
        default: rc = add ? rl_loop_add_observer(s->loop, x.h, mode) : rl_loop_remove_observer(s->loop, x.h, mode); break;
        }
    }
    sort_from(s, mark);
    if (!add && rc == 0 && m != M_COMMON && s->common[m] && x.r->common_set) x.r->common_quirk = true;
    tr(s, "%s %c%d %s -> %d", add ? "add" : "remove", kc(x.r), x.r->serial, mode_label[m], rc);
    move_last_to(s, mark);
}

static void op_invalidate(struct side *s, const op_t *op, struct rec *self, void *selfh) {
    iref x;
    if (!get_ref(s, op->a, self, selfh, &x)) return;
    tr(s, "invalidate %c%d", kc(x.r), x.r->serial);
    x.r->common_set = false;
    x.r->sig_shadow = false;
    int mark = s->nlines;
    if (s->id == CF) {
        switch (x.r->kind) {
        case K_TIMER: CFRunLoopTimerInvalidate(x.h); break;
        case K_SOURCE: CFRunLoopSourceInvalidate(x.h); break;
        default: CFRunLoopObserverInvalidate(x.h); break;
        }
    } else {
        switch (x.r->kind) {
        case K_TIMER: rl_timer_invalidate(x.h); break;
        case K_SOURCE: rl_source_invalidate(x.h); break;
        default: rl_observer_invalidate(x.h); break;
        }
    }
    sort_from(s, mark);
}

static void op_signal(struct side *s, const op_t *op, struct rec *self, void *selfh) {
    iref x;
    if (!get_ref(s, op->a, self, selfh, &x) || x.r->kind != K_SOURCE) return;
    tr(s, "signal S%d", x.r->serial);
    if (!x.r->sig_shadow && is_valid(s, &x)) {
        x.r->sig_shadow = true;
        x.r->sig_seq = ++s->sig_counter;
    }
    if (s->id == CF) CFRunLoopSourceSignal(x.h);
    else rl_source_signal(x.h);
}

static void op_block(struct side *s, const op_t *op, const op_t *script, int len) {
    if (s->nblks == MAXBLKS) return;
    struct blk *b = &s->blks[s->nblks];
    memset(b, 0, sizeof *b);
    b->side = s;
    b->serial = s->nblks++;
    b->mode = op->b % 5;
    b->script_len = len;
    if (len) memcpy(b->script, script, (size_t)len * sizeof *script);
    if (s->id == CF) {
        CFRunLoopPerformBlock(s->loop, cf_mode_names[b->mode], ^{ block_run(b); });
        tr(s, "block B%d %s -> 0", b->serial, mode_label[b->mode]);
    } else {
        int rc = rl_loop_perform(s->loop, rl_mode(b->mode, op->c), rl_block_fn, b);
        tr(s, "block B%d %s -> %d", b->serial, mode_label[b->mode], rc);
    }
}

/* Blocks not yet run that a run in mode m would run (the per-side shadow of the queue). */
static bool blocks_pending_before(struct side *s, int m, int before) {
    for (int i = 0; i < before; i++) {
        const struct blk *b = &s->blks[i];
        if (!b->ran && (b->mode == m || (b->mode == M_COMMON && s->common[m]))) return true;
    }
    return false;
}
static bool blocks_pending(struct side *s, int m) { return blocks_pending_before(s, m, s->nblks); }

static void keeper(struct side *s, int m, bool add) {
    if (add) {
        if (s->keeper_depth[m]++) return;
        if (!s->keeper[m]) {
            if (s->id == CF) {
                CFRunLoopSourceContext ctx;
                memset(&ctx, 0, sizeof ctx);
                s->keeper[m] = (void *)CFRunLoopSourceCreate(NULL, 0, &ctx);
            } else {
                rl_source_context_t ctx = {0};
                s->keeper[m] = rl_source_create(0, &ctx);
                CHECK(s->keeper[m], "rl_source_create (keeper) failed");
            }
        }
        if (s->id == CF) CFRunLoopAddSource(s->loop, s->keeper[m], cf_mode_names[m]);
        else CHECK(rl_loop_add_source(s->loop, s->keeper[m], rl_mode_names[m]) == 0, "adding a keeper failed");
    } else {
        if (--s->keeper_depth[m]) return;
        if (s->id == CF) CFRunLoopRemoveSource(s->loop, s->keeper[m], cf_mode_names[m]);
        else CHECK(rl_loop_remove_source(s->loop, s->keeper[m], rl_mode_names[m]) == 0, "removing a keeper failed");
    }
}

static void op_run(struct side *s, const op_t *op) {
    int m = op->b % NMODES;
    bool ret_after = op->c & 1;
    if (s->nframes >= MAX_FRAMES) return;
    /* CF's pass takes the loop's whole block list while it runs blocks, so a run nested in a
     * block callout cannot see the blocks queued before that callout; crunloop's pass takes only
     * the queues of its mode (per-mode queues, blocks.c), so a nested run in another mode runs
     * them. Not in crunloop.h's list of differences: reported; such a run is skipped. */
    if (!strict && s->in_block && blocks_pending_before(s, m, s->blk_mark)) {
        tr(s, "run %s skipped (blocks queued before the running block)", mode_label[m]);
        return;
    }
    bool keep = blocks_pending(s, m);
    if (keep) keeper(s, m, true);
    tr(s, "run %s%s", mode_label[m], ret_after ? " return-after" : "");
    s->frames[s->nframes++] = (struct frame){m, PH_ENTRY};
    int r;
    if (s->id == CF) {
        if (s->cf_wake_pending) {
            /* A wakeup CF may have left in its eventfd: a pass in an empty private mode eats it. */
            int d = CFRunLoopRunInMode(cf_drain_mode, 0, false);
            if (d != kCFRunLoopRunTimedOut) fail("CF: the drain run returned %d", d);
            s->cf_wake_pending = false;
        }
        r = CFRunLoopRunInMode(cf_mode_names[m], 0, ret_after);
    } else {
        r = rl_run_in_mode(rl_mode(m, op->c >> 1), 0, ret_after);
        if (r == RL_RUN_TIMED_OUT || r == RL_RUN_HANDLED_SOURCE) s->passes++;
    }
    s->nframes--;
    tr(s, "run %s -> %d %s", mode_label[m], r, res_name(r));
    if (keep) keeper(s, m, false);
}

static void op_setdate(struct side *s, const op_t *op, struct rec *self, void *selfh) {
    iref x;
    if (!get_ref(s, op->a, self, selfh, &x) || x.r->kind != K_TIMER) return;
    int kind = op->b & 3;
    uint8_t variant = op->b >> 2;
    double date = date_for(s, kind, variant);
    if (!strict && s->nframes && (kind == 0 || kind == 3) && is_valid(s, &x)) {
        /* A timer that is due, given a past date inside a run: CF still fires it in the pass
         * under way; crunloop fires it at the next pass, as crunloop.h says of
         * rl_timer_set_next_fire_date ("a date in the past counts as now (the timer fires at
         * the next pass ...)"), though its list of differences does not. Skipped. */
        bool due = s->id == CF ? CFRunLoopTimerGetNextFireDate(x.h) <= cf_now()
                               : rl_timer_get_next_fire_date(x.h) <= rl_time_now();
        if (due) {
            tr(s, "setdate T%d past skipped (due, inside a run)", x.r->serial);
            return;
        }
    }
    int rc;
    if (s->id == CF) {
        rc = CFRunLoopTimerIsValid(x.h) ? 0 : -EINVAL;
        CFRunLoopTimerSetNextFireDate(x.h, date);
    } else {
        rc = rl_timer_set_next_fire_date(x.h, date);
    }
    tr(s, "setdate T%d %s -> %d", x.r->serial, kind == 1 ? "far" : kind == 2 ? "huge" : "past", rc);
}

static void op_common(struct side *s, const op_t *op) {
    int m = op->b % NMODES;
    tr(s, "common %s", mode_label[m]);
    int mark = s->nlines;
    if (s->id == CF) {
        CFRunLoopAddCommonMode(s->loop, cf_mode_names[m]);
    } else {
        int rc = rl_loop_add_common_mode(s->loop, rl_mode(m, op->c));
        CHECK(rc == 0, "rl_loop_add_common_mode(%s) returned %d", mode_label[m], rc);
    }
    s->common[m] = true;
    sort_from(s, mark);
}

static void drop_ref(struct side *s, int slot) {
    struct item *it = &s->items[slot];
    void *h = it->h;
    if (--it->user_refs == 0) {
        it->r->slot = -1;
        memset(it, 0, sizeof *it);
    }
    if (s->id == CF) CFRelease(h);
    else rl_release(h);
}

static void op_retain_release(struct side *s, const op_t *op, struct rec *self, void *selfh, bool retain) {
    iref x;
    if (!get_ref(s, op->a, self, selfh, &x) || !x.owned) return;
    struct item *it = &s->items[x.slot];
    if (retain) {
        if (it->user_refs >= MAX_USER_REFS) return;
        it->user_refs++;
        if (s->id == CF) CFRetain(x.h);
        else CHECK(rl_retain(x.h) == x.h, "rl_retain did not return its argument");
        tr(s, "retain %c%d", kc(x.r), x.r->serial);
    } else {
        tr(s, "release %c%d", kc(x.r), x.r->serial);
        drop_ref(s, x.slot);
    }
}

/* May CF be stopped (woken) here without its wakeup being seen by a wait of a run in progress? */
static bool cf_safe(const struct side *s, bool stop) {
    if (!s->nframes) return true;
    int top = s->frames[s->nframes - 1].phase;
    if (top == PH_PRE || (!stop && top == PH_ENTRY)) return false;
    for (int i = 0; i < s->nframes - 1; i++)
        if (s->frames[i].phase < PH_POST) return false;
    return true;
}

static void op_stop_wakeup(struct side *s, bool stop) {
    tr(s, stop ? "stop" : "wakeup");
    bool safe = cf_safe(s, stop);
    if (s->id == CF) {
        if (!safe) return;
        if (stop) CFRunLoopStop(s->loop);
        else CFRunLoopWakeUp(s->loop);
        if (s->nframes) s->cf_wake_pending = true;
    } else {
        /* crunloop's stop is invisible wherever CF's is left out, but one: in the Entry of the
         * innermost run, which both libraries then see at once (the run returns stopped). There,
         * while an outer run has yet to wait (so CF is not stopped), crunloop is not either. */
        if (stop && !safe && s->nframes && s->frames[s->nframes - 1].phase == PH_ENTRY) return;
        if (stop) rl_loop_stop(s->loop);
        else rl_loop_wakeup(s->loop);
    }
}

static void op_contains(struct side *s, const op_t *op, struct rec *self, void *selfh) {
    iref x;
    if (!get_ref(s, op->a, self, selfh, &x)) return;
    int m = op->b % 5;
    if (m == M_COMMON && common_partial(s, &x)) return; /* see common_partial */
    tr(s, "contains %c%d %s = %d", kc(x.r), x.r->serial, mode_label[m], contains(s, &x, m, op->c));
}

/* "none" (0), "due" (not later than now) or "future". */
static const char *when(double date, double now) { return date == 0 ? "none" : date <= now ? "due" : "future"; }

static void op_query(struct side *s, const op_t *op, struct rec *self, void *selfh) {
    int m = op->b % NMODES;
    if (s->id == CF) {
        CFStringRef cur = CFRunLoopCopyCurrentMode(s->loop);
        tr(s, "current %s, next timer in %s %s", cur ? cf_label_of(cur) : "-", mode_label[m],
           when(CFRunLoopGetNextTimerFireDate(s->loop, cf_mode_names[m]), cf_now()));
        if (cur) CFRelease(cur);
    } else {
        char *cur = rl_loop_copy_current_mode(s->loop);
        tr(s, "current %s, next timer in %s %s", cur ? rl_label_of(cur) : "-", mode_label[m],
           when(rl_loop_get_next_timer_fire_date(s->loop, rl_mode(m, op->c)), rl_time_now()));
        free(cur);
    }
    iref x;
    if (!get_ref(s, op->a, self, selfh, &x)) return;
    bool valid = is_valid(s, &x);
    switch (x.r->kind) {
    case K_TIMER:
        /* The date of an invalidated timer is not compared: CF returns 0, crunloop the last
         * date it had. Not in crunloop.h's list of differences: reported. */
        if (s->id == CF)
            tr(s, "T%d valid %d date %s interval %g repeats %d order %ld", x.r->serial, valid,
               valid || strict ? when(CFRunLoopTimerGetNextFireDate(x.h), cf_now()) : "-", CFRunLoopTimerGetInterval(x.h),
               CFRunLoopTimerDoesRepeat(x.h), (long)CFRunLoopTimerGetOrder(x.h));
        else
            tr(s, "T%d valid %d date %s interval %g repeats %d order %ld", x.r->serial, valid,
               valid || strict ? when(rl_timer_get_next_fire_date(x.h), rl_time_now()) : "-", rl_timer_get_interval(x.h),
               rl_timer_does_repeat(x.h), rl_timer_get_order(x.h));
        break;
    case K_SOURCE:
        /* "signalled" of an invalidated source is not compared: CF clears it at invalidation and
         * ignores later signals; crunloop keeps it and sets it (such a source is never performed).
         * Not in crunloop.h's list of differences: reported. */
        if (s->id == CF)
            tr(s, "S%d valid %d signalled %d order %ld", x.r->serial, valid,
               valid || strict ? (int)CFRunLoopSourceIsSignalled(x.h) : -1,
               (long)CFRunLoopSourceGetOrder(x.h));
        else {
            tr(s, "S%d valid %d signalled %d order %ld", x.r->serial, valid,
               valid || strict ? (int)rl_source_is_signalled(x.h) : -1,
               rl_source_get_order(x.h));
            CHECK(rl_source_get_fd(x.h) == -1 && rl_source_get_fd_events(x.h) == 0, "a version-0 source has an fd");
        }
        break;
    default:
        if (s->id == CF)
            tr(s, "O%d valid %d activities %#lx repeats %d order %ld", x.r->serial, valid,
               (unsigned long)CFRunLoopObserverGetActivities(x.h), CFRunLoopObserverDoesRepeat(x.h),
               (long)CFRunLoopObserverGetOrder(x.h));
        else
            tr(s, "O%d valid %d activities %#lx repeats %d order %ld", x.r->serial, valid,
               (unsigned long)rl_observer_get_activities(x.h), rl_observer_does_repeat(x.h),
               rl_observer_get_order(x.h));
        break;
    }
}

/* ---- crunloop alone: tolerance, bad input, waits with fd sources, descriptions ---------------- */

static void op_tolerance(struct side *s, const op_t *op, struct rec *self, void *selfh) {
    iref x;
    if (s->id != RL || !get_ref(s, op->a, self, selfh, &x) || x.r->kind != K_TIMER) return;
    static const double tol[8] = {0, 1, 1e300, INFINITY, DBL_MAX, NAN, -1, -INFINITY};
    double t = tol[op->b % 8];
    bool valid = rl_timer_is_valid(x.h);
    int rc = rl_timer_set_tolerance(x.h, t);
    int want = (isnan(t) || t < 0 || !valid) ? -EINVAL : 0;
    CHECK(rc == want, "rl_timer_set_tolerance(T%d, %g) returned %d, expected %d", x.r->serial, t, rc, want);
    if (rc == 0) CHECK(rl_timer_get_tolerance(x.h) == t, "rl_timer_get_tolerance is not what was set");
}

static void never_cb(rl_timer_t *t, void *info) {
    (void)t;
    (void)info;
    fail("a crunloop-only timer that can never be due fired");
}
static void never_obs(rl_observer_t *o, unsigned act, void *info) {
    (void)o;
    (void)act;
    (void)info;
    fail("a crunloop-only observer that is in no running mode was called");
}
static void never_fd(rl_source_t *src, int fd, unsigned events, void *info) {
    (void)src;
    (void)fd;
    (void)events;
    (void)info;
    fail("an fd source that was never created was called");
}
static const void *aux_retain(const void *info) {
    ((struct aux *)info)->retains++;
    return info;
}
static void aux_release(const void *info) {
    struct aux *a = (struct aux *)info;
    a->releases++;
    CHECK(a->releases <= (a->with_retain ? a->retains : 1), "an auxiliary context was released too often");
}
static void aux_check_released(const struct aux *a, const char *what) {
    CHECK(a->releases == (a->with_retain ? a->retains : 1), "%s: context released %d times, owed %d", what,
          a->releases, a->with_retain ? a->retains : 1);
}

/* Drop the crunloop-only never-due timer in ring slot i, if any. */
static void drop_huge(struct side *s, int i) {
    if (!s->huge[i]) return;
    rl_timer_invalidate(s->huge[i]);
    rl_release(s->huge[i]);
    s->huge[i] = NULL;
    aux_check_released(&s->huge_aux[i], "a huge timer");
}

static void expect_null(void *p, int err, const char *what) {
    CHECK(!p && errno == err, "%s: expected NULL with errno %d, got %p errno %d", what, err, p, errno);
}

static void op_bad(struct side *s, const op_t *op, struct rec *self, void *selfh) {
    if (s->id != RL) return;
    rl_loop_t *loop = s->loop;
    const char *mode = rl_mode(op->b % NMODES, op->c);
    uint8_t v = op->c;
    iref x;
    bool have = get_ref(s, op->b, self, selfh, &x);
    switch (op->a % 20) {
    case 0: { /* times that are not times */
        static const double bad[4] = {NAN, -1.0, -INFINITY, -DBL_MIN};
        double b = bad[v % 4];
        errno = 0;
        expect_null(rl_timer_create(b, 0, 0, never_cb, NULL), EINVAL, "rl_timer_create(bad date)");
        errno = 0;
        expect_null(rl_timer_create(1.0, b, 0, never_cb, NULL), EINVAL, "rl_timer_create(bad interval)");
        errno = 0;
        expect_null(rl_timer_create(1.0, 0, 0, NULL, NULL), EINVAL, "rl_timer_create(NULL callback)");
        if (have && x.r->kind == K_TIMER) {
            bool valid = rl_timer_is_valid(x.h);
            double before = rl_timer_get_next_fire_date(x.h);
            CHECK(rl_timer_set_next_fire_date(x.h, b) == -EINVAL, "rl_timer_set_next_fire_date(bad) accepted");
            CHECK(rl_timer_set_tolerance(x.h, b) == -EINVAL, "rl_timer_set_tolerance(bad) accepted");
            CHECK(rl_timer_get_next_fire_date(x.h) == before || !valid, "a rejected date changed the timer");
        }
        break;
    }
    case 1: { /* huge but valid times: a timer that is never due, kept in the RLWAIT mode */
        static const double dates[4] = {INFINITY, 1e300, DBL_MAX, 4e9};
        static const double ivals[4] = {0, 1e300, DBL_MAX, INFINITY};
        static const double tols[4] = {0, INFINITY, 1e300, DBL_MAX};
        int slot = s->huge_next;
        s->huge_next = (slot + 1) % NHUGE;
        drop_huge(s, slot);
        struct aux *a = &s->huge_aux[slot];
        *a = (struct aux){.with_retain = v & 1};
        rl_context_t ctx = {a, a->with_retain ? aux_retain : NULL, aux_release};
        double date = dates[v % 4] + ((v & 4) ? rl_time_now() : 0), ival = ivals[(v >> 1) % 4];
        rl_timer_t *t = rl_timer_create(date, ival, (long)v, never_cb, &ctx);
        CHECK(t, "rl_timer_create(%g, %g) failed: %s", date, ival, strerror(errno));
        CHECK(rl_timer_set_tolerance(t, tols[(v >> 3) % 4]) == 0, "a huge tolerance was refused");
        CHECK(rl_timer_get_tolerance(t) == tols[(v >> 3) % 4], "rl_timer_get_tolerance is not what was set");
        CHECK(rl_loop_add_timer(loop, t, RL_WAIT_MODE) == 0, "adding a huge timer failed");
        CHECK(rl_loop_add_timer(loop, t, RL_WAIT_MODE) == -EEXIST, "adding a timer twice did not say -EEXIST");
        CHECK(rl_loop_get_next_timer_fire_date(loop, RL_WAIT_MODE) > rl_time_now() + 1e5,
              "the next fire date of the RLWAIT mode is not far");
        s->huge[slot] = t;
        break;
    }
    case 2: /* observers */
        errno = 0;
        expect_null(rl_observer_create(0, true, 0, never_obs, NULL), EINVAL, "rl_observer_create(0 activities)");
        errno = 0;
        expect_null(rl_observer_create(1u << 28, true, 0, never_obs, NULL), EINVAL, "rl_observer_create(unknown bit)");
        errno = 0;
        expect_null(rl_observer_create(1, true, 0, NULL, NULL), EINVAL, "rl_observer_create(NULL callback)");
        errno = 0;
        expect_null(rl_source_create(0, NULL), EINVAL, "rl_source_create(NULL context)");
        break;
    case 3: /* NULL handles and bad mode names in adds, removes, contains */
        CHECK(rl_loop_add_timer(NULL, NULL, mode) == -EINVAL, "add_timer(NULL loop)");
        CHECK(rl_loop_add_source(loop, NULL, mode) == -EINVAL, "add_source(NULL source)");
        CHECK(rl_loop_add_observer(loop, NULL, mode) == -EINVAL, "add_observer(NULL observer)");
        CHECK(rl_loop_remove_timer(loop, NULL, mode) == -EINVAL, "remove_timer(NULL timer)");
        CHECK(rl_loop_remove_source(NULL, NULL, mode) == -EINVAL, "remove_source(NULL)");
        CHECK(rl_loop_remove_observer(loop, NULL, mode) == -EINVAL, "remove_observer(NULL)");
        CHECK(!rl_loop_contains_timer(loop, NULL, mode) && !rl_loop_contains_source(NULL, NULL, mode) &&
                  !rl_loop_contains_observer(loop, NULL, mode), "contains(NULL) is true");
        if (have) {
            const char *badm = (v & 1) ? "" : NULL;
            int rc1, rc2;
            switch (x.r->kind) {
            case K_TIMER: rc1 = rl_loop_add_timer(loop, x.h, badm); rc2 = rl_loop_remove_timer(loop, x.h, badm); break;
            case K_SOURCE: rc1 = rl_loop_add_source(loop, x.h, badm); rc2 = rl_loop_remove_source(loop, x.h, badm); break;
            default: rc1 = rl_loop_add_observer(loop, x.h, badm); rc2 = rl_loop_remove_observer(loop, x.h, badm); break;
            }
            CHECK(rc1 == -EINVAL && rc2 == -EINVAL, "add/remove with mode %s returned %d/%d", badm ? "\"\"" : "NULL", rc1, rc2);
            bool c = x.r->kind == K_TIMER ? rl_loop_contains_timer(loop, x.h, badm)
                   : x.r->kind == K_SOURCE ? rl_loop_contains_source(loop, x.h, badm)
                                           : rl_loop_contains_observer(loop, x.h, badm);
            CHECK(!c, "contains with a bad mode name is true");
        }
        break;
    case 4: { /* runs that cannot run */
        static const char *const names[3] = {NULL, "", "kCFRunLoopCommonModes"};
        CHECK(rl_run_in_mode(names[v % 3], 0, v & 8) == -EINVAL, "rl_run_in_mode(bad mode) did not fail");
        CHECK(rl_run_in_mode(RL_COMMON_MODES, 0, false) == -EINVAL, "rl_run_in_mode(RL_COMMON_MODES) did not fail");
        CHECK(rl_run_in_mode(mode, NAN, v & 8) == -EINVAL, "rl_run_in_mode(NaN) did not fail");
        break;
    }
    case 5: /* common modes and blocks with bad arguments */
        CHECK(rl_loop_add_common_mode(loop, RL_COMMON_MODES) == -EINVAL, "add_common_mode(RL_COMMON_MODES)");
        CHECK(rl_loop_add_common_mode(loop, NULL) == -EINVAL, "add_common_mode(NULL)");
        CHECK(rl_loop_add_common_mode(loop, "") == -EINVAL, "add_common_mode(\"\")");
        CHECK(rl_loop_add_common_mode(NULL, mode) == -EINVAL, "add_common_mode(NULL loop)");
        CHECK(rl_loop_perform(NULL, mode, rl_block_fn, NULL) == -EINVAL, "perform(NULL loop)");
        CHECK(rl_loop_perform(loop, mode, NULL, NULL) == -EINVAL, "perform(NULL fn)");
        CHECK(rl_loop_perform(loop, (v & 1) ? "" : NULL, rl_block_fn, NULL) == -EINVAL, "perform(bad mode)");
        break;
    case 6: /* queries on NULL */
        CHECK(!rl_timer_is_valid(NULL) && !rl_source_is_valid(NULL) && !rl_observer_is_valid(NULL), "NULL is valid");
        CHECK(rl_timer_get_next_fire_date(NULL) == 0 && rl_timer_get_interval(NULL) == 0 &&
                  !rl_timer_does_repeat(NULL) && rl_timer_get_tolerance(NULL) == 0 && rl_timer_get_order(NULL) == 0,
              "timer queries on NULL");
        CHECK(rl_source_get_fd(NULL) == -1 && rl_source_get_fd_events(NULL) == 0 && !rl_source_is_signalled(NULL) &&
                  rl_source_get_order(NULL) == 0, "source queries on NULL");
        CHECK(rl_observer_get_activities(NULL) == 0 && !rl_observer_does_repeat(NULL) &&
                  rl_observer_get_order(NULL) == 0, "observer queries on NULL");
        CHECK(rl_retain(NULL) == NULL, "rl_retain(NULL)");
        rl_release(NULL);
        rl_source_signal(NULL);
        rl_source_invalidate(NULL);
        rl_timer_invalidate(NULL);
        rl_observer_invalidate(NULL);
        rl_loop_stop(NULL);
        rl_loop_wakeup(NULL);
        CHECK(!rl_loop_is_waiting(NULL) && !rl_loop_is_current(NULL), "loop queries on NULL");
        CHECK(rl_loop_is_current(loop) && !rl_loop_is_waiting(loop), "the loop is not current, or waits");
        CHECK(rl_timer_set_next_fire_date(NULL, 1) == -EINVAL && rl_timer_set_tolerance(NULL, 1) == -EINVAL,
              "setters on NULL");
        CHECK(rl_source_set_fd_events(NULL, 1) == -EINVAL, "set_fd_events(NULL)");
        if (have && x.r->kind == K_SOURCE) CHECK(rl_source_set_fd_events(x.h, RL_FD_READABLE) == -EINVAL,
                                                 "set_fd_events on a version-0 source accepted");
        break;
    case 7: { /* loop queries with bad arguments */
        size_t n = 99;
        errno = 0;
        CHECK(rl_loop_copy_current_mode(NULL) == NULL && errno == EINVAL, "copy_current_mode(NULL)");
        errno = 0;
        CHECK(rl_loop_copy_all_modes(NULL, &n) == NULL && errno == EINVAL, "copy_all_modes(NULL)");
        errno = 0;
        CHECK(rl_loop_copy_all_modes(loop, NULL) == NULL && errno == EINVAL, "copy_all_modes(NULL count)");
        CHECK(rl_loop_get_next_timer_fire_date(loop, RL_COMMON_MODES) == 0, "next fire date of RL_COMMON_MODES");
        CHECK(rl_loop_get_next_timer_fire_date(NULL, mode) == 0, "next fire date of NULL");
        CHECK(rl_loop_get_next_timer_fire_date(loop, "FuzzNeverUsed") == 0, "next fire date of an unused mode");
        CHECK(rl_loop_get_stats(NULL, NULL) == -EINVAL && rl_loop_get_stats(loop, NULL) == -EINVAL, "get_stats(NULL)");
        char *d = rl_loop_copy_description(NULL);
        free(d);
        break;
    }
    case 8: { /* fd sources with bad arguments */
        struct aux a = {0};
        rl_context_t ctx = {&a, NULL, aux_release};
        errno = 0;
        expect_null(rl_source_create_fd(-1, RL_FD_READABLE, 0, NULL, &ctx), EINVAL, "create_fd(NULL callback)");
        errno = 0;
        int fds[2];
        CHECK(pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "pipe2 failed");
        errno = 0;
        expect_null(rl_source_create_fd(fds[0], 1u << 9, 0, never_fd, &ctx), EINVAL, "create_fd(unknown events)");
        close(fds[0]);
        close(fds[1]);
        errno = 0;
        expect_null(rl_source_create_fd(fds[0], RL_FD_READABLE, 0, never_fd, &ctx), EBADF, "create_fd(closed fd)");
        errno = 0;
        expect_null(rl_source_create_fd(-1, RL_FD_READABLE, 0, never_fd, &ctx), EBADF, "create_fd(-1)");
        CHECK(a.releases == 0, "a failed create released its context");
        break;
    }
    case 9: { /* -EBUSY: a timer or observer of the main loop (never run here) */
        rl_loop_t *main_loop = rl_loop_get_main();
        CHECK(main_loop && main_loop != loop && !rl_loop_is_current(main_loop), "the main loop is this thread's");
        struct aux ta = {.with_retain = v & 1}, oa = {.with_retain = v & 2};
        rl_context_t tctx = {&ta, (v & 1) ? aux_retain : NULL, aux_release};
        rl_context_t octx = {&oa, (v & 2) ? aux_retain : NULL, aux_release};
        rl_timer_t *t = rl_timer_create(rl_time_now() + 1e6, 0, 0, never_cb, &tctx);
        rl_observer_t *o = rl_observer_create(1u << 7, true, 0, never_obs, &octx);
        CHECK(t && o, "creating a timer or observer failed");
        CHECK(rl_loop_add_timer(main_loop, t, "FuzzMain") == 0, "adding a timer to the main loop failed");
        CHECK(rl_loop_add_observer(main_loop, o, RL_COMMON_MODES) == 0, "adding an observer to the main loop failed");
        CHECK(rl_loop_add_timer(loop, t, mode) == -EBUSY, "a timer of another loop was added: not -EBUSY");
        CHECK(rl_loop_add_observer(loop, o, RL_COMMON_MODES) == -EBUSY, "an observer of another loop: not -EBUSY");
        CHECK(!rl_loop_contains_timer(loop, t, mode) && !rl_loop_contains_observer(loop, o, RL_COMMON_MODES),
              "an item refused with -EBUSY is contained");
        CHECK(rl_loop_contains_timer(main_loop, t, "FuzzMain"), "the main loop lost its timer");
        CHECK(rl_loop_remove_timer(loop, t, mode) == -ENOENT, "removing another loop's timer: not -ENOENT");
        CHECK(rl_loop_remove_timer(main_loop, t, "FuzzMain") == 0, "removing from the main loop failed");
        CHECK(rl_loop_remove_observer(main_loop, o, RL_COMMON_MODES) == 0, "removing from the main loop failed");
        /* Free of the main loop, they may join this one. */
        CHECK(rl_loop_add_timer(loop, t, RL_WAIT_MODE) == 0, "a timer left by the main loop cannot join");
        CHECK(rl_loop_add_observer(loop, o, RL_WAIT_MODE) == 0, "an observer left by the main loop cannot join");
        if (v & 4) {
            rl_timer_invalidate(t);
            rl_observer_invalidate(o);
            CHECK(!rl_loop_contains_timer(loop, t, RL_WAIT_MODE), "an invalidated timer is still contained");
        } else {
            CHECK(rl_loop_remove_timer(loop, t, RL_WAIT_MODE) == 0 && rl_loop_remove_observer(loop, o, RL_WAIT_MODE) == 0,
                  "removing failed");
        }
        rl_release(t);
        rl_release(o);
        aux_check_released(&ta, "timer of the -EBUSY test");
        aux_check_released(&oa, "observer of the -EBUSY test");
        break;
    }
    default: /* an add of an invalidated item, and a remove from a mode it is not in */
        if (have) {
            bool valid = is_valid(s, &x);
            bool in = contains(s, &x, op->c % NMODES, 0);
            int rc;
            switch (x.r->kind) {
            case K_TIMER: rc = rl_loop_remove_timer(loop, x.h, "FuzzNeverUsed"); break;
            case K_SOURCE: rc = rl_loop_remove_source(loop, x.h, "FuzzNeverUsed"); break;
            default: rc = rl_loop_remove_observer(loop, x.h, "FuzzNeverUsed"); break;
            }
            CHECK(rc == -ENOENT, "removing from a mode never used returned %d", rc);
            CHECK(in == contains(s, &x, op->c % NMODES, 0), "a failed remove changed membership");
            if (!valid) {
                switch (x.r->kind) {
                case K_TIMER: rc = rl_loop_add_timer(loop, x.h, RL_WAIT_MODE); break;
                case K_SOURCE: rc = rl_loop_add_source(loop, x.h, RL_WAIT_MODE); break;
                default: rc = rl_loop_add_observer(loop, x.h, RL_WAIT_MODE); break;
                }
                CHECK(rc == -EINVAL, "adding an invalidated %c returned %d, not -EINVAL", kc(x.r), rc);
            }
        }
        break;
    }
}

static void fd_cb(rl_source_t *src, int fd, unsigned events, void *info) {
    struct aux *a = info;
    a->calls++;
    G.side[RL].performs++;
    CHECK(fd == a->fd && rl_source_get_fd(src) == fd, "fd callout with fd %d, expected %d", fd, a->fd);
    CHECK(events == a->events, "fd callout with events %#x, expected %#x", events, a->events);
    char *cur = rl_loop_copy_current_mode(rl_loop_get_current());
    CHECK(cur && strcmp(cur, RL_WAIT_MODE) == 0, "an fd callout of the RLWAIT mode runs in mode %s", cur ? cur : "-");
    free(cur);
    if (a->stop) rl_loop_stop(rl_loop_get_current());
}

static void due_cb(rl_timer_t *t, void *info) {
    struct aux *a = info;
    a->calls++;
    G.side[RL].timer_callouts++;
    CHECK(rl_timer_is_valid(t), "a one-shot timer is invalid inside its callout");
}

/* A waiting run, crunloop alone, in a private mode with a ready fd: the model knows its result. */
static void op_rlwait(struct side *s, const op_t *op) {
    if (s->id != RL || s->nframes >= MAX_FRAMES) return;
    static const double secs[8] = {0, -1, 100.0, 1e300, INFINITY, DBL_MAX, 504911233.0, -INFINITY};
    double seconds = (op->a & 8) ? NAN : secs[op->a % 8];
    bool ret_after = op->b & 1, writable = op->b & 2, with_timer = op->b & 4;
    int fds[2];
    CHECK(pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "pipe2 failed");
    if (!writable) CHECK(write(fds[1], "x", 1) == 1, "write to a pipe failed");
    struct aux fa = {.with_retain = op->c & 1, .fd = writable ? fds[1] : fds[0],
                     .events = writable ? RL_FD_WRITABLE : RL_FD_READABLE, .stop = true};
    rl_context_t fctx = {&fa, fa.with_retain ? aux_retain : NULL, aux_release};
    unsigned asked = fa.events | ((op->c & 2) ? RL_FD_ERROR : 0);
    rl_source_t *src = rl_source_create_fd(fa.fd, asked, (long)(op->c >> 2), fd_cb, &fctx);
    CHECK(src, "rl_source_create_fd failed: %s", strerror(errno));
    CHECK(rl_source_get_fd(src) == fa.fd && rl_source_get_fd_events(src) == fa.events, "fd source getters");
    if (op->c & 4) {
        /* Asked for both, then narrowed: the change takes effect at once. */
        CHECK(rl_source_set_fd_events(src, RL_FD_READABLE | RL_FD_WRITABLE) == 0, "set_fd_events failed");
        CHECK(rl_loop_add_source(s->loop, src, RL_WAIT_MODE) == 0, "adding an fd source failed");
        CHECK(rl_source_set_fd_events(src, fa.events) == 0, "set_fd_events failed");
    } else {
        CHECK(rl_loop_add_source(s->loop, src, RL_WAIT_MODE) == 0, "adding an fd source failed");
    }
    struct aux ta = {.with_retain = op->c & 8};
    rl_timer_t *t = NULL;
    if (with_timer) {
        rl_context_t tctx = {&ta, ta.with_retain ? aux_retain : NULL, aux_release};
        t = rl_timer_create(rl_past(op->c), 0, 0, due_cb, &tctx);
        CHECK(t && rl_loop_add_timer(s->loop, t, RL_WAIT_MODE) == 0, "adding a due timer failed");
    }
    int r = rl_run_in_mode(RL_WAIT_MODE, seconds, ret_after);
    int want;
    if (isnan(seconds)) want = -EINVAL;
    else if (ret_after) want = RL_RUN_HANDLED_SOURCE;
    else if (seconds <= 0) want = RL_RUN_TIMED_OUT;
    else want = RL_RUN_STOPPED;
    CHECK(r == want, "RLWAIT: rl_run_in_mode(%s, %g%s) returned %d, expected %d", RL_WAIT_MODE, seconds,
          ret_after ? ", return after source" : "", r, want);
    int calls = isnan(seconds) ? 0 : 1;
    CHECK(fa.calls == calls, "RLWAIT: the fd source was called %d times, expected %d", fa.calls, calls);
    if (!isnan(seconds)) s->passes++;
    if (t) {
        CHECK(ta.calls == calls, "RLWAIT: the due timer fired %d times, expected %d", ta.calls, calls);
        CHECK(rl_timer_is_valid(t) == !calls, "RLWAIT: a one-shot timer's validity after its callout");
        rl_timer_invalidate(t);
        rl_release(t);
        aux_check_released(&ta, "RLWAIT's timer");
    }
    rl_source_invalidate(src);
    CHECK(!rl_loop_contains_source(s->loop, src, RL_WAIT_MODE), "an invalidated fd source is still contained");
    rl_release(src);
    aux_check_released(&fa, "RLWAIT's fd source");
    close(fds[0]);
    close(fds[1]);
}

static void check_stats(struct side *s, const char *where) {
    rl_loop_stats_t st;
    CHECK(rl_loop_get_stats(s->loop, &st) == 0, "rl_loop_get_stats failed");
    CHECK(st.timers_fired == s->timer_callouts && st.sources_performed == s->performs && st.passes == s->passes,
          "%s: stats say %llu timer callouts, %llu performs, %llu passes; seen %llu, %llu, %llu", where,
          st.timers_fired, st.sources_performed, st.passes, s->timer_callouts, s->performs, s->passes);
}

static void op_describe(struct side *s, const op_t *op) {
    if (s->id != RL) return;
    char *d = rl_loop_copy_description(s->loop);
    CHECK(d && strlen(d) > 0, "rl_loop_copy_description failed");
    free(d);
    size_t n = 0;
    char **names = rl_loop_copy_all_modes(s->loop, &n);
    CHECK(names, "rl_loop_copy_all_modes failed");
    bool has_default = false;
    for (size_t i = 0; i < n; i++) {
        has_default |= strcmp(names[i], RL_DEFAULT_MODE) == 0;
        CHECK(strcmp(names[i], RL_COMMON_MODES) != 0, "RL_COMMON_MODES is listed as a mode");
        for (size_t j = 0; j < i; j++) CHECK(strcmp(names[i], names[j]) != 0, "mode %s listed twice", names[i]);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    CHECK(has_default, "the default mode is not listed");
    /* Counters are updated after each callout returns: compare only outside runs. */
    if (!s->nframes && !(op->a & 1)) check_stats(s, "describe");
}

/* ---- The op dispatcher --------------------------------------------------------------------------- */

static void exec_op(struct side *s, const op_t *op, const op_t *script, int script_len, struct rec *self,
                    void *selfh) {
    if (s->executed++ >= MAXOPS_EXEC) return;
    switch (op_of_code[op->code % 32]) {
    case OP_TIMER: op_create_timer(s, op, script, script_len); break;
    case OP_SOURCE: op_create_source(s, op, script, script_len); break;
    case OP_OBSERVER: op_create_observer(s, op, script, script_len); break;
    case OP_ADD: op_add(s, op, self, selfh, true); break;
    case OP_REMOVE: op_add(s, op, self, selfh, false); break;
    case OP_INVALIDATE: op_invalidate(s, op, self, selfh); break;
    case OP_SIGNAL: op_signal(s, op, self, selfh); break;
    case OP_BLOCK: op_block(s, op, script, script_len); break;
    case OP_RUN: op_run(s, op); break;
    case OP_SETDATE: op_setdate(s, op, self, selfh); break;
    case OP_COMMON: op_common(s, op); break;
    case OP_RETAIN: op_retain_release(s, op, self, selfh, true); break;
    case OP_RELEASE: op_retain_release(s, op, self, selfh, false); break;
    case OP_STOP: op_stop_wakeup(s, true); break;
    case OP_WAKEUP: op_stop_wakeup(s, false); break;
    case OP_CONTAINS: op_contains(s, op, self, selfh); break;
    case OP_QUERY: op_query(s, op, self, selfh); break;
    case OP_BAD: op_bad(s, op, self, selfh); break;
    case OP_RLWAIT: op_rlwait(s, op); break;
    case OP_DESCRIBE: op_describe(s, op); break;
    case OP_TOLERANCE: op_tolerance(s, op, self, selfh); break;
    }
    if (s->id == RL) verify_rl(s, op_names[op_of_code[op->code % 32]]);
}

/* ---- One input ------------------------------------------------------------------------------------ */

static bool is_create(const op_t *op) {
    int k = op_of_code[op->code % 32];
    return k == OP_TIMER || k == OP_SOURCE || k == OP_OBSERVER || k == OP_BLOCK;
}

static void set_mismatch(const char *what, int cf_from, int rl_from) {
    if (G.mismatch) return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) abort();
    fprintf(f, "%s\n  CF:\n", what);
    for (int i = cf_from; i < G.side[CF].nlines; i++) fprintf(f, "    %s\n", G.side[CF].lines[i]);
    fprintf(f, "  crunloop:\n");
    for (int i = rl_from; i < G.side[RL].nlines; i++) fprintf(f, "    %s\n", G.side[RL].lines[i]);
    fclose(f);
    G.mismatch = buf;
}

static bool same_lines(int cf_from, int rl_from) {
    struct side *c = &G.side[CF], *r = &G.side[RL];
    if (c->nlines - cf_from != r->nlines - rl_from) return false;
    for (int i = 0; cf_from + i < c->nlines; i++)
        if (strcmp(c->lines[cf_from + i], r->lines[rl_from + i])) return false;
    return true;
}

static void release_user_refs(struct side *s) {
    for (int i = 0; i < NSLOT; i++)
        while (s->items[i].r) drop_ref(s, i);
}

static void *worker(void *arg) {
    (void)arg;
    struct side *cf = &G.side[CF], *rl = &G.side[RL];
    cf->loop = CFRunLoopGetCurrent();
    rl->loop = rl_loop_get_current();
    if (G.flags & FLAG_KEEP_LOOP) G.kept_loop = rl_retain(rl->loop);
    /* CF's drain mode: one source that is never signalled, so the mode is not empty. */
    CFRunLoopSourceContext dctx;
    memset(&dctx, 0, sizeof dctx);
    CFRunLoopSourceRef drain = CFRunLoopSourceCreate(NULL, 0, &dctx);
    CFRunLoopAddSource(cf->loop, drain, cf_drain_mode);
    CFRelease(drain);

    for (int i = 0; i < G.nops && !G.mismatch; i++) {
        const op_t *op = &G.ops[i];
        G.cur_op = i;
        int len = 0;
        const op_t *script = NULL;
        if (is_create(op)) {
            len = op->c & 3;
            if (i + 1 + len > G.nops) len = G.nops - i - 1;
            script = op + 1;
        }
        int cf_from = cf->nlines, rl_from = rl->nlines;
        exec_op(cf, op, script, len, NULL, NULL);
        exec_op(rl, op, script, len, NULL, NULL);
        if (!same_lines(cf_from, rl_from)) {
            char what[160];
            snprintf(what, sizeof what, "op %d (%s a=%u b=%u c=%u) differs:", i, op_names[op_of_code[op->code % 32]],
                     op->a, op->b, op->c);
            set_mismatch(what, cf_from, rl_from);
        }
        i += len;
    }
    G.cur_op = -1;
    check_stats(rl, "end of input");
    for (int i = 0; i < NHUGE; i++) drop_huge(rl, i);
    if (G.flags & FLAG_RELEASE_BEFORE_EXIT) {
        release_user_refs(cf);
        release_user_refs(rl);
    }
    for (int m = 0; m < NMODES; m++) {
        if (cf->keeper[m]) CFRelease(cf->keeper[m]);
        if (rl->keeper[m]) rl_release(rl->keeper[m]);
    }
    cf->teardown = rl->teardown = true;
    cf->teardown_mark = cf->nlines;
    rl->teardown_mark = rl->nlines;
    return NULL; /* the thread exits: both loops are torn down */
}

static void free_side(struct side *s) {
    for (int i = 0; i < s->nlines; i++) free(s->lines[i]);
    free(s->lines);
}

/* After the thread exit: what the input still holds, the dead loop, every context's releases. */
static void after_exit(void) {
    struct side *cf = &G.side[CF], *rl = &G.side[RL];
    if (!G.mismatch) {
        sort_from(cf, cf->teardown_mark);
        sort_from(rl, rl->teardown_mark);
    }
    for (int k = 0; k < 2; k++) {
        struct side *s = &G.side[k];
        for (int i = 0; i < NSLOT; i++) {
            if (!s->items[i].r) continue;
            iref x = {i, s->items[i].r, s->items[i].h, true};
            tr(s, "after exit %c%d valid %d", kc(x.r), x.r->serial, is_valid(s, &x));
        }
    }
    if (!G.mismatch && (!same_lines(cf->teardown_mark, rl->teardown_mark)))
        set_mismatch("the teardown at thread exit differs:", cf->teardown_mark, rl->teardown_mark);
    if (G.kept_loop) {
        rl_loop_t *dead = G.kept_loop;
        CHECK(!rl_loop_is_current(dead), "a dead loop is current");
        struct aux a = {0};
        rl_context_t ctx = {&a, NULL, aux_release};
        rl_timer_t *t = rl_timer_create(rl_time_now() + 1e6, 0, 0, never_cb, &ctx);
        CHECK(t, "rl_timer_create failed");
        CHECK(rl_loop_add_timer(dead, t, RL_DEFAULT_MODE) == -EINVAL, "adding to a dead loop: not -EINVAL");
        CHECK(rl_loop_perform(dead, RL_DEFAULT_MODE, rl_block_fn, NULL) == -EINVAL, "perform on a dead loop: not -EINVAL");
        rl_loop_stop(dead);
        rl_loop_wakeup(dead);
        char *d = rl_loop_copy_description(dead);
        free(d);
        char report[2048];
        int n = rl_loop_verify(dead, report, sizeof report);
        CHECK(n == 0, "rl_loop_verify of the dead loop: %d violation(s):\n%s", n, report);
        rl_release(t);
        aux_check_released(&a, "timer refused by a dead loop");
        rl_release(dead);
        G.kept_loop = NULL;
    }
    /* A timer or observer the input still holds was let go by the dead loop: it may join another. */
    rl_loop_t *main_loop = rl_loop_get_main();
    for (int i = 0; i < NSLOT; i++) {
        struct item *it = &rl->items[i];
        if (!it->r || it->r->kind == K_SOURCE) continue;
        bool valid = it->r->kind == K_TIMER ? rl_timer_is_valid(it->h) : rl_observer_is_valid(it->h);
        int rc = it->r->kind == K_TIMER ? rl_loop_add_timer(main_loop, it->h, RL_POST_MODE)
                                        : rl_loop_add_observer(main_loop, it->h, RL_POST_MODE);
        CHECK(rc == (valid ? 0 : -EINVAL), "%c%d after its loop died: adding it to another loop returned %d",
              kc(it->r), it->r->serial, rc);
        if (rc == 0) {
            rc = it->r->kind == K_TIMER ? rl_loop_remove_timer(main_loop, it->h, RL_POST_MODE)
                                        : rl_loop_remove_observer(main_loop, it->h, RL_POST_MODE);
            CHECK(rc == 0, "removing from the main loop failed");
        }
    }
    release_user_refs(cf);
    release_user_refs(rl);
    for (int k = 0; k < 2; k++) {
        struct side *s = &G.side[k];
        for (int i = 0; i < s->nrecs; i++) {
            struct rec *r = &s->recs[i];
            if (r->releases != owed(r))
                fail("%s: the context of %c%d was released %d times by the end, owed %d",
                     k == CF ? "CF" : "crunloop", kc(r), r->serial, r->releases, owed(r));
        }
    }
}

/* Run the input once; returns a description of the first difference with CF, or NULL. */
static char *run_once(void) {
    memset(&G.side, 0, sizeof G.side);
    for (int k = 0; k < 2; k++) {
        G.side[k].id = k;
        G.side[k].common[0] = true;
    }
    G.mismatch = NULL;
    G.kept_loop = NULL;
    pthread_t th;
    if (pthread_create(&th, NULL, worker, NULL) != 0) abort();
    pthread_join(th, NULL);
    after_exit();
    free_side(&G.side[CF]);
    free_side(&G.side[RL]);
    return G.mismatch;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    static const char *const names[5] = {"kCFRunLoopDefaultMode", "FuzzModeA", "FuzzModeB", "FuzzModeC",
                                         "kCFRunLoopCommonModes"};
    rl_mode_names[0] = RL_DEFAULT_MODE;
    rl_mode_names[4] = RL_COMMON_MODES;
    cf_mode_names[0] = kCFRunLoopDefaultMode;
    cf_mode_names[4] = kCFRunLoopCommonModes;
    for (int m = 0; m < 5; m++) {
        snprintf(rl_mode_copies[m], sizeof rl_mode_copies[m], "%s", names[m]);
        if (m >= 1 && m <= 3) {
            rl_mode_names[m] = names[m];
            cf_mode_names[m] = CFStringCreateWithCString(NULL, names[m], kCFStringEncodingUTF8);
        }
    }
    cf_drain_mode = CFStringCreateWithCString(NULL, "FuzzDrain", kCFStringEncodingUTF8);
    const char *st = getenv("FUZZ_LOOP_STRICT");
    strict = st && *st && strcmp(st, "0") != 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    G.data = data;
    G.size = size;
    G.flags = data[0];
    G.nops = (int)((size - 1) / 4);
    G.ops = malloc((size_t)(G.nops ? G.nops : 1) * sizeof *G.ops);
    if (!G.ops) abort();
    memcpy(G.ops, data + 1, (size_t)G.nops * sizeof *G.ops);
    /* A difference with CF is run again, twice, before it counts: only CF's side could vary
     * (crunloop's is deterministic, and its own failures abort at once). */
    char *first = NULL;
    for (int attempt = 0; attempt < 3; attempt++) {
        char *m = run_once();
        if (!m) {
            if (first) {
                fprintf(stderr, "fuzz_loop: a difference with CF did not repeat (attempt %d):\n%s", attempt + 1, first);
                free(first);
            }
            free(G.ops);
            return 0;
        }
        if (!first) first = m;
        else free(m);
    }
    fprintf(stderr, "\nfuzz_loop: FAIL: crunloop differs from CFRunLoop (3 runs out of 3):\n%s", first);
    G.cur_op = -1;
    dump_ops();
    abort();
}
