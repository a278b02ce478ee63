/* Nodes on SQLite (store_nodes.h): one node, recorded in the nodes table (migration 0005); the
 * queue is in the process, so there is no lease (store_open.c answers for those functions). */
#include <stdio.h>
#include <string.h>

#include "store/sqlite/store_sqlite.h"

store_status store_sqlite_node_register(store *st, const store_node *n) {
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
    if (s == STORE_OK && db_changes(st) == 0) s = STORE_NOT_FOUND;
    db_unlock(st);
    return s;
}

store_status store_sqlite_node_heartbeat(store *st, const char *node_id) {
    return node_touch(st, node_id, "node heartbeat", "UPDATE nodes SET heartbeat_at = ?1 WHERE id = ?2");
}

store_status store_sqlite_node_stopped(store *st, const char *node_id) {
    return node_touch(st, node_id, "node stopped", "UPDATE nodes SET stopped_at = ?1, heartbeat_at = ?1 WHERE id = ?2");
}

store_status store_sqlite_node_list(store *st, double stale_s, json_t **out) {
    *out = NULL;
    json_t *list = json_array();
    db_read_lock(st);
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
    if (s == STORE_OK) s = db_rows(st, q, store_node_from_row, list, "list nodes");
    sqlite3_finalize(q);
    db_read_unlock(st);
    return store_list_done(s, list, 0, out, NULL);
}
