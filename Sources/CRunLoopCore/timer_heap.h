/*
 * timer_heap.h - a 4-ary min-heap of dates. It knows nothing of loops or timers: a node is
 * embedded in whatever it orders and remembers its own index, so removal and rekeying are
 * O(log n) with no search. A node also carries the rest of its key (order, seq), which the heap
 * does not keep in order: it only ever hands out "every node due by a date" (the timer phase, which
 * sorts what it takes by the whole key) or "the earliest date" (the wake date), and for those
 * the dates are enough. So a sift compares dates and nothing else.
 *
 * The array holds {when, node} slots, not node pointers: sifting compares the dates stored in
 * the array and follows a node pointer only to store the node's new index. At 1e5-1e6 entries a
 * pointer per comparison is a cache miss into a scattered object; a slot is 16 bytes, and the
 * array is placed so that slot 1 starts a cache line (timer_heap.c, resize), so the four
 * children of a node share one line. libev calls the same idea "heap cache at", and places its
 * array the same way (HEAP0).
 *
 * Why 4-ary: the children are adjacent, the tree is half as deep as a binary heap, and sift-down
 * compares more per level but touches fewer levels; for timer workloads (mostly inserts and pops
 * near the top) this beats a binary heap.
 *
 * Nodes keyed at INFINITY (a disarmed timer, a timeout that fired and waits to be armed again)
 * never come due, so they are not in the heap's order at all: they are parked at the top of the
 * same array, slots [capacity - parked, capacity), in no order, and parking, unparking and
 * removing one is O(1) with no sift. A parked node armed again goes to the end of the heap and
 * up: a timeout armed from the loop's time is the latest, so it stays there, and timers armed in
 * the order of their dates leave the heap's array in key order, which the timer phase then finds
 * sorted (rl_heap_visit_due visits in array order). Both regions live in one array, so a parked
 * node always has a slot to come back to: unparking never allocates, never fails.
 *
 * When the array is full (the heap and the region meet), a small array grows (unless its holes
 * would pay for a re-heap), and in a large one a node parks where it is instead: its slot becomes
 * a hole that still names it, tagged (the pointer's low bit), and it joins the region when that
 * slot leaves the heap (popped at the top, trimmed at the end, or compacted away). So a burst of
 * cancellations in a full array costs O(1) each, not a re-heap of the array or the copy of a
 * larger one. Armed again, such a node goes to the end of the heap when there is room, else takes its
 * slot back and sifts from there.
 *
 * Removal is lazy. A removed (or parked) node leaves a hole: its slot keeps the date and loses
 * the node, so removing costs O(1) and moves nothing (the hole's date is where it was) instead of
 * a sift through every level. Holes leave in two
 * ways: a hole that reaches the top is popped when someone asks for the earliest entry
 * (rl_heap_first), and when holes are many the heap is compacted at once: the live slots are
 * gathered and re-heaped in O(n) (Floyd). A burst of cancelled timeouts, or a pass that fires
 * thousands of due one-shot timers, then costs O(n) in all instead of O(n log n). Holes that name
 * no node never outnumber the nodes (parked ones included, which hold slots too), so memory stays within twice
 * the node count (and the array shrinks after a burst).
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
    size_t count;    /* slots of the heap in use, holes included: [0, count) */
    size_t capacity;
    size_t holes;    /* slots of the heap with no node in its order: RL_HEAP_HOLE, or a node parked
                      * where it is (tagged) */
    size_t parked;   /* nodes keyed at INFINITY in the region: [capacity - parked, capacity) */
    size_t parked_in_heap; /* nodes keyed at INFINITY in a hole of the heap (tagged) */
    size_t pad;      /* slots of the block before slots[0] (timer_heap.c, resize) */
} rl_heap;

/* A slot's node field: a node in the heap's order (low bit clear), a node parked in a hole
 * (rl_heap_tagged(node)), or RL_HEAP_HOLE, a hole that names no node. */
