/*
 * sweep.c - allocation failure at every fault point of scripted scenarios.
 *
 * Each scenario is a script (the sc_* functions below) that runs on a fresh thread, so that it has
 * a fresh loop, torn down when the thread exits (that teardown is part of the sweep). A scenario
 * is first run unarmed, to count its fault points N (body and thread-exit teardown); then, for
 * every k in 0..N-1, once with exactly point k failing (rl_fault_arm(k, 1), "single") and once
 * with every point from k on failing (rl_fault_arm(k, -1), "persistent"), disarmed at the first
 * checkpoint of the script after the failures began, after which the script carries on.
 *
 * A script keeps a model of what the loop acknowledged (which item is in which mode, in the
 * common set, signalled, queued) and checks, at every step:
 *   - a call that failed returned -ENOMEM (-EMFILE for kernel objects), or NULL with that errno,
 *     and only when a failing point lies within the call; any other result is the documented one;
 *   - a failed add left nothing behind: rl_loop_contains_* is false for the mode, for
 *     RL_COMMON_MODES and for every common mode; a second add does not return -EEXIST; the item
 *     is destroyed (its context release runs) when its creator releases it;
 *   - rl_loop_add_common_mode either returns 0 with every common item in the new mode, or an
 *     error with none of them added;
 *   - at every checkpoint, rl_loop_contains_* agrees with the model for every item and mode, a
 *     version-0 source has as many schedules minus cancels as modes, and rl_loop_verify is 0;
 *   - after disarming, everything acknowledged still happens: every timer fires, every source
 *     signalled while it was in a mode is performed, fd sources with data are called, observers
 *     are called, queued blocks run once, in a mode they were queued for;
 *   - after the thread's exit (teardown, faults still armed for the points it passes): every
 *     version-0 source's cancel ran once per schedule, timers and observers the script kept can
 *     be added to another loop, every context was retained and released exactly once, the dead
 *     loop passes rl_loop_verify and refuses new items, its fds are closed once released;
 *   - LeakSanitizer finds no leak after the run (checked after every run when LSan is there).
 *
 * part_sweep() runs one scenario's whole sweep in the calling (child) process and reports
 * `points N BODY` (and `recount M` when a second unarmed run passed M points instead: how many
 * passes settling takes, and so how many points it passes, depends on timing), then
 * `start MODE K` / `fail MODE K COUNT MESSAGE` / `end MODE K REACHED` per run (REACHED: whether
 * the run passed point K at all), then `done`. A run that hangs (2 s) or leaks ends the process
 * after its `end` line; main.c starts a new one from the next point.
 */
#include "faults.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

enum { MAXM = 24, MAXI = 64, MAXB = 32, MAXFD = 16 };
enum { COMMON = -1 };
enum { F_COUNT = 0, F_SINGLE = 1, F_PERSIST = 2 };
enum { M_DEFAULT = 0, M_A, M_B, M_C1, M_C2 };
typedef enum { K_TIMER, K_SRC0, K_SRC1, K_OBS } kind_t;
static const char *kind_name[] = {"timer", "source", "fd source", "observer"};

static char mode_names[MAXM][16];
static const char *mname(int m) { return m == COMMON ? RL_COMMON_MODES : m == 0 ? RL_DEFAULT_MODE : mode_names[m]; }
static const char *mlabel(int m) { return m == COMMON ? "COMMON" : m == 0 ? "default" : mode_names[m]; }

struct world;

typedef struct item {
    kind_t kind;
    char name[16];
    struct world *w;
    void *obj;               /* NULL when its creation failed */
    atomic_int retains, releases, schedules, cancels, calls;
    /* The model: what the loop acknowledged. */
    bool in[MAXM], common, valid, pending, data;
    bool repeats, keep;
    bool held;               /* a timer made by rl_timer_create_held */
    bool in_storage;         /* a timer in mem (rl_timer_create_in): done must run once, after the release */
    atomic_int dones, releases_at_done;
    _Alignas(8) unsigned char mem[RL_TIMER_STORAGE_SIZE];
    unsigned activities;
    int fd, peer;            /* fd sources: the watched end and the end the script writes */
    void (*hook)(struct item *);
} item_t;

typedef struct block {
    struct world *w;
    int mode;
    bool acked, expected;
    atomic_int ran;
    void (*hook)(struct block *);
} block_t;

typedef struct scenario {
    const char *name;
    void (*body)(struct world *);
    bool creates_loop; /* the loop's creation is part of the script */
} scenario;

typedef struct world {
    const scenario *sc;
    int fmode;
    long k;
    rl_loop_t *loop;
    bool mode_common[MAXM];
    int nmodes;
    item_t items[MAXI];
    int nitems;
    block_t blocks[MAXB];
    int nblocks;
    int running;             /* mode of the innermost run, -1 */
    int fds[MAXFD];
    int nfds;
    fcase fc;                /* this run's failed checks */
    long body_points, total_points;
    bool body_done;
    int nested;              /* scenario state */
} world_t;

#define W_CHECK(w, cond, ...) FCHECK(&(w)->fc, cond, __VA_ARGS__)
#define W_FAIL(w, ...) fcase_fail(&(w)->fc, __FILE__, __LINE__, __VA_ARGS__)

/* ---- Fault state of the scenario thread ---- */

static _Thread_local struct {
    int mode;
    long k, base;        /* base: points passed before the last re-arm */
    long disarmed_at;    /* LONG_MAX while armed */
    int depth;           /* suspend() nesting */
} F;

static long pts(void) { return F.base + rl_fault_points(); }

/* Whether a failing point lies in [p0, p1). */
static bool may_fail(long p0, long p1) {
    if (F.mode == F_SINGLE) return p0 <= F.k && F.k < p1 && F.k < F.disarmed_at;
    if (F.mode == F_PERSIST) {
        long lo = p0 > F.k ? p0 : F.k, hi = p1 < F.disarmed_at ? p1 : F.disarmed_at;
        return lo < hi;
    }
    return false;
}

static void arm_from(long base) {
    if (F.disarmed_at <= base) rl_fault_arm(-1, 0);
    else if (F.mode == F_SINGLE && base <= F.k) rl_fault_arm(F.k - base, 1);
    else if (F.mode == F_PERSIST) rl_fault_arm(F.k > base ? F.k - base : 0, -1);
    else rl_fault_arm(-1, 0);
}

/* Checks between steps pass no fault point. */
static void suspend(void) {
    if (F.depth++ == 0) {
        F.base = pts();
        rl_fault_arm(-1, 0);
    }
}

static void resume(void) {
    if (--F.depth == 0) arm_from(F.base);
}

static void disarm(void) {
    if (F.depth) return;
    F.base = pts();
    if (F.disarmed_at > F.base) F.disarmed_at = F.base;
    rl_fault_arm(-1, 0);
}

static bool is_fault_errno(int e) { return e == ENOMEM || e == EMFILE || e == ENFILE; }
static bool fault_rc(int rc, long p0) { return rc < 0 && is_fault_errno(-rc) && may_fail(p0, pts()); }

static const char *why_not(long p0) {
    return may_fail(p0, pts()) ? "" : " (no fault point failed in the call)";
}

/* ---- Callouts and contexts ---- */

static const void *ctx_retain(const void *info) {
    atomic_fetch_add(&((item_t *)info)->retains, 1);
    return info;
}

static void ctx_release(const void *info) { atomic_fetch_add(&((item_t *)info)->releases, 1); }

static bool any_in(const item_t *it) {
    for (int m = 0; m < MAXM; m++)
        if (it->in[m]) return true;
    return false;
}

static int count_in(const item_t *it) {
    int n = 0;
    for (int m = 0; m < MAXM; m++) n += it->in[m];
    return n;
}

static void model_clear(item_t *it) {
    it->valid = false;
    memset(it->in, 0, sizeof it->in);
    it->common = false;
    it->pending = false;
}

