/* Artefacts: every SQL statement about the artifacts table (migration 0005). */
#include <stdio.h>

#include "store/sqlite/store_impl.h"
#include "store/postgres/store_pg.h"

store_status store_artifact_put(store *st, const store_artifact *a) {
    if (st->pg) return store_pg_artifact_put(st, a);
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

store_status store_artifact_get(store *st, const char *path, json_t **out) {
    if (st->pg) return store_pg_artifact_get(st, path, out);
    *out = NULL;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT path, kind, run_id, step, bytes, sha256, created_at FROM artifacts "
                                     "WHERE path = ?");
    store_status s = q ? STORE_OK : STORE_ERROR;
    if (s == STORE_OK) {
        db_bind_text(q, 1, path);
        s = db_step_one(st, q, "get artefact");
    }
    if (s == STORE_OK) {
        json_t *o = json_object();
        int bad = !o;
        bad |= json_object_set_new(o, "path", db_col_text(q, 0));
        bad |= json_object_set_new(o, "kind", db_col_text(q, 1));
        bad |= json_object_set_new(o, "run_id", db_col_int(q, 2));
        bad |= json_object_set_new(o, "step", db_col_int(q, 3));
        bad |= json_object_set_new(o, "bytes", db_col_int(q, 4));
        bad |= json_object_set_new(o, "sha256", db_col_text(q, 5));
        bad |= json_object_set_new(o, "created_at", db_col_real(q, 6));
        if (bad) {
            json_decref(o);
            s = db_fail("get artefact: out of memory");
        } else {
            *out = o;
        }
    }
    sqlite3_finalize(q);
    db_unlock(st);
    return s;
}
