/*
 * t_heap_model.c - the timer heap against a simple model (a date per node, INFINITY for a parked
 * one), with rl_heap_verify after every step, in full arrays of both sizes: a small one (which
 * parks in place once its holes pay for a re-heap, or when it cannot grow) and one of 65536 slots
 * (which always parks in place when full). The walk is steered to keep the array full, so that
 * parks in place (tagged holes), unparks from a hole (to the end, or back into its slot), pops,
 * trims and compactions of tagged slots all happen; a run counts what it saw and checks that each
 * path was reached. A fault-injection build (RL_FAULT_INJECTION) also fails some growths.
 */
#include "rlt.h"
#include "../../Sources/CRunLoopCore/timer_heap.h"
#include "../../Sources/CRunLoopCore/alloc.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hm_state;
/* HM_SEED (environment) varies the walk: the seed is mixed into each test's own. */
static void hm_seed(uint64_t seed) {
    const char *env = getenv("HM_SEED");
    hm_state = seed ^ (env ? strtoull(env, NULL, 0) * 0x9E3779B97F4A7C15ull : 0);
    if (!hm_state) hm_state = seed;
}
static uint64_t hm_rng(void) {
    hm_state ^= hm_state << 13;
    hm_state ^= hm_state >> 7;
    hm_state ^= hm_state << 17;
    return hm_state;
}

typedef struct {
    rl_heap h;
    size_t n;
    rl_heap_node *nodes;
    double *when; /* the model: the node's date, INFINITY when parked; NAN when out */
    size_t *pos;  /* place in ins or outs */
    size_t *ins, nin, *outs, nout;
    uint64_t seq;
    unsigned char *seen;
    double *scratch;
    /* What the run saw (before -> after of one step). */
    unsigned long parks_in_place, unparks_in_heap_to_end, unparks_in_heap_in_slot, removes_of_tagged,
        tagged_popped_or_trimmed, tagged_compacted, tagged_shrunk, full_steps, grows_failed, enomem;
} hm;

#define HM_FAIL(...)                                   \
    do {                                               \
        rlt_fail(__FILE__, __LINE__, __VA_ARGS__);     \
        return false;                                  \
    } while (0)

static bool hm_in(const hm *m, size_t i) { return !isnan(m->when[i]); }

static void hm_set_in(hm *m, size_t i, double when) {
    if (!hm_in(m, i)) { /* outs -> ins */
        size_t p = m->pos[i], last = m->outs[--m->nout];
        m->outs[p] = last;
        m->pos[last] = p;
        m->pos[i] = m->nin;
        m->ins[m->nin++] = i;
    }
    m->when[i] = when;
}
static void hm_set_out(hm *m, size_t i) {
    size_t p = m->pos[i], last = m->ins[--m->nin];
    m->ins[p] = last;
    m->pos[last] = p;
    m->pos[i] = m->nout;
    m->outs[m->nout++] = i;
    m->when[i] = NAN;
}

static bool hm_init(hm *m, size_t n) {
    memset(m, 0, sizeof *m);
    m->n = n;
    m->nodes = calloc(n, sizeof *m->nodes);
    m->when = calloc(n, sizeof *m->when);
    m->pos = calloc(n, sizeof *m->pos);
    m->ins = calloc(n, sizeof *m->ins);
    m->outs = calloc(n, sizeof *m->outs);
    m->seen = calloc(n, 1);
    m->scratch = calloc(n, sizeof *m->scratch);
    if (!m->nodes || !m->when || !m->pos || !m->ins || !m->outs || !m->seen || !m->scratch) return false;
    for (size_t i = 0; i < n; i++) {
        m->nodes[i] = (rl_heap_node){.index = RL_HEAP_NOT_IN_HEAP};
        m->when[i] = NAN;
        m->pos[i] = i;
        m->outs[i] = i;
    }
    m->nout = n;
    return true;
}
static void hm_free(hm *m) {
    rl_heap_free(&m->h);
    free(m->nodes), free(m->when), free(m->pos), free(m->ins), free(m->outs), free(m->seen), free(m->scratch);
}

static size_t hm_id(const hm *m, const rl_heap_node *node) { return (size_t)(node - m->nodes); }