static void check_called_in_mode(item_t *it, const char *what) {
    world_t *w = it->w;
    W_CHECK(w, w->running >= 0 && it->in[w->running], "%s %s %s in mode %s, which it is not in (model)",
            kind_name[it->kind], it->name, what, w->running >= 0 ? mlabel(w->running) : "(not running)");
}

static void timer_cb(rl_timer_t *t, void *info) {
    item_t *it = info;
    (void)t;
    atomic_fetch_add(&it->calls, 1);
    check_called_in_mode(it, "fired");
    if (!it->repeats) model_clear(it); /* invalidated after the callout */
    if (it->hook) it->hook(it);
}

static void src_schedule(void *info, rl_loop_t *loop, const char *mode) {
    item_t *it = info;
    (void)mode;
    atomic_fetch_add(&it->schedules, 1);
    W_CHECK(it->w, loop == it->w->loop, "source %s scheduled on a loop not its own", it->name);
}

static void src_cancel(void *info, rl_loop_t *loop, const char *mode) {
    item_t *it = info;
    (void)mode;
    atomic_fetch_add(&it->cancels, 1);
    W_CHECK(it->w, loop == it->w->loop, "source %s cancelled on a loop not its own", it->name);
}

static void src_perform(void *info) {
    item_t *it = info;
    atomic_fetch_add(&it->calls, 1);
    check_called_in_mode(it, "performed");
    W_CHECK(it->w, it->valid, "source %s performed after its invalidation", it->name);
    it->pending = false;
    if (it->hook) it->hook(it);
}

static void fd_cb(rl_source_t *s, int fd, unsigned events, void *info) {
    item_t *it = info;
    (void)s;
    atomic_fetch_add(&it->calls, 1);
    check_called_in_mode(it, "called");
    W_CHECK(it->w, fd == it->fd, "fd source %s called with fd %d, not %d", it->name, fd, it->fd);
    if (events & RL_FD_READABLE) {
        char buf[256];
        while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
        it->data = false;
    }
    if (it->hook) it->hook(it);
}

static void obs_cb(rl_observer_t *o, unsigned activity, void *info) {
    item_t *it = info;
    (void)o;
    atomic_fetch_add(&it->calls, 1);
    check_called_in_mode(it, "called");
    W_CHECK(it->w, (activity & it->activities) != 0, "observer %s called for activity 0x%x it does not observe",
            it->name, activity);
    if (!it->repeats) model_clear(it);
    if (it->hook) it->hook(it);
}

static void block_fn(void *arg) {
    block_t *b = arg;
    world_t *w = b->w;
    int ran = atomic_fetch_add(&b->ran, 1) + 1;
    W_CHECK(w, b->acked, "block %d ran, but rl_loop_perform failed for it", (int)(b - w->blocks));
    W_CHECK(w, ran == 1, "block %d ran %d times (expected once)", (int)(b - w->blocks), ran);
    int r = w->running;
    W_CHECK(w, r >= 0 && (b->mode == r || (b->mode == COMMON && w->mode_common[r])),
            "block %d for mode %s ran in mode %s", (int)(b - w->blocks), mlabel(b->mode), r >= 0 ? mlabel(r) : "-");
    if (b->hook) b->hook(b);
}

/* ---- Creating items ---- */

static item_t *new_item(world_t *w, kind_t kind, const char *name) {
    if (w->nitems == MAXI) abort();
    item_t *it = &w->items[w->nitems++];
    it->kind = kind;
    it->w = w;
    it->valid = true;
    it->fd = it->peer = -1;
    snprintf(it->name, sizeof it->name, "%s", name);
    return it;
}

static void created(world_t *w, item_t *it, long p0, const char *call) {
    if (it->obj) return;
    int e = errno;
    W_CHECK(w, is_fault_errno(e) && may_fail(p0, pts()),
            "%s(%s) returned NULL with errno %d (%s), expected an object or a fault errno%s",
            call, it->name, e, strerror(e), why_not(p0));
    it->valid = false;
}

static item_t *mk_timer(world_t *w, const char *name, double delay, double interval, long order) {
    item_t *it = new_item(w, K_TIMER, name);
    it->repeats = interval > 0;
    rl_context_t ctx = {it, ctx_retain, ctx_release};
    long p0 = pts();
    it->obj = rl_timer_create(rl_time_now() + delay, interval, order, timer_cb, &ctx);
    created(w, it, p0, "rl_timer_create");
    return it;
}

/* A timer that holds its context only while the loop holds it: retains - releases is 1 while it
 * is in a mode or the common set, 0 otherwise (check_item). */
static item_t *mk_held_timer(world_t *w, const char *name, double delay, double interval, long order) {
    item_t *it = new_item(w, K_TIMER, name);
    it->repeats = interval > 0;
    it->held = true;
    rl_context_t ctx = {it, ctx_retain, ctx_release};
    long p0 = pts();
    it->obj = rl_timer_create_held(rl_time_now() + delay, interval, order, timer_cb, &ctx);
    created(w, it, p0, "rl_timer_create_held");
    return it;
}

/* A timer in the item's own memory (rl_timer_create_in), held or not: done runs once, after the
 * context's last release; a failed creation writes nothing to the memory. */
static void storage_done(void *memory) {
    item_t *it = (item_t *)((char *)memory - offsetof(item_t, mem));
    atomic_store(&it->releases_at_done, atomic_load(&it->releases));
    atomic_fetch_add(&it->dones, 1);
}

static item_t *mk_storage_timer(world_t *w, const char *name, unsigned flags, double delay, double interval,
                                long order) {
    item_t *it = new_item(w, K_TIMER, name);
    it->repeats = interval > 0;
    it->held = flags & RL_TIMER_IN_HELD;
    it->in_storage = true;
    memset(it->mem, 0xAB, sizeof it->mem);
    rl_timer_storage st = {it->mem, sizeof it->mem, storage_done};
    rl_context_t ctx = {it, ctx_retain, ctx_release};
    long p0 = pts();
    it->obj = rl_timer_create_in(&st, flags, rl_time_now() + delay, interval, order, timer_cb, &ctx);
    created(w, it, p0, "rl_timer_create_in");
    if (!it->obj) {
        bool untouched = true;
        for (size_t i = 0; i < sizeof it->mem; i++) untouched &= it->mem[i] == 0xAB;
        W_CHECK(w, untouched, "failed rl_timer_create_in(%s) wrote to the memory", name);
    }
    return it;
}

static item_t *mk_src0(world_t *w, const char *name, long order) {
    item_t *it = new_item(w, K_SRC0, name);
    rl_source_context_t ctx = {it, ctx_retain, ctx_release, src_schedule, src_cancel, src_perform};
    long p0 = pts();
    it->obj = rl_source_create(order, &ctx);
    created(w, it, p0, "rl_source_create");
    return it;
}

static int keep_fd(world_t *w, int fd) {
    if (fd >= 0 && w->nfds < MAXFD) w->fds[w->nfds++] = fd;
    return fd;
}

/* An fd source on one end of a socketpair (moved to fd number `at` when at > 0). */
static item_t *mk_src1(world_t *w, const char *name, int at, unsigned events, long order) {
    item_t *it = new_item(w, K_SRC1, name);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
    if (at > 0) {
        int moved = fcntl(sv[0], F_DUPFD_CLOEXEC, at);
        close(sv[0]);
        sv[0] = moved;
    }
    it->fd = keep_fd(w, sv[0]);
    it->peer = keep_fd(w, sv[1]);
    rl_context_t ctx = {it, ctx_retain, ctx_release};
    long p0 = pts();
    it->obj = rl_source_create_fd(it->fd, events, order, fd_cb, &ctx);
    created(w, it, p0, "rl_source_create_fd");
    return it;
}

static item_t *mk_obs(world_t *w, const char *name, unsigned activities, bool repeats, long order) {
    item_t *it = new_item(w, K_OBS, name);
    it->repeats = repeats;
    it->activities = activities;
    rl_context_t ctx = {it, ctx_retain, ctx_release};
    long p0 = pts();
    it->obj = rl_observer_create(activities, repeats, order, obs_cb, &ctx);
    created(w, it, p0, "rl_observer_create");
    return it;
}

