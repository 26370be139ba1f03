/*
 * timer.c - timers: one heap entry per mode a timer is in, keyed by (fire date, order, seq), so
 * equal fire dates go by order, then by when they were scheduled; and the timer phase of a pass
 * (rl_timers_fire_due). A timer belongs to one loop at a time (its owner pointer); its fields are
 * guarded by that loop's lock, or by its item lock while it has no loop (see internal.h and
 * rl_owner_lock). A timer is one allocation whatever it does in one mode: its first entry is
 * inside it; each further mode chains one more entry. An entry names its mode by the mode's id
 * (its place in the loop's list), which the owner loop turns back into the mode.
 */
#include "membership.h"
#include "wake.h"
#include "lag.h"
#include "sort.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if UINTPTR_MAX == UINT64_MAX
/* malloc serves 72 bytes from an 80-byte chunk; 73 would take 96 (crunloop.h: COSTS). */
_Static_assert(sizeof(struct rl_timer) <= 72, "a timer outgrew its malloc size class");
#endif

static inline bool bad_time(double t) { return !(t >= 0); } /* NaN or negative */

/* A date in the past means "now", as in CF: a repeating timer's grid then starts from when the
 * date was set, not from a point long gone. */
static double not_before_now(double date) {
    if (date == INFINITY) return date; /* never in the past: a dormant timeout reads no clock */
    double now = rl_time_now();
    return date < now ? now : date;
}

static inline bool is_valid(const rl_timer_t *t) {
    return atomic_load(&t->obj.bits) & RL_TIMER_VALID;
}

/* node.user of an entry (internal.h): CHAINED marks an entry of the chain, MORE (on the first
 * entry) a timer with a chain, the bits above hold the mode's id + 1. */
enum { CHAINED = RL_ENTRY_CHAINED, MORE = RL_ENTRY_MORE, SHIFT = RL_ENTRY_MODE_SHIFT };
static inline bool is_chained(const rl_timer_entry *e) { return e->node.user & CHAINED; }
static inline bool is_used(const rl_timer_entry *e) { return e->node.user >> SHIFT; }
static inline bool is_in(const rl_timer_entry *e, const rl_mode *mode) { return (e->node.user >> SHIFT) == mode->id + 1; }
static inline void set_mode(rl_timer_entry *e, const rl_mode *mode) {
    e->node.user = (e->node.user & (CHAINED | MORE)) | (mode ? (mode->id + 1) << SHIFT : 0);
}
/* The mode of a used entry of a timer that loop owns. */
static inline rl_mode *mode_of(const rl_loop_t *loop, const rl_timer_entry *e) {
    return loop->modes.items[(e->node.user >> SHIFT) - 1];
}
/* Whether t has chained entries. Owner loop's lock. */
static inline bool has_more(const rl_timer_t *t) { return t->first.node.user & MORE; }

static inline rl_timer_t *timer_of(rl_timer_entry *e) {
    if (is_chained(e)) return ((rl_timer_chained *)e)->timer;
    return (rl_timer_t *)((char *)e - offsetof(rl_timer_t, first));
}

rl_timer_t *rl_timer_of_node(rl_heap_node *node) { return timer_of((rl_timer_entry *)node); }

static inline rl_timer_extras *extras_of(const rl_timer_t *t) {
    return atomic_load_explicit(&((rl_timer_t *)t)->extras, memory_order_acquire);
}

static rl_timer_extras *new_extras(double interval) {
    rl_timer_extras *x = rl_malloc(sizeof *x);
    if (x) *x = (rl_timer_extras){.interval = interval};
    return x;
}

/* t's extras, made now if it has none: NULL when there is no memory for them. Any thread: a
 * thread that loses the race to install them frees its own. */
static rl_timer_extras *need_extras(rl_timer_t *t) {
    rl_timer_extras *x = extras_of(t);
    if (x) return x;
    rl_timer_extras *mine = new_extras(0);
    if (!mine) return NULL;
    if (atomic_compare_exchange_strong_explicit(&t->extras, &x, mine, memory_order_acq_rel, memory_order_acquire))
        return mine;
    free(mine);
    return x;
}

/* The interval of t, whose bits are bits. */
static inline double interval_of(const rl_timer_t *t, unsigned char bits) {
    return (bits & RL_TIMER_REPEATS) ? extras_of(t)->interval : 0;
}

_Static_assert(sizeof(struct rl_timer) <= RL_TIMER_STORAGE_SIZE, "crunloop.h's RL_TIMER_STORAGE_SIZE is too small");
_Static_assert(_Alignof(struct rl_timer) <= 8, "crunloop.h promises a timer needs 8-byte alignment at most");

/* Make t a valid timer in no loop, its info not set; the arguments are checked, and fire_date is
 * the date it keeps (clamped already, or kept as given). extras: a repeating timer's, with its
 * interval; NULL for any other. */
static inline void init_timer(rl_timer_t *t, double fire_date, rl_timer_extras *extras, long order,
                              const rl_timer_record *record, unsigned char bits) {
    rl_object_init(&t->obj, RL_TYPE_TIMER);
    atomic_init(&t->obj.bits, bits | (extras ? RL_TIMER_REPEATS : 0));
    atomic_init(&t->fire_date, fire_date);
    atomic_init(&t->extras, extras);
    atomic_init(&t->loop, NULL);
    t->record = record;
    t->first = (rl_timer_entry){.node = {.order = order, .index = RL_HEAP_NOT_IN_HEAP}};
}

/* Every tuple of callback, retain, release and done that timers were made with, each once: a
 * list that only grows (a program names few callbacks; Swift's timers all share one), pushed
 * lock-free, so that making a timer takes no lock and fork need not know of the list. Each
 * thread remembers the record it last found, so that making timers with one callback (a server's
 * idle timeouts) does not walk the list. */
static _Atomic(const rl_timer_record *) records;
static _Thread_local const rl_timer_record *last_record __attribute__((tls_model("initial-exec"))); /* as rl_tls_loop */

static inline bool record_is(const rl_timer_record *r, rl_timer_callback_t callback, const void *(*retain)(const void *),
                             void (*release)(const void *), void (*done)(void *), unsigned char flags) {
    return r->callback == callback && r->retain == retain && r->release == release && r->done == done &&
           r->flags == flags;
}

static __attribute__((noinline)) const rl_timer_record *find_record(rl_timer_callback_t callback,
    const void *(*retain)(const void *), void (*release)(const void *), void (*done)(void *), unsigned char flags) {
    const rl_timer_record *head = atomic_load_explicit(&records, memory_order_acquire);
    for (const rl_timer_record *r = head; r; r = r->next)
        if (record_is(r, callback, retain, release, done, flags)) return last_record = r;
    rl_timer_record *r = rl_malloc(sizeof *r);
    if (!r) return NULL;
    *r = (rl_timer_record){
        .callback = callback, .retain = retain, .release = release, .done = done, .next = head, .flags = flags};
    /* A tuple pushed meanwhile by another thread may now be listed twice: harmless. */
    while (!atomic_compare_exchange_weak_explicit(&records, &head, r, memory_order_release, memory_order_acquire))
        r->next = head;
    return last_record = r;
}

/* The record of a tuple: the thread's last, else from the list (stored there if new). NULL when
 * a new record cannot be stored (ENOMEM). */
static inline __attribute__((always_inline)) const rl_timer_record *record_for(rl_timer_callback_t callback, const void *(*retain)(const void *),
                                                void (*release)(const void *), void (*done)(void *),
                                                unsigned char flags) {
    const rl_timer_record *r = last_record;
    if (__builtin_expect(r && record_is(r, callback, retain, release, done, flags), 1)) return r;
    return find_record(callback, retain, release, done, flags);
}

/* Whether interval makes a repeating timer (INFINITY, as 0, makes a one-shot timer). */
static inline bool repeats(double interval) {
    return __builtin_expect(interval > 0, 0) && interval != INFINITY; /* two compares (never NaN: checked) */
}

/* A valid timer in no loop with record, its info not set; NULL with errno set (nothing left of
 * it). The caller has checked the arguments. A repeating timer gets its extras now. */
static inline __attribute__((always_inline)) rl_timer_t *new_timer(double fire_date, double interval, long order,
                                                                   const rl_timer_record *record, unsigned char bits) {
    rl_timer_t *t = record ? rl_malloc(sizeof *t) : NULL;
    rl_timer_extras *x = NULL;
    if (!t || (repeats(interval) && !(x = new_extras(interval)))) {
        free(t);
        errno = ENOMEM;
        return NULL;
    }
    init_timer(t, not_before_now(fire_date), x, order, record, bits);
    return t;
}

static inline bool bad_args(rl_timer_callback_t callback, double fire_date, double interval) {
    if (callback && !bad_time(fire_date) && !bad_time(interval)) return false;
    errno = EINVAL;
    return true;
}

rl_timer_t *rl_timer_create(double fire_date, double interval, long order,
                            rl_timer_callback_t callback, const rl_context_t *context) {
    if (bad_args(callback, fire_date, interval)) return NULL;
    const void *(*retain)(const void *) = context ? context->retain : NULL;
    rl_timer_t *t = new_timer(fire_date, interval, order,
                              record_for(callback, retain, context ? context->release : NULL, NULL, 0), RL_TIMER_VALID);
    if (!t) return NULL;
    t->info = context ? context->info : NULL;
    if (retain) t->info = (void *)retain(context->info);
    return t;
}

