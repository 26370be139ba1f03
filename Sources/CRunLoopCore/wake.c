/*
 * wake.c - the wake protocol: how a loop goes to sleep in its wait, and how any thread wakes it
 * (rl_loop_wakeup, and the core's own wakeups) with at most one eventfd write per sleep and none
 * while the loop is awake. Every change of loop->wake_state is made here; wait_epoll.c only
 * writes the eventfd when told to.
 *
 * The state is two bits. PENDING: a wakeup was posted since the current pass began. SLEEPING:
 * the loop has claimed the right to block in its wait. A waker sets PENDING. The loop clears both
 * when a pass begins, sets SLEEPING just before it blocks, and clears it when the wait returns.
 * A host's query (rl_loop_get_backend_timeout, backend.c) claims SLEEPING too, on the host's
 * behalf (rl_wake_claim_for_host), and nothing clears it when the host's wait ends: it stays set (rl_loop_is_waiting is
 * true, and the first wakeup writes the eventfd) until the next pass begins and stores 0, or the
 * next query finds it set already.
 *
 * Invariant (no lost wakeup): when a thread queues work for a loop (signals a source, queues a
 * block, stops the run) and then posts a wakeup, the loop does not stay asleep with that work
 * unseen: either the pass under way sees the work before it would block, or it does not block,
 * or its wait returns.
 *
 * Why it holds. The wake steps below are seq_cst, so they fall in one total order. A waker
 * queues its work before its step, and a pass looks at its queues (seq_cst loads of their heads
 * and counts, or under the lock) after its own: work queued before the earlier of two steps is
 * seen by what reads after the later one.
 *   waker:  queue the work; fetch_or(PENDING); write the eventfd only if the old value had
 *           SLEEPING and not PENDING.
 *   loop:   store 0 (rl_wake_begin_pass); look at the queues; ... fetch_or(SLEEPING), and block
 *           only if the old value had no PENDING (rl_wake_try_sleep).
 * Place the waker's fetch_or in that order:
 *   - before the loop's store of 0: the work was queued before it, and the pass looks at its
 *     queues after it, so the pass sees the work;
 *   - between the store of 0 and the loop's fetch_or: the loop finds PENDING and does not block;
 *   - after the loop's fetch_or: the first waker there finds SLEEPING without PENDING and writes
 *     the eventfd, whose edge ends the wait; any later one finds PENDING and need not write.
 * The first case needs the pass to look at every kind of work between its store of 0 and its
 * fetch_or: signalled sources and blocks have phases there, and run.c looks at the queued blocks
 * and the stop flag once more, under the lock, when it decides whether to block. (The exit checks
 * at the end of a pass come too late for a stop made between one pass's end and the next one's
 * start.)
 * A waker that only loads the state and finds PENDING returns at once: the PENDING it saw was
 * set after the store of 0 (the load reads the latest value), so one of the last two cases
 * already covers it, or it was set before and its load, too, precedes the store of 0 (first
 * case).
 *
 * Nested runs share the state: a pass of a run nested in a callout begins like any other, so it
 * takes a wakeup posted for the outer pass (having looked at the queues after it, for its own
 * mode). When the callout returns, the outer pass checks its due timers and queued blocks again
 * before it sleeps, but not its signalled sources: one of its mode signalled meanwhile waits for
 * the next wakeup, fd event or timer.
 *
 * Closing. A waker that must write announces itself in wake_writers and then reads loop->dead;
 * rl_wake_quiesce runs after dead is set and waits for wake_writers to drop to 0. Either the waker
 * sees dead and does not write, or quiesce sees the waker and waits for its write: the eventfd
 * (or another file that took its number) is never written after it is closed.
 *
 * Spinning. A loop whose last pass performed signalled sources looks for PENDING for a moment
 * before it claims to sleep: producers come in bursts, and a wakeup seen while spinning costs
 * the waker no write(2) and the loop no sleep. It has not claimed SLEEPING while it spins, so a
 * waker then only sets PENDING. An idle loop never spins. The window is the loop's own
 * (rl_loop_set_spin; by default 0 when only one CPU is online or in the creating thread's
 * affinity mask, where the spinner would only keep the waker off the CPU; cgroup quotas are not
 * looked at) and ends early at the wait's deadline (fixed, under the lock, before the spin). It
 * also ends when a signal the loop watches moves the signal generation (the handler ran on
 * another thread: the loop's own blocks them outside its waits), and when another thread moves
 * the timerfd of the awaited mode earlier, to a date within a window from now
 * (rl_wake_timers_changed: PENDING, set only while SLEEPING is not, so no write; a loop
 * that is not spinning but about to wait then polls once instead of sleeping for less than a
 * window).
 */
