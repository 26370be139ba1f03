/*
 * source.c - version-0 sources (signalled, then performed) and version-1 sources (an fd).
 *
 * Signalling is O(1) and finds its way to the loop: each loop holding a source has a link, and
 * rl_source_signal queues the link on the loop's signalled queue, so a pass looks only at
 * signalled sources, never at every source of the mode. A source already signalled costs one
 * atomic exchange and nothing else.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static rl_source_t *source_new(long order) {
    rl_source_t *s = aligned_alloc(_Alignof(rl_source_t), sizeof *s);
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    memset(s, 0, sizeof *s);
    rl_object_init(&s->obj, RL_TYPE_SOURCE);
    s->order = order;
    s->fd = -1;
    atomic_init(&s->valid, true);
    pthread_mutex_init(&s->lock, NULL);
    rl_ptrvec_init(&s->links);
    return s;
}

rl_source_t *rl_source_create(long order, const rl_source_context_t *context) {
    if (!context) {
        errno = EINVAL;
        return NULL;
    }
    rl_source_t *s = source_new(order);
    if (!s) return NULL;
    s->context = *context;
    if (context->retain) s->context.info = (void *)context->retain(context->info);
    return s;
}

rl_source_t *rl_source_create_fd(int fd, unsigned events, long order, rl_fd_callback_t callback,
                                 const rl_context_t *context) {
    if (!callback || (events & ~(unsigned)(RL_FD_READABLE | RL_FD_WRITABLE | RL_FD_ERROR))) {
        errno = EINVAL;
        return NULL;
    }
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
        errno = EBADF;
        return NULL;
    }
    rl_source_t *s = source_new(order);
    if (!s) return NULL;
    s->version = 1;
    s->fd = fd;
    atomic_init(&s->events, events & (RL_FD_READABLE | RL_FD_WRITABLE));
    s->callback = callback;
    if (context) {
        s->context.info = context->info;
        s->context.retain = context->retain;
        s->context.release = context->release;
        if (context->retain) s->context.info = (void *)context->retain(context->info);
    }
    return s;
}

void rl_source_destroy(rl_source_t *s) {
    if (s->context.release) s->context.release(s->context.info);
    rl_ptrvec_free(&s->links);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static rl_link *link_for(rl_source_t *s, rl_loop_t *loop) {
    for (size_t i = 0; i < s->links.count; i++) {
        rl_link *l = s->links.items[i];
        if (l->loop == loop) return l;
    }
    return NULL;
}

/* Queue the link for its loop, once. source locked (the loop need not be). */
static void enqueue(rl_link *l) {
    if (atomic_fetch_or(&l->state, RL_LINK_QUEUED) & RL_LINK_QUEUED) return;
    rl_link *head = atomic_load_explicit(&l->loop->signalled, memory_order_relaxed);
    do l->next = head;
    while (!atomic_compare_exchange_weak_explicit(&l->loop->signalled, &head, l, memory_order_release,
                                                  memory_order_relaxed));
}

/* Unlink l from its source for good. source and loop locked. */
static void unlink_link(rl_source_t *s, rl_link *l) {
    rl_ptrvec_remove(&s->links, l);
    if (!(atomic_fetch_or(&l->state, RL_LINK_DEAD) & RL_LINK_QUEUED)) free(l);
    /* else the loop frees it when it drains or scans its queue */
}

void rl_links_free_queued(rl_loop_t *loop) {
    for (rl_link *l = atomic_exchange(&loop->signalled, NULL), *next; l; l = next) {
        next = l->next;
        free(l); /* dead: teardown removed every source */
    }
    for (size_t i = 0; i < loop->deferred.count; i++) free(loop->deferred.items[i]);
    rl_ptrvec_free(&loop->deferred);
}

static void schedule_callout(rl_source_t *s, bool cancel, rl_loop_t *loop, const char *mode) {
    void (*fn)(void *, rl_loop_t *, const char *) = cancel ? s->context.cancel : s->context.schedule;
    if (s->version == 0 && fn) __RL_IS_CALLING_OUT_TO_A_SCHEDULE_OR_CANCEL_FUNCTION__(fn, s->context.info, loop, mode);
}

