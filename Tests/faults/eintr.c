/*
 * eintr.c - EINTR storms: a thread sends SIGUSR1, whose handler is installed without SA_RESTART,
 * every ~10 us to a thread running a loop and to the threads feeding it, for about 1.5 s, while:
 *   - the loop runs in runs of 0.1 s: each returns RL_RUN_TIMED_OUT, not before 0.1 s and not
 *     more than 0.25 s late;
 *   - a repeating 2 ms timer fires at least half as often as it should, never before its date;
 *   - a chain of one-shot timers 3 ms apart fires each one, never early, at most 0.1 s late;
 *   - another thread signals a version-0 source and wakes the loop, 1 ms apart, and waits for
 *     each perform (1 s at most): no wakeup is lost;
 *   - it also writes a byte to a socket the loop watches and waits for the fd callout;
 *   - it also adds one-shot timers to the loop from its own thread, which must fire.
 * Nothing may abort. The summary reports how many signals the handler saw.
 */
#include "faults.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_long handled;
static void on_signal(int sig) {
    (void)sig;
    atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
}

typedef struct {
    fcase *runs, *timers, *wakeups;
    rl_loop_t *loop;
    atomic_bool loop_ready, stop, feeder_done;
    pthread_t loop_thread, feeder_thread;
    rl_source_t *src;
    int sv[2];
    atomic_long performed, fd_calls, grid_fires, chain_fires, foreign_fires;
    double grid_start;
    rl_timer_t *chain;
} storm_t;

static storm_t S;

static void grid_cb(rl_timer_t *t, void *info) {
    (void)info;
    double now = rl_time_now(), date = rl_timer_get_next_fire_date(t);
    FCHECK(S.timers, now >= date - 1e-6, "the 2 ms timer fired %.6f s before its date, expected at or after it",
           date - now);
    atomic_fetch_add(&S.grid_fires, 1);
}

static void chain_cb(rl_timer_t *t, void *info);

static void chain_next(double delay) {
    rl_timer_t *t = rl_timer_create(rl_time_now() + delay, 0, 0, chain_cb, NULL);
    int rc = rl_loop_add_timer(S.loop, t, "E");
    FCHECK(S.timers, rc == 0, "adding the next chained timer returned %d, expected 0", rc);
    rl_release(t);
}

static void chain_cb(rl_timer_t *t, void *info) {
    (void)info;
    double now = rl_time_now(), date = rl_timer_get_next_fire_date(t);
    double late = now - date;
    FCHECK(S.timers, late >= -1e-6, "a one-shot timer fired %.6f s early, expected at or after its date", -late);
    FCHECK(S.timers, late < 0.1, "a one-shot timer fired %.3f s late, expected under 0.1 s", late);
    atomic_fetch_add(&S.chain_fires, 1);
    if (!atomic_load(&S.stop)) chain_next(0.003);
}

static void foreign_cb(rl_timer_t *t, void *info) {
    (void)t, (void)info;
    atomic_fetch_add(&S.foreign_fires, 1);
}

static void perform_cb(void *info) {
    (void)info;
    atomic_fetch_add(&S.performed, 1);
}

static void fd_cb(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s, (void)events, (void)info;
    char buf[64];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) atomic_fetch_add(&S.fd_calls, n);
}

static void *loop_main(void *arg) {
    (void)arg;
    S.loop = rl_loop_get_current();
    if (!S.loop) {
        FCHECK(S.runs, false, "rl_loop_get_current() returned NULL (errno %d), expected a loop", errno);
        atomic_store(&S.loop_ready, true);
        return NULL;
    }
    rl_source_context_t sc = {NULL, NULL, NULL, NULL, NULL, perform_cb};
    S.src = rl_source_create(0, &sc);
    rl_source_t *f = rl_source_create_fd(S.sv[0], RL_FD_READABLE, 0, fd_cb, NULL);
    rl_timer_t *grid = rl_timer_create(rl_time_now() + 0.002, 0.002, 0, grid_cb, NULL);
    int rc1 = rl_loop_add_source(S.loop, S.src, "E"), rc2 = rl_loop_add_source(S.loop, f, "E");
    int rc3 = rl_loop_add_timer(S.loop, grid, "E");
    FCHECK(S.runs, rc1 == 0 && rc2 == 0 && rc3 == 0,
           "adding the source, fd source and timer returned %d %d %d, expected 0 0 0", rc1, rc2, rc3);
    chain_next(0.003);
    S.grid_start = rl_time_now();
    atomic_store(&S.loop_ready, true);
    int runs = 0;
    while (!atomic_load(&S.stop)) {
        double t0 = now_s();
        int rc = rl_run_in_mode("E", 0.1, false);
        double took = now_s() - t0;
        runs++;
        FCHECK(S.runs, rc == RL_RUN_TIMED_OUT, "run %d returned %d, not RL_RUN_TIMED_OUT", runs, rc);
        FCHECK(S.runs, took >= 0.1 - 1e-4, "run %d of 0.1 s returned after %.4f s, expected at least 0.1 s", runs,
               took);
        FCHECK(S.runs, took < 0.35, "run %d of 0.1 s returned after %.3f s, expected under 0.35 s", runs, took);
        if (rc < 0) break;
    }
    double elapsed = rl_time_now() - S.grid_start;
    long expected = (long)(elapsed / 0.002);
    FCHECK(S.timers, S.grid_fires >= expected / 2,
           "the 2 ms timer fired %ld times in %.2f s, expected at least %ld (half of %ld)",
           (long)S.grid_fires, elapsed, expected / 2, expected);
    long chain_expected = (long)(elapsed / 0.003) / 4;
    FCHECK(S.timers, S.chain_fires >= chain_expected, "the 3 ms chain fired %ld times in %.2f s, expected at least %ld",
           (long)S.chain_fires, elapsed, chain_expected);
    /* until the feeder is done, keep servicing it */
    while (!atomic_load(&S.feeder_done)) rl_run_in_mode("E", 0.01, false);
    rl_timer_invalidate(grid);
    rl_release(grid);
    rl_source_invalidate(f);
    rl_release(f);
    return NULL;
}

