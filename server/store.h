/* The store: every SQL statement of attnlab lives in store.c, prepared and parameter-bound.
 *
 * One SQLite connection in WAL mode, foreign keys on, a busy timeout, serialised by a mutex so any
 * thread may call any function. store_open() applies the embedded migrations (db/migrations) in
 * order, tracked by PRAGMA user_version, and refuses a database written by a newer attnlab. */
#ifndef ATTNLAB_STORE_H
#define ATTNLAB_STORE_H

#include <jansson.h>
#include <stddef.h>

typedef struct store store;

typedef enum {
    STORE_OK = 0,
    STORE_NOT_FOUND,
    STORE_CONFLICT, /* the row exists / is in a state that forbids the change */
    STORE_TOO_NEW,  /* the file's schema is newer than this binary's */
    STORE_ERROR,    /* SQLite or I/O error; the message says which */
} store_status;

/* Opens (creating if needed) and migrates the database at path. On failure *out is NULL and err
 * holds a one-line reason. */
store_status store_open(store **out, const char *path, char *err, size_t errlen);
void store_close(store *st);

/* The schema version this binary writes, and the one the open file is at. */
int store_schema_version_supported(void);
int store_schema_version(store *st);
/* Cheap liveness check for /api/health: STORE_OK when a trivial query runs. */
store_status store_ping(store *st);
/* The message of the last STORE_ERROR on this thread's call (for logs). */
const char *store_last_error(void);

/* ---- runs ---------------------------------------------------------------------------------
 * Rows come back as JSON objects shaped like the API's run object (config parsed, tags as an
 * array). A run's status moves queued -> running -> succeeded|failed|cancelled|interrupted. */
typedef struct {
    const char *name, *variant, *note, *corpus;
    const char *config_json; /* normalised config, stored as given */
    long long seed;
    long long experiment_id; /* 0: none */
    int total_steps;
    json_t *tags; /* array of strings, may be NULL */
} store_new_run;

store_status store_run_create(store *st, const store_new_run *run, long long *id_out);
store_status store_run_get(store *st, long long id, json_t **out);

typedef struct {
    const char *status, *tag, *variant; /* NULL: any */
    long long experiment_id;            /* 0: any */
    const char *sort;                   /* id, created_at, name, status, each optionally '-' prefixed */
    int limit, offset;
} store_run_filter;
store_status store_run_list(store *st, const store_run_filter *f, json_t **runs, long long *total);

/* Moves a run to `to` only if its status is one of `from` (NULL-terminated). STORE_CONFLICT when it is
 * not, STORE_NOT_FOUND when there is no such run. Sets started_at on running and finished_at on a
 * final status; error may be NULL. */
store_status store_run_transition(store *st, long long id, const char *const *from, const char *to,
                                  const char *error);
store_status store_run_progress(store *st, long long id, int step, int checkpoint_step);
/* Any of name, note (NULL: unchanged) and tags (NULL: unchanged) */
store_status store_run_update(store *st, long long id, const char *name, const char *note, json_t *tags);
/* Deletes a run that is not queued or running, with its tags and metrics (STORE_CONFLICT otherwise). */
store_status store_run_delete(store *st, long long id);
/* Start-up recovery: running -> interrupted. Returns the number of runs changed, or -1. */
int store_runs_interrupt_running(store *st);
/* Ids of queued runs, oldest first (to queue them again after a restart). Caller frees *ids. */
store_status store_runs_queued(store *st, long long **ids, int *n);
/* {"queued":n, "running":n, ...} for /metrics. */
store_status store_run_counts(store *st, json_t **out);

/* ---- metrics ------------------------------------------------------------------------------ */
typedef struct {
    long long run_id;
    int step;
    char key[32];
    double value;
    double wall_time;
} store_metric;

/* Inserts (or replaces: a resumed run rewrites the same steps) all points in one transaction. */
store_status store_metrics_insert(store *st, const store_metric *points, size_t n);
/* {"key": {"steps":[…], "values":[…], "wall_times":[…]}, …} for keys matching `keys` (comma-separated
 * names, a trailing '*' matches a prefix; NULL = all). With max_points > 0 a longer series is cut
 * into max_points/2 buckets and each keeps its minimum and its maximum point, in step order. */
store_status store_metrics_series(store *st, long long run_id, const char *keys, int since_step, int max_points,
                                  json_t **out);
/* {"key": {"last","min","max","mean","step_of_min","count","last_step"}, …} */
store_status store_metrics_summary(store *st, long long run_id, json_t **out);
/* What a runs table shows: {"loss":{"last","min"}, "val_loss":{"last","min"}, "tau":{"min","max"} (of the
 * latest step)}; members are absent when the run has no such series. */
store_status store_run_brief(store *st, long long run_id, json_t **out);
/* CSV with a header "step,wall_time,key1,key2,…" and one row per step (empty cells where absent). */
store_status store_metrics_csv(store *st, long long run_id, char **csv, size_t *len);

/* ---- experiments -------------------------------------------------------------------------- */
store_status store_experiment_create(store *st, const char *name, const char *preset, const char *base_json,
                                     const char *variants_json, long long *id_out);
store_status store_experiment_get(store *st, long long id, json_t **out);
store_status store_experiment_list(store *st, int limit, int offset, json_t **out, long long *total);

/* ---- corpora ------------------------------------------------------------------------------ */
typedef struct {
    const char *name, *source, *tokenizer, *status, *error;
    long long documents, bytes, tokens;
    int builtin;
} store_corpus;
/* Inserts or replaces the catalogue row of a corpus. */
store_status store_corpus_put(store *st, const store_corpus *c);
/* Inserts only if no corpus has that name (STORE_CONFLICT otherwise). */
store_status store_corpus_create(store *st, const store_corpus *c);
store_status store_corpus_get(store *st, const char *name, json_t **out);
store_status store_corpus_list(store *st, json_t **out);
/* Deletes the row unless a run uses the corpus (STORE_CONFLICT) or it is built in (STORE_CONFLICT). */
store_status store_corpus_delete(store *st, const char *name);

/* ---- probes ------------------------------------------------------------------------------- */
typedef struct {
    const char *kind, *params_json, *cache_key, *status, *error;
    long long seed, run_id; /* run_id 0: none */
    double duration_ms;
    json_t *result; /* the probe's result object; its "tables" go to probe_tables */
} store_new_probe;

store_status store_probe_insert(store *st, const store_new_probe *p, long long *id_out);
/* The newest succeeded probe with this kind and cache key (STORE_NOT_FOUND if none). */
store_status store_probe_find(store *st, const char *kind, const char *cache_key, long long *id_out);
/* {"id","kind","params","run_id","status","error","created_at","duration_ms","result":{…,"tables":[…]}} */
store_status store_probe_get(store *st, long long id, json_t **out);
/* Like get, without tables' rows (their names, columns and row counts instead). */
store_status store_probe_list(store *st, const char *kind, int limit, int offset, json_t **out, long long *total);
/* One table {"name","columns","rows"} by name (NULL: the first). */
store_status store_probe_table(store *st, long long id, const char *name, json_t **out);

#endif
