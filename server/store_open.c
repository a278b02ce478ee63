/* The one place that picks a store backend: by the scheme of the URL it is given. */
#include <stdio.h>
#include <string.h>

#include "store_impl.h"

store_status store_open(store **out, const char *url, char *err, size_t errlen) {
    *out = NULL;
    if (!url || !*url) {
        snprintf(err, errlen, "no database given");
        return STORE_ERROR;
    }
    if (!strncmp(url, "sqlite:", 7)) return store_sqlite_open(out, url + 7, err, errlen);
    if (!strncmp(url, "postgres://", 11) || !strncmp(url, "postgresql://", 13)) {
        snprintf(err, errlen, "this attnlabd has no PostgreSQL backend; give a SQLite file path");
        return STORE_ERROR;
    }
    return store_sqlite_open(out, url, err, errlen); /* a plain path is a SQLite file */
}
