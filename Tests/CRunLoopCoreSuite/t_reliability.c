/*
 * t_reliability.c - the core under conditions a long-lived program meets sooner or later: times
 * so far away that they overflow a timespec, running out of file descriptors, an fd closed and
 * its number reused without removing its source, fork(), wakeups racing a thread's exit, blocks
 * piling up for another mode, loops outliving their threads, many equal-order sources.
 *
 * Tests whose failure used to be an abort or a hang run their body in a forked child (in_child):
 * the child reports a failed check up a pipe, and a child that dies or does not end in time is a
 * failure of the test, not of the runner. Under ThreadSanitizer, which kills a child that starts a
 * thread after a multi-threaded fork, the one test that needs that (no fd left) is skipped.
 */
#include "ttrace.h"

#include <dirent.h>
#include <fcntl.h>
#include <float.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEF RL_DEFAULT_MODE

#if defined(__SANITIZE_THREAD__)
#define REL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define REL_TSAN 1
#endif
#endif
#ifndef REL_TSAN
#define REL_TSAN 0
#endif

/* ---- running a body in a forked child ------------------------------------------------------ */

/* A child body returns NULL when it passed, else what failed (CK, CK_EQ). */
static char ck_msg[512];
static __attribute__((format(printf, 2, 3))) const char *ck_fail(int line, const char *format, ...) {
    int n = snprintf(ck_msg, sizeof ck_msg, "line %d: ", line);
    va_list ap;
    va_start(ap, format);
    vsnprintf(ck_msg + n, sizeof ck_msg - (size_t)n, format, ap);
    va_end(ap);
    return ck_msg;
}
#define CK(cond)                                                                               \
    do {                                                                                       \
        if (!(cond)) return ck_fail(__LINE__, "%s", #cond);                                    \
    } while (0)
#define CK_EQ(a, b)                                                                            \
    do {                                                                                       \
        long long ck_a_ = (long long)(a), ck_b_ = (long long)(b);                              \
        if (ck_a_ != ck_b_)                                                                    \
            return ck_fail(__LINE__, "%s == %s (%lld != %lld)", #a, #b, ck_a_, ck_b_);         \
    } while (0)

typedef struct {
    const char *(*child)(void *arg); /* in the child */
    void (*before_go)(void *arg);    /* in the parent, after the fork, before the child starts */
    void (*after_go)(void *arg);     /* in the parent, while the child runs */
    void *arg;
    double limit;                    /* seconds the child may take before it counts as hung */
} child_spec;

/* Fork; the child waits for the parent's go, runs spec->child and _exits with its verdict.
 * Returns NULL when the child passed, else a description (in out) of how it failed: a failed
 * check, a signal (an abort), or a hang (killed after spec->limit seconds). */
static const char *in_child(const child_spec *spec, char *out, size_t size) {
    int res[2], go[2];
    if (pipe2(res, O_CLOEXEC) != 0) {
        snprintf(out, size, "pipe: %s", strerror(errno));
        return out;
    }
    if (pipe2(go, O_CLOEXEC) != 0) {
        snprintf(out, size, "pipe: %s", strerror(errno));
        close(res[0]);
        close(res[1]);
        return out;
    }
    (void)rl_loop_get_current(); /* the child works with the forking thread's loop */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(out, size, "fork: %s", strerror(errno));
        close(res[0]); close(res[1]); close(go[0]); close(go[1]);
        return out;
    }
    if (pid == 0) {
        close(res[0]);
        close(go[1]);
        struct pollfd p = { go[0], POLLIN, 0 };
        char b;
        if (poll(&p, 1, 10000) != 1 || read(go[0], &b, 1) != 1) _exit(3);
        const char *m = spec->child(spec->arg);
        if (m) {
            ssize_t w = write(res[1], m, strlen(m));
            (void)w;
            _exit(1);
        }
        _exit(0);
    }
    close(res[1]);
    close(go[0]);
    if (spec->before_go) spec->before_go(spec->arg);
    ssize_t w = write(go[1], "g", 1);
    (void)w;
    close(go[1]);
    if (spec->after_go) spec->after_go(spec->arg);

    int status = 0;
    bool hung = false;
    double end = rl_time_now() + spec->limit;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) {
            snprintf(out, size, "waitpid: %s", strerror(errno));
            close(res[0]);
            return out;
        }
        if (rl_time_now() > end) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            hung = true;
            break;
        }
        tt_sleep(0.002);
    }
    char msg[400];
    size_t len = 0;
    fcntl(res[0], F_SETFL, O_NONBLOCK);
    for (ssize_t n; len + 1 < sizeof msg && (n = read(res[0], msg + len, sizeof msg - 1 - len)) > 0;)
        len += (size_t)n;
    msg[len] = '\0';
    close(res[0]);
    if (hung)
        snprintf(out, size, "the child hung (killed after %.1f s)%s%s", spec->limit, len ? ": " : "", msg);
    else if (WIFSIGNALED(status))
        snprintf(out, size, "the child died of signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WEXITSTATUS(status) != 0)
        snprintf(out, size, "the child failed: %s", len ? msg : "(no message)");
    else
        return NULL;
    return out;
}

