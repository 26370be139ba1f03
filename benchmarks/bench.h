/* bench.h - shared declarations of the CRunLoop benchmark harness. */
#ifndef BENCH_H
#define BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "peers/peer.h"
#include "hist.h"
#include "json.h"

/* ---- util.c ---- */
uint64_t now_ns(void);                 /* CLOCK_MONOTONIC */
double now_s(void);
uint64_t thread_cpu_ns(void);          /* CLOCK_THREAD_CPUTIME_ID (util.c says why) */
int thread_cpu_clock_check(void);      /* its test (--clock-check): 0 if it holds */
long thread_ctx_switches(void);        /* voluntary + involuntary, this thread */
int ncpus(void);                       /* CPUs this process may run on */
int cpu_nth(int n);                    /* the n-th allowed CPU (modulo), -1 if none */
int pin_self(int cpu);                 /* 0 on success */
unsigned long long proc_syscw(void);   /* write syscalls of the process (/proc/self/io) */
void sleep_ns(uint64_t ns);
void spin_ns(uint64_t ns);
uint64_t rng_next(uint64_t *state);    /* xorshift64* */
/* Run fn(arg) on a new thread (pinned to cpu when cpu >= 0) and wait for it. */
void run_in_thread(int cpu, void *(*fn)(void *), void *arg);
/* This program again, with the arguments printf-formatted from fmt, its stdout to read (close
 * with pclose); NULL when it cannot be started. The benchmarks that need a fresh process use it. */
