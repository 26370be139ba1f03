/*
 * blocks.c - rl_loop_perform, rl_loop_perform_context: functions queued to run once, at a pass of a given mode.
 *
 * Each mode has its own queue and the common modes share one; a sequence number orders blocks
 * across the two, so a pass in a common mode runs both in the order they were queued. A pass
 * looks only at the queues it may run, so blocks waiting for other modes cost it nothing (once
 * a pass walked every queued block: 100,000 blocks for mode B made each pass of mode A 3000 times
 * slower). Counts are atomic so that a pass with nothing to run takes no lock. Spent blocks go
 * back to a per-loop free list (at most RL_SPARE_BLOCKS), so steady-state queueing does not
 * allocate; a block's release, if any, runs after its function, or when the loop drops it.
 */
#include "internal.h"
#include "lag.h"

#include <errno.h>
#include <stdlib.h>

static void push(rl_block_queue *q, rl_block *b) {
    b->next = NULL;
    if (q->tail) q->tail->next = b;
    else q->head = b;
    q->tail = b;
    atomic_store(&q->count, atomic_load_explicit(&q->count, memory_order_relaxed) + 1);
}

/* Take the whole queue; returns its first block. loop locked. */
static rl_block *take(rl_block_queue *q) {
    rl_block *head = q->head;
    q->head = q->tail = NULL;
    atomic_store_explicit(&q->count, 0, memory_order_relaxed);
    return head;
}

/* A block for reuse, or NULL. loop locked. */
static rl_block *take_spare(rl_loop_t *loop) {
    rl_block *b = loop->spare_blocks;
    if (b) {
        loop->spare_blocks = b->next;
        loop->spare_count--;
    }
    return b;
}

/* Keep spent blocks for reuse, up to RL_SPARE_BLOCKS; free the rest. Takes the lock. */
static void give_back(rl_loop_t *loop, rl_block *list) {
    if (!list) return;
    rl_loop_lock_mutex(loop);
    while (list && loop->spare_count < RL_SPARE_BLOCKS) {
        rl_block *b = list;
        list = b->next;
        b->next = loop->spare_blocks;
        loop->spare_blocks = b;
        loop->spare_count++;
    }
    rl_loop_unlock(loop);
    for (rl_block *next; list; list = next) {
        next = list->next;
        free(list);
    }
}

/* Queue b (filled but for seq) in mode; 0, or an error with b not queued. */
static int queue(rl_loop_t *loop, const char *mode, rl_block *b) {
    int rc = 0;
    rl_block_queue *q = NULL;
    rl_loop_lock_mutex(loop);
    if (loop->dead) {
        rc = -EINVAL;
    } else if (rl_mode_name_is_common(mode)) {
        q = &loop->common_blocks;
    } else {
        rl_mode *m = rl_mode_find(loop, mode, true);
        if (m) q = &m->blocks;
        else rc = -ENOMEM;
    }
    if (q) {
        b->seq = ++loop->block_seq;
        push(q, b); /* its count, stored seq_cst, is what a pass looks at after a wakeup */
    }
    rl_loop_unlock(loop);
    return rc;
}

/* A block from the spares, or a new one. */
static rl_block *new_block(rl_loop_t *loop) {
    rl_loop_lock_mutex(loop);
    rl_block *b = take_spare(loop);
    rl_loop_unlock(loop);
    return b ? b : rl_malloc(sizeof *b);
}

int rl_loop_perform(rl_loop_t *loop, const char *mode, void (*fn)(void *), void *arg) {
    if (!loop || !fn) return -EINVAL;
    int rc = rl_mode_check_name(mode);
    if (rc) return rc;
    rl_block *b = new_block(loop);
    if (!b) return -ENOMEM;
    b->fn = fn;
    b->arg = arg;
    b->release = NULL;
    rc = queue(loop, mode, b);
    if (rc) {
        b->next = NULL;
        give_back(loop, b);
    }
    return rc;
}

int rl_loop_perform_context(rl_loop_t *loop, const char *mode, const rl_block_context_t *context) {
    if (!loop || !context || !context->perform) return -EINVAL;
    int rc = rl_mode_check_name(mode);
    if (rc) return rc;
    rl_block *b = new_block(loop);
    if (!b) return -ENOMEM;
    b->fn = context->perform;
    b->arg = context->info;
    b->release = context->release;
    if (context->retain) b->arg = (void *)context->retain(context->info);
    rc = queue(loop, mode, b);
    if (rc) {
        if (context->retain && b->release) b->release(b->arg);
        b->next = NULL;
        give_back(loop, b);
    }
    return rc;
}

bool rl_blocks_pending(rl_loop_t *loop, rl_mode *mode) {
    return atomic_load(&mode->blocks.count) || (mode->common && atomic_load(&loop->common_blocks.count));
}

/* Take from q the blocks queued after the one numbered after and before the one numbered before:
 * a run of the queue, which is in seq order. Loop locked. */
