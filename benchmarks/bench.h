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
uint64_t thread_cpu_ns(void);          /* getrusage(RUSAGE_THREAD) user+sys */
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

/* ---- options shared by the phases ---- */
typedef struct {
    int quick;
    int pin;                 /* pin threads to CPUs (2+ CPUs) */
    int cpu_a, cpu_b;        /* CPUs of the signalling and of the loop thread, -1 unpinned */
    long lat_samples, lat_warmup;
    double tput_seconds;
    int tput_producers;      /* N of the N-producer run */
    double precision_seconds;
    double idle_seconds;
    double timer_cap_seconds;/* per phase of the timer-heap benchmark */
    int timer_max_exp;       /* 10^3 .. 10^timer_max_exp timers */
    double pass_seconds;
    int fd_pairs;
    double fd_seconds;
    const char *only;        /* comma-separated peer names, NULL for all */
} bench_opts_t;

/* ---- table.c: the summary table, one row per metric and peer ---- */
enum { LOWER_IS_BETTER = 0, HIGHER_IS_BETTER = 1 };
void table_add(const char *metric, const char *peer, double value, const char *unit, int sense);
void table_note(const char *metric, const char *peer, const char *note);  /* a row with no figure */
void table_print(FILE *out, const char *floor_peer, const char *cf_peer);

/* ---- phases: each writes its JSON member and its table rows ---- */
void bench_latency(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_throughput(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_timer_heap(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_timer_precision(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_idle(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_pass(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
void bench_fds(const bench_opts_t *o, peer_t **peers, int n, json_t *j);
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
