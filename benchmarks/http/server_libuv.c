/* server_libuv.c - the HTTP benchmark's server on libuv (benchmarks/http/bench), written the way
 * libuv's users write it: uv_default_loop, a uv_tcp_t listener (uv_tcp_bind, uv_listen; each
 * connection is uv_accept'ed in the connection callback), and per connection a uv_tcp_t read with
 * uv_read_start (the alloc callback hands out the free part of the connection's input buffer) and
 * a uv_timer_t started with timeout = repeat = the idle timeout and re-armed with uv_timer_again at
 * each batch of requests read (a heap update, from the loop's cached time, no clock reading).
 * Responses are written with uv_try_write; what it cannot write now is handed to uv_write, and
 * reading stops (uv_read_stop) until that write's callback, which answers what was buffered
 * meanwhile and reads again: libuv's way of the others' "stop reading while output is pending".
 * SIGTERM and SIGINT are uv_signal_t handles. Requests are parsed and answered by
 * examples/c/http_exchange.h, as in every other server of the benchmark.
 *
 *   http-libuv [--idle SECONDS] [PORT] | http-libuv --version
 *
 * libuv is loaded with dlopen (libuv.so.1, Debian package libuv1): handles and requests are
 * opaque, sized with uv_handle_size/uv_req_size, and each starts with `void *data`; the handle and
 * request type numbers used are checked against uv_handle_type_name/uv_req_type_name at start.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define NAME "http-libuv"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../examples/c/http_exchange.h"

/* A connection and, in the same allocation after it, its tcp handle, its timer and its write
 * request (sizes known at run time). Freed when both handles' close callbacks have run. */
struct conn {
    void *tcp, *timer, *wreq;
    int closing;                /* handles whose close callback is still to come */
    bool closed;
    bool stalled;               /* a uv_write in flight: not reading */
    struct conn *prev, *next;   /* the open connections */
    struct http_io io;
};

#include "server.h"

enum { UV_TCP = 12, UV_TIMER = 13, UV_SIGNAL = 16 };     /* uv_handle_type */
enum { UV_WRITE = 3 };                                   /* uv_req_type */
enum { UV_RUN_DEFAULT = 0 };
enum { UV_EOF = -4095, UV_EAGAIN = -EAGAIN, UV_ECANCELED = -ECANCELED };

typedef struct { char *base; size_t len; } uv_buf_t;    /* Unix layout */
typedef struct { void *data; } uv_head_t;               /* every handle and request starts so */

typedef void (*uv_close_cb)(void *handle);
typedef void (*uv_alloc_cb)(void *handle, size_t suggested, uv_buf_t *buf);
typedef void (*uv_read_cb)(void *stream, ssize_t nread, const uv_buf_t *buf);
typedef void (*uv_write_cb)(void *req, int status);
typedef void (*uv_connection_cb)(void *server, int status);
typedef void (*uv_timer_cb)(void *timer);
typedef void (*uv_signal_cb)(void *handle, int signum);

static struct {
    size_t (*handle_size)(int type);
    size_t (*req_size)(int type);
    const char *(*handle_type_name)(int type);
    const char *(*req_type_name)(int type);
    void *(*default_loop)(void);
    int (*run)(void *loop, int mode);
    void (*close)(void *handle, uv_close_cb cb);
    int (*tcp_init)(void *loop, void *tcp);
    int (*tcp_bind)(void *tcp, const struct sockaddr *addr, unsigned flags);
    int (*tcp_getsockname)(const void *tcp, struct sockaddr *addr, int *len);
    int (*tcp_nodelay)(void *tcp, int enable);
    int (*listen)(void *stream, int backlog, uv_connection_cb cb);
    int (*accept)(void *server, void *client);
    int (*read_start)(void *stream, uv_alloc_cb alloc, uv_read_cb cb);
    int (*read_stop)(void *stream);
    int (*try_write)(void *stream, const uv_buf_t bufs[], unsigned nbufs);
    int (*write)(void *req, void *stream, const uv_buf_t bufs[], unsigned nbufs, uv_write_cb cb);
    int (*timer_init)(void *loop, void *timer);
    int (*timer_start)(void *timer, uv_timer_cb cb, uint64_t timeout, uint64_t repeat);
    int (*timer_again)(void *timer);
    int (*signal_init)(void *loop, void *handle);
    int (*signal_start)(void *handle, uv_signal_cb cb, int signum);
    const char *(*strerror)(int err);
    const char *(*version_string)(void);
} uv;

