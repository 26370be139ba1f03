/* timer_heap.c - the 4-ary heap declared in timer_heap.h, with lazy removal. */
#include "timer_heap.h"
#include "alloc.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline void place(rl_heap *h, size_t i, rl_heap_slot s) {
    h->slots[i] = s;
    rl_heap_node *node = rl_heap_named(&s);
    if (node) node->index = (uint32_t)i;
}

/* Put node in the parked region (room made). */
static void park_in(rl_heap *h, rl_heap_node *node) {
    size_t i = h->capacity - ++h->parked;
    h->slots[i] = (rl_heap_slot){__builtin_inf(), node};
    node->index = (uint32_t)i;
}

/* The hole at i leaves the heap's order for good (popped, trimmed): a node parked in it goes to
 * the region, whose room is the slot the heap gives up. */
static void hole_leaves(rl_heap *h, rl_heap_node *named) {
    h->holes--;
    if (named) {
        h->parked_in_heap--;
        park_in(h, named);
    }
}

static void sift_up(rl_heap *h, size_t i) {
    rl_heap_slot s = h->slots[i];
    while (i > 0) {
        size_t parent = (i - 1) / RL_HEAP_ARITY;
        if (!(s.when < h->slots[parent].when)) break;
        place(h, i, h->slots[parent]);
        i = parent;
    }
    place(h, i, s);
}

/* The earliest child (the first of equal ones) moves up while it is earlier than the node. A
 * park at INFINITY never sifts (the node leaves for the parked region). */
void rl_heap_sift_down(rl_heap *h, size_t i) {
    rl_heap_slot *slots = h->slots, s = slots[i];
    size_t count = h->count;
    for (;;) {
        size_t first = i * RL_HEAP_ARITY + 1;
        if (first >= count) break;
        size_t last = first + RL_HEAP_ARITY < count ? first + RL_HEAP_ARITY : count;
        size_t best = first;
        double when = slots[first].when;
        for (size_t c = first + 1; c < last; c++)
            if (slots[c].when < when) {
                when = slots[c].when;
                best = c;
            }
        if (!(when < s.when)) break;
        place(h, i, slots[best]);
        i = best;
    }
    place(h, i, s);
}

/* Move the parked region to the top of an array of cap slots (from the top of one of
 * h->capacity), and tell its nodes. */
static void move_parked(rl_heap *h, size_t cap) {
    if (!h->parked || cap == h->capacity) return;
    memmove(&h->slots[cap - h->parked], &h->slots[h->capacity - h->parked], h->parked * sizeof *h->slots);
    for (size_t i = cap - h->parked; i < cap; i++) h->slots[i].node->index = (uint32_t)i;
}

/* The slot array is placed so that the four children of every node share one cache line: the
 * children of node i are slots [4i + 1, 4i + 4], 64 bytes from slot 4i + 1 on, so slot 1 starts a
 * line. The block starts a few slots (h->pad, at most RL_HEAP_MAX_PAD) before slot 0, so that it
 * does (libev's HEAP0 does the same with its indexes). Without that, three times in four, every
 * sift-down's look at four children would touch two lines, and which it is would change from one
 * process (and one growth) to the next. */
#define RL_HEAP_LINE 64
/* Where four slots do not make a line (a 32-bit build's 12-byte slot), no placement is tried. */
#define RL_HEAP_PLACED (sizeof(rl_heap_slot) * RL_HEAP_ARITY == RL_HEAP_LINE)
#define RL_HEAP_MAX_PAD (RL_HEAP_PLACED ? RL_HEAP_LINE / sizeof(rl_heap_slot) - 1 : 0)

/* The pad that puts slot 1 of a block starting at block on a line: none when slots cannot be
 * placed (a block that malloc aligned less than a slot). */
