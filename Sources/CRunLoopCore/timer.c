/*
 * timer.c - timers: one heap entry per mode a timer is in, keyed by (fire date, order, seq), so
 * equal fire dates go by order, then by when they were scheduled. A timer belongs to one loop at
 * a time (its owner pointer); its fields are guarded by that loop's lock, or by its item lock
 * while it has no loop (see internal.h and rl_owner_lock).
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static bool bad_time(double t) { return isnan(t) || t < 0; }

/* A date in the past means "now", as in CF: a repeating timer's grid then starts from when the
 * date was set, not from a point long gone. */
static double not_before_now(double date) {
    double now = rl_time_now();
    return date < now ? now : date;
}

rl_timer_t *rl_timer_create(double fire_date, double interval, long order,
                            rl_timer_callback_t callback, const rl_context_t *context) {
    if (!callback || bad_time(fire_date) || bad_time(interval)) {
        errno = EINVAL;
        return NULL;
    }
    rl_timer_t *t = rl_calloc(1, sizeof *t);
    if (!t) {
        errno = ENOMEM;
        return NULL;
    }
    rl_object_init(&t->obj, RL_TYPE_TIMER);
    t->order = order;
    t->interval = isinf(interval) ? 0 : interval;
    atomic_init(&t->fire_date, not_before_now(fire_date));
    atomic_init(&t->tolerance, 0.0);
    atomic_init(&t->valid, true);
    atomic_init(&t->loop, NULL);
    t->callback = callback;
    if (context) {
        t->context = *context;
        if (context->retain) t->context.info = (void *)context->retain(context->info);
    }
    rl_ptrvec_init(&t->entries);
    return t;
}

void rl_timer_destroy(rl_timer_t *t) {
    if (t->context.release) t->context.release(t->context.info);
    rl_ptrvec_free(&t->entries);
    free(t);
}

static rl_timer_entry *entry_for(rl_timer_t *t, const rl_mode *mode) {
    for (size_t i = 0; i < t->entries.count; i++) {
        rl_timer_entry *e = t->entries.items[i];
        if (e->mode == mode) return e;
    }
    return NULL;
}

static void free_entry(rl_timer_t *t, rl_timer_entry *e) {
    if (e == &t->first) t->first_used = false;
    else free(e);
}

static bool is_firing(const rl_heap_node *n) {
    return atomic_load_explicit(&((const rl_timer_entry *)n)->timer->firing, memory_order_relaxed);
}

static double tolerance_of(const rl_heap_node *n) {
    return atomic_load_explicit(&((const rl_timer_entry *)n)->timer->tolerance, memory_order_relaxed);
}

/* Loop locked, timer owned by loop (or being taken by it). */
int rl_mode_add_timer(rl_loop_t *loop, rl_mode *mode, rl_timer_t *t) {
    if (entry_for(t, mode)) return -EEXIST;
    rl_timer_entry *e = t->first_used ? rl_calloc(1, sizeof *e) : &t->first;
    if (!e) return -ENOMEM;
    if (e == &t->first) t->first_used = true;
    e->timer = t;
    e->mode = mode;
    e->node.when = atomic_load_explicit(&t->fire_date, memory_order_relaxed);
    e->node.order = t->order;
    e->node.seq = ++loop->timer_seq;
    if (rl_ptrvec_push(&t->entries, e)) {
        free_entry(t, e);
        return -ENOMEM;
    }
    if (rl_heap_insert(&mode->timers, &e->node)) {
        t->entries.count--;
        free_entry(t, e);
        return -ENOMEM;
    }
    rl_loop_timers_changed(loop, mode);
    return 0;
}

static void disown_if_unused(rl_loop_t *loop, rl_timer_t *t) {
    if (t->entries.count || rl_ptrset_contains(&loop->common_timers, t)) return;
    rl_owner_clear(t, &t->loop);
}

