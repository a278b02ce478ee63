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
/* One series of that object: {"steps","values","wall_times","count"} of n points of one key. */
json_t *api_series_one_json(const store_metric *points, size_t n, int max_points);

/* One series of a run read from the store a range at a time (store_series_cursor, ranges of
 * store_series_range_points() points), so that memory holds one range (and, downsampled, the
 * picks: at most max_points) however long the series is; the text is that of the series read whole
 * (api_series_one_json, written compactly). count and last_step are the series' from the store's
 * summary (store_metrics_summary); from since_step 0 they bound what is read (points a run writes
 * meanwhile are left out, as a read at once would have), from a later step the points are counted
 * first when the answer may be downsampled. NULL when out of memory.
 * _next writes `before` then the member "key":{…} in pieces: 1 with *text (to free) and *len, 0 at
 * the end (at once, writing nothing, when the series has no point from since_step on), -1 when the
 * store fails, memory runs out or the series lost points while it was read (the answer is cut).
 * _points gives the answer's points instead (each series downsampled as in the JSON): 1 with
 * *points[0..*n) (borrowed until the next call), 0 at the end, -1 on failure. Use one of the two.
 * _emitted: the points written so far (downsampled: the picks). */
typedef struct api_series_reader api_series_reader;
api_series_reader *api_series_reader_open(store *st, long long run_id, const char *key, int since_step, long long count,
                                          int last_step, int max_points);
int api_series_reader_next(api_series_reader *r, const char *before, char **text, size_t *len);
int api_series_reader_points(api_series_reader *r, const store_metric **points, size_t *n);
size_t api_series_reader_emitted(const api_series_reader *r);
void api_series_reader_close(api_series_reader *r);

/* The CSV of a run's points, written a piece at a time so that a long one is never held whole:
 * the header "step,wall_time,key1,key2,…" (keys sorted) and one row per step, empty cells where a
 * key has no point at that step; wall_time is that of the step's last key. The series are those
 * of summary (store_metrics_summary: keys in order, each read up to its last_step), merged by step
 * while they are read a range at a time: the ranges of all columns hold about
 * store_series_range_points() points together. api_series_csv_open: NULL when out of memory.
 * api_series_csv_next gives the next whole rows, about max bytes (the header with the first): 1
 * with *text (to free) and *len, 0 at the end, -1 when out of memory or the store fails. */
typedef struct api_series_csv api_series_csv;
api_series_csv *api_series_csv_open(store *st, long long run_id, const json_t *summary);
int api_series_csv_next(api_series_csv *c, size_t max, char **text, size_t *len);
void api_series_csv_close(api_series_csv *c);

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
