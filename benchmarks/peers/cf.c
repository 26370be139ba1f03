/* cf.c - CoreFoundation's CFRunLoop, from the libFoundation.so of the Swift toolchain on PATH
 * (or $BENCH_FOUNDATION). Opaque-pointer API; the two context structs are declared here. */

#include "peer.h"
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef const void *CFTypeRef;
typedef long CFIndex;
typedef unsigned long CFOptionFlags;
typedef double CFAbsoluteTime;
typedef unsigned char Boolean;

typedef struct {
    CFIndex version;
    void *info;
    const void *(*retain)(const void *);
    void (*release)(const void *);
    CFTypeRef (*copyDescription)(const void *);
    Boolean (*equal)(const void *, const void *);
    unsigned long (*hash)(const void *);
    void (*schedule)(void *, CFTypeRef, CFTypeRef);
    void (*cancel)(void *, CFTypeRef, CFTypeRef);
    void (*perform)(void *);
} cf_source_ctx_t;

typedef struct {
    CFIndex version;
    void *info;
    const void *(*retain)(const void *);
    void (*release)(const void *);
    CFTypeRef (*copyDescription)(const void *);
} cf_ctx_t;

typedef void (*cf_timer_cb)(CFTypeRef timer, void *info);
typedef void (*cf_socket_cb)(CFTypeRef s, CFOptionFlags type, CFTypeRef address, const void *data,
                             void *info);
enum { CF_SOCKET_READ_CALLBACK = 1, CF_SOCKET_REENABLE_READ = 1 };   /* kCFSocket* */
typedef void (*cf_observer_cb)(CFTypeRef obs, CFOptionFlags activity, void *info);

static struct {
    CFTypeRef (*GetCurrent)(void);
    int32_t (*RunInMode)(CFTypeRef mode, double seconds, Boolean ret);
    void (*Stop)(CFTypeRef rl);
    void (*WakeUp)(CFTypeRef rl);
    CFTypeRef (*SourceCreate)(CFTypeRef alloc, CFIndex order, cf_source_ctx_t *ctx);
    void (*SourceSignal)(CFTypeRef src);
    void (*AddSource)(CFTypeRef rl, CFTypeRef src, CFTypeRef mode);
    void (*RemoveSource)(CFTypeRef rl, CFTypeRef src, CFTypeRef mode);
    CFTypeRef (*TimerCreate)(CFTypeRef alloc, CFAbsoluteTime date, double interval, CFOptionFlags f,
                             CFIndex order, cf_timer_cb cb, cf_ctx_t *ctx);
    void (*AddTimer)(CFTypeRef rl, CFTypeRef t, CFTypeRef mode);
    void (*RemoveTimer)(CFTypeRef rl, CFTypeRef t, CFTypeRef mode);
    void (*TimerInvalidate)(CFTypeRef t);
    void (*TimerSetNextFireDate)(CFTypeRef t, CFAbsoluteTime date);
    CFTypeRef (*ObserverCreate)(CFTypeRef alloc, CFOptionFlags act, Boolean rep, CFIndex order,
                                cf_observer_cb cb, cf_ctx_t *ctx);
    void (*AddObserver)(CFTypeRef rl, CFTypeRef o, CFTypeRef mode);
    void (*Release)(CFTypeRef);
    CFAbsoluteTime (*Now)(void);
    void (*PerformBlock)(CFTypeRef rl, CFTypeRef mode, void *block);
    CFTypeRef (*SocketCreateWithNative)(CFTypeRef alloc, int fd, CFOptionFlags types, cf_socket_cb cb,
                                        const cf_ctx_t *ctx);
    void (*SocketSetSocketFlags)(CFTypeRef s, CFOptionFlags flags);
    CFTypeRef (*SocketCreateRunLoopSource)(CFTypeRef alloc, CFTypeRef s, CFIndex order);
    void (*SocketInvalidate)(CFTypeRef s);
    void *stack_block_isa;      /* _NSConcreteStackBlock, from the blocks runtime CF uses */
    CFTypeRef mode;
} cf;

