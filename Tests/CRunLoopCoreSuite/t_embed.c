/*
 * t_embed.c - driving a loop from another event loop (rl_loop_get_backend_fd,
 * rl_loop_get_backend_timeout) with poll(2) as the host: what makes the fd readable (wakeups,
 * due timers, ready fds of the mode, timers and signalled sources added by other threads while
 * the host sleeps), what must not (stale edges after a pass, fds of other modes, an empty mode),
 * the timeout's answers, and bad input. The GLib host is Tests/embed/glib_host.c.
 */
#include <crunloop.h>
#include <rlt.h>

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DM RL_DEFAULT_MODE
#define OTHER "embed.other"

static void nap(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* Whether fd is readable within ms (poll's timeout). */
static bool readable(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR) {}
    return n == 1 && (p.revents & POLLIN);
}

static void count_perform(void *info) { atomic_fetch_add((atomic_int *)info, 1); }

static rl_source_t *counting_source(atomic_int *count) {
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    sc.info = count;
    sc.perform = count_perform;
    return rl_source_create(0, &sc);
}

static void count_timer(rl_timer_t *t, void *info) { (void)t; atomic_fetch_add((atomic_int *)info, 1); }

static void count_fd(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s; (void)fd;
    atomic_fetch_or((atomic_uint *)info, events | 0x100u);
}

RLT_TEST(backend_calls_reject_bad_input) {
    RLT_CHECK_EQ(rl_loop_get_backend_fd(NULL), -EINVAL);
    errno = 0;
    RLT_CHECK(isnan(rl_loop_get_backend_timeout(NULL, DM)) && errno == EINVAL);
    rl_loop_t *loop = rl_loop_get_current();
    errno = 0;
    RLT_CHECK(isnan(rl_loop_get_backend_timeout(loop, NULL)) && errno == EINVAL);
    errno = 0;
    RLT_CHECK(isnan(rl_loop_get_backend_timeout(loop, "")) && errno == EINVAL);
    errno = 0;
    RLT_CHECK(isnan(rl_loop_get_backend_timeout(loop, RL_COMMON_MODES)) && errno == EINVAL);
    /* Tests run on threads of their own: the main loop is another thread's. */
    rl_loop_t *main_loop = rl_loop_get_main();
    RLT_CHECK(main_loop && main_loop != loop);
    errno = 0;
    RLT_CHECK(isnan(rl_loop_get_backend_timeout(main_loop, DM)) && errno == EPERM);
    /* The fd may be asked for from any thread, and is one and the same. */
    int fd = rl_loop_get_backend_fd(main_loop);
    RLT_CHECK(fd >= 0);
    RLT_CHECK_EQ(rl_loop_get_backend_fd(main_loop), fd);
}

RLT_TEST(backend_fd_keeps_its_number_and_is_quiet_when_nothing_is_due) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    RLT_CHECK(fd >= 0);
    RLT_CHECK_EQ(rl_loop_get_backend_fd(loop), fd);
    atomic_int fired = 0;
    rl_context_t ctx = {.info = &fired};
    rl_timer_t *t = rl_timer_create(rl_time_now() + 30, 0, 0, count_timer, &ctx);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DM), 0);
    double left = rl_loop_get_backend_timeout(loop, DM);
    RLT_CHECK(left > 29 && left <= 30);
    RLT_CHECK(!readable(fd, 20));
    RLT_CHECK(rl_loop_is_waiting(loop)); /* asleep, for the host */
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(!rl_loop_is_waiting(loop));
    rl_timer_invalidate(t);
    rl_release(t);
    /* No timer left: nothing is ever due but a wakeup or an fd. */
    atomic_int n = 0;
    rl_source_t *s = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DM), 0);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    RLT_CHECK(!readable(fd, 10));
    rl_source_invalidate(s);
    rl_release(s);
}

