/* firerate.c - benchmark 9: random-order fire rate. N one-shot timers get deadlines spread
 * evenly over one second from the start of the add phase (a million timers per second) and are
 * added in random order, so that the loop's timer structure is built from scattered inserts as
 * under real load, not in the order it will fire them. The loop runs once the last deadline has
 * passed: from the first fire to the last every timer is due, and fired / (last fire - first
 * fire) is the loop's rate of firing due timers. The lag is how late the last fire is against
 * its own deadline: the time the loop needs to get through a second's worth of timers (plus
 * the time adding them overran that second, for a loop whose adds are that slow).
 *
 * CF fires every due timer it has collected before it looks at a stop, so no cap can cut its
 * fire phase short (a million timers take it twenty seconds). A pilot run of N/100 timers
 * measures each peer's rate first; a peer that could not fire N timers within the cap gets as
 * many as it can, due within proportionally less time (the same million per second).
 *
 * A peer that takes every due timer off its heap before its first callback (libev, libevent,
 * GLib) does that work before the first fire: the first-to-last rate is then its callbacks'
 * dispatch alone. The rate from the run's start (every timer is due by then) holds all of every
 * peer's work, and is printed and tabled too. */
#include "bench.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fire fire_t;
typedef struct { fire_t *w; uint64_t due; } slot_t;   /* one per timer: the callback's arg */

struct fire {
    const bench_opts_t *o;
    peer_t *p;
    void *loop;
    long n, added, fired;
    double spread;
    uint64_t first, last, last_due, fire_deadline, run_start;
    double add_ns;
};

static void fire_cb(void *arg)
{
    slot_t *s = arg;
    fire_t *w = s->w;
    /* Only the first and the last fire read the clock: a clock read per fire would be part of
     * every peer's figure. */
    if (!w->fired++) w->first = now_ns();
    w->last_due = s->due;
    /* A loop may go on firing the due timers it has collected after stop (CF does): the
     * last fire is whichever comes last. */
    if (w->fired == w->added || ((w->fired & 1023) == 0 && now_ns() > w->fire_deadline)) {
        w->last = now_ns();
        w->p->stop(w->loop);
    }
}

/* Deadlines t0 + (k + 0.5) * spread / n, visited in a random order (Fisher-Yates). */
static long *random_order(long n, uint64_t *rng)
{
    long *ord = malloc((size_t)n * sizeof *ord);
    for (long i = 0; i < n; i++) ord[i] = i;
    for (long i = n - 1; i > 0; i--) {
        long k = (long)(rng_next(rng) % (uint64_t)(i + 1)), x = ord[i];
        ord[i] = ord[k];
        ord[k] = x;
    }
    return ord;
}

static void *fire_main(void *arg)
{
    fire_t *w = arg;
    peer_t *p = w->p;
    uint64_t rng = 0x2545F4914F6CDD1Dull, spread = (uint64_t)(w->spread * 1e9);
    uint64_t cap = (uint64_t)(w->o->fire_cap_seconds * 1e9), t0, end;
    long *ord = random_order(w->n, &rng);
    slot_t *slot = calloc((size_t)w->n, sizeof *slot);
    void **t = calloc((size_t)w->n, sizeof *t);
    w->loop = p->loop_new();
    t0 = now_ns();
    for (long i = 0; i < w->n; i++) {
        long k = ord[i];
        uint64_t now = now_ns();
        slot[k] = (slot_t){ w, t0 + (uint64_t)(((double)k + 0.5) * (double)spread / (double)w->n) };
        if (!(t[k] = p->timer_new(w->loop, fire_cb, &slot[k]))) break;
        p->timer_start(t[k], slot[k].due > now ? (double)(slot[k].due - now) / 1e9 : 0, 0);
        w->added = i + 1;
        if ((i & 1023) == 1023 && now - t0 > cap) break;
    }
    end = now_ns();
    w->add_ns = (double)(end - t0) / (double)(w->added ? w->added : 1);
    if (end < t0 + spread + 1000000) sleep_ns(t0 + spread + 1000000 - end);   /* all due */
    w->fire_deadline = now_ns() + cap;
    w->run_start = now_ns();
    if (w->added) p->run(w->loop);
    for (long i = 0; i < w->n; i++)
        if (t[i]) p->timer_free(t[i]);
    p->loop_free(w->loop);
    free(t);
    free(slot);
    free(ord);
    return NULL;
}

/* n: the timers this peer gets (o->fire_timers unless its pilot was too slow). */
typedef struct { series_t rate, run_rate, lag, fired, add_ns; int capped; long n; double pilot_rate; } fire_res_t;

static void fire_run(const bench_opts_t *o, peer_t *p, long n, fire_t *w)
{
    memset(w, 0, sizeof *w);
    w->o = o;
    w->p = p;
    w->n = n;
    w->spread = o->fire_spread * (double)n / (double)o->fire_timers;
    run_in_thread(o->cpu_b, fire_main, w);
}

static void pilot(const bench_opts_t *o, peer_t *p, fire_res_t *r)
{
    fire_t w;
    double cap = o->fire_cap_seconds;
    fire_run(o, p, o->fire_timers / 100 > 1000 ? o->fire_timers / 100 : 1000, &w);
    r->n = o->fire_timers;
    if (w.fired < 2 || w.last <= w.first) return;
    r->pilot_rate = (double)w.fired / ((double)(w.last - w.first) / 1e9);
    /* Only a peer far too slow: a pilot slowed down by a busy host must not shrink a fast one. */
    if ((double)r->n > 2 * r->pilot_rate * cap) r->n = ((long)(r->pilot_rate * cap) / 1000 + 1) * 1000;
}

