/*
 * signal.c - signal sources: the process-wide handler, its counters and its eventfd, and how a
 * loop turns deliveries into signalled version-0 sources.
 *
 * A handler may only do what is async-signal-safe, and it may run on any thread, inside any
 * function of this library, holding any of its locks: so it takes no lock and touches no source.
 * It adds one to its signal's counter, then to the generation, then writes the eventfd. Every
 * loop holding a signal source watches that eventfd edge-triggered and never reads it (like its
 * own wakeup eventfd): each write is an edge in every epoll set, so every sleeping loop wakes.
 * A pass compares the generation with the one it last saw, and only when it moved does it take
 * the lock and queue the sources whose counter moved (rl_signals_take). Why nothing is lost: the
 * handler bumps the counter before the generation, so a pass that reads the new generation then
 * reads the new counter; a pass that read the old one compares again next time, and the write
 * that follows the bump wakes it if it sleeps (an edge that comes before the wait is kept by
 * epoll until the wait takes it).
 *
 * Counts. Each source remembers the counter value it has reported (seen), and its perform
 * advances seen to the counter by compare-and-swap, so two loops performing one source report
 * each delivery once between them, and seen never moves back.
 *
 * Teardown. The last source of a signal restores the disposition; the last source of all closes
 * the eventfd. A handler that started before may still be running on another thread: it
 * announces itself in in_handler before it reads the eventfd's number, and the closer stores -1
 * as the number, then waits for in_handler to drop to 0 (wake.c's wake_writers protocol): either
 * the handler reads -1 and writes nothing, or the closer waits for its write. The number is never
 * written after it is closed (and reused by another file).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

atomic_uint rl_signal_generation;

static atomic_uint deliveries[NSIG];
static atomic_int event_fd = -1;
static atomic_uint in_handler;

/* Guards watchers, users, previous and the eventfd's creation and closing. A leaf: nothing else
 * is locked while it is held, and the handler never takes it. */
static pthread_mutex_t signals_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned watchers[NSIG];             /* sources holding each signal's handler */
static unsigned users;                      /* sources holding any: the eventfd lives while > 0 */
static struct sigaction previous[NSIG];     /* the disposition found, while watchers > 0 */

unsigned rl_signal_deliveries(int signo) { return atomic_load(&deliveries[signo]); }

static void post(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN) return; /* cannot happen: the number is ours while in_handler counts us */
        uint64_t drain; /* saturated (2^64-2 deliveries): nobody reads it, so reset it */
        if (read(fd, &drain, sizeof drain) < 0 && errno != EAGAIN) return;
    }
}

/* Raised by the kernel for the instruction that faulted: returning would run it again. */
static bool is_fault(int signo, const siginfo_t *info) {
    bool synchronous = signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL ||
                       signo == SIGTRAP || signo == SIGSYS;
    return synchronous && info && info->si_code > 0;
}

static void on_signal(int signo, siginfo_t *info, void *context) {
    int saved_errno = errno;
    atomic_fetch_add(&in_handler, 1);
    atomic_fetch_add(&deliveries[signo], 1);
    atomic_fetch_add(&rl_signal_generation, 1);
    int fd = atomic_load(&event_fd);
    if (fd >= 0) post(fd);
    const struct sigaction *before = &previous[signo];
    if (before->sa_flags & SA_SIGINFO) {
        if (before->sa_sigaction) before->sa_sigaction(signo, info, context);
    } else if (before->sa_handler != SIG_DFL && before->sa_handler != SIG_IGN) {
        before->sa_handler(signo);
    } else if (is_fault(signo, info)) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(signo, &dfl, NULL); /* async-signal-safe; the fault comes again and kills */
    }
    atomic_fetch_sub(&in_handler, 1);
    errno = saved_errno;
}

static void quiesce(void) {
    while (atomic_load(&in_handler)) sched_yield(); /* a handler is running on another thread */
}

int rl_signal_acquire(int signo) {
    int rc = 0;
    pthread_mutex_lock(&signals_lock);
    if (users == 0) {
        int fd = rl_fault_fails(EMFILE) ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0) rc = -errno;
        else atomic_store(&event_fd, fd);
    }
    if (rc == 0 && watchers[signo] == 0) {
        struct sigaction mine;
        memset(&mine, 0, sizeof mine);
        mine.sa_sigaction = on_signal;
        mine.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigemptyset(&mine.sa_mask);
        if (sigaction(signo, &mine, &previous[signo]) < 0) {
            rc = -errno;
            if (users == 0) {
                close(atomic_exchange(&event_fd, -1)); /* no handler of ours was installed */
            }
        }
    }
    if (rc == 0) {
        watchers[signo]++;
        users++;
    }
    pthread_mutex_unlock(&signals_lock);
    return rc;
}

