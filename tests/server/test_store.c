/* The store's contract (store.h), one source run against both backends: each case below runs on a
 * fresh SQLite file and again on a fresh PostgreSQL database ("sqlite/…", "postgresql/…"), and
 * checks what each function gives back and the one rule for errors (on any status other than
 * STORE_OK every output is NULL/0 and the caller owns nothing). What only one backend has is
 * tested beside it: test_store_sqlite.c (the file's own failures), test_store_pg.c (the shared
 * queue, leases, listening, a lost database).
 *
 * A backend here is how to make a fresh store, how to run SQL on a connection of its own (the way
 * another process would), and its own aggregates over the rows, against which the summaries the
 * store keeps are checked. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../support/harness.h"
#include "../support/metric_batches.h"
#include "../support/pg.h"
#include "../support/test.h"
#include "store/postgres/pg.h"
#include "store/store.h"

typedef struct {
    const char *name;
    /* A fresh, empty store; where (a path or a URL) names it for store_open and raw. NULL on failure. */
    store *(*open_fresh)(char *where, size_t len);
    /* Runs SQL on a connection of its own; 0 or -1. */
    int (*raw)(const char *where, const char *sql);
    /* The first column of the first row of a query on a connection of its own, or -1. */
    long long (*raw_count)(const char *where, const char *sql);
    /* {"summary": what store_metrics_summary gave before the summaries, "brief": store_run_brief's},
     * by the backend's own aggregates over the rows. */
    json_t *(*from_rows)(const char *where, long long run_id);
    /* The database taken back to schema version 7 (before the summaries and the later versions'
     * columns), with points no summary saw. */
    const char *to_version_7;
    int signed_zero; /* metric_batch_random's: 0 and -0 among the values */
    int batches;     /* random metric batches in the summaries' case */
} backend;

static const backend *B; /* the backend under test */

static store *reopen(const char *where) {
    store *st = NULL;
    char err[512];
    if (store_open(&st, where, err, sizeof err) != STORE_OK) printf("# store_open: %s\n", err);
    return st;
}

/* ---- SQLite ----------------------------------------------------------------------------------------- */

static store *sqlite_fresh(char *where, size_t len) {
    char dir[256];
    if (harness_tempdir(dir, sizeof dir) < 0) return NULL;
    snprintf(where, len, "%s/store.db", dir);
    return reopen(where);
}

static int sqlite_raw(const char *path, const char *sql) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) printf("# %s: %s\n", sql, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : -1;
}

static long long sqlite_count(const char *path, const char *sql) {
    sqlite3 *db;
    sqlite3_stmt *q = NULL;
    long long n = -1;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

/* One row of a statement as a JSON value built by make; NULL on failure. */
static json_t *sqlite_row(sqlite3 *db, const char *sql, long long run_id, const char *key,
                          json_t *(*make)(sqlite3_stmt *q)) {
    sqlite3_stmt *q = NULL;
    json_t *v = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_int64(q, 1, run_id);
    if (key) sqlite3_bind_text(q, 2, key, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW) v = make(q);
    sqlite3_finalize(q);
    return v;
}

static json_t *sqlite_series_brief(sqlite3_stmt *q) {
    return sqlite3_column_int64(q, 1) > 0
               ? json_pack("{s:f, s:f}", "last", sqlite3_column_double(q, 2), "min", sqlite3_column_double(q, 0))
               : json_null();
}

static json_t *sqlite_tau_brief(sqlite3_stmt *q) {
    return sqlite3_column_int64(q, 2) > 0
               ? json_pack("{s:f, s:f}", "min", sqlite3_column_double(q, 0), "max", sqlite3_column_double(q, 1))
               : json_null();
}

static json_t *sqlite_from_rows(const char *path, long long run_id) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) return NULL;
    sqlite3_stmt *q = NULL;
    json_t *sum = json_object(), *brief = json_object();
    if (sqlite3_prepare_v2(db,
                           "SELECT m.key, min(m.value), max(m.value), avg(m.value), count(*), max(m.step), "
                           "  (SELECT l.value FROM metrics l WHERE l.run_id = m.run_id AND l.key = m.key "
                           "   ORDER BY l.step DESC LIMIT 1), "
                           "  (SELECT min(s.step) FROM metrics s WHERE s.run_id = m.run_id AND s.key = m.key "
                           "   AND s.value = min(m.value)) "
                           "FROM metrics m WHERE m.run_id = ? GROUP BY m.key ORDER BY m.key",
                           -1, &q, NULL) != SQLITE_OK) {
        json_decref(sum);
        sum = NULL;
    }
    int rc = SQLITE_DONE;
    if (sum) sqlite3_bind_int64(q, 1, run_id);
    while (sum && (rc = sqlite3_step(q)) == SQLITE_ROW)
        json_object_set_new(sum, (const char *)sqlite3_column_text(q, 0),
                            json_pack("{s:f, s:f, s:f, s:f, s:i, s:I, s:i}", "last", sqlite3_column_double(q, 6), "min",
                                      sqlite3_column_double(q, 1), "max", sqlite3_column_double(q, 2), "mean",
                                      sqlite3_column_double(q, 3), "step_of_min", sqlite3_column_int(q, 7), "count",
                                      (json_int_t)sqlite3_column_int64(q, 4), "last_step", sqlite3_column_int(q, 5)));
    sqlite3_finalize(q);
    static const char *const keys[] = {"loss", "val_loss"};
    for (int k = 0; k < 2; k++) {
        json_t *b = sqlite_row(db,
                               "SELECT min(value), count(*), (SELECT value FROM metrics WHERE run_id = ?1 AND "
                               "key = ?2 ORDER BY step DESC LIMIT 1) FROM metrics WHERE run_id = ?1 AND key = ?2",
                               run_id, keys[k], sqlite_series_brief);
        if (!json_is_null(b)) json_object_set(brief, keys[k], b);
        json_decref(b);
    }
    json_t *tau = sqlite_row(db,
                             "SELECT min(value), max(value), count(*) FROM metrics WHERE run_id = ?1 AND key >= "
                             "'tau.' AND key < 'tau/' AND step = (SELECT max(step) FROM metrics WHERE run_id = "
                             "?1 AND key = 'tau.0.0')",
                             run_id, NULL, sqlite_tau_brief);
    if (!json_is_null(tau)) json_object_set(brief, "tau", tau);
    json_decref(tau);
    sqlite3_close(db);
    if (!sum || rc != SQLITE_DONE) {
        json_decref(sum);
        json_decref(brief);
        return NULL;
    }
    return json_pack("{s:o, s:o}", "summary", sum, "brief", brief);
}

