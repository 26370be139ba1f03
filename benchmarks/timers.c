/* timers.c - benchmarks 3, 4 and 5: timer heap scaling, timer precision, an idle loop. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- 3. heap scaling: add N one-shot timers due in 1..21 ms (random), remove every other one,
 * fire the rest (the deadlines have passed by then: the phase measures dispatch, not waiting),
 * tear down. Every phase stops at the time cap and reports how far it got.
 *
 * Each (peer, N, round) runs in a process of its own (this program again, with --heap-child), so
 * that every peer starts from the same allocator state. In one process a peer would inherit the
 * heap the previous peer left: after GLib's rounds (300 MB still resident), CRunLoop's add was
 * 130-140 ns instead of 180-210 (its timers came from reused memory, no page faults) and its
 * remove 55-82 ns instead of 30-36, with no page fault or preemption during the phase; libev's
 * add moved between 36 and 72 ns the same way. The figures then said more about which peer ran
 * before than about the peer itself. ---------------------------------------------------------- */

typedef struct {
    const bench_opts_t *o;
    peer_t *p;
    long n;
    void *loop;
    long fired, expected;
    uint64_t fire_deadline;
    int capped;
    /* results: ns per op and ops done for add, remove, fire, teardown */
    double ns[4];
    long done[4];
} heap_t;

static void heap_cb(void *arg)
{
    heap_t *w = arg;
    if (++w->fired >= w->expected) w->p->stop(w->loop);
    else if ((w->fired & 63) == 0 && now_ns() > w->fire_deadline) {
        w->capped = 1;
        w->p->stop(w->loop);
    }
}

static void *heap_main(void *arg)
{
    heap_t *w = arg;
    peer_t *p = w->p;
    void **t = calloc((size_t)w->n, sizeof *t);
    uint64_t cap = (uint64_t)(w->o->timer_cap_seconds * 1e9), t0, t1, rng = 0x9E3779B97F4A7C15ull;
    long added = 0, removed = 0;
    w->loop = p->loop_new();
    t0 = now_ns();
    for (long i = 0; i < w->n; i++) {
        double delay = 0.001 + (double)(rng_next(&rng) % 20000) * 1e-6;
        if (!(t[i] = p->timer_new(w->loop, heap_cb, w))) break;
        p->timer_start(t[i], delay, 0);
        added = i + 1;
        if ((i & 255) == 255 && now_ns() - t0 > cap) break;
    }
    t1 = now_ns();
    w->ns[0] = (double)(t1 - t0) / (double)(added ? added : 1);
    w->done[0] = added;
    t0 = now_ns();
    for (long i = 1; i < added; i += 2) {
        p->timer_stop(t[i]);
        removed++;
        if ((removed & 255) == 0 && now_ns() - t0 > cap) break;
    }
    w->ns[1] = (double)(now_ns() - t0) / (double)(removed ? removed : 1);
    w->done[1] = removed;
    /* The last deadline was at most 21 ms after the end of the add phase. */
    if (now_ns() < t1 + 25000000) sleep_ns(t1 + 25000000 - now_ns());
    w->expected = added - removed;
    t0 = now_ns();
    w->fire_deadline = t0 + cap;
    if (w->expected > 0) p->run(w->loop);
    w->ns[2] = (double)(now_ns() - t0) / (double)(w->fired ? w->fired : 1);
    w->done[2] = w->fired;
    t0 = now_ns();
    for (long i = 0; i < added; i++) p->timer_free(t[i]);
    p->loop_free(w->loop);
    w->ns[3] = (double)(now_ns() - t0) / (double)(added ? added : 1);
    w->done[3] = added;
    free(t);
    return NULL;
}

/* Per peer and N: each phase's ns/op and ops over the rounds, and in how many rounds each of
 * add, remove and fire hit the cap. A peer capped at one N in the first round skips the larger
 * ones (CF fires every due timer it has collected before it looks at a stop, so its fire phase
 * at 1e6 would take a quarter of an hour whatever the cap). */
typedef struct { series_t ns[4], done[4]; int capped[3], skipped, failed; } heap_res_t;

