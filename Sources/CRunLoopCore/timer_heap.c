/* timer_heap.c - the 4-ary heap declared in timer_heap.h, with lazy removal. */
#include "timer_heap.h"
#include "alloc.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static inline void place(rl_heap *h, size_t i, rl_heap_slot s) {
    h->slots[i] = s;
    if (s.node) s.node->index = (uint32_t)i;
}

static void sift_up(rl_heap *h, size_t i) {
    rl_heap_slot s = h->slots[i];
    while (i > 0) {
        size_t parent = (i - 1) / RL_HEAP_ARITY;
        if (!rl_heap_slot_less(&s, &h->slots[parent])) break;
        place(h, i, h->slots[parent]);
        i = parent;
    }
    place(h, i, s);
}

/* Dates first: the earliest child by date alone, and the full key (rl_heap_slot_less: order,
 * seq, holes) only when another child, or the node itself, has the same date. A park (a fired
 * timeout going to INFINITY) walks the heap from the top to the bottom this way. */
void rl_heap_sift_down(rl_heap *h, size_t i) {
    rl_heap_slot *slots = h->slots, s = slots[i];
    size_t count = h->count;
    for (;;) {
        size_t first = i * RL_HEAP_ARITY + 1;
        if (first >= count) break;
        size_t last = first + RL_HEAP_ARITY < count ? first + RL_HEAP_ARITY : count;
        size_t best = first;
        double when = slots[first].when;
        bool tie = false;
        for (size_t c = first + 1; c < last; c++) {
            double w = slots[c].when;
            if (w < when) {
                when = w;
                best = c;
                tie = false;
            } else if (w == when) {
                tie = true;
            }
        }
        if (__builtin_expect(tie, 0))
            for (size_t c = first; c < last; c++)
                if (c != best && rl_heap_slot_less(&slots[c], &slots[best])) best = c;
        if (when > s.when || (when == s.when && !rl_heap_slot_less(&slots[best], &s))) break;
        place(h, i, slots[best]);
        i = best;
    }
    place(h, i, s);
}

static void restore(rl_heap *h, size_t i) {
    if (i > 0 && rl_heap_slot_less(&h->slots[i], &h->slots[(i - 1) / RL_HEAP_ARITY]))
        sift_up(h, i);
    else
        rl_heap_sift_down(h, i);
}

/* After a burst, give memory back by halves; the gap between the grow and shrink points keeps a
 * heap that hovers around a size from reallocating. Failing to shrink is harmless. */
static void maybe_shrink(rl_heap *h) {
    while (h->capacity > 256 && h->count <= h->capacity / 4) {
        rl_heap_slot *smaller = realloc(h->slots, h->capacity / 2 * sizeof *smaller);
        if (!smaller) return;
        h->slots = smaller;
        h->capacity /= 2;
    }
}

/* Drop the holes and re-heap what is left, bottom-up: O(count). */
static void compact(rl_heap *h) {
    size_t n = 0;
    for (size_t i = 0; i < h->count; i++)
        if (h->slots[i].node) place(h, n++, h->slots[i]);
    h->count = n;
    h->holes = 0;
    if (n > 1)
        for (size_t i = (n - 2) / RL_HEAP_ARITY + 1; i-- > 0;) rl_heap_sift_down(h, i);
    maybe_shrink(h);
}

/* Holes at the end of the array cost nothing to drop. */
static void trim(rl_heap *h) {
    while (h->count && !h->slots[h->count - 1].node) {
        h->count--;
        h->holes--;
    }
}

/* Double the capacity: 0 or -ENOMEM (then nothing changed). */
static int grow(rl_heap *h) {
    size_t cap = h->capacity ? h->capacity * 2 : 8;
    if (cap > RL_HEAP_NOT_IN_HEAP) return -ENOMEM; /* indexes are 32 bits */
    rl_heap_slot *grown = rl_realloc(h->slots, cap * sizeof *grown);
    if (!grown) return -ENOMEM;
    h->slots = grown;
    h->capacity = cap;
    return 0;
}

int rl_heap_insert(rl_heap *h, rl_heap_node *node, double when) {
    if (h->count == h->capacity) {
        if (h->holes) compact(h); /* room without growing, or at least a smaller copy */
    }
    if (h->count == h->capacity && grow(h)) return -ENOMEM;
    size_t i = h->count++;
    place(h, i, (rl_heap_slot){when, node});
    sift_up(h, i);
    trim(h); /* it may have traded places with a hole */
    return 0;
}

void rl_heap_remove(rl_heap *h, rl_heap_node *node) {
    if (!rl_heap_contains(h, node)) return;
    size_t i = node->index;
    node->index = RL_HEAP_NOT_IN_HEAP;
    h->slots[i].node = NULL;
    h->holes++;
    if (i == h->count - 1)
        trim(h); /* this hole and any before it: fewer slots, as many holes more in share */
    else if (i > 0 && h->slots[(i - 1) / RL_HEAP_ARITY].when == h->slots[i].when)
        sift_up(h, i); /* the key went down: past parents of the same date (a later parent cannot be) */
    if (h->holes * 2 > h->count) compact(h);
    if (h->count <= h->capacity / 4) maybe_shrink(h);
}

