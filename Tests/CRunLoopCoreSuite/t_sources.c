/*
 * t_sources.c - version-0 sources (order, coalescing signals, modes, schedule/cancel, invalidate,
 * return after handled) and version-1 fd sources on pipes, socketpairs and eventfds
 * (level-triggered, never read by the loop, interest changes, two sources on one fd, hang-up,
 * the order of the ready ones in a pass and what an earlier callout of the pass does to a later
 * one), and sources shared by two loops.
 */
#include "ttrace.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEF RL_DEFAULT_MODE

/* ---- version 0 ----------------------------------------------------------------------------- */

RLT_TEST(source0_performed_in_ascending_order) {
    rl_source_t *c = tt_add_source(DEF, 3, "c");
    rl_source_t *a = tt_add_source(DEF, -1, "a");
    rl_source_t *b = tt_add_source(DEF, 2, "b");
    RLT_CHECK(a && b && c);
    rl_source_signal(c);
    rl_source_signal(b);
    rl_source_signal(a);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("a b c");
    RLT_CHECK_EQ(rl_source_get_order(a), -1);
    RLT_CHECK_EQ(rl_source_get_order(c), 3);
}

RLT_TEST(source0_signals_coalesce) {
    rl_source_t *s = tt_add_source(DEF, 0, "p");
    RLT_CHECK(s != NULL);
    RLT_CHECK(!rl_source_is_signalled(s));
    for (int i = 0; i < 100; i++) rl_source_signal(s);
    RLT_CHECK(rl_source_is_signalled(s));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("p");
    RLT_CHECK(!rl_source_is_signalled(s));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("p");
}

RLT_TEST(source0_signalled_in_a_mode_it_is_not_in_waits) {
    rl_source_t *s = tt_add_source("m2", 0, "s");
    RLT_CHECK(s != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, true), RL_RUN_TIMED_OUT);
    TT_EXPECT("");
    RLT_CHECK(rl_source_is_signalled(s));
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("s");
}

typedef struct { int n; rl_source_t *self; } resig_t;

static void resig_perform(void *info) {
    resig_t *r = info;
    tt("p%d", ++r->n);
    if (r->n < 3) rl_source_signal(r->self);
    else rl_loop_stop(rl_loop_get_current());
}

RLT_TEST(source0_signalled_again_inside_perform_runs_next_pass) {
    resig_t r = { 0, NULL };
    rl_source_context_t c = { &r, NULL, NULL, NULL, NULL, resig_perform };
    r.self = rl_source_create(0, &c);
    RLT_CHECK(r.self != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(rl_loop_get_current(), r.self, DEF), 0);
    RLT_CHECK(tt_add_observer(DEF, RL_BEFORE_TIMERS | RL_BEFORE_WAITING, 0, "") != NULL);
    rl_source_signal(r.self);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    /* each pass handled a source, so none waited */
    TT_EXPECT("T p1 T p2 T p3");
    rl_source_invalidate(r.self);
    rl_release(r.self);
}

static void sc_schedule(void *info, rl_loop_t *loop, const char *mode) {
    (void)info;
    tt("sch:%s:%s", loop == rl_loop_get_current() ? "cur" : "other", mode ? mode : "(null)");
}
static void sc_cancel(void *info, rl_loop_t *loop, const char *mode) {
    (void)info;
    tt("can:%s:%s", loop == rl_loop_get_current() ? "cur" : "other", mode ? mode : "(null)");
}

static rl_source_t *sc_source(void) {
    rl_source_context_t c = { "s", NULL, NULL, sc_schedule, sc_cancel, tt_perform_cb };
    return rl_source_create(0, &c);
}

RLT_TEST(source0_schedule_and_cancel_get_loop_and_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *s = sc_source();
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, "m2"), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), -EEXIST);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "m2"), 0);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "m2"), -ENOENT);
    TT_EXPECT("sch:cur:kCFRunLoopDefaultMode sch:cur:m2 can:cur:m2");
    RLT_CHECK(rl_loop_contains_source(loop, s, DEF));
    RLT_CHECK(!rl_loop_contains_source(loop, s, "m2"));
    rl_release(s);
}

static int count_sub(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

RLT_TEST(source0_in_common_modes_schedules_each_common_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m2"), 0);
    rl_source_t *s = sc_source();
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(count_sub(tt_get(), "sch:"), 2);
    RLT_CHECK_EQ(count_sub(tt_get(), "sch:cur:kCFRunLoopDefaultMode"), 1);
    RLT_CHECK_EQ(count_sub(tt_get(), "sch:cur:m2"), 1);
    tt_reset();
    RLT_CHECK_EQ(rl_loop_add_common_mode(loop, "m3"), 0);
    TT_EXPECT("sch:cur:m3");
    tt_reset();
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, RL_COMMON_MODES), 0);
    RLT_CHECK_EQ(count_sub(tt_get(), "can:"), 3);
    RLT_CHECK_EQ(count_sub(tt_get(), "can:cur:kCFRunLoopDefaultMode"), 1);
    RLT_CHECK_EQ(count_sub(tt_get(), "can:cur:m2"), 1);
    RLT_CHECK_EQ(count_sub(tt_get(), "can:cur:m3"), 1);
    RLT_CHECK(!rl_loop_contains_source(loop, s, "m3"));
    rl_release(s);
}