/* <toolchain>/usr/lib/swift/linux/libFoundation.so from the `swift` found on PATH. */
static int foundation_path(char *out, size_t n)
{
    const char *env = getenv("BENCH_FOUNDATION"), *path = getenv("PATH");
    char cand[PATH_MAX], real[PATH_MAX];
    if (env && *env) { copy_str(out, n, env); return 0; }
    while (path && *path) {
        size_t len = strcspn(path, ":");
        snprintf(cand, sizeof cand, "%.*s/swift", (int)len, path);
        if (access(cand, X_OK) == 0 && realpath(cand, real)) {
            char *s = strrchr(real, '/');              /* .../usr/bin/swift */
            if (s) { *s = 0; s = strrchr(real, '/'); }
            if (s) {
                *s = 0;
                if (strlen(real) + 40 > n) return -1;
                strcpy(out, real);
                strcat(out, "/lib/swift/linux/libFoundation.so");
                return 0;
            }
        }
        path += len + (path[len] == ':');
    }
    return -1;
}

static void swift_version(char *out, size_t n)
{
    FILE *p = popen("swift --version 2>&1", "r");
    char line[256];
    out[0] = 0;
    if (!p) return;
    while (fgets(line, sizeof line, p))
        if (strstr(line, "Swift version")) {
            line[strcspn(line, "\n")] = 0;
            copy_str(out, n, line);
            break;
        }
    pclose(p);
}

static int cf_load(peer_t *self)
{
    char path[PATH_MAX];
    const char *names[] = { path, NULL };
    void *h;
    if (foundation_path(path, sizeof path) != 0) {
        snprintf(self->why, sizeof self->why, "no `swift` on PATH (install a Swift toolchain)");
        return -1;
    }
    if (!(h = peer_dlopen(self, names))) return -1;
    PEER_SYM(self, h, cf.GetCurrent, "CFRunLoopGetCurrent");
    PEER_SYM(self, h, cf.RunInMode, "CFRunLoopRunInMode");
    PEER_SYM(self, h, cf.Stop, "CFRunLoopStop");
    PEER_SYM(self, h, cf.WakeUp, "CFRunLoopWakeUp");
    PEER_SYM(self, h, cf.SourceCreate, "CFRunLoopSourceCreate");
    PEER_SYM(self, h, cf.SourceSignal, "CFRunLoopSourceSignal");
    PEER_SYM(self, h, cf.AddSource, "CFRunLoopAddSource");
    PEER_SYM(self, h, cf.RemoveSource, "CFRunLoopRemoveSource");
    PEER_SYM(self, h, cf.TimerCreate, "CFRunLoopTimerCreate");
    PEER_SYM(self, h, cf.AddTimer, "CFRunLoopAddTimer");
    PEER_SYM(self, h, cf.RemoveTimer, "CFRunLoopRemoveTimer");
    PEER_SYM(self, h, cf.TimerInvalidate, "CFRunLoopTimerInvalidate");
    PEER_SYM(self, h, cf.TimerSetNextFireDate, "CFRunLoopTimerSetNextFireDate");
    PEER_SYM(self, h, cf.ObserverCreate, "CFRunLoopObserverCreate");
    PEER_SYM(self, h, cf.AddObserver, "CFRunLoopAddObserver");
    PEER_SYM(self, h, cf.Release, "CFRelease");
    PEER_SYM(self, h, cf.Now, "CFAbsoluteTimeGetCurrent");
    PEER_SYM(self, h, cf.PerformBlock, "CFRunLoopPerformBlock");
    PEER_SYM(self, h, cf.stack_block_isa, "_NSConcreteStackBlock");
    PEER_SYM(self, h, cf.SocketCreateWithNative, "CFSocketCreateWithNative");
    PEER_SYM(self, h, cf.SocketSetSocketFlags, "CFSocketSetSocketFlags");
    PEER_SYM(self, h, cf.SocketCreateRunLoopSource, "CFSocketCreateRunLoopSource");
    PEER_SYM(self, h, cf.SocketInvalidate, "CFSocketInvalidate");
    {
        CFTypeRef *mode;
        PEER_SYM(self, h, mode, "kCFRunLoopDefaultMode");
        cf.mode = *mode;
    }
    swift_version(self->version, sizeof self->version);
    if (!self->version[0]) copy_str(self->version, sizeof self->version, path);
    return 0;
}

