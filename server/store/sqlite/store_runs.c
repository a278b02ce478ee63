/* Runs and their tags: every SQL statement about runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite/store_impl.h"
#include "store/postgres/store_pg.h"

#define RUN_COLUMNS                                                                                                    \
    "r.id, r.name, r.experiment_id, r.variant, r.config, r.seed, r.status, r.step, r.total_steps, "                    \
    "r.note, r.error, r.created_at, r.started_at, r.finished_at, r.corpus, r.checkpoint_step, "                        \
    "(SELECT json_group_array(tag) FROM (SELECT tag FROM run_tags t WHERE t.run_id = r.id ORDER BY tag)), "            \
    "r.replicate, r.source"

/* The run object of the current row of a RUN_COLUMNS query; NULL when out of memory. */
static json_t *run_from_row(sqlite3_stmt *q) {
    json_t *r = json_object();
    int bad = !r;
    bad |= json_object_set_new(r, "id", json_integer(sqlite3_column_int64(q, 0)));
    bad |= json_object_set_new(r, "name", db_col_text(q, 1));
    bad |= json_object_set_new(r, "experiment_id", db_col_int(q, 2));
    bad |= json_object_set_new(r, "variant", db_col_text(q, 3));
    bad |= json_object_set_new(r, "replicate", json_integer(sqlite3_column_int(q, 17)));
    const unsigned char *source = sqlite3_column_text(q, 18);
    if (source && !strcmp((const char *)source, "external"))
        bad |= json_object_set_new(r, "source", json_string("external"));
    bad |= json_object_set_new(r, "config", db_col_json(q, 4, json_object()));
    bad |= json_object_set_new(r, "seed", json_integer(sqlite3_column_int64(q, 5)));
    bad |= json_object_set_new(r, "status", db_col_text(q, 6));
    bad |= json_object_set_new(r, "step", json_integer(sqlite3_column_int(q, 7)));
    bad |= json_object_set_new(r, "total_steps", json_integer(sqlite3_column_int(q, 8)));
    bad |= json_object_set_new(r, "note", db_col_text(q, 9));
    bad |= json_object_set_new(r, "error", db_col_text(q, 10));
    bad |= json_object_set_new(r, "created_at", db_col_real(q, 11));
    bad |= json_object_set_new(r, "started_at", db_col_real(q, 12));
    bad |= json_object_set_new(r, "finished_at", db_col_real(q, 13));
    bad |= json_object_set_new(r, "corpus", db_col_text(q, 14));
    bad |= json_object_set_new(r, "checkpoint_step", json_integer(sqlite3_column_int(q, 15)));
    bad |= json_object_set_new(r, "tags", db_col_json(q, 16, json_array()));
    if (bad) {
        json_decref(r);
        return NULL;
    }
    return r;
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

store_status store_run_insert_locked(store *st, const store_new_run *run, long long experiment_id, long long *id_out) {
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

store_status store_run_create(store *st, const store_new_run *run, long long *id_out) {
    if (st->pg) return store_pg_run_create(st, run, id_out);
    *id_out = 0;
    long long id = 0;
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) s = db_finish(st, store_run_insert_locked(st, run, run->experiment_id, &id));
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
    if (s == STORE_OK && !(*out = run_from_row(q))) s = db_fail("get run: out of memory");
    sqlite3_finalize(q);
    return s;
}

store_status store_run_get(store *st, long long id, json_t **out) {
    if (st->pg) return store_pg_run_get(st, id, out);
    db_lock(st);
    store_status s = run_get_locked(st, id, out);
    db_unlock(st);
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

/* The final (last step's) and the lowest value of a run's series, for ORDER BY. */
#define LAST_OF(key) "(SELECT m.last_value FROM metric_summaries m WHERE m.run_id = r.id AND m.key = '" key "')"
#define MIN_OF(key) "(SELECT m.min_value FROM metric_summaries m WHERE m.run_id = r.id AND m.key = '" key "')"
/* Runs without the series last, in either direction; ties by id. */
#define BY_METRIC(x) x " IS NULL, " x " ASC, r.id ASC"
#define BY_METRIC_DESC(x) x " IS NULL, " x " DESC, r.id DESC"

store_status store_run_list(store *st, const store_run_filter *f, json_t **runs, long long *total) {
    if (st->pg) return store_pg_run_list(st, f, runs, total);
    *runs = NULL;
    *total = 0;
    /* The ORDER BY clause comes from a fixed list (store_run_sorts' order), never from the request text. */
    static const char *const order_sql[] = {
        "r.id ASC",                          /* id */
        "r.id DESC",                         /* -id */
        "r.created_at ASC, r.id ASC",        /* created_at */
        "r.created_at DESC, r.id DESC",      /* -created_at */
        "r.name ASC, r.id ASC",              /* name */
        "r.name DESC, r.id DESC",            /* -name */
        "r.status ASC, r.id ASC",            /* status */
        "r.status DESC, r.id DESC",          /* -status */
        BY_METRIC(LAST_OF("loss")),          /* loss */
        BY_METRIC_DESC(LAST_OF("loss")),     /* -loss */
        BY_METRIC(LAST_OF("val_loss")),      /* val_loss */
        BY_METRIC_DESC(LAST_OF("val_loss")), /* -val_loss */
        BY_METRIC(MIN_OF("loss")),           /* min_loss */
        BY_METRIC_DESC(MIN_OF("loss")),      /* -min_loss */
        BY_METRIC(MIN_OF("val_loss")),       /* min_val_loss */
        BY_METRIC_DESC(MIN_OF("val_loss")),  /* -min_val_loss */
    };
    _Static_assert(sizeof order_sql / sizeof order_sql[0] == STORE_RUN_SORT_COUNT, "one SQL order per sort");
    int sort_at = store_run_sort_index(f->sort);
    const char *order = sort_at >= 0 ? order_sql[sort_at] : "r.id DESC";
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
    char sql[4096], count_sql[2048];
    snprintf(sql, sizeof sql, "SELECT " RUN_COLUMNS " FROM runs r %s ORDER BY %s LIMIT ?5 OFFSET ?6", where, order);
    snprintf(count_sql, sizeof count_sql, "SELECT count(*) FROM runs r %s", where);

    json_t *list = json_array();
    long long count = 0;
    db_lock(st);
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
    }
    if (s == STORE_OK) {
        sqlite3_bind_int(q, 5, f->limit);
        sqlite3_bind_int(q, 6, f->offset);
        int rc = SQLITE_DONE;
        while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW)
            if (json_array_append_new(list, run_from_row(q)) < 0) s = db_fail("list runs: out of memory");
        if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "list runs");
    }
    if (s == STORE_OK) {
        s = db_step_one(st, c, "count runs");
        if (s == STORE_OK)
            count = sqlite3_column_int64(c, 0);
        else if (s == STORE_NOT_FOUND)
            s = db_fail("count runs: no row");
    }
    sqlite3_finalize(q);
    sqlite3_finalize(c);
    db_unlock(st);
    if (s != STORE_OK) {
        json_decref(list);
        return s;
    }
    *runs = list;
    *total = count;
    return STORE_OK;
}

