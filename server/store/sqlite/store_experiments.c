/* Experiments: every SQL statement about the experiments table. */
#include <stdio.h>
#include <stdlib.h>

#include "store/sqlite/store_impl.h"
#include "store/postgres/store_pg.h"

#define EXPERIMENT_COLUMNS                                                                                             \
    "e.id, e.name, e.preset, e.base_config, e.variants, e.created_at, "                                                \
    "(SELECT count(*) FROM runs r WHERE r.experiment_id = e.id), e.replicates"

static json_t *experiment_from_row(sqlite3_stmt *q) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "id", json_integer(sqlite3_column_int64(q, 0)));
    bad |= json_object_set_new(o, "name", db_col_text(q, 1));
    bad |= json_object_set_new(o, "preset", db_col_text(q, 2));
    bad |= json_object_set_new(o, "base", db_col_json(q, 3, json_object()));
    bad |= json_object_set_new(o, "variants", db_col_json(q, 4, json_array()));
    bad |= json_object_set_new(o, "replicates", json_integer(sqlite3_column_int(q, 7)));
    bad |= json_object_set_new(o, "created_at", db_col_real(q, 5));
    bad |= json_object_set_new(o, "run_count", json_integer(sqlite3_column_int64(q, 6)));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

store_status store_experiment_create(store *st, const store_new_experiment *e, const store_new_run *runs, size_t n,
                                     long long *exp_id, long long *run_ids) {
    if (st->pg) return store_pg_experiment_create(st, e, runs, n, exp_id, run_ids);
    *exp_id = 0;
    for (size_t i = 0; i < n; i++) run_ids[i] = 0;
    long long *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids) return db_fail("create experiment: out of memory");
    db_lock(st);
    store_status s = db_begin(st);
    long long id = -1;
    if (s == STORE_OK) {
        id = db_next_id(st, "experiments");
        if (id < 0) s = STORE_ERROR;
    }
    if (s == STORE_OK) {
        sqlite3_stmt *q =
            db_prepare(st, "INSERT INTO experiments (name, preset, base_config, variants, created_at, id, "
                           "replicates) VALUES (?, ?, ?, ?, ?, ?, ?)");
        if (q) {
            db_bind_text(q, 1, e->name ? e->name : "");
            db_bind_text(q, 2, e->preset);
            db_bind_text(q, 3, e->base_json);
            db_bind_text(q, 4, e->variants_json);
            sqlite3_bind_double(q, 5, db_now());
            sqlite3_bind_int64(q, 6, id);
            sqlite3_bind_int(q, 7, e->replicates > 1 ? e->replicates : 1);
        }
        s = db_exec(st, q, "insert experiment");
    }
    for (size_t i = 0; s == STORE_OK && i < n; i++) s = store_run_insert_locked(st, &runs[i], id, &ids[i]);
    s = db_finish(st, s);
    db_unlock(st);
    if (s == STORE_OK) {
        *exp_id = id;
        for (size_t i = 0; i < n; i++) run_ids[i] = ids[i];
    }
    free(ids);
    return s;
}

store_status store_experiment_discard(store *st, long long id) {
    if (st->pg) return store_pg_experiment_discard(st, id);
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "SELECT count(*) FROM runs WHERE experiment_id = ? AND status != 'queued'");
        if (q) {
            sqlite3_bind_int64(q, 1, id);
            s = db_step_one(st, q, "discard experiment");
            if (s == STORE_NOT_FOUND) s = db_fail("discard experiment: count gave no row");
            if (s == STORE_OK && sqlite3_column_int64(q, 0) > 0) s = STORE_CONFLICT;
            sqlite3_finalize(q);
        } else {
            s = STORE_ERROR;
        }
    }
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "DELETE FROM runs WHERE experiment_id = ?");
        if (q) sqlite3_bind_int64(q, 1, id);
        s = db_exec(st, q, "discard experiment's runs");
    }
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "DELETE FROM experiments WHERE id = ?");
        if (q) sqlite3_bind_int64(q, 1, id);
        s = db_exec(st, q, "discard experiment");
        if (s == STORE_OK && sqlite3_changes(st->db) == 0) s = STORE_NOT_FOUND;
    }
    s = db_finish(st, s); /* commits only a whole discard */
    db_unlock(st);
    return s;
}

store_status store_experiment_get(store *st, long long id, json_t **out) {
    if (st->pg) return store_pg_experiment_get(st, id, out);
    *out = NULL;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT " EXPERIMENT_COLUMNS " FROM experiments e WHERE e.id = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, id);
        s = db_step_one(st, q, "get experiment");
        if (s == STORE_OK && !(*out = experiment_from_row(q))) s = db_fail("get experiment: out of memory");
    }
    sqlite3_finalize(q);
    db_unlock(st);
    return s;
}

store_status store_experiment_list(store *st, int limit, int offset, json_t **out, long long *total) {
    if (st->pg) return store_pg_experiment_list(st, limit, offset, out, total);
    *out = NULL;
    *total = 0;
    json_t *list = json_array();
    long long count = 0;
    db_lock(st);
    store_status s = list ? STORE_OK : db_fail("list experiments: out of memory");
    sqlite3_stmt *q = s == STORE_OK ? db_prepare(st, "SELECT " EXPERIMENT_COLUMNS
                                                     " FROM experiments e ORDER BY e.id DESC LIMIT ? OFFSET ?")
                                    : NULL;
    sqlite3_stmt *c = q ? db_prepare(st, "SELECT count(*) FROM experiments") : NULL;
    if (!q || !c) s = STORE_ERROR;
    int rc = SQLITE_DONE;
    if (s == STORE_OK) {
        sqlite3_bind_int(q, 1, limit);
        sqlite3_bind_int(q, 2, offset);
    }
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW)
        if (json_array_append_new(list, experiment_from_row(q)) < 0) s = db_fail("list experiments: out of memory");
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "list experiments");
    if (s == STORE_OK) {
        s = db_step_one(st, c, "count experiments");
        if (s == STORE_OK)
            count = sqlite3_column_int64(c, 0);
        else if (s == STORE_NOT_FOUND)
            s = db_fail("count experiments: no row");
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
