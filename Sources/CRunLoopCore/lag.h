/*
 * lag.h - loop lag (lag.c; crunloop.h, "Loop lag"): what the passes record of late timers and of
 * their longest callout, and the timing of each phase's callouts (time_in_callouts). The figures'
 * layout, rl_lag, is the loop's (internal.h).
 */
#ifndef RL_LAG_H
#define RL_LAG_H

#include "internal.h"

/* A fired timer was late seconds (>= 0) late: one more in its bucket. The bucket is the
 * exponent of the lateness in microseconds, read off the double's bits, less that of 0.5 (so
 * 1 + floor(log2) from 1 us up); below 0.5 us it wraps around, and one test of the usual range
 * sends both ends to their buckets. Loop's thread. */
static inline void rl_lag_late(rl_loop_t *loop, double late) {
    double us = late * 1e6;
    uint64_t bits;
    memcpy(&bits, &us, sizeof bits);
    uint64_t k = (bits >> 52) - 1022;
    if (__builtin_expect(k >= RL_LAG_BUCKETS, 0)) k = us < 1 ? 0 : RL_LAG_BUCKETS - 1;
    _Atomic unsigned long long *n = &loop->lag.late[k];
    atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* Store a new longest callout (the sequence lock's writer). Loop's thread. */
RL_HIDDEN void rl_lag_record(rl_loop_t *loop, int kind, unsigned count, double seconds, double end);

/* Where a phase's callouts began: the clock, and the loop's time_waiting and time_in_callouts
 * then. A callout that runs the loop (a nested run) adds its waits and its own phases' callouts
 * to those; rl_callouts_done takes them out, so that an idle nested run is no stall and no
 * second is counted twice (time_waiting + time_in_callouts stays within the wall time). */
typedef struct { double start, waited, called; } rl_phase;

static inline rl_phase rl_callouts_begin(rl_loop_t *loop) {
    rl_phase phase = { rl_time_now(), atomic_load_explicit(&loop->counters.time_waiting, memory_order_relaxed),
                       atomic_load_explicit(&loop->counters.time_in_callouts, memory_order_relaxed) };
    loop->phase_time = loop->time = phase.start;
    return phase;
}

/* A phase of a pass made count callouts of kind since phase: add its time to time_in_callouts,
 * and keep it as the longest callout if it is (or if the record was reset since the last one).
 * Its time is the clock's less the waits of nested runs; time_in_callouts gets that less the
 * nested runs' own phases, which counted themselves. Loop's thread. */
static inline void rl_callouts_done(rl_loop_t *loop, int kind, unsigned count, const rl_phase *phase) {
    double end = rl_time_now();
    loop->phase_time = 0;
    loop->time = end;
    double waited = atomic_load_explicit(&loop->counters.time_waiting, memory_order_relaxed) - phase->waited;
    double nested = atomic_load_explicit(&loop->counters.time_in_callouts, memory_order_relaxed) - phase->called;
    double seconds = end - phase->start - waited, own = seconds - nested;
    RL_COUNT(loop, time_in_callouts, own > 0 ? own : 0);
    rl_lag *lag = &loop->lag;
    if (count && (seconds > atomic_load_explicit(&lag->longest, memory_order_relaxed) ||
                  atomic_load_explicit(&lag->reset_seq, memory_order_relaxed) ==
                      atomic_load_explicit(&lag->seq, memory_order_relaxed)))
        rl_lag_record(loop, kind, count, seconds, end);
}

/* In the child of fork: end a record the fork cut short (lag.c). */
RL_HIDDEN void rl_lag_after_fork_child(rl_loop_t *loop);

#endif
