/*
 * t_processes.c - child-exit sources: the wait status of a child that exits or is killed, a child
 * that exited before its source was made, hundreds of children at once (each reported exactly
 * once), one source in two loops, the fallback without pidfds (forced through the internal
 * switch), bad pids, running out of fds, and what removal leaves behind (no fd, no reaping).
 *
 * Children are forked and wait on a pipe until the test lets them go, so that a test decides
 * when they exit. No test waits for any child but its own, by pid.
 */
#include "ttrace.h"
#include "../../Sources/CRunLoopCore/internal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEF RL_DEFAULT_MODE

/* A child that exits with code once the write end of gate is closed (or at once without a gate). */
static pid_t child_exiting(int code, const int gate[2]) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (gate) {
            close(gate[1]);
            char b;
            while (read(gate[0], &b, 1) < 0 && errno == EINTR) {}
        }
        _exit(code);
    }
    return pid;
}

/* Wait until pid has exited, without reaping it. */
static bool wait_zombie(pid_t pid) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int rc;
    do rc = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT);
    while (rc < 0 && errno == EINTR);
    return rc == 0 && si.si_pid == pid;
}

typedef struct {
    atomic_int calls;
    int pid, status;
    bool valid_in_callback;
    bool stop;
} proc_log;

static void proc_cb(rl_source_t *source, int pid, int status, void *info) {
    proc_log *l = info;
    l->pid = pid;
    l->status = status;
    l->valid_in_callback = rl_source_is_valid(source);
    atomic_fetch_add(&l->calls, 1);
    if (l->stop) rl_loop_stop(rl_loop_get_current());
}

static rl_source_t *add_process(pid_t pid, proc_log *log) {
    rl_context_t c = { log, NULL, NULL };
    rl_source_t *s = rl_source_create_process(pid, 0, proc_cb, &c);
    if (s && rl_loop_add_source(rl_loop_get_current(), s, DEF) != 0) {
        rl_release(s);
        return NULL;
    }
    return s;
}

/* Run until the log has a call (at most 10 s). */
static void run_until_called(proc_log *log) {
    double end = rl_time_now() + 10;
    while (atomic_load(&log->calls) == 0 && rl_time_now() < end) rl_run_in_mode(DEF, 0.1, false);
}

static bool reaped_already(pid_t pid) {
    int status;
    return waitpid(pid, &status, WNOHANG) < 0 && errno == ECHILD;
}

RLT_TEST(process_exit_code_is_reported_once_and_the_child_reaped) {
    int gate[2];
    RLT_CHECK_EQ(pipe2(gate, O_CLOEXEC), 0);
    pid_t pid = child_exiting(7, gate);
    RLT_CHECK(pid > 0);
    close(gate[0]);
    proc_log log = {0};
    rl_source_t *s = add_process(pid, &log);
    RLT_CHECK(s != NULL);
    struct sigaction now;
    RLT_CHECK_EQ(sigaction(SIGCHLD, NULL, &now), 0);
    RLT_CHECK(now.sa_handler == SIG_DFL); /* with a pidfd, no SIGCHLD handler */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.02, false), RL_RUN_TIMED_OUT); /* still running */
    RLT_CHECK_EQ(atomic_load(&log.calls), 0);
    close(gate[1]);
    run_until_called(&log);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK_EQ(log.pid, pid);
    RLT_CHECK(WIFEXITED(log.status));
    RLT_CHECK_EQ(WEXITSTATUS(log.status), 7);
    RLT_CHECK(!log.valid_in_callback); /* invalidated before its callback: it fires once */
    RLT_CHECK(!rl_source_is_valid(s));
    RLT_CHECK(reaped_already(pid));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.02, false), RL_RUN_FINISHED); /* its mode is empty now */
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    rl_release(s);
}

