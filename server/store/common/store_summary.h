/* A series' summary: one row of metric_summaries (migration 0008), and how its points fold into it.
 * Both backends keep the row in the transaction that writes the series' points
 * (store_metrics_insert), and give from it what their own aggregates over the rows would give:
 *   count      the points;
 *   last_step  the highest step, last_value its value;
 *   min_value  the lowest value, min_step the first step holding it (equal values compare equal);
 *   max_value  the highest value;
 *   sum        the values summed in step order (sum_err: SQLite's compensation term, see below),
 *              so that store_summary_mean is the backend's avg() bit for bit.
 * Nothing here touches a database. */
#ifndef ATTNLAB_STORE_SUMMARY_H
#define ATTNLAB_STORE_SUMMARY_H

#include <stddef.h>

#include "store/store.h"

typedef struct {
    long long count; /* 0: no point yet (the other fields are unset) */
    int last_step, min_step;
    double last_value, min_value, max_value;
    double sum, sum_err;
} store_summary;

/* How a backend's aggregates behave, where they differ:
 * STORE_SUMMARY_TIES_LATER: of equal values (0 and -0), min() and max() keep the later one
 *   (PostgreSQL's float8smaller/float8larger); without it the first (SQLite's min/max).
 * STORE_SUMMARY_COMPENSATED: sum()/avg() add with Kahan-Babuska-Neumaier compensation (SQLite
 *   3.43 and later: each backend knows its own flags); without it plainly (older SQLite, PostgreSQL). */
enum { STORE_SUMMARY_TIES_LATER = 1, STORE_SUMMARY_COMPENSATED = 2 };

/* An empty summary. */
void store_summary_init(store_summary *s);
/* Folds in one point; its step must be above s->last_step (any step when s is empty): points
 * arriving out of order or rewriting a step are the caller's (recompute from the rows in step
 * order, starting from store_summary_init). */
void store_summary_add(store_summary *s, int step, double value, int flags);
/* avg() over the points as the backend computes it (s->count > 0). */
double store_summary_mean(const store_summary *s, int flags);

/* The points of a batch that either backend stores, as indexes into points (idx has room for n):
 * one per (run, key, step), the last given of equal ones, NaN left out (SQL has no NaN: such a
 * step has no point), in (run, key, step) order. Returns their count. */
size_t store_metric_distinct(const store_metric *points, size_t n, size_t *idx);
/* The same into a new array (free it) with its count in *u; NULL when out of memory (recorded as
 * "insert metrics: out of memory"). */
size_t *store_metric_distinct_new(const store_metric *points, size_t n, size_t *u);

#endif
