/* server_libev.c - the HTTP benchmark's server on libev (benchmarks/http/bench), written the way
 * libev's users write it: ev_default_loop, an ev_io per connection (EV_READ; a stall stops it,
 * switches its events to EV_WRITE and starts it again, the way ev.h asks an active watcher's events
 * to be changed), and an ev_timer per connection with `repeat` = the idle timeout, re-armed with
 * ev_timer_again at each batch of requests read: the idle-timeout idiom of libev's documentation
 * ("be smart about timeouts", its second method; a heap update at each re-arm, from the loop's
 * cached ev_now, no clock reading). SIGTERM and SIGINT are ev_signal watchers. The connection's
 * reading, answering and writing are server.h's, the same as floor.c's.
 *
 *   http-libev [--idle SECONDS] [PORT] | http-libev --version
 *
 * libev is loaded with dlopen (libev.so.4, Debian package libev4): the watcher layouts are declared
 * here as benchmarks/peers/libev.c declares them (EV_MULTIPLICITY=1, EV_COMMON = void *data, as
 * Debian's libev4 is built; checked against ev.h 4.33):
 *   ev_watcher:  int active, pending, priority; void *data; void (*cb)(loop, w, revents)
 *   ev_io:       watcher; struct ev_watcher_list *next; int fd, events
 *   ev_signal:   watcher; struct ev_watcher_list *next; int signum
 *   ev_timer:    watcher; ev_tstamp at, repeat
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define NAME "http-libev"
#define SERVER_READINESS

#include <signal.h>
#include <stdbool.h>

#include "../../examples/c/http_exchange.h"

#define EV_WATCHER_FIELDS int active, pending, priority; void *data; void (*cb)(void *loop, void *w, int revents);
typedef struct { EV_WATCHER_FIELDS void *next; int fd, events; } ev_io_t;
typedef struct { EV_WATCHER_FIELDS void *next; int signum; } ev_signal_t;
typedef struct { EV_WATCHER_FIELDS double at, repeat; } ev_timer_t;

_Static_assert(sizeof(ev_io_t) == 48, "ev_io layout");
_Static_assert(sizeof(ev_signal_t) == 48, "ev_signal layout");
_Static_assert(sizeof(ev_timer_t) == 48, "ev_timer layout");

enum { EV_READ = 1, EV_WRITE = 2, EV__IOFDSET = 0x80, EVBREAK_ALL = 2 };

struct conn {
    ev_io_t w;                  /* first: the watcher's address is the connection's */
    ev_timer_t timer;
    int fd;
    bool stalled;
    struct conn *prev, *next;   /* the open connections */
    struct http_io io;
};

#include "server.h"

static struct {
    void *(*default_loop)(unsigned flags);
    int (*run)(void *loop, int flags);
    void (*brk)(void *loop, int how);
    void (*io_start)(void *loop, ev_io_t *w);
    void (*io_stop)(void *loop, ev_io_t *w);
    void (*timer_again)(void *loop, ev_timer_t *w);
    void (*timer_stop)(void *loop, ev_timer_t *w);
    void (*signal_start)(void *loop, ev_signal_t *w);
    void (*signal_stop)(void *loop, ev_signal_t *w);
    int (*major)(void), (*minor)(void);
} ev;

static void *loop;
static double idle;
static int lfd = -1;
static ev_io_t listener;
static ev_signal_t sigterm_w, sigint_w;
static bool accept_paused;

static void load(void) {
    static const char *const names[] = { "libev.so.4", "libev.so", NULL };
    void *h = server_dlopen(names, "libev4");
    SYM(h, ev.default_loop, "ev_default_loop");
    SYM(h, ev.run, "ev_run");
    SYM(h, ev.brk, "ev_break");
    SYM(h, ev.io_start, "ev_io_start");
    SYM(h, ev.io_stop, "ev_io_stop");
    SYM(h, ev.timer_again, "ev_timer_again");
    SYM(h, ev.timer_stop, "ev_timer_stop");
    SYM(h, ev.signal_start, "ev_signal_start");
    SYM(h, ev.signal_stop, "ev_signal_stop");
    SYM(h, ev.major, "ev_version_major");
    SYM(h, ev.minor, "ev_version_minor");
}

