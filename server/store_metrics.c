/* Metric points: every SQL statement about the metrics table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"
#include "store_pg.h"

store_status store_metrics_insert(store *st, const store_metric *points, size_t n) {
    if (st->pg) return store_pg_metrics_insert(st, points, n);
    if (n == 0) return STORE_OK;
    db_lock(st);
    store_status s = db_begin(st);
    sqlite3_stmt *q = NULL;
    if (s == STORE_OK) {
        q = db_prepare(st,
                       "INSERT OR REPLACE INTO metrics (run_id, key, step, value, wall_time) VALUES (?, ?, ?, ?, ?)");
        if (!q) s = STORE_ERROR;
    }
    for (size_t i = 0; s == STORE_OK && i < n; i++) {
        if (isnan(points[i].value)) continue; /* SQL has no NaN: such a step has no point */
        sqlite3_bind_int64(q, 1, points[i].run_id);
        sqlite3_bind_text(q, 2, points[i].key, (int)strnlen(points[i].key, sizeof points[i].key), SQLITE_STATIC);
        sqlite3_bind_int(q, 3, points[i].step);
        sqlite3_bind_double(q, 4, points[i].value);
        sqlite3_bind_double(q, 5, points[i].wall_time);
        int rc = sqlite3_step(q);
        /* A point of a run deleted meanwhile fails its foreign key: skip it, keep the rest. */
        if (rc != SQLITE_DONE && sqlite3_extended_errcode(st->db) != SQLITE_CONSTRAINT_FOREIGNKEY)
            s = db_error(st, "insert metric");
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    s = db_finish(st, s);
    db_unlock(st);
    return s;
}

/* A key matches a comma-separated list of names and prefixes ("tau.*"). */
static int key_matches(const char *key, const char *keys) {
    if (!keys || !*keys) return 1;
    const char *p = keys;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && p[len - 1] == '*') {
            if (!strncmp(key, p, len - 1)) return 1;
        } else if (len == strlen(key) && !strncmp(key, p, len)) {
            return 1;
        }
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

store_status store_metrics_points(store *st, long long run_id, const char *keys, int since_step, store_metric **points,
                                  size_t *n) {
    if (st->pg) return store_pg_metrics_points(st, run_id, keys, since_step, points, n);
    *points = NULL;
    *n = 0;
    store_metric *got = NULL;
    size_t count = 0, cap = 0;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT key, step, value, wall_time FROM metrics WHERE run_id = ? AND step >= ? "
                                     "ORDER BY key, step");
    store_status s = q ? STORE_OK : STORE_ERROR;
    int rc = SQLITE_DONE;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int(q, 2, since_step);
    }
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(q, 0);
        if (!key || !key_matches(key, keys)) continue;
        if (count == cap) {
            size_t grown_cap = cap ? cap * 2 : 1024;
            store_metric *g = realloc(got, grown_cap * sizeof *g);
            if (!g) {
                s = db_fail("read metrics: out of memory");
                break;
            }
            got = g;
            cap = grown_cap;
        }
        store_metric *p = &got[count++];
        p->run_id = run_id;
        snprintf(p->key, sizeof p->key, "%s", key);
        p->step = sqlite3_column_int(q, 1);
        p->value = sqlite3_column_double(q, 2);
        p->wall_time = sqlite3_column_double(q, 3);
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "read metrics");
    sqlite3_finalize(q);
    db_unlock(st);
    if (s != STORE_OK || count == 0) {
        free(got);
        return s;
    }
    *points = got;
    *n = count;
    return STORE_OK;
}