FILE *popen_self(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- options shared by the phases (durations and counts are per round) ---- */
typedef struct {
    int quick;
    int pin;                 /* pin threads to CPUs (2+ CPUs) */
    int cpu_a, cpu_b;        /* CPUs of the signalling and of the loop thread, -1 unpinned */
    int rounds;              /* interleaved rounds of the light benchmarks (--rounds) */
    int heavy_rounds;        /* of the long ones (timer heap, memory, fire rate, pass, cross-thread) */
    long lat_samples, lat_warmup;
    double tput_seconds;
    int tput_producers;      /* N of the N-producer run */
    double precision_seconds;
    double idle_seconds;
    double timer_cap_seconds;/* per phase of the timer-heap and cross-thread runs */
    int timer_max_exp;       /* 10^3 .. 10^timer_max_exp timers */
    double pass_seconds;
    int fd_pairs;
    double fd_seconds;
    long mem_timers;         /* timers armed by the memory benchmark */
    double mem_cap_seconds;  /* for arming them */
    long fire_timers;        /* timers of the random-order fire rate, due within fire_spread s */
    double fire_spread;
    double fire_cap_seconds; /* per phase (add, fire) */
    long xthread_timers;     /* timers added and removed from another thread */
    double scaling_seconds;  /* per loop count */
    double perform_seconds;  /* per variant */
    const char *only;        /* comma-separated peer names, NULL for all */
    int no_pin;              /* --no-pin given */
    unsigned scenario_mask;  /* latency scenarios to run (bit i: scenario_names[i]; --scenario) */
    int lat_scen_rounds;     /* rounds of the latency scenarios besides idle */
    long lat_scen_samples;   /* their samples over all rounds (busy: lat_busy_samples) */
    long lat_busy_samples;
    int lat_busy_timers;     /* timers the busy loop holds */
    int lat_busy_fds;        /* eventfds it watches */
    long lat_scen_warmup;    /* per round */
    double lat_scen_cap_s;   /* per direction, peer and round */
} bench_opts_t;

/* ---- table.c: the summary table, one row per metric and peer ---- */
enum { LOWER_IS_BETTER = 0, HIGHER_IS_BETTER = 1 };
void table_add(const char *metric, const char *peer, double value, const char *unit, int sense);
/* A figure measured over rounds: its median, worst and best round, and how many rounds. */
void table_add_spread(const char *metric, const char *peer, double median, double min, double max,
                      int rounds, const char *unit, int sense);
void table_note(const char *metric, const char *peer, const char *note);  /* a row with no figure */
void table_annotate(const char *metric, const char *peer, const char *note); /* note on a row */
void table_print(FILE *out, const char *floor_peer, const char *cf_peer);

/* ---- rounds.c: one value per round, reported as median [min-max] ---- */
#define MAX_ROUNDS 100
typedef struct { int n; double v[MAX_ROUNDS]; } series_t;
void series_add(series_t *s, double v);
double series_median(const series_t *s);   /* NaN when empty */
double series_min(const series_t *s);
double series_max(const series_t *s);
series_t series_scaled(const series_t *s, double factor);   /* every value times factor */
/* JSON: key = the median; key_spread = { min, max, rounds, values: [one per round] }. */
void json_series(json_t *j, const char *key, const series_t *s);
void table_series(const char *metric, const char *peer, const series_t *s, const char *unit, int sense);
/* The peers a benchmark runs (runs(p) true; NULL: all) in the order of round r: their list
 * rotated by r places, so that no peer always goes first or follows the same one. Returns
 * their number; order[] receives indices into peers. */
#define MAX_PEERS 16
int round_order(peer_t **peers, int n, int (*runs)(const peer_t *p), int round, int *order);
static inline int peer_has_async(const peer_t *p) { return p->async_new != NULL; }
static inline int peer_has_timers(const peer_t *p) { return p->timer_new != NULL; }
static inline int peer_has_fds(const peer_t *p) { return p->fd_new != NULL; }
static inline int peer_has_perform(const peer_t *p) { return p->perform != NULL; }
static inline int peer_timers_any_thread(const peer_t *p) { return p->timers_any_thread; }
void round_begin(int round, int rounds);   /* progress: "  round r/R:" */
void round_done(const char *what);         /* " what", after each peer of the round */
void round_end(void);                      /* ends the line with the estimated time left */

/* ---- progress.c: the estimated time left ---- */
void progress_init(double expected_s, double after_s);   /* the phases' total, what follows */
void progress_phase_begin(double expected_s);            /* a benchmark or a latency scenario */
void progress_phase_end(void);
void progress_round(int done, int rounds);               /* rounds done in the current phase */
double progress_left_s(void);
const char *progress_left_str(char *buf, size_t n);      /* "~N min left" */
double latency_expected_s(const bench_opts_t *o, int scenario);

/* ---- allocs.c: malloc, calloc, realloc, free... interposed, counted only when switched on ---- */
typedef struct { unsigned long long allocs, frees, bytes; } alloc_counts_t;
void alloc_count_start(void);              /* zero the counters and count from now */
void alloc_count_stop(alloc_counts_t *out);/* stop counting; what was counted since the start */
long rss_bytes(void);                      /* resident set of the process (/proc/self/statm) */

/* ---- phases: each writes its JSON member and its table rows ---- */
void bench_latency(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_throughput(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_timer_heap(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_timer_precision(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_idle(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_pass(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_fds(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_memory(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_fire_rate(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_cross_thread(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_scaling(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_perform(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_spin(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_rearm(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
/* --memory-child: arm timers of one peer in this fresh process and print the RSS they cost. */
int memory_child(peer_t *p, long timers, double cap_s, int cpu);
int heap_child(peer_t *p, long n, double cap_s, int cpu);
/* --callgrind-pass: only the pass loop of one peer and scenario, for callgrind. */
int callgrind_pass(peer_t *p, const char *scenario, long passes);

/* ---- sysinfo.c ---- */
void sysinfo_write(json_t *j, const bench_opts_t *o);
void sysinfo_print(FILE *out, const bench_opts_t *o);

/* ---- plot.c: latency CDFs ---- */
typedef struct { const char *name; const hist_t *h; } plot_series_t;
void plot_cdf(const char *svg_path, const char *png_path, const char *title,
              const plot_series_t *s, int n);

#endif