/* ---- The model against the loop ---- */

static void use_mode(world_t *w, int m) {
    if (m >= w->nmodes) w->nmodes = m + 1;
}

static bool contains(world_t *w, item_t *it, int m) {
    const char *name = mname(m);
    switch (it->kind) {
    case K_TIMER: return rl_loop_contains_timer(w->loop, it->obj, name);
    case K_OBS: return rl_loop_contains_observer(w->loop, it->obj, name);
    default: return rl_loop_contains_source(w->loop, it->obj, name);
    }
}

static bool is_valid(item_t *it) {
    switch (it->kind) {
    case K_TIMER: return rl_timer_is_valid(it->obj);
    case K_OBS: return rl_observer_is_valid(it->obj);
    default: return rl_source_is_valid(it->obj);
    }
}

/* One item against the model; suspended. */
static void check_item(world_t *w, item_t *it, const char *when) {
    if (!it->obj) return;
    for (int m = 0; m < w->nmodes; m++) {
        bool got = contains(w, it, m);
        W_CHECK(w, got == it->in[m], "%s: %s %s is %sin mode %s, but the loop acknowledged %s", when,
                kind_name[it->kind], it->name, got ? "" : "not ", mlabel(m),
                it->in[m] ? "adding it" : got ? "no add of it (a failed add left it behind?)" : "nothing");
    }
    bool got = contains(w, it, COMMON);
    W_CHECK(w, got == it->common, "%s: %s %s is %sin RL_COMMON_MODES, but the model says %s", when, kind_name[it->kind],
            it->name, got ? "" : "not ", it->common ? "it was added" : "it was not (a failed add left it behind?)");
    W_CHECK(w, is_valid(it) == it->valid, "%s: %s %s is %svalid, expected %svalid", when, kind_name[it->kind],
            it->name, it->valid ? "not " : "still ", it->valid ? "" : "in");
    if (it->held) {
        int holds = atomic_load(&it->retains) - atomic_load(&it->releases), owned = count_in(it) || it->common;
        W_CHECK(w, holds == owned, "%s: held timer %s: %d retains - releases, but %s", when, it->name, holds,
                owned ? "a loop holds it (expected 1)" : "no loop holds it (expected 0)");
    }
    if (it->kind == K_SRC0) {
        int live = atomic_load(&it->schedules) - atomic_load(&it->cancels);
        W_CHECK(w, live == count_in(it), "%s: source %s: %d schedules - cancels, but in %d modes (expected equal)",
                when, it->name, live, count_in(it));
    }
}

static void check_model(world_t *w, const char *when) {
    for (int i = 0; i < w->nitems; i++) check_item(w, &w->items[i], when);
    char report[1024];
    int v = verify_loop(w->loop, report, sizeof report);
    W_CHECK(w, v == 0, "%s: rl_loop_verify found %d violations (expected none): %s", when, v, report);
}

/* Between steps: disarm once the persistent failures have begun, then check everything. */
static void checkpoint(world_t *w, const char *when) {
    if (F.mode == F_PERSIST && pts() > F.k) disarm();
    suspend();
    check_model(w, when);
    resume();
}

/* ---- Steps, each checked against the model ---- */

static int raw_add(world_t *w, item_t *it, int m) {
    switch (it->kind) {
    case K_TIMER: return rl_loop_add_timer(w->loop, it->obj, mname(m));
    case K_OBS: return rl_loop_add_observer(w->loop, it->obj, mname(m));
    default: return rl_loop_add_source(w->loop, it->obj, mname(m));
    }
}

static int raw_remove(world_t *w, item_t *it, int m) {
    switch (it->kind) {
    case K_TIMER: return rl_loop_remove_timer(w->loop, it->obj, mname(m));
    case K_OBS: return rl_loop_remove_observer(w->loop, it->obj, mname(m));
    default: return rl_loop_remove_source(w->loop, it->obj, mname(m));
    }
}

static void model_add(world_t *w, item_t *it, int m) {
    if (m != COMMON) {
        it->in[m] = true;
        return;
    }
    it->common = true;
    for (int i = 0; i < w->nmodes; i++)
        if (w->mode_common[i]) it->in[i] = true;
}

static void model_remove(world_t *w, item_t *it, int m) {
    if (m != COMMON) {
        it->in[m] = false;
        return;
    }
    it->common = false;
    for (int i = 0; i < w->nmodes; i++)
        if (w->mode_common[i]) it->in[i] = false;
}

static int add(world_t *w, item_t *it, int m) {
    if (!it->obj) return -1;
    if (m != COMMON) use_mode(w, m);
    int expect = !it->valid ? -EINVAL : (m == COMMON ? it->common : it->in[m]) ? -EEXIST : 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        long p0 = pts();
        int rc = raw_add(w, it, m);
        if (rc == expect) {
            if (rc == 0) model_add(w, it, m);
            return rc;
        }
        if (fault_rc(rc, p0)) {
            suspend();
            check_item(w, it, "after a failed add");
            resume();
            continue; /* a second add: must not say -EEXIST */
        }
        W_FAIL(w, "add %s %s to %s%s returned %d (%s), expected %d or a fault error%s", kind_name[it->kind], it->name,
               mlabel(m), attempt ? " again, after a failed add," : "", rc, strerror(-rc), expect, why_not(p0));
        return rc;
    }
    return -ENOMEM;
}

static int rm(world_t *w, item_t *it, int m) {
    if (!it->obj) return -1;
    int expect = (m == COMMON ? it->common : it->in[m]) ? 0 : -ENOENT;
    long p0 = pts();
    int rc = raw_remove(w, it, m);
    if (rc == expect) {
        if (rc == 0) model_remove(w, it, m);
        return rc;
    }
    if (fault_rc(rc, p0)) { /* a failed removal must change nothing */
        suspend();
        check_item(w, it, "after a failed remove");
        resume();
        return rc;
    }
    W_FAIL(w, "remove %s %s from %s returned %d (%s), expected %d%s", kind_name[it->kind], it->name, mlabel(m), rc,
           strerror(-rc), expect, why_not(p0));
    return rc;
}

static void inval(world_t *w, item_t *it) {
    if (!it->obj) return;
    switch (it->kind) {
    case K_TIMER: rl_timer_invalidate(it->obj); break;
    case K_OBS: rl_observer_invalidate(it->obj); break;
    default: rl_source_invalidate(it->obj); break;
    }
    model_clear(it);
    suspend();
    check_item(w, it, "after invalidate");
    resume();
}

static void signal_src(world_t *w, item_t *it) {
    (void)w;
    if (!it->obj) return;
    rl_source_signal(it->obj);
    if (it->valid) it->pending = true;
}

static void write_data(item_t *it) {
    if (send(it->peer, "x", 1, MSG_DONTWAIT) == 1 && it->obj && it->valid) it->data = true;
}

static int add_common_mode(world_t *w, int m) {
    use_mode(w, m);
    for (int attempt = 0; attempt < 2; attempt++) {
        long p0 = pts();
        int rc = rl_loop_add_common_mode(w->loop, mname(m));
        if (rc == 0) {
            if (!w->mode_common[m]) {
                w->mode_common[m] = true;
                for (int i = 0; i < w->nitems; i++)
                    if (w->items[i].obj && w->items[i].common) w->items[i].in[m] = true;
            }
            return 0;
        }
        if (fault_rc(rc, p0)) { /* no common item may have joined the mode */
            suspend();
            check_model(w, "after a failed rl_loop_add_common_mode");
            resume();
            continue;
        }
        W_FAIL(w, "rl_loop_add_common_mode(%s)%s returned %d (%s), expected 0 or a fault error%s", mlabel(m),
               attempt ? " again" : "", rc, strerror(-rc), why_not(p0));
        return rc;
    }
    return -ENOMEM;
}

