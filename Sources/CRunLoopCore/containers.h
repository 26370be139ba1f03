/*
 * containers.h - the core's small containers (containers.c): a pointer vector, a pointer set,
 * and the vector of sources a pass is about to call. None of them takes a lock or knows a loop;
 * they allocate through alloc.h, so fault injection reaches them, and report -ENOMEM.
 */
#ifndef RL_CONTAINERS_H
#define RL_CONTAINERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef RL_HIDDEN
#define RL_HIDDEN __attribute__((visibility("hidden")))
#endif

/* ---- Pointer vector ---- */

/* A growable array of pointers with room for a few inline, so short lists never allocate. */
typedef struct {
    void **items;
    size_t count, capacity;
    void *inline_items[16];
} rl_ptrvec;

/* Init and free are inline: every run sets up and frees vectors on its stack frame, and they
 * seldom leave their inline storage. Free leaves the vector empty and usable. */
static inline void rl_ptrvec_init(rl_ptrvec *v) {
    v->items = v->inline_items;
    v->count = 0;
    v->capacity = sizeof v->inline_items / sizeof v->inline_items[0];
}
RL_HIDDEN void rl_ptrvec_free_allocated(rl_ptrvec *v);
static inline void rl_ptrvec_free(rl_ptrvec *v) {
    if (v->items == v->inline_items) v->count = 0;
    else rl_ptrvec_free_allocated(v); /* or never initialized (zeroed) */
}
RL_HIDDEN int rl_ptrvec_grow_and_push(rl_ptrvec *v, void *item);
static inline int rl_ptrvec_push(rl_ptrvec *v, void *item) {
    if (v->items && v->count < v->capacity) { /* the hot case, inline */
        v->items[v->count++] = item;
        return 0;
    }
    return rl_ptrvec_grow_and_push(v, item);
}
RL_HIDDEN void rl_ptrvec_remove_at(rl_ptrvec *v, size_t index); /* keeps order */
RL_HIDDEN void rl_ptrvec_remove(rl_ptrvec *v, void *item);      /* first occurrence */
RL_HIDDEN bool rl_ptrvec_contains(const rl_ptrvec *v, const void *item);

/* ---- Pointer set ---- */

/* A set of pointers: open addressing, linear probing, deletion by backward shift. */
typedef struct {
    void **slots;
    size_t count, capacity; /* capacity is 0 or a power of two */
} rl_ptrset;

static inline size_t rl_ptrset_slot_of(const void *item, size_t capacity) {
    uint64_t h = (uint64_t)(uintptr_t)item * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (capacity - 1);
}

RL_HIDDEN int rl_ptrset_add(rl_ptrset *s, void *item); /* 1 added, 0 present, -ENOMEM */
RL_HIDDEN bool rl_ptrset_remove(rl_ptrset *s, void *item);
/* Inline: a ready fd asks it once per pass. */
static inline bool rl_ptrset_contains(const rl_ptrset *s, const void *item) {
    if (!s->capacity) return false;
    for (size_t j = rl_ptrset_slot_of(item, s->capacity); s->slots[j]; j = (j + 1) & (s->capacity - 1))
        if (s->slots[j] == item) return true;
    return false;
}
/* Start loading the slot where a lookup of item begins, to overlap the misses of many lookups. */
static inline void rl_ptrset_prefetch(const rl_ptrset *s, const void *item) {
    if (s->capacity) __builtin_prefetch(&s->slots[rl_ptrset_slot_of(item, s->capacity)]);
}
RL_HIDDEN void rl_ptrset_free(rl_ptrset *s);
/* Iterate: for (size_t i = 0; i < s->capacity; i++) if (s->slots[i]) ... */

/* ---- Ready vector ---- */

struct rl_source;

/* A source a pass has taken (retained) to call out, with its order copied so that sorting reads
 * no source, and the events to report (fd sources; 0 for signalled ones). */
typedef struct {
    struct rl_source *source;
    long order;
    unsigned events;
} rl_ready;

/* A growable array of rl_ready, with room for a few inline: a pass that takes few sources never
 * allocates. */
typedef struct {
    rl_ready *items;
    size_t count, capacity;
    rl_ready inline_items[16];
} rl_ready_vec;

static inline void rl_ready_vec_init(rl_ready_vec *v) {
    v->items = v->inline_items;
    v->count = 0;
    v->capacity = sizeof v->inline_items / sizeof v->inline_items[0];
}
RL_HIDDEN void rl_ready_vec_free_allocated(rl_ready_vec *v);
static inline void rl_ready_vec_free(rl_ready_vec *v) {
    if (v->items == v->inline_items) v->count = 0;
    else rl_ready_vec_free_allocated(v);
}
RL_HIDDEN int rl_ready_vec_grow_and_push(rl_ready_vec *v, rl_ready item);
/* Room for want items (0), or -ENOMEM with v unchanged. */
RL_HIDDEN int rl_ready_vec_reserve(rl_ready_vec *v, size_t want);
static inline int rl_ready_vec_push(rl_ready_vec *v, struct rl_source *source, long order, unsigned events) {
    rl_ready item = {source, order, events};
    if (v->count < v->capacity) {
        v->items[v->count++] = item;
        return 0;
    }
    return rl_ready_vec_grow_and_push(v, item);
}
/* Sort items [0, count) by ascending order, keeping equal ones in the order they were taken, when
 * items [0, sorted) are in order already (sort.c). */
RL_HIDDEN void rl_ready_vec_sort_rest(rl_ready_vec *v, size_t sorted);
/* Sort by ascending order, keeping equal ones in the order they were taken. Needs room for as many
 * again to merge in; without it (out of memory), an insertion sort: slower, never wrong. The usual
 * case, already sorted, costs one look at each, inline. */
static inline void rl_ready_vec_sort(rl_ready_vec *v) {
    size_t k = 1;
    while (k < v->count && v->items[k].order >= v->items[k - 1].order) k++;
    if (k < v->count) rl_ready_vec_sort_rest(v, k);
}

#endif
