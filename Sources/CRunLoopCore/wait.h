/*
 * wait.h - the backend seam: what a loop asks of the kernel in order to wait, as Redis's ae.c asks
 * its aeApi* functions. A set of watched fds, a wakeup any thread may post, a timer armed at an
 * absolute date, and the process's signal eventfd. wait_epoll.c is its one implementation, and the
 * only file that knows epoll, timerfd and eventfd. It knows nothing of loops: internal.h includes
 * it for the layout of rl_wait, which a loop holds, and the loop's files drive it (run.c waits,
 * wake.c posts and arms, fd_table.c watches, backend.c hands its host fd out).
 */
#ifndef RL_WAIT_H
#define RL_WAIT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#ifndef RL_HIDDEN
#define RL_HIDDEN __attribute__((visibility("hidden")))
#endif

/* Events taken from one epoll_wait: enough that a busy server's ready fds fit in one pass. */
enum { RL_WAIT_MAX_EVENTS = 256 };

/* One ready fd, as a wait reports it. */
typedef struct {
    int fd;
    uint32_t gen;    /* the registration's generation */
    unsigned events; /* RL_FD_* */
} rl_wait_event;

typedef struct {
    int epfd, eventfd, timerfd;
    int sigfd;       /* the process's signal eventfd when watched (signal.c's), else -1 */
    int hostfd;      /* an epoll set watching epfd, for a host loop (backend.c); -1 until asked */
    double armed;    /* the timerfd's deadline, INFINITY when disarmed */
} rl_wait;

/* Dates at or past this many seconds of CLOCK_MONOTONIC (about 31,700 years of uptime) are never
 * reached: a timer due then never wakes the loop. Every time the API accepts is a double; this is
 * where they saturate. */
#define RL_TIME_NEVER 1e12

RL_HIDDEN int rl_wait_init(rl_wait *w);
RL_HIDDEN void rl_wait_destroy(rl_wait *w);
/* Watch fd for events (RL_FD_*; 0: only errors and hang-ups, edge-triggered) tagged gen; add
 * says whether fd is new to the set. 0 or -errno (-ENOENT, -EBADF: the file at fd is not the one
 * registered). */
RL_HIDDEN int rl_wait_watch(rl_wait *w, int fd, unsigned events, uint32_t gen, bool add);
/* Replace the epoll set by a new one watching only the eventfd and timerfd; with all, replace
 * those two as well (after fork, the old ones are shared with the parent). The caller registers
 * its fds again. 0, or -errno: then, with all, the old objects are closed all the same (the child
 * must not touch its parent's) and the loop cannot wait any more; without, nothing changed. */
RL_HIDDEN int rl_wait_renew(rl_wait *w, bool all);
/* The host's fd: an epoll set whose only member is the wait set (level-triggered), so it is
 * readable while the wait set has an event ready, and its number outlives rl_wait_renew's new
 * sets. Made at the first call; the fd, or -errno (EMFILE, ENFILE, ENOMEM). */
RL_HIDDEN int rl_wait_host_fd(rl_wait *w);
RL_HIDDEN void rl_wait_unwatch(rl_wait *w, int fd);
/* Arm the timerfd at an absolute rl_time_now() date (INFINITY disarms), if it differs. */
RL_HIDDEN void rl_wait_arm(rl_wait *w, double deadline);
/* Wait for events (block: until one comes; else just poll). Stores the ready fds in events and
 * returns how many; *woken says whether a posted wakeup was among what came back (the timerfd's
 * expiry is not reported: due timers are found by their dates). accept (NULL: none) are signals
 * the thread takes while it blocks, blocked in its mask or not (epoll_pwait). */
RL_HIDDEN int rl_wait_for_events(rl_wait *w, bool block, rl_wait_event *events, int max, bool *woken,
                                 const sigset_t *accept);
/* Post a wakeup (any thread). */
RL_HIDDEN void rl_wait_post_wakeup(rl_wait *w);
/* Watch the process's signal eventfd, edge-triggered and never read (like the wakeup eventfd),
 * or stop; renewals watch it again. 0 or -errno. */
RL_HIDDEN int rl_wait_watch_signals(rl_wait *w, int fd);
RL_HIDDEN void rl_wait_unwatch_signals(rl_wait *w);

#endif