static block_t *perform(world_t *w, int m, void (*hook)(block_t *)) {
    if (w->nblocks == MAXB) abort();
    block_t *b = &w->blocks[w->nblocks++];
    b->w = w;
    b->mode = m;
    b->hook = hook;
    if (m != COMMON) use_mode(w, m);
    long p0 = pts();
    int rc = rl_loop_perform(w->loop, mname(m), block_fn, b);
    if (rc == 0) b->acked = true;
    else W_CHECK(w, fault_rc(rc, p0), "rl_loop_perform(%s) returned %d (%s), expected 0 or a fault error%s", mlabel(m),
                 rc, strerror(-rc), why_not(p0));
    return b;
}

static int run(world_t *w, int m, double seconds) {
    int saved = w->running;
    w->running = m;
    long p0 = pts();
    int rc = rl_run_in_mode(mname(m), seconds, false);
    w->running = saved;
    W_CHECK(w, (rc >= RL_RUN_FINISHED && rc <= RL_RUN_HANDLED_SOURCE) || fault_rc(rc, p0),
            "rl_run_in_mode(%s, %g) returned %d, expected an RL_RUN_* result or a fault error%s", mlabel(m), seconds,
            rc, why_not(p0));
    return rc;
}

/* ---- Nothing acknowledged is lost ---- */

static bool mode_nonempty(world_t *w, int m) {
    for (int i = 0; i < w->nitems; i++) {
        item_t *it = &w->items[i];
        if (it->obj && it->valid && it->in[m] && it->kind != K_OBS) return true;
    }
    return false;
}

typedef struct {
    bool item[MAXI];
    int calls[MAXI];
} expectations;

static bool met(world_t *w, const expectations *e, int i) {
    item_t *it = &w->items[i];
    switch (it->kind) {
    case K_SRC0: return !it->pending || !it->valid;
    case K_SRC1: return !it->data || !it->valid;
    default: return atomic_load(&it->calls) > e->calls[i] || !it->valid;
    }
}

static bool all_met(world_t *w, const expectations *e) {
    for (int i = 0; i < w->nitems; i++)
        if (e->item[i] && !met(w, e, i)) return false;
    for (int i = 0; i < w->nblocks; i++)
        if (w->blocks[i].expected && !atomic_load(&w->blocks[i].ran)) return false;
    return true;
}

/* Run every non-empty mode until every timer fired, every signalled source was performed, every fd
 * source with data was called, every observer of a non-empty mode was called and every queued
 * block of a non-empty mode ran; persistent failures are disarmed at the first pass. */
static void settle(world_t *w) {
    expectations e;
    memset(&e, 0, sizeof e);
    for (int i = 0; i < w->nitems; i++) {
        item_t *it = &w->items[i];
        if (!it->obj || !it->valid || !any_in(it)) continue;
        e.calls[i] = atomic_load(&it->calls);
        switch (it->kind) {
        case K_TIMER: e.item[i] = true; break;
        case K_SRC0: e.item[i] = it->pending; break;
        case K_SRC1: e.item[i] = it->data; break;
        case K_OBS:
            if (it->activities & (RL_ENTRY | RL_BEFORE_TIMERS | RL_BEFORE_SOURCES | RL_EXIT))
                for (int m = 0; m < w->nmodes; m++)
                    if (it->in[m] && mode_nonempty(w, m)) e.item[i] = true;
            break;
        }
    }
    for (int i = 0; i < w->nblocks; i++) {
        block_t *b = &w->blocks[i];
        if (!b->acked || atomic_load(&b->ran)) continue;
        for (int m = 0; m < w->nmodes; m++)
            if (mode_nonempty(w, m) && (b->mode == m || (b->mode == COMMON && w->mode_common[m]))) b->expected = true;
    }
    for (int pass = 0; pass < 60 && !all_met(w, &e); pass++) {
        checkpoint(w, "while settling");
        for (int m = 0; m < w->nmodes; m++)
            if (mode_nonempty(w, m)) run(w, m, pass < 20 ? 0 : 0.002);
    }
    for (int i = 0; i < w->nitems; i++) {
        item_t *it = &w->items[i];
        if (!e.item[i] || met(w, &e, i)) continue;
        static const char *what[] = {"never fired", "never performed after rl_source_signal",
                                     "never called though its fd has data", "never called"};
        W_FAIL(w, "acknowledged %s %s %s (lost)", kind_name[it->kind], it->name, what[it->kind]);
    }
    for (int i = 0; i < w->nblocks; i++)
        W_CHECK(w, !w->blocks[i].expected || atomic_load(&w->blocks[i].ran), "acknowledged block %d for mode %s never ran",
                i, mlabel(w->blocks[i].mode));
}

/* Drop the script's references; items in no mode must be destroyed at once. */
static void release_all(world_t *w) {
    for (int i = 0; i < w->nitems; i++) {
        item_t *it = &w->items[i];
        if (!it->obj || it->keep) continue;
        bool member = any_in(it) || it->common;
        rl_release(it->obj);
        if (!member)
            W_CHECK(w, atomic_load(&it->releases) == atomic_load(&it->retains),
                    "%s %s, in no mode, was not destroyed when its creator released it (something still holds it)",
                    kind_name[it->kind], it->name);
    }
}

/* The end of most scripts: disarm persistent failures, everything acknowledged happens, the model
 * holds, the script lets go. The items stay in the loop for the thread's exit. */
static void finish(world_t *w) {
    if (F.mode == F_PERSIST && pts() > F.k) disarm();
    settle(w);
    checkpoint(w, "at the end");
    release_all(w);
}

/* ---- The scenarios ---- */

/* The thread's loop created under faults: rl_run_in_mode's first call creates it (returns an error
 * or runs), rl_loop_get_current() returns it or NULL with errno; later calls succeed. */
static void sc_loop(world_t *w) {
    long p0 = pts();
    int rc = rl_run_in_mode(RL_DEFAULT_MODE, 0, false);
    W_CHECK(w, rc == RL_RUN_FINISHED || fault_rc(rc, p0),
            "first rl_run_in_mode on a thread returned %d, expected RL_RUN_FINISHED or a fault error%s", rc,
            why_not(p0));
    p0 = pts();
    rl_loop_t *loop = rl_loop_get_current();
    if (!loop) {
        int e = errno;
        W_CHECK(w, is_fault_errno(e) && may_fail(p0, pts()),
                "rl_loop_get_current() returned NULL, errno %d, expected a loop or a fault errno%s",
                e, why_not(p0));
        p0 = pts();
        rc = rl_run_in_mode(RL_DEFAULT_MODE, 0, false);
        W_CHECK(w, rc == RL_RUN_FINISHED || fault_rc(rc, p0),
                "rl_run_in_mode with no loop returned %d, expected RL_RUN_FINISHED or a fault error%s",
                rc, why_not(p0));
        disarm();
        loop = rl_loop_get_current();
        W_CHECK(w, loop != NULL, "rl_loop_get_current() still NULL after disarming");
        if (!loop) return;
    }
    w->loop = rl_retain(loop);
    W_CHECK(w, rl_loop_get_current() == loop, "a second rl_loop_get_current() returned another loop");
    item_t *t = mk_timer(w, "t", 0, 0, 0);
    add(w, t, M_DEFAULT);
    item_t *s = mk_src0(w, "s", 0);
    add(w, s, COMMON);
    signal_src(w, s);
    checkpoint(w, "after the first items");
    finish(w);
}

