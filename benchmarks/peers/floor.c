/* floor.c - the raw floors: a futex handoff, and eventfd/timerfd/fds on a bare epoll loop. */

#include "peer.h"
#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/utsname.h>
#include <unistd.h>

static int kernel_version(peer_t *self)
{
    struct utsname u;
    if (uname(&u) == 0) snprintf(self->version, sizeof self->version, "Linux %s", u.release);
    return 0;
}

/* ---- futex: the sender stores 1 and wakes, the loop thread exchanges 0 or sleeps ------------ */

typedef struct {
    _Atomic int word;
    int stopped;
    bench_cb cb;
    void *arg;
} fx_loop_t;

static void *fx_loop_new(void) { return calloc(1, sizeof(fx_loop_t)); }
static void fx_loop_free(void *l) { free(l); }

static void fx_run(void *lp)
{
    fx_loop_t *l = lp;
    l->stopped = 0;
    while (!l->stopped) {
        if (atomic_exchange(&l->word, 0)) l->cb(l->arg);
        else syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    }
}

static void fx_stop(void *lp) { ((fx_loop_t *)lp)->stopped = 1; }
static void fx_pass(void *lp)
{
    fx_loop_t *l = lp;
    if (atomic_exchange(&l->word, 0)) l->cb(l->arg);
}

static void *fx_async_new(void *lp, bench_cb cb, void *arg)
{
    fx_loop_t *l = lp;
    l->cb = cb;
    l->arg = arg;
    return l;
}

static void fx_async_send(void *a)
{
    fx_loop_t *l = a;
    atomic_store(&l->word, 1);
    syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void fx_async_free(void *a) { (void)a; }

peer_t peer_futex = {
    .name = "futex", .is_floor = 1, .load = kernel_version,
    .loop_new = fx_loop_new, .loop_free = fx_loop_free, .run = fx_run, .stop = fx_stop,
    .pass = fx_pass, .async_new = fx_async_new, .async_send = fx_async_send,
    .async_free = fx_async_free,
};

/* ---- epoll: eventfd for wakeups, one timerfd per timer, plain fds -------------------------- */

enum { W_EVENTFD, W_TIMERFD, W_FD };

typedef struct {
    int epfd;
    int stopped;
} ep_loop_t;

typedef struct {
    int kind, fd;
    ep_loop_t *loop;
    bench_cb cb;
    void *arg;
} ep_watch_t;

static void *ep_loop_new(void)
{
    ep_loop_t *l = calloc(1, sizeof *l);
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    return l;
}

static void ep_loop_free(void *lp)
{
    ep_loop_t *l = lp;
    close(l->epfd);
    free(l);
}

static void ep_dispatch(struct epoll_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        ep_watch_t *w = ev[i].data.ptr;
        uint64_t v;
        if (w->kind != W_FD && read(w->fd, &v, sizeof v) != (ssize_t)sizeof v) continue;
        w->cb(w->arg);
    }
}

static void ep_run(void *lp)
{
    ep_loop_t *l = lp;
    struct epoll_event ev[64];
    l->stopped = 0;
    while (!l->stopped) {
        int n = epoll_wait(l->epfd, ev, 64, -1);
        if (n > 0) ep_dispatch(ev, n);
    }
}

static void ep_stop(void *lp) { ((ep_loop_t *)lp)->stopped = 1; }

static void ep_pass(void *lp)
{
    ep_loop_t *l = lp;
    struct epoll_event ev[64];
    int n = epoll_wait(l->epfd, ev, 64, 0);
    if (n > 0) ep_dispatch(ev, n);
}

static ep_watch_t *ep_watch(ep_loop_t *l, int kind, int fd, bench_cb cb, void *arg)
{
    ep_watch_t *w;
    struct epoll_event ev;
    if (fd < 0) return NULL;
    w = calloc(1, sizeof *w);
    *w = (ep_watch_t){ kind, fd, l, cb, arg };
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.ptr = w;
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        if (kind != W_FD) close(fd);
        free(w);
        return NULL;
    }
    return w;
}

static void ep_unwatch(void *wp)
{
    ep_watch_t *w = wp;
    if (!w) return;
    epoll_ctl(w->loop->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    if (w->kind != W_FD) close(w->fd);
    free(w);
}

static void *ep_async_new(void *l, bench_cb cb, void *arg)
{
    return ep_watch(l, W_EVENTFD, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), cb, arg);
}

static void ep_async_send(void *a)
{
    uint64_t one = 1;
    if (write(((ep_watch_t *)a)->fd, &one, sizeof one) < 0) {}
}

static void *ep_timer_new(void *l, bench_cb cb, void *arg)
{
    return ep_watch(l, W_TIMERFD, timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), cb, arg);
}

static struct timespec ts_of(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    return ts;
}

static void ep_timer_start(void *t, double delay, double repeat)
{
    struct itimerspec its;
    its.it_value = ts_of(delay > 0 ? delay : 1e-9);
    its.it_interval = ts_of(repeat);
    timerfd_settime(((ep_watch_t *)t)->fd, 0, &its, NULL);
}

static void ep_timer_stop(void *t)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    timerfd_settime(((ep_watch_t *)t)->fd, 0, &its, NULL);
}

static void *ep_fd_new(void *l, int fd, bench_cb cb, void *arg) { return ep_watch(l, W_FD, fd, cb, arg); }

peer_t peer_epoll = {
    .name = "epoll", .is_floor = 1, .load = kernel_version,
    .loop_new = ep_loop_new, .loop_free = ep_loop_free, .run = ep_run, .stop = ep_stop,
    .pass = ep_pass, .async_new = ep_async_new, .async_send = ep_async_send,
    .async_free = ep_unwatch, .timer_new = ep_timer_new, .timer_start = ep_timer_start,
    .timer_stop = ep_timer_stop, .timer_free = ep_unwatch, .fd_new = ep_fd_new,
    .fd_free = ep_unwatch,
};
