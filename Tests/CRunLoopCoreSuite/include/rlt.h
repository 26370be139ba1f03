/*
 * rlt.h - the C core's test harness. The same test files run under `make check` (a small C
 * runner) and under `swift test` (a Swift test that runs each C test by index).
 *
 * A test is a function defined with RLT_TEST(name) in any t_*.c file of this folder; it
 * registers itself at load time. Each test runs on a fresh thread of its own, so it gets a fresh
 * current loop that is torn down when the test ends. RLT_CHECK records a failure with file, line
 * and the failed expression and returns from the test; RLT_CHECK_EQ does the same for two
 * integers and prints both values. In a debug build of the core (-DRL_DEBUG), every check is
 * also a step after which the calling thread's loop must pass rl_loop_verify (the core's
 * invariant checker): a violation fails the test with the checker's report.
 */
#ifndef RLT_H
#define RLT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The registry, as the runners see it. */
size_t rlt_count(void);
const char *rlt_name(size_t index);
/* Run test index on a new thread and join it. Returns 0 when it passed, else 1 with a message
 * (file:line: what failed) copied into message. */
int rlt_run(size_t index, char *message, size_t message_size);

/* What the macros below use. */
typedef void (*rlt_fn)(void);
void rlt_register(const char *name, rlt_fn fn);
void rlt_fail(const char *file, int line, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* Debug builds: verify the calling thread's loop, if it has one; 1 (and a failure recorded)
 * when it is inconsistent. Other builds: 0. */
int rlt_step(const char *file, int line);

#define RLT_TEST(name)                                                                \
    static void rlt_test_##name(void);                                                \
    __attribute__((constructor)) static void rlt_register_##name(void) {              \
        rlt_register(#name, rlt_test_##name);                                         \
    }                                                                                 \
    static void rlt_test_##name(void)

#define RLT_CHECK(cond)                                                               \
    do {                                                                              \
        if (!(cond)) { rlt_fail(__FILE__, __LINE__, "%s", #cond); return; }           \
        if (rlt_step(__FILE__, __LINE__)) return;                                     \
    } while (0)

#define RLT_CHECK_EQ(a, b)                                                            \
    do {                                                                              \
        long long rlt_a_ = (long long)(a), rlt_b_ = (long long)(b);                   \
        if (rlt_a_ != rlt_b_) {                                                       \
            rlt_fail(__FILE__, __LINE__, "%s == %s (%lld != %lld)", #a, #b, rlt_a_, rlt_b_); \
            return;                                                                   \
        }                                                                             \
        if (rlt_step(__FILE__, __LINE__)) return;                                     \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
