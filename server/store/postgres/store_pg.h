/* Inside the PostgreSQL store: what the resource files (store_pg_runs.c, store_pg_metrics.c,
 * store_pg_experiments.c, store_pg_corpora.c, store_pg_probes.c, store_pg_cluster.c) share with
 * the connection code in store_pg.c. Nothing outside server/store/ includes this header.
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

/* ---- the store.h contract, PostgreSQL side ---------------------------------------------- */
store_status store_pg_run_create(store *st, const store_new_run *run, long long *id_out);
store_status store_pg_run_insert(store *st, pg_conn *c, const store_new_run *run, long long experiment_id,
                                 long long *id_out);
store_status store_pg_run_get(store *st, long long id, json_t **out);
store_status store_pg_run_list(store *st, const store_run_filter *f, json_t **runs, long long *total);
store_status store_pg_run_transition(store *st, long long id, const char *const *from, const char *to,
                                     const char *error);
store_status store_pg_run_progress(store *st, long long id, int step, int checkpoint_step);
store_status store_pg_run_set_provenance(store *st, long long id, const char *provenance_json);
store_status store_pg_run_update(store *st, long long id, const char *name, const char *note, const json_t *tags);
store_status store_pg_run_delete(store *st, long long id);
int store_pg_runs_interrupt_running(store *st);
store_status store_pg_runs_queued(store *st, long long **ids, int *n);
store_status store_pg_run_counts(store *st, json_t **out);

store_status store_pg_metrics_insert(store *st, const store_metric *points, size_t n);
store_status store_pg_metrics_points(store *st, long long run_id, const char *keys, int since_step,
                                     store_metric **points, size_t *n);
store_status store_pg_metrics_summary(store *st, long long run_id, json_t **out);
store_status store_pg_run_brief(store *st, long long run_id, json_t **out);
store_status store_pg_run_briefs(store *st, const long long *ids, size_t n, json_t **out);

store_status store_pg_experiment_create(store *st, const store_new_experiment *e, const store_new_run *runs, size_t n,
                                        long long *exp_id, long long *run_ids);
store_status store_pg_experiment_discard(store *st, long long id);
store_status store_pg_experiment_get(store *st, long long id, json_t **out);
store_status store_pg_experiment_list(store *st, int limit, int offset, json_t **out, long long *total);

store_status store_pg_corpus_put(store *st, const store_corpus *c);
store_status store_pg_corpus_create(store *st, const store_corpus *c);
store_status store_pg_corpus_get(store *st, const char *name, json_t **out);
store_status store_pg_corpus_list(store *st, json_t **out);
store_status store_pg_corpus_delete(store *st, const char *name);
store_status store_pg_corpora_fail_tokenizing(store *st, const char *error, int *n);

store_status store_pg_probe_insert(store *st, const store_new_probe *p, long long *id_out);
store_status store_pg_probe_find(store *st, const char *kind, const char *cache_key, long long *id_out);
store_status store_pg_probe_get(store *st, long long id, json_t **out);
store_status store_pg_probe_list(store *st, const char *kind, int limit, int offset, json_t **out, long long *total);
store_status store_pg_probe_table(store *st, long long id, const char *name, json_t **out);

void store_pg_set_node(store *st, const char *node_id);
void store_pg_lease_hold(store *st, long long run_id, long long token);
void store_pg_lease_drop(store *st, long long run_id);
store_status store_pg_listen(store *st, store_notify_fn fn, void *ctx);
store_status store_pg_node_register(store *st, const store_node *n);
store_status store_pg_node_heartbeat(store *st, const char *node_id);
store_status store_pg_node_stopped(store *st, const char *node_id);
store_status store_pg_node_list(store *st, double stale_s, json_t **out);
store_status store_pg_run_claim(store *st, const char *node_id, double lease_s, store_lease *out);
store_status store_pg_run_renew(store *st, long long run_id, long long token, double lease_s, int *cancel);
store_status store_pg_run_release(store *st, long long run_id, long long token, const char *to, const char *error);
store_status store_pg_run_request_cancel(store *st, long long run_id);

store_status store_pg_artifact_put(store *st, const store_artifact *a);
store_status store_pg_artifact_get(store *st, const char *path, json_t **out);

#endif