RLT_TEST(a_wakeup_after_the_query_makes_the_backend_fd_readable_until_the_next_query) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    atomic_int n = 0;
    rl_source_t *s = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DM), 0);
    for (int round = 0; round < 3; round++) {
        RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
        RLT_CHECK(!readable(fd, 0));
        rl_source_signal(s);
        rl_loop_wakeup(loop);
        RLT_CHECK(readable(fd, 1000));
        RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
        RLT_CHECK_EQ(atomic_load(&n), round + 1);
        /* The wakeup's edge is stale now: the next query takes it, so the host does not spin. */
        RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
        RLT_CHECK(!readable(fd, 0));
    }
    /* A wakeup posted before the query (no host asleep yet) shows in its answer instead. */
    rl_source_signal(s);
    rl_loop_wakeup(loop);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&n), 4);
    rl_source_invalidate(s);
    rl_release(s);
}

static void nop_block(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

RLT_TEST(the_backend_timeout_is_zero_when_work_is_queued_for_the_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    atomic_int n = 0, blocks = 0;
    rl_source_t *s = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DM), 0);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    /* A signalled source of the mode, even without a wakeup (the loop's own thread signalled). */
    rl_source_signal(s);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&n), 1);
    /* A block queued for the mode. */
    RLT_CHECK_EQ(rl_loop_perform(loop, DM, nop_block, &blocks), 0);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&blocks), 1);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    /* A block for another mode, and a source of another mode signalled and left there: not due
     * in this one (once the pass has sorted the signal). */
    atomic_int m = 0;
    rl_source_t *other = counting_source(&m);
    RLT_CHECK_EQ(rl_loop_add_source(loop, other, OTHER), 0);
    RLT_CHECK_EQ(rl_loop_perform(loop, OTHER, nop_block, &blocks), 0);
    rl_source_signal(other);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, OTHER) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(OTHER, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&m), 1);
    RLT_CHECK_EQ(atomic_load(&blocks), 2);
    rl_source_invalidate(s);
    rl_source_invalidate(other);
    rl_release(s);
    rl_release(other);
}

RLT_TEST(a_due_timer_makes_the_backend_fd_readable_at_its_date) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    atomic_int fired = 0;
    rl_context_t ctx = {.info = &fired};
    /* A try tells only when this thread was not held up (a loaded machine, a sanitizer) past the
     * timer's date before its query, which then rightly answers "due", nor for a quarter second
     * once the fd was readable: up to five tries, one of which must tell. */
    bool told = false;
    for (int attempt = 0; attempt < 5 && !told; attempt++) {
        double date = rl_time_now() + 0.03;
        rl_timer_t *t = rl_timer_create(date, 0, 0, count_timer, &ctx);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DM), 0);
        double left = rl_loop_get_backend_timeout(loop, DM);
        double asked = rl_time_now();
        RLT_CHECK(left >= 0 && left <= 0.03);
        RLT_CHECK(left > 0 || asked >= date); /* "due" only once it is */
        if (left > 0) {
            RLT_CHECK(readable(fd, 5000)); /* the host waits on the fd alone, no timeout of its own */
            double now = rl_time_now();
            RLT_CHECK(now >= date);
            told = asked < date && now < date + 0.25;
            RLT_CHECK_EQ(atomic_load(&fired), 0);
            RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == 0); /* due: whatever the fd says */
        }
        rl_run_in_mode(DM, 0, false);
        RLT_CHECK_EQ(atomic_load(&fired), 1);
        atomic_store(&fired, 0);
        rl_release(t);
    }
    RLT_CHECK(told);
}

typedef struct {
    rl_loop_t *loop;
    rl_timer_t *timer;
    rl_source_t *source;
    const char *mode;
    double delay;
} adder_t;

static void *add_later(void *arg) {
    adder_t *a = arg;
    nap(a->delay);
    if (a->timer) rl_loop_add_timer(a->loop, a->timer, a->mode);
    if (a->source) rl_loop_add_source(a->loop, a->source, a->mode);
    return NULL;
}

