/*
 * fdreuse.c - an fd closed while its source is in a loop, and its number reused.
 *
 * Source S1 watches fd N (one end of a socketpair) in mode "A"; the user closes N without
 * removing S1; a new socketpair gets number N again (dup2 if need be), and S2 watches N with the
 * same interest, in the same loop and mode. Each case checks:
 *   - S2 is called for the new socket's data, and never without data to read (an event of the
 *     old file taken for the new one);
 *   - S1 is never called again, in particular not with the new file's events;
 *   - rl_source_set_fd_events(S1) returns -EBADF once the loop noticed (after S2's add);
 *   - removing (or invalidating) S1 leaves S2 registered and firing;
 *   - no busy loop: a 0.2 s run with nothing to read makes a bounded number of passes;
 *   - rl_loop_verify is 0 throughout.
 * Cases: the plain one with removal, with invalidation, S2 with a wider interest (readable and
 * writable, narrowed by its callout), S1 with the wider interest, and the old file kept alive
 * by a dup() (its epoll registration cannot be removed by number: the loop must not spin on its
 * events nor hand them to S2 or S1), the same with no fd left (the loop cannot make a new epoll
 * set to drop that registration until an fd is free again: passes return at once meanwhile, but
 * neither source gets the old file's events, and the loop is quiet once fds are back), and the
 * old file kept by a dup with no new source added on the number (nothing probes it: S1 must not
 * be called every pass for the old file's events).
 */
#include "faults.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    fcase c;
    rl_loop_t *loop;
    rl_source_t *s1, *s2;
    int n, peer1, peer2, kept;
    bool closed;                   /* S1's fd is closed */
    int s1_calls_after_close, s2_calls, s2_spurious, s2_data, s2_writable;
    unsigned s2_narrow_to;         /* S2's callout narrows its interest to this on WRITABLE */
} reuse_t;

static void cb1(rl_source_t *s, int fd, unsigned events, void *info) {
    reuse_t *r = info;
    (void)s, (void)fd, (void)events;
    if (r->closed) r->s1_calls_after_close++;
    else {
        char buf[64];
        while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
    }
}

static void cb2(rl_source_t *s, int fd, unsigned events, void *info) {
    reuse_t *r = info;
    r->s2_calls++;
    if (events & RL_FD_WRITABLE) {
        r->s2_writable++;
        if (r->s2_narrow_to) rl_source_set_fd_events(s, r->s2_narrow_to);
    }
    if (events & RL_FD_READABLE) {
        char buf[64];
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            r->s2_data += (int)n;
            while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
        } else if (!(events & RL_FD_ERROR)) {
            r->s2_spurious++;
        }
    }
}

static void verify(reuse_t *r, const char *when) {
    char report[512];
    int v = verify_loop(r->loop, report, sizeof report);
    FCHECK(&r->c, v == 0, "%s: rl_loop_verify: %d violations (expected none): %s", when, v, report);
}

/* Send a byte to S2's socket and run mode A until S2 read it (1 s at most). */
static void expect_data(reuse_t *r, const char *when) {
    int before = r->s2_data;
    if (send(r->peer2, "y", 1, 0) != 1) abort();
    double end = now_s() + 1.0;
    while (r->s2_data == before && now_s() < end) rl_run_in_mode("A", 0.01, false);
    FCHECK(&r->c, r->s2_data > before, "%s: S2 was not called within 1 s for the new socket's data", when);
}

/* A 0.2 s run with nothing to read: bounded passes. */
static void expect_quiet(reuse_t *r, const char *when) {
    rl_loop_stats_t a, b;
    rl_loop_get_stats(r->loop, &a);
    int calls = r->s2_calls;
    double t0 = now_s();
    while (now_s() - t0 < 0.2) rl_run_in_mode("A", 0.2 - (now_s() - t0), false);
    rl_loop_get_stats(r->loop, &b);
    unsigned long long passes = b.passes - a.passes;
    FCHECK(&r->c, passes < 60, "%s: %llu passes in a 0.2 s run with nothing to do, expected fewer than 60 (busy loop)",
           when, passes);
    FCHECK(&r->c, r->s2_calls - calls < 20,
           "%s: S2 called %d times in 0.2 s with nothing to read, expected fewer than 20", when, r->s2_calls - calls);
}