#define RL_HEAP_HOLE ((rl_heap_node *)(uintptr_t)1)
static inline rl_heap_node *rl_heap_tagged(const rl_heap_node *node) { return (rl_heap_node *)((uintptr_t)node | 1); }
/* The node a slot names, in the order or parked in it; NULL for RL_HEAP_HOLE. */
static inline rl_heap_node *rl_heap_named(const rl_heap_slot *s) {
    return (rl_heap_node *)((uintptr_t)s->node & ~(uintptr_t)1);
}
/* Whether a slot of the heap holds a node in the heap's order (not a hole of either kind). */
static inline bool rl_heap_live(const rl_heap_slot *s) { return !((uintptr_t)s->node & 1); }

#define RL_HEAP_ARITY 4

/* The whole key's order, (date, order, seq), which the heap does not keep (it keeps dates): for
 * callers that sort the nodes it hands out (slots in the heap's order: the walks hand out no
 * other). Keys are unique among live nodes. */
static inline bool rl_heap_slot_less(const rl_heap_slot *a, const rl_heap_slot *b) {
    if (a->when != b->when) return a->when < b->when;
    if (a->node->order != b->node->order) return a->node->order < b->node->order;
    return a->node->seq < b->node->seq;
}

/* How many nodes the heap holds (holes not counted, parked ones counted). */
static inline size_t rl_heap_size(const rl_heap *h) {
    return h->count - h->holes + h->parked + h->parked_in_heap;
}
/* How many nodes are keyed at INFINITY (in the region or in a hole). */
static inline size_t rl_heap_parked_count(const rl_heap *h) { return h->parked + h->parked_in_heap; }
/* The date node is keyed at; node must be in h. */
static inline double rl_heap_when(const rl_heap *h, const rl_heap_node *node) {
    return h->slots[node->index].node == node ? h->slots[node->index].when : __builtin_inf();
}
static inline bool rl_heap_is_parked(const rl_heap *h, size_t i) { return i >= h->capacity - h->parked && i < h->capacity; }
static inline bool rl_heap_contains(const rl_heap *h, const rl_heap_node *node) {
    size_t i = node->index;
    return (i < h->count || rl_heap_is_parked(h, i)) && rl_heap_named(&h->slots[i]) == node;
}

/* The next node of h from *i on, in array order (not key order; the region's parked ones last),
 * holes that name no node passed over, and its date in *when (INFINITY for a parked one); NULL
 * past the last. Every node once: for (size_t i = 0;
 * (node = rl_heap_next(h, &i, &when));). Reads only. */
static inline rl_heap_node *rl_heap_next(const rl_heap *h, size_t *i, double *when) {
    size_t parked_from = h->capacity - h->parked;
    for (;; ++*i) {
        if (*i >= h->count && *i < parked_from) *i = parked_from;
        if (*i >= h->capacity) return NULL;
        rl_heap_node *node = rl_heap_named(&h->slots[*i]);
        if (node) {
            *when = node == h->slots[*i].node ? h->slots[*i].when : __builtin_inf();
            ++*i;
            return node;
        }
    }
}

/* rl_heap_insert's every case, the inline one's included. */
__attribute__((visibility("hidden"))) int rl_heap_insert_any(rl_heap *h, rl_heap_node *node, double when);
/* Drop the holes at the end of the heap (there is one at count - 1). */
__attribute__((visibility("hidden"))) void rl_heap_trim_holes(rl_heap *h);
/* 0 or -ENOMEM (then nothing changed). The capacity grows by doubling; removals halve it once
 * the heap is down to a quarter of it (above 256 slots). A node keyed at INFINITY is parked.
 * Inline when the array has room and the date is not INFINITY (every add of a timer but the
 * first of a new size, or a dormant one): the node goes up from the end as a hole that earlier
 * parents move down into, and is stored once, where it stops. A hole of the heap sifts as the
 * date it keeps (rl_heap_insert_any does the same), and one that moved down to the end is
 * trimmed. */
static inline int rl_heap_insert(rl_heap *h, rl_heap_node *node, double when) {
    if (__builtin_expect(h->count + h->parked >= h->capacity, 0) || __builtin_expect(when == __builtin_inf(), 0))
        return rl_heap_insert_any(h, node, when);
    rl_heap_slot *slots = h->slots;
    size_t i = h->count++;
    while (i > 0) {
        size_t parent = (i - 1) / RL_HEAP_ARITY;
        if (!(when < slots[parent].when)) break;
        slots[i] = slots[parent];
        rl_heap_node *moved = rl_heap_named(&slots[i]);
        if (moved) moved->index = (uint32_t)i;
        i = parent;
    }
    slots[i] = (rl_heap_slot){when, node};
    node->index = (uint32_t)i;
    if (__builtin_expect(!rl_heap_live(&slots[h->count - 1]), 0)) rl_heap_trim_holes(h);
    return 0;
}
/* Take node out (nothing when it is not in h). O(1) amortized: it leaves a hole (a parked node
 * leaves none). */
