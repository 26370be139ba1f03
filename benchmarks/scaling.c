/* scaling.c - benchmark 11: T loops on T threads (thread i pinned to CPU i), each busy with its
 * own work for a fixed time: a batch of 1000 one-shot timers due at once (100 of them removed
 * again before the loop runs) and 10 sources signalled by the loop's own thread, then the loop
 * runs until all 900 timers and 10 sources have called back; repeat. The figure is callbacks
 * per second. Loops share nothing, so T loops should do T times the work of one: the
 * efficiency is total / (T x the one-loop figure of the same round), and anything the
 * library's loops share (a global lock, a counter on one cache line, the allocator) shows up as
 * an efficiency below 1. T = 1, 2, 4, ... up to the CPUs this process may use. */
#include "bench.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 1000, REMOVED = 100, SOURCES = 10, MAX_T = 64 };

typedef struct scale scale_t;

typedef struct {
    scale_t *s;
    int cpu;
    void *loop;
    long pending, callbacks;
    double seconds;
    pthread_t th;
} worker_t;

struct scale {
    peer_t *p;
    _Atomic int ready, go, stop;
};

static void done_one(void *arg)
{
    worker_t *w = arg;
    if (--w->pending == 0) w->s->p->stop(w->loop);
}

static void batch(worker_t *w, void **t, void **src)
{
    peer_t *p = w->s->p;
    for (int i = 0; i < BATCH; i++) p->timer_start(t[i], 0, 0);
    for (int i = 0; i < BATCH; i += BATCH / REMOVED) p->timer_stop(t[i]);
    for (int i = 0; i < SOURCES; i++) p->async_send(src[i]);
    w->pending = BATCH - REMOVED + SOURCES;
    p->run(w->loop);
    w->callbacks += BATCH - REMOVED + SOURCES;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    peer_t *p = w->s->p;
    void *t[BATCH], *src[SOURCES];
    uint64_t t0;
    if (w->cpu >= 0) pin_self(w->cpu);
    w->loop = p->loop_new();
    for (int i = 0; i < BATCH; i++) t[i] = p->timer_new(w->loop, done_one, w);
    for (int i = 0; i < SOURCES; i++) src[i] = p->async_new(w->loop, done_one, w);
    batch(w, t, src);                                   /* warm: first-use allocations */
    w->callbacks = 0;
    atomic_fetch_add(&w->s->ready, 1);
    while (!atomic_load(&w->s->go)) sched_yield();
    t0 = now_ns();
    while (!atomic_load_explicit(&w->s->stop, memory_order_relaxed)) batch(w, t, src);
    w->seconds = (double)(now_ns() - t0) / 1e9;
    for (int i = 0; i < BATCH; i++) p->timer_free(t[i]);
    for (int i = 0; i < SOURCES; i++) p->async_free(src[i]);
    p->loop_free(w->loop);
    return NULL;
}

/* T loops for the benchmark's time; the sum of their callbacks per second. */
static double run_loops(const bench_opts_t *o, peer_t *p, int T)
{
    scale_t s;
    worker_t w[MAX_T];
    double total = 0;
    memset(&s, 0, sizeof s);
    s.p = p;
    for (int i = 0; i < T; i++) {
        w[i] = (worker_t){ .s = &s, .cpu = o->pin ? cpu_nth(i) : -1 };
        pthread_create(&w[i].th, NULL, worker_main, &w[i]);
    }
    while (atomic_load(&s.ready) < T) sched_yield();
    atomic_store(&s.go, 1);
    sleep_ns((uint64_t)(o->scaling_seconds * 1e9));
    atomic_store(&s.stop, 1);
    for (int i = 0; i < T; i++) {
        pthread_join(w[i].th, NULL);
        total += w[i].seconds > 0 ? (double)w[i].callbacks / w[i].seconds : 0;
    }
    return total;
}

static int nthreads(int *ts)
{
    int n = 0, cpus = ncpus() < MAX_T ? ncpus() : MAX_T;
    for (int t = 1; t <= cpus; t *= 2) ts[n++] = t;
    if (ts[n - 1] != cpus) ts[n++] = cpus;
    return n;
}

typedef struct { series_t ops[8], eff[8]; } scale_res_t;

static int scale_peer(const peer_t *p) { return p->timer_new && p->async_new && !p->is_floor; }

static void scale_round(const bench_opts_t *o, peer_t *p, const int *ts, int nt, scale_res_t *r)
{
    double one = 0;
    for (int k = 0; k < nt; k++) {
        double ops = run_loops(o, p, ts[k]);
        if (ts[k] == 1) one = ops;
        series_add(&r->ops[k], ops);
        series_add(&r->eff[k], one > 0 ? ops / (ts[k] * one) : 0);
    }
}

static void scale_report(peer_t *p, const int *ts, int nt, scale_res_t *r, json_t *j)
{
    json_obj(j, p->name);
    printf("  %-10s", p->name);
    for (int k = 0; k < nt; k++) {
        char key[32], metric[64];
        snprintf(key, sizeof key, "loops_%d", ts[k]);
        json_obj(j, key);
        json_series(j, "callbacks_per_s", &r->ops[k]);
        json_series(j, "efficiency", &r->eff[k]);
        json_end(j, '}');
        printf("  %d loop%s %9.0f cb/s", ts[k], ts[k] > 1 ? "s" : " ", series_median(&r->ops[k]));
        if (ts[k] == 1) {
            table_series("loop scaling: 1 loop (callbacks/s)", p->name, &r->ops[k], "cb/s",
                         HIGHER_IS_BETTER);
            continue;
        }
        printf(" (efficiency %.2f [%.2f-%.2f])", series_median(&r->eff[k]), series_min(&r->eff[k]),
               series_max(&r->eff[k]));
        snprintf(metric, sizeof metric, "loop scaling: %d loops / (%d x 1 loop)", ts[k], ts[k]);
        table_series(metric, p->name, &r->eff[k], "x", HIGHER_IS_BETTER);
    }
    printf("\n");
    json_end(j, '}');
}

void bench_scaling(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    scale_res_t *res = calloc((size_t)n, sizeof *res);
    int ts[8], nt = nthreads(ts);
    printf("\n== 11. loop scaling (T loops on T threads, each: %d timers due now, %d removed, %d "
           "sources signalled, repeat; %.2f s per T; %d rounds) ==\n", BATCH, REMOVED, SOURCES,
           o->scaling_seconds, o->rounds);
    for (int r = 0; r < o->rounds; r++) {
        round_begin(r, o->rounds);
        int order[MAX_PEERS], count = round_order(peers, n, scale_peer, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            scale_round(o, peers[i], ts, nt, &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "loop_scaling");
    json_int(j, "rounds", o->rounds);
    json_num(j, "seconds", o->scaling_seconds);
    json_int(j, "timers_per_batch", BATCH);
    json_int(j, "timers_removed_per_batch", REMOVED);
    json_int(j, "sources_per_batch", SOURCES);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++)
        if (scale_peer(peers[i])) scale_report(peers[i], ts, nt, &res[i], j);
    json_end(j, '}');
    json_end(j, '}');
    free(res);
}
