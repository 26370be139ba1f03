/* latency.c - benchmark 1: cross-thread wakeup latency, one-way and ping-pong, in scenarios.
 *
 * One-way: thread A stores a CLOCK_MONOTONIC stamp, sends a wakeup to B's loop, and waits
 * (spinning on its own CPU) for B's callback to acknowledge; B's callback records now - stamp.
 * A then sleeps ~20 us so that B is back asleep before the next sample: every sample is a wakeup
 * of a sleeping loop. Ping-pong: A's and B's loops wake each other in turn; A records the round
 * trip between two of its callbacks.
 *
 * Scenarios (scenarios.h): idle (the above), busy (B also watches 10k eventfds kept active by a
 * feeder thread and holds 100k armed timers; in the ping-pong B is the busy loop), load (CPU-bound
 * threads), samecpu (A and B on one CPU), unpinned. Each runs its own interleaved rounds, the
 * epoll floor in every round, and reports like idle under latency.scenarios.<name>; idle's figures
 * also stay where they always were (latency.peers). */
#include "host.h"
#include "scenarios.h"
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* What one scenario's runs need. */
typedef struct {
    int id;
    int cpu_a, cpu_b, feeder_cpu;
    int rounds;
    long samples, warmup;   /* per round */
    double cap_s;           /* per direction, peer and round; 0: none */
    int yield_wait;         /* A yields while it waits for the acknowledgement (samecpu, unpinned) */
    busy_t *busy;
    int load;
} scen_t;

/* The busy part of B's loop, attached on its thread before it runs and detached after. */
typedef struct { busy_t *b; int rc; } busy_host_t;

static void busy_setup(host_t *h)
{
    busy_host_t *bh = h->user;
    bh->rc = busy_attach(bh->b, h->p, h->loop);
}

static void busy_teardown(host_t *h) { busy_detach(((busy_host_t *)h->user)->b); }

static void host_prepare(host_t *h, const scen_t *s, busy_host_t *bh)
{
    if (!s->busy) return;
    bh->b = s->busy;
    h->user = bh;
    h->setup = busy_setup;
    h->teardown = busy_teardown;
}

static double feeder_max_s(const scen_t *s) { return (s->cap_s > 0 ? s->cap_s : 600) + 30; }

typedef struct {
    const scen_t *s;
    host_t b;
    busy_host_t bh;
    _Atomic uint64_t stamp;
    _Atomic long ack;
    _Atomic int done;
    long seen;
    _Atomic uint64_t warm_end;   /* the warm-up also ends here (a fifth of the cap) */
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
    if (w->seen++ >= w->s->warmup || t > atomic_load_explicit(&w->warm_end, memory_order_relaxed))
        hist_add(w->h, t - atomic_load(&w->stamp));
    atomic_fetch_add_explicit(&w->ack, 1, memory_order_release);
}

/* How long a wakeup may take before it counts as lost: 2 s, or 10 s in the capped scenarios,
 * where one iteration of a loop under the busy scenario's load can take over a second. */
static double lost_after_s(const scen_t *s) { return s->cap_s > 0 ? 10.0 : 2.0; }

static int wait_ack(const scen_t *s, _Atomic long *v, long want)
{
    uint64_t deadline;
    if (!s->yield_wait) return wait_at_least(v, want, lost_after_s(s));
    deadline = now_ns() + (uint64_t)(lost_after_s(s) * 1e9);
    while (atomic_load_explicit(v, memory_order_acquire) < want) {
        sched_yield();
        if (now_ns() > deadline) return -1;
    }
    return 0;
}

/* Run outcome of one direction. */
typedef struct { int lost, capped, setup_failed; busy_stats_t busy; } run_out_t;

