/* The corpus catalogue: every SQL statement about the corpora table. */
#include <stdio.h>
#include <stdlib.h>

#include "store/sqlite/store_sqlite.h"

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
        else if (db_errcode(st) == SQLITE_CONSTRAINT_PRIMARYKEY)
            s = STORE_CONFLICT;
        else
            s = db_error(st, "write corpus");
        sqlite3_finalize(q);
    }
    db_unlock(st);
    return s;
}

store_status store_sqlite_corpus_put(store *st, const store_corpus *c) {
    return corpus_write(st, c, "INSERT OR REPLACE");
}
store_status store_sqlite_corpus_create(store *st, const store_corpus *c) { return corpus_write(st, c, "INSERT"); }

store_status store_sqlite_corpus_get(store *st, const char *name, json_t **out) {
    *out = NULL;
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT " STORE_CORPUS_COLUMNS " FROM corpora c WHERE name = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        db_bind_text(q, 1, name);
        s = db_step_one(st, q, "get corpus");
        store_row r = db_row(q);
        if (s == STORE_OK && !(*out = store_corpus_from_row(&r))) s = db_fail("get corpus: out of memory");
    }
    sqlite3_finalize(q);
    db_read_unlock(st);
    return s;
}

store_status store_sqlite_corpus_list(store *st, json_t **out) {
    *out = NULL;
    json_t *list = json_array();
    db_read_lock(st);
    store_status s = list ? STORE_OK : db_fail("list corpora: out of memory");
    sqlite3_stmt *q = s == STORE_OK
                          ? db_prepare(st, "SELECT " STORE_CORPUS_COLUMNS " FROM corpora c ORDER BY builtin DESC, name")
                          : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    if (s == STORE_OK) s = db_rows(st, q, store_corpus_from_row, list, "list corpora");
    sqlite3_finalize(q);
    db_read_unlock(st);
    return store_list_done(s, list, 0, out, NULL);
}

store_status store_sqlite_corpus_delete(store *st, const char *name) {
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "DELETE FROM corpora WHERE name = ?1 AND builtin = 0 "
                                     "AND NOT EXISTS (SELECT 1 FROM runs WHERE corpus = ?1)");
    if (q) db_bind_text(q, 1, name);
    store_status s = db_exec(st, q, "delete corpus");
    if (s == STORE_OK && db_changes(st) == 0) {
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

store_status store_sqlite_corpora_fail_tokenizing(store *st, const char *error, int *n) {
    *n = 0;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "UPDATE corpora SET status = 'failed', error = ? WHERE status = 'tokenizing'");
    if (q) db_bind_text(q, 1, error);
    store_status s = db_exec(st, q, "recover corpora");
    if (s == STORE_OK) *n = db_changes(st);
    db_unlock(st);
    return s;
}