static int add_to_mode(rl_loop_t *loop, rl_source_t *s, const char *name) {
    pthread_mutex_lock(&s->lock);
    pthread_mutex_lock(&loop->lock);
    int rc = 0;
    bool wake = false, new_link = false;
    rl_mode *mode = NULL;
    if (!atomic_load(&s->valid) || loop->dead) {
        rc = -EINVAL;
        goto out;
    }
    if (!(mode = rl_mode_find(loop, name, true))) {
        rc = -ENOMEM;
        goto out;
    }
    if (rl_ptrset_contains(&mode->sources, s)) {
        rc = -EEXIST;
        goto out;
    }
    rl_link *l = link_for(s, loop);
    if (!l) {
        if (!(l = calloc(1, sizeof *l)) || rl_ptrvec_push(&s->links, l)) {
            free(l);
            rc = -ENOMEM;
            goto out;
        }
        l->source = s;
        l->loop = loop;
        new_link = true;
    }
    if (l->nmodes == 0 && s->version == 1) rc = rl_fd_table_attach(loop, s);
    if (!rc && rl_ptrset_add(&mode->sources, s) < 0) {
        if (l->nmodes == 0 && s->version == 1) rl_fd_table_detach(loop, s);
        rc = -ENOMEM;
    }
    if (rc) {
        if (new_link) {
            rl_ptrvec_remove(&s->links, l);
            free(l);
        }
        goto out;
    }
    mode->source_count++;
    l->nmodes++;
    rl_retain(s);
    if (s->version == 0 && atomic_load(&s->signalled)) {
        enqueue(l);
        wake = loop->run && loop->run->mode == mode;
    }
out:
    pthread_mutex_unlock(&loop->lock);
    pthread_mutex_unlock(&s->lock);
    if (rc) return rc;
    schedule_callout(s, false, loop, mode->name);
    if (wake) rl_loop_wakeup(loop);
    return 0;
}

static int remove_from_mode(rl_loop_t *loop, rl_source_t *s, const char *name) {
    pthread_mutex_lock(&s->lock);
    pthread_mutex_lock(&loop->lock);
    rl_mode *mode = rl_mode_find(loop, name, false);
    if (!mode || !rl_ptrset_remove(&mode->sources, s)) {
        pthread_mutex_unlock(&loop->lock);
        pthread_mutex_unlock(&s->lock);
        return -ENOENT;
    }
    mode->source_count--;
    atomic_fetch_add_explicit(&loop->source_removals, 1, memory_order_relaxed);
    rl_link *l = link_for(s, loop);
    if (l && --l->nmodes == 0) {
        if (s->version == 1) rl_fd_table_detach(loop, s);
        unlink_link(s, l);
    }
    pthread_mutex_unlock(&loop->lock);
    pthread_mutex_unlock(&s->lock);
    schedule_callout(s, true, loop, mode->name);
    rl_release(s); /* the mode's reference; last, since it may destroy s */
    return 0;
}

int rl_loop_add_source(rl_loop_t *loop, rl_source_t *s, const char *mode) {
    if (!loop || !s) return -EINVAL;
    int rc = rl_mode_check_name(mode);
    if (rc) return rc;
    if (!rl_mode_name_is_common(mode)) return add_to_mode(loop, s, mode);
    rl_ptrvec modes;
    rl_ptrvec_init(&modes);
    pthread_mutex_lock(&loop->lock);
    if (!atomic_load(&s->valid) || loop->dead) rc = -EINVAL;
    else if ((rc = rl_ptrset_add(&loop->common_sources, s)) == 0) rc = -EEXIST;
    else if (rc > 0) {
        rl_retain(s);
        rc = rl_common_modes(loop, &modes);
    }
    pthread_mutex_unlock(&loop->lock);
    for (size_t i = 0; !rc && i < modes.count; i++) {
        int one = add_to_mode(loop, s, ((rl_mode *)modes.items[i])->name);
        if (one && one != -EEXIST) rc = one;
    }
    rl_ptrvec_free(&modes);
    return rc;
}

