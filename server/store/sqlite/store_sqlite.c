/* The SQLite backend of the store: the connection, its lock, the migrations and the statement
 * helpers the resource files share (store_impl.h). */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "store/sqlite/store_impl.h"

static int refuse_lost_file(void *ctx);
#include "store/postgres/store_pg.h"
#include "store/store_migrations.h"

static _Thread_local char last_error[256];
const char *store_last_error(void) { return last_error; }

store_status db_error(store *st, const char *what) {
    snprintf(last_error, sizeof last_error, "%s: %s", what, sqlite3_errmsg(st->db));
    log_error("store: %s", last_error);
    return STORE_ERROR;
}

store_status db_fail(const char *what) {
    snprintf(last_error, sizeof last_error, "%s", what);
    log_error("store: %s", last_error);
    return STORE_ERROR;
}

void db_lock(store *st) { pthread_mutex_lock(&st->lock); }
void db_unlock(store *st) { pthread_mutex_unlock(&st->lock); }

sqlite3_stmt *db_prepare(store *st, const char *sql) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK) {
        db_error(st, "prepare");
        sqlite3_finalize(q);
        return NULL;
    }
    return q;
}

void db_bind_text(sqlite3_stmt *q, int i, const char *s) {
    if (s)
        sqlite3_bind_text(q, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(q, i);
}

store_status db_exec(store *st, sqlite3_stmt *q, const char *what) {
    if (!q) return STORE_ERROR;
    int rc = sqlite3_step(q);
    store_status s = rc == SQLITE_DONE ? STORE_OK : db_error(st, what);
    sqlite3_finalize(q);
    return s;
}

store_status db_step_one(store *st, sqlite3_stmt *q, const char *what) {
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) return STORE_OK;
    if (rc == SQLITE_DONE) return STORE_NOT_FOUND;
    return db_error(st, what);
}

store_status db_begin(store *st) {
    return sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK ? STORE_OK : db_error(st, "begin");
}

store_status db_finish(store *st, store_status s) {
    if (s == STORE_OK && sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) s = db_error(st, "commit");
    /* After a failed COMMIT SQLite may have rolled back already; a second ROLLBACK is harmless. */
    if (s != STORE_OK && !sqlite3_get_autocommit(st->db)) sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return s;
}

long long db_next_id(store *st, const char *table) {
    sqlite3_stmt *q = db_prepare(st, "UPDATE id_counters SET last = last + 1 WHERE name = ? RETURNING last");
    if (!q) return -1;
    db_bind_text(q, 1, table);
    long long id = -1;
    store_status s = db_step_one(st, q, "next id");
    if (s == STORE_OK) {
        id = sqlite3_column_int64(q, 0);
        /* One row; stepping on to SQLITE_DONE checks that the statement completed. */
        if (sqlite3_step(q) != SQLITE_DONE) {
            db_error(st, "next id");
            id = -1;
        }
    } else if (s == STORE_NOT_FOUND) {
        db_fail("next id: no id counter for this table");
    }
    sqlite3_finalize(q);
    return id;
}

double db_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

json_t *db_col_text(sqlite3_stmt *q, int col) {
    const unsigned char *t = sqlite3_column_text(q, col);
    return t ? json_string((const char *)t) : json_null();
}

json_t *db_col_real(sqlite3_stmt *q, int col) {
    return sqlite3_column_type(q, col) == SQLITE_NULL ? json_null() : json_real(sqlite3_column_double(q, col));
}

json_t *db_col_int(sqlite3_stmt *q, int col) {
    return sqlite3_column_type(q, col) == SQLITE_NULL ? json_null() : json_integer(sqlite3_column_int64(q, col));
}

json_t *db_col_json(sqlite3_stmt *q, int col, json_t *fallback) {
    const unsigned char *t = sqlite3_column_text(q, col);
    json_t *v = t ? json_loads((const char *)t, JSON_DECODE_ANY, NULL) : NULL;
    if (!v) return fallback;
    json_decref(fallback);
    return v;
}

/* ---- opening and migrations ---------------------------------------------------------------- */

int store_schema_version_supported(void) { return store_migration_count; }

static store_status open_fail(char *err, size_t errlen, sqlite3 *db, const char *what) {
    snprintf(err, errlen, "%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
    return STORE_ERROR;
}

/* PRAGMA user_version, or -1 when it cannot be read. */
static int read_user_version(sqlite3 *db) {
    sqlite3_stmt *q;
    int v = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK) {
        sqlite3_finalize(q);
        return -1;
    }
    if (sqlite3_step(q) == SQLITE_ROW) v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return v;
}

