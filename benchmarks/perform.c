/* perform.c - benchmark 12: blocks queued to a loop (rl_loop_perform_context and rl_loop_perform;
 * CF: CFRunLoopPerformBlock) and the heap allocations each costs in steady state.
 *
 * From another thread: a producer on the other CPU queues blocks to a running loop and wakes it,
 * keeping at most WINDOW blocks in flight (the core keeps 256 spent blocks for reuse; a window
 * under that is a steady state that needs no allocation). From the loop's own thread: the loop
 * queues BURST blocks, then makes one pass that runs them, as a callout that defers work does.
 *
 * Allocations are counted by the malloc interposers (allocs.c) over the measured window only,
 * which starts after a fifth of the run (first-use allocations, the spare blocks filling up)
 * and ends before the loop is stopped: every allocation of the process in that window, the
 * producer's and the loop's, divided by the blocks performed in it. */
#include "host.h"
#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOW = 128, BURST = 64 };

typedef struct {
    const bench_opts_t *o;
    host_t b;
    unsigned flags;
    _Atomic long done;
    _Atomic int stop;
    double blocks_per_s, allocs, frees, bytes;
} perf_t;

static void block_cb(void *arg)
{
    perf_t *w = arg;
    atomic_store_explicit(&w->done, atomic_load_explicit(&w->done, memory_order_relaxed) + 1,
                          memory_order_release);     /* only the loop's thread writes it */
}

static void stop_cb(void *arg)
{
    perf_t *w = arg;
    if (atomic_load(&w->stop)) w->b.p->stop(w->b.loop);
}

static void finish(perf_t *w, uint64_t t0, long done0)
{
    alloc_counts_t ac;
    long blocks;
    uint64_t t1;
    alloc_count_stop(&ac);
    t1 = now_ns();
    blocks = atomic_load(&w->done) - done0;
    if (blocks < 1) blocks = 1;
    w->blocks_per_s = (double)blocks / ((double)(t1 - t0) / 1e9);
    w->allocs = (double)ac.allocs / (double)blocks;
    w->frees = (double)ac.frees / (double)blocks;
    w->bytes = (double)ac.bytes / (double)blocks;
}

/* The producer: on its own thread, pinned to the other CPU. */
static void *producer(void *arg)
{
    perf_t *w = arg;
    peer_t *p = w->b.p;
    uint64_t start = now_ns(), warm = start + (uint64_t)(w->o->perform_seconds * 0.2e9);
    uint64_t end = start + (uint64_t)(w->o->perform_seconds * 1.2e9), t0 = 0;
    long queued = 0, done0 = 0;
    int counting = 0, alone = ncpus() < 2;
    for (;;) {
        while (queued - atomic_load_explicit(&w->done, memory_order_acquire) >= WINDOW)
            if (alone) sched_yield();
        p->perform(w->b.loop, block_cb, w, w->flags | PERFORM_WAKE);
        queued++;
        if ((queued & 63) == 0) {
            uint64_t t = now_ns();
            if (!counting && t >= warm) {
                counting = 1;
                done0 = atomic_load(&w->done);
                t0 = now_ns();
                alloc_count_start();
            } else if (counting && t >= end) break;
        }
    }
    finish(w, t0, done0);
    while (atomic_load(&w->done) < queued) sched_yield();    /* every block ran */
    return NULL;
}

static void run_cross(const bench_opts_t *o, peer_t *p, unsigned flags, perf_t *w)
{
    w->o = o;
    w->flags = flags;
    host_start(&w->b, p, o->cpu_b, stop_cb, w);
    host_wait_ready(&w->b);
    run_in_thread(o->cpu_a, producer, w);
    atomic_store(&w->stop, 1);
    p->async_send(w->b.async);
    host_release(&w->b);
    host_join(&w->b);
}

static void nothing(void *arg) { (void)arg; }

