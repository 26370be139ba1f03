/* server_glib.c - the HTTP benchmark's server on GLib's main loop (benchmarks/http/bench), written
 * the way GLib's documentation says a source with an fd and a timeout is written: a GMainLoop on
 * the default context, and per connection one custom GSource (g_source_new) that watches the socket
 * with g_source_add_unix_fd and keeps the idle timeout as the source's ready time
 * (g_source_set_ready_time: "the usual way" for a source to have a timeout, cheaper than a separate
 * timeout source, which would have to be destroyed and made again at each re-arm). Each batch of
 * requests read re-arms it: g_source_set_ready_time(source, g_source_get_time(source) + idle), from
 * the context's cached time of the iteration. A stall switches the fd's condition from G_IO_IN to
 * G_IO_OUT (g_source_modify_unix_fd). The source's dispatch asks g_source_query_unix_fd what is
 * ready, and closes the connection when the ready time has passed instead. The listener is a
 * g_unix_fd_add callback; SIGTERM and SIGINT are g_unix_signal_add callbacks (GLib delivers them
 * through its worker thread, which wakes the main context). The connection's reading, answering
 * and writing are server.h's, the same as floor.c's.
 *
 *   http-glib [--idle SECONDS] [PORT] | http-glib --version
 *
 * GLib is loaded with dlopen (libglib-2.0.so.0, Debian package libglib2.0-0): the GSource header
 * is 96 bytes on LP64 (GLib 2.x; a custom source's fields follow it), GSourceFuncs is six
 * pointers (benchmarks/peers/glib_types.h), and the GIOCondition bits are poll's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define NAME "http-glib"
#define SERVER_READINESS

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../examples/c/http_exchange.h"
#include "../peers/glib_types.h"   /* gboolean, GSourceFunc, GSourceFuncs: as benchmarks/peers */

typedef gboolean (*GUnixFDSourceFunc)(int fd, unsigned condition, void *data);

enum { G_IO_IN = 1, G_IO_OUT = 4, G_SOURCE_REMOVE = 0, G_SOURCE_CONTINUE = 1 };
enum { GSOURCE_SIZE = 96 };

struct conn {
    char gsource[GSOURCE_SIZE];  /* the GSource this connection is (g_source_new's size covers all) */
    void *tag;                   /* g_source_add_unix_fd's */
    int fd;
    bool stalled;
    bool closed;
    struct conn *prev, *next;    /* the open connections */
    struct http_io io;
};

#include "server.h"

static struct {
    void *(*main_loop_new)(void *ctx, gboolean running);
    void (*main_loop_run)(void *loop);
    void (*main_loop_quit)(void *loop);
    void *(*source_new)(GSourceFuncs *funcs, unsigned size);
    unsigned (*attach)(void *source, void *ctx);
    void (*destroy)(void *source);
    void (*unref)(void *source);
    gboolean (*remove)(unsigned id);
    void *(*add_unix_fd)(void *source, int fd, unsigned events);
    void (*modify_unix_fd)(void *source, void *tag, unsigned events);
    unsigned (*query_unix_fd)(void *source, void *tag);
    void (*set_ready_time)(void *source, int64_t ready_time);
    int64_t (*get_ready_time)(void *source);
    int64_t (*get_time)(void *source);
    int64_t (*monotonic_time)(void);
    unsigned (*unix_fd_add)(int fd, unsigned condition, GUnixFDSourceFunc fn, void *data);
    unsigned (*unix_signal_add)(int signum, GSourceFunc fn, void *data);
    const unsigned *major, *minor, *micro;
} g;

static void load(void) {
    static const char *const names[] = { "libglib-2.0.so.0", "libglib-2.0.so", NULL };
    void *h = server_dlopen(names, "libglib2.0-0");
    SYM(h, g.main_loop_new, "g_main_loop_new");
    SYM(h, g.main_loop_run, "g_main_loop_run");
    SYM(h, g.main_loop_quit, "g_main_loop_quit");
    SYM(h, g.source_new, "g_source_new");
    SYM(h, g.attach, "g_source_attach");
    SYM(h, g.destroy, "g_source_destroy");
    SYM(h, g.unref, "g_source_unref");
    SYM(h, g.remove, "g_source_remove");
    SYM(h, g.add_unix_fd, "g_source_add_unix_fd");
    SYM(h, g.modify_unix_fd, "g_source_modify_unix_fd");
    SYM(h, g.query_unix_fd, "g_source_query_unix_fd");
    SYM(h, g.set_ready_time, "g_source_set_ready_time");
    SYM(h, g.get_ready_time, "g_source_get_ready_time");
    SYM(h, g.get_time, "g_source_get_time");
    SYM(h, g.monotonic_time, "g_get_monotonic_time");
    SYM(h, g.unix_fd_add, "g_unix_fd_add");
    SYM(h, g.unix_signal_add, "g_unix_signal_add");
    SYM(h, g.major, "glib_major_version");
    SYM(h, g.minor, "glib_minor_version");
    SYM(h, g.micro, "glib_micro_version");
}