static size_t pad_for(const void *block) {
    uintptr_t off = (uintptr_t)block % RL_HEAP_LINE;
    if (!RL_HEAP_PLACED || off % sizeof(rl_heap_slot)) return 0;
    return ((RL_HEAP_LINE - off) / sizeof(rl_heap_slot) + RL_HEAP_MAX_PAD) % (RL_HEAP_MAX_PAD + 1);
}

/* The array resized to cap slots, its first keep slots kept (keep <= cap, and <= the capacity
 * before): 0, or -ENOMEM with nothing changed. By realloc, so that a large array grows in place
 * or by a remapping of its pages (glibc's mremap), where a new block meant a copy of it all and
 * the faults of a fresh region; slot 1 is placed on a line again, by a move of the kept slots
 * when the block moved to a start that needs another pad (a copy that realloc made anyway). */
static int resize(rl_heap *h, size_t cap, size_t keep) {
    rl_heap_slot *old = h->slots ? h->slots - h->pad : NULL;
    rl_heap_slot *block = rl_realloc(old, (cap + RL_HEAP_MAX_PAD) * sizeof(rl_heap_slot));
    if (!block) return -ENOMEM;
    size_t pad = pad_for(block);
    if (pad != h->pad && keep) memmove(block + pad, block + h->pad, keep * sizeof *block);
    h->slots = block + pad;
    h->pad = pad;
    return 0;
}

/* After a burst, give memory back by halves; the gap between the grow and shrink points keeps a
 * heap that hovers around a size from reallocating. Failing to shrink is harmless. */
static void maybe_shrink(rl_heap *h) {
    while (h->capacity > 256 && h->count + h->parked <= h->capacity / 4) {
        size_t cap = h->capacity / 2;
        move_parked(h, cap);
        bool smaller = resize(h, cap, cap) == 0; /* else the old block, which is larger, keeps serving */
        h->capacity = cap;
        if (!smaller) return;
    }
}

/* Drop the holes and re-heap what is left, bottom-up: O(count). The nodes in the heap keep their
 * array order (the due walk finds armed-in-order timers sorted); the nodes parked in holes gather
 * behind them as the walk goes, [n, n + k), and then join the region, whose room is what the
 * heap gives up: n + k + parked <= count + parked <= capacity. */
static void compact(rl_heap *h) {
    size_t n = 0, k = 0;
    for (size_t i = 0; i < h->count; i++) {
        rl_heap_slot s = h->slots[i];
        if (rl_heap_live(&s)) {
            if (k) h->slots[n + k] = h->slots[n]; /* the first parked one goes behind the last: n + k <= i */
            place(h, n++, s);
        } else if (s.node != RL_HEAP_HOLE) {
            h->slots[n + k++] = s;
        }
    }
    if (k) {
        size_t low = h->capacity - h->parked - k;
        memmove(&h->slots[low], &h->slots[n], k * sizeof *h->slots);
        for (size_t i = low; i < low + k; i++) {
            h->slots[i].node = rl_heap_named(&h->slots[i]);
            h->slots[i].when = __builtin_inf();
            h->slots[i].node->index = (uint32_t)i;
        }
        h->parked += k;
        h->parked_in_heap = 0;
    }
    h->count = n;
    h->holes = 0;
    if (n > 1)
        for (size_t i = (n - 2) / RL_HEAP_ARITY + 1; i-- > 0;) rl_heap_sift_down(h, i);
    maybe_shrink(h);
}

/* Holes at the end of the array cost nothing to drop. */
static __attribute__((noinline)) void trim_holes(rl_heap *h) {
    size_t count = h->count, holes = h->holes;
    for (; count && !rl_heap_live(&h->slots[count - 1]); count--, holes--) {
        rl_heap_node *named = rl_heap_named(&h->slots[count - 1]);
        if (named) { /* to the region, whose room is the slot the heap gives up */
            h->parked_in_heap--;
            h->count = count - 1;
            park_in(h, named);
        }
    }
    h->count = count;
    h->holes = holes;
}
static inline void trim(rl_heap *h) {
    if (h->count && !rl_heap_live(&h->slots[h->count - 1])) trim_holes(h);
}