store_status store_metrics_summary(store *st, long long run_id, json_t **out) {
    if (st->pg) return store_pg_metrics_summary(st, run_id, out);
    *out = NULL;
    json_t *sum = json_object();
    db_lock(st);
    store_status s = sum ? STORE_OK : db_fail("summary: out of memory");
    /* step_of_min: the first step holding the minimum. (A bare column next to both min() and max()
     * would come from an unspecified row, in practice the last.) */
    sqlite3_stmt *q =
        s == STORE_OK
            ? db_prepare(st, "SELECT m.key, min(m.value), max(m.value), avg(m.value), count(*), max(m.step), "
                             "  (SELECT l.value FROM metrics l WHERE l.run_id = m.run_id AND l.key = m.key "
                             "   ORDER BY l.step DESC LIMIT 1), "
                             "  (SELECT min(s.step) FROM metrics s WHERE s.run_id = m.run_id AND s.key = m.key "
                             "   AND s.value = min(m.value)) "
                             "FROM metrics m WHERE m.run_id = ? GROUP BY m.key ORDER BY m.key")
            : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    int rc = SQLITE_DONE;
    if (s == STORE_OK) sqlite3_bind_int64(q, 1, run_id);
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:i, s:I, s:i}", "last", sqlite3_column_double(q, 6), "min",
                              sqlite3_column_double(q, 1), "max", sqlite3_column_double(q, 2), "mean",
                              sqlite3_column_double(q, 3), "step_of_min", sqlite3_column_int(q, 7), "count",
                              (json_int_t)sqlite3_column_int64(q, 4), "last_step", sqlite3_column_int(q, 5));
        if (json_object_set_new(sum, (const char *)sqlite3_column_text(q, 0), o) < 0)
            s = db_fail("summary: out of memory");
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "summary");
    sqlite3_finalize(q);
    db_unlock(st);
    if (s != STORE_OK) {
        json_decref(sum);
        return s;
    }
    *out = sum;
    return STORE_OK;
}

store_status store_run_brief(store *st, long long run_id, json_t **out) {
    if (st->pg) return store_pg_run_brief(st, run_id, out);
    *out = NULL;
    json_t *brief = json_object();
    db_lock(st);
    store_status s = brief ? STORE_OK : db_fail("brief: out of memory");
    static const char *const keys[] = {"loss", "val_loss"};
    for (int k = 0; k < 2 && s == STORE_OK; k++) {
        /* Both read one key's rows through the primary key index. */
        sqlite3_stmt *q =
            db_prepare(st, "SELECT min(value), count(*), (SELECT value FROM metrics WHERE run_id = ?1 AND "
                           "key = ?2 ORDER BY step DESC LIMIT 1) FROM metrics WHERE run_id = ?1 AND key = ?2");
        if (!q) {
            s = STORE_ERROR;
            break;
        }
        sqlite3_bind_int64(q, 1, run_id);
        db_bind_text(q, 2, keys[k]);
        s = db_step_one(st, q, "brief");
        if (s == STORE_NOT_FOUND) s = db_fail("brief: an aggregate gave no row");
        if (s == STORE_OK && sqlite3_column_int64(q, 1) > 0 &&
            json_object_set_new(
                brief, keys[k],
                json_pack("{s:f, s:f}", "last", sqlite3_column_double(q, 2), "min", sqlite3_column_double(q, 0))) < 0)
            s = db_fail("brief: out of memory");
        sqlite3_finalize(q);
    }
    sqlite3_stmt *q = s == STORE_OK
                          ? db_prepare(st, "SELECT min(value), max(value), count(*) FROM metrics WHERE run_id = ?1 "
                                           "AND key >= 'tau.' AND key < 'tau/' AND step = (SELECT max(step) "
                                           "FROM metrics WHERE run_id = ?1 AND key = 'tau.0.0')")
                          : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, run_id);
        s = db_step_one(st, q, "brief");
        if (s == STORE_NOT_FOUND) s = db_fail("brief: an aggregate gave no row");
        if (s == STORE_OK && sqlite3_column_int64(q, 2) > 0 &&
            json_object_set_new(
                brief, "tau",
                json_pack("{s:f, s:f}", "min", sqlite3_column_double(q, 0), "max", sqlite3_column_double(q, 1))) < 0)
            s = db_fail("brief: out of memory");
    }
    sqlite3_finalize(q);
    db_unlock(st);
    if (s != STORE_OK) {
        json_decref(brief);
        return s;
    }
    *out = brief;
    return STORE_OK;
}
