/*
 * run.c - rl_run_in_mode: CFRunLoop's pass, phase by phase, and the run's exit checks. Each
 * phase (observers, blocks, signalled sources, timers, fd sources: each in its own file) detaches
 * what it will call (retaining it) with the loop locked, then calls out with nothing locked, so
 * callouts may add, remove, invalidate or rearm anything, themselves included, and may run the
 * loop again. How the loop sleeps and is woken is wake.c's.
 */
#include "internal.h"
#include "wait.h"
#include "fd_table.h"
#include "wake.h"

#include <errno.h>
#include <math.h>

/* Longer than this is "no timeout" (CF's limit, about 16 years). */
#define RL_TIMEOUT_LIMIT 504911232.0
#define RL_WAIT_BATCH RL_WAIT_MAX_EVENTS

/* Observer, block and signalled-source phases with nothing to do cost a load or two each, not a
 * call. Each says whether it may have called out (then what the pass read under the lock before
 * may be stale: a callout can add and remove anything). */
static inline bool notify(rl_loop_t *loop, rl_run_frame *run, unsigned activity) {
    if (!(atomic_load_explicit(&run->mode->observer_mask, memory_order_relaxed) & activity)) return false;
    rl_observers_notify(loop, run, activity);
    return true;
}

static inline bool blocks(rl_loop_t *loop, rl_run_frame *run) {
    if (!rl_blocks_may_be_pending(loop, run->mode)) return false;
    rl_blocks_run(loop, run);
    return true;
}

/* Returns whether a source was performed; *called_out whether the phase ran at all. Signals
 * delivered since the last look first become signalled sources (signal.c): one load when none
 * came, and nothing at all for a loop that watches no signal. */
static inline bool signalled_sources(rl_loop_t *loop, rl_run_frame *run, bool *called_out) {
    if (rl_signals_arrived(loop)) rl_signals_take(loop);
    if (!rl_sources_may_be_signalled(loop)) return false;
    *called_out = true;
    return rl_sources_perform_signalled(loop, run);
}

/* What a pass that only polls needs from the loop's locked state: whether the epoll set watches
 * any fd (else there is nothing to ask the kernel), and the date of the mode's earliest timer
 * (else the timer phase has nothing to look at). Read under the lock; current until something
 * calls out, as far as this thread is concerned (another thread's change made meanwhile is one
 * made after the pass looked). */
typedef struct {
    bool watching_fds;
    double earliest;
} poll_state;

static inline void read_poll_state(rl_loop_t *loop, rl_mode *mode, poll_state *state) {
    state->watching_fds = atomic_load_explicit(&loop->fds.in_set, memory_order_relaxed) > 0;
    state->earliest = rl_timers_earliest(mode);
}

/* The same without the lock when there is nothing to read: no fd watched and no timer in the
 * mode (the usual state of a loop busy with signalled sources and blocks). As of the last change
 * another thread made under the lock, which is all a locked read would say too. */
static inline bool poll_state_is_idle(rl_loop_t *loop, rl_mode *mode, poll_state *state) {
    if (atomic_load_explicit(&loop->fds.in_set, memory_order_acquire) ||
        atomic_load_explicit(&mode->timer_items, memory_order_acquire))
        return false;
    state->watching_fds = false;
    state->earliest = __builtin_inf();
    return true;
}

static void pop_frame(rl_loop_t *loop, rl_run_frame *run) {
    pthread_mutex_lock(&loop->lock);
    loop->run = run->outer;
    if (run->outer) rl_fd_table_unpark_for(loop, run->outer->mode);
    pthread_mutex_unlock(&loop->lock);
    rl_ready_vec_free(&run->sources);
    rl_ptrvec_free(&run->notify);
}

static bool stop_requested(rl_run_frame *run) {
    return atomic_load_explicit(&run->stopped, memory_order_relaxed) && atomic_exchange(&run->stopped, false);
}

/* Block in epoll_wait, or just poll; store the ready fds in events. Returns how many. A poll
 * takes state (read under the lock since the last callout) as current, or reads it; any wait
 * leaves in state->earliest the date from which the timer phase must look at the heap: the
 * earliest timer's after a poll, -INFINITY (look now) after blocking, as other threads may have
 * changed the timers meanwhile (that is what woke the loop, maybe). */