RLT_TEST(a_timer_or_signalled_source_added_by_another_thread_wakes_the_host) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    atomic_int n = 0, fired = 0;
    rl_source_t *keep = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, keep, DM), 0);
    rl_context_t ctx = {.info = &fired};
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.05, 0, 0, count_timer, &ctx);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    adder_t a = {loop, t, NULL, DM, 0.01};
    pthread_t th;
    RLT_CHECK_EQ(pthread_create(&th, NULL, add_later, &a), 0);
    bool woke = readable(fd, 5000); /* rearmed by the adding thread: no query in between */
    pthread_join(th, NULL);
    RLT_CHECK(woke);
    RLT_CHECK(rl_time_now() >= rl_timer_get_next_fire_date(t));
    rl_run_in_mode(DM, 0, false);
    RLT_CHECK_EQ(atomic_load(&fired), 1);
    rl_release(t);

    atomic_int m = 0;
    rl_source_t *s = counting_source(&m);
    rl_source_signal(s); /* signalled before it joins: joining wakes the loop waiting in the mode */
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    adder_t b = {loop, NULL, s, DM, 0.01};
    RLT_CHECK_EQ(pthread_create(&th, NULL, add_later, &b), 0);
    woke = readable(fd, 5000);
    pthread_join(th, NULL);
    RLT_CHECK(woke);
    rl_run_in_mode(DM, 0, false);
    RLT_CHECK_EQ(atomic_load(&m), 1);
    rl_source_invalidate(s);
    rl_source_invalidate(keep);
    rl_release(s);
    rl_release(keep);
}

typedef struct {
    rl_loop_t *loop;
    rl_source_t *source;
    double delay;
} signaller_t;

static void *signal_later(void *arg) {
    signaller_t *g = arg;
    nap(g->delay);
    rl_source_signal(g->source);
    rl_loop_wakeup(g->loop);
    return NULL;
}

RLT_TEST(a_cross_thread_signal_reaches_a_host_driven_loop) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    atomic_int n = 0;
    rl_source_t *s = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DM), 0);
    for (int i = 0; i < 20; i++) {
        signaller_t g = {loop, s, i % 2 ? 0.002 : 0};
        pthread_t th;
        RLT_CHECK_EQ(pthread_create(&th, NULL, signal_later, &g), 0);
        double deadline = rl_time_now() + 5;
        while (atomic_load(&n) == i && rl_time_now() < deadline) {
            double t = rl_loop_get_backend_timeout(loop, DM);
            if (t != 0) (void)readable(fd, 5000); /* -1: the fd alone */
            rl_run_in_mode(DM, 0, false);
        }
        pthread_join(th, NULL);
        RLT_CHECK_EQ(atomic_load(&n), i + 1);
    }
    rl_source_invalidate(s);
    rl_release(s);
}