#define RUN_IN_CHILD(...)                                                                      \
    do {                                                                                       \
        child_spec spec_ = { __VA_ARGS__ };                                                    \
        char out_[600];                                                                        \
        const char *r_ = in_child(&spec_, out_, sizeof out_);                                  \
        if (r_) {                                                                              \
            rlt_fail(__FILE__, __LINE__, "%s", r_);                                            \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* One test per huge value: child(&value) in a child process (an abort there fails the test). */
#define HUGE_VALUE_TEST(name, child, value)                 \
    RLT_TEST(name) {                                        \
        double value_ = (value);                            \
        RUN_IN_CHILD(child, NULL, NULL, &value_, 5.0);      \
    }

/* ---- small helpers --------------------------------------------------------------------------- */

static void count_timer(rl_timer_t *t, void *info) { (void)t; (*(int *)info)++; }
static void count_perform(void *info) { (*(int *)info)++; }
static void stop_timer(rl_timer_t *t, void *info) {
    (void)t;
    (*(int *)info)++;
    rl_loop_stop(rl_loop_get_current());
}

static rl_timer_t *add_counting_timer(rl_loop_t *loop, const char *mode, double date, double interval,
                                      int *count) {
    rl_context_t c = { count, NULL, NULL };
    rl_timer_t *t = rl_timer_create(date, interval, 0, count_timer, &c);
    if (t && rl_loop_add_timer(loop, t, mode) != 0) {
        rl_release(t);
        return NULL;
    }
    return t; /* the caller's reference */
}
static void drop_timer(rl_timer_t *t) {
    if (!t) return;
    rl_timer_invalidate(t);
    rl_release(t);
}

/* A version-0 source nobody signals: keeps a mode from being empty, and adds no deadline. */
static rl_source_t *add_keepalive(rl_loop_t *loop, const char *mode) {
    rl_source_context_t c;
    memset(&c, 0, sizeof c);
    rl_source_t *s = rl_source_create(0, &c);
    if (s && rl_loop_add_source(loop, s, mode) != 0) {
        rl_release(s);
        return NULL;
    }
    return s;
}
static void drop_source(rl_source_t *s) {
    if (!s) return;
    rl_source_invalidate(s);
    rl_release(s);
}

/* Run mode for seconds; a fd source on a timerfd of our own (not a timer of the loop, so it adds
 * no deadline to the loop) stops the loop after delay seconds. */
static void fd_stop_cb(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s; (void)events;
    uint64_t expirations;
    ssize_t n = read(fd, &expirations, sizeof expirations);
    (void)n;
    (*(int *)info)++;
    rl_loop_stop(rl_loop_get_current());
}
static int run_stopped_by_fd_after(const char *mode, double seconds, double delay, double *elapsed) {
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (tfd < 0) return -1000;
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)delay;
    its.it_value.tv_nsec = (long)((delay - (double)its.it_value.tv_sec) * 1e9);
    int stops = 0;
    rl_context_t c = { &stops, NULL, NULL };
    rl_source_t *s = rl_source_create_fd(tfd, RL_FD_READABLE, 0, fd_stop_cb, &c);
    if (!s || rl_loop_add_source(rl_loop_get_current(), s, mode) != 0 ||
        timerfd_settime(tfd, 0, &its, NULL) != 0) {
        drop_source(s);
        close(tfd);
        return -1001;
    }
    double t0 = rl_time_now();
    int r = rl_run_in_mode(mode, seconds, false);
    if (elapsed) *elapsed = rl_time_now() - t0;
    drop_source(s);
    close(tfd);
    return r;
}

/* ==== 1. Huge times ========================================================================== */
/* Every non-NaN, non-negative time is accepted and means "that far away"; nothing aborts. The
 * runs with no timeout are the ones that used to arm the timerfd at the huge date (and abort). */

#define HM "rel-huge"

static const char *huge_fire_date_child(void *arg) {
    double date = *(double *)arg;
    rl_loop_t *loop = rl_loop_get_current();
    int fired = 0;
    rl_timer_t *t = add_counting_timer(loop, HM, date, 0, &fired);
    CK(t != NULL);
    CK(rl_timer_get_next_fire_date(t) == date);
    CK(rl_loop_get_next_timer_fire_date(loop, HM) == date);
    double t0 = rl_time_now();
    CK_EQ(rl_run_in_mode(HM, 0.2, false), RL_RUN_TIMED_OUT);
    CK(rl_time_now() - t0 >= 0.19);
    CK_EQ(fired, 0);
    /* No timeout: the timer is the loop's earliest deadline. */
    double elapsed = 0;
    CK_EQ(run_stopped_by_fd_after(HM, INFINITY, 0.02, &elapsed), RL_RUN_STOPPED);
    CK(elapsed < 1.0);
    CK_EQ(fired, 0);
    CK(rl_timer_get_next_fire_date(t) == date);
    CK(rl_timer_is_valid(t));
    drop_timer(t);
    return NULL;
}

HUGE_VALUE_TEST(reliability_fire_date_1e300_is_never_reached, huge_fire_date_child, 1e300)

HUGE_VALUE_TEST(reliability_fire_date_dbl_max_is_never_reached, huge_fire_date_child, DBL_MAX)

HUGE_VALUE_TEST(reliability_fire_date_infinity_is_never_reached, huge_fire_date_child, INFINITY)

RLT_TEST(reliability_fire_date_past_time_t_is_never_reached) {
    double d = 1e19; /* more seconds than a 64-bit time_t holds */
    RUN_IN_CHILD(huge_fire_date_child, NULL, NULL, &d, 5.0);
}

static const char *huge_interval_child(void *arg) {
    double interval = *(double *)arg;
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *keep = add_keepalive(loop, HM);
    CK(keep != NULL);
    int fired = 0;
    rl_timer_t *t = add_counting_timer(loop, HM, 0, interval, &fired); /* first due now */
    CK(t != NULL);
    CK_EQ(rl_run_in_mode(HM, 0.2, false), RL_RUN_TIMED_OUT);
    CK_EQ(fired, 1);
    if (rl_timer_is_valid(t)) CK(rl_timer_get_next_fire_date(t) >= 1e299);
    double elapsed = 0;
    CK_EQ(run_stopped_by_fd_after(HM, INFINITY, 0.02, &elapsed), RL_RUN_STOPPED);
    CK(elapsed < 1.0);
    CK_EQ(fired, 1);
    drop_timer(t);
    drop_source(keep);
    return NULL;
}

HUGE_VALUE_TEST(reliability_interval_1e300_fires_once, huge_interval_child, 1e300)

HUGE_VALUE_TEST(reliability_interval_dbl_max_fires_once, huge_interval_child, DBL_MAX)

HUGE_VALUE_TEST(reliability_interval_infinity_fires_once, huge_interval_child, INFINITY)

static const char *huge_tolerance_child(void *arg) {
    double tolerance = *(double *)arg;
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *keep = add_keepalive(loop, HM);
    CK(keep != NULL);
    /* A timer due now that may fire any time from now on, and a plain one due in 20 ms. */
    int lax_fired = 0, plain_fired = 0;
    rl_timer_t *lax = add_counting_timer(loop, HM, 0, 0, &lax_fired);
    CK(lax != NULL);
    CK_EQ(rl_timer_set_tolerance(lax, tolerance), 0);
    CK(rl_timer_get_tolerance(lax) == tolerance);
    rl_timer_t *plain = add_counting_timer(loop, HM, rl_time_now() + 0.02, 0, &plain_fired);
    CK(plain != NULL);
    double t0 = rl_time_now();
    CK_EQ(rl_run_in_mode(HM, 0.2, false), RL_RUN_TIMED_OUT);
    CK(rl_time_now() - t0 < 1.0);
    CK_EQ(plain_fired, 1);
    CK(lax_fired <= 1);
    drop_timer(lax);
    drop_timer(plain);
    /* Alone, with no run timeout: the lax timer's window ends "never". */
    lax_fired = 0;
    lax = add_counting_timer(loop, HM, rl_time_now() + 0.05, 0, &lax_fired);
    CK(lax != NULL);
    CK_EQ(rl_timer_set_tolerance(lax, tolerance), 0);
    double elapsed = 0;
    CK_EQ(run_stopped_by_fd_after(HM, INFINITY, 0.15, &elapsed), RL_RUN_STOPPED);
    CK(elapsed < 1.5);
    CK(lax_fired <= 1);
    drop_timer(lax);
    drop_source(keep);
    return NULL;
}

HUGE_VALUE_TEST(reliability_tolerance_dbl_max_delays_no_other_timer, huge_tolerance_child, DBL_MAX)

HUGE_VALUE_TEST(reliability_tolerance_infinity_delays_no_other_timer, huge_tolerance_child, INFINITY)

static const char *huge_next_fire_date_child(void *arg) {
    (void)arg;
    rl_loop_t *loop = rl_loop_get_current();
    int fired = 0;
    rl_timer_t *t = add_counting_timer(loop, HM, rl_time_now() + 10, 0, &fired);
    CK(t != NULL);
    CK_EQ(rl_timer_set_next_fire_date(t, 1e19), 0);
    CK(rl_timer_get_next_fire_date(t) == 1e19);
    CK_EQ(rl_run_in_mode(HM, 0.1, false), RL_RUN_TIMED_OUT);
    CK_EQ(fired, 0);
    double elapsed = 0;
    CK_EQ(run_stopped_by_fd_after(HM, INFINITY, 0.02, &elapsed), RL_RUN_STOPPED);
    CK(elapsed < 1.0);
    CK_EQ(fired, 0);
    CK(rl_timer_get_next_fire_date(t) == 1e19);
    drop_timer(t);
    return NULL;
}

RLT_TEST(reliability_next_fire_date_set_past_time_t_is_never_reached) {
    RUN_IN_CHILD(huge_next_fire_date_child, NULL, NULL, NULL, 5.0);
}

static const char *huge_run_timeout_child(void *arg) {
    double seconds = *(double *)arg;
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *keep = add_keepalive(loop, HM);
    CK(keep != NULL);
    double elapsed = 0;
    CK_EQ(run_stopped_by_fd_after(HM, seconds, 0.02, &elapsed), RL_RUN_STOPPED);
    CK(elapsed < 1.0);
    /* The same with a timer as far away as the timeout. */
    int fired = 0;
    rl_timer_t *far = add_counting_timer(loop, HM, 1e300, 0, &fired);
    CK(far != NULL);
    CK_EQ(run_stopped_by_fd_after(HM, seconds, 0.02, &elapsed), RL_RUN_STOPPED);
    CK(elapsed < 1.0);
    CK_EQ(fired, 0);
    /* And a plain timer that stops the loop after 20 ms. */
    int stops = 0;
    rl_context_t c = { &stops, NULL, NULL };
    rl_timer_t *stopper = rl_timer_create(rl_time_now() + 0.02, 0, 0, stop_timer, &c);
    CK(stopper != NULL);
    CK_EQ(rl_loop_add_timer(loop, stopper, HM), 0);
    double t0 = rl_time_now();
    CK_EQ(rl_run_in_mode(HM, seconds, false), RL_RUN_STOPPED);
    CK(rl_time_now() - t0 < 1.0);
    CK_EQ(stops, 1);
    drop_timer(stopper);
    drop_timer(far);
    drop_source(keep);
    return NULL;
}

HUGE_VALUE_TEST(reliability_run_timeout_1e300_means_no_timeout, huge_run_timeout_child, 1e300)

HUGE_VALUE_TEST(reliability_run_timeout_dbl_max_means_no_timeout, huge_run_timeout_child, DBL_MAX)

HUGE_VALUE_TEST(reliability_run_timeout_infinity_means_no_timeout, huge_run_timeout_child, INFINITY)

/* ==== 2. Out of file descriptors ============================================================= */

typedef struct {
    int *fills;           /* room for every fd number below the lowered limit */
    int nfills, cap;
    bool retry;           /* after the failure, close the fillers and try again */
    /* what the thread saw */
    bool got_null;
    int got_errno;
    int run0, run_all;
    bool got_loop_after;
    int fired_after;
    int run_after;
} emfile_t;

static void *emfile_thread(void *arg) {
    emfile_t *e = arg;
    errno = 0;
    rl_loop_t *l = rl_loop_get_current();
    e->got_null = l == NULL;
    e->got_errno = errno;
    e->run0 = rl_run_in_mode(DEF, 0, false);
    e->run_all = rl_run();
    if (!e->retry) return NULL; /* the caller checks that nothing leaked */
    /* Room again: the same thread now gets a loop that works. */
    while (e->nfills > 0) close(e->fills[--e->nfills]);
    l = rl_loop_get_current();
    e->got_loop_after = l != NULL;
    if (!l) return NULL;
    rl_timer_t *t = add_counting_timer(l, DEF, 0, 0, &e->fired_after);
    if (!t) return NULL;
    e->run_after = rl_run_in_mode(DEF, 0.5, false);
    drop_timer(t);
    return NULL;
}

static int highest_open_fd(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int hi = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && atoi(e->d_name) > hi) hi = atoi(e->d_name);
    closedir(d);
    return hi;
}

