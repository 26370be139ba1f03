/* containers.c - the pointer vector, the pointer set and the ready vector of containers.h. */
#include "containers.h"
#include "alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void rl_ptrvec_free_allocated(rl_ptrvec *v) {
    free(v->items);
    rl_ptrvec_init(v);
}

int rl_ptrvec_grow_and_push(rl_ptrvec *v, void *item) {
    if (!v->items) rl_ptrvec_init(v);
    if (v->count == v->capacity) {
        size_t cap = v->capacity * 2;
        void **grown;
        if (v->items == v->inline_items) {
            grown = rl_malloc(cap * sizeof *grown);
            if (grown) memcpy(grown, v->items, v->count * sizeof *grown);
        } else {
            grown = rl_realloc(v->items, cap * sizeof *grown);
        }
        if (!grown) return -ENOMEM;
        v->items = grown;
        v->capacity = cap;
    }
    v->items[v->count++] = item;
    return 0;
}

void rl_ptrvec_remove_at(rl_ptrvec *v, size_t index) {
    memmove(&v->items[index], &v->items[index + 1], (v->count - index - 1) * sizeof *v->items);
    v->count--;
}

void rl_ptrvec_remove(rl_ptrvec *v, void *item) {
    for (size_t i = 0; i < v->count; i++)
        if (v->items[i] == item) {
            rl_ptrvec_remove_at(v, i);
            return;
        }
}

bool rl_ptrvec_contains(const rl_ptrvec *v, const void *item) {
    for (size_t i = 0; i < v->count; i++)
        if (v->items[i] == item) return true;
    return false;
}

static int grow(rl_ptrset *s) {
    size_t cap = s->capacity ? s->capacity * 2 : 8;
    void **slots = rl_calloc(cap, sizeof *slots);
    if (!slots) return -ENOMEM;
    for (size_t i = 0; i < s->capacity; i++) {
        void *item = s->slots[i];
        if (!item) continue;
        size_t j = rl_ptrset_slot_of(item, cap);
        while (slots[j]) j = (j + 1) & (cap - 1);
        slots[j] = item;
    }
    free(s->slots);
    s->slots = slots;
    s->capacity = cap;
    return 0;
}

int rl_ptrset_add(rl_ptrset *s, void *item) {
    if (rl_ptrset_contains(s, item)) return 0;
    if ((s->count + 1) * 4 > s->capacity * 3) {
        int rc = grow(s);
        if (rc) return rc;
    }
    size_t j = rl_ptrset_slot_of(item, s->capacity);
    while (s->slots[j]) j = (j + 1) & (s->capacity - 1);
    s->slots[j] = item;
    s->count++;
    return 1;
}

bool rl_ptrset_remove(rl_ptrset *s, void *item) {
    if (!s->capacity) return false;
    size_t mask = s->capacity - 1, j = rl_ptrset_slot_of(item, s->capacity);
    while (s->slots[j] != item) {
        if (!s->slots[j]) return false;
        j = (j + 1) & mask;
    }
    /* Backward-shift deletion: pull later members of the probe run into the hole, so lookups
     * never need tombstones. */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; s->slots[k]; k = (k + 1) & mask) {
        size_t home = rl_ptrset_slot_of(s->slots[k], s->capacity);
        bool movable = hole <= k ? (home <= hole || home > k) : (home <= hole && home > k);
        if (movable) {
            s->slots[hole] = s->slots[k];
            hole = k;
        }
    }
    s->slots[hole] = NULL;
    s->count--;
    return true;
}

void rl_ptrset_free(rl_ptrset *s) {
    free(s->slots);
    s->slots = NULL;
    s->count = s->capacity = 0;
}

void rl_ready_vec_free_allocated(rl_ready_vec *v) {
    free(v->items);
    rl_ready_vec_init(v);
}

/* Room for at least want items; 0 or -ENOMEM with nothing changed. */
int rl_ready_vec_reserve(rl_ready_vec *v, size_t want) {
    if (!v->items) rl_ready_vec_init(v);
    if (want <= v->capacity) return 0;
    size_t cap = v->capacity * 2;
    while (cap < want) cap *= 2;
    rl_ready *grown;
    if (v->items == v->inline_items) {
        grown = rl_malloc(cap * sizeof *grown);
        if (grown) memcpy(grown, v->items, v->count * sizeof *grown);
    } else {
        grown = rl_realloc(v->items, cap * sizeof *grown);
    }
    if (!grown) return -ENOMEM;
    v->items = grown;
    v->capacity = cap;
    return 0;
}

int rl_ready_vec_grow_and_push(rl_ready_vec *v, rl_ready item) {
    if (rl_ready_vec_reserve(v, v->count + 1)) return -ENOMEM;
    v->items[v->count++] = item;
    return 0;
}

