/*
 * crunloop.h - a CFRunLoop-style event loop for Linux, on epoll.
 *
 * SYNOPSIS
 *   #include <crunloop.h>      cc prog.c $(pkg-config --cflags --libs crunloop)
 *
 * DESCRIPTION
 *   Each thread has at most one loop (rl_loop_t), created the first time the thread calls
 *   rl_loop_get_current() and torn down when the thread exits: it then removes its sources
 *   (their cancel runs), lets go of its timers and observers (which stay valid and may join
 *   another loop), drops its queued blocks, closes its kernel objects (epoll set, eventfd,
 *   timerfd) and takes no new items. Teardown allocates nothing, so it cannot fail halfway.
 *   References to the loop keep the object alive, as a dead loop: it holds no fd, adding to it
 *   returns -EINVAL, and stop, wakeup and the queries are harmless. A loop runs in one named mode at a time and services the items added
 *   to that mode:
 *
 *     sources, version 0  (rl_source_create)     performed when signalled (rl_source_signal)
 *     sources, version 1  (rl_source_create_fd)  called while a file descriptor is ready
 *     timers              (rl_timer_create)      called at a fire date, once or repeating
 *     observers           (rl_observer_create)   called at stages (activities) of each pass
 *     blocks              (rl_loop_perform)      functions queued to run once in a mode
 *
 *   One pass of rl_run_in_mode() does, in this order (CFRunLoop's order):
 *     1. RL_BEFORE_TIMERS observers, 2. RL_BEFORE_SOURCES observers, 3. blocks,
 *     4. signalled version-0 sources in ascending order, 5. blocks again if a source was handled,
 *     6. RL_BEFORE_WAITING observers - only when the loop is really going to wait, that is when
 *        the run has a timeout (seconds > 0) and no source was handled in this pass,
 *     7. wait for a due timer, a ready fd, a wakeup or the run's timeout (a poll otherwise),
 *     8. RL_AFTER_WAITING observers (paired with 6),
 *     9. due timers in fire-date order, then ready fd sources, then blocks,
 *    10. exit checks, in this order: a source was handled and the caller asked to return after
 *        one (RL_RUN_HANDLED_SOURCE); the timeout passed (RL_RUN_TIMED_OUT); rl_loop_stop()
 *        (RL_RUN_STOPPED); the mode has no sources and no timers left (RL_RUN_FINISHED).
 *   A run is bracketed by RL_ENTRY and RL_EXIT observer callouts, except a run in a mode that is
 *   empty when it starts, which returns RL_RUN_FINISHED at once with no callout at all.
 *
 * MODES
 *   Modes are named by C strings compared by content; a mode exists from its first use, and an
 *   unknown mode is simply empty. RL_DEFAULT_MODE is the mode rl_run() uses. RL_COMMON_MODES is
 *   not a mode but the set of modes marked common (RL_DEFAULT_MODE and any given to
 *   rl_loop_add_common_mode()): an item added to RL_COMMON_MODES is in every common mode,
 *   including modes made common later. Running RL_COMMON_MODES itself is an error. Such an item
 *   may be removed from one common mode by that mode's name (it stays in the others and in later
 *   ones); adding it to RL_COMMON_MODES again puts it back into every common mode, and returns
 *   -EEXIST only when it was in all of them (as CF). A timer removed that way from the last mode
 *   it was in fires no more, even in a pass that had already found it due, until it is in a mode
 *   again (as CF).
 *
 * OWNERSHIP
 *   Objects are reference counted. rl_*_create() returns a reference the caller owns (+1) and
 *   must give back with rl_release(). rl_loop_get_current() and rl_loop_get_main() return a
 *   borrowed reference (retain it to keep a loop past its thread's exit). Adding an item to a loop
 *   retains it; removing, invalidating or the loop's teardown releases it. When the last
 *   reference goes, the context's release(info) runs (if given), exactly once. The context
 *   structs are copied at creation; info is first passed to retain(info) when retain is set.
 *   A timer made by rl_timer_create_held instead holds its context only while a loop holds it
 *   (retain as a loop takes it, release as it leaves the loop), so info may own the timer.
 *   The loop holds a reference to an item for the whole of every callout to it, so its info
 *   stays valid until the callout returns, even if the callout invalidates the item and drops
 *   the caller's last reference.
 *
 * TIME
 *   Fire dates are absolute times in seconds on CLOCK_MONOTONIC, as returned by rl_time_now().
 *   Intervals, tolerances and run timeouts are seconds. Timers are waited on with a timerfd, so
 *   they are not delayed by the thread's timer slack. Every non-negative value is accepted,
 *   however large (INFINITY, DBL_MAX, 1e300), and means "that far away": a date past about
 *   31,700 years of uptime is never reached, a run timeout over about 16 years is none, and a
 *   huge tolerance lets a due timer wait for whatever wakes the loop next. Only NaN and negative
 *   values are errors.
 *
 * TIMEOUTS
 *   The idle timeout of a connection (libev's ev_timer_again, libuv's uv_timer_again): a timer that
 *   is pushed back on every request, fires when the connection has been idle that long, and may
 *   be armed again after it fired. A CF one-shot timer cannot be (it is invalidated as its
 *   callout returns); a timeout can (rl_timer_create_timeout, an addition beyond CF):
 *       t = rl_timer_create_timeout(INFINITY, 0, on_idle, &ctx);   once per connection, dormant
 *       rl_loop_add_timer(loop, t, mode);
 *       rl_timer_set_next_fire_in(t, idle);    arm, and on every request push it back
 *                                              (rl_timer_rearm: the same, from the loop's time)
 *       rl_timer_disarm(t);                    cancel; it stays valid and in its modes, dormant
 *       rl_timer_invalidate(t); rl_release(t); when the connection closes
 *   After its callout a timeout is dormant (next fire date INFINITY; rl_timer_is_armed false)
 *   unless the callout armed it again; arming it from anywhere, before or after it fired, is the
 *   same call. A dormant timer stays in its modes (they are not empty because of it) and costs
 *   no wakeup. The same works with any timer: a repeating one whose interval is never reached
 *   (1e15 s) behaves alike, and rl_timer_set_next_fire_date(t, INFINITY) parks any valid timer.
 *   Cost: arming, re-arming and disarming a timer already in a mode allocate nothing and touch no
 *   reference count: at most one clock reading (none to disarm, none for rl_timer_rearm inside a
 *   callout), and an O(log n) heap update that only sifts one way (down for a later date, up for
 *   an earlier one), comparing dates first and following a timer's pointer only to break a tie
 *   of dates (never among dormant timers). A timer with no child in the heap (most re-armed
 *   timeouts: the latest timers sit at its bottom) moves with no sift at all, and a disarm, or the
 *   park of a fired timeout, is O(1): a hole where the timer was, and the timer leaves the heap's
 *   order for a parked region at the top of the same array, from which arming it again takes it
 *   back (to the end of the heap, where a timeout armed from the loop's time stays) without
 *   allocating. In a full array the timer stays in its hole instead, still O(1), and moves to
 *   the region when the hole goes (a small full array grows once instead, unless enough holes
 *   make a re-heap worth it); armed again from there while the array is full, it sifts from its
 *   old place, O(log n). Timeouts armed in the order of their dates fire with nothing to sort.
 *   On the loop's own thread these calls, and adding and removing a timer, take no mutex: the
 *   loop's lock has a fast half for its own thread (a flag it sets and one it reads) that it
 *   takes whenever no other thread holds the lock, with one locked instruction, or none while
 *   the loop is biased: from its thread's first call until another thread locks it, and again
 *   once no other thread has locked it for 16 of its passes (the first other thread to lock a
 *   biased loop pays for the fence instead, once, with a membarrier(2) system call of a few
 *   microseconds). About 110 instructions on
 *   x86-64 for rl_timer_rearm in a callout, 1e4 timers armed (callgrind on benchmark 14:
 *   benchmarks/README.md), where libev's ev_timer_again takes about 63;
 *   rl_timer_set_next_fire_in adds a clock reading (about 25 ns on a VM), which
 *   rl_timer_rearm_from_loop_time saves outside callouts too, at the price of libev's and
 *   libuv's: it counts from the loop's time (rl_loop_get_time), which lags the clock by whatever
 *   the thread did since the loop last read it. benchmarks/run's
 *   "timer re-arm" row gives the time next to the peers' idioms. The fire of a timeout costs what
 *   a one-shot timer's does minus its invalidation, and nothing in the heap: the outermost fire
 *   phase parks every timer it takes before its first callout, where the walk that found them
 *   has their slots at hand (about 145 instructions per fired timeout then, its callout's
 *   trampoline included; callgrind, 2e4 timeouts due at once). On the loop's own thread,
 *   adding a timer that is in no loop to one mode takes about 140 instructions (a
 *   compare-and-swap of its owner, one heap insertion and a reference; a held timer's add also
 *   calls its context's retain), and rl_timer_disarm of a
 *   timer in one mode about 95 (callgrind, "timers" at 1e5: benchmarks/README.md), where
 *   libev's ev_timer_start and ev_timer_stop take about 106 and 76 (it keeps no reference).
 *   Threads: from another thread it is the same call, and safe at any time, also while the
 *   loop's thread works on the same timer: it takes the loop's mutex (and the membarrier, if the
 *   loop was biased), and waits for the loop's thread to leave its fast half if it is in it (a
 *   few hundred instructions at most); the loop's
 *   thread, finding the lock held, waits for the mutex in turn. A timer moved earlier than the
 *   loop's current wait rearms the wait (or ends the loop's spin) without an explicit wakeup; one
 *   moved later, or disarmed, costs the sleeping loop no wakeup.
 *
 * NULL ARGUMENTS
 *   Every context pointer may be NULL (no info, no retain, no release), and so may every
 *   function pointer inside a context: a listening socket's fd source needs none. Callbacks
 *   (rl_timer_callback_t, rl_observer_callback_t, rl_fd_callback_t, signal and process
 *   callbacks) may not: NULL is -EINVAL (NULL and errno EINVAL from a constructor). A version-0
 *   source's context may have a NULL perform (the source then only keeps its modes from being
 *   empty: the keep-alive idiom).
 *
 * THREADS
 *   Every function may be called from any thread, except that rl_run() and rl_run_in_mode() run
 *   the calling thread's own loop. Adding, removing or rearming an item from another thread
 *   takes effect in the running loop without an explicit wakeup where it must (a timer due
 *   earlier, a fd source added); signalling a version-0 source and rl_loop_perform() do not wake
 *   the loop by themselves: follow them with rl_loop_wakeup(). Callouts run with no lock of the
 *   library held, so a callout may call any function here, including running the loop again
 *   (nested runs, each with its own RL_ENTRY/RL_EXIT) and removing or invalidating itself.
 *
 * COSTS
 *   A pass is O(1) in the number of idle items: signalled sources are queued to their loop, due
 *   timers come off a heap, observers are skipped by a per-mode activity mask. A pass that only
 *   polls makes no system call unless fds are registered; with nothing ready, a run that polls
 *   (rl_run_in_mode(mode, 0, ...)) takes the loop's lock once at its start and once at its end,
 *   reads the clock only if the mode has timers, and costs about 330 instructions on x86-64
 *   (benchmarks/pass-instructions). The timerfd is set only before the loop sleeps, and only
 *   when its earliest deadline has changed, so timers added and fired by polling passes cost no
 *   system call. A wakeup costs one write(2), and only when the loop sleeps. A loop that has
 *   just performed signalled sources looks for another wakeup for up to 5 microseconds before
 *   it sleeps (its spin window: rl_loop_set_spin; none on a one-CPU machine), which keeps a busy
 *   producer from paying for a sleep and a wakeup per signal; an idle loop never spins, nor does
 *   a pass that only polls. A pass of a waiting run that
 *   performs a signalled source, in a mode with no timer and no fd watched, takes the lock once
 *   (to take the signalled sources) and makes no system call: about 400 instructions a source
 *   besides what its perform callout does.
 *   Timers: a timer is one allocation of 72 bytes (plus 16 bytes in the heap of each mode it
 *   is in): 96 bytes in all with glibc's malloc, for a one-shot timer or timeout in one mode
 *   with no tolerance; none with rl_timer_create_in, which puts it in the caller's memory. What
 *   few timers need is one more allocation of 24 bytes, made the first time one does: a
 *   repeating timer's interval (as it is made), a tolerance other than 0, a second mode (whose
 *   entry, and each further mode's, is one more small allocation). The callback and the
 *   context's functions are stored once per distinct tuple for the whole process. Adding and
 *   rearming are O(log n) in the mode's timers and take only the loop's lock (on the loop's own
 *   thread, its fast half: see TIMEOUTS). A mode's heap is one array of slots (16 bytes on
 *   64-bit systems) that doubles when it is full and halves at a quarter, with realloc: once
 *   glibc serves it by mmap (from 128 KB, or what its dynamic threshold has grown to), a growth
 *   remaps its pages rather than copying them. Removing (and
 *   the removal of a fired one-shot
 *   timer) is O(1) amortized: it leaves a hole in the heap, and the holes are dropped in one
 *   O(n) pass when they outnumber the timers, or popped when they reach the top. A pass that
 *   fires k due timers collects them in O(k), in the heap's array order, which is their order when
 *   they were armed in the order of their dates (timeouts armed from the loop's time) or nearly
 *   (an insertion sort that stops after O(k) moves puts them in order), else sorts them
 *   (O(k log k) in place up to 256, a radix sort in O(k) above), and allocates only when k > 32
 *   and more than the
 *   loop's previous fire phase kept room for (up to 4096). It holds them until it ends, as
 *   CF's holds its array of due timers, but without a reference each: a timer it took that a
 *   callout (or another thread) removes keeps one of the loop's references until then. It also
 *   parks them, as it takes them, out of the heap's order (each keeps its date: its fire date,
 *   rl_timer_is_armed and the phase's own due test read the timer): so a fired timeout is
 *   parked already, and a one-shot timer leaves from the low end of the parked region. A run, a
 *   wait, a host's rl_loop_get_backend_timeout or rl_loop_get_next_timer_fire_date on the
 *   loop's thread inside one of the phase's callouts puts back first the timers it has yet to
 *   fire (and the one whose callout runs), so that a nested run fires them as CF's does; arming,
 *   disarming or removing a timer the phase took works on it as on any other, and one it does
 *   not settle (another thread invalidated it during its callout) is put back as its callout
 *   returns. Firing a
 *   timeout or a repeating timer that the loop owns takes one locked instruction (the park, or
 *   the move along its grid, in the loop's fast section; none while the loop is biased: see
 *   TIMEOUTS), a one-shot timer's end two more (its
 *   invalidation and its release from the mode); a held timer (rl_timer_create_held) none more
 *   while the loop is biased, one otherwise: its callout is marked under the loop's lock (its
 *   fast section), where another thread's removal or invalidation finds it.
 *   Ownership
 *   (which loop a timer or observer belongs to) is claimed by compare-and-swap: loops on
 *   different threads working on their own items share no lock. A thread changing an item of
 *   another thread's loop takes that loop's lock.
 *
 * ERRORS
 *   Functions returning int return 0 on success or a negative errno value:
 *     -EINVAL  a NULL handle, a NULL or empty mode name, a NaN or negative time, an invalidated
 *              item, an unknown flag, RL_COMMON_MODES where a real mode is needed, adding to
 *              or running a dead loop (its thread has exited, or is not in this process after
 *              fork: it will never run again);
 *     -EBADF   a file descriptor that is not open, or was closed while its source was added;
 *     -EBUSY   a timer or observer that already belongs to another loop;
 *     -EEXIST  an item added to a mode it is already in (it stays there, once);
 *     -ENOENT  an item removed from a mode it is not in;
 *     -ENOMEM  out of memory;
 *     -EMFILE, -ENFILE  no file descriptor left to create the thread's loop;
 *     -EPERM   epoll refuses the fd (a regular file or a directory); other values are those of
 *              the failing system call (epoll_ctl).
 *   A call that fails changes nothing: an add either joins every mode it names (all the common
 *   modes, for RL_COMMON_MODES) or none, keeps no reference and runs no schedule callout.
 *   Functions returning a pointer return NULL and set errno. Queries given a NULL handle return
 *   0, false or NULL (rl_source_get_fd: -1). rl_release(NULL) and rl_retain(NULL) do nothing.
 *
 * RUNNING OUT
 *   No shortage aborts the process or loses work. Without an fd or memory for a new loop,
 *   rl_loop_get_current() and rl_loop_get_main() return NULL (errno EMFILE, ENFILE or ENOMEM) and
 *   rl_run() and rl_run_in_mode() return the negative error; a later call tries again.
 *   Signalling a source never allocates, and a signal, once made, is performed at a later pass
 *   whatever fails meanwhile. When memory runs out in the middle of a pass, what could not be
 *   taken (a signalled source, a due timer, a ready fd) stays pending and the loop polls
 *   instead of sleeping until it can. The process is aborted, with a message, only for states
 *   that cannot happen: rl_release() of something that is not an rl_* object or has no
 *   reference left; epoll_wait, timerfd_settime or the eventfd write failing on the loop's own
 *   descriptors (EBADF, EINVAL: something else closed them).
 *
 * FILE DESCRIPTORS CLOSED TOO EARLY
 *   Remove or invalidate an fd source before closing its fd. If the fd is closed first, the
 *   source is stale in each loop that notices it (the kernel drops a registration with its
 *   file): it is never called again, not even when the number is reused for another file, and
 *   rl_source_set_fd_events() on it returns -EBADF; removing or invalidating it works as usual
 *   and leaves any new source on the same number registered. A new source on a reused number
 *   gets a registration of its own (adding it costs one epoll_ctl probe). If the closed file is
 *   still open elsewhere (a dup), the kernel keeps its registration: the loop notices events
 *   that match no registration of its own, or an fd reported ready on several waits in a row
 *   whose number no longer names the registered file (it probes with epoll_ctl at the 4th, 8th,
 *   16th... such wait), and rebuilds its epoll set, so nothing spins and the stale source is
 *   called for the old file's events at most four times. Rebuilding needs one free fd:
 *   with none (RLIMIT_NOFILE reached), passes return at once until an fd is free again, and
 *   no source receives the old file's events meanwhile.
 *
 * FORK
 *   fork() is safe in a threaded program that uses the library: pthread_atfork handlers take
 *   every lock of the library around it, so the child finds none held. In the child, the
 *   forking thread's loop keeps working with kernel objects of its own (a new epoll set, eventfd
 *   and timerfd, its fds registered again), so nothing the child does can wake, stall or rearm
 *   the parent's loop; it is also the child's main loop (the forking thread is the child's main
 *   thread). Every other loop belonged to a thread that does not exist in the child: it is dead
 *   there (see DESCRIPTION); its items stay in it and may be invalidated. If the child cannot
 *   make new kernel objects, its thread gets a new loop at its next call instead.
 *   Child-exit sources (rl_source_create_process) inherited by the child watch the parent's
 *   children: the child never reaps them nor calls their callbacks; each is invalidated
 *   silently the first time a loop there sees its process exit (a wrapper that must release
 *   what the source's context holds sooner, as the Swift layer does, invalidates them itself in
 *   a pthread_atfork child handler).
 *
 * WHERE THIS DIFFERS FROM CFRunLoop ON LINUX (deliberately)
 *   - Timer tolerance is honoured: due timers whose windows [fire date, fire date + tolerance]
 *     overlap are fired by one wakeup; no timer fires before its fire date or, barring a busy
 *     loop, after its fire date plus its tolerance. CF ignores tolerance on Linux.
 *   - Timers with equal fire dates fire in ascending order, then in the order they were
 *     scheduled. CF's order among them is arbitrary.
 *   - Every event a wait returns is handled in the same pass; CF handles one per pass. Ready fd
 *     sources are called in ascending order; equal orders in the order the wait reported their
 *     fds, and sources of one fd in the order they were added. One exception, which is CF's
 *     order: when a wait that blocked is ended by a wakeup (rl_loop_wakeup) while version-0
 *     sources are signalled or blocks queued for the mode, the ready fds it found too are left
 *     to the next pass, which performs those first and then polls the fds (never two passes in
 *     a row; fds watched for errors only, being edge-triggered, are still called in the pass).
 *   - Removing or invalidating the last timer never leaves a wakeup behind at its old deadline.
 *   - A block queued for the running mode keeps the loop from sleeping until it has run.
 *     Blocks do not keep a mode from being empty (CF counts them).
 *   - Mode names compare by content everywhere, RL_COMMON_MODES included.
 *   - A repeating timer's next fire date after a long stall is computed in O(1).
 *   - Version-1 sources are plain file descriptors watched level-triggered; the loop never reads
 *     from them (CF reads 8 bytes from each, eating data from pipes and sockets).
 *   - A run with a finite timeout creates no thread or timer object.
 *   - The main thread's loop is not special: CF makes every common mode of the main loop
 *     non-empty because it services the main dispatch queue there; this core knows nothing of
 *     libdispatch (the Swift layer adds that).
 *   - Signalled version-0 sources of equal order are performed in the order they were queued
 *     for the loop, at any count: when first signalled, or, for a source signalled before it
 *     joined the loop, when it joined. A source left for a later pass (a run that returns after
 *     one handled source) keeps its place. CF orders ties by the time of the first signal too
 *     (the conformance scenario equal_order_sources), but stamps a source signalled before it
 *     joined with that earlier time, so it runs ahead of sources queued while it was outside.
 *   - Blocks are queued per mode: a run nested in a block's callout runs the blocks of its mode
 *     queued before that callout. CF's pass holds the loop's whole block list while it runs
 *     blocks, so its nested run sees only blocks queued since.
 *   - A timer whose fire date is set into the past while a pass is firing timers fires at the
 *     next pass (see rl_timer_set_next_fire_date); CF may still fire it in the pass under way.
 *   - A timer created with an INFINITY interval is a one-shot timer (its interval reads 0 and it
 *     is invalid after it fires); CF keeps it repeating, at a date never reached.
 *   - An invalidated timer keeps its last fire date (CF's reads 0), and an invalidated source
 *     reads as signalled if signalled before or after its invalidation (CF's reads false).
 */
