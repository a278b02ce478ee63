/* The shared training queue: runs claimed from a store that several nodes share (store_nodes.h),
 * for this node's training workers (jobs.c uses it instead of its in-process queue when the store
 * is shared).
 *
 * A worker with room calls queue_claim, which takes the oldest queued run (or one whose node
 * stopped renewing its lease) and waits when there is none, until it is woken (a run was queued
 * here, or another node says so) or its poll interval passes (a lease that runs out is noticed
 * this way). Every claimed run's lease is renewed by a heartbeat thread every quarter of the lease
 * time; when a renewal finds the lease gone (the run was taken over after this node was presumed
 * dead) or a cancel request, queue_check says so and the worker stops the run. A node that cannot
 * renew for two thirds of the lease time (the database is unreachable) stops the run too, before
 * another node may take it over: a run never trains in two places at once. While a run is held,
 * the store fences its writes with the lease token (store_lease_hold). */
#ifndef ATTNLAB_QUEUE_H
#define ATTNLAB_QUEUE_H

#include "store/store.h"
#include "store/store_nodes.h"

typedef struct queue queue;

/* lease_s: how long a lease lasts without renewal (the time another node waits before taking a
 * run of a node that died); poll_ms: how often an idle worker looks for claimable runs. NULL when
 * out of memory or the heartbeat cannot start. */
queue *queue_start(store *st, const char *node_id, double lease_s, int poll_ms);
/* Stops the heartbeat; call after the workers have returned their runs (queue_done). */
void queue_stop(queue *q);

/* Claims a run for a worker, waiting as long as there is none: 1 with *lease set (the run is
 * running here and its writes are fenced), or 0 once stop(ctx) returns 1 (it is asked each time
 * the worker wakes). */
int queue_claim(queue *q, store_lease *lease, int (*stop)(void *), void *ctx);
/* Wakes the waiting workers: a run may have become claimable. */
void queue_wake(queue *q);
/* 1 when the held run must stop now: *lost (may be NULL) when its lease is gone, *cancel (may be
 * NULL) when someone asked for it to stop. Never blocks on the database. */
int queue_check(queue *q, long long run_id, int *lost, int *cancel);
/* The worker is done with the run (after its last write): its lease is forgotten. */
void queue_done(queue *q, long long run_id);
/* A cancel request for run_id arrived (from another node): the worker sees it at its next check. */
void queue_cancel_heard(queue *q, long long run_id);
/* Runs held here now, and claims made since the start. */
int queue_held(queue *q);
unsigned long long queue_claims(queue *q);

#endif