/* Fill every fd slot below a lowered soft limit; returns how many were filled (errno EMFILE). */
static int fill_fds(emfile_t *e, int src) {
    e->nfills = 0;
    int fd;
    errno = 0;
    while (e->nfills < e->cap && (fd = dup(src)) >= 0) e->fills[e->nfills++] = fd;
    return errno == EMFILE ? e->nfills : -1;
}

static const char *emfile_child(void *arg) {
    (void)arg;
    static emfile_t e;
    int src = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CK(src >= 0);
    struct rlimit old;
    CK(getrlimit(RLIMIT_NOFILE, &old) == 0);
    int hi = highest_open_fd();
    CK(hi >= 0);
    struct rlimit low = old;
    low.rlim_cur = (rlim_t)hi + 1 + 16;
    CK(low.rlim_cur <= old.rlim_max);
    CK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    int *fills = calloc(low.rlim_cur, sizeof *fills);
    CK(fills != NULL);

    /* With 0, 1 or 2 fds left (a loop needs 3): no loop, EMFILE, no fd kept. */
    for (int room = 2; room >= 0; room--) {
        memset(&e, 0, sizeof e);
        e.fills = fills;
        e.cap = (int)low.rlim_cur;
        CK(fill_fds(&e, src) > room);
        for (int i = 0; i < room; i++) close(e.fills[--e.nfills]);
        pthread_t th;
        CK(pthread_create(&th, NULL, emfile_thread, &e) == 0);
        pthread_join(th, NULL);
        if (!e.got_null) return ck_fail(__LINE__, "room for %d fds: rl_loop_get_current() gave a loop", room);
        if (e.got_errno != EMFILE)
            return ck_fail(__LINE__, "room for %d fds: errno %d, expected EMFILE", room, e.got_errno);
        if (e.run0 != -EMFILE)
            return ck_fail(__LINE__, "room for %d fds: rl_run_in_mode gave %d, expected -EMFILE", room, e.run0);
        if (e.run_all >= 0)
            return ck_fail(__LINE__, "room for %d fds: rl_run gave %d, expected a negative errno", room, e.run_all);
        /* Whatever the failed creation opened, it closed: the room is still there. */
        int got = 0, fd;
        while (got < room + 1 && (fd = dup(src)) >= 0) e.fills[e.nfills++] = fd, got++;
        if (got != room)
            return ck_fail(__LINE__, "room for %d fds: %d free after the failure (an fd leaked)", room, got);
        while (e.nfills > 0) close(e.fills[--e.nfills]);
    }

    /* No fd left, then room again in the same thread. */
    memset(&e, 0, sizeof e);
    e.fills = fills;
    e.cap = (int)low.rlim_cur;
    CK(fill_fds(&e, src) > 0);
    e.retry = true;
    pthread_t th;
    CK(pthread_create(&th, NULL, emfile_thread, &e) == 0);
    pthread_join(th, NULL);
    while (e.nfills > 0) close(e.fills[--e.nfills]);
    CK(setrlimit(RLIMIT_NOFILE, &old) == 0);
    close(src);
    free(fills);
    CK(e.got_null);
    CK_EQ(e.got_errno, EMFILE);
    CK_EQ(e.run0, -EMFILE);
    CK(e.run_all < 0);
    CK(e.got_loop_after);
    CK_EQ(e.fired_after, 1);
    CK_EQ(e.run_after, RL_RUN_FINISHED);
    return NULL;
}

RLT_TEST(reliability_no_fd_left_gives_no_loop_and_emfile) {
    /* ThreadSanitizer kills a child that starts a thread after a multi-threaded fork, and this
     * needs a new thread (the forking thread is the child's main thread) and a child (it lowers
     * the process's fd limit). */
    if (REL_TSAN) return;
    RUN_IN_CHILD(emfile_child, NULL, NULL, NULL, 10.0);
}

/* ==== 3. Common modes: all or nothing ======================================================== */

typedef struct { int calls, releases; } fdc_t;
static void fdc_release(const void *info) { ((fdc_t *)info)->releases++; }
static void fdc_cb(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s; (void)fd; (void)events;
    ((fdc_t *)info)->calls++;
}

static int open_regular_file(void) {
    char path[] = "/tmp/rl-reliability-XXXXXX";
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) unlink(path);
    return fd;
}

