/*
 * t_signals.c - signal sources: a delivery performed once with its count, deliveries coalescing,
 * several sources and loops on one signal, a signal from another thread, modes, the disposition
 * (and mask) before, during and after, chaining to a handler installed before, bad signals,
 * contexts, and nothing left behind (fds, handlers) once the sources are gone.
 *
 * Each test uses a signal of its own where it checks dispositions, so that a failure in one does
 * not spill into the next. The Swift tests (RunLoopTests) use real-time signals only.
 */
#include "ttrace.h"

#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEF RL_DEFAULT_MODE

#if defined(__SANITIZE_THREAD__)
#define SIG_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIG_TSAN 1
#endif
#endif
#ifndef SIG_TSAN
#define SIG_TSAN 0
#endif

typedef struct {
    atomic_int calls;
    atomic_uint total;
    unsigned last;
    int signo;
    bool stop;
} sig_log;

static void sig_cb(rl_source_t *source, int signo, unsigned count, void *info) {
    (void)source;
    sig_log *l = info;
    l->signo = signo;
    l->last = count;
    atomic_fetch_add(&l->calls, 1);
    atomic_fetch_add(&l->total, count);
    if (l->stop) rl_loop_stop(rl_loop_get_current());
}

/* The calling thread takes the signals these tests raise. A test's thread may have inherited a
 * mask blocking them (under swift test, from libdispatch's workers, which block nearly every
 * signal), and raise() on a thread that blocks its signal leaves it pending there. */
static void take_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    int used[] = { SIGUSR1, SIGUSR2, SIGURG, SIGTERM, SIGWINCH };
    for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) sigaddset(&set, used[i]);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static rl_source_t *add_signal(const char *mode, int signo, sig_log *log) {
    take_signals();
    rl_context_t c = { log, NULL, NULL };
    rl_source_t *s = rl_source_create_signal(signo, 0, sig_cb, &c);
    if (s && rl_loop_add_source(rl_loop_get_current(), s, mode) != 0) {
        rl_release(s);
        return NULL;
    }
    return s;
}

/* glibc adds SA_RESTORER (its return trampoline) to what it reads back. */
#define TT_SA_RESTORER 0x04000000

static bool same_disposition(const struct sigaction *a, const struct sigaction *b) {
    return a->sa_handler == b->sa_handler &&
           (a->sa_flags & ~TT_SA_RESTORER) == (b->sa_flags & ~TT_SA_RESTORER);
}

static bool current_is(int signo, const struct sigaction *expected) {
    struct sigaction now;
    return sigaction(signo, NULL, &now) == 0 && same_disposition(&now, expected);
}

RLT_TEST(signal_raised_is_performed_once_with_its_count) {
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGUSR1, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK_EQ(log.last, 1);
    RLT_CHECK_EQ(log.signo, SIGUSR1);
    /* Nothing more came: no more callouts, and a waiting run times out. */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, true), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    rl_source_invalidate(s);
    rl_release(s);
}

RLT_TEST(signal_deliveries_before_a_pass_coalesce_into_one_callout_with_their_count) {
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGUSR2, &log);
    RLT_CHECK(s != NULL);
    for (int i = 0; i < 5; i++) RLT_CHECK_EQ(raise(SIGUSR2), 0); /* each is handled before raise returns */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK_EQ(log.last, 5);
    RLT_CHECK_EQ(raise(SIGUSR2), 0);
    RLT_CHECK_EQ(raise(SIGUSR2), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&log.calls), 2);
    RLT_CHECK_EQ(log.last, 2);
    rl_source_invalidate(s);
    rl_release(s);
}

RLT_TEST(signal_delivered_while_outside_a_loop_is_reported_when_added) {
    take_signals();
    sig_log log = {0};
    rl_context_t c = { &log, NULL, NULL };
    rl_source_t *s = rl_source_create_signal(SIGUSR1, 0, sig_cb, &c);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK_EQ(log.last, 2);
    /* Removed, a delivery waits; added again, it comes. */
    RLT_CHECK_EQ(rl_loop_remove_source(rl_loop_get_current(), s, DEF), 0);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&log.calls), 2);
    RLT_CHECK_EQ(log.last, 1);
    rl_source_invalidate(s);
    rl_release(s);
}

RLT_TEST(signal_for_a_source_of_another_mode_waits_for_that_mode) {
    sig_log log = {0};
    rl_source_t *s = add_signal("m2", SIGUSR1, &log);
    RLT_CHECK(s != NULL);
    rl_source_t *keep = tt_add_source(DEF, 0, "k");
    RLT_CHECK(keep != NULL);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, true), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&log.calls), 0);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK_EQ(log.last, 1);
    rl_source_invalidate(s);
    rl_release(s);
}

