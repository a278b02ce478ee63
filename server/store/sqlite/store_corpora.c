/* The corpus catalogue: every SQL statement about the corpora table. */
#include <stdio.h>
#include <stdlib.h>

#include "store/sqlite/store_impl.h"
#include "store/postgres/store_pg.h"

static store_status corpus_write(store *st, const store_corpus *c, const char *verb) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "%s INTO corpora (name, source, tokenizer, documents, bytes, tokens, status, error, builtin, created_at, "
             "task) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             verb);
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, sql);
    store_status s = STORE_ERROR;
    if (q) {
        db_bind_text(q, 1, c->name);
        db_bind_text(q, 2, c->source ? c->source : "");
        db_bind_text(q, 3, c->tokenizer);
        sqlite3_bind_int64(q, 4, c->documents);
        sqlite3_bind_int64(q, 5, c->bytes);
        sqlite3_bind_int64(q, 6, c->tokens);
        db_bind_text(q, 7, c->status);
        db_bind_text(q, 8, c->error);
        sqlite3_bind_int(q, 9, c->builtin);
        sqlite3_bind_double(q, 10, db_now());
        db_bind_text(q, 11, c->task_json);
        int rc = sqlite3_step(q);
        if (rc == SQLITE_DONE)
            s = STORE_OK;
        else if (sqlite3_extended_errcode(st->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
            s = STORE_CONFLICT;
        else
            s = db_error(st, "write corpus");
        sqlite3_finalize(q);
    }
    db_unlock(st);
    return s;
}

store_status store_corpus_put(store *st, const store_corpus *c) {
    if (st->pg) return store_pg_corpus_put(st, c);
    return corpus_write(st, c, "INSERT OR REPLACE");
}
store_status store_corpus_create(store *st, const store_corpus *c) {
    if (st->pg) return store_pg_corpus_create(st, c);
    return corpus_write(st, c, "INSERT");
}

#define CORPUS_COLUMNS                                                                                                 \
    "name, source, tokenizer, documents, bytes, tokens, status, error, builtin, created_at, "                          \
    "(SELECT count(*) FROM runs r WHERE r.corpus = c.name), task"

static json_t *corpus_from_row(sqlite3_stmt *q) {
    json_t *o = json_object();
    int bad = !o;
    bad |= json_object_set_new(o, "name", db_col_text(q, 0));
    bad |= json_object_set_new(o, "source", db_col_text(q, 1));
    bad |= json_object_set_new(o, "tokenizer", db_col_text(q, 2));
    bad |= json_object_set_new(o, "documents", json_integer(sqlite3_column_int64(q, 3)));
    bad |= json_object_set_new(o, "bytes", json_integer(sqlite3_column_int64(q, 4)));
    bad |= json_object_set_new(o, "tokens", json_integer(sqlite3_column_int64(q, 5)));
    bad |= json_object_set_new(o, "status", db_col_text(q, 6));
    bad |= json_object_set_new(o, "error", db_col_text(q, 7));
    bad |= json_object_set_new(o, "builtin", json_boolean(sqlite3_column_int(q, 8)));
    bad |= json_object_set_new(o, "created_at", db_col_real(q, 9));
    bad |= json_object_set_new(o, "runs", json_integer(sqlite3_column_int64(q, 10)));
    const unsigned char *task = sqlite3_column_text(q, 11);
    if (task) {
        json_t *t = json_loads((const char *)task, 0, NULL);
        bad |= !t || json_object_set_new(o, "task", t);
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

store_status store_corpus_get(store *st, const char *name, json_t **out) {
    if (st->pg) return store_pg_corpus_get(st, name, out);
    *out = NULL;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT " CORPUS_COLUMNS " FROM corpora c WHERE name = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        db_bind_text(q, 1, name);
        s = db_step_one(st, q, "get corpus");
        if (s == STORE_OK && !(*out = corpus_from_row(q))) s = db_fail("get corpus: out of memory");
    }
    sqlite3_finalize(q);
    db_unlock(st);
    return s;
}

store_status store_corpus_list(store *st, json_t **out) {
    if (st->pg) return store_pg_corpus_list(st, out);
    *out = NULL;
    json_t *list = json_array();
    db_lock(st);
    store_status s = list ? STORE_OK : db_fail("list corpora: out of memory");
    sqlite3_stmt *q =
        s == STORE_OK ? db_prepare(st, "SELECT " CORPUS_COLUMNS " FROM corpora c ORDER BY builtin DESC, name") : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    int rc = SQLITE_DONE;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW)
        if (json_array_append_new(list, corpus_from_row(q)) < 0) s = db_fail("list corpora: out of memory");
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "list corpora");
    sqlite3_finalize(q);
    db_unlock(st);
    if (s != STORE_OK) {
        json_decref(list);
        return s;
    }
    *out = list;
    return STORE_OK;
}

store_status store_corpus_delete(store *st, const char *name) {
    if (st->pg) return store_pg_corpus_delete(st, name);
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "DELETE FROM corpora WHERE name = ?1 AND builtin = 0 "
                                     "AND NOT EXISTS (SELECT 1 FROM runs WHERE corpus = ?1)");
    if (q) db_bind_text(q, 1, name);
    store_status s = db_exec(st, q, "delete corpus");
    if (s == STORE_OK && sqlite3_changes(st->db) == 0) {
        sqlite3_stmt *e = db_prepare(st, "SELECT 1 FROM corpora WHERE name = ?");
        if (e) {
            db_bind_text(e, 1, name);
            s = db_step_one(st, e, "find corpus");
            if (s == STORE_OK) s = STORE_CONFLICT; /* it exists, so it is built in or in use */
            sqlite3_finalize(e);
        } else {
            s = STORE_ERROR;
        }
    }
    db_unlock(st);
    return s;
}

store_status store_corpora_fail_tokenizing(store *st, const char *error, int *n) {
    if (st->pg) return store_pg_corpora_fail_tokenizing(st, error, n);
    *n = 0;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "UPDATE corpora SET status = 'failed', error = ? WHERE status = 'tokenizing'");
    if (q) db_bind_text(q, 1, error);
    store_status s = db_exec(st, q, "recover corpora");
    if (s == STORE_OK) *n = sqlite3_changes(st->db);
    db_unlock(st);
    return s;
}
