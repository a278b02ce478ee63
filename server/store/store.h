/* The store: everything attnlab keeps (runs and their tags, metric series, experiments, the corpus
 * catalogue, probe results) behind one contract that names no database.
 *
 * store_open() (store_open.c) is the one place that picks and opens a backend, by the URL it is
 * given: SQLite (sqlite/: one file in WAL mode, one writer connection serialised by a mutex and
 * read connections beside it that never wait for it, migrations from db/migrations applied in order) or PostgreSQL
 * (postgres/: a pool of connections to a database several nodes may share, migrations from db/migrations/pg). The
 * backend fills one table of functions once, as it opens (store_backend.h); every function below is a call through it,
 * so callers never know which backend they use. Every function may be called from any thread.
 *
 * THE RULE FOR ERRORS. Every function that returns a store_status follows it: on STORE_OK its
 * outputs are set and the caller owns what they point to (json_decref() a json_t *, free() any
 * other pointer). On any other status every output is left NULL or 0 and nothing is owned by the
 * caller. A STORE_ERROR is logged once, and store_last_error() gives its message on the thread that
 * got it. Reading stops at the first error: a list is never cut short and reported as complete.
 *
 * The store returns raw rows (JSON objects shaped like the API's objects) and raw metric points;
 * presentation (CSV, downsampling) belongs to the API layer. */
#ifndef ATTNLAB_STORE_H
#define ATTNLAB_STORE_H

#include <jansson.h>
#include <stddef.h>

typedef struct store store;

typedef enum {
    STORE_OK = 0,
    STORE_NOT_FOUND,
    STORE_CONFLICT, /* the row exists / is in a state that forbids the change */
    STORE_TOO_NEW,  /* the database's schema is newer than this binary's */
    STORE_ERROR,    /* the backend or the system failed (I/O, out of memory); the message says which */
} store_status;

/* Opens (creating if needed) and migrates the database named by `url`: a file path, or
 * "sqlite:PATH" (SQLite), or "postgresql://user:password@host:port/db" (PostgreSQL). On failure *out is NULL and err
 * holds a one-line reason; a database that can only be read is refused (every write would fail later). */
store_status store_open(store **out, const char *url, char *err, size_t errlen);
/* Closes the database; st may be NULL. */
void store_close(store *st);

/* The schema version this binary writes. */
int store_schema_version_supported(void);
/* The schema version the open database is at, or -1 when it cannot be read. */
int store_schema_version(store *st);
/* Health for /api/health: STORE_OK when the database answers at the schema version this binary
 * writes and can still be written: its file is still the one opened (not deleted or replaced,
 * where writes would vanish at the next start) and writable. STORE_ERROR otherwise, with the
 * reason in store_last_error(). */
store_status store_ping(store *st);
/* The message of the last STORE_ERROR on this thread (for logs and 500 answers). */
const char *store_last_error(void);
/* 1 when the last STORE_ERROR on this thread was the database being unreachable (a networked
 * backend whose server is down or cut off: the API answers 503 then, 500 otherwise). */
int store_unavailable(void);

/* ---- runs ---------------------------------------------------------------------------------
 * Rows come back as JSON objects shaped like the API's run object: {"id","name","experiment_id",
 * "variant","replicate","config":{…},"seed","status","step","total_steps","note","error",
 * "created_at","started_at","finished_at","corpus","checkpoint_step","tags":[…]} (and "node" on a
 * shared store: the node that holds or held it), plus "source":"external" for a run trained
 * elsewhere. A run's status moves queued -> running -> succeeded|failed|cancelled|interrupted; an
 * external run is created running and never queued, claimed or interrupted here. */
/* Every status, in that order, NULL-terminated. */
extern const char *const store_run_statuses[];
/* 1 when a run in this status has ended (succeeded, failed, cancelled, interrupted): only a resume
 * moves it again. */
int store_run_status_ended(const char *status);
/* ---- idempotency keys -----------------------------------------------------------------------
 * A creation may record a client's key in its own transaction (store_run_create,
 * store_experiment_create), so that a retry of a request whose answer was lost finds what the first
 * one created. A key is recorded once: a second creation with it is STORE_CONFLICT and creates
 * nothing. It goes with what it created (deleted with the run or the experiment). */