rl_timer_t *rl_timer_create_held(double fire_date, double interval, long order,
                                 rl_timer_callback_t callback, const rl_context_t *context) {
    if (!context || (!context->retain && !context->release))
        return rl_timer_create(fire_date, interval, order, callback, context);
    if (bad_args(callback, fire_date, interval)) return NULL; /* EINVAL before ENOMEM */
    rl_timer_t *t = new_timer(fire_date, interval, order, record_for(callback, context->retain, context->release, NULL, 0),
                              RL_TIMER_VALID | RL_TIMER_HELD);
    if (!t) return NULL;
    t->info = context->info;
    return t;
}

/* A timeout is a one-shot timer marked TIMEOUT: no other field differs. */
rl_timer_t *rl_timer_create_timeout(double fire_date, long order, rl_timer_callback_t callback,
                                    const rl_context_t *context) {
    rl_timer_t *t = rl_timer_create(fire_date, 0, order, callback, context);
    if (t) atomic_fetch_or_explicit(&t->obj.bits, RL_TIMER_TIMEOUT, memory_order_relaxed);
    return t;
}

rl_timer_t *rl_timer_create_timeout_held(double fire_date, long order, rl_timer_callback_t callback,
                                         const rl_context_t *context) {
    rl_timer_t *t = rl_timer_create_held(fire_date, 0, order, callback, context);
    if (t) atomic_fetch_or_explicit(&t->obj.bits, RL_TIMER_TIMEOUT, memory_order_relaxed);
    return t;
}

/* A timer in the caller's memory keeps the caller's done in its record, with its callback, its
 * context's functions and whether its context owns it (RL_TIMER_IN_OWNED_BY_CONTEXT). Every case:
 * rl_timer_create_in's own path takes the usual one. */
static __attribute__((noinline)) rl_timer_t *create_in_any(const rl_timer_storage *storage, unsigned flags,
                                                           double fire_date, double interval, long order,
                                                           rl_timer_callback_t callback, const rl_context_t *context) {
    if (!storage || !storage->memory || !storage->done || storage->size < sizeof(struct rl_timer) ||
        (uintptr_t)storage->memory % _Alignof(struct rl_timer) ||
        (flags & ~(unsigned)(RL_TIMER_IN_HELD | RL_TIMER_IN_TIMEOUT | RL_TIMER_IN_DATE_AS_GIVEN |
                             RL_TIMER_IN_OWNED_BY_CONTEXT)) ||
        ((flags & RL_TIMER_IN_OWNED_BY_CONTEXT) && !(flags & RL_TIMER_IN_HELD)) ||
        ((flags & RL_TIMER_IN_TIMEOUT) && interval != 0) || !callback || bad_time(fire_date) ||
        bad_time(interval)) {
        errno = EINVAL;
        return NULL;
    }
    const void *(*retain)(const void *) = context ? context->retain : NULL;
    void (*release)(const void *) = context ? context->release : NULL;
    bool held = (flags & RL_TIMER_IN_HELD) && (retain || release);
    const rl_timer_record *record = record_for(callback, retain, release, storage->done,
                                               held && (flags & RL_TIMER_IN_OWNED_BY_CONTEXT) ? RL_RECORD_CONTEXT_OWNS : 0);
    rl_timer_extras *x = NULL;
    if (!record || (repeats(interval) && !(x = new_extras(interval)))) {
        errno = ENOMEM;
        return NULL;
    }
    unsigned char bits = RL_TIMER_VALID | RL_TIMER_IN_STORAGE | (held ? RL_TIMER_HELD : 0) |
                         (flags & RL_TIMER_IN_TIMEOUT ? RL_TIMER_TIMEOUT : 0);
    rl_timer_t *t = storage->memory;
    init_timer(t, flags & RL_TIMER_IN_DATE_AS_GIVEN ? fire_date : not_before_now(fire_date), x, order, record, bits);
    t->info = context ? context->info : NULL;
    if (!held && retain) t->info = (void *)retain(t->info);
    return t;
}

/* The usual call, with no call of its own but the clock's: a one-shot timer or a timeout (no
 * extras), in good storage, made with the thread's last record (a server's timeouts, every Swift
 * timer), whose context is held or has no retain (none to call). Anything else, a bad argument
 * included, is create_in_any's. The date is clamped last, once the timer is made, so that the
 * clock's call comes after every check. */
rl_timer_t *rl_timer_create_in(const rl_timer_storage *storage, unsigned flags, double fire_date, double interval,
                               long order, rl_timer_callback_t callback, const rl_context_t *context) {
    const rl_timer_record *r = last_record;
    enum { KNOWN = RL_TIMER_IN_HELD | RL_TIMER_IN_TIMEOUT | RL_TIMER_IN_DATE_AS_GIVEN | RL_TIMER_IN_OWNED_BY_CONTEXT };
    if (__builtin_expect(!r || !storage || !context || (flags & ~(unsigned)KNOWN) || interval != 0 || bad_time(fire_date), 0))
        return create_in_any(storage, flags, fire_date, interval, order, callback, context);
    void *memory = storage->memory;
    const void *(*retain)(const void *) = context->retain;
    void (*release)(const void *) = context->release;
    bool held = (flags & RL_TIMER_IN_HELD) && (retain || release);
    unsigned char record_flags = held && (flags & RL_TIMER_IN_OWNED_BY_CONTEXT) ? RL_RECORD_CONTEXT_OWNS : 0;
    if (__builtin_expect(!memory || !storage->done || storage->size < sizeof(struct rl_timer) ||
                             (uintptr_t)memory % _Alignof(struct rl_timer) || (!held && retain) ||
                             ((flags & RL_TIMER_IN_OWNED_BY_CONTEXT) && !(flags & RL_TIMER_IN_HELD)) ||
                             !callback || !record_is(r, callback, retain, release, storage->done, record_flags),
                         0))
        return create_in_any(storage, flags, fire_date, interval, order, callback, context);
    unsigned char bits = RL_TIMER_VALID | RL_TIMER_IN_STORAGE | (held ? RL_TIMER_HELD : 0) |
                         (flags & RL_TIMER_IN_TIMEOUT ? RL_TIMER_TIMEOUT : 0);
    rl_timer_t *t = memory;
    init_timer(t, fire_date, NULL, order, r, bits);
    t->info = context->info;
    if (!(flags & RL_TIMER_IN_DATE_AS_GIVEN) && fire_date != INFINITY) {
        double now = rl_time_now();
        if (fire_date < now) atomic_store_explicit(&t->fire_date, now, memory_order_relaxed);
    }
    return t;
}

bool rl_timer_is_timeout(rl_timer_t *t) {
    return t && (atomic_load_explicit(&t->obj.bits, memory_order_relaxed) & RL_TIMER_TIMEOUT);
}

/* The held timer whose final release (rl_timer_context_release_is_final) this thread runs, if any; NULL
 * once that timer is destroyed inside it (its memory may hold a new timer before it returns). */
static _Thread_local const rl_timer_t *final_release __attribute__((tls_model("initial-exec")));

void rl_timer_destroy(rl_timer_t *t) {
    /* A held timer's context was released when it left its last loop: every path that disowns
     * runs the release before it drops the loop's references. */
    unsigned char bits = atomic_load_explicit(&t->obj.bits, memory_order_relaxed);
    /* Destroyed inside its own final release (RL_TIMER_IN_OWNED_BY_CONTEXT: the context's reference
     * was the last): the address no longer names it, and done may hand the memory to a new timer
     * whose releases run inside this one. */
    if ((bits & RL_TIMER_HELD) && __builtin_expect(final_release == t, 0)) final_release = NULL;
    rl_timer_extras *x = extras_of(t);
    if (x) free(x); /* its chain is empty: no loop holds it */
    if (bits & RL_TIMER_IN_STORAGE) {
        /* The caller's memory: done hands it back, and is the last thing that touches it. */
        const rl_timer_record *record = t->record;
        if (!(bits & RL_TIMER_HELD) && record->release) record->release(t->info);
        record->done(t);
        return;
    }
    if (!(bits & RL_TIMER_HELD) && t->record->release) t->record->release(t->info);
    free(t);
}

/* ---- A held timer's context: retained as a loop claims the timer, released once it is
 * disowned and nothing locked (see RL_TIMER_RELEASE_DUE). ---- */

/* The timer was just claimed by loop (loop locked): take back a release still due from its last
 * disowning, or retain. */
static void held_claimed(rl_timer_t *t) {
    /* A load first: a release is seldom due, and a load that finds none is as good as the
     * read-modify-write (the settling thread clears the bit before it releases, so seeing it
     * clear means that release is done or under way, and this claim's retain pairs with the
     * next disowning). */
    if ((atomic_load(&t->obj.bits) & RL_TIMER_RELEASE_DUE) &&
        (atomic_fetch_and(&t->obj.bits, (unsigned char)~RL_TIMER_RELEASE_DUE) & RL_TIMER_RELEASE_DUE))
        return;
    if (t->record->retain) (void)t->record->retain(t->info);
}

/* After unlocking from anything that may have disowned t: run the context's release if it is due,
 * unless t's callout is running, whose end runs it (fire). The caller holds a reference to t. */
static void settle_held(rl_timer_t *t) {
    unsigned char bits = atomic_load(&t->obj.bits);
    do {
        if ((bits & (RL_TIMER_RELEASE_DUE | RL_TIMER_FIRING)) != RL_TIMER_RELEASE_DUE) return;
    } while (!atomic_compare_exchange_weak(&t->obj.bits, &bits, bits & ~RL_TIMER_RELEASE_DUE));
    if (t->record->release) t->record->release(t->info);
}

/* The end of t's callout: clear FIRING and the bits in clear, run a release that became due
 * during the callout. Returns the bits before. Nothing locked. */
