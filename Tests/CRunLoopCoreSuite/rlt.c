/*
 * rlt.c - the test harness declared in rlt.h.
 *
 * Tests register themselves from constructors (RLT_TEST) into a growable array. rlt_run() runs
 * one test on a new thread with an 8 MiB stack, so that each test gets a fresh current loop that
 * is torn down when the thread exits, and joins it. The first failure a test records is kept in
 * the run's record, which the test thread finds through a thread-local pointer.
 *
 * A failure recorded on a thread that is not a test thread (a helper thread a test started) goes
 * to every run in progress at that moment, since there is no telling which test it belongs to
 * when several run at once; with one run at a time (make check) that is the right one.
 *
 * A test (its body and its thread's teardown) that does not end within RLT_TIMEOUT seconds
 * (environment; default 300, 0 for none) makes the process print which test hung and abort,
 * rather than hang the whole suite.
 */
#include "rlt.h"
#ifdef RL_DEBUG
#include "../../Sources/CRunLoopCore/internal.h" /* rl_loop_verify, rl_tls_loop */
#endif

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RLT_STACK_SIZE ((size_t)8 << 20)
#define RLT_MESSAGE_MAX 1024
#define RLT_DEFAULT_TIMEOUT 300

struct rlt_entry {
    const char *name;
    rlt_fn fn;
};

static struct rlt_entry *rlt_tests;
static size_t rlt_ntests, rlt_capacity;
static pthread_mutex_t rlt_registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* One call of rlt_run(). Lives on the joining thread's stack for the duration of the run. */
struct rlt_record {
    size_t index;
    int failed;
    char message[RLT_MESSAGE_MAX];
    pthread_mutex_t lock;
    struct rlt_record *next_active;
};

static _Thread_local struct rlt_record *rlt_current;

/* Runs in progress, for failures recorded on threads that are not test threads. */
static struct rlt_record *rlt_active;
static pthread_mutex_t rlt_active_lock = PTHREAD_MUTEX_INITIALIZER;

void rlt_register(const char *name, rlt_fn fn)
{
    pthread_mutex_lock(&rlt_registry_lock);
    if (rlt_ntests == rlt_capacity) {
        size_t capacity = rlt_capacity ? rlt_capacity * 2 : 64;
        struct rlt_entry *tests = realloc(rlt_tests, capacity * sizeof *tests);
        if (tests == NULL) {
            fprintf(stderr, "rlt: out of memory registering test %s\n", name);
            abort();
        }
        rlt_tests = tests;
        rlt_capacity = capacity;
    }
    rlt_tests[rlt_ntests].name = name;
    rlt_tests[rlt_ntests].fn = fn;
    rlt_ntests++;
    pthread_mutex_unlock(&rlt_registry_lock);
}

size_t rlt_count(void)
{
    pthread_mutex_lock(&rlt_registry_lock);
    size_t n = rlt_ntests;
    pthread_mutex_unlock(&rlt_registry_lock);
    return n;
}

const char *rlt_name(size_t index)
{
    const char *name = NULL;
    pthread_mutex_lock(&rlt_registry_lock);
    if (index < rlt_ntests)
        name = rlt_tests[index].name;
    pthread_mutex_unlock(&rlt_registry_lock);
    return name;
}

static const char *rlt_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int rlt_step(const char *file, int line)
{
#ifdef RL_DEBUG
    char report[RLT_MESSAGE_MAX - 64];
    if (rl_tls_loop == NULL || rl_loop_verify(rl_tls_loop, report, sizeof report) == 0)
        return 0;
    rlt_fail(file, line, "loop inconsistent after this step: %s", report);
    return 1;
#else
    (void)file;
    (void)line;
    return 0;
#endif
}

/* Store the first failure of record; later ones are dropped. */
static void rlt_record_failure(struct rlt_record *record, const char *text)
{
    pthread_mutex_lock(&record->lock);
    if (!record->failed) {
        record->failed = 1;
        snprintf(record->message, sizeof record->message, "%s", text);
    }
    pthread_mutex_unlock(&record->lock);
}

