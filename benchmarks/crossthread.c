/* crossthread.c - benchmark 10: timers added to and removed from a loop by another thread. Loop
 * B runs on its own thread, asleep, kept alive by a timer an hour away; thread A (on the other
 * CPU) adds N one-shot timers to B's loop (due 1000-1020 s from now, random), then removes them
 * all. The same-thread figure is the same procedure run by B's own thread on its loop (not
 * running), so cross / same is the price of the other thread: the loop's lock taken from
 * afar, the cache lines that move between CPUs, and any wakeup the add makes B do.
 * Only peers whose timers may be armed from any thread take part (timers_any_thread). */
#include "host.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const bench_opts_t *o;
    peer_t *p;
    void *loop;
    double ns_add, ns_remove;
    long added, removed;
} xt_t;

static void never(void *arg) { (void)arg; }

typedef struct { double due; void *t; } xt_item_t;

static int by_due(const void *a, const void *b)
{
    double x = ((const xt_item_t *)a)->due, y = ((const xt_item_t *)b)->due;
    return x < y ? -1 : x > y;
}

/* The measured part, on whichever thread calls it: create the adapter items (not timed), add
 * every timer, remove every timer, free the items (not timed). The items are freed earliest
 * deadline first: CF finds a timer by scanning its sorted array from the front, and would take
 * O(N) per timer left armed by a capped removal, minutes for nothing measured. */
static void add_remove(xt_t *x)
{
    peer_t *p = x->p;
    long n = x->o->xthread_timers;
    xt_item_t *it = calloc((size_t)n, sizeof *it);
    uint64_t rng = 0x9E3779B97F4A7C15ull, cap = (uint64_t)(x->o->timer_cap_seconds * 1e9), t0;
    for (long i = 0; i < n; i++) {
        it[i].t = p->timer_new(x->loop, never, NULL);
        it[i].due = 1000 + (double)(rng_next(&rng) % 20000000) * 1e-6;
    }
    t0 = now_ns();
    for (long i = 0; i < n && it[i].t; i++) {
        p->timer_start(it[i].t, it[i].due, 0);
        x->added = i + 1;
        if ((i & 255) == 255 && now_ns() - t0 > cap) break;
    }
    x->ns_add = (double)(now_ns() - t0) / (double)(x->added ? x->added : 1);
    t0 = now_ns();
    for (long i = 0; i < x->added; i++) {
        p->timer_stop(it[i].t);
        x->removed = i + 1;
        if ((i & 255) == 255 && now_ns() - t0 > cap) break;
    }
    x->ns_remove = (double)(now_ns() - t0) / (double)(x->removed ? x->removed : 1);
    qsort(it, (size_t)n, sizeof *it, by_due);
    for (long i = 0; i < n; i++)
        if (it[i].t) p->timer_free(it[i].t);
    free(it);
}

/* Same thread: B's own thread, on its own loop, between runs. */
static void *same_main(void *arg)
{
    xt_t *x = arg;
    void *far;
    x->loop = x->p->loop_new();
    far = x->p->timer_new(x->loop, never, NULL);
    x->p->timer_start(far, 3600, 0);
    add_remove(x);
    x->p->timer_free(far);
    x->p->loop_free(x->loop);
    return NULL;
}

/* Cross thread: host B runs its loop (a timer an hour away, and the host's wakeup source, which
 * stops it at the end); A is a thread of its own on the other CPU. */
typedef struct { xt_t x; host_t b; void *far; _Atomic int done; } xt_cross_t;

static void cross_setup(host_t *h)
{
    xt_cross_t *c = h->user;
    c->far = h->p->timer_new(h->loop, never, NULL);
    h->p->timer_start(c->far, 3600, 0);
}

static void cross_teardown(host_t *h)
{
    xt_cross_t *c = h->user;
    h->p->timer_free(c->far);
}

static void cross_cb(void *arg)
{
    xt_cross_t *c = arg;
    if (atomic_load(&c->done)) c->b.p->stop(c->b.loop);
}

static void *cross_a(void *arg)
{
    xt_cross_t *c = arg;
    add_remove(&c->x);
    return NULL;
}

static void run_cross(const bench_opts_t *o, peer_t *p, xt_t *out)
{
    xt_cross_t *c = calloc(1, sizeof *c);
    c->x = (xt_t){ .o = o, .p = p };
    c->b.setup = cross_setup;
    c->b.teardown = cross_teardown;
    c->b.user = c;
    host_start(&c->b, p, o->cpu_b, cross_cb, c);
    host_wait_ready(&c->b);
    c->x.loop = c->b.loop;
    sleep_ns(2000000);                          /* B is asleep in its wait */
    run_in_thread(o->cpu_a, cross_a, c);
    atomic_store(&c->done, 1);
    p->async_send(c->b.async);
    host_release(&c->b);
    host_join(&c->b);
    *out = c->x;
    free(c);
}

enum { X_SAME_ADD, X_SAME_REMOVE, X_CROSS_ADD, X_CROSS_REMOVE, X_RATIO_ADD, X_RATIO_REMOVE, X_COUNT };
static const char *const x_key[X_COUNT] = { "same_thread_add_ns", "same_thread_remove_ns",
                                            "cross_thread_add_ns", "cross_thread_remove_ns",
                                            "add_cross_over_same", "remove_cross_over_same" };