#include "wake.h"
#include "internal.h"
#include "wait.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <unistd.h>

/* Bits of loop->wake_state. */
enum { RL_WAKE_SLEEPING = 1u, RL_WAKE_PENDING = 2u };

/* How long a loop that was just busy looks for more work before it sleeps, unless told otherwise
 * (rl_loop_set_spin): well under the cost of a sleep and a wakeup (about 20-40 us on a VM), well
 * over a producer's cross-core signal. */
#define RL_SPIN_DEFAULT 5e-6
/* The longest window rl_loop_set_spin accepts (larger ones are clamped): while it spins, the loop
 * sees wakeups but not fd readiness, so a window bounds how late an fd event can be seen. */
#define RL_SPIN_MAX 1e-3

_Atomic int rl_cpu_count_override;

/* CPUs this process may run on: the online ones, fewer if the affinity mask says so. */
static int cpu_count(void) {
    int forced = atomic_load_explicit(&rl_cpu_count_override, memory_order_relaxed);
    if (forced > 0) return forced;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 ? (int)(online < INT_MAX ? online : INT_MAX) : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < n) n = CPU_COUNT(&set);
    return n;
}

double rl_wake_default_spin(void) { return cpu_count() > 1 ? RL_SPIN_DEFAULT : 0; }

int rl_loop_set_spin(rl_loop_t *loop, double seconds) {
    if (!loop || isnan(seconds) || seconds < 0) return -EINVAL;
    if (seconds > RL_SPIN_MAX) seconds = RL_SPIN_MAX;
    if (seconds == 0) seconds = 0; /* -0.0 too */
    atomic_store_explicit(&loop->spin, seconds, memory_order_relaxed);
    return 0;
}

double rl_loop_get_spin(rl_loop_t *loop) {
    return loop ? atomic_load_explicit(&loop->spin, memory_order_relaxed) : 0;
}

static bool pending(rl_loop_t *loop) {
    return atomic_load_explicit(&loop->wake_state, memory_order_relaxed) & RL_WAKE_PENDING;
}

void rl_wake_begin_pass(rl_loop_t *loop) { atomic_store(&loop->wake_state, 0); }

void rl_wake_end_pass(rl_loop_t *loop, bool busy) { loop->wake_spin = busy; }

/* A wakeup, or a signal the loop watches (its handler writes the signal eventfd, which only a
 * wait sees; it moves the generation first, signal.c). */
static bool woken(rl_loop_t *loop) { return pending(loop) || rl_signals_arrived(loop); }

/* Look for a wakeup for the loop's spin window, but not past deadline (a timer due then must not
 * wait for the window to end); whether one came. */
static bool spin_for_wakeup(rl_loop_t *loop, double deadline) {
    double window = atomic_load_explicit(&loop->spin, memory_order_relaxed);
    if (!(window > 0)) return pending(loop);
    double until = rl_time_now() + window;
    if (deadline < until) until = deadline;
    while (!woken(loop)) {
        for (int i = 0; i < 16; i++) rl_cpu_relax();
        if (rl_time_now() >= until) break;
    }
    return woken(loop);
}

/* Another thread moved the timerfd of the mode the loop waits in to an earlier deadline (loop
 * locked): a loop spinning toward the old one (it fixed it before it spun) is told, with a
 * PENDING and no write, when the new one falls within a spin window; a sleeping loop is not
 * (its timerfd wakes it). */
static void timer_moved_earlier(rl_loop_t *loop, double deadline) {
    double window = atomic_load_explicit(&loop->spin, memory_order_relaxed);
    if (!(window > 0) || deadline >= rl_time_now() + window) return; /* the spin ends first */
    unsigned old = atomic_load(&loop->wake_state);
    while (!(old & (RL_WAKE_SLEEPING | RL_WAKE_PENDING)))
        if (atomic_compare_exchange_weak(&loop->wake_state, &old, old | RL_WAKE_PENDING)) return;
}

