/* Probe results and their tables: every SQL statement about probes and probe_tables. */
#include <stdio.h>
#include <stdlib.h>

#include "store/sqlite/store_impl.h"
#include "store/postgres/store_pg.h"

/* Inserts the rows of a probe's tables; call inside a transaction. */
static store_status insert_tables(store *st, long long id, const json_t *tables) {
    size_t i;
    json_t *t;
    json_array_foreach(tables, i, t) {
        char *cols = json_dumps(json_object_get(t, "columns"), JSON_COMPACT);
        char *rows = json_dumps(json_object_get(t, "rows"), JSON_COMPACT);
        const char *name = json_string_value(json_object_get(t, "name"));
        store_status s = STORE_OK;
        if (!cols || !rows || !name) s = db_fail("insert probe table: a table without name, columns or rows");
        sqlite3_stmt *q =
            s == STORE_OK
                ? db_prepare(st, "INSERT INTO probe_tables (probe_id, idx, name, columns, rows) VALUES (?,?,?,?,?)")
                : NULL;
        if (s == STORE_OK && !q) s = STORE_ERROR;
        if (s == STORE_OK) {
            sqlite3_bind_int64(q, 1, id);
            sqlite3_bind_int(q, 2, (int)i);
            db_bind_text(q, 3, name);
            db_bind_text(q, 4, cols);
            db_bind_text(q, 5, rows);
            s = db_exec(st, q, "insert probe table");
        }
        free(cols);
        free(rows);
        if (s != STORE_OK) return s;
    }
    return STORE_OK;
}

store_status store_probe_insert(store *st, const store_new_probe *p, long long *id_out) {
    if (st->pg) return store_pg_probe_insert(st, p, id_out);
    *id_out = 0;
    /* The result without its tables goes into the probe row; the tables into their own rows. */
    json_t *rest = p->result ? json_deep_copy(p->result) : NULL;
    json_t *tables = rest ? json_incref(json_object_get(rest, "tables")) : NULL;
    if (rest) json_object_del(rest, "tables");
    char *rest_text = rest ? json_dumps(rest, JSON_COMPACT) : NULL;
    if (p->result && !rest_text) {
        json_decref(rest);
        json_decref(tables);
        return db_fail("insert probe: out of memory");
    }
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
    if (s == STORE_OK && tables) s = insert_tables(st, id, tables);
    s = db_finish(st, s);
    db_unlock(st);
    free(rest_text);
    json_decref(rest);
    json_decref(tables);
    if (s == STORE_OK) *id_out = id;
    return s;
}

store_status store_probe_find(store *st, const char *kind, const char *cache_key, long long *id_out) {
    if (st->pg) return store_pg_probe_find(st, kind, cache_key, id_out);
    *id_out = 0;
    db_lock(st);
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
    db_unlock(st);
    return s;
}

#define PROBE_COLUMNS "id, kind, params, run_id, status, error, created_at, duration_ms, result"

static json_t *probe_from_row(sqlite3_stmt *q) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "id", json_integer(sqlite3_column_int64(q, 0)));
    bad |= json_object_set_new(o, "kind", db_col_text(q, 1));
    bad |= json_object_set_new(o, "params", db_col_json(q, 2, json_object()));
    bad |= json_object_set_new(o, "run_id", db_col_int(q, 3));
    bad |= json_object_set_new(o, "status", db_col_text(q, 4));
    bad |= json_object_set_new(o, "error", db_col_text(q, 5));
    bad |= json_object_set_new(o, "created_at", db_col_real(q, 6));
    bad |= json_object_set_new(o, "duration_ms", db_col_real(q, 7));
    bad |= json_object_set_new(o, "result", db_col_json(q, 8, json_null()));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Puts the probe's tables (with rows, or just their shape) back into its result. */