__attribute__((visibility("hidden"))) void rl_heap_remove(rl_heap *h, rl_heap_node *node);
/* The earliest live slot, or NULL when the heap holds no node. Pops the holes at the top first
 * (or compacts, when holes are many), so it mutates: call it where h may be written. */
__attribute__((visibility("hidden"))) const rl_heap_slot *rl_heap_first(rl_heap *h);
/* The out-of-line halves of rl_heap_update. */
__attribute__((visibility("hidden"))) void rl_heap_sift_down(rl_heap *h, size_t i);
__attribute__((visibility("hidden"))) void rl_heap_settle(rl_heap *h, size_t i, double old);
/* Park the node at i (in the heap's order): rl_heap_park_at, out of line. */
__attribute__((visibility("hidden"))) void rl_heap_park(rl_heap *h, size_t i);
/* Every case of a park, the three of rl_heap_park_at included. */
__attribute__((visibility("hidden"))) void rl_heap_park_any(rl_heap *h, size_t i);
__attribute__((visibility("hidden"))) void rl_heap_unpark(rl_heap *h, size_t i, double when);
__attribute__((visibility("hidden"))) void rl_heap_unpark_in_heap(rl_heap *h, size_t i, double when);
/* A full array at least this large parks a node in its hole rather than grow (timer_heap.c). */
#define RL_HEAP_PARK_IN_PLACE_FROM (1u << 16)
/* A park inline in its three usual cases: the heap's last node with a node before it (the slot
 * goes to the region); a node that is not the heap's last, whose hole will not outnumber the
 * nodes: with room in the array, a hole where it was and the node in the parked region; in a
 * full array too large to grow for it, the node parked in its hole. Any other park
 * (a trim, a growth, a compaction) is rl_heap_park_any's, which does the same in these.
 * rl_heap_update parks out of line (rl_heap_park), which keeps its inline copies small. */
static inline void rl_heap_park_at(rl_heap *h, size_t i) {
    size_t count = h->count, holes = h->holes + 1;
    if (i + 1 == count && (i == 0 || rl_heap_live(&h->slots[i - 1])) &&
        __builtin_expect(h->holes - h->parked_in_heap <= i - h->holes + h->parked + h->parked_in_heap, 1)) {
        /* The last slot, with a node before it: the heap gives up the slot and the region takes
         * one, so there is room, and no hole is left to trim or to count. The usual case of an
         * outermost fire phase, which parks the last to fire first, in a heap whose array is in
         * key order (timeouts armed from the loop's time). The test on the holes is
         * rl_heap_park_any's compaction test after its trim (which counts the node nowhere). */
        rl_heap_node *node = h->slots[i].node;
        h->count = i;
        size_t j = h->capacity - ++h->parked;
        h->slots[j] = (rl_heap_slot){__builtin_inf(), node};
        node->index = (uint32_t)j;
        return;
    }
    bool room = count + h->parked < h->capacity;
    if (__builtin_expect(i + 1 != count, 1) && __builtin_expect(room || h->capacity >= RL_HEAP_PARK_IN_PLACE_FROM, 1)) {
        size_t in_heap = h->parked_in_heap + !room;
        /* rl_heap_park_any's compaction test, on the counts the park leaves */
        if (__builtin_expect(holes - in_heap <= count - holes + h->parked + in_heap, 1)) {
            rl_heap_node *node = h->slots[i].node;
            h->holes = holes;
            if (room) {
                h->slots[i].node = RL_HEAP_HOLE;
                size_t j = h->capacity - ++h->parked;
                h->slots[j] = (rl_heap_slot){__builtin_inf(), node};
                node->index = (uint32_t)j;
            } else {
                h->slots[i].node = rl_heap_tagged(node);
                h->parked_in_heap = in_heap;
            }
            return;
        }
    }
    rl_heap_park_any(h, i);
}
/* Give node (in h) the date when and restore the order: a later date sifts down only, an earlier
 * one up only, the same date not at all; INFINITY parks the node and a date unparks it, both O(1)
 * plus the sift up of a date (or from its slot, for a node parked in a full array);
 * nothing when node is not in h. Never fails. Inline: the re-arm of a timeout to a later date,
 * the common case, mostly moves a node that has no child (three in four nodes of a 4-ary heap
 * are leaves, and a re-armed timeout, the latest, tends to be one), which costs a store and no
 * call. */
