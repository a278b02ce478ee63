#include "store.h"

#include <pthread.h>
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