/* Every node: in h exactly when the model says so, at the model's date; rl_heap_next names each
 * node of h once, at its date; the counts agree. */
static bool hm_check_all(hm *m, int step) {
    const rl_heap *h = &m->h;
    size_t parked = 0;
    for (size_t i = 0; i < m->n; i++) {
        bool in = hm_in(m, i);
        if (rl_heap_contains(h, &m->nodes[i]) != in) HM_FAIL("step %d: node %zu contained %d, model %d", step, i, !in, in);
        if (in && rl_heap_when(h, &m->nodes[i]) != m->when[i])
            HM_FAIL("step %d: node %zu keyed at %g, model %g", step, i, rl_heap_when(h, &m->nodes[i]), m->when[i]);
        if (in && m->when[i] == INFINITY) parked++;
    }
    if (rl_heap_size(h) != m->nin) HM_FAIL("step %d: size %zu, model %zu", step, rl_heap_size(h), m->nin);
    if (rl_heap_parked_count(h) != parked) HM_FAIL("step %d: parked %zu, model %zu", step, rl_heap_parked_count(h), parked);
    memset(m->seen, 0, m->n);
    rl_heap_node *node;
    double when;
    size_t listed = 0;
    for (size_t i = 0; (node = rl_heap_next(h, &i, &when));) {
        size_t id = hm_id(m, node);
        if (id >= m->n || !hm_in(m, id) || m->seen[id] || when != m->when[id])
            HM_FAIL("step %d: rl_heap_next names node %zu wrongly (at %g)", step, id, when);
        m->seen[id] = 1;
        listed++;
    }
    if (listed != m->nin) HM_FAIL("step %d: rl_heap_next named %zu nodes, model %zu", step, listed, m->nin);
    return true;
}

/* The one node a step touched. */
static bool hm_check_one(hm *m, size_t i, int step) {
    const rl_heap *h = &m->h;
    bool in = hm_in(m, i);
    if (rl_heap_contains(h, &m->nodes[i]) != in) HM_FAIL("step %d: node %zu contained %d, model %d", step, i, !in, in);
    if (in && rl_heap_when(h, &m->nodes[i]) != m->when[i])
        HM_FAIL("step %d: node %zu keyed at %g, model %g", step, i, rl_heap_when(h, &m->nodes[i]), m->when[i]);
    if (rl_heap_size(h) != m->nin) HM_FAIL("step %d: size %zu, model %zu", step, rl_heap_size(h), m->nin);
    return true;
}

typedef struct {
    hm *m;
    double date;
    size_t visited;
    bool bad;
} hm_visit_ctx;
static bool hm_visit(void *ctx, const rl_heap_slot *slot) {
    hm_visit_ctx *c = ctx;
    size_t id = hm_id(c->m, slot->node);
    if (id >= c->m->n || c->m->seen[id] || slot->when != c->m->when[id] || !(slot->when <= c->date)) c->bad = true;
    else c->m->seen[id] = 1;
    c->visited++;
    return true;
}

static bool hm_latest(const rl_heap_node *node, double when, double *until) {
    if (node->seq % 5 == 0) return false; /* "firing": passed over */
    *until = when + (double)(node->seq % 4);
    return true;
}
static int hm_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Whether the array is full: the heap and the region meet. */
static bool hm_full(const rl_heap *h) { return h->count + h->parked == h->capacity; }

/* Snapshot of where the tagged nodes are, to count where they went. */
typedef struct {
    size_t parked_in_heap, parked, count, capacity, holes;
} hm_snap;
static hm_snap hm_take(const rl_heap *h) { return (hm_snap){h->parked_in_heap, h->parked, h->count, h->capacity, h->holes}; }

/* One random step. dates: the range of dates; keep_full: steer toward a full array without growth
 * (large arrays). */
