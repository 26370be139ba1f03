/*
 * t_internals.c - the core's pure data structures against naive models: the 4-ary timer heap
 * (checked with rl_heap_verify after every mutation) and its walks, the pointer set
 * (backward-shift deletion is easy to get subtly wrong) and the ready vector's stable sort; and
 * internal state no API shows (when the timerfd is set). Hidden symbols link fine into this
 * static test build.
 */
#include "rlt.h"
#include "../../Sources/CRunLoopCore/internal.h"
#include "../../Sources/CRunLoopCore/sort.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long rng_state = 88172645463325252ull;
static unsigned long long rng(void) { /* xorshift64: deterministic, so failures reproduce */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

enum { NODES = 2000, STEPS = 20000 };

/* A model key: the date the node was last given, beside its order and seq. */
static bool key_less(double wa, const rl_heap_node *a, double wb, const rl_heap_node *b) {
    rl_heap_slot x = {wa, (rl_heap_node *)a}, y = {wb, (rl_heap_node *)b};
    return rl_heap_slot_less(&x, &y);
}

RLT_TEST(timer_heap_keeps_its_invariants_under_random_operations) {
    static rl_heap_node nodes[NODES];
    static double when[NODES];
    static bool in[NODES];
    rl_heap h = {0};
    const char *why = "";
    uint64_t seq = 0;
    size_t peak = 0;
    bool saw_holes = false, saw_parked_in_heap = false;
    for (int i = 0; i < NODES; i++) nodes[i].index = RL_HEAP_NOT_IN_HEAP, in[i] = false;
    for (int step = 0; step < STEPS; step++) {
        int i = (int)(rng() % NODES);
        unsigned op = (unsigned)(rng() % 3);
        if (!in[i]) {
            when[i] = (double)(rng() % 16); /* many equal dates: the heap orders dates only */
            nodes[i].order = (long)(rng() % 3);
            nodes[i].seq = ++seq;
            RLT_CHECK_EQ(rl_heap_insert(&h, &nodes[i], when[i]), 0);
            RLT_CHECK(rl_heap_contains(&h, &nodes[i]));
            in[i] = true;
        } else if (op == 0) {
            rl_heap_remove(&h, &nodes[i]);
            RLT_CHECK(nodes[i].index == RL_HEAP_NOT_IN_HEAP);
            RLT_CHECK(!rl_heap_contains(&h, &nodes[i]));
            in[i] = false;
        } else {
            /* One update in four parks the node at INFINITY (a disarm, a fired timeout): a
             * hole where it was and the node in the parked region (rl_heap_park), or in its hole
             * when the array is full; a date unparks it again (rl_heap_unpark, or
             * rl_heap_unpark_in_heap). */
            when[i] = rng() % 4 == 0 ? INFINITY : (double)(rng() % 16);
            nodes[i].seq = ++seq;
            rl_heap_update(&h, &nodes[i], when[i]);
        }
        if (h.capacity > peak) peak = h.capacity;
        if (!rl_heap_verify(&h, &why)) {
            rlt_fail(__FILE__, __LINE__, "heap broken after step %d: %s", step, why);
            rl_heap_free(&h);
            return;
        }
        /* Removal leaves holes, so the count of slots and of nodes differ; the nodes are all
         * there with their dates. Now and then the earliest entry is asked for (which pops the
         * holes above it): it has the least date of the model's nodes (a hole ties with the
         * slots of its date, so among equal dates the whole key is not promised), and none when
         * every node is parked. */
        size_t live = 0;
        for (int k = 0; k < NODES; k++) live += in[k];
        RLT_CHECK_EQ(rl_heap_size(&h), live);
        if (step % 7 == 0) {
            const rl_heap_slot *first = rl_heap_first(&h);
            size_t dated = 0;
            for (int k = 0; k < NODES; k++) dated += in[k] && when[k] != INFINITY;
            RLT_CHECK_EQ(first != NULL, dated > 0);
            RLT_CHECK_EQ(rl_heap_parked_count(&h), live - dated);
            for (int k = 0; k < NODES; k++)
                if (in[k] && (rl_heap_when(&h, &nodes[k]) != when[k] || (first && when[k] < first->when))) {
                    rlt_fail(__FILE__, __LINE__, "node %d misplaced or misdated at step %d", k, step);
                    rl_heap_free(&h);
                    return;
                }
            RLT_CHECK(!first || rl_heap_live(first));
        }
        if (h.holes) saw_holes = true;
        if (h.parked_in_heap) saw_parked_in_heap = true;
    }
    RLT_CHECK(saw_holes);
    RLT_CHECK(saw_parked_in_heap);
    /* Draining pops in date order, then the parked nodes are all that is left, and the array
     * shrinks as the heap empties. */
    double last_when = 0;
    for (const rl_heap_slot *first; (first = rl_heap_first(&h));) {
        rl_heap_node *top = first->node;
        RLT_CHECK(first->when >= last_when && first->when != INFINITY);
        last_when = first->when;
        rl_heap_remove(&h, top);
        in[top - nodes] = false;
    }
    RLT_CHECK_EQ(rl_heap_size(&h), rl_heap_parked_count(&h));
    for (int k = 0; k < NODES; k++)
        if (in[k]) {
            RLT_CHECK(when[k] == INFINITY && rl_heap_contains(&h, &nodes[k]));
            rl_heap_remove(&h, &nodes[k]);
            RLT_CHECK(rl_heap_verify(&h, &why));
        }
    RLT_CHECK_EQ(rl_heap_size(&h), (size_t)0);
    RLT_CHECK(peak > 256);
    RLT_CHECK(h.capacity <= 512);
    rl_heap_free(&h);
}

/* The walks the timer phase makes over a heap (rl_heap_visit_due, rl_heap_coalesce, rl_heap_next),
 * on a heap with holes, against models that look at every node. */
enum { WALK_NODES = 1500 };
static rl_heap_node walk_nodes[WALK_NODES];
static double walk_when[WALK_NODES], walk_tolerance[WALK_NODES];
static bool walk_in[WALK_NODES], walk_passed[WALK_NODES], walk_seen[WALK_NODES];

static bool walk_visit(void *ctx, const rl_heap_slot *slot) {
    size_t k = (size_t)(slot->node - walk_nodes);
    if (walk_seen[k] || slot->when != walk_when[k]) ++*(int *)ctx; /* twice, or misdated */
    walk_seen[k] = true;
    return true;
}

static bool walk_latest(const rl_heap_node *node, double when, double *until) {
    size_t k = (size_t)(node - walk_nodes);
    if (walk_passed[k]) return false;
    *until = when + walk_tolerance[k];
    return true;
}

RLT_TEST(timer_heap_walks_match_models) {
    rl_heap h = {0};
    uint64_t seq = 0;
    RLT_CHECK(rl_heap_coalesce(&h, walk_latest, 1000000) == INFINITY);
    for (int round = 0; round < 40; round++) {
        /* Churn: inserts, removals (holes) and updates. */
        for (int step = 0; step < 400; step++) {
            int i = (int)(rng() % WALK_NODES);
            if (!walk_in[i]) {
                walk_when[i] = (double)(rng() % 500);
                walk_nodes[i].order = (long)(rng() % 3);
                walk_nodes[i].seq = ++seq;
                RLT_CHECK_EQ(rl_heap_insert(&h, &walk_nodes[i], walk_when[i]), 0);
                walk_in[i] = true;
            } else if (rng() % 2) {
                rl_heap_remove(&h, &walk_nodes[i]);
                walk_in[i] = false;
            } else {
                walk_when[i] = (double)(rng() % 500);
                walk_nodes[i].seq = ++seq;
                rl_heap_update(&h, &walk_nodes[i], walk_when[i]);
            }
        }
        for (int k = 0; k < WALK_NODES; k++) {
            walk_tolerance[k] = (double)(rng() % 40);
            walk_passed[k] = rng() % 5 == 0;
        }
        /* rl_heap_next: every node once, with its date. */
        memset(walk_seen, 0, sizeof walk_seen);
        int bad = 0;
        size_t count = 0;
        double when;
        rl_heap_node *node;
        for (size_t i = 0; (node = rl_heap_next(&h, &i, &when));) {
            size_t k = (size_t)(node - walk_nodes);
            if (walk_seen[k] || !walk_in[k] || when != walk_when[k]) bad++;
            walk_seen[k] = true;
            count++;
        }
        RLT_CHECK_EQ(bad, 0);
        RLT_CHECK_EQ(count, rl_heap_size(&h));
        /* rl_heap_visit_due: exactly the nodes keyed at or before the date. */
        double date = (double)(rng() % 520);
        memset(walk_seen, 0, sizeof walk_seen);
        rl_heap_visit_due(&h, date, walk_visit, &bad);
        RLT_CHECK_EQ(bad, 0);
        for (int k = 0; k < WALK_NODES; k++)
            if (walk_seen[k] != (walk_in[k] && walk_when[k] <= date)) bad++;
        RLT_CHECK_EQ(bad, 0);
        /* rl_heap_coalesce, uncapped: the least until over the counted nodes due by it. */
        double model = INFINITY;
        for (double d = 0; d < 500 && d <= model; d++)
            for (int k = 0; k < WALK_NODES; k++)
                if (walk_in[k] && !walk_passed[k] && walk_when[k] == d && d + walk_tolerance[k] < model)
                    model = d + walk_tolerance[k];
        RLT_CHECK(rl_heap_coalesce(&h, walk_latest, 1000000) == model);
        /* Capped, the date is never later. */
        double capped = rl_heap_coalesce(&h, walk_latest, 2);
        RLT_CHECK(capped <= model);
        const char *why = "";
        RLT_CHECK(rl_heap_verify(&h, &why));
    }
    rl_heap_free(&h);
    memset(walk_in, 0, sizeof walk_in);
}

/* n nodes into an empty heap, node i dated (i * stride) % n (a stride prime to n scatters them;
 * 1 puts node i at slot i). */
/* Pop h empty from the top: the dates come in order, and h stays valid after each removal. */
static void drain_in_order(rl_heap *h) {
    const char *why = NULL;
    double last = -1;
    for (const rl_heap_slot *first; (first = rl_heap_first(h));) {
        RLT_CHECK(first->when >= last);
        last = first->when;
        rl_heap_remove(h, first->node);
        RLT_CHECK(rl_heap_verify(h, &why));
    }
    RLT_CHECK_EQ(rl_heap_size(h), (size_t)0);
}

static void fill_heap(rl_heap *h, rl_heap_node *nodes, int n, int stride) {
    for (int i = 0; i < n; i++) {
        nodes[i] = (rl_heap_node){.seq = (uint64_t)i + 1, .index = RL_HEAP_NOT_IN_HEAP};
        RLT_CHECK_EQ(rl_heap_insert(h, &nodes[i], (double)((long)i * stride % n)), 0);
    }
}

/* Removing most of a big heap's nodes costs no sift each: holes pile up until they outnumber
 * the nodes, then one compaction drops them. Removing nodes from the top (as firing one-shot
 * timers in order does) leaves holes there, which the next look at the earliest entry clears. */
RLT_TEST(heap_removal_is_lazy_and_compacts_when_holes_outnumber_nodes) {
    enum { N = 4096 };
    static rl_heap_node nodes[N];
    rl_heap h = {0};
    const char *why = "";
    fill_heap(&h, nodes, N, 7919);
    size_t most_holes = 0;
    for (int i = 0; i < N; i += 2) { /* every other node, scattered over the heap */
        rl_heap_remove(&h, &nodes[i]);
        if (h.holes > most_holes) most_holes = h.holes;
        RLT_CHECK(h.holes * 2 <= h.count);
    }
    RLT_CHECK(rl_heap_verify(&h, &why));
    RLT_CHECK(most_holes >= N / 4); /* lazy: they were not removed one by one */
    RLT_CHECK_EQ(rl_heap_size(&h), (size_t)N / 2);
    /* Remove the 100 earliest without asking for the top: holes gather at the top. */
    for (int k = 0; k < 100; k++) {
        rl_heap_node *least = NULL;
        for (int i = 1; i < N; i += 2)
            if (rl_heap_contains(&h, &nodes[i]) &&
                (!least || key_less(rl_heap_when(&h, &nodes[i]), &nodes[i], rl_heap_when(&h, least), least)))
                least = &nodes[i];
        rl_heap_remove(&h, least);
    }
    RLT_CHECK(rl_heap_verify(&h, &why));
    const rl_heap_slot *first = rl_heap_first(&h);
    RLT_CHECK(first != NULL && first->node != NULL);
    RLT_CHECK(rl_heap_verify(&h, &why));
    for (int i = 1; i < N; i += 2)
        if (rl_heap_contains(&h, &nodes[i]))
            RLT_CHECK(!key_less(rl_heap_when(&h, &nodes[i]), &nodes[i], first->when, first->node));
    RLT_CHECK_EQ(rl_heap_size(&h), (size_t)N / 2 - 100);
    rl_heap_free(&h);

    /* Holes as many as nodes, then the last slot goes: dropping it leaves the holes in the
     * majority unless the heap compacts then too. */
    rl_heap small = {0};
    rl_heap_node four[4];
    for (int i = 0; i < 4; i++) {
        four[i] = (rl_heap_node){.seq = (uint64_t)i + 1, .index = RL_HEAP_NOT_IN_HEAP};
        RLT_CHECK_EQ(rl_heap_insert(&small, &four[i], (double)i), 0); /* slots 0..3 in order */
    }
    rl_heap_remove(&small, &four[1]);
    rl_heap_remove(&small, &four[0]);
    RLT_CHECK_EQ(small.holes, (size_t)2);
    rl_heap_remove(&small, &four[3]); /* the last slot */
    RLT_CHECK(rl_heap_verify(&small, &why));
    RLT_CHECK(small.holes * 2 <= small.count);
    RLT_CHECK_EQ(rl_heap_size(&small), (size_t)1);
    rl_heap_free(&small);
}

/* Nodes keyed at INFINITY leave the heap's order for the parked region at the top of the same
 * array: O(1) in and out, no sift, and the way back never allocates (the slot it leaves is the
 * room it needs). The heap's first entry and its due walk never see them; rl_heap_next and
 * rl_heap_size do. */
static bool count_visit(void *ctx, const rl_heap_slot *slot) {
    (void)slot;
    ++*(size_t *)ctx;
    return true;
}

RLT_TEST(heap_parks_nodes_at_infinity_out_of_its_order_and_takes_them_back_without_allocating) {
    enum { N = 1000 };
    static rl_heap_node nodes[N];
    rl_heap h = {0};
    const char *why = "";
    for (int i = 0; i < N; i++) {
        nodes[i] = (rl_heap_node){.seq = (uint64_t)i + 1, .index = RL_HEAP_NOT_IN_HEAP};
        RLT_CHECK_EQ(rl_heap_insert(&h, &nodes[i], 10.0 + i), 0);
    }
    /* Park them all (a fire phase's fired timeouts): the heap's order empties. The array has room
     * for 24 in the region; the rest park in their holes until the holes go. */
    for (int i = 0; i < N; i++) {
        nodes[i].seq = (uint64_t)(N + i + 1);
        rl_heap_update(&h, &nodes[i], INFINITY);
        RLT_CHECK(rl_heap_contains(&h, &nodes[i]) && rl_heap_when(&h, &nodes[i]) == INFINITY);
    }
    RLT_CHECK(rl_heap_verify(&h, &why));
    RLT_CHECK_EQ(rl_heap_parked_count(&h), (size_t)N);
    RLT_CHECK_EQ(rl_heap_size(&h), (size_t)N);
    RLT_CHECK(rl_heap_first(&h) == NULL); /* the holes leave, the nodes they named join the region */
    RLT_CHECK(rl_heap_verify(&h, &why));
    RLT_CHECK_EQ(h.parked, (size_t)N);
    RLT_CHECK_EQ(h.count, (size_t)0);
    size_t visited = 0;
    rl_heap_visit_due(&h, INFINITY, count_visit, &visited);
    RLT_CHECK_EQ(visited, (size_t)0);
    size_t listed = 0;
    double when;
    for (size_t i = 0; rl_heap_next(&h, &i, &when);) listed += when == INFINITY;
    RLT_CHECK_EQ(listed, (size_t)N);
    /* Arm them again in the order of their dates (timeouts from the loop's time): no growth, no
     * reallocation, and each new date is the latest, so it stays at the end of the heap. */
    rl_heap_slot *array = h.slots;
    size_t capacity = h.capacity;
    for (int i = 0; i < N; i++) {
        nodes[i].seq = (uint64_t)(2 * N + i + 1);
        rl_heap_update(&h, &nodes[i], 100.0);
        RLT_CHECK(h.slots == array && h.capacity == capacity);
        RLT_CHECK(rl_heap_verify(&h, &why));
    }
    RLT_CHECK_EQ(h.parked, (size_t)0);
    RLT_CHECK_EQ(h.count, (size_t)N);
    for (int i = 0; i < N; i++) RLT_CHECK_EQ(h.slots[i].node, &nodes[i]);
    /* A parked node removed leaves no hole; one inserted at INFINITY goes straight to the region. */
    rl_heap_update(&h, &nodes[7], INFINITY);
    size_t holes = h.holes;
    rl_heap_remove(&h, &nodes[7]);
    RLT_CHECK_EQ(h.holes, holes);
    RLT_CHECK(!rl_heap_contains(&h, &nodes[7]));
    RLT_CHECK_EQ(rl_heap_insert(&h, &nodes[7], INFINITY), 0);
    RLT_CHECK_EQ(h.parked, (size_t)1);
    RLT_CHECK(rl_heap_contains(&h, &nodes[7]));
    RLT_CHECK(rl_heap_verify(&h, &why));
    rl_heap_free(&h);
}

/* In a full array whose holes would pay for a re-heap (an eighth of it), a node keyed at INFINITY
 * parks in its own slot (a hole that names it): no growth, no re-heap, nothing else moves. It
 * joins the region when its hole leaves (popped at the top, trimmed, compacted), takes its slot
 * back and sifts from there when armed in a full array, and goes to the end of the heap when
 * there is room. With too few holes to pay, a full array grows instead (see the test above). */
RLT_TEST(heap_parks_in_place_when_the_array_is_full) {
    enum { N = 1024 };
    static rl_heap_node nodes[N];
    rl_heap h = {0};
    const char *why = "";
    fill_heap(&h, nodes, N, 7919);
    RLT_CHECK_EQ(h.capacity, (size_t)N); /* full */
    rl_heap_slot *array = h.slots;
    /* An eighth removed: holes enough to pay for a re-heap, and no room made (bar a trimmed end). */
    for (int i = 0; i < N; i += 8) rl_heap_remove(&h, &nodes[i]);
    RLT_CHECK(h.holes * 8 >= (size_t)N - 16);
    /* A quarter parked, as a server's cancellations do: each stays where it was, and nothing
     * else moves. */
    size_t in_place = 0;
    for (int i = 1; i < N; i += 4) {
        size_t at = nodes[i].index, neighbour = nodes[i + 1].index;
        bool full = h.count + h.parked == h.capacity, last = at == h.count - 1;
        rl_heap_update(&h, &nodes[i], INFINITY);
        RLT_CHECK(h.slots == array && h.capacity == (size_t)N);
        if (full && !last) {
            RLT_CHECK_EQ((size_t)nodes[i].index, at);
            RLT_CHECK(h.slots[at].node == rl_heap_tagged(&nodes[i]));
            RLT_CHECK_EQ((size_t)nodes[i + 1].index, neighbour);
            in_place++;
        }
        RLT_CHECK(rl_heap_contains(&h, &nodes[i]) && rl_heap_when(&h, &nodes[i]) == INFINITY);
    }
    RLT_CHECK(rl_heap_verify(&h, &why));
    RLT_CHECK(in_place >= (size_t)N / 4 - 16);
    RLT_CHECK_EQ(h.parked_in_heap + h.parked, (size_t)N / 4);
    RLT_CHECK_EQ(rl_heap_size(&h), (size_t)N - N / 8);
    /* rl_heap_next names each once, the parked at INFINITY. */
    size_t listed = 0, at_infinity = 0;
    double when;
    for (size_t i = 0; rl_heap_next(&h, &i, &when);) listed++, at_infinity += when == INFINITY;
    RLT_CHECK_EQ(listed, (size_t)N - N / 8);
    RLT_CHECK_EQ(at_infinity, (size_t)N / 4);
    /* Half of them armed again while the array is full: each takes its slot back and sifts. */
    size_t back_in_place = 0;
    for (int i = 1; i < N; i += 8) {
        bool full = h.count + h.parked == h.capacity, in_hole = nodes[i].index < h.count;
        rl_heap_update(&h, &nodes[i], (double)(N + i % 100));
        RLT_CHECK(rl_heap_when(&h, &nodes[i]) == (double)(N + i % 100));
        back_in_place += full && in_hole;
        RLT_CHECK(rl_heap_verify(&h, &why));
    }
    RLT_CHECK(back_in_place >= (size_t)N / 8 - 16);
    RLT_CHECK(h.slots == array && h.capacity == (size_t)N);
    /* The other half removed: the holes they were parked in name nothing now. */
    size_t removed_from_holes = 0;
    for (int i = 5; i < N; i += 8) {
        removed_from_holes += nodes[i].index < h.count;
        rl_heap_remove(&h, &nodes[i]);
        RLT_CHECK(!rl_heap_contains(&h, &nodes[i]));
        RLT_CHECK(rl_heap_verify(&h, &why));
    }
    RLT_CHECK(removed_from_holes >= (size_t)N / 8 - 16);
    RLT_CHECK_EQ(rl_heap_parked_count(&h), (size_t)0);
    RLT_CHECK_EQ(rl_heap_size(&h), (size_t)N - N / 4);
    /* The due walk sees every node once; draining gives the dates in order. */
    size_t visited = 0;
    rl_heap_visit_due(&h, INFINITY, count_visit, &visited);
    RLT_CHECK_EQ(visited, (size_t)N - N / 4);
    RLT_CHECK(rl_heap_verify(&h, &why));
    drain_in_order(&h);
    rl_heap_free(&h);
}

/* A node parked in its hole holds its slot as a parked node in the region would: such holes do
 * not count towards the compaction that holes naming nothing bring on. A fire phase that parks
 * most of a full heap's timeouts (all due at once) re-heaps nothing while it fires. */
RLT_TEST(heap_nodes_parked_in_their_holes_bring_on_no_compaction) {
    enum { N = 1024 };
    static rl_heap_node nodes[N];
    rl_heap h = {0};
    const char *why = "";
    fill_heap(&h, nodes, N, 7919);
    for (int i = 0; i < N; i += 8) rl_heap_remove(&h, &nodes[i]); /* holes that pay: parks stay */
    size_t count = h.count;
    for (int i = 0; i < N; i++) {
        if (i % 8 == 0 || i % 8 == 7) continue; /* three quarters of the heap parked */
        rl_heap_update(&h, &nodes[i], INFINITY);
        RLT_CHECK(rl_heap_verify(&h, &why));
    }
    RLT_CHECK(h.count >= count - 8); /* only trims at the end: no compaction */
    RLT_CHECK(h.parked_in_heap >= (size_t)N * 3 / 4 - 8);
    RLT_CHECK(h.holes * 2 > h.count); /* the old rule would have compacted */
    /* Removing the parked ones turns their holes into holes that name nothing: compaction. */
    for (int i = 0; i < N; i++)
        if (i % 8 != 0 && i % 8 != 7) rl_heap_remove(&h, &nodes[i]);
    RLT_CHECK(rl_heap_verify(&h, &why));
    RLT_CHECK(h.count < (size_t)N / 2);
    RLT_CHECK_EQ(rl_heap_size(&h), (size_t)N / 8);
    rl_heap_free(&h);
}

/* Nodes parked in their holes near the root while the heap empties from its end: the array
 * shrinks (the region moves down) around them, and they stay where they are, named and found. */
RLT_TEST(heap_shrinks_around_nodes_parked_in_holes) {
    enum { N = 1024 };
    static rl_heap_node nodes[N];
    rl_heap h = {0};
    const char *why = "";
    fill_heap(&h, nodes, N, 1); /* in order: node i at slot i */
    RLT_CHECK_EQ(h.capacity, (size_t)N);
    /* Holes that pay (an eighth, not at the end), then four nodes near the root parked in place. */
    for (int i = 800; i < 800 + N / 8; i++) rl_heap_remove(&h, &nodes[i]);
    for (int i = 10; i < 14; i++) {
        rl_heap_update(&h, &nodes[i], INFINITY);
        RLT_CHECK(h.slots[i].node == rl_heap_tagged(&nodes[i]));
    }
    RLT_CHECK_EQ(h.parked_in_heap, (size_t)4);
    /* Empty it from the end, down to a quarter and less: the array halves with them in it. */
    bool shrunk_with_tagged = false;
    for (int i = N - 1; i >= 20; i--) {
        if (!rl_heap_contains(&h, &nodes[i])) continue;
        size_t cap = h.capacity;
        rl_heap_remove(&h, &nodes[i]);
        RLT_CHECK(rl_heap_verify(&h, &why));
        if (h.capacity < cap && h.parked_in_heap) shrunk_with_tagged = true;
    }
    RLT_CHECK(shrunk_with_tagged);
    for (int i = 10; i < 14; i++) RLT_CHECK(rl_heap_contains(&h, &nodes[i]) && rl_heap_when(&h, &nodes[i]) == INFINITY);
    /* Armed again (room now: to the end), then drained in date order. */
    for (int i = 10; i < 14; i++) rl_heap_update(&h, &nodes[i], (double)(100 - i));
    RLT_CHECK(rl_heap_verify(&h, &why));
    drain_in_order(&h);
    rl_heap_free(&h);
}

/* rl_heap_park_at's inline park of the heap's last slot leaves the heap exactly as
 * rl_heap_park_any does, also where the holes are one short of outnumbering the nodes (park_any
 * then compacts): [hole, hole, C, D], D parked, and [C, D], D parked (no compaction). */
static void heap_of_four_dates(rl_heap *h, rl_heap_node n[4], int holes) {
    for (int i = 0; i < 4; i++) {
        n[i] = (rl_heap_node){.seq = (uint64_t)i + 1, .index = RL_HEAP_NOT_IN_HEAP};
        RLT_CHECK_EQ(rl_heap_insert(h, &n[i], 1.0 + i), 0);
    }
    for (int i = 0; i < holes; i++) rl_heap_remove(h, &n[i]);
}

RLT_TEST(heap_last_slot_park_inline_leaves_the_heap_as_park_any_does) {
    for (int holes = 0; holes <= 2; holes += 2) {
        rl_heap a = {0}, b = {0};
        rl_heap_node na[4], nb[4];
        const char *why = "";
        heap_of_four_dates(&a, na, holes);
        heap_of_four_dates(&b, nb, holes);
        RLT_CHECK(na[3].index == a.count - 1 && nb[3].index == b.count - 1);
        rl_heap_update(&a, &na[3], INFINITY); /* the inline case */
        rl_heap_park_any(&b, nb[3].index);
        RLT_CHECK(rl_heap_verify(&a, &why));
        RLT_CHECK(rl_heap_verify(&b, &why));
        RLT_CHECK_EQ(a.count, b.count);
        RLT_CHECK_EQ(a.holes, b.holes);
        RLT_CHECK_EQ(a.parked, b.parked);
        RLT_CHECK_EQ(a.parked_in_heap, b.parked_in_heap);
        for (int i = holes; i < 4; i++) RLT_CHECK_EQ(na[i].index, nb[i].index);
        rl_heap_free(&a);
        rl_heap_free(&b);
    }
}

/* rl_timer_create_in's usual path makes the very timer its general one (create_in_any) makes:
 * the same call twice, the first after a call with another callback (so the thread's record is
 * another: the general path), the second right after it (the usual path); byte for byte alike,
 * for each flag set and context kind it takes. */
static void create_in_a(rl_timer_t *t, void *info) { (void)t; (void)info; }
static void create_in_b(rl_timer_t *t, void *info) { (void)t; (void)info; }
static void create_in_done(void *memory) { (void)memory; }
static const void *create_in_retain(const void *info) { return info; }
static void create_in_release(const void *info) { (void)info; }

RLT_TEST(timer_create_in_usual_path_makes_the_timer_the_general_path_makes) {
    static const unsigned flag_sets[] = {0, RL_TIMER_IN_TIMEOUT, RL_TIMER_IN_DATE_AS_GIVEN, RL_TIMER_IN_HELD,
                                         RL_TIMER_IN_HELD | RL_TIMER_IN_OWNED_BY_CONTEXT,
                                         RL_TIMER_IN_HELD | RL_TIMER_IN_TIMEOUT | RL_TIMER_IN_DATE_AS_GIVEN};
    /* a date to come (kept), one that has passed (given as is: clamped, it would be two readings) */
    const double dates[] = {INFINITY, rl_time_now() + 1000, 0.0};
    int info = 0;
    rl_context_t contexts[] = {{&info, NULL, NULL}, {&info, create_in_retain, create_in_release}, {&info, NULL, create_in_release}};
    for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++)
        for (size_t c = 0; c < sizeof contexts / sizeof contexts[0]; c++)
            for (size_t d = 0; d < sizeof dates / sizeof dates[0]; d++) {
                _Alignas(8) unsigned char one[RL_TIMER_STORAGE_SIZE], two[RL_TIMER_STORAGE_SIZE], other[RL_TIMER_STORAGE_SIZE];
                memset(one, 0, sizeof one);
                memset(two, 0, sizeof two);
                rl_timer_storage s1 = {one, sizeof one, create_in_done}, s2 = {two, sizeof two, create_in_done},
                                 so = {other, sizeof other, create_in_done};
                unsigned flags = flag_sets[f] | (dates[d] == 0.0 ? RL_TIMER_IN_DATE_AS_GIVEN : 0);
                rl_timer_t *o = rl_timer_create_in(&so, 0, INFINITY, 0, 0, create_in_b, NULL);
                rl_timer_t *t1 = rl_timer_create_in(&s1, flags, dates[d], 0, 7, create_in_a, &contexts[c]);
                rl_timer_t *t2 = rl_timer_create_in(&s2, flags, dates[d], 0, 7, create_in_a, &contexts[c]);
                RLT_CHECK(o && t1 && t2);
                if (!o || !t1 || !t2) return;
                RLT_CHECK(memcmp(one, two, sizeof(struct rl_timer)) == 0);
                rl_release(o);
                rl_release(t1);
                rl_release(t2);
            }
}

