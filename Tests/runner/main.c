/*
 * The `make check` runner: runs every registered C test (rlt.h), or those whose name contains
 * the given substring, one after another, each on its own thread.
 *
 *   runner [-v] [-l] [SUBSTRING]
 *     -v  print each test's name and time as it runs
 *     -l  list the tests' names and exit
 *
 * Prints one line per failure, then `N passed, N failed`; exits 1 when a test failed.
 */
#include "rlt.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-v] [-l] [SUBSTRING]\n", argv0);
    return 2;
}

int main(int argc, char **argv)
{
    int verbose = 0, list = 0;
    const char *filter = NULL;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            verbose = 1;
        else if (strcmp(argv[i], "-l") == 0)
            list = 1;
        else if (argv[i][0] == '-' && argv[i][1] != '\0')
            return usage(argv[0]);
        else if (filter == NULL)
            filter = argv[i];
        else
            return usage(argv[0]);
    }

    size_t count = rlt_count(), passed = 0, failed = 0;
    for (size_t i = 0; i < count; i++) {
        const char *name = rlt_name(i);
        if (filter != NULL && strstr(name, filter) == NULL)
            continue;
        if (list) {
            printf("%s\n", name);
            continue;
        }
        if (verbose) {
            printf("%s ... ", name);
            fflush(stdout);
        }
        char message[1024];
        double start = now();
        int result = rlt_run(i, message, sizeof message);
        double elapsed = now() - start;
        if (result == 0) {
            passed++;
            if (verbose)
                printf("ok (%.3f s)\n", elapsed);
        } else {
            failed++;
            if (verbose)
                printf("FAILED (%.3f s)\n", elapsed);
            printf("FAIL %s: %s\n", name, message);
        }
        fflush(stdout);
    }
    if (list)
        return 0;
    printf("%zu passed, %zu failed\n", passed, failed);
    return failed != 0;
}