static int heap_capped(const heap_res_t *r) { return r->capped[0] + r->capped[1] + r->capped[2]; }

/* --heap-child: one peer, one N, one round; one line on stdout for the parent. */
int heap_child(peer_t *p, long n, double cap_s, int cpu)
{
    bench_opts_t o;
    heap_t w;
    memset(&o, 0, sizeof o);
    memset(&w, 0, sizeof w);
    o.timer_cap_seconds = cap_s;
    w.o = &o;
    w.p = p;
    w.n = n;
    run_in_thread(cpu, heap_main, &w);
    printf("ns %.6f %.6f %.6f %.6f done %ld %ld %ld %ld capped %d\n", w.ns[0], w.ns[1], w.ns[2],
           w.ns[3], w.done[0], w.done[1], w.done[2], w.done[3], w.capped);
    fflush(stdout);
    _exit(0);
}

/* Run one child into w; 0, or -1 when it failed. */
static int heap_run_child(const bench_opts_t *o, const peer_t *p, long N, heap_t *w)
{
    FILE *f;
    int ok;
    if (!(f = popen_self("--heap-child %s %ld %.3f %d", p->name, N, o->timer_cap_seconds, o->cpu_b)))
        return -1;
    ok = fscanf(f, "ns %lf %lf %lf %lf done %ld %ld %ld %ld capped %d", &w->ns[0], &w->ns[1],
                &w->ns[2], &w->ns[3], &w->done[0], &w->done[1], &w->done[2], &w->done[3],
                &w->capped) == 9;
    return pclose(f) == 0 && ok ? 0 : -1;
}

static void heap_round(const bench_opts_t *o, peer_t *p, long N, heap_res_t *r)
{
    heap_t w;
    memset(&w, 0, sizeof w);
    w.o = o;
    w.p = p;
    w.n = N;
    if (heap_run_child(o, p, N, &w) != 0) {
        r->failed = 1;
        return;
    }
    for (int k = 0; k < 4; k++) {
        series_add(&r->ns[k], w.ns[k]);
        series_add(&r->done[k], (double)w.done[k]);
    }
    r->capped[0] += w.done[0] < N;
    r->capped[1] += w.done[1] < w.done[0] / 2;
    r->capped[2] += w.capped;
}

static void heap_report(const bench_opts_t *o, peer_t *p, int e, const heap_res_t *r, json_t *j)
{
    static const char *phase[4] = { "add", "remove", "fire", "teardown" };
    char key[16], metric[64], note[96];
    long N = lround(pow(10, e));
    snprintf(key, sizeof key, "1e%d", e);
    json_obj(j, key);
    json_int(j, "n", N);
    if (r->failed || (!r->skipped && !r->ns[0].n)) {
        json_str(j, "error", "the child process failed");
        json_end(j, '}');
        printf("  %-10s %8ld   the child process failed\n", p->name, N);
        if (e != o->timer_max_exp && e != 5) return;
        for (int k = 0; k < 3; k++) {
            snprintf(metric, sizeof metric, "timers 1e%d %s (ns/op)", e, phase[k]);
            table_note(metric, p->name, "the child process failed");
        }
        return;
    }
    if (r->skipped) {
        snprintf(note, sizeof note, "skipped: capped at 1e%d already", e - 1);
        json_str(j, "skipped", note);
        json_end(j, '}');
        printf("  %-10s %8ld   %s\n", p->name, N, note);
        if (e != o->timer_max_exp && e != 5) return;
        for (int k = 0; k < 3; k++) {
            snprintf(metric, sizeof metric, "timers 1e%d %s (ns/op)", e, phase[k]);
            table_note(metric, p->name, note);
        }
        return;
    }
    for (int k = 0; k < 4; k++) {
        json_obj(j, phase[k]);
        json_series(j, "ns_per_op", &r->ns[k]);
        json_series(j, "ops", &r->done[k]);
        if (k < 3) json_int(j, "capped_rounds", r->capped[k]);
        json_end(j, '}');
    }
    json_bool(j, "capped", heap_capped(r) > 0);
    json_end(j, '}');
    printf("  %-10s %8ld %12.0f %12.0f %12.0f %12.0f", p->name, N, series_median(&r->ns[0]),
           series_median(&r->ns[1]), series_median(&r->ns[2]), series_median(&r->ns[3]));
    if (heap_capped(r))
        printf("   capped (median ops: added %.0f, removed %.0f, fired %.0f)",
               series_median(&r->done[0]), series_median(&r->done[1]), series_median(&r->done[2]));
    printf("\n");
    if (e != o->timer_max_exp && e != 5) return;
    for (int k = 0; k < 3; k++) {
        snprintf(metric, sizeof metric, "timers 1e%d %s (ns/op)", e, phase[k]);
        table_series(metric, p->name, &r->ns[k], "ns", LOWER_IS_BETTER);
        if (r->capped[k]) {
            snprintf(note, sizeof note, "capped at %.1f s in %d of %d rounds: median ops %.0f",
                     o->timer_cap_seconds, r->capped[k], r->ns[k].n, series_median(&r->done[k]));
            table_annotate(metric, p->name, note);
        }
    }
}