/* ---- several sources, several loops, other threads ------------------------------------------ */

typedef struct {
    int signo;
    sig_log a, b;         /* two sources in this thread's loop */
    atomic_bool ready;
    int result;
} sig_thread;

static void *two_sources_thread(void *arg) {
    sig_thread *t = arg;
    rl_source_t *a = add_signal(DEF, t->signo, &t->a);
    rl_source_t *b = add_signal(DEF, t->signo, &t->b);
    if (!a || !b) {
        t->result = -1;
        atomic_store(&t->ready, true);
        return NULL;
    }
    t->result = 0;
    atomic_store(&t->ready, true);
    double end = rl_time_now() + 10;
    while ((atomic_load(&t->a.calls) == 0 || atomic_load(&t->b.calls) == 0) && rl_time_now() < end)
        rl_run_in_mode(DEF, 0.2, false);
    rl_source_invalidate(a);
    rl_source_invalidate(b);
    rl_release(a);
    rl_release(b);
    return NULL;
}

RLT_TEST(signal_reaches_every_source_of_every_loop) {
    sig_thread t1 = { .signo = SIGWINCH }, t2 = { .signo = SIGWINCH };
    pthread_t h1 = tt_spawn(two_sources_thread, &t1), h2 = tt_spawn(two_sources_thread, &t2);
    while (!atomic_load(&t1.ready) || !atomic_load(&t2.ready)) tt_sleep(0.001);
    RLT_CHECK_EQ(t1.result, 0);
    RLT_CHECK_EQ(t2.result, 0);
    RLT_CHECK_EQ(kill(getpid(), SIGWINCH), 0); /* to the process: whichever thread takes it */
    tt_join(h1);
    tt_join(h2);
    RLT_CHECK_EQ(atomic_load(&t1.a.calls), 1);
    RLT_CHECK_EQ(atomic_load(&t1.b.calls), 1);
    RLT_CHECK_EQ(atomic_load(&t2.a.calls), 1);
    RLT_CHECK_EQ(atomic_load(&t2.b.calls), 1);
    RLT_CHECK_EQ(t1.a.last + t1.b.last + t2.a.last + t2.b.last, 4);
}

static void *raise_on_own_thread(void *arg) {
    rl_loop_t *loop = arg;
    take_signals();
    if (tt_wait_sleeping(loop, 5)) raise(SIGUSR2); /* handled on this thread, which has no loop */
    return NULL;
}

RLT_TEST(signal_handled_on_another_thread_wakes_a_sleeping_loop) {
    sig_log log = { .stop = true };
    rl_source_t *s = add_signal(DEF, SIGUSR2, &log);
    RLT_CHECK(s != NULL);
    pthread_t th = tt_spawn(raise_on_own_thread, rl_loop_get_current());
    double start = rl_time_now();
    int rc = rl_run_in_mode(DEF, 10.0, false);
    tt_join(th);
    RLT_CHECK_EQ(rc, RL_RUN_STOPPED);
    RLT_CHECK(rl_time_now() - start < 9.0);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK_EQ(log.last, 1);
    rl_source_invalidate(s);
    rl_release(s);
}

typedef struct { pthread_t loop_thread; rl_loop_t *loop; } kill_at;

static void *kill_loop_thread(void *arg) {
    kill_at *k = arg;
    if (tt_wait_sleeping(k->loop, 5)) pthread_kill(k->loop_thread, SIGUSR1);
    return NULL;
}

RLT_TEST(signal_blocked_by_the_loop_thread_is_taken_while_it_sleeps) {
    sig_log log = { .stop = true };
    rl_source_t *s = add_signal(DEF, SIGUSR1, &log);
    RLT_CHECK(s != NULL);
    sigset_t block, now;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    RLT_CHECK_EQ(pthread_sigmask(SIG_BLOCK, &block, NULL), 0);
    /* Directed at this thread, which blocks it: only the loop's wait can take it. */
    kill_at k = { pthread_self(), rl_loop_get_current() };
    pthread_t th = tt_spawn(kill_loop_thread, &k);
    int rc = rl_run_in_mode(DEF, 10.0, false);
    tt_join(th);
    RLT_CHECK_EQ(rc, RL_RUN_STOPPED);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &now), 0);
    RLT_CHECK_EQ(sigismember(&now, SIGUSR1), 1); /* the thread's mask is as it was */
    rl_source_invalidate(s);
    rl_release(s);
    RLT_CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &block, NULL), 0);
}