static int is_final_status(const char *s) {
    return !strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled") || !strcmp(s, "interrupted");
}

store_status store_run_transition(store *st, long long id, const char *const *from, const char *to, const char *error) {
    if (st->pg) return store_pg_run_transition(st, id, from, to, error);
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
        sqlite3_bind_int(q, 4, is_final_status(to));
        sqlite3_bind_int64(q, 5, id);
        for (int i = 0; i < n_from; i++) db_bind_text(q, 6 + i, from[i]);
        s = db_exec(st, q, "change run status");
        if (s == STORE_OK && sqlite3_changes(st->db) == 0) {
            s = run_exists_locked(st, id);
            if (s == STORE_OK) s = STORE_CONFLICT;
        }
    }
    db_unlock(st);
    return s;
}

store_status store_run_progress(store *st, long long id, int step, int checkpoint_step) {
    if (st->pg) return store_pg_run_progress(st, id, step, checkpoint_step);
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

store_status store_run_update(store *st, long long id, const char *name, const char *note, const json_t *tags) {
    if (st->pg) return store_pg_run_update(st, id, name, note, tags);
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
        if (s == STORE_OK && sqlite3_changes(st->db) == 0) s = STORE_NOT_FOUND;
        if (s == STORE_OK && tags) s = put_tags(st, id, tags);
        s = db_finish(st, s);
    }
    db_unlock(st);
    return s;
}

