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
 * written after it is closed (and reused by another file). The handler stops counting itself
 * before it calls the handler it chains to, which may never return (siglongjmp, exit): the wait
 * covers only the library's own instructions, so it is short.
 *
 * Chaining. What ours found is kept in one of two slots, published by an index: an install
 * fills the other slot, publishes it, and only then installs ours (reading the disposition
 * first, apart), so a delivery at any moment reads a whole slot that describes what was in
 * place. A slot is filled again only two installs later, and every release in between waited
 * for the handlers counted, so none still reads it.
 */
#include "internal.h"
#include "wait.h"

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

typedef void (*any_handler)(void);

/* Guards watchers, users, found (the slot no handler reads), displaced_by, and the eventfd's
 * creation and closing. A leaf: nothing else is locked while it is held, and the handler never
 * takes it. */
static pthread_mutex_t signals_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned watchers[NSIG];             /* sources holding each signal's handler */
static unsigned users;                      /* sources holding any: the eventfd lives while > 0 */
/* The disposition the last install of ours found, which the handler chains to and the last
 * source puts back. Two slots: an install fills the one at 1 - found_at, then publishes it, so a
 * handler never reads a slot being written (see install). spent: a one-shot (SA_RESETHAND)
 * handler in that slot was called once already, so it now counts as SIG_DFL, as the kernel would
 * have reset it. */
static struct sigaction found[NSIG][2];
static atomic_uchar found_at[NSIG];
static atomic_bool spent[NSIG][2];
/* The function that had replaced ours when the last source of the signal went (NULL for none):
 * it may call ours (chaining to what it found, as ours does), so a later first source does not
 * install over it while it stays in place, which would make the two call each other for ever. */
static any_handler displaced_by[NSIG];

unsigned rl_signal_deliveries(int signo) { return atomic_load(&deliveries[signo]); }

static any_handler handler_of(const struct sigaction *a) {
    return a->sa_flags & SA_SIGINFO ? (any_handler)a->sa_sigaction : (any_handler)a->sa_handler;
}

static bool is_function(const struct sigaction *a) {
    return (a->sa_flags & SA_SIGINFO) ? a->sa_sigaction != NULL
                                      : a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

static void post(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN) return; /* cannot happen: the number is ours while in_handler counts us */
        uint64_t drain; /* saturated (2^64-2 deliveries): nobody reads it, so reset it */
        if (read(fd, &drain, sizeof drain) < 0 && errno != EAGAIN) return;
    }
}

/* Raised by the kernel for the instruction that faulted (or trapped), not sent. */
static bool is_fault(int signo, const siginfo_t *info) {
    bool synchronous = signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL ||
                       signo == SIGTRAP || signo == SIGSYS;
    return synchronous && info && info->si_code > 0;
}

/* What SA_NOCLDSTOP spares a SIGCHLD handler: stops, continues and ptrace stops. */
static bool is_child_stop(int signo, const siginfo_t *info) {
    return signo == SIGCHLD && info &&
           (info->si_code == CLD_STOPPED || info->si_code == CLD_CONTINUED || info->si_code == CLD_TRAPPED);
}

static void on_signal(int signo, siginfo_t *info, void *context) {
    int saved_errno = errno;
    atomic_fetch_add(&in_handler, 1);
    atomic_fetch_add(&deliveries[signo], 1);
    atomic_fetch_add(&rl_signal_generation, 1);
    int fd = atomic_load(&event_fd);
    if (fd >= 0) post(fd);
    /* Read what to chain to while counted (no install rewrites it meanwhile), then stop counting
     * before calling it: it may never return (siglongjmp, exit), and a count left raised would
     * make the next release wait for ever. */
    unsigned at = atomic_load(&found_at[signo]);
    const struct sigaction *before = &found[signo][at];
    int flags = before->sa_flags;
    bool call = is_function(before);
    void (*action)(int, siginfo_t *, void *) = before->sa_sigaction;
    void (*handler)(int) = before->sa_handler;
    if (call && (flags & SA_NOCLDSTOP) && is_child_stop(signo, info)) call = false; /* it asked not to hear of them */
    else if (call && (flags & SA_RESETHAND) && atomic_exchange(&spent[signo][at], true)) call = false; /* SIG_DFL now */
    atomic_fetch_sub(&in_handler, 1);
    if (call) {
        if (flags & SA_SIGINFO) action(signo, info, context);
        else handler(signo);
    } else if (is_fault(signo, info)) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(signo, &dfl, NULL); /* async-signal-safe; a fault comes again and kills */
        /* A trap (x86's int3 resumes after it) or a seccomp SIGSYS (the call was skipped) does
         * not come again by itself: send it, to be taken with the default action on return. */
        if (signo == SIGTRAP || signo == SIGSYS) raise(signo);
    }
    errno = saved_errno;
}

