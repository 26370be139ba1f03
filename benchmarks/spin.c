/* spin.c - the spin before sleeping (rl_loop_set_spin): what a longer window buys in wakeup
 * latency, and that it costs no CPU once the loop is idle. CRunLoop only (the peers have no such
 * setting); runs when CRunLoop is among the peers.
 *
 * For each window (0, the default 5 us, 50 us): B's loop performs a version-0 source; thread A,
 * on another CPU, stores a CLOCK_MONOTONIC stamp, signals the source and wakes the loop, spins
 * for the perform's acknowledgement, then spins 20 us more (on its own CPU: a busy wait, so the
 * gap is exact) before the next sample. A 20 us gap falls within a 50 us window, past a 5 us one:
 * with 50 us the loop is still spinning when the next signal comes (no write(2), no sleep); with
 * 5 us or 0 it is asleep, and each sample is a wakeup of a sleeping loop. After the last sample,
 * A reads B's thread CPU time (pthread_getcpuclockid) over the next millisecond (the rest of the
 * last window: what one busy-to-idle transition costs) and over the idle second after it, which
 * must be zero whatever the window, as a loop spins only after a busy pass. */
#include "bench.h"
#include <crunloop.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GAP_NS 20000u

typedef struct {
    double window;
    int cpu;
    rl_source_t *source;
    _Atomic(rl_loop_t *) loop;
    _Atomic uint64_t stamp;
    _Atomic long acks;
    _Atomic int quit;
    long warmup;
    hist_t *h;
} spin_run_t;

static void performed(void *info)
{
    spin_run_t *w = info;
    uint64_t t = now_ns();
    long n = atomic_load_explicit(&w->acks, memory_order_relaxed);
    if (n >= w->warmup) hist_add(w->h, t - atomic_load(&w->stamp));
    atomic_store_explicit(&w->acks, n + 1, memory_order_release);
}

static void *loop_main(void *arg)
{
    spin_run_t *w = arg;
    if (w->cpu >= 0) pin_self(w->cpu);
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_set_spin(loop, w->window);
    rl_loop_add_source(loop, w->source, RL_DEFAULT_MODE);
    atomic_store(&w->loop, rl_retain(loop)); /* A's, which stops the loop while it exits */
    while (!atomic_load(&w->quit)) rl_run_in_mode(RL_DEFAULT_MODE, 10, false);
    rl_loop_remove_source(loop, w->source, RL_DEFAULT_MODE);
    return NULL;
}

