/* containers.c - the pointer vector and pointer set of internal.h. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void rl_ptrvec_init(rl_ptrvec *v) {
    v->items = v->inline_items;
    v->count = 0;
    v->capacity = sizeof v->inline_items / sizeof v->inline_items[0];
}

void rl_ptrvec_free(rl_ptrvec *v) {
    if (v->items == v->inline_items) {
        v->count = 0;
        return;
    }
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

static inline size_t slot_of(const void *item, size_t capacity) {
    uint64_t h = (uint64_t)(uintptr_t)item * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (capacity - 1);
}

static int grow(rl_ptrset *s) {
    size_t cap = s->capacity ? s->capacity * 2 : 8;
    void **slots = rl_calloc(cap, sizeof *slots);
    if (!slots) return -ENOMEM;
    for (size_t i = 0; i < s->capacity; i++) {
        void *item = s->slots[i];
        if (!item) continue;
        size_t j = slot_of(item, cap);
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
    size_t j = slot_of(item, s->capacity);
    while (s->slots[j]) j = (j + 1) & (s->capacity - 1);
    s->slots[j] = item;
    s->count++;
    return 1;
}

bool rl_ptrset_contains(const rl_ptrset *s, const void *item) {
    if (!s->capacity) return false;
    for (size_t j = slot_of(item, s->capacity); s->slots[j]; j = (j + 1) & (s->capacity - 1))
        if (s->slots[j] == item) return true;
    return false;
}

bool rl_ptrset_remove(rl_ptrset *s, void *item) {
    if (!s->capacity) return false;
    size_t mask = s->capacity - 1, j = slot_of(item, s->capacity);
    while (s->slots[j] != item) {
        if (!s->slots[j]) return false;
        j = (j + 1) & mask;
    }
    /* Backward-shift deletion: pull later members of the probe run into the hole, so lookups
     * never need tombstones. */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; s->slots[k]; k = (k + 1) & mask) {
        size_t home = slot_of(s->slots[k], s->capacity);
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

/* Insertion sort: stable, in place, for short runs and as the fallback when scratch is missing. */
static void insertion_sort(void **items, size_t n, bool (*less)(const void *, const void *)) {
    for (size_t i = 1; i < n; i++) {
        void *x = items[i];
        size_t j = i;
        for (; j > 0 && less(x, items[j - 1]); j--) items[j] = items[j - 1];
        items[j] = x;
    }
}

void rl_ptrvec_sort_stable(rl_ptrvec *v, bool (*less)(const void *, const void *), rl_ptrvec *scratch) {
    size_t n = v->count;
    if (n < 2) return;
    /* Already sorted (the usual case: equal orders) costs one look at each. */
    size_t k = 1;
    while (k < n && !less(v->items[k], v->items[k - 1])) k++;
    if (k == n) return;
    enum { RUN = 16 };
    scratch->count = 0;
    while (scratch->count < n && rl_ptrvec_push(scratch, NULL) == 0) {}
    if (scratch->count < n) { /* out of memory: still stable, only slower */
        insertion_sort(v->items, n, less);
        scratch->count = 0;
        return;
    }
    for (size_t i = 0; i < n; i += RUN) insertion_sort(v->items + i, n - i < RUN ? n - i : RUN, less);
    void **from = v->items, **to = scratch->items;
    for (size_t width = RUN; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) to[o++] = less(from[b], from[a]) ? from[b++] : from[a++];
            while (a < mid) to[o++] = from[a++];
            while (b < hi) to[o++] = from[b++];
        }
        void **t = from;
        from = to;
        to = t;
    }
    if (from != v->items) memcpy(v->items, from, n * sizeof *from);
    scratch->count = 0;
}