/* The slot array is placed so that slot 1 starts a cache line, so the four children of any node
 * (slots 4i + 1 to 4i + 4) share one line: after every growth, and every shrink. */
static bool children_share_lines(const rl_heap *h) {
    if (sizeof(rl_heap_slot) * RL_HEAP_ARITY != 64) return true; /* a 32-bit build: not placed */
    return !h->slots || (uintptr_t)&h->slots[1] % 64 == 0;
}

RLT_TEST(heap_children_of_a_node_share_a_cache_line_as_it_grows_and_shrinks) {
    enum { N = 4096 };
    static rl_heap_node nodes[N];
    rl_heap h = {0};
    size_t caps = 0, last = 0;
    for (int i = 0; i < N; i++) {
        nodes[i] = (rl_heap_node){.seq = (uint64_t)i, .index = RL_HEAP_NOT_IN_HEAP};
        RLT_CHECK_EQ(rl_heap_insert(&h, &nodes[i], (double)((i * 7919) % N)), 0);
        if (h.capacity != last) {
            last = h.capacity;
            caps++;
            RLT_CHECK(children_share_lines(&h));
        }
    }
    RLT_CHECK(caps >= 9); /* 8 to 4096: every doubling seen */
    size_t shrinks = 0;
    for (int i = N - 1; i >= 0; i--) {
        rl_heap_remove(&h, &nodes[i]);
        if (h.capacity != last) {
            last = h.capacity;
            shrinks++;
            RLT_CHECK(children_share_lines(&h));
        }
    }
    RLT_CHECK(shrinks >= 2);
    rl_heap_free(&h);
}