static int wait_for_events(rl_loop_t *loop, rl_run_frame *run, bool poll, bool state_current,
                           poll_state *state, rl_wait_event *events) {
    bool block = false, accepting = false;
    double deadline = 0;
    sigset_t accept;
    if (!poll || !(state_current || poll_state_is_idle(loop, run->mode, state))) {
        pthread_mutex_lock(&loop->lock);
        /* A host's query made in a callout may have parked fds for its own mode, and made its
         * mode the one other threads' timer changes arm the timerfd for: this run takes both
         * back. */
        loop->host_mode = NULL;
        rl_fd_table_unpark_for(loop, run->mode);
        rl_loop_maybe_bias(loop);
        read_poll_state(loop, run->mode, state);
        if (!poll) {
            deadline = rl_wake_deadline(loop, run->mode); /* loop->run is run, and no host waits */
            /* A block queued for this mode must run before the loop sleeps, and a stop be seen:
             * each comes with a wakeup, which this pass's start may have cleared (wake.c). Both
             * are set under the lock. */
            block = !rl_blocks_pending(loop, run->mode) &&
                    !atomic_load_explicit(&run->stopped, memory_order_relaxed);
            if (block && !(deadline < RL_TIME_NEVER)) deadline = INFINITY;
            /* A date already gone (a loop that falls behind its timers, or a timeout that ran
             * out during the pass): poll, and leave the timerfd alone, whose arming for a past
             * date would cost a timerfd_settime every pass. */
            if (block && rl_time_now() >= deadline) block = false;
            /* Arm for the earliest of the mode's timers (within tolerances) and the run's
             * timeout, but only for a wait: a poll finds due timers by their dates, so a loop
             * that polls (a pass per frame, say) adds and fires timers with no timerfd_settime,
             * which costs ~18 us on a VM. */
            if (block) rl_wait_arm(&loop->wait, deadline);
            /* A loop watching signals takes them while it sleeps, whatever its thread blocks. */
            if (block && atomic_load_explicit(&loop->signal_watch, memory_order_relaxed)) {
                accept = loop->signal_accept;
                accepting = true;
            }
        }
        pthread_mutex_unlock(&loop->lock);
    }
    /* A poll with no fd in the set has nothing to ask the kernel: due timers are found by their
     * dates, and wakeups matter only to a wait. This saves a system call per pass on a busy
     * loop. (An edge left queued for the eventfd or timerfd just ends a later wait early.) */
    if (!block && !state->watching_fds) return 0;

    if (block) block = rl_wake_try_sleep(loop, deadline);
    double before = block ? rl_time_now() : 0;
    bool woken;
    int n = rl_wait_for_events(&loop->wait, block, events, RL_WAIT_BATCH, &woken, accepting ? &accept : NULL);
    /* (Written by this thread only: fd_table.c.) */
    if (__builtin_expect(loop->fds.stale_seen, 0) && n == 0) rl_fd_table_stale_gone(loop);
    /* Woken for queued work with fds ready too: the work first (fd_table.c). A later wait that
     * returns fd events ends the deferral (so it never happens twice in a row). */
    if (block && woken && n) n = rl_fd_table_defer(loop, run->mode, events, n);
    else if (n) loop->fds.deferred = false;
    if (block) {
        rl_wake_end_sleep(loop);
        state->earliest = -INFINITY;
        RL_COUNT(loop, waits, 1);
        double after = rl_time_now();
        loop->time = after;
        RL_COUNT(loop, time_waiting, after - before);
    }
    if (woken) RL_COUNT(loop, wakeups, 1);
    return n;
}

/* The timer phase: fire what is due, in order. Looks at the heap (which takes the lock) only when
 * the earliest date the wait left is due; with no timer in the mode, not even the clock is read.
 * Returns false when a due timer could not be taken (out of memory). */
static inline bool timers(rl_loop_t *loop, rl_run_frame *run, double earliest) {
    if (earliest == INFINITY || (earliest > -INFINITY && earliest > rl_time_now())) return true;
    return rl_timers_fire_due(loop, run);
}

/* The passes of one run, until an exit condition (CFRunLoop's __CFRunLoopRun). state is what the
 * run's start read under the lock; state_current, that nothing has called out since. */
