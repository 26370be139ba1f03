/* host.h - a loop thread: creates a peer's loop and one async wakeup on its own (pinned)
 * thread, runs it until a callback stops it, and tears it down only once the other threads say
 * they will send no more (host_release), so no send can race with the teardown. */
#ifndef HOST_H
#define HOST_H

#include "bench.h"
#include <pthread.h>
#include <stdatomic.h>

typedef struct host {
    peer_t *p;
    int cpu;
    bench_cb cb;
    void *arg;
    void (*setup)(struct host *h);      /* optional, on the loop thread after the async */
    void (*teardown)(struct host *h);   /* optional, on the loop thread before the async goes */
    void *user;
    void *loop, *async;
    _Atomic int ready, released;
    uint64_t cpu_ns;                    /* thread CPU time spent in run() */
    long ctx_switches;                  /* context switches during run() */
    pthread_t th;
} host_t;

void host_start(host_t *h, peer_t *p, int cpu, bench_cb cb, void *arg);
void host_wait_ready(host_t *h);
void host_release(host_t *h);   /* no more sends; the thread may tear down */
void host_join(host_t *h);
/* Wait, spinning (yielding when alone on one CPU), until *v >= want or timeout; 0 on success. */
int wait_at_least(_Atomic long *v, long want, double timeout_s);

#endif