typedef struct {
    rl_source_t *source;
    atomic_int calls;
    atomic_uint total;
} shared_log;

static void shared_cb(rl_source_t *source, int signo, unsigned count, void *info) {
    (void)source, (void)signo;
    shared_log *l = info;
    atomic_fetch_add(&l->calls, 1);
    atomic_fetch_add(&l->total, count);
}

RLT_TEST(signal_source_in_two_loops_reports_each_delivery_once) {
    take_signals();
    shared_log log = {0};
    rl_context_t c = { &log, NULL, NULL };
    rl_source_t *s = rl_source_create_signal(SIGUSR1, 0, shared_cb, &c);
    RLT_CHECK(s != NULL);
    tt_live_t other;
    tt_live_start(&other);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_source(other.loop, s, DEF), 0);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&log.total), 2);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    rl_source_invalidate(s);
    rl_release(s);
    tt_live_stop(&other);
}

/* ---- dispositions, masks, chaining ----------------------------------------------------------- */

RLT_TEST(signal_that_would_terminate_does_not_while_a_source_exists) {
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGTERM, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(raise(SIGTERM), 0); /* the process would end here without the source */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(log.last, 1);
    rl_source_invalidate(s);
    rl_release(s);
    struct sigaction now;
    RLT_CHECK_EQ(sigaction(SIGTERM, NULL, &now), 0);
    RLT_CHECK(now.sa_handler == SIG_DFL);
}

RLT_TEST(signal_disposition_and_mask_are_restored_after_the_last_source) {
    take_signals();
    struct sigaction before, ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    RLT_CHECK_EQ(sigaction(SIGURG, &ign, &before), 0); /* something else than the default */
    sigset_t mask_before, mask_now;
    RLT_CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &mask_before), 0);
    sig_log log = {0};
    rl_source_t *a = add_signal(DEF, SIGURG, &log), *b = add_signal(DEF, SIGURG, &log);
    RLT_CHECK(a && b);
    RLT_CHECK(!current_is(SIGURG, &ign)); /* the library's handler */
    rl_source_invalidate(a);
    rl_release(a);
    RLT_CHECK(!current_is(SIGURG, &ign)); /* b still watches */
    RLT_CHECK_EQ(raise(SIGURG), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK_EQ(rl_loop_remove_source(rl_loop_get_current(), b, DEF), 0);
    RLT_CHECK(!current_is(SIGURG, &ign)); /* removed is not gone: it may be added again */
    rl_release(b); /* the last reference: the last source gone */
    RLT_CHECK(current_is(SIGURG, &ign));
    RLT_CHECK_EQ(pthread_sigmask(SIG_SETMASK, NULL, &mask_now), 0);
    for (int sig = 1; sig < NSIG; sig++) RLT_CHECK_EQ(sigismember(&mask_now, sig), sigismember(&mask_before, sig));
    RLT_CHECK_EQ(sigaction(SIGURG, &before, NULL), 0);
}

RLT_TEST(signal_invalidated_source_restores_the_disposition_while_still_referenced) {
    struct sigaction before;
    RLT_CHECK_EQ(sigaction(SIGUSR2, NULL, &before), 0);
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGUSR2, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK(!current_is(SIGUSR2, &before));
    rl_source_invalidate(s);
    RLT_CHECK(current_is(SIGUSR2, &before));
    rl_release(s);
    RLT_CHECK(current_is(SIGUSR2, &before));
}

static atomic_int chained_calls;
static void chained_handler(int signo) {
    (void)signo;
    atomic_fetch_add(&chained_calls, 1);
}

RLT_TEST(signal_handler_installed_before_is_chained_and_put_back) {
    take_signals();
    struct sigaction mine, before;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = chained_handler;
    mine.sa_flags = SA_RESTART;
    RLT_CHECK_EQ(sigaction(SIGUSR1, &mine, &before), 0);
    atomic_store(&chained_calls, 0);
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGUSR1, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(atomic_load(&chained_calls), 1);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(log.last, 1);
    rl_source_invalidate(s);
    rl_release(s);
    RLT_CHECK(current_is(SIGUSR1, &mine));
    RLT_CHECK_EQ(sigaction(SIGUSR1, &before, NULL), 0);
}

