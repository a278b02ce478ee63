/* Runs and their tags: every SQL statement about runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite/store_sqlite.h"

#define RUN_COLUMNS                                                                                                    \
    STORE_RUN_COLUMNS_BEFORE_TAGS                                                                                      \
    "(SELECT json_group_array(tag) FROM (SELECT tag FROM run_tags t WHERE t.run_id = r.id ORDER BY tag)), "            \
    "r.replicate, r.source, r.provenance"

static json_t *run_from_stmt(sqlite3_stmt *q) {
    store_row r = db_row(q);
    return store_run_from_row(&r);
}

static store_status put_tags(store *st, long long id, const json_t *tags) {
    sqlite3_stmt *del = db_prepare(st, "DELETE FROM run_tags WHERE run_id = ?");
    if (!del) return STORE_ERROR;
    sqlite3_bind_int64(del, 1, id);
    if (db_exec(st, del, "clear tags") != STORE_OK) return STORE_ERROR;
    size_t i;
    json_t *t;
    json_array_foreach(tags, i, t) {
        sqlite3_stmt *ins = db_prepare(st, "INSERT OR IGNORE INTO run_tags (run_id, tag) VALUES (?, ?)");
        if (!ins) return STORE_ERROR;
        sqlite3_bind_int64(ins, 1, id);
        db_bind_text(ins, 2, json_string_value(t));
        if (db_exec(st, ins, "add tag") != STORE_OK) return STORE_ERROR;
    }
    return STORE_OK;
}

store_status store_sqlite_run_insert(store *st, const store_new_run *run, long long experiment_id, long long *id_out) {
    long long id = db_next_id(st, "runs");
    if (id < 0) return STORE_ERROR;
    sqlite3_stmt *q =
        db_prepare(st, "INSERT INTO runs (name, experiment_id, variant, config, seed, status, total_steps, "
                       "note, created_at, corpus, id, replicate, source, started_at) VALUES (?1, ?2, ?3, ?4, ?5, "
                       "CASE WHEN ?12 THEN 'running' ELSE 'queued' END, ?6, ?7, ?8, ?9, ?10, ?11, "
                       "CASE WHEN ?12 THEN 'external' ELSE 'attnlab' END, CASE WHEN ?12 THEN ?8 END)");
    if (!q) return STORE_ERROR;
    db_bind_text(q, 1, run->name ? run->name : "");
    if (experiment_id)
        sqlite3_bind_int64(q, 2, experiment_id);
    else
        sqlite3_bind_null(q, 2);
    db_bind_text(q, 3, run->variant ? run->variant : "");
    db_bind_text(q, 4, run->config_json);
    sqlite3_bind_int64(q, 5, run->seed);
    sqlite3_bind_int(q, 6, run->total_steps);
    db_bind_text(q, 7, run->note ? run->note : "");
    sqlite3_bind_double(q, 8, db_now());
    db_bind_text(q, 9, run->corpus ? run->corpus : "");
    sqlite3_bind_int64(q, 10, id);
    sqlite3_bind_int(q, 11, run->replicate > 0 ? run->replicate : 0);
    sqlite3_bind_int(q, 12, run->external ? 1 : 0);
    if (db_exec(st, q, "insert run") != STORE_OK) return STORE_ERROR;
    if (run->tags && put_tags(st, id, run->tags) != STORE_OK) return STORE_ERROR;
    *id_out = id;
    return STORE_OK;
}

store_status db_idempotency_put(store *st, const store_idempotency *k, long long run_id, long long experiment_id) {
    sqlite3_stmt *q = db_prepare(st, STORE_IDEMPOTENCY_INSERT("?1", "?2", "?3", "?4", "?5", "?6"));
    if (!q) return STORE_ERROR;
    db_bind_text(q, 1, k->key);
    db_bind_text(q, 2, run_id ? "run" : "experiment");
    if (run_id)
        sqlite3_bind_int64(q, 3, run_id);
    else
        sqlite3_bind_null(q, 3);
    if (experiment_id && !run_id)
        sqlite3_bind_int64(q, 4, experiment_id);
    else
        sqlite3_bind_null(q, 4);
    db_bind_text(q, 5, k->request_hash);
    sqlite3_bind_double(q, 6, db_now());
    int rc = sqlite3_step(q);
    store_status s = STORE_OK;
    if ((rc & 0xff) == SQLITE_CONSTRAINT &&
        (db_errcode(st) == SQLITE_CONSTRAINT_PRIMARYKEY || db_errcode(st) == SQLITE_CONSTRAINT_UNIQUE))
        s = STORE_CONFLICT; /* recorded already: by an earlier request, or one that ran alongside */
    else if (rc != SQLITE_DONE)
        s = db_error(st, "record idempotency key");
    sqlite3_finalize(q);
    return s;
}

