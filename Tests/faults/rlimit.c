/*
 * rlimit.c - running out of file descriptors, and kernel objects that cannot be made.
 *
 * Cases (each on fresh threads of the part's own process):
 *   rlimit no fd left       RLIMIT_NOFILE lowered and the fd table filled with dup(): a thread's
 *                           rl_loop_get_current() and rl_loop_get_main() return NULL with errno
 *                           EMFILE (or ENFILE, ENOMEM), rl_run_in_mode() and rl_run() return the
 *                           negative error, a loop creation that got some of its fds but not all
 *                           leaks none; once fds are freed the next call succeeds and the loop
 *                           works (a timer fires, a signalled source is performed, an fd source
 *                           is called).
 *   rlimit existing loop    a loop made before the table filled keeps working without new fds:
 *                           timers on time, another thread's signal and wakeup, a new fd source
 *                           on an fd it already has, a run's timeout.
 *   rlimit kernel faults    the fault points of loop creation, one at a time and from each on:
 *                           NULL with ENOMEM or EMFILE (EMFILE seen for the epoll set, eventfd
 *                           and timerfd), no fd leaked, rl_run_in_mode() returns the error, the
 *                           next call after disarming makes a working loop. The main loop made
 *                           from another thread, each point failing in turn (in a process of its
 *                           own): NULL with ENOMEM or EMFILE, no fd leaked, then it is made.
 *   rlimit epoll refuses    fd sources epoll cannot watch (a regular file, a directory): the add
 *                           returns -EPERM and leaves nothing (not in the mode, not in
 *                           RL_COMMON_MODES, a second add is -EPERM again, not -EEXIST, the source
 *                           is destroyed when released); a source whose fd was closed before the
 *                           add gets -EBADF; rl_loop_verify is 0 and the loop keeps working.
 */
#include "faults.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static bool is_fd_error(int e) { return e == EMFILE || e == ENFILE || e == ENOMEM; }

/* ---- A loop works: a timer fires, a signalled source is performed, an fd source is called ---- */

typedef struct {
    atomic_int fired, performed, fd_calls, releases;
} works_t;

static void w_timer(rl_timer_t *t, void *info) { (void)t, atomic_fetch_add(&((works_t *)info)->fired, 1); }
static void w_perform(void *info) { atomic_fetch_add(&((works_t *)info)->performed, 1); }
static void w_fd(rl_source_t *s, int fd, unsigned ev, void *info) {
    (void)s, (void)ev;
    char buf[64];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
    atomic_fetch_add(&((works_t *)info)->fd_calls, 1);
}
static void w_release(const void *info) { atomic_fetch_add(&((works_t *)info)->releases, 1); }

/* On the calling thread's loop, in mode "W". sv: a socketpair to watch, or NULL for none. */
static void check_loop_works(fcase *c, const char *when, const int *sv) {
    rl_loop_t *loop = rl_loop_get_current();
    FCHECK(c, loop != NULL, "%s: rl_loop_get_current() returned NULL (errno %d), expected a loop", when, errno);
    if (!loop) return;
    works_t w;
    memset(&w, 0, sizeof w);
    rl_context_t ctx = {&w, NULL, w_release};
    rl_source_context_t sctx = {&w, NULL, w_release, NULL, NULL, w_perform};
    rl_timer_t *t = rl_timer_create(rl_time_now() + 0.001, 0, 0, w_timer, &ctx);
    rl_source_t *s = rl_source_create(0, &sctx);
    rl_source_t *f = sv ? rl_source_create_fd(sv[0], RL_FD_READABLE, 0, w_fd, &ctx) : NULL;
    FCHECK(c, t && s && (!sv || f), "%s: creating a timer, a source and an fd source gave %p %p %p (errno %d)", when,
           (void *)t, (void *)s, (void *)f, errno);
    if (!t || !s || (sv && !f)) {
        rl_release(t);
        rl_release(s);
        rl_release(f);
        return;
    }
    int rc1 = rl_loop_add_timer(loop, t, "W"), rc2 = rl_loop_add_source(loop, s, "W");
    int rc3 = f ? rl_loop_add_source(loop, f, "W") : 0;
    FCHECK(c, rc1 == 0 && rc2 == 0 && rc3 == 0, "%s: adds returned %d %d %d, expected 0 0 0", when, rc1, rc2, rc3);
    rl_source_signal(s);
    if (sv && send(sv[1], "x", 1, 0) != 1) FCHECK(c, false, "%s: send failed", when);
    double end = now_s() + 1.0;
    while (now_s() < end && !(w.fired && w.performed && (!sv || w.fd_calls))) {
        int rc = rl_run_in_mode("W", 0.01, false);
        FCHECK(c, rc > 0, "%s: rl_run_in_mode returned %d, expected an RL_RUN_* result", when, rc);
        if (rc < 0) break;
    }
    FCHECK(c, w.fired == 1, "%s: the timer fired %d times within 1 s, expected once", when, (int)w.fired);
    FCHECK(c, w.performed == 1, "%s: the signalled source was performed %d times within 1 s, expected once", when,
           (int)w.performed);
    FCHECK(c, !sv || w.fd_calls >= 1, "%s: the fd source was not called within 1 s of data", when);
    char report[512];
    int v = verify_loop(loop, report, sizeof report);
    FCHECK(c, v == 0, "%s: rl_loop_verify: %d violations (expected none): %s", when, v, report);
    rl_timer_invalidate(t);
    rl_source_invalidate(s);
    rl_source_invalidate(f);
    rl_release(t);
    rl_release(s);
    rl_release(f);
    FCHECK(c, w.releases == (sv ? 3 : 2), "%s: %d of the items' contexts released, expected %d", when, (int)w.releases,
           sv ? 3 : 2);
}

