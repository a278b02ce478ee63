#include "store.h"

#include <pthread.h>
#include <stdarg.h>
#include <time.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_migrations.h"

struct store {
    sqlite3 *db;
    pthread_mutex_t lock;
};

static _Thread_local char last_error[256];
const char *store_last_error(void) { return last_error; }

/* Records SQLite's message for the failing call and returns STORE_ERROR. Call with the lock held. */
static store_status db_error(store *st, const char *what) {
    snprintf(last_error, sizeof last_error, "%s: %s", what, sqlite3_errmsg(st->db));
    log_error("store: %s", last_error);
    return STORE_ERROR;
}

static sqlite3_stmt *prepare(store *st, const char *sql) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK) {
        db_error(st, "prepare");
        return NULL;
    }
    return q;
}

static void bind_text(sqlite3_stmt *q, int i, const char *s) {
    if (s)
        sqlite3_bind_text(q, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(q, i);
}

static json_t *column_json_text(sqlite3_stmt *q, int col) {
    const unsigned char *t = sqlite3_column_text(q, col);
    return t ? json_string((const char *)t) : json_null();
}

static json_t *column_json_real(sqlite3_stmt *q, int col) {
    return sqlite3_column_type(q, col) == SQLITE_NULL ? json_null() : json_real(sqlite3_column_double(q, col));
}

/* Runs a statement that returns no rows. */
static store_status exec_stmt(store *st, sqlite3_stmt *q, const char *what) {
    int rc = sqlite3_step(q);
    store_status s = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? STORE_OK : db_error(st, what);
    sqlite3_finalize(q);
    return s;
}

int store_schema_version_supported(void) { return store_migration_count; }

static store_status fail(char *err, size_t errlen, sqlite3 *db, const char *what) {
    snprintf(err, errlen, "%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
    return STORE_ERROR;
}

static int read_user_version(sqlite3 *db) {
    sqlite3_stmt *q;
    int v = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK) return -1;
    if (sqlite3_step(q) == SQLITE_ROW) v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return v;
}

/* Each migration and its version bump commit together, so a crash leaves a whole version. */
static store_status migrate(sqlite3 *db, char *err, size_t errlen) {
    int version = read_user_version(db);
    if (version < 0) return fail(err, errlen, db, "reading the schema version");
    if (version > store_migration_count) {
        snprintf(err, errlen,
                 "the database is at schema version %d but this attnlabd knows only up to %d; "
                 "use a newer attnlabd or another --data-dir",
                 version, store_migration_count);
        return STORE_TOO_NEW;
    }
    for (int v = version; v < store_migration_count; v++) {
        char *msg = NULL;
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, store_migrations[v].sql, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, bump, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(err, errlen, "migration %s failed: %s", store_migrations[v].name, msg ? msg : "?");
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return STORE_ERROR;
        }
        log_info("store: applied migration %s", store_migrations[v].name);
    }
    return STORE_OK;
}

store_status store_open(store **out, const char *path, char *err, size_t errlen) {
    *out = NULL;
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        store_status s = fail(err, errlen, db, path);
        sqlite3_close(db);
        return s;
    }
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    /* synchronous=NORMAL in WAL keeps the database consistent on a crash; at most the last
     * transactions before a power loss are lost, which the metrics batching accepts. */
    if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", NULL, NULL,
                     &msg) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(db);
        return STORE_ERROR;
    }
    store_status s = migrate(db, err, errlen);
    if (s != STORE_OK) {
        sqlite3_close(db);
        return s;
    }
    store *st = calloc(1, sizeof *st);
    if (!st) {
        sqlite3_close(db);
        snprintf(err, errlen, "out of memory");
        return STORE_ERROR;
    }
    st->db = db;
    pthread_mutex_init(&st->lock, NULL);
    *out = st;
    return STORE_OK;
}

void store_close(store *st) {
    if (!st) return;
    if (sqlite3_close(st->db) != SQLITE_OK) log_warn("store: close: %s", sqlite3_errmsg(st->db));
    pthread_mutex_destroy(&st->lock);
    free(st);
}

int store_schema_version(store *st) {
    pthread_mutex_lock(&st->lock);
    int v = read_user_version(st->db);
    pthread_mutex_unlock(&st->lock);
    return v;
}

store_status store_ping(store *st) {
    pthread_mutex_lock(&st->lock);
    int v = read_user_version(st->db);
    pthread_mutex_unlock(&st->lock);
    return v == store_migration_count ? STORE_OK : STORE_ERROR;
}

/* The next id of a table from its counter (see migration 0004); call inside a transaction. */
static long long next_id(store *st, const char *table) {
    sqlite3_stmt *q = prepare(st, "UPDATE id_counters SET last = last + 1 WHERE name = ? RETURNING last");
    if (!q) return -1;
    bind_text(q, 1, table);
    long long id = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
    if (id < 0) db_error(st, "next id");
    sqlite3_finalize(q);
    return id;
}

/* ==== runs ================================================================================= */

#define RUN_COLUMNS                                                                                  \
    "r.id, r.name, r.experiment_id, r.variant, r.config, r.seed, r.status, r.step, r.total_steps, "  \
    "r.note, r.error, r.created_at, r.started_at, r.finished_at, r.corpus, r.checkpoint_step, "       \
    "(SELECT json_group_array(tag) FROM (SELECT tag FROM run_tags t WHERE t.run_id = r.id ORDER BY tag))"