RLT_TEST(source0_invalidate_cancels_every_mode) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *s = sc_source();
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, "m2"), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, "m3"), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    tt_reset();
    rl_source_invalidate(s);
    RLT_CHECK_EQ(count_sub(tt_get(), "can:"), 3);
    RLT_CHECK_EQ(count_sub(tt_get(), "can:cur:kCFRunLoopDefaultMode"), 1);
    RLT_CHECK_EQ(count_sub(tt_get(), "can:cur:m2"), 1);
    RLT_CHECK_EQ(count_sub(tt_get(), "can:cur:m3"), 1);
    RLT_CHECK(!rl_source_is_valid(s));
    RLT_CHECK(!rl_loop_contains_source(loop, s, DEF));
    RLT_CHECK(!rl_loop_contains_source(loop, s, "m2"));
    RLT_CHECK(!rl_loop_contains_source(loop, s, "m3"));
    tt_reset();
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    rl_source_invalidate(s); /* again: nothing more */
    TT_EXPECT("");
    rl_release(s);
}

static void invalidate_other_perform(void *info) {
    tt("A");
    rl_source_invalidate((rl_source_t *)info);
}

RLT_TEST(source0_invalidate_other_inside_perform) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *b = tt_add_source(DEF, 2, "B");
    RLT_CHECK(b != NULL);
    rl_retain(b);
    rl_source_context_t c = { b, NULL, NULL, NULL, NULL, invalidate_other_perform };
    rl_source_t *a = rl_source_create(1, &c);
    RLT_CHECK(a != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, a, DEF), 0);
    rl_source_signal(b);
    rl_source_signal(a);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A");
    RLT_CHECK(!rl_source_is_valid(b));
    rl_source_invalidate(a);
    rl_release(a);
    rl_release(b);
}

static void remove_self_perform(void *info) {
    tt("R");
    rl_loop_remove_source(rl_loop_get_current(), *(rl_source_t **)info, RL_DEFAULT_MODE);
}

RLT_TEST(source0_remove_self_inside_perform) {
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_t *self = NULL;
    rl_source_context_t c = { &self, NULL, NULL, NULL, NULL, remove_self_perform };
    self = rl_source_create(0, &c);
    RLT_CHECK(self != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, self, DEF), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    rl_source_signal(self);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("R");
    RLT_CHECK(rl_source_is_valid(self));
    RLT_CHECK(!rl_loop_contains_source(loop, self, DEF));
    rl_source_signal(self);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("R");
    /* the signal is kept: performed once it is in the mode again */
    RLT_CHECK_EQ(rl_loop_add_source(loop, self, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("R R");
    rl_source_invalidate(self);
    rl_release(self);
}

RLT_TEST(source0_return_after_first_handled_source) {
    rl_source_t *a = tt_add_source(DEF, 1, "a");
    rl_source_t *b = tt_add_source(DEF, 2, "b");
    RLT_CHECK(a && b);
    rl_source_signal(a);
    rl_source_signal(b);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("a");
    RLT_CHECK(rl_source_is_signalled(b));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("a b");
}

RLT_TEST(source0_context_retain_release_balanced) {
    tt_count_t cnt;
    atomic_init(&cnt.retains, 0);
    atomic_init(&cnt.releases, 0);
    rl_loop_t *loop = rl_loop_get_current();
    rl_source_context_t c = { &cnt, tt_count_retain, tt_count_release, NULL, NULL, NULL };
    rl_source_t *s = rl_source_create(0, &c);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(atomic_load(&cnt.retains), 1);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, "m2"), 0);
    rl_release(s);
    RLT_CHECK_EQ(atomic_load(&cnt.releases), 0);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, DEF), 0);
    RLT_CHECK_EQ(atomic_load(&cnt.releases), 0);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "m2"), 0);
    RLT_CHECK_EQ(atomic_load(&cnt.releases), 1);
    RLT_CHECK_EQ(atomic_load(&cnt.retains), 1);
}

/* ---- version 1 ----------------------------------------------------------------------------- */

typedef struct {
    const char *label;
    int calls, last_fd, avail[8];
    unsigned events[8];
    int stop_at;        /* stop the loop at this call */
    bool read_at_stop;  /* and drain one byte then */
    bool remove_self;   /* remove the source from the default mode at the first call */
    bool invalidate_self;
} fdp_t;