/* Each migration and its version bump commit together, so a crash leaves a whole version. */
static store_status migrate(sqlite3 *db, char *err, size_t errlen) {
    int version = read_user_version(db);
    if (version < 0) return open_fail(err, errlen, db, "reading the schema version");
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

store_status store_sqlite_open(store **out, const char *path, char *err, size_t errlen) {
    *out = NULL;
    if (strlen(path) >= sizeof((store *)0)->path) {
        snprintf(err, errlen, "the database path is too long");
        return STORE_ERROR;
    }
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        store_status s = open_fail(err, errlen, db, path);
        sqlite3_close(db);
        return s;
    }
    if (sqlite3_db_readonly(db, "main") == 1) {
        /* SQLite falls back to reading a file it may not write: every write would fail later. */
        snprintf(err, errlen, "%s is read-only: attnlabd must be able to write its database", path);
        sqlite3_close(db);
        return STORE_ERROR;
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
    if (!st || pthread_mutex_init(&st->lock, NULL) != 0) {
        free(st);
        sqlite3_close(db);
        snprintf(err, errlen, "out of memory");
        return STORE_ERROR;
    }
    st->db = db;
    /* The file itself (a URI or a relative path resolved), to notice it deleted or replaced. */
    const char *file = sqlite3_db_filename(db, "main");
    snprintf(st->path, sizeof st->path, "%s", file && *file ? file : path);
    struct stat sb;
    if (stat(st->path, &sb) == 0) {
        st->dev = sb.st_dev;
        st->ino = sb.st_ino;
        sqlite3_commit_hook(db, refuse_lost_file, st);
    }
    *out = st;
    return STORE_OK;
}

/* SQLite's commit hook: a transaction about to commit into a file that is no longer the one at the
 * database's path (deleted, or replaced) is rolled back instead, so that no write the caller
 * believes stored vanishes at the next start. The writer then sees SQLITE_CONSTRAINT_COMMITHOOK. */
static int refuse_lost_file(void *ctx) {
    store *st = ctx;
    struct stat sb;
    if (stat(st->path, &sb) == 0 && sb.st_dev == st->dev && sb.st_ino == st->ino) return 0;
    static atomic_int told;
    if (!atomic_exchange(&told, 1))
        log_error("store: the database file %s was deleted or replaced: writes are refused (restart attnlabd)",
                  st->path);
    return 1;
}

void store_close(store *st) {
    if (st && st->pg) {
        store_pg_close(st);
        return;
    }
    if (!st) return;
    if (sqlite3_close(st->db) != SQLITE_OK) log_warn("store: close: %s", sqlite3_errmsg(st->db));
    pthread_mutex_destroy(&st->lock);
    free(st);
}

int store_schema_version(store *st) {
    if (st->pg) return store_pg_schema_version(st);
    db_lock(st);
    int v = read_user_version(st->db);
    db_unlock(st);
    return v;
}

/* The last component of path. */
static const char *file_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

store_status store_ping(store *st) {
    if (st->pg) return store_pg_ping(st);
    db_lock(st);
    int v = read_user_version(st->db);
    store_status s = STORE_OK;
    char why[4300] = "";
    struct stat sb;
    if (v < 0) {
        s = db_error(st, "reading the schema version");
    } else if (v != store_migration_count) {
        s = db_fail("the database is not at this attnlabd's schema version");
    } else if (sqlite3_db_readonly(st->db, "main") == 1) {
        s = db_fail("the database is read-only");
    } else if (stat(st->path, &sb) != 0) {
        /* (Health is open to anyone: the file is named without the server's directories.) */
        /* SQLite goes on writing to the unlinked file: all of it would be gone at the next start. */
        snprintf(why, sizeof why, "the database file %s is gone (%s): writes would be lost", file_name(st->path),
                 strerror(errno));
    } else if (sb.st_dev != st->dev || sb.st_ino != st->ino) {
        snprintf(why, sizeof why, "the database file %s was replaced since it was opened: writes go to the old one",
                 file_name(st->path));
    } else if (access(st->path, W_OK) != 0) {
        snprintf(why, sizeof why, "the database file %s cannot be written: %s", file_name(st->path), strerror(errno));
    }
    if (why[0]) s = db_fail(why);
    db_unlock(st);
    return s;
}
