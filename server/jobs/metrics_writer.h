/* Batched persistence of metric points and run progress, so that training never waits on the
 * store.
 *
 * Training threads append to an in-memory queue (a mutex and a memcpy, never I/O); one writer
 * thread moves what is queued into the store in a single transaction at least every interval_ms,
 * or sooner once batch_points are waiting. Points leave the queue only once they are stored: when
 * a write fails (a full disk, a database that cannot be written) they stay queued, in order, and
 * the writer tries again every interval, so a passing failure loses nothing. Nothing is dropped
 * silently: a queue at max_points refuses new points and push says how many (its caller fails the
 * run), metrics_writer_failing() tells how long writes have been failing, and flush reports a
 * failure rather than pretending. A crash loses at most the last interval of metrics. */
#ifndef ATTNLAB_METRICS_WRITER_H
#define ATTNLAB_METRICS_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

typedef struct metrics_writer metrics_writer;

/* NULL when out of memory or the thread cannot start. */
metrics_writer *metrics_writer_start(store *st, int interval_ms, size_t batch_points, size_t max_points);
/* Tries once more to store everything still queued (logging what could not be), then stops the
 * thread and frees the writer; w may be NULL. */
void metrics_writer_stop(metrics_writer *w);

/* Queues points (copied, their keys kept once each for the writer's life: the keys of trained runs,
 * a bounded set). Returns how many were refused because the queue was full or memory ran out (0
 * normally). */
size_t metrics_writer_push(metrics_writer *w, const store_metric *points, size_t n);
/* Records a run's latest step and checkpoint step, written with the next batch. */
void metrics_writer_progress(metrics_writer *w, long long run_id, int step, int checkpoint_step);
/* Asks for a write now and waits for it: 0 when everything queued before the call is in the
 * store, -1 when that write failed (the points stay queued for the next try). */
int metrics_writer_flush(metrics_writer *w);
/* 1 while the last write failed: *seconds (may be NULL) gets how long writes have been failing and
 * err (may be NULL) the store's message. 0 when the last write succeeded. */
int metrics_writer_failing(metrics_writer *w, double *seconds, char *err, size_t errlen);
/* Points refused because the queue was full, since the start. */
uint64_t metrics_writer_dropped(metrics_writer *w);
/* Write attempts that failed, since the start. */
uint64_t metrics_writer_failures(metrics_writer *w);

#endif
