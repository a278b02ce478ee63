/* Jobs: the service's worker threads.
 *
 * Two queues with their own workers, so a probe never waits behind a training run:
 *  - training: runs by id, FIFO; each worker trains one run at a time with the run's own
 *    compute-thread count (fixed when the run was created from the service's share, so the
 *    machine is not oversubscribed and a resumed run computes exactly as the first attempt);
 *  - probes: short closures (probe computations, corpus tokenization).
 *
 * A training job moves its run queued -> running -> succeeded|failed|cancelled (or interrupted
 * when the service stops under it), streams each step's metrics to the metrics writer and the
 * event bus, and keeps a checkpoint under <data-dir>/runs/<id>/checkpoint.safetensors. */
#ifndef ATTNLAB_JOBS_H
#define ATTNLAB_JOBS_H

#include <jansson.h>

#include "core/corpora.h"
#include "core/events.h"
#include "jobs/metrics_writer.h"
#include "cluster/queue.h"
#include "store/store.h"

typedef struct jobs jobs;

typedef struct {
    store *store;
    events *events;
    metrics_writer *writer;
    corpora *corpora;
    const char *data_dir;
    int train_workers; /* concurrent trainings */
    int probe_workers;
    int compute_threads; /* shared by the running trainings */
    int max_queued;      /* queued trainings beyond this are refused (429) */
    queue *queue;        /* a store shared by several nodes (store_shared): runs are claimed from it
                            (queue.h) rather than queued here; NULL on a node that trains nothing
                            (train_workers 0: it serves the API only, its runs queue in the store) */
} jobs_config;

jobs *jobs_start(const jobs_config *cfg);
/* Stops: running trainings save a checkpoint and become `interrupted`; waits for every worker. */
void jobs_stop(jobs *j);

/* The compute threads a training gets by default when `together` trainings are submitted at once:
 * compute_threads / train_workers when they fill the workers (an experiment's runs, train_workers at
 * a time), else compute_threads over those that will train at the same time, the runs queued and
 * running included (a lone run on an idle service gets every thread). At least 1. */
int jobs_threads_per_run(jobs *j, int together);
/* The compute threads all trainings share (--compute-threads): no run gets more. */
int jobs_compute_threads(const jobs *j);
/* The most trainings the queue holds (--max-queued). */
int jobs_max_queued(const jobs *j);
/* How many more trainings the queue takes now. */
int jobs_queue_room(jobs *j);
/* Queues a run whose row is already `queued`. -1 when the queue is full. */
int jobs_submit_run(jobs *j, long long run_id);
/* Queues n runs whose rows are already `queued`, all of them or (-1, the queue has no room for
 * them all) none. */
int jobs_submit_runs(jobs *j, const long long *run_ids, int n);
/* Asks a running run to stop after its current step. Returns 1 if it was running here. */
int jobs_cancel_run(jobs *j, long long run_id);
/* {"step","total_steps","eta_s","tokens_per_s"} of a run training now, or NULL. */
json_t *jobs_run_live(jobs *j, long long run_id);
/* Queued and running trainings; the sum of tokens/s of running ones. */
void jobs_stats(jobs *j, int *queued, int *running, double *tokens_per_s);
/* Where a run keeps its files, and its latest checkpoint (weights + optimiser state) there. */
void jobs_run_dir(const jobs *j, long long run_id, char *buf, size_t len);
void jobs_run_checkpoint(const jobs *j, long long run_id, char *buf, size_t len);

/* Runs fn(ctx) on a probe worker; -1 when the queue is full. */
int jobs_probe_submit(jobs *j, void (*fn)(void *), void *ctx);
/* Runs fn(ctx) on a probe worker and waits for it; -1 when the queue is full. */
int jobs_probe_call(jobs *j, void (*fn)(void *), void *ctx);

#endif
