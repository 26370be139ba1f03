/*
 * wake.h - the wake protocol (wake.c): how a loop goes to sleep in its wait, how any thread wakes
 * it, and the deadline its wait is armed for. wake.c's header comment says why no wakeup is lost;
 * loop->wake_state is changed only there.
 */
#ifndef RL_WAKE_H
#define RL_WAKE_H

#include "internal.h"

/* The date a wait in mode must end by, which the timerfd is armed at: mode's wake date
 * (rl_timers_wake_date), or the innermost run's deadline when that is earlier and no host waits
 * (a host's wait has no run deadline, even when nested in a run). loop locked. */
RL_HIDDEN double rl_wake_deadline(rl_loop_t *loop, rl_mode *mode);
/* After a change to mode's timers: rearm the loop's timerfd when another thread changed the
 * timers of the mode the loop, or its host, is waiting in (the loop's own thread rearms before it
 * next waits); and when the deadline moved earlier, tell a loop spinning toward the old one.
 * loop locked. */
RL_HIDDEN void rl_wake_timers_changed(rl_loop_t *loop, rl_mode *mode);
/* A host's query (backend.c) claims SLEEPING on the host's behalf, after its poll: returns
 * whether a wakeup was posted since the last pass began (a pass is due). */
RL_HIDDEN bool rl_wake_claim_for_host(rl_loop_t *loop);
/* A host's query of an empty mode drops the wakeup it found: no pass would take it. */
RL_HIDDEN void rl_wake_drop_pending(rl_loop_t *loop);
/* A pass begins, before it looks at any queue: wakeups posted from now on are for this pass. */
RL_HIDDEN void rl_wake_begin_pass(rl_loop_t *loop);
/* Just before a blocking wait until deadline (an rl_time_now() date, INFINITY: none). After a
 * busy pass, look for a wakeup for a moment first (the loop's spin window, never past deadline);
 * then claim to sleep. False when a wakeup has been posted since the pass began: do not block. */
RL_HIDDEN bool rl_wake_try_sleep(rl_loop_t *loop, double deadline);
/* After the wait that rl_wake_try_sleep allowed. */
RL_HIDDEN void rl_wake_end_sleep(rl_loop_t *loop);
/* A pass ends; busy: it performed signalled sources, whose producers tend to signal again soon. */
RL_HIDDEN void rl_wake_end_pass(rl_loop_t *loop, bool busy);
/* Wake loop if it sleeps or is about to (any thread; after queueing the work the wakeup is for). */
RL_HIDDEN void rl_wake_post(rl_loop_t *loop);
/* The spin window a new loop starts with: RL_SPIN_DEFAULT, or 0 on a machine (or an affinity
 * mask) with one CPU, where spinning only keeps the waker from running. */
RL_HIDDEN double rl_wake_default_spin(void);
/* The CPU count rl_wake_default_spin goes by; tests set it (0: ask the system). */
RL_HIDDEN extern _Atomic int rl_cpu_count_override;
/* With loop->dead set: return once no waker is writing to the eventfd; none will from then on,
 * so the eventfd may be closed. */
RL_HIDDEN void rl_wake_quiesce(rl_loop_t *loop);
/* In the child of fork, which has no other thread: nobody sleeps in the loop or writes to it. */
RL_HIDDEN void rl_wake_after_fork(rl_loop_t *loop);

#endif