static bool hm_step(hm *m, int step, double dates, bool keep_full, bool check_all) {
    rl_heap *h = &m->h;
    bool full = hm_full(h);
    m->full_steps += full;
    hm_snap before = hm_take(h);
    unsigned op = (unsigned)(hm_rng() % 100);
    size_t pure = h->holes - h->parked_in_heap;
    if (keep_full && !full && h->capacity >= 65536 && hm_rng() % 8) {
        /* A large array refilled at once (inserts into the room only: no growth). */
        while (!hm_full(h) && m->nout) {
            size_t i = m->outs[hm_rng() % m->nout];
            m->nodes[i].seq = ++m->seq;
            double when = (double)(hm_rng() % (uint64_t)dates);
            size_t tagged = h->parked_in_heap;
            if (rl_heap_insert(h, &m->nodes[i], when)) HM_FAIL("step %d: refill: insert failed", step);
            hm_set_in(m, i, when);
            if (tagged && !h->parked_in_heap && !h->holes) m->tagged_compacted++; /* make_room's re-heap */
        }
        full = hm_full(h);
        pure = h->holes - h->parked_in_heap;
        before = hm_take(h);
    }
    if (keep_full) {
        /* Steer toward a full array with holes that pay for a re-heap (where a park stays in its
         * slot in any array): refill when there is room, make holes when there are too few. */
        if (!full && hm_rng() % 4) op = (unsigned)(hm_rng() % 22);                 /* insert */
        else if (full && pure * 8 < h->capacity && h->capacity < 65536) op = 22 + (unsigned)(hm_rng() % 12); /* remove */
    }
    if (full && pure && pure * 8 >= h->capacity && hm_rng() % 4) op = 51; /* parks in place, in any array */
    if (h->parked_in_heap && hm_rng() % 4 == 0) op = 52; /* a node parked in a hole, armed or removed */
    size_t touched = SIZE_MAX;
    bool fault = false;
#ifdef RL_FAULT_INJECTION
    /* Now and then the growth this step may need fails: a park in place in a small full array,
     * a compaction or -ENOMEM for an insert. */
    if (hm_rng() % 8 == 0) {
        rl_fault_arm(0, 1);
        fault = true;
    }
#endif
    size_t cap_before = h->capacity;
    double date = (double)(hm_rng() % (uint64_t)dates);
    if (op < 22 && m->nout) { /* insert */
        bool holes_pay = pure && pure * 8 >= h->capacity;
        if (keep_full && full && !holes_pay && !fault && h->capacity >= 65536) goto update; /* would grow */
        size_t i = m->outs[hm_rng() % m->nout];
        double when = hm_rng() % 8 == 0 ? INFINITY : date;
        m->nodes[i].seq = ++m->seq;
        int rc = rl_heap_insert(h, &m->nodes[i], when);
        if (rc) {
            m->enomem++;
            if (!fault) HM_FAIL("step %d: insert failed with no fault", step);
            if (hm_take(h).count != before.count || h->capacity != cap_before || rl_heap_contains(h, &m->nodes[i]))
                HM_FAIL("step %d: a failed insert changed the heap", step);
        } else {
            hm_set_in(m, i, when);
        }
        touched = i;
    } else if (op < 34 && m->nin) { /* remove */
        size_t i = m->ins[hm_rng() % m->nin];
        if (m->nodes[i].index < h->count && h->slots[m->nodes[i].index].node != &m->nodes[i]) m->removes_of_tagged++;
        rl_heap_remove(h, &m->nodes[i]);
        hm_set_out(m, i);
        touched = i;
    } else if (op < 40 && h->count) { /* the last slot of the heap: parked or removed (a trim) */
        if (full && h->count >= 2 && rl_heap_live(&h->slots[h->count - 2]) && hm_rng() % 2) {
            /* The one before it parked first: in a full array it stays in its slot, which the trim
             * then takes to the region. */
            rl_heap_node *before_last = h->slots[h->count - 2].node;
            size_t b = hm_id(m, before_last);
            m->nodes[b].seq = ++m->seq;
            rl_heap_update(h, before_last, INFINITY);
            hm_set_in(m, b, INFINITY);
            const char *why = "";
            if (!rl_heap_verify(h, &why)) HM_FAIL("step %d (park before the last): rl_heap_verify: %s", step, why);
            if (!hm_check_one(m, b, step)) return false;
        }
        rl_heap_node *node = h->slots[h->count - 1].node;
        size_t i = hm_id(m, node);
        if (hm_rng() % 2) {
            m->nodes[i].seq = ++m->seq;
            rl_heap_update(h, node, INFINITY);
            hm_set_in(m, i, INFINITY);
        } else {
            rl_heap_remove(h, node);
            hm_set_out(m, i);
        }
        touched = i;
    } else if (op < 46) { /* pop the first */
        const rl_heap_slot *first = rl_heap_first(h);
        double least = INFINITY;
        for (size_t k = 0; k < m->nin; k++)
            if (m->when[m->ins[k]] < least) least = m->when[m->ins[k]];
        if (!first != (least == INFINITY)) HM_FAIL("step %d: rl_heap_first %p, model's least %g", step, (void *)first, least);
        if (first) {
            if (!rl_heap_live(first) || first->when != least || m->when[hm_id(m, first->node)] != least)
                HM_FAIL("step %d: rl_heap_first at %g, model's least %g", step, first->when, least);
            size_t i = hm_id(m, first->node);
            if (hm_rng() % 2) {
                rl_heap_remove(h, first->node);
                hm_set_out(m, i);
            } else { /* a fired timeout: parked */
                m->nodes[i].seq = ++m->seq;
                rl_heap_update(h, &m->nodes[i], INFINITY);
                hm_set_in(m, i, INFINITY);
            }
            touched = i;
        }
    } else if (op < 49) { /* the due walk */
        hm_visit_ctx c = {m, date, 0, false};
        memset(m->seen, 0, m->n);
        rl_heap_visit_due(h, date, hm_visit, &c);
        size_t due = 0;
        for (size_t k = 0; k < m->nin; k++) due += m->when[m->ins[k]] <= date;
        if (c.bad || c.visited != due) HM_FAIL("step %d: the due walk visited %zu (bad %d), model %zu", step, c.visited, c.bad, due);
    } else if (op < 51) { /* coalesce */
        double w = rl_heap_coalesce(h, hm_latest, ~0u);
        size_t k = 0;
        for (size_t q = 0; q < m->nin; q++)
            if (m->when[m->ins[q]] != INFINITY) m->scratch[k++] = (double)m->ins[q];
        /* sort the dated nodes by date: ids in scratch, dates looked up */
        double *dates_of = malloc((k ? k : 1) * 2 * sizeof *dates_of);
        for (size_t q = 0; q < k; q++) dates_of[2 * q] = m->when[(size_t)m->scratch[q]], dates_of[2 * q + 1] = m->scratch[q];
        qsort(dates_of, k, 2 * sizeof *dates_of, hm_cmp_double);
        double model = INFINITY;
        for (size_t q = 0; q < k; q++) {
            double when = dates_of[2 * q];
            if (when > model) break;
            double until;
            if (hm_latest(&m->nodes[(size_t)dates_of[2 * q + 1]], when, &until) && until < model) model = until;
        }
        double least = k ? dates_of[0] : INFINITY;
        free(dates_of);
        if (w != model) HM_FAIL("step %d: coalesce %g, model %g", step, w, model);
        /* Capped, the walk stops early: never later than the whole answer, never before the
         * earliest date. */
        double capped = rl_heap_coalesce(h, hm_latest, (unsigned)(hm_rng() % 8));
        if (capped > model || capped < least)
            HM_FAIL("step %d: coalesce capped %g, outside [%g, %g]", step, capped, least, model);
    } else if (op == 52 && h->parked_in_heap) { /* a node parked in a hole: armed (from its slot when full), or removed */
        size_t at = (size_t)(hm_rng() % h->count), tries = 0;
        while (tries++ < h->count && rl_heap_live(&h->slots[at])) at = (at + 1) % h->count;
        rl_heap_node *node = rl_heap_named(&h->slots[at]);
        if (node && full && hm_rng() % 3 == 0) {
            /* Room first (the last node removed: a trim), then the node parked in its hole armed:
             * to the end of the heap. */
            size_t last = hm_id(m, h->slots[h->count - 1].node);
            rl_heap_remove(h, &m->nodes[last]);
            hm_set_out(m, last);
            const char *why = "";
            if (!rl_heap_verify(h, &why)) HM_FAIL("step %d (room for an unpark): rl_heap_verify: %s", step, why);
            node = rl_heap_contains(h, node) && rl_heap_when(h, node) == INFINITY && node->index < h->count ? node : NULL;
            full = hm_full(h);
        }
        if (node) {
            size_t i = hm_id(m, node);
            if (hm_rng() % 4 == 0) {
                m->removes_of_tagged++;
                rl_heap_remove(h, node);
                hm_set_out(m, i);
            } else {
                m->nodes[i].seq = ++m->seq;
                rl_heap_update(h, node, date);
                hm_set_in(m, i, date);
                if (full) m->unparks_in_heap_in_slot++;
                else m->unparks_in_heap_to_end++;
            }
            touched = i;
        }
    } else if (m->nin) { /* update */
    update:;
        if (!m->nin) goto done;
        size_t i = m->ins[hm_rng() % m->nin];
        /* Parks weigh most (a server's cancellations); a parked node is armed again half the time. */
        if (op == 51) /* a dated node, parked */
            for (int tries = 0; tries < 8 && m->when[i] == INFINITY; tries++) i = m->ins[hm_rng() % m->nin];
        double when = op == 51 ? INFINITY
                      : m->when[i] == INFINITY ? (hm_rng() % 2 ? date : INFINITY) : (hm_rng() % 5 < 2 ? INFINITY : date);
        bool tagged = m->nodes[i].index < h->count && h->slots[m->nodes[i].index].node != &m->nodes[i];
        size_t at = m->nodes[i].index;
        m->nodes[i].seq = ++m->seq;
        rl_heap_update(h, &m->nodes[i], when);
        hm_set_in(m, i, when);
        if (when == INFINITY && !tagged && m->nodes[i].index == at && at < h->count) m->parks_in_place++;
        if (tagged && when != INFINITY) {
            if (full) m->unparks_in_heap_in_slot++;
            else m->unparks_in_heap_to_end++;
        }
        touched = i;
    }
done:
#ifdef RL_FAULT_INJECTION
    if (fault && h->capacity == cap_before && before.count + before.parked == cap_before) m->grows_failed++;
    rl_fault_arm(-1, 0);
#else
    (void)fault;
#endif
    /* Nodes parked in holes that joined the region: by a compaction (no hole left), else a pop
     * or a trim (told apart by coverage, not here). */
    if (h->parked_in_heap < before.parked_in_heap && h->parked > before.parked) {
        if (h->parked_in_heap == 0 && h->holes + 4 < before.holes && before.parked_in_heap > 2) m->tagged_compacted++;
        else m->tagged_popped_or_trimmed++;
        if (h->capacity < before.capacity) m->tagged_shrunk++;
    }
    if (getenv("HM_TRACE") && step % atoi(getenv("HM_TRACE")) == 0)
        fprintf(stderr, "step %d op %u: count %zu holes %zu tagged %zu parked %zu cap %zu nin %zu\n", step, op, h->count, h->holes,
                h->parked_in_heap, h->parked, h->capacity, m->nin);
    const char *why = "";
    if (!rl_heap_verify(h, &why)) HM_FAIL("step %d (op %u): rl_heap_verify: %s", step, op, why);
    if (touched != SIZE_MAX && !hm_check_one(m, touched, step)) return false;
    if (check_all && !hm_check_all(m, step)) return false;
    return true;
}

