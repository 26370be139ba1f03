/* observer.c - observers: per mode, a list sorted by order (equal orders in the order they joined
 * the mode, as CF) and an activity mask, so a pass skips an activity nobody observes with one
 * load. */
#include "membership.h"
#include "lag.h"

#include <errno.h>
#include <stdlib.h>

static atomic_ullong observer_seq;

rl_observer_t *rl_observer_create(unsigned activities, bool repeats, long order,
                                  rl_observer_callback_t callback, const rl_context_t *context) {
    if (!callback || !activities || (activities & ~(unsigned)RL_ALL_ACTIVITIES)) {
        errno = EINVAL;
        return NULL;
    }
    rl_observer_t *o = rl_calloc(1, sizeof *o);
    if (!o) {
        errno = ENOMEM;
        return NULL;
    }
    rl_object_init(&o->obj, RL_TYPE_OBSERVER);
    o->activities = activities;
    o->repeats = repeats;
    o->order = order;
    o->seq = atomic_fetch_add(&observer_seq, 1);
    atomic_init(&o->valid, true);
    atomic_init(&o->loop, NULL);
    o->callback = callback;
    if (context) {
        o->context = *context;
        if (context->retain) o->context.info = (void *)context->retain(context->info);
    }
    rl_ptrvec_init(&o->modes);
    return o;
}

void rl_observer_destroy(rl_observer_t *o) {
    if (o->context.release) o->context.release(o->context.info);
    rl_ptrvec_free(&o->modes);
    free(o);
}

static void recompute_mask(rl_mode *mode) {
    unsigned mask = 0;
    for (size_t i = 0; i < mode->observers.count; i++) mask |= ((rl_observer_t *)mode->observers.items[i])->activities;
    atomic_store_explicit(&mode->observer_mask, mask, memory_order_relaxed);
}

/* Where a joining observer goes among the observers of a mode: after the last of lower or equal
 * order, so that equal orders run in the order they joined the mode, and one removed and added
 * back goes to the end of its equals (CF's __CFRunLoopAddObserver; the conformance scenario
 * obs_equal_order_by_addition). Observers that join a mode newly made common join it together,
 * from the common set, whose iteration order says nothing (CF's is its set's, arbitrary too):
 * among themselves, ties go by creation, so that the order does not depend on addresses. */
static bool before(rl_loop_t *loop, const rl_observer_t *a, const rl_observer_t *b, bool from_common_set) {
    if (a->order != b->order) return a->order < b->order;
    return from_common_set && a->seq < b->seq && rl_ptrset_contains(&loop->common_observers, b);
}

/* ---- The observer kind (membership.c): ownership by the owner pointer; o->modes lists the
 * modes it is in, in the order it joined them. ---- */

/* rl_observer_invalidate clears valid, then reads the owner; a claim sets the owner, then reads
 * valid again, so one of the two sees the other (both seq_cst): an invalidation that came between
 * the check and the claim, and found no owner, undoes the claim here (-EINVAL) rather than leave
 * an invalid observer in the loop. */
static int observer_enter(rl_loop_t *loop, rl_object *item) {
    rl_observer_t *o = (rl_observer_t *)item;
    if (!atomic_load(&o->valid)) return -EINVAL;
    bool had = atomic_load(&o->loop) == loop; /* only this loop's lock, held, changes that */
    int rc = rl_owner_claim(loop, &o->loop);
    if (rc || had || atomic_load(&o->valid)) return rc;
    rl_owner_clear(&o->loop); /* in no mode of loop yet */
    return -EINVAL;
}

static void observer_leave_if_unused(rl_loop_t *loop, rl_object *item) {
    rl_observer_t *o = (rl_observer_t *)item;
    if (atomic_load(&o->loop) != loop) return;
    if (o->modes.count || rl_ptrset_contains(&loop->common_observers, o)) return;
    rl_owner_clear(&o->loop);
}

static bool observer_is_in(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    rl_observer_t *o = (rl_observer_t *)item;
    return atomic_load(&o->loop) == loop && rl_ptrvec_contains(&o->modes, mode);
}

static int join_mode(rl_loop_t *loop, rl_mode *mode, rl_object *item, bool ties_by_creation) {
    rl_observer_t *o = (rl_observer_t *)item;
    if (observer_is_in(loop, mode, item)) return -EEXIST;
    rl_ptrvec *list = &mode->observers;
    if (rl_ptrvec_push(list, o)) return -ENOMEM;
    if (rl_ptrvec_push(&o->modes, mode)) {
        list->count--;
        return -ENOMEM;
    }
    size_t i = list->count - 1;
    for (; i > 0 && before(loop, o, list->items[i - 1], ties_by_creation); i--) list->items[i] = list->items[i - 1];
    list->items[i] = o;
    recompute_mask(mode);
    return 0;
}

static int observer_join(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    return join_mode(loop, mode, item, false);
}

static int observer_join_from_common_set(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    return join_mode(loop, mode, item, true);
}