static json_t *run_from_row(sqlite3_stmt *q) {
    json_t *config = json_loads((const char *)sqlite3_column_text(q, 4), 0, NULL);
    json_t *tags = json_loads((const char *)sqlite3_column_text(q, 16), 0, NULL);
    json_t *r = json_object();
    if (!r) return NULL;
    json_object_set_new(r, "id", json_integer(sqlite3_column_int64(q, 0)));
    json_object_set_new(r, "name", column_json_text(q, 1));
    json_object_set_new(r, "experiment_id", sqlite3_column_type(q, 2) == SQLITE_NULL
                                                ? json_null()
                                                : json_integer(sqlite3_column_int64(q, 2)));
    json_object_set_new(r, "variant", column_json_text(q, 3));
    json_object_set_new(r, "config", config ? config : json_object());
    json_object_set_new(r, "seed", json_integer(sqlite3_column_int64(q, 5)));
    json_object_set_new(r, "status", column_json_text(q, 6));
    json_object_set_new(r, "step", json_integer(sqlite3_column_int(q, 7)));
    json_object_set_new(r, "total_steps", json_integer(sqlite3_column_int(q, 8)));
    json_object_set_new(r, "note", column_json_text(q, 9));
    json_object_set_new(r, "error", column_json_text(q, 10));
    json_object_set_new(r, "created_at", column_json_real(q, 11));
    json_object_set_new(r, "started_at", column_json_real(q, 12));
    json_object_set_new(r, "finished_at", column_json_real(q, 13));
    json_object_set_new(r, "corpus", column_json_text(q, 14));
    json_object_set_new(r, "checkpoint_step", json_integer(sqlite3_column_int(q, 15)));
    json_object_set_new(r, "tags", tags ? tags : json_array());
    return r;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static store_status put_tags(store *st, long long id, json_t *tags) {
    sqlite3_stmt *del = prepare(st, "DELETE FROM run_tags WHERE run_id = ?");
    if (!del) return STORE_ERROR;
    sqlite3_bind_int64(del, 1, id);
    if (exec_stmt(st, del, "clear tags") != STORE_OK) return STORE_ERROR;
    size_t i;
    json_t *t;
    json_array_foreach(tags, i, t) {
        sqlite3_stmt *ins = prepare(st, "INSERT OR IGNORE INTO run_tags (run_id, tag) VALUES (?, ?)");
        if (!ins) return STORE_ERROR;
        sqlite3_bind_int64(ins, 1, id);
        bind_text(ins, 2, json_string_value(t));
        if (exec_stmt(st, ins, "add tag") != STORE_OK) return STORE_ERROR;
    }
    return STORE_OK;
}

static store_status begin(store *st) {
    return sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK ? STORE_OK : db_error(st, "begin");
}

static store_status finish(store *st, store_status s) {
    if (s == STORE_OK) {
        if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) s = db_error(st, "commit");
    }
    if (s != STORE_OK) sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return s;
}

static store_status run_insert_locked(store *st, const store_new_run *run, long long *id_out) {
    long long id = next_id(st, "runs");
    if (id < 0) return STORE_ERROR;
    sqlite3_stmt *q = prepare(st,
                              "INSERT INTO runs (name, experiment_id, variant, config, seed, status, total_steps, "
                              "note, created_at, corpus, id) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)");
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 10, id);
    bind_text(q, 1, run->name ? run->name : "");
    if (run->experiment_id)
        sqlite3_bind_int64(q, 2, run->experiment_id);
    else
        sqlite3_bind_null(q, 2);
    bind_text(q, 3, run->variant ? run->variant : "");
    bind_text(q, 4, run->config_json);
    sqlite3_bind_int64(q, 5, run->seed);
    sqlite3_bind_int(q, 6, run->total_steps);
    bind_text(q, 7, run->note ? run->note : "");
    sqlite3_bind_double(q, 8, now_s());
    bind_text(q, 9, run->corpus ? run->corpus : "");
    if (exec_stmt(st, q, "insert run") != STORE_OK) return STORE_ERROR;
    if (run->tags && put_tags(st, id, run->tags) != STORE_OK) return STORE_ERROR;
    *id_out = id;
    return STORE_OK;
}

store_status store_run_create(store *st, const store_new_run *run, long long *id_out) {
    pthread_mutex_lock(&st->lock);
    store_status s = begin(st);
    if (s == STORE_OK) s = finish(st, run_insert_locked(st, run, id_out));
    pthread_mutex_unlock(&st->lock);
    return s;
}

static store_status run_get_locked(store *st, long long id, json_t **out) {
    sqlite3_stmt *q = prepare(st, "SELECT " RUN_COLUMNS " FROM runs r WHERE r.id = ?");
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, id);
    int rc = sqlite3_step(q);
    store_status s = STORE_OK;
    if (rc == SQLITE_ROW) {
        *out = run_from_row(q);
        if (!*out) s = STORE_ERROR;
    } else if (rc == SQLITE_DONE) {
        s = STORE_NOT_FOUND;
    } else {
        s = db_error(st, "get run");
    }
    sqlite3_finalize(q);
    return s;
}

