/* The one place that picks a store backend, by the scheme of the URL it is given (postgres:// or
 * postgresql://: PostgreSQL, postgres/store_pg.c; sqlite:PATH or a plain path: SQLite,
 * sqlite/store_sqlite.c), and the contract's functions (store.h, store_nodes.h) as calls through
 * the table the backend filled (store_backend.h). */
#include <stdio.h>
#include <string.h>

#include "store/store_backend.h"
#include "store/store_migrations.h"

store_status store_open(store **out, const char *url, char *err, size_t errlen) {
    *out = NULL;
    if (!url || !*url) {
        snprintf(err, errlen, "no database given");
        return STORE_ERROR;
    }
    if (!strncmp(url, "sqlite:", 7)) return store_sqlite_open(out, url + 7, err, errlen);
    if (!strncmp(url, "postgres://", 11) || !strncmp(url, "postgresql://", 13))
        return store_pg_open(out, url, err, errlen);
    return store_sqlite_open(out, url, err, errlen); /* a plain path is a SQLite file */
}

void store_close(store *st) {
    if (st) st->ops->close(st);
}

int store_schema_version_supported(void) { return store_migration_count; }

/* ---- the contract, through the table -------------------------------------------------------- */

int store_schema_version(store *st) { return st->ops->schema_version(st); }
store_status store_ping(store *st) { return st->ops->ping(st); }
store_status store_run_create(store *st, const store_new_run *run, long long *id_out) {
    return st->ops->run_create(st, run, id_out);
}
store_status store_run_get(store *st, long long id, json_t **out) { return st->ops->run_get(st, id, out); }
store_status store_run_list(store *st, const store_run_filter *f, json_t **runs, long long *total) {
    return st->ops->run_list(st, f, runs, total);
}
store_status store_run_transition(store *st, long long id, const char *const *from, const char *to, const char *error) {
    return st->ops->run_transition(st, id, from, to, error);
}
store_status store_run_set_provenance(store *st, long long id, const char *provenance_json) {
    return st->ops->run_set_provenance(st, id, provenance_json);
}