static void load(void) {
    static const char *const names[] = { "libuv.so.1", "libuv.so", NULL };
    void *h = server_dlopen(names, "libuv1");
    SYM(h, uv.handle_size, "uv_handle_size");
    SYM(h, uv.req_size, "uv_req_size");
    SYM(h, uv.handle_type_name, "uv_handle_type_name");
    SYM(h, uv.req_type_name, "uv_req_type_name");
    SYM(h, uv.default_loop, "uv_default_loop");
    SYM(h, uv.run, "uv_run");
    SYM(h, uv.close, "uv_close");
    SYM(h, uv.tcp_init, "uv_tcp_init");
    SYM(h, uv.tcp_bind, "uv_tcp_bind");
    SYM(h, uv.tcp_getsockname, "uv_tcp_getsockname");
    SYM(h, uv.tcp_nodelay, "uv_tcp_nodelay");
    SYM(h, uv.listen, "uv_listen");
    SYM(h, uv.accept, "uv_accept");
    SYM(h, uv.read_start, "uv_read_start");
    SYM(h, uv.read_stop, "uv_read_stop");
    SYM(h, uv.try_write, "uv_try_write");
    SYM(h, uv.write, "uv_write");
    SYM(h, uv.timer_init, "uv_timer_init");
    SYM(h, uv.timer_start, "uv_timer_start");
    SYM(h, uv.timer_again, "uv_timer_again");
    SYM(h, uv.signal_init, "uv_signal_init");
    SYM(h, uv.signal_start, "uv_signal_start");
    SYM(h, uv.strerror, "uv_strerror");
    SYM(h, uv.version_string, "uv_version_string");
    const char *tcp = uv.handle_type_name(UV_TCP), *timer = uv.handle_type_name(UV_TIMER);
    const char *sig = uv.handle_type_name(UV_SIGNAL), *wr = uv.req_type_name(UV_WRITE);
    if (!tcp || strcmp(tcp, "tcp") || !timer || strcmp(timer, "timer") || !sig ||
        strcmp(sig, "signal") || !wr || strcmp(wr, "write")) {
        fprintf(stderr, NAME ": this libuv numbers its handle or request types differently\n");
        exit(SERVER_MISSING);
    }
}

static void *loop;
static uint64_t idle_ms;
static size_t tcp_size, timer_size, wreq_size;
static void *listener, *sigterm_h, *sigint_h;   /* handles, allocated */

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* ---- Connections ------------------------------------------------------------------------------ */

static void on_conn_closed(void *handle) {
    struct conn *c = ((uv_head_t *)handle)->data;
    if (--c->closing == 0) {
        free(c->io.out);
        free(c);
    }
}

static void conn_close(struct conn *c) {
    if (c->closed) return;
    c->closed = true;
    server_conn_closed(c);
    c->closing = 2;
    uv.close(c->tcp, on_conn_closed);     /* cancels a pending write: its callback gets ECANCELED */
    uv.close(c->timer, on_conn_closed);
}

static void conn_fail(struct conn *c, const char *what, int err) {
    if (err != UV_EOF && err != -ECONNRESET && err != -EPIPE && err != -ETIMEDOUT && err != -ENOTCONN)
        fprintf(stderr, NAME ": %s: %s\n", what, uv.strerror(err));
    conn_close(c);
}

static void on_write(void *req, int status);
static void on_alloc(void *handle, size_t suggested, uv_buf_t *buf);
static void on_read(void *stream, ssize_t nread, const uv_buf_t *buf);

/* Writes what is pending: uv_try_write, then uv_write for the rest (reading stops until it is
 * written). Returns true when everything was written and the connection is open. */
static bool conn_flush(struct conn *c) {
    uv_buf_t buf = { c->io.out + c->io.out_off, c->io.out_len - c->io.out_off };
    int n = uv.try_write(c->tcp, &buf, 1);
    if (n < 0 && n != UV_EAGAIN) {
        conn_fail(c, "uv_try_write", n);
        return false;
    }
    if (n > 0) c->io.out_off += (size_t)n;
    if (c->io.out_off == c->io.out_len) {
        c->io.out_off = c->io.out_len = 0;
        if (c->io.close_after_flush) {
            conn_close(c);
            return false;
        }
        return true;
    }
    buf = (uv_buf_t){ c->io.out + c->io.out_off, c->io.out_len - c->io.out_off };
    int err = uv.write(c->wreq, c->tcp, &buf, 1, on_write);
    if (!err) err = uv.read_stop(c->tcp);
    if (err) {
        conn_fail(c, "uv_write", err);
        return false;
    }
    c->stalled = true;
    st.stalls++;
    return false;
}

/* Answers the buffered requests (re-arming the idle timer when there were any) and writes, until
 * they are done, the output stalls or the connection closes. */
static void conn_pump(struct conn *c) {
    for (;;) {
        long n = http_answer(&c->io);
        if (n < 0) {
            conn_close(c);
            return;
        }
        if (n) {
            st.requests += (unsigned long)n;
            uv.timer_again(c->timer);
        }
        if (c->io.out_len == c->io.out_off) return;
        if (!conn_flush(c)) return;
    }
}

static void on_write(void *req, int status) {
    struct conn *c = ((uv_head_t *)req)->data;
    if (status == UV_ECANCELED || c->closed) return;   /* closed meanwhile */
    if (status < 0) {
        conn_fail(c, "write", status);
        return;
    }
    c->stalled = false;
    c->io.out_off = c->io.out_len = 0;
    uv.timer_again(c->timer);                     /* a slow reader that reads is not idle */
    if (c->io.close_after_flush) {
        conn_close(c);
        return;
    }
    conn_pump(c);
    if (!c->closed && !c->stalled) {
        int err = uv.read_start(c->tcp, on_alloc, on_read);
        if (err) conn_fail(c, "uv_read_start", err);
    }
}