store_status store_run_get(store *st, long long id, json_t **out) {
    pthread_mutex_lock(&st->lock);
    store_status s = run_get_locked(st, id, out);
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_run_list(store *st, const store_run_filter *f, json_t **runs, long long *total) {
    /* The ORDER BY column comes from a fixed list, never from the request text. */
    static const struct { const char *name, *sql; } sorts[] = {
        {"id", "r.id ASC"}, {"-id", "r.id DESC"}, {"created_at", "r.created_at ASC, r.id ASC"},
        {"-created_at", "r.created_at DESC, r.id DESC"}, {"name", "r.name ASC, r.id ASC"},
        {"-name", "r.name DESC, r.id DESC"}, {"status", "r.status ASC, r.id ASC"},
        {"-status", "r.status DESC, r.id DESC"},
    };
    const char *order = "r.id DESC";
    for (size_t i = 0; f->sort && i < sizeof sorts / sizeof sorts[0]; i++)
        if (!strcmp(f->sort, sorts[i].name)) order = sorts[i].sql;
    static const char where[] =
        " WHERE (?1 IS NULL OR r.status = ?1) AND (?2 IS NULL OR r.variant = ?2) "
        "AND (?3 = 0 OR r.experiment_id = ?3) "
        "AND (?4 IS NULL OR EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.tag = ?4))";
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT " RUN_COLUMNS " FROM runs r %s ORDER BY %s LIMIT ?5 OFFSET ?6", where, order);
    char count_sql[512];
    snprintf(count_sql, sizeof count_sql, "SELECT count(*) FROM runs r %s", where);

    pthread_mutex_lock(&st->lock);
    store_status s = STORE_OK;
    *runs = json_array();
    sqlite3_stmt *q = prepare(st, sql), *c = prepare(st, count_sql);
    for (int k = 0; k < 2 && q && c; k++) {
        sqlite3_stmt *x = k ? c : q;
        bind_text(x, 1, f->status);
        bind_text(x, 2, f->variant);
        sqlite3_bind_int64(x, 3, f->experiment_id);
        bind_text(x, 4, f->tag);
    }
    if (!q || !c || !*runs) {
        s = STORE_ERROR;
    } else {
        sqlite3_bind_int(q, 5, f->limit);
        sqlite3_bind_int(q, 6, f->offset);
        int rc;
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) json_array_append_new(*runs, run_from_row(q));
        if (rc != SQLITE_DONE) s = db_error(st, "list runs");
        if (s == STORE_OK && sqlite3_step(c) == SQLITE_ROW) *total = sqlite3_column_int64(c, 0);
    }
    sqlite3_finalize(q);
    sqlite3_finalize(c);
    pthread_mutex_unlock(&st->lock);
    if (s != STORE_OK) {
        json_decref(*runs);
        *runs = NULL;
    }
    return s;
}

static int is_final_status(const char *s) {
    return !strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled") || !strcmp(s, "interrupted");
}

