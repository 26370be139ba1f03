/*
 * extras.c - the allocation points of a timer's extras (internal.h: the interval of a repeating
 * timer, a tolerance, the entries of further modes), each made to fail in turn: a repeating
 * timer is one allocation more than a one-shot timer, and fails whole (NULL, ENOMEM, its context
 * never retained; a timer in the caller's memory leaves that memory untouched); a tolerance that
 * finds no memory is -ENOMEM and leaves 0; a second mode that finds none is -ENOMEM and leaves
 * the timer in its first mode only, the loop consistent (rl_loop_verify).
 */
#include "faults.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

static atomic_int retains, releases;
static const void *ctx_retain(const void *info) {
    atomic_fetch_add(&retains, 1);
    return info;
}
static void ctx_release(const void *info) {
    (void)info;
    atomic_fetch_add(&releases, 1);
}
static void timer_cb(rl_timer_t *t, void *info) { (void)t, (void)info; }
static void storage_done(void *memory) { (void)memory; }

/* Points a create passes, and then each failing: NULL, ENOMEM, nothing retained. */
static long create_points(fcase *c, double interval, const char *what) {
    rl_context_t ctx = {&retains, ctx_retain, ctx_release};
    rl_timer_t *warm = rl_timer_create(rl_time_now() + 100, interval, 0, timer_cb, &ctx); /* its record */
    FCHECK(c, warm != NULL, "%s: no timer without faults", what);
    rl_release(warm);
    rl_fault_arm(-1, 0);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 100, interval, 0, timer_cb, &ctx);
    long points = rl_fault_points();
    rl_release(t);
    for (long p = 0; p < points; p++) {
        atomic_store(&retains, 0);
        atomic_store(&releases, 0);
        rl_fault_arm(p, 1);
        errno = 0;
        t = rl_timer_create(rl_time_now() + 100, interval, 0, timer_cb, &ctx);
        int e = errno;
        rl_fault_arm(-1, 0);
        FCHECK(c, !t && e == ENOMEM, "%s: point %ld failing gave %p, errno %d", what, p, (void *)t, e);
        FCHECK(c, atomic_load(&retains) == 0 && atomic_load(&releases) == 0, "%s: point %ld left %d retains, %d releases",
               what, p, atomic_load(&retains), atomic_load(&releases));
        if (t) rl_release(t);
    }
    return points;
}

static void case_create(void) {
    fcase c;
    fcase_init(&c, "extras: a repeating timer is made whole or not at all");
    long one_shot = create_points(&c, 0, "one-shot"), repeating = create_points(&c, 0.5, "repeating");
    FCHECK(&c, one_shot == 1 && repeating == 2, "allocation points: one-shot %ld (1 expected), repeating %ld (2)",
           one_shot, repeating);
    /* In the caller's memory: a repeating timer's one allocation; failing, the memory is untouched. */
    _Alignas(8) unsigned char memory[RL_TIMER_STORAGE_SIZE];
    rl_timer_storage st = {memory, sizeof memory, storage_done};
    rl_timer_t *t = rl_timer_create_in(&st, 0, rl_time_now() + 100, 0.5, 0, timer_cb, NULL); /* its record */
    FCHECK(&c, t != NULL, "rl_timer_create_in: no timer without faults");
    rl_release(t);
    memset(memory, 0xAB, sizeof memory);
    rl_fault_arm(0, 1);
    errno = 0;
    t = rl_timer_create_in(&st, 0, rl_time_now() + 100, 0.5, 0, timer_cb, NULL);
    int e = errno;
    rl_fault_arm(-1, 0);
    FCHECK(&c, !t && e == ENOMEM, "rl_timer_create_in, repeating, its extras failing: %p, errno %d", (void *)t, e);
    bool untouched = true;
    for (size_t i = 0; i < sizeof memory; i++) untouched &= memory[i] == 0xAB;
    FCHECK(&c, untouched, "rl_timer_create_in wrote the caller's memory and failed");
    rl_fault_arm(-1, 0);
    t = rl_timer_create_in(&st, 0, rl_time_now() + 100, 0, 0, timer_cb, NULL);
    FCHECK(&c, t && rl_fault_points() == 0, "rl_timer_create_in, one-shot: %ld allocations", rl_fault_points());
    if (t) rl_release(t);
    fcase_report(&c);
}

static void case_tolerance(void) {
    fcase c;
    fcase_init(&c, "extras: a tolerance without memory is -ENOMEM and leaves 0");
    rl_timer_t *t = rl_timer_create(rl_time_now() + 100, 0, 0, timer_cb, NULL);
    rl_fault_arm(0, -1);
    int zero = rl_timer_set_tolerance(t, 0), some = rl_timer_set_tolerance(t, 0.5);
    rl_fault_arm(-1, 0);
    FCHECK(&c, zero == 0, "a tolerance of 0 needs no memory, yet gave %d", zero);
    FCHECK(&c, some == -ENOMEM && rl_timer_get_tolerance(t) == 0, "gave %d, tolerance %g", some, rl_timer_get_tolerance(t));
    FCHECK(&c, rl_timer_set_tolerance(t, 0.5) == 0 && rl_timer_get_tolerance(t) == 0.5, "no tolerance without faults");
    rl_fault_arm(0, -1);
    int again = rl_timer_set_tolerance(t, 0.25), clear = rl_timer_set_tolerance(t, 0);
    rl_fault_arm(-1, 0);
    FCHECK(&c, again == 0 && clear == 0 && rl_timer_get_tolerance(t) == 0,
           "a timer with its extras allocates no more: %d, %d", again, clear);
    rl_release(t);
    fcase_report(&c);
}

static void case_modes(void) {
    fcase c;
    fcase_init(&c, "extras: a second mode without memory is -ENOMEM and leaves the first");
    rl_loop_t *loop = rl_loop_get_current();
    char report[512];
    long p = 0;
    for (;; p++) {
        rl_timer_t *t = rl_timer_create(rl_time_now() + 100, 0, 0, timer_cb, NULL);
        FCHECK(&c, t && rl_loop_add_timer(loop, t, RL_DEFAULT_MODE) == 0, "no timer in the default mode");
        rl_fault_arm(p, 1);
        int rc = rl_loop_add_timer(loop, t, "second");
        rl_fault_arm(-1, 0);
        bool in_default = rl_loop_contains_timer(loop, t, RL_DEFAULT_MODE),
             in_second = rl_loop_contains_timer(loop, t, "second");
        if (rc == 0) FCHECK(&c, in_default && in_second, "added to the second mode, yet in %d %d", in_default, in_second);
        else FCHECK(&c, rc == -ENOMEM && in_default && !in_second, "point %ld: %d, in %d %d", p, rc, in_default, in_second);
        FCHECK(&c, verify_loop(loop, report, sizeof report) == 0, "point %ld: %s", p, report);
        rl_timer_invalidate(t);
        rl_release(t);
        if (rc == 0 || p > 64) break;
    }
    FCHECK(&c, p >= 2, "only %ld allocation points in adding a second mode (its extras and its entry expected)", p);
    fcase_report(&c);
}

void part_extras(void) {
    case_create();
    case_tolerance();
    case_modes();
    fr_stat("extras_cases", 3);
}