RLT_TEST(reliability_common_modes_add_refused_by_epoll_leaves_nothing) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "rel-common"), 0);
    int fd = open_regular_file(); /* epoll refuses regular files: EPERM */
    RLT_CHECK(fd >= 0);
    fdc_t c = { 0, 0 };
    rl_context_t cx = { &c, NULL, fdc_release };
    rl_source_t *s = rl_source_create_fd(fd, RL_FD_READABLE, 0, fdc_cb, &cx);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, RL_COMMON_MODES), -EPERM);
    RLT_CHECK(!rl_loop_contains_source(loop, s, RL_COMMON_MODES));
    RLT_CHECK(!rl_loop_contains_source(loop, s, DEF));
    RLT_CHECK(!rl_loop_contains_source(loop, s, "rel-common"));
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, RL_COMMON_MODES), -EPERM); /* not -EEXIST */
    RLT_CHECK(!rl_loop_contains_source(loop, s, RL_COMMON_MODES));
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, RL_COMMON_MODES), -ENOENT);
    /* A mode made common later does not get it either. */
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "rel-common-later"), 0);
    RLT_CHECK(!rl_loop_contains_source(loop, s, "rel-common-later"));
    RLT_CHECK_EQ(c.releases, 0);
    rl_release(s); /* the only reference left */
    RLT_CHECK_EQ(c.releases, 1);
    RLT_CHECK_EQ(c.calls, 0);
    close(fd);
}

RLT_TEST(reliability_mode_add_refused_by_epoll_leaves_nothing) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = open_regular_file();
    RLT_CHECK(fd >= 0);
    fdc_t c = { 0, 0 };
    rl_context_t cx = { &c, NULL, fdc_release };
    rl_source_t *s = rl_source_create_fd(fd, RL_FD_READABLE, 0, fdc_cb, &cx);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), -EPERM);
    RLT_CHECK(!rl_loop_contains_source(loop, s, DEF));
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), -EPERM);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, DEF), -ENOENT);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_FINISHED); /* the mode is still empty */
    rl_release(s);
    RLT_CHECK_EQ(c.releases, 1);
    close(fd);
}

/* ==== 6. An fd closed and its number reused without removing its source ===================== */

typedef struct {
    int calls;
    unsigned events_seen;
    bool drain;           /* read what is there */
    bool narrow;          /* on a writable callout, watch for readable only */
} fdw_t;

static void fdw_cb(rl_source_t *s, int fd, unsigned events, void *info) {
    fdw_t *w = info;
    w->calls++;
    w->events_seen |= events;
    if (w->drain && (events & RL_FD_READABLE)) {
        char buf[256];
        while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
    }
    if (w->narrow && (events & RL_FD_WRITABLE)) rl_source_set_fd_events(s, RL_FD_READABLE);
}

static int make_pair(int sv[2]) {
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv);
}

/* A new socketpair whose first end has number n; *peer receives the other end. */
static int pair_at(int n, int *peer) {
    int sv[2];
    if (make_pair(sv) != 0) return -1;
    if (sv[0] == n) {
        *peer = sv[1];
    } else if (sv[1] == n) {
        *peer = sv[0];
    } else {
        if (dup3(sv[0], n, O_CLOEXEC) != n) return -1;
        close(sv[0]);
        *peer = sv[1];
    }
    return n;
}

static bool send1(int fd) { return send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1; }

typedef struct {
    rl_loop_t *loop;
    int n, peer;          /* the reused number and the new file's peer */
    fdw_t w1, w2;
    rl_source_t *s1, *s2;
} reuse_t;

/* S1 on fd n (closed with its peer, S1 left in), then S2 on a new file at n. */
static bool reuse_setup(reuse_t *r, unsigned s2_events) {
    memset(r, 0, sizeof *r);
    r->loop = rl_loop_get_current();
    int sv[2];
    if (make_pair(sv) != 0) return false;
    r->n = sv[0];
    rl_context_t c1 = { &r->w1, NULL, NULL };
    r->s1 = rl_source_create_fd(r->n, RL_FD_READABLE, 0, fdw_cb, &c1);
    if (!r->s1 || rl_loop_add_source(r->loop, r->s1, DEF) != 0) return false;
    if (rl_run_in_mode(DEF, 0, false) != RL_RUN_TIMED_OUT) return false; /* a pass with it watched */
    close(sv[0]);
    close(sv[1]);
    if (pair_at(r->n, &r->peer) != r->n) return false;
    r->w2.drain = true;
    rl_context_t c2 = { &r->w2, NULL, NULL };
    r->s2 = rl_source_create_fd(r->n, s2_events, 0, fdw_cb, &c2);
    return r->s2 && rl_loop_add_source(r->loop, r->s2, DEF) == 0;
}
static void reuse_teardown(reuse_t *r) {
    drop_source(r->s1);
    drop_source(r->s2);
    close(r->n);
    close(r->peer);
}

static unsigned long long passes_of(rl_loop_t *loop) {
    rl_loop_stats_t st;
    return rl_loop_get_stats(loop, &st) == 0 ? st.passes : 0;
}

RLT_TEST(reliability_reused_fd_number_calls_only_the_new_source) {
    reuse_t r;
    RLT_CHECK(reuse_setup(&r, RL_FD_READABLE));
    RLT_CHECK(send1(r.peer));
    unsigned long long p0 = passes_of(r.loop);
    int rc = rl_run_in_mode(DEF, 0.1, false);
    unsigned long long passes = passes_of(r.loop) - p0;
    reuse_teardown(&r);
    RLT_CHECK_EQ(rc, RL_RUN_TIMED_OUT);
    RLT_CHECK(r.w2.calls >= 1);
    RLT_CHECK_EQ(r.w1.calls, 0);
    RLT_CHECK(passes < 200);
}

static void reuse_then_drop_old(int how) {
    reuse_t r;
    RLT_CHECK(reuse_setup(&r, RL_FD_READABLE));
    RLT_CHECK(send1(r.peer));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.1, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(r.w2.calls >= 1);
    RLT_CHECK_EQ(r.w1.calls, 0);
    if (how == 0) RLT_CHECK_EQ(rl_loop_remove_source(r.loop, r.s1, DEF), 0);
    else rl_source_invalidate(r.s1);
    r.w2.calls = 0;
    RLT_CHECK(send1(r.peer));
    unsigned long long p0 = passes_of(r.loop);
    int rc = rl_run_in_mode(DEF, 0.1, false);
    unsigned long long passes = passes_of(r.loop) - p0;
    reuse_teardown(&r);
    RLT_CHECK_EQ(rc, RL_RUN_TIMED_OUT);
    RLT_CHECK(r.w2.calls >= 1);
    RLT_CHECK_EQ(r.w1.calls, 0);
    RLT_CHECK(passes < 200);
}

RLT_TEST(reliability_reused_fd_number_new_source_survives_removal_of_the_old) {
    reuse_then_drop_old(0);
}

RLT_TEST(reliability_reused_fd_number_new_source_survives_invalidation_of_the_old) {
    reuse_then_drop_old(1);
}

