/*
 * t_internals.c - the core's pure data structures against naive models: the 4-ary timer heap
 * (checked with rl_heap_verify after every mutation), the pointer set (backward-shift deletion
 * is easy to get subtly wrong) and the ready vector's stable sort; and internal state no API
 * shows (when the timerfd is set). Hidden symbols link fine into this static test build.
 */
#include "rlt.h"
#include "../../Sources/CRunLoopCore/internal.h"

#include <math.h>
#include <stdlib.h>

static unsigned long long rng_state = 88172645463325252ull;
static unsigned long long rng(void) { /* xorshift64: deterministic, so failures reproduce */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

enum { NODES = 2000, STEPS = 20000 };

RLT_TEST(timer_heap_keeps_its_invariants_under_random_operations) {
    static rl_heap_node nodes[NODES];
    static bool in[NODES];
    rl_heap h = {0};
    const char *why = "";
    uint64_t seq = 0;
    for (int i = 0; i < NODES; i++) nodes[i].index = RL_HEAP_NOT_IN_HEAP, in[i] = false;
    for (int step = 0; step < STEPS; step++) {
        int i = (int)(rng() % NODES);
        unsigned op = (unsigned)(rng() % 3);
        if (!in[i]) {
            nodes[i].when = (double)(rng() % 1000); /* many equal dates: ties go by order, seq */
            nodes[i].order = (long)(rng() % 3);
            nodes[i].seq = ++seq;
            RLT_CHECK_EQ(rl_heap_insert(&h, &nodes[i]), 0);
            in[i] = true;
        } else if (op == 0) {
            rl_heap_remove(&h, &nodes[i]);
            RLT_CHECK(nodes[i].index == RL_HEAP_NOT_IN_HEAP);
            in[i] = false;
        } else {
            nodes[i].when = (double)(rng() % 1000);
            nodes[i].seq = ++seq;
            rl_heap_update(&h, &nodes[i]);
        }
        if (!rl_heap_verify(&h, &why)) {
            rlt_fail(__FILE__, __LINE__, "heap broken after step %d: %s", step, why);
            rl_heap_free(&h);
            return;
        }
        /* The top is the least of the nodes in the heap. */
        const rl_heap_node *top = rl_heap_top(&h);
        for (int k = 0; top && k < NODES; k += 97)
            if (in[k] && rl_heap_node_less(&nodes[k], top)) {
                rlt_fail(__FILE__, __LINE__, "node %d orders before the top at step %d", k, step);
                rl_heap_free(&h);
                return;
            }
    }
    /* Draining pops in key order. */
    rl_heap_node *last = NULL;
    while (h.count) {
        rl_heap_node *top = rl_heap_top(&h);
        RLT_CHECK(!last || !rl_heap_node_less(top, last));
        rl_heap_remove(&h, top);
        last = top;
    }
    rl_heap_free(&h);
}

RLT_TEST(heap_verify_reports_a_broken_heap) {
    rl_heap_node a = {.when = 1}, b = {.when = 2};
    rl_heap h = {0};
    RLT_CHECK_EQ(rl_heap_insert(&h, &a), 0);
    RLT_CHECK_EQ(rl_heap_insert(&h, &b), 0);
    const char *why = NULL;
    RLT_CHECK(rl_heap_verify(&h, &why));
    a.when = 3; /* changed without rl_heap_update */
    RLT_CHECK(!rl_heap_verify(&h, &why));
    RLT_CHECK(why != NULL);
    rl_heap_free(&h);
}

RLT_TEST(pointer_set_matches_a_naive_model) {
    enum { N = 512 };
    static char objects[N];
    static bool model[N];
    rl_ptrset s = {0};
    for (int i = 0; i < N; i++) model[i] = false;
    for (int step = 0; step < 50000; step++) {
        int i = (int)(rng() % N);
        if (rng() % 2) {
            int rc = rl_ptrset_add(&s, &objects[i]);
            RLT_CHECK_EQ(rc, model[i] ? 0 : 1);
            model[i] = true;
        } else {
            RLT_CHECK_EQ(rl_ptrset_remove(&s, &objects[i]), model[i]);
            model[i] = false;
        }
        if (step % 64 == 0) {
            size_t count = 0;
            for (int k = 0; k < N; k++) {
                RLT_CHECK_EQ(rl_ptrset_contains(&s, &objects[k]), model[k]);
                count += model[k];
            }
            RLT_CHECK_EQ(s.count, count);
        }
    }
    rl_ptrset_free(&s);
}

RLT_TEST(pointer_vector_spills_from_inline_storage_and_keeps_order) {
    rl_ptrvec v;
    rl_ptrvec_init(&v);
    static char objects[100];
    for (int i = 0; i < 100; i++) RLT_CHECK_EQ(rl_ptrvec_push(&v, &objects[i]), 0);
    RLT_CHECK(v.items != v.inline_items);
    rl_ptrvec_remove(&v, &objects[10]);
    RLT_CHECK_EQ(v.count, 99);
    RLT_CHECK(v.items[10] == &objects[11]);
    RLT_CHECK(!rl_ptrvec_contains(&v, &objects[10]));
    rl_ptrvec_free(&v);
    RLT_CHECK(v.count == 0 && v.items == v.inline_items);
}

/* The ready vector's sort against a stable insertion sort, at sizes around the inline room and
 * the merge runs, with few distinct orders (many ties) and with many. */
RLT_TEST(ready_vector_sort_is_stable_and_ascending) {
    static char sources[300];
    static rl_ready model[300];
    int sizes[] = { 0, 1, 2, 15, 16, 17, 31, 32, 33, 100, 300 };
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        for (int spread = 1; spread <= 1000; spread *= 10) {
            rl_ready_vec v;
            rl_ready_vec_init(&v);
            int n = sizes[z];
            for (int i = 0; i < n; i++) {
                long order = (long)(rng() % (unsigned)(spread + 1)) - spread / 2;
                RLT_CHECK_EQ(rl_ready_vec_push(&v, (struct rl_source *)&sources[i], order, (unsigned)i), 0);
                rl_ready x = v.items[i];
                int j = i;
                for (; j > 0 && x.order < model[j - 1].order; j--) model[j] = model[j - 1];
                model[j] = x;
            }
            rl_ready_vec_sort(&v);
            RLT_CHECK_EQ(v.count, (size_t)n);
            for (int i = 0; i < n; i++)
                if (v.items[i].source != model[i].source || v.items[i].order != model[i].order ||
                    v.items[i].events != model[i].events) {
                    rlt_fail(__FILE__, __LINE__, "size %d, spread %d: item %d differs from a stable sort", n, spread, i);
                    rl_ready_vec_free(&v);
                    return;
                }
            rl_ready_vec_free(&v);
            RLT_CHECK(v.count == 0 && v.items == v.inline_items);
        }
    }
}

