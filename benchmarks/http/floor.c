/* floor.c - the epoll floor of the HTTP keep-alive benchmark (issue 20): the server of
 * examples/c/10-http-server.c written the way an epoll user writes it, with no run loop.
 *
 *   http-floor [--idle SECONDS] [PORT]
 *
 * Same behaviour as the example: 127.0.0.1, `listening on PORT`, accept4 until EAGAIN, one read
 * per readiness (level-triggered), GET -> the same fixed 200 response, keep-alive unless
 * `Connection: close`, 405 and close for other methods, pipelining, backpressure (EAGAIN: keep the
 * rest, wait for EPOLLOUT only), SIGTERM/SIGINT (a signalfd) close everything and exit 0, and the
 * same counters printed at exit; the HTTP part itself is the example's (examples/c/http_exchange.h).
 *
 * Idle timeouts: every connection has the same timeout, so the connections sorted by deadline are
 * the connections in order of their last activity: a doubly-linked list, where re-arming moves a
 * connection to the tail (O(1), one clock_gettime) and the head's deadline is the epoll_wait
 * timeout (rounded up to the millisecond). This is the cheapest correct way to do it (what libev's
 * documentation recommends for equal timeouts; a timer wheel degenerates to it here), cheaper than
 * a timerfd per connection, which costs a timerfd_settime per request: the floor.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../examples/c/http_exchange.h"

#define NAME "http-floor"

enum { MAX_EVENTS = 256 };

struct conn {
    int fd;
    bool stalled;
    double deadline;
    struct conn *prev, *next;   /* the idle list, oldest activity first */
    struct http_io io;         /* its bytes (http_exchange.h) */
};

/* Tags in epoll_event.data.ptr for the two fds that are not connections. */
static char LISTENER_TAG, SIGNAL_TAG;

static int ep, lfd = -1, sfd = -1;
static double idle = 5;
static bool accept_paused;
static struct conn *head, *tail;
static unsigned long accepted, requests, idle_closes, stalls, open_conns;

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

static void rearm(struct conn *c) {
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
    open_conns--;
    if (accept_paused) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &LISTENER_TAG };
        if (epoll_ctl(ep, EPOLL_CTL_MOD, lfd, &ev) == 0) accept_paused = false;
    }
}

static void conn_fail(struct conn *c, const char *what, int err) {
    if (err != ECONNRESET && err != EPIPE && err != ETIMEDOUT && err != ENOTCONN)
        fprintf(stderr, NAME ": %s on fd %d: %s\n", what, c->fd, strerror(err));
    conn_close(c);
}

static bool set_events(struct conn *c, unsigned events) {
    struct epoll_event ev = { .events = events, .data.ptr = c };
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
        conn_fail(c, "epoll_ctl MOD", errno);
        return false;
    }
    return true;
}

/* Answers the requests buffered (http_exchange.h) and re-arms the idle timeout if it answered
 * any. Returns false when the connection was closed (out of memory). */
static bool answer_requests(struct conn *c) {
    long n = http_answer(&c->io);
    if (n < 0) {
        conn_close(c);
        return false;
    }
    if (n) {
        requests += (unsigned long)n;
        rearm(c);
    }
    return true;
}

static bool flush(struct conn *c) {
    bool progressed = false;
    while (c->io.out_off < c->io.out_len) {
        ssize_t n = send(c->fd, c->io.out + c->io.out_off, c->io.out_len - c->io.out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->io.out_off += (size_t)n;
            progressed = true;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (c->stalled) {
                if (progressed) rearm(c);
                return false;
            }
            if (!set_events(c, EPOLLOUT)) return false;
            c->stalled = true;
            stalls++;
            return false;
        }
        conn_fail(c, "send", n < 0 ? errno : EPIPE);
        return false;
    }
    c->io.out_off = c->io.out_len = 0;
    if (c->io.close_after_flush) {
        conn_close(c);
        return false;
    }
    if (c->stalled) {
        if (!set_events(c, EPOLLIN)) return false;
        c->stalled = false;
    }
    return true;
}

static void pump(struct conn *c) {
    for (;;) {
        if (!answer_requests(c)) return;
        if (c->io.out_len == c->io.out_off) return;
        if (!flush(c)) return;
    }
}

static void on_conn(struct conn *c) {
    if (c->stalled) {
        if (flush(c)) pump(c);
        return;
    }
    for (;;) {
        ssize_t n = read(c->fd, c->io.in + c->io.in_len, HTTP_IN_CAP - c->io.in_len);
        if (n > 0) {
            c->io.in_len += (size_t)n;
            pump(c);
            return;
        }
        if (n == 0) {
            conn_close(c);
            return;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        conn_fail(c, "read", errno);
        return;
    }
}

static void conn_open(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        fprintf(stderr, NAME ": TCP_NODELAY: %s\n", strerror(errno));
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, NAME ": out of memory for a connection\n");
        close(fd);
        return;
    }
    c->fd = fd;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        fprintf(stderr, NAME ": epoll_ctl ADD: %s\n", strerror(errno));
        close(fd);
        free(c);
        return;
    }
    c->deadline = now() + idle;
    list_append(c);
    open_conns++;
    accepted++;
}

static void on_accept(void) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_open(fd);
            continue;
        }
        switch (errno) {
        case EAGAIN:
#if EWOULDBLOCK != EAGAIN
        case EWOULDBLOCK:
#endif
            return;
        case EINTR: case ECONNABORTED: case EPROTO:
            continue;
        case EMFILE: case ENFILE: case ENOBUFS: case ENOMEM: {
            fprintf(stderr, NAME ": accept4: %s (pausing accept)\n", strerror(errno));
            struct epoll_event ev = { .events = 0, .data.ptr = &LISTENER_TAG };
            if (epoll_ctl(ep, EPOLL_CTL_MOD, lfd, &ev) == 0) accept_paused = true;
            return;
        }
        default:
            fprintf(stderr, NAME ": accept4: %s\n", strerror(errno));
            return;
        }
    }
}

static void usage(void) {
    fprintf(stderr, "usage: " NAME " [--idle SECONDS] [PORT]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int port = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--idle") == 0 && i + 1 < argc) {
            idle = strtod(argv[++i], &end);
            if (*end || !(idle > 0) || !isfinite(idle)) usage();
        } else {
            long p = strtol(argv[i], &end, 10);
            if (*end || p < 0 || p > 65535) usage();
            port = (int)p;
        }
    }
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
        (ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
        fprintf(stderr, NAME ": setup: %s\n", strerror(errno));
        return 1;
    }
    int one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &LISTENER_TAG };
    struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &SIGNAL_TAG };
    if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, SOMAXCONN) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) != 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &sev) != 0) {
        fprintf(stderr, NAME ": listening on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    printf("listening on %d\n", ntohs(a.sin_port));
    fflush(stdout);

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
            else on_conn(p);   /* a connection closed above is not in a later event: each fd once */
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
            idle_closes++;
            conn_close(head);
        }
    }
    printf("served %lu requests on %lu connections; %lu closed idle; %lu backpressure stalls; "
           "%lu left open\n", requests, accepted, idle_closes, stalls, open_conns);
    return open_conns == 0 ? 0 : 1;
}
