/*
 * timer_heap.h - a 4-ary min-heap of nodes keyed by (when, order, seq). It knows nothing of
 * loops or timers: a node is embedded in whatever it orders and remembers its own index, so
 * removal and rekeying are O(log n) with no search.
 *
 * Why 4-ary: the four children of a node are adjacent in memory (one or two cache lines of
 * pointers), the tree is half as deep as a binary heap, and sift-down compares more per level
 * but touches fewer levels; for timer workloads (mostly inserts and pops near the top) this
 * beats a binary heap, as libev measured.
 */
#ifndef RL_TIMER_HEAP_H
#define RL_TIMER_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RL_HEAP_NOT_IN_HEAP SIZE_MAX

typedef struct rl_heap_node {
    double when;
    long order;
    uint64_t seq;
    size_t index; /* position in the heap, RL_HEAP_NOT_IN_HEAP when out */
} rl_heap_node;

typedef struct {
    rl_heap_node **nodes;
    size_t count, capacity;
} rl_heap;

#define RL_HEAP_ARITY 4

static inline bool rl_heap_node_less(const rl_heap_node *a, const rl_heap_node *b) {
    if (a->when != b->when) return a->when < b->when;
    if (a->order != b->order) return a->order < b->order;
    return a->seq < b->seq;
}

static inline rl_heap_node *rl_heap_top(const rl_heap *h) { return h->count ? h->nodes[0] : NULL; }

__attribute__((visibility("hidden"))) int rl_heap_insert(rl_heap *h, rl_heap_node *node);
__attribute__((visibility("hidden"))) void rl_heap_remove(rl_heap *h, rl_heap_node *node);
/* Restore order after node's key changed. */
__attribute__((visibility("hidden"))) void rl_heap_update(rl_heap *h, rl_heap_node *node);
__attribute__((visibility("hidden"))) void rl_heap_free(rl_heap *h);
/* Check every invariant (parent <= child, stored indexes); returns false and names the first
 * broken one in *why. The tests call it after mutations. */
__attribute__((visibility("hidden"))) bool rl_heap_verify(const rl_heap *h, const char **why);

#endif