static void *main_loop;
static int64_t idle_us;
static int lfd = -1;
static unsigned listener_id, sigterm_id, sigint_id;
static bool accept_paused;

static gboolean on_accept(int fd, unsigned condition, void *data);

/* ---- Connections ------------------------------------------------------------------------------ */

static void conn_close(struct conn *c) {
    if (c->closed) return;
    c->closed = true;
    server_conn_closed(c);
    g.destroy(c);               /* out of the context (and its fd out of the poll set) first */
    if (close(c->fd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    g.unref(c);                 /* ours; GLib holds its own through a dispatch; finalize frees */
    if (accept_paused) {
        listener_id = g.unix_fd_add(lfd, G_IO_IN, on_accept, NULL);
        accept_paused = false;
    }
}

static bool conn_watch_writable(struct conn *c, bool writable) {
    g.modify_unix_fd(c, c->tag, writable ? G_IO_OUT : G_IO_IN);
    return true;
}

static void conn_rearm(struct conn *c) { g.set_ready_time(c, g.get_time(c) + idle_us); }

static gboolean conn_dispatch(void *source, GSourceFunc cb, void *data) {
    (void)cb;
    (void)data;
    struct conn *c = source;
    if (g.query_unix_fd(c, c->tag)) conn_on_ready(c);   /* ready (or an error, which I/O reports) */
    if (!c->closed && g.get_ready_time(c) <= g.get_time(c)) {   /* not re-armed: idle */
        st.idle_closes++;
        conn_close(c);
    }
    return G_SOURCE_CONTINUE;   /* a closed connection's source is destroyed already */
}

static void conn_finalize(void *source) { free(((struct conn *)source)->io.out); }

/* No prepare or check: the source is ready when its fd is or its ready time has come. */
static GSourceFuncs conn_funcs = { NULL, NULL, conn_dispatch, conn_finalize, NULL, NULL };

static void conn_open(int fd) {
    http_nodelay(fd);
    struct conn *c = g.source_new(&conn_funcs, sizeof *c);   /* zeroed past the GSource header */
    c->fd = fd;
    c->tag = g.add_unix_fd(c, fd, G_IO_IN);
    /* Before attaching: a source of the context set from one of its dispatches wakes it up. */
    g.set_ready_time(c, g.monotonic_time() + idle_us);
    g.attach(c, NULL);
    server_conn_opened(c);
}

/* ---- The listener and shutdown ------------------------------------------------------------- */

static gboolean on_accept(int fd, unsigned condition, void *data) {
    (void)condition;
    (void)data;
    bool pause = false;
    int cfd;
    while ((cfd = http_accept(fd, &pause)) >= 0) conn_open(cfd);
    if (pause) {
        accept_paused = true;
        listener_id = 0;
        return G_SOURCE_REMOVE;   /* added again when a connection closes */
    }
    return G_SOURCE_CONTINUE;
}

static gboolean on_signal(void *data) {
    int signo = (int)(intptr_t)data;
    accept_paused = false;
    server_shutdown(signo);
    if (listener_id) g.remove(listener_id);
    if (close(lfd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    g.remove(signo == SIGTERM ? sigint_id : sigterm_id);
    g.main_loop_quit(main_loop);
    return G_SOURCE_REMOVE;
}

int main(int argc, char **argv) {
    struct server_args args = server_parse_args(argc, argv);
    load();
    if (args.version) {
        printf("GLib %u.%u.%u\n", *g.major, *g.minor, *g.micro);
        return 0;
    }
    double us = ceil(args.idle * 1e6);
    idle_us = (int64_t)us;
    main_loop = g.main_loop_new(NULL, 0);
    int port = 0;
    lfd = server_listen(args.port, &port);
    listener_id = g.unix_fd_add(lfd, G_IO_IN, on_accept, NULL);
    sigterm_id = g.unix_signal_add(SIGTERM, on_signal, (void *)(intptr_t)SIGTERM);
    sigint_id = g.unix_signal_add(SIGINT, on_signal, (void *)(intptr_t)SIGINT);
    server_listening(port);

    g.main_loop_run(main_loop);
    return server_exit_status();
}