RLT_TEST(reliability_reused_fd_number_wider_interest_makes_no_busy_loop) {
    reuse_t r;
    RLT_CHECK(reuse_setup(&r, RL_FD_READABLE | RL_FD_WRITABLE));
    r.w2.narrow = true; /* its first writable callout narrows it to readable */
    RLT_CHECK(send1(r.peer));
    unsigned long long p0 = passes_of(r.loop);
    int rc = rl_run_in_mode(DEF, 0.1, false);
    unsigned long long passes = passes_of(r.loop) - p0;
    reuse_teardown(&r);
    RLT_CHECK_EQ(rc, RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(r.w1.calls, 0);
    RLT_CHECK(r.w2.calls >= 1);
    RLT_CHECK((r.w2.events_seen & RL_FD_WRITABLE) != 0);
    RLT_CHECK(r.w2.calls <= 10);
    RLT_CHECK(passes < 200);
}

/* The old file stays open through a dup(): its epoll registration cannot be deleted by number. */
RLT_TEST(reliability_reused_fd_number_with_old_file_still_open_makes_no_busy_loop) {
    rl_loop_t *loop = rl_loop_get_current();
    int old[2];
    RLT_CHECK(make_pair(old) == 0);
    int n = old[0];
    fdw_t w1 = { 0, 0, false, false }, w2 = { 0, 0, true, false };
    rl_context_t c1 = { &w1, NULL, NULL }, c2 = { &w2, NULL, NULL };
    rl_source_t *s1 = rl_source_create_fd(n, RL_FD_READABLE, 0, fdw_cb, &c1);
    RLT_CHECK(s1 != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s1, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    int kept = fcntl(n, F_DUPFD_CLOEXEC, n + 1); /* the old file, kept elsewhere */
    RLT_CHECK(kept >= 0);
    close(n);
    int peer = -1;
    RLT_CHECK(pair_at(n, &peer) == n);
    rl_source_t *s2 = rl_source_create_fd(n, RL_FD_READABLE, 0, fdw_cb, &c2);
    RLT_CHECK(s2 != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s2, DEF), 0);

    /* The old file becomes readable and stays so (nobody reads it). */
    RLT_CHECK(send1(old[1]));
    unsigned long long p0 = passes_of(loop);
    int rc1 = rl_run_in_mode(DEF, 0.2, false);
    unsigned long long passes1 = passes_of(loop) - p0;
    int s1_phase1 = w1.calls, s2_phase1 = w2.calls;

    /* Then the new file gets data: only the new source hears of it. */
    RLT_CHECK(send1(peer));
    p0 = passes_of(loop);
    int rc2 = rl_run_in_mode(DEF, 0.2, false);
    unsigned long long passes2 = passes_of(loop) - p0;

    drop_source(s1);
    drop_source(s2);
    close(n);
    close(peer);
    close(kept);
    close(old[1]);
    RLT_CHECK_EQ(rc1, RL_RUN_TIMED_OUT);
    RLT_CHECK(passes1 < 300);
    RLT_CHECK_EQ(s1_phase1, 0);
    RLT_CHECK(s2_phase1 <= 2); /* at most a stray callout, never one per pass */
    RLT_CHECK_EQ(rc2, RL_RUN_TIMED_OUT);
    RLT_CHECK(passes2 < 300);
    RLT_CHECK_EQ(w1.calls, 0);
    RLT_CHECK(w2.calls > s2_phase1);
}

/* ==== 7. fork ================================================================================ */

typedef struct {
    rl_loop_t *loop;
    int sv[2];
    fdw_t fw;
    rl_source_t *fd_source;
    rl_timer_t *far;
    int far_fired;
} forkA_t;

static void forkA_parent_moves_on(void *arg) {
    /* What the parent does to its own loop after the fork must not touch the child's. */
    forkA_t *f = arg;
    rl_loop_remove_source(f->loop, f->fd_source, DEF);
    rl_timer_invalidate(f->far);
    rl_run_in_mode(DEF, 0, false);
}

static const char *forkA_child(void *arg) {
    forkA_t *f = arg;
    rl_loop_t *loop = rl_loop_get_current();
    CK(loop == f->loop);
    /* A timer due in 10 ms fires (and stops the loop) well within a 1 s run. */
    int stops = 0;
    rl_context_t c = { &stops, NULL, NULL };
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.01, 0, 0, stop_timer, &c);
    CK(t != NULL);
    CK_EQ(rl_loop_add_timer(loop, t, DEF), 0);
    double t0 = rl_time_now();
    CK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_STOPPED);
    CK(rl_time_now() - t0 < 0.8);
    CK_EQ(stops, 1);
    drop_timer(t);
    /* A version-0 source signalled, then a wakeup. */
    int performs = 0;
    rl_source_context_t sc = { &performs, NULL, NULL, NULL, NULL, count_perform };
    rl_source_t *s = rl_source_create(0, &sc);
    CK(s != NULL);
    CK_EQ(rl_loop_add_source(loop, s, DEF), 0);
    rl_source_signal(s);
    rl_loop_wakeup(loop);
    CK_EQ(rl_run_in_mode(DEF, 1.0, true), RL_RUN_HANDLED_SOURCE);
    CK_EQ(performs, 1);
    /* The fd source from before the fork, which the parent has since removed from its loop. */
    CK(send1(f->sv[1]));
    t0 = rl_time_now();
    CK_EQ(rl_run_in_mode(DEF, 1.0, true), RL_RUN_HANDLED_SOURCE);
    CK(rl_time_now() - t0 < 0.8);
    CK(f->fw.calls >= 1);
    /* A new fd source. */
    int sv[2];
    CK(make_pair(sv) == 0);
    fdw_t w = { 0, 0, true, false };
    rl_context_t wc = { &w, NULL, NULL };
    rl_source_t *fs = rl_source_create_fd(sv[0], RL_FD_READABLE, 0, fdw_cb, &wc);
    CK(fs != NULL);
    CK_EQ(rl_loop_add_source(loop, fs, DEF), 0);
    CK(send1(sv[1]));
    CK_EQ(rl_run_in_mode(DEF, 1.0, true), RL_RUN_HANDLED_SOURCE);
    CK_EQ(w.calls, 1);
    CK_EQ(f->far_fired, 0);
    drop_source(fs);
    drop_source(s);
    return NULL;
}

RLT_TEST(reliability_fork_child_keeps_a_working_loop_of_its_own) {
    forkA_t f;
    memset(&f, 0, sizeof f);
    f.loop = rl_loop_get_current();
    RLT_CHECK(make_pair(f.sv) == 0);
    f.fw.drain = true;
    rl_context_t c = { &f.fw, NULL, NULL };
    f.fd_source = rl_source_create_fd(f.sv[0], RL_FD_READABLE, 0, fdw_cb, &c);
    RLT_CHECK(f.fd_source != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(f.loop, f.fd_source, DEF), 0);
    f.far = add_counting_timer(f.loop, DEF, rl_time_now() + 100, 0, &f.far_fired);
    RLT_CHECK(f.far != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.01, false), RL_RUN_TIMED_OUT); /* armed and watched */
    RUN_IN_CHILD(forkA_child, forkA_parent_moves_on, NULL, &f, 5.0);
    drop_source(f.fd_source);
    drop_timer(f.far);
    close(f.sv[0]);
    close(f.sv[1]);
}

typedef struct {
    rl_loop_t *loop;
    int result;
    double elapsed;
    atomic_bool done;
} forkB_t;

static void *forkB_watchdog(void *arg) {
    forkB_t *f = arg;
    double end = rl_time_now() + 2.0;
    while (!atomic_load(&f->done) && rl_time_now() < end) tt_sleep(0.005);
    while (!atomic_load(&f->done)) { /* the run hung: end it, so the test fails rather than blocks */
        rl_loop_stop(f->loop);
        tt_sleep(0.05);
    }
    return NULL;
}

static void forkB_parent_runs(void *arg) {
    forkB_t *f = arg;
    pthread_t dog = tt_spawn(forkB_watchdog, f);
    double t0 = rl_time_now();
    f->result = rl_run_in_mode(DEF, 0.3, false);
    f->elapsed = rl_time_now() - t0;
    atomic_store(&f->done, true);
    tt_join(dog);
}

static const char *forkB_child(void *arg) {
    forkB_t *f = arg;
    tt_sleep(0.05); /* the parent sleeps by now */
    rl_loop_t *loop = rl_loop_get_current();
    CK(loop == f->loop);
    int fired = 0;
    rl_timer_t *t = add_counting_timer(loop, DEF, rl_time_now() + 0.005, 0, &fired);
    CK(t != NULL);
    rl_loop_wakeup(loop);
    CK_EQ(rl_run_in_mode(DEF, 0.5, false), RL_RUN_TIMED_OUT);
    CK_EQ(fired, 1);
    drop_timer(t);
    return NULL;
}