void rl_signal_release(int signo) {
    pthread_mutex_lock(&signals_lock);
    if (--watchers[signo] == 0) {
        struct sigaction now;
        /* Put back what the first source found, unless someone installed a handler over ours. */
        if (sigaction(signo, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_signal)
            sigaction(signo, &previous[signo], NULL);
    }
    if (--users == 0) {
        int fd = atomic_exchange(&event_fd, -1);
        quiesce();
        close(fd);
    } else if (watchers[signo] == 0) {
        quiesce(); /* previous[signo] may be written again by the next first source */
    }
    pthread_mutex_unlock(&signals_lock);
}

void rl_signals_lock_for_fork(bool lock) {
    if (lock) pthread_mutex_lock(&signals_lock);
    else pthread_mutex_unlock(&signals_lock);
}

void rl_signals_after_fork_child(void) {
    /* The eventfd is shared with the parent: a fresh one at the same number, so that the loops'
     * renewed epoll sets watch the child's own (loop.c renews them after this). Without an fd
     * for it, the shared one stays: each side's deliveries then wake the other's loops for a
     * pass that finds nothing, which is harmless. */
    atomic_store(&in_handler, 0);
    int fd = atomic_load(&event_fd);
    if (fd < 0) return;
    int fresh = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fresh < 0) return;
    if (dup3(fresh, fd, O_CLOEXEC) < 0) {
        close(fresh);
        return;
    }
    close(fresh);
}

/* ---- Sources ---- */

rl_source_t *rl_source_create_signal(int signo, long order, rl_signal_callback_t callback,
                                     const rl_context_t *context) {
    if (!callback || signo <= 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP) {
        errno = EINVAL;
        return NULL;
    }
    rl_source_t *s = rl_source_new(order);
    if (!s) return NULL;
    int rc = rl_signal_acquire(signo);
    if (rc) {
        rl_source_destroy(s); /* no context yet, no signal: only the memory */
        errno = -rc;
        return NULL;
    }
    s->kind = RL_SOURCE_SIGNAL;
    s->signo = signo;
    atomic_init(&s->seen, rl_signal_deliveries(signo));
    s->on.signal = callback;
    rl_source_take_context(s, context);
    return s;
}

/* Advance seen to the counter; the number of deliveries it moved over. */
static unsigned take_deliveries(rl_source_t *s) {
    unsigned seen = atomic_load(&s->seen), now;
    do {
        now = rl_signal_deliveries(s->signo);
        if (now == seen) return 0;
    } while (!atomic_compare_exchange_weak(&s->seen, &seen, now));
    return now - seen;
}

bool rl_signal_perform(rl_source_t *s) {
    unsigned count = take_deliveries(s);
    if (!count) return false;
    __RL_IS_CALLING_OUT_TO_A_SIGNAL_CALLBACK_FUNCTION__(s->on.signal, s, s->signo, count, s->context.info);
    return true;
}

/* ---- Loops ---- */

/* The signals of the sources loop holds: what its thread takes while it sleeps. loop locked. */
static void update_accept(rl_loop_t *loop) {
    sigemptyset(&loop->signal_accept);
    for (size_t i = 0; i < loop->signal_links.count; i++)
        sigaddset(&loop->signal_accept, ((rl_link *)loop->signal_links.items[i])->source->signo);
}

int rl_signals_attach(rl_loop_t *loop, rl_link *link) {
    if (rl_ptrvec_push(&loop->signal_links, link)) return -ENOMEM;
    sigaddset(&loop->signal_accept, link->source->signo);
    if (loop->signal_links.count == 1) {
        /* The source holds a signal, so the eventfd is open and keeps its number meanwhile. */
        int rc = rl_wait_watch_signals(&loop->wait, atomic_load(&event_fd));
        if (rc) {
            loop->signal_links.count--;
            update_accept(loop);
            return rc;
        }
        atomic_store(&loop->signal_watch, true);
    }
    return 0;
}

void rl_signals_detach(rl_loop_t *loop, rl_link *link) {
    rl_ptrvec_remove(&loop->signal_links, link);
    update_accept(loop);
    if (loop->signal_links.count) return;
    atomic_store(&loop->signal_watch, false);
    rl_wait_unwatch_signals(&loop->wait);
}

void rl_signals_take(rl_loop_t *loop) {
    loop->signal_seen = atomic_load(&rl_signal_generation); /* before the counters are read */
    pthread_mutex_lock(&loop->lock);
    for (size_t i = 0; i < loop->signal_links.count; i++) {
        rl_link *l = loop->signal_links.items[i];
        if (!rl_source_watch_pending(l->source)) continue;
        atomic_fetch_or(&l->source->signalled, RL_SIGNAL_SET);
        rl_link_enqueue(l);
    }
    pthread_mutex_unlock(&loop->lock);
}
