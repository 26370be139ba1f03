/*
 * main.c - the fault-injection job's driver (make faults).
 *
 *   faults [-v] [PART...]     PART: sweep, sweep:SCENARIO, rlimit, eintr, fdreuse, fork, sigproc, extras
 *                             (default: all of them, in that order)
 *
 * Each part runs in a child process of its own, with a time limit, its stderr appended to
 * $FAULTS_LOGDIR/PART.log (default build/faults/logs), so that an abort, a sanitizer report,
 * a leak report at exit or a hang is a failure of that part and the others still run. The
 * allocation sweep runs one child per scenario; when that child dies at a fault point the
 * point is counted as failed and a new child carries on from the next point.
 *
 * Prints one line per check case (-v) or per failed case, the sweep's points per scenario, then
 * the summary line and, alone on the last line, `N passed, N failed`. Exits 1 when a case failed.
 */
#include "faults.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static bool verbose;
static const char *logdir = "build/faults/logs";
static int passed, failed;

/* ---- Children ---- */

typedef struct {
    char *text;          /* everything the child reported, NUL-terminated */
    size_t length, capacity;
    int status;          /* waitpid status */
    bool killed;         /* we killed it: time limit or silence */
    char log_path[512];
    long log_offset;     /* where this child's stderr starts in the log */
} child_out;

static void append(child_out *o, const char *data, size_t n) {
    if (o->length + n + 1 > o->capacity) {
        size_t cap = (o->length + n + 1) * 2;
        char *grown = realloc(o->text, cap);
        if (!grown) abort();
        o->text = grown;
        o->capacity = cap;
    }
    memcpy(o->text + o->length, data, n);
    o->length += n;
    o->text[o->length] = '\0';
}

/* Run fn(arg) in a child; kill it after total seconds, or after idle seconds with no report. */
static void run_child(const char *log_name, void (*fn)(void *), void *arg, double idle, double total,
                      child_out *o) {
    memset(o, 0, sizeof *o);
    append(o, "", 0);
    snprintf(o->log_path, sizeof o->log_path, "%s/%s.log", logdir, log_name);
    int log = open(o->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    o->log_offset = log >= 0 ? lseek(log, 0, SEEK_END) : 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) abort();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) abort();
    if (pid == 0) {
        close(p[0]);
        fr_out = p[1];
        if (log >= 0) {
            dup2(log, STDERR_FILENO);
            dup2(log, STDOUT_FILENO);
        }
        setpgid(0, 0); /* so that a kill reaches the grandchildren of the fork part too */
        fn(arg);
        exit(0); /* a normal exit: LeakSanitizer checks the child's heap */
    }
    if (log >= 0) close(log);
    close(p[1]);
    double start = now_s(), last = start;
    for (;;) {
        double t = now_s();
        if (t - start > total || t - last > idle) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            o->killed = true;
            break;
        }
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int n = poll(&pfd, 1, 100);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        char buf[4096];
        ssize_t r = read(p[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        append(o, buf, (size_t)r);
        last = now_s();
    }
    for (;;) { /* the rest, after a kill */
        char buf[4096];
        ssize_t r = read(p[0], buf, sizeof buf);
        if (r <= 0) break;
        append(o, buf, (size_t)r);
    }
    close(p[0]);
    while (waitpid(pid, &o->status, 0) < 0 && errno == EINTR) {}
    if (o->killed) kill(-pid, SIGKILL); /* grandchildren left behind */
}

static void describe_status(const child_out *o, char *buf, size_t size) {
    if (o->killed) snprintf(buf, size, "killed after its time limit (hung)");
    else if (WIFSIGNALED(o->status)) snprintf(buf, size, "died of signal %d (%s)", WTERMSIG(o->status), strsignal(WTERMSIG(o->status)));
    else if (WIFEXITED(o->status) && WEXITSTATUS(o->status) == 23) snprintf(buf, size, "exit status 23: LeakSanitizer found leaks");
    else if (WIFEXITED(o->status)) snprintf(buf, size, "exit status %d", WEXITSTATUS(o->status));
    else snprintf(buf, size, "status 0x%x", o->status);
}

static bool child_clean(const child_out *o) {
    return !o->killed && WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0;
}

/* The first telling lines of what the child wrote to its log: the error, and the first frames in
 * the core. */
