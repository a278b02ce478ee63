/* Metric points: every SQL statement about the metrics table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/common/store_summary.h"
#include "store/sqlite/store_sqlite.h"

static int same_series(const store_metric *p, const store_metric *q) {
    return p->run_id == q->run_id && !strcmp(p->key, q->key);
}

static void bind_key(sqlite3_stmt *q, int i, const store_metric *p) {
    sqlite3_bind_text(q, i, p->key, -1, SQLITE_STATIC);
}

#define SUMMARY_COLUMNS STORE_SUMMARY_COLUMNS

static void summary_from_row(sqlite3_stmt *q, int col, store_summary *sum) {
    store_row r = db_row(q);
    store_summary_from_row(&r, col, sum);
}

/* The statements of one insert: the point, the old value of a step, a series' summary read,
 * recomputed from its rows, and written. */
typedef struct {
    sqlite3_stmt *point, *old, *get, *rows, *put;
} insert_stmts;

/* The series' summary row (sum->count 0 when it has none). */
static store_status summary_get(store *st, sqlite3_stmt *q, const store_metric *p, store_summary *sum) {
    store_summary_init(sum);
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, p->run_id);
    bind_key(q, 2, p);
    store_status s = db_step_one(st, q, "read metric summary");
    if (s == STORE_OK) summary_from_row(q, 0, sum);
    return s == STORE_NOT_FOUND ? STORE_OK : s;
}

/* *same: the step is stored with this very value (bit for bit). */
static store_status point_unchanged(store *st, sqlite3_stmt *q, const store_metric *p, int *same) {
    *same = 0;
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, p->run_id);
    bind_key(q, 2, p);
    sqlite3_bind_int(q, 3, p->step);
    store_status s = db_step_one(st, q, "read metric");
    if (s == STORE_OK) {
        double old = sqlite3_column_double(q, 0);
        *same = !memcmp(&old, &p->value, sizeof old);
    }
    return s == STORE_NOT_FOUND ? STORE_OK : s;
}

/* The series' summary from all its rows, in step order. */
static store_status summary_recompute(store *st, sqlite3_stmt *q, const store_metric *p, store_summary *sum,
                                      int flags) {
    store_summary_init(sum);
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, p->run_id);
    bind_key(q, 2, p);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        store_summary_add(sum, sqlite3_column_int(q, 0), sqlite3_column_double(q, 1), flags);
    return rc == SQLITE_DONE ? STORE_OK : db_error(st, "recompute metric summary");
}

static store_status summary_put(store *st, sqlite3_stmt *q, const store_metric *p, const store_summary *sum) {
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, p->run_id);
    bind_key(q, 2, p);
    sqlite3_bind_int64(q, 3, sum->count);
    sqlite3_bind_int(q, 4, sum->last_step);
    sqlite3_bind_double(q, 5, sum->last_value);
    sqlite3_bind_double(q, 6, sum->min_value);
    sqlite3_bind_int(q, 7, sum->min_step);
    sqlite3_bind_double(q, 8, sum->max_value);
    sqlite3_bind_double(q, 9, sum->sum); /* NaN is stored as NULL */
    sqlite3_bind_double(q, 10, sum->sum_err);
    return sqlite3_step(q) == SQLITE_DONE ? STORE_OK : db_error(st, "write metric summary");
}

/* One series' points of a batch (sorted by step, one per step), with its summary (the rule:
 * store_summary.h). A point after the summary's last step folds in; one at or before it that
 * stores the value already there (a bit-identical resume rewriting its steps) changes nothing;
 * any other (a rewritten step with another value, a step arriving late) has the summary
 * recomputed from the series' rows once the batch's points are in. A run deleted meanwhile fails
 * the foreign key: its points are skipped. */
static store_status insert_series(store *st, const insert_stmts *x, const store_metric *points, const size_t *idx,
                                  size_t n, int flags) {
    store_summary sum;
    store_status s = summary_get(st, x->get, &points[idx[0]], &sum);
    int recompute = 0, changed = 0;
    for (size_t i = 0; s == STORE_OK && i < n; i++) {
        const store_metric *p = &points[idx[i]];
        int same = 0;
        if (!recompute && sum.count > 0 && p->step <= sum.last_step) {
            s = point_unchanged(st, x->old, p, &same);
            if (s != STORE_OK) break;
            if (!same) recompute = 1;
        }
        sqlite3_reset(x->point);
        sqlite3_bind_int64(x->point, 1, p->run_id);
        bind_key(x->point, 2, p);
        sqlite3_bind_int(x->point, 3, p->step);
        sqlite3_bind_double(x->point, 4, p->value);
        sqlite3_bind_double(x->point, 5, p->wall_time);
        if (sqlite3_step(x->point) != SQLITE_DONE) {
            if (db_errcode(st) == SQLITE_CONSTRAINT_FOREIGNKEY) return STORE_OK;
            return db_error(st, "insert metric");
        }
        if (!recompute && !same) {
            store_summary_add(&sum, p->step, p->value, flags);
            changed = 1;
        }
    }
    if (s == STORE_OK && recompute) s = summary_recompute(st, x->rows, &points[idx[0]], &sum, flags);
    if (s == STORE_OK && (recompute || changed) && sum.count > 0) s = summary_put(st, x->put, &points[idx[0]], &sum);
    return s;
}

