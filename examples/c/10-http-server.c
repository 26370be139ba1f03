/* 10-http-server.c - an HTTP/1.1 keep-alive server with per-connection idle timeouts, on the
 * C API (issue 20).
 *
 *   10-http-server [--idle SECONDS] [PORT]      (PORT 0 or none: an ephemeral port)
 *
 * Pattern: the single-threaded server of every event loop's tutorial, done the run-loop way.
 * One thread, one loop (rl_run), and per connection one fd source and one one-shot timer:
 *   - the listening socket (127.0.0.1, nonblocking, SO_REUSEADDR) is an fd source that accepts
 *     (accept4) until EAGAIN; it prints `listening on PORT` once it listens;
 *   - a connection is a struct (its fd, its source, its idle timer, an input buffer and the output
 *     not yet written); requests are parsed minimally: the headers end at \r\n\r\n, GET gets a
 *     small fixed 200 response with Content-Length, kept alive unless the request says
 *     `Connection: close` (or is HTTP/1.0 without keep-alive); any other method gets a 405 and the
 *     connection closes after it. Pipelined requests are answered in order (http_exchange.h, shared
 *     with the benchmark's servers, so that they all differ only in their loop; it also holds the
 *     socket calls they make alike: listen, accept4, TCP_NODELAY, read, send until EAGAIN);
 *   - the idle timer is a timeout (crunloop.h, TIMEOUTS) that lives in the connection's struct
 *     (rl_timer_create_in with RL_TIMER_IN_TIMEOUT: no allocation of its own), re-armed with
 *     rl_timer_rearm(timer, idle) at each batch of requests read, and when a stalled write makes
 *     progress: from the loop's time, so a pass that serves many connections reads the clock
 *     once for all of them; when it fires the connection closes;
 *   - backpressure: when send() says EAGAIN the rest is kept, the source's events become
 *     RL_FD_WRITABLE only (rl_source_set_fd_events), so nothing more is read until the output is
 *     flushed; then the requests already buffered are answered and reading resumes;
 *   - SIGTERM and SIGINT are signal sources (rl_source_create_signal): they close every
 *     connection and the listener and stop the loop; the program prints its counters and exits 0.
 *
 * Ownership: a connection is reference counted by its source's context (its retain and release)
 * and by its timer, which lives in the connection's memory: the timer holds one reference,
 * given back by its done once the timer's last reference is gone. So the connection lives as
 * long as either object does, including through a callout that closes it (the loop holds the
 * item for the whole callout). Closing invalidates
 * both items (the source before the fd is closed, as the header asks), drops the references the
 * connection held on them, and marks the connection closed, so a callout that was already due in
 * the same pass finds it closed and returns.
 *
 * benchmarks/http builds this same file with -O2 for the HTTP row of benchmarks/run, and
 * examples/c/10-http-server.sh (run by `make examples`) checks it: curl, keep-alive, the idle
 * close, pipelining, backpressure, a brief wrk run, SIGTERM.
 */
#include <crunloop.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME "10-http-server"   /* starts our lines on stderr, http_exchange.h's too */

#include "http_exchange.h"

struct server;

struct conn {
    int refs;                 /* the source's context, the timer (until its done), the creator */
    bool closed;              /* closed: callouts due in the same pass return at once */
    bool stalled;             /* output pending: waiting for RL_FD_WRITABLE, not reading */
    int fd;
    rl_source_t *source;      /* our references, dropped when the connection closes */
    rl_timer_t *timer;
    struct server *srv;
    struct conn *prev, *next; /* the server's list of open connections */
    struct http_io io;         /* its bytes (http_exchange.h) */
    _Alignas(8) unsigned char timer_memory[RL_TIMER_STORAGE_SIZE]; /* the timer's (rl_timer_create_in) */
};

struct server {
    rl_loop_t *loop;
    int lfd;
    rl_source_t *listener;
    rl_source_t *sigterm, *sigint;
    double idle;
    bool accept_paused;       /* out of fds: the listener waits for a connection to close */
    struct conn *conns;
    unsigned long accepted, requests, idle_closes, stalls, open;
};

/* ---- Connections --------------------------------------------------------------------------- */

static const void *conn_retain(const void *info) {
    ((struct conn *)info)->refs++;
    return info;
}

static void conn_release(const void *info) {
    struct conn *c = (struct conn *)info;
    if (--c->refs == 0) {
        free(c->io.out);
        free(c);
    }
}

/* The timer's done: its memory is ours again, and its reference to the connection goes. */
static void conn_timer_done(void *memory) {
    conn_release((char *)memory - offsetof(struct conn, timer_memory));
}