static void fd_cb(rl_source_t *s, int fd, unsigned ev, void *info) {
    fdp_t *p = info;
    int k = p->calls++;
    p->last_fd = fd;
    int avail = -1;
    if (ioctl(fd, FIONREAD, &avail) != 0) avail = -1;
    if (k < 8) { p->avail[k] = avail; p->events[k] = ev; }
    tt("%s%s%s%s", p->label, (ev & RL_FD_READABLE) ? "r" : "", (ev & RL_FD_WRITABLE) ? "w" : "",
       (ev & RL_FD_ERROR) ? "e" : "");
    if (p->remove_self) rl_loop_remove_source(rl_loop_get_current(), s, RL_DEFAULT_MODE);
    if (p->invalidate_self) rl_source_invalidate(s);
    if (p->stop_at && p->calls == p->stop_at) {
        if (p->read_at_stop) { char c; if (read(fd, &c, 1) != 1) tt("readfail"); }
        rl_loop_stop(rl_loop_get_current());
    }
}

static rl_source_t *fd_source(int fd, unsigned events, long order, fdp_t *p) {
    rl_context_t c = { p, NULL, NULL };
    rl_source_t *s = rl_source_create_fd(fd, events, order, fd_cb, &c);
    if (s && rl_loop_add_source(rl_loop_get_current(), s, RL_DEFAULT_MODE) != 0) {
        rl_release(s);
        return NULL;
    }
    return s;
}

RLT_TEST(fd_readable_pipe_data_is_not_consumed) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    fdp_t f = { .label = "R" };
    rl_source_t *s = fd_source(p[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_source_get_fd(s), p[0]);
    RLT_CHECK_EQ(rl_source_get_fd_events(s), RL_FD_READABLE);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT); /* nothing to read yet */
    TT_EXPECT("");
    RLT_CHECK(write(p[1], "xy", 2) == 2);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("Rr");
    RLT_CHECK_EQ(f.last_fd, p[0]);
    RLT_CHECK_EQ(f.avail[0], 2);
    char buf[4] = { 0 };
    RLT_CHECK(read(p[0], buf, sizeof buf) == 2);
    RLT_CHECK(memcmp(buf, "xy", 2) == 0);
    rl_source_invalidate(s);
    rl_release(s);
    close(p[0]);
    close(p[1]);
}

RLT_TEST(fd_level_triggered_called_each_pass_while_readable) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    fdp_t f = { .label = "R", .stop_at = 3, .read_at_stop = true };
    rl_source_t *s = fd_source(p[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK(write(p[1], "z", 1) == 1);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, false), RL_RUN_STOPPED);
    RLT_CHECK_EQ(f.calls, 3);
    RLT_CHECK_EQ(f.avail[0], 1);
    RLT_CHECK_EQ(f.avail[1], 1);
    RLT_CHECK_EQ(f.avail[2], 1);
    /* drained: no more calls */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.1, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(f.calls, 3);
    TT_EXPECT("Rr Rr Rr");
    rl_source_invalidate(s);
    rl_release(s);
    close(p[0]);
    close(p[1]);
}