static bool observer_leave(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    rl_observer_t *o = (rl_observer_t *)item;
    if (!observer_is_in(loop, mode, item)) return false;
    rl_ptrvec_remove(&o->modes, mode);
    rl_ptrvec_remove(&mode->observers, o);
    recompute_mask(mode);
    return true;
}

static rl_mode *observer_any_mode(rl_loop_t *loop, rl_object *item) {
    rl_observer_t *o = (rl_observer_t *)item;
    return atomic_load(&o->loop) == loop && o->modes.count ? o->modes.items[0] : NULL;
}

const rl_kind rl_observer_kind = {
    .common_set = offsetof(rl_loop_t, common_observers),
    .enter = observer_enter,
    .leave_if_unused = observer_leave_if_unused,
    .join = observer_join,
    .join_from_common_set = observer_join_from_common_set,
    .leave = observer_leave,
    .is_in = observer_is_in,
    .any_mode = observer_any_mode,
};

int rl_loop_add_observer(rl_loop_t *loop, rl_observer_t *o, const char *name) {
    if (!loop || !o) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    rl_loop_lock(loop);
    rc = rl_members_add(loop, &rl_observer_kind, &o->obj, name, NULL);
    rl_loop_unlock(loop);
    RL_DEBUG_VERIFY(loop, "rl_loop_add_observer");
    return rc;
}

int rl_loop_remove_observer(rl_loop_t *loop, rl_observer_t *o, const char *name) {
    if (!loop || !o) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    rl_loop_lock(loop);
    size_t releases = rl_members_remove(loop, &rl_observer_kind, &o->obj, name);
    rl_loop_unlock(loop);
    RL_DEBUG_VERIFY(loop, "rl_loop_remove_observer");
    if (!releases) return -ENOENT;
    while (releases--) rl_release(o);
    return 0;
}

bool rl_loop_contains_observer(rl_loop_t *loop, rl_observer_t *o, const char *name) {
    if (!loop || !o || rl_mode_check_name(name)) return false;
    rl_loop_lock(loop);
    bool in = rl_members_contains(loop, &rl_observer_kind, &o->obj, name);
    rl_loop_unlock(loop);
    return in;
}

void rl_observer_remove_from_loop(rl_loop_t *loop, rl_observer_t *o) {
    rl_loop_lock(loop);
    size_t releases = rl_members_leave_loop(loop, &rl_observer_kind, &o->obj);
    rl_loop_unlock(loop);
    RL_DEBUG_VERIFY(loop, "rl_observer_invalidate");
    while (releases--) rl_release(o);
}

void rl_observer_invalidate(rl_observer_t *o) {
    if (!o || !atomic_exchange(&o->valid, false)) return;
    rl_retain(o);
    rl_loop_t *loop = rl_owner_lock(o, &o->loop);
    if (loop) {
        rl_loop_unlock(loop);
        rl_observer_remove_from_loop(loop, o);
        rl_owner_put(loop);
    } else {
        rl_owner_unlock(&o->loop, NULL);
    }
    rl_release(o);
}

bool rl_observer_is_valid(rl_observer_t *o) { return o && atomic_load(&o->valid); }
unsigned rl_observer_get_activities(rl_observer_t *o) { return o ? o->activities : 0; }
bool rl_observer_does_repeat(rl_observer_t *o) { return o && o->repeats; }
long rl_observer_get_order(rl_observer_t *o) { return o ? o->order : 0; }

void rl_observers_notify(rl_loop_t *loop, rl_run_frame *run, unsigned activity) {
    rl_mode *mode = run->mode;
    if (!(atomic_load_explicit(&mode->observer_mask, memory_order_relaxed) & activity)) return;
    rl_ptrvec *due = &run->notify;
    due->count = 0;
    rl_loop_lock_mutex(loop);
    for (size_t i = 0; i < mode->observers.count; i++) {
        rl_observer_t *o = mode->observers.items[i];
        if ((o->activities & activity) && atomic_load(&o->valid) && !atomic_load(&o->firing) &&
            rl_ptrvec_push(due, o) == 0)
            rl_retain(o);
    }
    rl_loop_unlock(loop);
    if (!due->count) return;
    rl_phase phase = rl_callouts_begin(loop);
    size_t skipped = 0; /* counted on the rare path: the callouts are the rest */
    for (size_t i = 0; i < due->count; i++) {
        rl_observer_t *o = due->items[i];
        if (atomic_load(&o->valid) && !atomic_exchange(&o->firing, true)) {
            __RL_IS_CALLING_OUT_TO_AN_OBSERVER_CALLBACK_FUNCTION__(o->callback, o, activity, o->context.info);
            if (!o->repeats) rl_observer_invalidate(o);
            atomic_store(&o->firing, false);
        } else {
            skipped++;
        }
        rl_release(o);
    }
    rl_callouts_done(loop, RL_CALLOUT_OBSERVER, (unsigned)(due->count - skipped), &phase);
    due->count = 0;
}
