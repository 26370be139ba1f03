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

static void write_hist(json_t *j, const char *key, const hist_t *h)
{
    unsigned i = 0;
    uint64_t v, c;
    json_obj(j, key);
    json_int(j, "samples", (long long)h->n);
    json_num(j, "p50_ns", (double)hist_quantile(h, 0.50));
    json_num(j, "p90_ns", (double)hist_quantile(h, 0.90));
    json_num(j, "p99_ns", (double)hist_quantile(h, 0.99));
    json_num(j, "p999_ns", (double)hist_quantile(h, 0.999));
    json_num(j, "max_ns", (double)h->max);
    json_num(j, "min_ns", h->n ? (double)h->min : 0);
    json_num(j, "mean_ns", hist_mean(h));
    json_arr(j, "histogram");          /* [bucket middle ns, count] */
    while (hist_next(h, &i, &v, &c)) {
        json_arr(j, NULL);
        json_int(j, NULL, (long long)v);
        json_int(j, NULL, (long long)c);
        json_end(j, ']');
    }
    json_end(j, ']');
    json_end(j, '}');
}

static void print_hist(const char *what, const char *peer, const hist_t *h)
{
    printf("  %-9s %-10s n=%-7llu p50 %7.1f  p90 %7.1f  p99 %7.1f  p99.9 %8.1f  max %9.1f us\n",
           what, peer, (unsigned long long)h->n, hist_quantile(h, .5) / 1e3,
           hist_quantile(h, .9) / 1e3, hist_quantile(h, .99) / 1e3,
           hist_quantile(h, .999) / 1e3, (double)h->max / 1e3);
    fflush(stdout);
}

void bench_latency(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    plot_series_t ow[16], pp[16];
    hist_t *keep[32];
    int nk = 0, np = 0;
    printf("\n== 1. cross-thread wakeup latency (%ld samples after %ld warm-up; A on cpu %d, "
           "B on cpu %d) ==\n", o->lat_samples, o->lat_warmup, o->cpu_a, o->cpu_b);
    json_obj(j, "latency");
    json_num(j, "samples", (double)o->lat_samples);
    json_num(j, "warmup", (double)o->lat_warmup);
    json_num(j, "gap_ns", 20000);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        peer_t *p = peers[i];
        hist_t *h1, *h2;
        if (!p->async_new) continue;
        h1 = hist_new();
        h2 = hist_new();
        json_obj(j, p->name);
        if (run_oneway(o, p, h1) != 0) json_str(j, "error", "a wakeup was lost (2 s timeout)");
        print_hist("one-way", p->name, h1);
        write_hist(j, "oneway", h1);
        run_pingpong(o, p, h2);
        print_hist("ping-pong", p->name, h2);
        write_hist(j, "pingpong", h2);
        json_end(j, '}');
        table_add("wakeup one-way p50 (us)", p->name, hist_quantile(h1, .5) / 1e3, "us", LOWER_IS_BETTER);
        table_add("wakeup one-way p99 (us)", p->name, hist_quantile(h1, .99) / 1e3, "us", LOWER_IS_BETTER);
        table_add("wakeup one-way p99.9 (us)", p->name, hist_quantile(h1, .999) / 1e3, "us", LOWER_IS_BETTER);
        table_add("ping-pong round trip p50 (us)", p->name, hist_quantile(h2, .5) / 1e3, "us", LOWER_IS_BETTER);
        table_add("ping-pong round trip p99 (us)", p->name, hist_quantile(h2, .99) / 1e3, "us", LOWER_IS_BETTER);
        ow[np] = (plot_series_t){ p->name, h1 };
        pp[np++] = (plot_series_t){ p->name, h2 };
        keep[nk++] = h1;
        keep[nk++] = h2;
    }
    json_end(j, '}');
    json_end(j, '}');
    plot_cdf("oneway.svg", "oneway.png", "one-way wakeup latency CDF", ow, np);
    plot_cdf("pingpong.svg", "pingpong.png", "ping-pong round-trip CDF", pp, np);
    while (nk) hist_free(keep[--nk]);
}
