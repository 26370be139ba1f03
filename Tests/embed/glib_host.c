/*
 * glib_host.c - a CRunLoop loop driven by a real GMainLoop through rl_loop_get_backend_fd and
 * rl_loop_get_backend_timeout (`make embed`, part of `make test`). Checks, on the main thread of a
 * GLib program:
 *   - timers of the loop fire within 1 ms of their date (GLib's poll timeout is in whole
 *     milliseconds; the backend fd is what wakes it on time): all of them on a quiet machine;
 *     under outside load, 95% of them, or no fewer than a bare timerfd in poll(2) measured right
 *     after (the machine's floor at that moment). What this guards is the mechanism: a host woken
 *     by GLib's rounded millisecond timeout instead of the backend fd is late on most fires, not
 *     on a few (preemptions by other processes, which a 2-vCPU machine running builds beside
 *     the test gives it: 3 of 150 in 3 runs in a row, seen, against a bare timerfd's 1);
 *   - version-0 sources signalled from another thread (rl_source_signal + rl_loop_wakeup) are
 *     all performed, and how long each took from its signal;
 *   - an fd source fed by another thread gets every byte;
 *   - the idle host burns no CPU: process CPU time over an idle second, and the passes made.
 * Prints the figures (timer lateness p50/max, signal latency p50/max, idle CPU) and exits 1 when a
 * check fails. A failed timing check is measured again (up to 3 runs of the timers, 2 of the idle
 * second) before it counts: a burst of outside load on a shared machine is not the loop's doing
 * (on a 2-vCPU VM a bare timerfd in poll(2) is itself 60-80 us late at the median and, now and
 * then, a few milliseconds).
 */
#include <crunloop.h>
#include <glib.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* ---- the glue: a GSource that drives one mode of a loop ---------------------------------- */

typedef struct {
    GSource base;
    rl_loop_t *loop;
    const char *mode;
    gpointer tag;
    double deadline; /* when the timeout given to GLib runs out; INFINITY for none */
} loop_source_t;

static gboolean loop_prepare(GSource *base, gint *timeout) {
    loop_source_t *s = (loop_source_t *)base;
    double t = rl_loop_get_backend_timeout(s->loop, s->mode);
    if (isnan(t)) { /* cannot happen here: the loop is this thread's and the mode a real one */
        fprintf(stderr, "rl_loop_get_backend_timeout: %s\n", strerror(errno));
        exit(1);
    }
    if (t == 0) {
        *timeout = 0;
        return TRUE;
    }
    s->deadline = t < 0 ? INFINITY : rl_time_now() + t;
    /* Up, never down: an early poll return would be a pass for nothing. */
    *timeout = t < 0 ? -1 : t >= INT_MAX / 1000 ? INT_MAX : (gint)ceil(t * 1000);
    return FALSE;
}

static gboolean loop_check(GSource *base) {
    loop_source_t *s = (loop_source_t *)base;
    return (g_source_query_unix_fd(base, s->tag) & G_IO_IN) || rl_time_now() >= s->deadline;
}

static gboolean loop_dispatch(GSource *base, GSourceFunc callback, gpointer data) {
    (void)callback; (void)data;
    loop_source_t *s = (loop_source_t *)base;
    rl_run_in_mode(s->mode, 0, false);
    return G_SOURCE_CONTINUE;
}

static GSourceFuncs loop_source_funcs = {loop_prepare, loop_check, loop_dispatch, NULL, NULL, NULL};

static GSource *loop_source_new(rl_loop_t *loop, const char *mode) {
    int fd = rl_loop_get_backend_fd(loop);
    if (fd < 0) return NULL;
    loop_source_t *s = (loop_source_t *)g_source_new(&loop_source_funcs, sizeof *s);
    s->loop = loop;
    s->mode = mode;
    s->deadline = INFINITY;
    s->tag = g_source_add_unix_fd(&s->base, fd, G_IO_IN);
    return &s->base;
}

/* ---- measuring --------------------------------------------------------------------------- */

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[(int)(q * (n - 1))] : NAN;
}