static void on_alloc(void *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    struct conn *c = ((uv_head_t *)handle)->data;
    buf->base = c->io.in + c->io.in_len;
    buf->len = HTTP_IN_CAP - c->io.in_len;
}

static void on_read(void *stream, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    struct conn *c = ((uv_head_t *)stream)->data;
    if (nread > 0) {
        c->io.in_len += (size_t)nread;
        conn_pump(c);
    } else if (nread < 0) {   /* UV_EOF: the peer closed; anything else: an error */
        conn_fail(c, "read", (int)nread);
    }
}

static void on_idle(void *timer) {
    struct conn *c = ((uv_head_t *)timer)->data;
    st.idle_closes++;
    conn_close(c);
}

static void on_connection(void *server, int status) {
    if (status < 0) {
        fprintf(stderr, NAME ": connection: %s\n", uv.strerror(status));
        return;
    }
    struct conn *c = calloc(1, round16(sizeof *c) + round16(tcp_size) + round16(timer_size) + wreq_size);
    if (!c) {
        fprintf(stderr, NAME ": out of memory for a connection\n");
        return;   /* libuv holds it, and stops accepting until uv_accept: no recovery here */
    }
    char *p = (char *)c + round16(sizeof *c);
    c->tcp = p;
    c->timer = p + round16(tcp_size);
    c->wreq = p + round16(tcp_size) + round16(timer_size);
    int err = uv.tcp_init(loop, c->tcp);
    if (err) {
        fprintf(stderr, NAME ": uv_tcp_init: %s\n", uv.strerror(err));
        free(c);
        return;
    }
    ((uv_head_t *)c->tcp)->data = c;
    ((uv_head_t *)c->wreq)->data = c;
    uv.timer_init(loop, c->timer);
    ((uv_head_t *)c->timer)->data = c;
    server_conn_opened(c);
    if ((err = uv.accept(server, c->tcp)) != 0) {
        fprintf(stderr, NAME ": uv_accept: %s\n", uv.strerror(err));
        st.accepted--;
        conn_close(c);
        return;
    }
    if ((err = uv.tcp_nodelay(c->tcp, 1)) != 0)
        fprintf(stderr, NAME ": uv_tcp_nodelay: %s\n", uv.strerror(err));
    if ((err = uv.timer_start(c->timer, on_idle, idle_ms, idle_ms)) != 0 ||
        (err = uv.read_start(c->tcp, on_alloc, on_read)) != 0) {
        fprintf(stderr, NAME ": starting a connection: %s\n", uv.strerror(err));
        conn_close(c);
    }
}

/* ---- Shutdown ------------------------------------------------------------------------------- */

static void free_handle(void *handle) { free(handle); }

static void on_signal(void *handle, int signum) {
    (void)handle;
    server_shutdown(signum);
    uv.close(listener, free_handle);
    uv.close(sigterm_h, free_handle);
    uv.close(sigint_h, free_handle);   /* no handle left: uv_run returns */
}

int main(int argc, char **argv) {
    struct server_args args = server_parse_args(argc, argv);
    load();
    if (args.version) {
        printf("libuv %s\n", uv.version_string());
        return 0;
    }
    double ms = ceil(args.idle * 1e3);
    idle_ms = ms < 1 ? 1 : (uint64_t)ms;
    tcp_size = uv.handle_size(UV_TCP);
    timer_size = uv.handle_size(UV_TIMER);
    wreq_size = uv.req_size(UV_WRITE);
    loop = uv.default_loop();
    listener = calloc(1, tcp_size);
    sigterm_h = calloc(1, uv.handle_size(UV_SIGNAL));
    sigint_h = calloc(1, uv.handle_size(UV_SIGNAL));
    if (!loop || !listener || !sigterm_h || !sigint_h) {
        fprintf(stderr, NAME ": setup failed\n");
        return 1;
    }
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)args.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int alen = sizeof a;
    int err = uv.tcp_init(loop, listener);
    if (!err) err = uv.tcp_bind(listener, (const struct sockaddr *)&a, 0);   /* sets SO_REUSEADDR */
    if (!err) err = uv.listen(listener, SOMAXCONN, on_connection);
    if (!err) err = uv.tcp_getsockname(listener, (struct sockaddr *)&a, &alen);
    if (err) {
        fprintf(stderr, NAME ": listening on 127.0.0.1:%d: %s\n", args.port, uv.strerror(err));
        return 1;
    }
    err = uv.signal_init(loop, sigterm_h);
    if (!err) err = uv.signal_start(sigterm_h, on_signal, SIGTERM);
    if (!err) err = uv.signal_init(loop, sigint_h);
    if (!err) err = uv.signal_start(sigint_h, on_signal, SIGINT);
    if (err) {
        fprintf(stderr, NAME ": signal handles: %s\n", uv.strerror(err));
        return 1;
    }
    server_listening(ntohs(a.sin_port));

    uv.run(loop, UV_RUN_DEFAULT);
    return server_exit_status();
}
