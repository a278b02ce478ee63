/* A small fixed pool of worker threads owned by one training run (or one model). The caller's
 * thread takes part as thread 0, so a pool of 1 starts no threads at all. Work is split
 * statically by thread index, which keeps every result a pure function of (inputs, thread count).
 * Pools are independent: several runs in one process each have their own. */
#ifndef ENGINE_THREADS_H
#define ENGINE_THREADS_H

#include "error.h"

typedef struct threadpool threadpool;
typedef void (*threads_fn)(void *ctx, int tid, int nthreads);

/* n in 1..256. Returns ENGINE_ERR_NOMEM / ENGINE_ERR_INVALID on failure (nothing left running). */
engine_status threads_create(threadpool **out, int n, engine_error *err);
void threads_free(threadpool *p); /* joins the workers; NULL is fine */
int threads_count(const threadpool *p);
/* Runs fn(ctx, tid, n) on every thread of the pool and returns when all have finished. */
void threads_run(threadpool *p, threads_fn fn, void *ctx);
/* Inside fn only: hands out work items 0, 1, 2, ... one per call across all threads of the
 * current threads_run (a fresh count for each run). Work split this way follows whichever
 * threads are actually getting CPU time, and as long as each item's result does not depend on
 * the thread that computed it, neither does the outcome. */
long threads_next(threadpool *p);
/* [lo, hi) of n items for thread tid of nth, contiguous and balanced. */
void threads_split(long n, int tid, int nth, long *lo, long *hi);

#endif