void rlt_fail(const char *file, int line, const char *format, ...)
{
    char text[RLT_MESSAGE_MAX];
    int n = snprintf(text, sizeof text, "%s:%d: ", rlt_basename(file), line);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof text) {
        va_list ap;
        va_start(ap, format);
        vsnprintf(text + n, sizeof text - (size_t)n, format, ap);
        va_end(ap);
    }

    if (rlt_current != NULL) {
        rlt_record_failure(rlt_current, text);
        return;
    }

    /* Not on a test thread: charge every run in progress (see the top of this file). */
    int charged = 0;
    pthread_mutex_lock(&rlt_active_lock);
    for (struct rlt_record *r = rlt_active; r != NULL; r = r->next_active) {
        char tagged[RLT_MESSAGE_MAX];
        snprintf(tagged, sizeof tagged, "%.1000s (on another thread)", text);
        rlt_record_failure(r, tagged);
        charged = 1;
    }
    pthread_mutex_unlock(&rlt_active_lock);
    if (!charged)
        fprintf(stderr, "rlt: failure outside any test: %s\n", text);
}

static void *rlt_thread_main(void *arg)
{
    struct rlt_record *record = arg;
    rlt_fn fn;

    pthread_mutex_lock(&rlt_registry_lock);
    fn = rlt_tests[record->index].fn;
    pthread_mutex_unlock(&rlt_registry_lock);

    rlt_current = record;
    fn();
    /* The thread's loop and other thread-specific data are torn down after this returns, as
     * the thread exits; failures recorded then still count, and the join waits for them. */
    return NULL;
}

static long rlt_timeout_seconds(void)
{
    const char *s = getenv("RLT_TIMEOUT");
    if (s == NULL || *s == '\0')
        return RLT_DEFAULT_TIMEOUT;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0)
        return RLT_DEFAULT_TIMEOUT;
    return v;
}

static void rlt_set_message(char *message, size_t message_size, const char *text)
{
    if (message != NULL && message_size > 0)
        snprintf(message, message_size, "%s", text);
}

int rlt_run(size_t index, char *message, size_t message_size)
{
    const char *name = rlt_name(index);
    if (name == NULL) {
        char text[128];
        snprintf(text, sizeof text, "rlt: no test with index %zu (%zu registered)", index,
                 rlt_count());
        rlt_set_message(message, message_size, text);
        return 1;
    }

    struct rlt_record record;
    memset(&record, 0, sizeof record);
    record.index = index;
    pthread_mutex_init(&record.lock, NULL);

    pthread_mutex_lock(&rlt_active_lock);
    record.next_active = rlt_active;
    rlt_active = &record;
    pthread_mutex_unlock(&rlt_active_lock);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, RLT_STACK_SIZE);
    pthread_t thread;
    int err = pthread_create(&thread, &attr, rlt_thread_main, &record);
    pthread_attr_destroy(&attr);

    if (err != 0) {
        snprintf(record.message, sizeof record.message, "rlt: cannot start a thread for %s: %s",
                 name, strerror(err));
        record.failed = 1;
    } else {
        long timeout = rlt_timeout_seconds();
        if (timeout > 0) {
            /* pthread_timedjoin_np takes a CLOCK_REALTIME deadline. */
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_sec += timeout;
            err = pthread_timedjoin_np(thread, NULL, &deadline);
            if (err == ETIMEDOUT) {
                fprintf(stderr, "rlt: test %s did not end within %ld s (RLT_TIMEOUT); aborting\n",
                        name, timeout);
                fflush(stderr);
                abort();
            }
        } else {
            err = pthread_join(thread, NULL);
        }
        if (err != 0) {
            snprintf(record.message, sizeof record.message, "rlt: cannot join the thread of %s: %s",
                     name, strerror(err));
            record.failed = 1;
        }
    }

    pthread_mutex_lock(&rlt_active_lock);
    for (struct rlt_record **p = &rlt_active; *p != NULL; p = &(*p)->next_active) {
        if (*p == &record) {
            *p = record.next_active;
            break;
        }
    }
    pthread_mutex_unlock(&rlt_active_lock);

    pthread_mutex_lock(&record.lock);
    int failed = record.failed;
    if (failed)
        rlt_set_message(message, message_size, record.message);
    else
        rlt_set_message(message, message_size, "");
    pthread_mutex_unlock(&record.lock);

    pthread_mutex_destroy(&record.lock);
    return failed;
}
