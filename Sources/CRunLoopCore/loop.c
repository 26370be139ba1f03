/*
 * loop.c - loops as objects: one per thread, created on first use and torn down at thread exit;
 * the main thread's loop; the thread-safe controls (stop, wakeup, perform); counters.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pthread_mutex_t rl_items_lock = PTHREAD_MUTEX_INITIALIZER;
_Thread_local rl_loop_t *rl_tls_loop;

/* The main loop: created once under main_lock, then read without it. */
static pthread_mutex_t main_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(rl_loop_t *) main_loop;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;

static bool on_main_thread(void) { return gettid() == getpid(); }

static rl_loop_t *loop_create(void) {
    rl_loop_t *loop = aligned_alloc(_Alignof(rl_loop_t), sizeof *loop);
    if (!loop) return NULL;
    memset(loop, 0, sizeof *loop);
    rl_object_init(&loop->obj, RL_TYPE_LOOP);
    pthread_mutex_init(&loop->lock, NULL);
    rl_ptrvec_init(&loop->modes);
    rl_ptrvec_init(&loop->deferred);
    rl_ptrvec_init(&loop->fds.parked);
    if (rl_wait_init(&loop->wait) < 0 || !(loop->default_mode = rl_mode_find(loop, RL_DEFAULT_MODE, true))) {
        rl_wait_destroy(&loop->wait);
        free(loop);
        return NULL;
    }
    loop->default_mode->common = true;
    return loop;
}

static void thread_exited(void *value) {
    rl_loop_t *loop = value;
    rl_loop_teardown(loop);
    rl_tls_loop = NULL;
    rl_release(loop);
}

static void make_key(void) {
    if (pthread_key_create(&exit_key, thread_exited)) {
        fprintf(stderr, "crunloop: pthread_key_create failed\n");
        abort();
    }
}

rl_loop_t *rl_loop_get_current(void) {
    if (rl_tls_loop) return rl_tls_loop;
    pthread_once(&key_once, make_key);
    rl_loop_t *loop;
    if (on_main_thread()) {
        loop = rl_retain(rl_loop_get_main()); /* the thread's reference, dropped at its exit */
    } else {
        loop = loop_create();
    }
    if (!loop) {
        fprintf(stderr, "crunloop: cannot create the thread's loop: %s\n", strerror(errno));
        abort();
    }
    rl_tls_loop = loop;
    pthread_setspecific(exit_key, loop);
    return loop;
}

rl_loop_t *rl_loop_get_main(void) {
    rl_loop_t *loop = atomic_load_explicit(&main_loop, memory_order_acquire);
    if (loop) return loop;
    pthread_mutex_lock(&main_lock);
    loop = atomic_load_explicit(&main_loop, memory_order_relaxed);
    if (!loop) {
        if (!(loop = loop_create())) {
            fprintf(stderr, "crunloop: cannot create the main loop: %s\n", strerror(errno));
            abort();
        }
        atomic_store_explicit(&main_loop, loop, memory_order_release);
    }
    pthread_mutex_unlock(&main_lock);
    return loop;
}

bool rl_loop_is_current(rl_loop_t *loop) {
    if (!loop) return false;
    if (rl_tls_loop) return rl_tls_loop == loop;
    return on_main_thread() && loop == atomic_load_explicit(&main_loop, memory_order_acquire);
}

rl_loop_t *rl_owner_lock(_Atomic(rl_loop_t *) *owner) {
    for (;;) {
        rl_loop_t *loop = atomic_load(owner);
        if (loop && loop == rl_tls_loop) {
            /* Our own loop cannot go away under us: no global lock on the loop thread's path. */
            pthread_mutex_lock(&loop->lock);
            if (atomic_load(owner) == loop) return rl_retain(loop);
            pthread_mutex_unlock(&loop->lock);
            continue;
        }
        pthread_mutex_lock(&rl_items_lock);
        loop = atomic_load(owner);
        if (!loop) return NULL; /* rl_items_lock stays held */
        rl_retain(loop);
        pthread_mutex_unlock(&rl_items_lock);
        pthread_mutex_lock(&loop->lock);
        if (atomic_load(owner) == loop) return loop;
        pthread_mutex_unlock(&loop->lock);
        rl_release(loop);
    }
}

void rl_owner_unlock(rl_loop_t *loop) {
    if (!loop) {
        pthread_mutex_unlock(&rl_items_lock);
        return;
    }
    pthread_mutex_unlock(&loop->lock);
    rl_release(loop);
}