#ifndef CRUNLOOP_H
#define CRUNLOOP_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RL_API __attribute__((visibility("default")))
#else
#define RL_API
#endif

#define RL_VERSION_MAJOR 0
#define RL_VERSION_MINOR 1
#define RL_VERSION_PATCH 0
#define RL_VERSION_NUMBER (RL_VERSION_MAJOR * 10000 + RL_VERSION_MINOR * 100 + RL_VERSION_PATCH)

/* "MAJOR.MINOR.PATCH" of the library actually linked (compare with RL_VERSION_* at build time). */
RL_API const char *rl_version_string(void);

typedef struct rl_loop rl_loop_t;
typedef struct rl_source rl_source_t;
typedef struct rl_timer rl_timer_t;
typedef struct rl_observer rl_observer_t;

/* Mode names are C strings compared by content. */
RL_API extern const char *const RL_DEFAULT_MODE;   /* "kCFRunLoopDefaultMode" */
RL_API extern const char *const RL_COMMON_MODES;   /* "kCFRunLoopCommonModes": all common modes */

/* Results of rl_run_in_mode(). */
enum { RL_RUN_FINISHED = 1, RL_RUN_STOPPED = 2, RL_RUN_TIMED_OUT = 3, RL_RUN_HANDLED_SOURCE = 4 };

