/*
 * scenarios.c - differential conformance scenarios: the same program is built against Apple's
 * CFRunLoop (-DBACKEND_CF) and against crunloop, and run.sh diffs the two traces.
 *
 * Every scenario runs on a fresh pthread of its own (so it gets a fresh, non-main run loop) and
 * prints one line per observable event, prefixed with its name: callouts, run results, query
 * results. Lines never contain times, only order, counts and results; timings use wide margins
 * (tens of milliseconds) so that the traces are the same on a loaded machine.
 *
 *   scenarios            run every scenario, in table order
 *   scenarios NAME...    run only the named scenarios
 *   scenarios --list     print the scenario names
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "backend.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- output -------------------------------------------------------------------------------- */

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local const char *tl_scenario;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&out_mu);
    printf("%s: %s\n", tl_scenario ? tl_scenario : "?", buf);
    pthread_mutex_unlock(&out_mu);
}

static void msleep(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

static const char *res_name(int r)
{
    switch (r) {
    case 1: return "finished";
    case 2: return "stopped";
    case 3: return "timed out";
    case 4: return "handled source";
    default: return "error";
    }
}

static const char *act_name(unsigned a)
{
    switch (a) {
    case BK_ENTRY: return "entry";
    case BK_BEFORE_TIMERS: return "before-timers";
    case BK_BEFORE_SOURCES: return "before-sources";
    case BK_BEFORE_WAITING: return "before-waiting";
    case BK_AFTER_WAITING: return "after-waiting";
    case BK_EXIT: return "exit";
    default: return "unknown-activity";
    }
}

/* Short display name of a mode. */
static const char *mname(const char *m)
{
    if (!m) return "(null)";
    if (strcmp(m, BK_DEFAULT) == 0) return "default";
    return m;
}

/* Run the current loop and print the result. */
static int run(const char *mode, double seconds, bool return_after)
{
    int r = bk_run(mode, seconds, return_after);
    say("run %s %g%s -> %d (%s)", mname(mode), seconds, return_after ? " return-after" : "", r,
        res_name(r));
    return r;
}

static void say_current_mode(bk_loop loop, const char *where)
{
    char *m = bk_copy_current_mode(loop);
    say("%s: current mode %s", where, mname(m));
    free(m);
}

/* ---- helper threads ------------------------------------------------------------------------ */

struct helper {
    pthread_t thread;
    void (*fn)(void *arg);
    void *arg;
    const char *scenario;
};

static void *helper_main(void *p)
{
    struct helper *h = p;
    tl_scenario = h->scenario;
    h->fn(h->arg);
    return NULL;
}

static struct helper *spawn(void (*fn)(void *), void *arg)
{
    struct helper *h = calloc(1, sizeof *h);
    if (!h) abort();
    h->fn = fn;
    h->arg = arg;
    h->scenario = tl_scenario;
    if (pthread_create(&h->thread, NULL, helper_main, h) != 0) abort();
    return h;
}

static void join(struct helper *h)
{
    if (!h) return;
    pthread_join(h->thread, NULL);
    free(h);
}

/* ---- common callbacks ---------------------------------------------------------------------- */

/* info: a label */
static void obs_print(bk_observer o, unsigned act, void *info)
{
    (void)o;
    say("obs %s %s", (const char *)info, act_name(act));
}

static void timer_print(bk_timer t, void *info)
{
    (void)t;
    say("timer %s", (const char *)info);
}

static void timer_count(bk_timer t, void *info)
{
    (void)t;
    ++*(int *)info;
}

static void src_print(void *info) { say("src %s perform", (const char *)info); }

static void block_print(void *info) { say("block %s", (const char *)info); }

/* A version-0 source nobody signals: keeps a mode from being empty. */
static bk_source keeper(bk_loop loop, const char *mode)
{
    bk_source s = bk_source_create(0, NULL, NULL, NULL, NULL);
    bk_add_source(loop, s, mode);
    return s;
}

static void drop_source(bk_source s)
{
    if (!s) return;
    bk_source_invalidate(s);
    bk_release(s);
}

static void drop_timer(bk_timer t)
{
    if (!t) return;
    bk_timer_invalidate(t);
    bk_release(t);
}

static void drop_observer(bk_observer o)
{
    if (!o) return;
    bk_observer_invalidate(o);
    bk_release(o);
}

static bk_timer add_timer(bk_loop loop, const char *mode, double delta, double interval,
                          long order, bk_timer_fn fn, void *info)
{
    bk_timer t = bk_timer_create(bk_now() + delta, interval, order, fn, info);
    bk_add_timer(loop, t, mode);
    return t;
}

static bk_observer add_observer(bk_loop loop, const char *mode, unsigned acts, bool repeats,
                                long order, bk_observer_fn fn, void *info)
{
    bk_observer o = bk_observer_create(acts, repeats, order, fn, info);
    bk_add_observer(loop, o, mode);
    return o;
}

/* Collects schedule/cancel callouts and prints them sorted (CF's order over several modes is
 * a hash order). */
struct evlog {
    char lines[16][96];
    int n;
};
static struct evlog g_ev;
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;

static void ev_add(const char *what, const char *mode)
{
    pthread_mutex_lock(&ev_mu);
    if (g_ev.n < 16) snprintf(g_ev.lines[g_ev.n++], 96, "%s %s", what, mname(mode));
    pthread_mutex_unlock(&ev_mu);
}

static int ev_cmp(const void *a, const void *b) { return strcmp(a, b); }

static void ev_flush(const char *after)
{
    pthread_mutex_lock(&ev_mu);
    qsort(g_ev.lines, (size_t)g_ev.n, sizeof g_ev.lines[0], ev_cmp);
    if (g_ev.n == 0) say("%s: no callout", after);
    for (int i = 0; i < g_ev.n; i++) say("%s: %s", after, g_ev.lines[i]);
    g_ev.n = 0;
    pthread_mutex_unlock(&ev_mu);
}

static void src_schedule_log(void *info, const char *mode) { (void)info; ev_add("schedule", mode); }
static void src_cancel_log(void *info, const char *mode) { (void)info; ev_add("cancel", mode); }

/* ================================ scenarios ================================================= */

/* A mode with an observer but no source or timer: FINISHED at once, no Entry/Exit. */
static void sc_empty_mode(void)
{
    bk_loop loop = bk_current();
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_print, "O");
    bk_add_observer(loop, o, "ModeB");
    run(BK_DEFAULT, 0.5, false);
    run("ModeB", 0.5, false);
    run("ModeNeverUsed", 0.5, false);
    run(BK_DEFAULT, 0, false);
    drop_observer(o);
}

/* Every activity around one timer firing; the mode empties when the one-shot timer is done. */
static void sc_obs_timer_sequence(void)
{
    bk_loop loop = bk_current();
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_print, "O");
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "T");
    run(BK_DEFAULT, 0.5, false);
    drop_timer(t);
    drop_observer(o);
}

/* A run that times out: the wait ends with the timeout, Exit follows After-waiting. */
static void sc_obs_timeout_sequence(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_print, "O");
    run(BK_DEFAULT, 0.1, false);
    drop_observer(o);
    drop_source(k);
}

/* Observers are called in ascending order, whatever the order they were added in. */
static void sc_obs_order(void)
{
    bk_loop loop = bk_current();
    bk_observer o30 = add_observer(loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 30, obs_print, "O30");
    bk_observer o10 = add_observer(loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 10, obs_print, "O10");
    bk_observer o20 = add_observer(loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 20, obs_print, "O20");
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "T");
    run(BK_DEFAULT, 0.5, false);
    drop_timer(t);
    drop_observer(o30);
    drop_observer(o10);
    drop_observer(o20);
}

/* Observers of equal order run in the order they were added to the mode, not created: P is made
 * before Q, Q is added first. Removing one and adding it back moves it to the end; a third
 * mode made common later gets them too. */
static void sc_obs_equal_order_by_addition(void)
{
    bk_loop loop = bk_current();
    bk_observer p = bk_observer_create(BK_ENTRY, true, 5, obs_print, "P");
    bk_observer q = bk_observer_create(BK_ENTRY, true, 5, obs_print, "Q");
    bk_observer r = bk_observer_create(BK_ENTRY, true, 5, obs_print, "R");
    bk_observer lower = bk_observer_create(BK_ENTRY, true, 1, obs_print, "L");
    bk_add_observer(loop, q, BK_DEFAULT);
    bk_add_observer(loop, r, BK_DEFAULT);
    bk_add_observer(loop, p, BK_DEFAULT);
    bk_add_observer(loop, lower, BK_DEFAULT);
    bk_source k = keeper(loop, BK_DEFAULT);
    say("added Q R P, then L (order 1)");
    run(BK_DEFAULT, 0, false);
    bk_remove_observer(loop, q, BK_DEFAULT);
    bk_add_observer(loop, q, BK_DEFAULT);
    say("Q removed and added back");
    run(BK_DEFAULT, 0, false);
    bk_add_observer(loop, r, "Other");
    bk_add_observer(loop, p, "Other");
    bk_source k2 = keeper(loop, "Other");
    say("in Other: R then P");
    run("Other", 0, false);
    drop_source(k);
    drop_source(k2);
    drop_observer(p);
    drop_observer(q);
    drop_observer(r);
    drop_observer(lower);
}

static void obs_count(bk_observer o, unsigned act, void *info)
{
    (void)o;
    (void)act;
    ++*(int *)info;
}