static unsigned char end_callout(rl_timer_t *t, unsigned char clear) {
    unsigned char was = atomic_fetch_and(&t->obj.bits, (unsigned char)~(clear | RL_TIMER_FIRING | RL_TIMER_RELEASE_DUE));
    if ((was & RL_TIMER_RELEASE_DUE) && t->record->release) t->record->release(t->info);
    return was;
}

/* The timer's entry for mode, or NULL. Owner loop's lock. */
static __attribute__((noinline)) rl_timer_entry *chained_entry_for(rl_timer_t *t, const rl_mode *mode) {
    for (rl_timer_chained *c = extras_of(t)->more; c; c = c->next)
        if (is_in(&c->entry, mode)) return &c->entry;
    return NULL;
}
static inline rl_timer_entry *entry_for(rl_timer_t *t, const rl_mode *mode) {
    if (is_in(&t->first, mode)) return &t->first;
    return has_more(t) ? chained_entry_for(t, mode) : NULL;
}

static bool in_any_mode(const rl_timer_t *t) { return is_used(&t->first) || has_more(t); }

/* Another thread's change of loop's timers may have to rearm its wait (wake.c); the loop's own
 * thread rearms before it next waits, so it skips the call. */
static inline void timers_changed(rl_loop_t *loop, rl_mode *mode) {
    if (rl_tls_loop != loop) rl_wake_timers_changed(loop, mode);
}

/* Loop locked, timer owned by loop (or being taken by it). */
int rl_mode_add_timer(rl_loop_t *loop, rl_mode *mode, rl_timer_t *t) {
    if (entry_for(t, mode)) return -EEXIST;
    rl_timer_entry *e = &t->first;
    rl_timer_chained *c = NULL;
    rl_timer_extras *x = NULL;
    if (is_used(&t->first)) { /* a further mode: an entry chained from the extras */
        if (!(x = need_extras(t)) || !(c = rl_malloc(sizeof *c))) return -ENOMEM;
        *c = (rl_timer_chained){
            .entry = {.node = {.order = t->first.node.order, .index = RL_HEAP_NOT_IN_HEAP, .user = CHAINED}},
            .timer = t};
        e = &c->entry;
    }
    e->node.seq = ++loop->timer_seq;
    if (rl_heap_insert(&mode->timers, &e->node, atomic_load_explicit(&t->fire_date, memory_order_relaxed))) {
        free(c);
        return -ENOMEM;
    }
    set_mode(e, mode);
    rl_mode_items_changed(mode, 1, true);
    if (atomic_load_explicit(&t->obj.bits, memory_order_relaxed) & RL_TIMER_IDLE)
        atomic_fetch_and(&t->obj.bits, (unsigned char)~RL_TIMER_IDLE);
    if (c) { /* chained first */
        c->next = x->more;
        x->more = c;
        t->first.node.user |= MORE;
    }
    timers_changed(loop, mode);
    return 0;
}

/* Loop locked, t owned by loop. True when the timer was in mode: the caller releases it once,
 * unlocked. */
bool rl_mode_remove_timer(rl_loop_t *loop, rl_mode *mode, rl_timer_t *t) {
    rl_timer_entry *e = &t->first;
    rl_timer_chained *c = NULL, **link = NULL;
    rl_timer_extras *x = NULL;
    if (!is_in(e, mode)) {
        if (!has_more(t)) return false;
        x = extras_of(t);
        for (link = &x->more; (c = *link) && !is_in(&c->entry, mode); link = &c->next) {}
        if (!c) return false;
        e = &c->entry;
    }
    rl_heap_remove(&mode->timers, &e->node);
    rl_mode_items_changed(mode, -1, true);
    set_mode(e, NULL);
    if (c) { /* a chained entry: unlink and free it */
        *link = c->next;
        free(c);
        if (!x->more) t->first.node.user &= ~(uint32_t)MORE;
    }
    timers_changed(loop, mode);
    return true;
}

/* ---- The timer kind (membership.c): ownership by the owner pointer; entries name modes by id,
 * a place in one loop's list, so only a timer this loop owns is looked at. ---- */

static void timer_leave_if_unused(rl_loop_t *loop, rl_object *item);

/* An invalidation clears VALID, then reads the owner (both seq_cst); a claim sets the owner, then
 * reads VALID again (timer_enter), so one of the two sees the other: an invalidation that lands
 * between the claim's first check and its compare-and-swap, and found no owner, is seen here,
 * and the claim is undone (the add fails with -EINVAL), instead of leaving an invalid timer in
 * the loop for good. Out of line: seldom taken. */
static __attribute__((noinline)) int enter_invalidated(rl_loop_t *loop, rl_timer_t *t) {
    timer_leave_if_unused(loop, &t->obj); /* in no mode yet: disowned, a held one's release due */
    return -EINVAL;
}

static int timer_enter(rl_loop_t *loop, rl_object *item) {
    rl_timer_t *t = (rl_timer_t *)item;
    unsigned char bits = atomic_load(&t->obj.bits);
    if (!(bits & RL_TIMER_VALID)) return -EINVAL;
    bool had = atomic_load(&t->loop) == loop; /* only this loop's lock, held, changes that */
    int rc = rl_owner_claim(loop, &t->loop);
    if (rc || had) return rc;
    if (bits & RL_TIMER_HELD) held_claimed(t);
    if (__builtin_expect(!(atomic_load(&t->obj.bits) & RL_TIMER_VALID), 0)) return enter_invalidated(loop, t);
    return 0;
}

/* Disowning a held timer leaves its context's release due: the caller runs settle_held once it
 * has unlocked. The bit is set before the owner pointer is cleared, so a claim that sees no owner
 * sees the bit. */
static void timer_leave_if_unused(rl_loop_t *loop, rl_object *item) {
    rl_timer_t *t = (rl_timer_t *)item;
    if (atomic_load(&t->loop) != loop || in_any_mode(t)) return;
    if (loop->common_timers.count && rl_ptrset_contains(&loop->common_timers, t)) {
        /* Still the loop's (the common set holds it), but in no mode: a pass that took it as due
         * before it left its last mode must not fire it (fire() reads the bit). */
        atomic_fetch_or(&t->obj.bits, RL_TIMER_IDLE);
        return;
    }
    unsigned char bits = atomic_load_explicit(&t->obj.bits, memory_order_relaxed);
    if (bits & RL_TIMER_HELD) {
        if (t->obj.marks & RL_TIMER_CALLOUT) {
            /* Its callout is under way on loop's thread (fire() marked it under this lock): the
             * release waits for the callout's end, as settle_held and the end learn from FIRING
             * (set now, as fire() did not) and RELEASE_DUE. The mark goes with the owner: it is
             * loop's only while loop owns t, and its absence tells the end to settle. */
            t->obj.marks &= (uint8_t)~RL_TIMER_CALLOUT;
            atomic_fetch_or(&t->obj.bits, RL_TIMER_FIRING | RL_TIMER_RELEASE_DUE);
            rl_owner_clear(&t->loop);
            return;
        }
        if (!(bits & (RL_TIMER_VALID | RL_TIMER_FIRING | RL_TIMER_RELEASE_DUE))) {
            /* Invalid, and no callout under way: no claim can take the release back (only a
             * valid timer is claimed) and no callout's end can be owed it (FIRING is set only on
             * a valid timer): it falls to this disowning, whose caller runs it once unlocked
             * (take_handed). No flag, and no handshake with fire(): the release store is enough,
             * as below. A fired one-shot timer's end and an invalidation come this way. */
            loop->held_handed = t;
            atomic_store_explicit(&t->loop, NULL, memory_order_release);
            return;
        }
        atomic_fetch_or(&t->obj.bits, RL_TIMER_RELEASE_DUE);
        /* FIRING, if set, is a callout's under way that an earlier disowning during it left
         * unmarked (on this loop or another): that callout's end (its read-modify-write of
         * FIRING and RELEASE_DUE) and settle_held take the release once between them. fire()
         * reads the owner under this lock, with no handshake on FIRING. */
        rl_owner_clear(&t->loop);
        return;
    }
    /* A context the timer holds for its whole life has no such race: every other reader of the
     * owner takes the owner's lock and reads it again (rl_owner_lock), or claims it with an
     * acquiring compare-and-swap; the release store is enough, and costs no locked
     * instruction (a remove, and a one-shot timer's end, on the loop's thread). */
    atomic_store_explicit(&t->loop, NULL, memory_order_release);
}

static int timer_join(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    return rl_mode_add_timer(loop, mode, (rl_timer_t *)item);
}

static bool timer_leave(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    rl_timer_t *t = (rl_timer_t *)item;
    return atomic_load(&t->loop) == loop && rl_mode_remove_timer(loop, mode, t);
}

static bool timer_is_in(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    rl_timer_t *t = (rl_timer_t *)item;
    return atomic_load(&t->loop) == loop && entry_for(t, mode);
}

/* Any mode t is in, or NULL. Owner loop's lock. */
static rl_mode *timer_any_mode(rl_loop_t *loop, rl_object *item) {
    rl_timer_t *t = (rl_timer_t *)item;
    if (atomic_load(&t->loop) != loop) return NULL;
    if (is_used(&t->first)) return mode_of(loop, &t->first);
    return has_more(t) ? mode_of(loop, &extras_of(t)->more->entry) : NULL;
}

const rl_kind rl_timer_kind = {
    .common_set = offsetof(rl_loop_t, common_timers),
    .enter = timer_enter,
    .leave_if_unused = timer_leave_if_unused,
    .join = timer_join,
    .join_from_common_set = timer_join,
    .leave = timer_leave,
    .is_in = timer_is_in,
    .any_mode = timer_any_mode,
};

