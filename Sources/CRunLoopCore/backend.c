/*
 * backend.c - driving a loop from another event loop (a host: GLib, Qt, a game loop). The host
 * polls one fd, with the timeout the loop gives it, and runs a pass when the fd is readable or
 * the timeout has passed. The loop itself never blocks then: the host does, on its behalf.
 *
 * The fd is an epoll set whose only member is the loop's wait set (wait_epoll.c), so it is
 * readable exactly while the wait set has an event ready: a wakeup's eventfd edge, the timerfd's
 * expiry, a ready fd. A second set rather than the wait set itself, because the loop replaces its
 * wait set when it drops a stale registration (fd_table.c), and the host keeps the number it was
 * given (a host that watches it with epoll keeps its registration too).
 *
 * The query, rl_loop_get_backend_timeout, is the loop's "about to sleep" step, taken for the
 * host:
 *   1. poll the wait set, which takes the edge-triggered events already reported (the eventfd,
 *      timerfd and signal eventfd edges, which the loop never reads): they are stale now, and
 *      would keep the host's fd readable (a signal delivered before the poll is found by its
 *      generation instead). Fd events stay level-triggered, so the pass still sees them; of
 *      those, the ones no source of the mode wants are parked (fd_table.c), so fds of other modes
 *      do not wake the host (CF waits on a port set per mode, so they never wake it either);
 *   2. claim SLEEPING (wake.c): from then on, the first wakeup posted writes the eventfd, and the
 *      host's fd becomes readable, exactly as it would end the loop's own wait; a PENDING found
 *      says a wakeup came since the last pass began: a pass is due now;
 *   3. under the lock, look at what a pass would do at once (queued blocks, signalled sources of
 *      the mode, a ready fd a source of the mode wants), arm the timerfd for the mode's next
 *      timer (as a wait in that mode would), and remember the mode (loop->host_mode), so that
 *      another thread's timer change rearms it and a signalled source it adds to the mode wakes
 *      the host. Also in a callout (a host nested in a run of another mode): the host waits for
 *      its mode, not the run's, until the run's next wait takes the timerfd back (run.c). A run
 *      starting clears it too.
 * The next pass begins by clearing the wake state, as every pass does.
 *
 * An empty mode has no pass to run (rl_run_in_mode returns RL_RUN_FINISHED at once), so its query
 * drops a PENDING it finds rather than report a pass due that never comes (the host would spin),
 * and answers "never"; the SLEEPING it claimed still turns the wakeup that comes with a new item
 * into a readable fd.
 */
#include "internal.h"
#include "wait.h"
#include "fd_table.h"
#include "wake.h"

#include <errno.h>
#include <math.h>

int rl_loop_get_backend_fd(rl_loop_t *loop) {
    if (!loop) return -EINVAL;
    rl_loop_lock_mutex(loop);
    int fd = loop->dead ? -EINVAL : rl_wait_host_fd(&loop->wait);
    rl_loop_unlock(loop);
    return fd;
}

static double fail(int err) {
    errno = err;
    return NAN;
}

double rl_loop_get_backend_timeout(rl_loop_t *loop, const char *name) {
    if (!loop || rl_mode_check_name(name) || rl_mode_name_is_common(name)) return fail(EINVAL);
    /* Another thread's poll could take the edge that is to end this loop's own wait. */
    if (!rl_loop_is_current(loop)) return fail(EPERM);
    if (atomic_load(&loop->dead)) return fail(EINVAL);

    rl_loop_lock_mutex(loop);
    /* Created if new: a timer another thread adds to it later must find the host's mode. */
    rl_mode *mode = rl_mode_find(loop, name, true);
    if (!mode) {
        rl_loop_unlock(loop);
        return fail(ENOMEM);
    }
    /* Also in a callout (a host nested in a run): the host waits for this mode, not the outer
     * run's, until that run's next wait takes the timerfd back (run.c). */
    loop->host_mode = mode;
    /* Before the poll: an fd given back its full registration is reported by it. */
    rl_fd_table_unpark_for(loop, mode);
    rl_wait_event events[RL_WAIT_MAX_EVENTS];
    bool woken;
    int n = rl_wait_for_events(&loop->wait, false, events, RL_WAIT_MAX_EVENTS, &woken, NULL);
    bool posted = rl_wake_claim_for_host(loop);
    bool due = n > 0 && rl_fd_table_settle(loop, mode, events, n);
    double date = rl_wake_deadline(loop, mode); /* the mode's wake date: a host's wait has no run deadline */
    if (rl_mode_is_empty(mode)) {
        rl_wake_drop_pending(loop);
        due = false;
    } else {
        /* A signal delivered before the poll above: the poll took its eventfd edge, and the
         * handler had moved the generation before it wrote (signal.c), so it is found by that. */
        due = due || rl_signals_arrived(loop) || posted || rl_blocks_pending(loop, mode) ||
              rl_sources_signalled_in(loop, mode);
    }
    rl_wait_arm(&loop->wait, date);
    rl_loop_unlock(loop);

    if (due) return 0;
    if (!(date < RL_TIME_NEVER)) return -1;
    double left = date - rl_time_now();
    return left > 0 ? left : 0;
}
