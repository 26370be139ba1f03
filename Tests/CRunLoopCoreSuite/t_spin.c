/*
 * t_spin.c - the spin before sleeping (rl_loop_set_spin): bad input and the clamp, the default
 * (5 us, 0 with one CPU: the CPU count is injected through rl_cpu_count_override), a window of 0
 * that sleeps at once after a busy pass, a long window that takes a wakeup posted within it
 * without sleeping, and a window cut short by a due timer.
 */
#include "rlt.h"
#include "../../Sources/CRunLoopCore/internal.h"
#include "../../Sources/CRunLoopCore/wake.h" /* rl_cpu_count_override, rl_wake_default_spin */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void nap(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

RLT_TEST(spin_rejects_bad_input_and_clamps_huge_windows) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_set_spin(NULL, 1e-5), -EINVAL);
    RLT_CHECK(rl_loop_get_spin(NULL) == 0);
    RLT_CHECK_EQ(rl_loop_set_spin(loop, 2e-5), 0);
    RLT_CHECK(rl_loop_get_spin(loop) == 2e-5);
    RLT_CHECK_EQ(rl_loop_set_spin(loop, -1e-6), -EINVAL);
    RLT_CHECK_EQ(rl_loop_set_spin(loop, NAN), -EINVAL);
    RLT_CHECK_EQ(rl_loop_set_spin(loop, -INFINITY), -EINVAL);
    RLT_CHECK(rl_loop_get_spin(loop) == 2e-5); /* a failed call changes nothing */
    RLT_CHECK_EQ(rl_loop_set_spin(loop, 1e9), 0);
    RLT_CHECK(rl_loop_get_spin(loop) == 1e-3);
    RLT_CHECK_EQ(rl_loop_set_spin(loop, INFINITY), 0);
    RLT_CHECK(rl_loop_get_spin(loop) == 1e-3);
    RLT_CHECK_EQ(rl_loop_set_spin(loop, 1e-3), 0);
    RLT_CHECK(rl_loop_get_spin(loop) == 1e-3);
    RLT_CHECK_EQ(rl_loop_set_spin(loop, -0.0), 0); /* zero, stored as +0 */
    RLT_CHECK(rl_loop_get_spin(loop) == 0 && !signbit(rl_loop_get_spin(loop)));
    RLT_CHECK_EQ(rl_loop_set_spin(loop, 0), 0);
    RLT_CHECK(rl_loop_get_spin(loop) == 0);
}

static void *spin_of_new_loop(void *arg) {
    *(double *)arg = rl_loop_get_spin(rl_loop_get_current());
    return NULL;
}

static double spin_of_a_new_thread(void) {
    double spin = -1;
    pthread_t th;
    if (pthread_create(&th, NULL, spin_of_new_loop, &spin) == 0) pthread_join(th, NULL);
    return spin;
}

RLT_TEST(the_default_spin_is_5us_and_none_with_one_cpu) {
    atomic_store(&rl_cpu_count_override, 1);
    double one = spin_of_a_new_thread();
    atomic_store(&rl_cpu_count_override, 2);
    double two = spin_of_a_new_thread();
    atomic_store(&rl_cpu_count_override, 0);
    RLT_CHECK(one == 0);
    RLT_CHECK(two == 5e-6);
    /* This machine, as the system says. */
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < online ? CPU_COUNT(&set) : (int)online;
    RLT_CHECK(spin_of_a_new_thread() == (cpus > 1 ? 5e-6 : 0));
}

/* ---- a loop thread performing a source; the test thread signals it in pairs ---------------- */

typedef struct {
    pthread_t th;
    _Atomic(rl_loop_t *) loop;
    rl_source_t *source;
    _Atomic double performed_at;
    atomic_int performed;
    atomic_bool quit;
    double spin;
    int cpu;     /* to pin the loop's thread to, or -1 */
} spinner_t;

static void performed(void *info) {
    spinner_t *w = info;
    atomic_store(&w->performed_at, rl_time_now());
    atomic_fetch_add(&w->performed, 1);
}