store_status store_run_delete(store *st, long long id) {
    if (st->pg) return store_pg_run_delete(st, id);
    db_lock(st);
    store_status s = db_begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q = db_prepare(st, "DELETE FROM runs WHERE id = ? AND status NOT IN ('queued', 'running')");
        if (q) sqlite3_bind_int64(q, 1, id);
        s = db_exec(st, q, "delete run");
        if (s == STORE_OK && sqlite3_changes(st->db) == 0) {
            s = run_exists_locked(st, id);
            if (s == STORE_OK) s = STORE_CONFLICT;
        }
        s = db_finish(st, s);
    }
    db_unlock(st);
    return s;
}

int store_runs_interrupt_running(store *st) {
    if (st->pg) return store_pg_runs_interrupt_running(st);
    db_lock(st);
    int n = -1;
    sqlite3_stmt *q =
        db_prepare(st, "UPDATE runs SET status = 'interrupted', finished_at = ?, "
                       "error = 'the service stopped while the run was training' WHERE status = 'running' "
                       "AND source = 'attnlab'");
    if (q) sqlite3_bind_double(q, 1, db_now());
    if (db_exec(st, q, "interrupt runs") == STORE_OK) n = sqlite3_changes(st->db);
    db_unlock(st);
    return n;
}

store_status store_runs_queued(store *st, long long **ids, int *n) {
    if (st->pg) return store_pg_runs_queued(st, ids, n);
    *ids = NULL;
    *n = 0;
    long long *got = NULL;
    int count = 0, cap = 0;
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, "SELECT id FROM runs WHERE status = 'queued' ORDER BY id");
    store_status s = q ? STORE_OK : STORE_ERROR;
    int rc = SQLITE_DONE;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            long long *grown = realloc(got, (size_t)cap * sizeof *got);
            if (!grown) {
                s = db_fail("queued runs: out of memory");
                break;
            }
            got = grown;
        }
        got[count++] = sqlite3_column_int64(q, 0);
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "queued runs");
    sqlite3_finalize(q);
    db_unlock(st);
    if (s != STORE_OK) {
        free(got);
        return s;
    }
    *ids = got;
    *n = count;
    return STORE_OK;
}

store_status store_run_counts(store *st, json_t **out) {
    if (st->pg) return store_pg_run_counts(st, out);
    *out = NULL;
    static const char *const statuses[] = {"queued", "running", "succeeded", "failed", "cancelled", "interrupted"};
    json_t *counts = json_object();
    store_status s = counts ? STORE_OK : db_fail("run counts: out of memory");
    for (size_t i = 0; s == STORE_OK && i < 6; i++)
        if (json_object_set_new(counts, statuses[i], json_integer(0)) < 0) s = db_fail("run counts: out of memory");
    db_lock(st);
    sqlite3_stmt *q = s == STORE_OK ? db_prepare(st, "SELECT status, count(*) FROM runs GROUP BY status") : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    int rc = SQLITE_DONE;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW)
        if (json_object_set_new(counts, (const char *)sqlite3_column_text(q, 0),
                                json_integer(sqlite3_column_int64(q, 1))) < 0)
            s = db_fail("run counts: out of memory");
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "run counts");
    sqlite3_finalize(q);
    db_unlock(st);
    if (s != STORE_OK) {
        json_decref(counts);
        return s;
    }
    *out = counts;
    return STORE_OK;
}