RLT_TEST(ready_fds_of_the_mode_make_the_backend_fd_readable_and_those_of_other_modes_do_not) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    int mine[2], theirs[2];
    RLT_CHECK(pipe(mine) == 0 && pipe(theirs) == 0);
    atomic_uint got_mine = 0, got_theirs = 0;
    rl_context_t cm = {.info = &got_mine}, ct = {.info = &got_theirs};
    rl_source_t *sm = rl_source_create_fd(mine[0], RL_FD_READABLE, 0, count_fd, &cm);
    rl_source_t *st = rl_source_create_fd(theirs[0], RL_FD_READABLE, 0, count_fd, &ct);
    RLT_CHECK_EQ(rl_loop_add_source(loop, sm, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, st, OTHER), 0);
    /* Another mode's fd is ready: it wakes the host once at most, then is parked for this mode. */
    RLT_CHECK(write(theirs[1], "x", 1) == 1);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    RLT_CHECK(!readable(fd, 20));
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    RLT_CHECK(!readable(fd, 20));
    RLT_CHECK_EQ(atomic_load(&got_theirs), 0);
    /* This mode's fd: readable, and due. */
    RLT_CHECK(write(mine[1], "y", 1) == 1);
    RLT_CHECK(readable(fd, 1000));
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(atomic_load(&got_mine) & RL_FD_READABLE);
    char c;
    RLT_CHECK(read(mine[0], &c, 1) == 1);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    RLT_CHECK(!readable(fd, 0));
    /* The host switches to the other mode: its fd is wanted again. */
    RLT_CHECK(rl_loop_get_backend_timeout(loop, OTHER) == 0);
    RLT_CHECK(readable(fd, 0));
    RLT_CHECK_EQ(rl_run_in_mode(OTHER, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(atomic_load(&got_theirs) & RL_FD_READABLE);
    rl_source_invalidate(sm);
    rl_source_invalidate(st);
    rl_release(sm);
    rl_release(st);
    close(mine[0]); close(mine[1]); close(theirs[0]); close(theirs[1]);
}

RLT_TEST(a_hang_up_for_an_errors_only_source_survives_the_query) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    atomic_uint got = 0;
    rl_context_t ctx = {.info = &got};
    /* No events asked for: errors and hang-ups only, which epoll reports once (edge-triggered). */
    rl_source_t *s = rl_source_create_fd(p[0], 0, 0, count_fd, &ctx);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DM), 0);
    close(p[1]);
    RLT_CHECK(readable(fd, 1000));
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == 0); /* its poll saw the hang-up... */
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK(atomic_load(&got) & RL_FD_ERROR); /* ...and the pass still does */
    rl_source_invalidate(s);
    rl_release(s);
    close(p[0]);
}

RLT_TEST(an_empty_mode_answers_never_and_its_wakeups_do_not_spin_the_host) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    const char *empty = "embed.empty";
    for (int i = 0; i < 3; i++) {
        RLT_CHECK(rl_loop_get_backend_timeout(loop, empty) == -1);
        rl_loop_wakeup(loop);
        RLT_CHECK(readable(fd, 1000)); /* a wakeup still ends the host's wait... */
        RLT_CHECK_EQ(rl_run_in_mode(empty, 0, false), RL_RUN_FINISHED);
    }
    /* ...and is dropped by the next query, as there is nothing to run. */
    rl_loop_wakeup(loop);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, empty) == -1);
    RLT_CHECK(!readable(fd, 0));
    /* A wakeup that comes with an item for the mode is not lost. */
    atomic_int n = 0;
    rl_source_t *s = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, empty), 0);
    rl_source_signal(s);
    rl_loop_wakeup(loop);
    RLT_CHECK(readable(fd, 1000));
    RLT_CHECK(rl_loop_get_backend_timeout(loop, empty) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(empty, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&n), 1);
    rl_source_invalidate(s);
    rl_release(s);
}

/* A host nested in a callout of a run in another mode: what its query parks is restored for the
 * outer run, whose fd source still gets its events. */
typedef struct {
    rl_loop_t *loop;
    int write_end;
} nested_t;

static void ready_then_query_other_mode(rl_timer_t *t, void *info) {
    (void)t;
    nested_t *x = info;
    if (write(x->write_end, "z", 1) != 1) return; /* ready, and wanted in DM only */
    (void)rl_loop_get_backend_timeout(x->loop, OTHER); /* parks it for OTHER */
}