RLT_TEST(reliability_fork_child_activity_does_not_reach_the_parent) {
    forkB_t f;
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *keep = add_keepalive(loop, DEF);
    RLT_CHECK(keep != NULL);
    /* The parent's 0.3 s run must end at its timeout: not early (the child's timer or wakeup
     * reached it), and not late (the child took or moved its deadline: the child's own run
     * ends 0.55 s in). A late end is also this thread held up (a loaded machine, a sanitizer):
     * up to three runs, one of which must end within 0.15 s of the timeout; an early end or a
     * run the watchdog had to stop fails at once. */
    bool prompt = false;
    for (int attempt = 0; attempt < 3 && !prompt; attempt++) {
        memset(&f, 0, sizeof f);
        atomic_init(&f.done, false);
        f.loop = loop;
        RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.01, false), RL_RUN_TIMED_OUT);
        RUN_IN_CHILD(forkB_child, NULL, forkB_parent_runs, &f, 5.0);
        RLT_CHECK_EQ(f.result, RL_RUN_TIMED_OUT);
        TT_GE(f.elapsed, 0.29);
        prompt = f.elapsed < 0.45;
    }
    drop_source(keep);
    RLT_CHECK(f.elapsed < 0.45);
}

/* Another thread busy with the library while the test thread forks, again and again. */
typedef struct {
    rl_source_t *shared;
    atomic_bool quit;
    atomic_long rounds;
} busy_t;

static void *busy_main(void *arg) {
    busy_t *b = arg;
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_add_source(loop, b->shared, DEF);
    int fired = 0;
    while (!atomic_load(&b->quit)) {
        rl_timer_t *t = add_counting_timer(loop, DEF, rl_time_now() + 1, 0, &fired);
        rl_source_signal(b->shared);
        if (t) {
            rl_loop_remove_timer(loop, t, DEF);
            rl_release(t);
        }
        rl_loop_wakeup(loop);
        if ((atomic_fetch_add(&b->rounds, 1) & 63) == 0) rl_run_in_mode(DEF, 0, false);
    }
    rl_loop_remove_source(loop, b->shared, DEF);
    return NULL;
}

static int fork_child_body(rl_source_t *shared, int *performs) {
    rl_loop_t *loop = rl_loop_get_current();
    int fired = 0;
    rl_timer_t *t = rl_timer_create(0, 0, 0, count_timer, &(rl_context_t){ &fired, NULL, NULL });
    if (!t) return 10;
    if (rl_loop_add_timer(loop, t, DEF) != 0) return 11;
    rl_source_signal(shared);
    if (rl_run_in_mode(DEF, 0.05, false) != RL_RUN_TIMED_OUT) return 12;
    if (fired != 1) return 13;
    if (*performs < 1) return 14;
    return 0;
}

RLT_TEST(reliability_fork_while_another_thread_holds_the_locks) {
    enum { FORKS = 30 };
    rl_loop_t *loop = rl_loop_get_current();
    static int performs; /* the child's copy counts the child's performs */
    performs = 0;
    rl_source_context_t sc = { &performs, NULL, NULL, NULL, NULL, count_perform };
    busy_t b;
    b.shared = rl_source_create(0, &sc);
    RLT_CHECK(b.shared != NULL);
    atomic_init(&b.quit, false);
    atomic_init(&b.rounds, 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, b.shared, DEF), 0);
    pthread_t th = tt_spawn(busy_main, &b);
    while (atomic_load(&b.rounds) < 100) tt_sleep(0.001);

    pid_t pids[FORKS];
    int forked = 0;
    for (; forked < FORKS; forked++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) _exit(fork_child_body(b.shared, &performs));
        if (pid < 0) break;
        pids[forked] = pid;
        tt_sleep(0.001 + 0.0003 * (forked % 7));
    }
    int hung = 0, failed = 0, first_failure = 0, statuses[FORKS];
    bool reaped[FORKS] = { false };
    double end = rl_time_now() + 4.0;
    for (int left = forked; left > 0 && rl_time_now() < end;) {
        for (int i = 0; i < forked; i++) {
            if (reaped[i] || waitpid(pids[i], &statuses[i], WNOHANG) != pids[i]) continue;
            reaped[i] = true;
            left--;
        }
        tt_sleep(0.005);
    }
    for (int i = 0; i < forked; i++) {
        if (!reaped[i]) {
            kill(pids[i], SIGKILL);
            while (waitpid(pids[i], &statuses[i], 0) < 0 && errno == EINTR) {}
            hung++;
        } else if (!WIFEXITED(statuses[i]) || WEXITSTATUS(statuses[i]) != 0) {
            if (!failed) first_failure = WIFEXITED(statuses[i]) ? WEXITSTATUS(statuses[i]) : 1000 + WTERMSIG(statuses[i]);
            failed++;
        }
    }
    atomic_store(&b.quit, true);
    tt_join(th);
    drop_source(b.shared);
    RLT_CHECK_EQ(forked, FORKS);
    if (hung || failed)
        rlt_fail(__FILE__, __LINE__, "%d of %d children hung, %d failed (first: %d)", hung, forked, failed,
                 first_failure);
}

typedef struct {
    rl_loop_t *other; /* the loop of a thread the child does not have */
} forkD_t;

static void forkD_block(void *arg) { (*(int *)arg)++; }

static const char *forkD_child(void *arg) {
    forkD_t *f = arg;
    int fired = 0, performs = 0, blocks = 0;
    rl_timer_t *t = rl_timer_create(0, 0, 0, count_timer, &(rl_context_t){ &fired, NULL, NULL });
    CK(t != NULL);
    int rc = rl_loop_add_timer(f->other, t, DEF);
    if (rc >= 0) return ck_fail(__LINE__, "rl_loop_add_timer on another thread's loop gave %d", rc);
    rl_source_context_t sc = { &performs, NULL, NULL, NULL, NULL, count_perform };
    rl_source_t *s = rl_source_create(0, &sc);
    CK(s != NULL);
    rc = rl_loop_add_source(f->other, s, DEF);
    if (rc >= 0) return ck_fail(__LINE__, "rl_loop_add_source on another thread's loop gave %d", rc);
    rc = rl_loop_perform(f->other, DEF, forkD_block, &blocks);
    if (rc >= 0) return ck_fail(__LINE__, "rl_loop_perform on another thread's loop gave %d", rc);
    rl_loop_wakeup(f->other);
    rl_loop_stop(f->other);
    /* The timer is still free to join the child's own loop. */
    CK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    CK_EQ(rl_run_in_mode(DEF, 0.5, false), RL_RUN_FINISHED);
    CK_EQ(fired, 1);
    rl_release(t);
    rl_release(s);
    CK_EQ(blocks, 0);
    return NULL;
}

RLT_TEST(reliability_fork_child_refuses_loops_of_threads_it_does_not_have) {
    tt_live_t live;
    tt_live_start(&live);
    forkD_t f = { rl_retain(live.loop) };
    rl_source_t *keep = add_keepalive(f.other, DEF); /* the other loop is not empty */
    RLT_CHECK(keep != NULL);
    child_spec spec = { forkD_child, NULL, NULL, &f, 5.0 };
    char out[600];
    const char *r = in_child(&spec, out, sizeof out);
    drop_source(keep);
    tt_live_stop(&live);
    rl_release(f.other);
    if (r) rlt_fail(__FILE__, __LINE__, "%s", r);
}

/* ==== 8. Wakeups racing a thread's exit; a dead loop ========================================== */

typedef struct {
    _Atomic(rl_loop_t *) loop;
    atomic_bool waking;
} wx_t;

static void *wx_main(void *arg) {
    wx_t *w = arg;
    rl_loop_t *l = rl_loop_get_current();
    rl_source_t *keep = add_keepalive(l, DEF);
    atomic_store(&w->loop, rl_retain(l));
    while (!atomic_load(&w->waking)) sched_yield();
    for (int i = 0; i < 3; i++) rl_run_in_mode(DEF, 0.001, false);
    drop_source(keep);
    return NULL; /* the loop is torn down as the thread exits, while the waker goes on */
}