static void *feeder_main(void *arg) {
    (void)arg;
    long n = 0, lost = 0, fd_lost = 0, foreign_lost = 0;
    while (!atomic_load(&S.stop) && lost + fd_lost + foreign_lost < 5) {
        long before = atomic_load(&S.performed);
        rl_source_signal(S.src);
        rl_loop_wakeup(S.loop);
        double end = now_s() + 1.0;
        while (atomic_load(&S.performed) == before && now_s() < end) nap(0.0001);
        if (atomic_load(&S.performed) == before) lost++;
        n++;
        if (n % 8 == 0) {
            long fb = atomic_load(&S.fd_calls);
            while (send(S.sv[1], "x", 1, MSG_DONTWAIT) < 0 && errno == EINTR) {}
            end = now_s() + 1.0;
            while (atomic_load(&S.fd_calls) == fb && now_s() < end) nap(0.0001);
            if (atomic_load(&S.fd_calls) == fb) fd_lost++;
        }
        if (n % 16 == 0) {
            long tb = atomic_load(&S.foreign_fires);
            rl_timer_t *t = rl_timer_create(rl_time_now() + 0.001, 0, 0, foreign_cb, NULL);
            int rc = rl_loop_add_timer(S.loop, t, "E");
            rl_release(t);
            FCHECK(S.wakeups, rc == 0, "adding a timer from another thread returned %d, expected 0", rc);
            end = now_s() + 1.0;
            while (atomic_load(&S.foreign_fires) == tb && now_s() < end) nap(0.0001);
            if (atomic_load(&S.foreign_fires) == tb) foreign_lost++;
        }
        nap(0.001);
    }
    FCHECK(S.wakeups, lost == 0, "%ld of %ld signals with a wakeup were not performed within 1 s (lost wakeups)", lost, n);
    FCHECK(S.wakeups, fd_lost == 0, "%ld fd writes were not seen by the loop within 1 s, expected all", fd_lost);
    FCHECK(S.wakeups, foreign_lost == 0, "%ld timers added from another thread did not fire within 1 s, expected all",
           foreign_lost);
    FCHECK(S.wakeups, n > 100, "only %ld signal round trips, expected more than 100", n);
    atomic_store(&S.feeder_done, true);
    return NULL;
}

void part_eintr(void) {
    fcase runs, timers, wakeups;
    fcase_init(&runs, "eintr runs return on time under a signal storm");
    fcase_init(&timers, "eintr timers fire on time under a signal storm");
    fcase_init(&wakeups, "eintr no signal, wakeup, fd event or cross-thread timer lost under a signal storm");
    S.runs = &runs;
    S.timers = &timers;
    S.wakeups = &wakeups;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: every blocking call returns EINTR */
    sigaction(SIGUSR1, &sa, NULL);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, S.sv) < 0) abort();
    pthread_create(&S.loop_thread, NULL, loop_main, NULL);
    while (!atomic_load(&S.loop_ready)) nap(0.001);
    pthread_create(&S.feeder_thread, NULL, feeder_main, NULL);
    /* The storm, from this thread: alternately at the loop and at the feeder. */
    long sent = 0;
    double end = now_s() + 1.5;
    struct timespec ten_us = {0, 10000};
    while (now_s() < end) {
        pthread_kill((sent & 1) ? S.feeder_thread : S.loop_thread, SIGUSR1);
        sent++;
        nanosleep(&ten_us, NULL);
    }
    atomic_store(&S.stop, true);
    bool joined = join_within(S.feeder_thread, 5.0) && join_within(S.loop_thread, 5.0);
    FCHECK(&runs, joined, "the loop or feeder thread did not end within 5 s of the storm (hung)");
    fr_stat("signals", atomic_load(&handled));
    FCHECK(&runs, atomic_load(&handled) > 1000, "only %ld of %ld signals handled, expected more than 1000",
           (long)atomic_load(&handled), sent);
    fcase_report(&runs);
    fcase_report(&timers);
    fcase_report(&wakeups);
    if (!joined) _exit(0);
    rl_release(S.src);
    close(S.sv[0]);
    close(S.sv[1]);
}