static void sc_timers(world_t *w) {
    item_t *t0 = mk_timer(w, "t0", 0, 0, 0);
    item_t *t1 = mk_timer(w, "t1", 0, 0.001, 1);
    item_t *t2 = mk_timer(w, "t2", 0, 0.001, 2);
    item_t *t3 = mk_timer(w, "t3", 0, 0, 3);
    item_t *t4 = mk_timer(w, "t4", 0, 0.002, 4);
    item_t *t5 = mk_timer(w, "t5", 0.0005, 0, 2);
    t4->keep = true;
    add(w, t0, M_A);
    add(w, t1, COMMON);
    add(w, t2, M_A);
    add(w, t2, M_B);
    add(w, t3, M_DEFAULT);
    add(w, t4, COMMON);
    add(w, t4, M_A);
    add(w, t5, M_B);
    add(w, t5, M_A);
    checkpoint(w, "after adding timers");
    run(w, M_A, 0);
    run(w, M_DEFAULT, 0.001);
    checkpoint(w, "after running");
    if (t2->obj && t2->valid) rl_timer_set_next_fire_date(t2->obj, rl_time_now() + 0.001);
    if (t1->obj && t1->valid) rl_timer_set_tolerance(t1->obj, 0.0005);
    rm(w, t2, M_B);
    rm(w, t1, COMMON);
    add(w, t1, M_B);
    rm(w, t0, M_A); /* fired: -ENOENT, or still there */
    checkpoint(w, "after removing");
    finish(w);
}

/* The script of sc_held and sc_storage over five timers (t[4] kept past the thread's exit): adds
 * to named and common modes, a run, removals and adds again (claims after disowning), an
 * invalidation, a run. what names the timers in the first checkpoint; cycle_common also takes
 * t[4] out of the common modes and back. */
static void timer_script(world_t *w, item_t *t[5], const char *what, bool cycle_common) {
    char label[64];
    t[4]->keep = true;
    add(w, t[0], M_A);
    add(w, t[1], COMMON);
    add(w, t[2], M_A);
    add(w, t[2], M_B);
    add(w, t[3], M_B);
    add(w, t[4], COMMON);
    add(w, t[4], M_A);
    snprintf(label, sizeof label, "after adding %s", what);
    checkpoint(w, label);
    run(w, M_A, 0);
    checkpoint(w, "after running");
    rm(w, t[2], M_B);
    rm(w, t[2], M_A);
    add(w, t[2], M_C1);
    rm(w, t[1], COMMON);
    add(w, t[1], M_B);
    if (cycle_common) {
        rm(w, t[4], COMMON);
        add(w, t[4], COMMON);
    }
    inval(w, t[3]);
    checkpoint(w, "after removing and adding again");
    run(w, M_B, 0.001);
    finish(w);
}

/* sc_timers with held timers, and adds again after removals (claims after disowning). */
static void sc_held(world_t *w) {
    item_t *t[5]; /* made in this order: each step is a fault point of the sweep */
    t[0] = mk_held_timer(w, "h0", 0, 0, 0);
    t[1] = mk_held_timer(w, "h1", 0, 0.001, 1);
    t[2] = mk_held_timer(w, "h2", 0, 0.001, 2);
    t[3] = mk_held_timer(w, "h3", 0.0005, 0, 3);
    t[4] = mk_held_timer(w, "h4", 0, 0.002, 4);
    timer_script(w, t, "held timers", true);
}

/* sc_held with timers in the caller's memory (rl_timer_create_in), held and not, one kept past the
 * thread's exit (timeouts stay valid after firing, which the model here does not follow). */
static void sc_storage(world_t *w) {
    item_t *t[5]; /* made in this order: each step is a fault point of the sweep */
    t[0] = mk_storage_timer(w, "m0", RL_TIMER_IN_HELD, 0, 0, 0);
    t[1] = mk_storage_timer(w, "m1", 0, 0, 0.001, 1);
    t[2] = mk_storage_timer(w, "m2", RL_TIMER_IN_HELD, 0, 0.001, 2);
    t[3] = mk_storage_timer(w, "m3", 0, 0.0005, 0, 3);
    t[4] = mk_storage_timer(w, "m4", RL_TIMER_IN_HELD, 0, 0.002, 4);
    timer_script(w, t, "timers in storage", false);
}

static void sc_sources(world_t *w) {
    item_t *s[6];
    char name[16];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "s%d", i);
        s[i] = mk_src0(w, name, 5 - i);
    }
    signal_src(w, s[5]); /* signalled before it is in any mode */
    add(w, s[0], M_A);
    add(w, s[1], COMMON);
    add(w, s[2], M_A);
    add(w, s[2], M_B);
    add(w, s[3], M_DEFAULT);
    add(w, s[3], COMMON); /* already in the default mode */
    add(w, s[4], M_B);
    add(w, s[5], M_A);
    for (int i = 0; i < 5; i++) signal_src(w, s[i]);
    checkpoint(w, "after adding and signalling");
    run(w, M_A, 0);
    checkpoint(w, "after a pass of A");
    signal_src(w, s[0]);
    signal_src(w, s[2]);
    rm(w, s[2], M_A);
    inval(w, s[4]);
    rm(w, s[1], COMMON);
    add(w, s[1], M_A);
    signal_src(w, s[1]);
    checkpoint(w, "after removing");
    run(w, M_DEFAULT, 0);
    finish(w);
}

/* 40 signalled sources performed by one pass: a failure in that pass must not lose any signal. */
static void sc_signal40(world_t *w) {
    item_t *s[40];
    char name[16];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "s%d", i);
        s[i] = mk_src0(w, name, i % 7);
        add(w, s[i], i % 10 == 9 ? M_B : M_DEFAULT);
    }
    checkpoint(w, "after adding 40 sources");
    for (int i = 0; i < 40; i++) signal_src(w, s[i]);
    run(w, M_DEFAULT, 0); /* one pass; the sources of B are deferred */
    checkpoint(w, "after one pass");
    for (int i = 0; i < 40; i += 3) signal_src(w, s[i]);
    run(w, M_DEFAULT, 0);
    finish(w);
}

/* t0's callout, the first of the pass that took as many of the 40 as its list held: it
 * invalidates a later due timer, removes another, and removes a third and adds it back (the
 * phase holds the timers it took without a reference: each removal hands it one of the loop's,
 * within the room it has, which rl_loop_verify checks after each change in this debug build). */
static void timers40_hook(item_t *it) {
    world_t *w = it->w;
    if (w->nested++) return;
    inval(w, &w->items[38]);
    rm(w, &w->items[21], M_DEFAULT);
    rm(w, &w->items[22], M_DEFAULT);
    add(w, &w->items[22], M_DEFAULT);
}

/* More due timers than the timer phase holds without allocating (32): the failing point is the
 * list growing; the timers it could not take fire on a later pass. */
static void sc_timers40(world_t *w) {
    item_t *t[40];
    char name[16];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "t%d", i);
        t[i] = mk_timer(w, name, 0, i % 4 == 3 ? 0.001 : 0, i % 5);
        add(w, t[i], i % 10 == 9 ? M_B : M_DEFAULT);
    }
    t[0]->hook = timers40_hook;
    checkpoint(w, "after adding 40 timers");
    run(w, M_DEFAULT, 0);
    checkpoint(w, "after one pass");
    run(w, M_DEFAULT, 0);
    finish(w);
}

static void sc_observers(world_t *w) {
    item_t *o0 = mk_obs(w, "o0", RL_ALL_ACTIVITIES, true, 0);
    item_t *o1 = mk_obs(w, "o1", RL_ENTRY | RL_EXIT, true, 1);
    item_t *o2 = mk_obs(w, "o2", RL_BEFORE_TIMERS, false, 2);
    item_t *o3 = mk_obs(w, "o3", RL_BEFORE_WAITING | RL_AFTER_WAITING, true, 3);
    item_t *o4 = mk_obs(w, "o4", RL_BEFORE_SOURCES | RL_EXIT, true, 4);
    item_t *ta = mk_timer(w, "ta", 0, 0.001, 0);
    item_t *td = mk_timer(w, "td", 0, 0.001, 0);
    o4->keep = true;
    add(w, ta, M_A);
    add(w, td, M_DEFAULT);
    add(w, o0, M_A);
    add(w, o1, COMMON);
    add(w, o1, M_A);
    add(w, o2, M_A);
    add(w, o3, M_A);
    add(w, o3, M_DEFAULT);
    add(w, o4, COMMON);
    add(w, o4, M_B);
    checkpoint(w, "after adding observers");
    run(w, M_A, 0.002);
    run(w, M_DEFAULT, 0);
    checkpoint(w, "after running");
    rm(w, o3, M_A);
    inval(w, o0);
    rm(w, o1, COMMON);
    add(w, o2, M_DEFAULT); /* -EINVAL once fired */
    checkpoint(w, "after removing");
    finish(w);
}

