/* The one place that picks a store backend, by the scheme of the URL it is given (postgres:// or
 * postgresql://: PostgreSQL, postgres/store_pg.c; sqlite:PATH or a plain path: SQLite,
 * sqlite/store_sqlite.c), and the contract's functions (store.h, store_nodes.h) as calls through
 * the table the backend filled (store_backend.h). */
#include <stdio.h>
#include <string.h>

#include "store/common/store_query.h"
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

#define CALL_THROUGH(pfx, ret, name, params, args)                                                                     \
    ret store_##name params { return st->ops->name args; }
STORE_CONTRACT(CALL_THROUGH, )

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

int store_keys_match(const char *key, const char *keys) { return store_key_matches(key, keys); }