store_status store_run_progress(store *st, long long id, int step, int checkpoint_step) {
    return st->ops->run_progress(st, id, step, checkpoint_step);
}
store_status store_run_update(store *st, long long id, const char *name, const char *note, const json_t *tags) {
    return st->ops->run_update(st, id, name, note, tags);
}
store_status store_run_delete(store *st, long long id) { return st->ops->run_delete(st, id); }
int store_runs_interrupt_running(store *st) { return st->ops->runs_interrupt_running(st); }
store_status store_runs_queued(store *st, long long **ids, int *n) { return st->ops->runs_queued(st, ids, n); }
store_status store_run_counts(store *st, json_t **out) { return st->ops->run_counts(st, out); }
store_status store_metrics_insert(store *st, const store_metric *points, size_t n) {
    return st->ops->metrics_insert(st, points, n);
}
store_status store_metrics_points(store *st, long long run_id, const char *keys, int since_step, store_metric **points,
                                  size_t *n) {
    return st->ops->metrics_points(st, run_id, keys, since_step, points, n);
}
store_status store_metrics_summary(store *st, long long run_id, json_t **out) {
    return st->ops->metrics_summary(st, run_id, out);
}
store_status store_run_brief(store *st, long long run_id, json_t **out) { return st->ops->run_brief(st, run_id, out); }
store_status store_run_briefs(store *st, const long long *ids, size_t n, json_t **out) {
    return st->ops->run_briefs(st, ids, n, out);
}
store_status store_experiment_create(store *st, const store_new_experiment *e, const store_new_run *runs, size_t n,
                                     long long *exp_id, long long *run_ids) {
    return st->ops->experiment_create(st, e, runs, n, exp_id, run_ids);
}
store_status store_experiment_discard(store *st, long long id) { return st->ops->experiment_discard(st, id); }
store_status store_experiment_get(store *st, long long id, json_t **out) {
    return st->ops->experiment_get(st, id, out);
}
store_status store_experiment_list(store *st, int limit, int offset, json_t **out, long long *total) {
    return st->ops->experiment_list(st, limit, offset, out, total);
}
store_status store_corpus_put(store *st, const store_corpus *c) { return st->ops->corpus_put(st, c); }
store_status store_corpus_create(store *st, const store_corpus *c) { return st->ops->corpus_create(st, c); }
store_status store_corpus_get(store *st, const char *name, json_t **out) { return st->ops->corpus_get(st, name, out); }
store_status store_corpus_list(store *st, json_t **out) { return st->ops->corpus_list(st, out); }
store_status store_corpus_delete(store *st, const char *name) { return st->ops->corpus_delete(st, name); }
store_status store_corpora_fail_tokenizing(store *st, const char *error, int *n) {
    return st->ops->corpora_fail_tokenizing(st, error, n);
}
store_status store_artifact_put(store *st, const store_artifact *a) { return st->ops->artifact_put(st, a); }
store_status store_artifact_get(store *st, const char *path, json_t **out) {
    return st->ops->artifact_get(st, path, out);
}
store_status store_probe_insert(store *st, const store_new_probe *p, long long *id_out) {
    return st->ops->probe_insert(st, p, id_out);
}
store_status store_probe_find(store *st, const char *kind, const char *cache_key, long long *id_out) {
    return st->ops->probe_find(st, kind, cache_key, id_out);
}
store_status store_probe_get(store *st, long long id, json_t **out) { return st->ops->probe_get(st, id, out); }
store_status store_probe_list(store *st, const char *kind, int limit, int offset, json_t **out, long long *total) {
    return st->ops->probe_list(st, kind, limit, offset, out, total);
}
store_status store_probe_table(store *st, long long id, const char *name, json_t **out) {
    return st->ops->probe_table(st, id, name, out);
}
store_status store_node_register(store *st, const store_node *n) { return st->ops->node_register(st, n); }
store_status store_node_heartbeat(store *st, const char *node_id) { return st->ops->node_heartbeat(st, node_id); }
store_status store_node_stopped(store *st, const char *node_id) { return st->ops->node_stopped(st, node_id); }
store_status store_node_list(store *st, double stale_s, json_t **out) { return st->ops->node_list(st, stale_s, out); }

/* ---- a shared store's queue and leases (store_nodes.h) ---------------------------------------- */

int store_shared(store *st) { return st && st->ops->shared; }

void store_set_node(store *st, const char *node_id) {
    if (st->ops->set_node) st->ops->set_node(st, node_id);
}

store_status store_run_claim(store *st, const char *node_id, double lease_s, store_lease *out) {
    if (st->ops->run_claim) return st->ops->run_claim(st, node_id, lease_s, out);
    memset(out, 0, sizeof *out);
    return STORE_CONFLICT; /* one node, its queue in the process: there is no lease to take or keep */
}

store_status store_run_renew(store *st, long long run_id, long long token, double lease_s, int *cancel) {
    if (st->ops->run_renew) return st->ops->run_renew(st, run_id, token, lease_s, cancel);
    if (cancel) *cancel = 0;
    return STORE_CONFLICT;
}

store_status store_run_release(store *st, long long run_id, long long token, const char *to, const char *error) {
    return st->ops->run_release ? st->ops->run_release(st, run_id, token, to, error) : STORE_CONFLICT;
}

void store_lease_hold(store *st, long long run_id, long long token) {
    if (st->ops->lease_hold) st->ops->lease_hold(st, run_id, token);
}

void store_lease_drop(store *st, long long run_id) {
    if (st->ops->lease_drop) st->ops->lease_drop(st, run_id);
}

store_status store_run_request_cancel(store *st, long long run_id) {
    return st->ops->run_request_cancel ? st->ops->run_request_cancel(st, run_id) : STORE_CONFLICT;
}

store_status store_listen(store *st, store_notify_fn fn, void *ctx) {
    /* Nobody else writes a store whose queue is in the process: nothing to hear. */
    return st->ops->listen ? st->ops->listen(st, fn, ctx) : STORE_OK;
}
