/*
 * lag.c - loop lag: the lateness of fired timers as a histogram, and the longest callout, as
 * the passes record them (lag.h: rl_lag_late, rl_callouts_done) and readers on any thread
 * take them (rl_loop_get_lag). The loop's thread is the only writer of the figures, so it
 * counts with plain loads and stores; a reset never touches them: it moves each figure's zero,
 * which only readers write, so a reset from another thread cannot lose a count.
 */
#include "lag.h"
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

/* The longest callout into l, consistently (the sequence lock's reader: an even seq, the
 * fields, the same seq again); returns that seq. The acquire loads of the fields keep the second
 * read of seq after them. The writer holds seq odd for a few stores, without blocking: spin. */
static unsigned long long read_record(rl_lag *lag, rl_loop_lag_t *l) {
    unsigned spins = 0;
    for (;;) {
        unsigned long long seq = atomic_load_explicit(&lag->seq, memory_order_acquire);
        if (seq & 1) {
            if (++spins % 64) rl_cpu_relax();
            else sched_yield(); /* preempted in the middle */
            continue;
        }
        l->longest_callout = atomic_load_explicit(&lag->longest, memory_order_acquire);
        l->longest_callout_end = atomic_load_explicit(&lag->longest_end, memory_order_acquire);
        l->longest_callout_kind = atomic_load_explicit(&lag->kind, memory_order_acquire);
        l->longest_callout_count = atomic_load_explicit(&lag->count, memory_order_acquire);
        if (atomic_load_explicit(&lag->seq, memory_order_relaxed) == seq) return seq;
    }
}

int rl_loop_get_lag(rl_loop_t *loop, rl_loop_lag_t *out, size_t size, unsigned flags) {
    if (!loop || !out || size < LAG_SIZE_V1 || (flags & ~(unsigned)RL_LAG_RESET)) return -EINVAL;
    rl_lag *lag = &loop->lag;
    bool reset = flags & RL_LAG_RESET;
    rl_loop_lag_t l;
    memset(&l, 0, sizeof l);

    for (int k = 0; k < RL_LAG_BUCKETS; k++) {
        /* The zero first: it was a count this bucket had, so the count read after is no less. A
         * reset claims exactly [zero, n), moving the zero from the value it read: of two readers
         * resetting at once, the one that loses reads the new zero and claims only what is past
         * it, so no timer is in both readings. */
        unsigned long long zero = atomic_load_explicit(&lag->late_zero[k], memory_order_acquire), n;
        for (;;) {
            n = atomic_load_explicit(&lag->late[k], memory_order_relaxed);
            if (!reset || n <= zero ||
                atomic_compare_exchange_weak_explicit(&lag->late_zero[k], &zero, n, memory_order_acq_rel,
                                                      memory_order_acquire))
                break;
        }
        l.late[k] = n > zero ? n - zero : 0;
        l.timers_fired += l.late[k];
    }

    /* The record, unless a reset voided it (reset_seq is the seq whose record was voided; read
     * first, it is no later than the seq read after). A reset claims the record it read by
     * moving reset_seq from the value it saw to that record's seq; a reader that loses the race
     * reads again, and finds the record voided or a later one, made since. */
    for (;;) {
        unsigned long long voided = atomic_load_explicit(&lag->reset_seq, memory_order_acquire);
        unsigned long long seq = read_record(lag, &l);
        if (voided == seq) { /* no record since the last reset */
            l.longest_callout = l.longest_callout_end = 0;
            l.longest_callout_kind = RL_CALLOUT_NONE;
            l.longest_callout_count = 0;
            break;
        }
        /* The loop's thread then takes the next phase that calls out as the record, whatever
         * its length; a record it makes meanwhile has a later seq and stands. */
        if (!reset || atomic_compare_exchange_strong_explicit(&lag->reset_seq, &voided, seq, memory_order_acq_rel,
                                                              memory_order_relaxed))
            break;
    }

    size_t filled = size < sizeof l ? size : sizeof l;
    l.size = filled;
    memset(out, 0, size);
    memcpy(out, &l, filled);
    return 0;
}

/* The loop's thread records without the lock, so fork may have landed between its stores, and
 * in the child nobody finishes them: a reader would wait for an even seq forever. The record
 * may be torn: end it, voided. */
void rl_lag_after_fork_child(rl_loop_t *loop) {
    rl_lag *lag = &loop->lag;
    unsigned long long seq = atomic_load_explicit(&lag->seq, memory_order_relaxed);
    if (seq & 1) {
        atomic_store_explicit(&lag->seq, seq + 1, memory_order_relaxed);
        atomic_store_explicit(&lag->reset_seq, seq + 1, memory_order_relaxed);
    }
}
