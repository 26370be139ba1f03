/* glib.c - GLib's GMainContext through dlopen. Wakeups are a custom GSource whose flag the
 * sender sets before g_main_context_wakeup() (as coalescing as ours); timers are
 * g_timeout_source_new (millisecond resolution); fds are g_unix_fd_source_new. */
#include "peer.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glib_types.h"   /* gboolean, GSourceFunc, GSourceFuncs */

enum { G_IO_IN = 1 };

static struct {
    void *(*context_new)(void);
    void (*context_unref)(void *);
    gboolean (*iteration)(void *ctx, gboolean may_block);
    void (*wakeup)(void *ctx);
    void *(*source_new)(GSourceFuncs *f, unsigned size);
    unsigned (*attach)(void *src, void *ctx);
    void (*destroy)(void *src);
    void (*unref)(void *src);
    void (*set_callback)(void *src, void *fn, void *data, void *notify);
    void *(*timeout_source_new)(unsigned ms);
    void *(*unix_fd_source_new)(int fd, int cond);
    void (*set_ready_time)(void *src, int64_t ready_time);
    int64_t (*monotonic_time)(void);
    const unsigned *major, *minor, *micro;
} g;

static int glib_load(peer_t *self)
{
    static const char *const names[] = { "libglib-2.0.so.0", "libglib-2.0.so", NULL };
    void *h = peer_dlopen(self, names);
    if (!h) return -1;
    PEER_SYM(self, h, g.context_new, "g_main_context_new");
    PEER_SYM(self, h, g.context_unref, "g_main_context_unref");
    PEER_SYM(self, h, g.iteration, "g_main_context_iteration");
    PEER_SYM(self, h, g.wakeup, "g_main_context_wakeup");
    PEER_SYM(self, h, g.source_new, "g_source_new");
    PEER_SYM(self, h, g.attach, "g_source_attach");
    PEER_SYM(self, h, g.destroy, "g_source_destroy");
    PEER_SYM(self, h, g.unref, "g_source_unref");
    PEER_SYM(self, h, g.set_callback, "g_source_set_callback");
    PEER_SYM(self, h, g.timeout_source_new, "g_timeout_source_new");
    PEER_SYM(self, h, g.unix_fd_source_new, "g_unix_fd_source_new");
    PEER_SYM(self, h, g.set_ready_time, "g_source_set_ready_time");
    PEER_SYM(self, h, g.monotonic_time, "g_get_monotonic_time");
    PEER_SYM(self, h, g.major, "glib_major_version");
    PEER_SYM(self, h, g.minor, "glib_minor_version");
    PEER_SYM(self, h, g.micro, "glib_micro_version");
    snprintf(self->version, sizeof self->version, "%u.%u.%u", *g.major, *g.minor, *g.micro);
    return 0;
}

typedef struct { void *ctx; int stopped; } gl_loop_t;
typedef struct { gl_loop_t *loop; void *src; bench_cb cb; void *arg; } gl_item_t;

static void *gl_loop_new(void)
{
    gl_loop_t *l = calloc(1, sizeof *l);
    l->ctx = g.context_new();
    return l;
}

static void gl_loop_free(void *lp)
{
    gl_loop_t *l = lp;
    g.context_unref(l->ctx);
    free(l);
}

static void gl_run(void *lp)
{
    gl_loop_t *l = lp;
    l->stopped = 0;
    while (!l->stopped) g.iteration(l->ctx, 1);
}

static void gl_stop(void *lp) { ((gl_loop_t *)lp)->stopped = 1; }
static void gl_pass(void *lp) { g.iteration(((gl_loop_t *)lp)->ctx, 0); }

/* The wakeup source: a GSource followed by our fields. */
typedef struct {
    char gsource[96];   /* sizeof(GSource) is 96 on LP64 (GLib 2.x); the tail starts after it */
    _Atomic int flag;
    gl_item_t *item;
} gl_async_t;

static gboolean as_prepare(void *s, int *timeout)
{
    *timeout = -1;
    return atomic_load_explicit(&((gl_async_t *)s)->flag, memory_order_acquire);
}

