/* timers.c - benchmarks 3, 4 and 5: timer heap scaling, timer precision, an idle loop. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- 3. heap scaling: add N one-shot timers due in 1..21 ms (random), remove every other one,
 * fire the rest (the deadlines have passed by then: the phase measures dispatch, not waiting),
 * tear down. Every phase stops at the time cap and reports how far it got. ---------------- */

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

void bench_timer_heap(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    static const char *phase[4] = { "add", "remove", "fire", "teardown" };
    printf("\n== 3. timer heap scaling (one-shot timers due in 1-21 ms; cap %.1f s per phase) ==\n",
           o->timer_cap_seconds);
    printf("  %-10s %8s %12s %12s %12s %12s   (ns per operation)\n", "peer", "N", "add",
           "remove half", "fire rest", "teardown");
    json_obj(j, "timer_heap");
    json_num(j, "cap_seconds_per_phase", o->timer_cap_seconds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        peer_t *p = peers[i];
        if (!p->timer_new || p->is_floor) continue;
        json_obj(j, p->name);
        for (int e = 3; e <= o->timer_max_exp; e++) {
            heap_t w;
            char key[16], metric[64];
            long N = lround(pow(10, e));
            memset(&w, 0, sizeof w);
            w.o = o;
            w.p = p;
            w.n = N;
            run_in_thread(o->cpu_b, heap_main, &w);
            snprintf(key, sizeof key, "1e%d", e);
            json_obj(j, key);
            json_int(j, "n", N);
            for (int k = 0; k < 4; k++) {
                json_obj(j, phase[k]);
                json_num(j, "ns_per_op", w.ns[k]);
                json_int(j, "ops", w.done[k]);
                json_end(j, '}');
            }
            json_bool(j, "capped", w.done[0] < N || w.done[1] < w.done[0] / 2 || w.capped);
            json_end(j, '}');
            printf("  %-10s %8ld %12.0f %12.0f %12.0f %12.0f", p->name, N, w.ns[0], w.ns[1],
                   w.ns[2], w.ns[3]);
            if (w.done[0] < N || w.done[1] < w.done[0] / 2 || w.capped)
                printf("   capped: added %ld, removed %ld, fired %ld of %ld", w.done[0], w.done[1],
                       w.done[2], w.expected);
            printf("\n");
            fflush(stdout);
            if (e == o->timer_max_exp || e == 5) {
                for (int k = 0; k < 3; k++) {
                    snprintf(metric, sizeof metric, "timers 1e%d %s (ns/op)", e, phase[k]);
                    table_add(metric, p->name, w.ns[k], "ns", LOWER_IS_BETTER);
                    if (k == 2 && w.capped) {
                        char note[96];
                        snprintf(note, sizeof note, "capped: fired %ld of %ld", w.done[2], w.expected);
                        table_note(metric, p->name, note);
                    }
                }
            }
        }
        json_end(j, '}');
    }
    json_end(j, '}');
    json_end(j, '}');
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

void bench_timer_precision(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    plot_series_t s[16];
    hist_t *keep[16];
    int ns = 0;
    long want = lround(o->precision_seconds / 0.001);
    printf("\n== 4. timer precision (1 ms repeating timer for %.1f s: %ld fires expected) ==\n",
           o->precision_seconds, want);
    json_obj(j, "timer_precision");
    json_num(j, "interval_s", 0.001);
    json_num(j, "seconds", o->precision_seconds);
    json_int(j, "expected_fires", want);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        peer_t *p = peers[i];
        prec_t w;
        prec_run_t r;
        if (!p->timer_new) continue;
        memset(&w, 0, sizeof w);
        w.p = p;
        w.interval = 0.001;
        w.h = hist_new();
        r = (prec_run_t){ &w, o->precision_seconds };
        run_in_thread(o->cpu_b, prec_main, &r);
        json_obj(j, p->name);
        json_int(j, "fires", w.fires);
        json_int(j, "grid_points_missed", want - w.fires);
        json_int(j, "early_fires", w.early);
        json_num(j, "lateness_p50_ns", (double)hist_quantile(w.h, .5));
        json_num(j, "lateness_p99_ns", (double)hist_quantile(w.h, .99));
        json_num(j, "lateness_max_ns", (double)w.h->max);
        json_end(j, '}');
        printf("  %-10s fires %5ld (early %ld)  lateness p50 %8.1f us  p99 %8.1f us  max %9.1f us\n",
               p->name, w.fires, w.early, hist_quantile(w.h, .5) / 1e3,
               hist_quantile(w.h, .99) / 1e3, (double)w.h->max / 1e3);
        fflush(stdout);
        table_add("1 ms timer lateness p50 (us)", p->name, hist_quantile(w.h, .5) / 1e3, "us", LOWER_IS_BETTER);
        table_add("1 ms timer lateness p99 (us)", p->name, hist_quantile(w.h, .99) / 1e3, "us", LOWER_IS_BETTER);
        table_add("1 ms timer fires (no drift = all)", p->name, (double)w.fires, "fires", HIGHER_IS_BETTER);
        s[ns] = (plot_series_t){ p->name, w.h };
        keep[ns++] = w.h;
    }
    json_end(j, '}');
    json_obj(j, "tolerance");
    for (int i = 0; i < n; i++) {
        peer_t *p = peers[i];
        tol_t a, b;
        if (!p->set_tolerance || !p->counters) continue;
        a = (tol_t){ .p = p, .tol = 0, .seconds = o->precision_seconds };
        b = (tol_t){ .p = p, .tol = 0.0005, .seconds = o->precision_seconds };
        run_in_thread(o->cpu_b, tol_main, &a);
        run_in_thread(o->cpu_b, tol_main, &b);
        json_obj(j, p->name);
        json_num(j, "timers", 10);
        json_num(j, "tolerance_s", 0.0005);
        json_int(j, "fires_without", a.fires);
        json_int(j, "waits_without", (long long)a.waits);
        json_int(j, "fires_with", b.fires);
        json_int(j, "waits_with", (long long)b.waits);
        json_num(j, "wakeups_saved_fraction", a.waits ? 1.0 - (double)b.waits / (double)a.waits : 0);
        json_end(j, '}');
        printf("  %-10s ten 1 ms timers 0.1 ms apart: tolerance 0: %ld fires, %llu waits; "
               "tolerance 0.5 ms: %ld fires, %llu waits (%.0f%% fewer wakeups)\n",
               p->name, a.fires, a.waits, b.fires, b.waits,
               a.waits ? 100.0 * (1.0 - (double)b.waits / (double)a.waits) : 0);
        table_add("10 timers, 0.5 ms tolerance: waits saved", p->name,
                  a.waits ? 100.0 * (1.0 - (double)b.waits / (double)a.waits) : 0, "%", HIGHER_IS_BETTER);
    }
    json_end(j, '}');
    json_end(j, '}');
    plot_cdf("timer_lateness.svg", "timer_lateness.png", "1 ms timer lateness CDF", s, ns);
    while (ns) hist_free(keep[--ns]);
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

void bench_idle(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    printf("\n== 5. idle loop (a timer an hour away; %.1f s) ==\n", o->idle_seconds);
    json_obj(j, "idle");
    json_num(j, "seconds", o->idle_seconds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        idle_t w;
        if (!peers[i]->timer_new) continue;
        memset(&w, 0, sizeof w);
        w.p = peers[i];
        w.seconds = o->idle_seconds;
        run_in_thread(o->cpu_b, idle_main, &w);
        json_obj(j, peers[i]->name);
        json_num(j, "cpu_s", (double)w.cpu / 1e9);
        json_int(j, "context_switches", w.csw);
        json_int(j, "extra_wakeups", w.csw > 1 ? w.csw - 1 : 0);
        if (w.has_waits) json_int(j, "waits", (long long)w.waits);
        json_end(j, '}');
        printf("  %-10s cpu %8.1f us  context switches %ld (1 = the stop timer)", peers[i]->name,
               (double)w.cpu / 1e3, w.csw);
        if (w.has_waits) printf("  waits %llu", w.waits);
        printf("\n");
        table_add("idle: extra wakeups", peers[i]->name, w.csw > 1 ? (double)(w.csw - 1) : 0,
                  "wakeups", LOWER_IS_BETTER);
        table_add("idle: CPU (us)", peers[i]->name, (double)w.cpu / 1e3, "us", LOWER_IS_BETTER);
    }
    json_end(j, '}');
    json_end(j, '}');
}
