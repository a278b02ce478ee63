/* The store's contract, against a real SQLite file: what each function gives back, and the one
 * rule for errors (on any status other than STORE_OK every output is NULL/0 and the caller owns
 * nothing). Failures are made the way they happen in the field: a table that is gone, pages that
 * are corrupt. */
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/harness.h"
#include "../support/metric_batches.h"
#include "../support/test.h"
#include "store/store.h"

static int fresh_store(store **st, char *path, size_t len) {
    char dir[256], err[256];
    if (harness_tempdir(dir, sizeof dir) < 0) return -1;
    snprintf(path, len, "%s/store.db", dir);
    if (store_open(st, path, err, sizeof err) != STORE_OK) {
        printf("# store_open: %s\n", err);
        return -1;
    }
    return 0;
}

/* Runs SQL on a second connection to the same file (the way another process would). */
static int raw_exec(const char *path, const char *sql) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) printf("# %s: %s\n", sql, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : -1;
}

static long long new_run(store *st, const char *name) {
    store_new_run nr = {.name = name, .config_json = "{\"steps\":5}", .seed = 1, .total_steps = 5, .corpus = "small"};
    long long id = 0;
    return store_run_create(st, &nr, &id) == STORE_OK ? id : -1;
}

TEST(summary_names_the_step_of_the_minimum) {
    store *st;
    char path[320];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    long long id = new_run(st, "summary");
    CHECK(id > 0);
    /* min 1 at step 2, max 9 at step 4, last 2 at step 5 */
    static const double values[] = {5, 1, 3, 9, 2};
    store_metric pts[5];
    for (int i = 0; i < 5; i++) {
        pts[i] = (store_metric){.run_id = id, .step = i + 1, .value = values[i], .wall_time = 100 + i};
        snprintf(pts[i].key, sizeof pts[i].key, "loss");
    }
    CHECK(store_metrics_insert(st, pts, 5) == STORE_OK);
    json_t *sum = NULL;
    CHECK(store_metrics_summary(st, id, &sum) == STORE_OK);
    json_t *loss = json_object_get(sum, "loss");
    CHECK(loss);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "step_of_min")), 2);
    CHECK_NEAR(json_number_value(json_object_get(loss, "min")), 1, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "max")), 9, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "last")), 2, 0);
    CHECK_NEAR(json_number_value(json_object_get(loss, "mean")), 4, 1e-12);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "count")), 5);
    CHECK_EQ_INT(json_integer_value(json_object_get(loss, "last_step")), 5);
    json_decref(sum);
    store_close(st);
}

TEST(brief_leaves_no_output_on_error) {
    store *st;
    char path[320];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    long long id = new_run(st, "brief");
    CHECK(id > 0);
    json_t *brief = NULL;
    CHECK(store_run_brief(st, id, &brief) == STORE_OK);
    CHECK(json_is_object(brief));
    json_decref(brief);
    CHECK(raw_exec(path, "DROP TABLE metric_summaries") == 0);
    brief = (json_t *)0x1; /* whatever the caller had there */
    store_status s = store_run_brief(st, id, &brief);
    CHECK_MSG(s != STORE_OK, "the brief of a run without a metrics table came back OK");
    CHECK_MSG(brief == NULL, "an output was left (and owned by nobody) after an error");
    store_close(st);
}

