/*
 * fd_table.c - which version-1 sources of a loop watch which fd, and what the loop's single
 * epoll set watches for each fd: the union of its sources' interests, so that a read source and
 * a write source on one socket share one registration.
 *
 * Sources of every mode share the set. When a ready fd has no taker in the running mode (its
 * sources are all in other modes) its registration is narrowed to the running mode's interest
 * ("parked"; with no interest at all, edge-triggered, so a hang-up is reported once) so that a
 * level-triggered fd cannot spin the loop; parked fds get their full registration back as soon
 * as a run (or a host's query, backend.c) is about another mode, and stay parked between runs
 * of the same mode, so that they keep a host's backend fd quiet too. A parked fd that is reported
 * again (what the mode wants of it changed: a source left the mode, the fd staying in the loop
 * through another mode) is narrowed again to what the mode now wants. Each
 * registration carries a generation in epoll's data, so an event still queued for an fd that was
 * removed (and perhaps reused) is dropped.
 *
 * Closed while registered. epoll keys a registration by (file, fd number) and drops it when the
 * file is closed, so a user who closes an fd before removing its source leaves a source whose
 * file is gone, and the number may come back for another file. We find out when the kernel
 * says so: an EPOLL_CTL_MOD that answers ENOENT or EBADF (the file at that number is not the one
 * registered). Every source that was live on the fd then becomes stale: it stays attached (so
 * that removing it works as usual) but never counts toward the registration and never receives
 * an event. Adding a second source on a registered fd probes with a MOD, so a new file on a
 * reused number gets a registration of its own. A stale registration the kernel keeps (the old
 * file is still open through a dup elsewhere) keeps reporting events that match no registration
 * of ours; when one repeats on consecutive waits, the epoll set is rebuilt from the table, as
 * libev does, which drops it. A loop that watches no fd does not poll the set in its passes, and
 * a host's query drops events; so a query that sees such an event counts it as one watched fd
 * (stale_seen) and reports a pass due, until a wait finds none or the set is rebuilt. The same
 * registration may still carry the live tag of the source whose fd was closed (no source was
 * added on the number since): an fd reported on many waits in a row is probed with a MOD at the 4th, 8th, 16th... (a stream that stays ready costs a system
 * call now and then, never per event), and the probe finds the file gone.
 *
 * Stale is a bit in the stored pointer (sources are 64-byte aligned), so marking never allocates.
 *
 * Dispatch. After a wait, rl_fd_table_dispatch takes the running mode's sources of each ready fd
 * (retained, with their events) under the lock, sorts them by order, and calls them out unlocked.
 * A callout may change what a later one finds: each is called only if it is still valid, still
 * wants one of its events, and (when any source left a mode of the loop meanwhile, which a count
 * of removals tells) is still in the mode. A ready fd that no source of the mode wants is parked.
 *
 * All functions but rl_fd_table_dispatch: loop locked.
 */
#include "fd_table.h"
#include "internal.h"
#include "wait.h"
#include "lag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STALE ((uintptr_t)1)

static rl_source_t *source_of(void *entry) { return (rl_source_t *)((uintptr_t)entry & ~STALE); }
static bool is_stale(void *entry) { return (uintptr_t)entry & STALE; }
/* Whether the set holds a registration for the file now at the watch's fd. */
static bool in_set(const rl_fd_watch *w) { return w->gen != 0; }

static rl_fd_watch *watch_for(rl_loop_t *loop, int fd, bool create) {
    rl_fd_table *t = &loop->fds;
    if (fd < 0) return NULL;
    if ((size_t)fd >= t->size) {
        if (!create) return NULL;
        size_t size = t->size ? t->size : 64;
        while (size <= (size_t)fd) size *= 2;
        rl_fd_watch *grown = rl_realloc(t->watches, size * sizeof *grown);
        if (!grown) return NULL;
        memset(grown + t->size, 0, (size - t->size) * sizeof *grown);
        t->watches = grown;
        t->size = size;
    }
    return &t->watches[fd];
}

static size_t entry_count(const rl_fd_watch *w) {
    return (w->first != NULL) + (w->more ? w->more->count : 0);
}

static void **entry_at(rl_fd_watch *w, size_t i) { return i == 0 ? &w->first : &w->more->items[i - 1]; }

