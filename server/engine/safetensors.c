#include "safetensors.h"
#include "fileio.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */

struct safetensors {
    unsigned char *file;
    size_t file_size;
    json_t *header;
    st_tensor *tensors;
    int n;
};

static size_t dtype_size(const char *dt) {
    if (!strcmp(dt, "F64") || !strcmp(dt, "I64") || !strcmp(dt, "U64")) return 8;
    if (!strcmp(dt, "F32") || !strcmp(dt, "I32") || !strcmp(dt, "U32")) return 4;
    if (!strcmp(dt, "F16") || !strcmp(dt, "BF16") || !strcmp(dt, "I16") || !strcmp(dt, "U16")) return 2;
    if (!strcmp(dt, "I8") || !strcmp(dt, "U8") || !strcmp(dt, "BOOL")) return 1;
    return 0;
}

engine_status safetensors_open(safetensors **out, const char *path, engine_error *err) {
    *out = NULL;
    safetensors *st = calloc(1, sizeof *st);
    if (!st) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    char *file;
    engine_status rc = file_read_all(path, &file, &st->file_size, err);
    st->file = (unsigned char *)file;
    if (rc) {
        free(st);
        return rc;
    }
    if (st->file_size < 8) {
        rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: too short for a safetensors file", path);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | st->file[i];
    if (hlen == 0 || hlen > ST_MAX_HEADER || hlen > st->file_size - 8) {
        rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: header length %llu does not fit the file (%zu bytes)", path,
                         (unsigned long long)hlen, st->file_size);
        goto fail;
    }
    json_error_t jerr;
    st->header = json_loadb((const char *)st->file + 8, (size_t)hlen, 0, &jerr);
    if (!st->header || !json_is_object(st->header)) {
        rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: header is not a JSON object (%s)", path,
                         st->header ? "not an object" : jerr.text);
        goto fail;
    }
    const unsigned char *data = st->file + 8 + hlen;
    size_t data_size = st->file_size - 8 - hlen;
    size_t cap = json_object_size(st->header);
    st->tensors = calloc(cap ? cap : 1, sizeof *st->tensors);
    if (!st->tensors) {
        rc = engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    const char *key;
    json_t *val;
    json_object_foreach(st->header, key, val) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(val)) {
                rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: __metadata__ is not an object", path);
                goto fail;
            }
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: metadata '%s' is not a string", path, mk);
                    goto fail;
                }
            }
            continue;
        }
        json_t *dt = json_object_get(val, "dtype"), *sh = json_object_get(val, "shape"),
               *off = json_object_get(val, "data_offsets");
        if (!json_is_object(val) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) ||
            json_array_size(off) != 2 || json_array_size(sh) > ST_MAX_DIMS) {
            rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: tensor '%s' has a malformed entry", path, key);
            goto fail;
        }
        st_tensor *t = &st->tensors[st->n];
        t->name = key;
        snprintf(t->dtype, sizeof t->dtype, "%s", json_string_value(dt));
        size_t esize = dtype_size(t->dtype);
        if (!esize) {
            rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: tensor '%s' has unknown dtype %s", path, key, t->dtype);
            goto fail;
        }
        t->ndim = (int)json_array_size(sh);
        uint64_t numel = 1;
        for (int i = 0; i < t->ndim; i++) {
            json_t *d = json_array_get(sh, (size_t)i);
            if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1LL << 40)) {
                rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: tensor '%s' has a bad shape", path, key);
                goto fail;
            }
            t->shape[i] = json_integer_value(d);
            numel *= (uint64_t)t->shape[i];
            if (numel > (1ULL << 40)) {
                rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: tensor '%s' is too large", path, key);
                goto fail;
            }
        }
        json_t *b0 = json_array_get(off, 0), *b1 = json_array_get(off, 1);
        if (!json_is_integer(b0) || !json_is_integer(b1)) {
            rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: tensor '%s' has bad data_offsets", path, key);
            goto fail;
        }
        json_int_t lo = json_integer_value(b0), hi = json_integer_value(b1);
        if (lo < 0 || hi < lo || (uint64_t)hi > data_size) {
            rc =
                engine_fail(err, ENGINE_ERR_FORMAT, "%s: tensor '%s' data [%lld, %lld) lies outside the %zu data bytes",
                            path, key, (long long)lo, (long long)hi, data_size);
            goto fail;
        }
        if ((uint64_t)(hi - lo) != numel * esize) {
            rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: tensor '%s' has %lld bytes but its shape needs %llu", path,
                             key, (long long)(hi - lo), (unsigned long long)(numel * esize));
            goto fail;
        }
        t->data = data + lo;
        t->nbytes = (size_t)(hi - lo);
        st->n++;
    }
    *out = st;
    return ENGINE_OK;