static uint64_t cpu_ns_of(clockid_t clock)
{
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One round of one window: the latency histogram, and the loop thread's CPU time (ns) in the
 * millisecond after the last sample (the rest of its window) and over the idle second after
 * that. -1 when a wakeup was lost. */
static int run_window(const bench_opts_t *o, double window, long samples, hist_t *h, double *tail_cpu_ns,
                      double *idle_cpu_ns)
{
    spin_run_t w;
    memset(&w, 0, sizeof w);
    w.window = window;
    w.cpu = o->cpu_b;
    w.warmup = o->lat_warmup;
    w.h = h;
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    sc.info = &w;
    sc.perform = performed;
    w.source = rl_source_create(0, &sc);
    pthread_t th;
    pthread_create(&th, NULL, loop_main, &w);
    while (!atomic_load(&w.loop)) sleep_ns(100000);
    rl_loop_t *loop = atomic_load(&w.loop);
    cpu_set_t before;
    bool restore = o->cpu_a >= 0 && pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
    if (o->cpu_a >= 0) pin_self(o->cpu_a);
    int rc = 0;
    long total = samples + o->lat_warmup;
    for (long i = 0; i < total; i++) {
        atomic_store(&w.stamp, now_ns());
        rl_source_signal(w.source);
        rl_loop_wakeup(loop);
        uint64_t deadline = now_ns() + 2000000000u;
        while (atomic_load_explicit(&w.acks, memory_order_acquire) <= i)
            if (now_ns() > deadline) { rc = -1; break; }
        if (rc) break;
        spin_ns(GAP_NS);
    }
    /* Idle: the rest of the last window (a 50 us spin ends about 30 us from here), then one
     * second after it. */
    clockid_t clock;
    *idle_cpu_ns = *tail_cpu_ns = -1;
    if (pthread_getcpuclockid(th, &clock) == 0) {
        uint64_t c0 = cpu_ns_of(clock);
        sleep_ns(1000000u);
        uint64_t c1 = cpu_ns_of(clock);
        sleep_ns(1000000000u);
        *tail_cpu_ns = (double)(c1 - c0);
        *idle_cpu_ns = (double)(cpu_ns_of(clock) - c1);
    }
    if (restore) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    atomic_store(&w.quit, 1);
    rl_loop_stop(loop);
    pthread_join(th, NULL);
    rl_release(loop);
    rl_release(w.source);
    return rc;
}

enum { WINDOWS = 3 };
static const double windows[WINDOWS] = { 0, 5e-6, 50e-6 };
static const char *const window_names[WINDOWS] = { "0", "5 us", "50 us" };

void bench_spin(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    bool ours = false;
    for (int i = 0; i < n; i++) ours |= peers[i] == &peer_crunloop;
    if (!ours) return;
    long samples = o->quick ? 2000 : 20000;
    series_t p50[WINDOWS], p99[WINDOWS], idle[WINDOWS], tail[WINDOWS];
    hist_t *pooled[WINDOWS];
    int lost[WINDOWS];
    memset(p50, 0, sizeof p50);
    memset(p99, 0, sizeof p99);
    memset(idle, 0, sizeof idle);
    memset(tail, 0, sizeof tail);
    memset(lost, 0, sizeof lost);
    printf("\n== spin before sleeping: one-way wakeup at a %u us gap, and idle CPU after (%d rounds "
           "of %ld samples; A on cpu %d, B on cpu %d) ==\n", GAP_NS / 1000, o->rounds,
           samples / o->rounds, o->cpu_a, o->cpu_b);
    for (int k = 0; k < WINDOWS; k++) pooled[k] = hist_new();
    for (int r = 0; r < o->rounds; r++) {
        round_begin(r, o->rounds);
        for (int i = 0; i < WINDOWS; i++) {
            int k = (i + r) % WINDOWS; /* rotated, as the peers of the other benchmarks */
            hist_t *h = hist_new();
            double cpu = -1, last = -1;
            if (run_window(o, windows[k], samples / o->rounds, h, &last, &cpu) != 0) lost[k] = 1;
            series_add(&p50[k], (double)hist_quantile(h, 0.50));
            series_add(&p99[k], (double)hist_quantile(h, 0.99));
            series_add(&idle[k], cpu);
            series_add(&tail[k], last);
            hist_merge(pooled[k], h);
            hist_free(h);
            round_done(window_names[k]);
        }
        round_end();
    }
    json_obj(j, "spin");
    json_num(j, "gap_ns", GAP_NS);
    json_int(j, "rounds", o->rounds);
    json_obj(j, "windows");
    for (int k = 0; k < WINDOWS; k++) {
        char metric[64];
        json_obj(j, window_names[k]);
        json_num(j, "window_s", windows[k]);
        if (lost[k]) json_str(j, "error", "a wakeup was lost (2 s timeout)");
        json_int(j, "samples", (long long)pooled[k]->n);
        json_series(j, "oneway_p50_ns", &p50[k]);
        json_series(j, "oneway_p99_ns", &p99[k]);
        json_series(j, "last_window_cpu_ns", &tail[k]);
        json_series(j, "idle_cpu_ns_per_s", &idle[k]);
        json_end(j, '}');
        printf("  spin %-6s one-way p50 %7.2f [%.2f-%.2f]  p99 %7.2f us   loop CPU: %.1f us in the "
               "1 ms after the last wakeup, %.3f ms in the idle second after that\n", window_names[k],
               series_median(&p50[k]) / 1e3, series_min(&p50[k]) / 1e3, series_max(&p50[k]) / 1e3,
               series_median(&p99[k]) / 1e3, series_median(&tail[k]) / 1e3, series_median(&idle[k]) / 1e6);
        series_t us = series_scaled(&p50[k], 1e-3);
        snprintf(metric, sizeof metric, "spin %s: wakeup p50 at %u us gap (us)", window_names[k], GAP_NS / 1000);
        table_series(metric, peer_crunloop.name, &us, "us", LOWER_IS_BETTER);
        series_t ms = series_scaled(&idle[k], 1e-6);
        snprintf(metric, sizeof metric, "spin %s: idle loop CPU per s (ms)", window_names[k]);
        table_series(metric, peer_crunloop.name, &ms, "ms", LOWER_IS_BETTER);
        hist_free(pooled[k]);
    }
    json_end(j, '}');
    json_end(j, '}');
}
