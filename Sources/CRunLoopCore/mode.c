/* mode.c - modes: lookup by content, creation on first use, common modes, emptiness. */
#include "membership.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const RL_DEFAULT_MODE = "kCFRunLoopDefaultMode";
const char *const RL_COMMON_MODES = "kCFRunLoopCommonModes";

rl_mode *rl_mode_find_by_name(rl_loop_t *loop, const char *name, bool create) {
    if (rl_mode_name_is_common(name)) return NULL;
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        if (strcmp(m->name, name) == 0) return m;
    }
    if (!create) return NULL;
    rl_mode *m = rl_calloc(1, sizeof *m);
    if (!m || !(m->name = rl_strdup(name))) {
        free(m);
        return NULL;
    }
    rl_ptrvec_init(&m->observers);
    m->id = (uint32_t)loop->modes.count;
    if (loop->modes.count >= UINT32_MAX / 4 || rl_ptrvec_push(&loop->modes, m)) { /* ids fit in 30 bits */
        free(m->name);
        free(m);
        return NULL;
    }
    return m;
}

void rl_mode_free(rl_mode *mode) {
    rl_ptrset_free(&mode->sources);
    rl_heap_free(&mode->timers);
    rl_ptrvec_free(&mode->observers);
    free(mode->name);
    free(mode);
}

int rl_loop_add_common_mode(rl_loop_t *loop, const char *name) {
    if (!loop) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    if (rl_mode_name_is_common(name)) return -EINVAL;
    rl_ptrvec joined; /* every membership this call made: undone together on failure */
    rl_ptrvec_init(&joined);
    rl_loop_lock_mutex(loop);
    rl_mode *mode = rl_mode_find(loop, name, true);
    if (!mode || mode->common) {
        rl_loop_unlock(loop);
        return mode ? 0 : -ENOMEM;
    }
    rc = rl_members_join_common_mode(loop, mode, &joined);
    if (!rc) {
        mode->common = true;
        atomic_fetch_add_explicit(&loop->common_modes_added, 1, memory_order_relaxed);
        for (size_t i = 0; i < joined.count; i++) rl_retain(joined.items[i]); /* each membership's */
        for (size_t i = 0; i < joined.count; i++) rl_retain(joined.items[i]); /* until called out */
    }
    bool wake = !rc && rl_loop_may_await(loop, mode);
    rl_loop_unlock(loop);
    /* Sources get their schedule callout, as in any add (modes live as long as their loop). */
    for (size_t i = 0; i < joined.count; i++) {
        rl_object *item = joined.items[i];
        rl_source_t *s = item->type == RL_TYPE_SOURCE ? (rl_source_t *)item : NULL; /* check, then cast */
        if (s && s->version == 0 && s->context.schedule)
            __RL_IS_CALLING_OUT_TO_A_SCHEDULE_OR_CANCEL_FUNCTION__(s->context.schedule, s->context.info, loop, mode->name);
        rl_release(item);
    }
    rl_ptrvec_free(&joined);
    if (wake) rl_loop_wakeup(loop);
    RL_DEBUG_VERIFY(loop, "rl_loop_add_common_mode");
    return rc;
}

char *rl_loop_copy_current_mode(rl_loop_t *loop) {
    if (!loop) {
        errno = EINVAL;
        return NULL;
    }
    rl_loop_lock_mutex(loop);
    char *name = loop->run ? rl_strdup(loop->run->mode->name) : NULL;
    rl_loop_unlock(loop);
    return name;
}

char **rl_loop_copy_all_modes(rl_loop_t *loop, size_t *count) {
    if (!loop || !count) {
        errno = EINVAL;
        return NULL;
    }
    rl_loop_lock_mutex(loop);
    size_t n = loop->modes.count;
    char **names = rl_calloc(n + 1, sizeof *names);
    for (size_t i = 0; names && i < n; i++) {
        rl_mode *m = loop->modes.items[i];
        if (!(names[i] = rl_strdup(m->name))) {
            while (i--) free(names[i]);
            free(names);
            names = NULL;
        }
    }
    rl_loop_unlock(loop);
    if (!names) {
        errno = ENOMEM;
        return NULL;
    }
    *count = n;
    return names;
}