/* The due walk goes level by level in the array's order, so a heap filled in key order is walked
 * in key order (the timer phase then has nothing to sort); a due set wider than the walk's queue
 * is still visited whole, once each. */
typedef struct {
    size_t visited, out_of_order;
    rl_heap_node *last;
} order_walk;

static bool order_visit(void *ctx, const rl_heap_slot *slot) {
    order_walk *w = ctx;
    if (w->last && slot->node->index <= w->last->index) w->out_of_order++;
    w->last = slot->node;
    w->visited++;
    return true;
}

RLT_TEST(heap_due_walk_goes_in_array_order_and_covers_wide_levels) {
    enum { N = 20000 };
    static rl_heap_node nodes[N];
    rl_heap h = {0};
    for (int i = 0; i < N; i++) {
        nodes[i] = (rl_heap_node){.seq = (uint64_t)i + 1, .index = RL_HEAP_NOT_IN_HEAP};
        RLT_CHECK_EQ(rl_heap_insert(&h, &nodes[i], i < 900 ? 5.0 : 50.0 + i), 0);
    }
    order_walk w = {0, 0, NULL};
    rl_heap_visit_due(&h, 5.0, order_visit, &w);
    RLT_CHECK_EQ(w.visited, (size_t)900);
    RLT_CHECK_EQ(w.out_of_order, (size_t)0);
    size_t visited = 0;
    rl_heap_visit_due(&h, INFINITY, count_visit, &visited); /* wider than the queue: 15000 leaves */
    RLT_CHECK_EQ(visited, (size_t)N);
    rl_heap_free(&h);
}

