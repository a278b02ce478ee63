/* Probe results and their tables: every SQL statement about probes and probe_tables. */
#include <stdio.h>
#include <stdlib.h>

#include "store/sqlite/store_sqlite.h"

/* One table of a probe (store_probe_tables_insert; ctx: the store); call inside a transaction. */
static store_status insert_table(void *ctx, long long id, long long i, const char *name, const char *columns,
                                 const char *rows) {
    sqlite3_stmt *q =
        db_prepare(ctx, "INSERT INTO probe_tables (probe_id, idx, name, columns, rows) VALUES (?,?,?,?,?)");
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int64(q, 2, i);
    db_bind_text(q, 3, name);
    db_bind_text(q, 4, columns);
    db_bind_text(q, 5, rows);
    return db_exec(ctx, q, "insert probe table");
}

store_status store_sqlite_probe_insert(store *st, const store_new_probe *p, long long *id_out) {
    *id_out = 0;
    /* The result without its tables goes into the probe row; the tables into their own rows. */
    char *rest_text;
    json_t *tables;
    if (store_probe_split(p->result, &rest_text, &tables) < 0) return db_fail("insert probe: out of memory");
    db_lock(st);
    store_status s = db_begin(st);
    long long id = -1;
    if (s == STORE_OK) {
        id = db_next_id(st, "probes");
        if (id < 0) s = STORE_ERROR;
    }
    if (s == STORE_OK) {
        sqlite3_stmt *q =
            db_prepare(st, "INSERT INTO probes (kind, params, seed, status, result, error, created_at, "
                           "finished_at, run_id, cache_key, duration_ms, id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
        if (q) {
            double now = db_now();
            db_bind_text(q, 1, p->kind);
            db_bind_text(q, 2, p->params_json);
            sqlite3_bind_int64(q, 3, p->seed);
            db_bind_text(q, 4, p->status);
            db_bind_text(q, 5, rest_text);
            db_bind_text(q, 6, p->error);
            sqlite3_bind_double(q, 7, now);
            sqlite3_bind_double(q, 8, now);
            if (p->run_id)
                sqlite3_bind_int64(q, 9, p->run_id);
            else
                sqlite3_bind_null(q, 9);
            db_bind_text(q, 10, p->cache_key);
            sqlite3_bind_double(q, 11, p->duration_ms);
            sqlite3_bind_int64(q, 12, id);
        }
        s = db_exec(st, q, "insert probe");
    }
    if (s == STORE_OK) s = store_probe_tables_insert(id, tables, insert_table, st);
    s = db_finish(st, s);
    db_unlock(st);
    free(rest_text);
    json_decref(tables);
    if (s == STORE_OK) *id_out = id;
    return s;
}

store_status store_sqlite_probe_find(store *st, const char *kind, const char *cache_key, long long *id_out) {
    *id_out = 0;
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT id FROM probes WHERE kind = ? AND cache_key = ? AND status = 'succeeded' "
                                     "ORDER BY id DESC LIMIT 1");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        db_bind_text(q, 1, kind);
        db_bind_text(q, 2, cache_key);
        s = db_step_one(st, q, "find probe");
        if (s == STORE_OK) *id_out = sqlite3_column_int64(q, 0);
    }
    sqlite3_finalize(q);
    db_read_unlock(st);
    return s;
}

static json_t *probe_from_stmt(sqlite3_stmt *q) {
    store_row r = db_row(q);
    return store_probe_from_row(&r);
}

static json_t *table_with_rows(const store_row *r) { return store_probe_table_from_row(r, 1); }
static json_t *table_shape(const store_row *r) { return store_probe_table_from_row(r, 0); }

/* Puts the probe's tables (with rows, or just their shape) back into its result. */
static store_status attach_tables(store *st, json_t *probe, int with_rows) {
    json_t *result = json_object_get(probe, "result");
    if (!json_is_object(result)) return STORE_OK;
    sqlite3_stmt *q = db_prepare(st, with_rows ? "SELECT name, columns, rows FROM probe_tables WHERE probe_id = ? "
                                                 "ORDER BY idx"
                                               : "SELECT name, columns, json_array_length(rows) FROM probe_tables "
                                                 "WHERE probe_id = ? ORDER BY idx");
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, json_integer_value(json_object_get(probe, "id")));
    json_t *tables = json_array();
    store_status s = tables ? STORE_OK : db_fail("probe tables: out of memory");
    if (s == STORE_OK) s = db_rows(st, q, with_rows ? table_with_rows : table_shape, tables, "probe tables");
    sqlite3_finalize(q);
    return store_probe_attach_tables(result, tables, s);
}

store_status store_sqlite_probe_get(store *st, long long id, json_t **out) {
    *out = NULL;
    json_t *p = NULL;
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT " STORE_PROBE_COLUMNS " FROM probes WHERE id = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, id);
        s = db_step_one(st, q, "get probe");
        if (s == STORE_OK && !(p = probe_from_stmt(q))) s = db_fail("get probe: out of memory");
    }
    sqlite3_finalize(q);
    if (s == STORE_OK) s = attach_tables(st, p, 1);
    db_read_unlock(st);
    if (s != STORE_OK) {
        json_decref(p);
        return s;
    }
    *out = p;
    return STORE_OK;
}

store_status store_sqlite_probe_list(store *st, const char *kind, int limit, int offset, json_t **out,
                                     long long *total) {
    *out = NULL;
    *total = 0;
    json_t *list = json_array();
    long long count = 0;
    db_read_lock(st);
    store_status s = list ? STORE_OK : db_fail("list probes: out of memory");
    sqlite3_stmt *q = s == STORE_OK
                          ? db_prepare(st, "SELECT " STORE_PROBE_COLUMNS " FROM probes WHERE (?1 IS NULL OR kind = ?1) "
                                           "ORDER BY id DESC LIMIT ?2 OFFSET ?3")
                          : NULL;
    sqlite3_stmt *c = q ? db_prepare(st, "SELECT count(*) FROM probes WHERE (?1 IS NULL OR kind = ?1)") : NULL;
    if (!q || !c) s = STORE_ERROR;
    int rc = SQLITE_DONE;
    if (s == STORE_OK) {
        db_bind_text(q, 1, kind);
        db_bind_text(c, 1, kind);
        sqlite3_bind_int(q, 2, limit);
        sqlite3_bind_int(q, 3, offset);
    }
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        json_t *p = probe_from_stmt(q);
        if (!p) {
            s = db_fail("list probes: out of memory");
            break;
        }
        s = attach_tables(st, p, 0);
        if (json_array_append_new(list, p) < 0 && s == STORE_OK) s = db_fail("list probes: out of memory");
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "list probes");
    if (s == STORE_OK) s = db_count(st, c, &count, "count probes");
    sqlite3_finalize(q);
    sqlite3_finalize(c);
    db_read_unlock(st);
    return store_list_done(s, list, count, out, total);
}

store_status store_sqlite_probe_table(store *st, long long id, const char *name, json_t **out) {
    *out = NULL;
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT name, columns, rows FROM probe_tables WHERE probe_id = ? "
                                     "AND (?2 IS NULL OR name = ?2) ORDER BY idx LIMIT 1");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, id);
        db_bind_text(q, 2, name);
        s = db_step_one(st, q, "probe table");
        store_row r = db_row(q);
        if (s == STORE_OK && !(*out = store_probe_table_from_row(&r, 1))) s = db_fail("probe table: out of memory");
    }
    sqlite3_finalize(q);
    db_read_unlock(st);
    return s;
}
