/*
 * membership.h - how an item is in a loop's modes, written once for timers, observers and
 * sources: in one mode by name, or in the loop's common set and then in each common mode, all or
 * nothing; out of them again; "is it in?"; out of the whole loop. A kind (rl_kind) says what is
 * particular: how an item enters a loop (a timer or observer is claimed by its owner pointer,
 * with no lock besides the loop's; a source gets its link), how it joins and leaves one mode,
 * and which of the loop's common sets is its kind's.
 *
 * Every function runs with the loop locked (and the source's lock, for a source, except in
 * rl_members_join_common_mode) and makes no callout: the caller runs schedule and cancel
 * callouts and drops references once it has unlocked. The mechanism is inline: each kind's file
 * calls it with its own constant kind, so the compiler calls the hooks directly and adding a
 * timer costs no more than a timer-only copy would. The usual add of a timer on the loop's own
 * thread (a timer in no loop, one mode) does not come here at all: timer.c's add_unowned_own
 * claims and inserts it directly, and only the other cases take rl_members_add. What is not hot
 * lives in membership.c.
 */
#ifndef RL_MEMBERSHIP_H
#define RL_MEMBERSHIP_H

#include "internal.h"

#include <errno.h>

/* What is particular to a kind of item in being in a loop's modes. No hook makes a callout or a
 * retain. */
typedef struct rl_kind {
    size_t common_set; /* offsetof(rl_loop_t, the kind's common set) */
    /* Make item able to join modes of loop: claim it (a timer or observer, by its owner pointer),
     * or link it (a source). 0, or -EINVAL (invalidated, or loop dead), -EBUSY (another loop
     * owns it), -ENOMEM, with nothing changed. */
    int (*enter)(rl_loop_t *loop, rl_object *item);
    /* Undo enter when item is left in no mode of loop and not in its common set. */
    void (*leave_if_unused)(rl_loop_t *loop, rl_object *item);
    /* Put an entered item in one more mode: 0, -EEXIST or -ENOMEM with nothing changed. */
    int (*join)(rl_loop_t *loop, rl_mode *mode, rl_object *item);
    /* The same for a member of the common set joining a mode that just became common, with
     * only the loop locked (rl_loop_add_common_mode cannot take source locks: they come first). */
    int (*join_from_common_set)(rl_loop_t *loop, rl_mode *mode, rl_object *item);
    /* Take item out of mode: true when it was there. */
    bool (*leave)(rl_loop_t *loop, rl_mode *mode, rl_object *item);
    bool (*is_in)(rl_loop_t *loop, rl_mode *mode, rl_object *item);
    /* A mode of loop item is in, or NULL (timers and observers; NULL for sources, which leave a
     * loop mode by mode, each with its cancel callout). */
    rl_mode *(*any_mode)(rl_loop_t *loop, rl_object *item);
} rl_kind;

RL_HIDDEN extern const rl_kind rl_timer_kind, rl_observer_kind, rl_source_kind;
RL_HIDDEN const rl_kind *rl_kind_of(const rl_object *item);

/* Whether item is in any mode of loop or in its common set. */
RL_HIDDEN bool rl_members_in_loop(rl_loop_t *loop, const rl_kind *kind, rl_object *item);
/* A mode just became common: put every member of the loop's common sets in it, appending each
 * item that joined to joined; on failure (-ENOMEM) none stays. No retain. */
RL_HIDDEN int rl_members_join_common_mode(rl_loop_t *loop, rl_mode *mode, rl_ptrvec *joined);
/* Join the common set (unless had) and every common mode item is not in yet, appending the
 * modes to joined; on failure none of it stays. */
RL_HIDDEN int rl_members_add_common(rl_loop_t *loop, const rl_kind *kind, rl_object *item, bool had,
                                    rl_ptrvec *joined);

static inline rl_ptrset *rl_members_common_set(rl_loop_t *loop, const rl_kind *kind) {
    return (rl_ptrset *)((char *)loop + kind->common_set);
}

/* Put item in the mode named name, or in the common set and every common mode (all or nothing),
 * entering the loop first. Retains item once per membership made. Appends the modes it joined
 * to joined, when given (for schedule callouts). 0, or a negative errno with nothing changed: -EEXIST when
 * it was in the mode already (or in every common mode), or an error of enter or join. */
static inline int rl_members_add(rl_loop_t *loop, const rl_kind *kind, rl_object *item, const char *name,
                                 rl_ptrvec *joined) {
    int rc = kind->enter(loop, item);
    if (rc) return rc;
    if (!rl_mode_name_is_common(name)) {
        rl_mode *mode = rl_mode_find(loop, name, true);
        if (!mode || (joined && rl_ptrvec_push(joined, mode))) rc = -ENOMEM;
        else if ((rc = kind->join(loop, mode, item)) != 0 && joined) joined->count--;
        if (rc) kind->leave_if_unused(loop, item);
        else rl_retain(item); /* the mode's reference */
        return rc;
    }
    rl_ptrvec own;
    if (!joined) {
        rl_ptrvec_init(&own);
        joined = &own;
    }
    size_t before = joined->count;
    /* Already common: it joins the common modes it was removed from by name (as CF does), or
     * the add is -EEXIST when it is in every one. */
    bool had = rl_ptrset_contains(rl_members_common_set(loop, kind), item);
    rc = rl_members_add_common(loop, kind, item, had, joined);
    if (!rc && had && joined->count == before) rc = -EEXIST;
    if (rc) {
        kind->leave_if_unused(loop, item);
    } else {
        if (!had) rl_retain(item); /* the common set's reference */
        for (size_t i = before; i < joined->count; i++) rl_retain(item); /* each mode's */
    }
    if (joined == &own) rl_ptrvec_free(&own);
    return rc;
}

/* Take item out of the mode named name, or out of the common set and every common mode. Returns
 * how many memberships went: the caller releases item that many times, unlocked. */
static inline size_t rl_members_remove(rl_loop_t *loop, const rl_kind *kind, rl_object *item, const char *name) {
    size_t releases = 0;
    if (!rl_mode_name_is_common(name)) {
        rl_mode *mode = rl_mode_find(loop, name, false);
        if (mode && kind->leave(loop, mode, item)) releases++;
    } else if (rl_ptrset_remove(rl_members_common_set(loop, kind), item)) {
        releases++;
        for (size_t i = 0; i < loop->modes.count; i++) {
            rl_mode *m = loop->modes.items[i];
            if (m->common && kind->leave(loop, m, item)) releases++;
        }
    }
    if (releases) kind->leave_if_unused(loop, item);
    return releases;
}

static inline bool rl_members_contains(rl_loop_t *loop, const rl_kind *kind, rl_object *item, const char *name) {
    if (rl_mode_name_is_common(name)) return rl_ptrset_contains(rl_members_common_set(loop, kind), item);
    rl_mode *mode = rl_mode_find(loop, name, false);
    return mode && kind->is_in(loop, mode, item);
}

/* Take a timer or observer out of every mode of loop and its common set, and out of loop.
 * Returns the memberships' references, for the caller to release unlocked. */
static inline size_t rl_members_leave_loop(rl_loop_t *loop, const rl_kind *kind, rl_object *item) {
    rl_ptrset *set = rl_members_common_set(loop, kind);
    size_t releases = set->count && rl_ptrset_remove(set, item) ? 1 : 0;
    for (rl_mode *m; (m = kind->any_mode(loop, item));)
        if (kind->leave(loop, m, item)) releases++;
    kind->leave_if_unused(loop, item);
    return releases;
}

#endif
