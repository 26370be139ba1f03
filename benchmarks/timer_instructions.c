/* timer_instructions.c - CRunLoop's instructions per fired timer, counted by callgrind (run it
 * with benchmarks/timer-instructions). Two scenarios:
 *   oneshot N ROUNDS   each round adds N one-shot timers already due and runs one polling pass
 *                      (rl_run_in_mode(mode, 0, false)), which fires them all: the fire phase of
 *                      the "timers 1e5 fire" benchmark, in small. The script runs two values of N
 *                      and divides the difference by the extra timers.
 *   repeat 1 ROUNDS    one repeating timer with a tiny interval, due at every polling pass: a
 *                      pass that fires one timer, the frame-clock case.
 * Callgrind collects inside the passes only, minus the callbacks' bodies (there are none but a
 * counter), so the count is the loop's own.
 *
 *   timer_instructions oneshot|repeat N ROUNDS [--wall]
 *     (under valgrind --tool=callgrind --collect-atstart=no; --wall: no valgrind, prints ns per
 *     fired timer measured with the clock instead) */
#include <crunloop.h>
#include <valgrind/callgrind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long fired;

static void on_fire(rl_timer_t *t, void *info) {
    (void)t, (void)info;
    fired++;
}

int main(int argc, char **argv) {
    bool repeat = argc > 1 && !strcmp(argv[1], "repeat");
    int n = argc > 2 ? atoi(argv[2]) : 16, rounds = argc > 3 ? atoi(argv[3]) : 200;
    bool wall = argc > 4 && !strcmp(argv[4], "--wall");
    if (argc < 2 || (!repeat && strcmp(argv[1], "oneshot")) || n < 1 || rounds < 1) {
        fprintf(stderr, "usage: timer_instructions oneshot|repeat N ROUNDS [--wall]\n");
        return 2;
    }
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t **timers = calloc((size_t)n, sizeof *timers);
    if (!loop || !timers) return 1;
    if (repeat) {
        timers[0] = rl_timer_create(0, 1e-9, 0, on_fire, NULL);
        if (!timers[0] || rl_loop_add_timer(loop, timers[0], RL_DEFAULT_MODE)) return 1;
    }
    double spent = 0;
    long want = 0;
    for (int r = -10; r < rounds; r++) { /* ten rounds to warm up, uncounted */
        if (!repeat) {
            for (int i = 0; i < n; i++) {
                if (!(timers[i] = rl_timer_create(0, 0, 0, on_fire, NULL)) ||
                    rl_loop_add_timer(loop, timers[i], RL_DEFAULT_MODE))
                    return 1;
            }
            want += n;
        } else {
            want++;
        }
        double t0 = rl_time_now();
        if (r >= 0 && !wall) CALLGRIND_TOGGLE_COLLECT;
        rl_run_in_mode(RL_DEFAULT_MODE, 0, false);
        if (r >= 0 && !wall) CALLGRIND_TOGGLE_COLLECT;
        if (r >= 0) spent += rl_time_now() - t0;
        if (!repeat)
            for (int i = 0; i < n; i++) rl_release(timers[i]);
        if (fired != want) {
            fprintf(stderr, "timer_instructions: round %d fired %ld timers, expected %ld\n", r, fired, want);
            return 1;
        }
    }
    if (wall) printf("%.1f ns per pass of %d timer(s)\n", spent * 1e9 / rounds, repeat ? 1 : n);
    return 0;
}
