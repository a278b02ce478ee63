#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

int test_failed_now;
int test_pass_count, test_fail_count;
static const char *current_name = "?";
static int skipped_now;
static char skip_reason[256];

void test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
    va_end(ap);
    skipped_now = 1;
}

void test_fail_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    test_failed_now = 1;
    printf("FAIL %s: %s:%d: ", current_name, file, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

void test_run(const char *name, void (*fn)(void)) {
    struct timespec t0, t1;
    current_name = name;
    test_failed_now = 0;
    skipped_now = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (test_failed_now) {
        test_fail_count++;
    } else if (skipped_now) {
        printf("SKIP %s: %s\n", name, skip_reason);
    } else {
        test_pass_count++;
        printf("PASS %s (%.0f ms)\n", name, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    }
    fflush(stdout);
}

int test_summary(void) { return test_fail_count ? 1 : 0; }