static void log_excerpt(const child_out *o, char *buf, size_t size) {
    buf[0] = '\0';
    FILE *f = fopen(o->log_path, "r");
    if (!f) return;
    fseek(f, o->log_offset, SEEK_SET);
    char line[1024];
    size_t used = 0;
    int frames = 0;
    bool error = false;
    while (fgets(line, sizeof line, f) && used + 8 < size) {
        bool is_error = strstr(line, "ERROR: ") || strstr(line, "runtime error") || strstr(line, "crunloop: ") ||
                        strstr(line, "SUMMARY: ");
        bool is_frame = error && frames < 4 && strstr(line, "Sources/CRunLoopCore/");
        if (!is_error && !is_frame) continue;
        if (is_error && error && !strstr(line, "SUMMARY")) continue;
        if (is_error) error = true;
        if (is_frame) frames++;
        line[strcspn(line, "\n")] = '\0';
        char *l = line;
        while (*l == ' ') l++;
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? " | " : "", l);
        if (strstr(line, "SUMMARY")) break;
    }
    fclose(f);
}

/* Count the case lines of a part's output; print the failures (all, with -v). */
static void tally(const char *part, const child_out *o) {
    int cases = 0;
    for (const char *l = o->text; *l;) {
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        if (n > 8 && strncmp(l, "case ok ", 8) == 0) {
            passed++;
            cases++;
            if (verbose) printf("  ok    %.*s\n", (int)(n - 8), l + 8);
        } else if (n > 10 && strncmp(l, "case FAIL ", 10) == 0) {
            failed++;
            cases++;
            printf("  FAIL  %.*s\n", (int)(n - 10), l + 10);
        }
        l = end ? end + 1 : l + n;
    }
    if (!child_clean(o)) {
        char why[256], excerpt[1536];
        describe_status(o, why, sizeof why);
        log_excerpt(o, excerpt, sizeof excerpt);
        printf("  FAIL  %s: the part's process %s%s%s (log: %s)\n", part, why, excerpt[0] ? ": " : "", excerpt,
               o->log_path);
        failed++;
    } else if (cases == 0) {
        printf("  FAIL  %s: reported no case\n", part);
        failed++;
    }
}

static long stat_of(const child_out *o, const char *key, long otherwise) {
    size_t k = strlen(key);
    for (const char *l = o->text; (l = strstr(l, "stat ")); l++) {
        if ((l == o->text || l[-1] == '\n') && strncmp(l + 5, key, k) == 0 && l[5 + k] == ' ')
            return strtol(l + 6 + k, NULL, 10);
    }
    return otherwise;
}

/* ---- The sweep: one child per scenario, restarted after the point where it died ---- */

typedef struct { int scenario, mode; long point; } sweep_arg;

static void sweep_child(void *arg) {
    const sweep_arg *a = arg;
    part_sweep(a->scenario, a->mode, a->point);
}

enum { SITES = 8 };
typedef struct {
    long points;             /* fault points of the scenario (its unarmed run) */
    long recount;            /* those of a second unarmed run, when they differ; else 0 */
    long runs[3], reached[3], failing[3];
    char site[3][SITES][96]; /* distinct failed checks (file:line) */
    char example[3][SITES][640];
    long site_count[3][SITES];
    int sites[3];
} sweep_stats;

static void note_failure(sweep_stats *s, int mode, long point, const char *message) {
    s->failing[mode]++;
    char site[96];
    snprintf(site, sizeof site, "%s", message);
    char *colon = strchr(site, ':');
    if (colon && (colon = strchr(colon + 1, ':'))) *colon = '\0'; /* file:line */
    for (int i = 0; i < s->sites[mode]; i++)
        if (strcmp(s->site[mode][i], site) == 0) {
            s->site_count[mode][i]++;
            return;
        }
    if (s->sites[mode] == SITES) return;
    int i = s->sites[mode]++;
    snprintf(s->site[mode][i], sizeof s->site[mode][i], "%s", site);
    snprintf(s->example[mode][i], sizeof s->example[mode][i], "point %ld: %s", point, message);
    s->site_count[mode][i] = 1;
}

static const char *mode_label[3] = {"count", "single", "persistent"};