static const backend sqlite_backend = {
    .name = "sqlite",
    .open_fresh = sqlite_fresh,
    .raw = sqlite_raw,
    .raw_count = sqlite_count,
    .from_rows = sqlite_from_rows,
    .to_version_7 = "DROP TABLE idempotency_keys; DROP TRIGGER run_words_insert; DROP TRIGGER run_words_update; DROP "
                    "TRIGGER run_words_delete; "
                    "DROP TRIGGER run_words_tag_insert; DROP TRIGGER run_words_tag_delete; DROP TRIGGER "
                    "experiment_words_insert; DROP TRIGGER experiment_words_update; DROP TRIGGER "
                    "experiment_words_delete; DROP TABLE run_words; DROP TABLE experiment_words; DROP INDEX "
                    "experiments_name; "
                    "DROP TABLE metric_summaries; ALTER TABLE runs DROP COLUMN source; ALTER TABLE runs DROP COLUMN "
                    "provenance; PRAGMA user_version = 7; "
                    "INSERT OR REPLACE INTO metrics (run_id, key, step, value, wall_time) "
                    "SELECT run_id, key, step + 1000, value * 2, wall_time FROM metrics",
    .signed_zero = 1,
    .batches = 150,
};

/* ---- PostgreSQL --------------------------------------------------------------------------------------- */

static store *pg_fresh(char *where, size_t len) { return pgtest_new_db(where, len) < 0 ? NULL : reopen(where); }

static int pg_raw(const char *url, const char *sql) {
    char err[512];
    pg_conn *c = pg_connect(url, 5, "test", err, sizeof err);
    if (!c) {
        printf("# %s\n", err);
        return -1;
    }
    store_status s = pg_exec_script(c, "raw", sql);
    if (s != STORE_OK) printf("# %s: %s\n", sql, pg_error(c));
    pg_close(c);
    return s == STORE_OK ? 0 : -1;
}

static long long pg_count(const char *url, const char *sql) {
    char err[512];
    pg_conn *c = pg_connect(url, 5, "test", err, sizeof err);
    pg_res *r = NULL;
    long long n = c && pg_exec(c, "count", sql, NULL, &r) == STORE_OK && pg_nrows(r) == 1 ? pg_get_i64(r, 0, 0) : -1;
    pg_clear(r);
    pg_close(c);
    return n;
}

/* avg over the rows in step order: without an order of its own the sum's order is the plan's. */
static json_t *pg_from_rows(const char *url, long long run_id) {
    char err[512];
    pg_conn *c = pg_connect(url, 5, "test", err, sizeof err);
    if (!c) return NULL;
    pg_params p;
    pg_params_init(&p);
    pg_p_int(&p, run_id);
    pg_res *r = NULL;
    json_t *sum = NULL;
    if (pg_exec(c, "summary",
                "SELECT m.key, min(m.value), max(m.value), avg(m.value ORDER BY m.step), count(*), max(m.step), "
                "  (SELECT l.value FROM metrics l WHERE l.run_id = m.run_id AND l.key = m.key "
                "   ORDER BY l.step DESC LIMIT 1), "
                "  (SELECT min(s.step) FROM metrics s WHERE s.run_id = m.run_id AND s.key = m.key "
                "   AND s.value = min(m.value)) "
                "FROM metrics m WHERE m.run_id = $1 GROUP BY m.run_id, m.key ORDER BY m.key COLLATE \"C\"",
                &p, &r) == STORE_OK) {
        sum = json_object();
        for (int i = 0; sum && i < pg_nrows(r); i++)
            json_object_set_new(sum, pg_get_text(r, i, 0),
                                json_pack("{s:f, s:f, s:f, s:f, s:i, s:I, s:i}", "last", pg_get_double(r, i, 6), "min",
                                          pg_get_double(r, i, 1), "max", pg_get_double(r, i, 2), "mean",
                                          pg_get_double(r, i, 3), "step_of_min", pg_get_int(r, i, 7), "count",
                                          (json_int_t)pg_get_i64(r, i, 4), "last_step", pg_get_int(r, i, 5)));
        pg_clear(r);
    }
    r = NULL;
    json_t *brief = NULL;
    if (sum &&
        pg_exec(c, "brief",
                "SELECT (SELECT count(*) FROM metrics WHERE run_id = $1 AND key = 'loss'), "
                "(SELECT min(value) FROM metrics WHERE run_id = $1 AND key = 'loss'), "
                "(SELECT value FROM metrics WHERE run_id = $1 AND key = 'loss' ORDER BY step DESC LIMIT 1), "
                "(SELECT count(*) FROM metrics WHERE run_id = $1 AND key = 'val_loss'), "
                "(SELECT min(value) FROM metrics WHERE run_id = $1 AND key = 'val_loss'), "
                "(SELECT value FROM metrics WHERE run_id = $1 AND key = 'val_loss' ORDER BY step DESC "
                "LIMIT 1), t.n, t.lo, t.hi FROM (SELECT count(*) AS n, min(value) AS lo, max(value) AS hi "
                "FROM metrics WHERE run_id = $1 AND starts_with(key, 'tau.') AND step = (SELECT max(step) "
                "FROM metrics WHERE run_id = $1 AND key = 'tau.0.0')) t",
                &p, &r) == STORE_OK &&
        pg_nrows(r) == 1) {
        brief = json_object();
        static const char *const keys[] = {"loss", "val_loss"};
        for (int k = 0; k < 2; k++)
            if (pg_get_i64(r, 0, 3 * k) > 0)
                json_object_set_new(brief, keys[k],
                                    json_pack("{s:f, s:f}", "last", pg_get_double(r, 0, 3 * k + 2), "min",
                                              pg_get_double(r, 0, 3 * k + 1)));
        if (pg_get_i64(r, 0, 6) > 0)
            json_object_set_new(brief, "tau",
                                json_pack("{s:f, s:f}", "min", pg_get_double(r, 0, 7), "max", pg_get_double(r, 0, 8)));
    }
    pg_clear(r);
    pg_close(c);
    json_t *both = sum && brief ? json_pack("{s:o, s:o}", "summary", sum, "brief", brief) : NULL;
    if (!both) {
        json_decref(sum);
        json_decref(brief);
    }
    return both;
}

static const backend pg_backend = {
    .name = "postgresql",
    .open_fresh = pg_fresh,
    .raw = pg_raw,
    .raw_count = pg_count,
    .from_rows = pg_from_rows,
    .to_version_7 = "DROP TABLE idempotency_keys; DROP INDEX experiments_name; "
                    "DROP TABLE metric_summaries; ALTER TABLE runs DROP COLUMN source, DROP COLUMN provenance; "
                    "DELETE FROM attnlab_schema WHERE version >= 8; "
                    "INSERT INTO metrics (run_id, key, step, value, wall_time) "
                    "SELECT run_id, key, step + 1000, value * 2, wall_time FROM metrics",
    .signed_zero = 0,
    .batches = 60,
};

/* ---- the contract ----------------------------------------------------------------------------------- */

static long long new_run(store *st, const char *name) {
    json_t *tags = json_pack("[s,s]", "b", "a");
    store_new_run nr = {.name = name,
                        .config_json = "{\"steps\":5}",
                        .seed = 7,
                        .total_steps = 5,
                        .corpus = "small",
                        .variant = "rope",
                        .tags = tags};
    long long id = 0;
    store_status s = store_run_create(st, &nr, &id);
    json_decref(tags);
    return s == STORE_OK ? id : -1;
}

