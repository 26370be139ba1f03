/*
 * lag.c - loop lag: the lateness of fired timers as a histogram, and the longest callout, as
 * the passes record them (internal.h: rl_lag_late, rl_callouts_done) and readers on any thread
 * take them (rl_loop_get_lag). The loop's thread is the only writer of the figures, so it
 * counts with plain loads and stores; a reset never touches them: it moves each figure's zero,
 * which only readers write, so a reset from another thread cannot lose a count.
 */
#include "internal.h"

#include <errno.h>
#include <sched.h>

/* The size of the first version of rl_loop_lag_t: callers built against it pass no less. */
#define LAG_SIZE_V1 (offsetof(rl_loop_lag_t, longest_callout_end) + sizeof(double))

/* Writer of the sequence lock: seq odd, the fields, seq even again. A release store of each
 * field keeps the odd seq before it; the last release keeps the fields before the even seq. */
void rl_lag_record(rl_loop_t *loop, int kind, unsigned count, double seconds, double end) {
    rl_lag *lag = &loop->lag;
    unsigned long long seq = atomic_load_explicit(&lag->seq, memory_order_relaxed);
    atomic_store_explicit(&lag->seq, seq + 1, memory_order_relaxed);
    atomic_store_explicit(&lag->longest, seconds, memory_order_release);
    atomic_store_explicit(&lag->longest_end, end, memory_order_release);
    atomic_store_explicit(&lag->kind, kind, memory_order_release);
    atomic_store_explicit(&lag->count, count, memory_order_release);
    atomic_store_explicit(&lag->seq, seq + 2, memory_order_release);
}

/* Raise *at to value unless it is there already (zeros and resets only move forward, so two
 * readers resetting at once leave the later zero). */
static void raise_to(_Atomic unsigned long long *at, unsigned long long value) {
    unsigned long long now = atomic_load_explicit(at, memory_order_relaxed);
    while (now < value &&
           !atomic_compare_exchange_weak_explicit(at, &now, value, memory_order_release, memory_order_relaxed)) {}
}

int rl_loop_get_lag(rl_loop_t *loop, rl_loop_lag_t *out, size_t size, unsigned flags) {
    if (!loop || !out || size < LAG_SIZE_V1 || (flags & ~(unsigned)RL_LAG_RESET)) return -EINVAL;
    rl_lag *lag = &loop->lag;
    bool reset = flags & RL_LAG_RESET;
    rl_loop_lag_t l;
    memset(&l, 0, sizeof l);

    for (int k = 0; k < RL_LAG_BUCKETS; k++) {
        /* The zero first: it was a count this bucket had, so the count read after is no less. */
        unsigned long long zero = atomic_load_explicit(&lag->late_zero[k], memory_order_acquire);
        unsigned long long n = atomic_load_explicit(&lag->late[k], memory_order_relaxed);
        l.late[k] = n > zero ? n - zero : 0;
        l.timers_fired += l.late[k];
        if (reset) raise_to(&lag->late_zero[k], n);
    }

    /* Reader of the sequence lock: an even seq, the fields, the same seq again. The acquire
     * loads of the fields keep the second read of seq after them. The writer holds it odd for
     * a few stores, without blocking: spin. */
    unsigned long long seq;
    unsigned spins = 0;
    for (;;) {
        seq = atomic_load_explicit(&lag->seq, memory_order_acquire);
        if (seq & 1) {
            if (++spins % 64) rl_cpu_relax();
            else sched_yield(); /* preempted in the middle */
            continue;
        }
        l.longest_callout = atomic_load_explicit(&lag->longest, memory_order_acquire);
        l.longest_callout_end = atomic_load_explicit(&lag->longest_end, memory_order_acquire);
        l.longest_callout_kind = atomic_load_explicit(&lag->kind, memory_order_acquire);
        l.longest_callout_count = atomic_load_explicit(&lag->count, memory_order_acquire);
        if (atomic_load_explicit(&lag->seq, memory_order_relaxed) == seq) break;
    }
    if (atomic_load_explicit(&lag->reset_seq, memory_order_relaxed) == seq) { /* reset since */
        l.longest_callout = l.longest_callout_end = 0;
        l.longest_callout_kind = RL_CALLOUT_NONE;
        l.longest_callout_count = 0;
    }
    /* The loop's thread then takes the next phase that calls out as the record, whatever its
     * length; a record it makes meanwhile has a later seq and stands. */
    if (reset) raise_to(&lag->reset_seq, seq);

    size_t filled = size < sizeof l ? size : sizeof l;
    l.size = filled;
    memset(out, 0, size);
    memcpy(out, &l, filled);
    return 0;
}