/* The held timer whose context's release a disowning under loop's lock handed over
 * (timer_leave_if_unused), taken off the loop; NULL if none. Loop locked, before the unlock. */
static inline rl_timer_t *take_handed(rl_loop_t *loop) {
    rl_timer_t *t = loop->held_handed;
    loop->held_handed = NULL;
    return t;
}
/* Its release, unlocked. */
static inline void end_handed(rl_timer_t *t) {
    if (__builtin_expect(t != NULL, 0) && t->record->release) t->record->release(t->info);
}

bool rl_timer_context_release_is_final(rl_timer_t *t) { return t && final_release == t; }

/* end_handed for a held timer that this thread invalidated and took out of its loop in one
 * locked section (a fired one-shot timer's end): no rl_timer_invalidate_held can have cleared
 * its VALID, so the release is the only end of what the context holds, and says so. t may be
 * gone once it returns: only the pointer is compared after. */
static inline void end_handed_final(rl_timer_t *t) {
    const rl_timer_t *outer = final_release;
    final_release = t;
    end_handed(t);
    final_release = outer;
}

/* rl_loop_add_timer's usual case, for the loop's own thread holding the lock: a timer that
 * belongs to no loop joins one mode named by name (not the common modes), or is refused if
 * invalid. Such a timer is in no mode, and no loop's common set (a loop disowns a timer only
 * once it left them all), so the generic add's steps shrink to a claim (with a held timer's
 * retain, as timer_enter) and one heap insertion: no hook called through the kind, no look for
 * an entry it cannot have, no chain, no wake (the loop's own thread rearms its wait itself).
 * Returns what rl_loop_add_timer returns, or ADD_ANY (positive) when the case is another: the
 * caller then takes the generic path, under the same hold of the lock, having changed nothing.
 * A failure may leave a held timer's release handed or due, as the generic add's does: the
 * caller takes it once unlocked (add_own_failed). */
enum { ADD_ANY = 1 };
static inline __attribute__((always_inline)) int add_unowned_own(rl_loop_t *loop, rl_timer_t *t, const char *name) {
    if (__builtin_expect(atomic_load_explicit(&t->loop, memory_order_relaxed) != NULL, 0) ||
        __builtin_expect(rl_mode_name_is_common(name), 0) || __builtin_expect(atomic_load_explicit(&loop->dead, memory_order_relaxed), 0))
        return ADD_ANY;
    /* An invalid timer is refused before its claim, as timer_enter refuses it: a held one's
     * context ended with it, and must not be retained again. */
    if (__builtin_expect(!(atomic_load_explicit(&t->obj.bits, memory_order_relaxed) & RL_TIMER_VALID), 0)) return -EINVAL;
    /* The claim (rl_owner_claim's compare-and-swap): another loop, or a thread marking it BUSY,
     * may have taken it since the load; the generic path sorts that out. */
    rl_loop_t *none = NULL;
    if (__builtin_expect(!atomic_compare_exchange_strong(&t->loop, &none, loop), 0)) return ADD_ANY;
    /* VALID is read again after the claim, as timer_enter reads it: an invalidation that landed
     * since the first read and found no owner is seen here, and the claim undone (-EINVAL).
     * These bits are also the ones to clear IDLE from (a loop that disowned the timer may have
     * left it set). HELD never changes; a held timer's claim retains its context (or takes back
     * a release still due) before anything can disown it again, as timer_enter's does. */
    unsigned char bits = atomic_load(&t->obj.bits);
    if (bits & RL_TIMER_HELD) held_claimed(t);
    if (__builtin_expect(!(bits & RL_TIMER_VALID), 0)) return enter_invalidated(loop, t);
    rl_mode *mode = rl_mode_find(loop, name, true);
    rl_timer_entry *e = &t->first; /* unused: the timer is in no mode */
    if (__builtin_expect(!mode, 0)) goto nomem;
    e->node.seq = ++loop->timer_seq;
    if (__builtin_expect(rl_heap_insert(&mode->timers, &e->node, atomic_load_explicit(&t->fire_date, memory_order_relaxed)), 0))
        goto nomem;
    set_mode(e, mode);
    rl_mode_items_changed(mode, 1, true);
    if (__builtin_expect(bits & RL_TIMER_IDLE, 0)) atomic_fetch_and(&t->obj.bits, (unsigned char)~RL_TIMER_IDLE);
    rl_object_retain(&t->obj); /* the mode's reference */
    return 0;
nomem:
    timer_leave_if_unused(loop, &t->obj); /* disowned again, as a failed generic add leaves it */
    return -ENOMEM;
}

/* rl_loop_add_timer's every other case, loop locked (by rl_loop_lock): the generic add, then the
 * unlock. Out of line, so that the usual case keeps a small frame. */
static __attribute__((noinline)) int add_any(rl_loop_t *loop, rl_timer_t *t, const char *name) {
    int rc = rl_members_add(loop, &rl_timer_kind, &t->obj, name, NULL);
    rl_timer_t *handed = take_handed(loop); /* a failed add that claimed t, found it invalidated */
    rl_loop_unlock(loop);
    end_handed(handed);
    if (rc) settle_held(t); /* a failed add may have claimed t, then let it go */
    RL_DEBUG_VERIFY(loop, "rl_loop_add_timer");
    return rc;
}

/* A failed short add (add_unowned_own): unlock, then run a held timer's release that the failure
 * handed over or left due, as add_any does. Out of line: seldom taken. */
static __attribute__((noinline)) int add_own_failed(rl_loop_t *loop, rl_timer_t *t, int rc) {
    rl_timer_t *handed = take_handed(loop);
    rl_loop_unlock_own(loop);
    end_handed(handed);
    settle_held(t);
    RL_DEBUG_VERIFY(loop, "rl_loop_add_timer");
    return rc;
}

int rl_loop_add_timer(rl_loop_t *loop, rl_timer_t *t, const char *name) {
    if (!loop || !t) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    if (__builtin_expect(rl_tls_loop != loop, 0)) {
        rl_loop_lock_mutex(loop);
        return add_any(loop, t, name);
    }
    rl_loop_lock_own(loop);
    if (__builtin_expect((rc = add_unowned_own(loop, t, name)) != 0, 0))
        return rc == ADD_ANY ? add_any(loop, t, name) : add_own_failed(loop, t, rc);
    rl_loop_unlock_own(loop);
    RL_DEBUG_VERIFY(loop, "rl_loop_add_timer");
    return rc;
}

/* ---- Timers an outermost fire phase took (RL_TIMER_TAKEN, internal.h): every removal below
 * keeps one reference of such a timer for the phase, so that the timers in its list live until
 * it ends although it holds no reference of its own. ---- */

/* Before taking t out of modes of loop (loop locked): whether loop's outermost fire phase took
 * t. The mark is cleared now, while t is surely loop's: once disowned, another loop may claim it
 * and its phase mark it. */
static inline bool untake_owned(rl_timer_t *t) {
    if (__builtin_expect(!(t->obj.marks & RL_TIMER_TAKEN), 1)) return false;
    t->obj.marks &= (uint8_t)~RL_TIMER_TAKEN;
    return true;
}
/* The same for a t that loop may not own (then another loop's lock guards its marks). */
static inline bool untake(rl_loop_t *loop, rl_timer_t *t) {
    return atomic_load_explicit(&t->loop, memory_order_relaxed) == loop && untake_owned(t);
}

static __attribute__((noinline, noreturn)) void phase_overflow(rl_loop_t *loop) {
    fprintf(stderr, "crunloop: loop %p: a fire phase was handed more references than it took timers (%zu)\n",
            (void *)loop, loop->phase_deferred_cap);
    abort();
}

/* After the removal (loop still locked), which dropped releases references of t: how many the
 * caller releases, unlocked. A taken timer hands one to the phase, which releases it as it ends
 * (unless the phase was abandoned: then they all go now); one that lost none is still loop's,
 * and still taken. */
static inline size_t keep_for_phase(rl_loop_t *loop, rl_timer_t *t, bool taken, size_t releases) {
    if (__builtin_expect(!taken, 1)) return releases;
    if (!releases) {
        if (atomic_load_explicit(&t->loop, memory_order_relaxed) == loop) t->obj.marks |= RL_TIMER_TAKEN;
        return 0;
    }
    if (!loop->phase_deferred) return releases;
    if (__builtin_expect(loop->phase_deferred_n == loop->phase_deferred_cap, 0)) phase_overflow(loop);
    loop->phase_deferred[loop->phase_deferred_n++] = t;
    return releases - 1;
}

/* rl_loop_remove_timer's removal of a timer that was marked taken (untake cleared the mark):
 * out of line, so that the usual removal keeps its registers. */
static __attribute__((noinline)) size_t remove_taken(rl_loop_t *loop, rl_timer_t *t, const char *name, size_t *removed) {
    *removed = rl_members_remove(loop, &rl_timer_kind, &t->obj, name);
    return keep_for_phase(loop, t, true, *removed);
}

int rl_loop_remove_timer(rl_loop_t *loop, rl_timer_t *t, const char *name) {
    if (!loop || !t) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    rl_loop_lock(loop);
    size_t removed, releases;
    if (__builtin_expect(untake(loop, t), 0)) releases = remove_taken(loop, t, name, &removed);
    else releases = removed = rl_members_remove(loop, &rl_timer_kind, &t->obj, name);
    rl_timer_t *handed = take_handed(loop);
    rl_loop_unlock(loop);
    end_handed(handed);
    if (!removed) return -ENOENT;
    settle_held(t);
    while (releases--) rl_release(t);
    RL_DEBUG_VERIFY(loop, "rl_loop_remove_timer");
    return 0;
}