TEST(runs_round_trip) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    CHECK_EQ_INT(store_schema_version(st), store_schema_version_supported());
    CHECK(store_ping(st) == STORE_OK);
    long long a = new_run(st, "alpha"), b = new_run(st, "beta");
    CHECK(a == 1 && b == 2);
    json_t *run = NULL;
    CHECK(store_run_get(st, a, &run) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "queued"));
    CHECK(!strcmp(json_string_value(json_object_get(run, "name")), "alpha"));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(run, "config"), "steps")), 5);
    CHECK_EQ_INT(json_array_size(json_object_get(run, "tags")), 2);
    CHECK(!strcmp(json_string_value(json_array_get(json_object_get(run, "tags"), 0)), "a")); /* sorted */
    CHECK(json_is_null(json_object_get(run, "started_at")));
    json_decref(run);
    run = (json_t *)1;
    CHECK(store_run_get(st, 99, &run) == STORE_NOT_FOUND);
    CHECK(run == NULL);

    static const char *const from_queued[] = {"queued", NULL}, *const from_running[] = {"running", NULL};
    CHECK(store_run_transition(st, a, from_queued, "running", NULL) == STORE_OK);
    CHECK(store_run_transition(st, a, from_queued, "running", NULL) == STORE_CONFLICT);
    CHECK(store_run_transition(st, 99, from_queued, "running", NULL) == STORE_NOT_FOUND);
    CHECK(store_run_progress(st, a, 3, 2) == STORE_OK);
    CHECK(store_run_progress(st, a, 4, 1) == STORE_OK); /* the checkpoint step never goes back */
    CHECK(store_run_delete(st, a) == STORE_CONFLICT);
    CHECK(store_run_transition(st, a, from_running, "failed", "boom") == STORE_OK);
    CHECK(store_run_get(st, a, &run) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "failed"));
    CHECK(!strcmp(json_string_value(json_object_get(run, "error")), "boom"));
    CHECK_EQ_INT(json_integer_value(json_object_get(run, "step")), 4);
    CHECK_EQ_INT(json_integer_value(json_object_get(run, "checkpoint_step")), 2);
    CHECK(json_is_number(json_object_get(run, "finished_at")));
    json_decref(run);

    json_t *tags = json_pack("[s]", "z");
    CHECK(store_run_update(st, b, "renamed", NULL, tags) == STORE_OK);
    CHECK(store_run_update(st, 99, "x", NULL, NULL) == STORE_NOT_FOUND);
    json_decref(tags);
    store_run_filter f = {.sort = "name", .limit = 10};
    json_t *list = NULL;
    long long total = 0;
    CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
    CHECK_EQ_INT(total, 2);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(list, 0), "name")), "alpha"));
    json_decref(list);
    f = (store_run_filter){.tag = "z", .limit = 10};
    CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
    CHECK_EQ_INT(total, 1);
    CHECK_EQ_INT(json_array_size(list), 1);
    json_decref(list);
    f = (store_run_filter){.status = "queued", .limit = 10, .offset = 5}; /* a page past the end keeps the count */
    CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
    CHECK_EQ_INT(total, 1);
    CHECK_EQ_INT(json_array_size(list), 0);
    json_decref(list);
    json_t *counts = NULL;
    CHECK(store_run_counts(st, &counts) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(counts, "failed")), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(counts, "queued")), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(counts, "interrupted")), 0);
    json_decref(counts);
    long long *ids = NULL;
    int n = 0;
    CHECK(store_runs_queued(st, &ids, &n) == STORE_OK);
    CHECK(n == 1 && ids[0] == b);
    free(ids);
    CHECK(store_run_delete(st, a) == STORE_OK);
    CHECK(store_run_delete(st, a) == STORE_NOT_FOUND);
    CHECK(new_run(st, "gamma") == 3); /* ids are never reused */
    store_close(st);
}

TEST(metrics_are_stored_exactly_and_summarised) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    long long id = new_run(st, "m");
    /* min at step 2, max at step 4, last at step 5 */
    static const double values[] = {5, 1, 3, 9, 2};
    store_metric pts[8];
    for (int i = 0; i < 5; i++) {
        pts[i] = (store_metric){.run_id = id, .step = i + 1, .value = values[i] + 0.1, .wall_time = 100.25 + i};
        pts[i].key = "loss";
    }
    pts[5] = (store_metric){.run_id = id, .step = 5, .value = 0.5, .wall_time = 1};
    pts[5].key = "tau.0.0";
    pts[6] = (store_metric){.run_id = id, .step = 5, .value = 0.75, .wall_time = 1};
    pts[6].key = "tau.0.1";
    pts[7] = (store_metric){.run_id = 999, .step = 1, .value = 1, .wall_time = 1}; /* no such run: skipped */
    pts[7].key = "loss";
    CHECK(store_metrics_insert(st, pts, 8) == STORE_OK);
    /* A resumed run writes the same steps again: replaced, also twice in one batch (the last wins). */
    store_metric again[2] = {pts[4], pts[4]};
    again[0].value = 7;
    again[1].value = 2.1;
    CHECK(store_metrics_insert(st, again, 2) == STORE_OK);
    store_metric *got = NULL;
    size_t n = 0;
    CHECK(store_metrics_points(st, id, "loss", 0, &got, &n) == STORE_OK);
    CHECK_EQ_INT(n, 5);
    for (size_t i = 0; i < n; i++) CHECK(got[i].value == values[i] + 0.1 && got[i].wall_time == 100.25 + (double)i);
    free(got);
    CHECK(store_metrics_points(st, id, "tau.*", 0, &got, &n) == STORE_OK);
    CHECK(n == 2 && !strcmp(got[0].key, "tau.0.0") && !strcmp(got[1].key, "tau.0.1"));
    free(got);
    got = (store_metric *)1;
    CHECK(store_metrics_points(st, id, "nothing", 0, &got, &n) == STORE_OK);
    CHECK(got == NULL && n == 0);
    json_t *sum = NULL;
    CHECK(store_metrics_summary(st, id, &sum) == STORE_OK);
    json_t *loss = json_object_get(sum, "loss");
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "step_of_min")), 2);
    CHECK_NEAR(json_number_value(json_object_get(loss, "min")), 1.1, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "max")), 9.1, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "last")), 2.1, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "mean")), 4.1, 1e-12);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "count")), 5);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "last_step")), 5);
    json_decref(sum);
    json_t *brief = NULL;
    CHECK(store_run_brief(st, id, &brief) == STORE_OK);
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(brief, "loss"), "last")), 2.1, 0);
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(brief, "tau"), "max")), 0.75, 0);
    CHECK(json_object_get(brief, "val_loss") == NULL);
    json_decref(brief);
    store_close(st);
}

