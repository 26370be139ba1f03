/* 02-timers-while-tracking.c - which timers fire while the loop "tracks" (issue 11, example 2).
 *
 * Pattern: UITrackingRunLoopMode. While a finger drags a scroll view, UIKit runs the main loop
 * in a tracking mode, so a timer added to the default mode alone (NSTimer's scheduledTimer)
 * pauses until the drag ends; a timer added to the common modes keeps firing, because the
 * tracking mode is one of the common modes. Here the loop runs four phases of 100 ms each with
 * three repeating 10 ms timers:
 *   clock      RL_DEFAULT_MODE only        (scheduledTimer)
 *   heartbeat  RL_COMMON_MODES             (addTimer:forMode:NSRunLoopCommonModes)
 *   drag       the tracking mode only      (what the scroll view animates while tracking)
 *
 * What to watch for:
 *   1. default mode: clock and heartbeat fire, drag does not;
 *   2. tracking mode, not yet common: only drag fires - heartbeat is in the common modes, and
 *      the tracking mode is not one of them yet;
 *   3. rl_loop_add_common_mode(tracking): heartbeat joins the tracking mode at once (it was
 *      added to RL_COMMON_MODES, not to a list of names); clock stays paused;
 *   4. default mode again: clock resumes with one firing for all the dates it missed, then keeps
 *      to its 10 ms grid (missed dates are skipped, never caught up).
 * Every callout records the mode it ran in (rl_loop_copy_current_mode); the checks are on those.
 */
#include <crunloop.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "02-timers-while-tracking: check failed at line %d: %s: ",        \
                    __LINE__, #cond);                                                         \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static const char *const TRACKING = "UITrackingRunLoopMode";
static const double INTERVAL = 0.010, PHASE = 0.100;

typedef struct {
    const char *name;
    int fired;                  /* in the current phase */
    int fired_in_wrong_mode;    /* in a mode it was not meant to be in */
    const char *allowed[2];     /* the modes it may fire in (NULL-terminated) */
} counter_t;

static void tick(rl_timer_t *timer, void *info)
{
    (void)timer;
    counter_t *c = info;
    char *mode = rl_loop_copy_current_mode(rl_loop_get_current());
    CHECK(mode != NULL, "a callout outside a run");
    bool allowed = false;
    for (int i = 0; i < 2 && c->allowed[i]; i++) allowed |= strcmp(mode, c->allowed[i]) == 0;
    if (!allowed) c->fired_in_wrong_mode++;
    c->fired++;
    free(mode);
}

static rl_timer_t *repeating(counter_t *counter, const char *mode)
{
    rl_context_t context = { .info = counter };
    rl_timer_t *t = rl_timer_create(rl_time_now() + INTERVAL, INTERVAL, 0, tick, &context);
    CHECK(t != NULL, "rl_timer_create: %s", strerror(errno));
    CHECK(rl_loop_add_timer(rl_loop_get_current(), t, mode) == 0, "add %s", counter->name);
    return t;
}

static void run_phase(const char *title, const char *mode, counter_t *counters[3])
{
    for (int i = 0; i < 3; i++) counters[i]->fired = 0;
    int r = rl_run_in_mode(mode, PHASE, false);
    CHECK(r == RL_RUN_TIMED_OUT, "run in %s returned %d", mode, r);
    printf("%-36s clock %2d   heartbeat %2d   drag %2d\n", title, counters[0]->fired,
           counters[1]->fired, counters[2]->fired);
    for (int i = 0; i < 3; i++)
        CHECK(counters[i]->fired_in_wrong_mode == 0, "%s fired in a mode it is not in",
              counters[i]->name);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rl_loop_t *loop = rl_loop_get_current();
    CHECK(loop != NULL, "rl_loop_get_current: %s", strerror(errno));

    counter_t clock = { .name = "clock", .allowed = { RL_DEFAULT_MODE } };
    counter_t heartbeat = { .name = "heartbeat", .allowed = { RL_DEFAULT_MODE, TRACKING } };
    counter_t drag = { .name = "drag", .allowed = { TRACKING } };
    counter_t *all[3] = { &clock, &heartbeat, &drag };
    rl_timer_t *timers[3] = { repeating(&clock, RL_DEFAULT_MODE), repeating(&heartbeat, RL_COMMON_MODES),
                              repeating(&drag, TRACKING) };

    /* The slowest plausible run still fits >= 1 firing in 100 ms; a timer that keeps to its
     * grid fires at most once per 10 ms plus the one firing for the dates missed before. */
    const int most = (int)(PHASE / INTERVAL) + 2;

    run_phase("1. default mode:", RL_DEFAULT_MODE, all);
    CHECK(clock.fired >= 1 && heartbeat.fired >= 1 && drag.fired == 0, "phase 1");

    CHECK(!rl_loop_contains_timer(loop, timers[1], TRACKING), "heartbeat already in tracking");
    run_phase("2. tracking, not yet a common mode:", TRACKING, all);
    CHECK(clock.fired == 0, "the default-mode timer fired while tracking");
    CHECK(heartbeat.fired == 0, "the common-modes timer fired in a mode that is not common");
    CHECK(drag.fired >= 1, "the tracking timer did not fire");

    CHECK(rl_loop_add_common_mode(loop, TRACKING) == 0, "rl_loop_add_common_mode");
    CHECK(rl_loop_contains_timer(loop, timers[1], TRACKING), "heartbeat did not join tracking");
    CHECK(!rl_loop_contains_timer(loop, timers[0], TRACKING), "clock joined tracking");
    run_phase("3. tracking, now a common mode:", TRACKING, all);
    CHECK(clock.fired == 0, "the default-mode timer fired while tracking");
    CHECK(heartbeat.fired >= 1, "the common-modes timer did not fire in the common tracking mode");
    CHECK(drag.fired >= 1, "the tracking timer did not fire");

    /* clock missed about 20 dates in phases 2 and 3: it fires once for them, then on its grid. */
    double resumed = rl_time_now();
    run_phase("4. default mode again:", RL_DEFAULT_MODE, all);
    CHECK(clock.fired >= 1 && clock.fired <= most,
          "clock fired %d times in %.0f ms: missed dates were caught up, not skipped", clock.fired,
          PHASE * 1e3);
    CHECK(rl_timer_get_next_fire_date(timers[0]) > resumed, "clock's next date is in the past");
    CHECK(drag.fired == 0, "the tracking timer fired in the default mode");

    for (int i = 0; i < 3; i++) {
        rl_timer_invalidate(timers[i]);
        rl_release(timers[i]);
    }
    printf("ok: the default-mode timer paused while tracking; the common-modes timer kept firing once tracking was common\n");
    return 0;
}