/* Observer activities (a bit mask). */
enum { RL_ENTRY = 1u<<0, RL_BEFORE_TIMERS = 1u<<1, RL_BEFORE_SOURCES = 1u<<2,
       RL_BEFORE_WAITING = 1u<<5, RL_AFTER_WAITING = 1u<<6, RL_EXIT = 1u<<7, RL_ALL_ACTIVITIES = 0x0FFFFFFFu };

/* File descriptor events for version-1 sources. RL_FD_ERROR is always reported when it happens
 * (an error or a hang-up on the fd), asked for or not, as epoll does. */
enum { RL_FD_READABLE = 1u<<0, RL_FD_WRITABLE = 1u<<1, RL_FD_ERROR = 1u<<2 };

/* Context of timers, observers and fd sources. retain and release may be NULL. */
typedef struct { void *info; const void *(*retain)(const void *info); void (*release)(const void *info); } rl_context_t;

/* Context of version-0 sources. schedule(info, loop, mode) runs when the source is added to a
 * mode of a loop, on the adding thread; cancel(info, loop, mode) when it is removed from one
 * (also by invalidation and by the loop's teardown); perform(info) when the loop services it
 * after rl_source_signal(). All may be NULL. */
typedef struct { void *info; const void *(*retain)(const void *info); void (*release)(const void *info);
                 void (*schedule)(void *info, rl_loop_t *loop, const char *mode);
                 void (*cancel)(void *info, rl_loop_t *loop, const char *mode);
                 void (*perform)(void *info); } rl_source_context_t;

typedef void (*rl_timer_callback_t)(rl_timer_t *timer, void *info);
typedef void (*rl_observer_callback_t)(rl_observer_t *observer, unsigned activity, void *info);
typedef void (*rl_fd_callback_t)(rl_source_t *source, int fd, unsigned events, void *info);

/* ---- Time and references ------------------------------------------------------------------- */

/* Seconds on CLOCK_MONOTONIC; every fire date is on this clock. */
RL_API double rl_time_now(void);
/* The loop's time (libev's ev_now, libuv's uv_now), on rl_time_now()'s clock, read without a
 * clock reading. On the loop's own thread: inside a callout, the clock its callout phase began
 * with (the base of rl_timer_rearm); elsewhere, the clock as the loop last read it for itself (as
 * a callout phase began or ended, or a blocking wait returned), or as rl_loop_update_time read it,
 * or as the loop was made. So it lags the clock by however long the thread has worked since: a
 * thread that does long work outside the loop and then arms timers from the loop's time calls
 * rl_loop_update_time first. From another thread, or for NULL: rl_time_now() (the loop's time is
 * its own thread's). An addition beyond CF (see TIMEOUTS). */
RL_API double rl_loop_get_time(rl_loop_t *loop);
/* Read the clock and, on the loop's own thread, make it the loop's time (inside a callout also
 * the base of rl_timer_rearm for the rest of the callout phase). Returns the reading. Any thread;
 * elsewhere than the loop's thread (or NULL) it only reads the clock. An addition beyond CF. */
RL_API double rl_loop_update_time(rl_loop_t *loop);

/* Add a reference to any rl_* object and return it; NULL gives NULL. */
RL_API void *rl_retain(void *object);
/* Drop a reference; the last one destroys the object (running its context's release). */
RL_API void rl_release(void *object);
/* Drop the caller's reference only if it is the object's last: then as rl_release (the object is
 * destroyed) and true; false, with nothing changed, while another reference remains (a loop's,
 * a callout's). For an owner whose memory holds the object (rl_timer_create_in): when this says
 * false, it arranges for its memory to outlast the object's done, then calls rl_release. For a
 * source, timer or observer one load and no locked instruction (a count of 1 is the caller's own
 * reference, which no other thread can change); for a loop a compare-and-swap when the reference
 * may be the last. NULL: false. An addition beyond CF. */
RL_API bool rl_release_if_last(void *object);

/* ---- Loops --------------------------------------------------------------------------------- */

/* The calling thread's loop, created on first use; borrowed (valid until the thread exits).
 * NULL with errno EMFILE, ENFILE, ENOMEM (or EAGAIN: no thread-specific key left) when it cannot
 * be created; a later call tries again. */
RL_API rl_loop_t *rl_loop_get_current(void);
/* The loop of the process's main thread (the thread whose id is the process id), from any
 * thread; borrowed. Created on first use (under a lock); after that, one atomic load. NULL with
 * errno as for rl_loop_get_current() when it cannot be created. */
RL_API rl_loop_t *rl_loop_get_main(void);
/* True when loop is the calling thread's loop. Lock-free. */
RL_API bool rl_loop_is_current(rl_loop_t *loop);
/* True when loop is the main thread's loop (rl_loop_get_main()'s), from any thread; never
 * creates that loop, so false while it does not exist. In a child of fork, the forking thread's
 * loop is the main loop (see FORK). One atomic load. NULL: false. An addition beyond CF, for
 * wrappers that treat the main loop apart (the Swift layer services the main dispatch queue
 * there) without making it in a process that never uses it. */
RL_API bool rl_loop_is_main(rl_loop_t *loop);
/* True when loop is dead (see DESCRIPTION): its thread has exited and its teardown has begun, or
 * it belongs to a thread that does not exist in this child of fork. A dead loop takes no new
 * item and never runs again; whatever it held, it has let go or is letting go (a release or
 * cancel callout run by the teardown already sees it dead). True for NULL. Lock-free, any
 * thread, never allocates: an addition beyond CF, for wrappers that must tell "removed from its
 * last mode" from "its loop ended" in a release callout. */
RL_API bool rl_loop_is_dead(rl_loop_t *loop);

/* Run the current thread's loop in RL_DEFAULT_MODE until it is stopped or its mode is empty:
 * repeats rl_run_in_mode(RL_DEFAULT_MODE, forever) until that returns RL_RUN_STOPPED or
 * RL_RUN_FINISHED, and returns that value (or a negative error). */
RL_API int rl_run(void);

/* Run the current thread's loop in mode for at most seconds (<= 0: one pass without waiting;
 * HUGE_VAL or more than about 16 years: no timeout). With return_after_source_handled, return
 * RL_RUN_HANDLED_SOURCE after the first version-0 source performed or fd source called.
 * Returns an RL_RUN_* value, or -EINVAL (NULL, empty or common mode name, NaN seconds), or the
 * error of creating the thread's loop (-EMFILE, -ENFILE, -ENOMEM, -EAGAIN). */