/* The union of the live sources' interests, and how many live sources there are. */
static unsigned live_interest(rl_fd_watch *w, size_t *live) {
    unsigned events = 0;
    size_t n = entry_count(w);
    *live = 0;
    for (size_t i = 0; i < n; i++) {
        void *e = *entry_at(w, i);
        if (is_stale(e)) continue;
        (*live)++;
        events |= atomic_load_explicit(&source_of(e)->events, memory_order_relaxed);
    }
    return events;
}

static void unpark_one(rl_loop_t *loop, rl_fd_watch *w, int fd) {
    if (!w->parked) return;
    w->parked = false;
    rl_ptrvec_remove(&loop->fds.parked, (void *)(uintptr_t)fd);
}

/* The file registered at fd is gone: its live sources become stale; nothing is registered. */
static void forget_file(rl_loop_t *loop, rl_fd_watch *w, int fd) {
    size_t n = entry_count(w);
    for (size_t i = 0; i < n; i++) {
        void **e = entry_at(w, i);
        *e = (void *)((uintptr_t)*e | STALE);
    }
    unpark_one(loop, w, fd);
    if (in_set(w)) rl_locked_count_add(&loop->fds.in_set, -1);
    w->gen = 0;
    w->registered = 0;
}

static bool file_gone(int rc) { return rc == -ENOENT || rc == -EBADF; }

/* Change what the registration at fd watches (in the set already); force re-arms an unchanged
 * one (edge-triggered registrations). A vanished file makes the watch's sources stale and
 * returns -EBADF. */
static int modify(rl_loop_t *loop, rl_fd_watch *w, int fd, unsigned events, bool force) {
    if (w->registered == events && !force) return 0;
    int rc = rl_wait_watch(&loop->wait, fd, events, w->gen, false);
    if (file_gone(rc)) {
        forget_file(loop, w, fd);
        return -EBADF;
    }
    if (rc == 0) w->registered = events;
    return rc;
}

/* Register the file now at fd, under a new generation. */
static int register_fd(rl_loop_t *loop, rl_fd_watch *w, int fd, unsigned events) {
    uint32_t gen = ++loop->fds.next_gen ? loop->fds.next_gen : ++loop->fds.next_gen;
    int rc = rl_wait_watch(&loop->wait, fd, events, gen, true);
    if (rc) return rc;
    w->gen = gen;
    w->registered = events;
    rl_locked_count_add(&loop->fds.in_set, 1);
    return 0;
}

/* Bring the registration in line with the live sources' interests (and unpark it). */
static int refresh(rl_loop_t *loop, rl_fd_watch *w, int fd) {
    size_t live;
    unsigned events = live_interest(w, &live);
    unpark_one(loop, w, fd);
    if (!in_set(w)) return 0;
    if (live == 0) {
        rl_wait_unwatch(&loop->wait, fd);
        w->gen = 0;
        w->registered = 0;
        rl_locked_count_add(&loop->fds.in_set, -1);
        return 0;
    }
    /* A registration with no interest is edge-triggered: re-arm it even if unchanged. */
    return modify(loop, w, fd, events, events == 0);
}

int rl_fd_table_attach(rl_loop_t *loop, rl_source_t *source) {
    int fd = source->fd;
    rl_fd_watch *w = watch_for(loop, fd, true);
    if (!w) return -ENOMEM;
    /* Room first, so that nothing below can fail after the kernel said yes. */
    if (w->first && !w->more) {
        if (!(w->more = rl_malloc(sizeof *w->more))) return -ENOMEM;
        rl_ptrvec_init(w->more);
    }
    if (w->first && w->more->count == w->more->capacity) {
        if (rl_ptrvec_push(w->more, NULL)) return -ENOMEM;
        w->more->count--;
    }
    unsigned events = atomic_load_explicit(&source->events, memory_order_relaxed);
    int rc = 0;
    if (in_set(w)) {
        /* Is the file at fd still the one registered? A MOD finds out (and widens the interest). */
        size_t live;
        unsigned want = live_interest(w, &live) | events;
        rc = rl_wait_watch(&loop->wait, fd, want, w->gen, false);
        if (rc == 0) {
            unpark_one(loop, w, fd);
            w->registered = want;
        } else if (file_gone(rc)) {
            forget_file(loop, w, fd);
        }
    }
    if (!in_set(w)) rc = register_fd(loop, w, fd, events);
    if (rc) return rc;
    if (!w->first) w->first = source;
    else w->more->items[w->more->count++] = source;
    return 0;
}

