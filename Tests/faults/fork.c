/*
 * fork.c - fork() from a thread with a loop, in a process whose other threads use the library.
 *
 * Children report by exit status (a bit per failed check, below); the parent waits for them with
 * a time limit and kills a hung one (counted as a failure). Children leave with _exit, so that
 * LeakSanitizer does not count the parent's other threads' memory as leaks.
 *
 *   fork child's loop works          a thread with a loop (a far timer, an fd source, a version-0
 *                                    source) forks, outside a run and from inside a timer callout
 *                                    of a running loop; in the child the loop works with kernel
 *                                    objects of its own: a new timer fires, the inherited fd
 *                                    source and a new one fire, a source signalled and woken (from
 *                                    another thread of the child too) is performed, it is the
 *                                    child's main loop, a new thread of the child gets a loop.
 *   fork child does not reach parent meanwhile the parent's loop runs with a timeout: it returns on
 *                                    time (not stalled by the child's timer arming) and counts no
 *                                    wakeup (the child's wakeups are not its own).
 *   fork 60 children under load      two threads hammer the library (timers added and removed,
 *                                    sources signalled, loops woken and run, objects created and
 *                                    freed) while a third thread forks 60 times: every child can
 *                                    use its loop as above and exits within its time limit; in a
 *                                    child, the loops of threads that do not exist there refuse
 *                                    items (rl_loop_add_timer and rl_loop_add_source: a negative
 *                                    errno), and rl_loop_wakeup / rl_loop_stop on them do not wake
 *                                    the parent's loop, whose runs all return on time with no
 *                                    wakeup counted; the forking thread's own runs return on time.
 */
#include "faults.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { /* a child's exit status: one bit per failed check */
    B_TIMER = 1, B_FD = 2, B_SIGNAL = 4, B_FOREIGN = 8, B_THREAD = 16, B_MAIN = 32, B_OTHER = 64
};
static const char *bit_names[] = {"a new timer did not fire", "an fd source was not called",
                                  "a signalled and woken source was not performed",
                                  "a loop of a thread not in the child accepted an item",
                                  "a new thread of the child got no working loop",
                                  "the forking thread's loop is not the child's main loop",
                                  "another check (rl_loop_get_current, a socketpair, a send) failed"};

static void describe_bits(int bits, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 7; i++)
        if (bits & (1 << i)) used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? "; " : "", bit_names[i]);
}

/* Wait for pid until deadline (now_s() scale); kill it then. Returns the status, -1 when killed,
 * -2 when waitpid failed. */
static int reap(pid_t pid, double deadline) {
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0 && errno != EINTR) return -2;
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            return -1;
        }
        nap(0.002);
    }
}

/* ---- What a child checks on the forking thread's loop ---- */

typedef struct {
    atomic_int fired, fd_calls, performed;
} hits_t;

static hits_t H;
static void hit_timer(rl_timer_t *t, void *info) { (void)t, (void)info, atomic_fetch_add(&H.fired, 1); }
static void hit_fd(rl_source_t *s, int fd, unsigned ev, void *info) {
    (void)s, (void)ev, (void)info;
    char buf[64];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
    atomic_fetch_add(&H.fd_calls, 1);
}
static void hit_perform(void *info) { (void)info, atomic_fetch_add(&H.performed, 1); }

static void *child_thread_loop(void *arg) {
    int *ok = arg;
    rl_loop_t *loop = rl_loop_get_current();
    if (!loop) return NULL;
    int before = H.fired;
    rl_timer_t *t = rl_timer_create(rl_time_now(), 0, 0, hit_timer, NULL);
    if (rl_loop_add_timer(loop, t, "T") == 0) rl_run_in_mode("T", 0.5, true);
    rl_release(t);
    *ok = H.fired > before;
    return NULL;
}

static rl_loop_t *child_loop_for_signal;
static rl_source_t *child_signal_source;
static void *child_waker(void *arg) {
    (void)arg;
    nap(0.02);
    rl_source_signal(child_signal_source);
    rl_loop_wakeup(child_loop_for_signal);
    return NULL;
}

/* Runs in a child, on the forking thread, with that thread's loop. inherited: an fd source the
 * loop had before the fork (in a mode the parent does not run, since the parent shares the
 * socket), added to mode here, whose peer is inherited_peer; or NULL. Returns the failure bits. */
