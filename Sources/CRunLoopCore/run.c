/*
 * run.c - rl_run_in_mode: CFRunLoop's pass, phase by phase. Each phase detaches what it will
 * call (retaining it) with the loop locked, then calls out with nothing locked, so callouts may
 * add, remove, invalidate or rearm anything, themselves included, and may run the loop again.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>

/* Longer than this is "no timeout" (CF's limit, about 16 years). */
#define RL_TIMEOUT_LIMIT 504911232.0
#define RL_WAIT_BATCH RL_WAIT_MAX_EVENTS
/* How long a loop that was just busy looks for more work before it sleeps: well under the cost
 * of a sleep and a wakeup (about 20-40 us on a VM), well over a producer's cross-core signal. */
#define RL_SPIN_BEFORE_SLEEP 5e-6

static inline void rl_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Observer and block phases with nothing to do cost a load each, not a call. */
static inline void notify(rl_loop_t *loop, rl_run_frame *run, unsigned activity) {
    if (atomic_load_explicit(&run->mode->observer_mask, memory_order_relaxed) & activity)
        rl_observers_notify(loop, run, activity);
}

static inline void blocks(rl_loop_t *loop, rl_run_frame *run) {
    if (atomic_load(&loop->blocks_hint)) rl_blocks_run(loop, run);
}

static void pop_frame(rl_loop_t *loop, rl_run_frame *run) {
    pthread_mutex_lock(&loop->lock);
    loop->run = run->outer;
    rl_fd_table_unpark(loop);
    pthread_mutex_unlock(&loop->lock);
    rl_ptrvec_free(&run->ready);
    rl_ptrvec_free(&run->ready_events);
    rl_ptrvec_free(&run->notify);
}

static bool stop_requested(rl_run_frame *run) {
    return atomic_load_explicit(&run->stopped, memory_order_relaxed) && atomic_exchange(&run->stopped, false);
}

/* Block in epoll_wait, or just poll; store what came back in events. Returns how many. */
static int wait_for_events(rl_loop_t *loop, rl_run_frame *run, bool poll, rl_wait_event *events) {
    pthread_mutex_lock(&loop->lock);
    double deadline = rl_timers_wake_date(run->mode);
    if (run->deadline > 0 && run->deadline < deadline) deadline = run->deadline;
    /* A block queued for this mode must run before the loop sleeps. */
    bool block = !poll && !rl_blocks_pending(loop, run->mode);
    if (block && !(deadline < RL_TIME_NEVER)) deadline = INFINITY;
    /* Arm for the earliest of the mode's timers (within tolerances) and the run's timeout, but
     * only for a wait: a poll finds due timers by their dates, so a loop that polls (a pass per
     * frame, say) adds and fires timers with no timerfd_settime, which costs ~18 us on a VM. */
    if (block) rl_wait_arm(&loop->wait, deadline);
    bool watching_fds = loop->fds.in_set > 0;
    pthread_mutex_unlock(&loop->lock);
    if (block && rl_time_now() >= deadline) block = false;
    /* A poll with no fd in the set has nothing to ask the kernel: due timers are found by their
     * dates, and wakeups matter only to a wait. This saves a system call per pass on a busy
     * loop. (An edge left queued for the eventfd or timerfd just ends a later wait early.) */
    if (!block && !watching_fds) return 0;

    if (block && loop->was_busy) {
        /* The loop was just busy: work tends to come in bursts, so look for a wakeup for a
         * moment before paying for a sleep and a write(2) on the other side. The loop does not
         * claim to sleep yet, so a waker meanwhile only sets the pending flag. */
        double until = rl_time_now() + RL_SPIN_BEFORE_SLEEP;
        while (!(atomic_load_explicit(&loop->wake_state, memory_order_relaxed) & RL_WAKE_PENDING)) {
            for (int i = 0; i < 16; i++) rl_cpu_relax();
            if (rl_time_now() >= until) break;
        }
        if (atomic_load_explicit(&loop->wake_state, memory_order_relaxed) & RL_WAKE_PENDING) block = false;
    }
    if (block) {
        /* Publish that we sleep; a wakeup posted since this pass began cancels the sleep. */
        unsigned old = atomic_fetch_or(&loop->wake_state, RL_WAKE_SLEEPING);
        if (old & RL_WAKE_PENDING) {
            atomic_fetch_and(&loop->wake_state, ~RL_WAKE_SLEEPING); /* not sleeping after all */
            block = false;
        }
    }
    double before = block ? rl_time_now() : 0;
    int n = rl_wait_for_events(&loop->wait, block, events, RL_WAIT_BATCH);
    if (block) {
        atomic_fetch_and(&loop->wake_state, ~RL_WAKE_SLEEPING);
        RL_COUNT(loop, waits, 1);
        RL_COUNT(loop, time_waiting, rl_elapsed_since(before));
    }
    return n;
}

/* Handle what a wait found: due timers in fire-date order, then every ready fd source in order.
 * Returns whether an fd source was handled. */
