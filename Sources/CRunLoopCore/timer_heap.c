/* timer_heap.c - the 4-ary heap declared in timer_heap.h. */
#include "timer_heap.h"
#include "alloc.h"

#include <errno.h>
#include <stdlib.h>

static inline void place(rl_heap *h, size_t i, rl_heap_slot s) {
    h->slots[i] = s;
    s.node->index = (uint32_t)i;
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

static void sift_down(rl_heap *h, size_t i) {
    rl_heap_slot s = h->slots[i];
    for (;;) {
        size_t first = i * RL_HEAP_ARITY + 1;
        if (first >= h->count) break;
        size_t last = first + RL_HEAP_ARITY < h->count ? first + RL_HEAP_ARITY : h->count;
        size_t best = first;
        for (size_t c = first + 1; c < last; c++)
            if (rl_heap_slot_less(&h->slots[c], &h->slots[best])) best = c;
        if (!rl_heap_slot_less(&h->slots[best], &s)) break;
        place(h, i, h->slots[best]);
        i = best;
    }
    place(h, i, s);
}

static void restore(rl_heap *h, size_t i) {
    if (i > 0 && rl_heap_slot_less(&h->slots[i], &h->slots[(i - 1) / RL_HEAP_ARITY]))
        sift_up(h, i);
    else
        sift_down(h, i);
}

int rl_heap_insert(rl_heap *h, rl_heap_node *node, double when) {
    if (h->count == h->capacity) {
        size_t cap = h->capacity ? h->capacity * 2 : 8;
        if (cap > RL_HEAP_NOT_IN_HEAP) return -ENOMEM; /* indexes are 32 bits */
        rl_heap_slot *grown = rl_realloc(h->slots, cap * sizeof *grown);
        if (!grown) return -ENOMEM;
        h->slots = grown;
        h->capacity = cap;
    }
    size_t i = h->count++;
    place(h, i, (rl_heap_slot){when, node});
    sift_up(h, i);
    return 0;
}

void rl_heap_remove(rl_heap *h, rl_heap_node *node) {
    if (!rl_heap_contains(h, node)) return;
    size_t i = node->index;
    node->index = RL_HEAP_NOT_IN_HEAP;
    rl_heap_slot last = h->slots[--h->count];
    if (last.node != node) {
        place(h, i, last);
        restore(h, i);
    }
    /* After a burst, give memory back by halves; the gap between the grow and shrink points
     * keeps a heap that hovers around a size from reallocating. Failing to shrink is harmless. */
    if (h->capacity > 256 && h->count <= h->capacity / 4) {
        rl_heap_slot *smaller = realloc(h->slots, h->capacity / 2 * sizeof *smaller);
        if (smaller) {
            h->slots = smaller;
            h->capacity /= 2;
        }
    }
}

void rl_heap_update(rl_heap *h, rl_heap_node *node, double when) {
    if (!rl_heap_contains(h, node)) return;
    h->slots[node->index].when = when;
    restore(h, node->index);
}

void rl_heap_free(rl_heap *h) {
    free(h->slots);
    h->slots = NULL;
    h->count = h->capacity = 0;
}

bool rl_heap_verify(const rl_heap *h, const char **why) {
    for (size_t i = 0; i < h->count; i++) {
        if (h->slots[i].node->index != i) {
            *why = "a node's stored index is not its position";
            return false;
        }
        if (i > 0 && rl_heap_slot_less(&h->slots[i], &h->slots[(i - 1) / RL_HEAP_ARITY])) {
            *why = "a child orders before its parent";
            return false;
        }
    }
    return true;
}
