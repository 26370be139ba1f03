/* libuv.c - libuv through dlopen. Loops and handles are opaque: uv_loop_size() and
 * uv_handle_size() size them, and every handle starts with `void *data`. */
#include "peer.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { UV_ASYNC = 1, UV_POLL = 8, UV_TIMER = 13 };          /* uv_handle_type */
enum { UV_RUN_DEFAULT = 0, UV_RUN_NOWAIT = 2 };
enum { UV_READABLE = 1 };

typedef struct { void *data; } uv_handle_head_t;
typedef void (*uv_cb1)(void *handle);
typedef void (*uv_poll_cb)(void *handle, int status, int events);

static struct {
    size_t (*loop_size)(void);
    size_t (*handle_size)(int type);
    int (*loop_init)(void *loop);
    int (*loop_close)(void *loop);
    int (*run)(void *loop, int mode);
    void (*stop)(void *loop);
    void (*update_time)(void *loop);
    int (*async_init)(void *loop, void *h, uv_cb1 cb);
    int (*async_send)(void *h);
    int (*timer_init)(void *loop, void *h);
    int (*timer_start)(void *h, uv_cb1 cb, uint64_t timeout, uint64_t repeat);
    int (*timer_stop)(void *h);
    int (*poll_init)(void *loop, void *h, int fd);
    int (*poll_start)(void *h, int events, uv_poll_cb cb);
    void (*close)(void *h, uv_cb1 cb);
    const char *(*version_string)(void);
} uv;

static int uv_load(peer_t *self)
{
    static const char *const names[] = { "libuv.so.1", "libuv.so", NULL };
    void *h = peer_dlopen(self, names);
    if (!h) return -1;
    PEER_SYM(self, h, uv.loop_size, "uv_loop_size");
    PEER_SYM(self, h, uv.handle_size, "uv_handle_size");
    PEER_SYM(self, h, uv.loop_init, "uv_loop_init");
    PEER_SYM(self, h, uv.loop_close, "uv_loop_close");
    PEER_SYM(self, h, uv.run, "uv_run");
    PEER_SYM(self, h, uv.stop, "uv_stop");
    PEER_SYM(self, h, uv.update_time, "uv_update_time");
    PEER_SYM(self, h, uv.async_init, "uv_async_init");
    PEER_SYM(self, h, uv.async_send, "uv_async_send");
    PEER_SYM(self, h, uv.timer_init, "uv_timer_init");
    PEER_SYM(self, h, uv.timer_start, "uv_timer_start");
    PEER_SYM(self, h, uv.timer_stop, "uv_timer_stop");
    PEER_SYM(self, h, uv.poll_init, "uv_poll_init");
    PEER_SYM(self, h, uv.poll_start, "uv_poll_start");
    PEER_SYM(self, h, uv.close, "uv_close");
    PEER_SYM(self, h, uv.version_string, "uv_version_string");
    copy_str(self->version, sizeof self->version, uv.version_string());
    return 0;
}

/* What the handle's data points at. */
typedef struct { void *loop; void *h; bench_cb cb; void *arg; } uv_item_t;

static void *uvp_loop_new(void)
{
    void *l = calloc(1, uv.loop_size());
    if (uv.loop_init(l) != 0) { free(l); return NULL; }
    return l;
}

static void free_on_close(void *h)
{
    uv_item_t *it = ((uv_handle_head_t *)h)->data;
    free(h);
    free(it);
}

static void uvp_loop_free(void *l)
{
    uv.run(l, UV_RUN_DEFAULT);      /* lets the close callbacks run */
    uv.loop_close(l);
    free(l);
}

static void uvp_run(void *l) { uv.run(l, UV_RUN_DEFAULT); }
static void uvp_stop(void *l) { uv.stop(l); }
static void uvp_pass(void *l) { uv.run(l, UV_RUN_NOWAIT); }

static void fired(void *h)
{
    uv_item_t *it = ((uv_handle_head_t *)h)->data;
    it->cb(it->arg);
}

static void polled(void *h, int status, int events)
{
    (void)status; (void)events;
    fired(h);
}

static uv_item_t *item(void *loop, int type, bench_cb cb, void *arg)
{
    uv_item_t *it = calloc(1, sizeof *it);
    *it = (uv_item_t){ loop, calloc(1, uv.handle_size(type)), cb, arg };
    return it;
}

static void *uvp_async_new(void *l, bench_cb cb, void *arg)
{
    uv_item_t *it = item(l, UV_ASYNC, cb, arg);
    uv.async_init(l, it->h, fired);
    ((uv_handle_head_t *)it->h)->data = it;
    return it;
}

static void uvp_async_send(void *a) { uv.async_send(((uv_item_t *)a)->h); }
static void uvp_close(void *a) { uv.close(((uv_item_t *)a)->h, free_on_close); }

static void *uvp_timer_new(void *l, bench_cb cb, void *arg)
{
    uv_item_t *it = item(l, UV_TIMER, cb, arg);
    uv.timer_init(l, it->h);
    ((uv_handle_head_t *)it->h)->data = it;
    return it;
}

static uint64_t ms(double s) { return (uint64_t)(s * 1e3 + 0.5); }

static void uvp_timer_start(void *t, double delay, double repeat)
{
    uv_item_t *it = t;
    uv.timer_start(it->h, fired, ms(delay), ms(repeat));
}

/* uv_timer_start on an active timer moves it (uv_now() + timeout: the loop's cached time). */
static void uvp_timer_again(void *t, double delay)
{
    uv_item_t *it = t;
    uv.timer_start(it->h, fired, ms(delay), 0);
}

static void uvp_timer_stop(void *t) { uv.timer_stop(((uv_item_t *)t)->h); }

static void *uvp_fd_new(void *l, int fd, bench_cb cb, void *arg)
{
    uv_item_t *it = item(l, UV_POLL, cb, arg);
    if (uv.poll_init(l, it->h, fd) != 0) { free(it->h); free(it); return NULL; }
    ((uv_handle_head_t *)it->h)->data = it;
    uv.poll_start(it->h, UV_READABLE, polled);
    return it;
}

peer_t peer_libuv = {
    .name = "libuv", .package = "libuv1", .load = uv_load,
    .loop_new = uvp_loop_new, .loop_free = uvp_loop_free, .run = uvp_run, .stop = uvp_stop,
    .pass = uvp_pass, .async_new = uvp_async_new, .async_send = uvp_async_send,
    .async_free = uvp_close, .timer_new = uvp_timer_new, .timer_start = uvp_timer_start,
    .timer_stop = uvp_timer_stop, .timer_free = uvp_close, .timer_again = uvp_timer_again, .fd_new = uvp_fd_new,
    .fd_free = uvp_close,
};