typedef struct {
    const char *key;          /* 1-255 bytes, as the client sent it */
    const char *request_hash; /* what the first request asked for (a hash of it), to tell a retry from a reuse */
} store_idempotency;
/* {"kind":"run"|"experiment","id":…,"request_hash":…,"created_at":…} of a recorded key; STORE_NOT_FOUND
 * when none. */
store_status store_idempotency_get(store *st, const char *key, json_t **out);

typedef struct {
    const char *name, *variant, *note, *corpus;
    const char *config_json; /* normalised config, stored as given */
    long long seed;
    long long experiment_id; /* 0: none (set by store_experiment_create for its runs) */
    int replicate;           /* 0-based replicate within its experiment (0 outside one) */
    int total_steps;
    const json_t *tags; /* array of strings, may be NULL */
    int external;       /* 1: a run trained elsewhere (migration 0009): inserted running, started now */
    const store_idempotency *idempotency; /* store_run_create only: NULL, or the key to record with it */
} store_new_run;

/* Inserts a queued run (an external one: running); *id_out gets its id (never one used before, even
 * after deletes). With run->idempotency, records its key with it: STORE_CONFLICT, nothing created,
 * when the key is recorded already. */
store_status store_run_create(store *st, const store_new_run *run, long long *id_out);
/* One run; STORE_NOT_FOUND when there is none. */
store_status store_run_get(store *st, long long id, json_t **out);

/* Most config filters one list takes. */
#define STORE_RUN_MAX_CONFIG_FILTERS 8
/* A run matches when its config's member `key` equals the JSON value `value_json` (numbers compare
 * as numbers: 1 equals 1.0; a run whose config lacks the key does not match). The key is a RunConfig
 * field name (a-z, 0-9, _), checked by the caller; the store passes both as parameters, never as SQL. */
typedef struct {
    const char *key;
    const char *value_json;
} store_config_filter;

/* A search (q): 1..STORE_SEARCH_MAX_WORDS words of at most STORE_SEARCH_MAX_WORD bytes, a word a
 * run of letters and digits (any other character separates words; bytes of UTF-8 letters count as
 * letters). A row matches when each word begins a word of its text, in any order, case aside:
 * "cos blog" finds "seed-blog/cosine_rope". SQLite searches an FTS5 index, PostgreSQL its full-text
 * search ('simple' configuration); the words are written into each dialect's query by
 * store/common, never the request's text itself. */
#define STORE_SEARCH_MAX_WORDS 8
#define STORE_SEARCH_MAX_WORD 64
/* 1 when q is a search the store takes (as above). */
int store_search_ok(const char *q);

typedef struct {
    const char *status, *tag, *variant; /* NULL: any */
    const char *search;                 /* NULL: any; else (store_search_ok) over name, tags and note */
    long long experiment_id;            /* 0: any */
    /* id, created_at, name, status, and by the run's metric series: loss and val_loss (the value at
     * the last step), min_loss and min_val_loss (the minimum); each optionally '-' prefixed for
     * descending. Runs without the series come last either way; ties by id (descending with '-'). */
    const char *sort;
    store_config_filter config[STORE_RUN_MAX_CONFIG_FILTERS]; /* all must match */
    int n_config;                                             /* 0..STORE_RUN_MAX_CONFIG_FILTERS */
    int limit, offset;
} store_run_filter;
/* The orders of store_run_list (the `sort` values above), NULL-terminated: the API accepts exactly
 * these, and each backend keeps its SQL for them in the same order. */
#define STORE_RUN_SORT_COUNT 16
extern const char *const store_run_sorts[STORE_RUN_SORT_COUNT + 1];
/* The index of sort in store_run_sorts, or -1 (NULL or unknown). */
int store_run_sort_index(const char *sort);
/* 1 when k can name a config filter's key: a plain field name (a-z, 0-9, _; 1-63 characters). */
int store_config_key_ok(const char *k);
/* A page of runs (array) and the number of runs matching the filter. */
store_status store_run_list(store *st, const store_run_filter *f, json_t **runs, long long *total);