/* Makes every b-tree leaf page of the named tables/indexes after the first unreadable. */
static int corrupt_later_leaves(const char *path, const char *const *names) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    int pages[4096], n = 0;
    for (int k = 0; names[k]; k++) {
        sqlite3_stmt *q;
        if (sqlite3_prepare_v2(db, "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", -1,
                               &q, NULL) != SQLITE_OK)
            break;
        sqlite3_bind_text(q, 1, names[k], -1, SQLITE_STATIC);
        int first = 1;
        while (sqlite3_step(q) == SQLITE_ROW && n < 4096) {
            if (!first) pages[n++] = sqlite3_column_int(q, 0);
            first = 0;
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    if (n == 0) return -1;
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -1;
    unsigned char junk[16];
    memset(junk, 0xEE, sizeof junk);
    for (int i = 0; i < n; i++)
        if (pwrite(fd, junk, sizeof junk, (off_t)(pages[i] - 1) * 4096) != (ssize_t)sizeof junk) {
            close(fd);
            return -1;
        }
    close(fd);
    return n;
}

TEST(a_read_error_is_an_error_not_the_end_of_the_rows) {
    store *st;
    char path[320], err[256];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    /* Enough queued runs to fill several leaf pages. */
    for (int i = 0; i < 1500; i++) CHECK(new_run(st, "queued-run-with-a-longish-name-to-fill-pages") > 0);
    long long *ids = NULL;
    int n = 0;
    CHECK(store_runs_queued(st, &ids, &n) == STORE_OK);
    CHECK_EQ_INT(n, 1500);
    free(ids);
    store_close(st); /* the last connection folds the WAL into the file */
    static const char *const names[] = {"runs", "runs_status", NULL};
    int bad = corrupt_later_leaves(path, names);
    CHECK_MSG(bad > 0, "no pages to corrupt");
    CHECK(store_open(&st, path, err, sizeof err) == STORE_OK);
    ids = (long long *)0x1;
    n = 7;
    store_status s = store_runs_queued(st, &ids, &n);
    CHECK_MSG(s != STORE_OK, "a corrupt runs table gave %d queued runs and OK", n);
    CHECK(ids == NULL);
    CHECK_EQ_INT(n, 0);
    json_t *counts = (json_t *)0x1;
    s = store_run_counts(st, &counts);
    CHECK_MSG(s != STORE_OK, "a corrupt runs table gave counts and OK");
    CHECK(counts == NULL);
    json_t *list = (json_t *)0x1;
    long long total = 7;
    store_run_filter f = {.limit = 500};
    s = store_run_list(st, &f, &list, &total);
    CHECK(s != STORE_OK);
    CHECK(list == NULL);
    CHECK_EQ_INT(total, 0);
    store_close(st);
}

TEST(an_experiment_is_created_whole_or_not_at_all) {
    store *st;
    char path[320];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    store_new_experiment e = {.name = "ab", .base_json = "{}", .variants_json = "[]"};
    store_new_run runs[3] = {
        {.name = "ab/a", .config_json = "{\"steps\":5}", .seed = 1, .total_steps = 5, .corpus = "small"},
        {.name = "ab/b", .config_json = "{\"steps\":5}", .seed = 1, .total_steps = 5, .corpus = "small"},
        {.name = "ab/c", .config_json = "{\"steps\":5}", .seed = 1, .total_steps = 5, .corpus = "small"},
    };
    long long exp_id = -1, ids[3] = {-1, -1, -1};
    CHECK(store_experiment_create(st, &e, runs, 3, &exp_id, ids) == STORE_OK);
    CHECK(exp_id > 0);
    for (int i = 0; i < 3; i++) {
        json_t *r = NULL;
        CHECK(store_run_get(st, ids[i], &r) == STORE_OK);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "experiment_id")), exp_id);
        json_decref(r);
    }
    /* The third run cannot be stored (its config is not JSON): no experiment, no run. */
    runs[2].config_json = "{not json";
    long long before_runs, before_exps;
    json_t *list;
    store_run_filter f = {.limit = 100};
    CHECK(store_run_list(st, &f, &list, &before_runs) == STORE_OK);
    json_decref(list);
    CHECK(store_experiment_list(st, 100, 0, &list, &before_exps) == STORE_OK);
    json_decref(list);
    long long exp2 = -1, ids2[3] = {-1, -1, -1};
    CHECK(store_experiment_create(st, &e, runs, 3, &exp2, ids2) == STORE_ERROR);
    CHECK_EQ_INT(exp2, 0);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(ids2[i], 0);
    long long after_runs, after_exps;
    CHECK(store_run_list(st, &f, &list, &after_runs) == STORE_OK);
    json_decref(list);
    CHECK(store_experiment_list(st, 100, 0, &list, &after_exps) == STORE_OK);
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

