/* floor.c - the epoll floor of the HTTP keep-alive benchmark (issue 20): the server of
 * examples/c/10-http-server.c written the way an epoll user writes it, with no run loop.
 *
 *   http-floor [--idle SECONDS] [PORT]
 *
 * Same behaviour as the example: 127.0.0.1, `listening on PORT`, accept4 until EAGAIN, one read
 * per readiness (level-triggered), GET -> the same fixed 200 response, keep-alive unless
 * `Connection: close`, 405 and close for other methods, pipelining, backpressure (EAGAIN: keep the
 * rest, wait for EPOLLOUT only), SIGTERM/SIGINT (a signalfd) close everything and exit 0, and the
 * same counters printed at exit; the HTTP part itself is the example's (examples/c/http_exchange.h),
 * and the connection's reading, answering and writing are server.h's, as in the libev, GLib and
 * libevent servers: this file is the loop.
 *
 * Idle timeouts: every connection has the same timeout, so the connections sorted by deadline are
 * the connections in order of their last activity: a doubly-linked list, where re-arming moves a
 * connection to the tail (O(1), one clock_gettime) and the head's deadline is the epoll_wait
 * timeout (rounded up to the millisecond). This is the cheapest correct way to do it (what libev's
 * documentation recommends for equal timeouts; a timer wheel degenerates to it here), cheaper than
 * a timerfd per connection, which costs a timerfd_settime per request: the floor.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define NAME "http-floor"
#define SERVER_FLOOR        /* no library; the idle list below is the list of open connections */
#define SERVER_READINESS

#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>

#include "../../examples/c/http_exchange.h"

enum { MAX_EVENTS = 256 };

struct conn {
    int fd;
    bool stalled;
    double deadline;
    struct conn *prev, *next;   /* the idle list, oldest activity first */
    struct http_io io;         /* its bytes (http_exchange.h) */
};

#include "server.h"

/* Tags in epoll_event.data.ptr for the two fds that are not connections. */
static char LISTENER_TAG, SIGNAL_TAG;

static int ep, lfd = -1, sfd = -1;
static double idle = 5;
static bool accept_paused;
static struct conn *head, *tail;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void list_unlink(struct conn *c) {
    if (c->prev) c->prev->next = c->next; else head = c->next;
    if (c->next) c->next->prev = c->prev; else tail = c->prev;
    c->prev = c->next = NULL;
}

static void list_append(struct conn *c) {
    c->prev = tail;
    c->next = NULL;
    if (tail) tail->next = c; else head = c;
    tail = c;
}

/* server.h's: re-arms the idle timeout (a request was answered, or a stalled write progressed). */
static void conn_rearm(struct conn *c) {
    c->deadline = now() + idle;
    if (c != tail) {
        list_unlink(c);
        list_append(c);
    }
}

static void conn_close(struct conn *c) {
    list_unlink(c);
    if (epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) != 0)
        fprintf(stderr, NAME ": epoll_ctl DEL: %s\n", strerror(errno));
    if (close(c->fd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    free(c->io.out);
    free(c);
    st.open--;
    if (accept_paused) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &LISTENER_TAG };
        if (epoll_ctl(ep, EPOLL_CTL_MOD, lfd, &ev) == 0) accept_paused = false;
    }
}

/* server.h's: a stall waits for EPOLLOUT only; its end, for EPOLLIN again. */
static bool conn_watch_writable(struct conn *c, bool writable) {
    struct epoll_event ev = { .events = writable ? EPOLLOUT : EPOLLIN, .data.ptr = c };
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
        conn_fail(c, "epoll_ctl MOD", errno);
        return false;
    }
    return true;
}

static void conn_open(int fd) {
    struct conn *c = server_conn_new(fd);
    if (!c) return;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        fprintf(stderr, NAME ": epoll_ctl ADD: %s\n", strerror(errno));
        close(fd);
        free(c);
        return;
    }
    c->deadline = now() + idle;
    list_append(c);
    st.open++;
    st.accepted++;
}

static void on_accept(void) {
    bool pause = false;
    int fd;
    while ((fd = http_accept(lfd, &pause)) >= 0) conn_open(fd);
    if (pause) {   /* level-triggered: stop watching the listener until a connection closes */
        struct epoll_event ev = { .events = 0, .data.ptr = &LISTENER_TAG };
        if (epoll_ctl(ep, EPOLL_CTL_MOD, lfd, &ev) == 0) accept_paused = true;
    }
}

int main(int argc, char **argv) {
    struct server_args args = server_parse_args(argc, argv);
    idle = args.idle;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    /* Blocked and read from a signalfd; SIG_DFL first, as an ignored signal (SIGINT in a background
     * job of a script) would be discarded, not queued. */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0 ||
        (sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
        (ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        fprintf(stderr, NAME ": setup: %s\n", strerror(errno));
        return 1;
    }
    int port = 0;
    lfd = server_listen(args.port, &port);
    struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &LISTENER_TAG };
    struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &SIGNAL_TAG };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) != 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &sev) != 0) {
        fprintf(stderr, NAME ": listening on 127.0.0.1:%d: %s\n", args.port, strerror(errno));
        return 1;
    }
    server_listening(port);

    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int timeout = -1;
        if (head) {
            double ms = ceil((head->deadline - now()) * 1e3);
            timeout = ms <= 0 ? 0 : ms > 1e9 ? 1000000000 : (int)ms;
        }
        int n = epoll_wait(ep, events, MAX_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, NAME ": epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        bool stop = false;
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;
            if (p == &LISTENER_TAG) on_accept();
            else if (p == &SIGNAL_TAG) stop = true;
            else conn_on_ready(p);   /* a connection closed above is in no later event: each fd once */
        }
        if (stop) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                printf("%s: shutting down\n", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
            while (head) conn_close(head);
            close(lfd);
            close(sfd);
            close(ep);
            break;
        }
        double t = now();
        while (head && head->deadline <= t) {
            st.idle_closes++;
            conn_close(head);
        }
    }
    return server_exit_status();
}
