/*
 * backend.h - the neutral run-loop API the conformance scenarios are written against.
 *
 * Built with -DBACKEND_CF it maps onto Apple's CoreFoundation CFRunLoop (the one in the Swift
 * toolchain's libFoundation.so); otherwise onto crunloop.h. Every object handle is an opaque
 * pointer; every callback receives the handle and the user's info pointer. Mode names are C
 * strings on both sides: BK_DEFAULT and BK_COMMON are the names CF and crunloop share.
 *
 * Each backend wraps a user callback in a small heap record (struct bk_cb) passed as the
 * native info; the native context's release frees it when the object dies.
 */
#ifndef CONFORMANCE_BACKEND_H
#define CONFORMANCE_BACKEND_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BK_DEFAULT "kCFRunLoopDefaultMode"
#define BK_COMMON "kCFRunLoopCommonModes"

/* Activities: the same bit values in CF and crunloop. */
enum { BK_ENTRY = 1u << 0, BK_BEFORE_TIMERS = 1u << 1, BK_BEFORE_SOURCES = 1u << 2,
       BK_BEFORE_WAITING = 1u << 5, BK_AFTER_WAITING = 1u << 6, BK_EXIT = 1u << 7,
       BK_ALL = BK_ENTRY | BK_BEFORE_TIMERS | BK_BEFORE_SOURCES | BK_BEFORE_WAITING |
                BK_AFTER_WAITING | BK_EXIT };

typedef void *bk_loop;
typedef void *bk_timer;
typedef void *bk_source;
typedef void *bk_observer;

typedef void (*bk_timer_fn)(bk_timer timer, void *info);
typedef void (*bk_observer_fn)(bk_observer observer, unsigned activity, void *info);
typedef void (*bk_perform_fn)(void *info);
typedef void (*bk_mode_fn)(void *info, const char *mode);   /* schedule / cancel */

struct bk_cb {
    bk_timer_fn timer;
    bk_observer_fn observer;
    bk_perform_fn perform;
    bk_mode_fn schedule;
    bk_mode_fn cancel;
    void *info;
};

static inline struct bk_cb *bk_cb_new(void *info)
{
    struct bk_cb *cb = calloc(1, sizeof *cb);
    if (!cb) abort();
    cb->info = info;
    return cb;
}

static inline void bk_cb_free(const void *p) { free((void *)p); }

#ifdef BACKEND_CF
/* ============================== CoreFoundation ============================================== */
#include <CoreFoundation/CoreFoundation.h>
#include <pthread.h>

#define BK_NAME "CF"

/* C string -> CFString mode, cached for the process (CF's own constants for the shared names,
 * since CF compares kCFRunLoopCommonModes by pointer). */
static inline CFStringRef bk_cfmode(const char *mode)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct { char name[64]; CFStringRef str; } cache[64];
    static int n;
    if (strcmp(mode, BK_DEFAULT) == 0) return kCFRunLoopDefaultMode;
    if (strcmp(mode, BK_COMMON) == 0) return kCFRunLoopCommonModes;
    pthread_mutex_lock(&mu);
    CFStringRef s = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(cache[i].name, mode) == 0) s = cache[i].str;
    if (!s) {
        if (n == 64 || strlen(mode) >= 64) abort();
        s = CFStringCreateWithCString(NULL, mode, kCFStringEncodingUTF8);
        strcpy(cache[n].name, mode);
        cache[n++].str = s;
    }
    pthread_mutex_unlock(&mu);
    return s;
}

static inline char *bk_cstr(CFStringRef s)
{
    char buf[256];
    if (!s) return NULL;
    if (!CFStringGetCString(s, buf, sizeof buf, kCFStringEncodingUTF8)) strcpy(buf, "?");
    return strdup(buf);
}

static inline double bk_now(void) { return CFAbsoluteTimeGetCurrent(); }
static inline bk_loop bk_current(void) { return (bk_loop)CFRunLoopGetCurrent(); }
static inline void bk_release(void *obj) { if (obj) CFRelease((CFTypeRef)obj); }