/* Insert until the array is exactly full at capacity (a power of two), in random order of dates. */
static bool hm_fill(hm *m, size_t capacity, double dates) {
    while (m->h.capacity < capacity || !hm_full(&m->h)) {
        if (!m->nout) HM_FAIL("no node left to fill with");
        size_t i = m->outs[hm_rng() % m->nout];
        m->nodes[i].seq = ++m->seq;
        double when = (double)(hm_rng() % (uint64_t)dates);
        if (rl_heap_insert(&m->h, &m->nodes[i], when)) HM_FAIL("fill: insert failed");
        hm_set_in(m, i, when);
        if (m->h.capacity > capacity) HM_FAIL("fill grew past %zu", capacity);
    }
    const char *why = "";
    if (!rl_heap_verify(&m->h, &why)) HM_FAIL("fill: %s", why);
    return true;
}

static void hm_report(const hm *m, const char *name) {
    if (getenv("RLT_HEAP_MODEL_VERBOSE"))
        fprintf(stderr,
                "%s: full steps %lu, parks in place %lu, unparks from a hole: to the end %lu, in its slot %lu; "
                "removes of tagged %lu; tagged popped or trimmed %lu, compacted %lu (with a shrink %lu); "
                "growths failed %lu, ENOMEM %lu\n",
                name, m->full_steps, m->parks_in_place, m->unparks_in_heap_to_end, m->unparks_in_heap_in_slot,
                m->removes_of_tagged, m->tagged_popped_or_trimmed, m->tagged_compacted, m->tagged_shrunk,
                m->grows_failed, m->enomem);
}

