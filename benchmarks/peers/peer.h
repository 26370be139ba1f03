/* peer.h - the one small interface every event loop adapter implements.
 *
 * A peer is loaded at run time (dlopen); nothing of it is linked at build time. Every loop call
 * below is made on the thread that created the loop (loop_new), except async_send, which is the
 * cross-thread wakeup being measured, perform, and the timer calls of a peer whose
 * timers_any_thread is set. Callbacks are plain cb(arg). An operation a peer cannot do
 * is NULL, and the benchmarks that need it report "n/a" for that peer. */
#ifndef PEER_H
#define PEER_H

#include <stddef.h>
#include <string.h>

/* Copy src into dst[n], truncated and terminated. */
static inline void copy_str(char *dst, size_t n, const char *src)
{
    size_t len = strlen(src);
    if (!n) return;
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

typedef void (*bench_cb)(void *arg);

enum {
    PERFORM_WAKE = 1,    /* wake the loop after queueing (the block comes from another thread) */
    PERFORM_PLAIN = 2,   /* CRunLoop: rl_loop_perform(fn, arg) instead of rl_loop_perform_context */
};

typedef struct peer {
    const char *name;     /* short name used in the table and the JSON */
    const char *package;  /* Debian package providing the library, NULL when always present */
    int is_floor;         /* a raw kernel mechanism, not an event loop */
    int loaded;
    char version[128];
    char why[256];        /* why load failed */

    int (*load)(struct peer *self);              /* 0, or -1 with why set */

    void *(*loop_new)(void);
    void (*loop_free)(void *loop);
    void (*run)(void *loop);                     /* until stop() from one of its callbacks */
    void (*stop)(void *loop);
    void (*pass)(void *loop);                    /* one iteration, never blocking */

    /* A cross-thread wakeup: async_send from any thread makes the loop call cb(arg) soon;
     * sends before the callback runs may be coalesced into one call. */
    void *(*async_new)(void *loop, bench_cb cb, void *arg);
    void (*async_send)(void *async);
    void (*async_free)(void *async);

    /* Timers: start arms (or re-arms) a stopped or fired timer, delay seconds from now, then
     * every repeat seconds (0: once; when repeat > 0, delay == repeat). */
    void *(*timer_new)(void *loop, bench_cb cb, void *arg);
    void (*timer_start)(void *timer, double delay, double repeat);
    void (*timer_stop)(void *timer);
    void (*timer_free)(void *timer);
    /* Optional: re-arm a started, pending timer to fire once, delay seconds from now, with the
     * peer's fastest documented idiom for an idle timeout (the "timer re-arm" row). */
    void (*timer_again)(void *timer, double delay);

    /* Readability of a file descriptor, level-triggered; cb must drain it. */
    void *(*fd_new)(void *loop, int fd, bench_cb cb, void *arg);
    void (*fd_free)(void *fdw);

    /* timer_start, timer_stop and timer_free may be called from any thread while the loop runs
     * on its own (CRunLoop, CF, GLib's g_source_attach/destroy, libevent with pthread locks). */
    int timers_any_thread;

    /* Optional: queue cb(arg) to run once on the loop's thread in its next pass, from any thread
     * (PERFORM_* flags). CRunLoop: rl_loop_perform_context or rl_loop_perform (+ rl_loop_wakeup);
     * CF: CFRunLoopPerformBlock with a block capturing cb and arg (+ CFRunLoopWakeUp). */
    void (*perform)(void *loop, bench_cb cb, void *arg, unsigned flags);

    /* Optional: add an observer of every activity (CRunLoop, CF). */
    int (*observer_add)(void *loop);
    /* Optional: wakeup writes and waits of the loop (CRunLoop). */
    int (*counters)(void *loop, unsigned long long *wakeup_writes, unsigned long long *waits);
    /* Optional: give timers created from now on this tolerance (CRunLoop). */
    void (*set_tolerance)(void *loop, double tolerance);
} peer_t;

/* The adapters (peers/<name>.c). */
extern peer_t peer_futex, peer_epoll, peer_crunloop, peer_cf, peer_libuv, peer_glib, peer_libev,
    peer_libevent;

/* dlopen the first of names that loads, RTLD_NOW|RTLD_LOCAL; NULL with self->why set. */
void *peer_dlopen(peer_t *self, const char *const *names);
/* dlsym or set why and return NULL. */
void *peer_sym(peer_t *self, void *lib, const char *name);
#define PEER_SYM(self, lib, var, name) \
    do { *(void **)&(var) = peer_sym((self), (lib), (name)); if (!(var)) return -1; } while (0)

#endif
