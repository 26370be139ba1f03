/*
 * sigproc.c - signal and child-exit sources under fault injection: every fault point that
 * creating and adding them passes (the source's allocation, the process-wide signal eventfd, the
 * pidfd, the loop's link and fd table, the signal link list) is made to fail once ("single") and
 * from there on ("persistent"), with a pidfd and with the SIGCHLD fallback.
 *
 * Each run is a scenario on a fresh thread: create a signal source and a process source (for a
 * child forked beforehand) and add them, with the faults armed; disarm; make whatever failed
 * again; then a raise() and the child's exit must each be reported exactly once. Checked: a call
 * that failed reported ENOMEM, EMFILE or ENFILE (NULL and errno, or the negative value); after
 * the thread's exit every context was retained and released once, no fd is left open, SIGUSR1
 * and SIGCHLD have their dispositions back, and the child was reaped by the library.
 */
#include "faults.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

FAULTS_HIDDEN void rl_process_force_fallback(bool on);

typedef struct {
    fcase *c;
    long arm_after, arm_count; /* -1, 0: unarmed (counting) */
    bool fallback;
    long points;               /* counted by an unarmed run */
    atomic_int retains, releases, signals, exits;
    int status;
    pid_t child;
} run_t;

static const void *ctx_retain(const void *info) {
    atomic_fetch_add(&((run_t *)info)->retains, 1);
    return info;
}
static void ctx_release(const void *info) { atomic_fetch_add(&((run_t *)info)->releases, 1); }

static void on_signal(rl_source_t *s, int signo, unsigned count, void *info) {
    (void)s, (void)signo;
    atomic_fetch_add(&((run_t *)info)->signals, (int)count);
}

static void on_exit_cb(rl_source_t *s, int pid, int status, void *info) {
    (void)s, (void)pid;
    run_t *r = info;
    r->status = status;
    atomic_fetch_add(&r->exits, 1);
}

static bool fault_errno(int e) { return e == ENOMEM || e == EMFILE || e == ENFILE; }

/* Create (or NULL after a fault) one of the two sources, and add it; NULL when either failed. */
static rl_source_t *make(run_t *r, bool process, const char *what) {
    rl_context_t ctx = { r, ctx_retain, ctx_release };
    errno = 0;
    rl_source_t *s = process ? rl_source_create_process(r->child, 0, on_exit_cb, &ctx)
                             : rl_source_create_signal(SIGUSR1, 0, on_signal, &ctx);
    if (!s) {
        FCHECK(r->c, fault_errno(errno), "%s: NULL with errno %d", what, errno);
        return NULL;
    }
    int rc = rl_loop_add_source(rl_loop_get_current(), s, RL_DEFAULT_MODE);
    if (rc) {
        FCHECK(r->c, fault_errno(-rc), "%s: add gave %d", what, rc);
        FCHECK(r->c, !rl_loop_contains_source(rl_loop_get_current(), s, RL_DEFAULT_MODE), "%s: failed add kept it", what);
        rl_release(s);
        return NULL;
    }
    return s;
}

static void *scenario(void *arg) {
    run_t *r = arg;
    rl_loop_t *loop = rl_loop_get_current();
    if (!loop) {
        fcase_fail(r->c, __FILE__, __LINE__, "no loop");
        return NULL;
    }
    sigset_t take;
    sigemptyset(&take);
    sigaddset(&take, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &take, NULL);
    rl_process_force_fallback(r->fallback);
    rl_fault_arm(r->arm_after, r->arm_count);
    rl_source_t *sig = make(r, false, "signal source");
    rl_source_t *proc = make(r, true, "process source");
    if (r->arm_count == 0) r->points = rl_fault_points();
    rl_fault_arm(-1, 0);
    if (!sig) sig = make(r, false, "signal source, unarmed");
    if (!proc) proc = make(r, true, "process source, unarmed");
    rl_process_force_fallback(false);
    if (!sig || !proc) {
        fcase_fail(r->c, __FILE__, __LINE__, "unarmed creation failed");
        if (sig) rl_release(sig);
        if (proc) rl_release(proc);
        return NULL;
    }
    raise(SIGUSR1);
    double end = now_s() + 5;
    while ((atomic_load(&r->signals) < 1 || atomic_load(&r->exits) < 1) && now_s() < end)
        rl_run_in_mode(RL_DEFAULT_MODE, 0.05, false);
    FCHECK(r->c, atomic_load(&r->signals) == 1, "signal reported %d times", atomic_load(&r->signals));
    FCHECK(r->c, atomic_load(&r->exits) == 1, "exit reported %d times", atomic_load(&r->exits));
    FCHECK(r->c, WIFEXITED(r->status) && WEXITSTATUS(r->status) == 5, "status %#x", r->status);
    char report[512];
    FCHECK(r->c, verify_loop(loop, report, sizeof report) == 0, "verify: %s", report);
    rl_source_invalidate(sig);
    rl_release(sig);
    rl_release(proc);
    return NULL;
}

static bool same_handler(int signo, const struct sigaction *before) {
    struct sigaction now;
    return sigaction(signo, NULL, &now) == 0 && now.sa_handler == before->sa_handler;
}

static void one_run(fcase *c, bool fallback, long after, long count, long *points) {
    run_t r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.fallback = fallback;
    r.arm_after = after;
    r.arm_count = count;
    struct sigaction usr1, chld;
    sigaction(SIGUSR1, NULL, &usr1);
    sigaction(SIGCHLD, NULL, &chld);
    int fds = count_open_fds();
    fflush(stdout);
    fflush(stderr);
    r.child = fork();
    if (r.child == 0) _exit(5);
    pthread_t th;
    if (pthread_create(&th, NULL, scenario, &r) != 0) {
        fcase_fail(c, __FILE__, __LINE__, "pthread_create");
        return;
    }
    if (!join_within(th, 20)) {
        fcase_fail(c, __FILE__, __LINE__, "point %ld: the scenario hung", after);
        return;
    }
    int status;
    FCHECK(c, waitpid(r.child, &status, WNOHANG) < 0 && errno == ECHILD, "point %ld: child not reaped by the library", after);
    FCHECK(c, atomic_load(&r.retains) == atomic_load(&r.releases), "point %ld: %d retains, %d releases", after,
           atomic_load(&r.retains), atomic_load(&r.releases));
    FCHECK(c, count_open_fds() == fds, "point %ld: %d fds open, %d before", after, count_open_fds(), fds);
    FCHECK(c, same_handler(SIGUSR1, &usr1), "point %ld: SIGUSR1 not restored", after);
    FCHECK(c, same_handler(SIGCHLD, &chld), "point %ld: SIGCHLD not restored", after);
    if (points) *points = r.points;
}

void part_sigproc(void) {
    for (int fallback = 0; fallback < 2; fallback++) {
        char name[64];
        snprintf(name, sizeof name, "sigproc sweep (%s)", fallback ? "SIGCHLD fallback" : "pidfd");
        fcase c;
        fcase_init(&c, name);
        long points = 0;
        one_run(&c, fallback, -1, 0, &points);
        FCHECK(&c, points > 0, "the unarmed run passed no fault point");
        for (long k = 0; k < points && c.failures == 0; k++) {
            one_run(&c, fallback, k, 1, NULL);
            one_run(&c, fallback, k, -1, NULL);
        }
        fr_stat(fallback ? "points_fallback" : "points_pidfd", points);
        fcase_report(&c);
    }
}