typedef struct { CFTypeRef rl; int stopped; } cf_loop_t;
typedef struct { cf_loop_t *loop; CFTypeRef obj; bench_cb cb; void *arg; } cf_item_t;

static void *cf_loop_new(void)
{
    cf_loop_t *l = calloc(1, sizeof *l);
    l->rl = cf.GetCurrent();
    return l;
}

static void cf_loop_free(void *l) { free(l); }

static void cf_run(void *lp)
{
    cf_loop_t *l = lp;
    l->stopped = 0;
    while (!l->stopped)
        if (cf.RunInMode(cf.mode, 1e10, 0) == 1 /* finished */) break;
}

static void cf_stop(void *lp)
{
    cf_loop_t *l = lp;
    l->stopped = 1;
    cf.Stop(l->rl);
}

static void cf_pass(void *lp) { (void)lp; cf.RunInMode(cf.mode, 0, 0); }

static void cf_perform(void *info)
{
    cf_item_t *it = info;
    it->cb(it->arg);
}

static void *cf_async_new(void *lp, bench_cb cb, void *arg)
{
    cf_loop_t *l = lp;
    cf_item_t *it = calloc(1, sizeof *it);
    cf_source_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.info = it;
    ctx.perform = cf_perform;
    *it = (cf_item_t){ l, NULL, cb, arg };
    it->obj = cf.SourceCreate(NULL, 0, &ctx);
    cf.AddSource(l->rl, it->obj, cf.mode);
    return it;
}

static void cf_async_send(void *a)
{
    cf_item_t *it = a;
    cf.SourceSignal(it->obj);
    cf.WakeUp(it->loop->rl);
}

static void cf_async_free(void *a)
{
    cf_item_t *it = a;
    cf.RemoveSource(it->loop->rl, it->obj, cf.mode);
    cf.Release(it->obj);
    free(it);
}

static void cf_timer_fired(CFTypeRef t, void *info)
{
    (void)t;
    cf_perform(info);
}

static void *cf_timer_new(void *lp, bench_cb cb, void *arg)
{
    cf_item_t *it = calloc(1, sizeof *it);
    *it = (cf_item_t){ lp, NULL, cb, arg };
    return it;
}

static void cf_timer_start(void *tp, double delay, double repeat)
{
    cf_item_t *it = tp;
    cf_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.info = it;
    if (it->obj) {
        cf.TimerInvalidate(it->obj);
        cf.Release(it->obj);
    }
    it->obj = cf.TimerCreate(NULL, cf.Now() + delay, repeat, 0, 0, cf_timer_fired, &ctx);
    cf.AddTimer(it->loop->rl, it->obj, cf.mode);
}

/* Moving a pending timer: CFRunLoopTimerSetNextFireDate at now + delay. */
static void cf_timer_again(void *tp, double delay)
{
    cf_item_t *it = tp;
    cf.TimerSetNextFireDate(it->obj, cf.Now() + delay);
}

static void cf_timer_stop(void *tp)
{
    cf_item_t *it = tp;
    if (it->obj) cf.RemoveTimer(it->loop->rl, it->obj, cf.mode);
}

static void cf_timer_free(void *tp)
{
    cf_item_t *it = tp;
    if (it->obj) {
        cf.TimerInvalidate(it->obj);
        cf.Release(it->obj);
    }
    free(it);
}

/* A plain fd: CF's own way on Linux is a CFSocket made from the descriptor (any descriptor:
 * CFSocketCreateWithNative tolerates one that is not a socket) with a read callback, which CF
 * does not read for us, re-enabled after each call; CF's socket manager thread select()s on it and
 * signals the socket's run loop source. The flags leave out kCFSocketCloseOnInvalidate: the
 * descriptor stays the caller's. */
typedef struct { cf_loop_t *loop; CFTypeRef sock, src; bench_cb cb; void *arg; } cf_fd_t;

