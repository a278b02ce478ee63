/* The store: every SQL statement of attnlab lives in store.c, prepared and parameter-bound.
 *
 * One SQLite connection in WAL mode, foreign keys on, a busy timeout, serialised by a mutex so any
 * thread may call any function. store_open() applies the embedded migrations (db/migrations) in
 * order, tracked by PRAGMA user_version, and refuses a database written by a newer attnlab. */
#ifndef ATTNLAB_STORE_H
#define ATTNLAB_STORE_H

#include <stddef.h>

typedef struct store store;

typedef enum {
    STORE_OK = 0,
    STORE_NOT_FOUND,
    STORE_CONFLICT, /* the row exists / is in a state that forbids the change */
    STORE_TOO_NEW,  /* the file's schema is newer than this binary's */
    STORE_ERROR,    /* SQLite or I/O error; the message says which */
} store_status;

/* Opens (creating if needed) and migrates the database at path. On failure *out is NULL and err
 * holds a one-line reason. */
store_status store_open(store **out, const char *path, char *err, size_t errlen);
void store_close(store *st);

/* The schema version this binary writes, and the one the open file is at. */
int store_schema_version_supported(void);
int store_schema_version(store *st);
/* Cheap liveness check for /api/health: STORE_OK when a trivial query runs. */
store_status store_ping(store *st);

#endif