TEST(metric_points_come_back_by_key_then_step) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    long long id = new_run(st, "points");
    CHECK(id > 0);
    static const char *const keys[] = {"tau.0.1", "loss", "tau.0.0", "lr"};
    store_metric pts[12];
    int k = 0;
    for (int step = 3; step >= 1; step--)
        for (int i = 0; i < 4; i++) {
            pts[k] = (store_metric){.run_id = id, .step = step, .value = step * 10 + i, .wall_time = step};
            pts[k].key = keys[i];
            k++;
        }
    CHECK(store_metrics_insert(st, pts, 12) == STORE_OK);
    store_metric *got;
    size_t n;
    CHECK(store_metrics_points(st, id, "tau.*,loss", 2, &got, &n) == STORE_OK);
    CHECK_EQ_INT(n, 6);
    static const char *const want_keys[] = {"loss", "loss", "tau.0.0", "tau.0.0", "tau.0.1", "tau.0.1"};
    for (size_t i = 0; i < n; i++) {
        CHECK_MSG(!strcmp(got[i].key, want_keys[i]), "point %zu has key %s", i, got[i].key);
        CHECK_EQ_INT(got[i].step, 2 + (int)(i % 2));
    }
    free(got);
    store_close(st);
}

/* store_metrics_range: one series' points in [from, to), in step order, at most limit; a cursor
 * over it gives the series' points as store_metrics_points does, a range of at most its limit at a
 * time, whatever the series' length. */
TEST(a_series_is_read_by_step_range_within_its_limit) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    long long id = new_run(st, "ranges");
    CHECK(id > 0);
    enum { N = 1000 };
    static store_metric pts[2 * N + 1];
    size_t k = 0;
    for (int i = 0; i < N; i++) { /* "loss" on even steps 0..1998, "lr" on every step 0..999, "a" once */
        pts[k++] = (store_metric){.run_id = id, .key = "loss", .step = 2 * i, .value = 1.0 / (i + 1), .wall_time = i};
        pts[k++] = (store_metric){.run_id = id, .key = "lr", .step = i, .value = i % 3, .wall_time = i + 0.5};
    }
    pts[k++] = (store_metric){.run_id = id, .key = "a", .step = 5, .value = -1, .wall_time = 1};
    CHECK(store_metrics_insert(st, pts, k) == STORE_OK);
    store_metric *got;
    size_t n;
    /* [101, 150) of "loss": its even steps 102..148, in order, exactly */
    CHECK(store_metrics_range(st, id, "loss", 101, 150, 1000, &got, &n) == STORE_OK);
    CHECK_EQ_INT(n, 24);
    for (size_t i = 0; i < n; i++) {
        CHECK(!strcmp(got[i].key, "loss") && got[i].run_id == id);
        CHECK_EQ_INT(got[i].step, 102 + 2 * (int)i);
        CHECK(got[i].value == 1.0 / (51 + i + 1) && got[i].wall_time == 51 + (double)i);
    }
    free(got);
    /* the limit keeps the first points of the range */
    CHECK(store_metrics_range(st, id, "lr", 10, 1000000, 7, &got, &n) == STORE_OK);
    CHECK_EQ_INT(n, 7);
    CHECK_EQ_INT(got[0].step, 10);
    CHECK_EQ_INT(got[6].step, 16);
    free(got);
    /* a key exactly: "lr" is not a prefix pattern, "l*" matches nothing */
    CHECK(store_metrics_range(st, id, "l*", 0, 1000000, 100, &got, &n) == STORE_OK);
    CHECK(n == 0 && !got);
    /* empty ranges: nothing, no error */
    CHECK(store_metrics_range(st, id, "loss", 50, 50, 100, &got, &n) == STORE_OK);
    CHECK(n == 0 && !got);
    CHECK(store_metrics_range(st, id, "loss", 3000, 4000, 100, &got, &n) == STORE_OK);
    CHECK(n == 0 && !got);
    CHECK(store_metrics_range(st, id + 1000, "loss", 0, 4000, 100, &got, &n) == STORE_OK);
    CHECK(n == 0 && !got);
    /* limit 0 is 1, a huge one is STORE_METRICS_RANGE_MAX */
    CHECK(store_metrics_range(st, id, "lr", 0, 1000000, 0, &got, &n) == STORE_OK);
    CHECK_EQ_INT(n, 1);
    free(got);
    /* a cursor of limit 64 reads each series as the whole read does, never more than 64 at a time */
    static const char *const keys[] = {"a", "loss", "lr"};
    for (size_t ki = 0; ki < 3; ki++) {
        store_metric *all;
        size_t n_all;
        CHECK(store_metrics_points(st, id, keys[ki], 0, &all, &n_all) == STORE_OK);
        store_series_cursor c;
        store_series_cursor_init(&c, st, id, keys[ki], 0, INT_MAX, 64);
        size_t seen = 0, ranges = 0;
        int r;
        while ((r = store_series_cursor_next(&c)) > 0) {
            CHECK(c.n >= 1 && c.n <= 64);
            ranges++;
            for (size_t i = 0; i < c.n; i++, seen++) {
                CHECK(seen < n_all);
                CHECK(c.pts[i].step == all[seen].step && c.pts[i].value == all[seen].value &&
                      c.pts[i].wall_time == all[seen].wall_time && !strcmp(c.pts[i].key, keys[ki]));
            }
        }
        CHECK_EQ_INT(r, 0);
        CHECK_EQ_INT(seen, n_all);
        CHECK_EQ_INT(ranges, (n_all + 63) / 64);
        store_series_cursor_done(&c);
        free(all);
    }
    CHECK(store_series_cursor_peak() >= 64 && store_series_cursor_peak() <= STORE_METRICS_RANGE_MAX);
    /* a cursor stops at its range's end */
    store_series_cursor c;
    store_series_cursor_init(&c, st, id, "lr", 990, 995, 2);
    int steps = 0, r;
    while ((r = store_series_cursor_next(&c)) > 0) steps += (int)c.n;
    CHECK_EQ_INT(r, 0);
    CHECK_EQ_INT(steps, 5);
    store_series_cursor_done(&c);
    store_close(st);
}

TEST(brief_leaves_no_output_on_error) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    long long id = new_run(st, "brief");
    CHECK(id > 0);
    json_t *brief = NULL;
    CHECK(store_run_brief(st, id, &brief) == STORE_OK);
    CHECK(json_is_object(brief));
    json_decref(brief);
    CHECK(B->raw(where, "DROP TABLE metric_summaries") == 0);
    brief = (json_t *)0x1; /* whatever the caller had there */
    store_status s = store_run_brief(st, id, &brief);
    CHECK_MSG(s != STORE_OK, "the brief of a run without a summaries table came back OK");
    CHECK_MSG(brief == NULL, "an output was left (and owned by nobody) after an error");
    json_t *sum = (json_t *)0x1;
    CHECK(store_metrics_summary(st, id, &sum) == STORE_ERROR);
    CHECK(sum == NULL);
    CHECK(store_last_error()[0] != 0);
    CHECK(!store_unavailable()); /* the database answered: it is not out of reach */
    store_close(st);
}