void rl_loop_stop(rl_loop_t *loop) {
    if (!loop) return;
    pthread_mutex_lock(&loop->lock);
    bool running = loop->run != NULL;
    if (running) atomic_store(&loop->run->stopped, true);
    pthread_mutex_unlock(&loop->lock);
    if (running) rl_loop_wakeup(loop);
}

void rl_loop_wakeup(rl_loop_t *loop) {
    if (!loop) return;
    /* A wakeup already on its way covers this one: a load (a plain mov on x86, seq_cst so it is
     * ordered after the caller's queueing), no write to a shared cache line. */
    if (atomic_load(&loop->wake_state) & RL_WAKE_PENDING) return;
    unsigned old = atomic_fetch_or(&loop->wake_state, RL_WAKE_PENDING);
    if ((old & (RL_WAKE_PENDING | RL_WAKE_SLEEPING)) == RL_WAKE_SLEEPING) {
        rl_wait_post_wakeup(&loop->wait);
        atomic_fetch_add_explicit(&loop->counters.wakeup_writes, 1, memory_order_relaxed);
    }
}

bool rl_loop_is_waiting(rl_loop_t *loop) {
    return loop && (atomic_load(&loop->wake_state) & RL_WAKE_SLEEPING);
}

int rl_loop_perform(rl_loop_t *loop, const char *mode, void (*fn)(void *), void *arg) {
    if (!loop || !fn) return -EINVAL;
    int rc = rl_mode_check_name(mode);
    if (rc) return rc;
    rl_block *b = malloc(sizeof *b);
    if (!b) return -ENOMEM;
    b->fn = fn;
    b->arg = arg;
    b->next = NULL;
    pthread_mutex_lock(&loop->lock);
    b->mode = rl_mode_name_is_common(mode) ? NULL : rl_mode_find(loop, mode, true);
    if (loop->dead) rc = -EINVAL;
    else if (!b->mode && !rl_mode_name_is_common(mode)) rc = -ENOMEM;
    if (!rc) {
        if (loop->blocks_tail) loop->blocks_tail->next = b;
        else loop->blocks_head = b;
        loop->blocks_tail = b;
        atomic_fetch_add(&loop->blocks_hint, 1);
    }
    pthread_mutex_unlock(&loop->lock);
    if (rc) free(b);
    return rc;
}

static bool block_matches(const rl_block *b, const rl_mode *mode) {
    return b->mode ? b->mode == mode : mode->common;
}

bool rl_blocks_pending(rl_loop_t *loop, rl_mode *mode) {
    for (rl_block *b = loop->blocks_head; b; b = b->next)
        if (block_matches(b, mode)) return true;
    return false;
}

void rl_blocks_run(rl_loop_t *loop, rl_run_frame *run) {
    if (!atomic_load(&loop->blocks_hint)) return;
    pthread_mutex_lock(&loop->lock);
    rl_block *b = loop->blocks_head;
    if (!b || !rl_blocks_pending(loop, run->mode)) {
        pthread_mutex_unlock(&loop->lock);
        return;
    }
    /* Detach the whole queue; blocks queued by the callouts below wait for the next turn. */
    loop->blocks_head = loop->blocks_tail = NULL;
    atomic_store(&loop->blocks_hint, 0);
    bool common = run->mode->common;
    pthread_mutex_unlock(&loop->lock);
    rl_block *kept = NULL, *kept_tail = NULL;
    double start = rl_time_now();
    while (b) {
        rl_block *next = b->next;
        if (b->mode ? b->mode == run->mode : common) {
            __RL_IS_CALLING_OUT_TO_A_BLOCK__(b->fn, b->arg);
            free(b);
        } else {
            b->next = NULL;
            if (kept_tail) kept_tail->next = b;
            else kept = b;
            kept_tail = b;
        }
        b = next;
    }
    RL_COUNT(loop, time_in_callouts, rl_elapsed_since(start));
    if (!kept) return;
    pthread_mutex_lock(&loop->lock);
    kept_tail->next = loop->blocks_head;
    loop->blocks_head = kept;
    if (!loop->blocks_tail) loop->blocks_tail = kept_tail;
    rl_loop_sync_hints(loop);
    pthread_mutex_unlock(&loop->lock);
}

double rl_loop_get_next_timer_fire_date(rl_loop_t *loop, const char *mode) {
    if (!loop || rl_mode_check_name(mode) || rl_mode_name_is_common(mode)) return 0;
    pthread_mutex_lock(&loop->lock);
    rl_mode *m = rl_mode_find(loop, mode, false);
    rl_heap_node *top = m ? rl_heap_top(&m->timers) : NULL;
    double date = top ? top->when : 0;
    pthread_mutex_unlock(&loop->lock);
    return date;
}