store_status store_sqlite_metrics_insert(store *st, const store_metric *points, size_t n) {
    if (n == 0) return STORE_OK;
    /* One point per (run, key, step), grouped by series in step order (store_metric_distinct). */
    size_t u;
    size_t *idx = store_metric_distinct_new(points, n, &u);
    if (!idx) return STORE_ERROR;
    int flags = db_summary_flags();
    db_lock(st);
    store_status s = db_begin(st);
    insert_stmts x = {0};
    if (s == STORE_OK) {
        x.point = db_prepare(st, "INSERT OR REPLACE INTO metrics (run_id, key, step, value, wall_time) "
                                 "VALUES (?, ?, ?, ?, ?)");
        x.old = x.point ? db_prepare(st, "SELECT value FROM metrics WHERE run_id = ? AND key = ? AND step = ?") : NULL;
        x.get = x.old ? db_prepare(st, "SELECT " SUMMARY_COLUMNS " FROM metric_summaries WHERE run_id = ? AND key = ?")
                      : NULL;
        x.rows =
            x.get ? db_prepare(st, "SELECT step, value FROM metrics WHERE run_id = ? AND key = ? ORDER BY step") : NULL;
        x.put = x.rows ? db_prepare(st, "INSERT INTO metric_summaries (run_id, key, " SUMMARY_COLUMNS
                                        ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, key) DO UPDATE "
                                        "SET count = excluded.count, last_step = excluded.last_step, "
                                        "last_value = excluded.last_value, min_value = excluded.min_value, "
                                        "min_step = excluded.min_step, max_value = excluded.max_value, "
                                        "sum = excluded.sum, sum_err = excluded.sum_err")
                       : NULL;
        if (!x.put) s = STORE_ERROR;
    }
    for (size_t i = 0, end; s == STORE_OK && i < u; i = end) {
        for (end = i + 1; end < u && same_series(&points[idx[i]], &points[idx[end]]); end++) {}
        s = insert_series(st, &x, points, idx + i, end - i, flags);
    }
    sqlite3_finalize(x.point);
    sqlite3_finalize(x.old);
    sqlite3_finalize(x.get);
    sqlite3_finalize(x.rows);
    sqlite3_finalize(x.put);
    s = db_finish(st, s);
    db_unlock(st);
    free(idx);
    return s;
}

/* The points of a prepared statement's rows (key, step, value, wall_time; q NULL: it could not be
 * prepared) matching keys, under the read lock taken by the caller, which this releases. */
static store_status points_of(store *st, sqlite3_stmt *q, long long run_id, const char *keys, store_metric **points,
                              size_t *n) {
    store_points got = {0};
    store_status s = q ? STORE_OK : STORE_ERROR;
    int rc = SQLITE_DONE;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        store_row r = db_row(q);
        if (store_points_add_row(&got, &r, run_id, keys) < 0) s = STORE_ERROR;
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "read metrics");
    sqlite3_finalize(q);
    db_read_unlock(st);
    return store_points_done(s, &got, points, n);
}

store_status store_sqlite_metrics_points(store *st, long long run_id, const char *keys, int since_step,
                                         store_metric **points, size_t *n) {
    *points = NULL;
    *n = 0;
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT key, step, value, wall_time FROM metrics WHERE run_id = ? AND step >= ? "
                                     "ORDER BY key, step");
    if (q) {
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int(q, 2, since_step);
    }
    return points_of(st, q, run_id, keys, points, n);
}