store_status store_sqlite_idempotency_get(store *st, const char *key, json_t **out) {
    *out = NULL;
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT " STORE_IDEMPOTENCY_COLUMNS " FROM idempotency_keys WHERE key = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        db_bind_text(q, 1, key);
        s = db_step_one(st, q, "get idempotency key");
    }
    store_row r = db_row(q);
    if (s == STORE_OK && !(*out = store_idempotency_from_row(&r))) s = db_fail("get idempotency key: out of memory");
    sqlite3_finalize(q);
    db_read_unlock(st);
    return s;
}

store_status store_sqlite_run_create(store *st, const store_new_run *run, long long *id_out) {
    *id_out = 0;
    long long id = 0;
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) s = store_sqlite_run_insert(st, run, run->experiment_id, &id);
    if (s == STORE_OK && run->idempotency) s = db_idempotency_put(st, run->idempotency, id, 0);
    s = db_finish(st, s);
    db_unlock(st);
    if (s == STORE_OK) *id_out = id;
    return s;
}

static store_status run_get_locked(store *st, long long id, json_t **out) {
    *out = NULL;
    sqlite3_stmt *q = db_prepare(st, "SELECT " RUN_COLUMNS " FROM runs r WHERE r.id = ?");
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, id);
    store_status s = db_step_one(st, q, "get run");
    if (s == STORE_OK && !(*out = run_from_stmt(q))) s = db_fail("get run: out of memory");
    sqlite3_finalize(q);
    return s;
}

store_status store_sqlite_run_get(store *st, long long id, json_t **out) {
    db_read_lock(st);
    store_status s = run_get_locked(st, id, out);
    db_read_unlock(st);
    return s;
}

/* Whether a run exists: STORE_OK, STORE_NOT_FOUND or STORE_ERROR. */
static store_status run_exists_locked(store *st, long long id) {
    sqlite3_stmt *q = db_prepare(st, "SELECT 1 FROM runs WHERE id = ?");
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, id);
    store_status s = db_step_one(st, q, "find run");
    sqlite3_finalize(q);
    return s;
}

/* Text compares byte by byte (BINARY) already; NULLs first unless told. */
static const store_order_dialect dialect = {.text_collate = "", .nulls_last = 0};

