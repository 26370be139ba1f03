/*
 * fd_table.c - which version-1 sources of a loop watch which fd, and what the loop's single
 * epoll set watches for each fd: the union of its sources' interests, so that a read source and
 * a write source on one socket share one registration.
 *
 * Sources of every mode share the set. When a ready fd has no taker in the running mode (its
 * sources are all in other modes) its registration is narrowed to the running mode's interest
 * ("parked") so that a level-triggered fd cannot spin the loop; every run entry and exit
 * restores parked fds. Each registration carries a generation in epoll's data, so an event
 * still queued for an fd that was removed (and perhaps reused) is dropped.
 *
 * All functions: loop locked.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static rl_fd_watch *watch_for(rl_loop_t *loop, int fd, bool create) {
    rl_fd_table *t = &loop->fds;
    if (fd < 0) return NULL;
    if ((size_t)fd >= t->size) {
        if (!create) return NULL;
        size_t size = t->size ? t->size : 64;
        while (size <= (size_t)fd) size *= 2;
        rl_fd_watch *grown = realloc(t->watches, size * sizeof *grown);
        if (!grown) return NULL;
        memset(grown + t->size, 0, (size - t->size) * sizeof *grown);
        t->watches = grown;
        t->size = size;
    }
    return &t->watches[fd];
}

static size_t source_count(const rl_fd_watch *w) {
    return (w->first != NULL) + (w->more ? w->more->count : 0);
}

static rl_source_t *source_at(const rl_fd_watch *w, size_t i) {
    return i == 0 ? w->first : w->more->items[i - 1];
}

static void unpark_one(rl_loop_t *loop, rl_fd_watch *w, int fd) {
    if (!w->parked) return;
    w->parked = false;
    rl_ptrvec_remove(&loop->fds.parked, (void *)(uintptr_t)fd);
}

static int apply(rl_loop_t *loop, rl_fd_watch *w, int fd, bool wanted, unsigned events) {
    if (!wanted) {
        if (w->in_set) {
            rl_wait_unwatch(&loop->wait, fd);
            loop->fds.in_set--;
        }
        w->in_set = false;
        w->registered = 0;
        return 0;
    }
    if (w->in_set && w->registered == events) return 0;
    bool add = !w->in_set;
    if (add) w->gen = ++loop->fds.next_gen ? loop->fds.next_gen : ++loop->fds.next_gen;
    int rc = rl_wait_watch(&loop->wait, fd, events, w->gen, add);
    if (rc) return rc;
    if (add) loop->fds.in_set++;
    w->in_set = true;
    w->registered = events;
    return 0;
}

int rl_fd_table_refresh(rl_loop_t *loop, int fd) {
    rl_fd_watch *w = watch_for(loop, fd, false);
    if (!w) return 0;
    unsigned events = 0;
    size_t n = source_count(w);
    for (size_t i = 0; i < n; i++)
        events |= atomic_load_explicit(&source_at(w, i)->events, memory_order_relaxed);
    unpark_one(loop, w, fd);
    return apply(loop, w, fd, n > 0, events);
}

static void take_out(rl_fd_watch *w, rl_source_t *source) {
    if (w->first == source) {
        w->first = NULL;
        if (w->more && w->more->count) {
            w->first = w->more->items[w->more->count - 1];
            w->more->count--;
        }
    } else if (w->more) {
        rl_ptrvec_remove(w->more, source);
    }
    if (w->more && !w->more->count) {
        rl_ptrvec_free(w->more);
        free(w->more);
        w->more = NULL;
    }
}

int rl_fd_table_attach(rl_loop_t *loop, rl_source_t *source) {
    rl_fd_watch *w = watch_for(loop, source->fd, true);
    if (!w) return -ENOMEM;
    if (!w->first) {
        w->first = source;
    } else {
        if (!w->more) {
            if (!(w->more = malloc(sizeof *w->more))) return -ENOMEM;
            rl_ptrvec_init(w->more);
        }
        if (rl_ptrvec_push(w->more, source)) return -ENOMEM;
    }
    int rc = rl_fd_table_refresh(loop, source->fd);
    if (rc) {
        take_out(w, source);
        (void)rl_fd_table_refresh(loop, source->fd);
    }
    return rc;
}

void rl_fd_table_detach(rl_loop_t *loop, rl_source_t *source) {
    rl_fd_watch *w = watch_for(loop, source->fd, false);
    if (!w) return;
    take_out(w, source);
    (void)rl_fd_table_refresh(loop, source->fd);
}

void rl_fd_table_collect(rl_loop_t *loop, rl_mode *mode, const rl_wait_event *event,
                         rl_ptrvec *out, rl_ptrvec *out_events) {
    rl_fd_watch *w = watch_for(loop, event->fd, false);
    if (!w || !w->in_set || w->gen != event->gen) return; /* stale: removed or reused fd */
    bool taken = false;
    unsigned mode_interest = 0;
    bool mode_has_source = false;
    size_t n = source_count(w);
    for (size_t i = 0; i < n; i++) {
        rl_source_t *s = source_at(w, i);
        if (!atomic_load(&s->valid) || !rl_ptrset_contains(&mode->sources, s)) continue;
        unsigned interest = atomic_load_explicit(&s->events, memory_order_relaxed);
        mode_has_source = true;
        mode_interest |= interest;
        unsigned ev = event->events & (interest | RL_FD_ERROR);
        if (!ev) continue;
        if (rl_ptrvec_push(out, rl_retain(s)) || rl_ptrvec_push(out_events, (void *)(uintptr_t)ev)) {
            rl_release(s); /* out of memory: the event comes again, level-triggered */
            if (out->count > out_events->count) out->count--;
            continue;
        }
        taken = true;
    }
    if (taken || w->parked) return;
    /* Nobody in this mode wants what is ready: narrow until the mode changes. */
    if (apply(loop, w, event->fd, mode_has_source, mode_interest) == 0 &&
        rl_ptrvec_push(&loop->fds.parked, (void *)(uintptr_t)event->fd) == 0)
        w->parked = true;
}

void rl_fd_table_unpark(rl_loop_t *loop) {
    while (loop->fds.parked.count) {
        int fd = (int)(uintptr_t)loop->fds.parked.items[loop->fds.parked.count - 1];
        (void)rl_fd_table_refresh(loop, fd); /* unparks it */
    }
}

void rl_fd_table_free(rl_loop_t *loop) {
    rl_fd_table *t = &loop->fds;
    for (size_t i = 0; i < t->size; i++)
        if (t->watches[i].more) {
            rl_ptrvec_free(t->watches[i].more);
            free(t->watches[i].more);
        }
    free(t->watches);
    rl_ptrvec_free(&t->parked);
    memset(t, 0, sizeof *t);
}
