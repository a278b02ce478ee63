/* Presentation of metric series for the API: points from the store (store_metrics_points, ordered
 * by key and step) as the JSON series of GET /api/runs/{id}/metrics, downsampled on request, and
 * as the CSV of GET /api/runs/{id}/metrics.csv; an experiment's replicate bands and statistics
 * (GET /api/experiments/{id}/series and /stats.csv). */
#ifndef ATTNLAB_API_SERIES_H
#define ATTNLAB_API_SERIES_H

#include <jansson.h>
#include <stddef.h>

#include "services/stats.h"
#include "store/store.h"

/* {"key": {"steps":[…], "values":[…], "wall_times":[…], "count": n}, …} from points ordered by
 * key then step. With max_points > 0 a longer series is cut into max_points/2 buckets, each keeping
 * its minimum and its maximum point (once if they coincide), in step order, so spikes survive any
 * zoom; "count" is always the full series' length. NULL when out of memory. */
json_t *api_series_json(const store_metric *points, size_t n, int max_points);

/* CSV with the header "step,wall_time,key1,key2,…" (keys sorted) and one row per step, empty
 * cells where a key has no point at that step; wall_time is that of the step's last key. Points
 * ordered by key then step. 0 with *csv (to free) and *len set, or -1 when out of memory. */
int api_series_csv(const store_metric *points, size_t n, char **csv, size_t *len);

/* ---- experiments: replicate bands and statistics (svc_stats.h) ---- */

/* {"steps":[…], "n":[…], "mean":[…], "std":[…], "min":[…], "max":[…], "count": n} from band points
 * in step order; numbers that do not exist (std of one replicate) are null. With max_points > 0 a
 * longer band is cut into max_points/2 buckets, each keeping the points where the mean is lowest
 * and highest (once if they coincide), as the run series are. NULL when out of memory. */
json_t *api_band_json(const stats_band_point *points, size_t n, int max_points);

/* The statistics answer of svc_stats_experiment as CSV, header
 * "kind,metric,variant,variant_b,replicate,run_id,value,n,mean,std,ci_lo,ci_hi,t,p,p_holm,boot_lo,boot_hi,reason,
 * ci_method" (ci_method: the summary interval's, "t" or "bootstrap"; "t" on a paired row):
 * one "value" row per run and metric (the number the statistics used), one "summary" row per
 * variant and metric, one "paired" row per comparison (mean = the paired mean difference a - b).
 * Empty cells where a figure does not exist. 0 with *csv (to free) and *len, or -1 when out of
 * memory. */
int api_stats_csv(const json_t *stats, char **csv, size_t *len);

#endif