/* Pin the calling thread to the n-th CPU it may use (a spinning loop and the thread timing it
 * must not share one CPU, or the one waits for the other's spin to end); false if there is none. */
static int nth_cpu(const cpu_set_t *set, int n) {
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, set) && !n--) return cpu;
    return -1;
}

static bool pin_to(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return cpu >= 0 && sched_setaffinity(0, sizeof one, &one) == 0;
}

static void *spinner_main(void *arg) {
    spinner_t *w = arg;
    if (w->cpu >= 0) pin_to(w->cpu);
    rl_loop_t *loop = rl_loop_get_current();
    rl_loop_set_spin(loop, w->spin);
    rl_loop_add_source(loop, w->source, RL_DEFAULT_MODE);
    atomic_store(&w->loop, rl_retain(loop)); /* the test thread's: it stops the loop as it exits */
    double deadline = rl_time_now() + 60; /* safety bound */
    /* Long runs: a run's timeout ends a spin early too (it is the wait's deadline). */
    while (!atomic_load(&w->quit) && rl_time_now() < deadline) rl_run_in_mode(RL_DEFAULT_MODE, 10, false);
    rl_loop_remove_source(loop, w->source, RL_DEFAULT_MODE);
    return NULL;
}

/* Spins: a yield would hand this CPU to another process for a whole time slice. */
static bool wait_performed(spinner_t *w, int count) {
    double deadline = rl_time_now() + 5;
    while (atomic_load(&w->performed) < count)
        if (rl_time_now() > deadline) return false;
        else rl_cpu_relax();
    return true;
}

/* Pairs of signals: the second is posted between 0.1 and 0.5 ms after the first was performed
 * (by the clocks of both threads; a pair whose second signal came later, the test thread having
 * been preempted, does not count). *counted receives how many pairs counted; returns how many
 * of their second signals needed an eventfd write (the loop was asleep), or -1. */
static int second_signals_that_woke_a_sleeper(double spin, int cpu, int wanted, int *counted) {
    spinner_t w;
    memset(&w, 0, sizeof w);
    w.spin = spin;
    w.cpu = cpu;
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    sc.info = &w;
    sc.perform = performed;
    w.source = rl_source_create(0, &sc);
    if (!w.source || pthread_create(&w.th, NULL, spinner_main, &w) != 0) return -1;
    while (!atomic_load(&w.loop)) sched_yield();
    rl_loop_t *loop = atomic_load(&w.loop);
    int woke = 0, done = 0;
    bool lost = false;
    *counted = 0;
    for (int i = 0; i < 400 && *counted < wanted && !lost; i++) {
        nap(0.002); /* past any window: the loop sleeps */
        rl_source_signal(w.source);
        rl_loop_wakeup(loop);
        if ((lost = !wait_performed(&w, ++done))) break;
        double at = atomic_load(&w.performed_at), now;
        while ((now = rl_time_now()) < at + 1e-4) rl_cpu_relax();
        rl_loop_stats_t before, after;
        rl_loop_get_stats(loop, &before);
        rl_source_signal(w.source);
        rl_loop_wakeup(loop);
        /* Read after the wakeup: this thread may have been preempted anywhere before it, and a
         * wakeup posted after the window is one the loop rightly slept for. */
        now = rl_time_now();
        rl_loop_get_stats(loop, &after);
        if (now < at + 5e-4) {
            ++*counted;
            woke += after.wakeup_writes != before.wakeup_writes;
        }
        lost = !wait_performed(&w, ++done);
    }
    atomic_store(&w.quit, true);
    rl_loop_stop(loop);
    pthread_join(w.th, NULL);
    rl_release(loop);
    rl_release(w.source);
    return lost ? -1 : woke;
}