int rl_loop_remove_source(rl_loop_t *loop, rl_source_t *s, const char *mode) {
    if (!loop || !s) return -EINVAL;
    int rc = rl_mode_check_name(mode);
    if (rc) return rc;
    if (!rl_mode_name_is_common(mode)) return remove_from_mode(loop, s, mode);
    rl_ptrvec modes;
    rl_ptrvec_init(&modes);
    pthread_mutex_lock(&loop->lock);
    bool was = rl_ptrset_remove(&loop->common_sources, s);
    if (was) rc = rl_common_modes(loop, &modes);
    pthread_mutex_unlock(&loop->lock);
    if (!was) return -ENOENT;
    for (size_t i = 0; i < modes.count; i++) (void)remove_from_mode(loop, s, ((rl_mode *)modes.items[i])->name);
    rl_ptrvec_free(&modes);
    rl_release(s);
    return rc;
}

bool rl_loop_contains_source(rl_loop_t *loop, rl_source_t *s, const char *mode) {
    if (!loop || !s || rl_mode_check_name(mode)) return false;
    pthread_mutex_lock(&loop->lock);
    bool in;
    if (rl_mode_name_is_common(mode)) {
        in = rl_ptrset_contains(&loop->common_sources, s);
    } else {
        rl_mode *m = rl_mode_find(loop, mode, false);
        in = m && rl_ptrset_contains(&m->sources, s);
    }
    pthread_mutex_unlock(&loop->lock);
    return in;
}

void rl_source_remove_from_loop(rl_loop_t *loop, rl_source_t *s) {
    rl_ptrvec names;
    rl_ptrvec_init(&names);
    pthread_mutex_lock(&loop->lock);
    bool common = rl_ptrset_remove(&loop->common_sources, s);
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        if (rl_ptrset_contains(&m->sources, s)) (void)rl_ptrvec_push(&names, m->name);
    }
    pthread_mutex_unlock(&loop->lock);
    for (size_t i = 0; i < names.count; i++) (void)remove_from_mode(loop, s, names.items[i]);
    rl_ptrvec_free(&names);
    if (common) rl_release(s);
}

void rl_source_invalidate(rl_source_t *s) {
    if (!s || !atomic_exchange(&s->valid, false)) return;
    rl_retain(s); /* removal drops the loops' references; keep s alive until done */
    for (;;) {
        pthread_mutex_lock(&s->lock);
        rl_loop_t *loop = s->links.count ? rl_retain(((rl_link *)s->links.items[0])->loop) : NULL;
        pthread_mutex_unlock(&s->lock);
        if (!loop) break;
        rl_source_remove_from_loop(loop, s);
        rl_release(loop);
    }
    rl_release(s);
}

bool rl_source_is_valid(rl_source_t *s) { return s && atomic_load(&s->valid); }
long rl_source_get_order(rl_source_t *s) { return s ? s->order : 0; }
int rl_source_get_fd(rl_source_t *s) { return s ? s->fd : -1; }
unsigned rl_source_get_fd_events(rl_source_t *s) { return s ? atomic_load(&s->events) : 0; }

void rl_source_signal(rl_source_t *s) {
    if (!s || s->version != 0) return;
    /* Coalesced with a pending signal. An exchange, not a load first: an RMW reads the latest
     * value, so a signal can never be taken for one the loop has already consumed. */
    if (atomic_exchange(&s->signalled, true)) return;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->links.count; i++) enqueue(s->links.items[i]);
    pthread_mutex_unlock(&s->lock);
}

bool rl_source_is_signalled(rl_source_t *s) { return s && atomic_load(&s->signalled); }