static void quiesce(void) {
    while (atomic_load(&in_handler)) sched_yield(); /* a handler is running on another thread */
}

/* Put ours in front of signo's disposition, unless it is in the chain already: 0 or -errno.
 * signals_lock held, watchers[signo] == 0. */
static int install(int signo) {
    struct sigaction now;
    if (sigaction(signo, NULL, &now) < 0) return -errno;
    any_handler h = handler_of(&now);
    if (h == (any_handler)on_signal) { /* left in place by a handler that was over it, and restored since */
        displaced_by[signo] = NULL;
        return 0;
    }
    if (displaced_by[signo] && h == displaced_by[signo]) return 0; /* it still calls ours */
    displaced_by[signo] = NULL;
    /* Fill the slot no handler reads: the last release waited for every handler counted, and
     * one that starts later reads the published slot. Publish it before ours is in place, so
     * that a delivery at the install's return (a signal pending during the call) chains to it. */
    unsigned next = 1u - atomic_load(&found_at[signo]);
    found[signo][next] = now;
    atomic_store(&spent[signo][next], false);
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = on_signal;
    mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
    if (is_function(&now)) {
        /* Its handler runs inside ours: with its mask, and its interrupted calls restarted or
         * not, as before. */
        mine.sa_mask = now.sa_mask;
        mine.sa_flags |= now.sa_flags & (SA_RESTART | SA_NODEFER);
    } else {
        sigemptyset(&mine.sa_mask);
        mine.sa_flags |= SA_RESTART;
    }
    /* A SIGCHLD ignored or with SA_NOCLDWAIT had its children reaped by the kernel: keep it so. */
    if (signo == SIGCHLD && ((!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN) || (now.sa_flags & SA_NOCLDWAIT)))
        mine.sa_flags |= SA_NOCLDWAIT;
    atomic_store(&found_at[signo], (unsigned char)next);
    if (sigaction(signo, &mine, NULL) < 0) {
        int err = errno;
        atomic_store(&found_at[signo], (unsigned char)(1u - next));
        return -err;
    }
    return 0;
}

/* The last source of signo went: put back what ours found if ours is still in place; else
 * remember what replaced it. signals_lock held. */
static void uninstall(int signo) {
    struct sigaction now;
    if (sigaction(signo, NULL, &now) < 0) return;
    if (handler_of(&now) != (any_handler)on_signal) {
        displaced_by[signo] = is_function(&now) ? handler_of(&now) : NULL;
        return;
    }
    unsigned at = atomic_load(&found_at[signo]);
    struct sigaction back = found[signo][at];
    if ((back.sa_flags & SA_RESETHAND) && is_function(&back) && atomic_load(&spent[signo][at])) {
        memset(&back, 0, sizeof back); /* the one-shot handler ran: the kernel would have reset it */
        back.sa_handler = SIG_DFL;
    }
    sigaction(signo, &back, NULL);
}

int rl_signal_acquire(int signo) {
    int rc = 0;
    pthread_mutex_lock(&signals_lock);
    if (users == 0) {
        int fd = rl_fault_fails(EMFILE) ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0) rc = -errno;
        else atomic_store(&event_fd, fd);
    }
    if (rc == 0 && watchers[signo] == 0 && (rc = install(signo)) && users == 0) {
        /* A handler of ours for another signal, left in place by something installed over it,
         * may be running and about to write the number. */
        int fd = atomic_exchange(&event_fd, -1);
        quiesce();
        close(fd);
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
    if (--watchers[signo] == 0) uninstall(signo);
    if (--users == 0) {
        int fd = atomic_exchange(&event_fd, -1);
        quiesce();
        close(fd);
    } else if (watchers[signo] == 0) {
        quiesce(); /* the slot the next install fills may be the one a counted handler reads */
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
    rl_loop_lock_mutex(loop);
    for (size_t i = 0; i < loop->signal_links.count; i++) {
        rl_link *l = loop->signal_links.items[i];
        if (!rl_source_watch_pending(l->source)) continue;
        atomic_fetch_or(&l->source->signalled, RL_SIGNAL_SET);
        rl_link_enqueue(l);
    }
    rl_loop_unlock(loop);
}