static void socketpair_at(int n, int sv[2]) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
    if (sv[0] == n) return;
    if (sv[1] == n) { /* swap: the end at n is the watched one */
        int t = sv[0];
        sv[0] = sv[1];
        sv[1] = t;
        return;
    }
    if (dup3(sv[0], n, O_CLOEXEC) < 0) abort();
    close(sv[0]);
    sv[0] = n;
}

enum { PLAIN_REMOVE, PLAIN_INVALIDATE, S2_WIDER, S1_WIDER, KEPT_BY_DUP, KEPT_NO_FD_LEFT, KEPT_NO_S2 };

/* Fill the fd table (the soft limit lowered first) so that the loop cannot make a new epoll set. */
static int filled[4096], nfilled;
static struct rlimit saved_limit;
static void fill_fds(void) {
    getrlimit(RLIMIT_NOFILE, &saved_limit);
    struct rlimit r = saved_limit;
    r.rlim_cur = (rlim_t)(count_open_fds() + 32);
    if (r.rlim_cur > saved_limit.rlim_cur) r.rlim_cur = saved_limit.rlim_cur;
    setrlimit(RLIMIT_NOFILE, &r);
    int base = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (base >= 0) filled[nfilled++] = base;
    while (base >= 0 && nfilled < 4096) {
        int fd = fcntl(base, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) break;
        filled[nfilled++] = fd;
    }
}
static void unfill_fds(void) {
    while (nfilled) close(filled[--nfilled]);
    setrlimit(RLIMIT_NOFILE, &saved_limit);
}