static rl_block *take_between(rl_block_queue *q, uint64_t after, uint64_t before) {
    rl_block **link = &q->head, *prev = NULL;
    while (*link && (*link)->seq <= after) {
        prev = *link;
        link = &prev->next;
    }
    rl_block *first = *link, *last = NULL;
    size_t n = 0;
    for (rl_block *b = first; b && b->seq < before; b = b->next) {
        last = b;
        n++;
    }
    if (!n) return NULL;
    *link = last->next;
    if (q->tail == last) q->tail = prev;
    last->next = NULL;
    atomic_store_explicit(&q->count, atomic_load_explicit(&q->count, memory_order_relaxed) - n, memory_order_relaxed);
    return first;
}

void rl_blocks_run(rl_loop_t *loop, rl_run_frame *run) {
    rl_mode *mode = run->mode; /* run.c looked first, without the lock (rl_blocks_may_be_pending) */
    rl_loop_lock_mutex(loop);
    /* Detach what may run; blocks queued by the callouts below wait for the next turn. */
    rl_block *own = take(&mode->blocks);
    bool common_taken = mode->common;
    rl_block *common = common_taken ? take(&loop->common_blocks) : NULL;
    uint64_t end = loop->block_seq + 1; /* the first block queued from here on */
    unsigned added = atomic_load_explicit(&loop->common_modes_added, memory_order_relaxed);
    rl_loop_unlock(loop);
    if (!own && !common) return;
    rl_phase phase = rl_callouts_begin(loop);
    unsigned ran = 0;
    rl_block *spent = NULL;
    while (own || common) {
        rl_block **from = !common || (own && own->seq < common->seq) ? &own : &common;
        rl_block *b = *from;
        *from = b->next;
        __RL_IS_CALLING_OUT_TO_A_BLOCK__(b->fn, b->arg);
        if (b->release) b->release(b->arg);
        /* The callout made this mode common (rl_loop_add_common_mode): as CF, which checks each
         * block of the list it took against the common modes as it comes to it, the blocks
         * queued for the common modes after this one (and before the phase began) run now. */
        if (__builtin_expect(!common_taken, 1) &&
            __builtin_expect(atomic_load_explicit(&loop->common_modes_added, memory_order_relaxed) != added, 0)) {
            rl_loop_lock_mutex(loop);
            added = atomic_load_explicit(&loop->common_modes_added, memory_order_relaxed);
            if ((common_taken = mode->common)) common = take_between(&loop->common_blocks, b->seq, end);
            rl_loop_unlock(loop);
        }
        b->next = spent;
        spent = b;
        ran++;
    }
    rl_callouts_done(loop, RL_CALLOUT_BLOCK, ran, &phase);
    give_back(loop, spent);
}

void rl_blocks_drop_all(rl_loop_t *loop) {
    rl_block *lists[2] = {NULL, NULL};
    rl_loop_lock_mutex(loop);
    lists[0] = take(&loop->common_blocks);
    for (size_t i = 0; i < loop->modes.count; i++) {
        rl_block *b = take(&((rl_mode *)loop->modes.items[i])->blocks);
        while (b) { /* prepend each to one list: order no longer matters, they never run */
            rl_block *next = b->next;
            b->next = lists[1];
            lists[1] = b;
            b = next;
        }
    }
    rl_loop_unlock(loop);
    for (int k = 0; k < 2; k++)
        for (rl_block *b = lists[k], *next; b; b = next) {
            next = b->next;
            if (b->release) b->release(b->arg);
            free(b);
        }
}

void rl_blocks_free_spares(rl_loop_t *loop) {
    for (rl_block *b; (b = take_spare(loop)) != NULL;) free(b);
}

static int verify_queue(const rl_block_queue *q, void (*fail)(void *, const char *, long), void *ctx) {
    int bad = 0;
    size_t n = 0;
    uint64_t seq = 0;
    const rl_block *last = NULL;
    for (const rl_block *b = q->head; b; last = b, b = b->next, n++) {
        if (b->seq <= seq) bad++, fail(ctx, "block queue out of order at block", (long)n);
        seq = b->seq;
    }
    if (last != q->tail) bad++, fail(ctx, "block queue tail is not its last block; length", (long)n);
    if (n != atomic_load(&q->count)) bad++, fail(ctx, "block queue count is off by", (long)atomic_load(&q->count) - (long)n);
    return bad;
}

int rl_blocks_verify(rl_loop_t *loop, void (*fail)(void *ctx, const char *what, long a), void *ctx) {
    int bad = verify_queue(&loop->common_blocks, fail, ctx);
    for (size_t i = 0; i < loop->modes.count; i++)
        bad += verify_queue(&((rl_mode *)loop->modes.items[i])->blocks, fail, ctx);
    size_t spares = 0;
    for (const rl_block *b = loop->spare_blocks; b && spares <= RL_SPARE_BLOCKS; b = b->next) spares++;
    if (spares != loop->spare_count || spares > RL_SPARE_BLOCKS)
        bad++, fail(ctx, "spare block count is off by", (long)loop->spare_count - (long)spares);
    return bad;
}