void rl_loop_timers_changed(rl_loop_t *loop, rl_mode *mode) {
    rl_run_frame *run = loop->run;
    /* The loop's own thread rearms before it next waits; only another thread must rearm now,
     * for the mode the loop may be sleeping in. */
    if (!run || run->mode != mode || rl_tls_loop == loop) return;
    double deadline = rl_timers_wake_date(mode);
    if (run->deadline > 0 && run->deadline < deadline) deadline = run->deadline;
    rl_wait_arm(&loop->wait, deadline);
}

int rl_loop_get_stats(rl_loop_t *loop, rl_loop_stats_t *stats) {
    if (!loop || !stats) return -EINVAL;
    rl_counters *c = &loop->counters;
    stats->passes = atomic_load_explicit(&c->passes, memory_order_relaxed);
    stats->waits = atomic_load_explicit(&c->waits, memory_order_relaxed);
    stats->wakeups = atomic_load_explicit(&c->wakeups, memory_order_relaxed);
    stats->wakeup_writes = atomic_load_explicit(&c->wakeup_writes, memory_order_relaxed);
    stats->timers_fired = atomic_load_explicit(&c->timers_fired, memory_order_relaxed);
    stats->sources_performed = atomic_load_explicit(&c->sources_performed, memory_order_relaxed);
    stats->time_waiting = atomic_load_explicit(&c->time_waiting, memory_order_relaxed);
    stats->time_in_callouts = atomic_load_explicit(&c->time_in_callouts, memory_order_relaxed);
    return 0;
}

/* Take every item out of the loop: sources (their cancel runs), timers and observers (which
 * stay valid), blocks (dropped). Runs at thread exit, on that thread. Once dead, the loop takes
 * no new items, so one snapshot of what it holds is enough. */
void rl_loop_teardown(rl_loop_t *loop) {
    rl_ptrset items = {0};
    pthread_mutex_lock(&loop->lock);
    loop->dead = true;
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        for (size_t j = 0; j < m->sources.capacity; j++)
            if (m->sources.slots[j]) (void)rl_ptrset_add(&items, m->sources.slots[j]);
        for (size_t j = 0; j < m->timers.count; j++)
            (void)rl_ptrset_add(&items, ((rl_timer_entry *)m->timers.nodes[j])->timer);
        for (size_t j = 0; j < m->observers.count; j++) (void)rl_ptrset_add(&items, m->observers.items[j]);
    }
    rl_ptrset *common[] = {&loop->common_sources, &loop->common_timers, &loop->common_observers};
    for (int k = 0; k < 3; k++)
        for (size_t j = 0; j < common[k]->capacity; j++)
            if (common[k]->slots[j]) (void)rl_ptrset_add(&items, common[k]->slots[j]);
    for (size_t j = 0; j < items.capacity; j++)
        if (items.slots[j]) rl_retain(items.slots[j]);
    rl_block *blocks = loop->blocks_head;
    loop->blocks_head = loop->blocks_tail = NULL;
    rl_loop_sync_hints(loop);
    pthread_mutex_unlock(&loop->lock);
    while (blocks) {
        rl_block *next = blocks->next;
        free(blocks);
        blocks = next;
    }
    for (size_t j = 0; j < items.capacity; j++) {
        rl_object *item = items.slots[j];
        if (!item) continue;
        if (item->type == RL_TYPE_SOURCE) rl_source_remove_from_loop(loop, (rl_source_t *)item);
        else if (item->type == RL_TYPE_TIMER) rl_timer_remove_from_loop(loop, (rl_timer_t *)item);
        else rl_observer_remove_from_loop(loop, (rl_observer_t *)item);
        rl_release(item);
    }
    rl_ptrset_free(&items);
}

void rl_loop_destroy(rl_loop_t *loop) {
    rl_loop_teardown(loop); /* a loop never bound to a thread may still hold items */
    for (size_t i = 0; i < loop->modes.count; i++) rl_mode_free(loop->modes.items[i]);
    rl_ptrvec_free(&loop->modes);
    rl_links_free_queued(loop);
    rl_ptrset_free(&loop->common_sources);
    rl_ptrset_free(&loop->common_timers);
    rl_ptrset_free(&loop->common_observers);
    rl_fd_table_free(loop);
    rl_wait_destroy(&loop->wait);
    pthread_mutex_destroy(&loop->lock);
    free(loop);
}