static void cf_fd_ready(CFTypeRef s, CFOptionFlags type, CFTypeRef address, const void *data, void *info)
{
    cf_fd_t *f = info;
    (void)s; (void)type; (void)address; (void)data;
    f->cb(f->arg);
}

static void *cf_fd_new(void *lp, int fd, bench_cb cb, void *arg)
{
    cf_loop_t *l = lp;
    cf_fd_t *f = calloc(1, sizeof *f);
    cf_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.info = f;
    *f = (cf_fd_t){ l, NULL, NULL, cb, arg };
    f->sock = cf.SocketCreateWithNative(NULL, fd, CF_SOCKET_READ_CALLBACK, cf_fd_ready, &ctx);
    if (!f->sock) { free(f); return NULL; }
    cf.SocketSetSocketFlags(f->sock, CF_SOCKET_REENABLE_READ);
    f->src = cf.SocketCreateRunLoopSource(NULL, f->sock, 0);
    if (!f->src) {
        cf.SocketInvalidate(f->sock);
        cf.Release(f->sock);
        free(f);
        return NULL;
    }
    cf.AddSource(l->rl, f->src, cf.mode);
    return f;
}

static void cf_fd_free(void *p)
{
    cf_fd_t *f = p;
    cf.SocketInvalidate(f->sock);     /* removes its source from the loop too */
    cf.Release(f->src);
    cf.Release(f->sock);
    free(f);
}

static unsigned long cf_observer_calls;
static void cf_observed(CFTypeRef o, CFOptionFlags a, void *info)
{
    (void)o; (void)a;
    ++*(unsigned long *)info;
}

static int cf_observer_add(void *lp)
{
    cf_loop_t *l = lp;
    cf_ctx_t ctx;
    CFTypeRef o;
    memset(&ctx, 0, sizeof ctx);
    ctx.info = &cf_observer_calls;
    o = cf.ObserverCreate(NULL, 0x0FFFFFFFul, 1, 0, cf_observed, &ctx);
    if (!o) return -1;
    cf.AddObserver(l->rl, o, cf.mode);
    cf.Release(o);
    return 0;
}

/* A block literal as clang lays it out (the blocks ABI): a stack block capturing cb and arg, which
 * CFRunLoopPerformBlock copies to the heap (Block_copy) as it must for any capturing block. */
typedef struct { unsigned long reserved, size; } cf_block_desc_t;
typedef struct cf_block {
    void *isa;
    int flags, reserved;
    void (*invoke)(struct cf_block *self);
    const cf_block_desc_t *desc;
    bench_cb cb;        /* the captured variables */
    void *arg;
} cf_block_t;

static void cf_block_invoke(cf_block_t *b) { b->cb(b->arg); }
static const cf_block_desc_t cf_block_desc = { 0, sizeof(cf_block_t) };

/* CF has one call for both PERFORM_PLAIN and the context variant. */
static void cf_perform_block(void *lp, bench_cb cb, void *arg, unsigned flags)
{
    cf_loop_t *l = lp;
    cf_block_t b = { cf.stack_block_isa, 0, 0, cf_block_invoke, &cf_block_desc, cb, arg };
    cf.PerformBlock(l->rl, cf.mode, &b);
    if (flags & PERFORM_WAKE) cf.WakeUp(l->rl);
}

peer_t peer_cf = {
    .name = "CFRunLoop", .package = "a Swift toolchain (swift.org)", .load = cf_load,
    .loop_new = cf_loop_new, .loop_free = cf_loop_free, .run = cf_run, .stop = cf_stop,
    .pass = cf_pass, .async_new = cf_async_new, .async_send = cf_async_send,
    .async_free = cf_async_free, .timer_new = cf_timer_new, .timer_start = cf_timer_start,
    .timer_stop = cf_timer_stop, .timer_free = cf_timer_free, .timer_again = cf_timer_again, .fd_new = cf_fd_new,
    .fd_free = cf_fd_free, .observer_add = cf_observer_add,
    .timers_any_thread = 1, .perform = cf_perform_block,
};
