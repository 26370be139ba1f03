/*
 * 05-frame-clock.c - a frame clock, like CADisplayLink: a 60 Hz repeating timer in the common
 * modes.
 *
 * Pattern: one repeating timer with a 1/60 s interval, added to RL_COMMON_MODES, drives every
 * frame. It keeps ticking while the loop runs in a "tracking" mode, because that mode is made
 * common (a default-mode-only timer would pause there). When a frame's callout overruns, the
 * frames whose grid points passed meanwhile are skipped, never caught up: a repeating timer
 * fires once after a stall and then keeps to its grid (fire date + k * interval), which is
 * CFRunLoop's rule and crunloop.h's (rl_timer_create). A frame clock reads the fire date in its
 * callout to know which frame it is drawing, and so how many it skipped.
 *
 * The example injects three overruns (each callout sleeps until k + 1/4 frames past its own
 * fire date, k = 2, 1 and 3; one of them in the tracking mode), counts the skipped frames per
 * tick, and draws a text histogram of them, then the loop's timer-lateness histogram
 * (rl_loop_get_lag).
 *
 * What to watch for: the frames skipped right after each overrun are k, the grid points that
 * passed while the callout ran (k + 1 when a busy machine resumed the sleeping thread more than
 * 3/4 frame late: the check works the number out from the callout's actual end); each frame's
 * grid date is later than the end of the callout before it (no burst of catch-up frames); every
 * grid point is either drawn or skipped once; and the timer's lateness stays well under a frame
 * even so: a late frame clock shows up as skipped frames, not as lateness. A busy machine may
 * keep the loop's thread from a frame or two, so the checks allow a budget: at most a tenth of
 * the frames skipped elsewhere, and at most a tenth fired about two frames late or more (32.8 ms,
 * the lateness buckets from [32.8, 65.5) ms up). The lateness histogram counts each tick once: the
 * grid points a tick skipped are in no bucket.
 */
#include <crunloop.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "05-frame-clock: check failed: %s (line %d)\n", #cond, __LINE__); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#define FRAME (1.0 / 60)

static const char tracking[] = "com.example.tracking";

enum { FRAMES = 100, SEGMENT = 25, MAX_SKIP = 8 };

/* Overruns to inject: at the tick that draws frame `at`, sleep until `frames` + 1/4 frame past
 * its fire date, so the next grid point still ahead is frames + 1 later: `frames` skipped. */
static const struct { long at; int frames; } overruns[] = {{20, 2}, {45, 1}, {70, 3}};
enum { OVERRUNS = sizeof overruns / sizeof overruns[0] };

typedef struct {
    double origin;             /* the grid's first point */
    long last;                 /* the frame drawn last, -1 before the first */
    double last_end;           /* when the previous callout returned */
    long ticks;                /* callouts */
    long skipped_after[OVERRUNS], skipped_elsewhere, skipped_total;
    long passed[OVERRUNS];     /* grid points after the overrun's date that passed by its end */
    long histogram[MAX_SKIP + 1]; /* ticks by frames skipped just before them */
    int injected;              /* the overrun whose effect the next tick shows, or -1 */
    bool burst;                /* a frame's grid date was not after the last callout's end */
    int segment_ticks;
    const char *mode;          /* the mode the loop runs in now */
    long tracking_ticks;
} clock_state;

static void sleep_until(double date) {
    double d = date - rl_time_now();
    if (d <= 0) return;
    struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {}
}

static void frame(rl_timer_t *t, void *info) {
    clock_state *c = info;
    double date = rl_timer_get_next_fire_date(t); /* the date being fired, during its callout */
    long index = lround((date - c->origin) / FRAME);
    long skipped = index - c->last - 1;
    if (c->last >= 0 && date <= c->last_end) c->burst = true;
    c->histogram[skipped > MAX_SKIP ? MAX_SKIP : skipped]++;
    c->skipped_total += skipped;
    if (c->injected >= 0) c->skipped_after[c->injected] = skipped;
    else c->skipped_elsewhere += skipped;
    c->injected = -1;
    c->last = index;
    c->ticks++;
    if (c->mode == tracking) c->tracking_ticks++;

    /* The "drawing": overrun where asked. */
    for (int i = 0; i < OVERRUNS; i++)
        if (overruns[i].at == c->ticks) {
            sleep_until(date + (overruns[i].frames + 0.25) * FRAME);
            c->passed[i] = (long)floor((rl_time_now() - date) / FRAME);
            c->injected = i;
        }
    c->last_end = rl_time_now();
    if (++c->segment_ticks == SEGMENT || c->ticks == FRAMES) rl_loop_stop(rl_loop_get_current());
}