TEST(metric_points_come_back_by_key_then_step) {
    store *st;
    char path[320];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    long long id = new_run(st, "points");
    CHECK(id > 0);
    static const char *const keys[] = {"tau.0.1", "loss", "tau.0.0", "lr"};
    store_metric pts[12];
    int k = 0;
    for (int step = 3; step >= 1; step--)
        for (int i = 0; i < 4; i++) {
            pts[k] = (store_metric){.run_id = id, .step = step, .value = step * 10 + i, .wall_time = step};
            snprintf(pts[k].key, sizeof pts[k].key, "%s", keys[i]);
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
    got = (store_metric *)0x1;
    CHECK(store_metrics_points(st, id, "nothing", 0, &got, &n) == STORE_OK);
    CHECK(got == NULL);
    CHECK_EQ_INT(n, 0);
    store_close(st);
}

/* ---- series summaries (migration 0008) against a recomputation from the rows ------------------ */

/* What GET /api/runs/{id}/summary gave before the summaries: SQLite's aggregates over the rows,
 * on a connection of its own. */
static json_t *summary_from_rows(const char *path, long long run_id) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) return NULL;
    sqlite3_stmt *q = NULL;
    json_t *sum = json_object();
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
    if (sum && rc != SQLITE_DONE) {
        json_decref(sum);
        sum = NULL;
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return sum;
}

/* The runs list's brief as it was computed from the rows. */
static json_t *brief_from_rows(const char *path, long long run_id) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) return NULL;
    json_t *brief = json_object();
    static const char *const keys[] = {"loss", "val_loss"};
    for (int k = 0; k < 3 && brief; k++) {
        sqlite3_stmt *q = NULL;
        const char *sql = k < 2 ? "SELECT min(value), count(*), (SELECT value FROM metrics WHERE run_id = ?1 AND "
                                  "key = ?2 ORDER BY step DESC LIMIT 1) FROM metrics WHERE run_id = ?1 AND key = ?2"
                                : "SELECT min(value), max(value), count(*) FROM metrics WHERE run_id = ?1 AND key >= "
                                  "'tau.' AND key < 'tau/' AND step = (SELECT max(step) FROM metrics WHERE run_id = "
                                  "?1 AND key = 'tau.0.0')";
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
            json_decref(brief);
            brief = NULL;
            break;
        }
        sqlite3_bind_int64(q, 1, run_id);
        if (k < 2) sqlite3_bind_text(q, 2, keys[k], -1, SQLITE_STATIC);
        if (sqlite3_step(q) != SQLITE_ROW) {
            json_decref(brief);
            brief = NULL;
        } else if (k < 2 && sqlite3_column_int64(q, 1) > 0) {
            json_object_set_new(
                brief, keys[k],
                json_pack("{s:f, s:f}", "last", sqlite3_column_double(q, 2), "min", sqlite3_column_double(q, 0)));
        } else if (k == 2 && sqlite3_column_int64(q, 2) > 0) {
            json_object_set_new(
                brief, "tau",
                json_pack("{s:f, s:f}", "min", sqlite3_column_double(q, 0), "max", sqlite3_column_double(q, 1)));
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return brief;
}

/* 1 when the store's answer is the recomputation's, byte for byte; prints both otherwise. */
static int same_json(const char *what, long long run_id, json_t *got, json_t *want) {
    char *a = got ? json_dumps(got, JSON_COMPACT) : NULL, *b = want ? json_dumps(want, JSON_COMPACT) : NULL;
    int same = a && b && !strcmp(a, b);
    if (!same) printf("# run %lld %s:\n#   store: %s\n#   rows:  %s\n", run_id, what, a ? a : "-", b ? b : "-");
    free(a);
    free(b);
    json_decref(got);
    json_decref(want);
    return same;
}

static int store_matches_rows(store *st, const char *path, long long run_id) {
    json_t *sum = NULL, *brief = NULL;
    if (store_metrics_summary(st, run_id, &sum) != STORE_OK || store_run_brief(st, run_id, &brief) != STORE_OK) {
        json_decref(sum);
        return 0;
    }
    return same_json("summary", run_id, sum, summary_from_rows(path, run_id)) &
           same_json("brief", run_id, brief, brief_from_rows(path, run_id));
}

