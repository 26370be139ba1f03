/* mode.c - modes: lookup by content, creation on first use, common modes, emptiness. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const RL_DEFAULT_MODE = "kCFRunLoopDefaultMode";
const char *const RL_COMMON_MODES = "kCFRunLoopCommonModes";

int rl_mode_check_name(const char *name) { return name && name[0] ? 0 : -EINVAL; }

bool rl_mode_name_is_common(const char *name) {
    return name == RL_COMMON_MODES || strcmp(name, RL_COMMON_MODES) == 0;
}

rl_mode *rl_mode_find(rl_loop_t *loop, const char *name, bool create) {
    if (name == RL_DEFAULT_MODE && loop->default_mode) return loop->default_mode; /* no strcmp */
    if (rl_mode_name_is_common(name)) return NULL;
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        if (strcmp(m->name, name) == 0) return m;
    }
    if (!create) return NULL;
    rl_mode *m = calloc(1, sizeof *m);
    if (!m || !(m->name = strdup(name))) {
        free(m);
        return NULL;
    }
    rl_ptrvec_init(&m->observers);
    if (rl_ptrvec_push(&loop->modes, m)) {
        free(m->name);
        free(m);
        return NULL;
    }
    return m;
}

bool rl_mode_is_empty(const rl_mode *mode) {
    return mode->source_count == 0 && mode->timers.count == 0;
}

void rl_mode_free(rl_mode *mode) {
    rl_ptrset_free(&mode->sources);
    rl_heap_free(&mode->timers);
    rl_ptrvec_free(&mode->observers);
    free(mode->name);
    free(mode);
}

/* Snapshot of a set's members, retained, so they can be used with the loop unlocked. */
static int snapshot(const rl_ptrset *set, rl_ptrvec *out) {
    for (size_t i = 0; i < set->capacity; i++)
        if (set->slots[i]) {
            if (rl_ptrvec_push(out, set->slots[i])) return -ENOMEM;
            rl_retain(set->slots[i]);
        }
    return 0;
}

static void release_all(rl_ptrvec *v) {
    for (size_t i = 0; i < v->count; i++) rl_release(v->items[i]);
    rl_ptrvec_free(v);
}

int rl_loop_add_common_mode(rl_loop_t *loop, const char *name) {
    if (!loop) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    if (rl_mode_name_is_common(name)) return -EINVAL;
    pthread_mutex_lock(&loop->lock);
    rl_mode *mode = rl_mode_find(loop, name, true);
    if (!mode || mode->common) {
        pthread_mutex_unlock(&loop->lock);
        return mode ? 0 : -ENOMEM;
    }
    mode->common = true;
    /* Items in the common set join the new common mode through the public add functions, with
     * the loop unlocked, so that sources get their schedule callout as in any add. */
    rl_ptrvec sources, timers, observers;
    rl_ptrvec_init(&sources);
    rl_ptrvec_init(&timers);
    rl_ptrvec_init(&observers);
    rc = snapshot(&loop->common_sources, &sources);
    if (!rc) rc = snapshot(&loop->common_timers, &timers);
    if (!rc) rc = snapshot(&loop->common_observers, &observers);
    pthread_mutex_unlock(&loop->lock);
    for (size_t i = 0; !rc && i < sources.count; i++) (void)rl_loop_add_source(loop, sources.items[i], mode->name);
    for (size_t i = 0; !rc && i < timers.count; i++) (void)rl_loop_add_timer(loop, timers.items[i], mode->name);
    for (size_t i = 0; !rc && i < observers.count; i++) (void)rl_loop_add_observer(loop, observers.items[i], mode->name);
    release_all(&sources);
    release_all(&timers);
    release_all(&observers);
    return rc;
}

char *rl_loop_copy_current_mode(rl_loop_t *loop) {
    if (!loop) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&loop->lock);
    char *name = loop->run ? strdup(loop->run->mode->name) : NULL;
    pthread_mutex_unlock(&loop->lock);
    return name;
}

char **rl_loop_copy_all_modes(rl_loop_t *loop, size_t *count) {
    if (!loop || !count) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&loop->lock);
    size_t n = loop->modes.count;
    char **names = calloc(n + 1, sizeof *names);
    for (size_t i = 0; names && i < n; i++) {
        rl_mode *m = loop->modes.items[i];
        if (!(names[i] = strdup(m->name))) {
            while (i--) free(names[i]);
            free(names);
            names = NULL;
        }
    }
    pthread_mutex_unlock(&loop->lock);
    if (!names) {
        errno = ENOMEM;
        return NULL;
    }
    *count = n;
    return names;
}

int rl_common_modes(rl_loop_t *loop, rl_ptrvec *out) {
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        if (m->common && rl_ptrvec_push(out, m)) return -ENOMEM;
    }
    return 0;
}
