/* Self-describing weights: the metadata a weights file or checkpoint carries (the config, and how the
 * engine computes with it: RoPE layout, epsilons, GELU form, score scale), the run's own pairs in
 * checkpoints and saved weights, files from before those keys loading as before, a file that claims
 * another computation refused, and the weights-only copy of a checkpoint (safetensors_write_subset). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../support/test.h"
#include "attention.h"
#include "layers.h"
#include "model.h"
#include "model_io.h"
#include "safetensors.h"
#include "train.h"

static char dir[256];

static const char *path_of(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static model_config tiny_config(const char *attention) {
    model_config c;
    model_config_defaults(&c);
    c.n_layer = 2;
    c.n_head = 2;
    c.d_model = 8;
    c.seq_len = 6;
    c.vocab = 11;
    c.attention = attention_index(attention);
    return c;
}

static model *tiny(const char *attention) {
    model_config c = tiny_config(attention);
    model *m = NULL;
    engine_error err;
    if (model_new(&m, &c, 1, 1, 0, &err)) return NULL;
    model_init_params(m, 7);
    return m;
}

static int meta_is(const safetensors *st, const char *key, const char *want) {
    const char *v = safetensors_meta(st, key);
    return v && !strcmp(v, want);
}

static int meta_num(const safetensors *st, const char *key, double want) {
    const char *v = safetensors_meta(st, key);
    char *end;
    return v && strtod(v, &end) == want && *end == 0;
}

TEST(weights_describe_the_computation) {
    static const struct {
        const char *attention, *positions, *qk, *scale;
    } rows[] = {{"dot", "learned", "none", "fixed"},
                {"rope", "none", "rope", "fixed"},
                {"cosine_rope", "none", "l2norm,rope", "inv_tau"},
                {"cosine_rope_scale", "none", "l2norm,rope", "mult"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        model *m = tiny(rows[i].attention);
        CHECK(m != NULL);
        if (!m) return;
        engine_error err;
        const char *extra[] = {"tokenizer", "bytes"};
        CHECK(model_save(m, path_of("w.safetensors"), extra, 1, &err) == ENGINE_OK);
        safetensors *st = NULL;
        CHECK(safetensors_open(&st, path_of("w.safetensors"), &err) == ENGINE_OK);
        if (!st) {
            model_free(m);
            return;
        }
        CHECK_MSG(meta_is(st, "attention", rows[i].attention), "%s", rows[i].attention);
        CHECK_MSG(meta_is(st, "positions", rows[i].positions), "%s: positions", rows[i].attention);
        CHECK_MSG(meta_is(st, "qk_transform", rows[i].qk), "%s: qk_transform", rows[i].attention);
        CHECK_MSG(meta_is(st, "score_scale", rows[i].scale), "%s: score_scale", rows[i].attention);
        CHECK(meta_is(st, "rope_layout", "interleaved"));
        CHECK(meta_is(st, "gelu", "tanh"));
        CHECK(meta_num(st, "layernorm_eps", LAYERNORM_EPS));
        CHECK(meta_num(st, "cosine_eps", COSINE_NORM_EPS));
        CHECK(meta_is(st, "attnlab_version", ATTNLAB_VERSION));
        CHECK(meta_is(st, "format", "attnlab-weights"));
        CHECK(meta_is(st, "tokenizer", "bytes"));
        if (!strcmp(rows[i].scale, "fixed"))
            CHECK(meta_num(st, "fixed_scale", 1.0 / sqrt(4.0))); /* d = 8 / 2 */
        else
            CHECK(meta_is(st, "fixed_scale", "none"));
        safetensors_close(st);
        model_free(m);
    }
}