/* A non-repeating observer is called once and invalidated; a repeating one on every pass. */
static void sc_obs_nonrepeating(void)
{
    bk_loop loop = bk_current();
    int passes = 0;
    bk_observer n = add_observer(loop, BK_DEFAULT, BK_BEFORE_TIMERS, false, 0, obs_print, "N");
    bk_observer r = add_observer(loop, BK_DEFAULT, BK_BEFORE_TIMERS, true, 1, obs_count, &passes);
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "A");
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.15, 0, 0, timer_print, "B");
    run(BK_DEFAULT, 0.5, false);
    say("N valid %d, contained %d", bk_observer_is_valid(n),
        bk_contains_observer(loop, n, BK_DEFAULT));
    say("repeating observer called %d times", passes);
    drop_timer(a);
    drop_timer(b);
    drop_observer(n);
    drop_observer(r);
}

/* An observer added to the common modes is called in a mode made common later, not in others. */
static void sc_obs_common(void)
{
    bk_loop loop = bk_current();
    bk_observer o = add_observer(loop, BK_COMMON, BK_ENTRY | BK_EXIT, true, 0, obs_print, "O");
    bk_add_common_mode(loop, "ModeB");
    bk_timer tb = add_timer(loop, "ModeB", 0.05, 0, 0, timer_print, "TB");
    bk_timer tc = add_timer(loop, "ModeC", 0.05, 0, 0, timer_print, "TC");
    run("ModeB", 0.5, false);
    run("ModeC", 0.5, false);
    drop_timer(tb);
    drop_timer(tc);
    drop_observer(o);
}

static void obs_nested_entry(bk_observer o, unsigned act, void *info)
{
    (void)o;
    bk_loop loop = info;
    char *m = bk_copy_current_mode(loop);
    say("obs O %s in %s", act_name(act), mname(m));
    if (act == BK_ENTRY && m && strcmp(m, BK_DEFAULT) == 0) {
        int r = bk_run("ModeA", 0.5, false);
        say("nested run in O's entry callout -> %d (%s)", r, res_name(r));
    }
    free(m);
}

/* An observer is not called again for a nested run started from its own callout. */
static void sc_obs_not_reentrant(void)
{
    bk_loop loop = bk_current();
    bk_add_common_mode(loop, "ModeA");
    bk_observer o = add_observer(loop, BK_COMMON, BK_ENTRY | BK_EXIT, true, 0, obs_nested_entry, loop);
    bk_timer ta = add_timer(loop, "ModeA", 0.05, 0, 0, timer_print, "TA");
    bk_timer td = add_timer(loop, BK_DEFAULT, 0.2, 0, 0, timer_print, "TD");
    run(BK_DEFAULT, 0.5, false);
    drop_timer(ta);
    drop_timer(td);
    drop_observer(o);
}

static void obs_remove_self(bk_observer o, unsigned act, void *info)
{
    bk_loop loop = info;
    say("obs R %s, removing itself", act_name(act));
    bk_remove_observer(loop, o, BK_DEFAULT);
}

/* An observer removing itself from inside its callout is not called again. */
static void sc_obs_remove_self(void)
{
    bk_loop loop = bk_current();
    bk_observer r = add_observer(loop, BK_DEFAULT, BK_BEFORE_TIMERS, true, 0, obs_remove_self, loop);
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "A");
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.15, 0, 0, timer_print, "B");
    run(BK_DEFAULT, 0.5, false);
    say("R valid %d, contained %d", bk_observer_is_valid(r), bk_contains_observer(loop, r, BK_DEFAULT));
    drop_timer(a);
    drop_timer(b);
    drop_observer(r);
}

/* A run with seconds 0 makes one pass without waiting and returns TIMED_OUT. */
static void sc_poll_run(void)
{
    bk_loop loop = bk_current();
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_print, "O");
    bk_source s = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(loop, s, BK_DEFAULT);
    bk_timer far = add_timer(loop, BK_DEFAULT, 10, 0, 0, timer_print, "FAR");
    run(BK_DEFAULT, 0, false);
    bk_source_signal(s);
    run(BK_DEFAULT, 0, false);
    bk_source_signal(s);
    run(BK_DEFAULT, 0, true);
    run(BK_DEFAULT, 0, true);
    drop_timer(far);
    drop_source(s);
    drop_observer(o);
}

/* A far timer does not fire; the run times out. */
static void sc_timeout_far_timer(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer far = add_timer(loop, BK_DEFAULT, 10, 0, 0, timer_count, &n);
    run(BK_DEFAULT, 0.2, false);
    say("far timer fired %d times, valid %d", n, bk_timer_is_valid(far));
    drop_timer(far);
}

static void timer_say_valid(bk_timer t, void *info)
{
    say("timer %s fires, valid %d", (const char *)info, bk_timer_is_valid(t));
}

/* A one-shot timer is valid inside its callout and invalid (and out of its mode) after it. */
static void sc_oneshot_invalid_after(void)
{
    bk_loop loop = bk_current();
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_say_valid, "T");
    say("before: valid %d contained %d", bk_timer_is_valid(t), bk_contains_timer(loop, t, BK_DEFAULT));
    run(BK_DEFAULT, 0.5, false);
    say("after: valid %d contained %d", bk_timer_is_valid(t), bk_contains_timer(loop, t, BK_DEFAULT));
    drop_timer(t);
}

/* A repeating timer fires on its grid: +50, +150, ..., +450 in a 0.5 s run. */
static void sc_repeat_count(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 0.1, 0, timer_count, &n);
    run(BK_DEFAULT, 0.5, false);
    say("repeating timer fired %d times, valid %d", n, bk_timer_is_valid(r));
    drop_timer(r);
}

/* Timers fire in fire-date order, not in the order they were added. */
static void sc_timers_fire_order(void)
{
    bk_loop loop = bk_current();
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.15, 0, 0, timer_print, "B(+150)");
    bk_timer c = add_timer(loop, BK_DEFAULT, 0.10, 0, 0, timer_print, "C(+100)");
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "A(+50)");
    run(BK_DEFAULT, 0.5, false);
    drop_timer(a);
    drop_timer(b);
    drop_timer(c);
}

static void timer_invalidate_other(bk_timer t, void *info)
{
    (void)t;
    bk_timer other = info;
    say("timer A: B valid %d, invalidating B", bk_timer_is_valid(other));
    bk_timer_invalidate(other);
    say("timer A: B valid %d", bk_timer_is_valid(other));
}

/* A timer invalidating another one from inside its callout: the other never fires. */
static void sc_timer_invalidates_other(void)
{
    bk_loop loop = bk_current();
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.15, 0, 0, timer_print, "B");
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_invalidate_other, b);
    bk_timer c = add_timer(loop, BK_DEFAULT, 0.25, 0, 0, timer_print, "C");
    run(BK_DEFAULT, 0.5, false);
    drop_timer(a);
    drop_timer(b);
    drop_timer(c);
}

struct self_state {
    bk_loop loop;
    int n;
};

static void timer_remove_self(bk_timer t, void *info)
{
    struct self_state *st = info;
    st->n++;
    say("timer R fire %d: removing itself", st->n);
    bk_remove_timer(st->loop, t, BK_DEFAULT);
    say("timer R: contained %d valid %d", bk_contains_timer(st->loop, t, BK_DEFAULT),
        bk_timer_is_valid(t));
}

/* A repeating timer removing itself from its mode in its callout fires no more (and stays
 * valid: removal is not invalidation). */
static void sc_timer_removes_self(void)
{
    bk_loop loop = bk_current();
    struct self_state st = { loop, 0 };
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 0.05, 0, timer_remove_self, &st);
    bk_timer e = add_timer(loop, BK_DEFAULT, 0.25, 0, 0, timer_print, "E");
    run(BK_DEFAULT, 0.5, false);
    say("R fired %d times, valid %d", st.n, bk_timer_is_valid(r));
    drop_timer(r);
    drop_timer(e);
}

static void timer_rearm_self(bk_timer t, void *info)
{
    struct self_state *st = info;
    st->n++;
    if (st->n == 1) {
        say("timer R fire 1: rearming itself to +100ms");
        bk_timer_set_next_fire_date(t, bk_now() + 0.1);
    } else {
        say("timer R fire %d: invalidating itself", st->n);
        bk_timer_invalidate(t);
    }
}

/* A repeating timer (interval 1 s) rearming itself inside its callout keeps the new date. */
static void sc_timer_rearm_self(void)
{
    bk_loop loop = bk_current();
    struct self_state st = { loop, 0 };
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 1.0, 0, timer_rearm_self, &st);
    run(BK_DEFAULT, 0.5, false);
    say("R fired %d times, valid %d", st.n, bk_timer_is_valid(r));
    drop_timer(r);
}

static void timer_rearm_oneshot(bk_timer t, void *info)
{
    ++*(int *)info;
    say("timer O fires: rearming itself to +100ms");
    bk_timer_set_next_fire_date(t, bk_now() + 0.1);
}

/* A one-shot timer rearming itself inside its callout is still invalidated after it. */
static void sc_oneshot_rearm_self(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer o = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_rearm_oneshot, &n);
    run(BK_DEFAULT, 0.4, false);
    say("O fired %d times, valid %d, contained %d", n, bk_timer_is_valid(o),
        bk_contains_timer(loop, o, BK_DEFAULT));
    drop_timer(o);
}

/* Signalled version-0 sources are performed in ascending order. */
static void sc_src0_order(void)
{
    bk_loop loop = bk_current();
    bk_source c = bk_source_create(3, src_print, NULL, NULL, "C(3)");
    bk_source a = bk_source_create(1, src_print, NULL, NULL, "A(1)");
    bk_source b = bk_source_create(2, src_print, NULL, NULL, "B(2)");
    bk_add_source(loop, c, BK_DEFAULT);
    bk_add_source(loop, a, BK_DEFAULT);
    bk_add_source(loop, b, BK_DEFAULT);
    bk_source_signal(c);
    bk_source_signal(b);
    bk_source_signal(a);
    bk_source_signal(c);
    run(BK_DEFAULT, 0, false);
    run(BK_DEFAULT, 0, false);
    drop_source(a);
    drop_source(b);
    drop_source(c);
}