static int run_passes(rl_loop_t *loop, rl_run_frame *run, poll_state *state, bool state_current) {
    if (stop_requested(run)) return RL_RUN_STOPPED;
    bool polling = run->deadline == 0;
    for (;;) {
        rl_wake_begin_pass(loop); /* before the pass looks at any queue */
        RL_COUNT(loop, passes, 1);

        bool called_out = notify(loop, run, RL_BEFORE_TIMERS);
        called_out |= notify(loop, run, RL_BEFORE_SOURCES);
        called_out |= blocks(loop, run);
        bool handled = signalled_sources(loop, run, &called_out);
        bool signals = handled;
        if (handled) blocks(loop, run);

        /* Work that could not be taken for want of memory is still queued: look again, don't
         * sleep on it. */
        bool poll = handled || polling || run->retry;
        run->retry = false;
        if (!poll) notify(loop, run, RL_BEFORE_WAITING);
        rl_wait_event events[RL_WAIT_BATCH];
        int n = wait_for_events(loop, run, poll, state_current && !called_out, state, events);
        state_current = false;
        /* An observer may add a timer due now, which this pass fires. */
        if (!poll && notify(loop, run, RL_AFTER_WAITING)) state->earliest = -INFINITY;
        if (!timers(loop, run, state->earliest)) run->retry = true; /* due timers, in order */
        if (n) handled |= rl_fd_table_dispatch(loop, run, events, n);
        /* Signalled sources come with wakeups, which the spin before sleeping can see; fd
         * readiness and timers cannot be seen that way, so only signals count as busy. */
        rl_wake_end_pass(loop, signals);
        blocks(loop, run);

        if (handled && run->stop_after_handle) return RL_RUN_HANDLED_SOURCE;
        if (polling || (run->deadline < INFINITY && rl_time_now() >= run->deadline)) return RL_RUN_TIMED_OUT;
        if (stop_requested(run)) return RL_RUN_STOPPED;
        if (rl_mode_looks_empty(run->mode)) return RL_RUN_FINISHED; /* no lock (internal.h) */
    }
}

int rl_run_in_mode(const char *name, double seconds, bool return_after_source_handled) {
    if (name != RL_DEFAULT_MODE) { /* the usual name needs no check */
        int rc = rl_mode_check_name(name);
        if (rc) return rc;
        if (rl_mode_name_is_common(name)) return -EINVAL;
    }
    if (isnan(seconds)) return -EINVAL;
    rl_loop_t *loop = rl_loop_get_current();
    if (!loop) return -errno; /* EMFILE, ENFILE, ENOMEM, EAGAIN: a later call tries again */
    loop->phase_time = 0; /* a run inside a callout ends that callout's loop time (rl_timer_rearm) */
    /* Fields one by one: an initializer would zero the vectors' inline storage on every run. */
    rl_run_frame run;
    run.stop_after_handle = return_after_source_handled;
    run.retry = false;
    run.unperformed = 0;
    atomic_init(&run.stopped, false);
    rl_ready_vec_init(&run.sources);
    rl_ptrvec_init(&run.notify);
    if (seconds <= 0) run.deadline = 0;
    else if (seconds > RL_TIMEOUT_LIMIT) run.deadline = INFINITY;
    else run.deadline = rl_time_now() + seconds;

    pthread_mutex_lock(&loop->lock);
    rl_timers_restore_taken_if_any(loop); /* a run inside a timer's callout sees the phase's due timers */
    run.mode = rl_mode_find(loop, name, false);
    if (loop->dead) {
        pthread_mutex_unlock(&loop->lock);
        return -EINVAL;
    }
    if (!run.mode || rl_mode_is_empty(run.mode)) {
        pthread_mutex_unlock(&loop->lock);
        return RL_RUN_FINISHED;
    }
    run.outer = loop->run;
    loop->run = &run;
    loop->host_mode = NULL; /* the host (if any) is not waiting while the loop runs */
    rl_fd_table_unpark_for(loop, run.mode);
    rl_loop_maybe_bias(loop);
    poll_state state;
    read_poll_state(loop, run.mode, &state); /* so that a run that polls locks no more till its end */
    pthread_mutex_unlock(&loop->lock);
    rl_sources_share_ready(loop, run.outer);
    bool called_out = notify(loop, &run, RL_ENTRY);
    int result = run_passes(loop, &run, &state, !called_out);
    notify(loop, &run, RL_EXIT);
    pop_frame(loop, &run);
    return result;
}

int rl_run(void) {
    int result;
    do result = rl_run_in_mode(RL_DEFAULT_MODE, INFINITY, false);
    while (result != RL_RUN_STOPPED && result != RL_RUN_FINISHED && result >= 0);
    return result;
}
