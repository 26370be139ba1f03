/* memory.c - benchmark 8: resident memory per armed timer. Each peer arms N one-shot timers in a
 * process of its own (this program again, with --memory-child): in the benchmark's own process
 * the heap keeps what earlier runs freed, and timers carved from that would cost no new pages.
 * The child creates its loop, then measures the RSS (/proc/self/statm) on the loop thread before
 * and after arming the timers; the growth over N is what one timer costs, everything included:
 * the library's timer object, its share of the heap or list it sits in, and the adapter's item,
 * which for libev and libuv holds the caller-owned watcher (ev_timer, uv_timer_t).
 *
 * Every adapter allocates one 32-byte item per timer ({loop, library object, cb, arg}; libev's
 * item also holds the ev_timer). A pseudo-peer, "adapter", measures that item alone the same
 * way, and the net row subtracts it: the library's cost, with the watcher the caller must own.
 *
 * Deadlines are an hour away and increase with the timer's index: the memory does not depend
 * on the order, and in increasing order CF's sorted timer array inserts at its end instead of
 * moving O(N) entries per timer. */
#include "bench.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ADAPTER_ITEM 32   /* sizeof the adapters' per-timer item: four pointers */

typedef struct {
    peer_t *p;            /* NULL: the adapter's item alone */
    long n, added;
    double cap_s, seconds;
    long rss0, rss1;
    int capped;
} mem_t;

static void never(void *arg) { (void)arg; }

static void *mem_main(void *arg)
{
    mem_t *m = arg;
    void **t = malloc((size_t)m->n * sizeof *t);
    void *loop = m->p ? m->p->loop_new() : NULL;
    uint64_t t0, cap = (uint64_t)(m->cap_s * 1e9);
    memset(t, 0, (size_t)m->n * sizeof *t);      /* resident before the first measure */
    m->rss0 = rss_bytes();
    t0 = now_ns();
    for (long i = 0; i < m->n; i++) {
        if (!m->p) t[i] = calloc(1, ADAPTER_ITEM);
        else if ((t[i] = m->p->timer_new(loop, never, NULL)))
            m->p->timer_start(t[i], 3600 + (double)i * 1e-6, 0);
        if (!t[i]) break;
        m->added = i + 1;
        if ((i & 1023) == 1023 && now_ns() - t0 > cap) {
            m->capped = 1;
            break;
        }
    }
    m->seconds = (double)(now_ns() - t0) / 1e9;
    m->rss1 = rss_bytes();
    return NULL;   /* nothing freed: the process exits */
}

/* --memory-child: one line on stdout for the parent. p NULL: the adapter's item alone. */
int memory_child(peer_t *p, long timers, double cap_s, int cpu)
{
    mem_t m = { .p = p, .n = timers > 0 ? timers : 1, .cap_s = cap_s };
    run_in_thread(cpu, mem_main, &m);
    printf("added %ld rss_growth %ld seconds %.6f capped %d\n", m.added, m.rss1 - m.rss0,
           m.seconds, m.capped);
    fflush(stdout);
    _exit(0);       /* skip the libraries' exit-time teardown of a million timers */
}

typedef struct { series_t bytes, net, added, seconds; int capped, failed; } mem_res_t;

/* Run one child; 0 with *r filled, -1 when it failed. */
static int run_child(const bench_opts_t *o, const char *name, double cap_s, mem_t *r)
{
    FILE *f;
    long growth = 0;
    int ok;
    if (!(f = popen_self("--memory-child %s %ld %.3f %d", name, o->mem_timers, cap_s, o->cpu_b)))
        return -1;
    ok = fscanf(f, "added %ld rss_growth %ld seconds %lf capped %d", &r->added, &growth,
                &r->seconds, &r->capped) == 4;
    if (pclose(f) != 0 || !ok || r->added <= 0) return -1;
    r->rss1 = growth;
    return 0;
}

static void mem_round(const bench_opts_t *o, peer_t *p, double adapter, double cap_s, mem_res_t *res)
{
    mem_t m;
    memset(&m, 0, sizeof m);
    if (run_child(o, p ? p->name : "-", cap_s, &m) != 0) { res->failed = 1; return; }
    series_add(&res->bytes, (double)m.rss1 / (double)m.added);
    if (p) series_add(&res->net, (double)m.rss1 / (double)m.added - adapter);
    series_add(&res->added, (double)m.added);
    series_add(&res->seconds, m.seconds);
    res->capped |= m.capped;
}

static int mem_peer(const peer_t *p) { return p->timer_new && !p->is_floor; }

static void mem_report(const bench_opts_t *o, const char *name, mem_res_t *r, json_t *j)
{
    const char *metric = "memory per armed timer (B)";
    char note[96];
    json_obj(j, name);
    if (r->failed || !r->bytes.n) {
        json_str(j, "error", "the child process failed");
        json_end(j, '}');
        printf("  %-10s failed\n", name);
        table_note(metric, name, "the child process failed");
        return;
    }
    json_series(j, "bytes_per_timer", &r->bytes);
    if (r->net.n) json_series(j, "bytes_per_timer_net_of_adapter_item", &r->net);
    json_series(j, "timers_armed", &r->added);
    json_series(j, "arm_seconds", &r->seconds);
    json_bool(j, "capped", r->capped);
    json_end(j, '}');
    printf("  %-10s %8.1f bytes per timer [%.1f-%.1f]", name, series_median(&r->bytes),
           series_min(&r->bytes), series_max(&r->bytes));
    if (r->net.n) printf("  net of the adapter's item %8.1f", series_median(&r->net));
    printf("  (%.0f timers armed in %.2f s)\n", series_median(&r->added), series_median(&r->seconds));
    table_series(metric, name, &r->bytes, "B", LOWER_IS_BETTER);
    if (r->capped) {
        snprintf(note, sizeof note, "capped at %.0f s: %.0f of %ld timers", o->mem_cap_seconds,
                 series_median(&r->added), o->mem_timers);
        table_annotate(metric, name, note);
    }
}

void bench_memory(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    mem_res_t *res = calloc((size_t)n, sizeof *res), adapter;
    double cap_s = o->mem_cap_seconds;
    memset(&adapter, 0, sizeof adapter);
    printf("\n== 8. memory per armed timer (%ld one-shot timers, each peer in a fresh process; %d "
           "rounds; cap %.0f s) ==\n", o->mem_timers, o->heavy_rounds, cap_s);
    for (int r = 0; r < o->heavy_rounds; r++) {
        double base;
        round_begin(r, o->heavy_rounds);
        mem_round(o, NULL, 0, cap_s, &adapter);
        base = adapter.bytes.n ? adapter.bytes.v[adapter.bytes.n - 1] : 0;
        round_done("adapter");
        int order[MAX_PEERS], count = round_order(peers, n, mem_peer, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            if (res[i].failed) continue;
            mem_round(o, peers[i], base, cap_s, &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "memory_per_timer");
    json_int(j, "rounds", o->heavy_rounds);
    json_int(j, "timers", o->mem_timers);
    json_num(j, "cap_seconds", cap_s);
    json_int(j, "adapter_item_size", ADAPTER_ITEM);
    json_obj(j, "peers");
    mem_report(o, "adapter", &adapter, j);
    for (int i = 0; i < n; i++)
        if (mem_peer(peers[i])) mem_report(o, peers[i]->name, &res[i], j);
    json_end(j, '}');
    json_end(j, '}');
    for (int i = 0; i < n; i++)
        if (mem_peer(peers[i]))
            table_series("memory per timer, net of adapter item (B)", peers[i]->name,
                         &res[i].net, "B", LOWER_IS_BETTER);
    free(res);
}
