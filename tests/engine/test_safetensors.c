/* Weights files: the byte layout PyTorch's safetensors expects, an exact round trip, and a clear
 * error (never a crash) for every kind of corrupt or mismatched file. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "model.h"
#include "model_io.h"
#include "safetensors.h"

static char dir[256];

static const char *path_of(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static model *tiny(int a, int seed) {
    model_config c;
    model_config_defaults(&c);
    c.n_layer = 2;
    c.n_head = 2;
    c.d_model = 8;
    c.seq_len = 6;
    c.vocab = 11;
    c.attention = a;
    model *m = NULL;
    engine_error err;
    if (model_new(&m, &c, 1, 1, 0, &err)) return NULL;
    model_init_params(m, (uint64_t)seed);
    return m;
}

static unsigned char *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void spit(const char *p, const unsigned char *b, size_t n) {
    FILE *f = fopen(p, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

TEST(round_trip_is_exact) {
    model *m = tiny(attention_index("cosine_rope"), 3), *m2 = tiny(attention_index("cosine_rope"), 4);
    CHECK(m && m2);
    engine_error err;
    CHECK(model_save(m, path_of("a.safetensors"), NULL, 0, &err) == ENGINE_OK);
    CHECK(access(path_of("a.safetensors.tmp"), F_OK) != 0); /* written via a temporary, renamed */
    CHECK(memcmp(model_params(m), model_params(m2), sizeof(real) * model_param_count(m)) != 0);
    CHECK(model_load_params(m2, path_of("a.safetensors"), &err) == ENGINE_OK);
    CHECK(memcmp(model_params(m), model_params(m2), sizeof(real) * model_param_count(m)) == 0);
    model *m3;
    CHECK(model_load(&m3, path_of("a.safetensors"), 2, 1, 0, &err) == ENGINE_OK);
    CHECK(model_get_config(m3)->attention == attention_index("cosine_rope") && model_get_config(m3)->vocab == 11);
    CHECK(memcmp(model_params(m), model_params(m3), sizeof(real) * model_param_count(m)) == 0);
    model_free(m3);
    model_free(m2);
    model_free(m);
}

/* The layout a PyTorch user's loader relies on, read independently of the engine's reader. */
TEST(file_layout_is_safetensors) {
    model *m = tiny(attention_index("dot"), 3);
    engine_error err;
    CHECK(model_save(m, path_of("b.safetensors"), NULL, 0, &err) == ENGINE_OK);
    size_t n;
    unsigned char *b = slurp(path_of("b.safetensors"), &n);
    CHECK(b != NULL);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | b[i];
    CHECK(hl % 8 == 0 && 8 + hl + 4 * model_param_count(m) == n);
    json_error_t je;
    json_t *h = json_loadb((const char *)b + 8, hl, 0, &je);
    CHECK(h != NULL);
    json_t *wte = json_object_get(h, "wte");
    CHECK(!strcmp(json_string_value(json_object_get(wte, "dtype")), "F32"));
    CHECK(json_integer_value(json_array_get(json_object_get(wte, "shape"), 0)) == 11);
    CHECK(json_integer_value(json_array_get(json_object_get(wte, "shape"), 1)) == 8);
    json_t *qkv = json_object_get(h, "h.1.attn.qkv.w");
    CHECK(json_integer_value(json_array_get(json_object_get(qkv, "shape"), 0)) == 24);
    CHECK(json_object_get(h, "wpe") != NULL && json_object_get(h, "lm_head.w") != NULL);
    json_t *meta = json_object_get(h, "__metadata__");
    CHECK(!strcmp(json_string_value(json_object_get(meta, "attention")), "dot"));
    CHECK(!strcmp(json_string_value(json_object_get(meta, "n_layer")), "2"));
    /* tensor data is the parameters in little-endian F32 at its offsets */
    const model_tensor *t = model_tensor_find(m, "h.0.mlp.fc.w");
    json_t *fc = json_object_get(h, "h.0.mlp.fc.w");
    size_t off = (size_t)json_integer_value(json_array_get(json_object_get(fc, "data_offsets"), 0));
    float v;
    memcpy(&v, b + 8 + hl + off + 4 * 5, 4);
    CHECK(v == (float)model_params(m)[t->offset + 5]);
    json_decref(h);
    free(b);
    model_free(m);
}

static engine_status load_into_tiny(const char *p, engine_error *err) {
    model *m = tiny(attention_index("dot"), 1);
    engine_status rc = model_load_params(m, p, err);
    model_free(m);
    return rc;
}

