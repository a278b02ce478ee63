/* Inside the SQLite store: what the resource files (store_runs.c, store_metrics.c,
 * store_experiments.c, store_corpora.c, store_probes.c, store_artifacts.c, store_nodes.c) share
 * with the connection code in store_sqlite.c, and the functions of the backend's table
 * (store_backend.h). Nothing outside server/store/sqlite/ includes this header but the backend's
 * own test (tests/server/test_store_sqlite.c, which holds the writer's lock).
 *
 * Conventions of the resource files: every public function takes the writer's lock (db_lock), or
 * a read connection (db_read_lock) when it only reads, for its whole body, prepares its statements with db_prepare,
 * checks every sqlite3_step result (a step that is neither SQLITE_ROW nor SQLITE_DONE is an error, never the end of the
 * rows), and follows store.h's rule for outputs: they are set only on STORE_OK.
 *
 * The results of sqlite3_bind_* are not checked, and cannot fail here: a bind fails only on an
 * index its statement does not have (each index here is one its SQL names), on a statement that is
 * running (each is bound fresh from db_prepare or after sqlite3_reset), or out of memory while
 * copying a value, and no value is copied: text is bound SQLITE_STATIC (db_bind_text, bind_key),
 * the caller's strings living until the statement is finalized. */
#ifndef ATTNLAB_STORE_SQLITE_H
#define ATTNLAB_STORE_SQLITE_H

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "store/common/store_error.h"
#include "store/common/store_query.h"
#include "store/common/store_rows.h"
#include "store/store_backend.h"

/* Read connections: reads that need not wait for the writer (a run, a list, a series' points,
 * summaries) take one of DB_READERS of them (db_read_lock) instead of the writer's lock, and the
 * health check has one of its own, so that neither waits behind a long write or a long read. */
#define DB_READERS 4
typedef struct {
    sqlite3 *db;
    pthread_mutex_t lock;
} db_reader;

typedef struct {
    store base;  /* first: a store * is a store_sqlite * */
    sqlite3 *db; /* the writer: every write, and reads inside a write */
    pthread_mutex_t lock;
    db_reader readers[DB_READERS];
    db_reader pinger;
    atomic_uint next_reader; /* where the next reader search starts */
    char path[4096];         /* the database file, to notice it being deleted or replaced */
    dev_t dev;
    ino_t ino;
} store_sqlite;

/* The writer's lock: held for the whole body of a function that writes (and of a read that must
 * see the writer's own uncommitted work). */
void db_lock(store *st);
void db_unlock(store *st);
/* A read connection held for the whole body of a function that only reads: its statements see the
 * last commit as one snapshot, never wait for the writer, and may not write. Every helper below
 * (db_prepare, db_error, ...) uses the connection this thread holds. */
void db_read_lock(store *st);
void db_read_unlock(store *st);

/* Records SQLite's message for the failing call as this thread's last error, logs it and returns
 * STORE_ERROR. Call with the lock held. */
store_status db_error(store *st, const char *what);
/* The same for a failure that is not SQLite's (out of memory, a bad stored value). */
#define db_fail(what) store_fail("%s", what)

/* A prepared statement, or NULL after db_error. */
sqlite3_stmt *db_prepare(store *st, const char *sql);
/* Binds text, not copied (it must live until q is finalized or bound again), or NULL for a NULL
 * pointer. */
void db_bind_text(sqlite3_stmt *q, int i, const char *s);
/* Steps a statement that returns no rows to its end and finalizes it (q may be NULL: error). */
store_status db_exec(store *st, sqlite3_stmt *q, const char *what);
/* Steps a statement expected to give at most one row: STORE_OK with a row, STORE_NOT_FOUND when
 * there is none, STORE_ERROR (logged as `what`) otherwise. Does not finalize. */
store_status db_step_one(store *st, sqlite3_stmt *q, const char *what);
/* Steps q to its end, appending make(row) to list for each row: STORE_OK, or STORE_ERROR (`what`
 * names it). Does not finalize. */
store_status db_rows(store *st, sqlite3_stmt *q, json_t *(*make)(const store_row *), json_t *list, const char *what);
/* The one row of a count: *n. */
store_status db_count(store *st, sqlite3_stmt *q, long long *n, const char *what);
/* The current row of q, for the readers of store_rows.h. */
store_row db_row(sqlite3_stmt *q);
/* Rows changed by the last statement, and the extended code of the last failure. */
int db_changes(store *st);
int db_errcode(store *st);

/* One statement `sql` that sets one column of the row with this id: `UPDATE t SET c = ?1 WHERE id =
 * ?2`, value bound as text (NULL: SQL NULL). Takes the lock; STORE_NOT_FOUND when no row has the
 * id, STORE_CONFLICT when the value would break a unique index. */
store_status db_update_by_id(store *st, const char *sql, const char *value, long long id, const char *what);

/* BEGIN IMMEDIATE; and COMMIT when s is STORE_OK (ROLLBACK otherwise), returning the outcome. */
store_status db_begin(store *st);
store_status db_finish(store *st, store_status s);
/* The next id of a table from its counter (see migration 0004); -1 after an error. Call inside a
 * transaction. */
long long db_next_id(store *st, const char *table);
/* Wall-clock Unix seconds. */
double db_now(void);
/* How this SQLite library's aggregates behave (store_summary.h's flags). */
int db_summary_flags(void);

/* Inserts one queued run (experiment_id 0: none) and its tags; call inside a transaction.
 * store_runs.c; store_experiment_create uses it for an experiment's runs. */
store_status store_sqlite_run_insert(store *st, const store_new_run *run, long long experiment_id, long long *id_out);

/* Records an idempotency key for the run (run_id) or else the experiment just inserted; call inside
 * the creating transaction. STORE_CONFLICT when the key is recorded already. store_runs.c. */
store_status db_idempotency_put(store *st, const store_idempotency *k, long long run_id, long long experiment_id);

/* The backend's table (store_backend.h): store_sqlite_<name> for each function of STORE_CONTRACT,
 * in the resource file of its resource (store_sqlite.c for ping and schema_version). */
STORE_CONTRACT(STORE_DECLARE, store_sqlite_)

#endif