store_status store_run_transition(store *st, long long id, const char *const *from, const char *to,
                                  const char *error) {
    char in[256] = "";
    int n_from = 0;
    for (; from[n_from]; n_from++) strncat(in, n_from ? ",?" : "?", sizeof in - strlen(in) - 1);
    char sql[640];
    snprintf(sql, sizeof sql,
             "UPDATE runs SET status = ?1, error = ?2, "
             "started_at = CASE WHEN ?1 = 'running' THEN ?3 ELSE started_at END, "
             "finished_at = CASE WHEN ?4 THEN ?3 WHEN ?1 IN ('queued','running') THEN NULL ELSE finished_at END "
             "WHERE id = ?5 AND status IN (%s)",
             in);
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_OK;
    sqlite3_stmt *q = prepare(st, sql);
    if (!q) {
        s = STORE_ERROR;
    } else {
        bind_text(q, 1, to);
        bind_text(q, 2, error);
        sqlite3_bind_double(q, 3, now_s());
        sqlite3_bind_int(q, 4, is_final_status(to));
        sqlite3_bind_int64(q, 5, id);
        for (int i = 0; i < n_from; i++) bind_text(q, 6 + i, from[i]);
        s = exec_stmt(st, q, "change run status");
        if (s == STORE_OK && sqlite3_changes(st->db) == 0) {
            json_t *r = NULL;
            s = run_get_locked(st, id, &r) == STORE_NOT_FOUND ? STORE_NOT_FOUND : STORE_CONFLICT;
            json_decref(r);
        }
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_run_progress(store *st, long long id, int step, int checkpoint_step) {
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "UPDATE runs SET step = ?, checkpoint_step = max(checkpoint_step, ?) WHERE id = ?");
    if (q) {
        sqlite3_bind_int(q, 1, step);
        sqlite3_bind_int(q, 2, checkpoint_step);
        sqlite3_bind_int64(q, 3, id);
        s = exec_stmt(st, q, "run progress");
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_run_update(store *st, long long id, const char *name, const char *note, json_t *tags) {
    pthread_mutex_lock(&st->lock);
    store_status s = begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q = prepare(st, "UPDATE runs SET name = coalesce(?, name), note = coalesce(?, note) WHERE id = ?");
        if (!q) {
            s = STORE_ERROR;
        } else {
            bind_text(q, 1, name);
            bind_text(q, 2, note);
            sqlite3_bind_int64(q, 3, id);
            s = exec_stmt(st, q, "update run");
            if (s == STORE_OK && sqlite3_changes(st->db) == 0) s = STORE_NOT_FOUND;
        }
        if (s == STORE_OK && tags) s = put_tags(st, id, tags);
        s = finish(st, s);
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_run_delete(store *st, long long id) {
    pthread_mutex_lock(&st->lock);
    store_status s = begin(st);
    if (s == STORE_OK) {
        sqlite3_stmt *q = prepare(st, "DELETE FROM runs WHERE id = ? AND status NOT IN ('queued', 'running')");
        if (!q) {
            s = STORE_ERROR;
        } else {
            sqlite3_bind_int64(q, 1, id);
            s = exec_stmt(st, q, "delete run");
            if (s == STORE_OK && sqlite3_changes(st->db) == 0) {
                json_t *r = NULL;
                s = run_get_locked(st, id, &r) == STORE_NOT_FOUND ? STORE_NOT_FOUND : STORE_CONFLICT;
                json_decref(r);
            }
        }
        s = finish(st, s);
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}

int store_runs_interrupt_running(store *st) {
    pthread_mutex_lock(&st->lock);
    int n = -1;
    sqlite3_stmt *q = prepare(st, "UPDATE runs SET status = 'interrupted', finished_at = ?, "
                                  "error = 'the service stopped while the run was training' WHERE status = 'running'");
    if (q) {
        sqlite3_bind_double(q, 1, now_s());
        if (exec_stmt(st, q, "interrupt runs") == STORE_OK) n = sqlite3_changes(st->db);
    }
    pthread_mutex_unlock(&st->lock);
    return n;
}

store_status store_runs_queued(store *st, long long **ids, int *n) {
    *ids = NULL;
    *n = 0;
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_OK;
    sqlite3_stmt *q = prepare(st, "SELECT id FROM runs WHERE status = 'queued' ORDER BY id");
    if (!q) s = STORE_ERROR;
    int rc, cap = 0;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            long long *grown = realloc(*ids, (size_t)cap * sizeof **ids);
            if (!grown) { s = STORE_ERROR; break; }
            *ids = grown;
        }
        (*ids)[(*n)++] = sqlite3_column_int64(q, 0);
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_run_counts(store *st, json_t **out) {
    static const char *const statuses[] = {"queued", "running", "succeeded", "failed", "cancelled", "interrupted"};
    *out = json_object();
    for (size_t i = 0; i < 6; i++) json_object_set_new(*out, statuses[i], json_integer(0));
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_OK;
    sqlite3_stmt *q = prepare(st, "SELECT status, count(*) FROM runs GROUP BY status");
    if (!q) s = STORE_ERROR;
    while (s == STORE_OK && sqlite3_step(q) == SQLITE_ROW)
        json_object_set_new(*out, (const char *)sqlite3_column_text(q, 0), json_integer(sqlite3_column_int64(q, 1)));
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

/* ==== metrics ============================================================================== */

store_status store_metrics_insert(store *st, const store_metric *points, size_t n) {
    if (n == 0) return STORE_OK;
    pthread_mutex_lock(&st->lock);
    store_status s = begin(st);
    sqlite3_stmt *q = NULL;
    if (s == STORE_OK) {
        q = prepare(st, "INSERT OR REPLACE INTO metrics (run_id, key, step, value, wall_time) VALUES (?, ?, ?, ?, ?)");
        if (!q) s = STORE_ERROR;
    }
    for (size_t i = 0; s == STORE_OK && i < n; i++) {
        sqlite3_bind_int64(q, 1, points[i].run_id);
        sqlite3_bind_text(q, 2, points[i].key, -1, SQLITE_STATIC);
        sqlite3_bind_int(q, 3, points[i].step);
        sqlite3_bind_double(q, 4, points[i].value);
        sqlite3_bind_double(q, 5, points[i].wall_time);
        int rc = sqlite3_step(q);
        /* A point of a run deleted meanwhile fails its foreign key: skip it, keep the rest. */
        if (rc != SQLITE_DONE && sqlite3_extended_errcode(st->db) != SQLITE_CONSTRAINT_FOREIGNKEY)
            s = db_error(st, "insert metric");
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    s = finish(st, s);
    pthread_mutex_unlock(&st->lock);
    return s;
}

/* A key matches a comma-separated list of names and prefixes ("tau.*"). */
static int key_matches(const char *key, const char *keys) {
    if (!keys || !*keys) return 1;
    const char *p = keys;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && p[len - 1] == '*') {
            if (!strncmp(key, p, len - 1)) return 1;
        } else if (len == strlen(key) && !strncmp(key, p, len)) {
            return 1;
        }
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

typedef struct {
    int *steps;
    double *values, *walls;
    size_t n, cap;
} series_buf;

static int series_push(series_buf *b, int step, double v, double w) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        int *s = realloc(b->steps, cap * sizeof *s);
        if (!s) return -1;
        b->steps = s;
        double *v2 = realloc(b->values, cap * sizeof *v2);
        if (!v2) return -1;
        b->values = v2;
        double *w2 = realloc(b->walls, cap * sizeof *w2);
        if (!w2) return -1;
        b->walls = w2;
        b->cap = cap;
    }
    b->steps[b->n] = step;
    b->values[b->n] = v;
    b->walls[b->n] = w;
    b->n++;
    return 0;
}

/* Emits the series, or with max_points > 0 and a longer series, each bucket's min and max points
 * (in step order, once if they coincide), so spikes survive any zoom level. */
static json_t *series_json(const series_buf *b, int max_points) {
    json_t *steps = json_array(), *values = json_array(), *walls = json_array();
    size_t n = b->n;
    if (max_points <= 0 || n <= (size_t)max_points) {
        for (size_t i = 0; i < n; i++) {
            json_array_append_new(steps, json_integer(b->steps[i]));
            json_array_append_new(values, json_real(b->values[i]));
            json_array_append_new(walls, json_real(b->walls[i]));
        }
    } else {
        size_t buckets = (size_t)max_points / 2;
        if (buckets < 1) buckets = 1;
        for (size_t k = 0; k < buckets; k++) {
            size_t lo = k * n / buckets, hi = (k + 1) * n / buckets;
            if (lo >= hi) continue;
            size_t imin = lo, imax = lo;
            for (size_t i = lo; i < hi; i++) {
                if (b->values[i] < b->values[imin]) imin = i;
                if (b->values[i] > b->values[imax]) imax = i;
            }
            size_t first = imin < imax ? imin : imax, second = imin < imax ? imax : imin;
            size_t pick[2] = {first, second};
            for (int j = 0; j < (first == second ? 1 : 2); j++) {
                json_array_append_new(steps, json_integer(b->steps[pick[j]]));
                json_array_append_new(values, json_real(b->values[pick[j]]));
                json_array_append_new(walls, json_real(b->walls[pick[j]]));
            }
        }
    }
    json_t *o = json_object();
    json_object_set_new(o, "steps", steps);
    json_object_set_new(o, "values", values);
    json_object_set_new(o, "wall_times", walls);
    json_object_set_new(o, "count", json_integer((json_int_t)n));
    return o;
}

store_status store_metrics_series(store *st, long long run_id, const char *keys, int since_step, int max_points,
                                  json_t **out) {
    *out = json_object();
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_OK;
    sqlite3_stmt *q = prepare(st, "SELECT key, step, value, wall_time FROM metrics WHERE run_id = ? AND step >= ? "
                                  "ORDER BY key, step");
    if (!q) s = STORE_ERROR;
    series_buf b = {0};
    char current[64] = "";
    int rc = SQLITE_DONE;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int(q, 2, since_step);
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            const char *key = (const char *)sqlite3_column_text(q, 0);
            if (!key_matches(key, keys)) continue;
            if (strcmp(key, current) != 0) {
                if (current[0]) json_object_set_new(*out, current, series_json(&b, max_points));
                b.n = 0;
                snprintf(current, sizeof current, "%s", key);
            }
            if (series_push(&b, sqlite3_column_int(q, 1), sqlite3_column_double(q, 2), sqlite3_column_double(q, 3)) < 0) {
                s = STORE_ERROR;
                break;
            }
        }
        if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "read series");
        if (s == STORE_OK && current[0]) json_object_set_new(*out, current, series_json(&b, max_points));
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    free(b.steps);
    free(b.values);
    free(b.walls);
    if (s != STORE_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return s;
}

store_status store_metrics_summary(store *st, long long run_id, json_t **out) {
    *out = json_object();
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_OK;
    /* min() with a bare column picks the row of the minimum (SQLite's documented bare-column rule). */
    sqlite3_stmt *q = prepare(st,
        "SELECT m.key, min(m.value), m.step, max(m.value), avg(m.value), count(*), "
        "  (SELECT value FROM metrics l WHERE l.run_id = m.run_id AND l.key = m.key ORDER BY step DESC LIMIT 1), "
        "  max(m.step) "
        "FROM metrics m WHERE m.run_id = ? GROUP BY m.key ORDER BY m.key");
    if (!q) s = STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, run_id);
        int rc;
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:i, s:I, s:i}", "last", sqlite3_column_double(q, 6), "min",
                                  sqlite3_column_double(q, 1), "max", sqlite3_column_double(q, 3), "mean",
                                  sqlite3_column_double(q, 4), "step_of_min", sqlite3_column_int(q, 2), "count",
                                  (json_int_t)sqlite3_column_int64(q, 5), "last_step", sqlite3_column_int(q, 7));
            json_object_set_new(*out, (const char *)sqlite3_column_text(q, 0), o);
        }
        if (rc != SQLITE_DONE) s = db_error(st, "summary");
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    if (s != STORE_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return s;
}

store_status store_run_brief(store *st, long long run_id, json_t **out) {
    *out = json_object();
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_OK;
    static const char *const keys[] = {"loss", "val_loss"};
    for (int k = 0; k < 2 && s == STORE_OK; k++) {
        /* Both read one key's rows through the primary key index. */
        sqlite3_stmt *q = prepare(st, "SELECT min(value), count(*), (SELECT value FROM metrics WHERE run_id = ?1 AND "
                                      "key = ?2 ORDER BY step DESC LIMIT 1) FROM metrics WHERE run_id = ?1 AND key = ?2");
        if (!q) { s = STORE_ERROR; break; }
        sqlite3_bind_int64(q, 1, run_id);
        bind_text(q, 2, keys[k]);
        if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int64(q, 1) > 0)
            json_object_set_new(*out, keys[k], json_pack("{s:f, s:f}", "last", sqlite3_column_double(q, 2), "min",
                                                         sqlite3_column_double(q, 0)));
        sqlite3_finalize(q);
    }
    sqlite3_stmt *q = s == STORE_OK ? prepare(st,
        "SELECT min(value), max(value), count(*) FROM metrics WHERE run_id = ?1 AND key >= 'tau.' AND key < 'tau/' "
        "AND step = (SELECT max(step) FROM metrics WHERE run_id = ?1 AND key = 'tau.0.0')") : NULL;
    if (q) {
        sqlite3_bind_int64(q, 1, run_id);
        if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int64(q, 2) > 0)
            json_object_set_new(*out, "tau", json_pack("{s:f, s:f}", "min", sqlite3_column_double(q, 0), "max",
                                                       sqlite3_column_double(q, 1)));
        sqlite3_finalize(q);
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}

