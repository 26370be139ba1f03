/*
 * wait_epoll.c - the loop's wait set: one epoll instance, one eventfd for wakeups, one timerfd
 * for every deadline (the earliest timer and the run's timeout). The only file that knows epoll.
 *
 * Both the eventfd and the timerfd are registered edge-triggered and never read: epoll queues
 * an edge on every eventfd write and every timer expiry, and timerfd_settime resets the expiry
 * count, so the wait path costs one epoll_wait and nothing else. (An eventfd's counter would
 * saturate after 2^64-2 writes; the writer then resets it, see rl_wait_post_wakeup.)
 *
 * Deadlines go through an absolute CLOCK_MONOTONIC timerfd rather than epoll_wait's timeout:
 * a timerfd is not stretched by the thread's timer slack (50 us by default) and has nanosecond
 * resolution, and an absolute date needs no recomputation after EINTR.
 */
#include "wait.h"
#include "alloc.h"    /* its fault points */
#include "crunloop.h" /* RL_FD_* */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* epoll's data for a registration: the fd and its generation; the eventfd, the timerfd and the
 * process's signal eventfd carry these negative "fds". */
#define TAG(fd, gen) (((uint64_t)(gen) << 32) | (uint32_t)(fd))
enum { WAKEUP = -2, TIMER = -3, SIGNALS = -4 };

static void fatal(const char *what) {
    fprintf(stderr, "crunloop: %s failed: %s\n", what, strerror(errno));
    abort();
}

/* A new epoll set watching the eventfd and timerfd, and the signal eventfd when sigfd >= 0
 * (edge-triggered, never read). */
static int new_set(int eventfd, int timerfd, int sigfd) {
    int epfd = rl_fault_fails(EMFILE) ? -1 : epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return -errno;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = TAG(WAKEUP, 0)};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, eventfd, &ev) == 0) {
        ev.data.u64 = TAG(TIMER, 0);
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, timerfd, &ev) == 0) {
            ev.data.u64 = TAG(SIGNALS, 0);
            if (sigfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, sigfd, &ev) == 0) return epfd;
        }
    }
    int err = errno;
    close(epfd);
    return -err;
}

static void close_all(rl_wait *w) {
    if (w->hostfd >= 0) close(w->hostfd);
    if (w->epfd >= 0) close(w->epfd);
    if (w->eventfd >= 0) close(w->eventfd);
    if (w->timerfd >= 0) close(w->timerfd);
    w->epfd = w->eventfd = w->timerfd = w->hostfd = -1;
}

int rl_wait_watch_signals(rl_wait *w, int fd) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = TAG(SIGNALS, 0)};
    /* An eventfd written before is readable: the ADD queues an edge, so the loop looks once. */
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) return -errno;
    w->sigfd = fd;
    return 0;
}

void rl_wait_unwatch_signals(rl_wait *w) {
    if (w->sigfd >= 0) (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->sigfd, NULL); /* EBADF once closed */
    w->sigfd = -1;
}

int rl_wait_init(rl_wait *w) {
    w->epfd = w->hostfd = -1;
    w->sigfd = -1;
    w->armed = INFINITY;
    w->eventfd = rl_fault_fails(EMFILE) ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    w->timerfd = rl_fault_fails(EMFILE) ? -1 : timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    int rc = w->eventfd < 0 || w->timerfd < 0 ? -errno : new_set(w->eventfd, w->timerfd, w->sigfd);
    if (rc < 0) {
        close_all(w);
        return rc;
    }
    w->epfd = rc;
    return 0;
}

void rl_wait_destroy(rl_wait *w) {
    close_all(w);
    w->sigfd = -1; /* signal.c's */
}

int rl_wait_renew(rl_wait *w, bool all) {
    if (!all) {
        int epfd = new_set(w->eventfd, w->timerfd, w->sigfd);
        if (epfd < 0) return epfd;
        /* The host's set watches the new one from now on (closing the old one drops it there). */
        struct epoll_event ev = {.events = EPOLLIN};
        if (w->hostfd >= 0 && epoll_ctl(w->hostfd, EPOLL_CTL_ADD, epfd, &ev) < 0) {
            int err = errno;
            close(epfd);
            return -err;
        }
        close(w->epfd);
        w->epfd = epfd;
        return 0;
    }
    /* After fork: these objects are shared with the parent; the child only lets go of them (the
     * signal eventfd, signal.c's, has been replaced at its number already). */
    close_all(w);
    int sigfd = w->sigfd;
    int rc = rl_wait_init(w);
    w->sigfd = sigfd;
    if (rc == 0 && sigfd >= 0 && (rc = rl_wait_watch_signals(w, sigfd))) close_all(w);
    return rc;
}

