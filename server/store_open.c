/* The one place that picks a store backend: by the scheme of the URL it is given (postgres:// or
 * postgresql://: PostgreSQL, store_pg.c; sqlite:PATH or a plain path: SQLite, store_sqlite.c). */
#include <stdio.h>
#include <string.h>

#include "store_impl.h"
#include "store_pg.h"

store_status store_open(store **out, const char *url, char *err, size_t errlen) {
    *out = NULL;
    if (!url || !*url) {
        snprintf(err, errlen, "no database given");
        return STORE_ERROR;
    }
    if (!strncmp(url, "sqlite:", 7)) return store_sqlite_open(out, url + 7, err, errlen);
    if (!strncmp(url, "postgres://", 11) || !strncmp(url, "postgresql://", 13))
        return store_pg_open(out, url, err, errlen);
    return store_sqlite_open(out, url, err, errlen); /* a plain path is a SQLite file */
}