static void conn_close(struct conn *c) {
    if (c->closed) return;
    c->closed = true;
    struct server *s = c->srv;
    if (c->prev) c->prev->next = c->next; else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->open--;
    /* The source leaves the loop before its fd is closed (FILE DESCRIPTORS CLOSED TOO EARLY). */
    rl_timer_invalidate(c->timer);
    rl_source_invalidate(c->source);
    if (close(c->fd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    rl_timer_t *t = c->timer;
    rl_source_t *src = c->source;
    c->timer = NULL;
    c->source = NULL;
    rl_release(t);       /* each may free c (through conn_release) once the loop lets go too */
    rl_release(src);
    if (s->accept_paused && s->listener) {
        int err = rl_source_set_fd_events(s->listener, RL_FD_READABLE);
        if (err == 0) s->accept_paused = false;
        else fprintf(stderr, NAME ": resuming accept: %s\n", strerror(-err));
    }
}

/* A read or send error: reported unless the peer just went away (http_exchange.h), and close. */
static void conn_fail(struct conn *c, const char *what, int err) {
    http_report(what, c->fd, err);
    conn_close(c);
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
        c->srv->requests += (unsigned long)n;
        int err = rl_timer_rearm(c->timer, c->srv->idle);
        if (err) fprintf(stderr, NAME ": re-arming the idle timer: %s\n", strerror(-err));
    }
    return true;
}

/* Write what is pending (http_exchange.h's http_send). When the socket is full, stall: wait for
 * RL_FD_WRITABLE only. Returns true when everything was written and the connection is open. */
static bool flush(struct conn *c) {
    bool progressed;
    int err = http_send(c->fd, &c->io, &progressed);
    if (err == -EAGAIN) {
        if (c->stalled) {
            if (progressed) {   /* a slow reader that reads is not idle */
                err = rl_timer_rearm(c->timer, c->srv->idle);
                if (err) fprintf(stderr, NAME ": re-arming the idle timer: %s\n", strerror(-err));
            }
            return false;
        }
        err = rl_source_set_fd_events(c->source, RL_FD_WRITABLE);
        if (err) {
            conn_fail(c, "rl_source_set_fd_events", -err);
            return false;
        }
        c->stalled = true;
        c->srv->stalls++;
        return false;
    }
    if (err) {
        conn_fail(c, "send", -err);
        return false;
    }
    if (c->io.close_after_flush) {
        conn_close(c);
        return false;
    }
    if (c->stalled) {
        err = rl_source_set_fd_events(c->source, RL_FD_READABLE);
        if (err) {
            conn_fail(c, "rl_source_set_fd_events", -err);
            return false;
        }
        c->stalled = false;
    }
    return true;
}

/* Answer and write until the buffered requests are done or the output stalls. */
static void pump(struct conn *c) {
    for (;;) {
        if (!answer_requests(c)) return;
        if (c->io.out_len == c->io.out_off) return;   /* nothing to write: wait for input */
        if (!flush(c)) return;                  /* closed or stalled */
    }
}

static void on_conn_io(rl_source_t *source, int fd, unsigned events, void *info) {
    (void)source;
    (void)events;
    struct conn *c = info;
    if (c->closed) return;
    if (c->stalled) {   /* RL_FD_WRITABLE (or RL_FD_ERROR, which the send reports) */
        if (flush(c)) pump(c);
        return;
    }
    /* Level-triggered: one read per callout; more data calls again. */
    ssize_t n = http_read(fd, &c->io);
    if (n > 0) pump(c);
    else if (n == 0) conn_close(c);   /* the peer closed */
    else if (n != -EAGAIN) conn_fail(c, "read", (int)-n);
}

static void on_idle(rl_timer_t *timer, void *info) {
    (void)timer;
    struct conn *c = info;
    if (c->closed) return;
    c->srv->idle_closes++;
    conn_close(c);
}

static void conn_open(struct server *s, int fd) {
    http_nodelay(fd);
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, NAME ": out of memory for a connection\n");
        close(fd);
        return;
    }
    c->refs = 1;   /* ours, until both items hold it */
    c->fd = fd;
    c->srv = s;
    rl_context_t ctx = { .info = c, .retain = conn_retain, .release = conn_release };
    c->source = rl_source_create_fd(fd, RL_FD_READABLE, 0, on_conn_io, &ctx);
    if (!c->source) {
        fprintf(stderr, NAME ": rl_source_create_fd: %s\n", strerror(errno));
        goto fail;
    }
    rl_timer_storage memory = { c->timer_memory, sizeof c->timer_memory, conn_timer_done };
    rl_context_t timer_ctx = { .info = c };
    c->timer = rl_timer_create_in(&memory, RL_TIMER_IN_TIMEOUT, rl_time_now() + s->idle, 0, 0, on_idle, &timer_ctx);
    if (!c->timer) {
        fprintf(stderr, NAME ": rl_timer_create_in: %s\n", strerror(errno));
        goto fail;
    }
    c->refs++;     /* the timer's: conn_timer_done gives it back */
    int err = rl_loop_add_timer(s->loop, c->timer, RL_DEFAULT_MODE);
    if (!err) err = rl_loop_add_source(s->loop, c->source, RL_DEFAULT_MODE);
    if (err) {
        fprintf(stderr, NAME ": adding a connection: %s\n", strerror(-err));
        goto fail;
    }
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->open++;
    s->accepted++;
    conn_release(c);
    return;