/* ---- the timerfd is set only for a wait ---------------------------------------------------- */

static void count_fire(rl_timer_t *t, void *info) { (void)t, ++*(int *)info; }

RLT_TEST(polling_passes_fire_timers_without_setting_the_timerfd) {
    rl_loop_t *loop = rl_loop_get_current();
    int fired = 0;
    rl_context_t c = {.info = &fired};
    for (int i = 0; i < 3; i++) {
        rl_timer_t *t = rl_timer_create(0, 0, 0, count_fire, &c); /* due now */
        RLT_CHECK(t);
        RLT_CHECK_EQ(rl_loop_add_timer(loop, t, RL_DEFAULT_MODE), 0);
        rl_release(t);
        RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 0, false), RL_RUN_TIMED_OUT); /* a poll */
    }
    RLT_CHECK_EQ(fired, 3);
    RLT_CHECK(loop->wait.armed == INFINITY); /* never set: no timerfd_settime at all */

    /* A wait does set it, for the timer it waits for. */
    rl_timer_t *later = rl_timer_create(rl_time_now() + 0.005, 0, 0, count_fire, &c);
    RLT_CHECK(later);
    double date = rl_timer_get_next_fire_date(later);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, later, RL_DEFAULT_MODE), 0);
    RLT_CHECK(loop->wait.armed == INFINITY); /* adding from the loop's thread defers it */
    rl_release(later);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 1.0, false), RL_RUN_FINISHED);
    RLT_CHECK_EQ(fired, 4);
    RLT_CHECK(loop->wait.armed == date);
}