static void *reuse_case(void *arg) {
    int kind = *(int *)arg;
    static const char *names[] = {
        "fd reuse: S2 gets the new file's events, S1 never; removing S1 leaves S2",
        "fd reuse: invalidating S1 leaves S2 registered and firing",
        "fd reuse: S2 readable+writable: no busy loop, S1 never called",
        "fd reuse: S1 readable+writable, S2 readable: no busy loop, S1 never called",
        "fd reuse: old file kept open by a dup: no busy loop, its events reach neither source",
        "fd reuse: old file kept open by a dup, no fd left (no new epoll set possible): no misdelivery, quiet once fds are back",
        "fd reuse: old file kept open by a dup, no new source on the number: no busy loop",
    };
    bool kept = kind == KEPT_BY_DUP || kind == KEPT_NO_FD_LEFT || kind == KEPT_NO_S2;
    reuse_t *r = calloc(1, sizeof *r);
    fcase_init(&r->c, names[kind]);
    r->kept = -1;
    r->loop = rl_loop_get_current();
    if (!r->loop) {
        FCHECK(&r->c, false, "rl_loop_get_current() returned NULL (errno %d), expected a loop", errno);
        fcase_report(&r->c);
        pthread_mutex_destroy(&r->c.lock);
        free(r);
        return NULL;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
    r->n = sv[0];
    r->peer1 = sv[1];
    rl_context_t ctx = {r, NULL, NULL};
    unsigned e1 = kind == S1_WIDER ? RL_FD_READABLE | RL_FD_WRITABLE : RL_FD_READABLE;
    r->s1 = rl_source_create_fd(r->n, e1, 0, cb1, &ctx);
    int rc = rl_loop_add_source(r->loop, r->s1, "A");
    FCHECK(&r->c, rc == 0, "adding S1 returned %d, expected 0", rc);
    if (kind == S1_WIDER) rl_source_set_fd_events(r->s1, RL_FD_READABLE); /* no spin on writable before */
    if (send(r->peer1, "x", 1, 0) != 1) abort();
    rl_run_in_mode("A", 0.01, false); /* S1 works, and the fd is registered */
    if (kind == S1_WIDER) rl_source_set_fd_events(r->s1, e1);
    if (kept) r->kept = dup(r->n);
    /* The user closes N under S1, and the number comes back for another socket. */
    r->closed = true;
    close(r->n);
    if (!kept) close(r->peer1), r->peer1 = -1;
    int sv2[2];
    socketpair_at(r->n, sv2);
    r->peer2 = sv2[1];
    unsigned e2 = kind == S2_WIDER ? RL_FD_READABLE | RL_FD_WRITABLE : RL_FD_READABLE;
    r->s2_narrow_to = kind == S2_WIDER ? RL_FD_READABLE : 0;
    if (kind == KEPT_NO_S2) {
        /* Nothing probes the number: the old file's registration still carries S1's tag. */
        if (send(r->peer1, "z", 1, 0) != 1) abort();
        expect_quiet(r, "with the old file readable");
        FCHECK(&r->c, r->s1_calls_after_close < 20,
               "S1 called %d times in 0.2 s for the old file's events, expected fewer than 20",
               r->s1_calls_after_close);
        verify(r, "with the old file readable");
        rl_source_invalidate(r->s1);
        rl_release(r->s1);
        close(r->n);
        close(r->peer2);
        close(r->peer1);
        close(r->kept);
        fcase_report(&r->c);
        pthread_mutex_destroy(&r->c.lock);
        free(r);
        return NULL;
    }
    r->s2 = rl_source_create_fd(r->n, e2, 1, cb2, &ctx);
    rc = rl_loop_add_source(r->loop, r->s2, "A");
    FCHECK(&r->c, rc == 0, "adding S2 on the reused number %d returned %d (%s), expected 0", r->n, rc, strerror(-rc));
    verify(r, "after adding S2");
    expect_data(r, "S2 on the reused number");
    if (kind == S2_WIDER) FCHECK(&r->c, r->s2_writable >= 1, "S2 never called as writable, expected at least once");
    rc = rl_source_set_fd_events(r->s1, RL_FD_READABLE);
    FCHECK(&r->c, rc == -EBADF, "rl_source_set_fd_events on the stale S1 returned %d, not -EBADF", rc);
    expect_quiet(r, "after S2's data");
    if (kept) {
        /* The old file becomes readable: its registration (under number N) reports it. */
        if (kind == KEPT_NO_FD_LEFT) fill_fds();
        if (send(r->peer1, "z", 1, 0) != 1) abort();
        /* With no fd to spare the loop cannot drop the old registration yet (crunloop.h, FILE
         * DESCRIPTORS CLOSED TOO EARLY): passes return at once, but nothing is misdelivered. */
        if (kind != KEPT_NO_FD_LEFT) expect_quiet(r, "with the old file readable");
        expect_data(r, "S2 with the old file readable");
        verify(r, "with the old file readable");
        if (kind == KEPT_NO_FD_LEFT) {
            unfill_fds();
            expect_quiet(r, "once fds are back");
        }
    }
    if (kind == PLAIN_INVALIDATE) {
        rl_source_invalidate(r->s1);
    } else {
        rc = rl_loop_remove_source(r->loop, r->s1, "A");
        FCHECK(&r->c, rc == 0, "removing the stale S1 returned %d, expected 0", rc);
    }
    FCHECK(&r->c, rl_loop_contains_source(r->loop, r->s2, "A"), "S2 left mode A with S1, expected it to stay");
    verify(r, "after S1 went");
    expect_data(r, "S2 after S1 went");
    expect_quiet(r, "after S1 went");
    FCHECK(&r->c, r->s1_calls_after_close == 0, "S1 called %d times after its fd was closed, expected never",
           r->s1_calls_after_close);
    FCHECK(&r->c, r->s2_spurious == 0,
           "S2 called %d times as readable with nothing to read (another file's events), expected never",
           r->s2_spurious);
    rl_source_invalidate(r->s2);
    rl_source_invalidate(r->s1);
    rl_release(r->s1);
    rl_release(r->s2);
    close(r->n);
    close(r->peer2);
    if (r->peer1 >= 0) close(r->peer1);
    if (r->kept >= 0) close(r->kept);
    fcase_report(&r->c);
    pthread_mutex_destroy(&r->c.lock);
    free(r);
    return NULL;
}

void part_fdreuse(void) {
    for (int kind = PLAIN_REMOVE; kind <= KEPT_NO_S2; kind++) {
        pthread_t th;
        if (pthread_create(&th, NULL, reuse_case, &kind)) abort();
        if (!join_within(th, 8.0)) {
            fr_line("case FAIL fd reuse case %d: its thread did not end within 8 s (hung)", kind);
            _exit(0);
        }
    }
}