RLT_TEST(signal_handler_replaced_by_someone_else_is_left_alone) {
    struct sigaction before, theirs;
    RLT_CHECK_EQ(sigaction(SIGUSR2, NULL, &before), 0);
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGUSR2, &log);
    RLT_CHECK(s != NULL);
    memset(&theirs, 0, sizeof theirs);
    theirs.sa_handler = SIG_IGN;
    RLT_CHECK_EQ(sigaction(SIGUSR2, &theirs, NULL), 0);
    rl_source_invalidate(s);
    rl_release(s);
    RLT_CHECK(current_is(SIGUSR2, &theirs));
    RLT_CHECK_EQ(sigaction(SIGUSR2, &before, NULL), 0);
}

static void free_log(const void *info) { free((void *)info); }

static void *source_in_exiting_thread(void *arg) {
    rl_source_t **out = arg;
    sig_log *log = calloc(1, sizeof *log);
    rl_context_t c = { log, NULL, free_log };
    *out = rl_source_create_signal(SIGUSR1, 0, sig_cb, &c);
    if (*out) rl_loop_add_source(rl_loop_get_current(), *out, DEF);
    return NULL; /* the loop's teardown removes the source */
}

RLT_TEST(signal_source_outlives_its_loop_and_lets_go_when_released) {
    take_signals();
    struct sigaction before;
    RLT_CHECK_EQ(sigaction(SIGUSR1, NULL, &before), 0);
    rl_source_t *s = NULL;
    tt_join(tt_spawn(source_in_exiting_thread, &s));
    RLT_CHECK(s != NULL);
    RLT_CHECK(rl_source_is_valid(s));
    RLT_CHECK(!current_is(SIGUSR1, &before));
    RLT_CHECK_EQ(raise(SIGUSR1), 0); /* counted, in no loop: harmless */
    rl_release(s);
    RLT_CHECK(current_is(SIGUSR1, &before));
}

/* ---- bad input, contexts, what is left behind ------------------------------------------------ */

RLT_TEST(signal_invalid_signals_are_refused) {
    sig_log log = {0};
    rl_context_t c = { &log, NULL, NULL };
    int bad[] = { 0, -1, SIGKILL, SIGSTOP, NSIG, NSIG + 1, 1000, 32, 33 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        rl_source_t *s = rl_source_create_signal(bad[i], 0, sig_cb, &c);
        if (s) rlt_fail(__FILE__, __LINE__, "signal %d accepted", bad[i]);
        if (s) return;
        RLT_CHECK_EQ(errno, EINVAL);
    }
    errno = 0;
    RLT_CHECK(rl_source_create_signal(SIGUSR1, 0, NULL, &c) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    struct sigaction now;
    RLT_CHECK_EQ(sigaction(SIGUSR1, NULL, &now), 0);
    RLT_CHECK(now.sa_handler == SIG_DFL); /* a refused creation installed nothing */
}

RLT_TEST(signal_source_context_is_retained_once_and_released_once) {
    tt_count_t count = {0};
    rl_context_t c = { &count, tt_count_retain, tt_count_release };
    rl_source_t *s = rl_source_create_signal(SIGUSR1, 7, sig_cb, &c);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(atomic_load(&count.retains), 1);
    RLT_CHECK_EQ(rl_source_get_order(s), 7);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), 0);
    RLT_CHECK_EQ(rl_loop_remove_source(rl_loop_get_current(), s, DEF), 0);
    RLT_CHECK_EQ(atomic_load(&count.releases), 0); /* the caller's reference remains */
    rl_release(s);
    RLT_CHECK_EQ(atomic_load(&count.retains), 1);
    RLT_CHECK_EQ(atomic_load(&count.releases), 1);
}

RLT_TEST(signal_source_has_no_fd_and_ignores_a_manual_signal) {
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGUSR1, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_source_get_fd(s), -1);
    RLT_CHECK_EQ(rl_source_get_fd_events(s), 0);
    RLT_CHECK_EQ(rl_source_set_fd_events(s, RL_FD_READABLE), -EINVAL);
    rl_source_signal(s); /* nothing was delivered: no callout */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, true), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&log.calls), 0);
    rl_source_invalidate(s);
    rl_release(s);
}

RLT_TEST(signal_sources_gone_leave_no_fd_behind) {
    (void)rl_loop_get_current();
    int fds = tt_count_dir("/proc/self/fd");
    sig_log log = {0};
    rl_source_t *a = add_signal(DEF, SIGUSR1, &log), *b = add_signal(DEF, SIGUSR2, &log);
    RLT_CHECK(a && b);
    RLT_CHECK_EQ(tt_count_dir("/proc/self/fd"), fds + 1); /* the one process-wide eventfd */
    RLT_CHECK_EQ(raise(SIGUSR2), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    rl_source_invalidate(a);
    rl_release(a);
    rl_source_invalidate(b);
    rl_release(b);
    RLT_CHECK_EQ(tt_count_dir("/proc/self/fd"), fds);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_FINISHED);
}