RLT_TEST(fd_writable_socketpair) {
    int sv[2];
    RLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fdp_t f = { .label = "W" };
    rl_source_t *s = fd_source(sv[0], RL_FD_WRITABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("Ww");
    RLT_CHECK_EQ(f.events[0], RL_FD_WRITABLE);
    rl_source_invalidate(s);
    rl_release(s);
    close(sv[0]);
    close(sv[1]);
}

RLT_TEST(fd_set_fd_events_changes_interest) {
    int sv[2];
    RLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fdp_t f = { .label = "F" };
    rl_source_t *s = fd_source(sv[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("");
    RLT_CHECK_EQ(rl_source_set_fd_events(s, RL_FD_WRITABLE), 0);
    RLT_CHECK_EQ(rl_source_get_fd_events(s), RL_FD_WRITABLE);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("Fw");
    RLT_CHECK_EQ(rl_source_set_fd_events(s, RL_FD_READABLE), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("Fw");
    RLT_CHECK(write(sv[1], "q", 1) == 1);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("Fw Fr");
    RLT_CHECK_EQ(rl_source_set_fd_events(s, RL_FD_READABLE | RL_FD_WRITABLE), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("Fw Fr Frw");
    rl_source_invalidate(s);
    rl_release(s);
    close(sv[0]);
    close(sv[1]);
}

RLT_TEST(fd_remove_self_inside_callout) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    rl_loop_t *loop = rl_loop_get_current();
    fdp_t f = { .label = "R", .remove_self = true };
    rl_source_t *s = fd_source(p[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(write(p[1], "z", 1) == 1);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.2, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("Rr");
    RLT_CHECK(!rl_loop_contains_source(loop, s, DEF));
    RLT_CHECK(rl_source_is_valid(s));
    int avail = 0;
    RLT_CHECK(ioctl(p[0], FIONREAD, &avail) == 0);
    RLT_CHECK_EQ(avail, 1);
    rl_source_invalidate(s);
    rl_release(s);
    close(p[0]);
    close(p[1]);
}

RLT_TEST(fd_invalidate_self_inside_callout) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    fdp_t f = { .label = "R", .invalidate_self = true };
    rl_source_t *s = fd_source(p[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(write(p[1], "z", 1) == 1);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.2, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("Rr");
    RLT_CHECK(!rl_source_is_valid(s));
    rl_release(s);
    close(p[0]);
    close(p[1]);
}

RLT_TEST(fd_two_sources_on_one_fd) {
    int sv[2];
    RLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fdp_t fr = { .label = "R" }, fw = { .label = "W" };
    rl_source_t *r = fd_source(sv[0], RL_FD_READABLE, 1, &fr);
    rl_source_t *w = fd_source(sv[0], RL_FD_WRITABLE, 2, &fw);
    RLT_CHECK(r && w);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("Ww");
    RLT_CHECK(write(sv[1], "d", 1) == 1);
    tt_reset();
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(fr.calls, 1);
    RLT_CHECK_EQ(fw.calls, 2);
    RLT_CHECK_EQ(fr.events[0], RL_FD_READABLE);
    RLT_CHECK_EQ(fw.events[1], RL_FD_WRITABLE);
    /* removing one leaves the other working */
    rl_source_invalidate(w);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(fr.calls, 2);
    RLT_CHECK_EQ(fw.calls, 2);
    rl_source_invalidate(r);
    rl_release(r);
    rl_release(w);
    close(sv[0]);
    close(sv[1]);
}

typedef struct { rl_loop_t *loop; int fd; } writer_t;

static void *write_when_sleeping(void *arg) {
    writer_t *w = arg;
    if (tt_wait_sleeping(w->loop, 5.0)) {
        tt_sleep(0.02);
        if (write(w->fd, "w", 1) != 1) abort();
    }
    return NULL;
}

RLT_TEST(fd_source_wakes_a_sleeping_loop) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    fdp_t f = { .label = "R" };
    rl_source_t *s = fd_source(p[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    writer_t w = { rl_loop_get_current(), p[1] };
    pthread_t th = tt_spawn(write_when_sleeping, &w);
    double t0 = rl_time_now();
    int r = rl_run_in_mode(DEF, 20.0, true);
    double el = rl_time_now() - t0;
    tt_join(th);
    RLT_CHECK_EQ(r, RL_RUN_HANDLED_SOURCE);
    RLT_CHECK(el < 8.0);
    TT_EXPECT("Rr");
    rl_source_invalidate(s);
    rl_release(s);
    close(p[0]);
    close(p[1]);
}

RLT_TEST(fd_hangup_reports_error) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    fdp_t f = { .label = "H", .invalidate_self = true };
    rl_source_t *s = fd_source(p[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    close(p[1]);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(f.calls, 1);
    RLT_CHECK(f.events[0] & RL_FD_ERROR);
    rl_release(s);
    close(p[0]);
}

RLT_TEST(fd_shutdown_socket_reports_error) {
    int sv[2];
    RLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fdp_t f = { .label = "H", .invalidate_self = true };
    /* interest READABLE but nothing to read: only the hang-up can make it ready */
    rl_source_t *s = fd_source(sv[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(f.calls, 0);
    RLT_CHECK(shutdown(sv[0], SHUT_RDWR) == 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(f.calls, 1);
    RLT_CHECK(f.events[0] & RL_FD_ERROR);
    rl_release(s);
    close(sv[0]);
    close(sv[1]);
}

RLT_TEST(fd_eventfd_readable_and_not_consumed) {
    int efd = eventfd(0, EFD_NONBLOCK);
    RLT_CHECK(efd >= 0);
    fdp_t f = { .label = "E" };
    rl_source_t *s = fd_source(efd, RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("");
    unsigned long long v = 5;
    RLT_CHECK(write(efd, &v, sizeof v) == (ssize_t)sizeof v);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("Er Er");
    v = 0;
    RLT_CHECK(read(efd, &v, sizeof v) == (ssize_t)sizeof v);
    RLT_CHECK_EQ(v, 5);
    rl_source_invalidate(s);
    rl_release(s);
    close(efd);
}

RLT_TEST(fd_source_getters_and_version0_values) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    fdp_t f = { .label = "G" };
    rl_context_t c = { &f, NULL, NULL };
    rl_source_t *s = rl_source_create_fd(p[1], RL_FD_WRITABLE, 7, fd_cb, &c);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_source_get_fd(s), p[1]);
    RLT_CHECK_EQ(rl_source_get_fd_events(s), RL_FD_WRITABLE);
    RLT_CHECK_EQ(rl_source_get_order(s), 7);
    RLT_CHECK(rl_source_is_valid(s));
    rl_source_context_t c0 = { NULL, NULL, NULL, NULL, NULL, NULL };
    rl_source_t *v0 = rl_source_create(4, &c0);
    RLT_CHECK(v0 != NULL);
    RLT_CHECK_EQ(rl_source_get_fd(v0), -1);
    RLT_CHECK_EQ(rl_source_get_fd_events(v0), 0);
    RLT_CHECK_EQ(rl_source_get_order(v0), 4);
    rl_release(s);
    rl_release(v0);
    close(p[0]);
    close(p[1]);
}

RLT_TEST(fd_source_in_default_and_other_mode) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    rl_loop_t *loop = rl_loop_get_current();
    fdp_t f = { .label = "R" };
    rl_source_t *s = fd_source(p[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, "m2"), 0);
    RLT_CHECK(write(p[1], "z", 1) == 1);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 10.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, DEF), 0);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 10.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.05, true), RL_RUN_FINISHED);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "m2"), 0);
    RLT_CHECK(tt_keepalive("m2") != NULL);
    RLT_CHECK_EQ(rl_run_in_mode("m2", 0.05, true), RL_RUN_TIMED_OUT);
    TT_EXPECT("Rr Rr");
    rl_release(s);
    close(p[0]);
    close(p[1]);
}

/* ---- two loops ----------------------------------------------------------------------------- */

typedef struct {
    rl_loop_t *a;
    rl_source_t *src;
    atomic_int in_a, in_b, schedules, cancels_b;
    int run_result;
} shared_t;

static void shared_fd_cb(rl_source_t *s, int fd, unsigned ev, void *info) {
    (void)s; (void)fd; (void)ev;
    shared_t *sh = info;
    if (rl_loop_get_current() == sh->a) atomic_fetch_add(&sh->in_a, 1);
    else atomic_fetch_add(&sh->in_b, 1);
}

static void *run_shared_in_b(void *arg) {
    shared_t *sh = arg;
    rl_loop_t *b = rl_loop_get_current();
    if (rl_loop_add_source(b, sh->src, RL_DEFAULT_MODE) != 0) { sh->run_result = -1; return NULL; }
    sh->run_result = rl_run_in_mode(RL_DEFAULT_MODE, 10.0, true);
    return NULL;
}

RLT_TEST(fd_source_in_two_loops) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    shared_t sh;
    memset(&sh, 0, sizeof sh);
    sh.a = rl_loop_get_current();
    rl_context_t c = { &sh, NULL, NULL };
    sh.src = rl_source_create_fd(p[0], RL_FD_READABLE, 0, shared_fd_cb, &c);
    RLT_CHECK(sh.src != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(sh.a, sh.src, DEF), 0);
    RLT_CHECK(write(p[1], "z", 1) == 1);
    tt_join(tt_spawn(run_shared_in_b, &sh));
    RLT_CHECK_EQ(sh.run_result, RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&sh.in_b), 1);
    RLT_CHECK_EQ(atomic_load(&sh.in_a), 0);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    RLT_CHECK_EQ(atomic_load(&sh.in_a), 1);
    RLT_CHECK_EQ(atomic_load(&sh.in_b), 1);
    rl_source_invalidate(sh.src);
    rl_release(sh.src);
    close(p[0]);
    close(p[1]);
}

static void shared_schedule(void *info, rl_loop_t *loop, const char *mode) {
    (void)loop; (void)mode;
    atomic_fetch_add(&((shared_t *)info)->schedules, 1);
}
static void shared_cancel(void *info, rl_loop_t *loop, const char *mode) {
    (void)mode;
    shared_t *sh = info;
    if (loop != sh->a) atomic_fetch_add(&sh->cancels_b, 1);
}
static void shared_perform(void *info) {
    shared_t *sh = info;
    if (rl_loop_get_current() == sh->a) atomic_fetch_add(&sh->in_a, 1);
    else atomic_fetch_add(&sh->in_b, 1);
}

static void *poll_shared_in_b(void *arg) {
    shared_t *sh = arg;
    rl_loop_t *b = rl_loop_get_current();
    if (rl_loop_add_source(b, sh->src, RL_DEFAULT_MODE) != 0) { sh->run_result = -1; return NULL; }
    sh->run_result = rl_run_in_mode(RL_DEFAULT_MODE, 0, false);
    return NULL; /* the loop's teardown cancels the source in b */
}

RLT_TEST(source0_in_two_loops_performed_once) {
    shared_t sh;
    memset(&sh, 0, sizeof sh);
    sh.a = rl_loop_get_current();
    rl_source_context_t c = { &sh, NULL, NULL, shared_schedule, shared_cancel, shared_perform };
    sh.src = rl_source_create(0, &c);
    RLT_CHECK(sh.src != NULL);
    RLT_CHECK_EQ(rl_loop_add_source(sh.a, sh.src, DEF), 0);
    rl_source_signal(sh.src);
    tt_join(tt_spawn(poll_shared_in_b, &sh));
    RLT_CHECK_EQ(sh.run_result, RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&sh.schedules), 2);
    RLT_CHECK_EQ(atomic_load(&sh.in_b), 1);
    RLT_CHECK_EQ(atomic_load(&sh.cancels_b), 1);
    RLT_CHECK(rl_loop_contains_source(sh.a, sh.src, DEF));
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&sh.in_a), 0);
    rl_source_signal(sh.src);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(atomic_load(&sh.in_a), 1);
    RLT_CHECK_EQ(atomic_load(&sh.in_b), 1);
    rl_source_invalidate(sh.src);
    rl_release(sh.src);
}

