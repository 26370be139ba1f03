/*
 * crunloop_dispatch_shim.h - the two libdispatch hooks the Swift layer needs to service the main
 * dispatch queue from the main thread's loop, as CoreFoundation does on Linux. Kept out of the C
 * core, which knows nothing of libdispatch.
 */
#ifndef CRUNLOOP_DISPATCH_SHIM_H
#define CRUNLOOP_DISPATCH_SHIM_H

#ifdef __cplusplus
extern "C" {
#endif

/* The eventfd libdispatch writes to when work is queued on the main queue
 * (_dispatch_get_main_queue_handle_4CF); created on first use. Any thread. */
int rl_dispatch_main_queue_fd(void);

/* Consume the eventfd's counter (an 8-byte read, so that a level-triggered wait does not spin),
 * then drain the main queue (_dispatch_main_queue_callback_4CF). Main thread only. */
void rl_dispatch_service_main_queue(void);

/* Name the calling thread (pthread_setname_np, which needs _GNU_SOURCE; truncated to 15 bytes). */
void rl_shim_set_thread_name(const char *name);

/* Whether the calling thread is the process's main thread (its thread id is the process id).
 * Creates nothing. */
int rl_shim_on_main_thread(void);

#ifdef __cplusplus
}
#endif
#endif