static void fire_round(const bench_opts_t *o, peer_t *p, fire_res_t *r)
{
    fire_t w;
    fire_run(o, p, r->n, &w);
    if (w.added < w.n || w.fired < w.added || w.n < o->fire_timers) r->capped = 1;
    series_add(&r->fired, (double)w.fired);
    series_add(&r->add_ns, w.add_ns);
    if (w.fired > 1 && w.last > w.first) {
        series_add(&r->rate, (double)w.fired / ((double)(w.last - w.first) / 1e9));
        series_add(&r->run_rate, (double)w.fired / ((double)(w.last - w.run_start) / 1e9));
        series_add(&r->lag, ((double)w.last - (double)w.last_due) / 1e9);
    }
}

static int fire_peer(const peer_t *p) { return p->timer_new && !p->is_floor; }

static void fire_report(const bench_opts_t *o, peer_t *p, fire_res_t *r, const char *m_rate,
                        const char *m_run, const char *m_lag, json_t *j)
{
    char note[96];
    json_obj(j, p->name);
    json_series(j, "fires_per_s", &r->rate);
    json_series(j, "fires_per_s_from_run_start", &r->run_rate);
    json_series(j, "lag_s", &r->lag);
    json_series(j, "fired", &r->fired);
    json_series(j, "add_ns_per_timer", &r->add_ns);
    json_bool(j, "capped", r->capped);
    json_int(j, "timers", r->n);
    json_num(j, "pilot_fires_per_s", r->pilot_rate);
    json_end(j, '}');
    printf("  %-10s %10.0f fires/s [%.0f-%.0f]  last fire %.3f s late  (adds %.0f ns each; "
           "fired %.0f of %ld)\n", p->name, series_median(&r->rate), series_min(&r->rate),
           series_max(&r->rate), series_median(&r->lag), series_median(&r->add_ns),
           series_median(&r->fired), r->n);
    printf("  %-10s %10.0f fires/s [%.0f-%.0f] from the run's start\n", p->name, series_median(&r->run_rate),
           series_min(&r->run_rate), series_max(&r->run_rate));
    table_series(m_rate, p->name, &r->rate, "fires/s", HIGHER_IS_BETTER);
    table_series(m_run, p->name, &r->run_rate, "fires/s", HIGHER_IS_BETTER);
    table_series(m_lag, p->name, &r->lag, "s", LOWER_IS_BETTER);
    if (r->n < o->fire_timers) {
        snprintf(note, sizeof note, "capped: %ld timers in %.2f s (pilot: %.0f fires/s)", r->n,
                 o->fire_spread * (double)r->n / (double)o->fire_timers, r->pilot_rate);
        table_annotate(m_rate, p->name, note);
        table_annotate(m_run, p->name, note);
        table_annotate(m_lag, p->name, note);
    } else if (r->capped) {
        snprintf(note, sizeof note, "capped at %.1f s per phase: fired %.0f of %ld",
                 o->fire_cap_seconds, series_median(&r->fired), r->n);
        table_annotate(m_rate, p->name, note);
    }
}

void bench_fire_rate(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    fire_res_t *res = calloc((size_t)n, sizeof *res);
    char m_rate[64], m_run[80], m_lag[64];
    snprintf(m_rate, sizeof m_rate, "random-order fire, 1e%d due in %g s (fires/s)",
             (int)lround(log10((double)o->fire_timers)), o->fire_spread);
    snprintf(m_run, sizeof m_run, "random-order fire, from the run's start (fires/s)");
    snprintf(m_lag, sizeof m_lag, "random-order fire: last fire's lag (s)");
    printf("\n== 9. random-order fire rate (%ld one-shot timers due evenly over %g s, added in random "
           "order; %d rounds; cap %.1f s per phase) ==\n", o->fire_timers, o->fire_spread,
           o->heavy_rounds, o->fire_cap_seconds);
    printf("  pilot (%ld timers each):", o->fire_timers / 100 > 1000 ? o->fire_timers / 100 : 1000);
    for (int i = 0; i < n; i++)
        if (fire_peer(peers[i])) {
            pilot(o, peers[i], &res[i]);
            printf(" %s %.0f/s%s", peers[i]->name, res[i].pilot_rate,
                   res[i].n < o->fire_timers ? " (fewer timers)" : "");
            fflush(stdout);
        }
    printf("\n");
    for (int r = 0; r < o->heavy_rounds; r++) {
        round_begin(r, o->heavy_rounds);
        int order[MAX_PEERS], count = round_order(peers, n, fire_peer, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            fire_round(o, peers[i], &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "fire_rate");
    json_int(j, "rounds", o->heavy_rounds);
    json_int(j, "timers", o->fire_timers);
    json_num(j, "spread_s", o->fire_spread);
    json_num(j, "cap_seconds_per_phase", o->fire_cap_seconds);
    json_obj(j, "peers");
    for (int i = 0; i < n; i++)
        if (fire_peer(peers[i])) fire_report(o, peers[i], &res[i], m_rate, m_run, m_lag, j);
    json_end(j, '}');
    json_end(j, '}');
    free(res);
}