bool rl_loop_contains_timer(rl_loop_t *loop, rl_timer_t *t, const char *name) {
    if (!loop || !t || rl_mode_check_name(name)) return false;
    rl_loop_lock(loop);
    bool in = rl_members_contains(loop, &rl_timer_kind, &t->obj, name);
    rl_loop_unlock(loop);
    return in;
}

/* Take t out of every mode of loop, its owner, and out of its common set; disown it. Loop
 * locked, t owned by loop. Returns how many references the memberships held, less the one a fire
 * phase keeps (keep_for_phase): the caller releases them unlocked. */
static inline __attribute__((always_inline)) size_t leave_loop(rl_loop_t *loop, rl_timer_t *t, rl_timer_t **handed) {
    bool taken = untake_owned(t);
    size_t releases = keep_for_phase(loop, t, taken, rl_members_leave_loop(loop, &rl_timer_kind, &t->obj));
    *handed = take_handed(loop);
    return releases;
}

void rl_timer_remove_from_loop(rl_loop_t *loop, rl_timer_t *t) {
    size_t releases = 0;
    rl_timer_t *handed = NULL;
    rl_loop_lock(loop);
    if (atomic_load(&t->loop) == loop) releases = leave_loop(loop, t, &handed);
    rl_loop_unlock(loop);
    end_handed(handed);
    settle_held(t);
    while (releases--) rl_release(t);
}

/* An invalidated timer leaves its loop. The caller's reference keeps t alive until the
 * memberships' references go, last. */
/* rl_owner_unlock, verifying the loop in between in debug builds (after changes of a timer's
 * membership or date: `where` names the call). */
static void unlock_verified(rl_timer_t *t, rl_loop_t *loop, const char *where) {
#ifdef RL_DEBUG
    if (loop) {
        rl_loop_unlock(loop);
        RL_DEBUG_VERIFY(loop, where);
        rl_owner_put(loop);
        return;
    }
#else
    (void)where;
#endif
    rl_owner_unlock(&t->loop, loop);
}

static void leave_owner(rl_timer_t *t) {
    rl_loop_t *loop = rl_owner_lock(t, &t->loop);
    rl_timer_t *handed = NULL;
    size_t releases = loop ? leave_loop(loop, t, &handed) : 0;
    unlock_verified(t, loop, "rl_timer_invalidate");
    end_handed(handed);
    settle_held(t);
    while (releases--) rl_release(t);
}

void rl_timer_invalidate(rl_timer_t *t) {
    if (t && atomic_fetch_and(&t->obj.bits, (unsigned char)~RL_TIMER_VALID) & RL_TIMER_VALID) leave_owner(t);
}

/* Whether a release of t's context follows the invalidation: one was made due here (t was in a
 * loop), or one was due already (t left its last loop and that release has not begun, or waits
 * for t's callout under way). Read with t's owner held, so no claim can take the release back;
 * a settling thread that clears the bit after this read calls the release after it too, and
 * finds t invalid. */
bool rl_timer_invalidate_held(rl_timer_t *t) {
    if (!t || !(atomic_fetch_and(&t->obj.bits, (unsigned char)~RL_TIMER_VALID) & RL_TIMER_VALID)) return false;
    rl_loop_t *loop = rl_owner_lock(t, &t->loop);
    rl_timer_t *handed = NULL;
    size_t releases = loop ? leave_loop(loop, t, &handed) : 0;
    unsigned char bits = atomic_load(&t->obj.bits);
    bool follows = (bits & RL_TIMER_HELD) && (loop || (bits & RL_TIMER_RELEASE_DUE));
    unlock_verified(t, loop, "rl_timer_invalidate_held");
    end_handed(handed); /* the release that follows runs here */
    settle_held(t);
    while (releases--) rl_release(t);
    return !follows;
}

bool rl_timer_is_valid(rl_timer_t *t) { return t && is_valid(t); }

double rl_timer_get_next_fire_date(rl_timer_t *t) {
    return t ? atomic_load_explicit(&t->fire_date, memory_order_relaxed) : 0;
}

/* Reposition every entry of a timer in more than one mode at date. Owner loop locked. */
static __attribute__((noinline)) void set_fire_date_of_entries(rl_loop_t *loop, rl_timer_t *t, double date) {
    for (rl_timer_entry *e = &t->first; e; e = rl_timer_entry_after(t, e)) {
        if (!is_used(e)) continue;
        rl_mode *mode = mode_of(loop, e);
        e->node.seq = ++loop->timer_seq;
        rl_heap_update(&mode->timers, &e->node, date);
        timers_changed(loop, mode);
    }
}

/* Set the fire date and reposition every entry. Owner locked (loop, or the item lock). own: the
 * caller is loop's thread (known at compile time), which rearms its wait itself. */
static inline __attribute__((always_inline)) void set_fire_date_as(rl_loop_t *loop, rl_timer_t *t, double date, bool own) {
    atomic_store_explicit(&t->fire_date, date, memory_order_relaxed);
    if (!loop) return;
    uint32_t user = t->first.node.user; /* in one mode (most timers): a mode and no chain */
    if (__builtin_expect((user & MORE) || !(user >> SHIFT), 0)) {
        set_fire_date_of_entries(loop, t, date);
        return;
    }
    rl_mode *mode = mode_of(loop, &t->first); /* in one mode: most timers */
    t->first.node.seq = ++loop->timer_seq;
    rl_heap_update(&mode->timers, &t->first.node, date);
    if (!own) timers_changed(loop, mode);
}
static inline __attribute__((always_inline)) void set_fire_date_locked(rl_loop_t *loop, rl_timer_t *t, double date) {
    set_fire_date_as(loop, t, date, false);
}

/* Move t's date on the loop's own thread (self), whose loop t was seen to be in: no stripe, no
 * reference, no retry, and the loop's fast section rather than its mutex (internal.h). The owner
 * pointer only changes under the owner's lock, so once locked it is read once more: false when t
 * left self meanwhile. */
static inline __attribute__((always_inline)) bool move_date_own(rl_loop_t *self, rl_timer_t *t, double date,
                                                                 const char *where) {
    rl_loop_lock_own(self);
    if (__builtin_expect(atomic_load_explicit(&t->loop, memory_order_relaxed) != self, 0)) {
        rl_loop_unlock_own(self);
        return false;
    }
    set_fire_date_as(self, t, date, true);
    rl_loop_unlock_own(self);
    RL_DEBUG_VERIFY(self, where);
    (void)where;
    return true;
}

/* Move t's date: move_date_own on the loop's own thread; from any other thread, or for a timer
 * in no loop, through rl_owner_lock. */
static void move_date(rl_timer_t *t, double date, const char *where) {
    rl_loop_t *self = rl_tls_loop;
    if (__builtin_expect(self && atomic_load_explicit(&t->loop, memory_order_acquire) == self, 1) &&
        __builtin_expect(move_date_own(self, t, date, where), 1))
        return;
    rl_loop_t *loop = rl_owner_lock(t, &t->loop);
    set_fire_date_locked(loop, t, date);
    unlock_verified(t, loop, where);
}

int rl_timer_set_next_fire_date(rl_timer_t *t, double date) {
    if (!t || bad_time(date) || !is_valid(t)) return -EINVAL;
    move_date(t, isinf(date) ? date : not_before_now(date), "rl_timer_set_next_fire_date");
    return 0;
}

int rl_timer_set_next_fire_in(rl_timer_t *t, double seconds) {
    if (!t || bad_time(seconds) || !is_valid(t)) return -EINVAL;
    /* The one clock reading (never before now), and none to park a timer. */
    move_date(t, isinf(seconds) ? seconds : rl_time_now() + seconds, "rl_timer_set_next_fire_in");
    return 0;
}

/* Re-arm t seconds after the loop's time when the caller is t's loop's thread (confirmed once
 * locked): inside a callout the clock its phase began with; outside one, the loop's last reading
 * when cached (rl_timer_rearm_from_loop_time: no clamp, a date gone already is due at the next
 * pass), else the clock. Elsewhere the clock, and none to park it (INFINITY). */
static inline __attribute__((always_inline)) int rearm(rl_timer_t *t, double seconds, bool cached, const char *where) {
    if (!t || bad_time(seconds) || !is_valid(t)) return -EINVAL;
    rl_loop_t *self = rl_tls_loop;
    if (__builtin_expect(self && atomic_load_explicit(&t->loop, memory_order_acquire) == self, 1)) {
        double base = self->phase_time > 0 || isinf(seconds) ? self->phase_time : cached ? self->time : rl_time_now();
        if (__builtin_expect(move_date_own(self, t, base + seconds, where), 1)) return 0;
    }
    move_date(t, isinf(seconds) ? seconds : rl_time_now() + seconds, where);
    return 0;
}

int rl_timer_rearm(rl_timer_t *t, double seconds) { return rearm(t, seconds, false, "rl_timer_rearm"); }

int rl_timer_rearm_from_loop_time(rl_timer_t *t, double seconds) {
    return rearm(t, seconds, true, "rl_timer_rearm_from_loop_time");
}

/* t's date INFINITY and its entries parked: set_fire_date_as(self, t, INFINITY, true) with no
 * heap update's tests of where a node is and which way it goes (a park is always the same: out
 * of the heap's order, O(1); a node parked already stays) and no new seq (a parked node is in no
 * order, and arming it again gives it a new seq anyway). self owns t, locked, on its thread. */
