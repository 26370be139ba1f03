/* latency.c - benchmark 1: cross-thread wakeup latency, one-way and ping-pong.
 *
 * One-way: thread A stores a CLOCK_MONOTONIC stamp, sends a wakeup to B's loop, and waits
 * (spinning on its own CPU) for B's callback to acknowledge; B's callback records now - stamp.
 * A then sleeps ~20 us so that B is back asleep before the next sample: every sample is a wakeup
 * of a sleeping loop. Ping-pong: A's and B's loops wake each other in turn; A records the round
 * trip between two of its callbacks. */
#include "host.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const bench_opts_t *o;
    host_t b;
    _Atomic uint64_t stamp;
    _Atomic long ack;
    _Atomic int done;
    long seen;
    hist_t *h;
} oneway_t;

static void oneway_cb(void *arg)
{
    oneway_t *w = arg;
    uint64_t t = now_ns();
    if (atomic_load(&w->done)) {
        w->b.p->stop(w->b.loop);
        return;
    }
    if (w->seen++ >= w->o->lat_warmup) hist_add(w->h, t - atomic_load(&w->stamp));
    atomic_fetch_add_explicit(&w->ack, 1, memory_order_release);
}

static int run_oneway(const bench_opts_t *o, peer_t *p, hist_t *h)
{
    oneway_t *w = calloc(1, sizeof *w);
    long total = o->lat_samples + o->lat_warmup, i;
    int rc = 0;
    w->o = o;
    w->h = h;
    host_start(&w->b, p, o->cpu_b, oneway_cb, w);
    host_wait_ready(&w->b);
    cpu_set_t before;
    bool restore = o->cpu_a >= 0 && pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
    if (o->cpu_a >= 0) pin_self(o->cpu_a);
    for (i = 0; i < total; i++) {
        atomic_store(&w->stamp, now_ns());
        p->async_send(w->b.async);
        if (wait_at_least(&w->ack, i + 1, 2.0) != 0) { rc = -1; break; }
        sleep_ns(20000);
    }
    /* Later benchmarks create threads from this one: give it back every CPU. */
    if (restore) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    atomic_store(&w->done, 1);
    p->async_send(w->b.async);
    host_release(&w->b);
    host_join(&w->b);
    free(w);
    return rc;
}

typedef struct {
    const bench_opts_t *o;
    host_t a, b;
    long count, total;
    uint64_t last;
    _Atomic int done;
    hist_t *h;
} pingpong_t;

static void ping_cb(void *arg)      /* on A */
{
    pingpong_t *w = arg;
    uint64_t t = now_ns();
    if (w->count > 0 && w->count > w->o->lat_warmup) hist_add(w->h, t - w->last);
    if (++w->count > w->total) {
        atomic_store(&w->done, 1);
        w->a.p->async_send(w->b.async);
        w->a.p->stop(w->a.loop);
        return;
    }
    w->last = now_ns();
    w->a.p->async_send(w->b.async);
}

static void pong_cb(void *arg)      /* on B */
{
    pingpong_t *w = arg;
    if (atomic_load(&w->done)) w->b.p->stop(w->b.loop);
    else w->b.p->async_send(w->a.async);
}

static int run_pingpong(const bench_opts_t *o, peer_t *p, hist_t *h)
{
    pingpong_t *w = calloc(1, sizeof *w);
    uint64_t deadline;
    w->o = o;
    w->h = h;
    w->total = o->lat_samples + o->lat_warmup;
    host_start(&w->a, p, o->cpu_a, ping_cb, w);
    host_start(&w->b, p, o->cpu_b, pong_cb, w);
    host_wait_ready(&w->a);
    host_wait_ready(&w->b);
    p->async_send(w->a.async);
    /* Both threads send to each other until the end: release both once both loops returned. */
    deadline = now_ns() + 600ull * 1000000000ull;
    while (!atomic_load(&w->done) && now_ns() < deadline) sleep_ns(1000000);
    host_release(&w->a);
    host_release(&w->b);
    host_join(&w->a);
    host_join(&w->b);
    free(w);
    return 0;
}