/* Double the capacity: 0 or -ENOMEM (then nothing changed). */
static int grow(rl_heap *h) {
    size_t cap = h->capacity ? h->capacity * 2 : 8;
    if (cap >= RL_HEAP_NOT_IN_HEAP) return -ENOMEM; /* indexes are 32 bits */
    if (resize(h, cap, h->capacity)) return -ENOMEM;
    move_parked(h, cap); /* to the new top */
    h->capacity = cap;
    return 0;
}

/* Whether dropping the holes (a re-heap, O(n)) pays for itself: it frees an eighth of the array
 * at least. Otherwise a full array grows (each re-heap would free a few slots only, for as many
 * parks or inserts). */
static inline bool holes_pay(const rl_heap *h) {
    size_t free = h->holes - h->parked_in_heap; /* a hole naming a parked node frees nothing */
    return free && free * 8 >= h->capacity;
}

/* Room for one more slot, in the heap or the parked region: 0 or -ENOMEM (then nothing changed).
 * Without room the holes go when that pays, else the array grows; when it cannot grow, any hole
 * will do. */
static int make_room(rl_heap *h) {
    if (h->count + h->parked < h->capacity) return 0;
    if (holes_pay(h)) {
        compact(h);
        return 0;
    }
    if (!grow(h)) return 0;
    if (h->holes == h->parked_in_heap) return -ENOMEM;
    compact(h);
    return 0;
}

/* Take the node at parked slot i out of the region: the lowest parked slot fills its place. */
static rl_heap_node *unpark_from(rl_heap *h, size_t i) {
    rl_heap_node *node = h->slots[i].node;
    size_t low = h->capacity - h->parked--;
    if (i != low) {
        h->slots[i] = h->slots[low];
        h->slots[i].node->index = (uint32_t)i;
    }
    node->index = RL_HEAP_NOT_IN_HEAP;
    return node;
}

void rl_heap_trim_holes(rl_heap *h) { trim_holes(h); }

int rl_heap_insert_any(rl_heap *h, rl_heap_node *node, double when) {
    if (make_room(h)) return -ENOMEM;
    if (when == __builtin_inf()) {
        park_in(h, node);
        return 0;
    }
    size_t i = h->count++;
    place(h, i, (rl_heap_slot){when, node});
    sift_up(h, i);
    trim(h); /* it may have traded places with a hole */
    return 0;
}

/* Holes that name no node never outnumber the nodes, parked ones included (they hold slots of
 * the array too, in the region or in a hole): a phase that parks the timeouts it fires leaves a
 * hole for each, and compacts no sooner than when parked nodes were kept in the heap; a phase
 * that parks them in their holes (a full array) does not compact for them at all. */
static void compact_if_outnumbered(rl_heap *h) {
    if (h->holes - h->parked_in_heap > h->count - h->holes + h->parked + h->parked_in_heap) compact(h);
}

/* The node at i leaves the heap's order: a hole where it was. */
static void leave_hole(rl_heap *h, size_t i) {
    h->slots[i].node = RL_HEAP_HOLE;
    h->holes++;
    if (i == h->count - 1) trim(h); /* this hole and any before it: fewer slots, as many holes more in share */
    compact_if_outnumbered(h);
}

void rl_heap_remove(rl_heap *h, rl_heap_node *node) {
    if (!rl_heap_contains(h, node)) return;
    size_t i = node->index;
    if (i >= h->count) {
        (void)unpark_from(h, i);
        compact_if_outnumbered(h); /* one node fewer to outnumber */
    } else if (h->slots[i].node != node) { /* parked in the hole at i: the hole names no node now */
        node->index = RL_HEAP_NOT_IN_HEAP;
        h->slots[i].node = RL_HEAP_HOLE;
        h->parked_in_heap--;
        if (i == h->count - 1) trim(h);
        compact_if_outnumbered(h);
    } else {
        node->index = RL_HEAP_NOT_IN_HEAP;
        leave_hole(h, i);
    }
    if (h->count + h->parked <= h->capacity / 4) maybe_shrink(h);
}

