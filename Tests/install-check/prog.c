/* Built by `make install-check` against a staged install, through pkg-config: checks that the
 * installed header and library agree and that a loop runs a timer. */
#include <crunloop.h>

#include <stdio.h>
#include <string.h>

static void fired(rl_timer_t *timer, void *info)
{
    (void)timer;
    ++*(int *)info;
}

int main(void)
{
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", RL_VERSION_MAJOR, RL_VERSION_MINOR,
             RL_VERSION_PATCH);
    if (strcmp(rl_version_string(), expected) != 0) {
        fprintf(stderr, "prog: header %s, library %s\n", expected, rl_version_string());
        return 1;
    }

    int count = 0;
    rl_context_t context = { .info = &count };
    rl_timer_t *timer = rl_timer_create(rl_time_now() + 0.001, 0, 0, fired, &context);
    if (timer == NULL || rl_loop_add_timer(rl_loop_get_current(), timer, RL_DEFAULT_MODE) != 0) {
        fprintf(stderr, "prog: cannot add a timer\n");
        return 1;
    }
    rl_release(timer);
    int result = rl_run_in_mode(RL_DEFAULT_MODE, 5.0, false);
    if (result != RL_RUN_FINISHED || count != 1) {
        fprintf(stderr, "prog: run returned %d with %d firings (want %d, 1)\n", result, count,
                RL_RUN_FINISHED);
        return 1;
    }
    printf("prog: crunloop %s ok\n", rl_version_string());
    return 0;
}
