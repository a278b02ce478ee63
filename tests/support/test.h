/* A small test harness: each test program is a list of TEST functions run by RUN().
 * Every case prints one line "PASS name" or "FAIL name: file:line: message"; tests/run.sh
 * counts those lines over all programs. A CHECK that fails ends the current case only. */
#ifndef ATTNLAB_TEST_H
#define ATTNLAB_TEST_H

#include <math.h>
#include <stdio.h>

extern int test_failed_now; /* set by a failing CHECK inside the running case */
extern int test_pass_count, test_fail_count;

void test_fail_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void test_run(const char *name, void (*fn)(void));
/* Ends nothing by itself: marks the running case skipped, so it prints "SKIP name: reason" instead
 * of PASS (counted neither way). For a case that cannot apply to the configuration under test (a
 * case about the SQLite file when the server under test keeps its data in PostgreSQL). */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int test_summary(void); /* prints nothing extra; returns the exit status (0 iff all passed) */

/* Work on a thread of its own, for a case that checks that something does not wait for what the
 * case holds (a lock, a pool's connections): test_thread_start runs fn(arg) (NULL when no thread
 * could start); test_thread_done_within says whether fn has returned within `seconds` (an upper
 * bound on the wait, never a measure of speed); test_thread_join waits for fn however long it takes
 * and frees the handle (t may be NULL). */
typedef struct test_thread test_thread;
test_thread *test_thread_start(void (*fn)(void *), void *arg);
int test_thread_done_within(test_thread *t, int seconds);
void test_thread_join(test_thread *t);

#define TEST(name) static void name(void)
/* Skips the rest of the running case when cond holds (see test_skip). */
#define SKIP_IF(cond, ...)                                                                                             \
    do {                                                                                                               \
        if (cond) {                                                                                                    \
            test_skip(__VA_ARGS__);                                                                                    \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)
#define RUN(name) test_run(#name, name)

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            test_fail_at(__FILE__, __LINE__, "%s", #cond);                                                             \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                           \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            test_fail_at(__FILE__, __LINE__, __VA_ARGS__);                                                             \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                             \
    do {                                                                                                               \
        long long a_ = (long long)(a), b_ = (long long)(b);                                                            \
        if (a_ != b_) {                                                                                                \
            test_fail_at(__FILE__, __LINE__, "%s == %s (%lld vs %lld)", #a, #b, a_, b_);                               \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                          \
    do {                                                                                                               \
        double a_ = (double)(a), b_ = (double)(b);                                                                     \
        if (!(fabs(a_ - b_) <= (tol))) {                                                                               \
            test_fail_at(__FILE__, __LINE__, "%s ~ %s (%.12g vs %.12g, tol %g)", #a, #b, a_, b_, (double)(tol));       \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

#endif
