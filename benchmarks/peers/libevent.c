/* libevent.c - libevent 2.1 through dlopen: event_base with pthread locking
 * (evthread_use_pthreads, from libevent_pthreads), so that event_active() from another thread
 * wakes the loop. Events are opaque; event_new/event_free allocate them. */
#include "peer.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

enum { EV_READ = 0x02, EV_PERSIST = 0x10, EVLOOP_NONBLOCK = 0x02, EVLOOP_NO_EXIT_ON_EMPTY = 0x04 };
typedef void (*event_cb)(int fd, short what, void *arg);

static struct {
    void *(*base_new)(void);
    void (*base_free)(void *base);
    int (*loop)(void *base, int flags);
    int (*loopbreak)(void *base);
    void *(*event_new)(void *base, int fd, short what, event_cb cb, void *arg);
    void (*event_free)(void *ev);
    int (*add)(void *ev, const struct timeval *tv);
    int (*del)(void *ev);
    void (*active)(void *ev, int res, short ncalls);
    const char *(*get_version)(void);
    int (*use_pthreads)(void);
} le;

static int le_load(peer_t *self)
{
    static const char *const core[] = { "libevent_core-2.1.so.7", NULL };   /* the copy libevent_pthreads uses */
    static const char *const thr[] = { "libevent_pthreads-2.1.so.7", NULL };
    void *h = peer_dlopen(self, core), *p;
    if (!h) return -1;
    if (!(p = peer_dlopen(self, thr))) return -1;
    PEER_SYM(self, h, le.base_new, "event_base_new");
    PEER_SYM(self, h, le.base_free, "event_base_free");
    PEER_SYM(self, h, le.loop, "event_base_loop");
    PEER_SYM(self, h, le.loopbreak, "event_base_loopbreak");
    PEER_SYM(self, h, le.event_new, "event_new");
    PEER_SYM(self, h, le.event_free, "event_free");
    PEER_SYM(self, h, le.add, "event_add");
    PEER_SYM(self, h, le.del, "event_del");
    PEER_SYM(self, h, le.active, "event_active");
    PEER_SYM(self, h, le.get_version, "event_get_version");
    PEER_SYM(self, p, le.use_pthreads, "evthread_use_pthreads");
    if (le.use_pthreads() != 0) {
        snprintf(self->why, sizeof self->why, "evthread_use_pthreads failed");
        return -1;
    }
    copy_str(self->version, sizeof self->version, le.get_version());
    return 0;
}

typedef struct { void *base; void *ev; bench_cb cb; void *arg; } le_item_t;

static void *lep_loop_new(void) { return le.base_new(); }
static void lep_loop_free(void *b) { le.base_free(b); }
static void lep_run(void *b) { le.loop(b, EVLOOP_NO_EXIT_ON_EMPTY); }
static void lep_stop(void *b) { le.loopbreak(b); }
static void lep_pass(void *b) { le.loop(b, EVLOOP_NONBLOCK | EVLOOP_NO_EXIT_ON_EMPTY); }

static void fired(int fd, short what, void *arg)
{
    le_item_t *it = arg;
    (void)fd; (void)what;
    it->cb(it->arg);
}

static le_item_t *item(void *b, int fd, short what, bench_cb cb, void *arg)
{
    le_item_t *it = calloc(1, sizeof *it);
    *it = (le_item_t){ b, NULL, cb, arg };
    it->ev = le.event_new(b, fd, what, fired, it);
    return it;
}

/* A user event: never added, made active by event_active() from any thread. */
static void *lep_async_new(void *b, bench_cb cb, void *arg) { return item(b, -1, 0, cb, arg); }
static void lep_async_send(void *a) { le.active(((le_item_t *)a)->ev, EV_READ, 0); }

static void lep_free(void *a)
{
    le_item_t *it = a;
    le.event_free(it->ev);
    free(it);
}

static void *lep_timer_new(void *b, bench_cb cb, void *arg) { return item(b, -1, 0, cb, arg); }

static void lep_timer_start(void *t, double delay, double repeat)
{
    le_item_t *it = t;
    double s = repeat > 0 ? repeat : delay;
    struct timeval tv = { (time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6) };
    if (repeat > 0) {       /* a persistent timer re-arms from its scheduled time */
        le.event_free(it->ev);
        it->ev = le.event_new(it->base, -1, EV_PERSIST, fired, it);
    }
    le.add(it->ev, &tv);
}

/* event_add on a pending event reschedules it (the base's cached time inside the loop). */
static void lep_timer_again(void *t, double delay)
{
    le_item_t *it = t;
    struct timeval tv = { (time_t)delay, (suseconds_t)((delay - (double)(time_t)delay) * 1e6) };
    le.add(it->ev, &tv);
}

static void lep_timer_stop(void *t) { le.del(((le_item_t *)t)->ev); }

static void *lep_fd_new(void *b, int fd, bench_cb cb, void *arg)
{
    le_item_t *it = item(b, fd, EV_READ | EV_PERSIST, cb, arg);
    le.add(it->ev, NULL);
    return it;
}

peer_t peer_libevent = {
    .name = "libevent", .package = "libevent-pthreads-2.1-7 (and libevent-core-2.1-7)", .load = le_load,
    .loop_new = lep_loop_new, .loop_free = lep_loop_free, .run = lep_run, .stop = lep_stop,
    .pass = lep_pass, .async_new = lep_async_new, .async_send = lep_async_send,
    .async_free = lep_free, .timer_new = lep_timer_new, .timer_start = lep_timer_start,
    .timer_stop = lep_timer_stop, .timer_free = lep_free, .timer_again = lep_timer_again, .fd_new = lep_fd_new,
    .fd_free = lep_free,
    .timers_any_thread = 1,     /* event_add/event_del lock the base (evthread_use_pthreads) */
};
