/* What a store backend is: one table of functions, the contract of store.h and store_nodes.h with
 * one entry per function, that the backend fills once when it opens (store_sqlite_open,
 * store_pg_open) and store_open hands back inside the handle. Every public store function is a
 * call through the table (store.c); nothing above server/store/ sees this header.
 *
 * The two backends are peers: each implements the whole table in its own folder (sqlite/,
 * postgres/), includes nothing of the other, and uses the backend-neutral logic of common/ (rows
 * into objects, orders, key matching, summaries, errors). A backend's own handle begins with a
 * `struct store` (the first member), so the handle it returns is its own struct. */
#ifndef ATTNLAB_STORE_BACKEND_H
#define ATTNLAB_STORE_BACKEND_H

#include "store/store.h"
#include "store/store_nodes.h"

/* The contract's functions, once: X(pfx, return type, name, parameters, arguments) for each, in the
 * order of store.h and store_nodes.h (p: passed through, a backend's prefix). store_ops has an
 * entry `name` for each, every backend implements each as <its prefix>name (STORE_DECLARE,
 * STORE_FILL), and store_open.c's store_<name> calls through the entry. */
/* clang-format off */
#define STORE_CONTRACT(X, pfx)                                                                                              \
    X(pfx, int, schema_version, (store *st), (st))                                                                         \
    X(pfx, store_status, ping, (store *st), (st))                                                                          \
    X(pfx, store_status, run_create, (store *st, const store_new_run *run, long long *id_out), (st, run, id_out))          \
    X(pfx, store_status, run_get, (store *st, long long id, json_t **out), (st, id, out))                                  \
    X(pfx, store_status, run_list, (store *st, const store_run_filter *f, json_t **runs, long long *total),                \
      (st, f, runs, total))                                                                                            \
    X(pfx, store_status, run_transition,                                                                                    \
      (store *st, long long id, const char *const *from, const char *to, const char *error),                          \
      (st, id, from, to, error))                                                                                       \
    X(pfx, store_status, run_progress, (store *st, long long id, int step, int checkpoint_step),                           \
      (st, id, step, checkpoint_step))                                                                                 \
    X(pfx, store_status, run_set_provenance, (store *st, long long id, const char *provenance_json),                     \
      (st, id, provenance_json))                                                                                       \
    X(pfx, store_status, run_update, (store *st, long long id, const char *name, const char *note, const json_t *tags),    \
      (st, id, name, note, tags))                                                                                      \
    X(pfx, store_status, run_delete, (store *st, long long id), (st, id))                                                  \
    X(pfx, int, runs_interrupt_running, (store *st), (st))                                                                 \
    X(pfx, store_status, runs_queued, (store *st, long long **ids, int *n), (st, ids, n))                                  \
    X(pfx, store_status, run_counts, (store *st, json_t **out), (st, out))                                                \
    X(pfx, store_status, metrics_insert, (store *st, const store_metric *points, size_t n), (st, points, n))               \
    X(pfx, store_status, metrics_points,                                                                                    \
      (store *st, long long run_id, const char *keys, int since_step, store_metric **points, size_t *n),              \
      (st, run_id, keys, since_step, points, n))                                                                       \
    X(pfx, store_status, metrics_range,                                                                                     \
      (store *st, long long run_id, const char *key, int from_step, int to_step, size_t limit, store_metric **points,  \
       size_t *n),                                                                                                     \
      (st, run_id, key, from_step, to_step, limit, points, n))                                                         \
    X(pfx, store_status, metrics_summary, (store *st, long long run_id, json_t **out), (st, run_id, out))                  \
    X(pfx, store_status, run_brief, (store *st, long long run_id, json_t **out), (st, run_id, out))                        \
    X(pfx, store_status, run_briefs, (store *st, const long long *ids, size_t n, json_t **out), (st, ids, n, out))         \
    X(pfx, store_status, idempotency_get, (store *st, const char *key, json_t **out), (st, key, out))                      \
    X(pfx, store_status, experiment_create,                                                                                 \
      (store *st, const store_new_experiment *e, const store_new_run *runs, size_t n, long long *exp_id,              \
       long long *run_ids),                                                                                            \
      (st, e, runs, n, exp_id, run_ids))                                                                               \
    X(pfx, store_status, experiment_add_runs,                                                                               \
      (store *st, long long id, const char *variants_json, int replicates, const store_new_run *runs, size_t n,        \
       long long *run_ids),                                                                                            \
      (st, id, variants_json, replicates, runs, n, run_ids))                                                           \
    X(pfx, store_status, experiment_discard, (store *st, long long id), (st, id))                                          \
    X(pfx, store_status, experiment_get, (store *st, long long id, json_t **out), (st, id, out))                           \
    X(pfx, store_status, experiment_list,                                                                                   \
      (store *st, int limit, int offset, const char *search, json_t **out, long long *total),                          \
      (st, limit, offset, search, out, total))                                                                         \
    X(pfx, store_status, experiment_rename, (store *st, long long id, const char *name), (st, id, name))                 \
    X(pfx, store_status, experiment_delete, (store *st, long long id), (st, id))                                          \
    X(pfx, store_status, corpus_put, (store *st, const store_corpus *c), (st, c))                                          \
    X(pfx, store_status, corpus_create, (store *st, const store_corpus *c), (st, c))                                       \
    X(pfx, store_status, corpus_get, (store *st, const char *name, json_t **out), (st, name, out))                         \
    X(pfx, store_status, corpus_list, (store *st, json_t **out), (st, out))                                               \
    X(pfx, store_status, corpus_delete, (store *st, const char *name), (st, name))                                         \
    X(pfx, store_status, corpora_fail_tokenizing, (store *st, const char *error, int *n), (st, error, n))                  \
    X(pfx, store_status, artifact_put, (store *st, const store_artifact *a), (st, a))                                      \
    X(pfx, store_status, artifact_get, (store *st, const char *path, json_t **out), (st, path, out))                       \
    X(pfx, store_status, probe_insert, (store *st, const store_new_probe *p, long long *id_out), (st, p, id_out))          \
    X(pfx, store_status, probe_find, (store *st, const char *kind, const char *cache_key, long long *id_out),              \
      (st, kind, cache_key, id_out))                                                                                   \
    X(pfx, store_status, probe_get, (store *st, long long id, json_t **out), (st, id, out))                                \
    X(pfx, store_status, probe_list, (store *st, const char *kind, int limit, int offset, json_t **out, long long *total), \
      (st, kind, limit, offset, out, total))                                                                           \
    X(pfx, store_status, probe_table, (store *st, long long id, const char *name, json_t **out), (st, id, name, out))      \
    X(pfx, store_status, node_register, (store *st, const store_node *n), (st, n))                                         \
    X(pfx, store_status, node_heartbeat, (store *st, const char *node_id), (st, node_id))                                  \
    X(pfx, store_status, node_stopped, (store *st, const char *node_id), (st, node_id))                                    \
    X(pfx, store_status, node_list, (store *st, double stale_s, json_t **out), (st, stale_s, out))

