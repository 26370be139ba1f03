/* pass.c - benchmark 6: the cost of one non-blocking loop pass (rl_run_in_mode(mode, 0, false)
 * and each peer's equivalent) with one idle wakeup source, with 1/10/100 observers of every
 * activity, with 10k idle (never signalled) wakeup sources and with 100k idle timers an hour
 * away. A loop that scans idle items pays for them in every pass. */
#include "bench.h"
#include <stdlib.h>
#include <string.h>

enum { S_EMPTY, S_OBS1, S_OBS10, S_OBS100, S_SOURCES, S_TIMERS, S_COUNT };
static const char *const scen_name[S_COUNT] = { "empty", "observers_1", "observers_10",
                                                "observers_100", "idle_sources_10k",
                                                "idle_timers_100k" };
static const char *const scen_metric[S_COUNT] = {
    "pass: empty (ns)", "pass: 1 observer (ns)", "pass: 10 observers (ns)",
    "pass: 100 observers (ns)", "pass: 10k idle sources (ns)", "pass: 100k idle timers (ns)" };

static void nothing(void *arg) { (void)arg; }

typedef struct {
    peer_t *p;
    int scen;
    void *loop, *async;
    void **items;
    int nitems, timers;
} scen_t;

static int scen_supported(peer_t *p, int s)
{
    if (!p->pass || !p->async_new || p == &peer_futex) return 0;
    if (s >= S_OBS1 && s <= S_OBS100) return p->observer_add != NULL;
    if (s == S_TIMERS) return p->timer_new != NULL && p != &peer_epoll;
    if (s == S_SOURCES) return p != &peer_epoll;
    return 1;
}

static int scen_setup(scen_t *c)
{
    peer_t *p = c->p;
    uint64_t rng = 12345;
    c->loop = p->loop_new();
    c->async = p->async_new(c->loop, nothing, NULL);
    if (!c->async) return -1;
    if (c->scen >= S_OBS1 && c->scen <= S_OBS100) {
        int k = c->scen == S_OBS1 ? 1 : c->scen == S_OBS10 ? 10 : 100;
        for (int i = 0; i < k; i++)
            if (p->observer_add(c->loop) != 0) return -1;
    } else if (c->scen == S_SOURCES) {
        c->nitems = 10000;
        c->items = calloc((size_t)c->nitems, sizeof *c->items);
        for (int i = 0; i < c->nitems; i++) c->items[i] = p->async_new(c->loop, nothing, NULL);
    } else if (c->scen == S_TIMERS) {
        c->nitems = 100000;
        c->timers = 1;
        c->items = calloc((size_t)c->nitems, sizeof *c->items);
        for (int i = 0; i < c->nitems; i++) {
            c->items[i] = p->timer_new(c->loop, nothing, NULL);
            p->timer_start(c->items[i], 3600 + (double)(rng_next(&rng) % 1000000) * 1e-3, 0);
        }
    }
    p->pass(c->loop);       /* settle (first-pass work, fd registration) */
    return 0;
}

static void scen_teardown(scen_t *c)
{
    for (int i = 0; i < c->nitems; i++)
        if (c->items[i]) (c->timers ? c->p->timer_free : c->p->async_free)(c->items[i]);
    free(c->items);
    c->p->async_free(c->async);
    c->p->loop_free(c->loop);
}

__attribute__((noinline)) void cg_pass_loop(peer_t *p, void *loop, long passes)
{
    for (long i = 0; i < passes; i++) p->pass(loop);
}

typedef struct { scen_t c; double seconds, ns; long passes; int ok; } pass_run_t;

static void *pass_main(void *arg)
{
    pass_run_t *r = arg;
    uint64_t t0, el = 0;
    long batch = 16, done = 0;
    if (scen_setup(&r->c) != 0) return NULL;
    t0 = now_ns();
    while (el < (uint64_t)(r->seconds * 1e9)) {
        cg_pass_loop(r->c.p, r->c.loop, batch);
        done += batch;
        el = now_ns() - t0;
        if (batch < (1 << 20)) batch *= 2;
    }
    r->ns = (double)el / (double)done;
    r->passes = done;
    r->ok = 1;
    scen_teardown(&r->c);
    return NULL;
}

typedef struct { series_t ns[S_COUNT], passes[S_COUNT]; int failed[S_COUNT]; } pass_res_t;

static void pass_round(const bench_opts_t *o, peer_t *p, pass_res_t *res)
{
    for (int s = 0; s < S_COUNT; s++) {
        pass_run_t r;
        if (!scen_supported(p, s)) continue;
        memset(&r, 0, sizeof r);
        r.c.p = p;
        r.c.scen = s;
        r.seconds = o->pass_seconds;
        run_in_thread(o->cpu_b, pass_main, &r);
        if (!r.ok) { res->failed[s] = 1; continue; }
        series_add(&res->ns[s], r.ns);
        series_add(&res->passes[s], (double)r.passes);
    }
}

static void pass_report(peer_t *p, pass_res_t *res, json_t *j)
{
    json_obj(j, p->name);
    printf("  %-10s", p->name);
    for (int s = 0; s < S_COUNT; s++) {
        if (!scen_supported(p, s)) { printf(" %16s", "n/a"); continue; }
        if (!res->ns[s].n) { printf(" %16s", "failed"); continue; }
        printf(" %16.1f", series_median(&res->ns[s]));
        json_obj(j, scen_name[s]);
        json_series(j, "ns_per_pass", &res->ns[s]);
        json_series(j, "passes", &res->passes[s]);
        json_end(j, '}');
        table_series(scen_metric[s], p->name, &res->ns[s], "ns", LOWER_IS_BETTER);
    }
    printf("\n");
    json_end(j, '}');
}

static int pass_peer(const peer_t *p) { return p->pass && p != &peer_futex; }

void bench_pass(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    pass_res_t *res = calloc((size_t)n, sizeof *res);
    printf("\n== 6. per-pass cost (one non-blocking pass; %d rounds, ~%.2f s per figure) ==\n",
           o->heavy_rounds, o->pass_seconds);
    for (int r = 0; r < o->heavy_rounds; r++) {
        round_begin(r, o->heavy_rounds);
        int order[MAX_PEERS], count = round_order(peers, n, pass_peer, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            pass_round(o, peers[i], &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    printf("  %-10s", "peer");
    for (int s = 0; s < S_COUNT; s++) printf(" %16s", scen_name[s]);
    printf("   (ns per pass, median of the rounds)\n");
    json_obj(j, "pass");
    json_int(j, "rounds", o->heavy_rounds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++)
        if (pass_peer(peers[i])) pass_report(peers[i], &res[i], j);
    json_end(j, '}');
    json_end(j, '}');
    free(res);
}

/* --callgrind-pass: set the scenario up, then only cg_pass_loop (collect with
 * valgrind --tool=callgrind --toggle-collect=cg_pass_loop; instructions / passes). */
int callgrind_pass(peer_t *p, const char *scenario, long passes)
{
    scen_t c;
    int s;
    for (s = 0; s < S_COUNT && strcmp(scen_name[s], scenario); s++) {}
    if (s == S_COUNT || !scen_supported(p, s)) {
        fprintf(stderr, "--callgrind-pass: scenario %s is not available for %s\n", scenario, p->name);
        return 2;
    }
    memset(&c, 0, sizeof c);
    c.p = p;
    c.scen = s;
    if (scen_setup(&c) != 0) return 1;
    cg_pass_loop(p, c.loop, passes);
    scen_teardown(&c);
    return 0;
}