static void run_oneway(const scen_t *s, peer_t *p, hist_t *h, run_out_t *out)
{
    oneway_t *w = calloc(1, sizeof *w);
    long total = s->samples + s->warmup, i;
    uint64_t deadline;
    w->s = s;
    w->h = h;
    atomic_store(&w->warm_end, UINT64_MAX);
    host_prepare(&w->b, s, &w->bh);
    host_start(&w->b, p, s->cpu_b, oneway_cb, w);
    host_wait_ready(&w->b);
    if (w->bh.rc != 0) {
        out->setup_failed = 1;
        total = 0;
    }
    if (s->busy && total) busy_feed_start(s->busy, s->feeder_cpu, feeder_max_s(s));
    /* The cap counts from here: the busy loop's setup (10k fds, 100k timers) is not in it. */
    deadline = s->cap_s > 0 ? now_ns() + (uint64_t)(s->cap_s * 1e9) : UINT64_MAX;
    if (s->cap_s > 0) atomic_store(&w->warm_end, now_ns() + (uint64_t)(s->cap_s * 0.2e9));
    cpu_set_t before;
    bool restore = s->cpu_a >= 0 && pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
    if (s->cpu_a >= 0) pin_self(s->cpu_a);
    for (i = 0; i < total; i++) {
        if (now_ns() > deadline) { out->capped = 1; break; }
        atomic_store(&w->stamp, now_ns());
        p->async_send(w->b.async);
        if (wait_ack(s, &w->ack, i + 1) != 0) { out->lost = 1; break; }
        sleep_ns(20000);
    }
    /* Later benchmarks create threads from this one: give it back every CPU. */
    if (restore) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    if (s->busy && total) busy_feed_stop(s->busy);
    atomic_store(&w->done, 1);
    p->async_send(w->b.async);
    host_release(&w->b);
    host_join(&w->b);
    if (s->busy) busy_stats(s->busy, &out->busy);
    free(w);
}

typedef struct {
    const scen_t *s;
    host_t a, b;
    busy_host_t bh;
    long count, total;
    uint64_t last, deadline, warm_end;
    _Atomic int done;
    int capped;
    hist_t *h;
} pingpong_t;