void rl_fd_table_detach(rl_loop_t *loop, rl_source_t *source) {
    rl_fd_watch *w = watch_for(loop, source->fd, false);
    if (!w) return;
    size_t n = entry_count(w);
    bool was_live = false, found = false;
    for (size_t i = 0; i < n && !found; i++) {
        void **e = entry_at(w, i);
        if (source_of(*e) != source) continue;
        found = true;
        was_live = !is_stale(*e);
        /* The others keep their order (the order they were added): ties in order are called in
         * it. */
        if (n == 1) {
            w->first = NULL;
        } else {
            if (i == 0) w->first = w->more->items[0];
            rl_ptrvec_remove_at(w->more, i == 0 ? 0 : i - 1);
        }
    }
    if (w->more && !w->more->count) {
        rl_ptrvec_free(w->more);
        free(w->more);
        w->more = NULL;
    }
    if (found && was_live) (void)refresh(loop, w, source->fd);
}

int rl_fd_table_set_events(rl_loop_t *loop, rl_source_t *source) {
    rl_fd_watch *w = watch_for(loop, source->fd, false);
    if (!w) return 0;
    size_t n = entry_count(w);
    for (size_t i = 0; i < n; i++) {
        void *e = *entry_at(w, i);
        if (source_of(e) == source && is_stale(e)) return -EBADF;
    }
    return refresh(loop, w, source->fd);
}

void rl_fd_table_joined(rl_loop_t *loop, rl_source_t *source) {
    rl_fd_watch *w = watch_for(loop, source->fd, false);
    if (w && w->parked) (void)refresh(loop, w, source->fd); /* unparks it */
}

bool rl_fd_table_is_stale(rl_loop_t *loop, rl_source_t *source) {
    rl_fd_watch *w = watch_for(loop, source->fd, false);
    size_t n = w ? entry_count(w) : 0;
    for (size_t i = 0; i < n; i++) {
        void *e = *entry_at(w, i);
        if (source_of(e) == source) return is_stale(e);
    }
    return false;
}

/* An event that matches no registration of ours: remember it; one seen on two consecutive waits
 * comes from a registration the kernel keeps for a file we can no longer name. */
static bool repeated_stale(rl_fd_table *t, uint64_t tag) {
    bool repeated = false;
    for (size_t i = 0; i < t->stale_before; i++) repeated |= t->stale[i] == tag;
    if (t->stale_now < RL_FD_STALE_TAGS) t->stale_next[t->stale_now++] = tag;
    return repeated;
}

/* Narrow the registration of a ready fd that no source of mode wants to what mode's sources
 * want (none: edge-triggered, so a hang-up comes once), until a run or host asks about another
 * mode. loop locked. */
static void park(rl_loop_t *loop, rl_mode *mode, rl_fd_watch *w, int fd, bool mode_has_source,
                 unsigned mode_interest) {
    rl_fd_table *t = &loop->fds;
    rl_fd_table_unpark_for(loop, mode); /* every parked fd is parked for one mode */
    unsigned narrowed = mode_has_source ? mode_interest : 0;
    if (w->parked) {
        /* Parked for this mode already, yet ready again: what the mode wants of it changed since
         * (a source left the mode, or narrowed its interest, with the fd staying in the loop
         * through another mode): narrow it again, or it reports itself on every wait. An
         * unchanged registration with no interest is edge-triggered and has reported its event
         * once: it is left alone. */
        if (w->registered != narrowed) (void)modify(loop, w, fd, narrowed, narrowed == 0);
        return;
    }
    if (rl_ptrvec_push(&t->parked, (void *)(uintptr_t)fd)) return;
    if (modify(loop, w, fd, narrowed, narrowed == 0) == 0 && in_set(w)) {
        w->parked = true;
        t->parked_mode = mode;
    } else {
        rl_ptrvec_remove(&t->parked, (void *)(uintptr_t)fd);
    }
}

/* Take the sources of the running mode that event is for into out (retained, each with the
 * events it asked for that came); park the fd when none wants them. loop locked. */
