/* Artefacts: every SQL statement about the artifacts table (migration 0005). */
#include <stdio.h>

#include "store/sqlite/store_sqlite.h"

store_status store_sqlite_artifact_put(store *st, const store_artifact *a) {
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "INSERT OR REPLACE INTO artifacts (path, kind, run_id, step, bytes, sha256, "
                                     "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)");
    if (q) {
        db_bind_text(q, 1, a->path);
        db_bind_text(q, 2, a->kind);
        if (a->run_id)
            sqlite3_bind_int64(q, 3, a->run_id);
        else
            sqlite3_bind_null(q, 3);
        sqlite3_bind_int(q, 4, a->step);
        sqlite3_bind_int64(q, 5, a->bytes);
        db_bind_text(q, 6, a->sha256);
        sqlite3_bind_double(q, 7, db_now());
    }
    store_status s = db_exec(st, q, "record artefact");
    db_unlock(st);
    return s;
}

store_status store_sqlite_artifact_get(store *st, const char *path, json_t **out) {
    *out = NULL;
    db_read_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT " STORE_ARTIFACT_COLUMNS " FROM artifacts WHERE path = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        db_bind_text(q, 1, path);
        s = db_step_one(st, q, "get artefact");
    }
    store_row r = db_row(q);
    if (s == STORE_OK && !(*out = store_artifact_from_row(&r))) s = db_fail("get artefact: out of memory");
    sqlite3_finalize(q);
    db_read_unlock(st);
    return s;
}