/* Moves a run to `to` only if its status is one of `from` (NULL-terminated). STORE_CONFLICT when it
 * is not, STORE_NOT_FOUND when there is no such run. Sets started_at on running and finished_at on a
 * final status; error may be NULL. */
store_status store_run_transition(store *st, long long id, const char *const *from, const char *to, const char *error);
/* Records what a run's numbers come from (a JSON object as text: core/provenance.h), replacing any
 * before; STORE_NOT_FOUND when there is no such run. The run object shows it as "provenance". */
store_status store_run_set_provenance(store *st, long long id, const char *provenance_json);
/* Records a run's step and (if larger than the stored one) its checkpoint step. */
store_status store_run_progress(store *st, long long id, int step, int checkpoint_step);
/* Changes any of name, note (NULL: unchanged) and tags (NULL: unchanged); STORE_NOT_FOUND if no run. */
store_status store_run_update(store *st, long long id, const char *name, const char *note, const json_t *tags);
/* Deletes a run that is not queued or running, with its tags and metrics (STORE_CONFLICT otherwise). */
store_status store_run_delete(store *st, long long id);
/* Start-up recovery: running -> interrupted (external runs left running: their client ends them).
 * Returns the number of runs changed, or -1 on error. */
int store_runs_interrupt_running(store *st);
/* Ids of queued runs, oldest first (to queue them again after a restart): an array of *n (NULL
 * when there are none). */
store_status store_runs_queued(store *st, long long **ids, int *n);
/* {"queued":n, "running":n, ...} with every status present, for /metrics. */
store_status store_run_counts(store *st, json_t **out);

/* ---- metrics ------------------------------------------------------------------------------ */
/* The longest metric key in bytes (MLflow's bound; the columns are TEXT). */
#define STORE_METRIC_KEY_MAX 250
/* A point. Its key (1..STORE_METRIC_KEY_MAX bytes) is borrowed: points handed to the store point
 * at strings that live through the call; points the store hands out own their keys, in the same
 * allocation as the array (one free() frees both). */
typedef struct {
    long long run_id;
    int step;
    const char *key;
    double value;
    double wall_time;
} store_metric;

/* Inserts (or replaces: a resumed run rewrites the same steps) all points in one transaction:
 * all of them are stored or none. Points of a run that no longer exists are skipped. The same
 * transaction keeps each series' summary (store_summary.h: what store_metrics_summary,
 * store_run_brief and the loss orders of store_run_list read), so no read scans the points. */
store_status store_metrics_insert(store *st, const store_metric *points, size_t n);
/* A run's points with step >= since_step whose key matches `keys` (comma-separated names, a
 * trailing '*' matches a prefix, NULL or "" matches all), ordered by key and then step: an array
 * of *n (NULL when there are none). */
/* 1 when metric key `key` matches `keys` as store_metrics_points reads them (a summary's series
 * counted the same way before its points are read). */
int store_keys_match(const char *key, const char *keys);
store_status store_metrics_points(store *st, long long run_id, const char *keys, int since_step, store_metric **points,
                                  size_t *n);
/* A run's points of one series, `key` exactly, with from_step <= step < to_step, in step order, at
 * most `limit` of them (the first ones; limit 0 is taken as 1, and at most STORE_METRICS_RANGE_MAX):
 * an array of *n (NULL when there are none). A series read this way a range at a time (from the
 * last step read + 1 on: store_series_cursor below) holds `limit` points at most, however long it
 * is; a range that ends at or before it starts is empty without reading. */
#define STORE_METRICS_RANGE_MAX 65536
store_status store_metrics_range(store *st, long long run_id, const char *key, int from_step, int to_step, size_t limit,
                                 store_metric **points, size_t *n);
/* A series read a range of at most `limit` points at a time through store_metrics_range
 * (store/common/store_series.c): init, then next until it returns 0 (1: the next range is in
 * pts[0..n), valid until the next call; 0: the series is over; -1: the store failed), then done.
 * The memory it holds is one range, whatever the series' length. */