/* Loop locked. True when the timer was in mode: the caller releases it once, unlocked. */
bool rl_mode_remove_timer(rl_loop_t *loop, rl_mode *mode, rl_timer_t *t) {
    rl_timer_entry *e = entry_for(t, mode);
    if (!e) return false;
    rl_heap_remove(&mode->timers, &e->node);
    rl_ptrvec_remove(&t->entries, e);
    free_entry(t, e);
    rl_loop_timers_changed(loop, mode);
    return true;
}

/* Claim t for loop. Loop locked. */
static int take(rl_loop_t *loop, rl_timer_t *t) {
    if (!atomic_load(&t->valid)) return -EINVAL;
    return rl_owner_claim(loop, t, &t->loop);
}

int rl_loop_add_timer(rl_loop_t *loop, rl_timer_t *t, const char *name) {
    if (!loop || !t) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    pthread_mutex_lock(&loop->lock);
    if ((rc = take(loop, t)) == 0) {
        size_t before = t->entries.count; /* new entries are appended: undo removes from here */
        bool common = rl_mode_name_is_common(name);
        if (!common) {
            rl_mode *mode = rl_mode_find(loop, name, true);
            rc = mode ? rl_mode_add_timer(loop, mode, t) : -ENOMEM;
        } else if ((rc = rl_ptrset_add(&loop->common_timers, t)) >= 0) {
            /* rc 0: already common; it joins the common modes it was removed from by name (as
             * CF does), or the add is -EEXIST when it is in every one. */
            bool had = rc == 0;
            rc = 0;
            for (size_t i = 0; !rc && i < loop->modes.count; i++) {
                rl_mode *m = loop->modes.items[i];
                if (m->common && !entry_for(t, m)) rc = rl_mode_add_timer(loop, m, t);
            }
            if (rc) { /* all or nothing */
                while (t->entries.count > before)
                    (void)rl_mode_remove_timer(loop, ((rl_timer_entry *)t->entries.items[before])->mode, t);
                if (!had) rl_ptrset_remove(&loop->common_timers, t);
            } else if (!had) {
                rl_retain(t); /* the common set's reference */
            } else if (t->entries.count == before) {
                rc = -EEXIST;
            }
        }
        if (rc) disown_if_unused(loop, t);
        else for (size_t i = before; i < t->entries.count; i++) rl_retain(t); /* each mode's */
    }
    pthread_mutex_unlock(&loop->lock);
    RL_DEBUG_VERIFY(loop, "rl_loop_add_timer");
    return rc;
}

int rl_loop_remove_timer(rl_loop_t *loop, rl_timer_t *t, const char *name) {
    if (!loop || !t) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    size_t releases = 0;
    pthread_mutex_lock(&loop->lock);
    if (rl_mode_name_is_common(name)) {
        if (rl_ptrset_remove(&loop->common_timers, t)) {
            releases++;
            for (size_t i = 0; i < loop->modes.count; i++) {
                rl_mode *m = loop->modes.items[i];
                if (m->common && rl_mode_remove_timer(loop, m, t)) releases++;
            }
        }
    } else {
        rl_mode *mode = rl_mode_find(loop, name, false);
        if (mode && rl_mode_remove_timer(loop, mode, t)) releases++;
    }
    if (releases) disown_if_unused(loop, t);
    pthread_mutex_unlock(&loop->lock);
    if (!releases) return -ENOENT;
    while (releases--) rl_release(t);
    RL_DEBUG_VERIFY(loop, "rl_loop_remove_timer");
    return 0;
}

bool rl_loop_contains_timer(rl_loop_t *loop, rl_timer_t *t, const char *name) {
    if (!loop || !t || rl_mode_check_name(name)) return false;
    pthread_mutex_lock(&loop->lock);
    bool in;
    if (rl_mode_name_is_common(name)) {
        in = rl_ptrset_contains(&loop->common_timers, t);
    } else {
        rl_mode *m = rl_mode_find(loop, name, false);
        in = m && atomic_load(&t->loop) == loop && entry_for(t, m);
    }
    pthread_mutex_unlock(&loop->lock);
    return in;
}