fail:
    safetensors_close(st);
    return rc;
}

void safetensors_close(safetensors *st) {
    if (!st) return;
    if (st->header) json_decref(st->header);
    free(st->tensors);
    free(st->file);
    free(st);
}

int safetensors_count(const safetensors *st) { return st->n; }
const st_tensor *safetensors_at(const safetensors *st, int i) { return &st->tensors[i]; }

const st_tensor *safetensors_find(const safetensors *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
    return NULL;
}

const char *safetensors_meta(const safetensors *st, const char *key) {
    json_t *m = json_object_get(st->header, "__metadata__");
    return m ? json_string_value(json_object_get(m, key)) : NULL;
}

engine_status safetensors_read_real(const safetensors *st, const char *name, int ndim, const int64_t *shape, real *dst,
                                    engine_error *err) {
    const st_tensor *t = safetensors_find(st, name);
    if (!t) return engine_fail(err, ENGINE_ERR_FORMAT, "weights have no tensor '%s'", name);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char want[64] = "", got[64] = "";
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "", (long long)shape[i]);
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "", (long long)t->shape[i]);
        return engine_fail(err, ENGINE_ERR_FORMAT, "tensor '%s' has shape [%s], the model needs [%s]", name, got, want);
    }
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)shape[i];
    if (!strcmp(t->dtype, "F32")) {
        for (size_t i = 0; i < numel; i++) {
            float v;
            memcpy(&v, t->data + 4 * i, 4);
            dst[i] = (real)v;
        }
    } else if (!strcmp(t->dtype, "F64")) {
        for (size_t i = 0; i < numel; i++) {
            double v;
            memcpy(&v, t->data + 8 * i, 8);
            dst[i] = (real)v;
        }
    } else {
        return engine_fail(err, ENGINE_ERR_FORMAT, "tensor '%s' is %s; only F32 and F64 are supported", name, t->dtype);
    }
    return ENGINE_OK;
}