TEST(an_experiment_is_created_whole_or_not_at_all) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    store_new_experiment e = {.name = "ab", .base_json = "{\"a\":1}", .variants_json = "[]", .replicates = 3};
    store_new_run runs[3] = {
        {.name = "ab/a", .config_json = "{\"steps\":5}", .seed = 1, .total_steps = 5, .corpus = "small"},
        {.name = "ab/b",
         .config_json = "{\"steps\":5}",
         .seed = 1,
         .total_steps = 5,
         .corpus = "small",
         .replicate = 1},
        {.name = "ab/c",
         .config_json = "{\"steps\":5}",
         .seed = 1,
         .total_steps = 5,
         .corpus = "small",
         .replicate = 2},
    };
    long long exp_id = -1, ids[3] = {-1, -1, -1};
    CHECK(store_experiment_create(st, &e, runs, 3, &exp_id, ids) == STORE_OK);
    CHECK(exp_id == 1 && ids[0] == 1 && ids[2] == 3);
    for (int i = 0; i < 3; i++) {
        json_t *r = NULL;
        CHECK(store_run_get(st, ids[i], &r) == STORE_OK);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "experiment_id")), exp_id);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "replicate")), i);
        json_decref(r);
    }
    json_t *o = NULL;
    CHECK(store_experiment_get(st, exp_id, &o) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "run_count")), 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "replicates")), 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(o, "base"), "a")), 1);
    json_decref(o);
    /* The third run cannot be stored (its config is not JSON): no experiment, no run. */
    runs[2].config_json = "{not json";
    e.name = "ab2"; /* a name of its own: only the bad run refuses it */
    long long before_runs, before_exps;
    json_t *list;
    store_run_filter f = {.limit = 100};
    CHECK(store_run_list(st, &f, &list, &before_runs) == STORE_OK);
    json_decref(list);
    CHECK(store_experiment_list(st, 100, 0, NULL, &list, &before_exps) == STORE_OK);
    json_decref(list);
    long long exp2 = -1, ids2[3] = {-1, -1, -1};
    CHECK(store_experiment_create(st, &e, runs, 3, &exp2, ids2) == STORE_ERROR);
    CHECK_EQ_INT(exp2, 0);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(ids2[i], 0);
    long long after_runs, after_exps;
    CHECK(store_run_list(st, &f, &list, &after_runs) == STORE_OK);
    json_decref(list);
    CHECK(store_experiment_list(st, 100, 0, NULL, &list, &after_exps) == STORE_OK);
    json_decref(list);
    CHECK_EQ_INT(after_runs, before_runs);
    CHECK_EQ_INT(after_exps, before_exps);
    /* Taking an experiment back removes it with its runs, only while none has started. */
    CHECK(store_run_transition(st, ids[0], (const char *const[]){"queued", NULL}, "running", NULL) == STORE_OK);
    CHECK(store_experiment_discard(st, exp_id) == STORE_CONFLICT);
    CHECK(store_run_transition(st, ids[0], (const char *const[]){"running", NULL}, "queued", NULL) == STORE_OK);
    CHECK(store_experiment_discard(st, exp_id) == STORE_OK);
    json_t *gone = NULL;
    CHECK(store_experiment_get(st, exp_id, &gone) == STORE_NOT_FOUND);
    CHECK(gone == NULL);
    CHECK(store_run_get(st, ids[1], &gone) == STORE_NOT_FOUND);
    store_close(st);
}

TEST(corpora_probes_and_artefacts) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    json_t *o = NULL;
    long long total = 0;
    store_corpus c = {.name = "mine", .tokenizer = "bytes", .status = "tokenizing", .bytes = 10};
    CHECK(store_corpus_create(st, &c) == STORE_OK);
    CHECK(store_corpus_create(st, &c) == STORE_CONFLICT);
    c.status = "ready";
    c.tokens = 10;
    CHECK(store_corpus_put(st, &c) == STORE_OK);
    CHECK(store_corpus_get(st, "mine", &o) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(o, "status")), "ready"));
    CHECK(json_is_false(json_object_get(o, "builtin")));
    json_decref(o);
    CHECK(store_corpus_list(st, &o) == STORE_OK);
    CHECK_EQ_INT(json_array_size(o), 1);
    json_decref(o);
    CHECK(store_corpus_delete(st, "mine") == STORE_OK);
    CHECK(store_corpus_delete(st, "mine") == STORE_NOT_FOUND);
    store_corpus task = {
        .name = "copy", .tokenizer = "task", .status = "ready", .task_json = "{\"kind\":\"copy_offset\"}"};
    CHECK(store_corpus_create(st, &task) == STORE_OK);
    CHECK(store_corpus_get(st, "copy", &o) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(o, "task"), "kind")), "copy_offset"));
    json_decref(o);
    store_corpus builtin = {.name = "small", .tokenizer = "gpt2", .status = "ready", .builtin = 1};
    CHECK(store_corpus_put(st, &builtin) == STORE_OK);
    CHECK(store_corpus_delete(st, "small") == STORE_CONFLICT);
    c.status = "tokenizing";
    CHECK(store_corpus_put(st, &c) == STORE_OK);
    int changed = -1;
    CHECK(store_corpora_fail_tokenizing(st, "stopped", &changed) == STORE_OK);
    CHECK_EQ_INT(changed, 1);

    json_t *result = json_pack("{s:s, s:[{s:s, s:[s,s], s:[[i,i],[i,i]]}]}", "summary", "ok", "tables", "name", "t",
                               "columns", "a", "b", "rows", 1, 2, 3, 4);
    store_new_probe p = {.kind = "k",
                         .params_json = "{}",
                         .cache_key = "ck",
                         .status = "succeeded",
                         .seed = 1,
                         .duration_ms = 1.5,
                         .result = result};
    long long pid = 0, found = 0;
    CHECK(store_probe_insert(st, &p, &pid) == STORE_OK);
    json_decref(result);
    CHECK(store_probe_find(st, "k", "ck", &found) == STORE_OK && found == pid);
    CHECK(store_probe_find(st, "k", "other", &found) == STORE_NOT_FOUND);
    CHECK(store_probe_get(st, pid, &o) == STORE_OK);
    json_t *rows = json_object_get(json_array_get(json_object_get(json_object_get(o, "result"), "tables"), 0), "rows");
    CHECK_EQ_INT(json_array_size(rows), 2);
    json_decref(o);
    CHECK(store_probe_list(st, NULL, 10, 0, &o, &total) == STORE_OK);
    CHECK(total == 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(
                     json_array_get(json_object_get(json_object_get(json_array_get(o, 0), "result"), "tables"), 0),
                     "row_count")),
                 2);
    json_decref(o);
    CHECK(store_probe_table(st, pid, "t", &o) == STORE_OK);
    json_decref(o);
    CHECK(store_probe_table(st, pid, "nope", &o) == STORE_NOT_FOUND);

    long long rid = new_run(st, "with checkpoint");
    store_artifact a = {.path = "runs/x/checkpoint.safetensors",
                        .kind = "checkpoint",
                        .run_id = rid,
                        .step = 4,
                        .bytes = 10,
                        .sha256 = "ab"};
    CHECK(store_artifact_put(st, &a) == STORE_OK);
    a.step = 8;
    CHECK(store_artifact_put(st, &a) == STORE_OK);
    CHECK(store_artifact_get(st, a.path, &o) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "step")), 8);
    json_decref(o);
    CHECK(store_artifact_get(st, "elsewhere", &o) == STORE_NOT_FOUND);
    store_close(st);
}