static int child_checks(rl_loop_t *loop, const char *mode, rl_source_t *inherited, int inherited_peer,
                        rl_source_t *v0) {
    int bits = 0;
    memset(&H, 0, sizeof H);
    if (rl_loop_get_current() != loop) bits |= B_OTHER;
    if (rl_loop_get_main() != loop) bits |= B_MAIN;
    /* a new timer */
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.01, 0, 0, hit_timer, NULL);
    if (!t || rl_loop_add_timer(loop, t, mode) != 0) bits |= B_TIMER;
    /* a new fd source, and the inherited one */
    int sv[2];
    rl_source_t *f = NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
        f = rl_source_create_fd(sv[0], RL_FD_READABLE, 0, hit_fd, NULL);
        if (!f || rl_loop_add_source(loop, f, mode) != 0) bits |= B_FD;
        if (send(sv[1], "c", 1, 0) != 1) bits |= B_OTHER;
    } else {
        bits |= B_OTHER;
    }
    if (inherited && rl_loop_add_source(loop, inherited, mode) != 0) bits |= B_FD;
    if (inherited && send(inherited_peer, "i", 1, 0) != 1) bits |= B_OTHER;
    /* a signalled source, woken from another thread of the child while the loop sleeps */
    child_loop_for_signal = loop;
    child_signal_source = v0;
    pthread_t waker;
    bool waking = v0 && pthread_create(&waker, NULL, child_waker, NULL) == 0;
    double end = now_s() + 1.5;
    int want_fd = inherited ? 2 : 1;
    while (now_s() < end && !(H.fired && H.fd_calls >= want_fd && (!v0 || H.performed))) rl_run_in_mode(mode, 0.1, false);
    if (waking) pthread_join(waker, NULL);
    if (!H.fired) bits |= B_TIMER;
    if (H.fd_calls < want_fd) bits |= B_FD;
    if (v0 && !H.performed) bits |= B_SIGNAL;
    /* a new thread of the child gets a loop of its own */
    int ok = 0;
    pthread_t th;
    if (pthread_create(&th, NULL, child_thread_loop, &ok) == 0) pthread_join(th, NULL);
    if (!ok) bits |= B_THREAD;
    return bits;
}

/* ---- fork child's loop works / fork child does not reach parent ---- */

typedef struct {
    fcase works, apart;
    rl_loop_t *loop;
    rl_source_t *fdsrc, *v0;
    int sv[2];
    bool in_child;
    pid_t child;
    int child_status;
} single_t;

static single_t G;

/* The parent's run of mode A while its child works: on time, and no wakeup. */
static void parent_run_undisturbed(const char *when) {
    rl_loop_stats_t a, b;
    rl_loop_get_stats(G.loop, &a);
    double t0 = now_s();
    int rc = rl_run_in_mode("A", 0.4, false);
    double took = now_s() - t0;
    rl_loop_get_stats(G.loop, &b);
    FCHECK(&G.apart, rc == RL_RUN_TIMED_OUT && took >= 0.399 && took < 0.7,
           "%s: the parent's 0.4 s run returned %d after %.3f s, expected RL_RUN_TIMED_OUT after 0.4 to 0.7 s (the "
           "child rearmed its timer?)", when, rc, took);
    FCHECK(&G.apart, b.wakeups == a.wakeups,
           "%s: the parent's loop was woken %llu times while its child worked, expected never", when,
           b.wakeups - a.wakeups);
}

static void check_child(const char *when) {
    int status = reap(G.child, now_s() + 4.0);
    char why[400];
    if (status == -1) {
        FCHECK(&G.works, false, "%s: the child hung (killed after 4 s)", when);
    } else if (status < 0 || !WIFEXITED(status)) {
        FCHECK(&G.works, false, "%s: the child died (status 0x%x), expected exit 0", when, status);
    } else if (WEXITSTATUS(status)) {
        describe_bits(WEXITSTATUS(status), why, sizeof why);
        FCHECK(&G.works, false, "%s: in the child, %s", when, why);
    }
}

static void fork_in_callout(rl_timer_t *t, void *info) {
    (void)t, (void)info;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        G.in_child = true;
        alarm(10);
        return; /* back into the run, in the child */
    }
    G.child = pid;
}