/* The timer phase's sort (rl_sort_due) on what the heap's due walk hands it: in order already,
 * nearly (a pop moved a few along one path; one far off), or not at all (random dates; one date
 * with seqs in random order, short and long), against a model: a permutation in key order. */
static bool sorted_permutation(const rl_due_timer *d, size_t n, rl_heap_node *nodes) {
    static bool seen[6000];
    memset(seen, 0, sizeof seen);
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)(d[i].key.node - nodes);
        if (k >= n || seen[k]) return false;
        seen[k] = true;
        if (i && !rl_heap_slot_less(&d[i - 1].key, &d[i].key)) return false;
    }
    return true;
}

RLT_TEST(due_timers_sort_whatever_order_they_come_in) {
    enum { MAX = 6000 };
    static rl_heap_node nodes[MAX];
    static rl_due_timer d[MAX], scratch[MAX];
    const size_t sizes[] = {2, 31, 300, 5000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        for (int shape = 0; shape < 5; shape++) {
            for (size_t i = 0; i < n; i++) {
                nodes[i] = (rl_heap_node){.order = 0, .seq = i + 1, .index = RL_HEAP_NOT_IN_HEAP};
                double when = shape == 3 ? 7.0 : shape == 4 ? (double)(rng() % 1000) : 1.0 + (double)(i / 3);
                d[i] = (rl_due_timer){.key = {when, &nodes[i]}};
            }
            if (shape == 1 && n > 2) { /* one far off: the last at the front */
                rl_due_timer x = d[n - 1];
                memmove(&d[1], &d[0], (n - 1) * sizeof *d);
                d[0] = x;
            }
            if (shape == 2) /* a few moved along a path, as a pop does */
                for (size_t i = 1; i < n; i *= 4) {
                    rl_due_timer x = d[i];
                    d[i] = d[i - 1];
                    d[i - 1] = x;
                }
            if (shape == 3 || shape == 4) /* scrambled */
                for (size_t i = n - 1; i > 0; i--) {
                    size_t j = (size_t)(rng() % (i + 1));
                    rl_due_timer x = d[i];
                    d[i] = d[j];
                    d[j] = x;
                }
            rl_sort_due(d, n, s % 2 ? scratch : NULL);
            if (!sorted_permutation(d, n, nodes)) rlt_fail(__FILE__, __LINE__, "%zu timers of shape %d not sorted", n, shape);
        }
    }
}

