/*
 * server.h - what the peer servers of the HTTP benchmark share (benchmarks/http/server_*.c): the
 * command line, the listening socket, the counters printed at exit, loading the peer library
 * (dlopen: nothing of a peer is linked, as in benchmarks/peers), and, for the servers that are
 * told of readiness (libev, GLib, libevent), the connection's reading, answering and writing,
 * written as floor.c and examples/c/10-http-server.c write it, so that these servers differ from
 * those two only in their loop. The HTTP part itself is examples/c/http_exchange.h.
 *
 * A readiness server defines, before including this file with SERVER_READINESS defined:
 *   struct conn { ... int fd; bool stalled; struct http_io io; ... };
 *   static void conn_close(struct conn *c);                  closes it (idempotent, may free it)
 *   static bool conn_watch_writable(struct conn *c, bool w);  w: wait for writability only (a
 *       stall), else for readability; false when that failed and the connection was closed
 *   static void conn_rearm(struct conn *c);                  re-arms the idle timeout
 * and calls conn_on_ready(c) when the loop says the fd is ready for what it waits for.
 *
 * Usage of every server: NAME [--idle SECONDS] [PORT] (PORT 0 or none: ephemeral), or
 * NAME --version: prints the peer library's version and exits 0, or exits 77 (SERVER_MISSING)
 * when the library cannot be loaded; a server started without its library exits 77 too.
 */
#ifndef HTTP_SERVER_H
#define HTTP_SERVER_H

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../examples/c/http_exchange.h"

#ifndef NAME
#error "define NAME (the program's name) before including server.h"
#endif

enum { SERVER_MISSING = 77 };

/* The counters every server prints at exit, in the words of floor.c and the example (the checks
 * in examples/c/10-http-server.sh read the stalls from that line). */
static struct {
    unsigned long accepted, requests, idle_closes, stalls, open;
} st;

static inline void server_print_counters(void) {
    printf("served %lu requests on %lu connections; %lu closed idle; %lu backpressure stalls; "
           "%lu left open\n", st.requests, st.accepted, st.idle_closes,
           st.stalls, st.open);
}

/* ---- The command line ------------------------------------------------------------------------ */

struct server_args {
    double idle;     /* seconds */
    int port;
    bool version;    /* --version */
};

static inline void server_usage(void) {
    fprintf(stderr, "usage: " NAME " [--idle SECONDS] [PORT] | " NAME " --version\n");
    exit(2);
}

static inline struct server_args server_parse_args(int argc, char **argv) {
    struct server_args a = { .idle = 5, .port = 0 };
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--idle") == 0 && i + 1 < argc) {
            a.idle = strtod(argv[++i], &end);
            if (*end || !(a.idle > 0) || !isfinite(a.idle) || a.idle > 1e6) server_usage();
        } else if (strcmp(argv[i], "--version") == 0) {
            a.version = true;
        } else {
            long p = strtol(argv[i], &end, 10);
            if (*end || p < 0 || p > 65535) server_usage();
            a.port = (int)p;
        }
    }
    return a;
}

/* ---- Loading the peer ------------------------------------------------------------------------ */

/* Opens the first of names[] that loads; on failure prints why and exits SERVER_MISSING. */
static inline void *server_dlopen(const char *const *names, const char *package) {
    const char *err = "no candidate";
    for (const char *const *n = names; *n; n++) {
        void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        err = dlerror();
    }
    fprintf(stderr, NAME ": %s not available (%s): install the Debian package %s\n", names[0], err,
            package);
    exit(SERVER_MISSING);
}

/* Looks a symbol up; a missing one is a library too old or not the one expected: SERVER_MISSING. */
static inline void *server_dlsym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, NAME ": symbol %s missing from the library\n", name);
        exit(SERVER_MISSING);
    }
    return p;
}

/* SYM(lib, table.field, "name"): assigns a function pointer from dlsym without a cast warning. */
#define SYM(lib, field, name) (*(void **)&(field) = server_dlsym((lib), (name)))

/* ---- The listening socket -------------------------------------------------------------------- */