/* return-after-source: the first of two signalled sources ends the run, the second runs in the
 * next run. */
static void sc_return_after_source(void)
{
    bk_loop loop = bk_current();
    bk_source a = bk_source_create(1, src_print, NULL, NULL, "A(1)");
    bk_source b = bk_source_create(2, src_print, NULL, NULL, "B(2)");
    bk_add_source(loop, a, BK_DEFAULT);
    bk_add_source(loop, b, BK_DEFAULT);
    bk_source_signal(b);
    bk_source_signal(a);
    run(BK_DEFAULT, 0.5, true);
    run(BK_DEFAULT, 0.5, true);
    run(BK_DEFAULT, 0.1, true);
    drop_source(a);
    drop_source(b);
}

/* A timer is not a source: return-after-source runs still time out. */
static void sc_return_after_timer_not_source(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "T");
    run(BK_DEFAULT, 0.3, true);
    drop_timer(t);
    drop_source(k);
}

struct signaller {
    const char *name;
    bk_source others[2];
};

static void src_signal_others(void *info)
{
    struct signaller *sg = info;
    say("src %s perform: signalling C(0) and B(2)", sg->name);
    bk_source_signal(sg->others[0]);
    bk_source_signal(sg->others[1]);
}

/* Sources signalled during a pass (even ordered after the performing one) wait for the next
 * pass. */
static void sc_signal_in_perform(void)
{
    bk_loop loop = bk_current();
    struct signaller sg = { "A(1)", { NULL, NULL } };
    bk_source a = bk_source_create(1, src_signal_others, NULL, NULL, &sg);
    bk_source b = bk_source_create(2, src_print, NULL, NULL, "B(2)");
    bk_source c = bk_source_create(0, src_print, NULL, NULL, "C(0)");
    sg.others[0] = c;
    sg.others[1] = b;
    bk_add_source(loop, a, BK_DEFAULT);
    bk_add_source(loop, b, BK_DEFAULT);
    bk_add_source(loop, c, BK_DEFAULT);
    bk_source_signal(a);
    run(BK_DEFAULT, 0, false);
    run(BK_DEFAULT, 0, false);
    run(BK_DEFAULT, 0, false);
    drop_source(a);
    drop_source(b);
    drop_source(c);
}

/* A source signalled while the loop runs a mode it is not in waits for a run in its mode. */
static void sc_src_other_mode(void)
{
    bk_loop loop = bk_current();
    bk_source s = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(loop, s, "ModeA");
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "T");
    bk_source_signal(s);
    run(BK_DEFAULT, 0.3, false);
    run("ModeA", 0.3, true);
    run("ModeA", 0.1, true);
    drop_timer(t);
    drop_source(s);
}

/* schedule and cancel callouts on add, remove and invalidate. */
static void sc_schedule_cancel(void)
{
    bk_loop loop = bk_current();
    bk_source s = bk_source_create(0, src_print, src_schedule_log, src_cancel_log, "S");
    ev_flush("create");
    bk_add_source(loop, s, "ModeA");
    ev_flush("add ModeA");
    bk_add_source(loop, s, BK_DEFAULT);
    ev_flush("add default");
    bk_remove_source(loop, s, "ModeA");
    ev_flush("remove ModeA");
    say("valid %d", bk_source_is_valid(s));
    bk_source_invalidate(s);
    ev_flush("invalidate");
    say("valid %d, in default %d", bk_source_is_valid(s), bk_contains_source(loop, s, BK_DEFAULT));
    bk_release(s);
    ev_flush("release");
}

/* schedule and cancel through the common modes: once per common mode. */
static void sc_schedule_common(void)
{
    bk_loop loop = bk_current();
    bk_source s = bk_source_create(0, src_print, src_schedule_log, src_cancel_log, "S");
    bk_add_source(loop, s, BK_COMMON);
    ev_flush("add common");
    bk_add_common_mode(loop, "ModeB");
    ev_flush("make ModeB common");
    bk_add_common_mode(loop, "ModeC");
    ev_flush("make ModeC common");
    bk_remove_source(loop, s, BK_COMMON);
    ev_flush("remove common");
    bk_add_source(loop, s, BK_COMMON);
    ev_flush("add common again");
    bk_source_invalidate(s);
    ev_flush("invalidate");
    bk_release(s);
    ev_flush("release");
}

/* An item added to the common modes fires in a mode made common later, and in default. */
static void sc_common_later(void)
{
    bk_loop loop = bk_current();
    bk_timer t1 = add_timer(loop, BK_COMMON, 0.05, 0, 0, timer_print, "T1");
    bk_add_common_mode(loop, "ModeB");
    run("ModeB", 0.5, false);
    bk_timer t2 = add_timer(loop, BK_COMMON, 0.05, 0, 0, timer_print, "T2");
    run(BK_DEFAULT, 0.5, false);
    bk_timer t3 = add_timer(loop, BK_COMMON, 0.05, 0, 0, timer_print, "T3");
    run("ModeB", 0.5, false);
    drop_timer(t1);
    drop_timer(t2);
    drop_timer(t3);
}

/* An item in the common modes does not fire in a mode that is not common. */
static void sc_common_not_in_other_mode(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer t3 = add_timer(loop, BK_COMMON, 0.05, 0, 0, timer_count, &n);
    bk_timer t4 = add_timer(loop, "ModeC", 0.15, 0, 0, timer_print, "T4(ModeC)");
    run("ModeC", 0.5, false);
    say("common timer fired %d times, valid %d, in ModeC %d, in default %d", n,
        bk_timer_is_valid(t3), bk_contains_timer(loop, t3, "ModeC"),
        bk_contains_timer(loop, t3, BK_DEFAULT));
    drop_timer(t3);
    drop_timer(t4);
}

static void timer_stop_from_2nd(bk_timer t, void *info)
{
    (void)t;
    struct self_state *st = info;
    st->n++;
    say("timer R fire %d%s", st->n, st->n >= 2 ? ": stop" : "");
    if (st->n >= 2) bk_stop(st->loop);
}

/* rl_loop_stop from a timer callout: STOPPED; the next run starts unstopped. */
static void sc_stop_from_timer(void)
{
    bk_loop loop = bk_current();
    struct self_state st = { loop, 0 };
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 0, obs_print, "O");
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 0.1, 0, timer_stop_from_2nd, &st);
    run(BK_DEFAULT, 1.0, false);
    run(BK_DEFAULT, 1.0, false);
    drop_timer(r);
    drop_observer(o);
}

/* A stop issued while the loop is not running is forgotten. */
static void sc_stop_not_running(void)
{
    bk_loop loop = bk_current();
    bk_stop(loop);
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "T");
    run(BK_DEFAULT, 0.5, false);
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_stop(loop);
    run(BK_DEFAULT, 0.1, false);
    drop_source(k);
    drop_timer(t);
}

static void timer_nested(bk_timer t, void *info)
{
    (void)t;
    bk_loop loop = info;
    say_current_mode(loop, "timer A (outer)");
    int r = bk_run("ModeA", 0.5, false);
    say("nested run ModeA -> %d (%s)", r, res_name(r));
    say_current_mode(loop, "timer A after nested run");
}

static void timer_print_mode(bk_timer t, void *info)
{
    (void)t;
    bk_loop loop = info;
    say_current_mode(loop, "timer B (inner)");
}

/* A run from inside a timer callout in another mode: Entry/Exit at each level, the current mode
 * follows the innermost run. */
static void sc_nested_run(void)
{
    bk_loop loop = bk_current();
    bk_observer od = add_observer(loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 0, obs_print, "OD");
    bk_observer oa = add_observer(loop, "ModeA", BK_ENTRY | BK_EXIT, true, 0, obs_print, "OA");
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_nested, loop);
    bk_timer b = add_timer(loop, "ModeA", 0.1, 0, 0, timer_print_mode, loop);
    say_current_mode(loop, "before run");
    run(BK_DEFAULT, 0.5, false);
    say_current_mode(loop, "after run");
    drop_timer(a);
    drop_timer(b);
    drop_observer(od);
    drop_observer(oa);
}

static void timer_stop_loop(bk_timer t, void *info)
{
    (void)t;
    say("timer B: stop");
    bk_stop(info);
}

static void timer_nested_plain(bk_timer t, void *info)
{
    (void)t;
    (void)info;
    say("timer A: nested run");
    int r = bk_run("ModeA", 0.5, false);
    say("nested run ModeA -> %d (%s)", r, res_name(r));
}

/* A stop inside a nested run stops only the nested run. */
static void sc_stop_nested(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, "ModeA");
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_nested_plain, loop);
    bk_timer b = add_timer(loop, "ModeA", 0.1, 0, 0, timer_stop_loop, loop);
    bk_timer c = add_timer(loop, BK_DEFAULT, 0.25, 0, 0, timer_print, "C");
    run(BK_DEFAULT, 0.5, false);
    drop_timer(a);
    drop_timer(b);
    drop_timer(c);
    drop_source(k);
}

/* Blocks run in the next pass of a run in their mode only; common-mode blocks in default. */
static void sc_perform_block_modes(void)
{
    bk_loop loop = bk_current();
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_BEFORE_SOURCES | BK_BEFORE_WAITING, true, 0,
                                 obs_print, "OD");
    bk_timer td = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "TD");
    bk_timer ta = add_timer(loop, "ModeA", 0.05, 0, 0, timer_print, "TA");
    bk_perform(loop, "ModeA", block_print, "A1(ModeA)");
    bk_perform(loop, BK_DEFAULT, block_print, "D1(default)");
    bk_perform(loop, BK_COMMON, block_print, "C1(common)");
    bk_perform(loop, BK_DEFAULT, block_print, "D2(default)");
    run(BK_DEFAULT, 0.5, false);
    run("ModeA", 0.5, false);
    drop_timer(td);
    drop_timer(ta);
    drop_observer(o);
}

