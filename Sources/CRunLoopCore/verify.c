/*
 * verify.c - rl_loop_verify: every invariant a loop's lock guards, checked in one walk, with a
 * message per violation (libev's ev_verify in spirit). The tests call it after each step; debug
 * builds (-DRL_DEBUG) also call it after every change of membership and abort on a violation,
 * since that is a state that cannot happen.
 */
#include "internal.h"
#include "fd_table.h"

#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *report;
    size_t size, used;
    int bad;
    const rl_loop_t *loop;
} verifier;

__attribute__((format(printf, 2, 3))) static void failf(verifier *v, const char *format, ...) {
    v->bad++;
    if (!v->report || v->used + 1 >= v->size) return;
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(v->report + v->used, v->size - v->used, format, ap);
    va_end(ap);
    if (n < 0) return;
    v->used += (size_t)n;
    if (v->used >= v->size) v->used = v->size - 1;
    else if (v->used + 1 < v->size) v->report[v->used++] = '\n', v->report[v->used] = '\0';
}

static void fail_cb(void *ctx, const char *what, long a) { failf(ctx, "%s %ld", what, a); }

#define CHECK(cond, ...) do { if (!(cond)) failf(v, __VA_ARGS__); } while (0)

/* Observers are in ascending order; equal orders in the order they joined the mode, which leaves
 * no trace to check (observer.c). */
static bool observer_not_after(const rl_observer_t *a, const rl_observer_t *b) {
    return a->order <= b->order;
}

/* The first of t's entries that is in a mode: a timer in several modes is counted once. */
static const rl_timer_entry *first_used_entry(rl_timer_t *t) {
    rl_timer_entry *f = &t->first;
    while (f && !rl_entry_mode_id1(f)) f = rl_timer_entry_after(t, f);
    return f;
}