/* ---- Filling the fd table ---- */

typedef struct {
    int fds[4096];
    int count;
    struct rlimit saved;
} filler;

/* Lower the soft limit to a little above what is open, then dup until EMFILE. */
static void fill(filler *f) {
    getrlimit(RLIMIT_NOFILE, &f->saved);
    struct rlimit r = f->saved;
    int open_now = count_open_fds();
    r.rlim_cur = (rlim_t)(open_now + 64);
    if (r.rlim_cur > f->saved.rlim_cur) r.rlim_cur = f->saved.rlim_cur;
    setrlimit(RLIMIT_NOFILE, &r);
    f->count = 0;
    int base = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (base < 0) return;
    f->fds[f->count++] = base;
    while (f->count < 4096) {
        int fd = fcntl(base, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) break;
        f->fds[f->count++] = fd;
    }
}

static void free_some(filler *f, int n) {
    while (n-- > 0 && f->count > 0) close(f->fds[--f->count]);
}

static void unfill(filler *f) {
    free_some(f, f->count);
    setrlimit(RLIMIT_NOFILE, &f->saved);
}

/* ---- rlimit no fd left ---- */

static void *no_fd_thread(void *arg) {
    fcase *c = arg;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
    static filler f;
    fill(&f);
    FCHECK(c, f.count > 0, "could not fill the fd table (open /dev/null: errno %d)", errno);
    for (int spare = 0; spare <= 2; spare++) { /* 0, 1 or 2 fds free: a loop needs 3 */
        free_some(&f, spare);
        int before = count_open_fds();
        errno = 0;
        rl_loop_t *loop = rl_loop_get_current();
        int e = errno;
        FCHECK(c, loop == NULL, "%d fds free: rl_loop_get_current() made a loop, expected NULL", spare);
        FCHECK(c, is_fd_error(e), "%d fds free: rl_loop_get_current() errno %d (%s), expected EMFILE/ENFILE/ENOMEM",
               spare, e, strerror(e));
        int rc = rl_run_in_mode(RL_DEFAULT_MODE, 0, false);
        FCHECK(c, rc < 0 && is_fd_error(-rc),
               "%d fds free: rl_run_in_mode returned %d, expected -EMFILE/-ENFILE/-ENOMEM", spare, rc);
        rc = rl_run();
        FCHECK(c, rc < 0 && is_fd_error(-rc), "%d fds free: rl_run returned %d, expected -EMFILE/-ENFILE/-ENOMEM",
               spare, rc);
        errno = 0;
        rl_loop_t *main_loop = rl_loop_get_main();
        e = errno;
        FCHECK(c, main_loop == NULL && is_fd_error(e),
               "%d fds free: rl_loop_get_main() gave %s, errno %d, expected NULL with EMFILE/ENFILE/ENOMEM", spare,
               main_loop ? "a loop" : "NULL", e);
        int after = count_open_fds();
        FCHECK(c, after == before, "%d fds free: the failed loop creations left %d fds open, expected none", spare,
               after - before);
        if (loop) break;
        /* take the freed fds back */
        for (int i = 0; i < spare; i++) {
            int fd = fcntl(f.fds[0], F_DUPFD_CLOEXEC, 0);
            if (fd >= 0) f.fds[f.count++] = fd;
        }
    }
    unfill(&f);
    rl_loop_t *loop = rl_loop_get_current();
    FCHECK(c, loop != NULL, "rl_loop_get_current() still NULL once fds were freed (errno %d)", errno);
    check_loop_works(c, "once fds were freed", sv);
    rl_loop_t *main_loop = rl_loop_get_main();
    FCHECK(c, main_loop != NULL && main_loop != loop,
           "rl_loop_get_main() once fds were freed gave %p (errno %d), expected a loop other than this thread's %p",
           (void *)main_loop, errno, (void *)loop);
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

/* ---- rlimit existing loop ---- */

typedef struct {
    fcase *c;
    rl_loop_t *loop;
    rl_source_t *src;
    atomic_int performed, stop;
} cross_t;

static void cross_perform(void *info) { atomic_fetch_add(&((cross_t *)info)->performed, 1); }

static void *signaller(void *arg) {
    cross_t *x = arg;
    for (int i = 0; i < 50 && !x->stop; i++) {
        int before = x->performed;
        rl_source_signal(x->src);
        rl_loop_wakeup(x->loop);
        double end = now_s() + 1.0;
        while (x->performed == before && now_s() < end) nap(0.0002);
        FCHECK(x->c, x->performed > before, "signal %d and wakeup from another thread not performed within 1 s", i);
        if (x->performed == before) break;
    }
    x->stop = 1;
    return NULL;
}

static void *existing_thread(void *arg) {
    fcase *c = arg;
    rl_loop_t *loop = rl_loop_get_current();
    FCHECK(c, loop != NULL, "rl_loop_get_current() before filling the fd table returned NULL (errno %d)", errno);
    if (!loop) return NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
    cross_t x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.loop = loop;
    rl_source_context_t sctx = {&x, NULL, NULL, NULL, NULL, cross_perform};
    x.src = rl_source_create(0, &sctx);
    int rc = rl_loop_add_source(loop, x.src, "X");
    FCHECK(c, rc == 0, "adding the cross-thread source returned %d, expected 0", rc);
    static filler f;
    fill(&f);
    check_loop_works(c, "a loop made before the table filled", sv); /* fd source on an fd it has */
    /* another thread's signals and wakeups reach it */
    pthread_t th;
    if (pthread_create(&th, NULL, signaller, &x) == 0) {
        double end = now_s() + 10;
        while (!x.stop && now_s() < end) rl_run_in_mode("X", 0.05, false);
        x.stop = 1;
        pthread_join(th, NULL);
    }
    FCHECK(c, x.performed >= 50, "cross-thread signals performed: %d, expected 50", (int)x.performed);
    /* a run's timeout, with a timer far away */
    double t0 = now_s();
    rc = rl_run_in_mode("X", 0.05, false);
    double took = now_s() - t0;
    FCHECK(c, rc == RL_RUN_TIMED_OUT && took >= 0.049 && took < 0.5,
           "a 0.05 s run returned %d after %.3f s, expected RL_RUN_TIMED_OUT after 0.05 to 0.5 s", rc, took);
    unfill(&f);
    rl_source_invalidate(x.src);
    rl_release(x.src);
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

/* ---- rlimit kernel faults ---- */

typedef struct {
    fcase *c;
    long k;
    int mode; /* 1: point k fails, 2: every point from k on */
    bool main_loop;
    long points;   /* out: points of a loop creation, unarmed */
    int err;       /* out: errno of a failure, 0 when the creation succeeded */
} kf_t;

static void *kernel_fault_thread(void *arg) {
    kf_t *a = arg;
    int before = count_open_fds();
    if (a->mode == 0) rl_fault_arm(-1, 0);
    else rl_fault_arm(a->k, a->mode == 1 ? 1 : -1);
    errno = 0;
    rl_loop_t *loop = a->main_loop ? rl_loop_get_main() : rl_loop_get_current();
    int e = errno;
    long points = rl_fault_points();
    int after_get = count_open_fds();
    /* With the faults still armed: from point k on, the run fails as the creation did; with
     * only point k, the run makes the loop. */
    int rc = loop || a->main_loop ? 0 : rl_run_in_mode(RL_DEFAULT_MODE, 0, false);
    rl_fault_arm(-1, 0);
    a->points = points;
    a->err = loop ? 0 : e;
    if (a->mode == 0) return NULL;
    if (!loop) {
        FCHECK(a->c, e == ENOMEM || e == EMFILE,
               "%s, point %ld failing (%s): NULL with errno %d (%s), expected ENOMEM or EMFILE",
               a->main_loop ? "rl_loop_get_main" : "rl_loop_get_current", a->k, a->mode == 1 ? "single" : "persistent",
               e, strerror(e));
        if (a->mode == 2 && !a->main_loop)
            FCHECK(a->c, rc < 0 && (-rc == ENOMEM || -rc == EMFILE),
                   "point %ld on failing: rl_run_in_mode with no loop returned %d, expected -ENOMEM or -EMFILE",
                   a->k, rc);
        else if (!a->main_loop)
            FCHECK(a->c, rc == RL_RUN_FINISHED,
                   "point %ld failed, then rl_run_in_mode returned %d, expected RL_RUN_FINISHED", a->k, rc);
        FCHECK(a->c, after_get == before,
               "point %ld (%s) failing: %d fds leaked by the failed loop creation, expected none", a->k,
               a->mode == 1 ? "single" : "persistent", after_get - before);
        if (a->mode == 2 && !a->main_loop) {
            int after_run = count_open_fds();
            FCHECK(a->c, after_run == before,
                   "points from %ld on failing: %d fds leaked by the failed run, expected none", a->k,
                   after_run - before);
        }
    }
    if (!a->main_loop) check_loop_works(a->c, "after a failed loop creation", NULL);
    return NULL;
}

static void run_kf(kf_t *a) {
    pthread_t th;
    if (pthread_create(&th, NULL, kernel_fault_thread, a)) abort();
    if (!join_within(th, 5.0)) {
        FCHECK(a->c, false, "point %ld: the thread did not end within 5 s (hung)", a->k);
        fcase_report(a->c);
        _exit(0);
    }
}

/* ---- rlimit epoll refuses ---- */

static atomic_int refused_releases;
static void refused_release(const void *info) { (void)info, atomic_fetch_add(&refused_releases, 1); }
static void refused_cb(rl_source_t *s, int fd, unsigned ev, void *info) { (void)s, (void)fd, (void)ev, (void)info; }

static void refuse(fcase *c, rl_loop_t *loop, int fd, int want, const char *what, bool close_first) {
    rl_context_t ctx = {NULL, NULL, refused_release};
    rl_source_t *s = rl_source_create_fd(fd, RL_FD_READABLE, 0, refused_cb, &ctx);
    FCHECK(c, s != NULL, "%s: rl_source_create_fd returned NULL (errno %d), expected a source", what, errno);
    if (!s) return;
    if (close_first) close(fd);
    int before = refused_releases;
    const char *modes[] = {"R", RL_COMMON_MODES};
    for (int m = 0; m < 2; m++) {
        for (int attempt = 0; attempt < 2; attempt++) {
            int rc = rl_loop_add_source(loop, s, modes[m]);
            FCHECK(c, rc == want, "%s: add to %s%s returned %d (%s), not %d", what, m ? "COMMON" : "R",
                   attempt ? " a second time" : "", rc, strerror(-rc), want);
            FCHECK(c, !rl_loop_contains_source(loop, s, modes[m]),
                   "%s: the failed add left the source in %s, expected in no mode", what, m ? "COMMON" : "R");
            FCHECK(c, !rl_loop_contains_source(loop, s, RL_DEFAULT_MODE),
                   "%s: the failed add left it in the default mode, expected in no mode", what);
        }
    }
    char report[512];
    int v = verify_loop(loop, report, sizeof report);
    FCHECK(c, v == 0, "%s: rl_loop_verify: %d violations (expected none): %s", what, v, report);
    rl_release(s);
    FCHECK(c, refused_releases == before + 1,
           "%s: the refused source was not destroyed when released (its context release ran %d times, "
           "expected once)", what, refused_releases - before);
}

static void *refuse_thread(void *arg) {
    fcase *c = arg;
    rl_loop_t *loop = rl_loop_get_current();
    FCHECK(c, loop != NULL, "rl_loop_get_current() returned NULL (errno %d), expected a loop", errno);
    if (!loop) return NULL;
    int file = memfd_create("faults-regular", MFD_CLOEXEC);
    if (file < 0) {
        char path[] = "/tmp/faults-XXXXXX";
        file = mkstemp(path);
        unlink(path);
    }
    refuse(c, loop, file, -EPERM, "a regular file", false);
    int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    refuse(c, loop, dir, -EPERM, "a directory", false);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
    refuse(c, loop, sv[0], -EBADF, "an fd closed before the add", true);
    close(sv[1]);
    close(file);
    close(dir);
    errno = 0;
    rl_source_t *s = rl_source_create_fd(sv[0], RL_FD_READABLE, 0, refused_cb, NULL);
    FCHECK(c, !s && errno == EBADF, "rl_source_create_fd on a closed fd: %p, errno %d, expected NULL with EBADF",
           (void *)s, errno);
    rl_release(s);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
    check_loop_works(c, "after the refused adds", sv);
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

static void on_thread(fcase *c, void *(*fn)(void *), void *arg, double limit) {
    pthread_t th;
    if (pthread_create(&th, NULL, fn, arg)) abort();
    if (!join_within(th, limit)) {
        FCHECK(c, false, "the case's thread did not end within %.0f s (hung)", limit);
        fcase_report(c);
        fr_line("case FAIL rlimit: the part stopped at a hung thread");
        _exit(0);
    }
}

void part_rlimit(void) {
    fcase c;
    fcase_init(&c, "rlimit no fd left (get_current, get_main, run: EMFILE; recovers)");
    on_thread(&c, no_fd_thread, &c, 10);
    fcase_report(&c);

    fcase_init(&c, "rlimit existing loop keeps working without new fds");
    on_thread(&c, existing_thread, &c, 15);
    fcase_report(&c);

    fcase_init(&c, "rlimit kernel faults at a thread's loop creation (ENOMEM/EMFILE, no fd leak, recovers)");
    kf_t a = {.c = &c, .mode = 0};
    run_kf(&a);
    long n = a.points;
    int emfile = 0;
    for (int mode = 1; mode <= 2; mode++)
        for (long k = 0; k < n; k++) {
            kf_t b = {.c = &c, .k = k, .mode = mode};
            run_kf(&b);
            emfile += b.err == EMFILE;
        }
    FCHECK(&c, n >= 3,
           "a loop creation passes only %ld fault points, expected at least 3 (epoll set, eventfd, timerfd)", n);
    FCHECK(&c, emfile >= 3,
           "only %d loop creations failed with EMFILE, expected at least 3 (epoll set, eventfd, timerfd)",
           emfile);
    fcase_report(&c);

    /* The main loop, made from another thread: in a process of its own, where it does not exist
     * yet (the cases above made it). */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        fcase_init(&c, "rlimit kernel faults creating the main loop from another thread");
        bool made = false;
        for (long k = 0; k < 40 && !made; k++) {
            kf_t b = {.c = &c, .k = k, .mode = 1, .main_loop = true};
            run_kf(&b);
            made = b.err == 0; /* made: it exists from now on */
        }
        FCHECK(&c, made && rl_loop_get_main() != NULL,
               "no main loop after failing each of up to 40 points in turn, expected one once the point is past them");
        fcase_report(&c);
        _exit(0);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (pid < 0)
        fr_line("case FAIL rlimit kernel faults creating the main loop: fork failed (errno %d)", errno);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fr_line("case FAIL rlimit kernel faults creating the main loop: its process ended with status 0x%x, expected "
                "exit 0", status);

    fcase_init(&c, "rlimit epoll refuses an fd (-EPERM, -EBADF; nothing left behind)");
    on_thread(&c, refuse_thread, &c, 10);
    fcase_report(&c);
}
