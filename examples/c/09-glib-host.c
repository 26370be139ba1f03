/* 09-glib-host.c - a run loop driven by a GLib main loop (issue 11, item 4).
 *
 * Pattern: an application whose thread already runs another event loop (here GLib's GMainLoop;
 * Qt's, libuv's or a game's frame loop alike) uses a library built on a run loop. Instead of
 * calling rl_run(), the host polls the loop's backend fd (rl_loop_get_backend_fd) with the
 * timeout the loop gives (rl_loop_get_backend_timeout), and runs one pass, rl_run_in_mode(mode,
 * 0, false), when the fd is readable or the timeout has passed. In GLib that is a GSource:
 * prepare asks for the timeout, the fd is the source's unix fd, dispatch runs the pass.
 *
 * What the example does, on the main thread: a 20 ms repeating loop timer (an "animation")
 * next to a 50 ms GLib timeout (the host's own work), while a worker thread hands results to
 * the loop with rl_loop_perform() + rl_loop_wakeup(), as it would to a thread running rl_run().
 * Then it leaves both loops idle for half a second.
 *
 * What to watch for:
 *   - the loop's timer fires on its own dates, not on GLib's: the timeout GLib gets is rounded
 *     UP to whole milliseconds, and the backend fd wakes it exactly at the date (rounding down
 *     would wake it early for nothing, and poll's own timer slack would make it late);
 *   - the worker's blocks run on the main thread, in order, none lost: a wakeup posted while
 *     GLib sleeps in poll() makes the fd readable, because prepare asked right before it;
 *   - GLib's own timeout keeps firing: neither loop starves the other;
 *   - idle, the process uses (almost) no CPU: GLib sleeps in poll() on the fd; nothing spins.
 */
#include <crunloop.h>
#include <glib.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "09-glib-host: check failed at line %d: %s: ", __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* ---- the glue: one GSource per driven mode -------------------------------------------------- */

typedef struct {
    GSource base;
    rl_loop_t *loop;
    const char *mode;
    gpointer fd_tag;
    double deadline; /* when GLib's timeout runs out (rl_time_now() scale); INFINITY: none */
} loop_source_t;

/* Called by GLib right before it polls: exactly where the loop's query must be made. */
static gboolean loop_prepare(GSource *base, gint *timeout) {
    loop_source_t *s = (loop_source_t *)base;
    double t = rl_loop_get_backend_timeout(s->loop, s->mode);
    CHECK(!isnan(t), "rl_loop_get_backend_timeout: %s", strerror(errno));
    if (t == 0) { /* a pass is due now */
        *timeout = 0;
        return TRUE;
    }
    s->deadline = t < 0 ? INFINITY : rl_time_now() + t;
    *timeout = t < 0 ? -1 : t >= INT_MAX / 1000 ? INT_MAX : (gint)ceil(t * 1000);
    return FALSE;
}

static gboolean loop_check(GSource *base) {
    loop_source_t *s = (loop_source_t *)base;
    return (g_source_query_unix_fd(base, s->fd_tag) & G_IO_IN) || rl_time_now() >= s->deadline;
}

static gboolean loop_dispatch(GSource *base, GSourceFunc callback, gpointer data) {
    (void)callback; (void)data;
    loop_source_t *s = (loop_source_t *)base;
    rl_run_in_mode(s->mode, 0, false); /* one pass, on this (the loop's) thread */
    return G_SOURCE_CONTINUE;
}

static GSourceFuncs loop_source_funcs = {loop_prepare, loop_check, loop_dispatch, NULL, NULL, NULL};

static GSource *loop_source_new(rl_loop_t *loop, const char *mode) {
    int fd = rl_loop_get_backend_fd(loop);
    CHECK(fd >= 0, "rl_loop_get_backend_fd: %s", strerror(-fd));
    loop_source_t *s = (loop_source_t *)g_source_new(&loop_source_funcs, sizeof *s);
    s->loop = loop;
    s->mode = mode;
    s->deadline = INFINITY;
    s->fd_tag = g_source_add_unix_fd(&s->base, fd, G_IO_IN);
    return &s->base;
}

/* ---- the application ---------------------------------------------------------------------- */

enum { FRAMES = 25, RESULTS = 40 };

static GMainLoop *host;
static pthread_t main_thread;
static int frames, glib_ticks, results_in_order = 1;
static double lateness[FRAMES];
static atomic_int results;

static void frame(rl_timer_t *timer, void *info) {
    (void)info;
    lateness[frames] = rl_time_now() - rl_timer_get_next_fire_date(timer); /* the date being fired */
    if (++frames == FRAMES) rl_timer_invalidate(timer);
}

static void result_arrived(void *arg) {
    int n = (int)(intptr_t)arg;
    results_in_order &= pthread_equal(pthread_self(), main_thread) && n == atomic_load(&results);
    atomic_fetch_add(&results, 1);
}

