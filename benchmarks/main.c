/* main.c - arguments, peers, the phases in order, the JSON file and the table printed last.
 *
 *   bench [--quick] [--rounds N] [--json PATH] [--only PEER,...] [--bench NAME,...] [--no-pin]
 *         [--instr FILE]                  instruction counts per pass measured by callgrind
 *   bench --callgrind-pass PEER:SCENARIO [--passes N]   only the pass loop (for callgrind)
 *   bench --memory-child PEER N CAP_S CPU              one peer's timers in a fresh process
 *   bench --heap-child PEER N CAP_S CPU                one round of the heap benchmark, likewise */

#include "bench.h"
#include <crunloop.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern char g_out_dir[1024];

static peer_t *all_peers[] = { &peer_epoll, &peer_futex, &peer_crunloop, &peer_cf, &peer_libuv,
                               &peer_glib, &peer_libev, &peer_libevent };
#define NPEERS ((int)(sizeof all_peers / sizeof *all_peers))

static const char *const bench_names[] = { "latency", "throughput", "timers", "precision", "idle",
                                           "pass", "fds", "memory", "firerate", "crossthread",
                                           "scaling", "perform", "spin", "rearm" };
static void (*const bench_fns[])(const bench_opts_t *, peer_t **, int, json_t *) = {
    bench_latency, bench_throughput, bench_timer_heap, bench_timer_precision, bench_idle,
    bench_pass, bench_fds, bench_memory, bench_fire_rate, bench_cross_thread, bench_scaling,
    bench_perform, bench_spin, bench_rearm };

static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    if (!list) return 1;
    for (const char *s = list; *s;) {
        size_t len = strcspn(s, ",");
        if (len == n && !strncasecmp(s, name, n)) return 1;
        s += len + (s[len] == ',');
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench [--quick] [--rounds N] [--json PATH] [--only PEER,..] "
                    "[--bench NAME,..] [--no-pin] [--instr FILE]\n"
                    "       bench --callgrind-pass PEER:SCENARIO [--passes N]\n"
                    "       bench --memory-child PEER TIMERS CAP_SECONDS CPU\n"
                    "       bench --heap-child PEER TIMERS CAP_SECONDS CPU\n"
                    "benchmarks:");
    for (size_t i = 0; i < sizeof bench_names / sizeof *bench_names; i++)
        fprintf(stderr, " %s", bench_names[i]);
    fprintf(stderr, "\n");
    exit(2);
}

static peer_t *peer_named(const char *name)
{
    for (int i = 0; i < NPEERS; i++)
        if (!strcasecmp(all_peers[i]->name, name)) return all_peers[i];
    return NULL;
}

static void mkdir_p(const char *dir)
{
    char tmp[1024];
    copy_str(tmp, sizeof tmp, dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(tmp, 0755); *p = '/'; }
    mkdir(tmp, 0755);
}