/* The mode empties once its last one-shot timer has fired: FINISHED. */
static void sc_empty_after_oneshots(void)
{
    bk_loop loop = bk_current();
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "A");
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.1, 0, 0, timer_print, "B");
    run(BK_DEFAULT, 0.5, false);
    run(BK_DEFAULT, 0.5, false);
    drop_timer(a);
    drop_timer(b);
}

struct remover {
    bk_loop loop;
    bk_source self;
};

static void src_remove_self(void *info)
{
    struct remover *rm = info;
    say("src S perform: removing itself");
    bk_remove_source(rm->loop, rm->self, BK_DEFAULT);
}

/* Removing the last source from within its perform: FINISHED. */
static void sc_remove_last_source_in_perform(void)
{
    bk_loop loop = bk_current();
    struct remover rm = { loop, NULL };
    bk_source s = bk_source_create(0, src_remove_self, NULL, NULL, &rm);
    rm.self = s;
    bk_add_source(loop, s, BK_DEFAULT);
    bk_source_signal(s);
    run(BK_DEFAULT, 0.5, false);
    say("S contained %d valid %d", bk_contains_source(loop, s, BK_DEFAULT), bk_source_is_valid(s));
    drop_source(s);
}

struct xthread {
    bk_loop loop;
    bk_source source;
    bk_timer timer;
    struct helper *helper;
    void (*helper_fn)(void *);
};

static void helper_signal(void *arg)
{
    struct xthread *x = arg;
    msleep(50);
    say("helper: signal + wakeup");
    bk_source_signal(x->source);
    bk_wakeup(x->loop);
}

/* Another thread signals a source and wakes the loop up: performed, HANDLED_SOURCE. */
static void sc_xthread_signal(void)
{
    struct xthread x = { bk_current(), NULL, NULL, NULL, NULL };
    x.source = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(x.loop, x.source, BK_DEFAULT);
    x.helper = spawn(helper_signal, &x);
    run(BK_DEFAULT, 1.0, true);
    join(x.helper);
    drop_source(x.source);
}

/* Timer callout that starts the scenario's helper once the loop surely runs. */
static void timer_start_helper(bk_timer t, void *info)
{
    (void)t;
    struct xthread *x = info;
    say("timer K: starting helper");
    x->helper = spawn(x->helper_fn, x);
}

static void helper_stop(void *arg)
{
    struct xthread *x = arg;
    msleep(50);
    say("helper: stop");
    bk_stop(x->loop);
}

/* Another thread stops the loop: STOPPED. */
static void sc_xthread_stop(void)
{
    struct xthread x = { bk_current(), NULL, NULL, NULL, helper_stop };
    bk_source k = keeper(x.loop, BK_DEFAULT);
    bk_observer o = add_observer(x.loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 0, obs_print, "O");
    bk_timer t = add_timer(x.loop, BK_DEFAULT, 0.02, 0, 0, timer_start_helper, &x);
    run(BK_DEFAULT, 1.0, false);
    join(x.helper);
    drop_timer(t);
    drop_observer(o);
    drop_source(k);
}

static void timer_x_fires(bk_timer t, void *info)
{
    (void)t;
    say("timer X fires: stop");
    bk_stop(info);
}

static void helper_add_timer(void *arg)
{
    struct xthread *x = arg;
    msleep(50);
    x->timer = bk_timer_create(bk_now() + 0.05, 0, 0, timer_x_fires, x->loop);
    bk_add_timer(x->loop, x->timer, BK_DEFAULT);
    say("helper: added timer X at +50ms, no wakeup");
}

/* A timer added from another thread to a sleeping loop fires without an explicit wakeup. */
static void sc_xthread_add_timer(void)
{
    struct xthread x = { bk_current(), NULL, NULL, NULL, helper_add_timer };
    bk_source k = keeper(x.loop, BK_DEFAULT);
    bk_timer t = add_timer(x.loop, BK_DEFAULT, 0.02, 0, 0, timer_start_helper, &x);
    run(BK_DEFAULT, 1.0, false);
    join(x.helper);
    drop_timer(x.timer);
    drop_timer(t);
    drop_source(k);
}

static void block_stop(void *info)
{
    say("block from helper runs: stop");
    bk_stop(info);
}

static void helper_block(void *arg)
{
    struct xthread *x = arg;
    msleep(50);
    say("helper: perform block + wakeup");
    bk_perform(x->loop, BK_DEFAULT, block_stop, x->loop);
    bk_wakeup(x->loop);
}

/* A block queued from another thread, followed by a wakeup, runs in the loop's thread. */
static void sc_xthread_block(void)
{
    struct xthread x = { bk_current(), NULL, NULL, NULL, helper_block };
    bk_source k = keeper(x.loop, BK_DEFAULT);
    bk_timer t = add_timer(x.loop, BK_DEFAULT, 0.02, 0, 0, timer_start_helper, &x);
    run(BK_DEFAULT, 1.0, false);
    join(x.helper);
    drop_timer(t);
    drop_source(k);
}

static void say_contains(bk_loop loop, bk_source s, bk_timer t, bk_observer o, const char *what)
{
    const char *modes[] = { BK_DEFAULT, "ModeA", "ModeB", BK_COMMON };
    char buf[256];
    size_t len = 0;
    for (int i = 0; i < 4; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, " %s:%d%d%d",
                                i == 3 ? "common" : mname(modes[i]),
                                bk_contains_source(loop, s, modes[i]),
                                bk_contains_timer(loop, t, modes[i]),
                                bk_contains_observer(loop, o, modes[i]));
    say("%-28s src/timer/obs%s", what, buf);
}

/* contains queries before and after add/remove, through the common modes too. */
static void sc_contains_queries(void)
{
    bk_loop loop = bk_current();
    bk_source s = bk_source_create(0, NULL, NULL, NULL, NULL);
    bk_timer t = bk_timer_create(bk_now() + 10, 0, 0, timer_print, "T");
    bk_observer o = bk_observer_create(BK_ENTRY, true, 0, obs_print, "O");
    say_contains(loop, s, t, o, "created");
    bk_add_source(loop, s, BK_DEFAULT);
    bk_add_timer(loop, t, BK_DEFAULT);
    bk_add_observer(loop, o, BK_DEFAULT);
    say_contains(loop, s, t, o, "added to default");
    bk_add_source(loop, s, "ModeA");
    bk_add_timer(loop, t, "ModeA");
    bk_add_observer(loop, o, "ModeA");
    say_contains(loop, s, t, o, "added to ModeA");
    bk_remove_source(loop, s, BK_DEFAULT);
    bk_remove_timer(loop, t, BK_DEFAULT);
    bk_remove_observer(loop, o, BK_DEFAULT);
    say_contains(loop, s, t, o, "removed from default");
    bk_remove_source(loop, s, "ModeA");
    bk_remove_timer(loop, t, "ModeA");
    bk_remove_observer(loop, o, "ModeA");
    say_contains(loop, s, t, o, "removed from ModeA");
    bk_add_source(loop, s, BK_COMMON);
    bk_add_timer(loop, t, BK_COMMON);
    bk_add_observer(loop, o, BK_COMMON);
    say_contains(loop, s, t, o, "added to common");
    bk_add_common_mode(loop, "ModeB");
    say_contains(loop, s, t, o, "ModeB made common");
    bk_remove_source(loop, s, BK_COMMON);
    bk_remove_timer(loop, t, BK_COMMON);
    bk_remove_observer(loop, o, BK_COMMON);
    say_contains(loop, s, t, o, "removed from common");
    drop_source(s);
    drop_timer(t);
    drop_observer(o);
}

static void obs_say_mode(bk_observer o, unsigned act, void *info)
{
    (void)o;
    char buf[64];
    snprintf(buf, sizeof buf, "obs %s", act_name(act));
    say_current_mode(info, buf);
}

static void timer_say_mode(bk_timer t, void *info)
{
    (void)t;
    say_current_mode(info, "timer");
}

/* copy_current_mode: NULL outside a run, the run's mode inside callouts. */
static void sc_copy_current_mode(void)
{
    bk_loop loop = bk_current();
    say_current_mode(loop, "outside");
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 0, obs_say_mode, loop);
    bk_timer td = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_say_mode, loop);
    bk_timer ta = add_timer(loop, "ModeA", 0.05, 0, 0, timer_say_mode, loop);
    run(BK_DEFAULT, 0.5, false);
    say_current_mode(loop, "between runs");
    run("ModeA", 0.5, false);
    say_current_mode(loop, "after");
    drop_timer(td);
    drop_timer(ta);
    drop_observer(o);
}

static void timer_stall_once(bk_timer t, void *info)
{
    (void)t;
    int *n = info;
    if (++*n == 1) {
        say("timer R fire 1: stalling 500ms");
        msleep(500);
    }
}

/* A repeating timer (first +50ms, interval 200ms) whose first callout stalls 500ms: the next
 * fire is the next grid point after the stall (+650), not a catch-up fire at +550 nor +750. In
 * a 0.7 s run: 2 fires. */
static void sc_stall_own_callout(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 0.2, 0, timer_stall_once, &n);
    run(BK_DEFAULT, 0.7, false);
    say("R fired %d times", n);
    drop_timer(r);
}

static void timer_stall_loop(bk_timer t, void *info)
{
    (void)t;
    (void)info;
    say("timer S: stalling 500ms");
    msleep(500);
}

/* Another callout stalls the loop for 500ms while a repeating timer (first +50ms, interval
 * 200ms) misses +250 and +450: it fires once late (~+600), then keeps its grid (+650). In a
 * 0.75 s run: 3 fires. */
