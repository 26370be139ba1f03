/* A stand-in for rlt.c: runs the RLT_TESTs linked with it, here the heap model ones (run.sh). */
#include "rlt.h" /* the suite's header; this stub registers and runs the tests in one process */
#include <stdio.h>
#include <stdarg.h>
#include <string.h>
static struct { const char *name; rlt_fn fn; } tests[64];
static size_t n;
static int failed, any;
void rlt_register(const char *name, rlt_fn fn) { tests[n].name = name; tests[n++].fn = fn; }
void rlt_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap; va_start(ap, fmt); fprintf(stderr, "%s:%d: ", file, line); vfprintf(stderr, fmt, ap); fprintf(stderr, "\n"); va_end(ap);
    failed = 1;
}
int rlt_step(const char *file, int line) { (void)file; (void)line; return 0; }
int main(int argc, char **argv) {
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
        failed = 0; tests[i].fn();
        printf("%s: %s\n", tests[i].name, failed ? "FAIL" : "ok");
        any |= failed;
    }
    return any;
}
