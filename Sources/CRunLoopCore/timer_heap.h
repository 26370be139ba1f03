/*
 * timer_heap.h - a 4-ary min-heap keyed by (when, order, seq). It knows nothing of loops or
 * timers: a node is embedded in whatever it orders and remembers its own index, so removal and
 * rekeying are O(log n) with no search.
 *
 * The array holds {when, node} slots, not node pointers: sifting compares the dates stored in
 * the array and follows a node pointer only to break a tie of dates (and to store the node's new
 * index). At 1e5-1e6 entries a pointer per comparison is a cache miss into a scattered object;
 * a slot is 16 bytes, so the four children of a node share one cache line. libev calls the same
 * idea "heap cache at".
 *
 * Why 4-ary: the children are adjacent, the tree is half as deep as a binary heap, and sift-down
 * compares more per level but touches fewer levels; for timer workloads (mostly inserts and pops
 * near the top) this beats a binary heap.
 *
 * Removal is lazy. A removed node leaves a hole (and so does a node parked at INFINITY, which
 * goes to the end of the array instead of sifting through every level: rl_heap_park): its slot
 * keeps the date and loses the node, so
 * removing costs O(1) (a hole orders before the live slots of its date, so at most a few steps
 * up restore the order) instead of a sift through every level. Holes leave in two ways: a hole
 * that reaches the top is popped when someone asks for the earliest entry (rl_heap_first), and
 * when holes are many the heap is compacted at once: the live slots are gathered and re-heaped
 * in O(n) (Floyd). A burst of cancelled timeouts, or a pass that fires thousands of due one-shot
 * timers, then costs O(n) in all instead of O(n log n). Holes never outnumber live slots, so
 * memory stays within twice the live count (and the array shrinks after a burst).
 * Only this heap walks its slots: the timer phase, the wake date, describe and verify go through
 * rl_heap_visit_due, rl_heap_coalesce and rl_heap_next, which pass over the holes.
 */
#ifndef RL_TIMER_HEAP_H
#define RL_TIMER_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RL_HEAP_NOT_IN_HEAP UINT32_MAX

/* The tie-breaking part of a key and the node's position. The date lives in the slot only. */
typedef struct rl_heap_node {
    long order;
    uint64_t seq;
    uint32_t index; /* position in the heap, RL_HEAP_NOT_IN_HEAP when out */
    uint32_t user;  /* free for the embedding object (timer.c: which entry this is) */
} rl_heap_node;

typedef struct {
    double when;
    rl_heap_node *node;
} rl_heap_slot;

typedef struct {
    rl_heap_slot *slots;
    size_t count;    /* slots in use, holes included */
    size_t capacity;
    size_t holes;    /* slots whose node was removed (node NULL) */
} rl_heap;

#define RL_HEAP_ARITY 4

/* A hole orders before every live slot of its date: making a hole only ever lowers a key. Slots
 * at INFINITY (dormant timers, which never come due) are equal whatever their order and seq: a
 * dormant timer is parked without following a node pointer per comparison. */
static inline bool rl_heap_slot_less(const rl_heap_slot *a, const rl_heap_slot *b) {
    if (a->when != b->when) return a->when < b->when;
    if (!a->node || !b->node) return !a->node && b->node;
    if (__builtin_expect(a->when == __builtin_inf(), 0)) return false;
    if (a->node->order != b->node->order) return a->node->order < b->node->order;
    return a->node->seq < b->node->seq;
}

/* How many nodes the heap holds (holes not counted). */
static inline size_t rl_heap_size(const rl_heap *h) { return h->count - h->holes; }
/* The date node is keyed at; node must be in h. */
static inline double rl_heap_when(const rl_heap *h, const rl_heap_node *node) { return h->slots[node->index].when; }
static inline bool rl_heap_contains(const rl_heap *h, const rl_heap_node *node) {
    return node->index < h->count && h->slots[node->index].node == node;
}

/* The next node of h from *i on, in array order (not key order), holes passed over, and its date
 * in *when; NULL past the last. Every node once: for (size_t i = 0; (node = rl_heap_next(h, &i,
 * &when));). Reads only. */
static inline rl_heap_node *rl_heap_next(const rl_heap *h, size_t *i, double *when) {
    for (; *i < h->count; ++*i)
        if (h->slots[*i].node) {
            *when = h->slots[*i].when;
            return h->slots[(*i)++].node;
        }
    return NULL;
}

/* 0 or -ENOMEM (then nothing changed). The capacity grows by doubling; removals halve it once
 * the heap is down to a quarter of it (above 256 slots). */