store_status store_sqlite_metrics_range(store *st, long long run_id, const char *key, int from_step, int to_step,
                                        size_t limit, store_metric **points, size_t *n) {
    *points = NULL;
    *n = 0;
    limit = store_range_limit(limit);
    if (from_step >= to_step) return STORE_OK;
    db_read_lock(st);
    /* The primary key (run_id, key, step) holds the range in step order: one seek, then `limit` rows. */
    sqlite3_stmt *q = db_prepare(st, "SELECT key, step, value, wall_time FROM metrics WHERE run_id = ? AND key = ? "
                                     "AND step >= ? AND step < ? ORDER BY step LIMIT ?");
    if (q) {
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_text(q, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_int(q, 3, from_step);
        sqlite3_bind_int(q, 4, to_step);
        sqlite3_bind_int64(q, 5, (sqlite3_int64)limit);
    }
    return points_of(st, q, run_id, NULL, points, n);
}

store_status store_sqlite_metrics_summary(store *st, long long run_id, json_t **out) {
    *out = NULL;
    json_t *sum = json_object();
    int flags = db_summary_flags();
    db_read_lock(st);
    store_status s = sum ? STORE_OK : db_fail("summary: out of memory");
    /* One row per series (migration 0008): step_of_min is the first step holding the minimum,
     * mean the one avg() gives over the rows. */
    sqlite3_stmt *q = s == STORE_OK ? db_prepare(st, "SELECT key, " SUMMARY_COLUMNS
                                                     " FROM metric_summaries WHERE run_id = ? ORDER BY key")
                                    : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    int rc = SQLITE_DONE;
    if (s == STORE_OK) sqlite3_bind_int64(q, 1, run_id);
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        store_summary m;
        summary_from_row(q, 1, &m);
        if (json_object_set_new(sum, (const char *)sqlite3_column_text(q, 0), store_summary_json(&m, flags)) < 0)
            s = db_fail("summary: out of memory");
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "summary");
    sqlite3_finalize(q);
    db_read_unlock(st);
    return store_list_done(s, sum, 0, out, NULL);
}

store_status store_sqlite_run_briefs(store *st, const long long *ids, size_t n, json_t **out) {
    *out = NULL;
    /* In-process: each run's brief is a few index lookups, no round trip to batch. */
    json_t *all = json_array();
    store_status s = all ? STORE_OK : db_fail("brief: out of memory");
    for (size_t i = 0; s == STORE_OK && i < n; i++) {
        json_t *brief = NULL;
        s = store_sqlite_run_brief(st, ids[i], &brief);
        if (s == STORE_OK && json_array_append_new(all, brief) < 0) s = db_fail("brief: out of memory");
    }
    return store_list_done(s, all, 0, out, NULL);
}

store_status store_sqlite_run_brief(store *st, long long run_id, json_t **out) {
    *out = NULL;
    json_t *brief = json_object();
    db_read_lock(st);
    store_status s = brief ? STORE_OK : db_fail("brief: out of memory");
    static const char *const keys[] = {"loss", "val_loss"};
    /* Index lookups in the series' summaries (migration 0008): a series without points has none. */
    sqlite3_stmt *q =
        s == STORE_OK
            ? db_prepare(st, "SELECT last_value, min_value FROM metric_summaries WHERE run_id = ? AND key = ?")
            : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    for (int k = 0; k < 2 && s == STORE_OK; k++) {
        sqlite3_reset(q);
        sqlite3_bind_int64(q, 1, run_id);
        db_bind_text(q, 2, keys[k]);
        s = db_step_one(st, q, "brief");
        if (s == STORE_NOT_FOUND) {
            s = STORE_OK;
            continue;
        }
        if (s == STORE_OK &&
            store_brief_series(brief, keys[k], sqlite3_column_double(q, 0), sqlite3_column_double(q, 1)) < 0)
            s = db_fail("brief: out of memory");
    }
    sqlite3_finalize(q);
    /* The temperatures at the last step of tau.0.0: the tau.* series whose last step it is (all
     * of them are written at every step together). */
    q = s == STORE_OK ? db_prepare(st, "SELECT min(last_value), max(last_value), count(*) FROM metric_summaries "
                                       "WHERE run_id = ?1 AND key >= 'tau.' AND key < 'tau/' AND last_step = "
                                       "(SELECT last_step FROM metric_summaries WHERE run_id = ?1 AND key = 'tau.0.0')")
                      : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, run_id);
        s = db_step_one(st, q, "brief");
        if (s == STORE_NOT_FOUND) s = db_fail("brief: an aggregate gave no row");
        if (s == STORE_OK && sqlite3_column_int64(q, 2) > 0 &&
            store_brief_tau(brief, sqlite3_column_double(q, 0), sqlite3_column_double(q, 1)) < 0)
            s = db_fail("brief: out of memory");
    }
    sqlite3_finalize(q);
    db_read_unlock(st);
    return store_list_done(s, brief, 0, out, NULL);
}
