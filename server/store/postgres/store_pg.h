/* Inside the PostgreSQL store: what the resource files (store_pg_runs.c, store_pg_metrics.c,
 * store_pg_experiments.c, store_pg_corpora.c, store_pg_probes.c, store_pg_cluster.c) share with
 * the connection code in store_pg.c. Nothing outside server/store/ includes this header but the
 * backend's own test (tests/server/test_store_pg.c, which holds the pool's connections).
 *
 * The backend keeps a small pool of connections (pg.h); each public function takes one for its
 * whole body (spg_get/spg_put), so functions run in parallel on different connections. Each
 * function has the signature of its store.h counterpart and is reached through the backend's table
 * (store_backend.h, filled in store_pg.c), so the rule for outputs is store.h's: set only on
 * STORE_OK.
 *
 * Writes about a run this node holds a lease on (store_lease_hold) are fenced: they change the
 * database only while the run's lease_token is still the one held, so a node that lost its lease
 * (it was presumed dead and the run resumed elsewhere) changes nothing. Changes other nodes must
 * hear of are announced with NOTIFY inside the same transaction (delivered on commit):
 *   attnlab_jobs    a run became queued (payload: its id)
 *   attnlab_events  {"t":"m","run":ID,"from":STEP,"to":STEP,"node":N}  metric points stored
 *                   {"t":"s","run":ID,"node":N}                        a run's status changed
 *   attnlab_cancel  {"run":ID,"node":N}                                someone asked to stop a run
 * Payloads carry ids only (well under PostgreSQL's 8000-byte limit); listeners read the rows. */
#ifndef ATTNLAB_STORE_PG_H
#define ATTNLAB_STORE_PG_H

#include <jansson.h>

#include "store/common/store_error.h"
#include "store/common/store_query.h"
#include "store/common/store_rows.h"
#include "store/postgres/pg.h"
#include "store/store_backend.h"

/* store_pg_open (store_backend.h) connects, refuses a database that is not attnlab's or is newer,
 * migrates (one node at a time), and returns this backend's handle. */

/* A connection from the pool, or NULL (the reason recorded as the thread's last error, and the
 * database marked unreachable for a second when it could not be reached). */
pg_conn *spg_get(store *st);
/* Gives the connection back (rolling back a transaction left open). */
void spg_put(store *st, pg_conn *c);
/* Records the connection's failure as the thread's last store error (logged) and returns s;
 * STORE_NOT_FOUND and STORE_CONFLICT pass through unrecorded. */
store_status spg_fail(pg_conn *c, store_status s);
/* Records a failure that is not the database's (out of memory, a bad stored value). */
#define spg_fail_msg(what) store_fail("%s", what)
/* This node's id (for NOTIFY payloads and lease rows); "" before store_set_node. */
const char *spg_node(store *st);
/* The lease token this node holds on run_id, or 0 when it holds none. */
long long spg_held_token(store *st, long long run_id);
/* Queues a NOTIFY on channel with payload, inside the caller's transaction. */
store_status spg_notify(pg_conn *c, const char *channel, const char *payload);

/* One statement `sql` that sets one column of the row with this id: `UPDATE t SET c = $1 WHERE id =
 * $2`, value as text (NULL: SQL NULL). Takes a connection; STORE_NOT_FOUND when no row has the id. */
store_status spg_update_by_id(store *st, const char *sql, const char *value, long long id, const char *what);

/* The words of a text expression x as a tsvector: its runs of letters and digits (every other
 * character separates words, as store_search_ok and SQLite's unicode61 tokenizer read them; the
 * parser alone would keep "/cosine_rope" whole as a file name). */
#define STORE_PG_WORDS(x) "to_tsvector('simple', regexp_replace(" x ", '[^0-9A-Za-z\\u0080-\\uffff]+', ' ', 'g'))"
/* The words of run r (its name, tags and note), for searches (store_search_ok). */
#define STORE_PG_RUN_WORDS                                                                                             \
    STORE_PG_WORDS("r.name || ' ' || r.note || ' ' || coalesce((SELECT string_agg(t.tag, ' ') FROM run_tags t "        \
                   "WHERE t.run_id = r.id), '')")

/* Row i of a result, for the readers of store_rows.h. */
store_row spg_row(const pg_res *r, int i);
/* Appends make(row i) to list for each row of r: STORE_OK, or STORE_ERROR ("`what`: out of memory"). */
store_status spg_rows(const pg_res *r, json_t *(*make)(const store_row *), json_t *list, const char *what);
/* make(row 0) into *out: STORE_NOT_FOUND when r has no row, STORE_ERROR when out of memory. */
store_status spg_one(const pg_res *r, json_t *(*make)(const store_row *), json_t **out, const char *what);
/* The next id of a table from id_counters; -1 after an error (recorded). Inside a transaction. */
long long spg_next_id(pg_conn *c, const char *table);
/* A PostgreSQL array literal ('{"a","b"}') of n strings, quoted; NULL when out of memory. Free it. */
char *spg_array(const char *const *items, size_t n);
/* The same for a JSON array of strings (non-strings are skipped). */
char *spg_array_json(const json_t *strings);
/* Wall-clock Unix seconds of this machine (the database's clock is used for leases). */
double spg_now(void);

/* ---- the backend's table (store_backend.h) -------------------------------------------------------
 * store_pg_<name> for each function of STORE_CONTRACT and STORE_SHARED_CONTRACT, in the resource
 * file of its resource (store_pg.c: ping, schema_version, listen and the leases held here). */
STORE_CONTRACT(STORE_DECLARE, store_pg_)
STORE_SHARED_CONTRACT(STORE_DECLARE, store_pg_)
void store_pg_set_node(store *st, const char *node_id);
void store_pg_lease_hold(store *st, long long run_id, long long token);
void store_pg_lease_drop(store *st, long long run_id);
/* Inserts one queued run (experiment_id 0: none) and its tags on c, inside its transaction
 * (store_experiment_create uses it for an experiment's runs). */
store_status store_pg_run_insert(store *st, pg_conn *c, const store_new_run *run, long long experiment_id,
                                 long long *id_out);

/* Records an idempotency key for the run (run_id) or else the experiment just inserted, on c inside
 * the creating transaction. STORE_CONFLICT when the key is recorded already. store_pg_runs.c. */
store_status spg_idempotency_put(pg_conn *c, const store_idempotency *k, long long run_id, long long experiment_id);

#endif