/* capped[k]: rounds in which figure k covered only part of the timers (a ratio: either side). */
typedef struct { series_t f[X_COUNT]; int capped[X_COUNT]; } xt_res_t;

static void xt_round(const bench_opts_t *o, peer_t *p, int round, xt_res_t *r)
{
    xt_t same = { .o = o, .p = p }, cross;
    /* Alternate which variant goes first. */
    if (round & 1) run_cross(o, p, &cross);
    run_in_thread(o->cpu_b, same_main, &same);
    if (!(round & 1)) run_cross(o, p, &cross);
    r->capped[X_SAME_ADD] += same.added < o->xthread_timers;
    r->capped[X_SAME_REMOVE] += same.removed < same.added;
    r->capped[X_CROSS_ADD] += cross.added < o->xthread_timers;
    r->capped[X_CROSS_REMOVE] += cross.removed < cross.added;
    r->capped[X_RATIO_ADD] += same.added < o->xthread_timers || cross.added < o->xthread_timers;
    r->capped[X_RATIO_REMOVE] += same.removed < same.added || cross.removed < cross.added;
    series_add(&r->f[X_SAME_ADD], same.ns_add);
    series_add(&r->f[X_SAME_REMOVE], same.ns_remove);
    series_add(&r->f[X_CROSS_ADD], cross.ns_add);
    series_add(&r->f[X_CROSS_REMOVE], cross.ns_remove);
    series_add(&r->f[X_RATIO_ADD], cross.ns_add / same.ns_add);
    series_add(&r->f[X_RATIO_REMOVE], cross.ns_remove / same.ns_remove);
}

static void xt_report(const bench_opts_t *o, peer_t *p, xt_res_t *r, json_t *j)
{
    static const char *const unit[X_COUNT] = { "ns", "ns", "ns", "ns", "x", "x" };
    char metric[X_COUNT][64];
    int e = (int)lround(log10((double)o->xthread_timers));
    snprintf(metric[X_SAME_ADD], 64, "timer add 1e%d, same thread (ns)", e);
    snprintf(metric[X_CROSS_ADD], 64, "timer add 1e%d, from another thread (ns)", e);
    snprintf(metric[X_RATIO_ADD], 64, "timer add: another thread / same thread");
    snprintf(metric[X_SAME_REMOVE], 64, "timer remove 1e%d, same thread (ns)", e);
    snprintf(metric[X_CROSS_REMOVE], 64, "timer remove 1e%d, from another thread (ns)", e);
    snprintf(metric[X_RATIO_REMOVE], 64, "timer remove: another thread / same thread");
    int capped = 0;
    for (int k = 0; k < X_COUNT; k++) capped += r->capped[k];
    json_obj(j, p->name);
    for (int k = 0; k < X_COUNT; k++) json_series(j, x_key[k], &r->f[k]);
    json_bool(j, "capped", capped > 0);
    json_end(j, '}');
    printf("  %-10s add %7.0f ns same thread, %7.0f ns from another (x%.2f [%.2f-%.2f]);  remove "
           "%7.0f / %7.0f ns (x%.2f [%.2f-%.2f])%s\n", p->name, series_median(&r->f[X_SAME_ADD]),
           series_median(&r->f[X_CROSS_ADD]), series_median(&r->f[X_RATIO_ADD]),
           series_min(&r->f[X_RATIO_ADD]), series_max(&r->f[X_RATIO_ADD]),
           series_median(&r->f[X_SAME_REMOVE]), series_median(&r->f[X_CROSS_REMOVE]),
           series_median(&r->f[X_RATIO_REMOVE]), series_min(&r->f[X_RATIO_REMOVE]),
           series_max(&r->f[X_RATIO_REMOVE]), capped ? "  (capped)" : "");
    for (int k = 0; k < X_COUNT; k++) {
        char note[96];
        table_series(metric[k], p->name, &r->f[k], unit[k], LOWER_IS_BETTER);
        snprintf(note, sizeof note, "capped at %.1f s in %d of %d rounds: part of the timers",
                 o->timer_cap_seconds, r->capped[k], r->f[k].n);
        if (r->capped[k]) table_annotate(metric[k], p->name, note);
    }
}

void bench_cross_thread(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    xt_res_t *res = calloc((size_t)n, sizeof *res);
    printf("\n== 10. timers added and removed from another thread (%ld timers; loop B on cpu %d, "
           "thread A on cpu %d; %d rounds; cap %.1f s per phase) ==\n", o->xthread_timers, o->cpu_b,
           o->cpu_a, o->heavy_rounds, o->timer_cap_seconds);
    for (int r = 0; r < o->heavy_rounds; r++) {
        round_begin(r, o->heavy_rounds);
        int order[MAX_PEERS], count = round_order(peers, n, peer_timers_any_thread, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            xt_round(o, peers[i], r, &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "cross_thread_timers");
    json_int(j, "rounds", o->heavy_rounds);
    json_int(j, "timers", o->xthread_timers);
    json_num(j, "cap_seconds_per_phase", o->timer_cap_seconds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++) {
        if (peers[i]->timers_any_thread) xt_report(o, peers[i], &res[i], j);
        else if (peers[i]->timer_new && !peers[i]->is_floor)
            table_note("timer add: another thread / same thread", peers[i]->name,
                       "timers are not thread-safe");
    }
    json_end(j, '}');
    json_end(j, '}');
    free(res);
}
