/* 07-rescue-loop.c - keeping the loop alive after a fatal error (issue 11, example 7).
 *
 * Pattern: the "crash protection" run loop of iOS articles. An uncaught-exception handler, instead
 * of letting the app die, copies every mode of the current loop (CFRunLoopCopyAllModes) and runs
 * each in turn for a millisecond (CFRunLoopRunInMode(mode, 0.001, false)) until the user taps
 * Quit on an alert, so that the alert stays responsive and a crash report can still be sent.
 * Here the "exception" is an error the program detects itself (fatal_error, called from a timer
 * callout while it holds an application lock); the handler starts uploading a report over a TCP
 * socket to a collector on 127.0.0.1, in a private mode of its own, and runs the rescue loop
 * (rl_loop_copy_all_modes + rl_run_in_mode(mode, 0.001, false)) nested inside the failed callout.
 *
 * What to watch for:
 *   - the rescue loop runs every mode, so the upload (private mode), the UI timer (default mode)
 *     and the alert's Quit button (a source another thread signals) all keep working;
 *   - the failed timer is not fired again by the nested runs;
 *   - the lock the failed code held is still held: the rescue runs on the failed thread, deeper
 *     on its stack, and anything that needs that lock would deadlock (a timer probes it with
 *     trylock and sees EBUSY every time);
 *   - the loop exits only when the user quits, after the collector confirmed the whole report.
 *
 * What is and is not safe (printed at the end too):
 *   This is sound only for an error the program detects itself in a healthy process, like an
 *   Objective-C exception raised on purpose: the heap is intact and the loop's own locks are
 *   free, because callouts run with no lock of the library held. It is NOT a way to survive a
 *   real crash. After SIGSEGV, SIGBUS or an abort() from a corrupted heap, a signal handler may
 *   call only async-signal-safe functions (write, _exit, sigaction...): rl_run_in_mode takes
 *   mutexes and rl_loop_copy_all_modes calls malloc, so either may deadlock on a lock the crashed
 *   code held (malloc's, the loop's, the application's) or walk a corrupted heap. Other threads
 *   keep running meanwhile. After a real crash, write a report prepared in advance with write(2)
 *   to an fd opened in advance, restore the default action and re-raise the signal; send the
 *   report at the next launch. Even in the safe case the failed code's invariants are broken:
 *   never return into it (here the handler ends the process when the user quits).
 */
#include <crunloop.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "07-rescue-loop: check failed at line %d: %s: ", __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static const char *const TRACKING = "UITrackingRunLoopMode";
static const char *const REPORTING = "com.example.crash-reporter";
enum { REPORT_BYTES = 512 * 1024 };

static uint32_t checksum(const unsigned char *p, size_t n, uint32_t h)
{
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;   /* FNV-1a */
    return h;
}

/* ---- The collector: a plain thread with blocking sockets, standing for a remote server ----- */

static int collector_listener;

static void *collector_main(void *arg)
{
    (void)arg;
    int fd = accept(collector_listener, NULL, NULL);
    CHECK(fd >= 0, "accept: %s", strerror(errno));
    unsigned char buf[16384];
    size_t total = 0;
    uint32_t h = 2166136261u;
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
        CHECK(n > 0 || errno == EINTR, "collector read: %s", strerror(errno));
        if (n > 0) {
            h = checksum(buf, (size_t)n, h);
            total += (size_t)n;
        }
    }
    char ack[64];
    int len = snprintf(ack, sizeof ack, "received %zu %08x\n", total, h);
    CHECK(write(fd, ack, (size_t)len) == len, "collector write");
    close(fd);
    return NULL;
}

/* ---- The app --------------------------------------------------------------------------------- */

static pthread_mutex_t app_lock = PTHREAD_MUTEX_INITIALIZER;
static int app_work_entered;
static int ui_frames_in_rescue, scroll_frames_in_rescue, lock_probes, lock_probes_busy;
static bool in_rescue;

static void ui_refresh(rl_timer_t *t, void *info)
{
    (void)t, (void)info;
    if (in_rescue) ui_frames_in_rescue++;
}

static void scroll_animation(rl_timer_t *t, void *info)
{
    (void)t, (void)info;
    if (in_rescue) scroll_frames_in_rescue++;
}

/* Something that needs the application's state, as most of an app does. */
static void needs_app_lock(rl_timer_t *t, void *info)
{
    (void)t, (void)info;
    if (!in_rescue) return;
    lock_probes++;
    int r = pthread_mutex_trylock(&app_lock);   /* pthread_mutex_lock would never return */
    if (r == EBUSY) lock_probes_busy++;
    else if (r == 0) pthread_mutex_unlock(&app_lock);
}

