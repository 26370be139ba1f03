/*
 * t_heap_inplace_timers.c - timeouts in a full heap array: disarmed ones park in their own slots
 * (tagged holes), and the timer layer above the heap (the fire phase, the wake date, describe,
 * verify, the item counts) sees them as dormant timers; armed again while the array is still
 * full, they take their slots back and fire once each. A debug build (-DRL_DEBUG) checks the
 * loop's invariants after every change.
 */
#include "ttrace.h"
#include "../../Sources/CRunLoopCore/internal.h"

#include <stdlib.h>
#include <string.h>

#define DEF RL_DEFAULT_MODE

static void count_fire(rl_timer_t *t, void *info) {
    (void)t;
    ++*(int *)info;
}

RLT_TEST(timeouts_parked_in_their_slots_of_a_full_array_fire_once_when_armed_again) {
    enum { N = 1024 };
    rl_loop_t *loop = rl_loop_get_current();
    static rl_timer_t *timers[N];
    static int fired[N];
    double now = rl_time_now();
    for (int i = 0; i < N; i++) {
        fired[i] = 0;
        rl_context_t c = {&fired[i], NULL, NULL};
        timers[i] = rl_timer_create_timeout(now + 1000 + i, 0, count_fire, &c);
        RLT_CHECK(timers[i] != NULL);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, timers[i], DEF), 0);
    }
    rl_mode *mode = rl_mode_find(loop, DEF, false);
    RLT_CHECK(mode != NULL);
    rl_heap *h = &mode->timers;
    RLT_CHECK_EQ(h->capacity, (size_t)N);
    RLT_CHECK_EQ(h->count, (size_t)N); /* full */
    /* An eighth and more removed (not the last): holes that pay for a re-heap, the array full. */
    for (int i = 0; i < N - 1; i += 7) rl_loop_remove_timer(loop, timers[i], DEF);
    RLT_CHECK(h->count + h->parked == h->capacity);
    /* A quarter disarmed: each stays in its slot, a hole that names it. */
    for (int i = 1; i < N - 1; i += 4)
        if (i % 7) RLT_CHECK_EQ(rl_timer_disarm(timers[i]), 0);
    RLT_CHECK(h->parked_in_heap > 0);
    size_t in_place = h->parked_in_heap;
    RLT_CHECK(rl_loop_contains_timer(loop, timers[1], DEF));
    RLT_CHECK(!rl_timer_is_armed(timers[1]));
    /* describe names every timer of the mode once, the dormant ones at INFINITY. */
    char *text = rl_loop_copy_description(loop);
    RLT_CHECK(text != NULL);
    size_t lines = 0, dormant = 0;
    for (const char *p = text; (p = strstr(p, "    timer ")); p++) {
        lines++;
        const char *eol = strchr(p, '\n');
        const char *inf = strstr(p, "next fire inf");
        dormant += inf && (!eol || inf < eol);
    }
    free(text);
    RLT_CHECK_EQ(lines, rl_heap_size(h));
    RLT_CHECK_EQ(dormant, rl_heap_parked_count(h));
    /* The next date is the earliest armed one, not a dormant one's. */
    double next = rl_loop_get_next_timer_fire_date(loop, DEF);
    RLT_CHECK(next == now + 1000 + 2);
    /* Half of the dormant ones armed to fire now, while the array is full: back into their
     * slots. Then a pass fires those, once each, and they go dormant again. */
    int armed = 0;
    for (int i = 1; i < N - 1; i += 8)
        if (i % 7) {
            RLT_CHECK_EQ(rl_timer_set_next_fire_date(timers[i], now - 1), 0);
            armed++;
        }
    RLT_CHECK(h->parked_in_heap < in_place);
    (void)rl_run_in_mode(DEF, 0, false);
    int total = 0;
    for (int i = 0; i < N; i++) {
        total += fired[i];
        if (fired[i] > 1) RLT_CHECK_EQ(fired[i], 1);
    }
    RLT_CHECK_EQ(total, armed);
    for (int i = 1; i < N - 1; i += 8)
        if (i % 7) RLT_CHECK(!rl_timer_is_armed(timers[i]) && rl_timer_is_valid(timers[i]));
    /* The rest of the dormant ones armed (from their holes or the region), each fires once. */
    for (int i = 5; i < N - 1; i += 8)
        if (i % 7) RLT_CHECK_EQ(rl_timer_set_next_fire_date(timers[i], now - 1), 0);
    (void)rl_run_in_mode(DEF, 0, false);
    for (int i = 1; i < N - 1; i += 4)
        if (i % 7) RLT_CHECK_EQ(fired[i], 1);
    RLT_CHECK(rl_loop_get_next_timer_fire_date(loop, DEF) == now + 1000 + 2);
    for (int i = 0; i < N; i++) {
        rl_timer_invalidate(timers[i]);
        rl_release(timers[i]);
    }
    RLT_CHECK_EQ(rl_heap_size(h), (size_t)0);
}
