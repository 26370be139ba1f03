/*
 * server.h - what the servers of the HTTP benchmark share (floor.c and server_*.c): the command
 * line, the listening, the counters printed at exit, the list of open connections and shutting
 * them down, loading the peer library (dlopen: nothing of a peer is linked, as in
 * benchmarks/peers), and, for the servers that are told of readiness (floor.c's epoll, libev,
 * GLib, libevent), the connection's reading, answering and writing, written as
 * examples/c/10-http-server.c writes it, so that these servers differ from it and from each other
 * only in their loop. The HTTP part itself and the sockets' setup are examples/c/http_exchange.h.
 *
 * Every server defines NAME (its program's name) and, before including this file,
 *   struct conn { ... struct conn *prev, *next; struct http_io io; ... };
 * and defines (before or after this file)
 *   static void conn_close(struct conn *c);                  closes it (may free it)
 * A peer server calls server_conn_opened(c) once it has made a connection (on the list `conns`,
 * counted), server_conn_closed(c) from conn_close, and server_shutdown(signo) on SIGTERM/SIGINT.
 * floor.c defines SERVER_FLOOR: no library (no --version), no bound on --idle (as the example),
 * and its own list of the connections, the idle list, and its own counting.
 *
 * A readiness server defines SERVER_READINESS, has `int fd; bool stalled;` in its struct conn and
 * defines (before or after this file):
 *   static bool conn_watch_writable(struct conn *c, bool w);  w: wait for writability only (a
 *       stall), else for readability; false when that failed and the connection was closed
 *   static void conn_rearm(struct conn *c);                  re-arms the idle timeout
 * and calls conn_on_ready(c) when the loop says the fd is ready for what it waits for.
 *
 * Usage of every peer server: NAME [--idle SECONDS] [PORT] (PORT 0 or none: ephemeral), or
 * NAME --version: prints the peer library's version and exits 0, or exits 77 (SERVER_MISSING)
 * when the library cannot be loaded; a server started without its library exits 77 too.
 * floor.c's: NAME [--idle SECONDS] [PORT].
 */
#ifndef HTTP_SERVER_H
#define HTTP_SERVER_H

#ifndef NAME
#error "define NAME (the program's name) before including server.h"
#endif

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../examples/c/http_exchange.h"

enum { SERVER_MISSING = 77 };

/* The counters every server prints at exit, in the words of floor.c and the example (the checks
 * in examples/c/10-http-server.sh read the stalls from that line). */
static struct {
    unsigned long accepted, requests, idle_closes, stalls, open;
} st;

/* The end of main(): prints the counters; returns the exit status, 0 when every connection was
 * closed. */
static inline int server_exit_status(void) {
    printf("served %lu requests on %lu connections; %lu closed idle; %lu backpressure stalls; "
           "%lu left open\n", st.requests, st.accepted, st.idle_closes,
           st.stalls, st.open);
    return st.open == 0 ? 0 : 1;
}

/* ---- The command line ------------------------------------------------------------------------ */

struct server_args {
    double idle;     /* seconds */
    int port;
    bool version;    /* --version */
};

static inline void server_usage(void) {
#ifdef SERVER_FLOOR
    fprintf(stderr, "usage: " NAME " [--idle SECONDS] [PORT]\n");
#else
    fprintf(stderr, "usage: " NAME " [--idle SECONDS] [PORT] | " NAME " --version\n");
#endif
    exit(2);
}

static inline struct server_args server_parse_args(int argc, char **argv) {
    struct server_args a = { .idle = 5, .port = 0 };
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--idle") == 0 && i + 1 < argc) {
            a.idle = strtod(argv[++i], &end);
            if (*end || !(a.idle > 0) || !isfinite(a.idle)) server_usage();
#ifndef SERVER_FLOOR
            if (a.idle > 1e6) server_usage();   /* floor.c, as the example, takes any */
        } else if (strcmp(argv[i], "--version") == 0) {
            a.version = true;
#endif
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

/* ---- Listening and connections -------------------------------------------------------------- */

/* http_listen (http_exchange.h) on 127.0.0.1:port; on failure says why and exits 1. Sets *bound
 * to the port listened on. */
static inline int server_listen(int port, int *bound) {
    int fd = http_listen(port, bound);
    if (fd < 0) {
        fprintf(stderr, NAME ": listening on 127.0.0.1:%d: %s\n", port, strerror(-fd));
        exit(1);
    }
    return fd;
}

/* What the bench waits for before it starts the client. */
static inline void server_listening(int port) {
    printf("listening on %d\n", port);
    fflush(stdout);
}

static void conn_close(struct conn *c);

#ifndef SERVER_FLOOR
static struct conn *conns;   /* the open connections, the newest first */

/* A connection made: on the list, counted. */
static inline void server_conn_opened(struct conn *c) {
    c->next = conns;
    if (conns) conns->prev = c;
    conns = c;
    st.open++;
    st.accepted++;
}

/* A connection closing (called once): off the list. */
static inline void server_conn_closed(struct conn *c) {
    if (c->prev) c->prev->next = c->next; else conns = c->next;
    if (c->next) c->next->prev = c->prev;
    st.open--;
}

/* SIGTERM or SIGINT: says so, and closes the open connections (with conn_close); what else the
 * loop watches is the caller's. */
static inline void server_shutdown(int signo) {
    printf("%s: shutting down\n", signo == SIGTERM ? "SIGTERM" : "SIGINT");
    while (conns) conn_close(conns);
}
#endif

/* ---- A readiness server's connection (floor, libev, GLib, libevent) ------------------------ */

#ifdef SERVER_READINESS
static bool conn_watch_writable(struct conn *c, bool writable);
static void conn_rearm(struct conn *c);

/* A new connection on fd (TCP_NODELAY set): zeroed but for its fd, or NULL when out of memory
 * (the fd closed). */
static inline struct conn *server_conn_new(int fd) {
    http_nodelay(fd);
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, NAME ": out of memory for a connection\n");
        close(fd);
        return NULL;
    }
    c->fd = fd;
    return c;
}

/* A read or send error: reported unless the peer just went away (http_exchange.h), and close. */
static inline void conn_fail(struct conn *c, const char *what, int err) {
    http_report(what, c->fd, err);
    conn_close(c);
}

/* Answers the requests buffered and re-arms the idle timeout if it answered any. Returns false
 * when the connection was closed (out of memory). */
static inline bool conn_answer(struct conn *c) {
    long n = http_answer(&c->io);
    if (n < 0) {
        conn_close(c);
        return false;
    }
    if (n) {
        st.requests += (unsigned long)n;
        conn_rearm(c);
    }
    return true;
}

/* Writes what is pending. When the socket is full, stalls: waits for writability only. Returns
 * true when everything was written and the connection is open. */
static inline bool conn_flush(struct conn *c) {
    bool progressed;
    int err = http_send(c->fd, &c->io, &progressed);
    if (err == -EAGAIN) {
        if (c->stalled) {
            if (progressed) conn_rearm(c);   /* a slow reader that reads is not idle */
            return false;
        }
        if (!conn_watch_writable(c, true)) return false;
        c->stalled = true;
        st.stalls++;
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
    ssize_t n = http_read(c->fd, &c->io);
    if (n > 0) conn_pump(c);
    else if (n == 0) conn_close(c);   /* the peer closed */
    else if (n != -EAGAIN) conn_fail(c, "read", (int)-n);
}
#endif /* SERVER_READINESS */

#endif /* HTTP_SERVER_H */
