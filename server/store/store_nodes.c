/* store_nodes.h: the PostgreSQL backend's functions are reached from here; with SQLite there is
 * one node, recorded in the nodes table (migration 0005), and no shared queue. */
#include <stdio.h>
#include <string.h>

#include "store/store_nodes.h"
#include "store/postgres/store_pg.h"

int store_shared(store *st) { return st && st->pg != NULL; }

void store_set_node(store *st, const char *node_id) {
    if (st->pg) store_pg_set_node(st, node_id);
}

store_status store_node_register(store *st, const store_node *n) {
    if (st->pg) return store_pg_node_register(st, n);
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "INSERT OR REPLACE INTO nodes (id, host, url, role, capacity, pid, version, "
                                     "started_at, heartbeat_at, stopped_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)");
    if (q) {
        double now = db_now();
        db_bind_text(q, 1, n->id);
        db_bind_text(q, 2, n->host ? n->host : "");
        db_bind_text(q, 3, n->url ? n->url : "");
        db_bind_text(q, 4, n->role);
        sqlite3_bind_int(q, 5, n->capacity);
        sqlite3_bind_int64(q, 6, n->pid);
        db_bind_text(q, 7, n->version ? n->version : "");
        sqlite3_bind_double(q, 8, now);
        sqlite3_bind_double(q, 9, now);
    }
    store_status s = db_exec(st, q, "register node");
    db_unlock(st);
    return s;
}

static store_status node_touch(store *st, const char *id, const char *what, const char *sql) {
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, sql);
    if (q) {
        sqlite3_bind_double(q, 1, db_now());
        db_bind_text(q, 2, id);
    }
    store_status s = db_exec(st, q, what);
    if (s == STORE_OK && sqlite3_changes(st->db) == 0) s = STORE_NOT_FOUND;
    db_unlock(st);
    return s;
}

store_status store_node_heartbeat(store *st, const char *node_id) {
    if (st->pg) return store_pg_node_heartbeat(st, node_id);
    return node_touch(st, node_id, "node heartbeat", "UPDATE nodes SET heartbeat_at = ?1 WHERE id = ?2");
}

store_status store_node_stopped(store *st, const char *node_id) {
    if (st->pg) return store_pg_node_stopped(st, node_id);
    return node_touch(st, node_id, "node stopped", "UPDATE nodes SET stopped_at = ?1, heartbeat_at = ?1 WHERE id = ?2");
}

store_status store_node_list(store *st, double stale_s, json_t **out) {
    if (st->pg) return store_pg_node_list(st, stale_s, out);
    *out = NULL;
    json_t *list = json_array();
    db_lock(st);
    store_status s = list ? STORE_OK : db_fail("list nodes: out of memory");
    /* One node owns the file: the runs running are its own. */
    sqlite3_stmt *q =
        s == STORE_OK
            ? db_prepare(
                  st,
                  "SELECT id, host, url, role, capacity, pid, version, started_at, heartbeat_at, ?1 - heartbeat_at, "
                  "stopped_at IS NULL AND ?1 - heartbeat_at <= ?2, stopped_at, "
                  "CASE WHEN stopped_at IS NULL THEN (SELECT json_group_array(id) FROM (SELECT id FROM runs "
                  "WHERE status = 'running' ORDER BY id)) ELSE '[]' END "
                  "FROM nodes ORDER BY heartbeat_at DESC, id")
            : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_double(q, 1, db_now());
        sqlite3_bind_double(q, 2, stale_s);
    }
    int rc = SQLITE_DONE;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        json_t *o = json_object();
        int bad = !o;
        bad |= json_object_set_new(o, "id", db_col_text(q, 0));
        bad |= json_object_set_new(o, "host", db_col_text(q, 1));
        bad |= json_object_set_new(o, "url", db_col_text(q, 2));
        bad |= json_object_set_new(o, "role", db_col_text(q, 3));
        bad |= json_object_set_new(o, "capacity", json_integer(sqlite3_column_int(q, 4)));
        bad |= json_object_set_new(o, "pid", db_col_int(q, 5));
        bad |= json_object_set_new(o, "version", db_col_text(q, 6));
        bad |= json_object_set_new(o, "started_at", db_col_real(q, 7));
        bad |= json_object_set_new(o, "last_heartbeat", db_col_real(q, 8));
        bad |= json_object_set_new(o, "heartbeat_age_s", db_col_real(q, 9));
        bad |= json_object_set_new(o, "alive", json_boolean(sqlite3_column_int(q, 10)));
        bad |= json_object_set_new(o, "stopped_at", db_col_real(q, 11));
        bad |= json_object_set_new(o, "running", db_col_json(q, 12, json_array()));
        bad |= json_array_append_new(list, o);
        if (bad) s = db_fail("list nodes: out of memory");
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "list nodes");
    sqlite3_finalize(q);
    db_unlock(st);
    if (s != STORE_OK) {
        json_decref(list);
        return s;
    }
    *out = list;
    return STORE_OK;
}

static store_status not_shared(const char *what) {
    (void)what;
    return STORE_CONFLICT; /* one node, its queue in the process: there is no lease to take or keep */
}

store_status store_run_claim(store *st, const char *node_id, double lease_s, store_lease *out) {
    if (st->pg) return store_pg_run_claim(st, node_id, lease_s, out);
    memset(out, 0, sizeof *out);
    return not_shared("claim");
}

store_status store_run_renew(store *st, long long run_id, long long token, double lease_s, int *cancel) {
    if (st->pg) return store_pg_run_renew(st, run_id, token, lease_s, cancel);
    if (cancel) *cancel = 0;
    return not_shared("renew");
}

store_status store_run_release(store *st, long long run_id, long long token, const char *to, const char *error) {
    if (st->pg) return store_pg_run_release(st, run_id, token, to, error);
    return not_shared("release");
}

void store_lease_hold(store *st, long long run_id, long long token) {
    if (st->pg) store_pg_lease_hold(st, run_id, token);
}

void store_lease_drop(store *st, long long run_id) {
    if (st->pg) store_pg_lease_drop(st, run_id);
}

store_status store_run_request_cancel(store *st, long long run_id) {
    if (st->pg) return store_pg_run_request_cancel(st, run_id);
    return not_shared("cancel");
}

store_status store_listen(store *st, store_notify_fn fn, void *ctx) {
    if (st->pg) return store_pg_listen(st, fn, ctx);
    return STORE_OK; /* nobody else writes a SQLite file attnlabd has locked */
}