/* Lines "PEER SCENARIO INSTRUCTIONS_PER_PASS" written by benchmarks/run from callgrind. */
static void instr_results(const char *path, json_t *j)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    char peer[64], scen[64], metric[96];
    double v;
    json_obj(j, "instructions_per_pass");
    json_str(j, "tool", f ? "valgrind --tool=callgrind --toggle-collect=cg_pass_loop" : NULL);
    if (f) {
        while (fscanf(f, "%63s %63s %lf", peer, scen, &v) == 3) {
            char key[140];
            snprintf(key, sizeof key, "%s/%s", peer, scen);
            json_num(j, key, v);
            snprintf(metric, sizeof metric, "pass: %s (instructions)", scen);
            table_add(metric, peer, v, "instr", LOWER_IS_BETTER);
        }
        fclose(f);
    }
    json_end(j, '}');
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    const char *json_path = NULL, *benches = NULL, *instr = NULL, *cg = NULL;
    long cg_passes = 100000;
    int rounds = 0;
    peer_t *peers[NPEERS];
    int np = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem;
    json_t j;

    memset(&o, 0, sizeof o);
    o.pin = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quick")) o.quick = 1;
        else if (!strcmp(a, "--no-pin")) o.pin = 0;
        else if (!strcmp(a, "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(a, "--only") && i + 1 < argc) o.only = argv[++i];
        else if (!strcmp(a, "--bench") && i + 1 < argc) benches = argv[++i];
        else if (!strcmp(a, "--instr") && i + 1 < argc) instr = argv[++i];
        else if (!strcmp(a, "--callgrind-pass") && i + 1 < argc) cg = argv[++i];
        else if (!strcmp(a, "--passes") && i + 1 < argc) cg_passes = atol(argv[++i]);
        else if (!strcmp(a, "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(a, "--memory-child") && i + 4 < argc) {
            peer_t *p = strcmp(argv[i + 1], "-") ? peer_named(argv[i + 1]) : NULL;
            if (p && p->load(p) != 0) {
                fprintf(stderr, "%s: %s\n", p->name, p->why);
                return 1;
            }
            return memory_child(p, atol(argv[i + 2]), atof(argv[i + 3]), atoi(argv[i + 4]));
        } else if (!strcmp(a, "--heap-child") && i + 4 < argc) {
            peer_t *p = peer_named(argv[i + 1]);
            if (!p || p->load(p) != 0) {
                fprintf(stderr, "%s: %s\n", argv[i + 1], p ? p->why : "no such peer");
                return 1;
            }
            return heap_child(p, atol(argv[i + 2]), atof(argv[i + 3]), atoi(argv[i + 4]));
        } else usage();
    }
    if (rounds < 0 || rounds > MAX_ROUNDS) usage();
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (cg) {
        char name[64];
        const char *colon = strchr(cg, ':');
        peer_t *p;
        if (!colon) usage();
        snprintf(name, sizeof name, "%.*s", (int)(colon - cg), cg);
        if (!(p = peer_named(name))) {
            fprintf(stderr, "unknown peer %s\n", name);
            return 2;
        }
        if (p->load(p) != 0) {
            fprintf(stderr, "%s: %s\n", name, p->why);
            return 1;
        }
        return callgrind_pass(p, colon + 1, cg_passes);
    }

    /* Rounds: the signal throughput wants 10 interleaved rounds; the long benchmarks (a million
     * timers, or setups that dominate) take half as many. Durations below are per round. */
    o.rounds = rounds ? rounds : o.quick ? 2 : 10;
    o.heavy_rounds = (o.rounds + 1) / 2;
    o.lat_samples = ((o.quick ? 3000 : 100000) + o.rounds - 1) / o.rounds;
    o.lat_warmup = o.quick ? 150 : 300;
    o.tput_seconds = o.quick ? 0.1 : 0.5;
    o.tput_producers = 4;
    o.precision_seconds = o.quick ? 0.25 : 0.5;
    o.idle_seconds = o.quick ? 0.25 : 0.5;
    o.timer_cap_seconds = o.quick ? 0.5 : 2.0;
    o.timer_max_exp = o.quick ? 4 : 6;
    o.pass_seconds = o.quick ? 0.03 : 0.1;
    o.fd_pairs = 10000;
    o.fd_seconds = o.quick ? 0.1 : 0.3;
    o.mem_timers = o.quick ? 100000 : 1000000;
    o.mem_cap_seconds = 5;
    o.fire_timers = o.quick ? 100000 : 1000000;
    o.fire_spread = o.quick ? 0.1 : 1.0;        /* the same million timers per second */
    o.fire_cap_seconds = o.quick ? 1.0 : 3.0;
    o.xthread_timers = o.quick ? 10000 : 100000;
    o.scaling_seconds = o.quick ? 0.1 : 0.3;
    o.perform_seconds = o.quick ? 0.1 : 0.3;
    o.cpu_a = o.cpu_b = -1;
    if (o.pin && ncpus() >= 2) {
        o.cpu_b = cpu_nth(0);
        o.cpu_a = cpu_nth(1);
    } else o.pin = 0;

    if (!json_path) json_path = "benchmarks/results/latest.json";
    {
        const char *slash = strrchr(json_path, '/');
        if (slash) snprintf(g_out_dir, sizeof g_out_dir, "%.*s", (int)(slash - json_path), json_path);
        else snprintf(g_out_dir, sizeof g_out_dir, ".");
        mkdir_p(g_out_dir);
    }

    mem = open_memstream(&buf, &len);
    json_init(&j, mem);
    json_obj(&j, NULL);
    json_str(&j, "benchmark", "crunloop-bench");
    json_str(&j, "crunloop_version", rl_version_string());
    json_bool(&j, "quick", o.quick);
    json_int(&j, "rounds", o.rounds);
    json_int(&j, "heavy_rounds", o.heavy_rounds);
    sysinfo_write(&j, &o);

    printf("CRunLoop benchmarks (%s run: %d interleaved rounds, %d for the long benchmarks)\n",
           o.quick ? "quick" : "full", o.rounds, o.heavy_rounds);
    sysinfo_print(stdout, &o);
    json_obj(&j, "peers");
    for (int i = 0; i < NPEERS; i++) {
        peer_t *p = all_peers[i];
        if (!in_list(o.only, p->name)) continue;
        p->loaded = p->load(p) == 0;
        json_obj(&j, p->name);
        json_bool(&j, "available", p->loaded);
        json_bool(&j, "floor", p->is_floor);
        json_str(&j, "version", p->loaded ? p->version : NULL);
        json_str(&j, "debian_package", p->package);
        if (!p->loaded) json_str(&j, "why", p->why);
        json_end(&j, '}');
        if (p->loaded) {
            printf("peer %-10s %s\n", p->name, p->version);
            peers[np++] = p;
        } else {
            char note[200];
            printf("peer %-10s NOT AVAILABLE: %s -- install the Debian package: %s\n", p->name,
                   p->why, p->package ? p->package : "?");
            snprintf(note, sizeof note, "missing: apt-get install %s", p->package ? p->package : "?");
            table_note("peer availability", p->name, note);
        }
    }
    json_end(&j, '}');

    for (int b = 0; b < (int)(sizeof bench_names / sizeof *bench_names); b++) {
        uint64_t t0 = now_ns();
        if (!in_list(benches, bench_names[b])) continue;
        bench_fns[b](&o, peers, np, &j);
        printf("  (%s: %.1f s)\n", bench_names[b], (double)(now_ns() - t0) / 1e9);
    }
    instr_results(instr, &j);
    json_end(&j, '}');
    fclose(mem);
    {
        FILE *f = fopen(json_path, "w");
        if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s: %s\n", json_path, strerror(errno));
            return 1;
        }
        printf("\nresults: %s (plots in %s)\n", json_path, g_out_dir);
    }
    free(buf);
    table_print(stdout, peer_epoll.name, peer_cf.name);
    return 0;
}
