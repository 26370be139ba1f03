/*
 * http_exchange.h - the HTTP/1.1 part of the example server (examples/c/10-http-server.c) and of
 * the benchmark's servers (benchmarks/http: the epoll floor and the peer libraries' servers), so
 * that they answer alike and differ only in their event loop: a connection's input and output
 * buffers, the minimal request parser (headers end at \r\n\r\n; GET gets a small 200 kept alive
 * unless "Connection: close" or HTTP/1.0; anything else gets a 405 and a close; pipelined requests
 * are answered in order) and the responses; and the socket calls they make alike: the listening
 * socket, accept4 and its errors, TCP_NODELAY, a read into the input, writing the output until
 * the socket is full, and which errors are worth reporting. What a server does when the socket is
 * full or the peer goes away is its own (its loop's calls).
 * Static functions: each server compiles its own copy. The includer defines NAME (its program's
 * name, which starts the lines printed on stderr) first.
 */
#ifndef HTTP_EXCHANGE_H
#define HTTP_EXCHANGE_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef NAME
#error "define NAME (the program's name) before including http_exchange.h"
#endif

enum { HTTP_IN_CAP = 8192, HTTP_OUT_HIGH = 64 * 1024 };

static const char HTTP_RESPONSE_KEEP[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
    "Connection: keep-alive\r\n\r\nHello, world\n";
static const char HTTP_RESPONSE_CLOSE[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
    "Connection: close\r\n\r\nHello, world\n";
static const char HTTP_RESPONSE_405[] =
    "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Length: 0\r\n"
    "Connection: close\r\n\r\n";
static const char HTTP_RESPONSE_431[] =
    "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
    "Connection: close\r\n\r\n";

/* A connection's bytes: what was read and not yet answered, and what is still to be written
 * (out[out_off, out_len)). close_after_flush: the last response said "Connection: close". */
struct http_io {
    bool close_after_flush;
    size_t in_len;
    char *out;
    size_t out_len, out_off, out_cap;
    char in[HTTP_IN_CAP];
};

/* Appends to the output, growing it; false when out of memory. */
static inline bool http_out_append(struct http_io *io, const char *data, size_t len) {
    if (io->out_off == io->out_len) io->out_off = io->out_len = 0;
    if (io->out_len + len > io->out_cap) {
        size_t cap = io->out_cap ? io->out_cap : 1024;
        while (cap < io->out_len + len) cap *= 2;
        char *p = realloc(io->out, cap);
        if (!p) return false;
        io->out = p;
        io->out_cap = cap;
    }
    memcpy(io->out + io->out_len, data, len);
    io->out_len += len;
    return true;
}

/* Whether the request whose headers are h[0, len) asks to close after its response. */
static inline bool http_wants_close(const char *h, size_t len) {
    const char *eol = memchr(h, '\n', len);
    bool http10 = eol && eol - h >= 9 && memcmp(eol - 9, "HTTP/1.0\r", 9) == 0;
    bool close_ = false, keep = false;
    for (const char *p = eol ? eol + 1 : h + len; p < h + len;) {
        const char *e = memchr(p, '\n', (size_t)(h + len - p));
        if (!e) break;
        size_t n = (size_t)(e - p);
        if (n > 11 && strncasecmp(p, "connection:", 11) == 0) {
            char v[64];
            size_t vn = n - 11 < sizeof v - 1 ? n - 11 : sizeof v - 1;
            memcpy(v, p + 11, vn);
            v[vn] = 0;
            if (strcasestr(v, "close")) close_ = true;
            if (strcasestr(v, "keep-alive")) keep = true;
        }
        p = e + 1;
    }
    return close_ || (http10 && !keep);
}

/* Answers the complete requests in the input, in order, while less than HTTP_OUT_HIGH bytes of
 * output are pending; a full input with no complete request in it gets a 431 (headers too
 * large). Returns the number of requests answered, or -1 when out of memory (said on stderr;
 * then close). */
static inline long http_answer(struct http_io *io) {
    size_t off = 0;
    long n = 0;
    while (!io->close_after_flush && io->out_len - io->out_off < HTTP_OUT_HIGH) {
        const char *req = io->in + off;
        const char *end = memmem(req, io->in_len - off, "\r\n\r\n", 4);
        if (!end) break;
        size_t len = (size_t)(end - req) + 4;
        const char *resp;
        size_t rlen;
        if (memcmp(req, "GET ", 4) == 0) {
            if (http_wants_close(req, len)) {
                io->close_after_flush = true;
                resp = HTTP_RESPONSE_CLOSE, rlen = sizeof HTTP_RESPONSE_CLOSE - 1;
            } else {
                resp = HTTP_RESPONSE_KEEP, rlen = sizeof HTTP_RESPONSE_KEEP - 1;
            }
        } else {
            io->close_after_flush = true;
            resp = HTTP_RESPONSE_405, rlen = sizeof HTTP_RESPONSE_405 - 1;
        }
        if (!http_out_append(io, resp, rlen)) goto out_of_memory;
        off += len;
        n++;
    }
    if (off) {
        memmove(io->in, io->in + off, io->in_len - off);
        io->in_len -= off;
    }
    if (!io->close_after_flush && io->in_len == HTTP_IN_CAP) {
        io->close_after_flush = true;
        if (!http_out_append(io, HTTP_RESPONSE_431, sizeof HTTP_RESPONSE_431 - 1))
            goto out_of_memory;
    }
    return n;
out_of_memory:
    fprintf(stderr, NAME ": out of memory for a response\n");
    return -1;
}

/* ---- The sockets ----------------------------------------------------------------------------- */

/* 127.0.0.1:port, nonblocking, close-on-exec, SO_REUSEADDR, listening; sets *bound to the port
 * (the one the kernel chose for port 0). Returns the fd or -errno. */
static inline int http_listen(int port, int *bound) {
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

/* accept4 on a nonblocking listener: a nonblocking, close-on-exec connection's fd, or -1 when
 * there is no more to accept now (EAGAIN, or an error, which it reports); *pause is set when out
 * of fds or memory: a level-triggered listener would be ready again at once, so the caller stops
 * watching it until a connection closes. */
static inline int http_accept(int lfd, bool *pause) {
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

/* One read into the free part of the input (one per readiness: level-triggered, more data makes
 * the loop say so again). Returns the bytes read (> 0), 0 when the peer closed, -EAGAIN when
 * there is nothing to read now, or -errno. */
static inline ssize_t http_read(int fd, struct http_io *io) {
    for (;;) {
        ssize_t n = read(fd, io->in + io->in_len, HTTP_IN_CAP - io->in_len);
        if (n >= 0) {
            io->in_len += (size_t)n;
            return n;
        }
        if (errno == EINTR) continue;
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

/* Writes the pending output until all of it is written (then empties it and returns 0) or the
 * socket is full (-EAGAIN; *progressed set when some of it was written), or -errno. */
static inline int http_send(int fd, struct http_io *io, bool *progressed) {
    *progressed = false;
    while (io->out_off < io->out_len) {
        ssize_t n = send(fd, io->out + io->out_off, io->out_len - io->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            io->out_off += (size_t)n;
            *progressed = true;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -EAGAIN;
        return n < 0 ? -errno : -EPIPE;
    }
    io->out_off = io->out_len = 0;
    return 0;
}

/* A read or send error on fd: a peer that resets or goes away is a normal close; anything else
 * is worth a line. */
static inline void http_report(const char *what, int fd, int err) {
    if (err != ECONNRESET && err != EPIPE && err != ETIMEDOUT && err != ENOTCONN)
        fprintf(stderr, NAME ": %s on fd %d: %s\n", what, fd, strerror(err));
}

/* Responses go out as soon as they are written (one small response per request). */
static inline void http_nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        fprintf(stderr, NAME ": TCP_NODELAY: %s\n", strerror(errno));
}

#endif /* HTTP_EXCHANGE_H */