/* Every path the model is there for was taken (counted by hm_step and friends). */
static void hm_check_seen(const hm *seen) {
    RLT_CHECK(seen->parks_in_place > 0);
    RLT_CHECK(seen->unparks_in_heap_in_slot > 0);
    RLT_CHECK(seen->unparks_in_heap_to_end > 0);
    RLT_CHECK(seen->removes_of_tagged > 0);
    RLT_CHECK(seen->tagged_popped_or_trimmed > 0 && seen->tagged_compacted > 0);
}

/* A small array (1024 slots, and what it grows to): every step checked whole. */
RLT_TEST(heap_matches_a_model_in_full_small_arrays) {
    hm m;
    RLT_CHECK(hm_init(&m, 8192));
    hm_seed(0x9E3779B97F4A7C15ull);
    int step = 0;
    for (int round = 0; round < 6; round++) {
        /* Full at 1024 (or at what the last round grew to), then churn. */
        size_t cap = m.h.capacity > 1024 ? m.h.capacity : 1024;
        if (cap <= 2048 && !hm_fill(&m, cap, 64)) goto out;
        for (int k = 0; k < 6000; k++, step++)
            if (!hm_step(&m, step, round % 2 ? 64 : 4096, round < 4, true)) goto out;
    }
    hm_report(&m, "small");
    hm seen = m;
    hm_free(&m);
    hm_check_seen(&seen);
    return;
out:
    hm_free(&m);
}