const rl_heap_slot *rl_heap_first(rl_heap *h) {
    if (h->count && !rl_heap_live(&h->slots[0])) {
        /* Popping costs a sift each; when holes are a good part of the heap, one pass over it
         * is cheaper than popping the ones on top one by one. */
        if (h->holes * 8 >= h->count) {
            compact(h);
        } else {
            while (h->count && !rl_heap_live(&h->slots[0])) {
                rl_heap_node *named = rl_heap_named(&h->slots[0]);
                place(h, 0, h->slots[--h->count]);
                hole_leaves(h, named); /* after the move: the region may take the slot it left */
                if (h->count) rl_heap_sift_down(h, 0);
            }
            trim(h);
        }
    }
    return h->count ? &h->slots[0] : NULL;
}

/* rl_heap_update's date moved earlier, or stayed (then nothing moves). */
void rl_heap_settle(rl_heap *h, size_t i, double old) {
    if (!(h->slots[i].when < old)) return;
    sift_up(h, i);
    trim(h); /* moving up, it may have traded places with a hole at the end */
}

/* Whether a full array grows to give a park room: while it is small (up to 1 MiB of slots), where
 * a copy is cheap and the room then spares every later park a hole, and its holes are too few to
 * pay for a re-heap. A large one does not: a copy of megabytes and its page faults would cost
 * more than the holes that parks in place leave. */
static inline bool grow_to_park(rl_heap *h) {
    return h->capacity < RL_HEAP_PARK_IN_PLACE_FROM && !holes_pay(h) && !grow(h);
}

/* The node at i (in the heap), keyed at INFINITY now: a hole where it was, and the node in the
 * parked region when it has room (the heap's room, the slot at the end the hole gives up, or a
 * small array grown). Otherwise, in a full array, the node stays in its hole, named by it, until
 * the hole leaves: O(1), where a re-heap or the copy of a large array was O(n) in one park. */
void rl_heap_park_any(rl_heap *h, size_t i) {
    rl_heap_node *node = h->slots[i].node;
    if (h->count + h->parked < h->capacity || i == h->count - 1 || grow_to_park(h)) {
        leave_hole(h, i); /* which may compact: room only grows */
        park_in(h, node);
        return;
    }
    h->slots[i].node = rl_heap_tagged(node);
    h->holes++;
    h->parked_in_heap++;
    compact_if_outnumbered(h);
}

void rl_heap_park(rl_heap *h, size_t i) { rl_heap_park_at(h, i); }

/* The parked node at i, keyed at when now (not INFINITY): at the end of the heap, and up. The
 * slot it leaves in the region makes the room. */
void rl_heap_unpark(rl_heap *h, size_t i, double when) {
    rl_heap_node *node = unpark_from(h, i);
    size_t at = h->count++;
    place(h, at, (rl_heap_slot){when, node});
    sift_up(h, at);
    trim(h); /* it may have traded places with a hole */
}

/* The node parked in the hole at i, keyed at when now (not INFINITY): at the end of the heap and
 * up, as from the region, when there is room; else back in its slot, sifting from there. */
void rl_heap_unpark_in_heap(rl_heap *h, size_t i, double when) {
    rl_heap_node *node = rl_heap_named(&h->slots[i]);
    h->parked_in_heap--;
    if (h->count + h->parked < h->capacity) {
        h->slots[i].node = RL_HEAP_HOLE;
        size_t at = h->count++;
        place(h, at, (rl_heap_slot){when, node});
        sift_up(h, at);
        trim(h);
        return;
    }
    h->holes--;
    double old = h->slots[i].when;
    h->slots[i] = (rl_heap_slot){when, node};
    if (when > old) {
        rl_heap_sift_down(h, i);
    } else {
        sift_up(h, i);
        trim(h);
    }
}