/* The loop's own thread queues BURST blocks, then one pass runs them. */
static void *self_main(void *arg)
{
    perf_t *w = arg;
    peer_t *p = w->b.p;
    void *loop = p->loop_new(), *keep = p->async_new(loop, nothing, NULL);  /* mode not empty */
    uint64_t start = now_ns(), warm = start + (uint64_t)(w->o->perform_seconds * 0.2e9);
    uint64_t end = start + (uint64_t)(w->o->perform_seconds * 1.2e9), t0 = 0;
    long done0 = 0;
    int counting = 0;
    w->b.loop = loop;
    for (;;) {
        uint64_t t;
        for (int i = 0; i < BURST; i++) p->perform(loop, block_cb, w, w->flags);
        p->pass(loop);
        t = now_ns();
        if (!counting && t >= warm) {
            counting = 1;
            done0 = atomic_load(&w->done);
            t0 = now_ns();
            alloc_count_start();
        } else if (counting && t >= end) break;
    }
    finish(w, t0, done0);
    p->async_free(keep);
    p->loop_free(loop);
    return NULL;
}

enum { V_CROSS_CTX, V_CROSS_PLAIN, V_SELF_CTX, V_SELF_PLAIN, V_COUNT };
static const char *const v_key[V_COUNT] = { "from_thread_context", "from_thread_plain",
                                            "same_thread_context", "same_thread_plain" };
static const char *const v_what[V_COUNT] = {
    "perform ctx, other thread", "perform fn+arg, other thread",
    "perform ctx, loop's thread", "perform fn+arg, loop's thread" };

typedef struct { series_t rate[V_COUNT], allocs[V_COUNT], frees[V_COUNT], bytes[V_COUNT]; } perf_res_t;

static void perf_round(const bench_opts_t *o, peer_t *p, int round, perf_res_t *r)
{
    for (int m = 0; m < V_COUNT; m++) {
        int v = (m + round) % V_COUNT;            /* rotate the variants too */
        perf_t *w = calloc(1, sizeof *w);
        unsigned flags = v == V_CROSS_PLAIN || v == V_SELF_PLAIN ? PERFORM_PLAIN : 0;
        if (v <= V_CROSS_PLAIN) run_cross(o, p, flags, w);
        else {
            w->o = o;
            w->flags = flags;
            w->b.p = p;
            run_in_thread(o->cpu_b, self_main, w);
        }
        series_add(&r->rate[v], w->blocks_per_s);
        series_add(&r->allocs[v], w->allocs);
        series_add(&r->frees[v], w->frees);
        series_add(&r->bytes[v], w->bytes);
        free(w);
    }
}

static void perf_report(peer_t *p, perf_res_t *r, json_t *j)
{
    json_obj(j, p->name);
    for (int v = 0; v < V_COUNT; v++) {
        char metric[64];
        json_obj(j, v_key[v]);
        json_series(j, "blocks_per_s", &r->rate[v]);
        json_series(j, "allocations_per_block", &r->allocs[v]);
        json_series(j, "frees_per_block", &r->frees[v]);
        json_series(j, "bytes_allocated_per_block", &r->bytes[v]);
        json_end(j, '}');
        printf("  %-10s %-30s %10.0f blocks/s [%.0f-%.0f]  %.3f allocations/block (%.0f bytes)\n",
               p->name, v_what[v], series_median(&r->rate[v]), series_min(&r->rate[v]),
               series_max(&r->rate[v]), series_median(&r->allocs[v]), series_median(&r->bytes[v]));
        snprintf(metric, sizeof metric, "%s (blocks/s)", v_what[v]);
        table_series(metric, p->name, &r->rate[v], "blk/s", HIGHER_IS_BETTER);
        snprintf(metric, sizeof metric, "%s (allocs/block)", v_what[v]);
        table_series(metric, p->name, &r->allocs[v], "allocs", LOWER_IS_BETTER);
    }
    json_end(j, '}');
}

void bench_perform(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    perf_res_t *res = calloc((size_t)n, sizeof *res);
    printf("\n== 12. blocks performed by the loop (from another thread, at most %d in flight; from "
           "the loop's thread, %d per pass; %.2f s per variant; %d rounds) ==\n", WINDOW, BURST,
           o->perform_seconds, o->rounds);
    for (int r = 0; r < o->rounds; r++) {
        round_begin(r, o->rounds);
        int order[MAX_PEERS], count = round_order(peers, n, peer_has_perform, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            perf_round(o, peers[i], r, &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "perform");
    json_int(j, "rounds", o->rounds);
    json_num(j, "seconds", o->perform_seconds);
    json_int(j, "in_flight_from_thread", WINDOW);
    json_int(j, "burst_same_thread", BURST);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++)
        if (peers[i]->perform) perf_report(peers[i], &res[i], j);
    json_end(j, '}');
    json_end(j, '}');
    free(res);
}