RLT_TEST(heap_verify_reports_a_broken_heap) {
    rl_heap_node a = {.seq = 1}, b = {.seq = 2};
    rl_heap h = {0};
    RLT_CHECK_EQ(rl_heap_insert(&h, &a, 1), 0);
    RLT_CHECK_EQ(rl_heap_insert(&h, &b, 2), 0);
    const char *why = NULL;
    RLT_CHECK(rl_heap_verify(&h, &why));
    h.slots[0].when = 3; /* changed without rl_heap_update */
    RLT_CHECK(!rl_heap_verify(&h, &why));
    RLT_CHECK(why != NULL);
    why = NULL;
    h.slots[0].when = 1;
    b.index = 0; /* a node that lost track of its slot */
    RLT_CHECK(!rl_heap_verify(&h, &why));
    RLT_CHECK(why != NULL);
    b.index = 1;
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

/* A loop whose timer is already past due when it would wait (here a before-waiting observer
 * overruns it) polls instead, and does not arm the timerfd for a date gone: a loop that keeps
 * falling behind would otherwise pay a timerfd_settime every pass. */
static void overrun_once(rl_observer_t *o, unsigned activity, void *info) {
    (void)o, (void)activity;
    if ((*(int *)info)++ == 0) {
        struct timespec ts = {0, 3 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

RLT_TEST(a_deadline_gone_by_the_wait_polls_without_setting_the_timerfd) {
    rl_loop_t *loop = rl_loop_get_current();
    int fired = 0, waited = 0;
    rl_context_t c = {.info = &fired}, oc = {.info = &waited};
    RLT_CHECK(loop->wait.armed == INFINITY);
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.001, 0, 0, count_fire, &c);
    rl_observer_t *o = rl_observer_create(RL_BEFORE_WAITING, true, 0, overrun_once, &oc);
    RLT_CHECK(t && o);
    RLT_CHECK_EQ(rl_loop_add_timer(loop, t, RL_DEFAULT_MODE), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(loop, o, RL_DEFAULT_MODE), 0);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 1.0, true), RL_RUN_FINISHED);
    RLT_CHECK_EQ(fired, 1);
    RLT_CHECK(waited >= 1);
    RLT_CHECK(loop->wait.armed == INFINITY); /* the past date was never armed */
    rl_observer_invalidate(o);
    rl_release(o);
    rl_release(t);
}

/* ---- a wakeup for queued work comes before the fds its wait returned (fd_table.c) ------------ */

typedef struct {
    rl_loop_t *loop;
    rl_source_t *signalled;
    int ready[2], hangup[2];
    int pass, setups;
    char order[8];
    int at[8], n;
} defer_t;

static void defer_note(defer_t *d, char what) {
    if (d->n < 8) {
        d->order[d->n] = what;
        d->at[d->n++] = d->pass;
    }
}

static void defer_observe(rl_observer_t *o, unsigned activity, void *info) {
    (void)o;
    defer_t *d = info;
    if (activity == RL_BEFORE_SOURCES) d->pass++;
    if (activity != RL_BEFORE_WAITING || d->setups++) return;
    /* Everything ready before the loop blocks, so that its one wait returns it all: a readable
     * pipe, a hang-up, and a wakeup (the eventfd written directly: PENDING unset, so the loop
     * does block) for a source signalled meanwhile. */
    RLT_CHECK(write(d->ready[1], "x", 1) == 1);
    close(d->hangup[1]);
    d->hangup[1] = -1;
    rl_source_signal(d->signalled);
    rl_wait_post_wakeup(&d->loop->wait);
}

static void defer_perform(void *info) {
    defer_t *d = info;
    defer_note(d, 's');
    rl_source_invalidate(d->signalled);
}

static void defer_fd(rl_source_t *s, int fd, unsigned events, void *info) {
    (void)events;
    defer_t *d = info;
    defer_note(d, fd == d->ready[0] ? 'r' : 'h');
    rl_source_invalidate(s);
}

RLT_TEST(a_wakeup_for_queued_work_is_served_before_the_fds_its_wait_returned) {
    const char *M = "defer-fds";
    defer_t d = {.loop = rl_loop_get_current()};
    RLT_CHECK(pipe(d.ready) == 0 && pipe(d.hangup) == 0);
    rl_source_context_t sc = {.info = &d, .perform = defer_perform};
    rl_context_t c = {.info = &d};
    d.signalled = rl_source_create(0, &sc);
    rl_source_t *r = rl_source_create_fd(d.ready[0], RL_FD_READABLE, 0, defer_fd, &c);
    rl_source_t *h = rl_source_create_fd(d.hangup[0], 0, 0, defer_fd, &c); /* errors only: edge-triggered */
    rl_observer_t *o = rl_observer_create(RL_BEFORE_SOURCES | RL_BEFORE_WAITING, true, 0, defer_observe, &c);
    RLT_CHECK(d.signalled && r && h && o);
    RLT_CHECK_EQ(rl_loop_add_source(d.loop, d.signalled, M), 0);
    RLT_CHECK_EQ(rl_loop_add_source(d.loop, r, M), 0);
    RLT_CHECK_EQ(rl_loop_add_source(d.loop, h, M), 0);
    RLT_CHECK_EQ(rl_loop_add_observer(d.loop, o, M), 0);
    RLT_CHECK_EQ(rl_run_in_mode(M, 2.0, false), RL_RUN_FINISHED);
    /* Pass 1 waits: its wait returns the wakeup and both fds. It calls only the edge-triggered
     * hang-up (a level-triggered fd would report it again, an edge would not); pass 2 performs
     * the source, then its poll finds the pipe readable still. */
    RLT_CHECK_EQ(d.n, 3);
    RLT_CHECK(d.order[0] == 'h' && d.at[0] == 1);
    RLT_CHECK(d.order[1] == 's' && d.at[1] == 2);
    RLT_CHECK(d.order[2] == 'r' && d.at[2] == 2);
    RLT_CHECK(!d.loop->fds.deferred); /* the pipe's event was handled since */
    rl_observer_invalidate(o);
    rl_release(o);
    rl_release(r);
    rl_release(h);
    rl_release(d.signalled);
    close(d.ready[0]);
    close(d.ready[1]);
    close(d.hangup[0]);
}

/* ---- Signalling (source.c) ---- */

static void count_perform(void *info) { ++*(int *)info; }

/* A signaller preempted between setting SET and queueing the links (here: SET stored by hand,
 * nothing queued) does not hold back the others: the next one finds SET without PUBLISHED,
 * waits a moment, then queues the links itself, and the loop performs the source once. */
RLT_TEST(a_stalled_signaller_does_not_hold_back_the_next_one) {
    rl_loop_t *loop = rl_loop_get_current();
    int performed = 0;
    rl_source_context_t c = {.info = &performed, .perform = count_perform};
    rl_source_t *s = rl_source_create(0, &c);
    RLT_CHECK(s);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, RL_DEFAULT_MODE), 0);
    atomic_store(&s->signalled, RL_SIGNAL_SET);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(performed, 0); /* nothing queued: the loop cannot see it */
    rl_source_signal(s);
    RLT_CHECK_EQ(atomic_load(&s->signalled), RL_SIGNAL_SET | RL_SIGNAL_PUBLISHED);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(performed, 1);
    RLT_CHECK_EQ(atomic_load(&s->signalled), 0u); /* the perform cleared both bits */

    /* Signals onto a published one coalesce: one perform. */
    rl_source_signal(s);
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(RL_DEFAULT_MODE, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(performed, 2);
    rl_source_invalidate(s);
    rl_release(s);
}