/* 1 when the store's summary and brief are the backend's own aggregates over the rows, byte for byte. */
static int store_matches_rows(store *st, const char *where, long long run_id) {
    json_t *sum = NULL, *brief = NULL;
    if (store_metrics_summary(st, run_id, &sum) != STORE_OK || store_run_brief(st, run_id, &brief) != STORE_OK) {
        json_decref(sum);
        return 0;
    }
    json_t *got = json_pack("{s:o, s:o}", "summary", sum, "brief", brief), *want = B->from_rows(where, run_id);
    char *a = got ? json_dumps(got, JSON_COMPACT) : NULL, *b = want ? json_dumps(want, JSON_COMPACT) : NULL;
    int same = a && b && !strcmp(a, b);
    if (!same) printf("# run %lld:\n#   store: %s\n#   rows:  %s\n", run_id, a ? a : "-", b ? b : "-");
    free(a);
    free(b);
    json_decref(got);
    json_decref(want);
    return same;
}

TEST(summaries_equal_a_recomputation_from_the_rows) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    static series_model m;
    memset(&m, 0, sizeof m);
    m.run[0] = new_run(st, "sum-a");
    m.run[1] = new_run(st, "sum-b");
    CHECK(m.run[0] > 0 && m.run[1] > 0);
    store_metric pts[96];
    for (int b = 0; b < B->batches; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], B->signed_zero);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
        for (int r = 0; r < 2; r++) CHECK_MSG(store_matches_rows(st, where, m.run[r]), "after batch %d", b);
    }
    /* The loss orders of the runs list read the summaries: the same order as the rows give. */
    static const char *const sorts[] = {"loss", "-loss", "min_val_loss", "-min_val_loss"};
    for (int i = 0; i < 4; i++) {
        json_t *list = NULL, *sum0 = NULL, *sum1 = NULL;
        long long total = 0;
        store_run_filter f = {.limit = 10, .sort = sorts[i]};
        CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
        CHECK(store_metrics_summary(st, m.run[0], &sum0) == STORE_OK);
        CHECK(store_metrics_summary(st, m.run[1], &sum1) == STORE_OK);
        const char *key = i < 2 ? "loss" : "val_loss", *field = i < 2 ? "last" : "min";
        double a = json_real_value(json_object_get(json_object_get(sum0, key), field));
        double b = json_real_value(json_object_get(json_object_get(sum1, key), field));
        int a_first =
            i % 2 == 0 ? (a < b || (a == b && m.run[0] < m.run[1])) : (a > b || (a == b && m.run[0] > m.run[1]));
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(list, 0), "id")), a_first ? m.run[0] : m.run[1]);
        json_decref(sum0);
        json_decref(sum1);
        json_decref(list);
    }
    /* A deleted run takes its summaries with it. */
    CHECK(store_run_transition(st, m.run[0], (const char *const[]){"queued", NULL}, "cancelled", NULL) == STORE_OK);
    CHECK(store_run_delete(st, m.run[0]) == STORE_OK);
    store_close(st);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM metric_summaries WHERE run_id = %lld", m.run[0]);
    CHECK_EQ_INT(B->raw_count(where, sql), 0);
}

TEST(an_old_database_gets_its_summaries_from_the_migration) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    static series_model m;
    memset(&m, 0, sizeof m);
    m.run[0] = new_run(st, "old-a");
    m.run[1] = new_run(st, "old-b");
    CHECK(m.run[0] > 0 && m.run[1] > 0);
    store_metric pts[96];
    for (int b = 0; b < 40; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], B->signed_zero);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
    }
    store_close(st);
    /* The database as schema version 7 left it: points, no summaries (and points no summary saw),
     * nor the later versions' columns. */
    CHECK(B->raw(where, B->to_version_7) == 0);
    /* experiments of one name (and unnamed ones), as databases from before version 11 may hold */
    CHECK(B->raw(where, "INSERT INTO experiments (id, name, base_config, variants, created_at) VALUES "
                        "(101, 'dup', '{}', '[]', 0), (102, 'dup', '{}', '[]', 0), (103, '', '{}', '[]', 0), "
                        "(104, '', '{}', '[]', 0)") == 0);
    st = reopen(where);
    CHECK(st);
    CHECK_EQ_INT(store_schema_version(st), store_schema_version_supported());
    static const char *const renamed[] = {"dup", "dup (#102)", "experiment", "experiment (#104)"};
    for (int i = 0; i < 4; i++) {
        json_t *e = NULL;
        CHECK(store_experiment_get(st, 101 + i, &e) == STORE_OK);
        int same = !strcmp(json_string_value(json_object_get(e, "name")), renamed[i]);
        json_decref(e);
        CHECK_MSG(same, "experiment %d is not named %s", 101 + i, renamed[i]);
    }
    for (int r = 0; r < 2; r++) CHECK(store_matches_rows(st, where, m.run[r]));
    /* and they are kept from there on */
    for (int b = 0; b < 20; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], B->signed_zero);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
        for (int r = 0; r < 2; r++) CHECK_MSG(store_matches_rows(st, where, m.run[r]), "after batch %d", b);
    }
    store_close(st);
}

/* The briefs of a page of runs as JSON text: one store_run_briefs (each == 0) or one store_run_brief
 * per id; NULL on failure or when they are not one per id. */
static char *briefs_text(store *st, const long long *ids, size_t n, int each) {
    json_t *all = NULL;
    if (!each && store_run_briefs(st, ids, n, &all) != STORE_OK) return NULL;
    if (each) all = json_array();
    for (size_t i = 0; each && all && i < n; i++) {
        json_t *b = NULL;
        if (store_run_brief(st, ids[i], &b) != STORE_OK || json_array_append_new(all, b) < 0) {
            json_decref(all);
            all = NULL;
        }
    }
    char *text = json_array_size(all) == n ? json_dumps(all, JSON_COMPACT) : NULL;
    json_decref(all);
    return text;
}

/* 1 when both texts exist and are equal; says which differ otherwise. */
static int same_text(const char *what, const char *a, const char *b) {
    int same = a && b && !strcmp(a, b);
    if (!same) printf("# %s differ:\n#   %s\n#   %s\n", what, a ? a : "-", b ? b : "-");
    return same;
}

