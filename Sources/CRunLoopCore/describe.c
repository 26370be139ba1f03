/* describe.c - rl_loop_copy_description: what a loop holds, per mode, and why a mode is not
 * empty, for people debugging a loop that will not stop or will not run something. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    char *text;
    size_t length, capacity;
    bool failed;
} out_t;

__attribute__((format(printf, 2, 3))) static void put(out_t *o, const char *format, ...) {
    if (o->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, format);
        int n = vsnprintf(o->text + o->length, o->capacity - o->length, format, ap);
        va_end(ap);
        if (n < 0) {
            o->failed = true;
            return;
        }
        if (o->length + (size_t)n < o->capacity) {
            o->length += (size_t)n;
            return;
        }
        size_t cap = (o->capacity + (size_t)n + 1) * 2;
        char *grown = rl_realloc(o->text, cap);
        if (!grown) {
            o->failed = true;
            return;
        }
        o->text = grown;
        o->capacity = cap;
    }
}

static void describe_mode(out_t *o, rl_loop_t *loop, rl_mode *m, double now) {
    put(o, "  mode \"%s\"%s%s%s\n", m->name, m->common ? " (common)" : "",
        loop->run && loop->run->mode == m ? " (running)" : "",
        rl_mode_is_empty(m) ? " empty" : "");
    if (atomic_load(&m->blocks.count)) put(o, "    %zu block(s) queued for it\n", atomic_load(&m->blocks.count));
    if (!rl_mode_is_empty(m))
        put(o, "    not empty because of %zu source(s) and %zu timer(s)\n", m->sources.count, rl_heap_size(&m->timers));
    for (size_t i = 0; i < m->sources.capacity; i++) {
        rl_source_t *s = m->sources.slots[i];
        if (!s) continue;
        if (s->version == 0)
            put(o, "    source %p v0 order %ld%s%s info %p perform %p\n", (void *)s, s->order,
                atomic_load(&s->signalled) ? " signalled" : "", atomic_load(&s->valid) ? "" : " invalid",
                s->context.info, (void *)(uintptr_t)s->context.perform);
        else
            put(o, "    source %p v1 order %ld fd %d events%s%s%s info %p\n", (void *)s, s->order, s->fd,
                (atomic_load(&s->events) & RL_FD_READABLE) ? " readable" : "",
                (atomic_load(&s->events) & RL_FD_WRITABLE) ? " writable" : "",
                atomic_load(&s->valid) ? "" : " invalid", s->context.info);
    }
    rl_heap_node *node;
    double fire;
    for (size_t i = 0; (node = rl_heap_next(&m->timers, &i, &fire));) {
        rl_timer_t *t = rl_timer_of_node(node);
        fire = atomic_load(&t->fire_date); /* the heap's date, but for a timer a fire phase took */
        put(o, "    timer %p order %ld next fire %.6f (in %.6f s) interval %.6f tolerance %.6f%s info %p\n",
            (void *)t, t->first.node.order, fire, isinf(fire) ? INFINITY : fire - now, rl_timer_get_interval(t),
            rl_timer_get_tolerance(t), (atomic_load(&t->obj.bits) & RL_TIMER_FIRING) ? " firing" : "", t->info);
    }
    for (size_t i = 0; i < m->observers.count; i++) {
        rl_observer_t *ob = m->observers.items[i];
        put(o, "    observer %p order %ld activities 0x%x%s info %p\n", (void *)ob, ob->order, ob->activities,
            ob->repeats ? " repeats" : " once", ob->context.info);
    }
}

char *rl_loop_copy_description(rl_loop_t *loop) {
    if (!loop) {
        errno = EINVAL;
        return NULL;
    }
    out_t o = {0};
    double now = rl_time_now();
    rl_loop_stats_t st;
    rl_loop_get_stats(loop, &st);
    rl_loop_lock_mutex(loop);
    put(&o, "<rl_loop %p>{%s%s wakeup state 0x%x, current mode \"%s\",\n", (void *)loop,
        loop->dead ? "thread exited," : "", rl_loop_is_waiting(loop) ? " waiting," : "",
        atomic_load(&loop->wake_state), loop->run ? loop->run->mode->name : "(not running)");
    put(&o, "  common modes:");
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_mode *m = loop->modes.items[i];
        if (m->common) put(&o, " \"%s\"", m->name);
    }
    put(&o, "\n  common items: %zu source(s), %zu timer(s), %zu observer(s)\n", loop->common_sources.count,
        loop->common_timers.count, loop->common_observers.count);
    size_t deferred = 0, queued = atomic_load(&loop->common_blocks.count);
    for (const rl_link *l = loop->deferred; l; l = l->next) deferred++;
    for (size_t i = 0; i < loop->modes.count; i++) queued += atomic_load(&((rl_mode *)loop->modes.items[i])->blocks.count);
    put(&o, "  queued blocks: %zu (%zu for the common modes), signalled sources waiting for their mode: "
            "%zu%s, timerfd armed at %.6f\n",
        queued, atomic_load(&loop->common_blocks.count), deferred,
        atomic_load(&loop->signalled) ? " (more just signalled)" : "", loop->wait.armed);
    for (size_t i = 0; i < loop->modes.count; i++) describe_mode(&o, loop, loop->modes.items[i], now);
    put(&o, "  counters: passes %llu, waits %llu, wakeups %llu, wakeup writes %llu, timers fired %llu, "
            "sources performed %llu, time waiting %.6f s, time in callouts %.6f s\n}\n",
        st.passes, st.waits, st.wakeups, st.wakeup_writes, st.timers_fired, st.sources_performed,
        st.time_waiting, st.time_in_callouts);
    rl_loop_unlock(loop);
    if (o.failed) {
        free(o.text);
        errno = ENOMEM;
        return NULL;
    }
    return o.text;
}