RL_API int rl_run_in_mode(const char *mode, double seconds, bool return_after_source_handled);

/* Make the innermost run of loop return RL_RUN_STOPPED at its next exit check (the loop is woken
 * if it sleeps). A stop issued while the loop is not running is forgotten. Any thread. */
RL_API void rl_loop_stop(rl_loop_t *loop);
/* Wake loop if it is waiting, so that it makes a pass. Costs a write(2) only when the loop
 * sleeps and no other wakeup is already on its way; otherwise it costs no system call. */
RL_API void rl_loop_wakeup(rl_loop_t *loop);
/* True while loop is waiting (between RL_BEFORE_WAITING and RL_AFTER_WAITING), or while a host
 * loop waits for it (from rl_loop_get_backend_timeout until the next pass begins). */
RL_API bool rl_loop_is_waiting(rl_loop_t *loop);

/* Mark mode as common: every item in RL_COMMON_MODES is added to it now and later. Marking
 * RL_DEFAULT_MODE or an already common mode again is a no-op returning 0. All or nothing: on
 * failure (-ENOMEM) the mode is not common and no item joined it. */
RL_API int rl_loop_add_common_mode(rl_loop_t *loop, const char *mode);
/* The name of the mode of the innermost run, malloc'd (free it); NULL when not running. */
RL_API char *rl_loop_copy_current_mode(rl_loop_t *loop);
/* The names of every mode of loop (every mode used so far), a malloc'd array of malloc'd names;
 * *count receives their number. Free each name, then the array. NULL and errno on error. */
RL_API char **rl_loop_copy_all_modes(rl_loop_t *loop, size_t *count);

/* Queue fn(arg) to run once, in the loop's thread, at the next pass of a run in mode (or in any
 * common mode, for RL_COMMON_MODES). Blocks run in the order queued. Does not wake the loop:
 * call rl_loop_wakeup() after it from another thread. A block still queued when the loop's
 * thread exits is dropped without running. Blocks queued for other modes cost a pass nothing. */
RL_API int rl_loop_perform(rl_loop_t *loop, const char *mode, void (*fn)(void *arg), void *arg);

/* Context of a block queued with rl_loop_perform_context: perform(info) is the block; retain and
 * release may be NULL. */
typedef struct { void *info; const void *(*retain)(const void *info); void (*release)(const void *info);
                 void (*perform)(void *info); } rl_block_context_t;

/* rl_loop_perform with a reference to the block's info (the context is copied). retain(info)
 * runs on the calling thread before the block is queued; release(info) runs exactly once for a
 * queued block: in the loop's thread right after perform, or, for a block dropped without
 * running (its loop's thread exited), on the thread that tears the loop down, after the loop's
 * lock is left. When the call fails, release undoes retain (both ran, on the calling thread),
 * or neither ran (an error found before retain); with retain NULL the caller's own reference is
 * handed over only when the call returns 0. Errors: -EINVAL (NULL loop, context or perform; a
 * NULL or empty mode name; a dead loop), -ENOMEM. Cost: a loop keeps up to 256
 * spent blocks for reuse, so queueing allocates nothing in steady state; O(1) under the loop's
 * lock. Any thread. */
RL_API int rl_loop_perform_context(rl_loop_t *loop, const char *mode, const rl_block_context_t *context);

/* A human-readable dump, malloc'd (free it): the modes, the common modes, and for every mode its
 * sources, timers (next fire date, interval, tolerance) and observers, whether it is empty, and
 * the loop's counters. */
RL_API char *rl_loop_copy_description(rl_loop_t *loop);

/* The earliest fire date of the valid timers in mode (any common mode for RL_COMMON_MODES is not
 * accepted: name a mode); 0 when there is none. Inside a timer's callout on the loop's thread the
 * timers the fire phase has yet to fire count, and so does the one whose callout runs, at the
 * date it fired for (as in CF); asked from another thread while the loop fires its due timers,
 * the timer whose callout runs counts the same way (a date gone). */
RL_API double rl_loop_get_next_timer_fire_date(rl_loop_t *loop, const char *mode);

/* Counters a loop keeps since its creation (read from any thread; figures are approximate while
 * the loop runs). Times are in seconds. */
typedef struct {
    unsigned long long passes;         /* passes through the run loop */
    unsigned long long waits;          /* passes that blocked in epoll_wait */
    unsigned long long wakeups;        /* waits ended by rl_loop_wakeup() */
    unsigned long long wakeup_writes;  /* eventfd writes rl_loop_wakeup() made */
    unsigned long long timers_fired;   /* timer callouts */
    unsigned long long sources_performed; /* version-0 performs and fd callouts */
    double time_waiting;               /* seconds spent blocked in epoll_wait */
    double time_in_callouts;           /* seconds spent in callouts of any kind (a nested
                                        * run's waits and callouts counted once: see "Loop lag") */
} rl_loop_stats_t;
RL_API int rl_loop_get_stats(rl_loop_t *loop, rl_loop_stats_t *stats);

/* ---- Loop lag ------------------------------------------------------------------------------ */

/* How late a loop fires its timers, and the longest callout it has made: where its thread's
 * time went when it was slow. Kept for every loop, beside rl_loop_stats_t (whose layout is
 * unchanged).
 *
 * Lateness. For each timer a pass fires: the time the pass's timer phase began its callouts
 * (one clock reading, taken once the due timers are collected) minus the timer's fire date.
 * It counts whatever kept the loop from the timer: a wait that woke late, callouts of earlier
 * phases or passes, the thread not being scheduled, the timer's own tolerance (a timer allowed
 * to fire 10 ms late that fires 8 ms late counts 8 ms). Timers fired by one pass share its
 * reading: one that waits behind another timer's long callout in the same pass counts as late
 * as the pass found it, not later (a reading per timer would cost a third of firing one). The
 * exception is a callout that runs the loop (a nested run): the timers of the phase after it
 * count to a reading taken when it returns. A repeating timer that fires after missing grid
 * points (fire date + k * interval, see rl_timer_create) counts once, with the lateness of the
 * date it fires; the points it skipped are in neither late[] nor timers_fired.
 * late[k] counts the fired timers whose lateness L, in microseconds, is
 *     k = 0:                          L < 1
 *     1 <= k <= RL_LAG_BUCKETS - 2:   2^(k-1) <= L < 2^k    (k = 1: [1, 2); k = 10: [512, 1024))
 *     k = RL_LAG_BUCKETS - 1:         L >= 2^(RL_LAG_BUCKETS - 2)    (2^30 us, about 18 minutes)
 *
 * The longest callout. Callouts are timed per phase of a pass, as for time_in_callouts: the
 * clock is read before a phase's first callout and after its last, so the loop's own work
 * between callouts is included, with any wait for the loop's lock (re-arming a repeating timer,
 * invalidating a one-shot observer take it; another thread holding it makes that wait). When
 * the phase made one callout, longest_callout is that callout's time and
 * longest_callout_count is 1; when it made several (due timers, signalled sources, ready fd
 * sources, queued blocks or the observers of one activity, in one pass), it is their total, and
 * longest_callout_count says how many. A callout that runs the loop (a nested run) counts the
 * nested run's time less its waits: its callouts held the loop, its sleeps did not (an idle
 * modal run is no stall). time_in_callouts counts each second once: the outer phase adds its
 * time less the nested run's own phases, which count themselves. Schedule and cancel callouts of
 * version-0 sources run on the adding or removing thread, outside any pass, and are not counted.
 *   The kind is the phase's: RL_CALLOUT_TIMER, RL_CALLOUT_OBSERVER, RL_CALLOUT_BLOCK for their
 * phases; in the signalled-source phase RL_CALLOUT_SIGNAL_SOURCE when every callout of the phase
 * was a signal source's, RL_CALLOUT_PROCESS_SOURCE when every one was a child-process source's
 * (where the kernel has no pidfd), else RL_CALLOUT_SOURCE (version-0 sources, or a mix of
 * kinds); in the fd phase RL_CALLOUT_PROCESS_SOURCE when every callout was a child-process
 * source's (watched through its pidfd), else RL_CALLOUT_FD_SOURCE (fd sources, or a mix).
 *
 * Reading and resetting. The figures count from the loop's creation, or from the last read
 * with RL_LAG_RESET: that call returns them and makes them the new zero, so that the next read
 * reports only timers fired and callouts made after it. Timer counts are exact: a timer that
 * fires while the reset is made is in this read or in the next, never in both, also when
 * several threads reset at once (each claims, with a compare-and-swap, exactly what it reports).
 * The longest callout is a best-effort maximum across a reset made while the loop runs: a phase
 * shorter than the record that ends between the reader's read of the record and its reset is in
 * neither reading. Every reader sees the same zero: a reset starts a new interval for all.
 *
 * Threads: any thread, while the loop runs, with no lock. Each bucket is read atomically but
 * the buckets are not read at one instant (timers_fired is their sum, so it agrees with them);
 * the four longest_callout fields are read together, consistently, under a sequence lock: the
 * loop's thread writes them (when a phase beats the record) in a few stores, and a reader that
 * finds it in the middle spins until it is done, briefly, unless the loop's thread was preempted
 * there. So rl_loop_get_lag is not async-signal-safe on the loop's own thread (a signal handler
 * that interrupted the write would spin forever); elsewhere a handler may call it. In the child
 * of fork, a write the fork cut short is ended and its record voided. A dead loop keeps its
 * figures.
 * Cost: to the loop, about 23 instructions per fired timer (a multiply, a shift and an
 * increment; a load and a comparison that look for a nested run: about 600 per fired one-shot
 * timer, of which 7 for that look, benchmarks/timer-instructions with gcc 12), four loads and a
 * comparison per phase that called out; no clock reading of its own and no lock; an empty pass costs nothing more. To the
 * reader, O(RL_LAG_BUCKETS) atomic loads (and as many compare-and-swaps with RL_LAG_RESET).
 * RL_LAG_BUCKETS sizes late[], part of the struct's layout: it can never change. */
enum { RL_LAG_BUCKETS = 32 };

