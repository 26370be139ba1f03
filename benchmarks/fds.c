/* fds.c - benchmark 7: many fds. N socketpairs are watched for readability; each round writes
 * one byte into 1% of them (random) and runs the loop until every byte has been read back by the
 * callbacks. Rounds per second show whether the loop's cost follows the active fds or all. */

#include "bench.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct fdrun fdrun_t;
typedef struct { int fd; fdrun_t *w; } fdarg_t;

struct fdrun {
    peer_t *p;
    void *loop;
    int pairs, (*sv)[2];
    double seconds;
    long want, got, rounds;
    double rounds_per_s;
    int ok;
};

static void fd_cb(void *arg)
{
    fdarg_t *a = arg;
    char buf[64];
    ssize_t n = read(a->fd, buf, sizeof buf);
    if (n > 0 && (a->w->got += n) >= a->w->want) a->w->p->stop(a->w->loop);
}

static void *fd_main(void *arg)
{
    fdrun_t *w = arg;
    peer_t *p = w->p;
    void **watch = calloc((size_t)w->pairs, sizeof *watch);
    fdarg_t *args = calloc((size_t)w->pairs, sizeof *args);
    int active = w->pairs / 100 > 0 ? w->pairs / 100 : 1;
    uint64_t rng = 777, t0, el = 0;
    w->loop = p->loop_new();
    for (int i = 0; i < w->pairs; i++) {
        args[i] = (fdarg_t){ w->sv[i][0], w };
        if (!(watch[i] = p->fd_new(w->loop, w->sv[i][0], fd_cb, &args[i]))) goto out;
    }
    p->pass(w->loop);
    t0 = now_ns();
    while (el < (uint64_t)(w->seconds * 1e9)) {
        w->got = 0;
        w->want = active;
        for (int k = 0; k < active; k++)
            if (write(w->sv[rng_next(&rng) % (uint64_t)w->pairs][1], "x", 1) != 1) goto out;
        p->run(w->loop);
        w->rounds++;
        el = now_ns() - t0;
    }
    w->rounds_per_s = (double)w->rounds / ((double)el / 1e9);
    w->ok = 1;
out:
    for (int i = 0; i < w->pairs; i++)
        if (watch[i]) p->fd_free(watch[i]);
    p->loop_free(w->loop);
    free(watch);
    free(args);
    return NULL;
}

/* Raise RLIMIT_NOFILE as far as allowed; the number of pairs that fit. */
static int fit_pairs(int want, char *note, size_t n)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)want * 2 + 256;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < need) {
        struct rlimit r2 = { need, rl.rlim_max > need ? rl.rlim_max : need };
        if (setrlimit(RLIMIT_NOFILE, &r2) != 0) {          /* beyond the hard limit: needs root */
            r2.rlim_cur = rl.rlim_max;
            r2.rlim_max = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &r2);
        }
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < need) {
        int fit = rl.rlim_cur > 512 ? (int)((rl.rlim_cur - 256) / 2) : 128;
        snprintf(note, n, "RLIMIT_NOFILE is %llu: scaled down from %d to %d pairs",
                 (unsigned long long)rl.rlim_cur, want, fit);
        return fit;
    }
    snprintf(note, n, "RLIMIT_NOFILE %llu", (unsigned long long)rl.rlim_cur);
    return want;
}

typedef struct { series_t rps, rounds; int failed; } fd_res_t;

static void fd_round(const bench_opts_t *o, peer_t *p, int pairs, int (*sv)[2], fd_res_t *r)
{
    fdrun_t w;
    memset(&w, 0, sizeof w);
    w.p = p;
    w.pairs = pairs;
    w.sv = sv;
    w.seconds = o->fd_seconds;
    run_in_thread(o->cpu_b, fd_main, &w);
    if (!w.ok) { r->failed = 1; return; }
    series_add(&r->rps, w.rounds_per_s);
    series_add(&r->rounds, (double)w.rounds);
}

static void fd_report(peer_t *p, const char *metric, fd_res_t *r, json_t *j)
{
    json_obj(j, p->name);
    json_bool(j, "ok", !r->failed);
    if (r->rps.n) {
        json_series(j, "rounds_per_s", &r->rps);
        json_series(j, "rounds", &r->rounds);
    }
    json_end(j, '}');
    printf("  %-10s %10.0f rounds/s [%.0f-%.0f]%s\n", p->name, series_median(&r->rps),
           series_min(&r->rps), series_max(&r->rps), r->failed ? "  FAILED" : "");
    if (!r->failed) table_series(metric, p->name, &r->rps, "rnd/s", HIGHER_IS_BETTER);
    else table_note(metric, p->name, "failed to watch every fd");
}

void bench_fds(const bench_opts_t *o, peer_t **peers, int n, json_t *j)
{
    char note[160], metric[64];
    int pairs = fit_pairs(o->fd_pairs, note, sizeof note), made = 0;
    int (*sv)[2] = calloc((size_t)pairs, sizeof *sv);
    fd_res_t *res = calloc((size_t)n, sizeof *res);
    for (; made < pairs; made++)
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv[made]) != 0) {
            snprintf(note + strlen(note), sizeof note - strlen(note),
                     "; socketpair failed after %d pairs (%s)", made, strerror(errno));
            break;
        }
    pairs = made;
    printf("\n== 7. many fds (%d socketpairs, 1%% active per write/read round; %d rounds of %.2f s; "
           "%s) ==\n", pairs, o->rounds, o->fd_seconds, note);
    snprintf(metric, sizeof metric, "%d fd pairs, 1%% active (rounds/s)", pairs);
    for (int r = 0; r < o->rounds && pairs > 0; r++) {
        round_begin(r, o->rounds);
        int order[MAX_PEERS], count = round_order(peers, n, peer_has_fds, r, order);
        for (int k = 0; k < count; k++) {
            int i = order[k];
            if (res[i].failed) continue;
            fd_round(o, peers[i], pairs, sv, &res[i]);
            round_done(peers[i]->name);
        }
        round_end();
    }
    json_obj(j, "many_fds");
    json_int(j, "rounds_of_the_benchmark", o->rounds);
    json_int(j, "pairs", pairs);
    json_int(j, "requested_pairs", o->fd_pairs);
    json_str(j, "note", note);
    json_obj(j, "peers");
    for (int i = 0; i < n && pairs > 0; i++)
        if (peers[i]->fd_new) fd_report(peers[i], metric, &res[i], j);
    json_end(j, '}');
    json_end(j, '}');
    for (int i = 0; i < pairs; i++) { close(sv[i][0]); close(sv[i][1]); }
    free(sv);
    free(res);
}