static void *single_thread(void *arg) {
    (void)arg;
    G.loop = rl_loop_get_current();
    FCHECK(&G.works, G.loop != NULL, "rl_loop_get_current() returned NULL (errno %d), expected a loop", errno);
    if (!G.loop) return NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, G.sv) < 0) abort();
    rl_timer_t *far = rl_timer_create(rl_time_now() + 1000, 0, 0, hit_timer, NULL);
    G.fdsrc = rl_source_create_fd(G.sv[0], RL_FD_READABLE, 0, hit_fd, NULL);
    rl_source_context_t sc = {NULL, NULL, NULL, NULL, NULL, hit_perform};
    G.v0 = rl_source_create(0, &sc);
    rl_loop_add_timer(G.loop, far, "A");
    rl_loop_add_source(G.loop, G.fdsrc, "I"); /* see child_checks */
    rl_loop_add_source(G.loop, G.v0, "A");
    rl_run_in_mode("A", 0.01, false); /* registered, armed, waited once */

    /* 1. outside a run */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        _exit(child_checks(G.loop, "A", G.fdsrc, G.sv[1], G.v0));
    }
    G.child = pid;
    parent_run_undisturbed("fork outside a run");
    check_child("fork outside a run");

    /* 2. from inside a timer callout of a running loop */
    rl_timer_t *forker = rl_timer_create(rl_time_now(), 0, 0, fork_in_callout, NULL);
    rl_loop_add_timer(G.loop, forker, "A");
    rl_release(forker);
    rl_run_in_mode("A", 0, false); /* the callout forks; both return here */
    if (G.in_child) {
        int bits = child_checks(G.loop, "A", G.fdsrc, G.sv[1], G.v0);
        _exit(bits);
    }
    parent_run_undisturbed("fork inside a callout");
    check_child("fork inside a callout");

    /* the parent's loop still works */
    memset(&H, 0, sizeof H);
    rl_source_signal(G.v0);
    rl_loop_add_source(G.loop, G.fdsrc, "A");
    if (send(G.sv[1], "p", 1, 0) != 1) abort();
    rl_timer_t *t = rl_timer_create(rl_time_now(), 0, 0, hit_timer, NULL);
    rl_loop_add_timer(G.loop, t, "A");
    rl_release(t);
    double end = now_s() + 1;
    while (now_s() < end && !(H.fired && H.fd_calls && H.performed)) rl_run_in_mode("A", 0.05, false);
    FCHECK(&G.works, H.fired && H.fd_calls && H.performed,
           "the parent's loop after the forks, within 1 s: timer fired %d, fd source called %d, signalled source "
           "performed %d times, expected each at least once", (int)H.fired, (int)H.fd_calls, (int)H.performed);
    rl_timer_invalidate(far);
    rl_release(far);
    rl_source_invalidate(G.fdsrc);
    rl_release(G.fdsrc);
    rl_source_invalidate(G.v0);
    rl_release(G.v0);
    close(G.sv[0]);
    close(G.sv[1]);
    return NULL;
}

/* ---- fork 60 children under load ---- */

enum { CHILDREN = 60 };

typedef struct {
    fcase load, dead, apart;
    atomic_bool stop;
    rl_loop_t *hammer_loop, *waiter_loop;
    atomic_bool hammer_ready, waiter_ready;
    rl_source_t *hammer_src;
} load_t;

static load_t L;

static void noop_timer(rl_timer_t *t, void *info) { (void)t, (void)info; }
static void noop_perform(void *info) { (void)info; }

static void *hammer(void *arg) {
    (void)arg;
    /* Retained: cross_hammer and the forker use it from other threads, past this thread's exit. */
    L.hammer_loop = rl_retain(rl_loop_get_current());
    FCHECK(&L.load, L.hammer_loop != NULL, "hammer: rl_loop_get_current() returned NULL (errno %d), expected a loop",
           errno);
    rl_source_context_t sc = {NULL, NULL, NULL, NULL, NULL, noop_perform};
    L.hammer_src = rl_source_create(0, &sc);
    rl_loop_add_source(L.hammer_loop, L.hammer_src, "H");
    atomic_store(&L.hammer_ready, true);
    char mode[8];
    for (long i = 0; !atomic_load(&L.stop); i++) {
        snprintf(mode, sizeof mode, "H%ld", i % 5);
        rl_timer_t *t = rl_timer_create(rl_time_now() + 0.001 * (double)(i % 3), i % 2 ? 0.001 : 0, 0, noop_timer, NULL);
        rl_loop_add_timer(L.hammer_loop, t, mode);
        rl_loop_add_timer(L.hammer_loop, t, RL_COMMON_MODES);
        rl_source_t *s = rl_source_create(0, &sc);
        rl_loop_add_source(L.hammer_loop, s, mode);
        rl_source_signal(s);
        rl_run_in_mode(mode, 0, false);
        rl_timer_set_next_fire_date(t, rl_time_now() + 0.5);
        rl_loop_remove_timer(L.hammer_loop, t, mode);
        rl_timer_invalidate(t);
        rl_source_invalidate(s);
        rl_release(t);
        rl_release(s);
        char *d = i % 50 == 0 ? rl_loop_copy_description(L.hammer_loop) : NULL;
        free(d);
    }
    return NULL;
}

