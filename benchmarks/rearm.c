/* rearm.c - benchmark 14: the idle-timeout re-arm, each peer with its own idiom (peer.h:
 * timer_again): CRunLoop rl_timer_set_next_fire_in, libev ev_timer_again, libuv uv_timer_start
 * on an active timer, GLib g_source_set_ready_time, libevent event_add on a pending event, CF
 * CFRunLoopTimerSetNextFireDate.
 *
 * A server's connections: N timers armed at random dates 100-200 s away. Then OPS requests each
 * arrive on a connection picked at random, whose timer is pushed back to the idle period (250 s)
 * from now: the re-armed timer becomes the latest, so each re-arm sifts it towards the bottom of
 * a heap, as in a server. The requests are served in batches of 1024 by a callout, one batch a
 * pass (the callout of the peer's cross-thread wakeup, sent from the loop's own thread before a
 * polling pass), as a server's pass serves the connections that are ready: a peer that keeps a
 * cached time (libev, libuv, libevent; CRunLoop's rl_timer_rearm) re-arms from the pass's time.
 * Only the batches are timed, inside the callout (a pass of GLib is O(N) in its sources, which
 * is not the re-arm's cost). Making the timers and the timed part each stop at the timer cap
 * (--quick 0.5 s, else 2 s; CF adds and moves a timer in O(N): an array it keeps sorted), and
 * a peer capped while making them re-arms the ones it made, which the output says. Reported: ns per re-arm, median of the
 * rounds [worst-best], the peers interleaved and rotated. */
#include "bench.h"
#include <stdlib.h>
#include <string.h>

enum { BATCH = 1024 };
#define IDLE_SECONDS 250.0

typedef struct {
    const bench_opts_t *o;
    peer_t *p;
    long n, ops;
    void **t;
    uint64_t rng, spent;
    long batches, made;
    int capped;
    double ns; /* per re-arm; NaN when the peer failed */
} rearm_t;

static void never(void *arg) { (void)arg; }

/* One batch of requests: the callout a pass makes. */
static void serve_batch(void *arg)
{
    rearm_t *w = arg;
    uint64_t t0 = now_ns();
    for (int b = 0; b < BATCH; b++) w->p->timer_again(w->t[rng_next(&w->rng) % (uint64_t)w->n], IDLE_SECONDS);
    w->spent += now_ns() - t0;
    w->batches++;
}

static int by_key(const void *a, const void *b)
{
    double x = **(const double *const *)a, y = **(const double *const *)b;
    return (x > y) - (x < y);
}

/* Free the timers in the order they are due (untimed): CF finds a timer to remove by a search
 * from the front of its sorted array, so the earliest first costs it O(1) searching each instead
 * of O(N) (a teardown of 1e5 timers in any other order takes it seconds). The order is worked
 * out by replaying the re-arms' picks: each re-arm made its timer the latest. */
static void free_earliest_first(rearm_t *w, double *key, long made, uint64_t rng)
{
    const double **order = key ? calloc((size_t)made, sizeof *order) : NULL;
    if (order) {
        for (long k = 0; k < w->batches * BATCH; k++) key[rng_next(&rng) % (uint64_t)w->n] = 1e3 + (double)k;
        for (long i = 0; i < made; i++) order[i] = &key[i];
        qsort(order, (size_t)made, sizeof *order, by_key);
        for (long i = 0; i < made; i++) w->p->timer_free(w->t[order[i] - key]);
    } else {
        for (long i = 0; i < made; i++) w->p->timer_free(w->t[i]);
    }
    free(order);
}