enum { STORM = 2000 };

/* Each raise on the helper's own thread is handled before it returns: STORM deliveries. */
static void *storm(void *arg) {
    atomic_int *sent = arg;
    take_signals();
    for (int i = 0; i < STORM; i++) {
        raise(SIGUSR1);
        atomic_fetch_add(sent, 1);
    }
    return NULL;
}

RLT_TEST(signal_storm_from_another_thread_is_counted_exactly) {
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGUSR1, &log);
    RLT_CHECK(s != NULL);
    enum { N = STORM };
    atomic_int sent = 0;
    pthread_t th = tt_spawn(storm, &sent);
    double end = rl_time_now() + 20;
    while ((atomic_load(&sent) < N || atomic_load(&log.total) < N) && rl_time_now() < end)
        rl_run_in_mode(DEF, 0.05, false);
    tt_join(th);
    RLT_CHECK_EQ(atomic_load(&log.total), N);
    RLT_CHECK(atomic_load(&log.calls) >= 1);
    rl_source_invalidate(s);
    rl_release(s);
}

/* In the child of fork, the forking thread's loop keeps its signal sources, with a signal
 * eventfd of its own (signal.c replaces it at the same number before the loop's renewal). */
RLT_TEST(signal_source_keeps_working_in_a_forked_child) {
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGUSR1, &log);
    RLT_CHECK(s != NULL);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    RLT_CHECK(pid >= 0);
    if (pid == 0) {
        tt_sleep(0.1); /* while the parent's loop sleeps */
        raise(SIGUSR1);
        int rc = rl_run_in_mode(DEF, 5.0, true);
        _exit(rc == RL_RUN_HANDLED_SOURCE && atomic_load(&log.calls) == 1 && log.last == 1 ? 0 : 1);
    }
    /* One pass, a wait to the timeout: the child's delivery wrote the child's eventfd, which does
     * not end the parent's wait. */
    rl_loop_stats_t before, after;
    RLT_CHECK_EQ(rl_loop_get_stats(rl_loop_get_current(), &before), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.4, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_loop_get_stats(rl_loop_get_current(), &after), 0);
    RLT_CHECK_EQ(after.passes - before.passes, 1);
    int status = 0;
    RLT_CHECK_EQ(waitpid(pid, &status, 0), pid);
    RLT_CHECK(WIFEXITED(status));
    RLT_CHECK_EQ(WEXITSTATUS(status), 0);
    /* The parent's loop still works, and saw nothing of the child's delivery. */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, true), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&log.calls), 0);
    RLT_CHECK_EQ(raise(SIGUSR1), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    rl_source_invalidate(s);
    rl_release(s);
}

/* ---- handlers around ours: chains, one-shots, masks, jumps, faults ---------------------------- */

static struct sigaction over_found;
static atomic_int over_calls;

/* Installed over the library's handler, and calls what it found there, as a polite handler does. */
static void chaining_over(int signo, siginfo_t *info, void *context) {
    atomic_fetch_add(&over_calls, 1);
    if (over_found.sa_flags & SA_SIGINFO) over_found.sa_sigaction(signo, info, context);
}

static int install_chaining_over(int signo) {
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = chaining_over;
    mine.sa_flags = SA_SIGINFO;
    return sigaction(signo, &mine, &over_found);
}

/* Sources of SIGUSR1 go 1 -> 0 -> 1 with a chaining handler over ours: one call of each. */
static int chained_over_ours_child(void) {
    take_signals();
    sig_log log = {0};
    rl_source_t *first = add_signal(DEF, SIGUSR1, &log);
    if (!first) return 10;
    if (install_chaining_over(SIGUSR1)) return 11;
    rl_source_invalidate(first); /* ours is not on top: left alone */
    rl_release(first);
    rl_source_t *second = add_signal(DEF, SIGUSR1, &log);
    if (!second) return 12;
    raise(SIGUSR1); /* each calling the other would overflow the stack here */
    if (atomic_load(&over_calls) != 1) return 13;
    if (rl_run_in_mode(DEF, 5.0, true) != RL_RUN_HANDLED_SOURCE || log.last != 1) return 14;
    rl_source_invalidate(second);
    rl_release(second);
    struct sigaction now;
    if (sigaction(SIGUSR1, NULL, &now) || now.sa_sigaction != chaining_over) return 15; /* still theirs */
    /* It steps down, putting back what it found (ours, left over): a new source chains to what
     * ours found in the first place, and its last one puts that back. */
    if (sigaction(SIGUSR1, &over_found, NULL)) return 16;
    rl_source_t *third = add_signal(DEF, SIGUSR1, &log);
    if (!third) return 17;
    raise(SIGUSR1);
    if (atomic_load(&over_calls) != 1) return 18;
    if (rl_run_in_mode(DEF, 5.0, true) != RL_RUN_HANDLED_SOURCE || log.last != 1) return 19;
    rl_source_invalidate(third);
    rl_release(third);
    if (sigaction(SIGUSR1, NULL, &now) || now.sa_handler != SIG_DFL) return 20;
    return 0;
}