static inline __attribute__((always_inline)) void park_own(rl_loop_t *self, rl_timer_t *t) {
    atomic_store_explicit(&t->fire_date, INFINITY, memory_order_relaxed);
    uint32_t user = t->first.node.user; /* self's to read, now that it is seen to own t */
    if (__builtin_expect(!(user & MORE) && (user >> SHIFT), 1))
        rl_heap_park_node(&mode_of(self, &t->first)->timers, &t->first.node);
    else
        set_fire_date_of_entries(self, t, INFINITY); /* every entry, or none */
}

/* rl_timer_disarm on the loop's own thread (self), for a timer of self in one mode: move_date_own
 * at INFINITY with no heap update's tests of where the node is and which way it goes (a park is
 * always the same: out of the heap's order, O(1)) and no new seq: a parked node is in no order,
 * and arming it again gives it a new seq anyway (set_fire_date_as). False, with nothing changed,
 * when t left self before the lock. A timer in several modes (or none) updates every entry. */
static inline __attribute__((always_inline)) bool disarm_own(rl_loop_t *self, rl_timer_t *t) {
    rl_loop_lock_own(self);
    if (__builtin_expect(atomic_load_explicit(&t->loop, memory_order_relaxed) != self, 0)) {
        rl_loop_unlock_own(self);
        return false;
    }
    park_own(self, t);
    rl_loop_unlock_own(self);
    RL_DEBUG_VERIFY(self, "rl_timer_disarm");
    return true;
}

int rl_timer_disarm(rl_timer_t *t) {
    if (!t || !is_valid(t)) return -EINVAL;
    rl_loop_t *self = rl_tls_loop;
    if (__builtin_expect(self && atomic_load_explicit(&t->loop, memory_order_acquire) == self, 1) &&
        __builtin_expect(disarm_own(self, t), 1))
        return 0;
    move_date(t, INFINITY, "rl_timer_disarm");
    return 0;
}

bool rl_timer_is_armed(rl_timer_t *t) {
    return t && is_valid(t) && !isinf(atomic_load_explicit(&t->fire_date, memory_order_relaxed));
}

double rl_timer_get_interval(rl_timer_t *t) {
    return t ? interval_of(t, atomic_load_explicit(&t->obj.bits, memory_order_relaxed)) : 0;
}
bool rl_timer_does_repeat(rl_timer_t *t) {
    return t && (atomic_load_explicit(&t->obj.bits, memory_order_relaxed) & RL_TIMER_REPEATS);
}
long rl_timer_get_order(rl_timer_t *t) { return t ? t->first.node.order : 0; }

static inline double tolerance_of(const rl_timer_t *t) {
    const rl_timer_extras *x = extras_of(t);
    return x ? atomic_load_explicit(&x->tolerance, memory_order_relaxed) : 0;
}

double rl_timer_get_tolerance(rl_timer_t *t) { return t ? tolerance_of(t) : 0; }

int rl_timer_set_tolerance(rl_timer_t *t, double tolerance) {
    if (!t || bad_time(tolerance) || !is_valid(t)) return -EINVAL;
    rl_timer_extras *x = extras_of(t);
    if (!x) {
        if (tolerance == 0) return 0; /* no extras: the tolerance is 0 already */
        if (!(x = need_extras(t))) return -ENOMEM;
    }
    rl_loop_t *loop = rl_owner_lock(t, &t->loop);
    atomic_store_explicit(&x->tolerance, tolerance, memory_order_relaxed);
    for (rl_timer_entry *e = &t->first; loop && e; e = rl_timer_entry_after(t, e))
        if (is_used(e)) rl_wake_timers_changed(loop, mode_of(loop, e));
    rl_owner_unlock(&t->loop, loop);
    return 0;
}

/* How late the timer of node, due at when, may fire: within its tolerance. A timer whose callout
 * is running (a nested run inside it) is passed over, as CF does, or the nested run would spin on
 * its past date. */
static bool latest_fire(const rl_heap_node *node, double when, double *until) {
    rl_timer_t *t = timer_of((rl_timer_entry *)node);
    if (atomic_load_explicit(&t->obj.bits, memory_order_relaxed) & RL_TIMER_FIRING) return false;
    *until = when + tolerance_of(t);
    return true;
}

/*
 * The date to wake for mode's timers: the earliest fire date, pushed as late as every timer's
 * window allows (rl_heap_coalesce: any timer due by the wake date w must have fire date +
 * tolerance >= w). Timers whose callout is running are passed over. The walk is capped at 32
 * timers.
 */
double rl_timers_wake_date(rl_mode *mode) { return rl_heap_coalesce(&mode->timers, latest_fire, 32); }

/* ---- The timer phase of a pass ---------------------------------------------------------------- */

/* The first point of the grid fired + k * interval strictly after now, in O(1). */
static double next_on_grid(double fired, double interval, double now) {
    double next = fired + interval;
    if (next <= now) {
        double k = floor((now - fired) / interval) + 1;
        next = fired + k * interval;
        if (next <= now) next += interval;
        if (next <= now) next = nextafter(now, INFINITY);
    }
    return next;
}

/* What fire() did: FIRED, it called out; SETTLED (outermost phase only), t is no longer marked
 * taken for the phase (fire() cleared the mark, or t left the loop) and fire() is done with it: the
 * phase must not touch t again, which may be gone. */
enum { FIRED = 1, SETTLED = 2 };

/* Fire one timer taken at now, if it is still due, valid and in this loop (an earlier callout
 * may have changed any of that); its lateness counts to found. outer: the loop's outermost phase,
 * which took t without a reference (RL_TIMER_TAKEN). Nothing locked. */
/* Whether t's callout is under way on the loop's thread (a nested run inside it). */
static bool is_firing_here(const rl_loop_t *loop, const rl_timer_t *t) {
    for (const rl_firing *f = loop->firing; f; f = f->outer)
        if (f->timer == t) return true;
    return false;
}

void rl_timers_publish_firing(rl_loop_t *loop) {
    for (rl_firing *f = loop->firing; f; f = f->outer) {
        if (f->published) continue; /* published by an earlier wait */
        atomic_fetch_or(&f->timer->obj.bits, RL_TIMER_FIRING);
        f->published = true;
    }
}

/* Takes the mark of a held timer's callout off (RL_TIMER_CALLOUT), if it is still there: loop
 * still owns t, locked by the caller (owner: t's owner, as locked), and no disowning took it
 * during the callout. False otherwise: such a disowning left FIRING and RELEASE_DUE, and the end
 * settles them (end_callout). */
static inline bool callout_mark_taken_off(rl_loop_t *loop, rl_loop_t *owner, rl_timer_t *t) {
    if (owner != loop || !(t->obj.marks & RL_TIMER_CALLOUT)) return false;
    t->obj.marks &= (uint8_t)~RL_TIMER_CALLOUT;
    return true;
}

/* The end of a held one-shot timer's callout (fire()): its invalidation and its leaving in one
 * locked section when the callout's mark is still there (nothing was made due during the
 * callout); else as any one-shot timer's. outer: the outermost phase, done with t once it left:
 * with RL_TIMER_IN_OWNED_BY_CONTEXT the loop's references then go at once, before the context's
 * release (the context, which the loop still holds, keeps t alive through them), so that a handle
 * that goes in that release finds its own reference the last (rl_release_if_last) and the memory
 * need not outlast it. t may be gone once the release has run: nothing touches it after. */
static unsigned end_held_one_shot(rl_loop_t *loop, rl_timer_t *t, bool outer) {
    rl_loop_t *owner = rl_owner_lock(t, &t->loop);
    if (__builtin_expect(!callout_mark_taken_off(loop, owner, t), 0)) {
        unlock_verified(t, owner, "rl_timer_invalidate");
        if (!(end_callout(t, RL_TIMER_VALID) & RL_TIMER_VALID)) return FIRED;
        leave_owner(t);
        return FIRED | SETTLED;
    }
    /* No release is due (a disowning would have taken the mark); FIRING is set only if a nested
     * run published the callout. */
    unsigned char was = atomic_fetch_and(&t->obj.bits, (unsigned char)~(RL_TIMER_VALID | RL_TIMER_FIRING));
    if (!(was & RL_TIMER_VALID)) {
        /* Invalidated by another thread, which waits for the lock to take it out: the release
         * falls to its disowning, which finds no mark and no callout. */
        unlock_verified(t, owner, "rl_timer_invalidate");
        return FIRED;
    }
    rl_timer_t *handed = NULL;
    size_t releases;
    bool early = outer && (t->record->flags & RL_RECORD_CONTEXT_OWNS);
    if (early) {
        (void)untake_owned(t); /* no reference for the phase: it is done with t */
        releases = rl_members_leave_loop(loop, &rl_timer_kind, &t->obj);
        handed = take_handed(loop);
    } else {
        releases = leave_loop(loop, t, &handed);
    }
    unlock_verified(t, owner, "rl_timer_invalidate");
    /* handed is t (invalid, and no callout or release due): its release is final, as this
     * thread cleared VALID */
    if (early) {
        while (releases--) rl_object_release(&t->obj); /* never the last: the context's reference remains */
        if (handed) end_handed_final(handed);
        else settle_held(t);
        return FIRED | SETTLED;
    }
    if (handed) end_handed_final(handed);
    settle_held(t);
    while (releases--) rl_release(t);
    return FIRED | SETTLED;
}