/* The kinds of callout (rl_loop_lag_t.longest_callout_kind; see "The kind" above). Later
 * versions may add kinds at the end: a reader should treat an unknown kind as a callout. */
enum { RL_CALLOUT_NONE = 0, RL_CALLOUT_TIMER = 1, RL_CALLOUT_SOURCE = 2, RL_CALLOUT_FD_SOURCE = 3,
       RL_CALLOUT_OBSERVER = 4, RL_CALLOUT_BLOCK = 5, RL_CALLOUT_SIGNAL_SOURCE = 6,
       RL_CALLOUT_PROCESS_SOURCE = 7 };

/* Flags of rl_loop_get_lag. */
enum { RL_LAG_RESET = 1u };

/* The layout may grow at its end in a later version, never change: pass sizeof(rl_loop_lag_t)
 * as your header has it. */
typedef struct {
    size_t size;                           /* bytes the library filled in (the rest reads 0) */
    unsigned long long timers_fired;       /* fired timers counted in late[] (their sum) */
    unsigned long long late[RL_LAG_BUCKETS]; /* fired timers by lateness (see above) */
    double longest_callout;                /* seconds; 0 when no callout was made */
    int longest_callout_kind;              /* RL_CALLOUT_*; RL_CALLOUT_NONE when none */
    unsigned longest_callout_count;        /* callouts timed together (1: one callout alone) */
    double longest_callout_end;            /* when it returned, on the rl_time_now() clock */
} rl_loop_lag_t;

/* Fill *lag (size bytes: sizeof(rl_loop_lag_t)) with loop's lag figures, then reset them if
 * flags has RL_LAG_RESET. Bytes past what this version of the library knows are zeroed, and
 * lag->size says how many it filled. -EINVAL: a NULL loop or lag, a size smaller than this
 * first version of the struct, an unknown flag. Any thread; see "Loop lag" above. */
RL_API int rl_loop_get_lag(rl_loop_t *loop, rl_loop_lag_t *lag, size_t size, unsigned flags);

/* ---- Spinning before sleeping ------------------------------------------------------------ */

/* How long loop looks for another wakeup before it sleeps, after a pass that performed signalled
 * sources (its "spin window"). A wakeup posted within the window is taken at once: the waker
 * makes no write(2) and the loop no sleep, so a producer that signals again within the window
 * reaches the loop in about the time a cache line takes to cross cores (under 2 us), against
 * 20-50 us for waking a sleeping thread (benchmarks/README.md, `spin`). The spin ends early when
 * a wakeup comes, when a signal that a signal source of the loop watches is delivered to another
 * thread (one delivered to the loop's own thread, which blocks them outside its waits, is taken
 * when the window ends), when another thread adds or moves a timer of the mode to a date within
 * the window, or at the wait's deadline (a due timer, the run's timeout), never later.
 *   Cost: while it spins, the loop's thread keeps its CPU busy: after each busy pass that is not
 *   followed by more work, one window of CPU time (5 us by default: 0.5% of a CPU at 1000 busy
 *   passes a second; 50 us: 5%; 1 ms: all of it at 1000 a second). An idle loop never spins, nor
 *   does a pass that only polls, nor a pass of timers or fd sources alone: idle CPU stays zero
 *   once the window after the last signal has passed. While it spins the loop sees wakeups but
 *   not fd readiness: an fd that becomes ready during the window is seen when it ends.
 *   Values: 0 never spins (the loop blocks in epoll_wait at once after a busy pass); -0.0 is
 *   stored as 0. The default is 5e-6 (5 us), or 0 when only one CPU is available at the loop's
 *   creation: the online CPUs, fewer if the affinity mask of the thread creating the loop
 *   (sched_getaffinity) says so; CPU quotas of cgroups (containers) are not looked at, so a
 *   process limited to one CPU's worth of time on a many-CPU machine spins by default (set 0).
 *   Windows over 1e-3 (1 ms), INFINITY included, are clamped to 1 ms. Errors: -EINVAL for a
 *   NULL loop, a NaN or negative window. Any thread; it takes effect the next time the loop is
 *   about to sleep (a spin under way keeps the window it began with). A dead loop accepts it. */
RL_API int rl_loop_set_spin(rl_loop_t *loop, double seconds);
/* The spin window of loop in seconds (as clamped); 0 for NULL. Any thread. */
RL_API double rl_loop_get_spin(rl_loop_t *loop);

/* ---- Driving the loop from another event loop ------------------------------------------- */

/* A host loop (GLib, Qt, libuv, a game loop) can drive a loop instead of rl_run(): on the loop's
 * thread, each iteration of the host
 *     1. t = rl_loop_get_backend_timeout(loop, mode);
 *     2. waits until fd = rl_loop_get_backend_fd(loop) is readable, for at most t seconds
 *        (t == 0: do not wait; t == -1: no timeout), along with its own sources;
 *     3. calls rl_run_in_mode(mode, 0, false) when fd is readable or t has passed (calling it
 *        every iteration is also fine: a pass with nothing to do costs about 330 instructions).
 * Step 1 must come right before each wait: it is what makes the fd report wakeups (see below).
 * Rounding t down to the host's granularity (milliseconds) wakes it early for nothing; round up:
 * the fd itself becomes readable at the timer's date, with nanosecond precision.
 *
 * rl_loop_get_backend_fd: an fd to poll for reading (poll, epoll, select, g_source_add_unix_fd,
 * QSocketNotifier). It is readable when a pass is due: a wakeup was posted after step 1
 * (rl_loop_wakeup; a cross-thread rl_source_signal or rl_loop_perform followed by it, as always;
 * rl_loop_stop stops the run under way, if any: none while a host waits at the top level, and the
 * outer run, not the host, for a host nested in a callout), an fd source of the
 * mode is ready, a timer of the mode is due (within its tolerance), a signal that a signal source
 * of the loop watches was delivered. (The loop unblocks its signals only during its own waits;
 * during the host's wait the thread's signal mask applies: a signal that every thread blocks
 * stays pending, and a host that wants it unblocks it on its thread or waits with ppoll.) The
 * fd belongs to the loop: do not read, close or add to it; it stays valid, with the same number,
 * until the loop's thread exits (in the child of fork, ask again: the child's loop has kernel
 * objects of its own). It is an epoll fd watching the loop's wait set, made at the first call
 * (one fd per loop). Returns the fd, or -EINVAL (NULL or dead loop), -EMFILE, -ENFILE, -ENOMEM.
 * Any thread.
 *
 * rl_loop_get_backend_timeout: seconds until a pass in mode is due: 0 when one is due now (a
 * wakeup posted since the last pass began, blocks queued for the mode, a signalled source of the
 * mode, a ready fd of the mode, a timer already due, a signal delivered for a signal source), -1
 * when nothing is scheduled (only a wakeup, an fd or a signal can make a pass due), else the
 * time until the mode's earliest timer (pushed as late as the timers' tolerances allow). A mode
 * with no sources and no timers (an unknown one is created, as by any first use) answers -1: a
 * run in it returns RL_RUN_FINISHED at once, and a wakeup that comes with a new item still makes
 * the fd readable. Only the calling thread's own loop: errors return NaN (test with isnan) and set
 * errno: EINVAL (NULL or dead loop; NULL, empty or common mode name), EPERM (another thread's
 * loop: its poll would take the events that are to end that loop's own wait), ENOMEM.
 * What it does, and costs: one epoll_wait(0) (which takes the stale edges of earlier wakeups and
 * timer expiries, so that they do not keep the fd readable), the loop's lock once, and a
 * timerfd_settime when the mode's earliest timer changed. It marks the loop as sleeping for the
 * host, so that rl_loop_wakeup writes the eventfd, as for a loop asleep in its own wait
 * (rl_loop_is_waiting is then true, until the next pass begins), and adding a timer or a
 * signalled source to mode from another thread wakes the host, as it would wake the loop.
 * It also parks the fds whose events no source of mode wants (their registration is narrowed
 * to mode's interest until a run or query is about another mode), so fd sources of other modes
 * do not keep the fd readable: after the first event of such an fd, the host is not woken by it
 * again while it drives the same mode, unless what the mode wants of the fd changes (a source of
 * it leaves the mode, staying in the loop through another: one more event, and the fd is narrowed
 * again). A registration the kernel keeps for an fd closed before its source was removed
 * (FILE DESCRIPTORS CLOSED TOO EARLY) makes a pass due, whose polls drop it. It never spins
 * (rl_loop_set_spin is for the loop's own waits) and calls no observer.
 *
 * Compared with rl_run(): passes run with a zero timeout, so RL_BEFORE_WAITING and
 * RL_AFTER_WAITING observers are not called (the host waits, not the loop: as CFRunLoop's
 * polling passes, CFRunLoopRunInMode(mode, 0, ...)); RL_ENTRY and RL_EXIT bracket each pass.
 * rl_loop_stop() outside a pass is forgotten: the host decides when to stop. CFRunLoop ignores a
 * wakeup posted while its loop is not waiting (the next run looks at everything anyway); here the
 * query is where the wait begins, as the host waits on the loop's behalf, so a wakeup posted after
 * it is kept, and one posted before it is reported as a pass due now. The query may be
 * made from a callout of the same loop (a host loop nested in a callout): the host then waits for
 * its own mode, whose timers and signalled sources added by other threads wake it as above (the
 * outer run's mode does not, though a signalled source added to it may make the host's fd
 * readable once); the outer run's next wait takes the timerfd back and restores what the host
 * parked. */
RL_API int rl_loop_get_backend_fd(rl_loop_t *loop);
RL_API double rl_loop_get_backend_timeout(rl_loop_t *loop, const char *mode);

/* ---- Sources ------------------------------------------------------------------------------- */

/* A version-0 source: performed by the loop after rl_source_signal(). */
RL_API rl_source_t *rl_source_create(long order, const rl_source_context_t *context);
/* A version-1 source: callback(source, fd, events, info) runs, level-triggered, in each pass
 * where fd is ready for events (RL_FD_READABLE | RL_FD_WRITABLE; RL_FD_ERROR is always
 * reported). The loop never reads, writes or closes fd. Remove or invalidate the source before
 * closing fd. NULL with errno EBADF when fd is not open, EINVAL for unknown events. */