/* ---- The crash report upload, an fd source in the reporter's own mode ------------------------ */

typedef struct {
    unsigned char *report;
    size_t sent;
    uint32_t sum;
    char ack[64];
    size_t ack_used;
    atomic_bool confirmed;   /* read by the user thread */
} upload_t;

static upload_t upload;

static void upload_io(rl_source_t *source, int fd, unsigned events, void *info)
{
    (void)events;
    upload_t *u = info;
    if (u->sent < REPORT_BYTES) {
        /* As much as the socket takes now; the rest at the next writable pass. */
        ssize_t n = write(fd, u->report + u->sent, REPORT_BYTES - u->sent);
        if (n < 0) {
            CHECK(errno == EAGAIN || errno == EINTR, "upload write: %s", strerror(errno));
            return;
        }
        u->sent += (size_t)n;
        if (u->sent == REPORT_BYTES) {
            CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown: %s", strerror(errno));
            CHECK(rl_source_set_fd_events(source, RL_FD_READABLE) == 0, "set events");
        }
        return;
    }
    ssize_t n = read(fd, u->ack + u->ack_used, sizeof u->ack - 1 - u->ack_used);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    CHECK(n >= 0, "upload read: %s", strerror(errno));
    u->ack_used += (size_t)n;
    u->ack[u->ack_used] = '\0';
    if (n > 0) return;
    rl_source_invalidate(source);
    close(fd);
    char want[64];
    snprintf(want, sizeof want, "received %d %08x\n", REPORT_BYTES, u->sum);
    CHECK(strcmp(u->ack, want) == 0, "collector says \"%s\", want \"%s\"", u->ack, want);
    atomic_store(&u->confirmed, true);
    printf("alert: crash report sent (%s) - [Quit]\n", "the collector confirmed every byte");
}

static void start_upload(const struct sockaddr_in *collector)
{
    upload.report = malloc(REPORT_BYTES);   /* allocated now: only safe because the heap is fine */
    CHECK(upload.report != NULL, "out of memory");
    int len = snprintf((char *)upload.report, REPORT_BYTES, "crash report: index out of range\n");
    for (size_t i = (size_t)len; i < REPORT_BYTES; i++) upload.report[i] = (unsigned char)('a' + i % 26);
    upload.sum = checksum(upload.report, REPORT_BYTES, 2166136261u);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    int r = connect(fd, (const struct sockaddr *)collector, sizeof *collector);
    CHECK(r == 0 || errno == EINPROGRESS, "connect: %s", strerror(errno));
    rl_context_t context = { .info = &upload };
    rl_source_t *s = rl_source_create_fd(fd, RL_FD_WRITABLE, 0, upload_io, &context);
    CHECK(s != NULL && rl_loop_add_source(rl_loop_get_current(), s, REPORTING) == 0, "upload source");
    rl_release(s);
}

/* ---- The alert's Quit button: a version-0 source the "user" thread signals ------------------ */

static atomic_bool quit;
static rl_source_t *quit_button;
static rl_loop_t *ui_loop;

static void quit_tapped(void *info) { (void)info; atomic_store(&quit, true); }

/* The user waits until the alert says the report is sent, then taps Quit. */
static void *user_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&upload.confirmed)) usleep(1000);
    rl_source_signal(quit_button);
    rl_loop_wakeup(ui_loop);
    return NULL;
}

/* ---- The handler ------------------------------------------------------------------------------ */

static struct sockaddr_in collector_addr;

