/* main.c - arguments, peers, the phases in order, the JSON file and the table printed last.
 *
 *   bench [--quick] [--rounds N] [--json PATH] [--only PEER,...] [--bench NAME,...] [--no-pin]
 *         [--scenario NAME,...]           latency scenarios (scenarios.h; default: all)
 *         [--instr FILE]                  instruction counts per pass measured by callgrind
 *         [--eta-after SECONDS]           what follows this program, for the time-left estimate
 *         [--check]                       only check the arguments (exit 0, or 2)
 *   bench --clock-check                   test the thread CPU clock (exit 0, or 1)
 *   bench --callgrind-pass PEER:SCENARIO [--passes N]   only the pass loop (for callgrind)
 *   bench --memory-child PEER N CAP_S CPU              one peer's timers in a fresh process
 *   bench --heap-child PEER N CAP_S CPU                one round of the heap benchmark, likewise */

#include "bench.h"
#include "scenarios.h"
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

/* Seconds each benchmark takes on the 2-vCPU VM: a full run (10 rounds, 5 of the long ones) and
 * a quick one (2 rounds, 1); latency is per scenario (latency.c). The README lists them. */
static const double expected_full[] = { 0, 80, 37, 45, 35, 43, 34, 11, 72, 35, 37, 29, 33, 80 };
static const double expected_quick[] = { 0, 3.4, 0.6, 4.5, 3.5, 6.5, 3.5, 0.4, 2.7, 0.3, 2.6, 1.9, 6.4, 1 };
static const int bench_heavy[] = { 0, 0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 1 };
#define NBENCH (sizeof bench_names / sizeof *bench_names)
_Static_assert(sizeof expected_full / sizeof *expected_full == NBENCH &&
               sizeof expected_quick / sizeof *expected_quick == NBENCH &&
               sizeof bench_heavy / sizeof *bench_heavy == NBENCH,
               "every benchmark needs its expected durations (the time-left estimate)");

static double bench_expected_s(const bench_opts_t *o, int b)
{
    double base = o->quick ? expected_quick[b] : expected_full[b];
    double r = bench_heavy[b] ? o->heavy_rounds / (o->quick ? 1.0 : 5.0) : o->rounds / (o->quick ? 2.0 : 10.0);
    if (b == 0) {
        double sum = 0;
        for (int id = 0; id < SCEN_COUNT; id++)
            if (o->scenario_mask & (1u << id)) sum += latency_expected_s(o, id);
        return sum;
    }
    return base * r;
}

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
                    "[--bench NAME,..] [--no-pin] [--scenario NAME,..] [--instr FILE] "
                    "[--eta-after S]\n"
                    "       bench --clock-check\n"
                    "       bench --callgrind-pass PEER:SCENARIO [--passes N]\n"
                    "       bench --memory-child PEER TIMERS CAP_SECONDS CPU\n"
                    "       bench --heap-child PEER TIMERS CAP_SECONDS CPU\n"
                    "benchmarks:");
    for (size_t i = 0; i < sizeof bench_names / sizeof *bench_names; i++)
        fprintf(stderr, " %s", bench_names[i]);
    fprintf(stderr, "\nlatency scenarios:");
    for (int i = 0; i < SCEN_COUNT; i++) fprintf(stderr, " %s", scenario_names[i]);
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
    const char *json_path = NULL, *benches = NULL, *instr = NULL, *cg = NULL, *scenarios = NULL;
    double eta_after = 0;
    int check_only = 0;
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
        else if (!strcmp(a, "--no-pin")) o.pin = 0, o.no_pin = 1;
        else if (!strcmp(a, "--scenario") && i + 1 < argc) scenarios = argv[++i];
        else if (!strcmp(a, "--check")) check_only = 1;
        else if (!strcmp(a, "--clock-check")) return thread_cpu_clock_check();
        else if (!strcmp(a, "--eta-after") && i + 1 < argc) eta_after = atof(argv[++i]);
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
    {
        const char *bad = "";
        int bad_len = 0;
        if (scenario_mask(scenarios, &o.scenario_mask, &bad, &bad_len) != 0) {
            fprintf(stderr, "bench: unknown latency scenario '%.*s' (scenarios:", bad_len, bad);
            for (int i = 0; i < SCEN_COUNT; i++) fprintf(stderr, " %s", scenario_names[i]);
            fprintf(stderr, ")\n");
            return 2;
        }
    }
    if (check_only) return 0;
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
    /* The other latency scenarios: half the rounds (one when quick), fewer samples, and each
     * direction of each peer capped per round, so that a loop made slow by the scenario (GLib
     * polling 10k fds and preparing 100k timers in every iteration) cannot stretch the run. */
    o.lat_scen_rounds = o.quick ? 1 : o.heavy_rounds;
    o.lat_scen_samples = o.quick ? 400 : 20000;
    o.lat_busy_samples = o.quick ? 200 : 10000;
    o.lat_busy_timers = o.quick ? 20000 : SCEN_BUSY_TIMERS;   /* CF's sorted array: 100k take it 6 s */
    o.lat_busy_fds = o.quick ? 2000 : SCEN_BUSY_FDS;          /* CF's and GLib's setup, likewise */
    o.lat_scen_warmup = o.quick ? 30 : 200;
    o.lat_scen_cap_s = o.quick ? 0.2 : 2.0;
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

    {
        double total = 0;
        for (int b = 0; b < (int)(sizeof bench_names / sizeof *bench_names); b++)
            if (in_list(benches, bench_names[b])) total += bench_expected_s(&o, b);
        progress_init(total, eta_after);
        printf("estimated time: ~%.0f min: %.0f s for these benchmarks", (total + eta_after) / 60, total);
        if (eta_after > 0) printf(", %.0f s for what follows them", eta_after);
        printf("\n");
    }
    for (int b = 0; b < (int)(sizeof bench_names / sizeof *bench_names); b++) {
        uint64_t t0 = now_ns();
        char left[32];
        if (!in_list(benches, bench_names[b])) continue;
        if (b != 0) progress_phase_begin(bench_expected_s(&o, b));   /* latency: per scenario */
        bench_fns[b](&o, peers, np, &j);
        if (b != 0) progress_phase_end();
        printf("  (%s: %.1f s)  ... %s\n", bench_names[b], (double)(now_ns() - t0) / 1e9,
               progress_left_str(left, sizeof left));
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