static void verify_mode(verifier *v, rl_loop_t *loop, rl_mode *m, size_t *taken) {
    const char *why = NULL;
    CHECK(rl_heap_verify(&m->timers, &why), "mode %s: timer heap: %s", m->name, why ? why : "?");
    rl_heap_node *node;
    double when;
    /* How many of m's timers its fire phase took and has yet to settle: taken_at is read first,
     * and only grows while the lock is held here (a callout begins), so this is a bound. */
    size_t unsettled = 0, parked_with_date = 0;
    if (loop->taken_n && loop->taken_mode == m) {
        size_t at = atomic_load_explicit(&loop->taken_at, memory_order_relaxed);
        unsettled = at < loop->taken_n ? loop->taken_n - at : 0;
    }
    for (size_t i = 0; (node = rl_heap_next(&m->timers, &i, &when));) {
        rl_timer_entry *e = (rl_timer_entry *)node;
        rl_timer_t *t = rl_timer_of_node(&e->node);
        CHECK(rl_entry_mode_id1(e) == m->id + 1, "mode %s: heap entry %zu belongs to another mode", m->name,
              (size_t)e->node.index);
        CHECK(loop->modes.items[m->id] == m, "mode %s: its id is not its place", m->name);
        CHECK(atomic_load(&t->loop) == loop, "mode %s: timer %p is in the heap but owned by %p", m->name,
              (void *)t, (void *)atomic_load(&t->loop));
        bool listed = false;
        for (rl_timer_entry *f = &t->first; f; f = rl_timer_entry_after(t, f)) {
            listed |= f == e;
            CHECK(f == e || rl_entry_mode_id1(f) != m->id + 1, "mode %s: timer %p has two entries in it", m->name, (void *)t);
            CHECK(f == &t->first ? !(f->node.user & RL_ENTRY_CHAINED)
                                 : (f->node.user & RL_ENTRY_CHAINED) && !(f->node.user & RL_ENTRY_MORE) && rl_entry_mode_id1(f) &&
                                       ((rl_timer_chained *)f)->timer == t,
                  "mode %s: timer %p chains a bad entry", m->name, (void *)t);
        }
        rl_timer_extras *x = atomic_load(&t->extras);
        CHECK(!!(t->first.node.user & RL_ENTRY_MORE) == (x && x->more), "mode %s: timer %p: its first entry's MORE bit is wrong",
              m->name, (void *)t);
        CHECK(!!(atomic_load(&t->obj.bits) & RL_TIMER_REPEATS) == (x && x->interval > 0),
              "mode %s: timer %p: REPEATS and its interval disagree", m->name, (void *)t);
        CHECK(listed, "mode %s: timer %p does not list its heap entry", m->name, (void *)t);
        /* A timer the outermost phase took is parked in its mode until it fires (timer.c: taken
         * timers), its date kept in it: counted, and no more than the phase has yet to settle.
         * (It may have lost its TAKEN mark since: a removal from another mode hands the phase a
         * reference for it, and takes the mark.) */
        bool parked_dated = isinf(when) && !isinf(atomic_load(&t->fire_date));
        parked_with_date += parked_dated;
        CHECK(when == atomic_load(&t->fire_date) || parked_dated, "mode %s: timer %p keyed at %.9f, fire date %.9f",
              m->name, (void *)t, when, atomic_load(&t->fire_date));
        CHECK(e->node.order == t->first.node.order, "mode %s: timer %p keyed with another order", m->name, (void *)t);
        CHECK(!(atomic_load(&t->obj.bits) & RL_TIMER_RELEASE_DUE), "mode %s: timer %p is owned, yet its context's release is due",
              m->name, (void *)t);
        CHECK(!(atomic_load(&t->obj.bits) & RL_TIMER_IDLE), "mode %s: timer %p is in a mode, yet marked idle", m->name,
              (void *)t);
        CHECK(!(t->obj.marks & RL_TIMER_CALLOUT) || (atomic_load(&t->obj.bits) & RL_TIMER_HELD),
              "mode %s: timer %p is not held, yet its callout is marked", m->name, (void *)t);
        /* Marked taken only while the outermost fire phase that took it runs (a dead loop's may
         * have been abandoned with its marks). */
        if (t->obj.marks & RL_TIMER_TAKEN) {
            CHECK(loop->phase_deferred || loop->dead, "mode %s: timer %p is marked taken outside a fire phase", m->name,
                  (void *)t);
            if (first_used_entry(t) == e) ++*taken;
        }
    }
    CHECK(loop->dead || parked_with_date <= unsettled,
          "mode %s: %zu timers parked with a date, but its fire phase has %zu yet to settle", m->name, parked_with_date,
          unsettled);
    size_t members = 0;
    for (size_t i = 0; i < m->sources.capacity; i++) {
        rl_source_t *s = m->sources.slots[i];
        if (!s) continue;
        members++;
        CHECK(s->obj.type == RL_TYPE_SOURCE, "mode %s: a member of its sources is not a source", m->name);
        CHECK(atomic_load(&s->obj.refs) > 0, "mode %s: source %p has no reference left", m->name, (void *)s);
    }
    CHECK(members == m->sources.count, "mode %s: %zu sources counted, %zu in the set", m->name, m->sources.count, members);
    CHECK(atomic_load(&m->items) == m->sources.count + rl_heap_size(&m->timers),
          "mode %s: %zu items counted, %zu sources and %zu timers in it", m->name, (size_t)atomic_load(&m->items),
          m->sources.count, rl_heap_size(&m->timers));
    CHECK(atomic_load(&m->timer_items) == rl_heap_size(&m->timers), "mode %s: %zu timers counted, %zu in its heap",
          m->name, (size_t)atomic_load(&m->timer_items), rl_heap_size(&m->timers));
    unsigned mask = 0;
    for (size_t i = 0; i < m->observers.count; i++) {
        rl_observer_t *o = m->observers.items[i];
        mask |= o->activities;
        CHECK(atomic_load(&o->loop) == loop, "mode %s: observer %p owned by %p", m->name, (void *)o, (void *)atomic_load(&o->loop));
        CHECK(rl_ptrvec_contains(&o->modes, m), "mode %s: observer %p does not list the mode", m->name, (void *)o);
        CHECK(i == 0 || observer_not_after(m->observers.items[i - 1], o), "mode %s: observers out of order at %zu", m->name, i);
    }
    CHECK(mask == atomic_load(&m->observer_mask), "mode %s: observer mask %#x, observers want %#x", m->name,
          atomic_load(&m->observer_mask), mask);
}

static void verify_common(verifier *v, rl_loop_t *loop, const rl_ptrset *set, uint16_t type) {
    for (size_t i = 0; i < set->capacity; i++) {
        rl_object *item = set->slots[i];
        if (!item) continue;
        CHECK(item->type == type, "common set holds an item of the wrong kind");
        if (type == RL_TYPE_TIMER) CHECK(atomic_load(&((rl_timer_t *)item)->loop) == loop, "common timer not owned by the loop");
        if (type == RL_TYPE_TIMER && (atomic_load(&((rl_timer_t *)item)->obj.bits) & RL_TIMER_IDLE))
            CHECK(!(item->marks & RL_TIMER_TAKEN), "common timer %p is in no mode, yet marked taken", (void *)item);
        if (type == RL_TYPE_OBSERVER) CHECK(atomic_load(&((rl_observer_t *)item)->loop) == loop, "common observer not owned by the loop");
        /* (A common item may be missing from a common mode: CF lets it be removed from one by name.) */
    }
}

