/* Experiments: every SQL statement about the experiments table. */
#include <stdio.h>
#include <stdlib.h>

#include "store/sqlite/store_sqlite.h"

/* The name experiment e takes (store_new_experiment.rename_if_taken) into name; STORE_CONFLICT when
 * it is in use and may not change. Call inside the transaction. */
static store_status free_name_locked(store *st, const store_new_experiment *e, char *name, size_t len) {
    sqlite3_stmt *q = db_prepare(st, "SELECT 1 FROM experiments WHERE name = ?");
    if (!q) return STORE_ERROR;
    store_status s = STORE_CONFLICT;
    for (int k = 1; k <= (e->rename_if_taken ? 10000 : 1); k++) {
        store_experiment_name_nth(e->name ? e->name : "", k, name, len);
        sqlite3_reset(q);
        db_bind_text(q, 1, name);
        s = db_step_one(st, q, "name experiment");
        if (s != STORE_OK) break; /* NOT_FOUND: free */
        s = STORE_CONFLICT;
    }
    sqlite3_finalize(q);
    return s == STORE_NOT_FOUND ? STORE_OK : s;
}

/* store_runs_insert's backend: a run inserted inside the writer's transaction. */
static store_status insert_run(void *backend, const store_new_run *run, long long experiment_id, long long *id) {
    return store_sqlite_run_insert(backend, run, experiment_id, id);
}

store_status store_sqlite_experiment_create(store *st, const store_new_experiment *e, const store_new_run *runs,
                                            size_t n, long long *exp_id, long long *run_ids) {
    *exp_id = 0;
    for (size_t i = 0; i < n; i++) run_ids[i] = 0;
    long long *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids) return db_fail("create experiment: out of memory");
    db_lock(st);
    store_status s = db_begin(st);
    long long id = -1;
    char name[STORE_EXPERIMENT_NAME_MAX + 16];
    if (s == STORE_OK) s = free_name_locked(st, e, name, sizeof name);
    if (s == STORE_OK) {
        id = db_next_id(st, "experiments");
        if (id < 0) s = STORE_ERROR;
    }
    if (s == STORE_OK) {
        sqlite3_stmt *q =
            db_prepare(st, "INSERT INTO experiments (name, preset, base_config, variants, created_at, id, "
                           "replicates) VALUES (?, ?, ?, ?, ?, ?, ?)");
        if (q) {
            db_bind_text(q, 1, name);
            db_bind_text(q, 2, e->preset);
            db_bind_text(q, 3, e->base_json);
            db_bind_text(q, 4, e->variants_json);
            sqlite3_bind_double(q, 5, db_now());
            sqlite3_bind_int64(q, 6, id);
            sqlite3_bind_int(q, 7, e->replicates > 1 ? e->replicates : 1);
        }
        s = db_exec(st, q, "insert experiment");
    }
    if (s == STORE_OK) s = store_runs_insert(runs, n, e->name, name, id, insert_run, st, ids);
    if (s == STORE_OK && e->idempotency) s = db_idempotency_put(st, e->idempotency, 0, id);
    s = db_finish(st, s);
    db_unlock(st);
    return store_runs_created(s, id, exp_id, ids, run_ids, n);
}

store_status store_sqlite_experiment_add_runs(store *st, long long id, const char *variants_json, int replicates,
                                              const store_new_run *runs, size_t n, long long *run_ids) {
    for (size_t i = 0; i < n; i++) run_ids[i] = 0;
    long long *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids) return db_fail("add runs to experiment: out of memory");
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "UPDATE experiments SET variants = ?, replicates = ? WHERE id = ?");
        if (q) {
            db_bind_text(q, 1, variants_json);
            sqlite3_bind_int(q, 2, replicates);
            sqlite3_bind_int64(q, 3, id);
        }
        s = db_exec(st, q, "add runs to experiment");
        if (s == STORE_OK && db_changes(st) == 0) s = STORE_NOT_FOUND;
    }
    if (s == STORE_OK) s = store_runs_insert(runs, n, NULL, NULL, id, insert_run, st, ids);
    s = db_finish(st, s);
    db_unlock(st);
    return store_runs_created(s, id, NULL, ids, run_ids, n);
}

store_status store_sqlite_experiment_rename(store *st, long long id, const char *name) {
    return db_update_by_id(st, "UPDATE experiments SET name = ?1 WHERE id = ?2", name, id, "rename experiment");
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

/* The experiments a search keeps: ?3 an FTS5 query. */
#define EXPERIMENT_SEARCH                                                                                              \
    " WHERE e.id IN (SELECT rowid FROM experiment_words WHERE experiment_words MATCH ?3) OR e.id IN (SELECT "          \
    "r.experiment_id FROM runs r WHERE r.id IN (SELECT rowid FROM run_words WHERE run_words MATCH ?3))"

store_status store_sqlite_experiment_list(store *st, int limit, int offset, const char *search, json_t **out,
                                          long long *total) {
    *out = NULL;
    *total = 0;
    char match[STORE_SEARCH_SPELL_MAX];
    if (search && store_search_spell(search, "\"", "\"*", " AND ", match, sizeof match) < 0)
        return db_fail("list experiments: not a search");
    const char *where = search ? EXPERIMENT_SEARCH : "";
    char sql[1024], count_sql[768];
    snprintf(sql, sizeof sql,
             "SELECT " STORE_EXPERIMENT_COLUMNS " FROM experiments e%s ORDER BY e.id DESC LIMIT ?1 OFFSET ?2", where);
    snprintf(count_sql, sizeof count_sql, "SELECT count(*) FROM experiments e%s", where);
    json_t *list = json_array();
    long long count = 0;
    db_read_lock(st);
    store_status s = list ? STORE_OK : db_fail("list experiments: out of memory");
    sqlite3_stmt *q = s == STORE_OK ? db_prepare(st, sql) : NULL;
    sqlite3_stmt *c = q ? db_prepare(st, count_sql) : NULL;
    if (!q || !c) s = STORE_ERROR;
    for (int k = 0; k < 2 && s == STORE_OK && search; k++) db_bind_text(k ? c : q, 3, match);
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