static void sc_common(world_t *w) {
    item_t *sc = mk_src0(w, "sc", 0);
    item_t *tc = mk_timer(w, "tc", 0, 0.001, 0);
    item_t *oc = mk_obs(w, "oc", RL_ENTRY, true, 0);
    item_t *sa = mk_src0(w, "sa", 1);
    item_t *fc = mk_src1(w, "fc", 0, RL_FD_READABLE, 0);
    add(w, sc, COMMON);
    add(w, tc, COMMON);
    add(w, oc, COMMON);
    add(w, fc, COMMON);
    add(w, sa, M_C1);
    signal_src(w, sc);
    write_data(fc);
    checkpoint(w, "after adding common items");
    add_common_mode(w, M_C1);
    checkpoint(w, "after making C1 common");
    item_t *t2 = mk_timer(w, "t2", 0, 0.001, 1);
    add(w, t2, COMMON); /* joins C1 too */
    add_common_mode(w, M_C2);
    add_common_mode(w, M_C1); /* again: a no-op */
    add_common_mode(w, M_DEFAULT);
    checkpoint(w, "after making C2 common");
    run(w, M_C1, 0);
    rm(w, sc, COMMON);
    item_t *o2 = mk_obs(w, "o2", RL_BEFORE_TIMERS, true, 0);
    add(w, o2, COMMON);
    checkpoint(w, "after removing from the common modes");
    finish(w);
}

static void nested_block(block_t *b) {
    world_t *w = b->w;
    if (w->nested++ == 0) {
        perform(w, M_A, NULL); /* queued from a block: the next turn */
        run(w, M_B, 0);        /* nested */
    }
}

static void sc_blocks(world_t *w) {
    item_t *ta = mk_timer(w, "ta", 0, 0.001, 0);
    item_t *tb = mk_timer(w, "tb", 0, 0.001, 0);
    item_t *td = mk_timer(w, "td", 0, 0.001, 0);
    add(w, ta, M_A);
    add(w, tb, M_B);
    add(w, td, M_DEFAULT);
    perform(w, M_A, NULL);
    perform(w, M_DEFAULT, NULL);
    perform(w, COMMON, NULL);
    perform(w, M_B, NULL);
    perform(w, M_A, nested_block);
    perform(w, M_A, NULL);
    checkpoint(w, "after queueing blocks");
    run(w, M_A, 0);
    checkpoint(w, "after running A");
    perform(w, COMMON, NULL);
    perform(w, M_C2, NULL); /* never run: dropped at teardown */
    run(w, M_DEFAULT, 0);
    finish(w);
    perform(w, M_A, NULL); /* still queued at the thread's exit */
}

static void nested_timer(item_t *it) {
    world_t *w = it->w;
    if (w->nested++) return;
    checkpoint(w, "in a timer callout");
    item_t *sb = &w->items[3];
    signal_src(w, sb);
    item_t *t = mk_timer(w, "tn", 0, 0, 0);
    add(w, t, M_A); /* the outer mode, from inside a callout */
    run(w, M_B, 0.001);
    item_t *ob = &w->items[2];
    rm(w, ob, M_B);
    run(w, M_B, 0);
    checkpoint(w, "after the nested runs");
}

static void sc_nested(world_t *w) {
    item_t *ta = mk_timer(w, "ta", 0, 0.001, 0); /* items[0]: runs B from its callout */
    item_t *tb = mk_timer(w, "tb", 0, 0.001, 0); /* items[1] */
    item_t *ob = mk_obs(w, "ob", RL_ENTRY | RL_EXIT | RL_BEFORE_SOURCES, true, 0); /* items[2] */
    item_t *sb = mk_src0(w, "sb", 0);             /* items[3] */
    ta->hook = nested_timer;
    add(w, ta, M_A);
    add(w, tb, M_B);
    add(w, ob, M_B);
    add(w, sb, M_B);
    add(w, ob, M_A);
    checkpoint(w, "before the outer run");
    run(w, M_A, 0);
    if (!w->nested) {
        if (F.mode == F_PERSIST && pts() > F.k) disarm();
        run(w, M_A, 0.002);
    }
    finish(w);
}

/* Items in more modes than fit inline (18), removed and invalidated under failure. */
static void sc_remove(world_t *w) {
    item_t *s = mk_src0(w, "s", 0);
    item_t *t = mk_timer(w, "t", 0, 0.001, 0);
    item_t *o = mk_obs(w, "o", RL_ENTRY, true, 0);
    item_t *s2 = mk_src0(w, "s2", 1);
    for (int m = 5; m < 5 + 18; m++) {
        add(w, s, m);
        add(w, t, m);
        add(w, o, m);
    }
    add(w, s2, COMMON);
    add(w, s2, M_A);
    signal_src(w, s);
    checkpoint(w, "after adding to 18 modes");
    for (int m = 5; m < 5 + 18; m += 4) {
        rm(w, s, m);
        rm(w, t, m);
        rm(w, o, m);
    }
    rm(w, s2, COMMON);
    checkpoint(w, "after removing from some modes");
    inval(w, s);
    inval(w, t);
    rm(w, o, 6);
    inval(w, s2);
    checkpoint(w, "after invalidating");
    finish(w);
}

static void copy_hook(item_t *it) {
    world_t *w = it->w;
    long p0 = pts();
    char *mode = rl_loop_copy_current_mode(w->loop);
    if (mode) W_CHECK(w, strcmp(mode, mname(w->running)) == 0, "rl_loop_copy_current_mode says %s in mode %s", mode,
                      mlabel(w->running));
    else W_CHECK(w, is_fault_errno(errno) && may_fail(p0, pts()),
                 "rl_loop_copy_current_mode returned NULL while running, errno %d, expected the mode or a fault "
                 "errno%s", errno, why_not(p0));
    free(mode);
}

static void sc_copy(world_t *w) {
    item_t *t = mk_timer(w, "t", 0, 0.001, 0);
    item_t *s = mk_src0(w, "s", 0);
    t->hook = copy_hook;
    add(w, t, M_A);
    add(w, s, M_B);
    add(w, s, M_C1);
    for (int m = 5; m < 5 + 17; m++) add(w, t, m); /* more modes than fit inline */
    checkpoint(w, "after adding");
    long p0 = pts();
    size_t count = 0;
    char **modes = rl_loop_copy_all_modes(w->loop, &count);
    if (modes) {
        for (int m = 0; m < w->nmodes; m++) {
            if (!t->in[m] && !s->in[m]) continue;
            bool found = false;
            for (size_t i = 0; i < count; i++) found |= strcmp(modes[i], mname(m)) == 0;
            W_CHECK(w, found, "rl_loop_copy_all_modes: mode %s missing", mlabel(m));
        }
        for (size_t i = 0; i < count; i++) free(modes[i]);
        free(modes);
    } else {
        W_CHECK(w, is_fault_errno(errno) && may_fail(p0, pts()),
                "rl_loop_copy_all_modes returned NULL, errno %d, expected the modes or a fault errno%s",
                errno, why_not(p0));
    }
    p0 = pts();
    char *d = rl_loop_copy_description(w->loop);
    if (d) W_CHECK(w, strstr(d, "\"A\"") != NULL || !t->in[M_A], "rl_loop_copy_description lacks mode A, t's mode");
    else W_CHECK(w, is_fault_errno(errno) && may_fail(p0, pts()),
                 "rl_loop_copy_description returned NULL, errno %d, expected a description or a fault errno%s",
                 errno, why_not(p0));
    free(d);
    p0 = pts();
    char *cur = rl_loop_copy_current_mode(w->loop);
    W_CHECK(w, cur == NULL, "rl_loop_copy_current_mode is not NULL outside a run");
    free(cur);
    run(w, M_A, 0);
    if (t->in[M_A]) {
        double next = rl_loop_get_next_timer_fire_date(w->loop, "A");
        W_CHECK(w, next > 0, "rl_loop_get_next_timer_fire_date(A) is %g with a timer there, expected its date (> 0)",
                next);
    }
    finish(w);
}