static inline int bk_run(const char *mode, double seconds, bool return_after)
{
    return (int)CFRunLoopRunInMode(bk_cfmode(mode), seconds, return_after);
}
static inline void bk_stop(bk_loop l) { CFRunLoopStop((CFRunLoopRef)l); }
static inline void bk_wakeup(bk_loop l) { CFRunLoopWakeUp((CFRunLoopRef)l); }
static inline bool bk_is_waiting(bk_loop l) { return CFRunLoopIsWaiting((CFRunLoopRef)l); }
static inline void bk_add_common_mode(bk_loop l, const char *mode)
{
    CFRunLoopAddCommonMode((CFRunLoopRef)l, bk_cfmode(mode));
}
static inline char *bk_copy_current_mode(bk_loop l)
{
    CFStringRef s = CFRunLoopCopyCurrentMode((CFRunLoopRef)l);
    char *r = bk_cstr(s);
    if (s) CFRelease(s);
    return r;
}
static inline void bk_perform(bk_loop l, const char *mode, bk_perform_fn fn, void *arg)
{
    CFRunLoopPerformBlock((CFRunLoopRef)l, bk_cfmode(mode), ^{ fn(arg); });
}

/* timers */
static inline void bk_cf_timer_tramp(CFRunLoopTimerRef t, void *info)
{
    struct bk_cb *cb = info;
    cb->timer((bk_timer)t, cb->info);
}
static inline bk_timer bk_timer_create(double fire_date, double interval, long order, bk_timer_fn fn,
                                void *info)
{
    struct bk_cb *cb = bk_cb_new(info);
    cb->timer = fn;
    CFRunLoopTimerContext ctx = { 0, cb, NULL, bk_cb_free, NULL };
    return (bk_timer)CFRunLoopTimerCreate(NULL, fire_date, interval, 0, order, bk_cf_timer_tramp,
                                          &ctx);
}
static inline void bk_add_timer(bk_loop l, bk_timer t, const char *mode)
{
    CFRunLoopAddTimer((CFRunLoopRef)l, (CFRunLoopTimerRef)t, bk_cfmode(mode));
}
static inline void bk_remove_timer(bk_loop l, bk_timer t, const char *mode)
{
    CFRunLoopRemoveTimer((CFRunLoopRef)l, (CFRunLoopTimerRef)t, bk_cfmode(mode));
}
static inline bool bk_contains_timer(bk_loop l, bk_timer t, const char *mode)
{
    return CFRunLoopContainsTimer((CFRunLoopRef)l, (CFRunLoopTimerRef)t, bk_cfmode(mode));
}
static inline void bk_timer_invalidate(bk_timer t) { CFRunLoopTimerInvalidate((CFRunLoopTimerRef)t); }
static inline bool bk_timer_is_valid(bk_timer t) { return CFRunLoopTimerIsValid((CFRunLoopTimerRef)t); }
static inline void bk_timer_set_next_fire_date(bk_timer t, double d)
{
    CFRunLoopTimerSetNextFireDate((CFRunLoopTimerRef)t, d);
}
static inline double bk_timer_next_fire_date(bk_timer t) { return CFRunLoopTimerGetNextFireDate((CFRunLoopTimerRef)t); }
static inline double bk_next_timer_fire_date(bk_loop l, const char *mode)
{
    return CFRunLoopGetNextTimerFireDate((CFRunLoopRef)l, bk_cfmode(mode));
}

/* version-0 sources */
static inline void bk_cf_perform_tramp(void *info)
{
    struct bk_cb *cb = info;
    if (cb->perform) cb->perform(cb->info);
}
static inline void bk_cf_schedule_tramp(void *info, CFRunLoopRef rl, CFRunLoopMode mode)
{
    struct bk_cb *cb = info;
    (void)rl;
    if (cb->schedule) {
        char *m = bk_cstr(mode);
        cb->schedule(cb->info, m);
        free(m);
    }
}
static inline void bk_cf_cancel_tramp(void *info, CFRunLoopRef rl, CFRunLoopMode mode)
{
    struct bk_cb *cb = info;
    (void)rl;
    if (cb->cancel) {
        char *m = bk_cstr(mode);
        cb->cancel(cb->info, m);
        free(m);
    }
}
static inline bk_source bk_source_create(long order, bk_perform_fn perform, bk_mode_fn schedule,
                                  bk_mode_fn cancel, void *info)
{
    struct bk_cb *cb = bk_cb_new(info);
    cb->perform = perform;
    cb->schedule = schedule;
    cb->cancel = cancel;
    CFRunLoopSourceContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.version = 0;
    ctx.info = cb;
    ctx.release = bk_cb_free;
    ctx.schedule = bk_cf_schedule_tramp;
    ctx.cancel = bk_cf_cancel_tramp;
    ctx.perform = bk_cf_perform_tramp;
    return (bk_source)CFRunLoopSourceCreate(NULL, order, &ctx);
}
static inline void bk_add_source(bk_loop l, bk_source s, const char *mode)
{
    CFRunLoopAddSource((CFRunLoopRef)l, (CFRunLoopSourceRef)s, bk_cfmode(mode));
}
static inline void bk_remove_source(bk_loop l, bk_source s, const char *mode)
{
    CFRunLoopRemoveSource((CFRunLoopRef)l, (CFRunLoopSourceRef)s, bk_cfmode(mode));
}
static inline bool bk_contains_source(bk_loop l, bk_source s, const char *mode)
{
    return CFRunLoopContainsSource((CFRunLoopRef)l, (CFRunLoopSourceRef)s, bk_cfmode(mode));
}
static inline void bk_source_signal(bk_source s) { CFRunLoopSourceSignal((CFRunLoopSourceRef)s); }
static inline void bk_source_invalidate(bk_source s) { CFRunLoopSourceInvalidate((CFRunLoopSourceRef)s); }
static inline bool bk_source_is_valid(bk_source s) { return CFRunLoopSourceIsValid((CFRunLoopSourceRef)s); }

