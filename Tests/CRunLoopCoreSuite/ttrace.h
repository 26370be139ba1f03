/*
 * ttrace.h - small helpers shared by the semantic tests (t_loop.c, t_timers.c, t_sources.c,
 * t_observers.c, t_modes.c): a per-thread trace buffer whose exact contents the tests compare
 * against an expected string, ready-made callbacks that append to it, a counting context, and
 * thread and sleep helpers.
 *
 * The trace belongs to the calling thread. Every test runs on a fresh thread, so it starts empty.
 * Entries are separated by one space: tt("a"); tt("b%d", 2);  ->  "a b2".
 */
#ifndef TTRACE_H
#define TTRACE_H

#include <crunloop.h>
#include "rlt.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define TT_UNUSED __attribute__((unused))

static _Thread_local char tt_buf_[8192] TT_UNUSED;
static _Thread_local size_t tt_len_ TT_UNUSED;

static inline void tt_reset(void) { tt_len_ = 0; tt_buf_[0] = '\0'; }

static inline __attribute__((format(printf, 1, 2))) void tt(const char *format, ...) {
    if (tt_len_ + 2 >= sizeof tt_buf_) return;
    if (tt_len_ > 0) tt_buf_[tt_len_++] = ' ';
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(tt_buf_ + tt_len_, sizeof tt_buf_ - tt_len_, format, ap);
    va_end(ap);
    if (n > 0) tt_len_ += (size_t)n;
    if (tt_len_ >= sizeof tt_buf_) tt_len_ = sizeof tt_buf_ - 1;
    tt_buf_[tt_len_] = '\0';
}

static inline const char *tt_get(void) { return tt_buf_; }