/* From another thread: into the hammer's loop (its lock, the item and source stripes). */
static void *cross_hammer(void *arg) {
    (void)arg;
    while (!atomic_load(&L.hammer_ready)) nap(0.001);
    for (long i = 0; !atomic_load(&L.stop); i++) {
        rl_source_signal(L.hammer_src);
        rl_loop_wakeup(L.hammer_loop);
        rl_timer_t *t = rl_timer_create(rl_time_now() + 0.01, 0, 0, noop_timer, NULL);
        rl_loop_add_timer(L.hammer_loop, t, "H0");
        rl_loop_remove_timer(L.hammer_loop, t, "H0");
        rl_release(t);
        if (i % 64 == 0) sched_yield();
    }
    return NULL;
}

/* Sleeps in its loop for the whole test: nobody in the parent wakes it. */
static void *waiter(void *arg) {
    (void)arg;
    L.waiter_loop = rl_loop_get_current();
    FCHECK(&L.apart, L.waiter_loop != NULL, "waiter: rl_loop_get_current() returned NULL (errno %d), expected a loop",
           errno);
    rl_timer_t *far = rl_timer_create(rl_time_now() + 1000, 0, 0, noop_timer, NULL);
    rl_loop_add_timer(L.waiter_loop, far, "W");
    atomic_store(&L.waiter_ready, true);
    rl_loop_stats_t a, b;
    rl_loop_get_stats(L.waiter_loop, &a);
    int stalled = 0, stopped = 0;
    double worst = 0;
    while (!atomic_load(&L.stop)) {
        double t0 = now_s();
        int rc = rl_run_in_mode("W", 0.2, false);
        double took = now_s() - t0;
        if (rc == RL_RUN_STOPPED) stopped++;
        if (took > 0.5) stalled++;
        if (took > worst) worst = took;
    }
    rl_loop_get_stats(L.waiter_loop, &b);
    FCHECK(&L.apart, b.wakeups == a.wakeups,
           "the parent's sleeping loop was woken %llu times, expected never (by children's wakeups?)",
           b.wakeups - a.wakeups);
    FCHECK(&L.apart, stopped == 0, "%d of the parent's runs were stopped, expected none (by children's rl_loop_stop?)",
           stopped);
    FCHECK(&L.apart, stalled == 0, "%d of the parent's 0.2 s runs took over 0.5 s (worst %.3f s), expected none",
           stalled, worst);
    rl_timer_invalidate(far);
    rl_release(far);
    return NULL;
}

static int load_child(rl_loop_t *loop, rl_source_t *v0) {
    alarm(10);
    int bits = 0;
    /* the loops of threads that are not in the child */
    rl_timer_t *t = rl_timer_create(rl_time_now(), 0, 0, noop_timer, NULL);
    int rc = rl_loop_add_timer(L.hammer_loop, t, "X");
    if (rc >= 0) bits |= B_FOREIGN;
    rc = rl_loop_add_timer(L.waiter_loop, t, "W");
    if (rc >= 0) bits |= B_FOREIGN;
    rl_release(t);
    rl_source_context_t sc = {NULL, NULL, NULL, NULL, NULL, noop_perform};
    rl_source_t *s = rl_source_create(0, &sc);
    rc = rl_loop_add_source(L.waiter_loop, s, "W");
    if (rc >= 0) bits |= B_FOREIGN;
    rl_release(s);
    rl_source_signal(L.hammer_src);
    rl_loop_wakeup(L.hammer_loop);
    rl_loop_wakeup(L.waiter_loop);
    rl_loop_stop(L.waiter_loop);
    bits |= child_checks(loop, "F", NULL, -1, v0);
    return bits;
}