/* A file from before the description keys: the 12 config keys only. */
TEST(files_without_the_description_still_load) {
    model *m = tiny("cosine_rope");
    CHECK(m != NULL);
    if (!m) return;
    int n = model_tensor_count(m);
    st_write_entry *e = calloc((size_t)n, sizeof *e);
    for (int i = 0; i < n; i++) {
        const model_tensor *t = model_tensor_at(m, i);
        e[i].name = t->name;
        e[i].ndim = t->ndim;
        e[i].shape[0] = t->shape[0];
        e[i].shape[1] = t->shape[1];
        e[i].data = model_params(m) + t->offset;
    }
    char vals[MODEL_META_COUNT][48];
    const char *kv[2 * MODEL_META_COUNT];
    model_config_metadata(model_get_config(m), vals, kv);
    CHECK(!strcmp(kv[2 * 11], "scale_clamp") && !strcmp(kv[2 * 12], "positions"));
    engine_error err;
    CHECK(safetensors_write(path_of("old.safetensors"), e, n, kv, 12, &err) == ENGINE_OK);
    free(e);
    model *back = NULL;
    CHECK_MSG(model_load(&back, path_of("old.safetensors"), 1, 1, 0, &err) == ENGINE_OK, "%s", err.message);
    if (back) {
        CHECK(model_param_count(back) == model_param_count(m));
        CHECK(!memcmp(model_params(back), model_params(m), model_param_count(m) * sizeof(real)));
    }
    model_free(back);
    model_free(m);
}

/* A file whose description disagrees with this engine names the key and is not loaded. */
TEST(a_file_claiming_another_computation_is_refused) {
    static const char *const claims[][2] = {
        {"rope_layout", "half_split"}, {"gelu", "erf"},          {"layernorm_eps", "1e-6"}, {"cosine_eps", "1e-8"},
        {"qk_transform", "rope"},      {"score_scale", "fixed"}, {"positions", "learned"}};
    model *m = tiny("cosine_rope");
    CHECK(m != NULL);
    if (!m) return;
    engine_error err;
    /* spelled differently but equal: accepted */
    const char *same[] = {"layernorm_eps", "0.00001"};
    CHECK(model_save(m, path_of("same.safetensors"), same, 1, &err) == ENGINE_OK);
    model *back = NULL;
    CHECK_MSG(model_load(&back, path_of("same.safetensors"), 1, 1, 0, &err) == ENGINE_OK, "%s", err.message);
    model_free(back);
    for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++) {
        /* extra pairs come after the description in the header object: the later one wins */
        CHECK(model_save(m, path_of("claim.safetensors"), claims[i], 1, &err) == ENGINE_OK);
        safetensors *st = NULL;
        CHECK(safetensors_open(&st, path_of("claim.safetensors"), &err) == ENGINE_OK);
        CHECK_MSG(st && meta_is(st, claims[i][0], claims[i][1]), "%s not written", claims[i][0]);
        safetensors_close(st);
        back = NULL;
        engine_status s = model_load(&back, path_of("claim.safetensors"), 1, 1, 0, &err);
        CHECK_MSG(s == ENGINE_ERR_FORMAT && strstr(err.message, claims[i][0]), "%s=%s: status %d, %s", claims[i][0],
                  claims[i][1], (int)s, err.message);
        model_free(back);
    }
    model_free(m);
}

static engine_status synth_batch(void *ctx, corpus_split split, long step, int32_t *out, engine_error *err) {
    const train_config *c = ctx;
    int n = c->batch * (c->model.seq_len + 1);
    for (int i = 0; i < n; i++) out[i] = (int32_t)((i * 7 + step * 3 + (split == CORPUS_SPLIT_VAL)) % c->model.vocab);
    return ENGINE_OK;
}