/* A source signalled (its link queued for the loop) and then removed and destroyed before the
 * loop's next pass is never performed; the loop frees the dead link when it meets it (ASan and
 * LeakSanitizer check the memory side in the sanitizer runs). */
static void counting_perform(void *info) { ++*(int *)info; }

RLT_TEST(source_removed_and_destroyed_while_queued_is_never_performed) {
    rl_loop_t *loop = rl_loop_get_current();
    static _Thread_local int performed;
    performed = 0;
    rl_source_context_t c = { &performed, NULL, NULL, NULL, NULL, counting_perform };
    rl_source_t *s = rl_source_create(0, &c), *other = rl_source_create(1, &c);
    RLT_CHECK(s && other);
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, other, DEF), 0);
    rl_source_signal(s);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, DEF), 0);
    rl_release(s); /* destroyed now: only its dead link remains queued */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(performed, 0);
    rl_source_signal(other); /* the queue still works after the dead link */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(performed, 1);
    rl_release(other);
}

/* A ready fd whose only source is in another mode must not spin a run of this mode (its
 * registration is narrowed while this mode runs), and is served again in its own mode. */
RLT_TEST(fd_ready_in_another_mode_does_not_spin_the_loop) {
    int p[2];
    RLT_CHECK(pipe(p) == 0);
    rl_loop_t *loop = rl_loop_get_current();
    fdp_t f = { .label = "R" };
    rl_source_t *s = fd_source(p[0], RL_FD_READABLE, 0, &f);
    RLT_CHECK(s != NULL);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, DEF), 0); /* fd_source adds it there */
    RLT_CHECK_EQ(rl_loop_add_source(loop, s, "other"), 0);
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK(write(p[1], "z", 1) == 1);
    rl_loop_stats_t a, b;
    rl_loop_get_stats(loop, &a);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.3, false), RL_RUN_TIMED_OUT);
    rl_loop_get_stats(loop, &b);
    RLT_CHECK(b.passes - a.passes < 20); /* a spinning loop makes tens of thousands */
    RLT_CHECK_EQ(rl_run_in_mode("other", 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("Rr");
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s, "other"), 0);
    rl_release(s);
    close(p[0]);
    close(p[1]);
}

