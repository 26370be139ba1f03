/*
 * fd_table.h - the fd table (fd_table.c): which sources of a loop watch which fd, their
 * registrations in the wait set (wait.h), and the fd phase of a pass (rl_fd_table_dispatch). Its
 * layout, rl_fd_table, is the loop's (internal.h); the loop lock guards it.
 */
#ifndef RL_FD_TABLE_H
#define RL_FD_TABLE_H

#include "internal.h"
#include "wait.h"

/* Attach a version-1 source (registering its fd, or probing that the registered file is still
 * the one at that number). 0, or a negative errno with nothing changed. */
RL_HIDDEN int rl_fd_table_attach(rl_loop_t *loop, rl_source_t *source);
RL_HIDDEN void rl_fd_table_detach(rl_loop_t *loop, rl_source_t *source);
/* After the source's interest changed: -EBADF when its fd was closed while registered. */
RL_HIDDEN int rl_fd_table_set_events(rl_loop_t *loop, rl_source_t *source);
RL_HIDDEN bool rl_fd_table_is_stale(rl_loop_t *loop, rl_source_t *source);
/* A source already attached joined one more mode: its fd, if parked (narrowed to a mode that had
 * no source for it, perhaps the one it joined), gets its full registration back. */
RL_HIDDEN void rl_fd_table_joined(rl_loop_t *loop, rl_source_t *source);
/* A wait returned no event while stale_seen: the stale registration is gone. Loop's thread. */
RL_HIDDEN void rl_fd_table_stale_gone(rl_loop_t *loop);
/* Call out to the sources of the running mode that a wait's events are for, in ascending order
 * (ties: in the order the wait reported their fds, and sources of one fd in the order added),
 * each with the events it asked for that came. Drops events of stale registrations, and rebuilds
 * the epoll set when one keeps coming. Returns whether a source was called. n > 0; takes the
 * lock. */
RL_HIDDEN bool rl_fd_table_dispatch(rl_loop_t *loop, rl_run_frame *run, const rl_wait_event *events, int n);
/* A blocking wait that a wakeup ended returned fd events too: when work for mode is queued
 * (signalled version-0 sources, blocks), keep of them only the ones that must be handled now, and
 * leave the level-triggered rest to the next pass's wait, which finds them again (that pass
 * performs the queued work first, then polls). Returns how many events are kept (compacted in
 * events). Never twice in a row, so that fds are not starved by wakeups. Takes the lock. */
RL_HIDDEN int rl_fd_table_defer(rl_loop_t *loop, rl_mode *mode, rl_wait_event *events, int n);
/* For a host's query (backend.c): of the events a poll of the wait set took, park the fds no
 * source of mode wants, and queue again the edge-triggered events a source of mode wants (the
 * poll consumed them; the pass's wait must see them). Returns whether a source of mode wants one.
 * loop locked. */
RL_HIDDEN bool rl_fd_table_settle(rl_loop_t *loop, rl_mode *mode, const rl_wait_event *events, int n);
/* Give every parked fd back its full registration. loop locked. */
RL_HIDDEN void rl_fd_table_unpark_all(rl_loop_t *loop);
/* The same when the fds are parked for a mode other than mode (a run in mode starts or waits, a
 * nested run returns to an outer one in mode, a host asks about mode): inline when none is
 * parked, the usual case. Fds stay parked between runs in one mode, so that a host waiting on
 * the backend fd between passes is not woken by fds of other modes. loop locked. */
static inline void rl_fd_table_unpark_for(rl_loop_t *loop, rl_mode *mode) {
    if (loop->fds.parked.count && loop->fds.parked_mode != mode) rl_fd_table_unpark_all(loop);
}
/* After fork, in the child: new kernel objects, every fd registered again. */
RL_HIDDEN int rl_fd_table_renew(rl_loop_t *loop);
RL_HIDDEN void rl_fd_table_free(rl_loop_t *loop);
RL_HIDDEN int rl_fd_table_verify(rl_loop_t *loop, void (*fail)(void *ctx, const char *what, long a), void *ctx);

#endif
