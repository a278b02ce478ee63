/* The SQLite backend of the store: the connection, its lock, the migrations, the statement
 * helpers the resource files share (store_sqlite.h) and the backend's table of functions. */
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

#include "store/common/store_summary.h"
#include "store/sqlite/store_sqlite.h"
#include "store/store_migrations.h"
#include "util/log.h"

static int refuse_lost_file(void *ctx);
static const store_ops sqlite_ops;

static store_sqlite *lite(store *st) { return (store_sqlite *)st; }

/* The read connection this thread holds (db_read_lock), or NULL: the statements of a thread that
 * holds none go to the writer (db_lock). A thread holds at most one of either at a time. */
static _Thread_local db_reader *reading;

static sqlite3 *conn(store *st) { return reading ? reading->db : lite(st)->db; }

store_status db_error(store *st, const char *what) { return store_fail("%s: %s", what, sqlite3_errmsg(conn(st))); }

void db_lock(store *st) { pthread_mutex_lock(&lite(st)->lock); }
void db_unlock(store *st) { pthread_mutex_unlock(&lite(st)->lock); }

/* Holds r and opens a read transaction on it, so that the statements of one function see one
 * snapshot (a deferred BEGIN: the snapshot is taken by the first statement). */
static void reader_hold(db_reader *r) {
    reading = r;
    /* A BEGIN that fails leaves each statement its own snapshot: still committed data. */
    sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL);
}

void db_read_lock(store *st) {
    store_sqlite *l = lite(st);
    unsigned first = atomic_fetch_add(&l->next_reader, 1);
    for (unsigned k = 0; k < DB_READERS; k++) {
        db_reader *r = &l->readers[(first + k) % DB_READERS];
        if (pthread_mutex_trylock(&r->lock) == 0) {
            reader_hold(r);
            return;
        }
    }
    db_reader *r = &l->readers[first % DB_READERS]; /* all busy: wait for one */
    pthread_mutex_lock(&r->lock);
    reader_hold(r);
}

void db_read_unlock(store *st) {
    (void)st;
    db_reader *r = reading;
    /* Ends the read transaction: it wrote nothing, so there is nothing its COMMIT could lose. */
    if (!sqlite3_get_autocommit(r->db)) sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
    reading = NULL;
    pthread_mutex_unlock(&r->lock);
}

int db_changes(store *st) { return sqlite3_changes(conn(st)); }
int db_errcode(store *st) { return sqlite3_extended_errcode(conn(st)); }

int db_summary_flags(void) { return sqlite3_libversion_number() >= 3043000 ? STORE_SUMMARY_COMPENSATED : 0; }

sqlite3_stmt *db_prepare(store *st, const char *sql) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(conn(st), sql, -1, &q, NULL) != SQLITE_OK) {
        db_error(st, "prepare");
        sqlite3_finalize(q);
        return NULL;
    }
    return q;
}

void db_bind_text(sqlite3_stmt *q, int i, const char *s) {
    if (s)
        sqlite3_bind_text(q, i, s, -1, SQLITE_STATIC);
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

store_status db_update_by_id(store *st, const char *sql, const char *value, long long id, const char *what) {
    db_lock(st);
    sqlite3_stmt *q = db_prepare(st, sql);
    if (q) {
        db_bind_text(q, 1, value);
        sqlite3_bind_int64(q, 2, id);
    }
    store_status s = STORE_ERROR;
    if (q) {
        int rc = sqlite3_step(q);
        s = rc == SQLITE_DONE                            ? STORE_OK
            : db_errcode(st) == SQLITE_CONSTRAINT_UNIQUE ? STORE_CONFLICT
                                                         : db_error(st, what);
        sqlite3_finalize(q);
    }
    if (s == STORE_OK && db_changes(st) == 0) s = STORE_NOT_FOUND;
    db_unlock(st);
    return s;
}

store_status db_step_one(store *st, sqlite3_stmt *q, const char *what) {
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) return STORE_OK;
    if (rc == SQLITE_DONE) return STORE_NOT_FOUND;
    return db_error(st, what);
}

store_status db_rows(store *st, sqlite3_stmt *q, json_t *(*make)(const store_row *), json_t *list, const char *what) {
    store_status s = STORE_OK;
    int rc;
    while (s == STORE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        store_row r = db_row(q);
        if (json_array_append_new(list, make(&r)) < 0) s = store_fail("%s: out of memory", what);
    }
    if (s == STORE_OK && rc != SQLITE_DONE) s = db_error(st, what);
    return s;
}