/* Same with a writer in another mode on the fd of a reader in this mode: the always-writable
 * socket must not spin the loop, and the reader still works. */
RLT_TEST(fd_writer_in_another_mode_does_not_spin_the_reader_s_mode) {
    int sv[2];
    RLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    rl_loop_t *loop = rl_loop_get_current();
    fdp_t fr = { .label = "R" }, fw = { .label = "W" };
    rl_source_t *r = fd_source(sv[0], RL_FD_READABLE, 0, &fr), *w = fd_source(sv[0], RL_FD_WRITABLE, 0, &fw);
    RLT_CHECK(r && w); /* fd_source adds both to the default mode */
    RLT_CHECK_EQ(rl_loop_remove_source(loop, w, DEF), 0);
    RLT_CHECK_EQ(rl_loop_add_source(loop, w, "other"), 0);
    rl_loop_stats_t a, b;
    rl_loop_get_stats(loop, &a);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0.3, false), RL_RUN_TIMED_OUT);
    rl_loop_get_stats(loop, &b);
    RLT_CHECK(b.passes - a.passes < 20);
    RLT_CHECK(write(sv[1], "z", 1) == 1);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 10.0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("Rr");
    RLT_CHECK_EQ(rl_loop_remove_source(loop, r, DEF), 0);
    RLT_CHECK_EQ(rl_loop_remove_source(loop, w, "other"), 0);
    rl_release(r);
    rl_release(w);
    close(sv[0]);
    close(sv[1]);
}

/* ---- ready fd sources of one pass: their order, and what an earlier callout does to a later
 * one (each is called only if it is still valid, in the mode, and interested) ----------------- */

enum fdx_act { FDX_NONE, FDX_REMOVE, FDX_INVALIDATE, FDX_NARROW, FDX_DRAIN };

