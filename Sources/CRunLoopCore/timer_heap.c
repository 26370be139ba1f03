/* timer_heap.c - the 4-ary heap declared in timer_heap.h. */
#include "timer_heap.h"
#include "alloc.h"

#include <errno.h>
#include <stdlib.h>

static inline void place(rl_heap *h, size_t i, rl_heap_node *n) {
    h->nodes[i] = n;
    n->index = i;
}

static void sift_up(rl_heap *h, size_t i) {
    rl_heap_node *n = h->nodes[i];
    while (i > 0) {
        size_t parent = (i - 1) / RL_HEAP_ARITY;
        if (!rl_heap_node_less(n, h->nodes[parent])) break;
        place(h, i, h->nodes[parent]);
        i = parent;
    }
    place(h, i, n);
}

static void sift_down(rl_heap *h, size_t i) {
    rl_heap_node *n = h->nodes[i];
    for (;;) {
        size_t first = i * RL_HEAP_ARITY + 1;
        if (first >= h->count) break;
        size_t last = first + RL_HEAP_ARITY < h->count ? first + RL_HEAP_ARITY : h->count;
        size_t best = first;
        for (size_t c = first + 1; c < last; c++)
            if (rl_heap_node_less(h->nodes[c], h->nodes[best])) best = c;
        if (!rl_heap_node_less(h->nodes[best], n)) break;
        place(h, i, h->nodes[best]);
        i = best;
    }
    place(h, i, n);
}

int rl_heap_insert(rl_heap *h, rl_heap_node *node) {
    if (h->count == h->capacity) {
        size_t cap = h->capacity ? h->capacity * 2 : 8;
        rl_heap_node **grown = rl_realloc(h->nodes, cap * sizeof *grown);
        if (!grown) return -ENOMEM;
        h->nodes = grown;
        h->capacity = cap;
    }
    place(h, h->count++, node);
    sift_up(h, node->index);
    return 0;
}

void rl_heap_remove(rl_heap *h, rl_heap_node *node) {
    size_t i = node->index;
    if (i == RL_HEAP_NOT_IN_HEAP || i >= h->count || h->nodes[i] != node) return;
    node->index = RL_HEAP_NOT_IN_HEAP;
    rl_heap_node *last = h->nodes[--h->count];
    if (last == node) return;
    place(h, i, last);
    rl_heap_update(h, last);
}

void rl_heap_update(rl_heap *h, rl_heap_node *node) {
    size_t i = node->index;
    if (i == RL_HEAP_NOT_IN_HEAP) return;
    if (i > 0 && rl_heap_node_less(node, h->nodes[(i - 1) / RL_HEAP_ARITY]))
        sift_up(h, i);
    else
        sift_down(h, i);
}

void rl_heap_free(rl_heap *h) {
    free(h->nodes);
    h->nodes = NULL;
    h->count = h->capacity = 0;
}

bool rl_heap_verify(const rl_heap *h, const char **why) {
    for (size_t i = 0; i < h->count; i++) {
        if (h->nodes[i]->index != i) {
            *why = "a node's stored index is not its position";
            return false;
        }
        if (i > 0 && rl_heap_node_less(h->nodes[i], h->nodes[(i - 1) / RL_HEAP_ARITY])) {
            *why = "a child orders before its parent";
            return false;
        }
    }
    return true;
}