/* Fail (and return from the test) unless the trace is exactly `expected`. */
#define TT_EXPECT(expected)                                                                    \
    do {                                                                                       \
        const char *tt_e_ = (expected);                                                        \
        if (strcmp(tt_buf_, tt_e_) != 0) {                                                     \
            rlt_fail(__FILE__, __LINE__, "trace is \"%s\", expected \"%s\"", tt_buf_, tt_e_);  \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* Fail unless two C strings are equal (either may be NULL). */
#define TT_STREQ(actual, expected)                                                             \
    do {                                                                                       \
        const char *tt_a_ = (actual), *tt_x_ = (expected);                                     \
        if (!tt_a_ || !tt_x_ || strcmp(tt_a_, tt_x_) != 0) {                                   \
            rlt_fail(__FILE__, __LINE__, "%s is \"%s\", expected \"%s\"", #actual,             \
                     tt_a_ ? tt_a_ : "(null)", tt_x_ ? tt_x_ : "(null)");                      \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* Fail unless |a - b| <= eps (doubles), printing both. */
#define TT_NEAR(a, b, eps)                                                                     \
    do {                                                                                       \
        double tt_da_ = (a), tt_db_ = (b);                                                     \
        if (!(fabs(tt_da_ - tt_db_) <= (eps))) {                                               \
            rlt_fail(__FILE__, __LINE__, "%s ~ %s (%.6f vs %.6f)", #a, #b, tt_da_, tt_db_);    \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* Fail unless a >= b (doubles), printing both. */
#define TT_GE(a, b)                                                                            \
    do {                                                                                       \
        double tt_da_ = (a), tt_db_ = (b);                                                     \
        if (!(tt_da_ >= tt_db_)) {                                                             \
            rlt_fail(__FILE__, __LINE__, "%s >= %s (%.6f vs %.6f)", #a, #b, tt_da_, tt_db_);   \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* Letter of one observer activity. */
static inline char tt_act(unsigned activity) {
    switch (activity) {
    case RL_ENTRY: return 'E';
    case RL_BEFORE_TIMERS: return 'T';
    case RL_BEFORE_SOURCES: return 'S';
    case RL_BEFORE_WAITING: return 'W';
    case RL_AFTER_WAITING: return 'A';
    case RL_EXIT: return 'X';
    default: return '?';
    }
}

/* Ready-made callbacks: info / arg is a label (a C string). */
static inline void tt_observer_cb(rl_observer_t *o, unsigned activity, void *info) {
    (void)o;
    tt("%s%c", info ? (const char *)info : "", tt_act(activity));
}
static inline void tt_timer_cb(rl_timer_t *t, void *info) {
    (void)t;
    tt("%s", info ? (const char *)info : "(null)");
}
static inline void tt_block_cb(void *arg) { tt("%s", arg ? (const char *)arg : "(null)"); }
static inline void tt_perform_cb(void *info) { tt("%s", info ? (const char *)info : "(null)"); }
static inline void tt_stop_cb(rl_timer_t *t, void *info) {
    (void)t;
    if (info) tt("%s", (const char *)info);
    rl_loop_stop(rl_loop_get_current());
}

static inline rl_context_t tt_label(const char *label) {
    rl_context_t c = { (void *)label, NULL, NULL };
    return c;
}

/* A labelled observer for activities, added to mode of the current loop; returns a borrowed
 * pointer (the loop keeps it). */
static inline rl_observer_t *tt_add_observer(const char *mode, unsigned activities, long order,
                                             const char *label) {
    rl_context_t c = tt_label(label);
    rl_observer_t *o = rl_observer_create(activities, true, order, tt_observer_cb, &c);
    if (!o) return NULL;
    if (rl_loop_add_observer(rl_loop_get_current(), o, mode) != 0) { rl_release(o); return NULL; }
    rl_release(o);
    return o;
}

/* A labelled timer, added to mode of the current loop; borrowed pointer. */
static inline rl_timer_t *tt_add_timer(const char *mode, double date, double interval, long order,
                                       rl_timer_callback_t cb, const char *label) {
    rl_context_t c = tt_label(label);
    rl_timer_t *t = rl_timer_create(date, interval, order, cb ? cb : tt_timer_cb, &c);
    if (!t) return NULL;
    if (rl_loop_add_timer(rl_loop_get_current(), t, mode) != 0) { rl_release(t); return NULL; }
    rl_release(t);
    return t;
}

/* A timer far in the future that keeps mode from being empty; borrowed pointer. */
static inline rl_timer_t *tt_keepalive(const char *mode) {
    return tt_add_timer(mode, rl_time_now() + 100000.0, 0, 0, NULL, "never");
}

/* A labelled version-0 source (perform traces the label) in mode; borrowed pointer. */
static inline rl_source_t *tt_add_source(const char *mode, long order, const char *label) {
    rl_source_context_t c = { (void *)label, NULL, NULL, NULL, NULL, tt_perform_cb };
    rl_source_t *s = rl_source_create(order, &c);
    if (!s) return NULL;
    if (rl_loop_add_source(rl_loop_get_current(), s, mode) != 0) { rl_release(s); return NULL; }
    rl_release(s);
    return s;
}

/* A context that counts retain and release calls on its info. */
typedef struct { atomic_int retains, releases; } tt_count_t;
static inline const void *tt_count_retain(const void *info) {
    atomic_fetch_add(&((tt_count_t *)info)->retains, 1);
    return info;
}
static inline void tt_count_release(const void *info) {
    atomic_fetch_add(&((tt_count_t *)info)->releases, 1);
}

static inline void tt_sleep(double seconds) {
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Entries of a folder ("/proc/self/fd": open fds, "/proc/self/task": threads), or -1. */
static inline int tt_count_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Start fn(arg) on a new thread; tt_join waits for it. */
static inline pthread_t tt_spawn(void *(*fn)(void *), void *arg) {
    pthread_t th;
    if (pthread_create(&th, NULL, fn, arg) != 0) abort();
    return th;
}
static inline void tt_join(pthread_t th) { pthread_join(th, NULL); }

/* A loop kept alive on a thread of its own until tt_live_stop (its thread idles meanwhile). */
typedef struct {
    pthread_t th;
    rl_loop_t *loop;
    pthread_mutex_t m;
    pthread_cond_t c;
    bool ready, quit;
} tt_live_t;

static inline void *tt_live_main_(void *arg) {
    tt_live_t *l = arg;
    pthread_mutex_lock(&l->m);
    l->loop = rl_loop_get_current();
    l->ready = true;
    pthread_cond_broadcast(&l->c);
    while (!l->quit) pthread_cond_wait(&l->c, &l->m);
    pthread_mutex_unlock(&l->m);
    return NULL;
}
static inline void tt_live_start(tt_live_t *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->m, NULL);
    pthread_cond_init(&l->c, NULL);
    l->th = tt_spawn(tt_live_main_, l);
    pthread_mutex_lock(&l->m);
    while (!l->ready) pthread_cond_wait(&l->c, &l->m);
    pthread_mutex_unlock(&l->m);
}
static inline void tt_live_stop(tt_live_t *l) {
    pthread_mutex_lock(&l->m);
    l->quit = true;
    pthread_cond_broadcast(&l->c);
    pthread_mutex_unlock(&l->m);
    tt_join(l->th);
    pthread_mutex_destroy(&l->m);
    pthread_cond_destroy(&l->c);
}

/* Wait (up to `limit` seconds) until loop sleeps; true when it did. */
static inline bool tt_wait_sleeping(rl_loop_t *loop, double limit) {
    double end = rl_time_now() + limit;
    while (!rl_loop_is_waiting(loop)) {
        if (rl_time_now() > end) return false;
        tt_sleep(0.001);
    }
    return true;
}

/* How many times name occurs among names[0..count). */
static inline size_t tt_count_name(char **names, size_t count, const char *name) {
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (names[i] && strcmp(names[i], name) == 0) n++;
    return n;
}
static inline void tt_free_names(char **names, size_t count) {
    if (!names) return;
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

/* Run fn in a forked child, bounded by an alarm (a hang is killed by SIGALRM); its wait status,
 * or -1 when fork fails. */
static inline int tt_in_child(int (*fn)(void)) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        alarm(20);
        _exit(fn());
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return status;
}

/* Fail the running test unless status (from tt_in_child) is a child that exited 0. */
static inline void tt_report_child(int status) {
    if (WIFSIGNALED(status)) rlt_fail(__FILE__, __LINE__, "child killed by signal %d", WTERMSIG(status));
    else if (!WIFEXITED(status) || WEXITSTATUS(status))
        rlt_fail(__FILE__, __LINE__, "child exited %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

#endif