static inline void rl_heap_update(rl_heap *h, rl_heap_node *node, double when) {
    size_t i = node->index;
    if (__builtin_expect(i >= h->count, 0)) {
        if (rl_heap_is_parked(h, i) && h->slots[i].node == node && when != __builtin_inf()) rl_heap_unpark(h, i, when);
        return;
    }
    if (__builtin_expect(h->slots[i].node != node, 0)) {
        if (h->slots[i].node == rl_heap_tagged(node) && when != __builtin_inf()) rl_heap_unpark_in_heap(h, i, when);
        return;
    }
    if (__builtin_expect(when == __builtin_inf(), 0)) {
        rl_heap_park(h, i);
        return;
    }
    double old = h->slots[i].when;
    h->slots[i].when = when;
    if (__builtin_expect(when > old, 1)) {
        if (i * RL_HEAP_ARITY + 1 < h->count) rl_heap_sift_down(h, i); /* only its children can now be earlier */
    } else {
        rl_heap_settle(h, i, old);
    }
}
/* rl_heap_update(h, node, INFINITY): park node unless it is parked already or not in h. */
static inline void rl_heap_park_node(rl_heap *h, rl_heap_node *node) {
    size_t i = node->index;
    if (__builtin_expect(i < h->count, 1) && __builtin_expect(h->slots[i].node == node, 1)) rl_heap_park_at(h, i);
}
__attribute__((visibility("hidden"))) void rl_heap_free(rl_heap *h);

/* The depth-first half of rl_heap_visit_due: the due part of the subtree at i. */
__attribute__((visibility("hidden"))) void rl_heap_visit_due_below(rl_heap *h, size_t i, double date,
                                                                   bool (*visit)(void *ctx, const rl_heap_slot *slot),
                                                                   void *ctx);

/* Call visit(ctx, slot) for every node keyed at or before date, in the order of the array (level
 * by level, a parent before its children), through holes too (their children may be due): a walk
 * from the root over the subtree of the due slots (a slot later than date has no due child).
 * When a level holds more due slots than the walk's queue (1024), the rest goes depth first, in
 * no particular order. The array's order is the key order when the nodes were armed in the order
 * of their keys (timeouts from the loop's time: each is the latest), so a caller that wants the
 * key order checks before it sorts. visit returns false to pass over the node's subtree (it could
 * not take the node). Pops the holes at the top first, as rl_heap_first does. Inline, so that a
 * static visit is inlined into the walk: the timer phase calls it every pass that has a timer
 * due. */
static inline void rl_heap_visit_due(rl_heap *h, double date, bool (*visit)(void *ctx, const rl_heap_slot *slot),
                                     void *ctx) {
    const rl_heap_slot *first = rl_heap_first(h);
    if (!first || !(first->when <= date)) return;
    enum { QUEUE = 1024 };
    uint32_t queue[QUEUE];
    size_t head = 0, tail = 0;
    queue[tail++] = 0;
    while (head != tail) {
        size_t i = queue[head++ % QUEUE];
        if (rl_heap_live(&h->slots[i]) && !visit(ctx, &h->slots[i])) continue;
        for (size_t c = i * RL_HEAP_ARITY + 1; c <= i * RL_HEAP_ARITY + RL_HEAP_ARITY && c < h->count; c++) {
            if (!(h->slots[c].when <= date)) continue;
            if (tail - head < QUEUE) queue[tail++ % QUEUE] = (uint32_t)c;
            else rl_heap_visit_due_below(h, c, date, visit, ctx);
        }
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
/* Check every invariant (parent <= child, stored indexes, the hole and parked counts); returns false and names the first
 * broken one in *why. The tests call it after mutations. */
__attribute__((visibility("hidden"))) bool rl_heap_verify(const rl_heap *h, const char **why);

#endif