TEST(checkpoints_and_saved_weights_carry_the_run) {
    train_config c;
    train_config_defaults(&c);
    c.model = tiny_config("rope");
    c.batch = 2;
    c.steps = 3;
    c.eval_every = 0;
    const char *kv[] = {"tokenizer", "bytes", "run_id", "42"};
    c.meta_kv = kv;
    c.n_meta = 2;
    c.checkpoint_path = path_of("ck.safetensors");
    c.save_path = path_of("saved.safetensors");
    train_source src = {.ctx = &c, .batch = synth_batch, .has_val = 1};
    engine_error err;
    CHECK_MSG(train_run_source(&c, &src, 1, NULL, NULL, &err) == ENGINE_OK, "%s", err.message);
    const char *files[] = {c.checkpoint_path, c.save_path}, *formats[] = {"attnlab-checkpoint", "attnlab-weights"};
    for (int f = 0; f < 2; f++) {
        safetensors *st = NULL;
        CHECK(safetensors_open(&st, files[f], &err) == ENGINE_OK);
        if (!st) continue;
        CHECK_MSG(meta_is(st, "format", formats[f]), "%s", files[f]);
        CHECK_MSG(meta_is(st, "step", "3"), "%s: step", files[f]);
        CHECK(meta_is(st, "precision", "fp32"));
        CHECK(meta_is(st, "tokenizer", "bytes"));
        CHECK(meta_is(st, "run_id", "42"));
        CHECK(meta_is(st, "rope_layout", "interleaved"));
        CHECK_EQ_INT(safetensors_find(st, "adamw.m.wte") != NULL, f == 0);
        safetensors_close(st);
    }
    /* the engine's own keys are not the caller's to set */
    const char *bad[][2] = {{"step", "9"}, {"rope_layout", "half_split"}, {"format", "x"}, {"", "x"}};
    for (int i = 0; i < 4; i++) {
        c.meta_kv = bad[i];
        c.n_meta = 1;
        CHECK_MSG(train_config_validate(&c, &err) == ENGINE_ERR_INVALID, "key '%s' accepted", bad[i][0]);
    }
    c.n_meta = TRAIN_MAX_META + 1;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID);
}

/* The weights-only copy of a checkpoint: model tensors byte for byte, no moments, metadata merged. */
TEST(subset_drops_the_optimiser_and_keeps_the_bytes) {
    safetensors *ck = NULL;
    engine_error err;
    CHECK(safetensors_open(&ck, path_of("ck.safetensors"), &err) == ENGINE_OK);
    if (!ck) return;
    FILE *f = fopen(path_of("sub.safetensors"), "wb");
    CHECK(f != NULL);
    if (!f) {
        safetensors_close(ck);
        return;
    }
    const char *kv[] = {"format", "attnlab-weights", "extra", "yes"};
    CHECK(safetensors_write_subset(ck, f, "adamw.", kv, 2, &err) == ENGINE_OK);
    CHECK(fclose(f) == 0);
    safetensors *sub = NULL;
    CHECK_MSG(safetensors_open(&sub, path_of("sub.safetensors"), &err) == ENGINE_OK, "%s", err.message);
    if (sub) {
        int kept = 0;
        for (int i = 0; i < safetensors_count(ck); i++) {
            const st_tensor *t = safetensors_at(ck, i), *u = safetensors_find(sub, t->name);
            if (!strncmp(t->name, "adamw.", 6)) {
                CHECK_MSG(u == NULL, "%s kept", t->name);
                continue;
            }
            kept++;
            CHECK_MSG(u && u->nbytes == t->nbytes && !memcmp(u->data, t->data, t->nbytes) && u->ndim == t->ndim,
                      "%s differs", t->name);
        }
        CHECK_EQ_INT(safetensors_count(sub), kept);
        CHECK_EQ_INT(3 * kept, safetensors_count(ck));
        CHECK(meta_is(sub, "format", "attnlab-weights"));
        CHECK(meta_is(sub, "extra", "yes"));
        CHECK(meta_is(sub, "step", "3"));
        CHECK(meta_is(sub, "tokenizer", "bytes"));
        model *m = NULL;
        CHECK_MSG(model_load(&m, path_of("sub.safetensors"), 1, 1, 0, &err) == ENGINE_OK, "%s", err.message);
        model_free(m);
    }
    safetensors_close(sub);
    safetensors_close(ck);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/attnlab-wm-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(weights_describe_the_computation);
    RUN(files_without_the_description_still_load);
    RUN(a_file_claiming_another_computation_is_refused);
    RUN(checkpoints_and_saved_weights_carry_the_run);
    RUN(subset_drops_the_optimiser_and_keeps_the_bytes);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    return test_summary();
}
