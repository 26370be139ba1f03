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

static void run_one(const bench_opts_t *o, peer_t *p, int nprod, json_t *j)
{
    tput_t *w = calloc(1, sizeof *w);
    producer_t pr[64];
    unsigned long long w0 = 0, w1 = 0, waits, syscw0, syscw1;
    uint64_t t0, t1;
    double secs, cps;
    char metric[64], key[16];
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
    cps = (double)w->callbacks / secs;
    snprintf(key, sizeof key, "producers_%d", nprod);
    json_obj(j, key);
    json_int(j, "producers", nprod);
    json_num(j, "seconds", secs);
    json_int(j, "sends", atomic_load(&w->sends));
    json_int(j, "callbacks", w->callbacks);
    json_num(j, "sends_per_s", (double)atomic_load(&w->sends) / secs);
    json_num(j, "callbacks_per_s", cps);
    json_num(j, "syscw_per_callback", w->callbacks ? (double)(syscw1 - syscw0) / (double)w->callbacks : 0);
    if (p->counters) json_num(j, "wakeup_writes_per_callback",
                              w->callbacks ? (double)(w1 - w0) / (double)w->callbacks : 0);
    json_num(j, "loop_thread_cpu_s", (double)w->b.cpu_ns / 1e9);
    json_end(j, '}');
    printf("  %-10s %d producer%s  %10.0f sends/s  %10.0f callbacks/s  %6.3f write syscalls/callback",
           p->name, nprod, nprod > 1 ? "s" : " ", (double)atomic_load(&w->sends) / secs, cps,
           w->callbacks ? (double)(syscw1 - syscw0) / (double)w->callbacks : 0);
    if (p->counters) printf("  (wakeup_writes/callback %.3f)", w->callbacks ? (double)(w1 - w0) / (double)w->callbacks : 0);
    printf("\n");
    fflush(stdout);
    snprintf(metric, sizeof metric, "signal throughput, %d producer%s", nprod, nprod > 1 ? "s" : "");
    table_add(metric, p->name, cps, "cb/s", HIGHER_IS_BETTER);
    free(w);
}

void bench_throughput(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    printf("\n== 2. signal throughput and coalescing (%.1f s per run; 1 and %d producers) ==\n",
           o->tput_seconds, o->tput_producers);
    json_obj(j, "throughput");
    json_num(j, "seconds", o->tput_seconds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        if (!peers[i]->async_new) continue;
        json_obj(j, peers[i]->name);
        run_one(o, peers[i], 1, j);
        run_one(o, peers[i], o->tput_producers, j);
        json_end(j, '}');
    }
    json_end(j, '}');
    json_end(j, '}');
}