RLT_TEST(signal_handler_installed_over_ours_that_chains_to_it_does_not_recurse_when_sources_come_back) {
    tt_report_child(tt_in_child(chained_over_ours_child));
}

static sigjmp_buf jump_back;
static void jumping_handler(int signo) {
    (void)signo;
    siglongjmp(jump_back, 1);
}

/* A chained handler that never returns: the last source's release must not wait for it. */
static int jumping_handler_child(void) {
    take_signals();
    sigset_t interrupt; /* raise() below must reach the handler on this thread */
    sigemptyset(&interrupt);
    sigaddset(&interrupt, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &interrupt, NULL);
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = jumping_handler;
    if (sigaction(SIGINT, &a, NULL)) return 10;
    sig_log log = {0};
    rl_context_t c = { &log, NULL, NULL };
    rl_source_t *s = rl_source_create_signal(SIGINT, 0, sig_cb, &c);
    if (!s) return 11;
    if (sigsetjmp(jump_back, 1) == 0) {
        raise(SIGINT);
        return 12; /* the handler jumps */
    }
    rl_source_invalidate(s); /* hung for ever waiting for the handler to finish */
    rl_release(s);
    struct sigaction now;
    if (sigaction(SIGINT, NULL, &now) || now.sa_handler != jumping_handler) return 13;
    return 0;
}

RLT_TEST(signal_chained_handler_that_jumps_out_does_not_hang_the_last_release) {
    if (SIG_TSAN) return; /* TSan runs handlers deferred, and this one's siglongjmp does not come back */
    tt_report_child(tt_in_child(jumping_handler_child));
}

/* Two counting handlers, taking turns as the disposition a source is created over; each must
 * only ever be called while it is the one in place (or being replaced). */
enum { TURN_A = 1, TURN_B = 2 };
static atomic_int turn_allowed, turn_wrong, turn_calls;
static void turn_a(int signo, siginfo_t *info, void *context) {
    (void)signo, (void)info, (void)context;
    atomic_fetch_add(&turn_calls, 1);
    if (!(atomic_load(&turn_allowed) & TURN_A)) atomic_fetch_add(&turn_wrong, 1);
}
static void turn_b(int signo, siginfo_t *info, void *context) {
    (void)signo, (void)info, (void)context;
    atomic_fetch_add(&turn_calls, 1);
    if (!(atomic_load(&turn_allowed) & TURN_B)) atomic_fetch_add(&turn_wrong, 1);
}

static atomic_bool turns_done;
static atomic_int turns_sent;

static void *queue_at(void *arg) {
    pthread_t *target = arg;
    int signo = SIGRTMIN + 3;
    while (!atomic_load(&turns_done)) {
        union sigval v = { .sival_int = 0 };
        if (atomic_load(&turns_sent) - atomic_load(&turn_calls) > 8) { /* let the target run */
            sched_yield();
            continue;
        }
        if (pthread_sigqueue(*target, signo, v) == 0) atomic_fetch_add(&turns_sent, 1);
        else sched_yield(); /* EAGAIN: the queue is full */
    }
    return NULL;
}

/* Real-time signals queue, so every one sent must reach exactly one of the two handlers: a
 * delivery landing as the install returns must not see the disposition of a turn before. */