static void bar(const char *label, long n, long scale) {
    printf("  %-14s %5ld ", label, n);
    for (long i = 0; i < (n + scale - 1) / scale; i++) fputs("#", stdout);
    fputs("\n", stdout);
}

int main(void) {
    rl_loop_t *loop = rl_loop_get_current();
    CHECK(loop != NULL);
    CHECK(rl_loop_add_common_mode(loop, tracking) == 0);
    rl_loop_lag_t lag;
    CHECK(rl_loop_get_lag(loop, &lag, sizeof lag, RL_LAG_RESET) == 0);

    clock_state c = {.last = -1, .injected = -1};
    c.origin = rl_time_now() + FRAME;
    rl_context_t ctx = {&c, NULL, NULL};
    rl_timer_t *t = rl_timer_create(c.origin, FRAME, 0, frame, &ctx);
    CHECK(t != NULL);
    CHECK(rl_loop_add_timer(loop, t, RL_COMMON_MODES) == 0);

    /* Alternate: default mode, then "tracking" (a scroll, say), and so on. */
    for (int seg = 0; c.ticks < FRAMES; seg++) {
        c.mode = seg % 2 ? tracking : RL_DEFAULT_MODE;
        c.segment_ticks = 0;
        CHECK(rl_run_in_mode(c.mode, 10.0, false) == RL_RUN_STOPPED);
    }
    rl_timer_invalidate(t);
    rl_release(t);
    CHECK(rl_loop_get_lag(loop, &lag, sizeof lag, 0) == 0);

    printf("%ld frames drawn at 60 Hz over %ld grid points (%ld in the tracking mode), %ld skipped\n",
           c.ticks, c.last + 1, c.tracking_ticks, c.skipped_total);
    printf("frames skipped before a tick:\n");
    for (int k = 0; k <= MAX_SKIP; k++) {
        if (!c.histogram[k]) continue;
        char label[32];
        snprintf(label, sizeof label, k == MAX_SKIP ? "%d or more" : "%d", k);
        bar(label, c.histogram[k], 2);
    }
    for (int i = 0; i < OVERRUNS; i++)
        printf("overrun at tick %ld by %d frame(s) + 1/4: %ld frame(s) skipped\n", overruns[i].at,
               overruns[i].frames, c.skipped_after[i]);
    printf("skipped elsewhere (the machine was slow): %ld\n", c.skipped_elsewhere);
    printf("timer lateness (rl_loop_get_lag), %llu timers:\n", lag.timers_fired);
    /* Bucket 16 and up: 2^15 us = 32.8 ms late or more, about two frames. */
    enum { TWO_FRAMES = 16 };
    unsigned long long very_late = 0;
    for (int k = 0; k < RL_LAG_BUCKETS; k++) {
        if (!lag.late[k]) continue;
        char label[32];
        if (k == 0) snprintf(label, sizeof label, "< 1 us");
        else if (k == RL_LAG_BUCKETS - 1) snprintf(label, sizeof label, ">= %ld us", 1L << (k - 1));
        else snprintf(label, sizeof label, "< %ld us", 1L << k);
        bar(label, (long)lag.late[k], 2);
        if (k >= TWO_FRAMES) very_late += lag.late[k];
    }
    printf("fired 32.8 ms (about two frames) late or more (the machine was slow): %llu\n", very_late);

    /* The grid points that passed while the callout ran, and one more if one passed between its
     * end and the re-arming that reads the clock just after. */
    for (int i = 0; i < OVERRUNS; i++) {
        CHECK(c.passed[i] >= overruns[i].frames);
        CHECK(c.skipped_after[i] == c.passed[i] || c.skipped_after[i] == c.passed[i] + 1);
    }
    CHECK(!c.burst);                                     /* skipped, never caught up */
    CHECK(c.ticks + c.skipped_total == c.last + 1);      /* each grid point drawn or skipped once */
    CHECK(c.tracking_ticks >= SEGMENT);                  /* common modes: it ticked while tracking */
    CHECK(lag.timers_fired == (unsigned long long)c.ticks);
    CHECK(c.skipped_elsewhere <= FRAMES / 10);
    CHECK(very_late <= FRAMES / 10);
    printf("ok: %d overruns, %ld frames skipped for them, none caught up\n", OVERRUNS,
           c.skipped_total - c.skipped_elsewhere);
    return 0;
}