RLT_TEST(reliability_wakeups_racing_the_loop_threads_exit) {
    for (int round = 0; round < 60; round++) {
        wx_t w;
        atomic_init(&w.loop, NULL);
        atomic_init(&w.waking, false);
        pthread_t th = tt_spawn(wx_main, &w);
        rl_loop_t *l;
        while (!(l = atomic_load(&w.loop))) sched_yield();
        rl_loop_wakeup(l);
        atomic_store(&w.waking, true);
        long wakes = 1;
        while (pthread_tryjoin_np(th, NULL) == EBUSY) {
            rl_loop_wakeup(l);
            wakes++;
        }
        for (int i = 0; i < 100; i++) rl_loop_wakeup(l);
        rl_loop_stop(l);
        rl_release(l);
        RLT_CHECK(wakes > 1);
    }
}

static void stop_before_waiting(rl_observer_t *o, unsigned activity, void *info) {
    (void)o; (void)activity;
    rl_loop_stop(info);
}

/* A stop (or wakeup) that keeps a pass from sleeping does not leave the loop marked waiting. */
RLT_TEST(reliability_loop_is_not_waiting_after_a_run_a_stop_kept_from_sleeping) {
    rl_loop_t *loop = rl_loop_get_current();
    int never = 0;
    rl_timer_t *far = add_counting_timer(loop, DEF, rl_time_now() + 100, 0, &never);
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING, false, 0, stop_before_waiting,
                                          &(rl_context_t){ loop, NULL, NULL });
    RLT_CHECK(far && o);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 1.0, false), RL_RUN_STOPPED);
    bool waiting = rl_loop_is_waiting(loop);
    rl_release(o);
    drop_timer(far);
    RLT_CHECK(!waiting);
}

static void *exit_at_once(void *arg) {
    rl_loop_t *l = rl_loop_get_current();
    int fired = 0;
    rl_timer_t *t = add_counting_timer(l, DEF, rl_time_now() + 100, 0, &fired);
    rl_release(t);
    *(rl_loop_t **)arg = rl_retain(l);
    return NULL;
}

RLT_TEST(reliability_loop_of_an_exited_thread_refuses_work_harmlessly) {
    rl_loop_t *dead = NULL;
    tt_join(tt_spawn(exit_at_once, &dead));
    RLT_CHECK(dead != NULL);
    rl_loop_wakeup(dead);
    rl_loop_wakeup(dead);
    rl_loop_stop(dead);
    RLT_CHECK(!rl_loop_is_waiting(dead));
    fdc_t c = { 0, 0 };
    rl_context_t cx = { &c, NULL, fdc_release };
    rl_source_context_t sc = { &c, NULL, fdc_release, NULL, NULL, NULL };
    rl_source_t *s = rl_source_create(0, &sc);
    rl_timer_t *t = rl_timer_create(0, 0, 0, count_timer, &cx);
    RLT_CHECK(s && t);
    RLT_CHECK_EQ(rl_loop_add_source(dead, s, DEF), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_source(dead, s, RL_COMMON_MODES), -EINVAL);
    RLT_CHECK_EQ(rl_loop_add_timer(dead, t, DEF), -EINVAL);
    int blocks = 0;
    RLT_CHECK_EQ(rl_loop_perform(dead, DEF, forkD_block, &blocks), -EINVAL);
    RLT_CHECK(!rl_loop_contains_source(dead, s, DEF));
    RLT_CHECK(!rl_loop_contains_timer(dead, t, DEF));
    /* The timer is free for a live loop. */
    RLT_CHECK_EQ(rl_loop_add_timer(rl_loop_get_current(), t, DEF), 0);
    rl_release(s);
    RLT_CHECK_EQ(c.releases, 1); /* the source is gone */
    drop_timer(t);
    RLT_CHECK_EQ(c.releases, 2);
    rl_release(dead);
}

/* ==== 9. Blocks queued for another mode cost a pass nothing ================================== */

typedef struct { long next, bad, ran; } seq_t;
static _Thread_local seq_t *seq_now;
static void seq_block(void *arg) {
    long i = (long)(intptr_t)arg;
    if (i != seq_now->next) seq_now->bad++;
    seq_now->next = i + 1;
    seq_now->ran++;
}

/* Seconds for n poll passes in mode, giving up past limit (then *done < n). */
static double time_passes(const char *mode, int n, double limit, int *done) {
    double t0 = rl_time_now(), t = 0;
    int i = 0;
    for (; i < n; i++) {
        rl_run_in_mode(mode, 0, false);
        if ((i & 63) == 63 && (t = rl_time_now() - t0) > limit) { i++; break; }
    }
    *done = i;
    return rl_time_now() - t0;
}

