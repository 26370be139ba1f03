/*
 * faults.h - what the fault-injection job's files share (make faults, mk/faults.mk).
 *
 * The job is one program, build/faults/faults, linked statically with the core compiled with
 * -DRL_FAULT_INJECTION -DRL_DEBUG and ASan+UBSan. main.c runs each part in a child process of
 * its own (with a time limit, its stderr in build/faults/logs/), so that an abort, a sanitizer
 * report or a hang in one part is reported as a failure of that part and the others still run:
 *
 *   sweep.c    allocation (and kernel-object) failure at every fault point of scripted scenarios
 *   rlimit.c   RLIMIT_NOFILE exhaustion, kernel-object fault points at loop creation, epoll_ctl
 *              refusing an fd
 *   eintr.c    a storm of signals without SA_RESTART at a loop and at the threads waking it
 *   fdreuse.c  an fd closed under its source and its number reused by a new source
 *   fork.c     fork() from a thread with a loop, from a process whose other threads use the library
 *   sigproc.c  fault points of signal and child-exit sources (pidfd and SIGCHLD fallback)
 *   extras.c   fault points of a timer's extras (a repeating timer, a tolerance, a second mode)
 *
 * A part reports to main.c through a pipe, one line per message:
 *   case ok NAME            a check case that passed
 *   case FAIL NAME: DETAIL  one that failed, with its first failed check
 *   stat KEY VALUE          a number for the summary line
 * and anything else is progress, parsed by whoever reads it (the sweep's start/end lines).
 */
#ifndef FAULTS_H
#define FAULTS_H

#include <crunloop.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- The core's test hooks: hidden symbols, reachable because the core is linked in statically --- */

#define FAULTS_HIDDEN __attribute__((visibility("hidden")))
/* alloc.h / fault.c: per thread, let `after` fault points pass, then fail `count` (< 0: all). */
FAULTS_HIDDEN void rl_fault_arm(long after, long count);
FAULTS_HIDDEN long rl_fault_points(void);
/* internal.h / verify.c: number of violated invariants (report gets one line per violation). */
FAULTS_HIDDEN int rl_loop_verify(rl_loop_t *loop, char *report, size_t size);

/* ---- Reporting to main.c ---- */

extern int fr_out; /* the pipe to main.c; -1: stdout */
void fr_line(const char *format, ...) __attribute__((format(printf, 1, 2)));
void fr_stat(const char *key, long value);

/* A check case: counts failed checks (thread-safe) and keeps the first message. */
typedef struct {
    const char *name;
    int failures;
    char first[768];
    pthread_mutex_t lock;
} fcase;

void fcase_init(fcase *c, const char *name);
void fcase_fail(fcase *c, const char *file, int line, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
/* Report the case (case ok / case FAIL) and return whether it passed. */
bool fcase_report(fcase *c);

#define FCHECK(c, cond, ...)                                                        \
    do {                                                                            \
        if (!(cond)) fcase_fail((c), __FILE__, __LINE__, __VA_ARGS__);              \
    } while (0)

/* ---- Helpers ---- */

double now_s(void);
void nap(double seconds);            /* sleeps through EINTR */
int count_open_fds(void);            /* entries of /proc/self/fd, not counting the one it opens */
/* Join thread, waiting at most seconds; false when it did not end in time (left running). */
bool join_within(pthread_t thread, double seconds);
/* rl_loop_verify into buf (always NUL-terminated); returns the number of violations. */
int verify_loop(rl_loop_t *loop, char *buf, size_t size);

/* Each part's entry point: runs in a child process, reports through fr_line. */
void part_sweep(int scenario, int start_mode, long start_point);
int sweep_scenario_count(void);
const char *sweep_scenario_name(int scenario);
void part_rlimit(void);
void part_eintr(void);
void part_fdreuse(void);
void part_fork(void);
void part_sigproc(void);
void part_extras(void);

#endif