static gboolean as_check(void *s) { return atomic_load_explicit(&((gl_async_t *)s)->flag, memory_order_acquire); }

static gboolean as_dispatch(void *s, GSourceFunc cb, void *data)
{
    gl_async_t *a = s;
    (void)cb; (void)data;
    atomic_store(&a->flag, 0);
    a->item->cb(a->item->arg);
    return 1;
}

static GSourceFuncs async_funcs = { as_prepare, as_check, as_dispatch, NULL, NULL, NULL };

static void *gl_async_new(void *lp, bench_cb cb, void *arg)
{
    gl_loop_t *l = lp;
    gl_item_t *it = calloc(1, sizeof *it);
    gl_async_t *a = g.source_new(&async_funcs, sizeof(gl_async_t));
    *it = (gl_item_t){ l, a, cb, arg };
    a->item = it;
    g.attach(a, l->ctx);
    return it;
}

static void gl_async_send(void *ap)
{
    gl_item_t *it = ap;
    atomic_store_explicit(&((gl_async_t *)it->src)->flag, 1, memory_order_release);
    g.wakeup(it->loop->ctx);
}

static void gl_free(void *ap)
{
    gl_item_t *it = ap;
    if (it->src) {
        g.destroy(it->src);
        g.unref(it->src);
    }
    free(it);
}

static gboolean timer_fired(void *data)
{
    gl_item_t *it = data;
    it->cb(it->arg);
    return 1;   /* G_SOURCE_CONTINUE: a repeating timer */
}

static gboolean oneshot_fired(void *data)
{
    gl_item_t *it = data;
    it->cb(it->arg);
    return 0;   /* G_SOURCE_REMOVE */
}

static void *gl_timer_new(void *lp, bench_cb cb, void *arg)
{
    gl_item_t *it = calloc(1, sizeof *it);
    *it = (gl_item_t){ lp, NULL, cb, arg };
    return it;
}

static void gl_timer_start(void *tp, double delay, double repeat)
{
    gl_item_t *it = tp;
    double s = repeat > 0 ? repeat : delay;
    if (it->src) {
        g.destroy(it->src);
        g.unref(it->src);
    }
    it->src = g.timeout_source_new((unsigned)(s * 1e3 + 0.5));
    g.set_callback(it->src, (void *)(repeat > 0 ? timer_fired : oneshot_fired), it, NULL);
    g.attach(it->src, it->loop->ctx);
}

/* A timeout source keeps its expiry as the source's ready time (GLib >= 2.36), so moving a
 * pending one is g_source_set_ready_time at now + delay (one clock reading). */
static void gl_timer_again(void *tp, double delay)
{
    gl_item_t *it = tp;
    g.set_ready_time(it->src, g.monotonic_time() + (int64_t)(delay * 1e6));
}

static void gl_timer_stop(void *tp)
{
    gl_item_t *it = tp;
    if (it->src) g.destroy(it->src);
}

static gboolean fd_ready(int fd, int cond, void *data)
{
    gl_item_t *it = data;
    (void)fd; (void)cond;
    it->cb(it->arg);
    return 1;
}

static void *gl_fd_new(void *lp, int fd, bench_cb cb, void *arg)
{
    gl_loop_t *l = lp;
    gl_item_t *it = calloc(1, sizeof *it);
    *it = (gl_item_t){ l, g.unix_fd_source_new(fd, G_IO_IN), cb, arg };
    g.set_callback(it->src, (void *)fd_ready, it, NULL);
    g.attach(it->src, l->ctx);
    return it;
}

peer_t peer_glib = {
    .name = "GLib", .package = "libglib2.0-0", .load = glib_load,
    .loop_new = gl_loop_new, .loop_free = gl_loop_free, .run = gl_run, .stop = gl_stop,
    .pass = gl_pass, .async_new = gl_async_new, .async_send = gl_async_send,
    .async_free = gl_free, .timer_new = gl_timer_new, .timer_start = gl_timer_start,
    .timer_stop = gl_timer_stop, .timer_free = gl_free, .timer_again = gl_timer_again, .fd_new = gl_fd_new, .fd_free = gl_free,
    .timers_any_thread = 1,     /* g_source_attach to another thread's context wakes it */
};