static unsigned fire(rl_loop_t *loop, rl_timer_t *t, double now, double found, bool outer) {
    double fired = atomic_load_explicit(&t->fire_date, memory_order_relaxed);
    if (!(fired <= now) || atomic_load(&t->loop) != loop) return 0;
    /* Valid, not firing already (a nested run inside its own callout), in a mode (not IDLE)
     * and, if held, no release due. A timer's callout is known to the loop's own thread from its
     * chain (loop->firing), with no locked instruction; other threads learn of it only when a run
     * inside it waits (rl_timers_publish_firing sets FIRING). A held timer's callout is also
     * marked under the loop's lock (RL_TIMER_CALLOUT, the loop's fast section: no locked
     * instruction while the loop is biased), where a disowning finds it and leaves its context's
     * release to the callout's end (timer_leave_if_unused). An invalidation from another thread
     * just after the check still sees the callout run, as in CF. */
    unsigned char bits = atomic_load(&t->obj.bits);
    bool held = bits & RL_TIMER_HELD;
    rl_firing frame = {t, loop->firing, false};
    if (__builtin_expect(held, 0)) {
        rl_loop_lock_own(loop);
        bits = atomic_load(&t->obj.bits);
        bool fires = atomic_load_explicit(&t->loop, memory_order_relaxed) == loop &&
                     (bits & ~(RL_TIMER_HELD | RL_TIMER_TIMEOUT | RL_TIMER_IN_STORAGE | RL_TIMER_REPEATS)) == RL_TIMER_VALID &&
                     !(t->obj.marks & RL_TIMER_CALLOUT);
        if (fires) t->obj.marks |= RL_TIMER_CALLOUT;
        rl_loop_unlock_own(loop);
        if (!fires) return 0;
    } else if ((bits & ~(RL_TIMER_TIMEOUT | RL_TIMER_IN_STORAGE | RL_TIMER_REPEATS)) != RL_TIMER_VALID ||
               (frame.outer && is_firing_here(loop, t))) {
        return 0;
    }
    rl_lag_late(loop, found - fired);
    loop->firing = &frame;
    __RL_IS_CALLING_OUT_TO_A_TIMER_CALLBACK_FUNCTION__(t->record->callback, t, t->info);
    loop->firing = frame.outer;
    RL_COUNT(loop, timers_fired, 1);
    if (!(bits & (RL_TIMER_REPEATS | RL_TIMER_TIMEOUT))) {
        /* A one-shot timer is invalidated as its callout returns, and stops firing, in one step;
         * leaving its owner clears its mark (or another loop's took it off). Invalidated during
         * the callout: by another thread maybe, whose removal may be still to come. */
        if (held) return end_held_one_shot(loop, t, outer);
        if (!(end_callout(t, RL_TIMER_VALID) & RL_TIMER_VALID)) return FIRED;
        leave_owner(t);
        return FIRED | SETTLED;
    }
    /* Whether the callout's end settles FIRING and RELEASE_DUE (end_callout): set by a nested
     * run's wait (published), or, for a held timer, by a disowning during the callout. */
    bool settle = frame.published;
    if (is_valid(t)) {
        /* A date set from inside the callout that is later than the one fired is kept (a timeout
         * armed again, or disarmed: INFINITY); otherwise a repeating timer goes on along its
         * grid and a timeout goes dormant. The fire phase runs on the loop's own thread: its
         * fast section while t is still this loop's (the usual case), rl_owner_lock if not. */
        rl_loop_lock_own(loop);
        rl_loop_t *owner = loop;
        if (__builtin_expect(atomic_load_explicit(&t->loop, memory_order_relaxed) != loop, 0)) {
            rl_loop_unlock_own(loop);
            owner = rl_owner_lock(t, &t->loop);
        }
        if (held && !callout_mark_taken_off(loop, owner, t)) settle = true;
        if (atomic_load_explicit(&t->fire_date, memory_order_relaxed) > fired) {
            /* moved on by the callout: kept */
        } else if (__builtin_expect(!(bits & RL_TIMER_REPEATS) && owner == loop, 1)) {
            park_own(loop, t); /* the phase parked it already, unless it was put back */
        } else {
            set_fire_date_locked(owner, t, (bits & RL_TIMER_REPEATS) ? next_on_grid(fired, interval_of(t, bits), rl_time_now())
                                                                    : INFINITY);
        }
        if (owner != loop) {
            rl_owner_unlock(&t->loop, owner);
        } else if (!outer) {
            rl_loop_unlock_own(loop);
        } else {
            /* Done with t while it is still locked: its mark goes (so the phase's end need not
             * come back to it) and its callout ends, since from the unlock on a removal may drop
             * its last reference. A release due (none is while this loop owns a held timer: a
             * claim takes it back) runs unlocked, from what was read under the lock. */
            t->obj.marks &= (uint8_t)~RL_TIMER_TAKEN;
            if (!settle) { /* FIRING was never set: nothing to end */
                rl_loop_unlock_own(loop);
                return FIRED | SETTLED;
            }
            void (*release)(const void *) = t->record->release;
            const void *info = t->info;
            unsigned char was = atomic_fetch_and(&t->obj.bits, (unsigned char)~(RL_TIMER_FIRING | RL_TIMER_RELEASE_DUE));
            rl_loop_unlock_own(loop);
            if ((was & RL_TIMER_RELEASE_DUE) && release) release(info);
            return FIRED | SETTLED;
        }
    } else if (held) {
        /* Invalidated during the callout: by the callout or a disowning (the mark went with it),
         * or by another thread that has yet to take it out (the mark goes now, and the release
         * falls to that disowning). */
        rl_loop_t *owner = rl_owner_lock(t, &t->loop);
        if (!callout_mark_taken_off(loop, owner, t)) settle = true;
        rl_owner_unlock(&t->loop, owner);
    }
    if (settle) (void)end_callout(t, 0);
    return FIRED;
}

enum { FIRE_AHEAD = 8 };
/* A heap of more slots than this (256 KB) is taken to be larger than the caches. */
enum { FAR_SLOTS = 16384 };
/* How far ahead the phase's marking loop loads a slot in such a heap (its node twice as far). */
enum { FAR_AHEAD = 12 };

/* The due timers a pass takes: a list that starts on the stack (or in the loop's spare buffer)
 * and doubles. An allocated list has room for as many again after its cap: the radix sort's
 * scratch. */
typedef struct {
    rl_due_timer *due, *inline_due;
    size_t n, cap;
    bool complete; /* false once a timer did not fit (out of memory) */
} due_list;

/* The largest list a loop keeps for its next fire phase (with its scratch: 192 KB). */
enum { SPARE_DUE_MAX = 4096 };

/* rl_heap_visit_due's visit: take the timer of slot. One that does not fit in the list (out of
 * memory) is left for the next pass, with its subtree, so what fires now is still a prefix of
 * the order. */
static bool take_due(void *ctx, const rl_heap_slot *slot) {
    due_list *l = ctx;
    if (l->n == l->cap) {
        rl_due_timer *grown = rl_malloc(4 * l->cap * sizeof *grown); /* and the scratch */
        if (!grown) {
            l->complete = false;
            return false;
        }
        memcpy(grown, l->due, l->n * sizeof *l->due);
        if (l->due != l->inline_due) free(l->due);
        l->due = grown;
        l->cap *= 2;
    }
    l->due[l->n++] = (rl_due_timer){.key = *slot, .timer = NULL};
    return true;
}

/* A fire phase's allocated list: kept for the next phase when small enough and none is kept
 * (a nested phase may have kept its own), so that a loop firing hundreds of timers a pass
 * allocates and copies nothing for them. The loop's thread only. */
static void give_back(rl_loop_t *loop, rl_due_timer *due, size_t cap) {
    if (cap <= SPARE_DUE_MAX && !loop->fire_spare) {
        loop->fire_spare = due;
        loop->fire_spare_cap = cap;
    } else {
        free(due);
    }
}

void rl_timers_free_spare(rl_loop_t *loop) {
    free(loop->fire_spare);
    loop->fire_spare = NULL;
}

/* The end of an outermost phase: under the lock, the mark off each of the left timers (those
 * fire() did not settle) that the loop still owns (one it no longer owns lost it as it left,
 * and may carry another loop's since), and the phase's references taken off the loop; then,
 * unlocked, those references go: a timer whose last one this is is destroyed now, as CF releases
 * its array of due timers as its timer phase ends. Few timers are left in the usual case (one
 * whose fire date a callout moved or that it removed): the fast section then. */
static void end_phase(rl_loop_t *loop, const rl_due_timer *left, size_t n_left) {
    bool fast = n_left <= 32;
    if (fast) rl_loop_lock_own(loop);
    else rl_loop_lock_mutex(loop);
    for (size_t i = 0; i < n_left; i++) {
        rl_timer_t *t = left[i].timer;
        if (atomic_load_explicit(&t->loop, memory_order_relaxed) == loop) t->obj.marks &= (uint8_t)~RL_TIMER_TAKEN;
    }
    rl_timer_t **deferred = loop->phase_deferred;
    size_t n = loop->phase_deferred_n;
    loop->phase_deferred = NULL; /* ended: no phase is published */
    loop->phase_deferred_n = loop->phase_deferred_cap = 0;
    loop->taken = NULL; /* every timer it took fired or was put back */
    loop->taken_n = 0;
    atomic_store_explicit(&loop->taken_at, 0, memory_order_relaxed);
    loop->taken_mode = NULL;
    if (fast) rl_loop_unlock_own(loop);
    else rl_loop_unlock(loop);
    for (size_t i = 0; i < n; i++) rl_object_release(&deferred[i]->obj);
}