typedef struct {
    store *st;
    long long run_id;
    char key[STORE_METRIC_KEY_MAX + 1];
    int from, to; /* what is left to read: [from, to) */
    size_t limit;
    int over;
    store_metric *pts;
    size_t n;
} store_series_cursor;
void store_series_cursor_init(store_series_cursor *c, store *st, long long run_id, const char *key, int from_step,
                              int to_step, size_t limit);
int store_series_cursor_next(store_series_cursor *c);
void store_series_cursor_done(store_series_cursor *c);
/* The most points one range read by a cursor has held since the process started (a test's view
 * of the bound: GET /metrics' attnlab_series_range_points_max). */
size_t store_series_cursor_peak(void);
/* The range limit the cursors of streamed answers use: STORE_SERIES_RANGE_POINTS, or the value of
 * the environment's ATTNLAB_TEST_RANGE_POINTS (1..STORE_METRICS_RANGE_MAX; tests), read once. */
#define STORE_SERIES_RANGE_POINTS 8192
size_t store_series_range_points(void);
/* {"key": {"last","min","max","mean","step_of_min","count","last_step"}, …}: step_of_min is the
 * first step at which the series took its minimum. */
store_status store_metrics_summary(store *st, long long run_id, json_t **out);
/* What a runs table shows: {"loss":{"last","min"}, "val_loss":{"last","min"}, "tau":{"min","max"}
 * (over the tau.* series whose last step is tau.0.0's)}; members are absent when the run has no
 * such series. O(series) per run. */
store_status store_run_brief(store *st, long long run_id, json_t **out);
/* store_run_brief's objects for n runs at once (a runs list's page): an array of n, the i-th for
 * ids[i] ({} for a run without those series, or no such run). The same objects as n calls of
 * store_run_brief; on PostgreSQL one statement whatever n is. */
store_status store_run_briefs(store *st, const long long *ids, size_t n, json_t **out);

/* ---- experiments -------------------------------------------------------------------------- */
typedef struct {
    const char *name, *preset;             /* preset may be NULL */
    const char *base_json, *variants_json; /* JSON text */
    int replicates;                        /* runs per variant (>= 1; 0 is taken as 1) */
    const store_idempotency *idempotency;  /* NULL, or the key to record with it */
    /* Names are unique (migration 0011). 0: a name in use is STORE_CONFLICT; 1: the experiment takes
     * the first free of name, "name (2)", "name (3)", … (store_experiment_name_nth), and its runs
     * named "name/…" are named after the name it took ("name (2)/…"). */
    int rename_if_taken;
} store_new_experiment;

/* The longest experiment name the store keeps (the API takes up to 200 characters; a suffix " (n)"
 * comes on top). */
#define STORE_EXPERIMENT_NAME_MAX 240
/* name for n = 1, "name (n)" for n > 1, into buf. */
void store_experiment_name_nth(const char *name, int n, char *buf, size_t len);

/* Creates an experiment and its n runs (queued, each with experiment_id set to the new
 * experiment; their own experiment_id and idempotency are ignored) in one transaction: all of it or
 * nothing (with e->idempotency, its key too). *exp_id gets the experiment's id and run_ids[0..n) the
 * runs' ids, in order. STORE_CONFLICT when its name is in use (see rename_if_taken; on PostgreSQL
 * also when another node took the free name meanwhile: try again) or its idempotency key is recorded
 * already. */
store_status store_experiment_create(store *st, const store_new_experiment *e, const store_new_run *runs, size_t n,
                                     long long *exp_id, long long *run_ids);
/* Adds n runs (queued, in experiment id) to an existing experiment in one transaction, with its
 * variants and replicate count now variants_json and replicates: all of it or nothing. run_ids[0..n)
 * get the runs' ids. STORE_NOT_FOUND when there is no such experiment. */
store_status store_experiment_add_runs(store *st, long long id, const char *variants_json, int replicates,
                                       const store_new_run *runs, size_t n, long long *run_ids);
/* Takes back an experiment whose runs could not be queued: deletes it with its runs, in one
 * transaction, if none of them has left `queued` (STORE_CONFLICT otherwise). */