/* A large array (65536 slots), kept full: parks in place always. Each step is verified; the whole
 * model is compared every 64 steps. */
RLT_TEST(heap_matches_a_model_in_a_full_large_array) {
    hm m;
    RLT_CHECK(hm_init(&m, 65536 + 8192));
    hm_seed(0xD1B54A32D192ED03ull);
    int step = 0;
    if (!hm_fill(&m, 65536, 1 << 20)) goto out;
    /* Holes nearly enough to pay for a re-heap (an eighth), none at the end: the array stays full. */
    for (int k = 0; k < 7800; k++) {
        size_t i = m.ins[hm_rng() % m.nin];
        if (m.nodes[i].index == m.h.count - 1) continue;
        rl_heap_remove(&m.h, &m.nodes[i]);
        hm_set_out(&m, i);
        const char *why = "";
        if (k % 64 == 0) RLT_CHECK(rl_heap_verify(&m.h, &why));
    }
    RLT_CHECK(hm_full(&m.h));
    for (int k = 0; k < 8000; k++, step++)
        if (!hm_step(&m, step, k % 4000 < 2000 ? 1 << 20 : 256, true, k % 64 == 0)) goto out;
    /* Drain to a quarter and below, parked nodes left in holes: the array shrinks around them. */
    while (m.nin > 8192) {
        size_t i = m.ins[hm_rng() % m.nin];
        if (m.when[i] == INFINITY && hm_rng() % 4) continue;
        rl_heap_remove(&m.h, &m.nodes[i]);
        hm_set_out(&m, i);
        const char *why = "";
        if (m.nin % 256 == 0) RLT_CHECK(rl_heap_verify(&m.h, &why));
    }
    if (!hm_check_all(&m, step)) goto out;
    for (int k = 0; k < 4000; k++, step++)
        if (!hm_step(&m, step, 4096, false, k % 16 == 0)) goto out;
    hm_report(&m, "large");
    hm seen = m;
    hm_free(&m);
    hm_check_seen(&seen);
    return;
out:
    hm_free(&m);
}