/* observers */
static inline void bk_cf_observer_tramp(CFRunLoopObserverRef o, CFRunLoopActivity act, void *info)
{
    struct bk_cb *cb = info;
    cb->observer((bk_observer)o, (unsigned)act, cb->info);
}
static inline bk_observer bk_observer_create(unsigned activities, bool repeats, long order,
                                      bk_observer_fn fn, void *info)
{
    struct bk_cb *cb = bk_cb_new(info);
    cb->observer = fn;
    CFRunLoopObserverContext ctx = { 0, cb, NULL, bk_cb_free, NULL };
    return (bk_observer)CFRunLoopObserverCreate(NULL, activities, repeats, order,
                                                bk_cf_observer_tramp, &ctx);
}
static inline void bk_add_observer(bk_loop l, bk_observer o, const char *mode)
{
    CFRunLoopAddObserver((CFRunLoopRef)l, (CFRunLoopObserverRef)o, bk_cfmode(mode));
}
static inline void bk_remove_observer(bk_loop l, bk_observer o, const char *mode)
{
    CFRunLoopRemoveObserver((CFRunLoopRef)l, (CFRunLoopObserverRef)o, bk_cfmode(mode));
}
static inline bool bk_contains_observer(bk_loop l, bk_observer o, const char *mode)
{
    return CFRunLoopContainsObserver((CFRunLoopRef)l, (CFRunLoopObserverRef)o, bk_cfmode(mode));
}
static inline void bk_observer_invalidate(bk_observer o)
{
    CFRunLoopObserverInvalidate((CFRunLoopObserverRef)o);
}
static inline bool bk_observer_is_valid(bk_observer o)
{
    return CFRunLoopObserverIsValid((CFRunLoopObserverRef)o);
}

#else
/* ============================== crunloop ==================================================== */
#include <crunloop.h>

#define BK_NAME "crunloop"

static inline double bk_now(void) { return rl_time_now(); }
static inline bk_loop bk_current(void) { return rl_loop_get_current(); }
static inline void bk_release(void *obj) { rl_release(obj); }

static inline int bk_run(const char *mode, double seconds, bool return_after)
{
    return rl_run_in_mode(mode, seconds, return_after);
}
static inline void bk_stop(bk_loop l) { rl_loop_stop(l); }
static inline void bk_wakeup(bk_loop l) { rl_loop_wakeup(l); }
static inline bool bk_is_waiting(bk_loop l) { return rl_loop_is_waiting(l); }
static inline void bk_add_common_mode(bk_loop l, const char *mode) { rl_loop_add_common_mode(l, mode); }
static inline char *bk_copy_current_mode(bk_loop l) { return rl_loop_copy_current_mode(l); }
static inline void bk_perform(bk_loop l, const char *mode, bk_perform_fn fn, void *arg)
{
    rl_loop_perform(l, mode, fn, arg);
}