__attribute__((visibility("hidden"))) int rl_heap_insert(rl_heap *h, rl_heap_node *node, double when);
/* Take node out (nothing when it is not in h). O(1) amortized: it leaves a hole. */
__attribute__((visibility("hidden"))) void rl_heap_remove(rl_heap *h, rl_heap_node *node);
/* The earliest live slot, or NULL when the heap holds no node. Pops the holes at the top first
 * (or compacts, when holes are many), so it mutates: call it where h may be written. */
__attribute__((visibility("hidden"))) const rl_heap_slot *rl_heap_first(rl_heap *h);
/* The out-of-line halves of rl_heap_update. */
__attribute__((visibility("hidden"))) void rl_heap_sift_down(rl_heap *h, size_t i);
__attribute__((visibility("hidden"))) void rl_heap_settle(rl_heap *h, size_t i, double old);
__attribute__((visibility("hidden"))) void rl_heap_park(rl_heap *h, size_t i, double old);
/* Give node (in h) the key (when, its order, its seq) and restore the order: a later date sifts
 * down only, an earlier one up only (the caller may have raised the node's seq, never lowered
 * it); nothing when node is not in h. Inline: the re-arm of a timeout to a later date, the
 * common case, mostly moves a node that has no child (three in four nodes of a 4-ary heap are
 * leaves, and a re-armed timeout, the latest, tends to be one), which costs a store and no call. */
static inline void rl_heap_update(rl_heap *h, rl_heap_node *node, double when) {
    size_t i = node->index;
    if (__builtin_expect(i >= h->count, 0) || __builtin_expect(h->slots[i].node != node, 0)) return;
    double old = h->slots[i].when;
    h->slots[i].when = when;
    if (__builtin_expect(when > old, 1)) {
        /* Only its children can now be earlier; moving down leaves no hole at the end. A node
         * parked at INFINITY (a fired timeout, a disarm) leaves a hole instead and goes to the
         * end, where it is in order at once (rl_heap_park). */
        if (i * RL_HEAP_ARITY + 1 < h->count) {
            if (when == __builtin_inf()) rl_heap_park(h, i, old);
            else rl_heap_sift_down(h, i);
        }
    } else {
        rl_heap_settle(h, i, old);
    }
}
__attribute__((visibility("hidden"))) void rl_heap_free(rl_heap *h);

/* Call visit(ctx, slot) for every node keyed at or before date: a depth-first walk from the root
 * over the subtree of the due slots (a slot later than date has no due child), through holes too
 * (their children may be due), in no particular order; the caller sorts by rl_heap_slot_less if
 * it wants the key order. visit returns false to pass over the node's subtree (it could not take
 * the node). Pops the holes at the top first, as rl_heap_first does. Inline, so that a static
 * visit is inlined into the walk: the timer phase calls it every pass that has a timer due. */
static inline void rl_heap_visit_due(rl_heap *h, double date, bool (*visit)(void *ctx, const rl_heap_slot *slot),
                                     void *ctx) {
    const rl_heap_slot *first = rl_heap_first(h);
    if (!first || !(first->when <= date)) return;
    /* The stack holds at most 3 slots per level below the root plus 4 children, and 32-bit
     * indexes make at most 17 levels. */
    size_t stack[64], depth = 0;
    stack[depth++] = 0;
    while (depth) {
        size_t i = stack[--depth];
        if (h->slots[i].node && !visit(ctx, &h->slots[i])) continue;
        for (size_t c = i * RL_HEAP_ARITY + 1; c <= i * RL_HEAP_ARITY + RL_HEAP_ARITY && c < h->count; c++)
            if (h->slots[c].when <= date) stack[depth++] = c;
    }
}

/* Coalescing: the latest date w such that every node keyed at or before w may be served at w,
 * where a node may be served from its date to the date latest gives it (at least its date), or
 * INFINITY when h is empty. That is the least of latest over the nodes keyed at or before w,
 * found by a depth-first walk from the root that passes over every subtree whose root is later
 * than the least found so far. latest returns false for a node to pass over (it counts for
 * nothing; its subtree still does), as holes are. The walk is capped: past cap nodes counted, w
 * stops at the date of the first node not explored, which every node of its subtree can meet.
 * When the earliest node is counted and may be served at its date alone, that date is the answer
 * at once. Pops the holes at the top first. */
__attribute__((visibility("hidden"))) double rl_heap_coalesce(rl_heap *h, bool (*latest)(const rl_heap_node *node,
                                                                                           double when, double *until),
                                                              unsigned cap);
/* Check every invariant (parent <= child, stored indexes, the hole count); returns false and names the first
 * broken one in *why. The tests call it after mutations. */
__attribute__((visibility("hidden"))) bool rl_heap_verify(const rl_heap *h, const char **why);

#endif
