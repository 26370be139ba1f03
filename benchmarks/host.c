/* host.c - see host.h. */

#include "host.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static void *host_main(void *hp)
{
    host_t *h = hp;
    uint64_t c0;
    long s0;
    if (h->cpu >= 0) pin_self(h->cpu);
    h->loop = h->p->loop_new();
    h->async = h->loop ? h->p->async_new(h->loop, h->cb, h->arg) : NULL;
    if (!h->async) {
        fprintf(stderr, "%s: cannot create a loop and a wakeup\n", h->p->name);
        exit(1);
    }
    if (h->setup) h->setup(h);
    atomic_store(&h->ready, 1);
    c0 = thread_cpu_ns();
    s0 = thread_ctx_switches();
    h->p->run(h->loop);
    h->cpu_ns = thread_cpu_ns() - c0;
    h->ctx_switches = thread_ctx_switches() - s0;
    while (!atomic_load(&h->released)) sched_yield();
    if (h->teardown) h->teardown(h);
    h->p->async_free(h->async);
    h->p->loop_free(h->loop);
    return NULL;
}

void host_start(host_t *h, peer_t *p, int cpu, bench_cb cb, void *arg)
{
    h->p = p;
    h->cpu = cpu;
    h->cb = cb;
    h->arg = arg;
    atomic_store(&h->ready, 0);
    atomic_store(&h->released, 0);
    if (pthread_create(&h->th, NULL, host_main, h) != 0) { perror("pthread_create"); exit(1); }
}

void host_wait_ready(host_t *h)
{
    while (!atomic_load(&h->ready)) sched_yield();
}

void host_release(host_t *h) { atomic_store(&h->released, 1); }
void host_join(host_t *h) { pthread_join(h->th, NULL); }

int wait_at_least(_Atomic long *v, long want, double timeout_s)
{
    static int alone = -1;
    uint64_t deadline = now_ns() + (uint64_t)(timeout_s * 1e9);
    unsigned k = 0;
    if (alone < 0) alone = ncpus() < 2;
    while (atomic_load_explicit(v, memory_order_acquire) < want) {
        if (alone) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else __builtin_ia32_pause();
#endif
        if ((++k & 255) == 0 && now_ns() > deadline) return -1;
    }
    return 0;
}
