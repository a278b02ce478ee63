/* safetensors files: an 8-byte little-endian header length, a JSON header mapping tensor names
 * to {dtype, shape, data_offsets} plus an optional "__metadata__" object of strings, then the
 * raw little-endian data. The format PyTorch users load with `safetensors.torch.load_file`.
 * The engine writes F32 only; it reads F32 and F64. Every structural problem in a file (short,
 * header out of range, bad JSON, offsets outside the data, sizes that disagree with the shape)
 * is ENGINE_ERR_FORMAT with a message naming the problem; unreadable files are ENGINE_ERR_IO. */
#ifndef ENGINE_SAFETENSORS_H
#define ENGINE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "real.h"

#define ST_MAX_DIMS 8

typedef struct {
    const char *name;
    char dtype[8]; /* "F32", "F64", ... as written in the file */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const unsigned char *data; /* into the loaded file */
    size_t nbytes;
} st_tensor;

typedef struct safetensors safetensors;

engine_status safetensors_open(safetensors **out, const char *path, engine_error *err);
void safetensors_close(safetensors *st); /* NULL is fine */
int safetensors_count(const safetensors *st);
const st_tensor *safetensors_at(const safetensors *st, int i);
const st_tensor *safetensors_find(const safetensors *st, const char *name); /* NULL if absent */
const char *safetensors_meta(const safetensors *st, const char *key);       /* NULL if absent */

/* Copies tensor `name` into dst[numel] as real, after checking it exists, is F32 or F64 and has
 * exactly the given shape; ENGINE_ERR_FORMAT otherwise. */
engine_status safetensors_read_real(const safetensors *st, const char *name, int ndim, const int64_t *shape, real *dst,
                                    engine_error *err);

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const real *data;
} st_write_entry;

/* Writes the tensors (as F32) and metadata pairs meta_kv[2*i] -> meta_kv[2*i+1] to path.tmp,
 * then renames it over path, so a reader never sees half a file. */
engine_status safetensors_write(const char *path, const st_write_entry *entries, int n, const char *const *meta_kv,
                                int n_meta, engine_error *err);

/* Writes to f (open for writing, at its start) a safetensors file with src's tensors whose names do
 * not begin with drop_prefix (NULL: all), their dtypes and bytes as they are and in src's data
 * order, and src's metadata with the pairs meta_kv[2i] -> meta_kv[2i+1] set over it (a pair
 * replaces the key it names, or adds it). Flushes f; ENGINE_ERR_IO when a write fails,
 * ENGINE_ERR_NOMEM. What f holds after an error is unspecified. */
engine_status safetensors_write_subset(const safetensors *src, FILE *f, const char *drop_prefix,
                                       const char *const *meta_kv, int n_meta, engine_error *err);

#endif