static int heap_peer(const peer_t *p) { return p->timer_new && !p->is_floor; }

void bench_timer_heap(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    int ne = o->timer_max_exp - 2;
    heap_res_t *res = calloc((size_t)(n * ne), sizeof *res);
    printf("\n== 3. timer heap scaling (one-shot timers due in 1-21 ms; %d rounds; cap %.1f s per "
           "phase) ==\n", o->heavy_rounds, o->timer_cap_seconds);
    for (int r = 0; r < o->heavy_rounds; r++) {
        round_begin(r, o->heavy_rounds);
        int order[MAX_PEERS], count = round_order(peers, n, heap_peer, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            for (int e = 3; e <= o->timer_max_exp; e++) {
                heap_res_t *h = &res[i * ne + e - 3];
                if (r == 0 && e > 3 && (h[-1].skipped || heap_capped(&h[-1]))) h->skipped = 1;
                if (!h->skipped && !h->failed) heap_round(o, peers[i], lround(pow(10, e)), h);
            }
            round_done(peers[i]->name);
        }
        round_end();
    }
    printf("  %-10s %8s %12s %12s %12s %12s   (ns per operation, median of the rounds)\n", "peer",
           "N", "add", "remove half", "fire rest", "teardown");
    json_obj(j, "timer_heap");
    json_int(j, "rounds", o->heavy_rounds);
    json_num(j, "cap_seconds_per_phase", o->timer_cap_seconds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        if (!heap_peer(peers[i])) continue;
        json_obj(j, peers[i]->name);
        for (int e = 3; e <= o->timer_max_exp; e++) heap_report(o, peers[i], e, &res[i * ne + e - 3], j);
        json_end(j, '}');
    }
    json_end(j, '}');
    json_end(j, '}');
    free(res);
}

/* ---- 4. precision: a 1 ms repeating timer for a fixed time. The grid is start + k ms. A fire's
 * lateness is measured against the grid point after the one the previous fire belonged to (the
 * latest grid point at or before it): a stall costs one late fire and skipped points, not a
 * lateness that stays high forever. A timer re-armed from its callback time drifts: it makes
 * fewer fires than grid points. -------------------------------------------------------------- */

typedef struct {
    peer_t *p;
    void *loop;
    uint64_t t0, end;
    long fires, early, slot;
    double interval;
    hist_t *h;
} prec_t;

static void prec_cb(void *arg)
{
    prec_t *w = arg;
    uint64_t t = now_ns(), due, step = (uint64_t)(w->interval * 1e9);
    w->fires++;
    due = w->t0 + (uint64_t)(w->slot + 1) * step;
    if (t >= due) hist_add(w->h, t - due);
    else { w->early++; hist_add(w->h, 0); }
    w->slot = (long)((t - w->t0) / step);
    if (t >= w->end) w->p->stop(w->loop);
}

typedef struct { prec_t *w; double seconds; } prec_run_t;

