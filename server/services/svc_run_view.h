/* What a client is shown of a run, and when an answer about it may be kept: the stored row with
 * the live counters of the node training it merged in (fresher than the row, which the metrics
 * writer updates about once a second) and its brief; and the key under which an answer about an
 * ended run's metrics may be cached (api/reply_cache.h), which changes with everything the answer
 * depends on. */
#ifndef ATTNLAB_SVC_RUN_VIEW_H
#define ATTNLAB_SVC_RUN_VIEW_H

#include <jansson.h>
#include <stddef.h>

struct app;

/* A run as the API shows it: row (taken) with "step" (the live step, or the checkpoint's while a
 * resuming run loads it), "eta_s", "tokens_per_s", "cancel_requested" while it trains, and "last"
 * (its brief); returns row, or NULL (row freed) when out of memory. */
json_t *svc_run_view(struct app *a, json_t *row);
/* svc_run_view of every run of a list (in place), their briefs read together (one statement on
 * PostgreSQL rather than one per run); should that read fail, each run's is read alone. -1 when out
 * of memory (the list is then not whole). */
int svc_run_views(struct app *a, json_t *runs);

/* The cache key of an answer `what` (the route and its query) about the run of row: the run's id,
 * status, step, creation and end times (a resumed run changes them) and what; "" while the run has
 * not ended (store_run_status_ended: it may still write metrics) or when the key would not fit. */
void svc_run_cache_key(const json_t *row, const char *what, char *key, size_t cap);

#endif
