/*
 * common.c - reporting to main.c, check cases and small helpers.
 */
#include "faults.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int fr_out = -1;

int verify_loop(rl_loop_t *loop, char *buf, size_t size) {
    buf[0] = '\0';
    int n = rl_loop_verify(loop, buf, size);
    buf[size - 1] = '\0';
    return n;
}

void fr_line(const char *format, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(line, sizeof line - 1, format, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n') line[i] = ' '; /* one message, one line */
    line[n++] = '\n';
    int fd = fr_out >= 0 ? fr_out : STDOUT_FILENO;
    for (const char *p = line; n > 0;) { /* under PIPE_BUF: one atomic write */
        ssize_t w = write(fd, p, (size_t)n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= (int)w;
    }
}

void fr_stat(const char *key, long value) { fr_line("stat %s %ld", key, value); }

void fcase_init(fcase *c, const char *name) {
    memset(c, 0, sizeof *c);
    c->name = name;
    pthread_mutex_init(&c->lock, NULL);
}

void fcase_fail(fcase *c, const char *file, int line, const char *format, ...) {
    pthread_mutex_lock(&c->lock);
    if (c->failures++ == 0) {
        const char *base = strrchr(file, '/');
        int n = snprintf(c->first, sizeof c->first, "%s:%d: ", base ? base + 1 : file, line);
        va_list ap;
        va_start(ap, format);
        if (n > 0 && (size_t)n < sizeof c->first) vsnprintf(c->first + n, sizeof c->first - (size_t)n, format, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&c->lock);
}

bool fcase_report(fcase *c) {
    pthread_mutex_lock(&c->lock);
    bool ok = c->failures == 0;
    if (ok) fr_line("case ok %s", c->name);
    else if (c->failures == 1) fr_line("case FAIL %s: %s", c->name, c->first);
    else fr_line("case FAIL %s: %s (and %d more failed checks)", c->name, c->first, c->failures - 1);
    pthread_mutex_unlock(&c->lock);
    return ok;
}

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void nap(double s) {
    if (s <= 0) return;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

int count_open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

bool join_within(pthread_t thread, double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double end = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + seconds;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    return pthread_timedjoin_np(thread, NULL, &ts) == 0;
}