store_status db_count(store *st, sqlite3_stmt *q, long long *n, const char *what) {
    store_status s = db_step_one(st, q, what);
    if (s == STORE_OK)
        *n = sqlite3_column_int64(q, 0);
    else if (s == STORE_NOT_FOUND)
        s = store_fail("%s: no row", what);
    return s;
}

store_status db_begin(store *st) {
    return sqlite3_exec(conn(st), "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK ? STORE_OK : db_error(st, "begin");
}

store_status db_finish(store *st, store_status s) {
    sqlite3 *db = conn(st);
    if (s == STORE_OK && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) s = db_error(st, "commit");
    /* After a failed COMMIT SQLite may have rolled back already; a second ROLLBACK is harmless. */
    if (s != STORE_OK && !sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
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

/* ---- rows (store_rows.h) -------------------------------------------------------------------- */

static sqlite3_stmt *stmt_of(const store_row *r) { return (sqlite3_stmt *)r->res; }
static int row_is_null(const store_row *r, int col) { return sqlite3_column_type(stmt_of(r), col) == SQLITE_NULL; }
static const char *row_text(const store_row *r, int col) { return (const char *)sqlite3_column_text(stmt_of(r), col); }
static long long row_i64(const store_row *r, int col) { return sqlite3_column_int64(stmt_of(r), col); }
static double row_real(const store_row *r, int col) { return sqlite3_column_double(stmt_of(r), col); }
static int row_boolean(const store_row *r, int col) { return sqlite3_column_int64(stmt_of(r), col) != 0; }

static const store_row_ops row_ops = {row_is_null, row_text, row_i64, row_real, row_boolean};

store_row db_row(sqlite3_stmt *q) { return (store_row){.ops = &row_ops, .res = q, .row = 0}; }

/* ---- opening and migrations ---------------------------------------------------------------- */

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

/* The database file opened (created if missing), writable, in WAL mode and migrated into *out. */
static store_status open_file(const char *path, sqlite3 **out, char *err, size_t errlen) {
    sqlite3 *db = NULL;
    char *msg = NULL;
    store_status s = STORE_ERROR;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) !=
        SQLITE_OK) {
        s = open_fail(err, errlen, db, path);
    } else if (sqlite3_db_readonly(db, "main") == 1) {
        /* SQLite falls back to reading a file it may not write: every write would fail later. */
        snprintf(err, errlen, "%s is read-only: attnlabd must be able to write its database", path);
    } else if (sqlite3_exec(db,
                            /* synchronous=NORMAL in WAL keeps the database consistent on a crash; at most
                             * the last transactions before a power loss are lost, which the metrics
                             * batching accepts. busy_timeout: sqlite3_busy_timeout's 5 s. */
                            "PRAGMA busy_timeout=5000; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                            "PRAGMA foreign_keys=ON;",
                            NULL, NULL, &msg) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, msg ? msg : "?");
    } else {
        s = migrate(db, err, errlen);
    }
    sqlite3_free(msg);
    if (s != STORE_OK) {
        sqlite3_close(db);
        return s;
    }
    *out = db;
    return STORE_OK;
}

/* A read connection to the file the writer opened (after its migrations): it may not write
 * (query_only), and in WAL mode it reads the last commit without waiting for the writer. */
static store_status reader_open(db_reader *r, const char *file, char *err, size_t errlen) {
    sqlite3 *db = NULL;
    char *msg = NULL;
    store_status s = STORE_ERROR;
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        snprintf(err, errlen, "out of memory");
        return STORE_ERROR;
    }
    if (sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK)
        s = open_fail(err, errlen, db, "a read connection");
    else if (sqlite3_exec(db, "PRAGMA busy_timeout=5000; PRAGMA query_only=ON;", NULL, NULL, &msg) != SQLITE_OK)
        snprintf(err, errlen, "a read connection: %s", msg ? msg : "?");
    else
        s = STORE_OK;
    sqlite3_free(msg);
    if (s != STORE_OK) {
        sqlite3_close(db);
        pthread_mutex_destroy(&r->lock);
        return s;
    }
    r->db = db;
    return STORE_OK;
}

static void reader_close(db_reader *r) {
    if (!r->db) return;
    if (sqlite3_close(r->db) != SQLITE_OK) log_warn("store: close: %s", sqlite3_errmsg(r->db));
    pthread_mutex_destroy(&r->lock);
    r->db = NULL;
}