/* Returns the scenario's fault points (0 when it could not even count them). */
static long sweep_one(int scenario, double budget) {
    const char *name = sweep_scenario_name(scenario);
    char log_name[128];
    snprintf(log_name, sizeof log_name, "sweep-%s", name);
    sweep_stats st;
    memset(&st, 0, sizeof st);
    sweep_arg a = {scenario, 1, 0};
    double start = now_s();
    bool done = false, gave_up = false;
    int deaths = 0;
    while (!done) {
        child_out o;
        run_child(log_name, sweep_child, &a, 8.0, budget, &o);
        int started_mode = -1;
        long started_point = -1;
        bool ended = true;
        for (char *l = o.text; *l;) {
            char *end = strchr(l, '\n');
            if (end) *end = '\0';
            int m, c;
            long k, n, r;
            char msg[700];
            if (sscanf(l, "points %ld", &n) == 1) {
                st.points = n;
            } else if (sscanf(l, "recount %ld", &n) == 1) {
                st.recount = n;
            } else if (sscanf(l, "start %d %ld", &m, &k) == 2) {
                started_mode = m;
                started_point = k;
                ended = false;
            } else if (sscanf(l, "end %d %ld %ld", &m, &k, &r) == 3) {
                st.runs[m]++;
                st.reached[m] += r;
                ended = true;
            } else if (sscanf(l, "fail %d %ld %d %699[^\n]", &m, &k, &c, msg) == 4) {
                note_failure(&st, m, k, msg);
            } else if (strcmp(l, "done") == 0) {
                done = true;
            }
            if (!end) break;
            l = end + 1;
        }
        if (done && child_clean(&o)) {
            free(o.text);
            break;
        }
        char why[256], excerpt[1536], message[2048];
        describe_status(&o, why, sizeof why);
        log_excerpt(&o, excerpt, sizeof excerpt);
        if (done) { /* finished, but its exit was not clean: leaks at exit, say */
            snprintf(message, sizeof message, "sweep.c: the sweep's process, after its last point: %s%s%s", why,
                     excerpt[0] ? ": " : "", excerpt);
            note_failure(&st, 2, -1, message);
            free(o.text);
            break;
        }
        if (started_point < 0) {
            snprintf(message, sizeof message, "sweep.c: the sweep's process %s before its first point%s%s", why,
                     excerpt[0] ? ": " : "", excerpt);
            note_failure(&st, 1, -1, message);
            free(o.text);
            gave_up = true;
            break;
        }
        if (!ended || !child_clean(&o)) { /* died at that point (else it ended it deliberately, after a
                                              hang or a leak it reported) */
            snprintf(message, sizeof message, "sweep.c: the process %s%s%s", why, excerpt[0] ? ": " : "", excerpt);
            note_failure(&st, started_mode, started_point, message);
            if (!ended) {
                st.runs[started_mode]++;
                st.reached[started_mode]++;
            }
            deaths++;
        }
        free(o.text);
        a.mode = started_mode;
        a.point = started_point + 1;
        if (a.point >= st.points) {
            a.mode++;
            a.point = 0;
        }
        if (a.mode > 2) break;
        if (now_s() - start > budget) {
            gave_up = true;
            break;
        }
    }
    printf("sweep %-12s %4ld points:", name, st.points);
    for (int m = 1; m <= 2; m++) {
        printf(" %s %ld runs %ld failing", mode_label[m], st.runs[m], st.failing[m]);
        if (st.reached[m] < st.runs[m]) printf(" (%ld did not reach their point)", st.runs[m] - st.reached[m]);
        if (m == 1) printf(";");
    }
    if (st.recount) printf(" (timing-dependent: another unarmed run passed %ld points)", st.recount);
    if (deaths) printf(" (%d process deaths)", deaths);
    if (gave_up) printf(" (gave up: %.0f s budget or no progress)", budget);
    printf("\n");
    for (int m = 1; m <= 2; m++) {
        bool ok = st.points > 0 && st.runs[m] >= st.points && st.failing[m] == 0;
        if (ok) {
            passed++;
            if (verbose) printf("  ok    sweep %s %s\n", name, mode_label[m]);
            continue;
        }
        failed++;
        if (st.points <= 0)
            printf("  FAIL  sweep %s %s: the unarmed run counted no fault point (expected at least one)\n", name,
                   mode_label[m]);
        else
            printf("  FAIL  sweep %s %s: %ld of %ld points failed, %ld swept (expected none failed, all swept)\n", name,
                   mode_label[m], st.failing[m], st.points, st.runs[m]);
        for (int i = 0; i < st.sites[m]; i++)
            printf("          x%-4ld %s\n", st.site_count[m][i], st.example[m][i]);
    }
    return st.points;
}

/* ---- Parts ---- */

static void rlimit_child(void *arg) { (void)arg; part_rlimit(); }
static void eintr_child(void *arg) { (void)arg; part_eintr(); }
static void fdreuse_child(void *arg) { (void)arg; part_fdreuse(); }
static void fork_child(void *arg) { (void)arg; part_fork(); }
static void sigproc_child(void *arg) { (void)arg; part_sigproc(); }
static void extras_child(void *arg) { (void)arg; part_extras(); }

static char summary[1024];
static size_t summary_used;