/* ---- Ownership without a shared lock (loop.c) ---- */

static void count_fires(rl_timer_t *t, void *info) {
    (void)t;
    ++*(int *)info;
}

typedef struct {
    rl_timer_t *timer;
    atomic_int done;
    int fired;
    int rc_add, rc_remove, rc_readd;
} own_work;

/* On a fresh thread: its loop adds the timer, removes it, adds it again and fires it. */
static void *own_loop_work(void *arg) {
    own_work *w = arg;
    rl_loop_t *loop = rl_loop_get_current();
    w->rc_add = rl_loop_add_timer(loop, w->timer, "m");
    w->rc_remove = rl_loop_remove_timer(loop, w->timer, "m");
    w->rc_readd = rl_loop_add_timer(loop, w->timer, "m");
    rl_run_in_mode("m", 0, false);
    atomic_store(&w->done, 1);
    return NULL;
}

/* A loop adding, removing and firing its own timer takes no lock shared with other loops: with
 * the timer's item stripe held by this thread all along, the work still completes. */
RLT_TEST(own_loop_timer_work_takes_no_item_stripe) {
    own_work w = {0};
    rl_context_t c = {&w.fired, NULL, NULL};
    w.timer = rl_timer_create(rl_time_now(), 0, 0, count_fires, &c);
    RLT_CHECK(w.timer != NULL);
    rl_item_lock(w.timer);
    pthread_t th;
    RLT_CHECK_EQ(pthread_create(&th, NULL, own_loop_work, &w), 0);
    for (int i = 0; i < 2000 && !atomic_load(&w.done); i++) usleep(1000);
    int done = atomic_load(&w.done);
    rl_item_unlock(w.timer); /* before the thread's exit: its loop's teardown takes the stripes */
    pthread_join(th, NULL);
    RLT_CHECK_EQ(done, 1);
    RLT_CHECK_EQ(w.rc_add, 0);
    RLT_CHECK_EQ(w.rc_remove, 0);
    RLT_CHECK_EQ(w.rc_readd, 0);
    RLT_CHECK_EQ(w.fired, 1);
    RLT_CHECK(!rl_timer_is_valid(w.timer));
    rl_release(w.timer);
}