RLT_TEST(a_zero_spin_sleeps_at_once_and_a_long_one_takes_a_wakeup_within_its_window) {
    cpu_set_t mine;
    RLT_CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
    /* The loop on one CPU, this thread (a thread of the test's own) on another. */
    bool two_cpus = CPU_COUNT(&mine) >= 2 && pin_to(nth_cpu(&mine, 1));
    int cpu = two_cpus ? nth_cpu(&mine, 0) : -1;
    int zero_pairs = 0, long_pairs = 0, zero = 0, long_window = 0;
    /* Outside load (or a sanitizer) may leave too few pairs that count, or hold the no-spin loop
     * up between a perform and its sleep: up to five tries, one of which must tell. A write for
     * a wakeup within the 1 ms window ends them at once: no load explains it (see below). */
    bool told = false;
    for (int attempt = 0; attempt < 5 && !told; attempt++) {
        zero = second_signals_that_woke_a_sleeper(0, cpu, 20, &zero_pairs);
        long_window = second_signals_that_woke_a_sleeper(1e-3, cpu, 20, &long_pairs);
        if (zero < 0 || long_window < 0 || (two_cpus && long_window != 0)) break;
        told = zero >= zero_pairs / 2 && (!two_cpus || (zero_pairs >= 5 && long_pairs >= 5));
    }
    sched_setaffinity(0, sizeof mine, &mine);
    if (!two_cpus) { /* one CPU: a spinner keeps the signaller off it; only the no-spin half holds */
        RLT_CHECK(zero >= zero_pairs / 2);
        return;
    }
    RLT_CHECK(zero >= 0 && long_window >= 0);
    if (zero_pairs < 5 || long_pairs < 5) /* else the machine is too loaded to tell */
        rlt_fail(__FILE__, __LINE__, "pairs that counted: %d with no spin, %d with 1 ms", zero_pairs, long_pairs);
    if (zero_pairs < 5 || long_pairs < 5) return;
    /* With 1 ms, a wakeup posted within the window always finds the loop spinning, preempted or
     * not: it looks for PENDING once more after its window ends. With 0, the loop is asleep
     * 0.1 ms after a perform unless it was preempted right after it: most pairs write. */
    if (long_window != 0 || zero < zero_pairs / 2)
        rlt_fail(__FILE__, __LINE__, "wakeup writes for the second signal: %d of %d with no spin, %d of %d with 1 ms",
                 zero, zero_pairs, long_window, long_pairs);
}

static void fired_at(rl_timer_t *t, void *info) {
    (void)t;
    *(double *)info = rl_time_now();
    rl_loop_stop(rl_loop_get_current());
}

static void nothing(void *info) { (void)info; }

RLT_TEST(a_due_timer_ends_the_spin_early) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_set_spin(loop, 1e-3), 0);
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    sc.perform = nothing;
    rl_source_t *s = rl_source_create(0, &sc);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, RL_DEFAULT_MODE), 0);
    double late_sum = 0;
    int rounds = 20, late = rounds;
    /* This thread preempted (a loaded machine) makes a timer late by itself; a spin that ran its
     * whole window makes every one late: up to five runs of 20, one of which must hold. */
    for (int attempt = 0; attempt < 5 && late > rounds / 2; attempt++) {
        late_sum = 0;
        late = 0;
        for (int i = 0; i < rounds; i++) {
            double when = 0;
            rl_context_t ctx = {.info = &when};
            double date = rl_time_now() + 1e-4;
            rl_timer_t *t = rl_timer_create(date, 0, 0, fired_at, &ctx);
            RLT_CHECK_EQ(rl_loop_add_timer(loop, t, RL_DEFAULT_MODE), 0);
            rl_source_signal(s); /* a busy pass first: the next wait spins, up to the timer */
            RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 10, false), RL_RUN_STOPPED); /* by the timer */
            rl_release(t);
            RLT_CHECK(when >= date);
            late_sum += when - date;
            late += when - date > 8e-4;
        }
    }
    rl_source_invalidate(s);
    rl_release(s);
    /* Without the deadline the spin would run its whole millisecond: every timer 0.9 ms late. */
    if (late > rounds / 2)
        rlt_fail(__FILE__, __LINE__, "%d of %d timers were more than 0.8 ms late (mean %.0f us)", late, rounds,
                 late_sum / rounds * 1e6);
}

