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

uint64_t thread_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0) return 0;
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
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