RL_API rl_source_t *rl_source_create_fd(int fd, unsigned events, long order,
                                        rl_fd_callback_t callback, const rl_context_t *context);
/* Change what a version-1 source waits for; takes effect in every loop at once. -EBADF when its
 * fd was closed while it was added (see FILE DESCRIPTORS CLOSED TOO EARLY). */
RL_API int rl_source_set_fd_events(rl_source_t *source, unsigned events);
/* The fd and events of a version-1 source (-1 and 0 for a version-0 source). */
RL_API int rl_source_get_fd(rl_source_t *source);
RL_API unsigned rl_source_get_fd_events(rl_source_t *source);

/* Add source to mode of loop (retains it; a source may be in several modes and loops). Adding it
 * again to the same mode returns -EEXIST and changes nothing. */
RL_API int rl_loop_add_source(rl_loop_t *loop, rl_source_t *source, const char *mode);
/* Remove source from mode (releases it); -ENOENT when it is not there. */
RL_API int rl_loop_remove_source(rl_loop_t *loop, rl_source_t *source, const char *mode);
RL_API bool rl_loop_contains_source(rl_loop_t *loop, rl_source_t *source, const char *mode);
/* Mark a version-0 source as signalled: the loop performs it once at its next pass in a mode that
 * contains it, however often it was signalled before that. Lock-free when already signalled;
 * never allocates, never fails. */
RL_API void rl_source_signal(rl_source_t *source);
RL_API bool rl_source_is_signalled(rl_source_t *source);
/* Remove source from every mode of every loop (cancel runs for each) and stop it for good. */
RL_API void rl_source_invalidate(rl_source_t *source);
RL_API bool rl_source_is_valid(rl_source_t *source);
RL_API long rl_source_get_order(rl_source_t *source);

/* ---- Signal and child-process sources ------------------------------------------------------ */

/* Sources made by the two constructors below are sources like any other: added to modes of
 * loops with rl_loop_add_source (a source may be in several modes and loops), removed,
 * invalidated, reference counted, with the context rules of rl_source_create_fd (the context is
 * copied; retain(info) runs at creation, release(info) when the last reference goes). Their
 * callbacks run on the thread of a loop running a mode that contains them, with no lock held,
 * and may do anything a callout may. What a source holds (its signal's handler, its pidfd) is let
 * go when it is invalidated or its last reference goes, whichever comes first; removing it from
 * its modes alone keeps it, so that it may be added again. rl_source_get_fd() says -1 for both
 * kinds, rl_source_set_fd_events() refuses them (-EINVAL), and rl_source_signal() on them does
 * nothing visible (a callback runs only for something that happened). */

typedef void (*rl_signal_callback_t)(rl_source_t *source, int signo, unsigned count, void *info);

/* A signal source: callback(source, signo, count, info) runs at a pass of a loop holding it after
 * signo was delivered to the process, count being the number of deliveries since its last
 * callout (at least 1; deliveries coalesce, as the kernel itself coalesces a standard signal
 * still pending). Deliveries since the source's creation count, also those made while it was in
 * no loop or while its loop ran another mode: they are reported once it is in a running mode.
 * Every source watching a signal gets every delivery, whichever loops they are in and however
 * many watch it; a source in several loops is called by one of them for each delivery.
 *   How: the first source of a signal installs a process-wide handler for it with sigaction
 * (SA_SIGINFO | SA_ONSTACK, see Handlers below), and the first source of any signal makes one eventfd
 * for the process. The handler only does what is async-signal-safe: it adds one to the signal's
 * atomic counter and to a generation counter, and writes the eventfd, which every loop holding a
 * signal source watches edge-triggered and never reads. A pass compares the generation with the
 * one it last saw (one load) and, when it moved, marks the sources whose signal's counter moved
 * as signalled version-0 sources; so a delivery is performed in the loop's usual order, in a mode
 * that contains the source. While a source of signo exists, signo cannot kill or stop the
 * process (its default action is replaced); SIG_IGN and SIG_DFL are not called.
 *   Handlers: a handler function that was installed before is still called, after the counting,
 * for every delivery (chained: with siginfo if it asked for it), also for one that comes while
 * the library's handler is being installed. The library's handler is installed with that
 * handler's sa_mask and its SA_RESTART and SA_NODEFER, so it runs as it did; one with
 * SA_RESETHAND is called once and counts as SIG_DFL from then on (and SIG_DFL is what is put
 * back); a SIGCHLD handler with SA_NOCLDSTOP is not called for stops and continues (the sources
 * still count them); a SIGCHLD that was SIG_IGN or had SA_NOCLDWAIT keeps SA_NOCLDWAIT, so the
 * kernel goes on reaping children. When nothing was installed (SIG_DFL, SIG_IGN) the library's
 * handler has SA_RESTART, but SA_RESTART does not cover poll, epoll_wait, select, nanosleep and
 * the like: a signal that was ignored by default (SIGWINCH, SIGURG, SIGCHLD, also in the
 * fallback of rl_source_create_process) now makes those fail with EINTR in whichever thread
 * takes it, as any handler would. The chained handler may leave by siglongjmp or exit: nothing of
 * the library is held meanwhile. The last source of signo gone puts back the disposition found
 * by the first (with its mask and flags), unless something else replaced the library's handler
 * meanwhile, which is then left alone; a polite replacement calls the library's handler, which
 * then goes on chaining to what it found, so while the replacement stays in place a later first
 * source does not install over it (it relies on the replacement's chaining; a replacement that
 * does not chain starves that source). A handler that was installed over the library's, and
 * puts the library's back when it goes, leaves things as if it had never come. A further
 * handler that chains to such a replacement, installed over it after the last source went, is
 * not told apart: keep handlers stacked in order. The last source of all closes the eventfd
 * once no handler of the library that might write it is running on any thread (a handler counts
 * itself before it reads the eventfd's number, so one that has not yet reads the closed mark).
 *   Signal masks: the library never changes a thread's mask, with one exception: a loop holding
 * signal sources takes their signals while it sleeps, whatever its thread blocks (it waits with
 * epoll_pwait and the thread's mask less those signals; the mask is back as it was when the
 * wait returns; a source added to a running loop wakes it, so its next sleep takes the new
 * signal). A signal sent to the process is handled by any thread that does not block it,
 * including threads the library does not know, or else by a sleeping loop that watches it; so
 * nothing has to be blocked or unblocked anywhere. This matters with libdispatch, whose worker
 * threads block nearly every signal (as does every thread they start, Swift's cooperative pool
 * included, and the main thread after dispatch_main()): there, the sleeping loop is often the
 * only thread that can take the signal. (signalfd was not chosen because it needs the opposite:
 * the signal blocked in every thread, which a library cannot ensure for threads it did not
 * create.) A signal directed at one thread (raise, pthread_kill) is taken by that thread only:
 * if it blocks the signal and runs no loop watching it, the signal stays pending there. A loop
 * takes one pending signal per wait, so deliveries that were pending while every thread blocked
 * them are reported over as many passes. A loop that never sleeps (it only polls) takes none.
 *   Faults: a synchronous fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS raised by the
 * kernel for the faulting instruction, not sent) cannot be resumed: after counting it, the
 * handler chains to a previous handler function if there was one (not a spent SA_RESETHAND one),
 * else restores the default action, so the instruction faults again and the process dies as it
 * would have; a SIGTRAP or SIGSYS, whose instruction does not run again (x86's int3, a call a
 * seccomp filter refused), is sent again with raise() to the same end.
 *   Fork: the child inherits the handlers and the sources (see FORK); the child's loop watches
 * an eventfd of its own, so the child's signals do not wake the parent's loops. exec resets the
 * handlers, as for any handler. Child-exit sources are different: see rl_source_create_process.
 *   Errors: NULL with errno EINVAL for a NULL callback, signo out of 1..NSIG-1, SIGKILL or SIGSTOP,
 * or a signal sigaction refuses (those glibc keeps for itself, 32 and 33); EMFILE or ENFILE (no fd
 * for the eventfd); ENOMEM.
 *   Cost: one allocation (the source, 320 bytes); the first source of a signal makes one
 * sigaction call to read the disposition and one to install, the first of all one eventfd. A
 * delivery costs the handler four atomic read-modify-writes (five when the chained handler has
 * SA_RESETHAND) and one write(2); a loop holding a signal source pays one load per pass and one
 * sigprocmask call per sleep, and a pass after a delivery takes the loop's lock once to look at
 * the loop's signal sources (O(n) in those it holds). Any thread. */
RL_API rl_source_t *rl_source_create_signal(int signo, long order, rl_signal_callback_t callback,
                                            const rl_context_t *context);

typedef void (*rl_process_callback_t)(rl_source_t *source, int pid, int status, void *info);