/* Per peer: one value per round of each quantile, the rounds pooled for the plots. */
enum { Q_P50, Q_P90, Q_P99, Q_P999, Q_MAX, Q_MIN, Q_MEAN, Q_COUNT };
static const char *const q_key[Q_COUNT] = { "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns",
                                            "min_ns", "mean_ns" };

typedef struct {
    series_t q[2][Q_COUNT];      /* [one-way, ping-pong][quantile] */
    series_t p99_over_floor;     /* one-way p99 / the epoll floor's one-way p99, same round */
    hist_t *pooled[2];
    int lost;
} lat_res_t;

static void add_round(series_t *q, const hist_t *h)
{
    series_add(&q[Q_P50], (double)hist_quantile(h, 0.50));
    series_add(&q[Q_P90], (double)hist_quantile(h, 0.90));
    series_add(&q[Q_P99], (double)hist_quantile(h, 0.99));
    series_add(&q[Q_P999], (double)hist_quantile(h, 0.999));
    series_add(&q[Q_MAX], (double)h->max);
    series_add(&q[Q_MIN], h->n ? (double)h->min : 0);
    series_add(&q[Q_MEAN], hist_mean(h));
}

static void write_hist(json_t *j, const char *key, const series_t *q, const hist_t *h)
{
    unsigned i = 0;
    uint64_t v, c;
    json_obj(j, key);
    json_int(j, "samples", (long long)h->n);
    for (int k = 0; k < Q_COUNT; k++) json_series(j, q_key[k], &q[k]);
    json_arr(j, "histogram");          /* [bucket middle ns, count], every round pooled */
    while (hist_next(h, &i, &v, &c)) {
        json_arr(j, NULL);
        json_int(j, NULL, (long long)v);
        json_int(j, NULL, (long long)c);
        json_end(j, ']');
    }
    json_end(j, ']');
    json_end(j, '}');
}

static void print_res(const char *what, const char *peer, const series_t *q, const hist_t *h)
{
    printf("  %-9s %-10s n=%-7llu p50 %7.1f  p90 %7.1f  p99 %7.1f [%.1f-%.1f]  p99.9 %8.1f  "
           "max %9.1f us\n", what, peer, (unsigned long long)h->n, series_median(&q[Q_P50]) / 1e3,
           series_median(&q[Q_P90]) / 1e3, series_median(&q[Q_P99]) / 1e3,
           series_min(&q[Q_P99]) / 1e3, series_max(&q[Q_P99]) / 1e3,
           series_median(&q[Q_P999]) / 1e3, series_max(&q[Q_MAX]) / 1e3);
}

/* One round of one peer: one-way, then ping-pong, each with fresh loops. */
static void run_round(const bench_opts_t *o, peer_t *p, lat_res_t *r)
{
    hist_t *h[2] = { hist_new(), hist_new() };
    if (run_oneway(o, p, h[0]) != 0) r->lost = 1;
    run_pingpong(o, p, h[1]);
    for (int k = 0; k < 2; k++) {
        add_round(r->q[k], h[k]);
        hist_merge(r->pooled[k], h[k]);
        hist_free(h[k]);
    }
}

/* The one-way p99 of each peer over the floor's of the same round: both were measured minutes
 * apart at most, under the same outside load, which a ratio of medians cannot promise. */
static void floor_ratios(peer_t **peers, int n, lat_res_t *res)
{
    int f = -1;
    for (int i = 0; i < n; i++) if (peers[i] == &peer_epoll) f = i;
    if (f < 0 || !peers[f]->async_new) return;
    for (int i = 0; i < n; i++) {
        const series_t *mine = &res[i].q[0][Q_P99], *fl = &res[f].q[0][Q_P99];
        if (peers[i]->async_new && mine->n && fl->n && fl->v[fl->n - 1] > 0)
            series_add(&res[i].p99_over_floor, mine->v[mine->n - 1] / fl->v[fl->n - 1]);
    }
}

