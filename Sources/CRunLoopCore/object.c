/* object.c - reference counting shared by every object, the clock, the version. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RL_STR2(x) #x
#define RL_STR(x) RL_STR2(x)

const char *rl_version_string(void) {
    return RL_STR(RL_VERSION_MAJOR) "." RL_STR(RL_VERSION_MINOR) "." RL_STR(RL_VERSION_PATCH);
}

double rl_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double rl_elapsed_since(double start) { return rl_time_now() - start; }

static bool known_type(const rl_object *o) {
    return o->type == RL_TYPE_LOOP || o->type == RL_TYPE_SOURCE || o->type == RL_TYPE_TIMER ||
           o->type == RL_TYPE_OBSERVER;
}

void *rl_retain(void *object) {
    if (!object) return NULL;
    rl_object *o = object;
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
    return object;
}

void rl_release(void *object) {
    if (!object) return;
    rl_object *o = object;
    if (!known_type(o)) {
        fprintf(stderr, "crunloop: rl_release of %p, which is not an rl_* object\n", object);
        abort();
    }
    /* acq_rel rather than release + an acquire fence: the same guarantee, and ThreadSanitizer
     * does not model stand-alone fences. */
    int before = atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel);
    if (before > 1) return;
    rl_object_last_release(o, before);
}

bool rl_release_if_last(void *object) {
    if (!object) return false;
    rl_object *o = object;
    if (!known_type(o)) {
        fprintf(stderr, "crunloop: rl_release_if_last of %p, which is not an rl_* object\n", object);
        abort();
    }
    /* A load first: while other references remain (a loop's, a callout's) the answer is no, and a
     * load gives it without taking the line for a write. The type is read before it (it never
     * changes), so that the compiler need not read it again after the acquiring load. */
    uint16_t type = o->type;
    int refs = atomic_load_explicit(&o->refs, memory_order_acquire);
    if (refs > 1) return false;
    if (type != RL_TYPE_LOOP) {
        /* A count of 1 is the caller's own reference: no other exists, and an item's references
         * are only made from another one, so no thread can change the count now and the load is
         * the answer (it acquires every release before it). A loop's are also made from none
         * (rl_owner_lock retains the owner it reads under a stripe): it takes the compare-and-swap. */
        if (refs < 1) rl_object_last_release(o, refs); /* no reference left: aborts, as rl_release */
        atomic_store_explicit(&o->refs, 0, memory_order_relaxed);
        /* A timer straight to its end (a Swift timer handle's deinit, every one it makes) */
        if (type == RL_TYPE_TIMER) rl_timer_destroy((rl_timer_t *)o);
        else rl_object_last_release(o, 1);
        return true;
    }
    int one = 1;
    if (!atomic_compare_exchange_strong_explicit(&o->refs, &one, 0, memory_order_acq_rel, memory_order_relaxed)) {
        if (one < 1) rl_object_last_release(o, one); /* no reference left: aborts, as rl_release */
        return false;
    }
    rl_object_last_release(o, 1);
    return true;
}

void rl_object_last_release(rl_object *o, int before) {
    if (before < 1) {
        fprintf(stderr, "crunloop: rl_release of %p, whose references are all gone\n", (void *)o);
        abort();
    }
    switch (o->type) {
    case RL_TYPE_LOOP: rl_loop_destroy((rl_loop_t *)o); break;
    case RL_TYPE_SOURCE: rl_source_destroy((rl_source_t *)o); break;
    case RL_TYPE_TIMER: rl_timer_destroy((rl_timer_t *)o); break;
    case RL_TYPE_OBSERVER: rl_observer_destroy((rl_observer_t *)o); break;
    }
}