static void *prec_main(void *arg)
{
    prec_run_t *r = arg;
    prec_t *w = r->w;
    void *t;
    w->loop = w->p->loop_new();
    t = w->p->timer_new(w->loop, prec_cb, w);
    w->t0 = now_ns();
    w->end = w->t0 + (uint64_t)(r->seconds * 1e9);
    w->p->timer_start(t, w->interval, w->interval);
    w->p->run(w->loop);
    w->p->timer_free(t);
    w->p->loop_free(w->loop);
    return NULL;
}

/* Tolerance: ten 1 ms timers a tenth of a millisecond apart, with and without tolerance. */
typedef struct { peer_t *p; void *loop; double tol, seconds; long fires; uint64_t end;
                 unsigned long long waits; } tol_t;

static void tol_cb(void *arg)
{
    tol_t *w = arg;
    w->fires++;
    if (now_ns() >= w->end) w->p->stop(w->loop);
}

static void *tol_main(void *arg)
{
    tol_t *w = arg;
    void *t[10];
    unsigned long long wr, w0, w1;
    w->loop = w->p->loop_new();
    w->p->set_tolerance(w->loop, w->tol);
    for (int i = 0; i < 10; i++) {
        t[i] = w->p->timer_new(w->loop, tol_cb, w);
        w->p->timer_start(t[i], 0.001 + i * 0.0001, 0.001);
    }
    w->end = now_ns() + (uint64_t)(w->seconds * 1e9);
    w->p->counters(w->loop, &wr, &w0);
    w->p->run(w->loop);
    w->p->counters(w->loop, &wr, &w1);
    w->waits = w1 - w0;
    for (int i = 0; i < 10; i++) w->p->timer_free(t[i]);
    w->p->loop_free(w->loop);
    return NULL;
}

/* Per peer: the precision figures over the rounds, the lateness of every round pooled for the
 * plot, and the tolerance runs (peers with set_tolerance and counters). */
enum { P_FIRES, P_MISSED, P_EARLY, P_P50, P_P99, P_MAX, P_COUNT };
static const char *const p_key[P_COUNT] = { "fires", "grid_points_missed", "early_fires",
                                            "lateness_p50_ns", "lateness_p99_ns", "lateness_max_ns" };
enum { L_FIRES0, L_WAITS0, L_FIRES1, L_WAITS1, L_SAVED, L_COUNT };
static const char *const l_key[L_COUNT] = { "fires_without", "waits_without", "fires_with",
                                            "waits_with", "wakeups_saved_fraction" };
typedef struct { series_t f[P_COUNT], tol[L_COUNT]; hist_t *pooled; } prec_res_t;

static void prec_round(const bench_opts_t *o, peer_t *p, long want, prec_res_t *r)
{
    prec_t w;
    prec_run_t run;
    memset(&w, 0, sizeof w);
    w.p = p;
    w.interval = 0.001;
    w.h = hist_new();
    run = (prec_run_t){ &w, o->precision_seconds };
    run_in_thread(o->cpu_b, prec_main, &run);
    series_add(&r->f[P_FIRES], (double)w.fires);
    series_add(&r->f[P_MISSED], (double)(want - w.fires));
    series_add(&r->f[P_EARLY], (double)w.early);
    series_add(&r->f[P_P50], (double)hist_quantile(w.h, .5));
    series_add(&r->f[P_P99], (double)hist_quantile(w.h, .99));
    series_add(&r->f[P_MAX], (double)w.h->max);
    hist_merge(r->pooled, w.h);
    hist_free(w.h);
}

/* Ten 1 ms timers 0.1 ms apart, tolerance 0 then 0.5 ms. */
static void tol_round(const bench_opts_t *o, peer_t *p, prec_res_t *r)
{
    tol_t a = { .p = p, .tol = 0, .seconds = o->precision_seconds };
    tol_t b = { .p = p, .tol = 0.0005, .seconds = o->precision_seconds };
    run_in_thread(o->cpu_b, tol_main, &a);
    run_in_thread(o->cpu_b, tol_main, &b);
    series_add(&r->tol[L_FIRES0], (double)a.fires);
    series_add(&r->tol[L_WAITS0], (double)a.waits);
    series_add(&r->tol[L_FIRES1], (double)b.fires);
    series_add(&r->tol[L_WAITS1], (double)b.waits);
    series_add(&r->tol[L_SAVED], a.waits ? 1.0 - (double)b.waits / (double)a.waits : 0);
}

