/* Batched persistence of metric points and run progress, so that training never waits on SQLite.
 *
 * Training threads append to an in-memory queue (a mutex and a memcpy, never I/O); one writer
 * thread moves what is queued into the store in a single transaction at least every interval_ms,
 * or sooner once batch_points are waiting. If the store stalls and the queue reaches max_points,
 * new points are dropped and counted rather than blocking training or growing without bound. A
 * crash therefore loses at most the last interval of metrics. */
#ifndef ATTNLAB_METRICS_WRITER_H
#define ATTNLAB_METRICS_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct metrics_writer metrics_writer;

metrics_writer *metrics_writer_start(store *st, int interval_ms, size_t batch_points, size_t max_points);
/* Flushes everything still queued, then stops the thread. */
void metrics_writer_stop(metrics_writer *w);

/* Queues points (copied). Returns how many were dropped because the queue was full. */
size_t metrics_writer_push(metrics_writer *w, const store_metric *points, size_t n);
/* Records a run's latest step and checkpoint step, written with the next batch. */
void metrics_writer_progress(metrics_writer *w, long long run_id, int step, int checkpoint_step);
/* Blocks until everything queued before the call is in the store. */
void metrics_writer_flush(metrics_writer *w);
uint64_t metrics_writer_dropped(metrics_writer *w);

#endif