/* timers */
static inline void bk_rl_timer_tramp(rl_timer_t *t, void *info)
{
    struct bk_cb *cb = info;
    cb->timer(t, cb->info);
}
static inline bk_timer bk_timer_create(double fire_date, double interval, long order, bk_timer_fn fn,
                                void *info)
{
    struct bk_cb *cb = bk_cb_new(info);
    cb->timer = fn;
    rl_context_t ctx = { cb, NULL, bk_cb_free };
    return rl_timer_create(fire_date, interval, order, bk_rl_timer_tramp, &ctx);
}
static inline void bk_add_timer(bk_loop l, bk_timer t, const char *mode) { rl_loop_add_timer(l, t, mode); }
static inline void bk_remove_timer(bk_loop l, bk_timer t, const char *mode)
{
    rl_loop_remove_timer(l, t, mode);
}
static inline bool bk_contains_timer(bk_loop l, bk_timer t, const char *mode)
{
    return rl_loop_contains_timer(l, t, mode);
}
static inline void bk_timer_invalidate(bk_timer t) { rl_timer_invalidate(t); }
static inline bool bk_timer_is_valid(bk_timer t) { return rl_timer_is_valid(t); }
static inline void bk_timer_set_next_fire_date(bk_timer t, double d) { rl_timer_set_next_fire_date(t, d); }
static inline double bk_timer_next_fire_date(bk_timer t) { return rl_timer_get_next_fire_date(t); }
static inline double bk_next_timer_fire_date(bk_loop l, const char *mode) { return rl_loop_get_next_timer_fire_date(l, mode); }

/* version-0 sources */
static inline void bk_rl_perform_tramp(void *info)
{
    struct bk_cb *cb = info;
    if (cb->perform) cb->perform(cb->info);
}
static inline void bk_rl_schedule_tramp(void *info, rl_loop_t *loop, const char *mode)
{
    struct bk_cb *cb = info;
    (void)loop;
    if (cb->schedule) cb->schedule(cb->info, mode);
}
static inline void bk_rl_cancel_tramp(void *info, rl_loop_t *loop, const char *mode)
{
    struct bk_cb *cb = info;
    (void)loop;
    if (cb->cancel) cb->cancel(cb->info, mode);
}
static inline bk_source bk_source_create(long order, bk_perform_fn perform, bk_mode_fn schedule,
                                  bk_mode_fn cancel, void *info)
{
    struct bk_cb *cb = bk_cb_new(info);
    cb->perform = perform;
    cb->schedule = schedule;
    cb->cancel = cancel;
    rl_source_context_t ctx = { cb, NULL, bk_cb_free, bk_rl_schedule_tramp, bk_rl_cancel_tramp,
                                bk_rl_perform_tramp };
    return rl_source_create(order, &ctx);
}
static inline void bk_add_source(bk_loop l, bk_source s, const char *mode)
{
    rl_loop_add_source(l, s, mode);
}
static inline void bk_remove_source(bk_loop l, bk_source s, const char *mode)
{
    rl_loop_remove_source(l, s, mode);
}
static inline bool bk_contains_source(bk_loop l, bk_source s, const char *mode)
{
    return rl_loop_contains_source(l, s, mode);
}
static inline void bk_source_signal(bk_source s) { rl_source_signal(s); }
static inline void bk_source_invalidate(bk_source s) { rl_source_invalidate(s); }
static inline bool bk_source_is_valid(bk_source s) { return rl_source_is_valid(s); }

/* observers */
static inline void bk_rl_observer_tramp(rl_observer_t *o, unsigned act, void *info)
{
    struct bk_cb *cb = info;
    cb->observer(o, act, cb->info);
}
static inline bk_observer bk_observer_create(unsigned activities, bool repeats, long order,
                                      bk_observer_fn fn, void *info)
{
    struct bk_cb *cb = bk_cb_new(info);
    cb->observer = fn;
    rl_context_t ctx = { cb, NULL, bk_cb_free };
    return rl_observer_create(activities, repeats, order, bk_rl_observer_tramp, &ctx);
}
static inline void bk_add_observer(bk_loop l, bk_observer o, const char *mode)
{
    rl_loop_add_observer(l, o, mode);
}
static inline void bk_remove_observer(bk_loop l, bk_observer o, const char *mode)
{
    rl_loop_remove_observer(l, o, mode);
}
static inline bool bk_contains_observer(bk_loop l, bk_observer o, const char *mode)
{
    return rl_loop_contains_observer(l, o, mode);
}
static inline void bk_observer_invalidate(bk_observer o) { rl_observer_invalidate(o); }
static inline bool bk_observer_is_valid(bk_observer o) { return rl_observer_is_valid(o); }

#endif /* BACKEND_CF */

#endif /* CONFORMANCE_BACKEND_H */
