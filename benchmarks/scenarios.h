/* scenarios.h - the conditions the wakeup-latency benchmark measures under (scenarios.c).
 *
 *   idle      an idle loop woken from another pinned CPU (the benchmark as it always was)
 *   busy      the woken loop also watches SCEN_BUSY_FDS eventfds, 1% of which a feeder thread
 *             (on the loop's CPU) makes readable every millisecond, and holds SCEN_BUSY_TIMERS
 *             armed timers due one to two hours ahead (they never fire while it is measured)
 *   load      as idle, with CPU-bound threads running: one per CPU besides the two measured,
 *             and at least one, on the loop's CPU when there is no other
 *   samecpu   the waker and the loop (both loops of the ping-pong) pinned to one CPU; the waker
 *             yields while it waits for the acknowledgement
 *   unpinned  nobody pinned: the scheduler places the threads (the waker yields while it waits:
 *             spinning, it would keep the loop off a CPU they happen to share) */
#ifndef SCENARIOS_H
#define SCENARIOS_H

#include "bench.h"

enum { SCEN_IDLE, SCEN_BUSY, SCEN_LOAD, SCEN_SAMECPU, SCEN_UNPINNED, SCEN_COUNT };
#define SCEN_BUSY_FDS 10000              /* a full run's; --quick: 2000 */
#define SCEN_BUSY_TIMERS 100000           /* a full run's; --quick: 20000 */
#define SCEN_BUSY_TICK_NS 1000000ull       /* the feeder's period */

extern const char *const scenario_names[SCEN_COUNT];
extern const char *const scenario_what[SCEN_COUNT];
/* A comma-separated list (NULL: all) into a bit mask of scenarios; -1 and *bad set to the first
 * unknown name (its length in *bad_len) when one is not a scenario. */
int scenario_mask(const char *list, unsigned *mask, const char **bad, int *bad_len);

/* ---- busy: eventfds watched by the loop, a feeder thread, armed timers ---------------------- */
typedef struct busy busy_t;
/* Makes the eventfds (RLIMIT_NOFILE raised soft to hard, and further when allowed; fewer fds when
 * it cannot reach fds + 256, said in note). NULL when not even one can be made. */
busy_t *busy_new(int fds, int timers, char *note, size_t note_len);
void busy_free(busy_t *b);
int busy_fds(const busy_t *b);
int busy_active_per_tick(const busy_t *b);
/* The timers peer p would hold (the epoll floor's are timerfds: as many as the fd limit leaves). */
int busy_timers_for(const busy_t *b, const peer_t *p);
/* Why p cannot be busy (no fd watchers or no timers), NULL when it can. */
const char *busy_unsupported(const peer_t *p);
/* On the loop's thread, before it runs: drain the eventfds, watch every one and arm the timers.
 * 0, or -1 when a watcher or timer could not be made (what was made is kept for detach). */
int busy_attach(busy_t *b, peer_t *p, void *loop);
/* On the loop's thread after it ran: every watcher and timer freed. */
void busy_detach(busy_t *b);
/* The feeder: every SCEN_BUSY_TICK_NS it writes to 1% of the eventfds (random ones), on cpu
 * (-1: unpinned); it stops at busy_feed_stop or after max_s at the latest. */
void busy_feed_start(busy_t *b, int cpu, double max_s);
void busy_feed_stop(busy_t *b);
typedef struct {
    double seconds;             /* the feeder's run */
    unsigned long long writes;  /* eventfd writes by the feeder */
    unsigned long long reads;   /* eventfd reads by the loop's callbacks (each drains one fd) */
    long timers_armed, timers_fired;
} busy_stats_t;
void busy_stats(const busy_t *b, busy_stats_t *out);

/* ---- load: CPU-bound threads ---------------------------------------------------------------- */
typedef struct load load_t;
/* max(1, allowed CPUs - 2) spinning threads, each pinned to an allowed CPU other than cpu_a and
 * cpu_b, or to cpu_b when there is none; they stop at load_stop or after max_s at the latest. */
load_t *load_start(int cpu_a, int cpu_b, double max_s);
void load_stop(load_t *l);            /* stops and joins them */
int load_threads(int cpu_a, int cpu_b, int *cpus, int max);   /* their number and CPUs */

#endif