static void sc_stall_loop(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 0.2, 0, timer_count, &n);
    bk_timer s = add_timer(loop, BK_DEFAULT, 0.1, 0, 0, timer_stall_loop, NULL);
    run(BK_DEFAULT, 0.75, false);
    say("R fired %d times", n);
    drop_timer(r);
    drop_timer(s);
}

static void obs_stop_on_entry(bk_observer o, unsigned act, void *info)
{
    (void)o;
    say("obs O %s%s", act_name(act), act == BK_ENTRY ? ": stop" : "");
    if (act == BK_ENTRY) bk_stop(info);
}

/* A stop from an Entry observer ends the run before its first pass. */
static void sc_stop_in_entry_observer(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_stop_on_entry, loop);
    run(BK_DEFAULT, 0.5, false);
    drop_observer(o);
    drop_source(k);
}

static void obs_stop_before_waiting(bk_observer o, unsigned act, void *info)
{
    (void)o;
    say("obs O %s%s", act_name(act), act == BK_BEFORE_WAITING ? ": stop" : "");
    if (act == BK_BEFORE_WAITING) bk_stop(info);
}

/* A stop from a Before-waiting observer is not lost: the wait ends at once, STOPPED. */
static void sc_stop_in_before_waiting(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_BEFORE_WAITING | BK_AFTER_WAITING | BK_EXIT,
                                 true, 0, obs_stop_before_waiting, loop);
    run(BK_DEFAULT, 0.5, false);
    drop_observer(o);
    drop_source(k);
}

struct bw_wake {
    bk_loop loop;
    bk_source source;
};

static void obs_wake_before_waiting(bk_observer o, unsigned act, void *info)
{
    (void)o;
    struct bw_wake *w = info;
    say("obs W %s: signal + wakeup", act_name(act));
    bk_source_signal(w->source);
    bk_wakeup(w->loop);
}

/* A signal + wakeup from a (non-repeating) Before-waiting observer is not lost. */
static void sc_wakeup_in_before_waiting(void)
{
    bk_loop loop = bk_current();
    struct bw_wake w = { loop, bk_source_create(0, src_print, NULL, NULL, "S") };
    bk_add_source(loop, w.source, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_BEFORE_WAITING, false, 0,
                                 obs_wake_before_waiting, &w);
    bk_observer p = add_observer(loop, BK_DEFAULT, BK_AFTER_WAITING | BK_BEFORE_SOURCES, true, 1,
                                 obs_print, "P");
    run(BK_DEFAULT, 0.5, true);
    drop_observer(o);
    drop_observer(p);
    drop_source(w.source);
}

/* A pass that handled a source does not wait: no Before/After-waiting around it. */
static void sc_src_handled_no_wait(void)
{
    bk_loop loop = bk_current();
    bk_source s = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(loop, s, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_print, "O");
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.1, 0, 0, timer_print, "T");
    bk_source_signal(s);
    run(BK_DEFAULT, 0.3, false);
    drop_timer(t);
    drop_observer(o);
    drop_source(s);
}

static void timer_signal_source(bk_timer t, void *info)
{
    (void)t;
    say("timer T: signal S (no wakeup)");
    bk_source_signal(info);
}

/* A source signalled by a timer callout of the same loop is performed in the next pass. */
static void sc_timer_signals_source(void)
{
    bk_loop loop = bk_current();
    bk_source s = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(loop, s, BK_DEFAULT);
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_signal_source, s);
    run(BK_DEFAULT, 0.5, true);
    drop_timer(t);
    drop_source(s);
}

/* Timers created with a past fire date fire at the next pass. CF clamps a past date to the
 * creation time, so a repeating one's grid starts there: first -1.0 s, interval 0.4 s fires at
 * +0 and next at +0.4 (not at +0.2, the grid of the past date): once in a 0.3 s run. */
static void sc_past_fire_date(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer o = add_timer(loop, BK_DEFAULT, -1.0, 0, 0, timer_print, "ONESHOT(-1s)");
    run(BK_DEFAULT, 0.5, false);
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_timer r = add_timer(loop, BK_DEFAULT, -1.0, 0.4, 0, timer_count, &n);
    run(BK_DEFAULT, 0.3, false);
    say("repeating timer fired %d times", n);
    drop_timer(o);
    drop_timer(r);
    drop_source(k);
}

/* Same with a past date set from outside on a repeating timer (interval 0.4 s, moved from
 * +10 s to -1.0 s): fires at once, next at +0.4: once in a 0.3 s run. */
static void sc_timer_set_past_date(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer r = add_timer(loop, BK_DEFAULT, 10, 0.4, 0, timer_count, &n);
    bk_timer_set_next_fire_date(r, bk_now() - 1.0);
    run(BK_DEFAULT, 0.3, false);
    say("repeating timer fired %d times", n);
    drop_timer(r);
}

static void helper_rearm(void *arg)
{
    struct xthread *x = arg;
    msleep(50);
    bk_timer_set_next_fire_date(x->timer, bk_now() + 0.05);
    say("helper: moved timer X from +10s to +50ms, no wakeup");
}

/* A timer moved earlier from another thread fires without an explicit wakeup. */
static void sc_xthread_rearm_timer(void)
{
    struct xthread x = { bk_current(), NULL, NULL, NULL, helper_rearm };
    bk_source k = keeper(x.loop, BK_DEFAULT);
    x.timer = add_timer(x.loop, BK_DEFAULT, 10, 0, 0, timer_x_fires, x.loop);
    bk_timer t = add_timer(x.loop, BK_DEFAULT, 0.02, 0, 0, timer_start_helper, &x);
    run(BK_DEFAULT, 1.0, false);
    join(x.helper);
    drop_timer(x.timer);
    drop_timer(t);
    drop_source(k);
}

struct nest_state {
    bk_loop loop;
    int n;
    int depth;
};

static void timer_nested_same_mode(bk_timer t, void *info)
{
    (void)t;
    struct nest_state *st = info;
    st->n++;
    say("timer R fire %d at depth %d", st->n, st->depth);
    if (st->n == 1) {
        st->depth++;
        int r = bk_run(BK_DEFAULT, 0.2, false);
        st->depth--;
        say("nested run default -> %d (%s)", r, res_name(r));
    }
}

/* A repeating timer running a nested run of its own mode is not fired again inside it (it is
 * firing), while another timer is; afterwards it resumes its grid (first +50ms, interval
 * 100ms, nested run until ~+250ms: next fire +350ms). */
static void sc_nested_same_mode(void)
{
    bk_loop loop = bk_current();
    struct nest_state st = { loop, 0, 0 };
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 0.1, 0, timer_nested_same_mode, &st);
    bk_timer q = add_timer(loop, BK_DEFAULT, 0.1, 0, 0, timer_print, "Q");
    run(BK_DEFAULT, 0.4, false);
    say("R fired %d times", st.n);
    drop_timer(r);
    drop_timer(q);
}

struct taken_state {
    bk_loop loop;
    bk_timer a, b;
    int depth, d_fires;
};

static void taken_say(struct taken_state *st, const char *name)
{
    say("timer %s at depth %d", name, st->depth);
}
static void timer_taken_b(bk_timer t, void *info) { (void)t; taken_say(info, "B"); }
static void timer_taken_c(bk_timer t, void *info) { (void)t; taken_say(info, "C"); }
static void timer_taken_d(bk_timer t, void *info)
{
    (void)t;
    struct taken_state *st = info;
    st->d_fires++;
    taken_say(st, "D");
}

/* Timer A's callout: a run of A's own mode for seconds, nested. */
static void taken_a_nests(void *info, double seconds, const char *what)
{
    struct taken_state *st = info;
    taken_say(st, "A");
    st->depth++;
    int r = bk_run(BK_DEFAULT, seconds, false);
    st->depth--;
    say("nested %s default -> %d (%s)", what, r, res_name(r));
}
static void timer_taken_a_runs(bk_timer t, void *info) { (void)t; taken_a_nests(info, 0.05, "run"); }
static void timer_taken_a_polls(bk_timer t, void *info) { (void)t; taken_a_nests(info, 0, "poll"); }

/* Timer A's callout: which timer the loop says fires next. */
static void timer_taken_a_asks(bk_timer t, void *info)
{
    (void)t;
    struct taken_state *st = info;
    taken_say(st, "A");
    double next = bk_next_timer_fire_date(st->loop, BK_DEFAULT);
    say("in A's callout the mode's next fire date is %s",
        fabs(next - bk_timer_next_fire_date(st->a)) < 1e-3 ? "A's" :
        fabs(next - bk_timer_next_fire_date(st->b)) < 1e-3 ? "B's" : "another");
}

/* Four timers due by the time the run starts, A first (B, then the repeating D, then C): the
 * pass takes them all, and A's callout is a. */
static void taken_timers(bk_timer_fn a_callout)
{
    bk_loop loop = bk_current();
    struct taken_state st = { loop, NULL, NULL, 0, 0 };
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.01, 0, 0, a_callout, &st);
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.02, 0, 0, timer_taken_b, &st);
    bk_timer d = add_timer(loop, BK_DEFAULT, 0.025, 1.0, 0, timer_taken_d, &st);
    bk_timer c = add_timer(loop, BK_DEFAULT, 0.03, 0, 0, timer_taken_c, &st);
    st.a = a;
    st.b = b;
    msleep(60);
    run(BK_DEFAULT, 0.2, false);
    say("D fired %d times; B valid %d, C valid %d", st.d_fires, bk_timer_is_valid(b), bk_timer_is_valid(c));
    drop_timer(a);
    drop_timer(b);
    drop_timer(c);
    drop_timer(d);
}

/* A's callout runs its own mode: the others fire in that nested run, once each, in date order,
 * and the outer pass then passes over them (the one-shot ones are invalid, D has moved on). */
