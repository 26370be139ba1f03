/* scenarios.c - the conditions of the wakeup-latency scenarios (scenarios.h): their names, the
 * busy loop's eventfds, feeder thread and armed timers, and the CPU-bound threads of `load`. */
#include "scenarios.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

const char *const scenario_names[SCEN_COUNT] = { "idle", "busy", "load", "samecpu", "unpinned" };
const char *const scenario_what[SCEN_COUNT] = {
    "an idle loop woken from another pinned CPU",
    ("the woken loop also watches 10k eventfds, 1% of them written every ms by a feeder thread "
     "on its CPU, and holds 100k armed timers due 1-2 h ahead"),
    ("as idle, with CPU-bound threads: one per CPU besides the two measured, at least one (on "
     "the loop's CPU when there is no other)"),
    "waker and loop pinned to one CPU; the waker yields while it waits",
    "no thread pinned; the waker yields while it waits",
};

int scenario_mask(const char *list, unsigned *mask, const char **bad, int *bad_len)
{
    *mask = 0;
    if (!list) {
        *mask = (1u << SCEN_COUNT) - 1;
        return 0;
    }
    for (const char *s = list; *s;) {
        size_t len = strcspn(s, ",");
        int found = -1;
        for (int i = 0; i < SCEN_COUNT; i++)
            if (strlen(scenario_names[i]) == len && !strncasecmp(s, scenario_names[i], len)) found = i;
        if (found < 0) {
            *bad = s;
            *bad_len = (int)len;
            return -1;
        }
        *mask |= 1u << found;
        s += len + (s[len] == ',');
    }
    return *mask ? 0 : -1;
}

/* ---- busy ----------------------------------------------------------------------------------- */

typedef struct { busy_t *b; int fd; } busy_arg_t;

struct busy {
    int nfds, *fd, active;
    int timers, floor_timers;       /* requested; the epoll floor's (timerfds: the fd limit) */
    busy_arg_t *args;
    /* attached to one loop at a time, on its thread */
    peer_t *p;
    void **watch, **timer;
    double *delay;                  /* each timer's */
    int nwatch, ntimer;
    unsigned long long reads;
    long fired;
    /* the feeder */
    pthread_t th;
    int feeding, cpu;
    double max_s;
    _Atomic int stop;
    _Atomic unsigned long long writes;
    uint64_t t0, t1;
};

/* Raise RLIMIT_NOFILE's soft limit to the hard one, or to want when the hard limit may be raised
 * (root with CAP_SYS_RESOURCE); the soft limit in the end. */
static rlim_t raise_nofile(rlim_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
    if (rl.rlim_cur < want) {
        struct rlimit r2 = { want, rl.rlim_max > want ? rl.rlim_max : want };
        if (setrlimit(RLIMIT_NOFILE, &r2) != 0) {
            r2.rlim_cur = rl.rlim_max;
            r2.rlim_max = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &r2);
        }
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur;
}

busy_t *busy_new(int fds, int timers, char *note, size_t note_len)
{
    enum { MARGIN = 256 };
    rlim_t lim = raise_nofile((rlim_t)fds + (rlim_t)timers + 2 * MARGIN);
    busy_t *b = calloc(1, sizeof *b);
    int want = fds;
    size_t used;
    if (lim < (rlim_t)fds + MARGIN) fds = lim > 2 * MARGIN ? (int)(lim - MARGIN) : MARGIN;
    b->fd = calloc((size_t)fds, sizeof *b->fd);
    b->args = calloc((size_t)fds, sizeof *b->args);
    snprintf(note, note_len, "RLIMIT_NOFILE %llu", (unsigned long long)lim);
    for (; b->nfds < fds; b->nfds++) {
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) {
            used = strlen(note);
            snprintf(note + used, note_len - used, "; eventfd failed after %d (%s)", b->nfds,
                     strerror(errno));
            break;
        }
        b->fd[b->nfds] = fd;
        b->args[b->nfds] = (busy_arg_t){ b, fd };
    }
    if (b->nfds < want) {
        used = strlen(note);
        snprintf(note + used, note_len - used, "; scaled down from %d to %d fds", want, b->nfds);
    }
    if (b->nfds == 0) {
        busy_free(b);
        return NULL;
    }
    b->active = b->nfds / 100 > 0 ? b->nfds / 100 : 1;
    b->timers = timers;
    {
        long room = (long)lim - b->nfds - 2 * MARGIN;
        b->floor_timers = room < 0 ? 0 : room < timers ? (int)room : timers;
    }
    if (b->floor_timers < timers) {
        used = strlen(note);
        snprintf(note + used, note_len - used, "; the epoll floor holds %d of the %d timers "
                 "(one timerfd each)", b->floor_timers, timers);
    }
    return b;
}