TEST(corrupt_files_are_format_errors) {
    model *m = tiny(attention_index("dot"), 3);
    engine_error err;
    CHECK(model_save(m, path_of("good.safetensors"), NULL, 0, &err) == ENGINE_OK);
    model_free(m);
    size_t n;
    unsigned char *b = slurp(path_of("good.safetensors"), &n);
    CHECK(b != NULL);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | b[i];

    CHECK(load_into_tiny(path_of("missing.safetensors"), &err) == ENGINE_ERR_IO);
    spit(path_of("c1"), b, 5); /* shorter than the length field */
    CHECK(load_into_tiny(path_of("c1"), &err) == ENGINE_ERR_FORMAT);
    spit(path_of("c2"), b, n - 100); /* data cut short */
    CHECK(load_into_tiny(path_of("c2"), &err) == ENGINE_ERR_FORMAT);
    CHECK(strstr(err.message, "outside") != NULL);
    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    c[7] = 0x7f; /* header length far beyond the file */
    spit(path_of("c3"), c, n);
    CHECK(load_into_tiny(path_of("c3"), &err) == ENGINE_ERR_FORMAT);
    memcpy(c, b, n);
    c[8] = '['; /* not a JSON object */
    spit(path_of("c4"), c, n);
    CHECK(load_into_tiny(path_of("c4"), &err) == ENGINE_ERR_FORMAT);
    memcpy(c, b, n);
    c[8 + hl / 2] = '\x01'; /* garbage inside the header */
    spit(path_of("c5"), c, n);
    CHECK(load_into_tiny(path_of("c5"), &err) == ENGINE_ERR_FORMAT);
    memcpy(c, b, n);
    char *dt = strstr((char *)c + 8, "\"F32\"");
    CHECK(dt != NULL);
    memcpy(dt, "\"I32\"", 5); /* a dtype the model cannot take */
    spit(path_of("c6"), c, n);
    CHECK(load_into_tiny(path_of("c6"), &err) == ENGINE_ERR_FORMAT);
    memcpy(c, b, n);
    memset(c + n - 4, 0xff, 4); /* a NaN in lm_head */
    spit(path_of("c7"), c, n);
    CHECK(load_into_tiny(path_of("c7"), &err) == ENGINE_ERR_FORMAT);
    CHECK(strstr(err.message, "non-finite") != NULL);
    free(c);
    free(b);
    CHECK(load_into_tiny(path_of("good.safetensors"), &err) == ENGINE_OK);
}

TEST(mismatched_files_are_format_errors) {
    engine_error err;
    model *r = tiny(attention_index("rope"), 3);
    CHECK(model_save(r, path_of("rope.safetensors"), NULL, 0, &err) == ENGINE_OK);
    model_free(r);
    CHECK(load_into_tiny(path_of("rope.safetensors"), &err) == ENGINE_ERR_FORMAT); /* dot model */
    CHECK(strstr(err.message, "different model") != NULL);
    /* right metadata, wrong tensor shape */
    model *m = tiny(attention_index("dot"), 3);
    char vals[MODEL_META_COUNT][48];
    const char *kv[2 * MODEL_META_COUNT];
    model_config_metadata(model_get_config(m), vals, kv);
    st_write_entry e[2] = {{.name = "wte", .ndim = 2, .shape = {11, 9}, .data = model_params(m)},
                           {.name = "lnf.w", .ndim = 1, .shape = {8}, .data = model_params(m)}};
    CHECK(safetensors_write(path_of("shape.safetensors"), e, 2, kv, MODEL_META_COUNT, &err) == ENGINE_OK);
    CHECK(model_load_params(m, path_of("shape.safetensors"), &err) == ENGINE_ERR_FORMAT);
    CHECK(strstr(err.message, "wte") != NULL && strstr(err.message, "11,9") != NULL);
    /* a tensor missing */
    e[0].shape[1] = 8;
    CHECK(safetensors_write(path_of("missing_t.safetensors"), e, 2, kv, MODEL_META_COUNT, &err) == ENGINE_OK);
    CHECK(model_load_params(m, path_of("missing_t.safetensors"), &err) == ENGINE_ERR_FORMAT);
    CHECK(strstr(err.message, "no tensor") != NULL);
    /* no config in the metadata */
    CHECK(safetensors_write(path_of("nometa.safetensors"), e, 2, NULL, 0, &err) == ENGINE_OK);
    CHECK(model_load_params(m, path_of("nometa.safetensors"), &err) == ENGINE_ERR_FORMAT);
    model *m2 = NULL;
    CHECK(model_load(&m2, path_of("nometa.safetensors"), 1, 1, 0, &err) == ENGINE_ERR_FORMAT && m2 == NULL);
    model_free(m);
}

TEST(unwritable_path_is_io_error) {
    model *m = tiny(attention_index("dot"), 3);
    engine_error err;
    CHECK(model_save(m, "/nonexistent-dir/x.safetensors", NULL, 0, &err) == ENGINE_ERR_IO);
    model_free(m);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/attnlab-st-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(round_trip_is_exact);
    RUN(file_layout_is_safetensors);
    RUN(corrupt_files_are_format_errors);
    RUN(mismatched_files_are_format_errors);
    RUN(unwritable_path_is_io_error);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    return test_summary();
}