store_status store_sqlite_run_list(store *st, const store_run_filter *f, json_t **runs, long long *total) {
    *runs = NULL;
    *total = 0;
    char order[400];
    store_run_order_sql(f->sort, &dialect, order, sizeof order);
    if (f->n_config < 0 || f->n_config > STORE_RUN_MAX_CONFIG_FILTERS) return db_fail("list runs: too many filters");
    char where[1600] = " WHERE (?1 IS NULL OR r.status = ?1) AND (?2 IS NULL OR r.variant = ?2) "
                       "AND (?3 = 0 OR r.experiment_id = ?3) "
                       "AND (?4 IS NULL OR EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.tag = ?4))";
    /* Config filter i: its path is ?(7+2i), its value (JSON text) ?(8+2i). */
    char paths[STORE_RUN_MAX_CONFIG_FILTERS][72];
    for (int i = 0; i < f->n_config; i++) {
        if (!store_config_key_ok(f->config[i].key) || !f->config[i].value_json)
            return db_fail("list runs: a config filter's key is not a field name");
        snprintf(paths[i], sizeof paths[i], "$.\"%s\"", f->config[i].key);
        size_t used = strlen(where);
        snprintf(where + used, sizeof where - used, " AND json_extract(r.config, ?%d) = json_extract(?%d, '$')",
                 7 + 2 * i, 8 + 2 * i);
    }
    /* The search: an FTS5 query of its words, ?SEARCH_PARAM. */
    enum { SEARCH_PARAM = 7 + 2 * STORE_RUN_MAX_CONFIG_FILTERS };
    char match[STORE_SEARCH_SPELL_MAX];
    if (f->search) {
        if (store_search_spell(f->search, "\"", "\"*", " AND ", match, sizeof match) < 0)
            return db_fail("list runs: not a search");
        size_t used = strlen(where);
        snprintf(where + used, sizeof where - used,
                 " AND r.id IN (SELECT rowid FROM run_words WHERE run_words MATCH ?%d)", (int)SEARCH_PARAM);
    }
    char sql[4096], count_sql[2048];
    snprintf(sql, sizeof sql, "SELECT " RUN_COLUMNS " FROM runs r %s ORDER BY %s LIMIT ?5 OFFSET ?6", where, order);
    snprintf(count_sql, sizeof count_sql, "SELECT count(*) FROM runs r %s", where);

    json_t *list = json_array();
    long long count = 0;
    db_read_lock(st);
    store_status s = list ? STORE_OK : db_fail("list runs: out of memory");
    sqlite3_stmt *q = s == STORE_OK ? db_prepare(st, sql) : NULL;
    sqlite3_stmt *c = q ? db_prepare(st, count_sql) : NULL;
    if (!q || !c) s = STORE_ERROR;
    for (int k = 0; k < 2 && s == STORE_OK; k++) {
        sqlite3_stmt *x = k ? c : q;
        db_bind_text(x, 1, f->status);
        db_bind_text(x, 2, f->variant);
        sqlite3_bind_int64(x, 3, f->experiment_id);
        db_bind_text(x, 4, f->tag);
        for (int i = 0; i < f->n_config; i++) {
            db_bind_text(x, 7 + 2 * i, paths[i]);
            db_bind_text(x, 8 + 2 * i, f->config[i].value_json);
        }
        if (f->search) db_bind_text(x, SEARCH_PARAM, match);
    }
    if (s == STORE_OK) {
        sqlite3_bind_int(q, 5, f->limit);
        sqlite3_bind_int(q, 6, f->offset);
        s = db_rows(st, q, store_run_from_row, list, "list runs");
    }
    if (s == STORE_OK) s = db_count(st, c, &count, "count runs");
    sqlite3_finalize(q);
    sqlite3_finalize(c);
    db_read_unlock(st);
    return store_list_done(s, list, count, runs, total);
}

store_status store_sqlite_run_transition(store *st, long long id, const char *const *from, const char *to,
                                         const char *error) {
    char in[256] = "";
    int n_from = 0;
    for (; from[n_from] && n_from < 16; n_from++) strncat(in, n_from ? ",?" : "?", sizeof in - strlen(in) - 1);
    if (n_from == 0) return db_fail("change run status: no status to move from");
    char sql[640];
    snprintf(sql, sizeof sql,
             "UPDATE runs SET status = ?1, error = ?2, "
             "started_at = CASE WHEN ?1 = 'running' THEN ?3 ELSE started_at END, "
             "finished_at = CASE WHEN ?4 THEN ?3 WHEN ?1 IN ('queued','running') THEN NULL ELSE finished_at END "
             "WHERE id = ?5 AND status IN (%s)",
             in);
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, sql);
    store_status s = STORE_ERROR;
    if (q) {
        db_bind_text(q, 1, to);
        db_bind_text(q, 2, error);
        sqlite3_bind_double(q, 3, db_now());
        sqlite3_bind_int(q, 4, store_run_status_ended(to));
        sqlite3_bind_int64(q, 5, id);
        for (int i = 0; i < n_from; i++) db_bind_text(q, 6 + i, from[i]);
        s = db_exec(st, q, "change run status");
        if (s == STORE_OK && db_changes(st) == 0) {
            s = run_exists_locked(st, id);
            if (s == STORE_OK) s = STORE_CONFLICT;
        }
    }
    db_unlock(st);
    return s;
}