static void prec_report(peer_t *p, prec_res_t *r, json_t *j)
{
    series_t us;
    json_obj(j, p->name);
    for (int k = 0; k < P_COUNT; k++) json_series(j, p_key[k], &r->f[k]);
    json_end(j, '}');
    printf("  %-10s fires %5.0f (early %.0f)  lateness p50 %8.1f us  p99 %8.1f us [%.1f-%.1f]  "
           "max %9.1f us\n", p->name, series_median(&r->f[P_FIRES]), series_median(&r->f[P_EARLY]),
           series_median(&r->f[P_P50]) / 1e3, series_median(&r->f[P_P99]) / 1e3,
           series_min(&r->f[P_P99]) / 1e3, series_max(&r->f[P_P99]) / 1e3,
           series_max(&r->f[P_MAX]) / 1e3);
    us = series_scaled(&r->f[P_P50], 1e-3);
    table_series("1 ms timer lateness p50 (us)", p->name, &us, "us", LOWER_IS_BETTER);
    us = series_scaled(&r->f[P_P99], 1e-3);
    table_series("1 ms timer lateness p99 (us)", p->name, &us, "us", LOWER_IS_BETTER);
    table_series("1 ms timer fires (no drift = all)", p->name, &r->f[P_FIRES], "fires", HIGHER_IS_BETTER);
}

static void tol_report(peer_t *p, prec_res_t *r, json_t *j)
{
    series_t pct = series_scaled(&r->tol[L_SAVED], 100);
    json_obj(j, p->name);
    json_num(j, "timers", 10);
    json_num(j, "tolerance_s", 0.0005);
    for (int k = 0; k < L_COUNT; k++) json_series(j, l_key[k], &r->tol[k]);
    json_end(j, '}');
    printf("  %-10s ten 1 ms timers 0.1 ms apart: tolerance 0: %.0f fires, %.0f waits; "
           "tolerance 0.5 ms: %.0f fires, %.0f waits (%.0f%% fewer wakeups)\n", p->name,
           series_median(&r->tol[L_FIRES0]), series_median(&r->tol[L_WAITS0]),
           series_median(&r->tol[L_FIRES1]), series_median(&r->tol[L_WAITS1]), series_median(&pct));
    table_series("10 timers, 0.5 ms tolerance: waits saved", p->name, &pct, "%", HIGHER_IS_BETTER);
}

static int tol_peer(const peer_t *p) { return p->set_tolerance && p->counters; }