TEST(a_page_of_briefs_is_each_runs_brief) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    static series_model m;
    memset(&m, 0, sizeof m);
    m.run[0] = new_run(st, "brief-a");
    m.run[1] = new_run(st, "brief-b");
    long long quiet = new_run(st, "brief-quiet"); /* never gets a point */
    CHECK(m.run[0] > 0 && m.run[1] > 0 && quiet > 0);
    /* A page in any order, a run twice, one without series, one that does not exist. */
    const long long page[] = {m.run[1], quiet, m.run[0], 999999, m.run[1]};
    const size_t n = sizeof page / sizeof page[0];
    store_metric pts[96];
    for (int b = 0; b < 24; b++) {
        size_t np = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], B->signed_zero);
        CHECK(store_metrics_insert(st, pts, np) == STORE_OK);
        if (b % 4 != 3) continue;
        char *a = briefs_text(st, page, n, 0), *e = briefs_text(st, page, n, 1);
        int same = same_text("a page and each brief", a, e);
        free(a);
        free(e);
        CHECK_MSG(same, "after batch %d", b);
    }
    json_t *none = NULL;
    CHECK(store_run_briefs(st, NULL, 0, &none) == STORE_OK);
    CHECK(json_is_array(none) && json_array_size(none) == 0);
    json_decref(none);
    json_t *one = NULL;
    CHECK(store_run_briefs(st, &quiet, 1, &one) == STORE_OK);
    CHECK(json_object_size(json_array_get(one, 0)) == 0); /* a run without a point has an empty brief */
    json_decref(one);
    store_close(st);
}

/* ---- both backends at once ------------------------------------------------------------------------ */

TEST(both_backends_give_the_same_briefs) {
    char url[1024], path[1024];
    store *pg = pg_backend.open_fresh(url, sizeof url), *lite = sqlite_backend.open_fresh(path, sizeof path);
    CHECK(pg && lite);
    static series_model m;
    memset(&m, 0, sizeof m);
    long long quiet = 0;
    for (int b = 0; b < 2; b++) { /* the same runs on both (fresh stores: the same ids) */
        store *st = b ? lite : pg;
        m.run[0] = new_run(st, "brief-a");
        m.run[1] = new_run(st, "brief-b");
        quiet = new_run(st, "brief-quiet");
    }
    const long long page[] = {m.run[1], quiet, m.run[0], 999999, m.run[1]};
    const size_t n = sizeof page / sizeof page[0];
    store_metric pts[96];
    for (int b = 0; b < 40; b++) {
        size_t np = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 0);
        CHECK(store_metrics_insert(pg, pts, np) == STORE_OK);
        CHECK(store_metrics_insert(lite, pts, np) == STORE_OK);
        if (b % 4 != 3) continue;
        char *a = briefs_text(pg, page, n, 0), *l = briefs_text(lite, page, n, 0);
        int same = same_text("PostgreSQL's and SQLite's page", a, l);
        free(a);
        free(l);
        CHECK_MSG(same, "after batch %d", b);
    }
    store_close(pg);
    store_close(lite);
}

/* The key's row: its kind and id, or kind "" when there is none. */
static long long key_target(store *st, const char *key, char *kind, size_t cap) {
    json_t *o = NULL;
    kind[0] = 0;
    if (store_idempotency_get(st, key, &o) != STORE_OK) return 0;
    snprintf(kind, cap, "%s", json_string_value(json_object_get(o, "kind")));
    long long id = (long long)json_integer_value(json_object_get(o, "id"));
    json_decref(o);
    return id;
}

TEST(an_idempotency_key_is_recorded_once_with_what_it_created) {
    char where[1024], kind[32];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    json_t *none = (json_t *)0x1;
    CHECK(store_idempotency_get(st, "k1", &none) == STORE_NOT_FOUND);
    CHECK(none == NULL);
    store_idempotency k1 = {.key = "k1", .request_hash = "h1"}, k2 = {.key = "k2", .request_hash = "h2"};
    store_new_run nr = {
        .name = "keyed", .config_json = "{\"steps\":5}", .total_steps = 5, .corpus = "small", .idempotency = &k1};
    long long id = 0, again = 7;
    CHECK(store_run_create(st, &nr, &id) == STORE_OK && id > 0);
    CHECK_EQ_INT(key_target(st, "k1", kind, sizeof kind), id);
    CHECK(!strcmp(kind, "run"));
    json_t *o = NULL;
    CHECK(store_idempotency_get(st, "k1", &o) == STORE_OK);
    CHECK(!strcmp(json_string_value(json_object_get(o, "request_hash")), "h1"));
    json_decref(o);
    /* A second creation with the key creates nothing. */
    CHECK(store_run_create(st, &nr, &again) == STORE_CONFLICT);
    CHECK_EQ_INT(again, 0);
    json_t *list;
    long long total = 0;
    store_run_filter f = {.limit = 100};
    CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
    json_decref(list);
    CHECK_EQ_INT(total, 1);
    /* An experiment records its key with it, all or nothing. */
    /* (a name taken is renamed, so that the only conflict left is the key's) */
    store_new_experiment e = {
        .name = "x", .base_json = "{}", .variants_json = "[]", .idempotency = &k2, .rename_if_taken = 1};
    store_new_run runs[1] = {{.name = "x/a", .config_json = "{\"steps\":5}", .total_steps = 5, .corpus = "small"}};
    long long exp_id = 0, ids[1] = {0};
    CHECK(store_experiment_create(st, &e, runs, 1, &exp_id, ids) == STORE_OK);
    CHECK_EQ_INT(key_target(st, "k2", kind, sizeof kind), exp_id);
    CHECK(!strcmp(kind, "experiment"));
    e.idempotency = &k1; /* the run's key: nothing of the experiment is created */
    long long exp2 = 9, ids2[1] = {9};
    CHECK(store_experiment_create(st, &e, runs, 1, &exp2, ids2) == STORE_CONFLICT);
    CHECK_EQ_INT(exp2, 0);
    CHECK_EQ_INT(ids2[0], 0);
    CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
    json_decref(list);
    CHECK_EQ_INT(total, 2);
    /* A key goes with what it created. */
    CHECK(store_run_transition(st, id, (const char *const[]){"queued", NULL}, "cancelled", NULL) == STORE_OK);
    CHECK(store_run_delete(st, id) == STORE_OK);
    CHECK_EQ_INT(key_target(st, "k1", kind, sizeof kind), 0);
    CHECK(store_experiment_delete(st, exp_id) == STORE_OK);
    CHECK_EQ_INT(key_target(st, "k2", kind, sizeof kind), 0);
    store_close(st);
}

/* The names of the experiments a search finds, newest first, joined by "|". */
static void found_experiments(store *st, const char *q, char *out, size_t len) {
    json_t *list = NULL;
    long long total = -1;
    out[0] = 0;
    if (store_experiment_list(st, 50, 0, q, &list, &total) != STORE_OK) {
        snprintf(out, len, "(error)");
        return;
    }
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "|" : "",
                                            json_string_value(json_object_get(e, "name")));
    if (total != (long long)json_array_size(list)) snprintf(out, len, "(total %lld)", total);
    json_decref(list);
}

/* The ids of the runs a search finds, in id order, joined by ",". */
static void found_runs(store *st, const char *q, char *out, size_t len) {
    store_run_filter f = {.search = q, .sort = "id", .limit = 50};
    json_t *list = NULL;
    long long total = -1;
    out[0] = 0;
    if (store_run_list(st, &f, &list, &total) != STORE_OK) {
        snprintf(out, len, "(error)");
        return;
    }
    size_t i;
    json_t *r;
    json_array_foreach(list, i, r) snprintf(out + strlen(out), len - strlen(out), "%s%lld", i ? "," : "",
                                            (long long)json_integer_value(json_object_get(r, "id")));
    json_decref(list);
}