static void verify_sources_links(verifier *v, rl_loop_t *loop) {
    /* A source's links are under its lock, which ranks before the loop's: only try it. */
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        for (size_t j = 0; j < m->sources.capacity; j++) {
            rl_source_t *s = m->sources.slots[j];
            if (!s) continue;
            if (s->version == 1)
                CHECK(loop->dead || rl_fd_table_is_stale(loop, s) || s->fd < (int)loop->fds.size,
                      "fd source %p of mode %s is not in the fd table", (void *)s, m->name);
        }
    }
    /* The signal links: this loop's, of watching sources, each one's signal accepted while it
     * sleeps, and the signal eventfd watched exactly while there is one (signal.c). */
    for (size_t i = 0; i < loop->signal_links.count; i++) {
        const rl_link *l = loop->signal_links.items[i];
        CHECK(l->loop == loop, "signal link %p belongs to loop %p", (const void *)l, (void *)l->loop);
        CHECK(l->source->version == 0 && l->source->signo > 0, "signal link %p of a source that watches no signal",
              (const void *)l);
        CHECK(sigismember(&loop->signal_accept, l->source->signo) == 1, "signal %d of a source is not accepted",
              l->source->signo);
    }
    CHECK(atomic_load(&loop->signal_watch) == (loop->signal_links.count > 0),
          "signal_watch is %d with %zu signal links", (int)atomic_load(&loop->signal_watch), loop->signal_links.count);
    CHECK(loop->dead || (loop->wait.sigfd >= 0) == (loop->signal_links.count > 0),
          "the signal eventfd is %swatched with %zu signal links", loop->wait.sigfd >= 0 ? "" : "not ", loop->signal_links.count);
    for (const rl_link *l = loop->deferred; l; l = l->next) {
        CHECK(l->loop == loop, "deferred link %p belongs to loop %p", (const void *)l, (void *)l->loop);
        CHECK(atomic_load(&l->state) & RL_LINK_QUEUED, "deferred link %p is not marked queued", (const void *)l);
        CHECK(l->next || l == loop->deferred_tail, "deferred list's tail is not its last link");
    }
}

int rl_loop_verify(rl_loop_t *loop, char *report, size_t size) {
    if (!loop) return 0;
    verifier vv = {.report = report, .size = size, .loop = loop}, *v = &vv;
    if (report && size) report[0] = '\0';
    rl_loop_lock_mutex(loop);
    CHECK(loop->default_mode && loop->default_mode->common, "the default mode is missing or not common");
    size_t taken = 0;
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        verify_mode(v, loop, m, &taken);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(((rl_mode *)loop->modes.items[j])->name, m->name), "mode %s appears twice", m->name);
    }
    /* A fire phase has room for a reference from each timer it took and still marks, besides
     * those it holds (timer.c). */
    CHECK(!loop->held_handed, "a held timer's release (%p) was handed over and left on the loop", (void *)loop->held_handed);
    CHECK(loop->phase_deferred || (!loop->phase_deferred_n && !loop->phase_deferred_cap),
          "no fire phase, yet %zu of %zu deferred references", loop->phase_deferred_n, loop->phase_deferred_cap);
    CHECK(!loop->phase_deferred || taken + loop->phase_deferred_n <= loop->phase_deferred_cap,
          "a fire phase holds %zu references and %zu timers marked taken, with room for %zu", loop->phase_deferred_n, taken,
          loop->phase_deferred_cap);
    verify_common(v, loop, &loop->common_sources, RL_TYPE_SOURCE);
    verify_common(v, loop, &loop->common_timers, RL_TYPE_TIMER);
    verify_common(v, loop, &loop->common_observers, RL_TYPE_OBSERVER);
    verify_sources_links(v, loop);
    vv.bad += rl_fd_table_verify(loop, fail_cb, v);
    vv.bad += rl_blocks_verify(loop, fail_cb, v);
    for (rl_run_frame *r = loop->run; r; r = r->outer)
        CHECK(rl_ptrvec_contains(&loop->modes, r->mode), "a run is in a mode the loop does not have");
    /* A live loop holds its three kernel objects; a dead one holds all three until it is closed,
     * then none. */
    int held = (loop->wait.epfd >= 0) + (loop->wait.eventfd >= 0) + (loop->wait.timerfd >= 0);
    CHECK(held == 3 || (loop->dead && held == 0), "%s loop holds %d of its 3 kernel objects", loop->dead ? "dead" : "live", held);
    rl_loop_unlock(loop);
    return vv.bad;
}

#ifdef RL_DEBUG
void rl_debug_verify(rl_loop_t *loop, const char *where) {
    char report[2048];
    if (rl_loop_verify(loop, report, sizeof report) == 0) return;
    fprintf(stderr, "crunloop: loop %p is inconsistent after %s:\n%s", (void *)loop, where, report);
    abort();
}
#endif