static void take(rl_loop_t *loop, rl_mode *mode, const rl_wait_event *event, rl_ready_vec *out, bool *rebuild) {
    rl_fd_table *t = &loop->fds;
    rl_fd_watch *w = (size_t)event->fd < t->size ? &t->watches[event->fd] : NULL;
    if (!w || w->gen != event->gen) { /* (a registered fd never has generation 0) */
        *rebuild |= repeated_stale(t, ((uint64_t)event->gen << 32) | (uint32_t)event->fd);
        return;
    }
    /* Ready on many waits in a row: is the file at the number still the one registered? */
    if (w->last_wait + 1 != t->waits) w->streak = 0;
    else if (w->streak < UINT16_MAX && ++w->streak >= 4 && !(w->streak & (w->streak - 1)) &&
             modify(loop, w, event->fd, w->registered, true) == -EBADF)
        return; /* its sources are stale now; the kernel's registration, if kept, repeats */
    w->last_wait = t->waits;
    bool taken = false, mode_has_source = false;
    unsigned mode_interest = 0;
    /* Registered means a live source, so first is set; more is rare. */
    size_t more = w->more ? w->more->count : 0;
    void *e = w->first;
    for (size_t i = 0;; e = w->more->items[i++]) {
        rl_source_t *s = source_of(e);
        if (!is_stale(e) && atomic_load(&s->valid) && rl_ptrset_contains(&mode->sources, s)) {
            unsigned interest = atomic_load_explicit(&s->events, memory_order_relaxed);
            mode_has_source = true;
            mode_interest |= interest;
            unsigned ev = event->events & (interest | RL_FD_ERROR);
            /* Out of memory: left, level-triggered, for the next wait. */
            if (ev && rl_ready_vec_push(out, s, s->order, ev) == 0) {
                rl_object_retain(&s->obj);
                taken = true;
            }
        }
        if (i == more) break;
    }
    if (!taken) park(loop, mode, w, event->fd, mode_has_source, mode_interest);
}

bool rl_fd_table_settle(rl_loop_t *loop, rl_mode *mode, const rl_wait_event *events, int n) {
    rl_fd_table *t = &loop->fds;
    bool wanted = false;
    for (int k = 0; k < n; k++) {
        int fd = events[k].fd;
        rl_fd_watch *w = (size_t)fd < t->size ? &t->watches[fd] : NULL;
        if (!w || w->gen != events[k].gen) {
            /* Stale: the pass's waits deal with those (repeated, the set is rebuilt), but a loop
             * that watches no fd polls nothing: count it as a watched fd till then, and have
             * the host run a pass now rather than find its fd readable for ever. */
            if (!t->stale_seen) {
                t->stale_seen = true;
                rl_locked_count_add(&t->in_set, 1);
            }
            wanted = true;
            continue;
        }
        bool mode_has_source = false, wants = false;
        unsigned mode_interest = 0;
        size_t count = entry_count(w);
        for (size_t i = 0; i < count; i++) {
            void *e = *entry_at(w, i);
            rl_source_t *s = source_of(e);
            if (is_stale(e) || !atomic_load(&s->valid) || !rl_ptrset_contains(&mode->sources, s)) continue;
            unsigned interest = atomic_load_explicit(&s->events, memory_order_relaxed);
            mode_has_source = true;
            mode_interest |= interest;
            wants |= (events[k].events & (interest | RL_FD_ERROR)) != 0;
        }
        if (!wants) {
            park(loop, mode, w, fd, mode_has_source, mode_interest);
            continue;
        }
        wanted = true;
        /* An edge-triggered registration (no interest: errors only) reports its event once, and
         * this poll took it: a MOD queues it again while it lasts. Level-triggered ones stay. */
        if (w->registered == 0) (void)modify(loop, w, fd, 0, true);
    }
    return wanted;
}

/* Register every watched fd in a new epoll set (rl_wait_renew made it). */
static void register_all(rl_loop_t *loop) {
    rl_fd_table *t = &loop->fds;
    for (size_t fd = 0; fd < t->size; fd++) {
        rl_fd_watch *w = &t->watches[fd];
        if (!in_set(w)) continue;
        if (rl_wait_watch(&loop->wait, (int)fd, w->registered, w->gen, true)) forget_file(loop, w, (int)fd);
    }
}

/* Ready fds are scattered over the table, their sources over the heap and their places in the
 * mode's set over its slots: taken one by one, each of those is a cache miss waiting for the one
 * before. With several events, start loading every fd's row first, then (the rows arriving)
 * every first source and its slot in the mode's set, so that the misses overlap; take() then
 * finds them loaded. A prefetch never faults, and a stale row only wastes a load. */
enum { PREFETCH_FROM = 4 };