static int install_window_child(void) {
    int signo = SIGRTMIN + 3;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    /* A handler in place before the sender starts: its first signals may arrive before the
     * first turn's install (as soon as this thread unblocks the signal again, when the sender
     * queued one meanwhile), and at the default disposition they would kill the child. */
    struct sigaction first;
    memset(&first, 0, sizeof first);
    first.sa_sigaction = turn_a;
    first.sa_flags = SA_SIGINFO | SA_RESTART;
    atomic_store(&turn_allowed, TURN_A);
    if (sigaction(signo, &first, NULL)) return 9;
    pthread_t self = pthread_self(), sender;
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &set, &old); /* the sender's thread inherits the block */
    if (pthread_create(&sender, NULL, queue_at, &self)) return 10;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    sig_log log = {0};
    rl_context_t c = { &log, NULL, NULL };
    double end = rl_time_now() + 3.0;
    for (int round = 0; round < 40000 && rl_time_now() < end; round++) {
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_sigaction = round & 1 ? turn_b : turn_a;
        a.sa_flags = SA_SIGINFO | SA_RESTART;
        atomic_store(&turn_allowed, TURN_A | TURN_B);
        if (sigaction(signo, &a, NULL)) return 11;
        atomic_store(&turn_allowed, round & 1 ? TURN_B : TURN_A);
        rl_source_t *s = rl_source_create_signal(signo, 0, sig_cb, &c);
        if (!s) return 12;
        rl_source_invalidate(s);
        rl_release(s);
    }
    atomic_store(&turns_done, true);
    pthread_join(sender, NULL);
    end = rl_time_now() + 5.0;
    while (atomic_load(&turn_calls) < atomic_load(&turns_sent) && rl_time_now() < end) tt_sleep(0.001);
    if (atomic_load(&turn_wrong)) return 13;
    if (atomic_load(&turn_calls) != atomic_load(&turns_sent)) return 14;
    return 0;
}

RLT_TEST(signal_delivered_as_a_source_installs_reaches_the_handler_in_place) {
    if (SIG_TSAN) return; /* no thread in a forked child, and it defers handlers: no window */
    tt_report_child(tt_in_child(install_window_child));
}

static atomic_int one_shot_calls;
static sigset_t one_shot_mask;
static void one_shot(int signo) {
    (void)signo;
    atomic_fetch_add(&one_shot_calls, 1);
    pthread_sigmask(SIG_SETMASK, NULL, &one_shot_mask);
}

RLT_TEST(signal_chained_handler_keeps_its_own_mask_and_one_shot_flag) {
    take_signals();
    struct sigaction mine, before, now;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = one_shot;
    mine.sa_flags = SA_RESETHAND; /* and no SA_RESTART */
    sigemptyset(&mine.sa_mask);
    sigaddset(&mine.sa_mask, SIGWINCH);
    RLT_CHECK_EQ(sigaction(SIGURG, &mine, &before), 0);
    atomic_store(&one_shot_calls, 0);
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGURG, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(sigaction(SIGURG, NULL, &now), 0);
    RLT_CHECK(!(now.sa_flags & SA_RESTART)); /* its interrupted calls fail with EINTR, as before */
    RLT_CHECK_EQ(raise(SIGURG), 0);
    RLT_CHECK_EQ(atomic_load(&one_shot_calls), 1);
    RLT_CHECK_EQ(sigismember(&one_shot_mask, SIGWINCH), 1); /* its sa_mask applied */
    RLT_CHECK_EQ(raise(SIGURG), 0); /* reset to the default by the first: not called again */
    RLT_CHECK_EQ(atomic_load(&one_shot_calls), 1);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(log.last, 2);
    rl_source_invalidate(s);
    rl_release(s);
    RLT_CHECK_EQ(sigaction(SIGURG, NULL, &now), 0);
    RLT_CHECK(now.sa_handler == SIG_DFL); /* what the kernel would have left */
    RLT_CHECK_EQ(sigaction(SIGURG, &before, NULL), 0);
}

/* A breakpoint with SIGTRAP at its default: the process dies of it, source or not. */
static int breakpoint_child(void) {
    struct rlimit none = { 0, 0 };
    setrlimit(RLIMIT_CORE, &none);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTRAP);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    /* At its default, whatever the host process installed (the Swift runtime's backtracer, when
     * the suite runs under swift test, handles SIGTRAP and exits). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    if (sigaction(SIGTRAP, &dfl, NULL)) return 12;
    sig_log log = {0};
    rl_context_t c = { &log, NULL, NULL };
    if (!rl_source_create_signal(SIGTRAP, 0, sig_cb, &c)) return 10;
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("int3");
#elif defined(__aarch64__)
    __asm__ volatile("brk #0");
#else
    raise(SIGTRAP); /* sent, not a trap: survived */
    return 0;
#endif
    return 11; /* survived the trap */
}