RLT_TEST(reliability_blocks_for_another_mode_do_not_slow_a_pass) {
    enum { BLOCKS = 100000, PASSES = 2000 };
    rl_loop_t *loop = rl_loop_get_current();
    int never = 0;
    rl_timer_t *far_a = add_counting_timer(loop, "rel-A", rl_time_now() + 1000, 0, &never);
    rl_timer_t *far_b = add_counting_timer(loop, "rel-B", rl_time_now() + 1000, 0, &never);
    RLT_CHECK(far_a && far_b);
    int done = 0;
    double base = INFINITY;
    for (int k = 0; k < 3; k++) {
        double t = time_passes("rel-A", PASSES, INFINITY, &done);
        if (t < base) base = t;
    }
    seq_t seq = { 0, 0, 0 };
    seq_now = &seq;
    /* Counted, and checked once: a check per block is a step of the debug build's verification
     * each, which walks every block queued (quadratic: minutes under TSan, near the runner's
     * timeout on a loaded machine). */
    long queued = 0;
    for (long i = 0; i < BLOCKS; i++)
        queued += rl_loop_perform(loop, "rel-B", seq_block, (void *)(intptr_t)i) == 0;
    RLT_CHECK_EQ(queued, BLOCKS);
    /* A burst of outside load (or this thread descheduled) during the measurement makes it slow
     * by itself: up to three, one of which must be within the limit. Blocks a pass walked would
     * make every one slow. */
    double limit = 20 * base + 0.05, loaded = INFINITY;
    for (int attempt = 0; attempt < 3 && (done < PASSES || loaded > limit); attempt++)
        loaded = time_passes("rel-A", PASSES, limit, &done);
    if (done < PASSES || loaded > limit)
        rlt_fail(__FILE__, __LINE__,
                 "%d passes with %d blocks queued for another mode took %.4f s (%d passes in %.4f s "
                 "with none: %.0fx)",
                 done, BLOCKS, loaded, PASSES, base, (loaded / done) / (base / PASSES));
    RLT_CHECK_EQ(seq.ran, 0);
    RLT_CHECK_EQ(rl_run_in_mode("rel-B", 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(seq.ran, BLOCKS);
    RLT_CHECK_EQ(seq.bad, 0);
    RLT_CHECK_EQ(rl_run_in_mode("rel-B", 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(seq.ran, BLOCKS);
    drop_timer(far_a);
    drop_timer(far_b);
    RLT_CHECK_EQ(never, 0);
}

/* ==== 10. A dead loop holds no fd ============================================================= */

typedef struct {
    rl_loop_t *loop;
    int fds_alive;
} fdl_t;

static void *fdl_main(void *arg) {
    fdl_t *f = arg;
    rl_loop_t *l = rl_loop_get_current();
    int fired = 0;
    rl_timer_t *t = add_counting_timer(l, DEF, rl_time_now() + 100, 0, &fired);
    rl_run_in_mode(DEF, 0.001, false); /* arm the loop's timer for a wait */
    f->fds_alive = tt_count_dir("/proc/self/fd");
    f->loop = rl_retain(l);
    rl_release(t);
    return NULL;
}

RLT_TEST(reliability_loop_of_an_exited_thread_holds_no_fd) {
    int base = tt_count_dir("/proc/self/fd");
    RLT_CHECK(base > 0);
    fdl_t f = { NULL, 0 };
    tt_join(tt_spawn(fdl_main, &f));
    RLT_CHECK(f.loop != NULL);
    RLT_CHECK(f.fds_alive > base); /* the loop did have some */
    /* Another thread of the process might open a file meanwhile: look a few times. */
    int now = tt_count_dir("/proc/self/fd");
    for (int i = 0; i < 50 && now > base; i++) {
        tt_sleep(0.01);
        now = tt_count_dir("/proc/self/fd");
    }
    rl_release(f.loop);
    if (now > base)
        rlt_fail(__FILE__, __LINE__, "%d fds open with the dead loop referenced, %d before it existed "
                 "(%d while it lived)", now, base, f.fds_alive);
}

/* ==== 11. Equal-order sources run in signal order ============================================= */

typedef struct {
    int *order_of;     /* performs, as indexes, in order */
    int count;
} perf_log_t;
typedef struct { perf_log_t *log; int index; } perf_item_t;
static void log_perform(void *info) {
    perf_item_t *it = info;
    it->log->order_of[it->log->count++] = it->index;
}

static unsigned lcg_next(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

/* n sources with orders order_of(i), signalled in a shuffled order, performed in one pass:
 * ascending order, ties in signal order, each exactly once. Returns NULL or what went wrong. */
static const char *check_signal_order(int n, int mixed, char *why, size_t size) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t **s = calloc((size_t)n, sizeof *s);
    perf_item_t *items = calloc((size_t)n, sizeof *items);
    int *sig = calloc((size_t)n, sizeof *sig), *pos = calloc((size_t)n, sizeof *pos);
    perf_log_t log = { calloc((size_t)n + 1, sizeof(int)), 0 };
    const char *result = NULL;
    if (!s || !items || !sig || !pos || !log.order_of) {
        snprintf(why, size, "out of memory");
        result = why;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        items[i].log = &log;
        items[i].index = i;
        rl_source_context_t c = { &items[i], NULL, NULL, NULL, NULL, log_perform };
        long order = mixed ? (long)(i % 3) - 1 : 7;
        s[i] = rl_source_create(order, &c);
        if (!s[i] || rl_loop_add_source(loop, s[i], DEF) != 0) {
            snprintf(why, size, "n=%d: cannot create or add source %d", n, i);
            result = why;
            goto out;
        }
        sig[i] = i;
    }
    unsigned rng = 0x5eed0000u + (unsigned)n * 31u + (unsigned)mixed;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(lcg_next(&rng) % (unsigned)(i + 1));
        int t = sig[i];
        sig[i] = sig[j];
        sig[j] = t;
    }
    for (int i = 0; i < n; i++) {
        pos[sig[i]] = i;
        rl_source_signal(s[sig[i]]);
    }
    for (int i = 0; i < n; i++) rl_source_signal(s[sig[n - 1 - i]]); /* coalesced: no reordering */
    int rc = rl_run_in_mode(DEF, 0, false);
    if (rc != RL_RUN_TIMED_OUT) {
        snprintf(why, size, "n=%d: run gave %d", n, rc);
        result = why;
        goto out;
    }
    if (log.count != n) {
        snprintf(why, size, "n=%d: %d performs", n, log.count);
        result = why;
        goto out;
    }
    for (int k = 1; k < n; k++) {
        int a = log.order_of[k - 1], b = log.order_of[k];
        long oa = rl_source_get_order(s[a]), ob = rl_source_get_order(s[b]);
        if (oa > ob || (oa == ob && pos[a] > pos[b])) {
            snprintf(why, size,
                     "n=%d%s: perform %d is source %d (order %ld, signalled %d-th), perform %d is "
                     "source %d (order %ld, signalled %d-th)",
                     n, mixed ? " mixed orders" : "", k - 1, a, oa, pos[a], k, b, ob, pos[b]);
            result = why;
            goto out;
        }
    }
out:
    for (int i = 0; s && i < n; i++) drop_source(s[i]);
    free(s);
    free(items);
    free(sig);
    free(pos);
    free(log.order_of);
    return result;
}

RLT_TEST(reliability_equal_order_sources_run_in_signal_order_at_any_count) {
    const int counts[] = { 5, 16, 17, 40, 1000 };
    char why[300];
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const char *r = check_signal_order(counts[i], 0, why, sizeof why);
        if (r) {
            rlt_fail(__FILE__, __LINE__, "%s", r);
            return;
        }
    }
}

RLT_TEST(reliability_mixed_order_sources_run_ascending_ties_in_signal_order) {
    const int counts[] = { 5, 16, 17, 40, 1000 };
    char why[300];
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const char *r = check_signal_order(counts[i], 1, why, sizeof why);
        if (r) {
            rlt_fail(__FILE__, __LINE__, "%s", r);
            return;
        }
    }
}

/* CFRunLoop breaks ties by the time of the (first, uncoalesced) signal; so must this. */
static rl_source_t *tie_c;
static void tie_perform(void *info) {
    tt("%s", (const char *)info);
    if (strcmp(info, "A") == 0) rl_source_signal(tie_c);
}

RLT_TEST(reliability_source_left_by_return_after_handled_keeps_its_place) {
    rl_source_context_t ca = { "A", NULL, NULL, NULL, NULL, tie_perform };
    rl_source_context_t cb = { "B", NULL, NULL, NULL, NULL, tie_perform };
    rl_source_context_t cc = { "C", NULL, NULL, NULL, NULL, tie_perform };
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *a = rl_source_create(0, &ca), *b = rl_source_create(0, &cb);
    rl_source_t *c = tie_c = rl_source_create(0, &cc);
    RLT_CHECK(a && b && c);
    RLT_CHECK_EQ(rl_loop_add_source(loop, c, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, b, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, a, DEF), 0);
    rl_source_signal(a);
    rl_source_signal(b);
    /* A is performed and signals C; B, signalled before C, waits for the next pass. */
    int r1 = rl_run_in_mode(DEF, 0, true);
    tt("|");
    int r2 = rl_run_in_mode(DEF, 0, false);
    drop_source(a);
    drop_source(b);
    drop_source(c);
    RLT_CHECK_EQ(r1, RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(r2, RL_RUN_TIMED_OUT);
    TT_EXPECT("A | B C");
}

/* A deliberate difference from CF (crunloop.h, "WHERE THIS DIFFERS"): a source signalled before
 * it joined the loop is queued when it joins, behind sources already queued; CF would stamp it
 * with the time of that earlier signal. */
RLT_TEST(reliability_source_signalled_before_joining_the_loop_queues_when_it_joins) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_context_t c1 = { "S1", NULL, NULL, NULL, NULL, tt_perform_cb };
    rl_source_context_t c2 = { "S2", NULL, NULL, NULL, NULL, tt_perform_cb };
    rl_source_t *s1 = rl_source_create(0, &c1), *s2 = rl_source_create(0, &c2);
    RLT_CHECK(s1 && s2);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s2, DEF), 0);
    rl_source_signal(s1); /* in no loop yet */
    rl_source_signal(s2);
    int added = rl_loop_add_source(loop, s1, DEF);
    int r = rl_run_in_mode(DEF, 0, false);
    drop_source(s1);
    drop_source(s2);
    RLT_CHECK_EQ(added, 0);
    RLT_CHECK_EQ(r, RL_RUN_TIMED_OUT);
    TT_EXPECT("S2 S1");
}