static void prefetch_rows(const rl_fd_table *t, const rl_mode *mode, const rl_wait_event *events, int n) {
    for (int i = 0; i < n; i++)
        if ((size_t)events[i].fd < t->size) __builtin_prefetch(&t->watches[events[i].fd]);
    for (int i = 0; i < n; i++) {
        if ((size_t)events[i].fd >= t->size) continue;
        void *first = t->watches[events[i].fd].first;
        if (!first) continue;
        __builtin_prefetch(source_of(first));
        rl_ptrset_prefetch(&mode->sources, source_of(first));
    }
}

/* The stale event a host's query saw is gone (the set was rebuilt, or a wait saw none). */
static void stale_gone(rl_fd_table *t) {
    t->stale_seen = false;
    rl_locked_count_add(&t->in_set, -1);
}

void rl_fd_table_stale_gone(rl_loop_t *loop) {
    rl_loop_lock_mutex(loop);
    if (loop->fds.stale_seen) stale_gone(&loop->fds);
    rl_loop_unlock(loop);
}

/* Take the sources the events are for (the loop locked meanwhile). Returns the count of
 * source_removals at that time. */
static unsigned long long take_all(rl_loop_t *loop, rl_mode *mode, const rl_wait_event *events, int n,
                                   rl_ready_vec *out) {
    rl_fd_table *t = &loop->fds;
    bool rebuild = false;
    rl_loop_lock_mutex(loop);
    unsigned long long removals = atomic_load_explicit(&loop->source_removals, memory_order_relaxed);
    t->stale_now = 0;
    t->waits++;
    if (n >= PREFETCH_FROM) prefetch_rows(t, mode, events, n);
    for (int i = 0; i < n; i++) take(loop, mode, &events[i], out, &rebuild);
    memcpy(t->stale, t->stale_next, t->stale_now * sizeof *t->stale);
    t->stale_before = t->stale_now;
    bool rebuilt = rebuild && rl_wait_renew(&loop->wait, false) == 0;
    if (rebuilt) {
        register_all(loop);
        t->stale_before = 0;
    }
    if (t->stale_seen && (rebuilt || !t->stale_now)) stale_gone(t);
    rl_loop_unlock(loop);
    return removals;
}

/* Why: the wakeup is a cross-thread request whose work the next pass's phase 4 (or blocks) serves;
 * handling the fds the wait returned with it first makes the request wait for every one of their
 * callouts (a burst of them: up to RL_WAIT_MAX_EVENTS), where an epoll loop reading its events in
 * order runs only those reported before the wakeup, and CF handles the wakeup alone in its pass.
 * The fds lose nothing: the wait might as well have returned the wakeup alone, a moment earlier. */
int rl_fd_table_defer(rl_loop_t *loop, rl_mode *mode, rl_wait_event *events, int n) {
    rl_fd_table *t = &loop->fds;
    if (t->deferred) { /* (written by the loop's thread only) */
        t->deferred = false;
        return n;
    }
    rl_loop_lock_mutex(loop);
    int kept = n;
    if (rl_sources_signalled_in(loop, mode) || rl_blocks_pending(loop, mode)) {
        kept = 0;
        for (int i = 0; i < n; i++) {
            rl_fd_watch *w = (size_t)events[i].fd < t->size ? &t->watches[events[i].fd] : NULL;
            /* Kept: edge-triggered registrations (no interest: an error or hang-up is reported
             * once), and events of no registration of ours (stale ones are found by repeats). */
            if (!w || w->gen != events[i].gen || w->registered == 0) events[kept++] = events[i];
        }
    }
    rl_loop_unlock(loop);
    t->deferred = kept < n;
    return kept;
}

