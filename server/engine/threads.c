#include "threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct threadpool {
    int n;
    pthread_t *tids;
    int started; /* workers actually created (for cleanup after a failed start) */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long generation; /* bumped for each threads_run; workers wait for a change */
    int pending;              /* workers still busy with the current generation */
    int quit;
    threads_fn fn;
    void *ctx;
    atomic_long next; /* work items handed out in the current run (threads_next) */
    long next_solo;   /* the same for a pool of one, without atomics */
};

typedef struct {
    threadpool *p;
    int tid;
} worker_arg;

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    threadpool *p = wa->p;
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        threads_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, wa->tid, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

/* The worker arguments live right after the struct, in the same allocation. */
static worker_arg *worker_args_of(threadpool *p) { return (worker_arg *)(p + 1); }

engine_status threads_create(threadpool **out, int n, engine_error *err) {
    *out = NULL;
    if (n < 1 || n > 256) return engine_fail(err, ENGINE_ERR_INVALID, "thread count %d is not in 1..256", n);
    threadpool *p = calloc(1, sizeof *p + (size_t)n * sizeof(worker_arg));
    if (!p) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for a thread pool");
    p->n = n;
    p->tids = calloc((size_t)n, sizeof *p->tids);
    if (!p->tids) {
        free(p);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for a thread pool");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    worker_arg *wa = worker_args_of(p);
    for (int i = 1; i < n; i++) {
        wa[i].p = p;
        wa[i].tid = i;
        if (pthread_create(&p->tids[i], NULL, worker_main, &wa[i]) != 0) {
            threads_free(p);
            return engine_fail(err, ENGINE_ERR_NOMEM, "cannot start worker thread %d of %d", i, n);
        }
        p->started = i;
    }
    *out = p;
    return ENGINE_OK;
}

void threads_free(threadpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->started; i++) pthread_join(p->tids[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->tids);
    free(p);
}

int threads_count(const threadpool *p) { return p ? p->n : 1; }

void threads_run(threadpool *p, threads_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        if (p) p->next_solo = 0;
        fn(ctx, 0, 1);
        return;
    }
    atomic_store(&p->next, 0);
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

long threads_next(threadpool *p) {
    if (p->n == 1) return p->next_solo++;
    return atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
}

void threads_split(long n, int tid, int nth, long *lo, long *hi) {
    long base = n / nth, rem = n % nth;
    *lo = tid * base + (tid < rem ? tid : rem);
    *hi = *lo + base + (tid < rem ? 1 : 0);
}