void bench_timer_precision(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    prec_res_t *res = calloc((size_t)n, sizeof *res);
    plot_series_t s[16];
    int ns = 0;
    long want = lround(o->precision_seconds / 0.001);
    printf("\n== 4. timer precision (1 ms repeating timer, %d rounds of %.2f s: %ld fires expected "
           "per round) ==\n", o->rounds, o->precision_seconds, want);
    for (int i = 0; i < n; i++) res[i].pooled = hist_new();
    for (int r = 0; r < o->rounds; r++) {
        round_begin(r, o->rounds);
        int order[MAX_PEERS], count = round_order(peers, n, peer_has_timers, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            prec_round(o, peers[i], want, &res[i]);
            if (tol_peer(peers[i])) tol_round(o, peers[i], &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "timer_precision");
    json_int(j, "rounds", o->rounds);
    json_num(j, "interval_s", 0.001);
    json_num(j, "seconds", o->precision_seconds);
    json_int(j, "expected_fires", want);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        if (!peers[i]->timer_new) continue;
        prec_report(peers[i], &res[i], j);
        s[ns++] = (plot_series_t){ peers[i]->name, res[i].pooled };
    }
    json_end(j, '}');
    json_obj(j, "tolerance");
    for (int i = 0; i < n; i++)
        if (tol_peer(peers[i])) tol_report(peers[i], &res[i], j);
    json_end(j, '}');
    json_end(j, '}');
    plot_cdf("timer_lateness.svg", "timer_lateness.png", "1 ms timer lateness CDF (all rounds)", s, ns);
    for (int i = 0; i < n; i++) hist_free(res[i].pooled);
    free(res);
}

/* ---- 5. idle: a loop waiting on a timer an hour away, stopped by a second timer. ---------- */

typedef struct { peer_t *p; void *loop; double seconds; uint64_t cpu; long csw;
                 unsigned long long waits; int has_waits; } idle_t;

static void idle_stop(void *arg)
{
    idle_t *w = arg;
    w->p->stop(w->loop);
}

static void idle_never(void *arg) { (void)arg; }

static void *idle_main(void *arg)
{
    idle_t *w = arg;
    void *far, *stop;
    unsigned long long wr, w0 = 0, w1 = 0;
    uint64_t c0;
    long s0;
    w->loop = w->p->loop_new();
    far = w->p->timer_new(w->loop, idle_never, w);
    stop = w->p->timer_new(w->loop, idle_stop, w);
    w->p->timer_start(far, 3600, 0);
    w->p->timer_start(stop, w->seconds, 0);
    if (w->p->counters) w->p->counters(w->loop, &wr, &w0);
    c0 = thread_cpu_ns();
    s0 = thread_ctx_switches();
    w->p->run(w->loop);
    w->cpu = thread_cpu_ns() - c0;
    w->csw = thread_ctx_switches() - s0;
    if (w->p->counters) {
        w->p->counters(w->loop, &wr, &w1);
        w->waits = w1 - w0;
        w->has_waits = 1;
    }
    w->p->timer_free(far);
    w->p->timer_free(stop);
    w->p->loop_free(w->loop);
    return NULL;
}

typedef struct { series_t cpu, csw, extra, waits; } idle_res_t;

static void idle_round(const bench_opts_t *o, peer_t *p, idle_res_t *r)
{
    idle_t w;
    memset(&w, 0, sizeof w);
    w.p = p;
    w.seconds = o->idle_seconds;
    run_in_thread(o->cpu_b, idle_main, &w);
    series_add(&r->cpu, (double)w.cpu / 1e9);
    series_add(&r->csw, (double)w.csw);
    series_add(&r->extra, w.csw > 1 ? (double)(w.csw - 1) : 0);
    if (w.has_waits) series_add(&r->waits, (double)w.waits);
}

static void idle_report(peer_t *p, idle_res_t *r, json_t *j)
{
    series_t us = series_scaled(&r->cpu, 1e6);
    json_obj(j, p->name);
    json_series(j, "cpu_s", &r->cpu);
    json_series(j, "context_switches", &r->csw);
    json_series(j, "extra_wakeups", &r->extra);
    if (r->waits.n) json_series(j, "waits", &r->waits);
    json_end(j, '}');
    printf("  %-10s cpu %8.1f us  context switches %.0f (1 = the stop timer; worst round %.0f)",
           p->name, series_median(&us), series_median(&r->csw), series_max(&r->csw));
    if (r->waits.n) printf("  waits %.0f", series_median(&r->waits));
    printf("\n");
    table_series("idle: extra wakeups", p->name, &r->extra, "wakeups", LOWER_IS_BETTER);
    table_series("idle: CPU (us)", p->name, &us, "us", LOWER_IS_BETTER);
}

void bench_idle(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    idle_res_t *res = calloc((size_t)n, sizeof *res);
    printf("\n== 5. idle loop (a timer an hour away; %d rounds of %.2f s) ==\n", o->rounds,
           o->idle_seconds);
    for (int r = 0; r < o->rounds; r++) {
        round_begin(r, o->rounds);
        int order[MAX_PEERS], count = round_order(peers, n, peer_has_timers, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            idle_round(o, peers[i], &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "idle");
    json_int(j, "rounds", o->rounds);
    json_num(j, "seconds", o->idle_seconds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++)
        if (peers[i]->timer_new) idle_report(peers[i], &res[i], j);
    json_end(j, '}');
    json_end(j, '}');
    free(res);
}