double rl_wake_deadline(rl_loop_t *loop, rl_mode *mode) {
    /* A wait inside a timer's callout: first make its timers' callouts known to other threads. */
    if (rl_tls_loop == loop && __builtin_expect(loop->firing != NULL, 0)) rl_timers_publish_firing(loop);
    if (rl_tls_loop == loop) rl_timers_restore_taken_if_any(loop); /* a host's query inside a callout */
    double deadline = rl_timers_wake_date(mode);
    rl_run_frame *run = loop->run;
    if (run && !loop->host_mode && run->deadline > 0 && run->deadline < deadline) deadline = run->deadline;
    return deadline;
}

void rl_wake_timers_changed(rl_loop_t *loop, rl_mode *mode) {
    /* The loop's own thread rearms before it next waits (or before its host next polls); only
     * another thread must rearm now, for the mode the loop, or its host, may be sleeping in. */
    if (rl_tls_loop == loop) return;
    rl_mode *sleeping = rl_loop_awaited_mode(loop);
    if (sleeping != mode || loop->dead) return;
    double deadline = rl_wake_deadline(loop, mode);
    /* Also when it moves later: an early wakeup would be a pass CF does not make (observers
     * would see it). rl_wait_arm makes no system call when the deadline is unchanged, so adding
     * and removing timers that are not the earliest costs none. */
    double armed = loop->wait.armed;
    rl_wait_arm(&loop->wait, deadline);
    if (deadline < armed) timer_moved_earlier(loop, deadline);
}

bool rl_wake_claim_for_host(rl_loop_t *loop) {
    return atomic_fetch_or(&loop->wake_state, RL_WAKE_SLEEPING) & RL_WAKE_PENDING;
}

void rl_wake_drop_pending(rl_loop_t *loop) { atomic_fetch_and(&loop->wake_state, ~(unsigned)RL_WAKE_PENDING); }

bool rl_wake_try_sleep(rl_loop_t *loop, double deadline) {
    if (loop->wake_spin && spin_for_wakeup(loop, deadline)) return false;
    unsigned old = atomic_fetch_or(&loop->wake_state, RL_WAKE_SLEEPING);
    if (!(old & RL_WAKE_PENDING)) return true;
    atomic_fetch_and(&loop->wake_state, ~RL_WAKE_SLEEPING); /* not sleeping after all */
    return false;
}

void rl_wake_end_sleep(rl_loop_t *loop) { atomic_fetch_and(&loop->wake_state, ~RL_WAKE_SLEEPING); }

void rl_wake_post(rl_loop_t *loop) {
    /* A wakeup already on its way covers this one: a load (a plain mov on x86, seq_cst so it is
     * ordered after the caller's queueing), no write to a shared cache line. */
    if (atomic_load(&loop->wake_state) & RL_WAKE_PENDING) return;
    unsigned old = atomic_fetch_or(&loop->wake_state, RL_WAKE_PENDING);
    if ((old & (RL_WAKE_PENDING | RL_WAKE_SLEEPING)) != RL_WAKE_SLEEPING) return;
    atomic_fetch_add(&loop->wake_writers, 1);
    if (!atomic_load(&loop->dead)) {
        rl_wait_post_wakeup(&loop->wait);
        atomic_fetch_add_explicit(&loop->counters.wakeup_writes, 1, memory_order_relaxed);
    }
    atomic_fetch_sub(&loop->wake_writers, 1);
}

void rl_wake_quiesce(rl_loop_t *loop) {
    while (atomic_load(&loop->wake_writers)) sched_yield(); /* a write(2) in progress */
}

void rl_wake_after_fork(rl_loop_t *loop) {
    /* The threads that slept in or wrote to the loop are the parent's; a PENDING bit may stay: it
     * only makes one wait a poll. */
    atomic_fetch_and(&loop->wake_state, ~RL_WAKE_SLEEPING);
    atomic_store(&loop->wake_writers, 0);
}

void rl_loop_wakeup(rl_loop_t *loop) {
    if (loop) rl_wake_post(loop);
}

bool rl_loop_is_waiting(rl_loop_t *loop) {
    return loop && (atomic_load(&loop->wake_state) & RL_WAKE_SLEEPING);
}