static bool dispatch(rl_loop_t *loop, rl_run_frame *run, const rl_wait_event *events, int n) {
    /* Timers, in fire-date order; then every ready fd source, in order. */
    if (!rl_timers_fire_due(loop, run)) run->retry = true;

    bool woken = false, fds = false;
    run->ready_events.count = 0;
    for (int i = 0; i < n; i++) {
        woken |= events[i].fd == RL_WAIT_WAKEUP;
        fds |= events[i].fd >= 0;
    }
    unsigned long long removals = 0;
    if (fds) {
        pthread_mutex_lock(&loop->lock);
        removals = atomic_load_explicit(&loop->source_removals, memory_order_relaxed);
        rl_fd_table_collect(loop, run->mode, events, n, &run->ready, &run->ready_events);
        pthread_mutex_unlock(&loop->lock);
    }
    if (woken) RL_COUNT(loop, wakeups, 1);
    if (!run->ready.count) return false;

    bool handled = false;
    size_t count = run->ready.count, i = 0;
    /* Stable insertion sort by order: fd sources are few per pass. */
    for (size_t a = 1; a < count; a++) {
        void *s = run->ready.items[a], *e = run->ready_events.items[a];
        size_t b = a;
        for (; b > 0 && ((rl_source_t *)run->ready.items[b - 1])->order > ((rl_source_t *)s)->order; b--) {
            run->ready.items[b] = run->ready.items[b - 1];
            run->ready_events.items[b] = run->ready_events.items[b - 1];
        }
        run->ready.items[b] = s;
        run->ready_events.items[b] = e;
    }
    double start = rl_time_now();
    for (; i < count; i++) {
        rl_source_t *s = run->ready.items[i];
        if (handled && run->stop_after_handle) break;
        unsigned ev = (unsigned)(uintptr_t)run->ready_events.items[i];
        ev &= atomic_load_explicit(&s->events, memory_order_relaxed) | RL_FD_ERROR;
        bool go = ev && atomic_load(&s->valid);
        if (go && atomic_load_explicit(&loop->source_removals, memory_order_relaxed) != removals) {
            /* A source left a mode since collection (perhaps by an earlier callout): check. */
            pthread_mutex_lock(&loop->lock);
            go = rl_ptrset_contains(&run->mode->sources, s);
            pthread_mutex_unlock(&loop->lock);
        }
        if (go) {
            __RL_IS_CALLING_OUT_TO_A_SOURCE1_PERFORM_FUNCTION__(s->callback, s, s->fd, ev, s->context.info);
            RL_COUNT(loop, sources_performed, 1);
            handled = true;
        }
        rl_release(s);
    }
    for (; i < count; i++) rl_release(run->ready.items[i]); /* level-triggered: they come again */
    RL_COUNT(loop, time_in_callouts, rl_elapsed_since(start));
    run->ready.count = 0;
    return handled;
}

/* The passes of one run, until an exit condition (CFRunLoop's __CFRunLoopRun). */
static int run_passes(rl_loop_t *loop, rl_run_frame *run) {
    if (stop_requested(run)) return RL_RUN_STOPPED;
    bool polling = run->deadline == 0;
    for (;;) {
        /* Wakeups posted from here on must interrupt this pass's wait. */
        atomic_store(&loop->wake_state, 0);
        RL_COUNT(loop, passes, 1);

        notify(loop, run, RL_BEFORE_TIMERS);
        notify(loop, run, RL_BEFORE_SOURCES);
        blocks(loop, run);
        bool handled = rl_sources_perform_signalled(loop, run);
        bool signals = handled;
        if (handled) blocks(loop, run);

        /* Work that could not be taken for want of memory is still queued: look again, don't
         * sleep on it. */
        bool poll = handled || polling || run->retry;
        run->retry = false;
        if (!poll) notify(loop, run, RL_BEFORE_WAITING);
        rl_wait_event events[RL_WAIT_BATCH];
        int n = wait_for_events(loop, run, poll, events);
        if (!poll) notify(loop, run, RL_AFTER_WAITING);
        handled |= dispatch(loop, run, events, n);
        /* Signalled sources come with wakeups, which the spin before sleeping can see; fd
         * readiness and timers cannot be seen that way, so only signals count as busy. */
        loop->was_busy = signals;
        blocks(loop, run);

        if (handled && run->stop_after_handle) return RL_RUN_HANDLED_SOURCE;
        if (polling || (run->deadline < INFINITY && rl_time_now() >= run->deadline)) return RL_RUN_TIMED_OUT;
        if (stop_requested(run)) return RL_RUN_STOPPED;
        pthread_mutex_lock(&loop->lock);
        bool empty = rl_mode_is_empty(run->mode);
        pthread_mutex_unlock(&loop->lock);
        if (empty) return RL_RUN_FINISHED;
    }
}

int rl_run_in_mode(const char *name, double seconds, bool return_after_source_handled) {
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    if (rl_mode_name_is_common(name) || isnan(seconds)) return -EINVAL;
    rl_loop_t *loop = rl_loop_get_current();
    if (!loop) return -errno; /* EMFILE, ENFILE, ENOMEM, EAGAIN: a later call tries again */
    /* Fields one by one: an initializer would zero the vectors' inline storage on every run. */
    rl_run_frame run;
    run.stop_after_handle = return_after_source_handled;
    run.retry = false;
    run.performing_sources = false;
    atomic_init(&run.stopped, false);
    rl_ptrvec_init(&run.ready);
    rl_ptrvec_init(&run.ready_events);
    rl_ptrvec_init(&run.notify);
    if (seconds <= 0) run.deadline = 0;
    else if (seconds > RL_TIMEOUT_LIMIT) run.deadline = INFINITY;
    else run.deadline = rl_time_now() + seconds;

    pthread_mutex_lock(&loop->lock);
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
    rl_fd_table_unpark(loop);
    pthread_mutex_unlock(&loop->lock);
    rl_sources_share_ready(loop, run.outer);
    notify(loop, &run, RL_ENTRY);
    int result = run_passes(loop, &run);
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