static void sc_nested_run_fires_the_taken_timers(void) { taken_timers(timer_taken_a_runs); }

/* The same with a poll: it fires the others too. */
static void sc_nested_poll_fires_the_taken_timers(void) { taken_timers(timer_taken_a_polls); }

/* The mode's next fire date, asked in A's callout, is A's own: the firing timer counts, at the
 * date it fired for. */
static void sc_next_fire_date_in_a_taken_timers_callout(void) { taken_timers(timer_taken_a_asks); }

/* The mode's next fire date asked from another thread in the callouts of B and C, which one pass
 * took with A (A, then B, fired and are gone): CF's answer is the firing timer's date (it stays
 * first in the mode's list until its callout returns). */
struct xthread_state {
    bk_loop loop;
    double date[3];
    int calls;
    const char *scenario;
};
static void *xthread_ask(void *p)
{
    struct xthread_state *st = p;
    tl_scenario = st->scenario;
    double next = bk_next_timer_fire_date(st->loop, BK_DEFAULT);
    const char *which = "another";
    for (int i = 0; i < 3; i++)
        if (fabs(next - st->date[i]) < 1e-6) which = i == 0 ? "A's" : i == 1 ? "B's" : "C's";
    say("asked from another thread in callout %d: %s", st->calls, which);
    return NULL;
}
static void timer_xthread(bk_timer t, void *info)
{
    (void)t;
    struct xthread_state *st = info;
    st->calls++;
    if (st->calls == 1) return; /* A */
    pthread_t th;
    if (pthread_create(&th, NULL, xthread_ask, st) != 0) abort();
    pthread_join(th, NULL);
}
static void sc_next_fire_date_from_another_thread_in_a_later_taken_callout(void)
{
    bk_loop loop = bk_current();
    struct xthread_state st = { loop, {0, 0, 0}, 0, tl_scenario };
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.01, 0, 0, timer_xthread, &st);
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.02, 0, 0, timer_xthread, &st);
    bk_timer c = add_timer(loop, BK_DEFAULT, 0.03, 0, 0, timer_xthread, &st);
    st.date[0] = bk_timer_next_fire_date(a);
    st.date[1] = bk_timer_next_fire_date(b);
    st.date[2] = bk_timer_next_fire_date(c);
    msleep(60);
    run(BK_DEFAULT, 0, false);
    say("%d callouts", st.calls);
    drop_timer(a);
    drop_timer(b);
    drop_timer(c);
}

/* A signalled source removed from its mode and added back is still signalled. */
static void sc_readd_signalled_source(void)
{
    bk_loop loop = bk_current();
    bk_source s = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(loop, s, BK_DEFAULT);
    bk_source_signal(s);
    bk_remove_source(loop, s, BK_DEFAULT);
    bk_source k = keeper(loop, BK_DEFAULT);
    run(BK_DEFAULT, 0, false);
    bk_add_source(loop, s, BK_DEFAULT);
    run(BK_DEFAULT, 0, false);
    run(BK_DEFAULT, 0, false);
    drop_source(k);
    drop_source(s);
}

/* A source in two modes, signalled once, is performed once (in the first mode run). */
static void sc_signal_once_two_modes(void)
{
    bk_loop loop = bk_current();
    bk_source s = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(loop, s, BK_DEFAULT);
    bk_add_source(loop, s, "ModeA");
    bk_source_signal(s);
    bk_source_signal(s);
    run("ModeA", 0, false);
    run(BK_DEFAULT, 0, false);
    run("ModeA", 0, false);
    drop_source(s);
}

/* An invalidated source is never performed, even if it was signalled. */
static void sc_invalidate_signalled_source(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_source s = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(loop, s, BK_DEFAULT);
    bk_source_signal(s);
    bk_source_invalidate(s);
    bk_source_signal(s);
    run(BK_DEFAULT, 0, false);
    say("S valid %d, contained %d", bk_source_is_valid(s), bk_contains_source(loop, s, BK_DEFAULT));
    bk_release(s);
    drop_source(k);
}

struct adder {
    bk_loop loop;
    bk_observer observer;
};

static void timer_add_observer(bk_timer t, void *info)
{
    (void)t;
    struct adder *ad = info;
    say("timer A: adding observer O");
    ad->observer = add_observer(ad->loop, BK_DEFAULT, BK_BEFORE_TIMERS | BK_EXIT, true, 0,
                                obs_print, "O");
}

/* An observer added from a callout during a run is called from the next pass on. */
static void sc_observer_added_in_callout(void)
{
    bk_loop loop = bk_current();
    struct adder ad = { loop, NULL };
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_add_observer, &ad);
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.15, 0, 0, timer_print, "B");
    run(BK_DEFAULT, 0.5, false);
    drop_timer(a);
    drop_timer(b);
    drop_observer(ad.observer);
}

struct killer {
    const char *name;
    void *victim;
};

static void obs_invalidate_other(bk_observer o, unsigned act, void *info)
{
    (void)o;
    struct killer *kl = info;
    say("obs %s %s: invalidating O2", kl->name, act_name(act));
    bk_observer_invalidate(kl->victim);
}

/* An observer invalidated by an earlier observer of the same activity is not called. */
static void sc_observer_invalidated_by_earlier(void)
{
    bk_loop loop = bk_current();
    bk_observer o2 = add_observer(loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 2, obs_print, "O2");
    struct killer kl = { "O1", o2 };
    bk_observer o1 = add_observer(loop, BK_DEFAULT, BK_ENTRY, false, 1, obs_invalidate_other, &kl);
    bk_observer o3 = add_observer(loop, BK_DEFAULT, BK_ENTRY | BK_EXIT, true, 3, obs_print, "O3");
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "T");
    run(BK_DEFAULT, 0.5, false);
    drop_timer(t);
    drop_observer(o1);
    drop_observer(o2);
    drop_observer(o3);
}

static void src_invalidate_other(void *info)
{
    struct killer *kl = info;
    say("src %s perform: invalidating B(2)", kl->name);
    bk_source_invalidate(kl->victim);
}

/* A signalled source invalidated by an earlier source's perform in the same pass is not
 * performed. */
static void sc_source_invalidated_by_earlier(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_source b = bk_source_create(2, src_print, NULL, NULL, "B(2)");
    struct killer kl = { "A(1)", b };
    bk_source a = bk_source_create(1, src_invalidate_other, NULL, NULL, &kl);
    bk_source c = bk_source_create(3, src_print, NULL, NULL, "C(3)");
    bk_add_source(loop, a, BK_DEFAULT);
    bk_add_source(loop, b, BK_DEFAULT);
    bk_add_source(loop, c, BK_DEFAULT);
    bk_source_signal(c);
    bk_source_signal(b);
    bk_source_signal(a);
    run(BK_DEFAULT, 0, false);
    run(BK_DEFAULT, 0, false);
    drop_source(a);
    drop_source(b);
    drop_source(c);
    drop_source(k);
}

static void timer_invalidate_other_quiet(bk_timer t, void *info)
{
    (void)t;
    say("timer A: invalidating B");
    bk_timer_invalidate(info);
}

/* Two timers made due together by a stall (A +50ms, B +60ms, stall until ~+520ms): A fires
 * first and invalidates B, which then does not fire. */
static void sc_timer_invalidated_by_earlier_due(void)
{
    bk_loop loop = bk_current();
    bk_timer s = add_timer(loop, BK_DEFAULT, 0.02, 0, 0, timer_stall_loop, NULL);
    bk_timer b = add_timer(loop, BK_DEFAULT, 0.06, 0, 0, timer_print, "B");
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_invalidate_other_quiet, b);
    bk_timer c = add_timer(loop, BK_DEFAULT, 0.65, 0, 0, timer_print, "C");
    run(BK_DEFAULT, 1.0, false);
    drop_timer(a);
    drop_timer(b);
    drop_timer(c);
    drop_timer(s);
}

/* A one-shot timer in two modes fires once, in whichever mode runs, and leaves both. */
static void sc_timer_two_modes_oneshot(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_timer t = add_timer(loop, "ModeA", 0.05, 0, 0, timer_print, "T");
    bk_add_timer(loop, t, BK_DEFAULT);
    run("ModeA", 0.5, false);
    say("T valid %d, in ModeA %d, in default %d", bk_timer_is_valid(t),
        bk_contains_timer(loop, t, "ModeA"), bk_contains_timer(loop, t, BK_DEFAULT));
    run(BK_DEFAULT, 0.1, false);
    drop_timer(t);
    drop_source(k);
}

/* A repeating timer in two modes keeps one grid across runs of either mode (first +50ms,
 * interval 100ms: two fires in ModeA 0.2 s, then two in default 0.2 s). */
static void sc_timer_two_modes_repeating(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer t = add_timer(loop, "ModeA", 0.05, 0.1, 0, timer_count, &n);
    bk_add_timer(loop, t, BK_DEFAULT);
    run("ModeA", 0.2, false);
    say("fired %d times", n);
    run(BK_DEFAULT, 0.2, false);
    say("fired %d times", n);
    drop_timer(t);
}

struct resignal {
    bk_source self;
    int n;
};

static void src_resignal(void *info)
{
    struct resignal *rs = info;
    rs->n++;
    say("src S perform %d%s", rs->n, rs->n < 4 ? ": signalling itself" : "");
    if (rs->n < 4) bk_source_signal(rs->self);
}

/* A source re-signalling itself is performed once per pass; passes that handled a source do
 * not wait. */