store_status store_sqlite_run_set_provenance(store *st, long long id, const char *provenance_json) {
    return db_update_by_id(st, "UPDATE runs SET provenance = ?1 WHERE id = ?2", provenance_json, id, "run provenance");
}

store_status store_sqlite_run_progress(store *st, long long id, int step, int checkpoint_step) {
    db_lock(st);
    sqlite3_stmt *q =
        db_prepare(st, "UPDATE runs SET step = ?, checkpoint_step = max(checkpoint_step, ?) WHERE id = ?");
    if (q) {
        sqlite3_bind_int(q, 1, step);
        sqlite3_bind_int(q, 2, checkpoint_step);
        sqlite3_bind_int64(q, 3, id);
    }
    store_status s = db_exec(st, q, "run progress");
    db_unlock(st);
    return s;
}

store_status store_sqlite_run_update(store *st, long long id, const char *name, const char *note, const json_t *tags) {
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q =
            db_prepare(st, "UPDATE runs SET name = coalesce(?, name), note = coalesce(?, note) WHERE id = ?");
        if (q) {
            db_bind_text(q, 1, name);
            db_bind_text(q, 2, note);
            sqlite3_bind_int64(q, 3, id);
        }
        s = db_exec(st, q, "update run");
        if (s == STORE_OK && db_changes(st) == 0) s = STORE_NOT_FOUND;
        if (s == STORE_OK && tags) s = put_tags(st, id, tags);
        s = db_finish(st, s);
    }
    db_unlock(st);
    return s;
}

store_status store_sqlite_run_delete(store *st, long long id) {
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "DELETE FROM runs WHERE id = ? AND status NOT IN ('queued', 'running')");
        if (q) sqlite3_bind_int64(q, 1, id);
        s = db_exec(st, q, "delete run");
        if (s == STORE_OK && db_changes(st) == 0) {
            s = run_exists_locked(st, id);
            if (s == STORE_OK) s = STORE_CONFLICT;
        }
        s = db_finish(st, s);
    }
    db_unlock(st);
    return s;
}

int store_sqlite_runs_interrupt_running(store *st) {
    db_lock(st);
    int n = -1;
    sqlite3_stmt *q =
        db_prepare(st, "UPDATE runs SET status = 'interrupted', finished_at = ?, "
                       "error = 'the service stopped while the run was training' WHERE status = 'running' "
                       "AND source = 'attnlab'");
    if (q) sqlite3_bind_double(q, 1, db_now());
    if (db_exec(st, q, "interrupt runs") == STORE_OK) n = db_changes(st);
    db_unlock(st);
    return n;
}

store_status store_sqlite_runs_queued(store *st, long long **ids, int *n) {
    *ids = NULL;
    *n = 0;
    store_ids got = {0};
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT id FROM runs WHERE status = 'queued' ORDER BY id");
    store_status s = q ? STORE_OK : STORE_ERROR;
    int rc = SQLITE_DONE;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW)
        if (store_ids_push(&got, sqlite3_column_int64(q, 0), "queued runs") < 0) s = STORE_ERROR;
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "queued runs");
    sqlite3_finalize(q);
    db_read_unlock(st);
    return store_ids_done(s, &got, ids, n);
}

store_status store_sqlite_run_counts(store *st, json_t **out) {
    *out = NULL;
    json_t *counts = store_run_counts_zero();
    store_status s = counts ? STORE_OK : db_fail("run counts: out of memory");
    db_read_lock(st);
    sqlite3_stmt *q = s == STORE_OK ? db_prepare(st, "SELECT status, count(*) FROM runs GROUP BY status") : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    int rc = SQLITE_DONE;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW)
        if (json_object_set_new(counts, (const char *)sqlite3_column_text(q, 0),
                                json_integer(sqlite3_column_int64(q, 1))) < 0)
            s = db_fail("run counts: out of memory");
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "run counts");
    sqlite3_finalize(q);
    db_read_unlock(st);
    return store_list_done(s, counts, 0, out, NULL);
}