TEST(experiment_names_are_unique_and_words_are_searchable) {
    char where[1024];
    store *st = B->open_fresh(where, sizeof where);
    CHECK(st);
    store_new_run run = {.name = "seed-blog/cosine_rope", .config_json = "{}", .seed = 1, .corpus = "small"};
    store_new_experiment e = {.name = "seed-blog", .base_json = "{}", .variants_json = "[]"};
    long long a = 0, b = 0, c = 0, ra = 0, rb = 0;
    CHECK(store_experiment_create(st, &e, &run, 1, &a, &ra) == STORE_OK);
    /* the same name: refused whole, or the first free "name (n)" when the caller allows it */
    CHECK(store_experiment_create(st, &e, &run, 1, &b, &rb) == STORE_CONFLICT);
    CHECK(b == 0 && rb == 0);
    e.rename_if_taken = 1;
    run.name = "seed-blog/rope";
    CHECK(store_experiment_create(st, &e, &run, 1, &b, &rb) == STORE_OK);
    json_t *named = NULL;
    CHECK(store_run_get(st, rb, &named) == STORE_OK);
    int after = !strcmp(json_string_value(json_object_get(named, "name")), "seed-blog (2)/rope");
    json_decref(named);
    CHECK_MSG(after, "the run is not named after the name its experiment took");
    CHECK(store_experiment_create(st, &e, NULL, 0, &c, NULL) == STORE_OK);
    char got[512];
    found_experiments(st, NULL, got, sizeof got);
    CHECK_MSG(!strcmp(got, "seed-blog (3)|seed-blog (2)|seed-blog"), "%s", got);
    CHECK(store_experiment_rename(st, c, "seed-blog") == STORE_CONFLICT);
    CHECK(store_experiment_rename(st, c, "Tau sweep") == STORE_OK);
    /* words of names, tags and notes, as prefixes, in any order, case aside */
    json_t *tags = json_pack("[s]", "baseline");
    CHECK(store_run_update(st, rb, NULL, "Lower LR; compare with the Swin scale", tags) == STORE_OK);
    json_decref(tags);
    char want[64];
    found_runs(st, "cos blog", got, sizeof got);
    snprintf(want, sizeof want, "%lld", ra);
    CHECK_MSG(!strcmp(got, want), "cos blog: %s, not %s", got, want);
    found_runs(st, "swin BASE", got, sizeof got);
    snprintf(want, sizeof want, "%lld", rb);
    CHECK_MSG(!strcmp(got, want), "swin BASE: %s, not %s", got, want);
    found_runs(st, "seed", got, sizeof got);
    snprintf(want, sizeof want, "%lld,%lld", ra, rb);
    CHECK_MSG(!strcmp(got, want), "seed: %s, not %s", got, want);
    found_runs(st, "nothing", got, sizeof got);
    CHECK_MSG(!strcmp(got, ""), "nothing: %s", got);
    /* an experiment by its name, or by one of its runs' words */
    found_experiments(st, "tau", got, sizeof got);
    CHECK_MSG(!strcmp(got, "Tau sweep"), "tau: %s", got);
    found_experiments(st, "swin", got, sizeof got);
    CHECK_MSG(!strcmp(got, "seed-blog (2)"), "swin: %s", got);
    /* a renamed run, a deleted tag: the words follow */
    CHECK(store_run_update(st, ra, "plain", NULL, NULL) == STORE_OK);
    found_runs(st, "cosine", got, sizeof got);
    CHECK_MSG(!strcmp(got, ""), "renamed: %s", got);
    tags = json_array();
    CHECK(store_run_update(st, rb, NULL, NULL, tags) == STORE_OK);
    json_decref(tags);
    found_runs(st, "baseline", got, sizeof got);
    CHECK_MSG(!strcmp(got, ""), "untagged: %s", got);
    CHECK(store_search_ok("a-b c") && !store_search_ok("  ,; ") && !store_search_ok(NULL));
    CHECK(!store_search_ok("a b c d e f g h i"));
    /* runs added to an experiment join it, with its new variants and replicates */
    store_new_run more[2] = {{.name = "seed-blog/cosine_rope/r1", .config_json = "{}", .seed = 2, .replicate = 1},
                             {.name = "seed-blog/rope/r1", .config_json = "{}", .seed = 2, .replicate = 1}};
    long long ids[2] = {0, 0};
    CHECK(store_experiment_add_runs(st, a, "[{\"name\":\"x\"}]", 2, more, 2, ids) == STORE_OK);
    CHECK(ids[0] > rb && ids[1] == ids[0] + 1);
    json_t *x = NULL;
    CHECK(store_experiment_get(st, a, &x) == STORE_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(x, "replicates")), 2);
    CHECK_EQ_INT(json_integer_value(json_object_get(x, "run_count")), 3);
    CHECK_EQ_INT(json_array_size(json_object_get(x, "variants")), 1);
    json_decref(x);
    CHECK(store_experiment_add_runs(st, 999, "[]", 2, more, 2, ids) == STORE_NOT_FOUND);
    store_close(st);
}

typedef struct {
    const char *name;
    void (*fn)(void);
} contract_case;

static const contract_case contract[] = {
    {"runs_round_trip", runs_round_trip},
    {"metrics_are_stored_exactly_and_summarised", metrics_are_stored_exactly_and_summarised},
    {"metric_points_come_back_by_key_then_step", metric_points_come_back_by_key_then_step},
    {"a_series_is_read_by_step_range_within_its_limit", a_series_is_read_by_step_range_within_its_limit},
    {"brief_leaves_no_output_on_error", brief_leaves_no_output_on_error},
    {"an_experiment_is_created_whole_or_not_at_all", an_experiment_is_created_whole_or_not_at_all},
    {"corpora_probes_and_artefacts", corpora_probes_and_artefacts},
    {"summaries_equal_a_recomputation_from_the_rows", summaries_equal_a_recomputation_from_the_rows},
    {"an_old_database_gets_its_summaries_from_the_migration", an_old_database_gets_its_summaries_from_the_migration},
    {"a_page_of_briefs_is_each_runs_brief", a_page_of_briefs_is_each_runs_brief},
    {"an_idempotency_key_is_recorded_once_with_what_it_created",
     an_idempotency_key_is_recorded_once_with_what_it_created},
    {"experiment_names_are_unique_and_words_are_searchable", experiment_names_are_unique_and_words_are_searchable},
};

int main(void) {
    const backend *backends[] = {&sqlite_backend, &pg_backend};
    for (size_t b = 0; b < 2; b++) {
        if (backends[b] == &pg_backend && !pgtest_server_url()) {
            printf("FAIL postgresql: no PostgreSQL server for the tests\n");
            return 1;
        }
        for (size_t i = 0; i < sizeof contract / sizeof contract[0]; i++) {
            char name[160];
            snprintf(name, sizeof name, "%s/%s", backends[b]->name, contract[i].name);
            B = backends[b];
            test_run(name, contract[i].fn);
        }
    }
    RUN(both_backends_give_the_same_briefs);
    return test_summary();
}