typedef struct {
    const char *label;
    int calls;
    enum fdx_act act;   /* done at its first call */
    rl_source_t *other; /* to the other source (FDX_DRAIN: to its own fd) */
} fdx_t;

static void fdx_cb(rl_source_t *s, int fd, unsigned ev, void *info) {
    (void)s, (void)ev;
    fdx_t *x = info;
    tt("%s", x->label);
    if (x->calls++) return;
    char c;
    switch (x->act) {
    case FDX_NONE: break;
    case FDX_REMOVE: rl_loop_remove_source(rl_loop_get_current(), x->other, DEF); break;
    case FDX_INVALIDATE: rl_source_invalidate(x->other); break;
    case FDX_NARROW: rl_source_set_fd_events(x->other, RL_FD_WRITABLE); break; /* a pipe's read end */
    case FDX_DRAIN: if (read(fd, &c, 1) != 1) tt("readfail"); break;
    }
}

static rl_source_t *fdx_source(int fd, unsigned events, long order, fdx_t *x) {
    rl_context_t c = { x, NULL, NULL };
    rl_source_t *s = rl_source_create_fd(fd, events, order, fdx_cb, &c);
    if (s && rl_loop_add_source(rl_loop_get_current(), s, DEF) != 0) {
        rl_release(s);
        return NULL;
    }
    return s;
}

/* A (order 0) and B (order 1) on two readable pipes; A does act to B in the pass that finds both
 * ready; then the trace of that pass and where B stands are checked. */
static void earlier_callout_case(enum fdx_act act, const char *expected, bool b_in_mode_after, bool b_valid_after) {
    int a[2], b[2];
    RLT_CHECK(pipe(a) == 0 && pipe(b) == 0);
    RLT_CHECK(write(a[1], "a", 1) == 1 && write(b[1], "b", 1) == 1);
    rl_loop_t *loop = rl_loop_get_current();
    fdx_t xa = { .label = "A", .act = act }, xb = { .label = "B" };
    rl_source_t *sb = fdx_source(b[0], RL_FD_READABLE, 1, &xb);
    rl_source_t *sa = fdx_source(a[0], RL_FD_READABLE, 0, &xa);
    RLT_CHECK(sa && sb);
    xa.other = sb;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT(expected);
    RLT_CHECK_EQ(rl_loop_contains_source(loop, sb, DEF), b_in_mode_after);
    RLT_CHECK_EQ(rl_source_is_valid(sb), b_valid_after);
    RLT_CHECK_EQ(xb.calls, 0);
    rl_source_invalidate(sa);
    rl_source_invalidate(sb);
    rl_release(sa);
    rl_release(sb);
    for (int i = 0; i < 2; i++) close(a[i]), close(b[i]);
}

RLT_TEST(fd_ready_source_removed_by_an_earlier_callout_of_the_pass_is_not_called) {
    earlier_callout_case(FDX_REMOVE, "A", false, true);
}

RLT_TEST(fd_ready_source_invalidated_by_an_earlier_callout_of_the_pass_is_not_called) {
    earlier_callout_case(FDX_INVALIDATE, "A", false, false);
}

RLT_TEST(fd_ready_source_narrowed_by_an_earlier_callout_of_the_pass_is_not_called) {
    earlier_callout_case(FDX_NARROW, "A", true, true);
}