/* A timer another thread adds during the spin, due at once: the spin ends for it (the rearm
 * tells a spinning loop), rather than at the end of its window. */
typedef struct {
    rl_loop_t *loop;
    rl_timer_t *timer;
    _Atomic double performed_at;
    double added_at;
    bool held_up; /* the adding thread was preempted between added_at and its add */
} late_adder_t;

/* The calling thread's involuntary context switches so far (preemptions), or -1. A round in
 * which the loop's thread or the adding thread was preempted is late by the scheduler's doing,
 * not the loop's (seen under ASan on a machine with a load of 17 on 2 CPUs: 2 of 3 late in five
 * runs of ten); only the rounds that ran through tell. */
static long preemptions(void) {
    struct rusage u;
    return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nivcsw : -1;
}

static void note_perform(void *info) { atomic_store(&((late_adder_t *)info)->performed_at, rl_time_now()); }

static void *add_during_spin(void *arg) {
    late_adder_t *a = arg;
    double deadline = rl_time_now() + 5;
    while (atomic_load(&a->performed_at) == 0 && rl_time_now() < deadline) rl_cpu_relax();
    double at = atomic_load(&a->performed_at);
    while (rl_time_now() < at + 2e-4) rl_cpu_relax();
    long before = preemptions();
    a->added_at = rl_time_now();
    rl_timer_set_next_fire_date(a->timer, a->added_at);
    rl_loop_add_timer(a->loop, a->timer, RL_DEFAULT_MODE);
    a->held_up = before < 0 || preemptions() != before;
    return NULL;
}

RLT_TEST(a_timer_another_thread_adds_during_the_spin_ends_it) {
    cpu_set_t mine;
    RLT_CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
    if (CPU_COUNT(&mine) < 2) return; /* the adder would wait for the spin to end */
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_set_spin(loop, 1e-3), 0);
    late_adder_t a;
    memset(&a, 0, sizeof a);
    a.loop = loop;
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    sc.info = &a;
    sc.perform = note_perform;
    rl_source_t *s = rl_source_create(0, &sc);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, RL_DEFAULT_MODE), 0);
    int counted = 0, late = 0;
    /* Preemptions are left out (see preemptions()), but a burst of load may still leave too few
     * rounds or slow the rest: up to five runs of ten, the last of which decides. A spin that ran
     * its whole window would make every round late. */
    for (int attempt = 0; attempt < 5 && (counted < 3 || late > counted / 3); attempt++) {
        counted = late = 0;
        for (int i = 0; i < 10; i++) {
            double when = 0;
            rl_context_t ctx = {.info = &when};
            a.timer = rl_timer_create(RL_TIME_NEVER, 0, 0, fired_at, &ctx);
            atomic_store(&a.performed_at, 0);
            pthread_t th;
            RLT_CHECK_EQ(pthread_create(&th, NULL, add_during_spin, &a), 0);
            rl_source_signal(s); /* a busy pass first: the next wait spins */
            /* The run ends by the timer; its timeout only bounds a hang. The adding thread may be
             * held up that long by load (under TSan a 0.5 s timeout ran out first): such a round
             * does not count, but must not fail either. */
            long before = preemptions();
            int rc = rl_run_in_mode(RL_DEFAULT_MODE, 10, false);
            bool loop_held_up = before < 0 || preemptions() != before;
            pthread_join(th, NULL);
            rl_timer_invalidate(a.timer);
            rl_release(a.timer);
            RLT_CHECK_EQ(rc, RL_RUN_STOPPED); /* by the timer */
            /* Only adds made within the window, with neither thread preempted, tell. */
            if (a.added_at - atomic_load(&a.performed_at) >= 5e-4 || a.held_up || loop_held_up) continue;
            counted++;
            late += when - a.added_at > 4e-4;
        }
    }
    rl_loop_set_spin(loop, rl_wake_default_spin());
    rl_source_invalidate(s);
    rl_release(s);
    if (counted < 3) return; /* too loaded to tell */
    if (late > counted / 3)
        rlt_fail(__FILE__, __LINE__, "%d of %d timers added during the spin fired 0.4 ms late or more", late, counted);
}