static void *forker(void *arg) {
    (void)arg;
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t *far = rl_timer_create(rl_time_now() + 1000, 0, 0, noop_timer, NULL);
    rl_loop_add_timer(loop, far, "F");
    rl_source_context_t sc = {NULL, NULL, NULL, NULL, NULL, hit_perform};
    rl_source_t *v0 = rl_source_create(0, &sc);
    rl_loop_add_source(loop, v0, "F");
    pid_t pids[CHILDREN];
    double forked_at[CHILDREN];
    int late_runs = 0;
    for (int i = 0; i < CHILDREN; i++) {
        fflush(NULL);
        pids[i] = fork();
        if (pids[i] == 0) _exit(load_child(loop, v0));
        forked_at[i] = now_s();
        double t0 = now_s();
        rl_run_in_mode("F", 0.02, false); /* the parent's own loop, between forks */
        if (now_s() - t0 > 0.3) late_runs++;
    }
    FCHECK(&L.apart, late_runs == 0,
           "%d of the forking thread's 0.02 s runs took over 0.3 s, expected none (stalled by a child?)", late_runs);
    int ok = 0, hung = 0, died = 0, bit_counts[7] = {0};
    for (int i = 0; i < CHILDREN; i++) {
        int status = reap(pids[i], forked_at[i] + 4.0 > now_s() + 0.5 ? forked_at[i] + 4.0 : now_s() + 0.5);
        if (status == -1) hung++;
        else if (status < 0 || !WIFEXITED(status)) died++;
        else if (WEXITSTATUS(status) == 0) ok++;
        else
            for (int b = 0; b < 7; b++) bit_counts[b] += (WEXITSTATUS(status) >> b) & 1;
    }
    fr_stat("children", CHILDREN);
    fr_stat("children_ok", ok);
    FCHECK(&L.load, hung == 0, "%d of %d children hung (killed after 4 s), expected none", hung, CHILDREN);
    FCHECK(&L.load, died == 0, "%d of %d children died of a signal, expected none", died, CHILDREN);
    for (int b = 0; b < 7; b++) {
        if (!bit_counts[b]) continue;
        if (b == 3) FCHECK(&L.dead, false, "in %d children, %s", bit_counts[b], bit_names[b]);
        else FCHECK(&L.load, false, "in %d children, %s", bit_counts[b], bit_names[b]);
    }
    rl_timer_invalidate(far);
    rl_release(far);
    rl_source_invalidate(v0);
    rl_release(v0);
    return NULL;
}

void part_fork(void) {
    fcase_init(&G.works, "fork child's loop works with kernel objects of its own");
    fcase_init(&G.apart, "fork child does not reach its parent's loop (no early wakeup, no stalled run)");
    pthread_t th;
    pthread_create(&th, NULL, single_thread, NULL);
    if (!join_within(th, 20)) {
        FCHECK(&G.works, false, "the forking thread did not end within 20 s (hung)");
        fcase_report(&G.works);
        fcase_report(&G.apart);
        _exit(0);
    }
    fcase_report(&G.works);
    fcase_report(&G.apart);

    fcase_init(&L.load, "fork 60 times while other threads hammer the library: every child works and exits");
    fcase_init(&L.dead, "fork: in a child, loops of threads not there refuse items");
    fcase_init(&L.apart, "fork: children's wakeups, stops and timers do not reach the parent's loops");
    pthread_t h1, h2, w, f;
    pthread_create(&h1, NULL, hammer, NULL);
    pthread_create(&h2, NULL, cross_hammer, NULL);
    pthread_create(&w, NULL, waiter, NULL);
    while (!atomic_load(&L.hammer_ready) || !atomic_load(&L.waiter_ready)) nap(0.001);
    nap(0.05);
    pthread_create(&f, NULL, forker, NULL);
    bool joined = join_within(f, 30);
    atomic_store(&L.stop, true);
    joined = join_within(h1, 5) && join_within(h2, 5) && join_within(w, 5) && joined;
    FCHECK(&L.load, joined, "a thread of the parent did not end in time (hung)");
    fcase_report(&L.load);
    fcase_report(&L.dead);
    fcase_report(&L.apart);
    if (!joined) _exit(0);
    rl_release(L.hammer_src);
    rl_release(L.hammer_loop);
}
