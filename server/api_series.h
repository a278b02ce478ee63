/* Presentation of metric series for the API: points from the store (store_metrics_points, ordered
 * by key and step) as the JSON series of GET /api/runs/{id}/metrics, downsampled on request, and
 * as the CSV of GET /api/runs/{id}/metrics.csv. */
#ifndef ATTNLAB_API_SERIES_H
#define ATTNLAB_API_SERIES_H

#include <jansson.h>
#include <stddef.h>

#include "store.h"

/* {"key": {"steps":[…], "values":[…], "wall_times":[…], "count": n}, …} from points ordered by
 * key then step. With max_points > 0 a longer series is cut into max_points/2 buckets, each keeping
 * its minimum and its maximum point (once if they coincide), in step order, so spikes survive any
 * zoom; "count" is always the full series' length. NULL when out of memory. */
json_t *api_series_json(const store_metric *points, size_t n, int max_points);

/* CSV with the header "step,wall_time,key1,key2,…" (keys sorted) and one row per step, empty
 * cells where a key has no point at that step; wall_time is that of the step's last key. Points
 * ordered by key then step. 0 with *csv (to free) and *len set, or -1 when out of memory. */
int api_series_csv(const store_metric *points, size_t n, char **csv, size_t *len);

#endif