static void nap(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

static double process_cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

static GMainLoop *host;

static gboolean quit_host(gpointer data) {
    (void)data;
    g_main_loop_quit(host);
    return G_SOURCE_REMOVE;
}

/* ---- 1. timers ----------------------------------------------------------------------------- */

enum { FIRES = 150 };
typedef struct {
    double late[FIRES];
    int n;
} timer_run_t;

static void timer_fired(rl_timer_t *t, void *info) {
    timer_run_t *r = info;
    double late = rl_time_now() - rl_timer_get_next_fire_date(t); /* the date being fired */
    if (r->n < FIRES) r->late[r->n++] = late;
    if (r->n == FIRES) {
        rl_timer_invalidate(t);
        g_main_loop_quit(host);
    }
}

/* Lateness of FIRES fires of a 7.1 ms repeating timer (off GLib's millisecond grid): the worst,
 * the median, the 99th percentile, and how many fires came 1 ms late or more. */
static double timers(double *p50, double *p99, int *over) {
    static timer_run_t r;
    memset(&r, 0, sizeof r);
    rl_context_t ctx = {.info = &r};
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.0071, 0.0071, 0, timer_fired, &ctx);
    rl_loop_add_timer(rl_loop_get_current(), t, RL_DEFAULT_MODE);
    guint guard = g_timeout_add_seconds(10, quit_host, NULL);
    g_main_loop_run(host);
    g_source_remove(guard);
    rl_timer_invalidate(t);
    rl_release(t);
    if (r.n < FIRES) return INFINITY;
    *p50 = quantile(r.late, r.n, 0.5);
    *p99 = r.late[r.n - 1 - r.n / 100];
    *over = 0;
    for (int i = 0; i < r.n; i++) *over += r.late[i] >= 1e-3;
    return r.late[r.n - 1];
}

/* The floor on this machine now: FIRES waits of a bare timerfd in poll(2), as late as the kernel
 * and the scheduler make them. Returns how many came 1 ms late or more; *p50 their median. */
static int floor_over(double *p50) {
    static double late[FIRES];
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (fd < 0) return FIRES;
    int over = 0;
    for (int i = 0; i < FIRES; i++) {
        double date = rl_time_now() + 0.0071;
        struct itimerspec its = {.it_value = {(time_t)date, (long)((date - (double)(time_t)date) * 1e9)}};
        timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        while (poll(&p, 1, -1) < 0 && errno == EINTR) {}
        late[i] = rl_time_now() - date;
        over += late[i] >= 1e-3;
        uint64_t ticks;
        if (read(fd, &ticks, sizeof ticks) < 0) break;
    }
    close(fd);
    *p50 = quantile(late, FIRES, 0.5);
    return over;
}

/* ---- 2. signals from another thread --------------------------------------------------------- */

enum { SIGNALS = 300 };
typedef struct {
    rl_loop_t *loop;
    rl_source_t *source;
    _Atomic double stamp;
    atomic_int performed;
    double latency[SIGNALS];
} signals_t;

static void signal_performed(void *info) {
    signals_t *g = info;
    int i = atomic_load(&g->performed);
    if (i < SIGNALS) g->latency[i] = rl_time_now() - atomic_load(&g->stamp);
    if (atomic_fetch_add(&g->performed, 1) + 1 == SIGNALS) g_main_loop_quit(host);
}

static void *signaller(void *arg) {
    signals_t *g = arg;
    for (int i = 0; i < SIGNALS; i++) {
        nap(0.001 + 0.001 * (i % 3)); /* the loop is asleep (in GLib's poll) at each signal */
        atomic_store(&g->stamp, rl_time_now());
        rl_source_signal(g->source);
        rl_loop_wakeup(g->loop);
        double deadline = rl_time_now() + 2;
        while (atomic_load(&g->performed) <= i && rl_time_now() < deadline) nap(0.0001);
    }
    return NULL;
}

static int signals(double *p50, double *max) {
    static signals_t g;
    memset(&g, 0, sizeof g);
    g.loop = rl_loop_get_current();
    rl_source_context_t sc = {.info = &g, .perform = signal_performed};
    g.source = rl_source_create(0, &sc);
    rl_loop_add_source(g.loop, g.source, RL_DEFAULT_MODE);
    pthread_t th;
    pthread_create(&th, NULL, signaller, &g);
    guint guard = g_timeout_add_seconds(20, quit_host, NULL);
    g_main_loop_run(host);
    g_source_remove(guard);
    pthread_join(th, NULL);
    rl_source_invalidate(g.source);
    rl_release(g.source);
    int n = atomic_load(&g.performed);
    *p50 = quantile(g.latency, n < SIGNALS ? n : SIGNALS, 0.5);
    *max = n ? g.latency[(n < SIGNALS ? n : SIGNALS) - 1] : NAN;
    return n;
}

/* ---- 3. an fd source fed by another thread ------------------------------------------------ */

enum { BYTES = 200 };
typedef struct {
    int pipe[2];
    int received;
} fd_run_t;

static void fd_readable(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s; (void)events;
    fd_run_t *f = info;
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) f->received += (int)n;
    if (f->received >= BYTES) g_main_loop_quit(host);
}

static void *writer(void *arg) {
    fd_run_t *f = arg;
    for (int i = 0; i < BYTES; i++) {
        if (write(f->pipe[1], "x", 1) != 1) break;
        if (i % 4 == 0) nap(0.0005);
    }
    return NULL;
}