void rl_timer_remove_from_loop(rl_loop_t *loop, rl_timer_t *t) {
    size_t releases = 0;
    pthread_mutex_lock(&loop->lock);
    if (atomic_load(&t->loop) == loop) {
        if (rl_ptrset_remove(&loop->common_timers, t)) releases++;
        while (t->entries.count) {
            rl_timer_entry *e = t->entries.items[0];
            if (rl_mode_remove_timer(loop, e->mode, t)) releases++;
        }
        disown_if_unused(loop, t);
    }
    pthread_mutex_unlock(&loop->lock);
    while (releases--) rl_release(t);
}

void rl_timer_invalidate(rl_timer_t *t) {
    if (!t || !atomic_exchange(&t->valid, false)) return;
    rl_retain(t);
    rl_loop_t *loop = rl_owner_lock(t, &t->loop);
    if (loop) {
        pthread_mutex_unlock(&loop->lock);
        rl_timer_remove_from_loop(loop, t);
        rl_release(loop);
    } else {
        rl_item_unlock(t);
    }
    rl_release(t);
}

bool rl_timer_is_valid(rl_timer_t *t) { return t && atomic_load(&t->valid); }

double rl_timer_get_next_fire_date(rl_timer_t *t) {
    return t ? atomic_load_explicit(&t->fire_date, memory_order_relaxed) : 0;
}

/* Set the fire date and reposition every entry. Owner locked (loop, or the item lock). */
static void set_fire_date_locked(rl_loop_t *loop, rl_timer_t *t, double date) {
    atomic_store_explicit(&t->fire_date, date, memory_order_relaxed);
    if (!loop) return;
    for (size_t i = 0; i < t->entries.count; i++) {
        rl_timer_entry *e = t->entries.items[i];
        e->node.when = date;
        e->node.seq = ++loop->timer_seq;
        rl_heap_update(&e->mode->timers, &e->node);
        rl_loop_timers_changed(loop, e->mode);
    }
}

int rl_timer_set_next_fire_date(rl_timer_t *t, double date) {
    if (!t || bad_time(date) || !atomic_load(&t->valid)) return -EINVAL;
    rl_loop_t *loop = rl_owner_lock(t, &t->loop);
    set_fire_date_locked(loop, t, not_before_now(date));
    rl_owner_unlock(t, loop);
    return 0;
}

double rl_timer_get_interval(rl_timer_t *t) { return t ? t->interval : 0; }
bool rl_timer_does_repeat(rl_timer_t *t) { return t && t->interval > 0; }
long rl_timer_get_order(rl_timer_t *t) { return t ? t->order : 0; }

double rl_timer_get_tolerance(rl_timer_t *t) {
    return t ? atomic_load_explicit(&t->tolerance, memory_order_relaxed) : 0;
}

int rl_timer_set_tolerance(rl_timer_t *t, double tolerance) {
    if (!t || bad_time(tolerance) || !atomic_load(&t->valid)) return -EINVAL;
    rl_loop_t *loop = rl_owner_lock(t, &t->loop);
    atomic_store_explicit(&t->tolerance, tolerance, memory_order_relaxed);
    for (size_t i = 0; loop && i < t->entries.count; i++)
        rl_loop_timers_changed(loop, ((rl_timer_entry *)t->entries.items[i])->mode);
    rl_owner_unlock(t, loop);
    return 0;
}

/*
 * The date to wake for mode's timers: the earliest fire date, pushed as late as every timer's
 * window allows. Any timer due by the wake date w must have fire date + tolerance >= w, so w is
 * the minimum of fire + tolerance over the timers with fire <= w; a depth-first walk from the
 * root visits only those (a subtree whose root is later than w is skipped). Timers whose callout
 * is running (a nested run inside it) are passed over, as CF does, or the nested run would spin
 * on their past date. The walk is capped: past the cap, w stops at the fire date of the first
 * node not explored, which every timer in that subtree can meet.
 */