void busy_free(busy_t *b)
{
    if (!b) return;
    for (int i = 0; i < b->nfds; i++) close(b->fd[i]);
    free(b->fd);
    free(b->args);
    free(b);
}

int busy_fds(const busy_t *b) { return b->nfds; }
int busy_active_per_tick(const busy_t *b) { return b->active; }

int busy_timers_for(const busy_t *b, const peer_t *p)
{
    return p == &peer_epoll ? b->floor_timers : b->timers;
}

const char *busy_unsupported(const peer_t *p)
{
    if (!p->fd_new && !p->timer_new) return "no fd watchers and no timers (a bare futex handoff)";
    if (!p->fd_new) return "no fd watchers";
    if (!p->timer_new) return "no timers";
    return NULL;
}

static void busy_fd_cb(void *arg)
{
    busy_arg_t *a = arg;
    uint64_t v;
    if (read(a->fd, &v, sizeof v) == (ssize_t)sizeof v) a->b->reads++;
}

static void busy_timer_cb(void *arg) { ((busy_t *)arg)->fired++; }

int busy_attach(busy_t *b, peer_t *p, void *loop)
{
    uint64_t rng = 0x2545F4914F6CDD1Dull, v;
    int want = busy_timers_for(b, p);
    b->p = p;
    b->reads = 0;
    b->fired = 0;
    b->nwatch = b->ntimer = 0;
    b->watch = calloc((size_t)b->nfds, sizeof *b->watch);
    b->timer = calloc((size_t)(want > 0 ? want : 1), sizeof *b->timer);
    b->delay = calloc((size_t)(want > 0 ? want : 1), sizeof *b->delay);
    for (int i = 0; i < b->nfds; i++)           /* what the feeder wrote for the previous loop */
        while (read(b->fd[i], &v, sizeof v) > 0) {}
    for (int i = 0; i < b->nfds; i++) {
        if (!(b->watch[b->nwatch] = p->fd_new(loop, b->fd[i], busy_fd_cb, &b->args[i]))) return -1;
        b->nwatch++;
    }
    /* Deadlines 1-2 h ahead in random order: a deep structure built from scattered inserts. */
    for (int i = 0; i < want; i++) {
        void *t = p->timer_new(loop, busy_timer_cb, b);
        if (!t) return -1;
        b->delay[b->ntimer] = 3600.0 + 3600.0 * (double)(rng_next(&rng) >> 11) / 9007199254740992.0;
        b->timer[b->ntimer++] = t;
        p->timer_start(t, b->delay[b->ntimer - 1], 0);
    }
    return 0;
}

static const double *sort_delay;
static int earliest_first(const void *x, const void *y)
{
    double a = sort_delay[*(const int *)x], c = sort_delay[*(const int *)y];
    return a < c ? -1 : a > c ? 1 : 0;
}

/* The timers go earliest first: CF keeps them in a sorted array and finds the one to remove by a
 * search from its start, so the first is found at once (100k removed latest first took CF 60 s,
 * earliest first a few). The teardown is not measured; the order costs the other peers nothing. */
void busy_detach(busy_t *b)
{
    int *order = calloc((size_t)(b->ntimer > 0 ? b->ntimer : 1), sizeof *order);
    for (int i = 0; i < b->ntimer; i++) order[i] = i;
    sort_delay = b->delay;
    qsort(order, (size_t)b->ntimer, sizeof *order, earliest_first);
    for (int i = 0; i < b->ntimer; i++) b->p->timer_free(b->timer[order[i]]);
    for (int i = 0; i < b->nwatch; i++) b->p->fd_free(b->watch[i]);
    free(order);
    free(b->timer);
    free(b->watch);
    free(b->delay);
    b->timer = b->watch = NULL;
    b->delay = NULL;
}