static void sc_fd(world_t *w) {
    item_t *r = mk_src1(w, "r", 150, RL_FD_READABLE, 0);  /* a high fd: the fd table grows */
    item_t *r2 = mk_src1(w, "r2", 0, RL_FD_READABLE, 1);
    item_t *rw = mk_src1(w, "rw", 300, RL_FD_READABLE, 2);
    item_t *wr = new_item(w, K_SRC1, "wr"); /* a writer on rw's fd */
    wr->fd = rw->fd;
    wr->peer = rw->peer;
    rl_context_t ctx = {wr, ctx_retain, ctx_release};
    long p0 = pts();
    wr->obj = rl_source_create_fd(wr->fd, RL_FD_WRITABLE, 3, fd_cb, &ctx);
    created(w, wr, p0, "rl_source_create_fd");
    item_t *t = mk_timer(w, "t", 0, 0.001, 0);
    add(w, r, M_A);
    add(w, r, COMMON);
    add(w, r2, M_A);
    add(w, rw, M_A);
    add(w, wr, M_A);
    add(w, wr, M_B);
    add(w, t, M_B);
    write_data(r);
    write_data(rw);
    checkpoint(w, "after adding fd sources");
    run(w, M_A, 0);
    run(w, M_B, 0); /* rw's fd is ready for writing only: narrowed in B? */
    write_data(r2);
    if (wr->obj && wr->valid) {
        p0 = pts();
        int rc = rl_source_set_fd_events(wr->obj, RL_FD_READABLE | RL_FD_WRITABLE);
        W_CHECK(w, rc == 0 || fault_rc(rc, p0), "rl_source_set_fd_events returned %d, expected 0 or a fault error%s",
                rc, why_not(p0));
    }
    rm(w, rw, M_A);
    write_data(rw);
    rm(w, r, COMMON);
    checkpoint(w, "after removing");
    run(w, M_A, 0);
    inval(w, r2);
    finish(w);
}

/* The thread exits with everything in its loop: sources in several modes (their cancel must run),
 * signalled sources, fd sources, timers and observers (two kept: they must be addable elsewhere
 * afterwards), blocks still queued, a source signalled in a mode that is not running. */
static void sc_teardown(world_t *w) {
    item_t *s0 = mk_src0(w, "s0", 0);
    item_t *s1 = mk_src0(w, "s1", 1);
    item_t *s2 = mk_src0(w, "s2", 2);
    item_t *f = mk_src1(w, "f", 100, RL_FD_READABLE, 0);
    item_t *t0 = mk_timer(w, "t0", 10, 0, 0);
    item_t *t1 = mk_timer(w, "t1", 0, 1, 0);
    item_t *o0 = mk_obs(w, "o0", RL_ENTRY, true, 0);
    item_t *o1 = mk_obs(w, "o1", RL_EXIT, false, 0);
    t1->keep = true;
    o0->keep = true;
    add(w, s0, M_A);
    add(w, s0, M_B);
    add(w, s0, COMMON);
    add(w, s1, COMMON);
    add(w, s2, M_B);
    add(w, f, M_A);
    add(w, f, M_B);
    add(w, t0, COMMON);
    add(w, t1, M_A);
    add(w, t1, COMMON);
    add(w, o0, COMMON);
    add(w, o0, M_B);
    add(w, o1, M_A);
    add_common_mode(w, M_C1);
    signal_src(w, s2);
    signal_src(w, s1);
    write_data(f);
    run(w, M_A, 0); /* s2 deferred: signalled, in B only */
    checkpoint(w, "before the thread exits");
    signal_src(w, s0);
    perform(w, M_A, NULL);
    perform(w, COMMON, NULL);
    perform(w, M_C2, NULL);
    release_all(w);
}

static const scenario scenarios[] = {
    {"loop", sc_loop, true},
    {"timers", sc_timers, false},
    {"held", sc_held, false},
    {"storage", sc_storage, false},
    {"sources", sc_sources, false},
    {"signal40", sc_signal40, false},
    {"timers40", sc_timers40, false},
    {"observers", sc_observers, false},
    {"common", sc_common, false},
    {"blocks", sc_blocks, false},
    {"nested", sc_nested, false},
    {"remove", sc_remove, false},
    {"copy", sc_copy, false},
    {"fd", sc_fd, false},
    {"teardown", sc_teardown, false},
};

int sweep_scenario_count(void) { return (int)(sizeof scenarios / sizeof scenarios[0]); }
const char *sweep_scenario_name(int s) { return scenarios[s].name; }

/* ---- One run of a scenario ---- */

static pthread_key_t exit_key;

/* Runs after the core's own key destructor (keys are destroyed in creation order, and ours is
 * created after the core's): the teardown's fault points are counted. */
static void thread_exiting(void *arg) {
    world_t *w = arg;
    w->total_points = pts();
    rl_fault_arm(-1, 0);
}

static void *scenario_thread(void *arg) {
    world_t *w = arg;
    memset(&F, 0, sizeof F);
    F.mode = w->fmode;
    F.k = w->k;
    F.disarmed_at = __LONG_MAX__;
    w->running = -1;
    w->mode_common[M_DEFAULT] = true;
    w->nmodes = 1;
    if (!w->sc->creates_loop) {
        w->loop = rl_loop_get_current();
        if (!w->loop) {
            W_FAIL(w, "rl_loop_get_current() failed unarmed: errno %d", errno);
            return NULL;
        }
        rl_retain(w->loop);
    }
    pthread_setspecific(exit_key, w);
    arm_from(0);
    w->sc->body(w);
    w->body_points = pts();
    w->body_done = true;
    return NULL;
}

static rl_loop_t *other_loop; /* the sweep process's main-thread loop */

static void noop_timer(rl_timer_t *t, void *info) { (void)t, (void)info; }