/* A signal the loop watches, delivered during the spin to another thread (whose handler moves the
 * generation): the spin ends for it. */
static void signal_stops(rl_source_t *s, int signo, unsigned count, void *info) {
    (void)s; (void)signo; (void)count;
    *(double *)info = rl_time_now();
    rl_loop_stop(rl_loop_get_current());
}

static void *raise_during_spin(void *arg) {
    late_adder_t *a = arg;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGVTALRM);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL); /* the handler runs on this thread */
    double deadline = rl_time_now() + 5;
    while (atomic_load(&a->performed_at) == 0 && rl_time_now() < deadline) rl_cpu_relax();
    double at = atomic_load(&a->performed_at);
    while (rl_time_now() < at + 2e-4) rl_cpu_relax();
    long before = preemptions();
    a->added_at = rl_time_now();
    raise(SIGVTALRM); /* the handler runs here, before raise returns */
    a->held_up = before < 0 || preemptions() != before;
    return NULL;
}

RLT_TEST(a_signal_delivered_during_the_spin_ends_it) {
    cpu_set_t mine;
    RLT_CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
    if (CPU_COUNT(&mine) < 2) return;
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_set_spin(loop, 1e-3), 0);
    late_adder_t a;
    memset(&a, 0, sizeof a);
    a.loop = loop;
    rl_source_context_t sc;
    memset(&sc, 0, sizeof sc);
    sc.info = &a;
    sc.perform = note_perform;
    rl_source_t *s = rl_source_create(0, &sc);
    double when = 0;
    rl_context_t ctx = {.info = &when};
    rl_source_t *sig = rl_source_create_signal(SIGVTALRM, 0, signal_stops, &ctx);
    RLT_CHECK(sig != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, RL_DEFAULT_MODE), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, sig, RL_DEFAULT_MODE), 0);
    int counted = 0, late = 0;
    /* Preemptions are left out (see preemptions()), but a burst of load may still leave too few
     * rounds or slow the rest: up to five runs of ten, the last of which decides. A spin that ran
     * its whole window would make every round late. */
    for (int attempt = 0; attempt < 5 && (counted < 3 || late > counted / 3); attempt++) {
        counted = late = 0;
        for (int i = 0; i < 10; i++) {
            when = 0;
            atomic_store(&a.performed_at, 0);
            pthread_t th;
            RLT_CHECK_EQ(pthread_create(&th, NULL, raise_during_spin, &a), 0);
            rl_source_signal(s); /* a busy pass first: the next wait spins */
            /* The run ends by the signal; its timeout only bounds a hang. The raising thread may be
             * held up that long by load (under TSan a 0.5 s timeout ran out first): such a round
             * does not count, but must not fail either. */
            long before = preemptions();
            int rc = rl_run_in_mode(RL_DEFAULT_MODE, 10, false);
            bool loop_held_up = before < 0 || preemptions() != before;
            pthread_join(th, NULL);
            RLT_CHECK_EQ(rc, RL_RUN_STOPPED); /* by the signal */
            if (a.added_at - atomic_load(&a.performed_at) >= 5e-4 || a.held_up || loop_held_up) continue;
            counted++;
            late += when - a.added_at > 4e-4;
        }
    }
    rl_loop_set_spin(loop, rl_wake_default_spin());
    rl_source_invalidate(sig);
    rl_source_invalidate(s);
    rl_release(sig);
    rl_release(s);
    if (counted < 3) return;
    if (late > counted / 3)
        rlt_fail(__FILE__, __LINE__, "%d of %d signals delivered during the spin were seen 0.4 ms late or more", late, counted);
}