static _Noreturn void fatal_error(const char *what)
{
    printf("fatal error: %s - keeping the app alive to send a report\n", what);
    start_upload(&collector_addr);
    pthread_t user;
    CHECK(pthread_create(&user, NULL, user_main, NULL) == 0, "pthread_create");

    size_t count = 0;
    char **modes = rl_loop_copy_all_modes(rl_loop_get_current(), &count);
    CHECK(modes != NULL, "rl_loop_copy_all_modes: %s", strerror(errno));
    printf("rescue loop over %zu modes:", count);
    for (size_t i = 0; i < count; i++) printf(" %s", modes[i]);
    printf("\n");

    in_rescue = true;
    unsigned rounds = 0;
    double deadline = rl_time_now() + 20;
    while (!atomic_load(&quit)) {
        for (size_t i = 0; i < count; i++) {
            int r = rl_run_in_mode(modes[i], 0.001, false);
            CHECK(r > 0, "rl_run_in_mode(%s) returned %d", modes[i], r);
        }
        rounds++;
        CHECK(rl_time_now() < deadline, "the user never got to quit");
    }
    in_rescue = false;
    pthread_join(user, NULL);

    printf("user quit after %u rounds; during the rescue: %d UI frames, %d scroll frames, "
           "%d lock probes (%d busy)\n", rounds, ui_frames_in_rescue, scroll_frames_in_rescue,
           lock_probes, lock_probes_busy);
    CHECK(atomic_load(&upload.confirmed), "quit before the report was confirmed");
    CHECK(ui_frames_in_rescue > 0, "the default-mode UI timer never fired in the rescue loop");
    CHECK(scroll_frames_in_rescue > 0, "the tracking-mode timer never fired in the rescue loop");
    CHECK(lock_probes > 0 && lock_probes_busy == lock_probes,
          "the lock held by the failed code was free in %d of %d probes", lock_probes - lock_probes_busy,
          lock_probes);
    CHECK(app_work_entered == 1, "the failed timer ran %d times", app_work_entered);
    bool ran_reporting = false;
    for (size_t i = 0; i < count; i++) ran_reporting |= strcmp(modes[i], REPORTING) == 0;
    CHECK(ran_reporting, "the reporter's mode was not among the modes");
    for (size_t i = 0; i < count; i++) free(modes[i]);
    free(modes);
    free(upload.report);

    printf("safe here: an error the program detected itself; heap intact, the loop's locks free.\n"
           "not safe after a real crash (SIGSEGV, abort): a signal handler may call only\n"
           "async-signal-safe functions, and rl_run_in_mode locks mutexes and mallocs; a lock the\n"
           "crashed code held (malloc's, the app's) deadlocks it. There: write a prepared report\n"
           "with write(2), re-raise the signal, and upload at the next launch.\n"
           "never safe: returning into the failed code (app_lock is still held by it).\n");
    exit(0);   /* the user quit: end the process; the failed code is never resumed */
}

/* The application's work: fails in the middle of a critical section. */
static void app_work(rl_timer_t *t, void *info)
{
    (void)t, (void)info;
    app_work_entered++;
    pthread_mutex_lock(&app_lock);
    int items[3] = { 1, 2, 3 };
    size_t index = 3 + (size_t)app_work_entered;   /* a bug */
    if (index >= sizeof items / sizeof items[0]) fatal_error("index out of range");
    pthread_mutex_unlock(&app_lock);
}

static rl_timer_t *add_timer(double delay, double interval, rl_timer_callback_t fn, const char *mode)
{
    rl_timer_t *t = rl_timer_create(rl_time_now() + delay, interval, 0, fn, NULL);
    CHECK(t != NULL && rl_loop_add_timer(rl_loop_get_current(), t, mode) == 0, "add timer");
    rl_release(t);   /* the loop holds it */
    return t;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ui_loop = rl_loop_get_current();
    CHECK(ui_loop != NULL, "rl_loop_get_current: %s", strerror(errno));

    collector_listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    collector_addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof collector_addr;
    CHECK(collector_listener >= 0 &&
          bind(collector_listener, (struct sockaddr *)&collector_addr, sizeof collector_addr) == 0 &&
          listen(collector_listener, 1) == 0 &&
          getsockname(collector_listener, (struct sockaddr *)&collector_addr, &len) == 0,
          "collector: %s", strerror(errno));
    pthread_t collector;
    CHECK(pthread_create(&collector, NULL, collector_main, NULL) == 0, "pthread_create");
    pthread_detach(collector);

    /* An app: a UI timer, a tracking mode with its animation, a Quit button, and some work. */
    CHECK(rl_loop_add_common_mode(ui_loop, TRACKING) == 0, "add common mode");
    add_timer(0.002, 0.002, ui_refresh, RL_DEFAULT_MODE);
    add_timer(0.002, 0.002, scroll_animation, TRACKING);
    add_timer(0.001, 0.001, needs_app_lock, RL_COMMON_MODES);
    rl_source_context_t button = { .perform = quit_tapped };
    quit_button = rl_source_create(0, &button);
    CHECK(quit_button != NULL && rl_loop_add_source(ui_loop, quit_button, RL_DEFAULT_MODE) == 0, "button");
    add_timer(0.020, 0, app_work, RL_DEFAULT_MODE);

    rl_run_in_mode(RL_DEFAULT_MODE, 10, false);
    fprintf(stderr, "07-rescue-loop: the run returned: the fatal error never happened\n");
    return 1;
}
