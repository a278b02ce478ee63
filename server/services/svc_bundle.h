/* An experiment's whole result for export (GET /api/experiments/{id}/bundle and bundle.csv): the
 * experiment, every run with its config and summary, and the runs' metric points, read one run at
 * a time so that memory holds one run's points, whatever the experiment's size. The service reads;
 * the handlers (api_bundle.c) present it as JSON or CSV. */
#ifndef ATTNLAB_SVC_BUNDLE_H
#define ATTNLAB_SVC_BUNDLE_H

#include <jansson.h>
#include <stddef.h>

#include "store/store.h"
#include "services/svc.h"

struct app;

/* Called once per run, in id order: differing is the config keys whose values differ among the
 * experiment's runs (as *differing below), run is the run's object (config, status, … and "summary": the
 * store's per-key summary), points its points matching the keys (ordered by key, then step), n
 * their number. The callee borrows them (it may keep run with json_incref). Returns 0 to go on, -1 to stop with
 * SVC_FAILED
 * ("out of memory"), -2 to stop with SVC_INVALID code "too_large" (message from the callee's
 * ctx is not read: the service says the answer is too large and how to ask for less). */
typedef int (*svc_bundle_run_fn)(void *ctx, const json_t *differing, json_t *run, const store_metric *points, size_t n);

/* Loads experiment id ({"id","name","preset","base","variants","replicates",…}, a new reference in
 * *experiment) and the config keys whose values differ among its runs (a new array of strings in
 * *differing, sorted), then calls fn for every run. keys: as store_metrics_points (NULL: every
 * key). SVC_NOT_FOUND for no such experiment; on any failure *experiment and *differing are NULL. */
svc_status svc_bundle_each(struct app *a, long long id, const char *keys, json_t **experiment, json_t **differing,
                           svc_bundle_run_fn fn, void *ctx, svc_error *err);

#endif