/* Removed from its mode by an earlier callout while it stays in another: still not called. */
RLT_TEST(fd_ready_source_removed_from_the_running_mode_only_is_not_called) {
    int a[2], b[2];
    RLT_CHECK(pipe(a) == 0 && pipe(b) == 0);
    RLT_CHECK(write(a[1], "a", 1) == 1 && write(b[1], "b", 1) == 1);
    rl_loop_t *loop = rl_loop_get_current();
    fdx_t xa = { .label = "A", .act = FDX_REMOVE }, xb = { .label = "B" };
    rl_source_t *sa = fdx_source(a[0], RL_FD_READABLE, 0, &xa), *sb = fdx_source(b[0], RL_FD_READABLE, 1, &xb);
    RLT_CHECK(sa && sb);
    RLT_CHECK_EQ(rl_loop_add_source(loop, sb, "other"), 0);
    xa.other = sb;
    RLT_CHECK(tt_keepalive(DEF) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A");
    RLT_CHECK_EQ(rl_run_in_mode("other", 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("A B");
    rl_source_invalidate(sa);
    rl_source_invalidate(sb);
    rl_release(sa);
    rl_release(sb);
    for (int i = 0; i < 2; i++) close(a[i]), close(b[i]);
}

RLT_TEST(fd_ready_sources_called_in_ascending_order_whatever_order_they_were_added_in) {
    int p[3][2];
    fdx_t x[3] = { { .label = "2" }, { .label = "0" }, { .label = "1" } };
    long order[3] = { 2, 0, 1 };
    rl_source_t *s[3];
    for (int i = 0; i < 3; i++) {
        RLT_CHECK(pipe(p[i]) == 0);
        RLT_CHECK(write(p[i][1], "x", 1) == 1);
        s[i] = fdx_source(p[i][0], RL_FD_READABLE, order[i], &x[i]);
        RLT_CHECK(s[i] != NULL);
    }
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("0 1 2");
    for (int i = 0; i < 3; i++) {
        rl_source_invalidate(s[i]);
        rl_release(s[i]);
        close(p[i][0]);
        close(p[i][1]);
    }
}

/* Sources of one fd with equal orders go in the order they were added, also after one of them
 * left (the others keep their places). */
RLT_TEST(fd_equal_order_sources_of_one_fd_called_in_the_order_added) {
    int sv[2];
    RLT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    rl_loop_t *loop = rl_loop_get_current();
    fdx_t x[4] = { { .label = "1" }, { .label = "2" }, { .label = "3" }, { .label = "4" } };
    rl_source_t *s[4];
    for (int i = 0; i < 3; i++) RLT_CHECK((s[i] = fdx_source(sv[0], RL_FD_WRITABLE, 0, &x[i])) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("1 2 3");
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s[0], DEF), 0);
    RLT_CHECK((s[3] = fdx_source(sv[0], RL_FD_WRITABLE, 0, &x[3])) != NULL);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("1 2 3 2 3 4");
    RLT_CHECK_EQ(rl_loop_remove_source(loop, s[2], DEF), 0); /* the middle one */
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    TT_EXPECT("1 2 3 2 3 4 2 4");
    for (int i = 0; i < 4; i++) {
        rl_source_invalidate(s[i]);
        rl_release(s[i]);
    }
    close(sv[0]);
    close(sv[1]);
}

/* More ready sources than a pass keeps inline, orders mixed: every one is called once, in
 * ascending order. */
enum { MANY_FDS = 40 };
typedef struct { long order; long *seen; int *count; } many_t;

static void many_cb(rl_source_t *s, int fd, unsigned ev, void *info) {
    (void)s, (void)ev;
    many_t *m = info;
    char c;
    if (read(fd, &c, 1) != 1) tt("readfail");
    if (*m->count < MANY_FDS) m->seen[*m->count] = m->order;
    ++*m->count;
}

RLT_TEST(fd_many_ready_sources_called_once_each_in_ascending_order) {
    int p[MANY_FDS][2], count = 0;
    long seen[MANY_FDS];
    many_t m[MANY_FDS];
    rl_source_t *s[MANY_FDS];
    for (int i = 0; i < MANY_FDS; i++) {
        RLT_CHECK(pipe(p[i]) == 0);
        m[i] = (many_t){ (i * 7) % 5 - 2, seen, &count };
        rl_context_t c = { &m[i], NULL, NULL };
        s[i] = rl_source_create_fd(p[i][0], RL_FD_READABLE, m[i].order, many_cb, &c);
        RLT_CHECK(s[i] && rl_loop_add_source(rl_loop_get_current(), s[i], DEF) == 0);
        RLT_CHECK(write(p[i][1], "x", 1) == 1);
    }
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, false), RL_RUN_TIMED_OUT);
    RLT_CHECK_EQ(count, MANY_FDS);
    for (int i = 1; i < MANY_FDS && i < count; i++) RLT_CHECK(seen[i - 1] <= seen[i]);
    TT_EXPECT("");
    for (int i = 0; i < MANY_FDS; i++) {
        rl_source_invalidate(s[i]);
        rl_release(s[i]);
        close(p[i][0]);
        close(p[i][1]);
    }
}

/* A run that returns after one handled source calls the first ready fd source only; the others,
 * still ready, are called by later runs. */
RLT_TEST(fd_return_after_handled_source_calls_only_the_first_ready_one) {
    int a[2], b[2];
    RLT_CHECK(pipe(a) == 0 && pipe(b) == 0);
    RLT_CHECK(write(a[1], "a", 1) == 1 && write(b[1], "b", 1) == 1);
    fdx_t xa = { .label = "A", .act = FDX_DRAIN }, xb = { .label = "B", .act = FDX_DRAIN };
    rl_source_t *sb = fdx_source(b[0], RL_FD_READABLE, 1, &xb), *sa = fdx_source(a[0], RL_FD_READABLE, 0, &xa);
    RLT_CHECK(sa && sb);
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("A");
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, true), RL_RUN_HANDLED_SOURCE);
    TT_EXPECT("A B");
    RLT_CHECK_EQ(rl_run_in_mode(DEF, 0, true), RL_RUN_TIMED_OUT);
    TT_EXPECT("A B");
    rl_source_invalidate(sa);
    rl_source_invalidate(sb);
    rl_release(sa);
    rl_release(sb);
    for (int i = 0; i < 2; i++) close(a[i]), close(b[i]);
}