static void sc_source_resignals_itself(void)
{
    bk_loop loop = bk_current();
    struct resignal rs = { NULL, 0 };
    rs.self = bk_source_create(0, src_resignal, NULL, NULL, &rs);
    bk_add_source(loop, rs.self, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_BEFORE_SOURCES | BK_BEFORE_WAITING |
                                 BK_AFTER_WAITING | BK_EXIT, true, 0, obs_print, "O");
    bk_source_signal(rs.self);
    run(BK_DEFAULT, 0.2, false);
    drop_observer(o);
    drop_source(rs.self);
}

static void helper_signal_only(void *arg)
{
    struct xthread *x = arg;
    msleep(50);
    say("helper: signal S, no wakeup");
    bk_source_signal(x->source);
}

/* A source signalled from another thread without a wakeup waits until something else wakes the
 * loop (a timer at +150ms), then is performed. */
static void sc_xthread_signal_no_wakeup(void)
{
    struct xthread x = { bk_current(), NULL, NULL, NULL, NULL };
    x.source = bk_source_create(0, src_print, NULL, NULL, "S");
    bk_add_source(x.loop, x.source, BK_DEFAULT);
    bk_timer t = add_timer(x.loop, BK_DEFAULT, 0.15, 0, 0, timer_print, "T(+150)");
    x.helper = spawn(helper_signal_only, &x);
    run(BK_DEFAULT, 0.5, true);
    join(x.helper);
    drop_timer(t);
    drop_source(x.source);
}

static void helper_probe(void *arg)
{
    struct xthread *x = arg;
    msleep(40);
    char *m = bk_copy_current_mode(x->loop);
    say("helper at +40ms (loop sleeps): waiting %d, mode %s", bk_is_waiting(x->loop), mname(m));
    free(m);
    msleep(100);
    m = bk_copy_current_mode(x->loop);
    say("helper at +140ms (loop in a callout): waiting %d, mode %s", bk_is_waiting(x->loop),
        mname(m));
    free(m);
    msleep(120);
    say("helper: stop");
    bk_stop(x->loop);
}

static void timer_busy(bk_timer t, void *info)
{
    (void)t;
    (void)info;
    say("timer T: busy for 120ms");
    msleep(120);
}

/* Another thread sees the running loop's mode and whether it waits. */
static void sc_xthread_probe(void)
{
    struct xthread x = { bk_current(), NULL, NULL, NULL, NULL };
    bk_source k = keeper(x.loop, "ModeA");
    bk_timer t = add_timer(x.loop, "ModeA", 0.08, 0, 0, timer_busy, NULL);
    say("before run: waiting %d", bk_is_waiting(x.loop));
    x.helper = spawn(helper_probe, &x);
    run("ModeA", 1.0, false);
    join(x.helper);
    char *m = bk_copy_current_mode(x.loop);
    say("after run: waiting %d, mode %s", bk_is_waiting(x.loop), mname(m));
    free(m);
    drop_timer(t);
    drop_source(k);
}

static void obs_say_waiting(bk_observer o, unsigned act, void *info)
{
    (void)o;
    say("obs %s: waiting %d", act_name(act), bk_is_waiting(info));
}

static void timer_say_waiting(bk_timer t, void *info)
{
    (void)t;
    say("timer T: waiting %d", bk_is_waiting(info));
}

/* is_waiting inside the observer callouts that bracket the wait, and in a timer callout. */
static void sc_is_waiting_in_callouts(void)
{
    bk_loop loop = bk_current();
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_say_waiting, loop);
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_say_waiting, loop);
    run(BK_DEFAULT, 0.5, false);
    drop_timer(t);
    drop_observer(o);
}

/* A negative timeout is a poll. */
static void sc_negative_seconds_poll(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_print, "O");
    run(BK_DEFAULT, -1.0, false);
    drop_observer(o);
    drop_source(k);
}

static void timer_stop_plain(bk_timer t, void *info)
{
    (void)t;
    say("timer T: stop");
    bk_stop(info);
}

/* Runs with no timeout (1e10 s and more) end by a stop or by the mode emptying. */
static void sc_no_timeout_runs(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_stop_plain, loop);
    run(BK_DEFAULT, 1e10, false);
    drop_source(k);
    bk_timer u = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_print, "U");
    run(BK_DEFAULT, 1e300, false);
    drop_timer(t);
    drop_timer(u);
}

static void obs_stop_on_exit(bk_observer o, unsigned act, void *info)
{
    (void)o;
    say("obs X %s: stop", act_name(act));
    bk_stop(info);
}

/* A stop from an Exit observer belongs to the run that is ending: the outer run (part 2) or the
 * next run (part 1) is not stopped by it. */
static void sc_stop_in_exit_observer(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    /* part 1: outermost run */
    bk_observer x = add_observer(loop, BK_DEFAULT, BK_EXIT, false, 0, obs_stop_on_exit, loop);
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_stop_plain, loop);
    run(BK_DEFAULT, 0.5, false);
    run(BK_DEFAULT, 0.1, false);
    /* part 2: nested run */
    bk_observer xa = add_observer(loop, "ModeA", BK_EXIT, false, 0, obs_stop_on_exit, loop);
    bk_timer a = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_nested_plain, loop);
    bk_timer b = add_timer(loop, "ModeA", 0.1, 0, 0, timer_print, "B");
    bk_timer c = add_timer(loop, BK_DEFAULT, 0.25, 0, 0, timer_print, "C");
    run(BK_DEFAULT, 0.4, false);
    drop_timer(a);
    drop_timer(b);
    drop_timer(c);
    drop_timer(t);
    drop_observer(x);
    drop_observer(xa);
    drop_source(k);
}

static void obs_stop_before_timers(bk_observer o, unsigned act, void *info)
{
    (void)o;
    say("obs O %s%s", act_name(act), act == BK_BEFORE_TIMERS ? ": stop" : "");
    if (act == BK_BEFORE_TIMERS) bk_stop(info);
}

/* A stop from a Before-timers observer ends the run at the end of that pass. */
static void sc_stop_in_before_timers(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_ALL, true, 0, obs_stop_before_timers, loop);
    run(BK_DEFAULT, 0.5, false);
    drop_observer(o);
    drop_source(k);
}

static void timer_wakeup_own(bk_timer t, void *info)
{
    (void)t;
    say("timer T: wakeup of its own loop");
    bk_wakeup(info);
}

/* A wakeup issued by the loop's own thread from a timer callout (after the wait) is ignored:
 * CF ignores wakeups between the end of a wait and the next Before-waiting. */
static void sc_wakeup_in_timer_callout(void)
{
    bk_loop loop = bk_current();
    bk_source k = keeper(loop, BK_DEFAULT);
    bk_observer o = add_observer(loop, BK_DEFAULT, BK_BEFORE_WAITING | BK_AFTER_WAITING, true, 0,
                                 obs_print, "O");
    bk_timer t = add_timer(loop, BK_DEFAULT, 0.05, 0, 0, timer_wakeup_own, loop);
    run(BK_DEFAULT, 0.3, false);
    drop_timer(t);
    drop_observer(o);
    drop_source(k);
}

static void timer_rearm_past(bk_timer t, void *info)
{
    int *n = info;
    if (++*n == 1) {
        say("timer R fire 1: setting its next fire date 1 s in the past");
        bk_timer_set_next_fire_date(t, bk_now() - 1.0);
    } else {
        say("timer R fire %d", *n);
    }
}

/* Inside its own callout, a repeating timer set to a past date, even earlier than the one
 * being fired: CF clamps the date to now, which is later than the fired date, so it is kept:
 * the timer fires again at once, then every 200ms from there (first +50ms, interval 200ms:
 * fires at +50, ~+50 and ~+250 in a 0.35 s run). */
static void sc_timer_rearm_earlier_in_callout(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 0.2, 0, timer_rearm_past, &n);
    run(BK_DEFAULT, 0.35, false);
    say("R fired %d times", n);
    drop_timer(r);
}

/* Setting a repeating timer's next fire date from outside moves its grid (first +50ms,
 * interval 300ms, moved to +150ms: fires at +150 and +450, so once in a 0.4 s run). */
static void sc_timer_rearm_moves_grid(void)
{
    bk_loop loop = bk_current();
    int n = 0;
    bk_timer r = add_timer(loop, BK_DEFAULT, 0.05, 0.3, 0, timer_count, &n);
    bk_timer_set_next_fire_date(r, bk_now() + 0.15);
    run(BK_DEFAULT, 0.4, false);
    say("R fired %d times", n);
    drop_timer(r);
}

/* ---- equal orders ---------------------------------------------------------------------------- */

struct eq_log {
    char text[400];
    int count;
};

struct eq_item {
    struct eq_log *log;
    int index;
    bk_source also; /* signalled by this source's perform, or NULL */
};

static void src_log(void *info)
{
    struct eq_item *it = info;
    size_t len = strlen(it->log->text);
    snprintf(it->log->text + len, sizeof it->log->text - len, "%s%d", len ? " " : "", it->index);
    it->log->count++;
    if (it->also) bk_source_signal(it->also);
}

/* CF stamps a source with the time of its first signal and breaks ties in order by that stamp:
 * wait for the monotonic clock to move on between signals, so that no two stamps are equal. */
static void next_tick(void)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 2000);
}

/* n sources of orders 0 (or 0, 1, 2 by index when mixed), signalled in a shuffled order, then
 * each again (coalesced), performed by one pass. */