static int fd_bytes(void) {
    static fd_run_t f;
    memset(&f, 0, sizeof f);
    if (pipe(f.pipe) != 0) return -1;
    rl_context_t ctx = {.info = &f};
    rl_source_t *s = rl_source_create_fd(f.pipe[0], RL_FD_READABLE, 0, fd_readable, &ctx);
    rl_loop_add_source(rl_loop_get_current(), s, RL_DEFAULT_MODE);
    pthread_t th;
    pthread_create(&th, NULL, writer, &f);
    guint guard = g_timeout_add_seconds(10, quit_host, NULL);
    g_main_loop_run(host);
    g_source_remove(guard);
    pthread_join(th, NULL);
    rl_source_invalidate(s);
    rl_release(s);
    close(f.pipe[0]);
    close(f.pipe[1]);
    return f.received;
}

/* ---- 4. idle --------------------------------------------------------------------------------- */

/* CPU seconds the process used over an idle second of the host (a loop with a source and a
 * timer far away, so neither is empty), and the passes the loop made meanwhile. */
static double idle(unsigned long long *passes) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    rl_source_t *keep = rl_source_create(0, &sc);
    rl_loop_add_source(loop, keep, RL_DEFAULT_MODE);
    rl_context_t ctx = {0};
    rl_timer_t *far = rl_timer_create(rl_time_now() + 3600, 0, 0, timer_fired, &ctx);
    rl_loop_add_timer(loop, far, RL_DEFAULT_MODE);
    rl_loop_stats_t before, after;
    rl_loop_get_stats(loop, &before);
    double cpu = process_cpu();
    g_timeout_add(1000, quit_host, NULL);
    g_main_loop_run(host);
    cpu = process_cpu() - cpu;
    rl_loop_get_stats(loop, &after);
    *passes = after.passes - before.passes;
    rl_timer_invalidate(far);
    rl_release(far);
    rl_source_invalidate(keep);
    rl_release(keep);
    return cpu;
}

int main(void) {
    rl_loop_t *loop = rl_loop_get_current();
    host = g_main_loop_new(NULL, FALSE);
    GSource *glue = loop_source_new(loop, RL_DEFAULT_MODE);
    if (!loop || !glue) {
        fprintf(stderr, "glib_host: no loop or backend fd\n");
        return 1;
    }
    g_source_attach(glue, NULL);

    /* Every fire within 1 ms. On a loaded machine, where any thread may be preempted for
     * milliseconds, a bare timerfd in poll(2) measured right after is late as often: then no more
     * fires over 1 ms than it had (plus one), or 5% of them, in one of up to 3 runs. */
    double p50 = NAN, p99 = INFINITY, worst = INFINITY, floor_p50 = NAN;
    int over = FIRES, floor = 0;
    bool ok = false;
    for (int attempt = 1; attempt <= 3 && !ok; attempt++) {
        worst = timers(&p50, &p99, &over);
        floor = over ? floor_over(&floor_p50) : 0;
        ok = over <= FIRES / 20 || over <= floor + 1;
        printf("embed: GLib host, timer lateness over %d fires of a 7.1 ms timer: p50 %.1f us, p99 %.1f us, "
               "max %.1f us; %d fired 1 ms late or more", FIRES, p50 * 1e6, p99 * 1e6, worst * 1e6, over);
        if (over) printf(" (a bare timerfd in poll(2) just after: %d, p50 %.1f us)", floor, floor_p50 * 1e6);
        printf("%s\n", ok ? "" : ": measured again");
    }
    CHECK(ok, "%d of %d timer fires came 1 ms late or more in each of 3 runs (a bare timerfd: %d)", over, FIRES,
          floor);

    double sp50 = NAN, smax = NAN;
    int performed = signals(&sp50, &smax);
    printf("embed: GLib host, cross-thread signal + wakeup to perform: %d of %d, p50 %.1f us, max %.1f us\n",
           performed, SIGNALS, sp50 * 1e6, smax * 1e6);
    CHECK(performed == SIGNALS, "%d of %d cross-thread signals were performed", performed, SIGNALS);

    int got = fd_bytes();
    printf("embed: GLib host, fd source: %d of %d bytes\n", got, BYTES);
    CHECK(got == BYTES, "the fd source received %d of %d bytes", got, BYTES);

    unsigned long long passes = 0;
    double cpu = idle(&passes);
    if (!(cpu < 0.02)) cpu = idle(&passes);
    printf("embed: GLib host, idle second: %.2f ms of CPU, %llu passes\n", cpu * 1e3, passes);
    CHECK(cpu < 0.02, "the idle host used %.2f ms of CPU in a second", cpu * 1e3);
    CHECK(passes <= 2, "the idle host made %llu passes in a second", passes);

    g_source_destroy(glue);
    g_source_unref(glue);
    g_main_loop_unref(host);
    printf(failures ? "embed: FAILED\n" : "embed: ok\n");
    return failures ? 1 : 0;
}