/* A child-exit source: callback(source, pid, status, info) runs once, at a pass of a loop holding
 * it after the child pid exited (or had exited already when the source was made or added: a
 * zombie is reported at once), with its wait status as waitpid() gives it (WIFEXITED and
 * WEXITSTATUS, WIFSIGNALED, WTERMSIG and WCOREDUMP work on it). The library reaps the child:
 * do not wait for it yourself. The source is invalidated just before the callback (it fires
 * once; rl_source_is_valid then says false, and a run whose mode held only it finishes). pid
 * must be a child of the calling process that has not been reaped (checked with waitid and
 * WNOWAIT, which reaps nothing). Any number of children may be watched at once, from any loops;
 * no SIGCHLD handler is needed, nor is any installed while the kernel has pidfds.
 *   How: the source holds a pidfd (pidfd_open, Linux 5.3), which it watches as a level-triggered
 * fd source: readable once the child has exited. Its callback reaps with waitid(P_PIDFD) (P_PID
 * on Linux 5.3, which lacks P_PIDFD) and WNOHANG, under the source's lock, so a child is reaped
 * once even if two loops see it at the same moment, and never after the pidfd is closed.
 *   Fallback: where pidfd_open fails with ENOSYS (before Linux 5.3) or EPERM (a seccomp filter),
 * the source watches SIGCHLD instead, as a signal source does (its handler is installed while such
 * a source exists; see rl_source_create_signal), and at each pass after a SIGCHLD it tries
 * waitid(P_PID, pid, WEXITED | WNOHANG); a child that exited before that is found by a first try
 * when the source joins a loop. It costs one waitid per such source per SIGCHLD.
 *   Who else reaps: if something else in the process reaps the child first (waitpid(-1, ...),
 * SIGCHLD set to SIG_IGN or SA_NOCLDWAIT, which the fallback's handler keeps), its status is lost
 * to the library: the callback then runs with status -1 (neither WIFEXITED nor WIFSIGNALED).
 * Removing or invalidating the source before the child exits reaps nothing: the child is yours
 * to wait for again.
 *   Exited but not yet reapable: a child traced (ptrace) by another process can be reaped only
 * after its tracer has waited for it, though its pidfd says it has exited (and on Linux 5.3,
 * with no P_PIDFD, a child reaped by someone else whose pid went to a running child looks the
 * same). The source then stops watching the pidfd and looks again after a pause doubling from
 * 10 ms to 1 s, by a one-shot timer in the loop and mode that saw it (so a loop that runs
 * another mode meanwhile sees it only when it runs that mode again): the loop sleeps meanwhile.
 *   Fork: a child-exit source inherited by a forked child is the parent's: in the forked child it
 * is invalidated without a callback the first time a loop there sees the child exit (or, in the
 * fallback, sees any SIGCHLD), and it reaps nothing there.
 *   Errors: NULL with errno EINVAL for pid <= 0 or a NULL callback; ECHILD when pid is not an
 * unreaped child of this process; EMFILE or ENFILE (no fd for the pidfd); ENOMEM.
 *   Cost: one allocation (the source) and one fd (the pidfd) per child, closed when the source is
 * invalidated (the callback's time at the latest) or destroyed; watching it costs what an fd
 * source costs (one epoll registration per loop it is in). Any thread. */
RL_API rl_source_t *rl_source_create_process(int pid, long order, rl_process_callback_t callback,
                                             const rl_context_t *context);

/* ---- Timers -------------------------------------------------------------------------------- */

/* A timer first due at fire_date (rl_time_now() scale; a date in the past counts as now, as in CF,
 * so it fires at the next pass and a repeating timer's grid starts from its creation),
 * repeating every interval seconds when interval > 0, once when interval == 0. A repeating timer
 * that missed fire dates while the loop was busy fires once and then keeps to its grid (the date
 * it was last given, plus k * interval), skipping the missed points. NULL and EINVAL for a NaN or
 * negative date or interval, or a NULL callback; NULL and ENOMEM when out of memory (a repeating
 * timer takes a second small allocation, and a callback new to the process one more, once). */
RL_API rl_timer_t *rl_timer_create(double fire_date, double interval, long order,
                                   rl_timer_callback_t callback, const rl_context_t *context);
/* Like rl_timer_create, except that the timer holds its context only while a loop holds the
 * timer, so that info may own the timer without a cycle (a wrapper's handle object can be the
 * context itself: it owns one reference to the timer, and the timer keeps it alive only while
 * scheduled).
 *   Ownership: retain(info) runs when a loop claims the timer (it had no loop, and is added to
 *   a first mode of this one, by name or through RL_COMMON_MODES); release(info) runs once the
 *   timer leaves that loop (out of its last mode and of the common modes: removed, invalidated,
 *   a one-shot timer fired, or the loop torn down). Creating the timer does not retain info and
 *   destroying it does not release it; retain's result is ignored (info stays as given). The
 *   caller keeps info valid while the timer is in no loop, at least until an add returns.
 *   retain and release pair exactly and in order: a release never runs before its retain, and
 *   an add that fails after claiming the timer runs both before it returns.
 *   Callouts: info is valid for the whole of every callout, even when the callout or another
 *   thread removes or invalidates the timer meanwhile (the release is then run as the callout
 *   returns, on the loop's thread).
 *   Threads: retain runs on the adding thread with the loop's lock held: it must not call any
 *   function of this library (an atomic increment is the expected kind). release runs with no
 *   lock of the library held, on the thread that removed the timer (or whose loop fired,
 *   invalidated or tore it down), and may do anything, rl_release() of this very timer included.
 *   Fork: a release that another thread of the parent was about to run when the process forked
 *   is not run in the child (the child keeps one reference to info too many, never one too few).
 *   Errors: as rl_timer_create. A NULL context, or one with neither retain nor release, makes an
 *   ordinary timer (rl_timer_create).
 *   Cost: the same 72-byte allocation as rl_timer_create; the callback and the two functions are
 *   stored once per distinct tuple for the whole process (a list searched at creation, first hit
 *   for a thread that makes its timers with one tuple; ENOMEM if a new tuple cannot be stored). A callout costs no retain or release. */
RL_API rl_timer_t *rl_timer_create_held(double fire_date, double interval, long order,
                                        rl_timer_callback_t callback, const rl_context_t *context);
/* Add timer to mode of loop (retains it). A timer may be in several modes of one loop, never in
 * two loops: -EBUSY. Adding it to a mode it is already in returns -EEXIST. Removing it from a
 * mode it is not in returns -ENOENT (as for sources and observers). An invalid timer: -EINVAL,
 * nothing added. Invalidated by another thread while this call runs: either the add fails with
 * -EINVAL or the invalidation takes the timer out; an invalid timer never stays in a loop. */
RL_API int rl_loop_add_timer(rl_loop_t *loop, rl_timer_t *timer, const char *mode);
RL_API int rl_loop_remove_timer(rl_loop_t *loop, rl_timer_t *timer, const char *mode);
RL_API bool rl_loop_contains_timer(rl_loop_t *loop, rl_timer_t *timer, const char *mode);
/* Remove timer from every mode and stop it for good. A one-shot timer is invalidated after its
 * callout returns. */
RL_API void rl_timer_invalidate(rl_timer_t *timer);
/* rl_timer_invalidate for the owner of a held timer's context (rl_timer_create_held and the held
 * timeouts and timers in storage), saying whether ending what the context holds falls to the
 * caller: true when this call invalidated the timer while no loop held its context (it was in no
 * loop, and no release of its context was due), so that no release follows the invalidation;
 * false when the timer was already invalid (NULL included), or when a release of the context
 * follows (it ran inside this call, or runs as the timer's callout under way returns, on the
 * loop's thread), which then finds the timer invalid (rl_timer_is_valid). A release that another
 * thread began before this call (the timer left its last loop there) may find the timer invalid
 * too: a wrapper ends its context once, whoever comes first. For a timer that is not held: true
 * when this call invalidated it. Any thread, also from the timer's callout. An addition beyond
 * CF, for wrappers whose handle is the context (it needs no count of the loop's holds). */
RL_API bool rl_timer_invalidate_held(rl_timer_t *timer);
/* Inside the context's release of a held timer: true when that release is the timer's end and
 * nothing can race it, because the loop invalidated the timer and let it go in one step as its
 * one-shot callout returned (so no rl_timer_invalidate_held call on it returns true, before or
 * after); the release alone then ends what the context holds, with no atomic arbitration. False
 * for any other release (removed, invalidated by a call, its loop ended: ends that an
 * invalidation on another thread may race), outside a release, and for NULL. Answers for the
 * calling thread: one thread-local load, no lock. An addition beyond CF, for wrappers that end
 * their context once (rl_timer_invalidate_held). */
RL_API bool rl_timer_context_release_is_final(rl_timer_t *timer);
RL_API bool rl_timer_is_valid(rl_timer_t *timer);
RL_API double rl_timer_get_next_fire_date(rl_timer_t *timer);
/* Move the next fire date; a date in the past counts as now (the timer fires at the next pass,
 * and a repeating timer's grid restarts there). Also from inside a repeating timer's own
 * callout, where a date later than the one being fired is kept instead of the next grid point.
 * A one-shot timer is invalidated as its callout returns whatever date the callout set (the call
 * returns 0 there, and the date is dropped), as in CF: it cannot be re-armed once it has fired.
 * Returns -EINVAL for an invalidated timer (a fired one-shot timer included), or a NaN or
 * negative date. INFINITY parks the timer (dormant, valid, in its modes) until the next call.
 * An idle timeout that must survive its firing is rl_timer_create_timeout's: this call re-arms it
 * before or after it fired, also from inside its callout (see TIMEOUTS). */
RL_API int rl_timer_set_next_fire_date(rl_timer_t *timer, double fire_date);
/* rl_timer_set_next_fire_date(timer, rl_time_now() + seconds), with one clock reading instead of
 * two (the caller's and the clamp's): the re-arm of an idle timeout. seconds >= 0; INFINITY
 * leaves the timer dormant until the next call. Same rules, errors and threads as
 * rl_timer_set_next_fire_date. An addition beyond CF (see TIMEOUTS). */
RL_API int rl_timer_set_next_fire_in(rl_timer_t *timer, double seconds);
/* Re-arm timer seconds after the loop's time: when the caller is a callout of the timer's loop
 * (on that loop's thread), the clock reading its current callout phase began with (libev's
 * ev_now, libuv's uv_now), so that serving a batch of connections in one pass reads the clock
 * once, not once per connection; elsewhere (another thread, outside a callout, or after a call
 * of rl_run or rl_run_in_mode inside this callout) the clock, as rl_timer_set_next_fire_in. The
 * cost of the saving: a phase that has run for d seconds before the call arms the timer d seconds early (a 5 s idle
 * timeout set 2 ms into a busy pass fires 4.998 s after the call); use
 * rl_timer_set_next_fire_in where that matters. seconds >= 0, INFINITY parks the timer. Same
 * errors, rules and threads as rl_timer_set_next_fire_date. An addition beyond CF (see
 * TIMEOUTS). */
