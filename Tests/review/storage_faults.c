/*
 * storage_faults.c - review (rev2): rl_timer_create_in's ENOMEM (a new (retain, release, done)
 * triple whose hold record cannot be stored: NULL, errno ENOMEM, the memory unwritten) and a
 * failed add that claimed a held timer in storage (retains == releases, done not run, the timer
 * still usable, done once at the end), at every fault point of the add. The fault sweep
 * (make faults) never reaches hold_for's allocation: its unarmed counting run stores the triple
 * first. Not part of any make target; build and run with the core compiled for fault injection:
 *   S=Sources/CRunLoopCore; cc -std=c11 -O1 -g -D_GNU_SOURCE -DRL_FAULT_INJECTION -DRL_DEBUG \
 *     -fsanitize=address,undefined -pthread -I$S/include -I$S $S/*.c Tests/review/storage_faults.c \
 *     -lm -o /tmp/storage_faults && /tmp/storage_faults
 */
#include <crunloop.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((visibility("hidden"))) void rl_fault_arm(long after, long count);
__attribute__((visibility("hidden"))) long rl_fault_points(void);
static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %d: %s\n", __LINE__, #c); fails++; } } while (0)
static atomic_int dones, retains, releases;
static void done(void *m) { (void)m; atomic_fetch_add(&dones, 1); }
static void done2(void *m) { (void)m; atomic_fetch_add(&dones, 1); }
static const void *ret(const void *i) { atomic_fetch_add(&retains, 1); return i; }
static void rel(const void *i) { (void)i; atomic_fetch_add(&releases, 1); }
static void cb(rl_timer_t *t, void *i) { (void)t; (void)i; }
int main(void) {
    rl_loop_t *loop = rl_loop_get_current();
    _Alignas(8) unsigned char mem[RL_TIMER_STORAGE_SIZE];
    memset(mem, 0xAB, sizeof mem);
    rl_timer_storage st = {mem, sizeof mem, done};
    rl_context_t ctx = {mem, ret, rel};
    /* 1. ENOMEM from hold_for: a new triple, the first allocation fails */
    rl_fault_arm(0, 1);
    errno = 0;
    rl_timer_t *t = rl_timer_create_in(&st, RL_TIMER_IN_HELD, 0, 0, 0, cb, &ctx);
    rl_fault_arm(-1, 0);
    CHECK(t == NULL && errno == ENOMEM);
    int untouched = 1;
    for (size_t i = 0; i < sizeof mem; i++) if (mem[i] != 0xAB) untouched = 0;
    CHECK(untouched);
    CHECK(retains == 0 && dones == 0);
    /* 2. a failed add that claimed the held timer: every fault point of an add to a new mode */
    for (long k = 0;; k++) {
        _Alignas(8) unsigned char m2[RL_TIMER_STORAGE_SIZE];
        rl_timer_storage s2 = {m2, sizeof m2, done2};
        atomic_store(&dones, 0); atomic_store(&retains, 0); atomic_store(&releases, 0);
        t = rl_timer_create_in(&s2, RL_TIMER_IN_HELD, rl_time_now() + 100, 0, 0, cb, &ctx);
        CHECK(t != NULL);
        char mode[32];
        snprintf(mode, sizeof mode, "m%ld", k);
        rl_fault_arm(k, 1);
        int rc = rl_loop_add_timer(loop, t, mode);
        long passed = rl_fault_points();
        rl_fault_arm(-1, 0);
        if (rc) {
            CHECK(rc == -ENOMEM);
            CHECK(retains == releases);
            CHECK(!rl_loop_contains_timer(loop, t, mode));
            CHECK(dones == 0);
            /* it can still be added elsewhere after that */
            CHECK(rl_loop_add_timer(loop, t, RL_DEFAULT_MODE) == 0);
            CHECK(retains == releases + 1);
            rl_timer_invalidate(t);
        } else {
            rl_timer_invalidate(t);
        }
        CHECK(retains == releases);
        CHECK(dones == 0);
        rl_release(t);
        CHECK(dones == 1);
        if (!rc && passed <= k) { printf("add: %ld fault points swept\n", k); break; }
    }
    /* 3. same for the common modes, a timer already in one mode (chained entry) */
    for (long k = 0;; k++) {
        _Alignas(8) unsigned char m2[RL_TIMER_STORAGE_SIZE];
        rl_timer_storage s2 = {m2, sizeof m2, done2};
        atomic_store(&dones, 0); atomic_store(&retains, 0); atomic_store(&releases, 0);
        t = rl_timer_create_in(&s2, RL_TIMER_IN_HELD | RL_TIMER_IN_TIMEOUT, 0, 0, 0, cb, &ctx);
        CHECK(t != NULL);
        CHECK(rl_loop_add_timer(loop, t, "other") == 0);
        rl_fault_arm(k, 1);
        int rc = rl_loop_add_timer(loop, t, RL_COMMON_MODES);
        long passed = rl_fault_points();
        rl_fault_arm(-1, 0);
        CHECK(rc == 0 || rc == -ENOMEM);
        CHECK(retains == releases + 1);
        rl_timer_invalidate(t);
        CHECK(retains == releases);
        CHECK(dones == 0);
        rl_release(t);
        CHECK(dones == 1);
        if (!rc && passed <= k) { printf("common: %ld fault points swept\n", k); break; }
    }
    printf("%d failures\n", fails);
    return fails != 0;
}