/* 127.0.0.1:port, nonblocking, close-on-exec, SO_REUSEADDR, listening; sets *bound to the port.
 * Returns the fd or -errno. */
static inline int server_listen(int port, int *bound) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

static inline void server_listening(int port) {
    printf("listening on %d\n", port);
    fflush(stdout);
}

static inline void server_nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        fprintf(stderr, NAME ": TCP_NODELAY: %s\n", strerror(errno));
}

/* accept4 on a nonblocking listener: the fd, or -1 when there is no more to accept now (EAGAIN,
 * or an error that was reported); *pause is set when out of fds or memory (the caller stops
 * watching the listener until a connection closes). */
static inline int server_accept(int lfd, bool *pause) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) return fd;
        switch (errno) {
        case EAGAIN:
#if EWOULDBLOCK != EAGAIN
        case EWOULDBLOCK:
#endif
            return -1;
        case EINTR: case ECONNABORTED: case EPROTO:
            continue;
        case EMFILE: case ENFILE: case ENOBUFS: case ENOMEM:
            fprintf(stderr, NAME ": accept4: %s (pausing accept)\n", strerror(errno));
            *pause = true;
            return -1;
        default:
            fprintf(stderr, NAME ": accept4: %s\n", strerror(errno));
            return -1;
        }
    }
}

/* ---- A readiness server's connection (libev, GLib, libevent) ------------------------------- */

#ifdef SERVER_READINESS
static void conn_close(struct conn *c);
static bool conn_watch_writable(struct conn *c, bool writable);
static void conn_rearm(struct conn *c);

/* A peer that resets or goes away is a normal close; anything else is worth a line. */
static inline void conn_fail(struct conn *c, const char *what, int err) {
    if (err != ECONNRESET && err != EPIPE && err != ETIMEDOUT && err != ENOTCONN)
        fprintf(stderr, NAME ": %s on fd %d: %s\n", what, c->fd, strerror(err));
    conn_close(c);
}

/* Answers the requests buffered and re-arms the idle timeout if it answered any. Returns false
 * when the connection was closed (out of memory). */
static inline bool conn_answer(struct conn *c) {
    long n = http_answer(&c->io);
    if (n < 0) {
        fprintf(stderr, NAME ": out of memory for a response\n");
        conn_close(c);
        return false;
    }
    if (n) {
        st.requests += (unsigned long)n;
        conn_rearm(c);
    }
    return true;
}

/* Writes what is pending. On EAGAIN, stalls: waits for writability only. Returns true when
 * everything was written and the connection is open. */
static inline bool conn_flush(struct conn *c) {
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
                if (progressed) conn_rearm(c);   /* a slow reader that reads is not idle */
                return false;
            }
            if (!conn_watch_writable(c, true)) return false;
            c->stalled = true;
            st.stalls++;
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
        if (!conn_watch_writable(c, false)) return false;
        c->stalled = false;
    }
    return true;
}

/* Answers and writes until the buffered requests are done or the output stalls. */
static inline void conn_pump(struct conn *c) {
    for (;;) {
        if (!conn_answer(c)) return;
        if (c->io.out_len == c->io.out_off) return;   /* nothing to write: wait for input */
        if (!conn_flush(c)) return;                   /* closed or stalled */
    }
}

/* The fd is ready for what the connection waits for: writable when stalled, else readable
 * (level-triggered: one read per readiness; more data makes the loop call again). */
static inline void conn_on_ready(struct conn *c) {
    if (c->stalled) {
        if (conn_flush(c)) conn_pump(c);
        return;
    }
    for (;;) {
        ssize_t n = read(c->fd, c->io.in + c->io.in_len, HTTP_IN_CAP - c->io.in_len);
        if (n > 0) {
            c->io.in_len += (size_t)n;
            conn_pump(c);
            return;
        }
        if (n == 0) {   /* the peer closed */
            conn_close(c);
            return;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        conn_fail(c, "read", errno);
        return;
    }
}
#endif /* SERVER_READINESS */

#endif /* HTTP_SERVER_H */