const rl_heap_slot *rl_heap_first(rl_heap *h) {
    if (h->count && !h->slots[0].node) {
        /* Popping costs a sift each; when holes are a good part of the heap, one pass over it
         * is cheaper than popping the ones on top one by one. */
        if (h->holes * 8 >= h->count) {
            compact(h);
        } else {
            while (h->count && !h->slots[0].node) {
                h->holes--;
                place(h, 0, h->slots[--h->count]);
                if (h->count) rl_heap_sift_down(h, 0);
            }
            trim(h);
        }
    }
    return h->count ? &h->slots[0] : NULL;
}

/* rl_heap_update's date moved earlier, or stayed with a new seq. */
void rl_heap_settle(rl_heap *h, size_t i, double old) {
    if (h->slots[i].when < old) sift_up(h, i);
    else restore(h, i); /* same date, new seq: a tie may now order after a child */
    trim(h); /* moving up, it may have traded places with a hole at the end */
}

/* The node at i, keyed at INFINITY now (old before), has children: rather than sift it through
 * every level to the bottom (where INFINITY belongs), leave a hole at i with the old date (in
 * order where the node was) and append the node at the end (nothing is later than INFINITY, and
 * INFINITY ties with INFINITY): O(1), plus the holes' share of a compaction. A heap with no room
 * for one more slot drops its holes instead (a re-heap, O(n), when they are an eighth of it), or
 * grows (holes never outnumber nodes, so the array stays within twice the nodes, as for
 * removals), or sifts when it cannot grow: a park never fails. */
void rl_heap_park(rl_heap *h, size_t i, double old) {
    if (h->count == h->capacity) {
        /* No room: re-heap without the holes (the node too) when they are many enough to pay
         * for it (as rl_heap_first does), else grow; sift when growing fails. */
        if (h->holes * 8 >= h->count) {
            compact(h);
            return;
        }
        if (grow(h)) {
            rl_heap_sift_down(h, i);
            return;
        }
    }
    rl_heap_slot s = h->slots[i];
    h->slots[i] = (rl_heap_slot){old, NULL};
    h->holes++;
    place(h, h->count++, s);
    if (i > 0 && h->slots[(i - 1) / RL_HEAP_ARITY].when == old) sift_up(h, i); /* as rl_heap_remove's hole */
    if (h->holes * 2 > h->count) compact(h);
}

void rl_heap_free(rl_heap *h) {
    free(h->slots);
    h->slots = NULL;
    h->count = h->capacity = h->holes = 0;
}

double rl_heap_coalesce(rl_heap *h, bool (*latest)(const rl_heap_node *node, double when, double *until),
                        unsigned cap) {
    const rl_heap_slot *first = rl_heap_first(h);
    if (!first) return INFINITY;
    double until;
    if (latest(first->node, first->when, &until) && until == first->when) return until; /* nothing is due earlier */
    enum { STACK = 256 };
    size_t stack[STACK], depth = 0;
    unsigned counted = 0;
    double w = INFINITY;
    stack[depth++] = 0;
    while (depth) {
        size_t i = stack[--depth];
        double when = h->slots[i].when;
        if (when > w) continue;
        if (h->slots[i].node && latest(h->slots[i].node, when, &until)) {
            if (++counted > cap) {
                if (when < w) w = when;
                continue;
            }
            if (until < w) w = until;
        }
        for (size_t c = i * RL_HEAP_ARITY + 1; c <= i * RL_HEAP_ARITY + RL_HEAP_ARITY && c < h->count; c++) {
            if (depth < STACK) stack[depth++] = c;
            else if (h->slots[c].when < w) w = h->slots[c].when;
        }
    }
    return w;
}

bool rl_heap_verify(const rl_heap *h, const char **why) {
    size_t holes = 0;
    for (size_t i = 0; i < h->count; i++) {
        if (!h->slots[i].node) holes++;
        else if (h->slots[i].node->index != i) {
            *why = "a node's stored index is not its position";
            return false;
        }
        if (i > 0 && rl_heap_slot_less(&h->slots[i], &h->slots[(i - 1) / RL_HEAP_ARITY])) {
            *why = "a child orders before its parent";
            return false;
        }
    }
    if (holes != h->holes) {
        *why = "the hole count is wrong";
        return false;
    }
    if (h->count && !h->slots[h->count - 1].node) {
        *why = "a hole at the end was not trimmed";
        return false;
    }
    if (h->holes * 2 > h->count) {
        *why = "holes outnumber nodes";
        return false;
    }
    return true;
}