RLT_TEST(a_query_from_a_callout_leaves_the_outer_run_its_fds) {
    rl_loop_t *loop = rl_loop_get_current();
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    atomic_int n = 0;
    atomic_uint got = 0;
    rl_source_t *keep = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, keep, OTHER), 0);
    rl_context_t cf = {.info = &got};
    rl_source_t *s = rl_source_create_fd(p[0], RL_FD_READABLE, 0, count_fd, &cf);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DM), 0);
    nested_t x = {loop, p[1]};
    rl_context_t ct = {.info = &x};
    rl_timer_t *t = rl_timer_create(0, 0, 0, ready_then_query_other_mode, &ct);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, DM), 0);
    /* The first pass fires the timer after its wait; the next wait must see the fd. */
    RLT_CHECK_EQ(rl_run_in_mode(DM, 1.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK(atomic_load(&got) & RL_FD_READABLE);
    rl_release(t);
    rl_source_invalidate(s);
    rl_source_invalidate(keep);
    rl_release(s);
    rl_release(keep);
    close(p[0]);
    close(p[1]);
}

static void count_signal(rl_source_t *s, int signo, unsigned count, void *info) {
    (void)s; (void)signo;
    atomic_fetch_add((atomic_int *)info, (int)count);
}

/* The checks of the test below, apart so that the test always drops its source (a source left
 * behind would keep its handler installed for the signal tests that follow). */
static void signal_checks(rl_loop_t *loop, int fd, atomic_int *got) {
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT); /* whatever joining queued */
    /* While the host waits: the handler's eventfd write makes the backend fd readable. */
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    RLT_CHECK(!readable(fd, 0));
    RLT_CHECK_EQ(raise(SIGVTALRM), 0);
    RLT_CHECK(readable(fd, 1000));
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(got), 1);
    /* Before the query: its poll takes the edge, and it answers "now" from the generation. */
    RLT_CHECK_EQ(raise(SIGVTALRM), 0);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(got), 2);
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    RLT_CHECK(!readable(fd, 0));
}

RLT_TEST(a_signal_delivered_to_a_host_driven_loop_makes_a_pass_due) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    /* During the host's wait the thread's own mask applies (the loop unblocks its signals only in
     * its own waits): this thread must not block the signal (a Swift test process's may). */
    sigset_t one, before;
    sigemptyset(&one);
    sigaddset(&one, SIGVTALRM);
    RLT_CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &one, &before), 0);
    atomic_int got = 0;
    rl_context_t ctx = {.info = &got};
    rl_source_t *s = rl_source_create_signal(SIGVTALRM, 0, count_signal, &ctx);
    if (s && rl_loop_add_source(loop, s, DM) == 0) signal_checks(loop, fd, &got);
    else rlt_fail(__FILE__, __LINE__, "no signal source");
    rl_source_invalidate(s);
    rl_release(s);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
}

RLT_TEST(an_fd_parked_for_a_mode_is_watched_again_when_its_source_joins_that_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    atomic_uint got = 0;
    rl_context_t ctx = {.info = &got};
    rl_source_t *s = rl_source_create_fd(p[0], RL_FD_READABLE, 0, count_fd, &ctx);
    atomic_int n = 0;
    rl_source_t *keep = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, keep, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, OTHER), 0);
    RLT_CHECK(write(p[1], "r", 1) == 1);
    /* A pass in DM sees the fd ready with no taker there, and parks it for DM (where it stays
     * between runs of DM, so that a host driving DM is not woken by it). */
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DM), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0.5, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK(atomic_load(&got) & RL_FD_READABLE);
    rl_source_invalidate(s);
    rl_source_invalidate(keep);
    rl_release(s);
    rl_release(keep);
    close(p[0]);
    close(p[1]);
}

/* A parked fd whose mode loses its taker (the source stays in the loop through another mode):
 * when the fd becomes ready for what that taker wanted, nothing in the mode wants it, and it
 * must be parked again (narrowed to nothing) rather than report itself on every wait. */