/* Append "TEXT, " to the summary line. */
static void summarize(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void summarize(const char *format, ...) {
    if (summary_used + 3 >= sizeof summary) return;
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(summary + summary_used, sizeof summary - summary_used, format, ap);
    va_end(ap);
    if (n < 0) return;
    summary_used += (size_t)n;
    if (summary_used > sizeof summary - 3) summary_used = sizeof summary - 3; /* truncated */
    summary[summary_used++] = ',';
    summary[summary_used++] = ' ';
    summary[summary_used] = '\0';
}

int main(int argc, char **argv) {
    const char *env = getenv("FAULTS_LOGDIR");
    if (env && *env) logdir = env;
    mkdir(logdir, 0755);
    setvbuf(stdout, NULL, _IOLBF, 0);
    bool want_sweep = false, want_rlimit = false, want_eintr = false, want_fdreuse = false, want_fork = false;
    bool want_sigproc = false, want_extras = false;
    const char *only_scenario = NULL;
    int parts = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) verbose = true;
        else if (strcmp(argv[i], "sweep") == 0) want_sweep = true, parts++;
        else if (strncmp(argv[i], "sweep:", 6) == 0) want_sweep = true, only_scenario = argv[i] + 6, parts++;
        else if (strcmp(argv[i], "rlimit") == 0) want_rlimit = true, parts++;
        else if (strcmp(argv[i], "eintr") == 0) want_eintr = true, parts++;
        else if (strcmp(argv[i], "fdreuse") == 0) want_fdreuse = true, parts++;
        else if (strcmp(argv[i], "fork") == 0) want_fork = true, parts++;
        else if (strcmp(argv[i], "sigproc") == 0) want_sigproc = true, parts++;
        else if (strcmp(argv[i], "extras") == 0) want_extras = true, parts++;
        else {
            fprintf(stderr, "usage: %s [-v] [sweep | sweep:SCENARIO | rlimit | eintr | fdreuse | fork | sigproc | extras]...\n", argv[0]);
            return 2;
        }
    }
    if (!parts) want_sweep = want_rlimit = want_eintr = want_fdreuse = want_fork = want_sigproc = want_extras = true;
    /* Old logs would only confuse. */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f '%s'/*.log", logdir);
    if (system(cmd) != 0) {}

    double t0 = now_s();

    if (want_sweep) {
        int before = failed, scenarios = 0;
        long points = 0;
        for (int s = 0; s < sweep_scenario_count(); s++) {
            if (only_scenario && strcmp(only_scenario, sweep_scenario_name(s)) != 0) continue;
            points += sweep_one(s, 20.0);
            scenarios++;
        }
        summarize("%d scenarios, %ld allocation points swept (x2 modes)%s", scenarios, points,
                  failed == before ? "" : " FAIL");
    }
    if (want_rlimit) {
        int before = failed;
        child_out o;
        run_child("rlimit", rlimit_child, NULL, 15.0, 25.0, &o);
        tally("rlimit", &o);
        summarize("rlimit %s", failed == before ? "ok" : "FAIL");
        free(o.text);
    }
    if (want_eintr) {
        int before = failed;
        child_out o;
        run_child("eintr", eintr_child, NULL, 15.0, 25.0, &o);
        tally("eintr", &o);
        summarize("eintr %ld signals%s", stat_of(&o, "signals", 0), failed == before ? "" : " FAIL");
        free(o.text);
    }
    if (want_fdreuse) {
        int before = failed;
        child_out o;
        run_child("fdreuse", fdreuse_child, NULL, 15.0, 25.0, &o);
        tally("fdreuse", &o);
        summarize("fd reuse %s", failed == before ? "ok" : "FAIL");
        free(o.text);
    }
    if (want_fork) {
        int before = failed;
        child_out o;
        run_child("fork", fork_child, NULL, 20.0, 40.0, &o);
        tally("fork", &o);
        long ok = stat_of(&o, "children_ok", 0), all = stat_of(&o, "children", 0);
        if (ok == all && failed == before) summarize("fork %ld children ok", all);
        else summarize("fork %ld/%ld children ok FAIL", ok, all);
        free(o.text);
    }
    if (want_sigproc) {
        int before = failed;
        child_out o;
        run_child("sigproc", sigproc_child, NULL, 30.0, 60.0, &o);
        tally("sigproc", &o);
        summarize("signal/process sources %ld+%ld points%s", stat_of(&o, "points_pidfd", 0),
                  stat_of(&o, "points_fallback", 0), failed == before ? "" : " FAIL");
        free(o.text);
    }
    if (want_extras) {
        int before = failed;
        child_out o;
        run_child("extras", extras_child, NULL, 15.0, 30.0, &o);
        tally("extras", &o);
        summarize("timer extras %s", failed == before ? "ok" : "FAIL");
        free(o.text);
    }
    if (summary_used >= 2) summary[summary_used - 2] = '\0';
    printf("faults: %s (%.1f s) \xe2\x80\x94 %d passed, %d failed\n", summary, now_s() - t0, passed, failed);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