RL_API int rl_timer_rearm(rl_timer_t *timer, double seconds);
/* Arm timer seconds after its loop's time (rl_loop_get_time) with no clock reading, inside a
 * callout or not, when the caller is the timer's loop's thread: libev's ev_timer_start and
 * ev_timer_again, libuv's uv_timer_start, which arm from the loop's cached time. The date is
 * not clamped to now: one already gone (a loop time older than seconds) is due at the next pass,
 * in date order. Outside a callout the loop's time can be old (see rl_loop_get_time), so the
 * timer can fire that much early; a thread arming after long work of its own calls
 * rl_loop_update_time first, or uses rl_timer_set_next_fire_in. Elsewhere (another thread, a
 * timer in no loop): rl_timer_set_next_fire_in. seconds >= 0; INFINITY parks the timer. Same
 * errors, rules and threads as rl_timer_set_next_fire_date. An addition beyond CF (see
 * TIMEOUTS). */
RL_API int rl_timer_rearm_from_loop_time(rl_timer_t *timer, double seconds);
/* A timeout: a one-shot timer (interval 0) that its callout leaves valid, in its modes and
 * dormant (next fire date INFINITY) instead of invalidated, unless the callout armed it again
 * with rl_timer_set_next_fire_in or rl_timer_set_next_fire_date (kept when later than the date
 * being fired). fire_date may be INFINITY: the timeout is made dormant, to be armed later. In
 * every other way an rl_timer_create timer (errors, ownership of context, cost: the same
 * 72-byte allocation, and no other: a timeout never repeats). An addition beyond CF (see TIMEOUTS). */
RL_API rl_timer_t *rl_timer_create_timeout(double fire_date, long order, rl_timer_callback_t callback,
                                           const rl_context_t *context);
/* A timeout whose context is held only while a loop holds it, as rl_timer_create_held. */
RL_API rl_timer_t *rl_timer_create_timeout_held(double fire_date, long order, rl_timer_callback_t callback,
                                                const rl_context_t *context);
/* How many bytes a timer takes: the least memory rl_timer_create_in accepts (it checks the size it
 * is given against the library it runs with, so a program built with an older header gets NULL
 * with errno EINVAL, never an overrun). */
#define RL_TIMER_STORAGE_SIZE 72
/* Memory for rl_timer_create_in: size bytes at memory (at least RL_TIMER_STORAGE_SIZE, aligned to
 * 8 bytes), and the function that hands it back. */
typedef struct rl_timer_storage {
    void *memory;
    size_t size;
    void (*done)(void *memory);
} rl_timer_storage;
/* Flags of rl_timer_create_in. */
enum {
    RL_TIMER_IN_HELD = 1,   /* the context is held as rl_timer_create_held's: only while a loop holds the timer */
    RL_TIMER_IN_TIMEOUT = 2, /* a timeout, as rl_timer_create_timeout's (interval must be 0) */
    /* fire_date kept as given, also when it has passed, with no clock reading (a timer made
     * from the loop's time, rl_loop_get_time() + seconds, as rl_timer_rearm_from_loop_time arms
     * one); without it a date already gone becomes now, as in CF */
    RL_TIMER_IN_DATE_AS_GIVEN = 4,
    /* with RL_TIMER_IN_HELD: info owns a reference to the timer for as long as a loop holds info
     * (a wrapper's handle that is the context and owns the timer), so that a loop may let go of
     * its own references before it runs the context's release. A one-shot timer fired by a
     * loop's outermost timer phase (not one that a callout runs nested) then leaves the loop as
     * its callout returns, not as the phase ends, and a handle whose last reference goes in that
     * release finds its reference to the timer the last (rl_release_if_last says true: done runs
     * inside it), unless the phase still holds one of the loop's (the timer was taken out of a
     * mode, or left its loop, while the phase ran). Fired by a nested run, it leaves as without
     * the flag (rl_release_if_last says false there). EINVAL without RL_TIMER_IN_HELD */
    RL_TIMER_IN_OWNED_BY_CONTEXT = 8
};
/* A timer in memory of the caller's, for a caller that already has an allocation to put it in (a
 * connection's struct, a wrapper's object): creating it allocates nothing. An addition beyond CF.
 * In every other way the timer rl_timer_create makes (rl_timer_create_held's with
 * RL_TIMER_IN_HELD, rl_timer_create_timeout's with RL_TIMER_IN_TIMEOUT, both together for a held
 * timeout), and the pointer returned is storage->memory. RL_TIMER_IN_DATE_AS_GIVEN keeps a
 * fire_date that has passed instead of making it now, and so reads no clock: with
 * rl_loop_get_time(loop) + seconds it makes a timer armed from the loop's time.
 *   Ownership: the timer is reference counted like any other (the caller owns the reference
 *   returned; loops, callouts and rl_retain take their own), and the memory is the timer's from
 *   this call until done(memory) runs: done runs exactly once, when the last reference goes,
 *   after the context's release; until then the caller leaves the memory alone (no write, no
 *   free, no reuse). The storage struct itself is read by this call only.
 *   Threads: done runs on the thread that dropped the last reference: inside the caller's
 *   rl_release or rl_release_if_last, inside rl_timer_invalidate or rl_loop_remove_timer (on
 *   whatever thread calls them) when the loop's references were the last, on the loop's thread
 *   as a timer phase that took the timer as due ends (the phase holds every timer it took until
 *   then, as CF's does: so a one-shot timer fired, or a due timer that a callout or another
 *   thread invalidated or removed while the phase ran, goes then when nothing else holds it; a
 *   one-shot timer made with RL_TIMER_IN_OWNED_BY_CONTEXT leaves as its callout returns), or
 *   as the loop ends with its thread. No lock of the library is held; the library touches the memory
 *   no more once done is called, so done may free it, reuse it for a new timer, or let its
 *   owner go.
 *   Fork: in the child, a timer that another thread's loop holds stays in that dead loop (see
 *   FORK) and its memory stays the timer's until it is invalidated or removed; a done that
 *   another thread of the parent was about to run is not run in the child.
 *   Errors: NULL and EINVAL as rl_timer_create, and for a NULL storage, memory or done, a size
 *   below the timer's, memory not aligned to 8 bytes, an unknown flag, or RL_TIMER_IN_TIMEOUT
 *   with an interval; ENOMEM when the tuple (callback, retain, release, done) is new to the
 *   process and cannot be stored, or a repeating timer finds no memory for its interval (see
 *   Cost). On an error the memory is not written.
 *   Cost: no allocation for a one-shot timer or a timeout (a repeating one allocates 24 bytes for
 *   its interval, as rl_timer_create's does); the callback and the context's retain, release and
 *   done are stored once per distinct tuple for the whole process, as rl_timer_create_held's (one
 *   record for a program that uses one tuple). */
RL_API rl_timer_t *rl_timer_create_in(const rl_timer_storage *storage, unsigned flags, double fire_date,
                                      double interval, long order, rl_timer_callback_t callback,
                                      const rl_context_t *context);
/* Whether timer is a timeout: made by rl_timer_create_timeout(_held), or rl_timer_create_in with
 * RL_TIMER_IN_TIMEOUT. */
RL_API bool rl_timer_is_timeout(rl_timer_t *timer);
/* Park timer: rl_timer_set_next_fire_date(timer, INFINITY) without a clock reading. It stays
 * valid and in its modes, and fires only once armed again. -EINVAL for NULL or an invalidated
 * timer. Any thread. An addition beyond CF (see TIMEOUTS). */
RL_API int rl_timer_disarm(rl_timer_t *timer);
/* Whether timer is valid and has a finite next fire date (false for NULL). */
RL_API bool rl_timer_is_armed(rl_timer_t *timer);
RL_API double rl_timer_get_interval(rl_timer_t *timer);
RL_API bool rl_timer_does_repeat(rl_timer_t *timer);
/* How late the timer may fire to share a wakeup with other timers (default 0). */
RL_API double rl_timer_get_tolerance(rl_timer_t *timer);
/* Set it: 0, -EINVAL (NULL, invalidated, NaN or negative), or -ENOMEM when a timer that never had
 * a tolerance (nor an interval, nor a second mode) finds no memory for one; 0 needs none. */
RL_API int rl_timer_set_tolerance(rl_timer_t *timer, double tolerance);
RL_API long rl_timer_get_order(rl_timer_t *timer);

/* ---- Observers ----------------------------------------------------------------------------- */

/* An observer called for each of activities (RL_* bits) in every mode it is added to, in
 * ascending order among the observers of that activity. Observers of equal order run in the order
 * they were added to that mode (as CF: each joins after the last of lower or equal order), so one
 * removed and added back runs after its equals; those that join a mode when it is made common
 * (rl_loop_add_common_mode) come after the mode's own, in the order they were created (CF's order
 * there is arbitrary). Ties among timers go by order then by scheduling, among sources by order
 * then by signalling (see WHERE THIS DIFFERS). A non-repeating observer is invalidated after its
 * first callout. An observer is not called again while its callout is running (in a nested run).
 * NULL and EINVAL for no activity or a NULL callback. */
RL_API rl_observer_t *rl_observer_create(unsigned activities, bool repeats, long order,
                                         rl_observer_callback_t callback, const rl_context_t *context);
/* Add observer to mode of loop (retains it); -EBUSY when it belongs to another loop, -EEXIST when
 * it is already in mode, -EINVAL when it is invalid (invalidated by another thread while this
 * call runs: the add fails or the invalidation takes it out, as for timers). */
RL_API int rl_loop_add_observer(rl_loop_t *loop, rl_observer_t *observer, const char *mode);
RL_API int rl_loop_remove_observer(rl_loop_t *loop, rl_observer_t *observer, const char *mode);
RL_API bool rl_loop_contains_observer(rl_loop_t *loop, rl_observer_t *observer, const char *mode);
RL_API void rl_observer_invalidate(rl_observer_t *observer);
RL_API bool rl_observer_is_valid(rl_observer_t *observer);
RL_API unsigned rl_observer_get_activities(rl_observer_t *observer);
RL_API bool rl_observer_does_repeat(rl_observer_t *observer);
RL_API long rl_observer_get_order(rl_observer_t *observer);

#ifdef __cplusplus
}
#endif
#endif /* CRUNLOOP_H */
