/* The one place that picks a store backend: by the scheme of the URL it is given (postgres:// or
 * postgresql://: PostgreSQL, store_pg.c; sqlite:PATH or a plain path: SQLite, store_sqlite.c). */
#include <stdio.h>
#include <string.h>

#include "store/sqlite/store_impl.h"
#include "store/postgres/store_pg.h"

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

const char *const store_run_sorts[STORE_RUN_SORT_COUNT + 1] = {
    "id",    "-id",      "created_at", "-created_at", "name",      "-name",        "status",        "-status", "loss",
    "-loss", "val_loss", "-val_loss",  "min_loss",    "-min_loss", "min_val_loss", "-min_val_loss", NULL};

int store_run_sort_index(const char *sort) {
    for (int i = 0; sort && i < STORE_RUN_SORT_COUNT; i++)
        if (!strcmp(sort, store_run_sorts[i])) return i;
    return -1;
}

int store_config_key_ok(const char *k) {
    size_t n = k ? strlen(k) : 0;
    if (n < 1 || n > 63) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_')) return 0;
    return 1;
}