RLT_TEST(process_killed_by_a_signal_is_reported_as_such) {
    int gate[2];
    RLT_CHECK_EQ(pipe2(gate, O_CLOEXEC), 0);
    pid_t pid = child_exiting(0, gate);
    RLT_CHECK(pid > 0);
    close(gate[0]);
    proc_log log = {0};
    rl_source_t *s = add_process(pid, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(kill(pid, SIGKILL), 0);
    run_until_called(&log);
    close(gate[1]);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK(WIFSIGNALED(log.status));
    RLT_CHECK_EQ(WTERMSIG(log.status), SIGKILL);
    RLT_CHECK(!WIFEXITED(log.status));
    rl_release(s);
}

RLT_TEST(process_that_exited_before_its_source_is_reported) {
    pid_t pid = child_exiting(3, NULL);
    RLT_CHECK(pid > 0);
    RLT_CHECK(wait_zombie(pid));
    proc_log log = {0};
    rl_source_t *s = add_process(pid, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 5.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK(WIFEXITED(log.status));
    RLT_CHECK_EQ(WEXITSTATUS(log.status), 3);
    RLT_CHECK(reaped_already(pid));
    rl_release(s);
}

/* ---- many at once ------------------------------------------------------------------------------ */

enum { MANY = 250 };

typedef struct {
    pid_t pids[MANY];
    atomic_int calls[MANY];
    int status[MANY];
    atomic_int total;
    bool wrong_pid;
} many_log;

typedef struct { many_log *log; int index; } many_ref;

static void many_cb(rl_source_t *source, int pid, int status, void *info) {
    (void)source;
    many_ref *r = info;
    if (r->log->pids[r->index] != pid) r->log->wrong_pid = true;
    r->log->status[r->index] = status;
    atomic_fetch_add(&r->log->calls[r->index], 1);
    atomic_fetch_add(&r->log->total, 1);
}

static void free_ref(const void *info) { free((void *)info); }

static const char *many_children(bool fallback) {
    static char why[160];
    static many_log log;
    memset(&log, 0, sizeof log);
    rl_process_force_fallback(fallback);
    int gate[2];
    if (pipe2(gate, O_CLOEXEC)) return "pipe";
    for (int i = 0; i < MANY; i++) {
        log.pids[i] = child_exiting(i & 0x7f, gate);
        if (log.pids[i] <= 0) return "fork";
    }
    close(gate[0]);
    rl_source_t *sources[MANY];
    for (int i = 0; i < MANY; i++) {
        many_ref *r = malloc(sizeof *r);
        if (!r) return "malloc";
        r->log = &log;
        r->index = i;
        rl_context_t c = { r, NULL, free_ref };
        sources[i] = rl_source_create_process(log.pids[i], 0, many_cb, &c);
        if (!sources[i]) {
            snprintf(why, sizeof why, "source %d: %s", i, strerror(errno));
            free(r);
            return why;
        }
        if (rl_loop_add_source(rl_loop_get_current(), sources[i], DEF)) return "add";
    }
    rl_process_force_fallback(false);
    /* Half of them exit before the loop runs at all, the rest while it runs. */
    close(gate[1]);
    double end = rl_time_now() + 30;
    while (atomic_load(&log.total) < MANY && rl_time_now() < end) rl_run_in_mode(DEF, 0.1, false);
    for (int i = 0; i < MANY; i++) {
        if (atomic_load(&log.calls[i]) != 1) {
            snprintf(why, sizeof why, "child %d reported %d times", i, atomic_load(&log.calls[i]));
            return why;
        }
        if (!WIFEXITED(log.status[i]) || WEXITSTATUS(log.status[i]) != (i & 0x7f)) {
            snprintf(why, sizeof why, "child %d: status %#x", i, log.status[i]);
            return why;
        }
        if (!reaped_already(log.pids[i])) return "a child was not reaped";
        rl_release(sources[i]);
    }
    if (log.wrong_pid) return "a callback got another child's pid";
    return NULL;
}

RLT_TEST(process_hundreds_of_children_are_each_reported_exactly_once) {
    (void)rl_loop_get_current();
    int fds = tt_count_dir("/proc/self/fd");
    const char *why = many_children(false);
    if (why) rlt_fail(__FILE__, __LINE__, "%s", why);
    if (why) return;
    RLT_CHECK_EQ(tt_count_dir("/proc/self/fd"), fds); /* every pidfd closed */
}

RLT_TEST(process_fallback_without_pidfd_reports_hundreds_of_children) {
    struct sigaction before, after;
    RLT_CHECK_EQ(sigaction(SIGCHLD, NULL, &before), 0);
    const char *why = many_children(true);
    rl_process_force_fallback(false);
    if (why) rlt_fail(__FILE__, __LINE__, "%s", why);
    if (why) return;
    RLT_CHECK_EQ(sigaction(SIGCHLD, NULL, &after), 0);
    RLT_CHECK(after.sa_handler == before.sa_handler); /* the last one gone put SIGCHLD back */
}

RLT_TEST(process_fallback_reports_a_child_that_exited_before_and_one_killed) {
    rl_process_force_fallback(true);
    pid_t early = child_exiting(9, NULL);
    int gate[2];
    RLT_CHECK_EQ(pipe2(gate, O_CLOEXEC), 0);
    pid_t late = child_exiting(0, gate);
    close(gate[0]);
    RLT_CHECK(early > 0 && late > 0);
    RLT_CHECK(wait_zombie(early));
    proc_log a = {0}, b = {0};
    rl_source_t *sa = add_process(early, &a), *sb = add_process(late, &b);
    rl_process_force_fallback(false);
    RLT_CHECK(sa && sb);
    RLT_CHECK_EQ(rl_source_get_fd(sa), -1);
    struct sigaction now;
    RLT_CHECK_EQ(sigaction(SIGCHLD, NULL, &now), 0);
    RLT_CHECK(now.sa_handler != SIG_DFL); /* the fallback watches SIGCHLD */
    run_until_called(&a);
    RLT_CHECK_EQ(atomic_load(&a.calls), 1);
    RLT_CHECK(WIFEXITED(a.status) && WEXITSTATUS(a.status) == 9);
    RLT_CHECK_EQ(atomic_load(&b.calls), 0);
    RLT_CHECK_EQ(kill(late, SIGKILL), 0);
    run_until_called(&b);
    close(gate[1]);
    RLT_CHECK_EQ(atomic_load(&b.calls), 1);
    RLT_CHECK(WIFSIGNALED(b.status) && WTERMSIG(b.status) == SIGKILL);
    RLT_CHECK(reaped_already(early) && reaped_already(late));
    rl_release(sa);
    rl_release(sb);
}

/* ---- two loops --------------------------------------------------------------------------------- */

static void *run_other(void *arg) {
    proc_log *log = arg;
    double end = rl_time_now() + 10;
    while (atomic_load(&log->calls) == 0 && rl_time_now() < end) rl_run_in_mode(DEF, 0.05, false);
    return NULL;
}

typedef struct { rl_source_t *s; proc_log *log; atomic_bool added; } other_add;

static void *add_and_run_other(void *arg) {
    other_add *o = arg;
    rl_loop_add_source(rl_loop_get_current(), o->s, DEF);
    atomic_store(&o->added, true);
    return run_other(o->log);
}

RLT_TEST(process_source_in_two_loops_reaps_and_reports_once) {
    int gate[2];
    RLT_CHECK_EQ(pipe2(gate, O_CLOEXEC), 0);
    pid_t pid = child_exiting(4, gate);
    close(gate[0]);
    RLT_CHECK(pid > 0);
    proc_log log = {0};
    rl_source_t *s = add_process(pid, &log);
    RLT_CHECK(s != NULL);
    other_add o = { s, &log, false };
    pthread_t th = tt_spawn(add_and_run_other, &o);
    while (!atomic_load(&o.added)) tt_sleep(0.001);
    close(gate[1]);
    run_until_called(&log);
    tt_join(th);
    tt_sleep(0.05);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK(WIFEXITED(log.status) && WEXITSTATUS(log.status) == 4);
    rl_release(s);
}

/* ---- bad input, running out, what is left behind ---------------------------------------------- */

RLT_TEST(process_bad_pids_and_callbacks_are_refused) {
    proc_log log = {0};
    rl_context_t c = { &log, NULL, NULL };
    errno = 0;
    RLT_CHECK(rl_source_create_process(0, 0, proc_cb, &c) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_source_create_process(-1, 0, proc_cb, &c) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    errno = 0;
    RLT_CHECK(rl_source_create_process(getpid(), 0, proc_cb, &c) == NULL); /* ourselves */
    RLT_CHECK_EQ(errno, ECHILD);
    errno = 0;
    RLT_CHECK(rl_source_create_process(getppid(), 0, proc_cb, &c) == NULL); /* our parent */
    RLT_CHECK_EQ(errno, ECHILD);
    errno = 0;
    RLT_CHECK(rl_source_create_process(1, 0, proc_cb, &c) == NULL);
    RLT_CHECK_EQ(errno, ECHILD);
    pid_t pid = child_exiting(0, NULL);
    RLT_CHECK(pid > 0);
    errno = 0;
    RLT_CHECK(rl_source_create_process(pid, 0, NULL, &c) == NULL);
    RLT_CHECK_EQ(errno, EINVAL);
    int status;
    RLT_CHECK_EQ(waitpid(pid, &status, 0), pid);
    errno = 0;
    RLT_CHECK(rl_source_create_process(pid, 0, proc_cb, &c) == NULL); /* reaped already */
    RLT_CHECK_EQ(errno, ECHILD);
    RLT_CHECK_EQ(atomic_load(&log.calls), 0);
}

RLT_TEST(process_removed_before_exit_leaves_no_fd_and_reaps_nothing) {
    (void)rl_loop_get_current();
    int fds = tt_count_dir("/proc/self/fd");
    int gate[2];
    RLT_CHECK_EQ(pipe2(gate, O_CLOEXEC), 0);
    pid_t pid = child_exiting(6, gate);
    close(gate[0]);
    RLT_CHECK(pid > 0);
    proc_log log = {0};
    rl_source_t *s = add_process(pid, &log);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(tt_count_dir("/proc/self/fd"), fds + 2); /* the gate's write end and the pidfd */
    RLT_CHECK_EQ(rl_source_get_fd(s), -1); /* the pidfd is not shown */
    RLT_CHECK_EQ(rl_loop_remove_source(rl_loop_get_current(), s, DEF), 0);
    rl_release(s);
    close(gate[1]);
    RLT_CHECK_EQ(tt_count_dir("/proc/self/fd"), fds);
    RLT_CHECK(wait_zombie(pid));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.02, false), RL_RUN_FINISHED);
    int status = 0;
    RLT_CHECK_EQ(waitpid(pid, &status, 0), pid); /* still ours to reap: the library did not */
    RLT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 6);
    RLT_CHECK_EQ(atomic_load(&log.calls), 0);
}