static void report(peer_t *p, lat_res_t *r, json_t *j)
{
    series_t us;
    json_obj(j, p->name);
    if (r->lost) json_str(j, "error", "a wakeup was lost (2 s timeout)");
    write_hist(j, "oneway", r->q[0], r->pooled[0]);
    write_hist(j, "pingpong", r->q[1], r->pooled[1]);
    if (r->p99_over_floor.n) json_series(j, "oneway_p99_over_epoll_p99", &r->p99_over_floor);
    json_end(j, '}');
    print_res("one-way", p->name, r->q[0], r->pooled[0]);
    print_res("ping-pong", p->name, r->q[1], r->pooled[1]);
    us = series_scaled(&r->q[0][Q_P50], 1e-3);
    table_series("wakeup one-way p50 (us)", p->name, &us, "us", LOWER_IS_BETTER);
    us = series_scaled(&r->q[0][Q_P99], 1e-3);
    table_series("wakeup one-way p99 (us)", p->name, &us, "us", LOWER_IS_BETTER);
    us = series_scaled(&r->q[0][Q_P999], 1e-3);
    table_series("wakeup one-way p99.9 (us)", p->name, &us, "us", LOWER_IS_BETTER);
    us = series_scaled(&r->q[1][Q_P50], 1e-3);
    table_series("ping-pong round trip p50 (us)", p->name, &us, "us", LOWER_IS_BETTER);
    us = series_scaled(&r->q[1][Q_P99], 1e-3);
    table_series("ping-pong round trip p99 (us)", p->name, &us, "us", LOWER_IS_BETTER);
}

void bench_latency(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    lat_res_t *res = calloc((size_t)n, sizeof *res);
    plot_series_t ow[16], pp[16];
    int np = 0;
    printf("\n== 1. cross-thread wakeup latency (%d rounds of %ld samples after %ld warm-up; A on "
           "cpu %d, B on cpu %d) ==\n", o->rounds, o->lat_samples, o->lat_warmup, o->cpu_a, o->cpu_b);
    for (int i = 0; i < n; i++) {
        res[i].pooled[0] = hist_new();
        res[i].pooled[1] = hist_new();
    }
    for (int r = 0; r < o->rounds; r++) {
        round_begin(r, o->rounds);
        int order[MAX_PEERS], count = round_order(peers, n, peer_has_async, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            run_round(o, peers[i], &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
        floor_ratios(peers, n, res);
    }
    json_obj(j, "latency");
    json_int(j, "rounds", o->rounds);
    json_num(j, "samples", (double)o->lat_samples);
    json_num(j, "warmup", (double)o->lat_warmup);
    json_num(j, "gap_ns", 20000);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        if (!peers[i]->async_new) continue;
        report(peers[i], &res[i], j);
        ow[np] = (plot_series_t){ peers[i]->name, res[i].pooled[0] };
        pp[np++] = (plot_series_t){ peers[i]->name, res[i].pooled[1] };
    }
    json_end(j, '}');
    json_end(j, '}');
    for (int i = 0; i < n; i++)
        table_series("wakeup one-way p99 / epoll p99, same round", peers[i]->name,
                     &res[i].p99_over_floor, "x", LOWER_IS_BETTER);
    plot_cdf("oneway.svg", "oneway.png", "one-way wakeup latency CDF (all rounds)", ow, np);
    plot_cdf("pingpong.svg", "pingpong.png", "ping-pong round-trip CDF (all rounds)", pp, np);
    for (int i = 0; i < n; i++) {
        hist_free(res[i].pooled[0]);
        hist_free(res[i].pooled[1]);
    }
    free(res);
}
