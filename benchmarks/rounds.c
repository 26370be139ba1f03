/* rounds.c - interleaved rounds: every benchmark runs each peer once per round, in an order
 * rotated by one place per round, and keeps one value per round of every figure. A figure is
 * then reported as the median over the rounds with the worst and best round beside it: a
 * noisy neighbour (another build, a vCPU preempted by the host) spoils a round of every peer
 * alike instead of all the runs of the peer that happened to be measured at that moment. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void series_add(series_t *s, double v)
{
    if (s->n < MAX_ROUNDS) s->v[s->n++] = v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double series_median(const series_t *s)
{
    double v[MAX_ROUNDS];
    if (!s->n) return NAN;
    memcpy(v, s->v, (size_t)s->n * sizeof *v);
    qsort(v, (size_t)s->n, sizeof *v, cmp_double);
    return s->n & 1 ? v[s->n / 2] : (v[s->n / 2 - 1] + v[s->n / 2]) / 2;
}

double series_min(const series_t *s)
{
    double m = s->n ? s->v[0] : NAN;
    for (int i = 1; i < s->n; i++) if (s->v[i] < m) m = s->v[i];
    return m;
}

double series_max(const series_t *s)
{
    double m = s->n ? s->v[0] : NAN;
    for (int i = 1; i < s->n; i++) if (s->v[i] > m) m = s->v[i];
    return m;
}

series_t series_scaled(const series_t *s, double factor)
{
    series_t out = *s;
    for (int i = 0; i < out.n; i++) out.v[i] *= factor;
    return out;
}

/* key: the median (the key the figure always had); key_spread: min, max, rounds, values. */
void json_series(json_t *j, const char *key, const series_t *s)
{
    char spread[96];
    json_num(j, key, series_median(s));
    snprintf(spread, sizeof spread, "%s_spread", key);
    json_obj(j, spread);
    json_num(j, "min", series_min(s));
    json_num(j, "max", series_max(s));
    json_int(j, "rounds", s->n);
    json_arr(j, "values");
    for (int i = 0; i < s->n; i++) json_num(j, NULL, s->v[i]);
    json_end(j, ']');
    json_end(j, '}');
}

void table_series(const char *metric, const char *peer, const series_t *s, const char *unit, int sense)
{
    if (s->n) table_add_spread(metric, peer, series_median(s), series_min(s), series_max(s), s->n,
                               unit, sense);
}

int round_order(peer_t **peers, int n, int (*runs)(const peer_t *p), int round, int *order)
{
    int idx[MAX_PEERS], m = 0;
    for (int i = 0; i < n && m < MAX_PEERS; i++)
        if (!runs || runs(peers[i])) idx[m++] = i;
    for (int k = 0; k < m; k++) order[k] = idx[(k + round) % m];
    return m;
}

/* Progress: "  round 2/10: epoll futex CRunLoop ...", one name per finished peer. */
static int cur_round, cur_rounds;

void round_begin(int round, int rounds)
{
    cur_round = round;
    cur_rounds = rounds;
    printf("  round %2d/%d:", round + 1, rounds);
    fflush(stdout);
}

void round_done(const char *what)
{
    printf(" %s", what);
    fflush(stdout);
}

/* The end of the line: the estimate of the whole run's time left (progress.c). */
void round_end(void)
{
    char left[32];
    progress_round(cur_round + 1, cur_rounds);
    printf("  ... %s\n", progress_left_str(left, sizeof left));
}