/* The read connections (DB_READERS for the reads, one for the health check), or STORE_ERROR with
 * none left open. */
static store_status readers_open(store_sqlite *st, char *err, size_t errlen) {
    store_status s = reader_open(&st->pinger, st->path, err, errlen);
    for (int i = 0; s == STORE_OK && i < DB_READERS; i++) s = reader_open(&st->readers[i], st->path, err, errlen);
    if (s != STORE_OK) {
        for (int i = 0; i < DB_READERS; i++) reader_close(&st->readers[i]);
        reader_close(&st->pinger);
    }
    return s;
}

store_status store_sqlite_open(store **out, const char *path, char *err, size_t errlen) {
    *out = NULL;
    if (strlen(path) >= sizeof((store_sqlite *)0)->path) {
        snprintf(err, errlen, "the database path is too long");
        return STORE_ERROR;
    }
    store_sqlite *st = calloc(1, sizeof *st);
    if (!st || pthread_mutex_init(&st->lock, NULL) != 0) {
        free(st);
        snprintf(err, errlen, "out of memory");
        return STORE_ERROR;
    }
    sqlite3 *db = NULL;
    store_status s = open_file(path, &db, err, errlen);
    if (s != STORE_OK) {
        pthread_mutex_destroy(&st->lock);
        free(st);
        return s;
    }
    st->base.ops = &sqlite_ops;
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
    atomic_init(&st->next_reader, 0);
    s = readers_open(st, err, errlen);
    if (s != STORE_OK) {
        sqlite3_close(db);
        pthread_mutex_destroy(&st->lock);
        free(st);
        return s;
    }
    *out = &st->base;
    return STORE_OK;
}

/* SQLite's commit hook: a transaction about to commit into a file that is no longer the one at the
 * database's path (deleted, or replaced) is rolled back instead, so that no write the caller
 * believes stored vanishes at the next start. The writer then sees SQLITE_CONSTRAINT_COMMITHOOK. */
static int refuse_lost_file(void *ctx) {
    store_sqlite *st = ctx;
    struct stat sb;
    if (stat(st->path, &sb) == 0 && sb.st_dev == st->dev && sb.st_ino == st->ino) return 0;
    static atomic_int told;
    if (!atomic_exchange(&told, 1))
        log_error("store: the database file %s was deleted or replaced: writes are refused (restart attnlabd)",
                  st->path);
    return 1;
}

static void sqlite_close(store *base) {
    store_sqlite *st = lite(base);
    /* The readers first: the last connection to close checkpoints the WAL into the file. */
    for (int i = 0; i < DB_READERS; i++) reader_close(&st->readers[i]);
    reader_close(&st->pinger);
    if (sqlite3_close(st->db) != SQLITE_OK) log_warn("store: close: %s", sqlite3_errmsg(st->db));
    pthread_mutex_destroy(&st->lock);
    free(st);
}

int store_sqlite_schema_version(store *st) {
    db_lock(st);
    int v = read_user_version(lite(st)->db);
    db_unlock(st);
    return v;
}

/* The last component of path. */
static const char *file_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Health takes a connection of its own, so that it answers while the writer and every reader are
 * busy (a long write, a bundle reading a large run). The writer cannot turn read-only: the file
 * that cannot be written is what the checks below notice. */
store_status store_sqlite_ping(store *base) {
    store_sqlite *st = lite(base);
    db_reader *r = &st->pinger;
    pthread_mutex_lock(&r->lock);
    reading = r;
    int v = read_user_version(r->db);
    store_status s = STORE_OK;
    char why[4300] = "";
    struct stat sb;
    if (v < 0) {
        s = db_error(base, "reading the schema version");
    } else if (v != store_migration_count) {
        s = db_fail("the database is not at this attnlabd's schema version");
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
    reading = NULL;
    pthread_mutex_unlock(&r->lock);
    return s;
}

/* ---- the backend's table ----------------------------------------------------------------------
 * A SQLite file has one node, its queue in the process: not shared, no lease, nothing to hear (the
 * entries of a shared store stay NULL; store_open.c answers for them). */
static const store_ops sqlite_ops = {
    /* clang-format off */
    .name = "sqlite", .close = sqlite_close, STORE_CONTRACT(STORE_FILL, store_sqlite_)
    /* clang-format on */
};
