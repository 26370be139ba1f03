/*
 * source.c - version-0 sources (signalled, then performed) and version-1 sources (an fd).
 *
 * Signalling is O(1) and finds its way to the loop: each loop holding a source has a link, made
 * when the source joins the loop, and rl_source_signal queues the link on the loop's signalled
 * queue, so a pass looks only at signalled sources, never at every source of the mode. A source
 * already signalled costs one atomic RMW and nothing else. Signalling never allocates, and
 * a queued link stays queued (in the loop's deferred list) until its source is performed, so no
 * allocation failure anywhere can lose a signal.
 *
 * Adding is all or nothing: every mode is joined under the source lock and the loop lock, and
 * undone if one fails, before any schedule callout runs. Removing never fails and never
 * allocates: it leaves one mode at a time.
 */
#include "membership.h"
#include "fd_table.h"
#include "wake.h"
#include "lag.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

rl_source_t *rl_source_new(long order) {
    rl_source_t *s = rl_aligned_alloc(_Alignof(rl_source_t), sizeof *s);
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    memset(s, 0, sizeof *s);
    rl_object_init(&s->obj, RL_TYPE_SOURCE);
    s->order = order;
    s->fd = -1;
    atomic_init(&s->valid, true);
    rl_ptrvec_init(&s->links);
    return s;
}

rl_source_t *rl_source_create(long order, const rl_source_context_t *context) {
    if (!context) {
        errno = EINVAL;
        return NULL;
    }
    rl_source_t *s = rl_source_new(order);
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
    rl_source_t *s = rl_source_new(order);
    if (!s) return NULL;
    s->version = 1;
    s->fd = fd;
    atomic_init(&s->events, events & (RL_FD_READABLE | RL_FD_WRITABLE));
    s->callback = callback;
    rl_source_take_context(s, context);
    return s;
}

void rl_source_take_context(rl_source_t *s, const rl_context_t *context) {
    if (!context) return;
    s->context.info = context->info;
    s->context.retain = context->retain;
    s->context.release = context->release;
    if (context->retain) s->context.info = (void *)context->retain(context->info);
}

void rl_source_end_special(rl_source_t *s) {
    if (s->kind == RL_SOURCE_SIGNAL) rl_signal_release(s->signo);
    else if (s->kind == RL_SOURCE_PROCESS) rl_process_end(s);
}

void rl_source_destroy(rl_source_t *s) {
    if (s->kind && atomic_load(&s->valid)) rl_source_end_special(s); /* else invalidation did */
    if (s->context.release) s->context.release(s->context.info);
    rl_ptrvec_free(&s->links);
    free(s);
}

/* source locked */
static rl_link *link_for(rl_source_t *s, rl_loop_t *loop) {
    for (size_t i = 0; i < s->links.count; i++) {
        rl_link *l = s->links.items[i];
        if (l->loop == loop) return l;
    }
    return NULL;
}

/* Queue the link for its loop, once. source locked (the loop need not be), or loop locked: a link
 * dies only with both held. */
void rl_link_enqueue(rl_link *l) {
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
    /* else the loop frees it when it meets it in its queue */
}

void rl_links_free_queued(rl_loop_t *loop) {
    for (rl_link *l = atomic_exchange(&loop->signalled, NULL), *next; l; l = next) {
        next = l->next;
        free(l); /* dead: teardown removed every source */
    }
    for (rl_link *l = loop->deferred, *next; l; l = next) {
        next = l->next;
        free(l);
    }
    loop->deferred = loop->deferred_tail = NULL;
}

bool rl_loop_holds_source(const rl_loop_t *loop, const rl_source_t *s) {
    return rl_members_in_loop((rl_loop_t *)loop, &rl_source_kind, (rl_object *)&s->obj);
}

