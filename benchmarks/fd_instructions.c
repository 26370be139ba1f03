/* fd_instructions.c - CRunLoop's instructions per ready fd, counted by callgrind (run it with
 * benchmarks/fd-instructions). N socketpairs are watched for readability; each round writes a
 * byte into k of them and runs one polling pass (rl_run_in_mode(mode, 0, false)), whose callbacks
 * read the bytes back. Callgrind collects inside the passes only, minus the callbacks' bodies, so
 * the count is the loop's own: the wait, taking the ready sources, sorting and calling them. The
 * script runs two values of k and divides the difference by the extra fds.
 *
 *   fd_instructions N K ROUNDS   (under valgrind --tool=callgrind --collect-atstart=no) */
#include <crunloop.h>
#include <valgrind/callgrind.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static long got;

static void on_ready(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)s, (void)events, (void)info;
    CALLGRIND_TOGGLE_COLLECT;
    char c;
    if (read(fd, &c, 1) == 1) got++;
    CALLGRIND_TOGGLE_COLLECT;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000, k = argc > 2 ? atoi(argv[2]) : 16;
    int rounds = argc > 3 ? atoi(argv[3]) : 200;
    if (n < 1 || k < 1 || k > n || rounds < 1) {
        fprintf(stderr, "usage: fd_instructions N K ROUNDS (1 <= K <= N)\n");
        return 2;
    }
    struct rlimit lim = {(rlim_t)n * 2 + 64, (rlim_t)n * 2 + 64};
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) perror("setrlimit");
    int (*sv)[2] = calloc((size_t)n, sizeof *sv);
    rl_loop_t *loop = rl_loop_get_current();
    if (!sv || !loop) return 1;
    for (int i = 0; i < n; i++) {
        rl_source_t *s;
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]) != 0 ||
            !(s = rl_source_create_fd(sv[i][0], RL_FD_READABLE, 0, on_ready, NULL)) ||
            rl_loop_add_source(loop, s, RL_DEFAULT_MODE) != 0) {
            perror("fd_instructions: setting up");
            return 1;
        }
        rl_release(s);
    }
    unsigned long long rng = 12345;
    long want = 0;
    for (int r = -10; r < rounds; r++) { /* ten rounds to warm up, uncounted */
        for (int j = 0; j < k; j++) { /* k distinct fds: one in each of k stripes */
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int i = (int)((rng >> 33) % (unsigned)(n / k)) * k + j;
            if (write(sv[i][1], "x", 1) != 1) return 1;
        }
        want += k;
        if (r >= 0) CALLGRIND_TOGGLE_COLLECT;
        rl_run_in_mode(RL_DEFAULT_MODE, 0, false);
        if (r >= 0) CALLGRIND_TOGGLE_COLLECT;
        if (got != want) {
            fprintf(stderr, "fd_instructions: round %d read %ld bytes, expected %ld\n", r, got, want);
            return 1;
        }
    }
    return 0;
}
