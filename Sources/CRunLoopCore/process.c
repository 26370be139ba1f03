/*
 * process.c - child-exit sources: a pidfd watched as an fd source, or, where the kernel has no
 * pidfd_open, SIGCHLD watched as a signal source (signal.c); either way the child is reaped once,
 * under the source's lock, and the callback runs once, after the source is invalidated.
 *
 * A pidfd is readable from the moment its process has exited, and stays readable (level) until
 * the pidfd is closed, which also covers a child that exited before the source was made. It
 * names one process for good, so no pid reuse can make the source reap a stranger. The fallback
 * has no such guard beyond the rule that only the library reaps the pid (crunloop.h).
 */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif

static atomic_bool forced_fallback, forced_unreapable;

void rl_process_force_fallback(bool on) { atomic_store(&forced_fallback, on); }
void rl_process_force_unreapable(bool on) { atomic_store(&forced_unreapable, on); }

/* A pidfd for pid, or -1 with errno (ENOSYS: use the fallback). */
static int open_pidfd(int pid) {
    if (atomic_load(&forced_fallback)) {
        errno = ENOSYS;
        return -1;
    }
    if (rl_fault_fails(EMFILE)) return -1;
    return (int)syscall(SYS_pidfd_open, pid, 0); /* glibc 2.36 has a wrapper; older ones do not */
}

/* The wait status waitpid would have given for what waitid reported. */
static int wait_status(const siginfo_t *si) {
    switch (si->si_code) {
    case CLD_EXITED: return (si->si_status & 0xff) << 8;
    case CLD_KILLED: return si->si_status & 0x7f;
    case CLD_DUMPED: return (si->si_status & 0x7f) | 0x80;
    default: return -1; /* WEXITED reports nothing else */
    }
}

/* Reap the child if it has exited and nobody has yet: true with its status (-1 if something else
 * reaped it first). */
static bool reap(rl_source_t *s, int *status) {
    bool done = false;
    rl_source_lock(s);
    if (!s->reaped && !atomic_load(&forced_unreapable)) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int rc;
        do {
            rc = s->pidfd >= 0 ? waitid((idtype_t)P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG) : -1;
            /* Linux 5.3 has pidfds but not P_PIDFD (EINVAL); the fallback has no pidfd. */
            if (s->pidfd < 0 || (rc < 0 && errno == EINVAL)) rc = waitid(P_PID, (id_t)s->pid, &si, WEXITED | WNOHANG);
        } while (rc < 0 && errno == EINTR);
        if (rc < 0 || si.si_pid != 0) { /* exited (or, ECHILD, reaped by someone else) */
            *status = rc < 0 ? -1 : wait_status(&si);
            s->reaped = done = true;
        }
    }
    rl_source_unlock(s);
    return done;
}

/* Reaped: stop for good first (a nested run in the callback must not find the pidfd readable
 * again), then call back. The caller holds a reference across it. */
static bool finish(rl_source_t *s) {
    if (getpid() != s->owner) {
        /* Inherited through fork: the child is the creator's to reap and report, not ours (our
         * waitid would only say ECHILD). Stop watching it here, silently. */
        rl_source_invalidate(s);
        return true;
    }
    int status;
    if (!reap(s, &status)) return false;
    rl_source_invalidate(s);
    __RL_IS_CALLING_OUT_TO_A_PROCESS_CALLBACK_FUNCTION__(s->on.process, s, s->pid, status, s->context.info);
    return true;
}

static const void *retain_source(const void *info) { return rl_retain((void *)info); }
static void release_source(const void *info) { rl_release((void *)info); }

static void unpark(rl_timer_t *timer, void *info) {
    (void)timer;
    rl_source_t *s = info;
    rl_source_lock(s);
    s->parked = false;
    rl_source_unlock(s);
    if (atomic_load(&s->valid)) rl_source_watch_fd(s, RL_FD_READABLE);
}

/* The pidfd is readable, so the child has exited, yet waitid gives nothing: a tracer (ptrace) of
 * another process must wait for it first, or (Linux 5.3, P_PID) someone else reaped it and its
 * pid went to a running child. The pidfd stays readable (level): watched, it would make every
 * pass find it again, at full CPU. So stop watching it and look again after a pause doubling from
 * 10 ms to 1 s, by a timer in the loop and mode that saw it. Without a timer (ENOMEM) it stays
 * watched: a spin, but nothing lost. */
static void park(rl_source_t *s) {
    rl_loop_t *loop = rl_loop_get_current();
    char *mode = loop ? rl_loop_copy_current_mode(loop) : NULL;
    double pause = 1.0;
    rl_source_lock(s);
    bool now = mode && !s->parked && !s->reaped;
    if (now) {
        s->parked = true;
        if (s->parks < 7) pause = 0.01 * (double)(1u << s->parks++);
    }
    rl_source_unlock(s);
    if (now) {
        rl_source_watch_fd(s, 0);
        rl_context_t c = { s, retain_source, release_source };
        rl_timer_t *t = rl_timer_create(rl_time_now() + pause, 0, 0, unpark, &c);
        if (!t || rl_loop_add_timer(loop, t, mode)) unpark(t, s);
        rl_release(t);
    }
    free(mode);
}

static void pidfd_ready(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)fd, (void)events, (void)info;
    if (!finish(s)) park(s);
}

bool rl_process_perform(rl_source_t *s) {
    /* SIGCHLD came (or the source just joined a loop): account for it, then look. */
    atomic_store(&s->seen, rl_signal_deliveries(SIGCHLD));
    return finish(s);
}

rl_source_t *rl_source_create_process(int pid, long order, rl_process_callback_t callback,
                                      const rl_context_t *context) {
    if (pid <= 0 || !callback) {
        errno = EINVAL;
        return NULL;
    }
    /* Is it an unreaped child of ours? WNOWAIT leaves it as it is. */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int rc;
    do rc = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) return NULL; /* ECHILD */
    rl_source_t *s = rl_source_new(order);
    if (!s) return NULL;
    s->kind = RL_SOURCE_PROCESS;
    s->pid = pid;
    s->owner = getpid();
    s->pidfd = open_pidfd(pid);
    if (s->pidfd >= 0) {
        s->version = 1;
        s->fd = s->pidfd;
        atomic_init(&s->events, RL_FD_READABLE);
        s->callback = pidfd_ready;
    } else if (errno == ENOSYS || errno == EPERM) {
        if ((rc = rl_signal_acquire(SIGCHLD))) {
            s->kind = RL_SOURCE_PLAIN; /* holds nothing yet */
            rl_source_destroy(s);
            errno = -rc;
            return NULL;
        }
        s->signo = SIGCHLD;
        /* One behind, so that the first loop it joins looks at once: it may have exited already. */
        atomic_init(&s->seen, rl_signal_deliveries(SIGCHLD) - 1);
    } else {
        int err = errno; /* EMFILE, ENFILE, ENOMEM; ESRCH cannot happen to an unreaped child */
        s->kind = RL_SOURCE_PLAIN;
        rl_source_destroy(s);
        errno = err;
        return NULL;
    }
    s->on.process = callback;
    rl_source_take_context(s, context);
    return s;
}

void rl_process_end(rl_source_t *s) {
    /* Under the lock: a callout of another loop may be about to reap through the pidfd, and
     * nothing is reaped after this, even by a source a pass took before. */
    rl_source_lock(s);
    int fd = s->pidfd;
    s->pidfd = -1;
    s->reaped = true;
    rl_source_unlock(s);
    if (fd >= 0) close(fd);
    if (s->signo) rl_signal_release(s->signo);
}