RLT_TEST(process_invalidated_while_referenced_closes_its_pidfd) {
    (void)rl_loop_get_current();
    int fds = tt_count_dir("/proc/self/fd");
    pid_t pid = child_exiting(0, NULL);
    RLT_CHECK(pid > 0);
    RLT_CHECK(wait_zombie(pid));
    tt_count_t count = {0};
    rl_context_t c = { &count, tt_count_retain, tt_count_release };
    rl_source_t *s = rl_source_create_process(pid, 0, proc_cb, &c);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(atomic_load(&count.retains), 1);
    RLT_CHECK_EQ(tt_count_dir("/proc/self/fd"), fds + 1);
    rl_source_invalidate(s);
    RLT_CHECK_EQ(tt_count_dir("/proc/self/fd"), fds);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), s, DEF), -EINVAL);
    rl_release(s);
    RLT_CHECK_EQ(atomic_load(&count.releases), 1);
    int status;
    RLT_CHECK_EQ(waitpid(pid, &status, 0), pid);
}

/* In a forked child: with RLIMIT_NOFILE reached, creation fails with EMFILE and leaves nothing;
 * the loop keeps working, and with an fd free again creation works. */
static int emfile_child(void) {
    rl_loop_t *loop = rl_loop_get_current();
    if (!loop) return 10;
    pid_t kid = child_exiting(2, NULL);
    if (kid <= 0) return 11;
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim)) return 12;
    int fds = tt_count_dir("/proc/self/fd");
    lim.rlim_cur = (rlim_t)fds + 8;
    if (setrlimit(RLIMIT_NOFILE, &lim)) return 13;
    int fill[64], n = 0;
    while (n < 64 && (fill[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) n++;
    if (errno != EMFILE) return 14;
    proc_log log = {0};
    rl_context_t c = { &log, NULL, NULL };
    errno = 0;
    if (rl_source_create_process(kid, 0, proc_cb, &c) != NULL) return 15;
    if (errno != EMFILE) return 16;
    rl_source_t *keep = tt_add_source(DEF, 0, "k");
    if (!keep) return 17;
    rl_source_signal(keep);
    if (rl_run_in_mode(DEF, 0, true) != RL_RUN_HANDLED_SOURCE) return 18;
    close(fill[--n]);
    rl_source_t *s = rl_source_create_process(kid, 0, proc_cb, &c);
    if (!s) return 19;
    if (rl_loop_add_source(loop, s, DEF)) return 20;
    double end = rl_time_now() + 10;
    while (atomic_load(&log.calls) == 0 && rl_time_now() < end) rl_run_in_mode(DEF, 0.05, false);
    if (atomic_load(&log.calls) != 1 || !WIFEXITED(log.status) || WEXITSTATUS(log.status) != 2) return 21;
    return 0;
}

RLT_TEST(process_out_of_fds_fails_with_emfile_and_the_loop_keeps_working) {
    (void)rl_loop_get_current();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    RLT_CHECK(pid >= 0);
    if (pid == 0) _exit(emfile_child());
    int status = 0;
    RLT_CHECK_EQ(waitpid(pid, &status, 0), pid);
    RLT_CHECK(WIFEXITED(status));
    RLT_CHECK_EQ(WEXITSTATUS(status), 0);
}

/* ---- what else in the process reaps, forks, sleeps ------------------------------------------ */

/* SIGCHLD ignored: the kernel reaps, in the fallback too, so the status is lost (-1). */
static int ignored_sigchld_child(void) {
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    if (sigaction(SIGCHLD, &ign, NULL)) return 10;
    int gate[2];
    if (pipe2(gate, O_CLOEXEC)) return 11;
    pid_t kid = child_exiting(5, gate);
    close(gate[0]);
    rl_process_force_fallback(true);
    proc_log log = {0};
    rl_source_t *s = add_process(kid, &log);
    rl_process_force_fallback(false);
    if (!s) return 12;
    close(gate[1]);
    run_until_called(&log);
    if (atomic_load(&log.calls) != 1) return 13;
    if (log.status != -1) return 14;
    if (!reaped_already(kid)) return 15;
    rl_release(s);
    return 0;
}

RLT_TEST(process_fallback_with_sigchld_ignored_keeps_the_kernel_reaping) {
    tt_report_child(tt_in_child(ignored_sigchld_child));
}

/* A forked copy of the process inherits the source and its loop: the exit is the creator's. */
RLT_TEST(process_source_inherited_by_a_forked_child_does_not_fire_there) {
    int gate[2];
    RLT_CHECK_EQ(pipe2(gate, O_CLOEXEC), 0);
    pid_t worker = child_exiting(8, gate);
    RLT_CHECK(worker > 0);
    close(gate[0]);
    proc_log log = {0};
    rl_source_t *s = add_process(worker, &log);
    RLT_CHECK(s != NULL);
    fflush(stdout);
    fflush(stderr);
    pid_t copy = fork();
    RLT_CHECK(copy >= 0);
    if (copy == 0) {
        close(gate[1]);
        double end = rl_time_now() + 3;
        while (rl_source_is_valid(s) && rl_time_now() < end) rl_run_in_mode(DEF, 0.1, true);
        /* It saw the exit (invalidated), and said nothing of it. */
        _exit(!rl_source_is_valid(s) && atomic_load(&log.calls) == 0 ? 0 : 1);
    }
    close(gate[1]);
    run_until_called(&log);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK(WIFEXITED(log.status) && WEXITSTATUS(log.status) == 8);
    int status = 0;
    RLT_CHECK_EQ(waitpid(copy, &status, 0), copy);
    RLT_CHECK(WIFEXITED(status));
    RLT_CHECK_EQ(WEXITSTATUS(status), 0);
    rl_release(s);
}

static atomic_int fallback_calls;
static _Atomic(rl_loop_t *) fallback_loop;
static void fallback_cb(rl_source_t *source, int pid, int status, void *info) {
    (void)source, (void)pid, (void)status, (void)info;
    atomic_fetch_add(&fallback_calls, 1);
}
static void *sleep_in_loop(void *arg) {
    (void)arg;
    rl_source_t *keep = tt_add_source(DEF, 0, "k");
    (void)keep;
    atomic_store(&fallback_loop, rl_retain(rl_loop_get_current())); /* woken after this thread is gone */
    double end = rl_time_now() + 10;
    while (atomic_load(&fallback_calls) == 0 && rl_time_now() < end) rl_run_in_mode(DEF, 10.0, true);
    return NULL;
}

/* Fallback, every thread blocking SIGCHLD: only the sleeping loop can take it. */
static int fallback_added_to_sleeping_loop_child(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int gate[2];
    if (pipe2(gate, O_CLOEXEC)) return 10;
    pid_t kid = child_exiting(1, gate);
    close(gate[0]);
    pthread_t th = tt_spawn(sleep_in_loop, NULL);
    while (!atomic_load(&fallback_loop)) tt_sleep(0.001);
    if (!tt_wait_sleeping(atomic_load(&fallback_loop), 5)) return 11;
    rl_process_force_fallback(true);
    rl_source_t *s = rl_source_create_process(kid, 0, fallback_cb, NULL);
    rl_process_force_fallback(false);
    if (!s) return 12;
    if (rl_loop_add_source(atomic_load(&fallback_loop), s, DEF)) return 14;
    tt_sleep(0.2);
    if (!tt_wait_sleeping(atomic_load(&fallback_loop), 5)) return 15;
    close(gate[1]);
    double end = rl_time_now() + 3;
    while (atomic_load(&fallback_calls) == 0 && rl_time_now() < end) tt_sleep(0.005);
    int calls = atomic_load(&fallback_calls);
    rl_loop_wakeup(atomic_load(&fallback_loop));
    tt_join(th);
    rl_release(atomic_load(&fallback_loop));
    rl_release(s);
    return calls == 1 ? 0 : 16;
}

RLT_TEST(process_fallback_source_added_to_a_sleeping_loop_takes_sigchld) {
#if defined(__SANITIZE_THREAD__)
    return; /* TSan: no thread in the child of a threaded fork */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return;
#endif
#endif
    tt_report_child(tt_in_child(fallback_added_to_sleeping_loop_child));
}

/* A readable pidfd that yields nothing to reap (forced here; a child ptraced by another process
 * in life): the loop sleeps meanwhile, and reports the child once it can be reaped. */
RLT_TEST(process_readable_pidfd_with_nothing_to_reap_does_not_spin_the_loop) {
    pid_t pid = child_exiting(12, NULL);
    RLT_CHECK(pid > 0);
    RLT_CHECK(wait_zombie(pid));
    rl_process_force_unreapable(true);
    proc_log log = {0};
    rl_source_t *s = add_process(pid, &log);
    RLT_CHECK(s != NULL);
    rl_loop_stats_t before, after;
    RLT_CHECK_EQ(rl_loop_get_stats(rl_loop_get_current(), &before), 0);
    double end = rl_time_now() + 0.3;
    while (rl_time_now() < end) rl_run_in_mode(DEF, 0.3, true);
    RLT_CHECK_EQ(rl_loop_get_stats(rl_loop_get_current(), &after), 0);
    rl_process_force_unreapable(false);
    RLT_CHECK_EQ(atomic_load(&log.calls), 0);
    RLT_CHECK(after.passes - before.passes < 200); /* a pass per retry, not one per microsecond */
    run_until_called(&log);
    RLT_CHECK_EQ(atomic_load(&log.calls), 1);
    RLT_CHECK(WIFEXITED(log.status) && WEXITSTATUS(log.status) == 12);
    RLT_CHECK(reaped_already(pid));
    rl_release(s);
}
