/* server_libevent.c - the HTTP benchmark's server on libevent 2.1 (benchmarks/http/bench), written
 * the way libevent's users write a server on raw events: one event_base, and per connection two
 * events made with event_new, a read event and a write event, both EV_PERSIST and added with the
 * idle timeout (event_add(ev, &timeout)). The write event is added only while output is stalled,
 * in place of the read event. A persistent event with a timeout has its timeout rescheduled by
 * libevent each time it becomes active, so every batch of requests read re-arms the idle timeout
 * without a call of ours; when it expires the callback gets EV_TIMEOUT and closes the connection.
 * The timeout is a common timeout (event_base_init_common_timeout, the optimization libevent's
 * documentation gives for many events sharing one duration: a FIFO queue per duration instead of
 * the heap, so a re-arm moves the event to the queue's tail). SIGTERM and SIGINT are EV_SIGNAL
 * events. The connection's reading, answering and writing are server.h's, the same as floor.c's.
 *
 *   http-libevent [--idle SECONDS] [PORT] | http-libevent --version
 *
 * libevent is loaded with dlopen (libevent_core-2.1.so.7, Debian package libevent-core-2.1-7):
 * events and the base are opaque, so the few functions used are declared here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define NAME "http-libevent"
#define SERVER_READINESS

#include <signal.h>
#include <stdbool.h>
#include <sys/time.h>

#include "../../examples/c/http_exchange.h"

enum { EV_TIMEOUT = 0x01, EV_READ = 0x02, EV_WRITE = 0x04, EV_SIGNAL = 0x08, EV_PERSIST = 0x10 };
typedef void (*event_cb)(int fd, short what, void *arg);

struct conn {
    void *rev, *wev;            /* the read and write events (event_new) */
    int fd;
    bool stalled;
    struct conn *prev, *next;   /* the open connections */
    struct http_io io;
};

#include "server.h"

static struct {
    void *(*base_new)(void);
    int (*dispatch)(void *base);
    int (*loopbreak)(void *base);
    void *(*event_new)(void *base, int fd, short what, event_cb cb, void *arg);
    void (*event_free)(void *ev);
    int (*add)(void *ev, const struct timeval *tv);
    int (*del)(void *ev);
    const struct timeval *(*init_common_timeout)(void *base, const struct timeval *duration);
    const char *(*get_version)(void);
} le;

static void *base;
static const struct timeval *idle_tv;   /* the common timeout */
static int lfd = -1;
static void *listener, *sigterm_ev, *sigint_ev;
static bool accept_paused;

static void load(void) {
    static const char *const names[] = { "libevent_core-2.1.so.7", "libevent-2.1.so.7", NULL };
    void *h = server_dlopen(names, "libevent-core-2.1-7");
    SYM(h, le.base_new, "event_base_new");
    SYM(h, le.dispatch, "event_base_dispatch");
    SYM(h, le.loopbreak, "event_base_loopbreak");
    SYM(h, le.event_new, "event_new");
    SYM(h, le.event_free, "event_free");
    SYM(h, le.add, "event_add");
    SYM(h, le.del, "event_del");
    SYM(h, le.init_common_timeout, "event_base_init_common_timeout");
    SYM(h, le.get_version, "event_get_version");
}

/* ---- Connections ------------------------------------------------------------------------------ */

static void conn_close(struct conn *c) {
    le.event_free(c->rev);      /* event_free deletes a pending event first; allowed in its callback */
    le.event_free(c->wev);
    if (close(c->fd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    server_conn_closed(c);
    free(c->io.out);
    free(c);
    if (accept_paused && le.add(listener, NULL) == 0) accept_paused = false;
}

/* A stall swaps the read event for the write event, and back when the output is flushed; the
 * event added gets a fresh idle timeout. */
static bool conn_watch_writable(struct conn *c, bool writable) {
    if (le.del(writable ? c->rev : c->wev) != 0 || le.add(writable ? c->wev : c->rev, idle_tv) != 0) {
        fprintf(stderr, NAME ": event_add/event_del failed on fd %d\n", c->fd);
        conn_close(c);
        return false;
    }
    return true;
}

/* Nothing to do: libevent reschedules a persistent event's timeout each time the event becomes
 * active, before its callback runs. */
static void conn_rearm(struct conn *c) { (void)c; }

static void on_conn_event(int fd, short what, void *arg) {
    (void)fd;
    struct conn *c = arg;
    if (what & EV_TIMEOUT) {
        st.idle_closes++;
        conn_close(c);
        return;
    }
    conn_on_ready(c);
}

static void conn_open(int fd) {
    struct conn *c = server_conn_new(fd);
    if (!c) return;
    c->rev = le.event_new(base, fd, EV_READ | EV_PERSIST, on_conn_event, c);
    c->wev = le.event_new(base, fd, EV_WRITE | EV_PERSIST, on_conn_event, c);
    if (!c->rev || !c->wev || le.add(c->rev, idle_tv) != 0) {
        fprintf(stderr, NAME ": event_new/event_add failed\n");
        if (c->rev) le.event_free(c->rev);
        if (c->wev) le.event_free(c->wev);
        close(fd);
        free(c);
        return;
    }
    server_conn_opened(c);
}

/* ---- The listener and shutdown ------------------------------------------------------------- */

static void on_accept(int fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
    bool pause = false;
    int cfd;
    while ((cfd = http_accept(lfd, &pause)) >= 0) conn_open(cfd);
    if (pause && le.del(listener) == 0) accept_paused = true;
}

static void on_signal(int signo, short what, void *arg) {
    (void)what;
    (void)arg;
    accept_paused = false;
    server_shutdown(signo);
    le.event_free(listener);
    if (close(lfd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    le.event_free(sigterm_ev);
    le.event_free(sigint_ev);
    le.loopbreak(base);
}

int main(int argc, char **argv) {
    struct server_args args = server_parse_args(argc, argv);
    load();
    if (args.version) {
        printf("libevent %s\n", le.get_version());
        return 0;
    }
    base = le.base_new();
    if (!base) {
        fprintf(stderr, NAME ": event_base_new failed\n");
        return 1;
    }
    double whole = floor(args.idle);
    struct timeval duration = { (time_t)whole, (suseconds_t)((args.idle - whole) * 1e6) };
    idle_tv = le.init_common_timeout(base, &duration);
    if (!idle_tv) {
        fprintf(stderr, NAME ": event_base_init_common_timeout failed\n");
        return 1;
    }
    int port = 0;
    lfd = server_listen(args.port, &port);
    listener = le.event_new(base, lfd, EV_READ | EV_PERSIST, on_accept, NULL);
    sigterm_ev = le.event_new(base, SIGTERM, EV_SIGNAL | EV_PERSIST, on_signal, NULL);
    sigint_ev = le.event_new(base, SIGINT, EV_SIGNAL | EV_PERSIST, on_signal, NULL);
    if (!listener || !sigterm_ev || !sigint_ev || le.add(listener, NULL) != 0 ||
        le.add(sigterm_ev, NULL) != 0 || le.add(sigint_ev, NULL) != 0) {
        fprintf(stderr, NAME ": creating the listener and signal events failed\n");
        return 1;
    }
    server_listening(port);

    if (le.dispatch(base) < 0) {
        fprintf(stderr, NAME ": event_base_dispatch failed\n");
        return 1;
    }
    return server_exit_status();
}
