/* The safetensors reader on arbitrary files: opening either fails with a message or gives
 * tensors whose data lie inside the file and whose sizes agree with their shapes; reading each
 * F32/F64 tensor with its own shape succeeds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[300];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/fuzz-st-%d.safetensors", tmp ? tmp : "/tmp", (int)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 20) return -1;
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    safetensors *st = NULL;
    engine_error err = {0};
    engine_status s = safetensors_open(&st, path, &err);
    if (s != ENGINE_OK) {
        if (st || !err.message[0]) abort();
        unlink(path);
        return 0;
    }
    int n = safetensors_count(st);
    for (int i = 0; i < n; i++) {
        const st_tensor *t = safetensors_at(st, i);
        if (!t || !t->name || t->ndim < 0 || t->ndim > ST_MAX_DIMS) abort();
        if (safetensors_find(st, t->name) == NULL) abort();
        if (t->nbytes > size || (t->nbytes && !t->data)) abort();
        size_t numel = 1;
        int overflow = 0;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) abort();
            if (t->shape[d] && numel > SIZE_MAX / (size_t)t->shape[d])
                overflow = 1;
            else
                numel *= (size_t)t->shape[d];
        }
        int f32 = !strcmp(t->dtype, "F32"), f64 = !strcmp(t->dtype, "F64");
        if (!(f32 || f64) || overflow || numel > (1u << 20)) continue;
        if (t->nbytes != numel * (f32 ? 4 : 8)) abort(); /* the reader promised sizes agree */
        real *dst = malloc((numel ? numel : 1) * sizeof *dst);
        if (!dst) abort();
        engine_error e2 = {0};
        if (safetensors_read_real(st, t->name, t->ndim, t->shape, dst, &e2) != ENGINE_OK) abort();
        free(dst);
    }
    safetensors_meta(st, "format");
    safetensors_meta(st, "");
    safetensors_close(st);
    unlink(path);
    return 0;
}