double rl_timers_wake_date(rl_mode *mode) {
    rl_heap *h = &mode->timers;
    if (!h->count) return INFINITY;
    const rl_heap_node *top = h->nodes[0];
    if (!is_firing(top) && tolerance_of(top) == 0) return top->when; /* nothing is due earlier */
    enum { CAP = 32, STACK = 256 };
    size_t stack[STACK], depth = 0, visited = 0;
    double w = INFINITY;
    stack[depth++] = 0;
    while (depth) {
        size_t i = stack[--depth];
        const rl_heap_node *n = h->nodes[i];
        if (n->when > w) continue;
        if (!is_firing(n)) {
            if (++visited > CAP) {
                if (n->when < w) w = n->when;
                continue;
            }
            double latest = n->when + tolerance_of(n);
            if (latest < w) w = latest;
        }
        for (size_t c = i * RL_HEAP_ARITY + 1; c <= i * RL_HEAP_ARITY + RL_HEAP_ARITY && c < h->count; c++) {
            if (depth < STACK) stack[depth++] = c;
            else if (h->nodes[c]->when < w) w = h->nodes[c]->when;
        }
    }
    return w;
}

static int by_key(const void *a, const void *b) {
    const rl_heap_node *x = *(rl_heap_node *const *)a, *y = *(rl_heap_node *const *)b;
    return rl_heap_node_less(x, y) ? -1 : rl_heap_node_less(y, x);
}

bool rl_timers_collect_due(rl_mode *mode, double now, rl_ptrvec *out) {
    rl_heap *h = &mode->timers;
    out->count = 0;
    if (!h->count || h->nodes[0]->when > now) return true;
    bool complete = true;
    /* Breadth-first over the due part of the heap, using out itself as the queue of nodes. A
     * node that does not fit (out of memory) is left for the next pass, with its subtree. */
    complete &= rl_ptrvec_push(out, h->nodes[0]) == 0;
    for (size_t q = 0; q < out->count; q++) {
        size_t i = ((rl_heap_node *)out->items[q])->index;
        for (size_t c = i * RL_HEAP_ARITY + 1; c <= i * RL_HEAP_ARITY + RL_HEAP_ARITY && c < h->count; c++)
            if (h->nodes[c]->when <= now) complete &= rl_ptrvec_push(out, h->nodes[c]) == 0;
    }
    if (out->count > 1) qsort(out->items, out->count, sizeof *out->items, by_key);
    for (size_t q = 0; q < out->count; q++) {
        rl_timer_t *t = ((rl_timer_entry *)out->items[q])->timer;
        out->items[q] = rl_retain(t);
    }
    return complete;
}

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

void rl_timer_fire(rl_loop_t *loop, rl_timer_t *t, double now) {
    pthread_mutex_lock(&loop->lock);
    double fired = atomic_load_explicit(&t->fire_date, memory_order_relaxed);
    bool go = atomic_load(&t->valid) && atomic_load(&t->loop) == loop && fired <= now &&
              !atomic_exchange(&t->firing, true);
    pthread_mutex_unlock(&loop->lock);
    if (!go) return;
    __RL_IS_CALLING_OUT_TO_A_TIMER_CALLBACK_FUNCTION__(t->callback, t, t->context.info);
    RL_COUNT(loop, timers_fired, 1);
    if (t->interval == 0) {
        rl_timer_invalidate(t);
        atomic_store(&t->firing, false);
        return;
    }
    if (atomic_load(&t->valid)) {
        rl_loop_t *owner = rl_owner_lock(t, &t->loop);
        /* A date set from inside the callout that is later than the one fired is kept. */
        if (!(atomic_load_explicit(&t->fire_date, memory_order_relaxed) > fired))
            set_fire_date_locked(owner, t, next_on_grid(fired, t->interval, rl_time_now()));
        rl_owner_unlock(t, owner);
    }
    atomic_store(&t->firing, false);
}