static void ping_cb(void *arg)      /* on A */
{
    pingpong_t *w = arg;
    uint64_t t = now_ns();
    if (atomic_load(&w->done)) {    /* the main thread gave up (a lost wakeup) */
        w->a.p->stop(w->a.loop);
        return;
    }
    if (w->count > 0 && (w->count > w->s->warmup || t > w->warm_end)) hist_add(w->h, t - w->last);
    if (++w->count > w->total || t > w->deadline) {
        w->capped = w->count <= w->total;
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

static void run_pingpong(const scen_t *s, peer_t *p, hist_t *h, run_out_t *out)
{
    pingpong_t *w = calloc(1, sizeof *w);
    uint64_t deadline;
    w->s = s;
    w->h = h;
    w->total = s->samples + s->warmup;
    w->deadline = w->warm_end = UINT64_MAX;
    host_prepare(&w->b, s, &w->bh);
    host_start(&w->a, p, s->cpu_a, ping_cb, w);
    host_start(&w->b, p, s->cpu_b, pong_cb, w);
    host_wait_ready(&w->a);
    host_wait_ready(&w->b);
    if (w->bh.rc != 0) {
        out->setup_failed = 1;
        atomic_store(&w->done, 1);
    } else {
        if (s->busy) busy_feed_start(s->busy, s->feeder_cpu, feeder_max_s(s));
        if (s->cap_s > 0) {
            w->deadline = now_ns() + (uint64_t)(s->cap_s * 1e9);
            w->warm_end = now_ns() + (uint64_t)(s->cap_s * 0.2e9);
        }
        p->async_send(w->a.async);
    }
    /* Both threads send to each other until the end: release both once both loops returned. */
    deadline = now_ns() + (uint64_t)((s->cap_s > 0 ? s->cap_s + 30 : 600) * 1e9);
    while (!atomic_load(&w->done) && now_ns() < deadline) sleep_ns(1000000);
    if (!atomic_load(&w->done)) out->lost = 1;
    atomic_store(&w->done, 1);
    p->async_send(w->a.async);      /* stops both loops (already stopped: harmless) */
    p->async_send(w->b.async);
    if (s->busy && !out->setup_failed) busy_feed_stop(s->busy);
    out->capped = w->capped;
    host_release(&w->a);
    host_release(&w->b);
    host_join(&w->a);
    host_join(&w->b);
    free(w);
}

/* Per peer: one value per round of each quantile, the rounds pooled for the plots. */
enum { Q_P50, Q_P90, Q_P99, Q_P999, Q_MAX, Q_MIN, Q_MEAN, Q_COUNT };
static const char *const q_key[Q_COUNT] = { "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns",
                                            "min_ns", "mean_ns" };

typedef struct {
    series_t q[2][Q_COUNT];      /* [one-way, ping-pong][quantile] */
    series_t p99_over_floor;     /* one-way p99 / the epoll floor's one-way p99, same round */
    hist_t *pooled[2];
    int lost, setup_failed, capped_rounds[2], empty_rounds[2];
    const char *na;              /* why this peer cannot run the scenario, NULL when it can */
    series_t fd_reads_per_s, feeder_writes_per_s;   /* busy */
    long timers_armed, timers_fired;
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

/* One round of one peer: one-way, then ping-pong, each with fresh loops (and, under load, the
 * CPU-bound threads running through both). */
static void run_round(const scen_t *s, peer_t *p, lat_res_t *r)
{
    hist_t *h[2] = { hist_new(), hist_new() };
    run_out_t out[2];
    load_t *load = NULL;
    memset(out, 0, sizeof out);
    if (s->load) load = load_start(s->cpu_a, s->cpu_b, 2 * (s->cap_s > 0 ? s->cap_s : 600) + 60);
    run_oneway(s, p, h[0], &out[0]);
    if (!out[0].setup_failed) run_pingpong(s, p, h[1], &out[1]);
    load_stop(load);
    if (out[0].setup_failed || out[1].setup_failed) {
        r->setup_failed = 1;
        hist_free(h[0]);
        hist_free(h[1]);
        return;
    }
    if (out[0].lost || out[1].lost) r->lost = 1;
    for (int k = 0; k < 2; k++) {
        r->capped_rounds[k] += out[k].capped;
        if (h[k]->n) add_round(r->q[k], h[k]);     /* capped before the first sample: no round */
        else r->empty_rounds[k]++;
        hist_merge(r->pooled[k], h[k]);
        hist_free(h[k]);
    }
    if (s->busy) {
        double sec = out[0].busy.seconds + out[1].busy.seconds;
        if (sec > 0) {
            series_add(&r->fd_reads_per_s, (double)(out[0].busy.reads + out[1].busy.reads) / sec);
            series_add(&r->feeder_writes_per_s, (double)(out[0].busy.writes + out[1].busy.writes) / sec);
        }
        r->timers_armed = out[0].busy.timers_armed;
        r->timers_fired += out[0].busy.timers_fired + out[1].busy.timers_fired;
    }
}

/* The one-way p99 of each peer over the floor's of the same round: both were measured minutes
 * apart at most, under the same outside load, which a ratio of medians cannot promise. */
static void floor_ratios(peer_t **peers, int n, lat_res_t *res, int round)
{
    int f = -1;
    for (int i = 0; i < n; i++) if (peers[i] == &peer_epoll) f = i;
    if (f < 0 || res[f].na || res[f].setup_failed) return;
    for (int i = 0; i < n; i++) {
        const series_t *mine = &res[i].q[0][Q_P99], *fl = &res[f].q[0][Q_P99];
        if (!res[i].na && mine->n == round + 1 && fl->n == round + 1 && fl->v[fl->n - 1] > 0)
            series_add(&res[i].p99_over_floor, mine->v[mine->n - 1] / fl->v[fl->n - 1]);
    }
}

/* The table's row for metric m of scenario s: idle keeps the names it always had. */
static void row_name(char *out, size_t n, const scen_t *s, const char *m)
{
    if (s->id == SCEN_IDLE) copy_str(out, n, m);
    else snprintf(out, n, "%s: %s", scenario_names[s->id], m);
}

static const char *const row_metric[5] = {
    "wakeup one-way p50 (us)", "wakeup one-way p99 (us)", "wakeup one-way p99.9 (us)",
    "ping-pong round trip p50 (us)", "ping-pong round trip p99 (us)" };
static const int row_dir[5] = { 0, 0, 0, 1, 1 }, row_q[5] = { Q_P50, Q_P99, Q_P999, Q_P50, Q_P99 };
#define RATIO_METRIC "wakeup one-way p99 / epoll p99, same round"
#define RATIO_METRIC_SHORT "one-way p99 / epoll p99, same round"

static const char *why_not(const lat_res_t *r)
{
    return r->na ? r->na : r->setup_failed ? "could not watch every fd or arm every timer" : NULL;
}

static void report_json(const scen_t *s, peer_t *p, lat_res_t *r, json_t *j)
{
    json_obj(j, p->name);
    if (why_not(r)) {
        json_str(j, "not_applicable", why_not(r));
        json_end(j, '}');
        return;
    }
    if (r->lost) {
        char msg[64];
        snprintf(msg, sizeof msg, "a wakeup was lost (%.0f s timeout)", lost_after_s(s));
        json_str(j, "error", msg);
    }
    write_hist(j, "oneway", r->q[0], r->pooled[0]);
    write_hist(j, "pingpong", r->q[1], r->pooled[1]);
    if (r->p99_over_floor.n) json_series(j, "oneway_p99_over_epoll_p99", &r->p99_over_floor);
    if (s->id != SCEN_IDLE) {
        json_int(j, "oneway_capped_rounds", r->capped_rounds[0]);
        json_int(j, "pingpong_capped_rounds", r->capped_rounds[1]);
        json_int(j, "oneway_empty_rounds", r->empty_rounds[0]);
        json_int(j, "pingpong_empty_rounds", r->empty_rounds[1]);
    }
    if (s->id == SCEN_BUSY) {
        json_series(j, "fd_reads_per_s", &r->fd_reads_per_s);
        json_series(j, "feeder_writes_per_s", &r->feeder_writes_per_s);
        json_int(j, "timers_armed", r->timers_armed);
        json_int(j, "timers_fired", r->timers_fired);
    }
    json_end(j, '}');
}

/* The printed figures and the table's rows. */
static void report_text(const scen_t *s, peer_t *p, lat_res_t *r)
{
    char metric[64];
    if (why_not(r)) {
        printf("  %-9s %-10s n/a: %s\n", "", p->name, why_not(r));
        for (int k = 0; k < 5; k++) {
            if (s->id != SCEN_IDLE && k == 2) continue;
            row_name(metric, sizeof metric, s, row_metric[k]);
            table_note(metric, p->name, r->na ? r->na : "FAILED: busy setup");
        }
        return;
    }
    print_res("one-way", p->name, r->q[0], r->pooled[0]);
    print_res("ping-pong", p->name, r->q[1], r->pooled[1]);
    if (r->lost)
        printf("  %-9s %-10s ERROR: a wakeup was lost (%.0f s timeout)\n", "", p->name, lost_after_s(s));
    if (s->id == SCEN_BUSY)
        printf("  %-9s %-10s loop drained %.0f fd events/s (feeder wrote %.0f/s); %ld timers armed, "
               "%ld fired\n", "", p->name, series_median(&r->fd_reads_per_s),
               series_median(&r->feeder_writes_per_s), r->timers_armed, r->timers_fired);
    if (r->capped_rounds[0] || r->capped_rounds[1])
        printf("  %-9s %-10s capped at %.1f s: one-way in %d, ping-pong in %d of %d rounds%s\n", "",
               p->name, s->cap_s, r->capped_rounds[0], r->capped_rounds[1], s->rounds,
               r->empty_rounds[0] || r->empty_rounds[1] ? " (some before their first sample)" : "");
    for (int k = 0; k < 5; k++) {
        series_t us;
        if (s->id != SCEN_IDLE && k == 2) continue;     /* p99.9 of the scenarios: JSON only */
        us = series_scaled(&r->q[row_dir[k]][row_q[k]], 1e-3);
        row_name(metric, sizeof metric, s, row_metric[k]);
        table_series(metric, p->name, &us, "us", LOWER_IS_BETTER);
        if (r->capped_rounds[row_dir[k]]) table_annotate(metric, p->name, "capped: fewer samples");
    }
}

static int runs_latency(const peer_t *p) { return p->async_new != NULL; }

/* The scenario's settings (the idle scenario's are the benchmark's as it always was). */
static void scen_init(scen_t *s, int id, const bench_opts_t *o)
{
    memset(s, 0, sizeof *s);
    s->id = id;
    s->cpu_a = o->cpu_a;
    s->cpu_b = o->cpu_b;
    /* The busy loop's CPU carries its traffic: the waker's side stays as in idle. (On A's CPU the
     * feeder's ticks preempted A between its stamp and its send, and handed A's CPU to whatever
     * else was runnable there: a p99 of 2.8 ms for every peer and the floor alike.) */
    s->feeder_cpu = o->cpu_b;
    if (id == SCEN_IDLE) {
        s->rounds = o->rounds;
        s->samples = o->lat_samples;
        s->warmup = o->lat_warmup;
        return;
    }
    s->rounds = o->lat_scen_rounds;
    s->samples = ((id == SCEN_BUSY ? o->lat_busy_samples : o->lat_scen_samples) + s->rounds - 1) / s->rounds;
    s->warmup = o->lat_scen_warmup;
    s->cap_s = o->lat_scen_cap_s;
    if (id == SCEN_LOAD) s->load = 1;
    if (id == SCEN_SAMECPU) {
        s->cpu_a = s->cpu_b = o->no_pin ? -1 : cpu_nth(0);
        s->yield_wait = 1;
    }
    if (id == SCEN_UNPINNED) {
        s->cpu_a = s->cpu_b = s->feeder_cpu = -1;
        s->yield_wait = 1;     /* spinning, A would keep B off a CPU they happen to share */
    }
}

/* Seconds the scenario is expected to take (the progress estimate). */
double latency_expected_s(const bench_opts_t *o, int id)
{
    static const double full[SCEN_COUNT] = { 131, 112, 36, 24, 22 };  /* 2-vCPU VM, 10 rounds */
    static const double quick[SCEN_COUNT] = { 4.4, 2.5, 0.6, 0.4, 0.4 };
    if (id == SCEN_IDLE) return (o->quick ? quick[0] : full[0]) * (0.8 + 0.2 * o->rounds / (o->quick ? 2.0 : 10.0));
    return (o->quick ? quick[id] : full[id]) * (0.7 + 0.3 * o->lat_scen_rounds / (o->quick ? 1.0 : 5.0));
}

typedef struct {
    scen_t s;
    int ran;
    const char *skipped;     /* why the whole scenario was not run */
    char note[256];
    int fds, active_per_tick, floor_timers;     /* busy */
    lat_res_t *res;
} scen_res_t;

static void run_scenario(const bench_opts_t *o, peer_t **peers, int n, scen_res_t *sr)
{
    scen_t *s = &sr->s;
    int id = s->id;
    if (id == SCEN_IDLE)
        printf("\n== 1. cross-thread wakeup latency (scenario idle: %d rounds of %ld samples after %ld "
               "warm-up; A on cpu %d, B on cpu %d) ==\n", s->rounds, s->samples, s->warmup, s->cpu_a,
               s->cpu_b);
    else
        printf("\n== 1. wakeup latency, scenario %s: %s (%d rounds of %ld samples after %ld warm-up, "
               "cap %.1f s per direction; A on cpu %d, B on cpu %d) ==\n", scenario_names[id],
               scenario_what[id], s->rounds, s->samples, s->warmup, s->cap_s, s->cpu_a, s->cpu_b);
    if (id == SCEN_SAMECPU && o->no_pin) {
        sr->skipped = "--no-pin: no CPU to pin both threads to";
        printf("  not run: %s\n", sr->skipped);
        return;
    }
    if (id == SCEN_BUSY) {
        s->busy = busy_new(o->lat_busy_fds, o->lat_busy_timers, sr->note, sizeof sr->note);
        if (!s->busy) {
            sr->skipped = "no eventfd could be made";
            printf("  not run: %s (%s)\n", sr->skipped, sr->note);
            return;
        }
        sr->fds = busy_fds(s->busy);
        sr->active_per_tick = busy_active_per_tick(s->busy);
        sr->floor_timers = busy_timers_for(s->busy, &peer_epoll);
        printf("  %d eventfds, %d written per %.0f ms tick by a feeder on cpu %d; %d timers%s (%s)\n",
               busy_fds(s->busy), busy_active_per_tick(s->busy), SCEN_BUSY_TICK_NS / 1e6,
               s->feeder_cpu, o->lat_busy_timers, o->quick ? " (quick: 10k fds, 100k timers in a full run)" : "",
               sr->note);
    }
    if (id == SCEN_LOAD) {
        int cpus[64], k = load_threads(s->cpu_a, s->cpu_b, cpus, 64);
        int len = snprintf(sr->note, sizeof sr->note, "%d CPU-bound thread%s on cpu", k, k > 1 ? "s" : "");
        for (int i = 0; i < k && len < (int)sizeof sr->note - 8; i++)
            len += snprintf(sr->note + len, sizeof sr->note - (size_t)len, "%s%d", i ? "," : " ", cpus[i]);
        printf("  %s\n", sr->note);
    }
    sr->ran = 1;
    for (int i = 0; i < n; i++) {
        sr->res[i].pooled[0] = hist_new();
        sr->res[i].pooled[1] = hist_new();
        if (s->busy) sr->res[i].na = busy_unsupported(peers[i]);
    }
    for (int r = 0; r < s->rounds; r++) {
        round_begin(r, s->rounds);
        int order[MAX_PEERS], count = round_order(peers, n, runs_latency, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            if (sr->res[i].na || sr->res[i].setup_failed) continue;
            run_round(s, peers[i], &sr->res[i]);
            round_done(peers[i]->name);
        }
        round_end();
        floor_ratios(peers, n, sr->res, r);
    }
    busy_free(s->busy);
    s->busy = NULL;
    for (int i = 0; i < n; i++)
        if (peers[i]->async_new) report_text(s, peers[i], &sr->res[i]);
    for (int i = 0; i < n; i++) {
        char name[64];
        row_name(name, sizeof name, s, s->id == SCEN_IDLE ? RATIO_METRIC : RATIO_METRIC_SHORT);
        table_series(name, peers[i]->name, &sr->res[i].p99_over_floor, "x", LOWER_IS_BETTER);
    }
}

static void write_scenario(const bench_opts_t *o, peer_t **peers, int n, scen_res_t *sr, json_t *j)
{
    scen_t *s = &sr->s;
    plot_series_t ow[MAX_PEERS], pp[MAX_PEERS];
    int np = 0;
    json_obj(j, scenario_names[s->id]);
    json_str(j, "what", scenario_what[s->id]);
    if (sr->skipped) {
        json_str(j, "not_run", sr->skipped);
        json_end(j, '}');
        return;
    }
    json_int(j, "rounds", s->rounds);
    json_num(j, "samples", (double)s->samples);
    json_num(j, "warmup", (double)s->warmup);
    json_num(j, "gap_ns", 20000);
    json_num(j, "cap_s_per_direction", s->cap_s);
    json_int(j, "cpu_signalling_thread", s->cpu_a);
    json_int(j, "cpu_loop_thread", s->cpu_b);
    if (s->id == SCEN_BUSY) {
        json_int(j, "fds", sr->fds);
        json_int(j, "fds_requested", o->lat_busy_fds);
        json_int(j, "active_fds_per_tick", sr->active_per_tick);
        json_num(j, "tick_ns", (double)SCEN_BUSY_TICK_NS);
        json_int(j, "timers", o->lat_busy_timers);
        json_int(j, "epoll_floor_timers", sr->floor_timers);
        json_int(j, "feeder_cpu", s->feeder_cpu);
        json_str(j, "note", sr->note);
    }
    if (s->id == SCEN_LOAD) json_str(j, "load", sr->note);
    if (s->id == SCEN_SAMECPU || s->id == SCEN_UNPINNED) json_bool(j, "waker_yields", 1);
    if (s->id == SCEN_IDLE) json_str(j, "figures", "latency.peers");   /* not written twice */
    else json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        if (!peers[i]->async_new) continue;
        if (s->id != SCEN_IDLE) report_json(s, peers[i], &sr->res[i], j);
        if (sr->res[i].na || sr->res[i].setup_failed) continue;
        ow[np] = (plot_series_t){ peers[i]->name, sr->res[i].pooled[0] };
        pp[np++] = (plot_series_t){ peers[i]->name, sr->res[i].pooled[1] };
    }
    if (s->id != SCEN_IDLE) json_end(j, '}');
    json_end(j, '}');
    if (s->id == SCEN_IDLE) {
        plot_cdf("oneway.svg", "oneway.png", "one-way wakeup latency CDF (all rounds)", ow, np);
        plot_cdf("pingpong.svg", "pingpong.png", "ping-pong round-trip CDF (all rounds)", pp, np);
    } else {
        char svg[64], png[64], title[128];
        const char *sn = scenario_names[s->id];
        snprintf(svg, sizeof svg, "oneway_%s.svg", sn);
        snprintf(png, sizeof png, "oneway_%s.png", sn);
        snprintf(title, sizeof title, "one-way wakeup latency CDF, scenario %s (all rounds)", sn);
        plot_cdf(svg, png, title, ow, np);
        snprintf(svg, sizeof svg, "pingpong_%s.svg", sn);
        snprintf(png, sizeof png, "pingpong_%s.png", sn);
        snprintf(title, sizeof title, "ping-pong round-trip CDF, scenario %s (all rounds)", sn);
        plot_cdf(svg, png, title, pp, np);
    }
}

/* Every scenario's medians side by side: one line per peer. */
static void print_summary(peer_t **peers, int n, scen_res_t *sr)
{
    printf("\n  wakeup latency by scenario, us (median over rounds): one-way p50/p99, ping-pong p50/p99\n");
    printf("  %-10s", "peer");
    for (int id = 0; id < SCEN_COUNT; id++)
        if (sr[id].ran) printf(" | %-25s", scenario_names[id]);
    printf("\n");
    for (int i = 0; i < n; i++) {
        if (!peers[i]->async_new) continue;
        printf("  %-10s", peers[i]->name);
        for (int id = 0; id < SCEN_COUNT; id++) {
            lat_res_t *r = &sr[id].res[i];
            char cell[64];
            if (!sr[id].ran) continue;
            if (r->na || r->setup_failed || !r->q[0][Q_P50].n) snprintf(cell, sizeof cell, "n/a");
            else
                snprintf(cell, sizeof cell, "%.0f/%.0f, %.0f/%.0f", series_median(&r->q[0][Q_P50]) / 1e3,
                         series_median(&r->q[0][Q_P99]) / 1e3, series_median(&r->q[1][Q_P50]) / 1e3,
                         series_median(&r->q[1][Q_P99]) / 1e3);
            printf(" | %-25s", cell);
        }
        printf("\n");
    }
}

void bench_latency(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    scen_res_t sr[SCEN_COUNT];
    unsigned mask = o->scenario_mask ? o->scenario_mask : 1u;
    memset(sr, 0, sizeof sr);
    for (int id = 0; id < SCEN_COUNT; id++) {
        scen_init(&sr[id].s, id, o);
        sr[id].res = calloc((size_t)n, sizeof *sr[id].res);
        if (!(mask & (1u << id))) continue;
        uint64_t t0 = now_ns();
        char left[32];
        progress_phase_begin(latency_expected_s(o, id));
        run_scenario(o, peers, n, &sr[id]);
        progress_phase_end();
        printf("  (latency %s: %.1f s)  ... %s\n", scenario_names[id], (double)(now_ns() - t0) / 1e9,
               progress_left_str(left, sizeof left));
    }
    json_obj(j, "latency");
    json_int(j, "rounds", o->rounds);
    json_num(j, "samples", (double)o->lat_samples);
    json_num(j, "warmup", (double)o->lat_warmup);
    json_num(j, "gap_ns", 20000);
    if (sr[SCEN_IDLE].ran) {              /* idle's figures where they always were */
        json_obj(j, "peers");
        for (int i = 0; i < n; i++)
            if (peers[i]->async_new) report_json(&sr[SCEN_IDLE].s, peers[i], &sr[SCEN_IDLE].res[i], j);
        json_end(j, '}');
    }
    json_arr(j, "scenarios_run");
    for (int id = 0; id < SCEN_COUNT; id++)
        if (mask & (1u << id)) json_str(j, NULL, scenario_names[id]);
    json_end(j, ']');
    json_obj(j, "scenarios");
    for (int id = 0; id < SCEN_COUNT; id++) {
        if (!(mask & (1u << id))) continue;
        write_scenario(o, peers, n, &sr[id], j);
    }
    json_end(j, '}');
    json_end(j, '}');
    print_summary(peers, n, sr);
    for (int id = 0; id < SCEN_COUNT; id++) {
        for (int i = 0; i < n; i++) {
            hist_free(sr[id].res[i].pooled[0]);
            hist_free(sr[id].res[i].pooled[1]);
        }
        free(sr[id].res);
    }
}