fail:
    if (c->timer) { rl_timer_invalidate(c->timer); rl_release(c->timer); }
    if (c->source) { rl_source_invalidate(c->source); rl_release(c->source); }
    close(fd);
    conn_release(c);
}

/* ---- The listener and shutdown ------------------------------------------------------------ */

static void on_accept(rl_source_t *source, int lfd, unsigned events, void *info) {
    (void)events;
    struct server *s = info;
    bool pause = false;
    int fd;
    while ((fd = http_accept(lfd, &pause)) >= 0) conn_open(s, fd);
    if (pause) {   /* out of fds: level-triggered, so stop watching the listener until a close */
        int err = rl_source_set_fd_events(source, 0);
        if (err) fprintf(stderr, NAME ": pausing accept: %s\n", strerror(-err));
        else s->accept_paused = true;
    }
}

static void on_signal(rl_source_t *source, int signo, unsigned count, void *info) {
    (void)source;
    (void)count;
    struct server *s = info;
    printf("%s: shutting down\n", signo == SIGTERM ? "SIGTERM" : "SIGINT");
    while (s->conns) conn_close(s->conns);
    rl_source_invalidate(s->listener);
    if (close(s->lfd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    s->lfd = -1;
    rl_source_invalidate(s->sigterm);
    rl_source_invalidate(s->sigint);
    rl_loop_stop(s->loop);
}

static void usage(void) {
    fprintf(stderr, "usage: " NAME " [--idle SECONDS] [PORT]\n");
    exit(2);
}

int main(int argc, char **argv) {
    struct server s = { .idle = 5, .lfd = -1 };
    int port = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--idle") == 0 && i + 1 < argc) {
            s.idle = strtod(argv[++i], &end);
            if (*end || !(s.idle > 0) || !isfinite(s.idle)) usage();
        } else {
            long p = strtol(argv[i], &end, 10);
            if (*end || p < 0 || p > 65535) usage();
            port = (int)p;
        }
    }
    s.loop = rl_loop_get_current();
    if (!s.loop) {
        fprintf(stderr, NAME ": rl_loop_get_current: %s\n", strerror(errno));
        return 1;
    }
    int bound = 0;
    s.lfd = http_listen(port, &bound);
    if (s.lfd < 0) {
        fprintf(stderr, NAME ": listening on 127.0.0.1:%d: %s\n", port, strerror(-s.lfd));
        return 1;
    }
    rl_context_t ctx = { .info = &s };
    s.listener = rl_source_create_fd(s.lfd, RL_FD_READABLE, 0, on_accept, &ctx);
    s.sigterm = rl_source_create_signal(SIGTERM, 0, on_signal, &ctx);
    s.sigint = rl_source_create_signal(SIGINT, 0, on_signal, &ctx);
    if (!s.listener || !s.sigterm || !s.sigint) {
        fprintf(stderr, NAME ": creating the sources: %s\n", strerror(errno));
        return 1;
    }
    int err = rl_loop_add_source(s.loop, s.listener, RL_DEFAULT_MODE);
    if (!err) err = rl_loop_add_source(s.loop, s.sigterm, RL_DEFAULT_MODE);
    if (!err) err = rl_loop_add_source(s.loop, s.sigint, RL_DEFAULT_MODE);
    if (err) {
        fprintf(stderr, NAME ": adding the sources: %s\n", strerror(-err));
        return 1;
    }
    printf("listening on %d\n", bound);
    fflush(stdout);

    int r = rl_run();
    if (r < 0) {
        fprintf(stderr, NAME ": rl_run: %s\n", strerror(-r));
        return 1;
    }
    rl_release(s.listener);
    rl_release(s.sigterm);
    rl_release(s.sigint);
    printf("served %lu requests on %lu connections; %lu closed idle; %lu backpressure stalls; "
           "%lu left open\n", s.requests, s.accepted, s.idle_closes, s.stalls, s.open);
    return s.open == 0 ? 0 : 1;
}
