/* Experiments: every SQL statement about the experiments table. */
#include <stdio.h>
#include <stdlib.h>

#include "store/sqlite/store_sqlite.h"

store_status store_sqlite_experiment_create(store *st, const store_new_experiment *e, const store_new_run *runs,
                                            size_t n, long long *exp_id, long long *run_ids) {
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
    for (size_t i = 0; s == STORE_OK && i < n; i++) s = store_sqlite_run_insert(st, &runs[i], id, &ids[i]);
    if (s == STORE_OK && e->idempotency) s = db_idempotency_put(st, e->idempotency, 0, id);
    s = db_finish(st, s);
    db_unlock(st);
    if (s == STORE_OK) {
        *exp_id = id;
        for (size_t i = 0; i < n; i++) run_ids[i] = ids[i];
    }
    free(ids);
    return s;
}

store_status store_sqlite_experiment_rename(store *st, long long id, const char *name) {
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "UPDATE experiments SET name = ? WHERE id = ?");
    if (q) {
        db_bind_text(q, 1, name);
        sqlite3_bind_int64(q, 2, id);
    }
    store_status s = db_exec(st, q, "rename experiment");
    if (s == STORE_OK && db_changes(st) == 0) s = STORE_NOT_FOUND;
    db_unlock(st);
    return s;
}

store_status store_sqlite_experiment_delete(store *st, long long id) {
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "UPDATE runs SET experiment_id = NULL WHERE experiment_id = ?");
        if (q) sqlite3_bind_int64(q, 1, id);
        s = db_exec(st, q, "detach experiment's runs");
    }
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "DELETE FROM experiments WHERE id = ?");
        if (q) sqlite3_bind_int64(q, 1, id);
        s = db_exec(st, q, "delete experiment");
        if (s == STORE_OK && db_changes(st) == 0) s = STORE_NOT_FOUND;
    }
    s = db_finish(st, s);
    db_unlock(st);
    return s;
}

store_status store_sqlite_experiment_discard(store *st, long long id) {
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "SELECT count(*) FROM runs WHERE experiment_id = ? AND status != 'queued'");
        if (q) {
            sqlite3_bind_int64(q, 1, id);
            long long started = 0;
            s = db_count(st, q, &started, "discard experiment");
            if (s == STORE_OK && started > 0) s = STORE_CONFLICT;
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
        if (s == STORE_OK && db_changes(st) == 0) s = STORE_NOT_FOUND;
    }
    s = db_finish(st, s); /* commits only a whole discard */
    db_unlock(st);
    return s;
}

store_status store_sqlite_experiment_get(store *st, long long id, json_t **out) {
    *out = NULL;
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT " STORE_EXPERIMENT_COLUMNS " FROM experiments e WHERE e.id = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, id);
        s = db_step_one(st, q, "get experiment");
        store_row r = db_row(q);
        if (s == STORE_OK && !(*out = store_experiment_from_row(&r))) s = db_fail("get experiment: out of memory");
    }
    sqlite3_finalize(q);
    db_read_unlock(st);
    return s;
}

store_status store_sqlite_experiment_list(store *st, int limit, int offset, json_t **out, long long *total) {
    *out = NULL;
    *total = 0;
    json_t *list = json_array();
    long long count = 0;
    db_read_lock(st);
    store_status s = list ? STORE_OK : db_fail("list experiments: out of memory");
    sqlite3_stmt *q = s == STORE_OK ? db_prepare(st, "SELECT " STORE_EXPERIMENT_COLUMNS
                                                     " FROM experiments e ORDER BY e.id DESC LIMIT ? OFFSET ?")
                                    : NULL;
    sqlite3_stmt *c = q ? db_prepare(st, "SELECT count(*) FROM experiments") : NULL;
    if (!q || !c) s = STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int(q, 1, limit);
        sqlite3_bind_int(q, 2, offset);
        s = db_rows(st, q, store_experiment_from_row, list, "list experiments");
    }
    if (s == STORE_OK) s = db_count(st, c, &count, "count experiments");
    sqlite3_finalize(q);
    sqlite3_finalize(c);
    db_read_unlock(st);
    return store_list_done(s, list, count, out, total);
}