int rl_source_set_fd_events(rl_source_t *s, unsigned events) {
    if (!s || s->version != 1 || !atomic_load(&s->valid) ||
        (events & ~(unsigned)(RL_FD_READABLE | RL_FD_WRITABLE | RL_FD_ERROR)))
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->events, events & (RL_FD_READABLE | RL_FD_WRITABLE));
    for (size_t i = 0; i < s->links.count; i++) {
        rl_link *l = s->links.items[i];
        pthread_mutex_lock(&l->loop->lock);
        int one = rl_fd_table_refresh(l->loop, s->fd);
        pthread_mutex_unlock(&l->loop->lock);
        if (one && !rc) rc = one;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int by_order(const void *a, const void *b) {
    const rl_source_t *x = *(rl_source_t *const *)a, *y = *(rl_source_t *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Put a collected but unperformed source back on the queues (it stays signalled). */
static void requeue(rl_source_t *s) {
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->links.count; i++) enqueue(s->links.items[i]);
    pthread_mutex_unlock(&s->lock);
}

/* Look at one queued link: take its source if it is in the running mode, keep it deferred if
 * not, free it if it died. loop locked (so no link dies and no source leaves meanwhile). */
static void sort_link(rl_loop_t *loop, rl_run_frame *run, rl_link *l, rl_ptrvec *ready, rl_ptrvec *keep) {
    if (atomic_load(&l->state) & RL_LINK_DEAD) {
        free(l);
    } else if (rl_ptrset_contains(&run->mode->sources, l->source) && rl_ptrvec_push(ready, l->source) == 0) {
        rl_retain(l->source);
        atomic_fetch_and(&l->state, ~RL_LINK_QUEUED);
    } else if (rl_ptrvec_push(keep, l)) {
        atomic_fetch_and(&l->state, ~RL_LINK_QUEUED); /* out of memory: dropped, still signalled */
    }
    (void)loop;
}

bool rl_sources_perform_signalled(rl_loop_t *loop, rl_run_frame *run) {
    rl_ptrvec *ready = &run->ready;
    ready->count = 0;
    if (!loop->deferred.count && !atomic_load(&loop->signalled)) return false;
    rl_link *pushed = atomic_exchange_explicit(&loop->signalled, NULL, memory_order_acquire);
    /* The stack is newest first: reverse it, so sources of equal order go in signalling order. */
    rl_link *fifo = NULL;
    while (pushed) {
        rl_link *next = pushed->next;
        pushed->next = fifo;
        fifo = pushed;
        pushed = next;
    }
    pthread_mutex_lock(&loop->lock);
    rl_ptrvec keep;
    rl_ptrvec_init(&keep);
    for (size_t i = 0; i < loop->deferred.count; i++) sort_link(loop, run, loop->deferred.items[i], ready, &keep);
    for (rl_link *l = fifo, *next; l; l = next) {
        next = l->next;
        sort_link(loop, run, l, ready, &keep);
    }
    rl_ptrvec_free(&loop->deferred);
    loop->deferred = keep;
    if (keep.items == keep.inline_items) loop->deferred.items = loop->deferred.inline_items;
    pthread_mutex_unlock(&loop->lock);
    if (ready->count == 0) return false;
    if (ready->count > 1) {
        /* Stable order: an insertion sort for the usual handful, qsort past that. */
        if (ready->count <= 16) {
            for (size_t i = 1; i < ready->count; i++) {
                rl_source_t *x = ready->items[i];
                size_t j = i;
                for (; j > 0 && ((rl_source_t *)ready->items[j - 1])->order > x->order; j--)
                    ready->items[j] = ready->items[j - 1];
                ready->items[j] = x;
            }
        } else {
            qsort(ready->items, ready->count, sizeof *ready->items, by_order);
        }
    }
    bool handled = false;
    size_t i = 0;
    double start = rl_time_now();
    for (; i < ready->count; i++) {
        rl_source_t *s = ready->items[i];
        if (handled && run->stop_after_handle) break;
        if (atomic_exchange(&s->signalled, false) && atomic_load(&s->valid)) {
            if (s->context.perform) __RL_IS_CALLING_OUT_TO_A_SOURCE0_PERFORM_FUNCTION__(s->context.perform, s->context.info);
            RL_COUNT(loop, sources_performed, 1);
            handled = true;
        }
        rl_release(s);
    }
    for (; i < ready->count; i++) {
        rl_source_t *s = ready->items[i];
        if (atomic_load(&s->signalled)) requeue(s);
        rl_release(s);
    }
    RL_COUNT(loop, time_in_callouts, rl_elapsed_since(start));
    ready->count = 0;
    return handled;
}
