#include "test.h"

#include <errno.h>
#include <pthread.h>
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

struct test_thread {
    pthread_t id;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int done;
    void (*fn)(void *);
    void *arg;
};

static void *test_thread_main(void *p) {
    test_thread *t = p;
    t->fn(t->arg);
    pthread_mutex_lock(&t->lock);
    t->done = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

test_thread *test_thread_start(void (*fn)(void *), void *arg) {
    test_thread *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->id, NULL, test_thread_main, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return NULL;
    }
    return t;
}

int test_thread_done_within(test_thread *t, int seconds) {
    if (!t) return 0;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&t->lock);
    int rc = 0;
    while (!t->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&t->cv, &t->lock, &until);
    int done = t->done;
    pthread_mutex_unlock(&t->lock);
    return done;
}

void test_thread_join(test_thread *t) {
    if (!t) return;
    pthread_join(t->id, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
