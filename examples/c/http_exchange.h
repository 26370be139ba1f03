/*
 * http_exchange.h - the HTTP/1.1 part of the example server (examples/c/10-http-server.c) and of
 * the benchmark's epoll floor (benchmarks/http/floor.c), so that the two servers answer alike and
 * differ only in their event loop: a connection's input and output buffers, the minimal request
 * parser (headers end at \r\n\r\n; GET gets a small 200 kept alive unless "Connection: close" or
 * HTTP/1.0; anything else gets a 405 and a close; pipelined requests are answered in order), and
 * the responses. Static functions: each server compiles its own copy.
 */
#ifndef HTTP_EXCHANGE_H
#define HTTP_EXCHANGE_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
 * large). Returns the number of requests answered, or -1 when out of memory (then close). */
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
        if (!http_out_append(io, resp, rlen)) return -1;
        off += len;
        n++;
    }
    if (off) {
        memmove(io->in, io->in + off, io->in_len - off);
        io->in_len -= off;
    }
    if (!io->close_after_flush && io->in_len == HTTP_IN_CAP) {
        io->close_after_flush = true;
        if (!http_out_append(io, HTTP_RESPONSE_431, sizeof HTTP_RESPONSE_431 - 1)) return -1;
    }
    return n;
}

#endif /* HTTP_EXCHANGE_H */