typedef struct {
    char *data;
    size_t len, cap;
    int failed;
} text_buf;

static void text_add(text_buf *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1) cap *= 2;
        char *g = realloc(t->data, cap);
        if (!g) { t->failed = 1; return; }
        t->data = g;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = 0;
}

static void text_printf(text_buf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(text_buf *t, const char *fmt, ...) {
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) text_add(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

store_status store_metrics_csv(store *st, long long run_id, char **csv, size_t *len) {
    *csv = NULL;
    *len = 0;
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_OK;
    text_buf t = {0};
    /* Keys become columns in sorted order; each step a row. */
    char **keys = NULL;
    int n_keys = 0;
    sqlite3_stmt *k = prepare(st, "SELECT DISTINCT key FROM metrics WHERE run_id = ? ORDER BY key");
    if (!k) s = STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(k, 1, run_id);
        while (sqlite3_step(k) == SQLITE_ROW) {
            char **g = realloc(keys, (size_t)(n_keys + 1) * sizeof *keys);
            if (!g) { s = STORE_ERROR; break; }
            keys = g;
            keys[n_keys] = strdup((const char *)sqlite3_column_text(k, 0));
            if (!keys[n_keys]) { s = STORE_ERROR; break; }
            n_keys++;
        }
    }
    sqlite3_finalize(k);
    text_add(&t, "step,wall_time", 14);
    for (int i = 0; i < n_keys; i++) {
        text_add(&t, ",", 1);
        text_add(&t, keys[i], strlen(keys[i]));
    }
    text_add(&t, "\n", 1);
    sqlite3_stmt *q = s == STORE_OK ? prepare(st, "SELECT step, key, value, wall_time FROM metrics WHERE run_id = ? "
                                                  "ORDER BY step, key")
                                    : NULL;
    if (s == STORE_OK && !q) s = STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_bind_int64(q, 1, run_id);
        double *row = calloc((size_t)n_keys + 1, sizeof *row);
        char *have = calloc((size_t)n_keys + 1, 1);
        int cur_step = -1;
        double wall = 0;
        int rc;
        if (!row || !have) s = STORE_ERROR;
        for (;;) {
            rc = s == STORE_OK ? sqlite3_step(q) : SQLITE_DONE;
            int step = rc == SQLITE_ROW ? sqlite3_column_int(q, 0) : -2;
            if (cur_step >= 0 && step != cur_step) {
                text_printf(&t, "%d,%.3f", cur_step, wall);
                for (int i = 0; i < n_keys; i++) {
                    if (have[i])
                        text_printf(&t, ",%.9g", row[i]);
                    else
                        text_add(&t, ",", 1);
                }
                text_add(&t, "\n", 1);
                memset(have, 0, (size_t)n_keys);
            }
            if (rc != SQLITE_ROW) break;
            cur_step = step;
            const char *key = (const char *)sqlite3_column_text(q, 1);
            for (int i = 0; i < n_keys; i++)
                if (!strcmp(keys[i], key)) {
                    row[i] = sqlite3_column_double(q, 2);
                    have[i] = 1;
                    break;
                }
            wall = sqlite3_column_double(q, 3);
        }
        if (rc != SQLITE_DONE) s = db_error(st, "csv");
        free(row);
        free(have);
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    for (int i = 0; i < n_keys; i++) free(keys[i]);
    free(keys);
    if (t.failed) s = STORE_ERROR;
    if (s != STORE_OK) {
        free(t.data);
        return s;
    }
    *csv = t.data;
    *len = t.len;
    return STORE_OK;
}

/* ==== experiments ========================================================================== */

store_status store_experiment_create(store *st, const char *name, const char *preset, const char *base_json,
                                     const char *variants_json, long long *id_out) {
    pthread_mutex_lock(&st->lock);
    store_status s = begin(st);
    long long id = s == STORE_OK ? next_id(st, "experiments") : -1;
    sqlite3_stmt *q = id > 0 ? prepare(st, "INSERT INTO experiments (name, preset, base_config, variants, created_at, id) "
                                           "VALUES (?, ?, ?, ?, ?, ?)")
                             : NULL;
    if (!q) s = STORE_ERROR;
    if (q) {
        sqlite3_bind_int64(q, 6, id);
        bind_text(q, 1, name ? name : "");
        bind_text(q, 2, preset);
        bind_text(q, 3, base_json);
        bind_text(q, 4, variants_json);
        sqlite3_bind_double(q, 5, now_s());
        s = exec_stmt(st, q, "insert experiment");
        if (s == STORE_OK) *id_out = id;
    }
    s = finish(st, s);
    pthread_mutex_unlock(&st->lock);
    return s;
}

static json_t *experiment_from_row(sqlite3_stmt *q) {
    json_t *base = json_loads((const char *)sqlite3_column_text(q, 3), 0, NULL);
    json_t *variants = json_loads((const char *)sqlite3_column_text(q, 4), 0, NULL);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(sqlite3_column_int64(q, 0)));
    json_object_set_new(o, "name", column_json_text(q, 1));
    json_object_set_new(o, "preset", column_json_text(q, 2));
    json_object_set_new(o, "base", base ? base : json_object());
    json_object_set_new(o, "variants", variants ? variants : json_array());
    json_object_set_new(o, "created_at", column_json_real(q, 5));
    json_object_set_new(o, "run_count", json_integer(sqlite3_column_int64(q, 6)));
    return o;
}