static store_status attach_tables(store *st, json_t *probe, int with_rows) {
    json_t *result = json_object_get(probe, "result");
    if (!json_is_object(result)) return STORE_OK;
    sqlite3_stmt *q = db_prepare(st, "SELECT name, columns, rows, json_array_length(rows) FROM probe_tables "
                                     "WHERE probe_id = ? ORDER BY idx");
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, json_integer_value(json_object_get(probe, "id")));
    json_t *tables = json_array();
    store_status s = tables ? STORE_OK : db_fail("probe tables: out of memory");
    int rc = SQLITE_DONE;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        json_t *t = json_object();
        int bad = !t;
        bad |= json_object_set_new(t, "name", db_col_text(q, 0));
        bad |= json_object_set_new(t, "columns", db_col_json(q, 1, json_array()));
        if (with_rows)
            bad |= json_object_set_new(t, "rows", db_col_json(q, 2, json_array()));
        else
            bad |= json_object_set_new(t, "row_count", json_integer(sqlite3_column_int64(q, 3)));
        bad |= json_array_append_new(tables, t);
        if (bad) s = db_fail("probe tables: out of memory");
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "probe tables");
    sqlite3_finalize(q);
    if (s == STORE_OK && json_object_set_new(result, "tables", tables) < 0)
        return db_fail("probe tables: out of memory");
    if (s != STORE_OK) json_decref(tables);
    return s;
}

store_status store_probe_get(store *st, long long id, json_t **out) {
    if (st->pg) return store_pg_probe_get(st, id, out);
    *out = NULL;
    json_t *p = NULL;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT " PROBE_COLUMNS " FROM probes WHERE id = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, id);
        s = db_step_one(st, q, "get probe");
        if (s == STORE_OK && !(p = probe_from_row(q))) s = db_fail("get probe: out of memory");
    }
    sqlite3_finalize(q);
    if (s == STORE_OK) s = attach_tables(st, p, 1);
    db_unlock(st);
    if (s != STORE_OK) {
        json_decref(p);
        return s;
    }
    *out = p;
    return STORE_OK;
}

store_status store_probe_list(store *st, const char *kind, int limit, int offset, json_t **out, long long *total) {
    if (st->pg) return store_pg_probe_list(st, kind, limit, offset, out, total);
    *out = NULL;
    *total = 0;
    json_t *list = json_array();
    long long count = 0;
    db_lock(st);
    store_status s = list ? STORE_OK : db_fail("list probes: out of memory");
    sqlite3_stmt *q = s == STORE_OK
                          ? db_prepare(st, "SELECT " PROBE_COLUMNS " FROM probes WHERE (?1 IS NULL OR kind = ?1) "
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
        json_t *p = probe_from_row(q);
        if (!p) {
            s = db_fail("list probes: out of memory");
            break;
        }
        s = attach_tables(st, p, 0);
        if (json_array_append_new(list, p) < 0 && s == STORE_OK) s = db_fail("list probes: out of memory");
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "list probes");
    if (s == STORE_OK) {
        s = db_step_one(st, c, "count probes");
        if (s == STORE_OK)
            count = sqlite3_column_int64(c, 0);
        else if (s == STORE_NOT_FOUND)
            s = db_fail("count probes: no row");
    }
    sqlite3_finalize(q);
    sqlite3_finalize(c);
    db_unlock(st);
    if (s != STORE_OK) {
        json_decref(list);
        return s;
    }
    *out = list;
    *total = count;
    return STORE_OK;
}

store_status store_probe_table(store *st, long long id, const char *name, json_t **out) {
    if (st->pg) return store_pg_probe_table(st, id, name, out);
    *out = NULL;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT name, columns, rows FROM probe_tables WHERE probe_id = ? "
                                     "AND (?2 IS NULL OR name = ?2) ORDER BY idx LIMIT 1");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, id);
        db_bind_text(q, 2, name);
        s = db_step_one(st, q, "probe table");
        if (s == STORE_OK &&
            !(*out = json_pack("{s:o, s:o, s:o}", "name", db_col_text(q, 0), "columns", db_col_json(q, 1, json_array()),
                               "rows", db_col_json(q, 2, json_array()))))
            s = db_fail("probe table: out of memory");
    }
    sqlite3_finalize(q);
    db_unlock(st);
    return s;
}
