/* hist.c - log-bucket histogram, see hist.h. */
#include "hist.h"
#include <stdlib.h>

hist_t *hist_new(void)
{
    hist_t *h = calloc(1, sizeof *h);
    if (h) h->min = UINT64_MAX;
    return h;
}

void hist_free(hist_t *h) { free(h); }

static unsigned index_of(uint64_t v)
{
    unsigned e;
    if (v < 2 * HIST_SUB) return (unsigned)v;
    e = (unsigned)(63 - __builtin_clzll(v)) - HIST_SUB_BITS;
    return (e + 1) * HIST_SUB + (unsigned)((v >> e) - HIST_SUB);
}

static uint64_t middle_of(unsigned i)
{
    unsigned e;
    uint64_t sub;
    if (i < 2 * HIST_SUB) return i;
    e = i / HIST_SUB - 1;
    sub = i % HIST_SUB + HIST_SUB;
    return (sub << e) + ((1ull << e) >> 1);
}

void hist_add(hist_t *h, uint64_t v)
{
    h->counts[index_of(v)]++;
    h->n++;
    h->sum += (double)v;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
}

uint64_t hist_quantile(const hist_t *h, double q)
{
    uint64_t want, seen = 0;
    if (!h->n) return 0;
    if (q >= 1) return h->max;
    want = (uint64_t)(q * (double)h->n) + 1;
    if (want > h->n) want = h->n;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= want) {
            uint64_t v = middle_of(i);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

double hist_mean(const hist_t *h) { return h->n ? h->sum / (double)h->n : 0; }

void hist_merge(hist_t *dst, const hist_t *src)
{
    if (!src->n) return;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) dst->counts[i] += src->counts[i];
    dst->n += src->n;
    dst->sum += src->sum;
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
}

int hist_next(const hist_t *h, unsigned *i, uint64_t *value, uint64_t *count)
{
    for (; *i < HIST_BUCKETS; ++*i)
        if (h->counts[*i]) {
            *value = middle_of(*i);
            *count = h->counts[*i];
            ++*i;
            return 1;
        }
    return 0;
}
