/* hist.h - a log-bucket latency histogram (HdrHistogram-style: 128 linear sub-buckets per power
 * of two, so a value is known to within 1/128 = 0.8%). Values are nanoseconds. */
#ifndef HIST_H
#define HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS (58u * HIST_SUB)

typedef struct {
    uint64_t counts[HIST_BUCKETS];
    uint64_t n, min, max;
    double sum;
} hist_t;

hist_t *hist_new(void);
void hist_free(hist_t *h);
void hist_add(hist_t *h, uint64_t v);
/* The value at quantile q in [0, 1] (the middle of its bucket, clipped to [min, max]). */
uint64_t hist_quantile(const hist_t *h, double q);
double hist_mean(const hist_t *h);
/* Add every sample of src to dst (rounds pooled for the plots and the JSON histogram). */
void hist_merge(hist_t *dst, const hist_t *src);
/* Iterate the non-empty buckets: *i starts at 0; returns 0 when done. */
int hist_next(const hist_t *h, unsigned *i, uint64_t *value, uint64_t *count);

#endif
