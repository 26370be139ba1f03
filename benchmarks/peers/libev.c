/* libev.c - libev through dlopen. The watcher layouts are declared here (EV_MULTIPLICITY=1,
 * EV_COMMON = void *data, as Debian's libev4 is built; checked against ev.h 4.33):
 *   ev_watcher: int active, pending, priority; void *data; void (*cb)(loop, w, revents)
 *   ev_async:   watcher; sig_atomic_t volatile sent
 *   ev_timer:   watcher; double at, repeat
 *   ev_io:      watcher; struct ev_watcher_list *next; int fd, events */
#include "peer.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#define EV_WATCHER_FIELDS int active, pending, priority; void *data; void (*cb)(void *loop, void *w, int revents);
typedef struct { EV_WATCHER_FIELDS } ev_watcher_t;
typedef struct { EV_WATCHER_FIELDS volatile sig_atomic_t sent; } ev_async_t;
typedef struct { EV_WATCHER_FIELDS double at, repeat; } ev_timer_t;
typedef struct { EV_WATCHER_FIELDS void *next; int fd, events; } ev_io_t;

_Static_assert(sizeof(ev_async_t) == 40, "ev_async layout");
_Static_assert(sizeof(ev_timer_t) == 48, "ev_timer layout");
_Static_assert(sizeof(ev_io_t) == 48, "ev_io layout");

enum { EV_READ = 1, EV__IOFDSET = 0x80, EVRUN_NOWAIT = 1, EVBREAK_ALL = 2 };

static struct {
    void *(*loop_new)(unsigned flags);
    void (*loop_destroy)(void *loop);
    int (*run)(void *loop, int flags);
    void (*brk)(void *loop, int how);
    void (*async_start)(void *loop, void *w);
    void (*async_stop)(void *loop, void *w);
    void (*async_send)(void *loop, void *w);
    void (*timer_start)(void *loop, void *w);
    void (*timer_stop)(void *loop, void *w);
    void (*timer_again)(void *loop, void *w);
    void (*io_start)(void *loop, void *w);
    void (*io_stop)(void *loop, void *w);
    int (*major)(void), (*minor)(void);
    const char *(*backend_name)(void);
    unsigned (*backend)(void *loop);
} ev;

static int ev_load(peer_t *self)
{
    static const char *const names[] = { "libev.so.4", "libev.so", NULL };
    void *h = peer_dlopen(self, names);
    if (!h) return -1;
    PEER_SYM(self, h, ev.loop_new, "ev_loop_new");
    PEER_SYM(self, h, ev.loop_destroy, "ev_loop_destroy");
    PEER_SYM(self, h, ev.run, "ev_run");
    PEER_SYM(self, h, ev.brk, "ev_break");
    PEER_SYM(self, h, ev.async_start, "ev_async_start");
    PEER_SYM(self, h, ev.async_stop, "ev_async_stop");
    PEER_SYM(self, h, ev.async_send, "ev_async_send");
    PEER_SYM(self, h, ev.timer_start, "ev_timer_start");
    PEER_SYM(self, h, ev.timer_stop, "ev_timer_stop");
    PEER_SYM(self, h, ev.timer_again, "ev_timer_again");
    PEER_SYM(self, h, ev.io_start, "ev_io_start");
    PEER_SYM(self, h, ev.io_stop, "ev_io_stop");
    PEER_SYM(self, h, ev.major, "ev_version_major");
    PEER_SYM(self, h, ev.minor, "ev_version_minor");
    snprintf(self->version, sizeof self->version, "%d.%d", ev.major(), ev.minor());
    return 0;
}

typedef struct { void *loop; bench_cb cb; void *arg; int kind; } ev_item_hdr_t;
typedef struct { ev_item_hdr_t hdr; union { ev_watcher_t w; ev_async_t a; ev_timer_t t; ev_io_t io; } u; } ev_item_t;

enum { K_ASYNC, K_TIMER, K_IO };

static void *evp_loop_new(void) { return ev.loop_new(0); }
static void evp_loop_free(void *l) { ev.loop_destroy(l); }
static void evp_run(void *l) { ev.run(l, 0); }
static void evp_stop(void *l) { ev.brk(l, EVBREAK_ALL); }
static void evp_pass(void *l) { ev.run(l, EVRUN_NOWAIT); }

static void fired(void *loop, void *w, int revents)
{
    ev_item_t *it = ((ev_watcher_t *)w)->data;
    (void)loop; (void)revents;
    it->hdr.cb(it->hdr.arg);
}

static ev_item_t *item(void *loop, int kind, bench_cb cb, void *arg)
{
    ev_item_t *it = calloc(1, sizeof *it);
    it->hdr = (ev_item_hdr_t){ loop, cb, arg, kind };
    it->u.w.data = it;     /* ev_init: active = pending = priority = 0, cb */
    it->u.w.cb = fired;
    return it;
}

static void *evp_async_new(void *l, bench_cb cb, void *arg)
{
    ev_item_t *it = item(l, K_ASYNC, cb, arg);
    ev.async_start(l, &it->u.a);
    return it;
}

static void evp_async_send(void *a) { ev.async_send(((ev_item_t *)a)->hdr.loop, &((ev_item_t *)a)->u.a); }

static void evp_free(void *p)
{
    ev_item_t *it = p;
    if (it->hdr.kind == K_ASYNC) ev.async_stop(it->hdr.loop, &it->u.a);
    else if (it->hdr.kind == K_TIMER) ev.timer_stop(it->hdr.loop, &it->u.t);
    else ev.io_stop(it->hdr.loop, &it->u.io);
    free(it);
}

static void *evp_timer_new(void *l, bench_cb cb, void *arg) { return item(l, K_TIMER, cb, arg); }

static void evp_timer_start(void *t, double delay, double repeat)
{
    ev_item_t *it = t;
    ev.timer_stop(it->hdr.loop, &it->u.t);
    it->u.t.at = delay;         /* ev_timer_set */
    it->u.t.repeat = repeat;
    ev.timer_start(it->hdr.loop, &it->u.t);
}

/* The documented idle-timeout idiom: repeat holds the timeout, ev_timer_again moves the pending
 * timer to ev_now() + repeat (the loop's cached time: no clock reading). */
static void evp_timer_again(void *t, double delay)
{
    ev_item_t *it = t;
    it->u.t.repeat = delay;
    ev.timer_again(it->hdr.loop, &it->u.t);
}

static void evp_timer_stop(void *t) { ev.timer_stop(((ev_item_t *)t)->hdr.loop, &((ev_item_t *)t)->u.t); }

static void *evp_fd_new(void *l, int fd, bench_cb cb, void *arg)
{
    ev_item_t *it = item(l, K_IO, cb, arg);
    it->u.io.fd = fd;           /* ev_io_set */
    it->u.io.events = EV_READ | EV__IOFDSET;
    ev.io_start(l, &it->u.io);
    return it;
}

peer_t peer_libev = {
    .name = "libev", .package = "libev4", .load = ev_load,
    .loop_new = evp_loop_new, .loop_free = evp_loop_free, .run = evp_run, .stop = evp_stop,
    .pass = evp_pass, .async_new = evp_async_new, .async_send = evp_async_send,
    .async_free = evp_free, .timer_new = evp_timer_new, .timer_start = evp_timer_start,
    .timer_stop = evp_timer_stop, .timer_free = evp_free, .timer_again = evp_timer_again, .fd_new = evp_fd_new,
    .fd_free = evp_free,
};