RLT_TEST(a_parked_fd_whose_source_leaves_the_mode_does_not_spin_the_loop_or_the_host) {
    rl_loop_t *loop = rl_loop_get_current();
    int sv[2];
    RLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    atomic_uint cr = 0, cw = 0;
    atomic_int n = 0;
    rl_context_t ctxr = {.info = &cr}, ctxw = {.info = &cw};
    rl_source_t *reader = rl_source_create_fd(sv[0], RL_FD_READABLE, 0, count_fd, &ctxr);
    rl_source_t *writer = rl_source_create_fd(sv[0], RL_FD_WRITABLE, 0, count_fd, &ctxw);
    rl_source_t *keep = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, keep, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, reader, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, reader, "embed.spare"), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, writer, OTHER), 0);
    /* Writable, and no taker in DM for that: parked for DM, narrowed to readable. */
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, reader, DM), 0);
    RLT_CHECK(write(sv[1], "x", 1) == 1);
    rl_loop_stats_t before, after;
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &before), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0.1, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_loop_get_stats(loop, &after), 0);
    RLT_CHECK(after.passes - before.passes < 10);
    RLT_CHECK(!(atomic_load(&cr) & RL_FD_READABLE));
    /* Nor is a host woken by it. */
    int fd = rl_loop_get_backend_fd(loop);
    int spurious = 0;
    for (int i = 0; i < 5; i++) {
        double t = rl_loop_get_backend_timeout(loop, DM);
        if (t != 0 && readable(fd, 20)) spurious++;
        RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    }
    RLT_CHECK_EQ(spurious, 0);
    /* The reader still gets its event in the spare mode. */
    RLT_CHECK_EQ(rl_run_in_mode("embed.spare", 0.5, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK(atomic_load(&cr) & RL_FD_READABLE);
    rl_source_invalidate(reader);
    rl_source_invalidate(writer);
    rl_source_invalidate(keep);
    rl_release(reader);
    rl_release(writer);
    rl_release(keep);
    close(sv[0]);
    close(sv[1]);
}

/* A host nested in a callout of a run in another mode: a timer or a signalled source another
 * thread adds to the host's mode wakes it, as it wakes a host that is not nested. */
typedef struct {
    rl_loop_t *loop;
    rl_timer_t *timer;
    rl_source_t *source;
    int woke_timer, woke_source;
    int query_timer, query_source;
} nested_host_t;

static void host_other_mode(rl_timer_t *t, void *info) {
    (void)t;
    nested_host_t *x = info;
    int fd = rl_loop_get_backend_fd(x->loop);
    pthread_t th;
    x->query_timer = (int)rl_loop_get_backend_timeout(x->loop, OTHER);
    adder_t a = {x->loop, x->timer, NULL, OTHER, 0.01};
    if (pthread_create(&th, NULL, add_later, &a)) return;
    /* 5 s, as the hosts above: the adding thread may be held up (load, a sanitizer). */
    x->woke_timer = readable(fd, 5000);
    pthread_join(th, NULL);
    rl_run_in_mode(OTHER, 0, false);
    x->query_source = (int)rl_loop_get_backend_timeout(x->loop, OTHER);
    adder_t b = {x->loop, NULL, x->source, OTHER, 0.01};
    if (pthread_create(&th, NULL, add_later, &b)) return;
    x->woke_source = readable(fd, 5000);
    pthread_join(th, NULL);
    rl_run_in_mode(OTHER, 0, false);
}

RLT_TEST(a_host_nested_in_a_callout_is_woken_by_timers_and_sources_other_threads_add) {
    rl_loop_t *loop = rl_loop_get_current();
    atomic_int n = 0, m = 0, k = 0, fired = 0;
    rl_source_t *idle = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, idle, OTHER), 0);
    rl_source_t *s = counting_source(&m);
    rl_source_signal(s);
    rl_context_t cf = {.info = &fired};
    nested_host_t x = {loop, rl_timer_create(rl_time_now() + 0.03, 0, 0, count_timer, &cf), s, 0, 0, 9, 9};
    rl_context_t ct = {.info = &x};
    rl_timer_t *outer = rl_timer_create(0, 0, 0, host_other_mode, &ct);
    rl_source_t *keep = counting_source(&k);
    RLT_CHECK_EQ(rl_loop_add_source(loop, keep, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, outer, DM), 0);
    rl_run_in_mode(DM, 0, false); /* a polling pass: fires outer */
    RLT_CHECK_EQ(x.query_timer, -1);
    RLT_CHECK(x.woke_timer);
    RLT_CHECK_EQ(atomic_load(&fired), 1);
    RLT_CHECK_EQ(x.query_source, -1);
    RLT_CHECK(x.woke_source);
    RLT_CHECK_EQ(atomic_load(&m), 1);
    rl_release(outer);
    rl_release(x.timer);
    rl_source_invalidate(s);
    rl_source_invalidate(idle);
    rl_source_invalidate(keep);
    rl_release(s);
    rl_release(idle);
    rl_release(keep);
}

