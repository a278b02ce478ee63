/* Reading a result row into the contract's objects, the same for both backends: each backend hands
 * its row through a store_row (four typed getters over a SQLite statement or a libpq result) and
 * the functions here build the JSON objects store.h and store_nodes.h describe. The column lists
 * below are SQL both dialects accept; a backend that needs a dialect's own column (a run's tags,
 * aggregated in each dialect's way) keeps the column's place. Nothing here touches a database. */
#ifndef ATTNLAB_STORE_ROWS_H
#define ATTNLAB_STORE_ROWS_H

#include <jansson.h>

#include "store/common/store_summary.h"
#include "store/store.h"

typedef struct store_row store_row;
typedef struct {
    int (*is_null)(const store_row *r, int col);
    const char *(*text)(const store_row *r, int col); /* NULL for SQL NULL */
    long long (*i64)(const store_row *r, int col);
    double (*real)(const store_row *r, int col);
    int (*boolean)(const store_row *r, int col); /* a boolean or an integer column: non-zero is 1 */
} store_row_ops;
/* One row of a result: res and row are the backend's (a statement, or a result and its row). */
struct store_row {
    const store_row_ops *ops;
    const void *res;
    int row;
};

/* Column values as new JSON values (NULL only when out of memory); SQL NULL becomes JSON null. */
json_t *store_col_text(const store_row *r, int col);
json_t *store_col_real(const store_row *r, int col);
json_t *store_col_int(const store_row *r, int col);
/* A column holding JSON text, parsed; `fallback` (stolen) when the text is absent or not JSON. */
json_t *store_col_json(const store_row *r, int col, json_t *fallback);
/* A REAL column that may hold a NaN (SQLite stores it as NULL). */
double store_col_real_or_nan(const store_row *r, int col);

/* A run: columns id, name, experiment_id, variant, config, seed, status, step, total_steps, note,
 * error, created_at, started_at, finished_at, corpus, checkpoint_step, tags (a JSON array as text:
 * each dialect aggregates it its own way), replicate; a backend may add its own after them. */
#define STORE_RUN_COLUMNS_BEFORE_TAGS                                                                                  \
    "r.id, r.name, r.experiment_id, r.variant, r.config, r.seed, r.status, r.step, r.total_steps, "                    \
    "r.note, r.error, r.created_at, r.started_at, r.finished_at, r.corpus, r.checkpoint_step, "
#define STORE_RUN_COLUMN_COUNT 20 /* ... tags (16), r.replicate (17), r.source (18), r.provenance (19) */
json_t *store_run_from_row(const store_row *r);

#define STORE_EXPERIMENT_COLUMNS                                                                                       \
    "e.id, e.name, e.preset, e.base_config, e.variants, e.created_at, "                                                \
    "(SELECT count(*) FROM runs r WHERE r.experiment_id = e.id), e.replicates"
#define STORE_EXPERIMENT_COLUMN_COUNT 8
json_t *store_experiment_from_row(const store_row *r);

#define STORE_CORPUS_COLUMNS                                                                                           \
    "name, source, tokenizer, documents, bytes, tokens, status, error, builtin, created_at, "                          \
    "(SELECT count(*) FROM runs r WHERE r.corpus = c.name), task"
json_t *store_corpus_from_row(const store_row *r);

#define STORE_PROBE_COLUMNS "id, kind, params, run_id, status, error, created_at, duration_ms, result"
json_t *store_probe_from_row(const store_row *r);
/* A probe's table: columns name, columns, and rows (with_rows) or the number of rows. */
json_t *store_probe_table_from_row(const store_row *r, int with_rows);

/* An artefact: columns path, kind, run_id, step, bytes, sha256, created_at. */
/* An idempotency key: what it created ("run" or "experiment", its id), the request's hash, when. */
#define STORE_IDEMPOTENCY_COLUMNS "kind, coalesce(run_id, experiment_id), request_hash, created_at"
json_t *store_idempotency_from_row(const store_row *r);
/* The SQL that records one (parameters: key, kind, run id or NULL, experiment id or NULL, request
 * hash, time), the same in both dialects but for the placeholders' spelling. */
#define STORE_IDEMPOTENCY_INSERT(a, b, c, d, e, f)                                                                     \
    "INSERT INTO idempotency_keys (key, kind, run_id, experiment_id, request_hash, created_at) VALUES (" a ", " b      \
    ", " c ", " d ", " e ", " f ")"

#define STORE_ARTIFACT_COLUMNS "path, kind, run_id, step, bytes, sha256, created_at"
json_t *store_artifact_from_row(const store_row *r);

/* A node: columns id, host, url, role, capacity, pid, version, started_at, heartbeat_at,
 * heartbeat age, alive, stopped_at, running (a JSON array of run ids as text). */
json_t *store_node_from_row(const store_row *r);

/* A growing list of metric points: add_row appends the row's point (columns key, step, value,
 * wall_time) when its key matches keys (store_key_matches); done hands the list out (NULL and 0
 * when it is empty, or on any status but STORE_OK) as one allocation holding the points and then
 * their keys (store_metric's rule), each key once per run of equal keys (rows come by key). */
typedef struct {
    store_metric *v;
    size_t *key_at; /* point i's key: at keys + key_at[i] until done */
    size_t n, cap;
    char *keys;
    size_t keys_len, keys_cap;
} store_points;
/* -1 when out of memory (recorded). */
int store_points_add_row(store_points *p, const store_row *r, long long run_id, const char *keys);
store_status store_points_done(store_status s, store_points *p, store_metric **out, size_t *n);

/* A series' summary: the columns of STORE_SUMMARY_COLUMNS from col on. */
#define STORE_SUMMARY_COLUMNS "count, last_step, last_value, min_value, min_step, max_value, sum, sum_err"
void store_summary_from_row(const store_row *r, int col, store_summary *sum);
/* {"last","min","max","mean","step_of_min","count","last_step"} (store_metrics_summary's member). */
json_t *store_summary_json(const store_summary *m, int flags);

/* Members of a run's brief (store_run_brief): {"last","min"} of a loss series, {"min","max"} of
 * the temperatures. -1 when out of memory. */
int store_brief_series(json_t *brief, const char *key, double last, double min);
int store_brief_tau(json_t *brief, double min, double max);

#endif
