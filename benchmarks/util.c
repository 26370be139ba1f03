/* util.c - clocks, CPU placement, threads and small helpers. */

#include "bench.h"
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double now_s(void) { return (double)now_ns() / 1e9; }

/* The scheduler's runtime of the calling thread, brought up to date by the call. Not
 * getrusage(RUSAGE_THREAD): it reports the runtime as of the scheduler's last update of it (a
 * tick, a context switch), so a reading taken before a window misses what the thread ran since
 * then, and the reading after the window, taken after the wait's context switch, counts it: the
 * window was charged up to a tick's worth of what the thread did before it (for the idle
 * benchmark, each adapter's loop and timer creation: 25-50 us on a VM). */
uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* thread_cpu_ns's own test (bench --clock-check, run by make bench-smoke): CPU used just before a
 * reading is in that reading. A thread burns ~2 ms, reads the clock, sleeps 2 ms (nothing to
 * run) and reads it again: the difference must be the sleep's own system calls, not the burn.
 * With getrusage(RUSAGE_THREAD) it is the part of the burn since the last tick, unless a tick
 * fell in the burn's last 300 us; ten tries in a row make that a certain failure. 0 if it holds. */
static void *clock_check_main(void *arg)
{
    int *failures = arg;
    for (int i = 0; i < 10; i++) {
        uint64_t until = now_ns() + 2000000, c0, c1;
        volatile unsigned sink = 0;
        while (now_ns() < until) sink += 1;
        c0 = thread_cpu_ns();
        nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
        c1 = thread_cpu_ns();
        if (c1 - c0 > 300000) {
            fprintf(stderr, "clock-check: a 2 ms sleep read as %.1f us of CPU (the burn before it)\n",
                    (double)(c1 - c0) / 1e3);
            ++*failures;
        }
    }
    return NULL;
}

int thread_cpu_clock_check(void)
{
    int failures = 0;
    run_in_thread(-1, clock_check_main, &failures);
    if (!failures) printf("clock-check: the thread CPU clock counts the CPU used just before a reading\n");
    return failures ? 1 : 0;
}

long thread_ctx_switches(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0) return 0;
    return ru.ru_nvcsw + ru.ru_nivcsw;
}

/* The CPUs the process may use, read once, at the first call: benchmarks pin the main thread
 * later, and a thread's own mask would then report a single CPU (which once made every
 * producer of the throughput benchmark share the loop's CPU). */
static int allowed_cpus(int *list, int max)
{
    static int cached[CPU_SETSIZE], ncached = -1;
    if (ncached < 0) {
        cpu_set_t set;
        ncached = 0;
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &set)) cached[ncached++] = c;
    }
    int n = ncached < max ? ncached : max;
    for (int i = 0; i < n; i++) list[i] = cached[i];
    return n;
}

int ncpus(void)
{
    int list[1024];
    return allowed_cpus(list, 1024);
}

int cpu_nth(int k)
{
    int list[1024];
    int n = allowed_cpus(list, 1024);
    return n ? list[k % n] : -1;
}

int pin_self(int cpu)
{
    cpu_set_t set;
    if (cpu < 0) return -1;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

unsigned long long proc_syscw(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    unsigned long long v = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "syscw: %llu", &v) == 1) break;
    fclose(f);
    return v;
}

void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0) {}
}

void spin_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) {}
}

uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

typedef struct { int cpu; void *(*fn)(void *); void *arg; } thread_start_t;

static void *thread_main(void *p)
{
    thread_start_t *t = p;
    if (t->cpu >= 0) pin_self(t->cpu);
    return t->fn(t->arg);
}

void run_in_thread(int cpu, void *(*fn)(void *), void *arg)
{
    pthread_t th;
    thread_start_t t = { cpu, fn, arg };
    if (pthread_create(&th, NULL, thread_main, &t) != 0) { perror("pthread_create"); exit(1); }
    pthread_join(th, NULL);
}

FILE *popen_self(const char *fmt, ...)
{
    char exe[PATH_MAX], args[256], cmd[PATH_MAX + 260];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    va_list ap;
    if (len <= 0) return NULL;
    exe[len] = 0;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s", exe, args);
    return popen(cmd, "r");
}