/* A registration the kernel keeps for a file we can no longer name (closed before its source was
 * removed, still open through a dup) while the loop watches no fd: the host's passes must still
 * look at the set, so that the rebuild that drops it happens and the host can sleep again. */
RLT_TEST(a_stale_registration_does_not_keep_a_host_awake) {
    rl_loop_t *loop = rl_loop_get_current();
    int fd = rl_loop_get_backend_fd(loop);
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    atomic_uint got = 0;
    atomic_int n = 0;
    rl_context_t ctx = {.info = &got};
    rl_source_t *s = rl_source_create_fd(p[0], RL_FD_READABLE, 0, count_fd, &ctx);
    rl_source_t *keep = counting_source(&n);
    RLT_CHECK_EQ(rl_loop_add_source(loop, keep, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DM), 0);
    int d = dup(p[0]);
    RLT_CHECK(d >= 0);
    close(p[0]);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, DM), 0);
    RLT_CHECK(write(p[1], "x", 1) == 1);
    int spurious = 0;
    for (int i = 0; i < 10; i++) {
        double t = rl_loop_get_backend_timeout(loop, DM);
        if (t != 0 && readable(fd, 20)) spurious++;
        RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    }
    RLT_CHECK(spurious <= 2); /* the waits that find it repeated, before the rebuild */
    /* Quiet now. */
    RLT_CHECK(rl_loop_get_backend_timeout(loop, DM) == -1);
    RLT_CHECK(!readable(fd, 20));
    RLT_CHECK_EQ(atomic_load(&got), 0);
    rl_source_invalidate(s);
    rl_source_invalidate(keep);
    rl_release(s);
    rl_release(keep);
    close(d);
    close(p[1]);
}

/* A host asked inside a timer's callout (a host nested in a callout, or one that polls from
 * there) must see the timers that the callout's fire phase took and has yet to fire: they are
 * due, so the timeout is 0, where a far timer would otherwise set it. The phase still fires each
 * of them once. */
typedef struct {
    rl_loop_t *loop;
    double timeout; /* what the first callout's query answered */
    int calls;
} phase_query_t;

static void query_backend_then_count(rl_timer_t *t, void *info) {
    (void)t;
    phase_query_t *q = info;
    if (q->calls++ == 0) q->timeout = rl_loop_get_backend_timeout(q->loop, DM);
}

RLT_TEST(a_host_asked_in_a_timer_callout_sees_the_due_timers_the_phase_has_yet_to_fire) {
    rl_loop_t *loop = rl_loop_get_current();
    phase_query_t q = {loop, NAN, 0};
    rl_context_t ctx = {.info = &q};
    atomic_int far_fired = 0;
    rl_context_t far_ctx = {.info = &far_fired};
    rl_timer_t *far = rl_timer_create(rl_time_now() + 100, 0, 0, count_timer, &far_ctx);
    rl_timer_t *first = rl_timer_create(0, 0, 0, query_backend_then_count, &ctx);
    rl_timer_t *second = rl_timer_create(0, 0, 1, query_backend_then_count, &ctx);
    RLT_CHECK(far && first && second);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, far, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, first, DM), 0);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, second, DM), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(q.calls, 2);
    RLT_CHECK(q.timeout == 0);
    RLT_CHECK_EQ(atomic_load(&far_fired), 0);
    RLT_CHECK(!rl_timer_is_valid(first) && !rl_timer_is_valid(second));
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, DM) == rl_timer_get_next_fire_date(far));
    RLT_CHECK_EQ(rl_run_in_mode(DM, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(q.calls, 2);
    rl_timer_invalidate(far);
    rl_release(far);
    rl_release(first);
    rl_release(second);
}