TEST(summaries_equal_a_recomputation_from_the_rows) {
    store *st;
    char path[320];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    static series_model m;
    memset(&m, 0, sizeof m);
    m.run[0] = new_run(st, "sum-a");
    m.run[1] = new_run(st, "sum-b");
    CHECK(m.run[0] > 0 && m.run[1] > 0);
    store_metric pts[96];
    for (int b = 0; b < 150; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 1);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
        for (int r = 0; r < 2; r++) CHECK_MSG(store_matches_rows(st, path, m.run[r]), "after batch %d", b);
    }
    /* The loss orders of the runs list read the summaries: the same order as the rows give. */
    static const char *const sorts[] = {"loss", "-loss", "min_val_loss", "-min_val_loss"};
    for (int i = 0; i < 4; i++) {
        json_t *list = NULL;
        long long total = 0;
        store_run_filter f = {.limit = 10, .sort = sorts[i]};
        CHECK(store_run_list(st, &f, &list, &total) == STORE_OK);
        json_t *sum0 = NULL, *sum1 = NULL;
        CHECK(store_metrics_summary(st, m.run[0], &sum0) == STORE_OK);
        CHECK(store_metrics_summary(st, m.run[1], &sum1) == STORE_OK);
        const char *key = i < 2 ? "loss" : "val_loss", *field = i < 2 ? "last" : "min";
        double a = json_real_value(json_object_get(json_object_get(sum0, key), field));
        double b = json_real_value(json_object_get(json_object_get(sum1, key), field));
        int a_first =
            (i % 2 == 0) ? (a < b || (a == b && m.run[0] < m.run[1])) : (a > b || (a == b && m.run[0] > m.run[1]));
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(list, 0), "id")), a_first ? m.run[0] : m.run[1]);
        json_decref(sum0);
        json_decref(sum1);
        json_decref(list);
    }
    /* A deleted run takes its summaries with it. */
    CHECK(store_run_transition(st, m.run[0], (const char *const[]){"queued", NULL}, "cancelled", NULL) == STORE_OK);
    CHECK(store_run_delete(st, m.run[0]) == STORE_OK);
    store_close(st);
    sqlite3 *db;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_stmt *q;
    CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM metric_summaries WHERE run_id = ?", -1, &q, NULL) == SQLITE_OK);
    sqlite3_bind_int64(q, 1, m.run[0]);
    CHECK(sqlite3_step(q) == SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(q, 0), 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

TEST(an_old_database_gets_its_summaries_from_the_migration) {
    store *st;
    char path[320], err[256];
    CHECK(fresh_store(&st, path, sizeof path) == 0);
    static series_model m;
    memset(&m, 0, sizeof m);
    m.run[0] = new_run(st, "old-a");
    m.run[1] = new_run(st, "old-b");
    CHECK(m.run[0] > 0 && m.run[1] > 0);
    store_metric pts[96];
    for (int b = 0; b < 40; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 1);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
    }
    store_close(st);
    /* The database as schema version 7 left it: points, no summaries (and points no summary saw),
     * nor the later versions' columns. */
    CHECK(raw_exec(path, "DROP TABLE metric_summaries; ALTER TABLE runs DROP COLUMN source; ALTER TABLE runs DROP "
                         "COLUMN provenance; PRAGMA user_version = 7; "
                         "INSERT OR REPLACE INTO metrics (run_id, key, step, value, wall_time) "
                         "SELECT run_id, key, step + 1000, value * 2, wall_time FROM metrics") == 0);
    CHECK(store_open(&st, path, err, sizeof err) == STORE_OK);
    CHECK_EQ_INT(store_schema_version(st), store_schema_version_supported());
    for (int r = 0; r < 2; r++) CHECK(store_matches_rows(st, path, m.run[r]));
    /* and they are kept from there on */
    for (int b = 0; b < 20; b++) {
        size_t n = metric_batch_random(&m, pts, sizeof pts / sizeof pts[0], 1);
        CHECK(store_metrics_insert(st, pts, n) == STORE_OK);
        for (int r = 0; r < 2; r++) CHECK_MSG(store_matches_rows(st, path, m.run[r]), "after batch %d", b);
    }
    store_close(st);
}

int main(void) {
    RUN(summary_names_the_step_of_the_minimum);
    RUN(brief_leaves_no_output_on_error);
    RUN(a_read_error_is_an_error_not_the_end_of_the_rows);
    RUN(an_experiment_is_created_whole_or_not_at_all);
    RUN(metric_points_come_back_by_key_then_step);
    RUN(summaries_equal_a_recomputation_from_the_rows);
    RUN(an_old_database_gets_its_summaries_from_the_migration);
    return test_summary();
}