/* s left the loop's last mode and its common set: its link and fd registration go. Both locked. */
static void unlink_if_gone(rl_loop_t *loop, rl_source_t *s) {
    if (rl_loop_holds_source(loop, s)) return;
    rl_link *l = link_for(s, loop);
    if (s->version == 1) rl_fd_table_detach(loop, s);
    else if (s->signo && l) rl_signals_detach(loop, l);
    if (l) unlink_link(s, l);
}

static void schedule_callout(rl_source_t *s, bool cancel, rl_loop_t *loop, const char *mode) {
    void (*fn)(void *, rl_loop_t *, const char *) = cancel ? s->context.cancel : s->context.schedule;
    if (s->version == 0 && fn) __RL_IS_CALLING_OUT_TO_A_SCHEDULE_OR_CANCEL_FUNCTION__(fn, s->context.info, loop, mode);
}

/* The link of s for loop, made (with its fd registration) when s is new to the loop. The link
 * lives while s is in a mode of the loop or in its common set. Both locked. */
static int link_in(rl_loop_t *loop, rl_source_t *s, rl_link **out) {
    if ((*out = link_for(s, loop))) return 0;
    rl_link *l = rl_calloc(1, sizeof *l);
    if (!l) return -ENOMEM;
    l->source = s;
    l->loop = loop;
    if (rl_ptrvec_push(&s->links, l)) {
        free(l);
        return -ENOMEM;
    }
    int rc = s->version == 1 ? rl_fd_table_attach(loop, s) : s->signo ? rl_signals_attach(loop, l) : 0;
    if (rc) {
        s->links.count--;
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

/* ---- The source kind (membership.c): a source enters a loop by its link (made with its fd
 * registration), which lives while the source is in a mode of the loop or in its common set. A
 * source may be in several loops at once. ---- */

static int source_enter(rl_loop_t *loop, rl_object *item) {
    rl_source_t *s = (rl_source_t *)item;
    if (!atomic_load(&s->valid) || loop->dead) return -EINVAL;
    rl_link *l;
    return link_in(loop, s, &l);
}

static void source_leave_if_unused(rl_loop_t *loop, rl_object *item) { unlink_if_gone(loop, (rl_source_t *)item); }

static bool source_is_in(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    (void)loop;
    return rl_ptrset_contains(&mode->sources, item);
}

/* Put s in mode. A signalled source's link is queued, so the mode's next pass performs it. */
static int source_join(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    rl_source_t *s = (rl_source_t *)item;
    if (rl_ptrset_contains(&mode->sources, s)) return -EEXIST;
    rl_link *l = link_for(s, loop);
    if (!l) return -EINVAL; /* not entered: cannot happen */
    if (rl_ptrset_add(&mode->sources, s) < 0) return -ENOMEM;
    rl_mode_items_changed(mode, 1, false);
    /* A signal or SIGCHLD delivered while it was outside (or, for a process source, before it
     * first looked) is performed as a signal made then. */
    if (s->version == 0 && s->signo && rl_source_watch_pending(s)) atomic_fetch_or(&s->signalled, RL_SIGNAL_SET);
    if (s->version == 0 && atomic_load(&s->signalled)) rl_link_enqueue(l);
    if (s->version == 1) rl_fd_table_joined(loop, s);
    return 0;
}

/* A member of the common set has its link and fd registration already (they live while it is
 * in the set): joining one more mode is only the mode's set. Its links are not looked at (only
 * the loop is locked); a signalled source's link is queued already, until it is performed. */
static int source_join_from_common_set(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    int rc = rl_ptrset_add(&mode->sources, item);
    if (rc > 0) rl_mode_items_changed(mode, 1, false);
    if (rc > 0 && ((rl_source_t *)item)->version == 1) rl_fd_table_joined(loop, (rl_source_t *)item);
    return rc < 0 ? rc : rc == 0 ? -EEXIST : 0;
}

/* Take s out of mode; when it leaves the loop's last mode, its link and fd registration go too.
 * The caller runs cancel and releases s (unless undoing a join). */
static bool source_leave(rl_loop_t *loop, rl_mode *mode, rl_object *item) {
    rl_source_t *s = (rl_source_t *)item;
    if (!rl_ptrset_remove(&mode->sources, s)) return false;
    rl_mode_items_changed(mode, -1, false);
    atomic_fetch_add_explicit(&loop->source_removals, 1, memory_order_relaxed);
    unlink_if_gone(loop, s);
    return true;
}

const rl_kind rl_source_kind = {
    .common_set = offsetof(rl_loop_t, common_sources),
    .enter = source_enter,
    .leave_if_unused = source_leave_if_unused,
    .join = source_join,
    .join_from_common_set = source_join_from_common_set,
    .leave = source_leave,
    .is_in = source_is_in,
    .any_mode = NULL, /* a source leaves a loop mode by mode, each with its cancel callout */
};

int rl_loop_add_source(rl_loop_t *loop, rl_source_t *s, const char *name) {
    if (!loop || !s) return -EINVAL;
    int rc = rl_mode_check_name(name);
    if (rc) return rc;
    rl_ptrvec joined; /* the modes s joined, for the schedule callouts */
    rl_ptrvec_init(&joined);
    bool wake = false;
    rl_source_lock(s);
    rl_loop_lock_mutex(loop);
    rc = rl_members_add(loop, &rl_source_kind, &s->obj, name, &joined);
    /* The mode the loop runs in, or its host waits for (backend.c). */
    for (size_t i = 0; !rc && i < joined.count; i++) wake |= rl_loop_may_await(loop, joined.items[i]);
    wake = wake && s->version == 0 && atomic_load(&s->signalled);
    /* A watching source changes the signals the loop takes while it sleeps, which a sleeping
     * wait read before: wake it to sleep again with them, in whatever mode it runs. */
    wake |= rc == 0 && s->signo && loop->run;
    rl_loop_unlock(loop);
    rl_source_unlock(s);
    for (size_t i = 0; i < joined.count; i++) schedule_callout(s, false, loop, ((rl_mode *)joined.items[i])->name);
    rl_ptrvec_free(&joined);
    if (wake) rl_wake_post(loop);
    RL_DEBUG_VERIFY(loop, "rl_loop_add_source");
    return rc;
}

/* Take s out of one mode of loop that holds it (a common one, with only_common; the one named
 * name, when given), run its cancel and drop the mode's reference. False when there was none. */
static bool leave_one(rl_loop_t *loop, rl_source_t *s, const char *name, bool only_common) {
    rl_mode *left = NULL;
    rl_source_lock(s);
    rl_loop_lock_mutex(loop);
    if (name) {
        rl_mode *m = rl_mode_find(loop, name, false);
        if (m && source_leave(loop, m, &s->obj)) left = m;
    } else {
        for (size_t i = 0; !left && i < loop->modes.count; i++) {
            rl_mode *m = loop->modes.items[i];
            if ((m->common || !only_common) && source_leave(loop, m, &s->obj)) left = m;
        }
    }
    rl_loop_unlock(loop);
    rl_source_unlock(s);
    if (!left) return false;
    schedule_callout(s, true, loop, left->name); /* modes live as long as their loop */
    rl_release(s); /* the mode's reference; last, since it may destroy s */
    return true;
}

/* Drop s from the common set of loop; true when it was there (the caller then releases it). */
static bool leave_common_set(rl_loop_t *loop, rl_source_t *s) {
    rl_source_lock(s);
    rl_loop_lock_mutex(loop);
    bool was = rl_ptrset_remove(&loop->common_sources, s);
    if (was) unlink_if_gone(loop, s);
    rl_loop_unlock(loop);
    rl_source_unlock(s);
    return was;
}

int rl_loop_remove_source(rl_loop_t *loop, rl_source_t *s, const char *mode) {
    if (!loop || !s) return -EINVAL;
    int rc = rl_mode_check_name(mode);
    if (rc) return rc;
    if (!rl_mode_name_is_common(mode)) {
        rc = leave_one(loop, s, mode, false) ? 0 : -ENOENT;
    } else if (!leave_common_set(loop, s)) {
        rc = -ENOENT;
    } else {
        rl_retain(s);
        while (leave_one(loop, s, NULL, true)) {}
        rl_release(s); /* the common set's reference */
        rl_release(s);
    }
    RL_DEBUG_VERIFY(loop, "rl_loop_remove_source");
    return rc;
}

bool rl_loop_contains_source(rl_loop_t *loop, rl_source_t *s, const char *mode) {
    if (!loop || !s || rl_mode_check_name(mode)) return false;
    rl_loop_lock_mutex(loop);
    bool in = rl_members_contains(loop, &rl_source_kind, &s->obj, mode);
    rl_loop_unlock(loop);
    return in;
}

void rl_source_remove_from_loop(rl_loop_t *loop, rl_source_t *s) {
    rl_retain(s);
    bool common = leave_common_set(loop, s);
    while (leave_one(loop, s, NULL, false)) {}
    if (common) rl_release(s);
    rl_release(s);
}

void rl_source_invalidate(rl_source_t *s) {
    if (!s || !atomic_exchange(&s->valid, false)) return;
    rl_retain(s); /* removal drops the loops' references; keep s alive until done */
    for (;;) {
        rl_source_lock(s);
        rl_loop_t *loop = s->links.count ? rl_retain(((rl_link *)s->links.items[0])->loop) : NULL;
        rl_source_unlock(s);
        if (!loop) break;
        rl_source_remove_from_loop(loop, s);
        RL_DEBUG_VERIFY(loop, "rl_source_invalidate");
        rl_release(loop);
    }
    if (s->kind) rl_source_end_special(s); /* in no loop now, and none will take it */
    rl_release(s);
}

bool rl_source_is_valid(rl_source_t *s) { return s && atomic_load(&s->valid); }
long rl_source_get_order(rl_source_t *s) { return s ? s->order : 0; }
/* A process source's pidfd is the library's: it is not shown. */
int rl_source_get_fd(rl_source_t *s) { return s && !s->kind ? s->fd : -1; }
unsigned rl_source_get_fd_events(rl_source_t *s) { return s && !s->kind ? atomic_load(&s->events) : 0; }

/* How many times a signaller that found s signalled but not yet published looks again before it
 * publishes itself: about a microsecond, several times what publishing takes when its signaller
 * runs. */
#define RL_PUBLISH_WAIT_SPINS 64

/* Whether the signaller that set RL_SIGNAL_SET published it (or the loop took it) within a short
 * wait. Only a hint: nothing is lost if it is wrong either way. */
static bool published_soon(rl_source_t *s) {
    for (int i = 0; i < RL_PUBLISH_WAIT_SPINS; i++) {
        if (atomic_load_explicit(&s->signalled, memory_order_relaxed) != RL_SIGNAL_SET) return true;
        rl_cpu_relax();
    }
    return false;
}

/* No signal is lost. Each signal is an RMW of s->signalled, and the loop's perform clears it with
 * an exchange before its callout. A signal that finds SET was made before that clear in the
 * variable's order (its RMW read the SET the clear will read or overwrite), so the clear reads a
 * value of the release sequence headed by this signal's RMW: the callout sees what the signaller
 * wrote before signalling. And a clear will come: the signal that set SET (finding it clear) queues
 * the links after, so the loop performs s once more.
 *
 * Nor does one signaller stall the others. The one that sets SET must then queue the links; if it
 * is preempted in between (4 producers timesharing a CPU, or outside load), the others, finding
 * SET, would coalesce into a signal the loop cannot see until it runs again: milliseconds of
 * empty passes. So a signaller that finds SET without PUBLISHED waits a moment, then queues the
 * links itself under the source lock; a preempted signaller holding that lock makes it block,
 * which hands the CPU back. Queueing twice is harmless (enqueue is once per link, and a perform
 * finding no SET calls nothing out). The common case costs nothing more: a signal finding
 * PUBLISHED returns after its one RMW, as before. */
void rl_source_signal(rl_source_t *s) {
    if (!s || s->version != 0) return;
    unsigned old = atomic_fetch_or(&s->signalled, RL_SIGNAL_SET);
    if (old & RL_SIGNAL_PUBLISHED) return;
    if ((old & RL_SIGNAL_SET) && published_soon(s)) return;
    rl_source_lock(s);
    for (size_t i = 0; i < s->links.count; i++) rl_link_enqueue(s->links.items[i]);
    /* Only onto a SET still there: after a clear, a PUBLISHED alone would make the next signal
     * return without queueing anything. */
    unsigned set = RL_SIGNAL_SET;
    atomic_compare_exchange_strong(&s->signalled, &set, RL_SIGNAL_SET | RL_SIGNAL_PUBLISHED);
    rl_source_unlock(s);
}

bool rl_source_is_signalled(rl_source_t *s) { return s && atomic_load(&s->signalled); }

int rl_source_set_fd_events(rl_source_t *s, unsigned events) {
    if (!s || s->version != 1 || s->kind || !atomic_load(&s->valid) ||
        (events & ~(unsigned)(RL_FD_READABLE | RL_FD_WRITABLE | RL_FD_ERROR)))
        return -EINVAL;
    return rl_source_watch_fd(s, events);
}

int rl_source_watch_fd(rl_source_t *s, unsigned events) {
    int rc = 0;
    rl_source_lock(s);
    atomic_store(&s->events, events & (RL_FD_READABLE | RL_FD_WRITABLE));
    for (size_t i = 0; i < s->links.count; i++) {
        rl_link *l = s->links.items[i];
        rl_loop_lock_mutex(l->loop);
        int one = l->loop->dead ? 0 : rl_fd_table_set_events(l->loop, s);
        rl_loop_unlock(l->loop);
        if (one && !rc) rc = one;
    }
    rl_source_unlock(s);
    return rc;
}

/* Put a collected but unperformed source back at the front of loop's queue (it stays signalled),
 * unless a signal since has queued it again. */
static void requeue_first(rl_loop_t *loop, rl_source_t *s) {
    rl_source_lock(s);
    rl_loop_lock_mutex(loop);
    rl_link *l = link_for(s, loop);
    if (l && !(atomic_fetch_or(&l->state, RL_LINK_QUEUED) & RL_LINK_QUEUED)) {
        l->next = loop->deferred;
        loop->deferred = l;
        if (!loop->deferred_tail) loop->deferred_tail = l;
    }
    rl_loop_unlock(loop);
    rl_source_unlock(s);
}

/* Move the links signalled since the last pass to the end of the deferred list (which keeps
 * signal order), then take the sources of the running mode out of it into ready, retained. A
 * link whose source cannot be taken (out of memory) stays queued, and the pass does not sleep.
 * loop locked (so no link dies and no source leaves meanwhile). */
static void take_ready(rl_loop_t *loop, rl_run_frame *run, rl_ready_vec *ready) {
    rl_link *pushed = atomic_exchange_explicit(&loop->signalled, NULL, memory_order_acquire);
    rl_link *fifo = NULL, *fifo_tail = pushed;
    while (pushed) { /* the stack is newest first */
        rl_link *next = pushed->next;
        pushed->next = fifo;
        fifo = pushed;
        pushed = next;
    }
    if (fifo) {
        if (loop->deferred_tail) loop->deferred_tail->next = fifo;
        else loop->deferred = fifo;
        loop->deferred_tail = fifo_tail;
    }
    rl_link **at = &loop->deferred, *last = NULL;
    while (*at) {
        rl_link *l = *at, *next = l->next; /* read before QUEUED clears: a signaller may then
                                              push l again, writing l->next */
        bool take = false, keep = true;
        if (atomic_load(&l->state) & RL_LINK_DEAD) {
            keep = false;
        } else if (rl_ptrset_contains(&run->mode->sources, l->source)) {
            take = rl_ready_vec_push(ready, l->source, l->source->order, 0) == 0;
            keep = !take;
            run->retry |= !take; /* out of memory: it stays queued; do not sleep on it */
        }
        if (keep) {
            last = l;
            at = &l->next;
            continue;
        }
        *at = next;
        if (take) {
            rl_object_retain(&l->source->obj);
            atomic_fetch_and(&l->state, ~RL_LINK_QUEUED);
        } else {
            free(l);
        }
    }
    loop->deferred_tail = last;
}

bool rl_sources_signalled_in(rl_loop_t *loop, rl_mode *mode) {
    if (atomic_load(&loop->signalled)) return true;
    for (rl_link *l = loop->deferred; l; l = l->next) /* queued links: no signaller writes next */
        if (!(atomic_load(&l->state) & RL_LINK_DEAD) && rl_ptrset_contains(&mode->sources, l->source))
            return true;
    return false;
}

void rl_sources_share_held(rl_loop_t *loop, rl_run_frame *outer) {
    /* Those the outer pass has not reached yet; it skips any the nested run performs. */
    for (size_t j = outer->sources.count; j-- > outer->unperformed;) {
        rl_source_t *s = outer->sources.items[j].source;
        if (atomic_load(&s->signalled)) requeue_first(loop, s);
    }
}

bool rl_sources_perform_signalled(rl_loop_t *loop, rl_run_frame *run) {
    rl_ready_vec *ready = &run->sources;
    ready->count = 0;
    if (!rl_sources_may_be_signalled(loop)) return false;
    rl_loop_lock_mutex(loop);
    take_ready(loop, run, ready);
    rl_loop_unlock(loop);
    if (ready->count == 0) return false;
    /* Ascending order; equal orders in signal order (a stable sort, at any count). */
    rl_ready_vec_sort(ready);
    bool handled = false;
    size_t i = 0;
    unsigned performed = 0;
    /* The phase's kind: that of its callouts when they share one, else RL_CALLOUT_SOURCE (a
     * version-0 source, or a mix). */
    int kind = RL_CALLOUT_NONE;
    rl_phase phase = rl_callouts_begin(loop);
    for (; i < ready->count; i++) {
        rl_source_t *s = ready->items[i].source;
        if (handled && run->stop_after_handle) break;
        run->unperformed = i + 1; /* the ones before are released by now, or are being performed */
        if ((atomic_exchange(&s->signalled, 0) & RL_SIGNAL_SET) && atomic_load(&s->valid)) {
            bool called = true; /* a signal or process source calls out only for news */
            int this_kind = RL_CALLOUT_SOURCE;
            if (s->kind == RL_SOURCE_SIGNAL) called = rl_signal_perform(s), this_kind = RL_CALLOUT_SIGNAL_SOURCE;
            else if (s->kind == RL_SOURCE_PROCESS) called = rl_process_perform(s), this_kind = RL_CALLOUT_PROCESS_SOURCE;
            else if (s->context.perform) __RL_IS_CALLING_OUT_TO_A_SOURCE0_PERFORM_FUNCTION__(s->context.perform, s->context.info);
            if (called) {
                RL_COUNT(loop, sources_performed, 1);
                handled = true;
                kind = !performed || kind == this_kind ? this_kind : RL_CALLOUT_SOURCE;
                performed++;
            }
        }
        rl_object_release(&s->obj);
    }
    run->unperformed = 0;
    /* Left for a later pass (the run returns after one handled source): back to the front of the
     * queue, in the same order, last first. */
    for (size_t j = ready->count; j-- > i;) {
        rl_source_t *s = ready->items[j].source;
        if (atomic_load(&s->signalled)) requeue_first(loop, s);
        rl_object_release(&s->obj);
    }
    rl_callouts_done(loop, kind, performed, &phase);
    ready->count = 0;
    return handled;
}