void rl_heap_visit_due_below(rl_heap *h, size_t i, double date, bool (*visit)(void *ctx, const rl_heap_slot *slot),
                             void *ctx) {
    /* The stack holds at most 3 slots per level below i plus 4 children, and 32-bit indexes
     * make at most 17 levels. */
    size_t stack[64], depth = 0;
    stack[depth++] = i;
    while (depth) {
        size_t j = stack[--depth];
        if (rl_heap_live(&h->slots[j]) && !visit(ctx, &h->slots[j])) continue;
        for (size_t c = j * RL_HEAP_ARITY + 1; c <= j * RL_HEAP_ARITY + RL_HEAP_ARITY && c < h->count; c++)
            if (h->slots[c].when <= date) stack[depth++] = c;
    }
}

void rl_heap_free(rl_heap *h) {
    if (h->slots) free(h->slots - h->pad);
    h->slots = NULL;
    h->count = h->capacity = h->holes = h->parked = h->parked_in_heap = h->pad = 0;
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
        if (rl_heap_live(&h->slots[i]) && latest(h->slots[i].node, when, &until)) {
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
    size_t holes = 0, parked_in_heap = 0;
    /* Placed wherever the block allows it (malloc aligns it to a slot at least, on the systems
     * this is built for): the pad is the one the block's start calls for. */
    const rl_heap_slot *block = h->slots ? h->slots - h->pad : NULL;
    if (block && (h->pad != pad_for(block) || (RL_HEAP_PLACED && (uintptr_t)block % sizeof(rl_heap_slot) == 0 &&
                                               (uintptr_t)&h->slots[1] % RL_HEAP_LINE))) {
        *why = "the slots are not placed so that a node's children share a cache line";
        return false;
    }
    for (size_t i = 0; i < h->count; i++) {
        const rl_heap_slot *s = &h->slots[i];
        rl_heap_node *named = rl_heap_named(s);
        if (!rl_heap_live(s)) holes++;
        if (named && !rl_heap_live(s)) parked_in_heap++;
        if (named && named->index != i) {
            *why = "a node's stored index is not its position";
            return false;
        }
        if (i > 0 && s->when < h->slots[(i - 1) / RL_HEAP_ARITY].when) {
            *why = "a child is due before its parent";
            return false;
        }
        if (rl_heap_live(s) && !named) {
            *why = "a slot of the heap names nothing and is not a hole";
            return false;
        }
        if (rl_heap_live(s) && s->when == __builtin_inf()) {
            *why = "a node keyed at INFINITY is in the heap's order, not parked";
            return false;
        }
    }
    if (holes != h->holes) {
        *why = "the hole count is wrong";
        return false;
    }
    if (parked_in_heap != h->parked_in_heap) {
        *why = "the count of nodes parked in holes is wrong";
        return false;
    }
    if (h->count && !rl_heap_live(&h->slots[h->count - 1])) {
        *why = "a hole at the end was not trimmed";
        return false;
    }
    if (h->holes - h->parked_in_heap > h->count - h->holes + h->parked + h->parked_in_heap) {
        *why = "holes outnumber nodes";
        return false;
    }
    if (h->count + h->parked > h->capacity) {
        *why = "the heap and the parked region overlap";
        return false;
    }
    for (size_t i = h->capacity - h->parked; i < h->capacity; i++) {
        if (!rl_heap_live(&h->slots[i]) || !h->slots[i].node || h->slots[i].node->index != i) {
            *why = "a parked slot has no node, or its node another index";
            return false;
        }
        if (h->slots[i].when != __builtin_inf()) {
            *why = "a parked node is not keyed at INFINITY";
            return false;
        }
    }
    return true;
}