/* ---- Taken timers: the outermost phase parks the timers it took before its first callout ----
 *
 * A fired timeout is parked at INFINITY, and a fired one-shot timer leaves its mode: either way
 * its node leaves the heap's order. The outermost phase does that for all its timers as it takes
 * them, under the lock it holds for the walk that found them: their slots are fresh from that
 * walk, and a callout's fire then costs the heap nothing (a
 * timeout's park at INFINITY finds it parked; a one-shot timer's removal takes it from the low
 * end of the parked region, where the phase parked the first to fire last). The timer keeps its
 * date meanwhile: its fire date, rl_timer_is_armed and the phase's own due test read the timer.
 *
 * Until it fires, such a timer is out of the heap's view: a run, a wait or a query of the next
 * fire date made on the loop's thread inside a callout of the phase would miss it, where CF's see
 * it until it fires. So each of those puts back first what the phase has yet to fire
 * (rl_timers_restore_taken), and the phase then fires those as a nested phase would (another
 * thread's query reads the firing timer's date from the phase's list instead). Anything
 * that moves a taken timer's date (a re-arm, a disarm: rl_heap_update) or takes it out of the
 * mode sets its node right on the way; the phase puts back a timer it took and did not settle
 * (not fired, or invalidated by another thread during its callout, whose removal is to come). */

/* t's entry in mode keyed at t's date again, if it is parked while t has a date (the phase took
 * it and nothing moved it since). Loop locked. */
static void restore_taken_one(rl_loop_t *loop, rl_mode *mode, rl_timer_t *t) {
    if (atomic_load_explicit(&t->loop, memory_order_relaxed) != loop) return;
    rl_timer_entry *e = entry_for(t, mode);
    if (!e) return;
    double date = atomic_load_explicit(&t->fire_date, memory_order_relaxed);
    if (rl_heap_when(&mode->timers, &e->node) != date) rl_heap_update(&mode->timers, &e->node, date);
}

void rl_timers_restore_taken(rl_loop_t *loop) {
    for (size_t q = atomic_load_explicit(&loop->taken_at, memory_order_relaxed); q < loop->taken_n; q++)
        restore_taken_one(loop, loop->taken_mode, loop->taken[q].timer);
    loop->taken_n = 0;
    atomic_store_explicit(&loop->taken_at, 0, memory_order_relaxed);
}

/*
 * The outermost phase (no other of this loop's is under way; a callout that runs the loop makes
 * a nested one) takes its due timers without a reference: it marks each taken under the lock
 * (RL_TIMER_TAKEN), and publishes an array on the loop where the removals of marked timers leave
 * one reference each instead of releasing it (keep_for_phase), with room for one per timer taken
 * and in memory that cannot run out: beside the inline list, or the scratch half of an allocated
 * one (which the radix sort only uses before). So a timer in the list lives until the phase ends,
 * and firing k timers costs no locked instruction per timer for references (CF retains its array
 * of due timers). A nested phase retains each timer it takes and releases it after its callout,
 * and leaves the marks alone; removals in it still hand references to the outer phase.
 */
bool rl_timers_fire_due(rl_loop_t *loop, rl_run_frame *run) {
    enum { INLINE = 32 };
    rl_due_timer inline_due[INLINE];
    rl_timer_t *inline_deferred[INLINE];
    due_list list = {inline_due, inline_due, 0, INLINE, true};
    bool outer = !loop->phase_deferred; /* only this thread writes it */
    if (loop->fire_spare) { /* the last phase's list, taken (a nested phase finds none) */
        list.due = loop->fire_spare;
        list.cap = loop->fire_spare_cap;
        loop->fire_spare = NULL;
    }
    double now = rl_time_now();
    rl_loop_lock_mutex(loop);
    if (!outer) rl_timers_restore_taken_if_any(loop); /* a run inside a callout did already */
    rl_heap_visit_due(&run->mode->timers, now, take_due, &list);
    rl_due_timer *due = list.due;
    size_t n = list.n;
    bool complete = list.complete;
    if (n) {
        rl_sort_due(due, n, due != inline_due ? due + list.cap : NULL);
        /* The timers are scattered over the heap, and each mark (or retain: a locked instruction)
         * waits for its line: start loading a few ahead, so that the misses of a large batch
         * overlap. */
        if (outer) {
            /* Last to fire first: the first to fire ends lowest in the parked region, where a
             * one-shot timer's removal takes it with nothing moved (see "Taken timers"). */
            rl_heap *h = &run->mode->timers;
            /* In a heap larger than the caches the nodes and the slots each park writes all
             * miss, and a mark and a park take little time: look further ahead there, and load
             * a slot once the node that says where it is has had time to come in. */
            bool far_slots = h->capacity > FAR_SLOTS;
            size_t ahead = far_slots ? 2 * FAR_AHEAD : FIRE_AHEAD;
            for (size_t q = n; q-- > 0;) {
                if (q >= ahead) __builtin_prefetch(due[q - ahead].key.node, 1);
                if (__builtin_expect(far_slots, 0) && q >= FAR_AHEAD) {
                    uint32_t at = due[q - FAR_AHEAD].key.node->index;
                    if (at < h->capacity) __builtin_prefetch(&h->slots[at], 1);
                }
                rl_heap_node *node = due[q].key.node;
                rl_timer_t *t = timer_of((rl_timer_entry *)node);
                t->obj.marks |= RL_TIMER_TAKEN;
                due[q].timer = t;
                rl_heap_park_node(h, node);
            }
            loop->phase_deferred = due == inline_due ? inline_deferred : (rl_timer_t **)(void *)(due + list.cap);
            loop->phase_deferred_n = 0;
            loop->phase_deferred_cap = n;
            loop->taken = due;
            atomic_store_explicit(&loop->taken_at, 0, memory_order_relaxed);
            loop->taken_n = n;
            loop->taken_mode = run->mode;
        } else {
            for (size_t q = 0; q < n; q++) {
                if (q + FIRE_AHEAD < n) __builtin_prefetch(due[q + FIRE_AHEAD].key.node);
                due[q].timer = rl_retain(timer_of((rl_timer_entry *)due[q].key.node));
            }
        }
    }
    rl_loop_unlock(loop);
    if (!n) {
        if (due != inline_due) give_back(loop, due, list.cap);
        return complete;
    }
    rl_phase phase = rl_callouts_begin(loop);
    /* Lateness counts to the phase's start, one reading for all, unless a callout ran the loop
     * (a nested run counts passes): the timers after it count to its end, which may be long in
     * coming. One load per timer; the clock only after a nested run. */
    double found = phase.start;
    unsigned long long passes = atomic_load_explicit(&loop->counters.passes, memory_order_relaxed);
    unsigned fired = 0;
    size_t left = 0; /* outer: the timers fire() did not settle, gathered at the front */
    bool far = run->mode->timers.capacity > FAR_SLOTS;
    /* How far ahead the loads start: the timer, then (once its line is in) its context and
     * slot. A callout of a small batch takes longer than a miss; in a heap larger than the
     * caches, where the timers, contexts and slots all miss (and their pages too), one callout
     * ahead leaves most of each miss exposed: ten and five hide it (benchmark 9, 1e6 timers:
     * 9.4M fires/s with two and one, 11.9M with ten and five; sixteen and eight or more gain
     * nothing). */
    size_t ahead_timer = far ? 10 : 2, ahead_rest = far ? 5 : 1;
    for (size_t q = 0; q < n; q++) {
        /* The next callouts' timers and context (the user's memory, cold): load them while
         * this one runs. */
        if (q + ahead_timer < n) __builtin_prefetch(due[q + ahead_timer].timer);
        if (q + ahead_rest < n) {
            __builtin_prefetch(due[q + ahead_rest].timer->info);
            /* and, in a heap larger than the caches, its slot, which a fired timeout's park
             * reads (a node parked in its hole, in a full array) or writes (a nested phase's, a
             * timer put back): its index may be stale by then, and a prefetch of a slot that is
             * not its own costs nothing but the load. Only from the timer's first entry, inside
             * the timer, which the phase keeps: an entry of a further mode is an allocation of
             * its own, which an earlier callout's removal from that mode may have freed. */
            const rl_heap_node *next = due[q + ahead_rest].key.node;
            if (__builtin_expect(far, 0) && next == &due[q + ahead_rest].timer->first.node) {
                uint32_t at = next->index;
                if (at < run->mode->timers.count) __builtin_prefetch(&run->mode->timers.slots[at]);
            }
        }
        rl_timer_t *t = due[q].timer;
        /* A run in t's callout puts back t too, and CF's next fire date counts it. */
        if (outer) atomic_store_explicit(&loop->taken_at, q, memory_order_relaxed);
        unsigned done = fire(loop, t, now, found, outer);
        fired += done & FIRED;
        if (__builtin_expect(!(done & SETTLED), 0) && outer && loop->taken_n) {
            /* Not settled: not fired (moved, disowned, no longer due), or fired while another
             * thread invalidated it, whose removal is still to come: keyed at its date again if
             * still parked, so that the loop is as before the phase took it (the phase keeps it
             * alive until it ends). One that fire() settled is parked at INFINITY, moved along
             * its grid, or gone from the mode. */
            rl_loop_lock_own(loop);
            restore_taken_one(loop, run->mode, t);
            rl_loop_unlock_own(loop);
        }
        if (!outer) rl_object_release(&t->obj);
        else if (!(done & SETTLED)) due[left++].timer = t;
        unsigned long long p = atomic_load_explicit(&loop->counters.passes, memory_order_relaxed);
        if (__builtin_expect(p != passes, 0)) {
            passes = p;
            found = rl_time_now();
        }
    }
    if (outer) end_phase(loop, due, left);
    rl_callouts_done(loop, RL_CALLOUT_TIMER, fired, &phase);
    if (due != inline_due) give_back(loop, due, list.cap);
    return complete;
}