static void *feed_main(void *arg)
{
    busy_t *b = arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull, one = 1, next = now_ns();
    uint64_t end = next + (uint64_t)(b->max_s * 1e9);
    if (b->cpu >= 0) pin_self(b->cpu);
    b->t0 = next;
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed) && now_ns() < end) {
        unsigned long long n = 0;
        for (int k = 0; k < b->active; k++)
            n += write(b->fd[rng_next(&rng) % (uint64_t)b->nfds], &one, sizeof one) == (ssize_t)sizeof one;
        atomic_fetch_add_explicit(&b->writes, n, memory_order_relaxed);
        next += SCEN_BUSY_TICK_NS;
        {
            uint64_t t = now_ns();
            struct timespec ts;
            if (next < t) next = t;             /* late: skip the missed ticks, no burst */
            ts.tv_sec = (time_t)(next / 1000000000u);
            ts.tv_nsec = (long)(next % 1000000000u);
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
        }
    }
    b->t1 = now_ns();
    return NULL;
}

void busy_feed_start(busy_t *b, int cpu, double max_s)
{
    atomic_store(&b->stop, 0);
    atomic_store(&b->writes, 0);
    b->t0 = b->t1 = 0;
    b->cpu = cpu;
    b->max_s = max_s;
    b->feeding = pthread_create(&b->th, NULL, feed_main, b) == 0;
}

void busy_feed_stop(busy_t *b)
{
    atomic_store(&b->stop, 1);
    if (b->feeding) pthread_join(b->th, NULL);
    b->feeding = 0;
}

void busy_stats(const busy_t *b, busy_stats_t *out)
{
    out->seconds = b->t1 > b->t0 ? (double)(b->t1 - b->t0) / 1e9 : 0;
    out->writes = atomic_load(&b->writes);
    out->reads = b->reads;
    out->timers_armed = b->ntimer;
    out->timers_fired = b->fired;
}

/* ---- load ----------------------------------------------------------------------------------- */

#define MAX_SPIN 64

struct load {
    int n;
    pthread_t th[MAX_SPIN];
    int cpu[MAX_SPIN];
    uint64_t end;
    _Atomic int stop;
};

typedef struct { load_t *l; int cpu; } spin_arg_t;

int load_threads(int cpu_a, int cpu_b, int *cpus, int max)
{
    int total = ncpus(), n = 0;
    for (int i = 0; i < total && n < max; i++) {
        int c = cpu_nth(i);
        if (c != cpu_a && c != cpu_b) cpus[n++] = c;
    }
    if (n == 0 && max > 0) cpus[n++] = cpu_b;   /* 2 CPUs (or unpinned): share the loop's */
    return n;
}

static void *spin_main(void *arg)
{
    spin_arg_t *s = arg;
    load_t *l = s->l;
    uint64_t x = 88172645463325252ull;
    if (s->cpu >= 0) pin_self(s->cpu);
    free(s);
    while (!atomic_load_explicit(&l->stop, memory_order_relaxed) && now_ns() < l->end)
        for (int i = 0; i < 20000; i++) x = rng_next(&x) | 1;
    return (void *)(uintptr_t)(x & 1);   /* keeps the work */
}

load_t *load_start(int cpu_a, int cpu_b, double max_s)
{
    load_t *l = calloc(1, sizeof *l);
    int cpus[MAX_SPIN], want = load_threads(cpu_a, cpu_b, cpus, MAX_SPIN);
    l->end = now_ns() + (uint64_t)(max_s * 1e9);
    for (int i = 0; i < want; i++) {
        spin_arg_t *s = malloc(sizeof *s);
        *s = (spin_arg_t){ l, cpus[i] };
        if (pthread_create(&l->th[l->n], NULL, spin_main, s) != 0) { free(s); break; }
        l->cpu[l->n++] = cpus[i];
    }
    return l;
}

void load_stop(load_t *l)
{
    if (!l) return;
    atomic_store(&l->stop, 1);
    for (int i = 0; i < l->n; i++) pthread_join(l->th[i], NULL);
    free(l);
}