/* After the thread's exit, from the sweeping thread. */
static void after_exit(world_t *w, int fds_before) {
    if (!w->loop) return;
    for (int i = 0; i < w->nitems; i++) {
        item_t *it = &w->items[i];
        if (!it->obj) {
            W_CHECK(w, atomic_load(&it->retains) == atomic_load(&it->releases),
                    "failed creation of %s retained its info %d times, released it %d times (expected as often)",
                    it->name, atomic_load(&it->retains), atomic_load(&it->releases));
            continue;
        }
        if (it->kind == K_SRC0)
            W_CHECK(w, atomic_load(&it->schedules) == atomic_load(&it->cancels),
                    "after the thread's exit, source %s was scheduled %d times, cancelled %d times (expected as often)",
                    it->name, atomic_load(&it->schedules), atomic_load(&it->cancels));
        if (it->held) {
            W_CHECK(w, atomic_load(&it->releases) == atomic_load(&it->retains),
                    "after the thread's exit, held timer %s: info retained %d times, released %d times, expected as "
                    "often (the dead loop still holds it?)", it->name, atomic_load(&it->retains), atomic_load(&it->releases));
            if (!it->keep) continue;
        } else if (!it->keep) {
            W_CHECK(w, atomic_load(&it->releases) == 1 && atomic_load(&it->retains) == 1,
                    "after the thread's exit, %s %s: info retained %d times, released %d times, expected once each "
                    "(the dead loop still holds it?)",
                    kind_name[it->kind], it->name, atomic_load(&it->retains), atomic_load(&it->releases));
            continue;
        }
        if (!it->held)
            W_CHECK(w, atomic_load(&it->releases) == 0, "kept %s %s was destroyed while referenced", kind_name[it->kind],
                    it->name);
        bool valid = is_valid(it);
        int rc = 0;
        if (it->kind == K_TIMER) {
            rc = rl_loop_add_timer(other_loop, it->obj, "X");
            if (rc == 0) rl_loop_remove_timer(other_loop, it->obj, "X");
            W_CHECK(w, !rl_loop_contains_timer(w->loop, it->obj, RL_DEFAULT_MODE),
                    "timer %s still in the dead loop, expected in no mode of it", it->name);
        } else if (it->kind == K_OBS) {
            rc = rl_loop_add_observer(other_loop, it->obj, "X");
            if (rc == 0) rl_loop_remove_observer(other_loop, it->obj, "X");
        }
        W_CHECK(w, rc == 0 || (!valid && rc == -EINVAL),
                "kept %s %s: adding it to another loop after its loop's thread exited returned %d (%s), expected 0 "
                "(-EINVAL if invalid)", kind_name[it->kind], it->name, rc, strerror(-rc));
        rl_release(it->obj);
        if (it->held)
            W_CHECK(w, atomic_load(&it->releases) == atomic_load(&it->retains),
                    "kept held timer %s: retained %d times, released %d times after another loop had it", it->name,
                    atomic_load(&it->retains), atomic_load(&it->releases));
        else
            W_CHECK(w, atomic_load(&it->releases) == 1, "kept %s %s not destroyed by its last release",
                    kind_name[it->kind], it->name);
    }
    for (int i = 0; i < w->nitems; i++) {
        item_t *it = &w->items[i];
        if (!it->in_storage) continue;
        W_CHECK(w, atomic_load(&it->dones) == (it->obj ? 1 : 0),
                "after the thread's exit, timer in storage %s: done ran %d times, expected %d", it->name,
                atomic_load(&it->dones), it->obj ? 1 : 0);
        if (it->obj)
            W_CHECK(w, atomic_load(&it->releases_at_done) == atomic_load(&it->releases),
                    "timer in storage %s: done ran after %d releases of its context, %d in all (a release after done)",
                    it->name, atomic_load(&it->releases_at_done), atomic_load(&it->releases));
    }
    char report[1024];
    int v = verify_loop(w->loop, report, sizeof report);
    W_CHECK(w, v == 0, "after the thread's exit, rl_loop_verify found %d violations: %s", v, report);
    rl_timer_t *probe = rl_timer_create(rl_time_now(), 0, 0, noop_timer, NULL);
    int rc = rl_loop_add_timer(w->loop, probe, RL_DEFAULT_MODE);
    W_CHECK(w, rc == -EINVAL, "adding a timer to the loop of an exited thread returned %d, not -EINVAL", rc);
    if (rc == 0) rl_loop_remove_timer(w->loop, probe, RL_DEFAULT_MODE);
    rl_release(probe);
    rl_release(w->loop);
    for (int i = 0; i < w->nfds; i++) close(w->fds[i]);
    int now_open = count_open_fds();
    W_CHECK(w, now_open == fds_before,
            "%d fds open after the loop was released, %d before its thread started (expected as many)", now_open,
            fds_before);
}

typedef struct {
    long body, total;
    bool hung, reached;
    int failures;
    char first[768];
} run_result;

static void run_once(int s, int mode, long k, run_result *r) {
    memset(r, 0, sizeof *r);
    world_t *w = calloc(1, sizeof *w);
    if (!w) abort();
    w->sc = &scenarios[s];
    w->fmode = mode;
    w->k = k;
    fcase_init(&w->fc, scenarios[s].name);
    int fds_before = count_open_fds();
    pthread_t th;
    if (pthread_create(&th, NULL, scenario_thread, w)) abort();
    if (!join_within(th, 2.0)) {
        r->hung = true;
        r->failures = 1;
        snprintf(r->first, sizeof r->first, "sweep.c:0: the scenario's thread did not end within 2 s (hung)%s%.680s",
                 w->fc.failures ? "; before that: " : "", w->fc.failures ? w->fc.first : "");
        return; /* w stays: the thread may still use it */
    }
    after_exit(w, fds_before);
    r->body = w->body_points;
    r->total = w->total_points;
    r->reached = mode == F_COUNT || w->total_points > k;
    r->failures = w->fc.failures;
    snprintf(r->first, sizeof r->first, "%s", w->fc.first);
    pthread_mutex_destroy(&w->fc.lock);
    free(w);
}

/* LeakSanitizer after a run; on a leak, the first frames in the core of its report. */
static bool leaked(char *where, size_t size) {
    if (!__lsan_do_recoverable_leak_check || getenv("FAULTS_NO_LEAK_CHECK")) return false;
    fflush(stderr);
    off_t before = lseek(STDERR_FILENO, 0, SEEK_END);
    if (!__lsan_do_recoverable_leak_check()) return false;
    where[0] = '\0';
    FILE *f = fopen("/proc/self/fd/2", "r");
    if (!f) return true;
    if (before > 0) fseek(f, before, SEEK_SET);
    char line[1024];
    size_t used = 0;
    int frames = 0;
    while (fgets(line, sizeof line, f) && frames < 4) {
        char *p = strstr(line, "Sources/CRunLoopCore/");
        if (!p || strstr(line, "alloc.h")) continue;
        char *in = strstr(line, " in ");
        line[strcspn(line, "\n")] = '\0';
        used += (size_t)snprintf(where + used, size - used, "%s%s", used ? " <- " : "", in ? in + 4 : p);
        if (used >= size) break;
        frames++;
    }
    fclose(f);
    return true;
}

static void *first_loop(void *arg) {
    (void)arg;
    rl_loop_get_current();
    return NULL;
}

static void make_key(void) {
    /* The core creates its thread-exit key with the first loop; ours must come after it. */
    other_loop = rl_loop_get_current();
    pthread_t th;
    if (pthread_create(&th, NULL, first_loop, NULL) == 0) pthread_join(th, NULL);
    if (pthread_key_create(&exit_key, thread_exiting)) abort();
}

void part_sweep(int s, int start_mode, long start_point) {
    strcpy(mode_names[1], "A");
    strcpy(mode_names[2], "B");
    strcpy(mode_names[3], "C1");
    strcpy(mode_names[4], "C2");
    for (int m = 5; m < MAXM; m++) snprintf(mode_names[m], sizeof mode_names[m], "M%d", m);
    make_key();
    run_result r;
    run_once(s, F_COUNT, 0, &r);
    if (r.hung || r.failures) {
        fr_line("points %ld %ld", r.total, r.body);
        fr_line("fail 1 -1 %d unarmed run: %s", r.failures, r.first);
        fr_line("done");
        if (r.hung) _exit(0);
        return;
    }
    run_result again;
    run_once(s, F_COUNT, 0, &again);
    long n = r.total;
    fr_line("points %ld %ld", n, r.body);
    if (again.total != n) fr_line("recount %ld", again.total); /* timing-dependent: main.c reports it */
    char where[512];
    if (leaked(where, sizeof where)) {
        fr_line("fail 1 -1 1 sweep.c:0: LeakSanitizer: a leak after the unarmed runs: %s", where);
        fr_line("done");
        _exit(0);
    }
    for (int mode = start_mode; mode <= F_PERSIST; mode++) {
        for (long k = mode == start_mode ? start_point : 0; k < n; k++) {
            fr_line("start %d %ld", mode, k);
            run_once(s, mode, k, &r);
            if (r.failures) fr_line("fail %d %ld %d %s", mode, k, r.failures, r.first);
            if (r.hung) {
                fr_line("end %d %ld 1", mode, k);
                _exit(0); /* its thread is stuck: a new process carries on */
            }
            if (leaked(where, sizeof where)) {
                fr_line("fail %d %ld 1 sweep.c:0: LeakSanitizer: leak after this point: %s", mode, k, where);
                fr_line("end %d %ld 1", mode, k);
                _exit(0);
            }
            fr_line("end %d %ld %d", mode, k, r.reached);
        }
    }
    fr_line("done");
}
