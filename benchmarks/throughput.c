/* throughput.c - benchmark 2: 1 and N producer threads send wakeups to one loop as fast as they
 * can for a fixed time. Callbacks per second show how a loop coalesces a burst; write syscalls
 * per callback (the process's syscw delta from /proc/self/io; for CRunLoop also its own
 * wakeup_writes counter) show what each wakeup costs the kernel. */
#include "host.h"
#include <stdlib.h>

typedef struct {
    host_t b;
    _Atomic int stop_producers, done;
    _Atomic long sends;
    long callbacks;
} tput_t;

static void tput_cb(void *arg)
{
    tput_t *w = arg;
    if (atomic_load(&w->done)) {
        w->b.p->stop(w->b.loop);
        return;
    }
    w->callbacks++;
}

typedef struct { tput_t *w; int cpu; pthread_t th; } producer_t;

static void *producer(void *pp)
{
    producer_t *pr = pp;
    tput_t *w = pr->w;
    long n = 0;
    if (pr->cpu >= 0) pin_self(pr->cpu);
    while (!atomic_load_explicit(&w->stop_producers, memory_order_relaxed)) {
        w->b.p->async_send(w->b.async);
        n++;
    }
    atomic_fetch_add(&w->sends, n);
    return NULL;
}

/* The figures of one run; one series per figure over the rounds. */
enum { T_SENDS, T_CBS, T_SENDS_S, T_CB_S, T_SYSCW, T_WRITES, T_CPU, T_COUNT };
static const char *const t_key[T_COUNT] = { "sends", "callbacks", "sends_per_s", "callbacks_per_s",
                                            "syscw_per_callback", "wakeup_writes_per_callback",
                                            "loop_thread_cpu_s" };
typedef struct { series_t f[T_COUNT]; } tput_res_t;

static void run_one(const bench_opts_t *o, peer_t *p, int nprod, tput_res_t *res)
{
    tput_t *w = calloc(1, sizeof *w);
    producer_t pr[64];
    unsigned long long w0 = 0, w1 = 0, waits, syscw0, syscw1;
    uint64_t t0, t1;
    double secs, cb;
    host_start(&w->b, p, o->cpu_b, tput_cb, w);
    host_wait_ready(&w->b);
    if (p->counters) p->counters(w->b.loop, &w0, &waits);
    syscw0 = proc_syscw();
    t0 = now_ns();
    for (int i = 0; i < nprod; i++) {
        /* Producers go on the other CPUs when there are some, else share B's. */
        int cpu = o->cpu_a < 0 ? -1 : ncpus() > 1 ? cpu_nth(1 + i % (ncpus() - 1)) : o->cpu_b;
        pr[i] = (producer_t){ w, cpu, 0 };
        pthread_create(&pr[i].th, NULL, producer, &pr[i]);
    }
    sleep_ns((uint64_t)(o->tput_seconds * 1e9));
    atomic_store(&w->stop_producers, 1);
    for (int i = 0; i < nprod; i++) pthread_join(pr[i].th, NULL);
    t1 = now_ns();
    syscw1 = proc_syscw();
    if (p->counters) p->counters(w->b.loop, &w1, &waits);
    atomic_store(&w->done, 1);
    p->async_send(w->b.async);
    host_release(&w->b);
    host_join(&w->b);
    secs = (double)(t1 - t0) / 1e9;
    cb = w->callbacks ? (double)w->callbacks : 1;
    series_add(&res->f[T_SENDS], (double)atomic_load(&w->sends));
    series_add(&res->f[T_CBS], (double)w->callbacks);
    series_add(&res->f[T_SENDS_S], (double)atomic_load(&w->sends) / secs);
    series_add(&res->f[T_CB_S], (double)w->callbacks / secs);
    series_add(&res->f[T_SYSCW], (double)(syscw1 - syscw0) / cb);
    if (p->counters) series_add(&res->f[T_WRITES], (double)(w1 - w0) / cb);
    series_add(&res->f[T_CPU], (double)w->b.cpu_ns / 1e9);
    free(w);
}

static void report(const bench_opts_t *o, peer_t *p, int nprod, const tput_res_t *r, json_t *j)
{
    char metric[64], key[16];
    snprintf(key, sizeof key, "producers_%d", nprod);
    json_obj(j, key);
    json_int(j, "producers", nprod);
    json_num(j, "seconds", o->tput_seconds);
    for (int k = 0; k < T_COUNT; k++)
        if (r->f[k].n) json_series(j, t_key[k], &r->f[k]);
    json_end(j, '}');
    printf("  %-10s %d producer%s  %10.0f sends/s  %10.0f callbacks/s [worst %.0f, best %.0f]  "
           "%6.3f write syscalls/callback", p->name, nprod, nprod > 1 ? "s" : " ",
           series_median(&r->f[T_SENDS_S]), series_median(&r->f[T_CB_S]),
           series_min(&r->f[T_CB_S]), series_max(&r->f[T_CB_S]), series_median(&r->f[T_SYSCW]));
    if (r->f[T_WRITES].n) printf("  (wakeup_writes/callback %.3f)", series_median(&r->f[T_WRITES]));
    printf("\n");
    snprintf(metric, sizeof metric, "signal throughput, %d producer%s", nprod, nprod > 1 ? "s" : "");
    table_series(metric, p->name, &r->f[T_CB_S], "cb/s", HIGHER_IS_BETTER);
}

void bench_throughput(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    tput_res_t (*res)[2] = calloc((size_t)n, sizeof *res);
    int nprod[2] = { 1, o->tput_producers };
    printf("\n== 2. signal throughput and coalescing (%d rounds; %.2f s per run; 1 and %d producers) ==\n",
           o->rounds, o->tput_seconds, o->tput_producers);
    for (int r = 0; r < o->rounds; r++) {
        round_begin(r, o->rounds);
        int order[MAX_PEERS], count = round_order(peers, n, peer_has_async, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            /* Alternate which of the two runs goes first, as the peers rotate. */
            for (int m = 0; m < 2; m++) run_one(o, peers[i], nprod[(m + r) & 1], &res[i][(m + r) & 1]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "throughput");
    json_int(j, "rounds", o->rounds);
    json_num(j, "seconds", o->tput_seconds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        if (!peers[i]->async_new) continue;
        json_obj(j, peers[i]->name);
        for (int m = 0; m < 2; m++) report(o, peers[i], nprod[m], &res[i][m], j);
        json_end(j, '}');
    }
    json_end(j, '}');
    json_end(j, '}');
    free(res);
}
