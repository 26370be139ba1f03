/* shim.c - see crunloop_dispatch_shim.h. */
#include "crunloop_dispatch_shim.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Exported by libdispatch for CoreFoundation (private, so not in its public headers). On Linux
 * dispatch_runloop_handle_t is an int: an eventfd. */
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *msg);

int rl_dispatch_main_queue_fd(void) {
    return _dispatch_get_main_queue_handle_4CF();
}

void rl_dispatch_service_main_queue(void) {
    int fd = _dispatch_get_main_queue_handle_4CF();
    /* Read only when readable: the eventfd may have been created blocking. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
        uint64_t value;
        ssize_t n;
        do {
            n = read(fd, &value, sizeof value);
        } while (n < 0 && errno == EINTR);
    }
    _dispatch_main_queue_callback_4CF(NULL);
}

void rl_shim_set_thread_name(const char *name) {
    char buf[16];
    strncpy(buf, name ? name : "", sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    pthread_setname_np(pthread_self(), buf);
}

int rl_shim_on_main_thread(void) {
    return (pid_t)syscall(SYS_gettid) == getpid();
}