engine_status safetensors_write(const char *path, const st_write_entry *e, int n, const char *const *meta_kv,
                                int n_meta, engine_error *err) {
    json_t *h = json_object();
    if (!h) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    engine_status rc = ENGINE_OK;
    uint64_t off = 0;
    if (n_meta > 0) {
        json_t *m = json_object();
        if (!m || json_object_set_new(h, "__metadata__", m)) goto nomem;
        for (int i = 0; i < n_meta; i++)
            if (json_object_set_new(m, meta_kv[2 * i], json_string(meta_kv[2 * i + 1]))) goto nomem;
    }
    for (int i = 0; i < n; i++) {
        uint64_t numel = 1;
        json_t *sh = json_array(), *t = json_object(), *offs = json_array();
        if (!sh || !t || !offs) {
            json_decref(sh);
            json_decref(t);
            json_decref(offs);
            goto nomem;
        }
        int bad = 0;
        for (int d = 0; d < e[i].ndim; d++) {
            numel *= (uint64_t)e[i].shape[d];
            bad |= json_array_append_new(sh, json_integer(e[i].shape[d]));
        }
        bad |= json_array_append_new(offs, json_integer((json_int_t)off));
        bad |= json_array_append_new(offs, json_integer((json_int_t)(off + 4 * numel)));
        off += 4 * numel;
        bad |= json_object_set_new(t, "dtype", json_string("F32"));
        bad |= json_object_set_new(t, "shape", sh); /* takes sh and offs, set or not */
        bad |= json_object_set_new(t, "data_offsets", offs);
        if (bad) {
            json_decref(t);
            goto nomem;
        }
        if (json_object_set_new(h, e[i].name, t)) goto nomem;
    }
    char *hs = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    h = NULL;
    if (!hs) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    /* Pad the header with spaces to a multiple of 8 so the data that follows is aligned. */
    size_t hlen = strlen(hs), padded = (hlen + 7) / 8 * 8;
    size_t plen = strlen(path) + 16;
    char *tmp = malloc(plen);
    if (!tmp) {
        free(hs);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, plen, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rc = engine_fail(err, ENGINE_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        free(hs);
        free(tmp);
        return rc;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hs, 1, hlen, f) == hlen;
    for (size_t i = hlen; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
    free(hs);
    float chunk[4096];
    for (int i = 0; ok && i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < e[i].ndim; d++) numel *= (size_t)e[i].shape[d];
        for (size_t j = 0; ok && j < numel; j += 4096) {
            size_t m = numel - j < 4096 ? numel - j : 4096;
            for (size_t k = 0; k < m; k++) chunk[k] = (float)e[i].data[j + k];
            ok = fwrite(chunk, sizeof(float), m, f) == m;
        }
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) ok = 0;
    if (fclose(f) != 0) ok = 0;
    if (!ok) {
        rc = engine_fail(err, ENGINE_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        unlink(tmp);
    } else if (rename(tmp, path) != 0) {
        rc = engine_fail(err, ENGINE_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return rc;
nomem:
    json_decref(h);
    return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
}

/* Tensors in the order of their data in the file. */
static int by_data(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

engine_status safetensors_write_subset(const safetensors *src, FILE *f, const char *drop_prefix,
                                       const char *const *meta_kv, int n_meta, engine_error *err) {
    size_t plen = drop_prefix ? strlen(drop_prefix) : 0;
    const st_tensor **keep = malloc(sizeof *keep * (size_t)(src->n ? src->n : 1));
    json_t *h = json_object(), *m = json_object();
    if (!keep || !h || !m) goto nomem;
    int nk = 0;
    for (int i = 0; i < src->n; i++)
        if (!plen || strncmp(src->tensors[i].name, drop_prefix, plen)) keep[nk++] = &src->tensors[i];
    qsort(keep, (size_t)nk, sizeof *keep, by_data);
    json_t *old = json_object_get(src->header, "__metadata__");
    const char *mk;
    json_t *mv;
    json_object_foreach(old, mk, mv) {
        if (json_object_set(m, mk, mv)) goto nomem;
    }
    for (int i = 0; i < n_meta; i++)
        if (json_object_set_new(m, meta_kv[2 * i], json_string(meta_kv[2 * i + 1]))) goto nomem;
    if (json_object_set_new(h, "__metadata__", m)) {
        m = NULL;
        goto nomem;
    }
    m = NULL;
    uint64_t off = 0;
    for (int i = 0; i < nk; i++) {
        const st_tensor *t = keep[i];
        /* append_new and set_new take the value even when they fail; set adds a reference, and ours
         * are dropped at the end whatever happened */
        json_t *sh = json_array(), *offs = json_array(), *e = NULL;
        int bad = !sh || !offs;
        for (int d = 0; !bad && d < t->ndim; d++) bad = json_array_append_new(sh, json_integer(t->shape[d]));
        bad = bad || json_array_append_new(offs, json_integer((json_int_t)off)) ||
              json_array_append_new(offs, json_integer((json_int_t)(off + t->nbytes)));
        bad = bad || !(e = json_object()) || json_object_set_new(e, "dtype", json_string(t->dtype)) ||
              json_object_set(e, "shape", sh) || json_object_set(e, "data_offsets", offs) ||
              json_object_set(h, t->name, e);
        json_decref(sh);
        json_decref(offs);
        json_decref(e);
        if (bad) goto nomem;
        off += t->nbytes;
    }
    char *hs = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    h = NULL;
    if (!hs) goto nomem;
    size_t hlen = strlen(hs), padded = (hlen + 7) / 8 * 8;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hs, 1, hlen, f) == hlen;
    free(hs);
    for (size_t i = hlen; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
    for (int i = 0; ok && i < nk; i++) ok = fwrite(keep[i]->data, 1, keep[i]->nbytes, f) == keep[i]->nbytes;
    free(keep);
    if (!ok || fflush(f) != 0) return engine_fail(err, ENGINE_ERR_IO, "cannot write the weights: %s", strerror(errno));
    return ENGINE_OK;
nomem:
    free(keep);
    json_decref(h);
    json_decref(m);
    return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory");
}