/* The functions of a shared store's queue: a backend whose queue is in the process leaves these
 * entries NULL, and store_open.c answers for them (see store_ops). */
#define STORE_SHARED_CONTRACT(X, pfx)                                                                                       \
    X(pfx, store_status, run_claim, (store *st, const char *node_id, double lease_s, store_lease *out),                    \
      (st, node_id, lease_s, out))                                                                                     \
    X(pfx, store_status, run_renew, (store *st, long long run_id, long long token, double lease_s, int *cancel),           \
      (st, run_id, token, lease_s, cancel))                                                                            \
    X(pfx, store_status, run_release, (store *st, long long run_id, long long token, const char *to, const char *error),   \
      (st, run_id, token, to, error))                                                                                  \
    X(pfx, store_status, run_request_cancel, (store *st, long long run_id), (st, run_id))                                  \
    X(pfx, store_status, listen, (store *st, store_notify_fn fn, void *ctx), (st, fn, ctx))
/* clang-format on */

#define STORE_OPS_ENTRY(pfx, ret, name, params, args) ret(*name) params;
/* A backend's prototypes of the contract, and its table's entries: STORE_CONTRACT(STORE_DECLARE,
 * store_sqlite_) declares store_sqlite_run_get and the others, STORE_CONTRACT(STORE_FILL,
 * store_sqlite_) fills .run_get = store_sqlite_run_get and the others. */
#define STORE_DECLARE(pfx, ret, name, params, args) ret pfx##name params;
#define STORE_FILL(pfx, ret, name, params, args) .name = pfx##name,

typedef struct store_ops {
    const char *name; /* "sqlite", "postgresql" */
    int shared;       /* store_shared: other processes share the database */
    void (*close)(store *st);
    STORE_CONTRACT(STORE_OPS_ENTRY, )
    /* A shared store's queue and leases; NULL in a backend whose queue is in the process (then
     * set_node, lease_hold, lease_drop and listen do nothing, and claim, renew, release and
     * request_cancel answer STORE_CONFLICT: there is no lease to take or keep). */
    STORE_SHARED_CONTRACT(STORE_OPS_ENTRY, )
    void (*set_node)(store *st, const char *node_id);
    void (*lease_hold)(store *st, long long run_id, long long token);
    void (*lease_drop)(store *st, long long run_id);
} store_ops;

/* The handle: what every backend's own struct begins with. */
struct store {
    const store_ops *ops;
};

/* The backends' openers (store_open's choice): on STORE_OK *out is the backend's handle, its ops
 * filled; on failure *out is NULL and err holds a one-line reason. */
store_status store_sqlite_open(store **out, const char *path, char *err, size_t errlen);
store_status store_pg_open(store **out, const char *url, char *err, size_t errlen);

#endif