/* ev_init + ev_io_set / ev_signal_set / ev_timer_set, which are macros in ev.h. */
static void io_init(ev_io_t *w, void (*cb)(void *, void *, int), void *data, int fd, int events) {
    *w = (ev_io_t){ .data = data, .cb = cb, .fd = fd, .events = events | EV__IOFDSET };
}

/* ---- Connections ------------------------------------------------------------------------------ */

static void conn_close(struct conn *c) {
    ev.io_stop(loop, &c->w);      /* stopped watchers may be freed, even from their callback */
    ev.timer_stop(loop, &c->timer);
    if (close(c->fd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    server_conn_closed(c);
    free(c->io.out);
    free(c);
    if (accept_paused) {
        ev.io_start(loop, &listener);
        accept_paused = false;
    }
}

/* An active ev_io's events cannot change: stop it, change them (ev_io_modify), start it. */
static bool conn_watch_writable(struct conn *c, bool writable) {
    ev.io_stop(loop, &c->w);
    c->w.events = (c->w.events & EV__IOFDSET) | (writable ? EV_WRITE : EV_READ);
    ev.io_start(loop, &c->w);
    return true;
}

static void conn_rearm(struct conn *c) { ev.timer_again(loop, &c->timer); }

static void on_conn_io(void *l, void *w, int revents) {
    (void)l;
    (void)revents;
    conn_on_ready(((ev_io_t *)w)->data);
}

static void on_idle(void *l, void *w, int revents) {
    (void)l;
    (void)revents;
    st.idle_closes++;
    conn_close(((ev_timer_t *)w)->data);
}

static void conn_open(int fd) {
    struct conn *c = server_conn_new(fd);
    if (!c) return;
    io_init(&c->w, on_conn_io, c, fd, EV_READ);
    c->timer = (ev_timer_t){ .data = c, .cb = on_idle, .at = 0, .repeat = idle };
    ev.io_start(loop, &c->w);
    ev.timer_again(loop, &c->timer);   /* not active, repeating: starts it, due in `repeat` */
    server_conn_opened(c);
}

/* ---- The listener and shutdown ------------------------------------------------------------- */

static void on_accept(void *l, void *w, int revents) {
    (void)l;
    (void)w;
    (void)revents;
    bool pause = false;
    int fd;
    while ((fd = http_accept(lfd, &pause)) >= 0) conn_open(fd);
    if (pause) {
        ev.io_stop(loop, &listener);
        accept_paused = true;
    }
}

static void on_signal(void *l, void *w, int revents) {
    (void)l;
    (void)revents;
    accept_paused = false;
    server_shutdown(((ev_signal_t *)w)->signum);
    ev.io_stop(loop, &listener);
    if (close(lfd) != 0) fprintf(stderr, NAME ": close: %s\n", strerror(errno));
    ev.signal_stop(loop, &sigterm_w);
    ev.signal_stop(loop, &sigint_w);
    ev.brk(loop, EVBREAK_ALL);
}

int main(int argc, char **argv) {
    struct server_args args = server_parse_args(argc, argv);
    load();
    if (args.version) {
        printf("libev %d.%d\n", ev.major(), ev.minor());
        return 0;
    }
    idle = args.idle;
    loop = ev.default_loop(0);
    if (!loop) {
        fprintf(stderr, NAME ": ev_default_loop failed\n");
        return 1;
    }
    int port = 0;
    lfd = server_listen(args.port, &port);
    io_init(&listener, on_accept, NULL, lfd, EV_READ);
    ev.io_start(loop, &listener);
    sigterm_w = (ev_signal_t){ .cb = on_signal, .signum = SIGTERM };
    sigint_w = (ev_signal_t){ .cb = on_signal, .signum = SIGINT };
    ev.signal_start(loop, &sigterm_w);
    ev.signal_start(loop, &sigint_w);
    server_listening(port);

    ev.run(loop, 0);
    return server_exit_status();
}
