/* membership.c - the parts of membership.h that are not hot: whether a loop holds an item at
 * all, joining the common modes, and a new common mode taking in every common item. */
#include "membership.h"

const rl_kind *rl_kind_of(const rl_object *item) {
    if (item->type == RL_TYPE_TIMER) return &rl_timer_kind;
    if (item->type == RL_TYPE_OBSERVER) return &rl_observer_kind;
    return &rl_source_kind;
}

bool rl_members_in_loop(rl_loop_t *loop, const rl_kind *kind, rl_object *item) {
    if (rl_ptrset_contains(rl_members_common_set(loop, kind), item)) return true;
    for (size_t i = 0; i < loop->modes.count; i++)
        if (kind->is_in(loop, loop->modes.items[i], item)) return true;
    return false;
}

int rl_members_add_common(rl_loop_t *loop, const rl_kind *kind, rl_object *item, bool had, rl_ptrvec *joined) {
    rl_ptrset *set = rl_members_common_set(loop, kind);
    size_t before = joined->count;
    int rc = had ? 0 : rl_ptrset_add(set, item) < 0 ? -ENOMEM : 0;
    for (size_t i = 0; !rc && i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        if (!m->common || kind->is_in(loop, m, item)) continue;
        if (rl_ptrvec_push(joined, m)) rc = -ENOMEM;
        else if ((rc = kind->join(loop, m, item)) != 0) joined->count--;
    }
    if (rc) { /* nothing may stay */
        while (joined->count > before) (void)kind->leave(loop, joined->items[--joined->count], item);
        if (!had) rl_ptrset_remove(set, item);
    }
    return rc;
}

int rl_members_join_common_mode(rl_loop_t *loop, rl_mode *mode, rl_ptrvec *joined) {
    static const rl_kind *const kinds[] = {&rl_source_kind, &rl_timer_kind, &rl_observer_kind};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const rl_kind *kind = kinds[k];
        const rl_ptrset *set = rl_members_common_set(loop, kind);
        for (size_t i = 0; i < set->capacity; i++) {
            rl_object *item = set->slots[i];
            if (!item || kind->is_in(loop, mode, item)) continue; /* added to it by name before */
            int rc = 0;
            if (rl_ptrvec_push(joined, item)) rc = -ENOMEM;
            else if ((rc = kind->join_from_common_set(loop, mode, item)) != 0) joined->count--;
            if (rc) { /* nothing may stay */
                while (joined->count) {
                    rl_object *done = joined->items[--joined->count];
                    (void)rl_kind_of(done)->leave(loop, mode, done);
                }
                return rc;
            }
        }
    }
    return 0;
}
