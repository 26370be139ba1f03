/* timer_instructions.c - CRunLoop's instructions per fired timer, counted by callgrind (run it
 * with benchmarks/timer-instructions). Two scenarios:
 *   oneshot N ROUNDS   each round adds N one-shot timers already due and runs one polling pass
 *                      (rl_run_in_mode(mode, 0, false)), which fires them all: the fire phase of
 *                      the "timers 1e5 fire" benchmark, in small. The script runs two values of N
 *                      and divides the difference by the extra timers.
 *   repeat 1 ROUNDS    one repeating timer with a tiny interval, due at every polling pass: a
 *                      pass that fires one timer, the frame-clock case.
 *   create|add|remove N ROUNDS
 *                      the three steps of the "timers 1e5" add and remove phases, one at a time:
 *                      each round creates N one-shot timers due in 1..21 ms (the caller's clock
 *                      reading included, as the benchmark's adapter makes it), adds them to the
 *                      default mode of a loop (whose heap grows from empty to N, as in the
 *                      benchmark), and removes every other one; only the named step is counted.
 *                      The script divides by N.
 *   floor N ROUNDS --wall
 *                      nanoseconds per step of the above, next to what any thread-safe timer
 *                      API taking an absolute date pays whatever its design: the caller's clock
 *                      reading (rl_time_now) and one allocation of a timer's size.
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

static void on_nothing(rl_timer_t *t, void *info) { (void)t, (void)info; }

/* The steps of the add and remove phases: counted one at a time under callgrind (step names the
 * one), or all timed (step NULL) and printed with the floor. */
static int steps(const char *step, int n, int rounds, bool wall) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_timer_t **timers = calloc((size_t)n, sizeof *timers);
    void **blocks = calloc((size_t)n, sizeof *blocks);
    if (!loop || !timers || !blocks) return 1;
    unsigned long long rng = 0x9E3779B97F4A7C15ull;
    double ns[5] = {0};
    for (int r = -3; r < rounds; r++) {
        bool count = r >= 0 && !wall;
        double t0 = rl_time_now();
        if (count && !strcmp(step, "create")) CALLGRIND_TOGGLE_COLLECT;
        for (int i = 0; i < n; i++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            double delay = 0.001 + (double)(rng % 20000) * 1e-6;
            if (!(timers[i] = rl_timer_create(rl_time_now() + delay, 0, 0, on_nothing, NULL))) return 1;
        }
        if (count && !strcmp(step, "create")) CALLGRIND_TOGGLE_COLLECT;
        double t1 = rl_time_now();
        if (count && !strcmp(step, "add")) CALLGRIND_TOGGLE_COLLECT;
        for (int i = 0; i < n; i++)
            if (rl_loop_add_timer(loop, timers[i], RL_DEFAULT_MODE)) return 1;
        if (count && !strcmp(step, "add")) CALLGRIND_TOGGLE_COLLECT;
        double t2 = rl_time_now();
        if (count && !strcmp(step, "remove")) CALLGRIND_TOGGLE_COLLECT;
        for (int i = 0; i < n; i += 2)
            if (rl_loop_remove_timer(loop, timers[i], RL_DEFAULT_MODE)) return 1;
        if (count && !strcmp(step, "remove")) CALLGRIND_TOGGLE_COLLECT;
        double t3 = rl_time_now();
        /* The floor: the caller's clock reading, and an allocation of a timer's size (freed
         * after, as the timers are). */
        double sum = 0;
        for (int i = 0; i < n; i++) sum += rl_time_now();
        double t4 = rl_time_now();
        for (int i = 0; i < n; i++) blocks[i] = malloc(104);
        double t5 = rl_time_now();
        for (int i = 0; i < n; i++) {
            if (!blocks[i]) return 1;
            free(blocks[i]);
            rl_timer_invalidate(timers[i]);
            rl_release(timers[i]);
        }
        if (sum < 0) return 1;
        if (r >= 0) {
            ns[0] += (t1 - t0) / n, ns[1] += (t2 - t1) / n, ns[2] += (t3 - t2) / ((n + 1) / 2);
            ns[3] += (t4 - t3) / n, ns[4] += (t5 - t4) / n;
        }
    }
    if (wall)
        printf("ns per timer, %d timers: create (with the caller's clock reading) %.1f, "
               "add %.1f, remove %.1f; the floor: a clock reading %.1f, malloc(104) %.1f\n",
               n, ns[0] * 1e9 / rounds, ns[1] * 1e9 / rounds, ns[2] * 1e9 / rounds, ns[3] * 1e9 / rounds,
               ns[4] * 1e9 / rounds);
    free(timers), free(blocks);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 3 && (!strcmp(argv[1], "create") || !strcmp(argv[1], "add") || !strcmp(argv[1], "remove") ||
                     !strcmp(argv[1], "floor"))) {
        int n = atoi(argv[2]), rounds = atoi(argv[3]);
        bool wall = argc > 4 && !strcmp(argv[4], "--wall");
        if (n < 1 || rounds < 1 || (!strcmp(argv[1], "floor") && !wall)) {
            fprintf(stderr, "usage: timer_instructions create|add|remove N ROUNDS, or floor N ROUNDS --wall\n");
            return 2;
        }
        return steps(argv[1], n, rounds, wall);
    }
    bool repeat = argc > 1 && !strcmp(argv[1], "repeat");
    int n = argc > 2 ? atoi(argv[2]) : 16, rounds = argc > 3 ? atoi(argv[3]) : 200;
    bool wall = argc > 4 && !strcmp(argv[4], "--wall");
    if (argc < 2 || (!repeat && strcmp(argv[1], "oneshot")) || n < 1 || rounds < 1) {
        fprintf(stderr, "usage: timer_instructions oneshot|repeat N ROUNDS [--wall], create|add|remove N ROUNDS,\n"
                        "       or floor N ROUNDS --wall\n");
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
