/* callout.c - every call into user code goes through one of these, so that a debugger's or a
 * profiler's stack trace says which phase of the loop was running (CFRunLoop's convention). */
#include "internal.h"

#define CALLOUT __attribute__((noinline, used))

CALLOUT void __RL_IS_CALLING_OUT_TO_AN_OBSERVER_CALLBACK_FUNCTION__(rl_observer_callback_t fn,
    rl_observer_t *observer, unsigned activity, void *info) {
    fn(observer, activity, info);
    __asm__ __volatile__("" ::: "memory"); /* keep this frame: no tail call */
}

CALLOUT void __RL_IS_CALLING_OUT_TO_A_TIMER_CALLBACK_FUNCTION__(rl_timer_callback_t fn,
    rl_timer_t *timer, void *info) {
    fn(timer, info);
    __asm__ __volatile__("" ::: "memory");
}

CALLOUT void __RL_IS_CALLING_OUT_TO_A_SOURCE0_PERFORM_FUNCTION__(void (*fn)(void *), void *info) {
    fn(info);
    __asm__ __volatile__("" ::: "memory");
}

CALLOUT void __RL_IS_CALLING_OUT_TO_A_SOURCE1_PERFORM_FUNCTION__(rl_fd_callback_t fn,
    rl_source_t *source, int fd, unsigned events, void *info) {
    fn(source, fd, events, info);
    __asm__ __volatile__("" ::: "memory");
}

CALLOUT void __RL_IS_CALLING_OUT_TO_A_BLOCK__(void (*fn)(void *), void *arg) {
    fn(arg);
    __asm__ __volatile__("" ::: "memory");
}

CALLOUT void __RL_IS_CALLING_OUT_TO_A_SIGNAL_CALLBACK_FUNCTION__(rl_signal_callback_t fn,
    rl_source_t *source, int signo, unsigned count, void *info) {
    fn(source, signo, count, info);
    __asm__ __volatile__("" ::: "memory");
}

CALLOUT void __RL_IS_CALLING_OUT_TO_A_PROCESS_CALLBACK_FUNCTION__(rl_process_callback_t fn,
    rl_source_t *source, int pid, int status, void *info) {
    fn(source, pid, status, info);
    __asm__ __volatile__("" ::: "memory");
}

CALLOUT void __RL_IS_CALLING_OUT_TO_A_SCHEDULE_OR_CANCEL_FUNCTION__(
    void (*fn)(void *, rl_loop_t *, const char *), void *info, rl_loop_t *loop, const char *mode) {
    fn(info, loop, mode);
    __asm__ __volatile__("" ::: "memory");
}