static void *worker(void *arg) {
    rl_loop_t *loop = arg;
    for (int i = 0; i < RESULTS; i++) {
        struct timespec ts = {0, 7000000}; /* a result every 7 ms */
        nanosleep(&ts, NULL);
        rl_loop_perform(loop, RL_DEFAULT_MODE, result_arrived, (void *)(intptr_t)i);
        rl_loop_wakeup(loop); /* as for any sleeping loop: the fd becomes readable */
    }
    return NULL;
}

static gboolean glib_tick(gpointer data) {
    (void)data;
    glib_ticks++;
    if (frames >= FRAMES && atomic_load(&results) == RESULTS) g_main_loop_quit(host);
    return G_SOURCE_CONTINUE;
}

static gboolean quit(gpointer data) {
    (void)data;
    g_main_loop_quit(host);
    return G_SOURCE_REMOVE;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

int main(void) {
    main_thread = pthread_self();
    rl_loop_t *loop = rl_loop_get_current();
    CHECK(loop != NULL, "no loop: %s", strerror(errno));
    host = g_main_loop_new(NULL, FALSE);
    GSource *glue = loop_source_new(loop, RL_DEFAULT_MODE);
    g_source_attach(glue, NULL);

    /* A source that is never signalled keeps the mode from being empty once the timer is done. */
    rl_source_context_t keep_context;
    memset(&keep_context, 0, sizeof keep_context);
    rl_source_t *keep = rl_source_create(0, &keep_context);
    rl_loop_add_source(loop, keep, RL_DEFAULT_MODE);
    rl_timer_t *animation = rl_timer_create(rl_time_now() + 0.02, 0.02, 0, frame, NULL);
    rl_loop_add_timer(loop, animation, RL_DEFAULT_MODE);
    guint tick = g_timeout_add(50, glib_tick, NULL);
    guint guard = g_timeout_add_seconds(20, quit, NULL);
    pthread_t th;
    pthread_create(&th, NULL, worker, loop);

    g_main_loop_run(host);
    pthread_join(th, NULL);
    g_source_remove(guard);
    g_source_remove(tick);
    CHECK(frames == FRAMES, "%d frames", frames);
    qsort(lateness, FRAMES, sizeof *lateness, by_value);
    double median = lateness[FRAMES / 2];
    /* A burst of outside load on a shared machine (CI) can make a whole half second late: up to
     * two more rounds of frames before the check below counts it. */
    for (int attempt = 2; attempt <= 3 && !(median < 0.0005); attempt++) {
        printf("09-glib-host: frames %.0f us late at the median: round %d\n", median * 1e6, attempt);
        frames = 0;
        rl_timer_t *again = rl_timer_create(rl_time_now() + 0.02, 0.02, 0, frame, NULL);
        rl_loop_add_timer(loop, again, RL_DEFAULT_MODE);
        guint limit = g_timeout_add_seconds(20, quit, NULL);
        g_main_loop_run(host); /* glib_tick quits once the frames are done (the results are) */
        g_source_remove(limit);
        rl_release(again);
        CHECK(frames == FRAMES, "%d frames", frames);
        qsort(lateness, FRAMES, sizeof *lateness, by_value);
        median = lateness[FRAMES / 2];
    }
    printf("09-glib-host: %d frames of a 20 ms loop timer, %.0f us after their dates at the median "
           "(%.0f us at worst); %d results from the worker, on the main thread in order: %s; "
           "%d GLib ticks meanwhile\n", frames, median * 1e6, lateness[FRAMES - 1] * 1e6,
           atomic_load(&results), results_in_order ? "yes" : "no", glib_ticks);
    /* Well under GLib's millisecond: the fd, not the rounded timeout, woke it. (The median: a
     * loaded machine may preempt any one frame; Tests/embed checks every fire within 1 ms.) */
    CHECK(median < 0.0005, "frames came %.0f us late at the median", median * 1e6);
    CHECK(atomic_load(&results) == RESULTS && results_in_order, "results lost, out of order or off the main thread");
    CHECK(glib_ticks >= 5, "GLib's own timeout fired %d times", glib_ticks);

    /* Idle: both loops have nothing to do for half a second. */
    rl_loop_stats_t before, after;
    rl_loop_get_stats(loop, &before);
    double cpu = cpu_seconds();
    g_timeout_add(500, quit, NULL);
    g_main_loop_run(host);
    cpu = cpu_seconds() - cpu;
    rl_loop_get_stats(loop, &after);
    printf("09-glib-host: idle for 0.5 s: %.2f ms of CPU, %llu passes of the loop\n", cpu * 1e3,
           after.passes - before.passes);
    CHECK(cpu < 0.02, "the idle process used %.2f ms of CPU", cpu * 1e3);
    CHECK(after.passes - before.passes <= 1, "the idle loop made %llu passes", after.passes - before.passes);

    rl_release(animation);
    rl_source_invalidate(keep);
    rl_release(keep);
    g_source_destroy(glue);
    g_source_unref(glue);
    g_main_loop_unref(host);
    printf("09-glib-host: ok\n");
    return 0;
}