static void *rearm_main(void *arg)
{
    rearm_t *w = arg;
    peer_t *p = w->p;
    void *loop = p->loop_new(), *wake = loop ? p->async_new(loop, serve_batch, w) : NULL;
    long made = 0;
    w->t = calloc((size_t)w->n, sizeof *w->t);
    double *key = calloc((size_t)w->n, sizeof *key); /* for the teardown's order */
    w->rng = 0x2545F4914F6CDD1Dull;
    w->ns = __builtin_nan("");
    uint64_t cap = (uint64_t)(w->o->timer_cap_seconds * 1e9), t0 = now_ns();
    for (long i = 0; w->t && wake && i < w->n; i++, made++) {
        if (!(w->t[i] = p->timer_new(loop, never, NULL))) break;
        double delay = 100 + (double)(rng_next(&w->rng) % 100000) * 1e-3;
        p->timer_start(w->t[i], delay, 0);
        if (key) key[i] = delay;
        if ((i & 1023) == 1023 && now_ns() - t0 > cap) { /* CF adds a timer in O(N) */
            made++;
            break;
        }
    }
    w->made = made;
    if (made > 0 && made < w->n && w->t[made - 1]) {
        w->n = made; /* the re-arms pick among the timers made: fewer, and said so */
        w->capped = 1;
    }
    uint64_t rng_after_setup = w->rng;
    if (made == w->n) {
        /* A warm-up of n re-arms (every timer's line has been touched once), then the count. A
         * pass that did not run the batch (none should) is made again, up to a bound. */
        long warm = w->n / BATCH, total = warm + (w->ops + BATCH - 1) / BATCH, tries = 0;
        uint64_t start = now_ns();
        while (w->batches < total && tries++ < 4 * total) {
            if (w->batches == warm) w->spent = 0, start = now_ns();
            if (w->batches > warm && now_ns() - start > cap) { /* CF moves a timer in O(N) */
                w->capped = 1;
                break;
            }
            p->async_send(wake);
            p->pass(loop);
        }
        if (w->batches > warm && (w->batches == total || w->capped))
            w->ns = (double)w->spent / (double)((w->batches - warm) * BATCH);
    }
    free_earliest_first(w, key, made, rng_after_setup);
    if (wake) p->async_free(wake);
    if (loop) p->loop_free(loop);
    free(w->t);
    free(key);
    return NULL;
}

static int rearm_peer(const peer_t *p) { return p->timer_again && p->async_new && !p->is_floor; }

void bench_rearm(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    long N = o->quick ? 10000 : 100000, ops = o->quick ? 100000 : 500000;
    series_t *res = calloc((size_t)n, sizeof *res);
    int *failed = calloc((size_t)n, sizeof *failed), *capped = calloc((size_t)n, sizeof *capped);
    long *least_made = calloc((size_t)n, sizeof *least_made);
    for (int i = 0; i < n; i++) least_made[i] = N;
    printf("\n== 14. timer re-arm: %ld timers armed, %ld re-arms of one picked at random to %.0f s "
           "from now (the idle timeout), each peer's idiom; %d rounds ==\n", N, ops, IDLE_SECONDS, o->heavy_rounds);
    for (int r = 0; r < o->heavy_rounds; r++) {
        round_begin(r, o->heavy_rounds);
        int order[MAX_PEERS], count = round_order(peers, n, rearm_peer, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            rearm_t w = { .o = o, .p = peers[i], .n = N, .ops = ops };
            run_in_thread(o->cpu_b, rearm_main, &w);
            capped[i] += w.capped;
            if (w.made < least_made[i]) least_made[i] = w.made;
            if (w.ns == w.ns) series_add(&res[i], w.ns);
            else failed[i]++;
            round_done(peers[i]->name);
        }
        round_end();
    }
    char metric[64];
    snprintf(metric, sizeof metric, "timer re-arm 1e%d (ns/op)", N == 100000 ? 5 : 4);
    json_obj(j, "timer_rearm");
    json_int(j, "timers", N);
    json_int(j, "rearms", ops);
    json_num(j, "idle_seconds", IDLE_SECONDS);
    json_int(j, "rounds", o->heavy_rounds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        if (!rearm_peer(peers[i])) continue;
        printf("  %-10s %8.1f ns per re-arm [%.1f-%.1f]%s", peers[i]->name, series_median(&res[i]),
               series_min(&res[i]), series_max(&res[i]), failed[i] ? "  (failed in some rounds)" : "");
        if (capped[i] && least_made[i] < N)
            printf("  (capped: fewer re-arms, among %ld timers at least)", least_made[i]);
        else if (capped[i])
            printf("  (capped: fewer re-arms)");
        printf("\n");
        json_obj(j, peers[i]->name);
        json_series(j, "ns", &res[i]);
        json_int(j, "failed_rounds", failed[i]);
        json_int(j, "capped_rounds", capped[i]);
        json_int(j, "fewest_timers_made", least_made[i]);
        json_end(j, '}');
        if (!res[i].n) {
            table_note(metric, peers[i]->name, "failed");
            continue;
        }
        table_series(metric, peers[i]->name, &res[i], "ns", LOWER_IS_BETTER);
        if (capped[i]) {
            char note[96];
            snprintf(note, sizeof note, "capped at %.1f s in %d of %d rounds (%ld timers at least)",
                     o->timer_cap_seconds, capped[i], res[i].n, least_made[i]);
            table_annotate(metric, peers[i]->name, note);
        }
    }
    json_end(j, '}');
    json_end(j, '}');
    free(res);
    free(failed);
    free(capped);
    free(least_made);
}
