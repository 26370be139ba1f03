/*
 * sort.h - the loop's sorts, in one module: a timer phase's due timers by (date, order, seq), and
 * a pass's taken sources by order, stable (containers.h's rl_ready_vec). Both are in order already
 * or nearly in the usual case, and both must not fail: out of memory they fall back to a sort in
 * place, slower and never wrong.
 */
#ifndef RL_SORT_H
#define RL_SORT_H

#include "containers.h"
#include "timer_heap.h"

#include <stddef.h>
#include <stdint.h>

struct rl_timer;

/* A due timer taken for firing: its key (to sort by; its node is not looked at once the timers
 * are taken, since a chained entry is freed as its timer leaves the mode) and the timer; while
 * the list is sorted (before the timers are taken), tie holds the entry's seq for a run of equal
 * dates. */
typedef struct rl_due_timer {
    rl_heap_slot key;
    union {
        struct rl_timer *timer;
        uint64_t tie;
    };
} rl_due_timer;

/* The phase's deferred references (loop->phase_deferred) live in the scratch half of its list. */
_Static_assert(sizeof(rl_due_timer) >= sizeof(struct rl_timer *), "a due list's scratch must hold a pointer per timer");

/* Sort d[0, n) by key (rl_heap_slot_less: date, then order, then seq; keys are unique within a
 * mode). From 256 timers on, a radix sort on the dates (and on seq for a long run of one date),
 * in scratch's room for n more, or in an allocation when scratch is NULL; without memory for it,
 * a quicksort in place. Before the timers are taken: tie is used. */
RL_HIDDEN void rl_sort_due(rl_due_timer *d, size_t n, rl_due_timer *scratch);

#endif
