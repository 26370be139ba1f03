/* sort.c - the sorts of sort.h: due timers (a quicksort, radix sorts on dates and seqs) and the
 * stable merge sort of a pass's taken sources. */
#include "sort.h"
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

static inline bool due_less(const rl_due_timer *a, const rl_due_timer *b) { return rl_heap_slot_less(&a->key, &b->key); }

/* Sort by key: quicksort (median of three) down to short runs, then insertion sort. Keys are
 * unique within a mode (every entry has its own seq), so stability does not arise. */
static void sort_due(rl_due_timer *d, size_t n) {
    while (n > 16) {
        size_t mid = n / 2;
        if (due_less(&d[mid], &d[0])) { rl_due_timer x = d[mid]; d[mid] = d[0]; d[0] = x; }
        if (due_less(&d[n - 1], &d[0])) { rl_due_timer x = d[n - 1]; d[n - 1] = d[0]; d[0] = x; }
        if (due_less(&d[n - 1], &d[mid])) { rl_due_timer x = d[n - 1]; d[n - 1] = d[mid]; d[mid] = x; }
        rl_due_timer pivot = d[mid];
        size_t i = 0, j = n - 1;
        for (;;) {
            while (due_less(&d[i], &pivot)) i++;
            while (due_less(&pivot, &d[j])) j--;
            if (i >= j) break;
            rl_due_timer x = d[i]; d[i] = d[j]; d[j] = x;
            i++;
            j--;
        }
        /* d[0..j] <= pivot <= d[j+1..]: recurse into the smaller side, loop on the larger. */
        size_t left = j + 1;
        if (left < n - left) {
            sort_due(d, left);
            d += left;
            n -= left;
        } else {
            sort_due(d + left, n - left);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        rl_due_timer x = d[i];
        size_t j = i;
        for (; j > 0 && due_less(&x, &d[j - 1]); j--) d[j] = d[j - 1];
        d[j] = x;
    }
}

/* A date's bits as an integer: dates are never negative, and the bits of non-negative doubles
 * order as the numbers do. */
static inline uint64_t date_bits(double when) {
    uint64_t b;
    memcpy(&b, &when, sizeof b);
    return b;
}

/* One least-significant-digit radix sort of d by a 64-bit key (the date's bits, or tie), `bits`
 * bits a pass, skipping the digits every key shares (dates due within a few milliseconds share
 * their top twenty-odd bits; the seqs of a batch armed together, all but their low dozen). Each
 * pass is stable, O(n), and compares nothing. The result is in d; scratch has room for n. */
static inline uint64_t sort_key(const rl_due_timer *x, bool by_tie) { return by_tie ? x->tie : date_bits(x->key.when); }

static void radix_by(rl_due_timer *d, size_t n, rl_due_timer *scratch, bool by_tie) {
    enum { MAX_DIGITS = 1 << 11 };
    unsigned bits = n < 4096 ? 8 : 11;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    uint64_t first = sort_key(&d[0], by_tie), varying = 0;
    for (size_t i = 1; i < n; i++) varying |= sort_key(&d[i], by_tie) ^ first;
    rl_due_timer *from = d, *to = scratch;
    uint32_t at[MAX_DIGITS];
    for (unsigned shift = 0; shift < 64; shift += bits) {
        if (!((varying >> shift) & mask)) continue;
        memset(at, 0, (mask + 1) * sizeof at[0]);
        for (size_t i = 0; i < n; i++) at[(sort_key(&from[i], by_tie) >> shift) & mask]++;
        uint32_t sum = 0;
        for (size_t k = 0; k <= mask; k++) {
            uint32_t c = at[k];
            at[k] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) to[at[(sort_key(&from[i], by_tie) >> shift) & mask]++] = from[i];
        rl_due_timer *x = from;
        from = to;
        to = x;
    }
    if (from != d) memcpy(d, from, n * sizeof *d);
}

/* Sort a run of due timers of one date by (order, seq): when they share their order (timers
 * seldom have one), by seq alone, a radix sort for a long run (a batch armed for the same date
 * from the loop's time: every one of them ties); else by comparison. */
static void sort_ties(rl_due_timer *d, size_t n, rl_due_timer *scratch) {
    if (n > 32) {
        long order = d[0].key.node->order;
        size_t i = 0;
        for (; i < n && d[i].key.node->order == order; i++) d[i].tie = d[i].key.node->seq;
        if (i == n) {
            radix_by(d, n, scratch, true);
            return;
        }
    }
    sort_due(d, n);
}

/* Sort many due timers: a radix sort on the dates' bits (radix_by: 8 bits a pass, 11 from 4096
 * timers on, where the digit table's scan is worth its fewer passes), then each run of one date
 * by (order, seq). O(n) a pass where the quicksort is O(n log n) with a comparison per step.
 * scratch: room for n more, or NULL (then allocated). False when there is no memory for the
 * scratch array: the caller sorts in place instead. */
static bool radix_sort_due(rl_due_timer *d, size_t n, rl_due_timer *scratch) {
    rl_due_timer *own = scratch ? NULL : rl_malloc(n * sizeof *own);
    if (!scratch && !(scratch = own)) return false;
    radix_by(d, n, scratch, false);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && d[j].key.when == d[i].key.when; j++) {}
        if (j - i > 1) sort_ties(d + i, j - i, scratch);
    }
    free(own);
    return true;
}