static void equal_order_round(bk_loop loop, int n, bool mixed, unsigned seed)
{
    struct eq_log log = { "", 0 };
    struct eq_item items[40];
    bk_source s[40];
    int sig[40];
    char order[200] = "";
    for (int i = 0; i < n; i++) {
        items[i].log = &log;
        items[i].index = i;
        items[i].also = NULL;
        s[i] = bk_source_create(mixed ? i % 3 : 0, src_log, NULL, NULL, &items[i]);
        bk_add_source(loop, s[i], BK_DEFAULT);
        sig[i] = i;
    }
    for (int i = n - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(i + 1));
        int t = sig[i];
        sig[i] = sig[j];
        sig[j] = t;
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(order);
        snprintf(order + len, sizeof order - len, "%s%d", i ? " " : "", sig[i]);
        bk_source_signal(s[sig[i]]);
        next_tick();
    }
    for (int i = n - 1; i >= 0; i--) bk_source_signal(s[sig[i]]);
    say("%d sources of order %s, signalled: %s", n, mixed ? "index % 3" : "0", order);
    run(BK_DEFAULT, 0, false);
    say("performed (%d): %s", log.count, log.text);
    for (int i = 0; i < n; i++) drop_source(s[i]);
}

/* Signalled version-0 sources run in ascending order, and sources of equal order in the order
 * of their first signal, at any count (CF: by signal time); a source a run left signalled (it
 * returned after one handled source) keeps its place ahead of one signalled later. */
static void sc_equal_order_sources(void)
{
    bk_loop loop = bk_current();
    equal_order_round(loop, 5, false, 1);
    equal_order_round(loop, 17, false, 2);
    equal_order_round(loop, 40, false, 3);
    equal_order_round(loop, 17, true, 4);
    equal_order_round(loop, 40, true, 5);

    struct eq_log log = { "", 0 };
    struct eq_item ia = { &log, 0, NULL }, ib = { &log, 1, NULL }, ic = { &log, 2, NULL };
    bk_source a = bk_source_create(0, src_log, NULL, NULL, &ia);
    bk_source b = bk_source_create(0, src_log, NULL, NULL, &ib);
    bk_source c = bk_source_create(0, src_log, NULL, NULL, &ic);
    ia.also = c;
    bk_add_source(loop, c, BK_DEFAULT);
    bk_add_source(loop, b, BK_DEFAULT);
    bk_add_source(loop, a, BK_DEFAULT);
    say("signal 0, then 1; 0's perform signals 2");
    bk_source_signal(a);
    next_tick();
    bk_source_signal(b);
    next_tick();
    run(BK_DEFAULT, 0, true);
    say("performed: %s", log.text);
    log.text[0] = '\0';
    run(BK_DEFAULT, 0, false);
    say("performed: %s", log.text);
    drop_source(a);
    drop_source(b);
    drop_source(c);
}

/* An item in the common modes removed by name from one of them, then added to the common modes
 * again: it is back in every common mode. */
static void sc_common_readd_after_remove_by_name(void)
{
    bk_loop loop = bk_current();
    bk_add_common_mode(loop, "ModeA");
    bk_source s = bk_source_create(0, NULL, NULL, NULL, NULL);
    bk_timer t = bk_timer_create(bk_now() + 10, 0, 0, timer_print, "T");
    bk_observer o = bk_observer_create(BK_ENTRY, true, 0, obs_print, "O");
    bk_add_source(loop, s, BK_COMMON);
    bk_add_timer(loop, t, BK_COMMON);
    bk_add_observer(loop, o, BK_COMMON);
    say_contains(loop, s, t, o, "added to common");
    bk_remove_source(loop, s, BK_DEFAULT);
    bk_remove_timer(loop, t, BK_DEFAULT);
    bk_remove_observer(loop, o, BK_DEFAULT);
    say_contains(loop, s, t, o, "removed from default by name");
    bk_add_source(loop, s, BK_COMMON);
    bk_add_timer(loop, t, BK_COMMON);
    bk_add_observer(loop, o, BK_COMMON);
    say_contains(loop, s, t, o, "added to common again");
    drop_source(s);
    drop_timer(t);
    drop_observer(o);
}

/* A run nested in a perform callout performs the signalled sources the outer pass took but has
 * not performed yet; the outer pass then skips them. */
static void nest_perform_outer(void *info)
{
    (void)info;
    say("S0 perform: nested run");
    run(BK_DEFAULT, 0, false);
}
static void nest_perform_other(void *info) { say("%s perform", (const char *)info); }

static void sc_nested_run_in_perform_performs_taken_sources(void)
{
    bk_loop loop = bk_current();
    bk_source s0 = bk_source_create(0, nest_perform_outer, NULL, NULL, NULL);
    bk_source s1 = bk_source_create(1, nest_perform_other, NULL, NULL, "S1");
    bk_source s2 = bk_source_create(2, nest_perform_other, NULL, NULL, "S2");
    bk_add_source(loop, s0, BK_DEFAULT);
    bk_add_source(loop, s1, BK_DEFAULT);
    bk_add_source(loop, s2, BK_DEFAULT);
    for (int ret = 0; ret < 2; ret++) {
        bk_source_signal(s0);
        bk_source_signal(s1);
        bk_source_signal(s2);
        run(BK_DEFAULT, 0, ret);
        run(BK_DEFAULT, 0, false);
    }
    drop_source(s0);
    drop_source(s1);
    drop_source(s2);
}

/* ================================ driver ==================================================== */

struct scenario {
    const char *name;
    void (*fn)(void);
};

#define SC(n) { #n, sc_##n }
static const struct scenario scenarios[] = {
    SC(empty_mode),
    SC(obs_timer_sequence),
    SC(obs_timeout_sequence),
    SC(obs_order),
    SC(obs_equal_order_by_addition),
    SC(obs_nonrepeating),
    SC(obs_common),
    SC(obs_not_reentrant),
    SC(obs_remove_self),
    SC(poll_run),
    SC(timeout_far_timer),
    SC(oneshot_invalid_after),
    SC(repeat_count),
    SC(timers_fire_order),
    SC(timer_invalidates_other),
    SC(timer_removes_self),
    SC(timer_rearm_self),
    SC(oneshot_rearm_self),
    SC(src0_order),
    SC(return_after_source),
    SC(return_after_timer_not_source),
    SC(signal_in_perform),
    SC(src_other_mode),
    SC(schedule_cancel),
    SC(schedule_common),
    SC(common_later),
    SC(common_not_in_other_mode),
    SC(stop_from_timer),
    SC(stop_not_running),
    SC(nested_run),
    SC(stop_nested),
    SC(perform_block_modes),
    SC(empty_after_oneshots),
    SC(remove_last_source_in_perform),
    SC(xthread_signal),
    SC(xthread_stop),
    SC(xthread_add_timer),
    SC(xthread_block),
    SC(contains_queries),
    SC(copy_current_mode),
    SC(stall_own_callout),
    SC(stall_loop),
    SC(stop_in_entry_observer),
    SC(stop_in_before_waiting),
    SC(wakeup_in_before_waiting),
    SC(src_handled_no_wait),
    SC(timer_signals_source),
    SC(past_fire_date),
    SC(xthread_rearm_timer),
    SC(nested_same_mode),
    SC(readd_signalled_source),
    SC(signal_once_two_modes),
    SC(invalidate_signalled_source),
    SC(observer_added_in_callout),
    SC(observer_invalidated_by_earlier),
    SC(source_invalidated_by_earlier),
    SC(timer_invalidated_by_earlier_due),
    SC(timer_two_modes_oneshot),
    SC(timer_two_modes_repeating),
    SC(source_resignals_itself),
    SC(xthread_signal_no_wakeup),
    SC(xthread_probe),
    SC(is_waiting_in_callouts),
    SC(negative_seconds_poll),
    SC(no_timeout_runs),
    SC(stop_in_exit_observer),
    SC(stop_in_before_timers),
    SC(wakeup_in_timer_callout),
    SC(timer_rearm_earlier_in_callout),
    SC(timer_rearm_moves_grid),
    SC(timer_set_past_date),
    SC(equal_order_sources),
    SC(common_readd_after_remove_by_name),
    SC(nested_run_in_perform_performs_taken_sources),
    SC(nested_run_fires_the_taken_timers),
    SC(nested_poll_fires_the_taken_timers),
    SC(next_fire_date_in_a_taken_timers_callout),
    SC(next_fire_date_from_another_thread_in_a_later_taken_callout),
};
#define NSCENARIOS (sizeof scenarios / sizeof scenarios[0])

static void *scenario_main(void *p)
{
    const struct scenario *sc = p;
    tl_scenario = sc->name;
    sc->fn();
    return NULL;
}

/* Run one scenario on a fresh thread; a scenario that hangs is reported and abandoned. */
static int run_scenario(const struct scenario *sc)
{
    pthread_t th;
    if (pthread_create(&th, NULL, scenario_main, (void *)sc) != 0) {
        printf("%s: cannot create thread\n", sc->name);
        return 1;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    int rc = pthread_timedjoin_np(th, NULL, &deadline);
    if (rc != 0) {
        pthread_mutex_lock(&out_mu);
        printf("%s: HUNG (no end within 10 s)\n", sc->name);
        pthread_mutex_unlock(&out_mu);
        pthread_detach(th);
        return 1;
    }
    pthread_mutex_lock(&out_mu);
    printf("%s: end\n", sc->name);
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);  /* a crashing scenario keeps the lines it printed */
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < NSCENARIOS; i++) printf("%s\n", scenarios[i].name);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--backend") == 0) {
        printf("%s\n", BK_NAME);
        return 0;
    }
    int bad = 0;
    if (argc > 1) {
        for (int a = 1; a < argc; a++) {
            size_t i;
            for (i = 0; i < NSCENARIOS; i++)
                if (strcmp(argv[a], scenarios[i].name) == 0) break;
            if (i == NSCENARIOS) {
                fprintf(stderr, "unknown scenario %s\n", argv[a]);
                return 2;
            }
            bad |= run_scenario(&scenarios[i]);
        }
    } else {
        for (size_t i = 0; i < NSCENARIOS; i++) bad |= run_scenario(&scenarios[i]);
    }
    fflush(stdout);
    if (bad) _exit(3);  /* a hung scenario thread may still hold the loop: do not run exit hooks */
    return 0;
}