typedef struct {
    rl_timer_t *timer;
    atomic_int stop, started;
    long moves;
} mover;

static void *move_unowned(void *arg) {
    mover *m = arg;
    atomic_store(&m->started, 1);
    while (!atomic_load(&m->stop)) {
        rl_timer_set_next_fire_date(m->timer, rl_time_now() + 10 + (double)(m->moves % 97));
        rl_timer_set_tolerance(m->timer, (double)(m->moves % 3) * 0.001);
        m->moves++;
    }
    return NULL;
}

/* Another thread moves a timer's date while this loop claims and releases it over and over: the
 * heap is always keyed at the timer's fire date (a claim never overlaps a change of an unowned
 * timer), and no thread waits for long. */
RLT_TEST(claims_and_changes_of_an_unowned_timer_do_not_overlap) {
    rl_loop_t *loop = rl_loop_get_current();
    int fired = 0;
    rl_context_t c = {&fired, NULL, NULL};
    mover m = {0};
    m.timer = rl_timer_create(rl_time_now() + 10, 0, 0, count_fires, &c);
    RLT_CHECK(m.timer != NULL);
    pthread_t th;
    RLT_CHECK_EQ(pthread_create(&th, NULL, move_unowned, &m), 0);
    while (!atomic_load(&m.started)) sched_yield();
    int mismatches = 0;
    double until = rl_time_now() + 0.2;
    for (int i = 0; i < 5000 || rl_time_now() < until; i++) {
        RLT_CHECK_EQ(rl_loop_add_timer(loop, m.timer, "claims"), 0);
        pthread_mutex_lock(&loop->lock);
        rl_mode *mode = rl_mode_find(loop, "claims", false);
        const rl_heap_slot *first = mode ? rl_heap_first(&mode->timers) : NULL;
        if (!first || rl_heap_size(&mode->timers) != 1 || first->when != atomic_load(&m.timer->fire_date))
            mismatches++;
        pthread_mutex_unlock(&loop->lock);
        RLT_CHECK_EQ(rl_loop_remove_timer(loop, m.timer, "claims"), 0);
    }
    atomic_store(&m.stop, 1);
    pthread_join(th, NULL);
    RLT_CHECK_EQ(mismatches, 0);
    RLT_CHECK(m.moves > 0);
    RLT_CHECK(atomic_load(&m.timer->loop) == NULL);
    RLT_CHECK_EQ(fired, 0);
    rl_timer_invalidate(m.timer);
    rl_release(m.timer);
}