bool rl_fd_table_dispatch(rl_loop_t *loop, rl_run_frame *run, const rl_wait_event *events, int n) {
    rl_ready_vec *ready = &run->sources;
    ready->count = 0;
    unsigned long long removals = take_all(loop, run->mode, events, n, ready);
    if (!ready->count) return false;
    rl_ready_vec_sort(ready);
    /* Nothing but this function touches the vector until it returns (a nested run has its own). */
    const rl_ready *items = ready->items;
    size_t count = ready->count, i = 0;
    bool handled = false, once = run->stop_after_handle;
    unsigned called = 0;
    /* The phase's kind: RL_CALLOUT_PROCESS_SOURCE when it only called child-process sources
     * (their pidfds are fd sources), else RL_CALLOUT_FD_SOURCE. */
    int kind = RL_CALLOUT_NONE;
    rl_phase phase = rl_callouts_begin(loop);
    for (; i < count; i++) {
        if (handled && once) break;
        rl_source_t *s = items[i].source;
        /* The next callout's context is the user's memory, cold: load it while this one runs. */
        if (i + 1 < count) __builtin_prefetch(items[i + 1].source->context.info);
        /* An earlier callout may have narrowed its interest, invalidated it or removed it. */
        unsigned ev = items[i].events & (atomic_load_explicit(&s->events, memory_order_relaxed) | RL_FD_ERROR);
        bool go = ev && atomic_load(&s->valid);
        if (go && atomic_load_explicit(&loop->source_removals, memory_order_relaxed) != removals) {
            /* A source left a mode since they were taken: is this one still in the mode? */
            rl_loop_lock_mutex(loop);
            go = rl_ptrset_contains(&run->mode->sources, s);
            rl_loop_unlock(loop);
        }
        if (go) {
            __RL_IS_CALLING_OUT_TO_A_SOURCE1_PERFORM_FUNCTION__(s->callback, s, s->fd, ev, s->context.info);
            RL_COUNT(loop, sources_performed, 1);
            handled = true;
            int this_kind = s->kind == RL_SOURCE_PROCESS ? RL_CALLOUT_PROCESS_SOURCE : RL_CALLOUT_FD_SOURCE;
            kind = !called || kind == this_kind ? this_kind : RL_CALLOUT_FD_SOURCE;
            called++;
        }
        rl_object_release(&s->obj);
    }
    for (; i < count; i++) rl_object_release(&items[i].source->obj); /* level-triggered: they come again */
    rl_callouts_done(loop, kind, called, &phase);
    ready->count = 0;
    return handled;
}

int rl_fd_table_renew(rl_loop_t *loop) {
    int rc = rl_wait_renew(&loop->wait, true);
    if (rc == 0) register_all(loop);
    loop->fds.stale_before = 0;
    if (rc == 0 && loop->fds.stale_seen) stale_gone(&loop->fds);
    return rc;
}

void rl_fd_table_unpark_all(rl_loop_t *loop) {
    while (loop->fds.parked.count) {
        int fd = (int)(uintptr_t)loop->fds.parked.items[loop->fds.parked.count - 1];
        (void)refresh(loop, &loop->fds.watches[fd], fd); /* unparks it */
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

int rl_fd_table_verify(rl_loop_t *loop, void (*fail)(void *ctx, const char *what, long a), void *ctx) {
    rl_fd_table *t = &loop->fds;
    int bad = 0;
    size_t registered_fds = 0;
#define FD_CHECK(cond, what, a) do { if (!(cond)) { bad++; fail(ctx, what, (long)(a)); } } while (0)
    for (size_t fd = 0; fd < t->size; fd++) {
        rl_fd_watch *w = &t->watches[fd];
        size_t n = entry_count(w), live;
        unsigned interest = live_interest(w, &live);
        FD_CHECK(w->first || !w->more || !w->more->count, "fd watch has sources in more but none first, fd", fd);
        FD_CHECK(!w->more || w->more->count, "fd watch keeps an empty list, fd", fd);
        FD_CHECK(in_set(w) == (live > 0), "fd registered without live sources (or not with), fd", fd);
        FD_CHECK(!w->parked || in_set(w), "parked fd not registered, fd", fd);
        FD_CHECK(w->parked == rl_ptrvec_contains(&t->parked, (void *)(uintptr_t)fd), "parked flag and list disagree, fd", fd);
        FD_CHECK(!in_set(w) || w->parked || w->registered == interest, "registration is not the union of interests, fd", fd);
        for (size_t i = 0; i < n; i++) {
            rl_source_t *s = source_of(*entry_at(w, i));
            FD_CHECK(s && s->version == 1 && s->fd == (int)fd, "fd watch holds a source of another fd, fd", fd);
            FD_CHECK(s && rl_loop_holds_source(loop, s), "fd watch holds a source the loop does not hold, fd", fd);
        }
        registered_fds += in_set(w);
    }
    size_t counted = atomic_load(&t->in_set) - t->stale_seen;
    FD_CHECK(registered_fds == counted, "count of registered fds is off by", (long)counted - (long)registered_fds);
#undef FD_CHECK
    return bad;
}
