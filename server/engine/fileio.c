#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

engine_status file_read_all(const char *path, char **buf, size_t *len, engine_error *err) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return engine_fail(err, ENGINE_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) { /* grows by doubling: the size a stat() would give may change under the reader */
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = cap <= ((size_t)-1 - 1) / 2 ? realloc(b, cap * 2 + 1) : NULL;
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory reading %s", path);
    if (bad) {
        free(b);
        return engine_fail(err, ENGINE_ERR_IO, "cannot read %s", path);
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return ENGINE_OK;
}