#define EXPERIMENT_COLUMNS \
    "e.id, e.name, e.preset, e.base_config, e.variants, e.created_at, " \
    "(SELECT count(*) FROM runs r WHERE r.experiment_id = e.id)"

store_status store_experiment_get(store *st, long long id, json_t **out) {
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "SELECT " EXPERIMENT_COLUMNS " FROM experiments e WHERE e.id = ?");
    if (q) {
        sqlite3_bind_int64(q, 1, id);
        int rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            *out = experiment_from_row(q);
            s = STORE_OK;
        } else {
            s = rc == SQLITE_DONE ? STORE_NOT_FOUND : db_error(st, "get experiment");
        }
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_experiment_list(store *st, int limit, int offset, json_t **out, long long *total) {
    *out = json_array();
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "SELECT " EXPERIMENT_COLUMNS " FROM experiments e ORDER BY e.id DESC LIMIT ? OFFSET ?");
    sqlite3_stmt *c = prepare(st, "SELECT count(*) FROM experiments");
    if (q && c) {
        sqlite3_bind_int(q, 1, limit);
        sqlite3_bind_int(q, 2, offset);
        int rc;
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) json_array_append_new(*out, experiment_from_row(q));
        s = rc == SQLITE_DONE ? STORE_OK : db_error(st, "list experiments");
        if (s == STORE_OK && sqlite3_step(c) == SQLITE_ROW) *total = sqlite3_column_int64(c, 0);
    }
    sqlite3_finalize(q);
    sqlite3_finalize(c);
    pthread_mutex_unlock(&st->lock);
    return s;
}

/* ==== corpora ============================================================================== */

