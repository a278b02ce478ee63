/* Inside the SQLite store: what the resource files (store_runs.c, store_metrics.c,
 * store_experiments.c, store_corpora.c, store_probes.c) share with the connection code in
 * store_sqlite.c. Nothing outside server/store/ includes this header.
 *
 * Conventions of the resource files: every public function takes the lock (db_lock) for its whole
 * body, prepares its statements with db_prepare, checks every sqlite3_step result (a step that is
 * neither SQLITE_ROW nor SQLITE_DONE is an error, never the end of the rows), and follows store.h's
 * rule for outputs: they are set only on STORE_OK. */
#ifndef ATTNLAB_STORE_IMPL_H
#define ATTNLAB_STORE_IMPL_H

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/types.h>

#include "store/store.h"

struct store {
    struct store_pg *pg; /* set: the PostgreSQL backend (store_pg.h), and nothing below is used */
    sqlite3 *db;
    pthread_mutex_t lock;
    char path[4096]; /* the database file, to notice it being deleted or replaced */
    dev_t dev;
    ino_t ino;
};

/* Opens the SQLite database file at path (store_open's SQLite backend). */
store_status store_sqlite_open(store **out, const char *path, char *err, size_t errlen);

void db_lock(store *st);
void db_unlock(store *st);

/* Records SQLite's message for the failing call as this thread's last error, logs it and returns
 * STORE_ERROR. Call with the lock held. */
store_status db_error(store *st, const char *what);
/* The same for a failure that is not SQLite's (out of memory, a bad stored value). */
store_status db_fail(const char *what);

/* A prepared statement, or NULL after db_error. */
sqlite3_stmt *db_prepare(store *st, const char *sql);
/* Binds text (copied), or NULL for a NULL pointer. */
void db_bind_text(sqlite3_stmt *q, int i, const char *s);
/* Steps a statement that returns no rows to its end and finalizes it (q may be NULL: error). */
store_status db_exec(store *st, sqlite3_stmt *q, const char *what);
/* Steps a statement expected to give at most one row: STORE_OK with a row, STORE_NOT_FOUND when
 * there is none, STORE_ERROR (logged as `what`) otherwise. Does not finalize. */
store_status db_step_one(store *st, sqlite3_stmt *q, const char *what);

/* BEGIN IMMEDIATE; and COMMIT when s is STORE_OK (ROLLBACK otherwise), returning the outcome. */
store_status db_begin(store *st);
store_status db_finish(store *st, store_status s);
/* The next id of a table from its counter (see migration 0004); -1 after an error. Call inside a
 * transaction. */
long long db_next_id(store *st, const char *table);
/* Wall-clock Unix seconds. */
double db_now(void);

/* Inserts one queued run (experiment_id 0: none) and its tags; call inside a transaction.
 * store_runs.c; store_experiment_create uses it for an experiment's runs. */
store_status store_run_insert_locked(store *st, const store_new_run *run, long long experiment_id, long long *id_out);

/* Column values as new JSON values (NULL only when out of memory); SQL NULL becomes JSON null. */
json_t *db_col_text(sqlite3_stmt *q, int col);
json_t *db_col_real(sqlite3_stmt *q, int col);
json_t *db_col_int(sqlite3_stmt *q, int col);
/* A column holding JSON text, parsed; `fallback` (stolen) when the text is absent or not JSON. */
json_t *db_col_json(sqlite3_stmt *q, int col, json_t *fallback);

#endif