/* An insertion sort that gives up once it has moved more than a few times n: true when d is
 * sorted, false (d then still holds its timers, partly sorted) when the order was too far off.
 * The heap's array order, which rl_heap_visit_due gives, is the key order when the timers were
 * armed in the order of their dates, but for a few that a pop of the heap's top moved along one
 * path: nearly sorted, which this sorts in O(n) with no scratch. A tie of dates looks at the
 * nodes, which the phase reads next anyway: they are loaded a few ahead. */
static bool sort_nearly_sorted(rl_due_timer *d, size_t n) {
    enum { AHEAD = 8 };
    size_t budget = 4 * n;
    for (size_t i = 1; i < n; i++) {
        if (i + AHEAD < n) __builtin_prefetch(d[i + AHEAD].key.node);
        if (!due_less(&d[i], &d[i - 1])) continue;
        rl_due_timer x = d[i];
        size_t j = i;
        do {
            d[j] = d[j - 1];
            j--;
        } while (j > 0 && due_less(&x, &d[j - 1]) && budget && budget--);
        d[j] = x;
        if (!budget) return false;
    }
    return true;
}

void rl_sort_due(rl_due_timer *d, size_t n, rl_due_timer *scratch) {
    if (sort_nearly_sorted(d, n)) return;
    if (n < 256 || !radix_sort_due(d, n, scratch)) sort_due(d, n);
}

/* ---- Taken sources (rl_ready_vec): by order, equal orders in the order taken ---------------- */

/* Insertion sort of items [0, n), of which [0, sorted) are in order already: stable, in place;
 * for short runs, and when there is no room to merge. */
static void insertion_sort(rl_ready *items, size_t n, size_t sorted) {
    for (size_t i = sorted > 0 ? sorted : 1; i < n; i++) {
        rl_ready x = items[i];
        size_t j = i;
        for (; j > 0 && x.order < items[j - 1].order; j--) items[j] = items[j - 1];
        items[j] = x;
    }
}

void rl_ready_vec_sort_rest(rl_ready_vec *v, size_t sorted) {
    size_t n = v->count;
    enum { RUN = 16 };
    if (n <= RUN || rl_ready_vec_reserve(v, 2 * n)) {
        insertion_sort(v->items, n, sorted);
        return;
    }
    /* Bottom-up merge sort: sorted runs of RUN, then merges into the room past the items
     * (taking the left one on ties keeps equal orders in place), back and forth. */
    for (size_t i = 0; i < n; i += RUN) insertion_sort(v->items + i, n - i < RUN ? n - i : RUN, 1);
    rl_ready *from = v->items, *to = v->items + n;
    for (size_t width = RUN; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) to[o++] = from[b].order < from[a].order ? from[b++] : from[a++];
            while (a < mid) to[o++] = from[a++];
            while (b < hi) to[o++] = from[b++];
        }
        rl_ready *t = from;
        from = to;
        to = t;
    }
    if (from != v->items) memcpy(v->items, from, n * sizeof *from);
}