store_status store_experiment_discard(store *st, long long id);
/* {"id","name","preset","base":{…},"variants":[…],"replicates","created_at","run_count"} */
store_status store_experiment_get(store *st, long long id, json_t **out);
/* Renames an experiment; STORE_NOT_FOUND when there is none, STORE_CONFLICT when another has that
 * name. */
store_status store_experiment_rename(store *st, long long id, const char *name);
/* Deletes an experiment's row, in one transaction with what still points at it: runs left in it
 * are kept as runs of no experiment (experiment_id null). STORE_NOT_FOUND when there is none. */
store_status store_experiment_delete(store *st, long long id);
/* A page of experiments, newest first, and how many there are; search (NULL: every experiment;
 * else store_search_ok) keeps those whose name matches, or one of whose runs matches by its name,
 * tags and note. */
store_status store_experiment_list(store *st, int limit, int offset, const char *search, json_t **out,
                                   long long *total);

/* ---- corpora ------------------------------------------------------------------------------ */
typedef struct {
    const char *name, *source, *tokenizer, *status, *error;
    long long documents, bytes, tokens;
    int builtin;
    const char *task_json; /* a task corpus (tokenizer "task"): its generator config as JSON; else NULL */
} store_corpus;
/* Inserts or replaces the catalogue row of a corpus. */
store_status store_corpus_put(store *st, const store_corpus *c);
/* Inserts only if no corpus has that name (STORE_CONFLICT otherwise). */
store_status store_corpus_create(store *st, const store_corpus *c);
/* {"name","source","tokenizer","documents","bytes","tokens","status","error","builtin",
 * "created_at","runs"}, and "task" (the config object) for a task corpus */
store_status store_corpus_get(store *st, const char *name, json_t **out);
/* Every corpus, built-in ones first. */
store_status store_corpus_list(store *st, json_t **out);
/* Deletes the row unless a run uses the corpus (STORE_CONFLICT) or it is built in (STORE_CONFLICT). */
store_status store_corpus_delete(store *st, const char *name);
/* Start-up recovery: corpora still `tokenizing` (the process died during the work) become
 * `failed` with `error`. *n gets how many changed. */
store_status store_corpora_fail_tokenizing(store *st, const char *error, int *n);

/* ---- artefacts -----------------------------------------------------------------------------
 * Files kept beside the database (a run's checkpoint), recorded with what they must hold, so a
 * file is trusted only when the database says whose it is and its bytes still match. */
typedef struct {
    const char *path; /* relative to the data directory: "runs/3/checkpoint.safetensors" */
    const char *kind; /* "checkpoint", "weights" or "corpus" */
    long long run_id; /* 0: none */
    int step;
    long long bytes;
    const char *sha256; /* 64 hex digits of the file's content */
} store_artifact;
/* Records (or replaces) the artefact at a path; it goes with its run. */
store_status store_artifact_put(store *st, const store_artifact *a);
/* {"path","kind","run_id","step","bytes","sha256","created_at"}; STORE_NOT_FOUND when the database
 * knows no file at that path. */
store_status store_artifact_get(store *st, const char *path, json_t **out);

/* ---- probes ------------------------------------------------------------------------------- */
typedef struct {
    const char *kind, *params_json, *cache_key, *status, *error;
    long long seed, run_id; /* run_id 0: none */
    double duration_ms;
    const json_t *result; /* the probe's result object; its "tables" go to their own rows */
} store_new_probe;

store_status store_probe_insert(store *st, const store_new_probe *p, long long *id_out);
/* The newest succeeded probe with this kind and cache key (STORE_NOT_FOUND if none). */
store_status store_probe_find(store *st, const char *kind, const char *cache_key, long long *id_out);
/* {"id","kind","params","run_id","status","error","created_at","duration_ms","result":{…,"tables":[…]}} */
store_status store_probe_get(store *st, long long id, json_t **out);
/* Like get, newest first, without the tables' rows (their names, columns and row counts instead). */
store_status store_probe_list(store *st, const char *kind, int limit, int offset, json_t **out, long long *total);
/* One table {"name","columns","rows"} by name (NULL: the first). */
store_status store_probe_table(store *st, long long id, const char *name, json_t **out);

#endif
