/* An experiment's whole result for export (GET /api/experiments/{id}/bundle and bundle.csv): the
 * experiment, every run with its config and summary, and the runs' metric points, read a run at a
 * time and each series a range at a time, so that memory holds one range, whatever the
 * experiment's size. The service reads;
 * the handlers (api_bundle.c) present it as JSON or CSV, written while the client reads it. */
#ifndef ATTNLAB_SVC_BUNDLE_H
#define ATTNLAB_SVC_BUNDLE_H

#include <jansson.h>
#include <stddef.h>

#include "store/store.h"
#include "services/svc.h"

struct app;

typedef struct svc_bundle svc_bundle;

/* Loads experiment id ({"id","name","preset","base","variants","replicates",…}), its runs and the
 * config keys whose values differ among them (sorted), and bounds the answer before reading any
 * point: *points gets how many points it can hold at most, from each run's per-series counts (the
 * store's summaries) for the series matching keys (as store_metrics_points: NULL every key), each
 * cut to max_points when max_points > 0 (downsampled answers keep at most that many per series).
 * Over max_total that is SVC_INVALID, code "too_large", field "max_points", naming the count and the
 * bound, and nothing is returned. SVC_NOT_FOUND for no such experiment. */
svc_status svc_bundle_open(struct app *a, long long id, const char *keys, int max_points, size_t max_total,
                           svc_bundle **out, size_t *points, svc_error *err);
/* The experiment and the differing keys (borrowed from b). */
const json_t *svc_bundle_experiment(const svc_bundle *b);
const json_t *svc_bundle_differing(const svc_bundle *b);
/* The next run, in id order: 1 with *run (borrowed, with "summary": the store's per-key summary,
 * whose series matching the keys are the run's part of the answer, to be read a range at a time:
 * store_series_cursor), 0 after the last, -1 when the store fails. */
int svc_bundle_next(svc_bundle *b, json_t **run);
/* The keys asked for (as store_metrics_points: NULL every key). */
const char *svc_bundle_keys(const svc_bundle *b);
void svc_bundle_close(svc_bundle *b);

#endif