RLT_TEST(signal_trap_raised_by_an_instruction_still_kills_when_it_would_have) {
    int status = tt_in_child(breakpoint_child);
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
    RLT_CHECK(WIFSIGNALED(status));
    if (WIFSIGNALED(status)) RLT_CHECK_EQ(WTERMSIG(status), SIGTRAP);
    else RLT_CHECK_EQ(WEXITSTATUS(status), 0);
#else
    tt_report_child(status);
#endif
}

/* ---- a source added to a sleeping loop -------------------------------------------------------- */

static atomic_int sleeping_calls;
static _Atomic(rl_loop_t *) sleeping_loop;
static void sleeping_cb(rl_source_t *source, int signo, unsigned count, void *info) {
    (void)source, (void)signo, (void)info;
    atomic_fetch_add(&sleeping_calls, (int)count);
}
static void nothing(void *info) { (void)info; }

/* Blocks SIGUSR1, as libdispatch's threads do: only its loop's sleep can take it. */
static void *sleep_in_loop(void *arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    rl_source_context_t c = { .perform = nothing };
    rl_source_t *keep = rl_source_create(0, &c);
    rl_loop_add_source(rl_loop_get_current(), keep, DEF);
    atomic_store(&sleeping_loop, rl_retain(rl_loop_get_current())); /* woken after this thread is gone */
    double end = rl_time_now() + 10;
    while (atomic_load(&sleeping_calls) == 0 && rl_time_now() < end) rl_run_in_mode(DEF, 10.0, true);
    rl_source_invalidate(keep);
    rl_release(keep);
    return NULL;
}

RLT_TEST(signal_source_added_to_a_sleeping_loop_is_taken_without_another_wakeup) {
    atomic_store(&sleeping_calls, 0);
    atomic_store(&sleeping_loop, NULL);
    pthread_t th = tt_spawn(sleep_in_loop, NULL);
    while (!atomic_load(&sleeping_loop)) tt_sleep(0.001);
    rl_loop_t *loop = atomic_load(&sleeping_loop);
    RLT_CHECK(tt_wait_sleeping(loop, 5));
    rl_source_t *s = rl_source_create_signal(SIGUSR1, 0, sleeping_cb, NULL);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), 0);
    RLT_CHECK_EQ(pthread_kill(th, SIGUSR1), 0); /* pending there until its wait accepts it */
    double end = rl_time_now() + 3;
    while (atomic_load(&sleeping_calls) == 0 && rl_time_now() < end) tt_sleep(0.005);
    RLT_CHECK_EQ(atomic_load(&sleeping_calls), 1);
    rl_loop_wakeup(loop); /* let a failing run end */
    tt_join(th);
    rl_release(loop);
    rl_source_invalidate(s);
    rl_release(s);
}

/* ---- SIGCHLD with SA_NOCLDSTOP before --------------------------------------------------------- */

static atomic_int nocldstop_calls;
static void nocldstop_handler(int signo, siginfo_t *info, void *context) {
    (void)signo, (void)info, (void)context;
    atomic_fetch_add(&nocldstop_calls, 1);
}

static int nocldstop_child(void) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = nocldstop_handler;
    a.sa_flags = SA_SIGINFO | SA_NOCLDSTOP | SA_RESTART;
    if (sigaction(SIGCHLD, &a, NULL)) return 10;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    sig_log log = {0};
    rl_source_t *s = add_signal(DEF, SIGCHLD, &log);
    if (!s) return 11;
    pid_t kid = fork();
    if (kid == 0) {
        raise(SIGSTOP);
        _exit(0);
    }
    siginfo_t si;
    memset(&si, 0, sizeof si);
    while (waitid(P_PID, (id_t)kid, &si, WSTOPPED | WNOWAIT) < 0 && errno == EINTR) {}
    double end = rl_time_now() + 5;
    while (atomic_load(&log.calls) == 0 && rl_time_now() < end) rl_run_in_mode(DEF, 0.1, true);
    int heard = atomic_load(&log.calls), told = atomic_load(&nocldstop_calls);
    kill(kid, SIGKILL); /* never left stopped, whatever happened */
    int status;
    while (waitpid(kid, &status, 0) < 0 && errno == EINTR) {}
    if (heard != 1) return 12; /* the source hears of the stop */
    if (told != 0) return 13;  /* the handler asked not to */
    if (atomic_load(&nocldstop_calls) != 1) return 14; /* but of the exit, yes */
    rl_source_invalidate(s);
    rl_release(s);
    return 0;
}

RLT_TEST(signal_sigchld_handler_with_sa_nocldstop_is_not_told_of_stops) {
    tt_report_child(tt_in_child(nocldstop_child));
}