int rl_wait_host_fd(rl_wait *w) {
    if (w->hostfd >= 0) return w->hostfd;
    int fd = rl_fault_fails(EMFILE) ? -1 : epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) return -errno;
    /* Level-triggered: the host's poll asks the wait set whether an event is ready, and neither
     * takes nor hides one from the loop's own epoll_wait. */
    struct epoll_event ev = {.events = EPOLLIN};
    if (epoll_ctl(fd, EPOLL_CTL_ADD, w->epfd, &ev) < 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    return w->hostfd = fd;
}

static uint32_t to_epoll(unsigned events) {
    uint32_t e = 0;
    if (events & RL_FD_READABLE) e |= EPOLLIN | EPOLLRDHUP;
    if (events & RL_FD_WRITABLE) e |= EPOLLOUT;
    /* Nothing asked for: errors and hang-ups are still reported, so report them once only. */
    if (!e) e = EPOLLET;
    return e;
}

int rl_wait_watch(rl_wait *w, int fd, unsigned events, uint32_t gen, bool add) {
    struct epoll_event ev = {.events = to_epoll(events), .data.u64 = TAG(fd, gen)};
    if (epoll_ctl(w->epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev) == 0) return 0;
    /* Adding a file the set already holds: an earlier registration of the same file at the same
     * number that could not be deleted (the fd was closed at the time, and has been dup2'd back
     * since). Take it over. A MOD that fails is never turned into an ADD: ENOENT there means the
     * file at fd is not the one registered, and the caller must know (fd_table.c). */
    if (add && errno == EEXIST && epoll_ctl(w->epfd, EPOLL_CTL_MOD, fd, &ev) == 0) return 0;
    return -errno;
}

void rl_wait_unwatch(rl_wait *w, int fd) {
    /* Fails harmlessly (EBADF, ENOENT) when the fd was already closed. */
    (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void rl_wait_arm(rl_wait *w, double deadline) {
    /* Past RL_TIME_NEVER a date is "never": no machine stays up that long, and converting it to
     * time_t would overflow (1e300 once became a negative tv_sec and an abort). */
    if (!(deadline < RL_TIME_NEVER)) deadline = INFINITY;
    if (deadline == w->armed || w->timerfd < 0) return;
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (deadline < INFINITY) {
        if (deadline <= 0) deadline = 1e-9; /* zero would disarm */
        double s = floor(deadline);
        its.it_value.tv_sec = (time_t)s;
        its.it_value.tv_nsec = (long)((deadline - s) * 1e9);
        if (its.it_value.tv_nsec >= 1000000000L) its.it_value.tv_nsec = 999999999L;
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
    }
    if (timerfd_settime(w->timerfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) fatal("timerfd_settime");
    w->armed = deadline;
}

int rl_wait_for_events(rl_wait *w, bool block, rl_wait_event *events, int max, bool *woken,
                       const sigset_t *accept) {
    struct epoll_event ev[RL_WAIT_MAX_EVENTS];
    if (max > RL_WAIT_MAX_EVENTS) max = RL_WAIT_MAX_EVENTS;
    sigset_t mask;
    if (block && accept) { /* the thread's mask, less the signals to take while it sleeps */
        pthread_sigmask(SIG_SETMASK, NULL, &mask);
        for (int signo = 1; signo < NSIG; signo++)
            if (sigismember(accept, signo) == 1) sigdelset(&mask, signo);
    }
    int n;
    /* Deadlines are absolute in the timerfd: after EINTR (a signal handled meanwhile, whose
     * eventfd edge then ends the next wait) just wait again. */
    do n = block && accept ? epoll_pwait(w->epfd, ev, max, -1, &mask) : epoll_wait(w->epfd, ev, max, block ? -1 : 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) fatal("epoll_wait"); /* EBADF, EINVAL: our own epoll fd was closed behind our back */
    int out = 0;
    *woken = false;
    for (int i = 0; i < n; i++) {
        uint32_t e = ev[i].events;
        int fd = (int)(int32_t)(uint32_t)ev[i].data.u64;
        if (fd < 0) { /* the eventfd or the timerfd */
            *woken |= fd == WAKEUP;
            continue;
        }
        events[out].fd = fd;
        events[out].gen = (uint32_t)(ev[i].data.u64 >> 32);
        events[out].events = (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP) ? RL_FD_READABLE : 0) |
                             (e & EPOLLOUT ? RL_FD_WRITABLE : 0) | (e & (EPOLLERR | EPOLLHUP) ? RL_FD_ERROR : 0);
        out++;
    }
    return out;
}

void rl_wait_post_wakeup(rl_wait *w) {
    uint64_t one = 1;
    while (write(w->eventfd, &one, sizeof one) < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) { /* counter saturated: nobody reads it, so reset it */
            uint64_t drain;
            if (read(w->eventfd, &drain, sizeof drain) < 0 && errno != EAGAIN) fatal("read(eventfd)");
            continue;
        }
        fatal("write(eventfd)");
    }
}
