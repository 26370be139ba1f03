/*
 * fault.c - the fault points of alloc.h, in a fault-injection build (-DRL_FAULT_INJECTION). Each
 * thread counts the points it passes and fails the ones it was told to, so a test can sweep a
 * scenario: run it once to count its points, then once per point with that point failing.
 */
#include "alloc.h"

#ifdef RL_FAULT_INJECTION
static _Thread_local long fault_after = -1, fault_count, fault_passed;

bool rl_fault_now(void) {
    fault_passed++;
    if (fault_after < 0) return false;
    if (fault_after > 0) {
        fault_after--;
        return false;
    }
    if (fault_count == 0) {
        fault_after = -1;
        return false;
    }
    if (fault_count > 0 && --fault_count == 0) fault_after = -1;
    return true;
}

void rl_fault_arm(long after, long count) {
    fault_after = count == 0 ? -1 : after;
    fault_count = count;
    fault_passed = 0;
}

long rl_fault_points(void) { return fault_passed; }
#else
typedef int rl_fault_unused; /* ISO C wants a translation unit to declare something */
#endif