static store_status corpus_write(store *st, const store_corpus *c, const char *verb) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "%s INTO corpora (name, source, tokenizer, documents, bytes, tokens, status, error, builtin, created_at) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             verb);
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, sql);
    if (q) {
        bind_text(q, 1, c->name);
        bind_text(q, 2, c->source ? c->source : "");
        bind_text(q, 3, c->tokenizer);
        sqlite3_bind_int64(q, 4, c->documents);
        sqlite3_bind_int64(q, 5, c->bytes);
        sqlite3_bind_int64(q, 6, c->tokens);
        bind_text(q, 7, c->status);
        bind_text(q, 8, c->error);
        sqlite3_bind_int(q, 9, c->builtin);
        sqlite3_bind_double(q, 10, now_s());
        int rc = sqlite3_step(q);
        if (rc == SQLITE_DONE)
            s = STORE_OK;
        else if (sqlite3_extended_errcode(st->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
            s = STORE_CONFLICT;
        else
            s = db_error(st, "write corpus");
        sqlite3_finalize(q);
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_corpus_put(store *st, const store_corpus *c) { return corpus_write(st, c, "INSERT OR REPLACE"); }
store_status store_corpus_create(store *st, const store_corpus *c) { return corpus_write(st, c, "INSERT"); }

#define CORPUS_COLUMNS \
    "name, source, tokenizer, documents, bytes, tokens, status, error, builtin, created_at, " \
    "(SELECT count(*) FROM runs r WHERE r.corpus = c.name)"

static json_t *corpus_from_row(sqlite3_stmt *q) {
    json_t *o = json_object();
    json_object_set_new(o, "name", column_json_text(q, 0));
    json_object_set_new(o, "source", column_json_text(q, 1));
    json_object_set_new(o, "tokenizer", column_json_text(q, 2));
    json_object_set_new(o, "documents", json_integer(sqlite3_column_int64(q, 3)));
    json_object_set_new(o, "bytes", json_integer(sqlite3_column_int64(q, 4)));
    json_object_set_new(o, "tokens", json_integer(sqlite3_column_int64(q, 5)));
    json_object_set_new(o, "status", column_json_text(q, 6));
    json_object_set_new(o, "error", column_json_text(q, 7));
    json_object_set_new(o, "builtin", json_boolean(sqlite3_column_int(q, 8)));
    json_object_set_new(o, "created_at", column_json_real(q, 9));
    json_object_set_new(o, "runs", json_integer(sqlite3_column_int64(q, 10)));
    return o;
}

store_status store_corpus_get(store *st, const char *name, json_t **out) {
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "SELECT " CORPUS_COLUMNS " FROM corpora c WHERE name = ?");
    if (q) {
        bind_text(q, 1, name);
        int rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            *out = corpus_from_row(q);
            s = STORE_OK;
        } else {
            s = rc == SQLITE_DONE ? STORE_NOT_FOUND : db_error(st, "get corpus");
        }
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_corpus_list(store *st, json_t **out) {
    *out = json_array();
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "SELECT " CORPUS_COLUMNS " FROM corpora c ORDER BY builtin DESC, name");
    if (q) {
        int rc;
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) json_array_append_new(*out, corpus_from_row(q));
        s = rc == SQLITE_DONE ? STORE_OK : db_error(st, "list corpora");
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_corpus_delete(store *st, const char *name) {
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "DELETE FROM corpora WHERE name = ?1 AND builtin = 0 "
                                  "AND NOT EXISTS (SELECT 1 FROM runs WHERE corpus = ?1)");
    if (q) {
        bind_text(q, 1, name);
        s = exec_stmt(st, q, "delete corpus");
        if (s == STORE_OK && sqlite3_changes(st->db) == 0) {
            sqlite3_stmt *e = prepare(st, "SELECT 1 FROM corpora WHERE name = ?");
            if (e) {
                bind_text(e, 1, name);
                s = sqlite3_step(e) == SQLITE_ROW ? STORE_CONFLICT : STORE_NOT_FOUND;
                sqlite3_finalize(e);
            }
        }
    }
    pthread_mutex_unlock(&st->lock);
    return s;
}

/* ==== probes =============================================================================== */

store_status store_probe_insert(store *st, const store_new_probe *p, long long *id_out) {
    json_t *rest = p->result ? json_deep_copy(p->result) : NULL;
    json_t *tables = rest ? json_incref(json_object_get(rest, "tables")) : NULL;
    if (rest) json_object_del(rest, "tables");
    char *rest_text = rest ? json_dumps(rest, JSON_COMPACT) : NULL;
    pthread_mutex_lock(&st->lock);
    store_status s = begin(st);
    long long id = s == STORE_OK ? next_id(st, "probes") : -1;
    if (id < 0) s = STORE_ERROR;
    if (s == STORE_OK) {
        sqlite3_stmt *q = prepare(st, "INSERT INTO probes (kind, params, seed, status, result, error, created_at, "
                                      "finished_at, run_id, cache_key, duration_ms, id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
        if (!q) {
            s = STORE_ERROR;
        } else {
            double now = now_s();
            bind_text(q, 1, p->kind);
            bind_text(q, 2, p->params_json);
            sqlite3_bind_int64(q, 3, p->seed);
            bind_text(q, 4, p->status);
            bind_text(q, 5, rest_text);
            bind_text(q, 6, p->error);
            sqlite3_bind_double(q, 7, now);
            sqlite3_bind_double(q, 8, now);
            if (p->run_id)
                sqlite3_bind_int64(q, 9, p->run_id);
            else
                sqlite3_bind_null(q, 9);
            bind_text(q, 10, p->cache_key);
            sqlite3_bind_double(q, 11, p->duration_ms);
            sqlite3_bind_int64(q, 12, id);
            s = exec_stmt(st, q, "insert probe");
        }
        size_t i;
        json_t *t;
        json_array_foreach(tables, i, t) {
            if (s != STORE_OK) break;
            char *cols = json_dumps(json_object_get(t, "columns"), JSON_COMPACT);
            char *rows = json_dumps(json_object_get(t, "rows"), JSON_COMPACT);
            sqlite3_stmt *tq = prepare(st, "INSERT INTO probe_tables (probe_id, idx, name, columns, rows) VALUES (?,?,?,?,?)");
            if (!tq || !cols || !rows) {
                s = STORE_ERROR;
            } else {
                sqlite3_bind_int64(tq, 1, id);
                sqlite3_bind_int(tq, 2, (int)i);
                bind_text(tq, 3, json_string_value(json_object_get(t, "name")));
                bind_text(tq, 4, cols);
                bind_text(tq, 5, rows);
                s = exec_stmt(st, tq, "insert probe table");
                tq = NULL;
            }
            sqlite3_finalize(tq);
            free(cols);
            free(rows);
        }
        s = finish(st, s);
        if (s == STORE_OK) *id_out = id;
    }
    pthread_mutex_unlock(&st->lock);
    free(rest_text);
    json_decref(rest);
    json_decref(tables);
    return s;
}

store_status store_probe_find(store *st, const char *kind, const char *cache_key, long long *id_out) {
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "SELECT id FROM probes WHERE kind = ? AND cache_key = ? AND status = 'succeeded' "
                                  "ORDER BY id DESC LIMIT 1");
    if (q) {
        bind_text(q, 1, kind);
        bind_text(q, 2, cache_key);
        int rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            *id_out = sqlite3_column_int64(q, 0);
            s = STORE_OK;
        } else {
            s = rc == SQLITE_DONE ? STORE_NOT_FOUND : db_error(st, "find probe");
        }
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

#define PROBE_COLUMNS "id, kind, params, run_id, status, error, created_at, duration_ms, result"

static json_t *probe_from_row(sqlite3_stmt *q) {
    json_t *params = json_loads((const char *)sqlite3_column_text(q, 2), 0, NULL);
    const unsigned char *rt = sqlite3_column_text(q, 8);
    json_t *result = rt ? json_loads((const char *)rt, 0, NULL) : NULL;
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(sqlite3_column_int64(q, 0)));
    json_object_set_new(o, "kind", column_json_text(q, 1));
    json_object_set_new(o, "params", params ? params : json_object());
    json_object_set_new(o, "run_id", sqlite3_column_type(q, 3) == SQLITE_NULL ? json_null()
                                                                              : json_integer(sqlite3_column_int64(q, 3)));
    json_object_set_new(o, "status", column_json_text(q, 4));
    json_object_set_new(o, "error", column_json_text(q, 5));
    json_object_set_new(o, "created_at", column_json_real(q, 6));
    json_object_set_new(o, "duration_ms", column_json_real(q, 7));
    json_object_set_new(o, "result", result ? result : json_null());
    return o;
}

/* Puts the probe's tables (with rows, or just their shape) back into its result. */
static store_status attach_tables(store *st, json_t *probe, int with_rows) {
    json_t *result = json_object_get(probe, "result");
    if (!json_is_object(result)) return STORE_OK;
    sqlite3_stmt *q = prepare(st, "SELECT name, columns, rows, json_array_length(rows) FROM probe_tables "
                                  "WHERE probe_id = ? ORDER BY idx");
    if (!q) return STORE_ERROR;
    sqlite3_bind_int64(q, 1, json_integer_value(json_object_get(probe, "id")));
    json_t *tables = json_array();
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        json_t *t = json_object();
        json_object_set_new(t, "name", column_json_text(q, 0));
        json_t *cols = json_loads((const char *)sqlite3_column_text(q, 1), 0, NULL);
        json_object_set_new(t, "columns", cols ? cols : json_array());
        if (with_rows) {
            json_t *rows = json_loads((const char *)sqlite3_column_text(q, 2), 0, NULL);
            json_object_set_new(t, "rows", rows ? rows : json_array());
        } else {
            json_object_set_new(t, "row_count", json_integer(sqlite3_column_int64(q, 3)));
        }
        json_array_append_new(tables, t);
    }
    sqlite3_finalize(q);
    json_object_set_new(result, "tables", tables);
    return rc == SQLITE_DONE ? STORE_OK : db_error(st, "probe tables");
}

store_status store_probe_get(store *st, long long id, json_t **out) {
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "SELECT " PROBE_COLUMNS " FROM probes WHERE id = ?");
    if (q) {
        sqlite3_bind_int64(q, 1, id);
        int rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            *out = probe_from_row(q);
            s = attach_tables(st, *out, 1);
        } else {
            s = rc == SQLITE_DONE ? STORE_NOT_FOUND : db_error(st, "get probe");
        }
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_probe_list(store *st, const char *kind, int limit, int offset, json_t **out, long long *total) {
    *out = json_array();
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "SELECT " PROBE_COLUMNS " FROM probes WHERE (?1 IS NULL OR kind = ?1) "
                                  "ORDER BY id DESC LIMIT ?2 OFFSET ?3");
    sqlite3_stmt *c = prepare(st, "SELECT count(*) FROM probes WHERE (?1 IS NULL OR kind = ?1)");
    if (q && c) {
        bind_text(q, 1, kind);
        bind_text(c, 1, kind);
        sqlite3_bind_int(q, 2, limit);
        sqlite3_bind_int(q, 3, offset);
        int rc;
        s = STORE_OK;
        while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            json_t *p = probe_from_row(q);
            s = attach_tables(st, p, 0);
            json_array_append_new(*out, p);
        }
        if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, "list probes");
        if (s == STORE_OK && sqlite3_step(c) == SQLITE_ROW) *total = sqlite3_column_int64(c, 0);
    }
    sqlite3_finalize(q);
    sqlite3_finalize(c);
    pthread_mutex_unlock(&st->lock);
    return s;
}

store_status store_probe_table(store *st, long long id, const char *name, json_t **out) {
    pthread_mutex_lock(&st->lock);
    store_status s = STORE_ERROR;
    sqlite3_stmt *q = prepare(st, "SELECT name, columns, rows FROM probe_tables WHERE probe_id = ? "
                                  "AND (?2 IS NULL OR name = ?2) ORDER BY idx LIMIT 1");
    if (q) {
        sqlite3_bind_int64(q, 1, id);
        bind_text(q, 2, name);
        int rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            json_t *cols = json_loads((const char *)sqlite3_column_text(q, 1), 0, NULL);
            json_t *rows = json_loads((const char *)sqlite3_column_text(q, 2), 0, NULL);
            *out = json_pack("{s:o, s:o, s:o}", "name", column_json_text(q, 0), "columns", cols ? cols : json_array(),
                             "rows", rows ? rows : json_array());
            s = STORE_OK;
        } else {
            s = rc == SQLITE_DONE ? STORE_NOT_FOUND : db_error(st, "probe table");
        }
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}
