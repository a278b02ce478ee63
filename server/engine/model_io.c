#include "model_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "layers.h"
#include "safetensors.h"

#ifndef ATTNLAB_VERSION
#define ATTNLAB_VERSION "unknown"
#endif

/* How the row's q/k transform is built from its flags: "none", "rope", "l2norm", "l2norm,rope", or
 * "custom" for a transform the flags do not describe. */
static const char *qk_transform_name(const attention_variant *v) {
    int rot = (v->flags & ATTENTION_ROTATES) != 0, norm = (v->flags & ATTENTION_NORMALISES_QK) != 0;
    if (rot && norm) return "l2norm,rope";
    if (rot) return "rope";
    if (norm) return "l2norm";
    return v->qk_forward ? "custom" : "none";
}

static const char *score_scale_name(attention_scale_form f) {
    return f == ATTENTION_SCALE_TAU ? "inv_tau" : f == ATTENTION_SCALE_MULT ? "mult" : "fixed";
}

void model_config_metadata(const model_config *c, char vals[MODEL_META_COUNT][48],
                           const char *kv[2 * MODEL_META_COUNT]) {
    static const char *keys[MODEL_META_COUNT] = {
        "n_layer", "n_head", "d_model", "seq_len", "vocab", "attention", "rope_base", "tau_init", "tau_param",
        "scale_init", "scale_param", "scale_clamp",
        /* how the engine computes (model.h): enough to rebuild the model elsewhere */
        "positions", "qk_transform", "rope_layout", "cosine_eps", "score_scale", "fixed_scale", "layernorm_eps", "gelu",
        "attnlab_version"};
    const attention_variant *v = model_config_attention(c);
    attention_scale sc = model_config_scale(c);
    snprintf(vals[0], 48, "%d", c->n_layer);
    snprintf(vals[1], 48, "%d", c->n_head);
    snprintf(vals[2], 48, "%d", c->d_model);
    snprintf(vals[3], 48, "%d", c->seq_len);
    snprintf(vals[4], 48, "%d", c->vocab);
    snprintf(vals[5], 48, "%s", attention_kind_name(c->attention));
    snprintf(vals[6], 48, "%.17g", c->rope_base);
    snprintf(vals[7], 48, "%.17g", attention_scale_init(c->tau_init, c->d_model / c->n_head));
    snprintf(vals[8], 48, "%s", tau_param_name(c->tau_param));
    snprintf(vals[9], 48, "%.17g", attention_scale_init(c->scale_init, c->d_model / c->n_head));
    snprintf(vals[10], 48, "%s", tau_param_name(c->scale_param));
    snprintf(vals[11], 48, "%.17g", c->scale_clamp);
    snprintf(vals[12], 48, "%s", v && (v->flags & ATTENTION_LEARNED_POSITIONS) ? "learned" : "none");
    snprintf(vals[13], 48, "%s", v ? qk_transform_name(v) : "none");
    snprintf(vals[14], 48, "%s", MODEL_ROPE_LAYOUT);
    snprintf(vals[15], 48, "%.17g", COSINE_NORM_EPS);
    snprintf(vals[16], 48, "%s", score_scale_name(sc.form));
    if (v && sc.form == ATTENTION_SCALE_FIXED)
        snprintf(vals[17], 48, "%.17g", v->fixed_scale(c->d_model / c->n_head));
    else
        snprintf(vals[17], 48, "none");
    snprintf(vals[18], 48, "%.17g", LAYERNORM_EPS);
    snprintf(vals[19], 48, "%s", MODEL_GELU);
    snprintf(vals[20], 48, "%s", ATTNLAB_VERSION);
    for (int i = 0; i < MODEL_META_COUNT; i++) {
        kv[2 * i] = keys[i];
        kv[2 * i + 1] = vals[i];
    }
}

engine_status model_save(const model *m, const char *path, const char *const *extra_meta, int n_extra,
                         engine_error *err) {
    const int n = model_tensor_count(m);
    const real *params = model_params_read(m);
    st_write_entry *e = calloc((size_t)n, sizeof *e);
    if (!e) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory writing %s", path);
    for (int i = 0; i < n; i++) {
        const model_tensor *t = model_tensor_at(m, i);
        e[i].name = t->name;
        e[i].ndim = t->ndim;
        e[i].shape[0] = t->shape[0];
        e[i].shape[1] = t->shape[1];
        e[i].data = params + t->offset;
    }
    char vals[MODEL_META_COUNT][48];
    const char *kv[2 * MODEL_META_COUNT + 2 + 2 * MODEL_SAVE_MAX_EXTRA];
    model_config_metadata(model_get_config(m), vals, kv);
    if (n_extra < 0 || n_extra > MODEL_SAVE_MAX_EXTRA) {
        free(e);
        return engine_fail(err, ENGINE_ERR_INVALID, "too many metadata entries");
    }
    kv[2 * MODEL_META_COUNT] = "format";
    kv[2 * MODEL_META_COUNT + 1] = "attnlab-weights";
    for (int i = 0; i < 2 * n_extra; i++) kv[2 * MODEL_META_COUNT + 2 + i] = extra_meta[i];
    engine_status rc = safetensors_write(path, e, n, kv, MODEL_META_COUNT + 1 + n_extra, err);
    free(e);
    return rc;
}

static engine_status meta_int(const safetensors *st, const char *path, const char *key, int *out, engine_error *err) {
    const char *s = safetensors_meta(st, key);
    char *end;
    if (!s) return engine_fail(err, ENGINE_ERR_FORMAT, "%s: metadata has no '%s'", path, key);
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < -2147483647L || v > 2147483647L)
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s: metadata '%s' = '%s' is not an integer", path, key, s);
    *out = (int)v;
    return ENGINE_OK;
}

/* The description keys model_config_metadata writes after the config (index 12 on), where the file
 * has them, against what this engine computes for c. attnlab_version is not checked. Numbers are
 * compared as numbers (a file may spell 1e-5 as 1.0000000000000001e-05). */
static engine_status check_description(const safetensors *st, const char *path, const model_config *c,
                                       engine_error *err) {
    char vals[MODEL_META_COUNT][48];
    const char *kv[2 * MODEL_META_COUNT];
    model_config_metadata(c, vals, kv);
    for (int i = 12; i < MODEL_META_COUNT; i++) {
        const char *key = kv[2 * i], *want = kv[2 * i + 1], *got = safetensors_meta(st, key);
        if (!got || !strcmp(key, "attnlab_version") || !strcmp(got, want)) continue;
        char *e1, *e2;
        double g = strtod(got, &e1), w = strtod(want, &e2);
        if (e1 != got && !*e1 && e2 != want && !*e2 && g == w) continue;
        return engine_fail(err, ENGINE_ERR_FORMAT,
                           "%s: metadata '%s' = '%s', but this engine computes %s with '%s': refusing a model it "
                           "would compute differently",
                           path, key, got, attention_kind_name(c->attention), want);
    }
    return ENGINE_OK;
}

static engine_status config_from_st(const safetensors *st, const char *path, model_config *c, engine_error *err) {
    model_config_defaults(c);
    engine_status rc;
    if ((rc = meta_int(st, path, "n_layer", &c->n_layer, err)) ||
        (rc = meta_int(st, path, "n_head", &c->n_head, err)) ||
        (rc = meta_int(st, path, "d_model", &c->d_model, err)) ||
        (rc = meta_int(st, path, "seq_len", &c->seq_len, err)) || (rc = meta_int(st, path, "vocab", &c->vocab, err)))
        return rc;
    if (attention_kind_parse(safetensors_meta(st, "attention"), &c->attention))
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s: metadata 'attention' is missing or unknown", path);
    const char *s = safetensors_meta(st, "rope_base");
    if (s) c->rope_base = strtod(s, NULL);
    s = safetensors_meta(st, "tau_init");
    if (s) c->tau_init = strtod(s, NULL);
    s = safetensors_meta(st, "tau_param");
    if (s && tau_param_parse(s, &c->tau_param))
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s: metadata 'tau_param' = '%s' is unknown", path, s);
    s = safetensors_meta(st, "scale_init");
    if (s) c->scale_init = strtod(s, NULL);
    s = safetensors_meta(st, "scale_param");
    if (s && tau_param_parse(s, &c->scale_param))
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s: metadata 'scale_param' = '%s' is unknown", path, s);
    s = safetensors_meta(st, "scale_clamp");
    if (s) c->scale_clamp = strtod(s, NULL);
    engine_error e2;
    if (model_config_validate(c, &e2))
        return engine_fail(err, ENGINE_ERR_FORMAT, "%s: metadata config is invalid: %s", path, e2.message);
    return check_description(st, path, c, err);
}

engine_status model_config_from_safetensors(const safetensors *st, const char *path, model_config *cfg,
                                            engine_error *err) {
    return config_from_st(st, path, cfg, err);
}

engine_status model_config_from_file(const char *path, model_config *cfg, engine_error *err) {
    safetensors *st;
    engine_status rc = safetensors_open(&st, path, err);
    if (rc) return rc;
    rc = config_from_st(st, path, cfg, err);
    safetensors_close(st);
    return rc;
}

engine_status model_load_params(model *m, const char *path, engine_error *err) {
    real *params = model_params(m); /* which marks the bf16 copies stale */
    const model_config *mc = model_get_config(m);
    const int n = model_tensor_count(m);
    safetensors *st;
    engine_status rc = safetensors_open(&st, path, err);
    if (rc) return rc;
    model_config fc;
    rc = config_from_st(st, path, &fc, err);
    if (!rc && (fc.n_layer != mc->n_layer || fc.n_head != mc->n_head || fc.d_model != mc->d_model ||
                fc.seq_len != mc->seq_len || fc.vocab != mc->vocab || fc.attention != mc->attention ||
                fc.tau_param != mc->tau_param || fc.scale_param != mc->scale_param || fc.rope_base != mc->rope_base))
        rc = engine_fail(err, ENGINE_ERR_FORMAT,
                         "%s holds a different model (L%d H%d C%d T%d V%d %s) than asked for (L%d H%d C%d T%d V%d %s)",
                         path, fc.n_layer, fc.n_head, fc.d_model, fc.seq_len, fc.vocab,
                         attention_kind_name(fc.attention), mc->n_layer, mc->n_head, mc->d_model, mc->seq_len,
                         mc->vocab, attention_kind_name(mc->attention));
    for (int i = 0; !rc && i < n; i++) {
        const model_tensor *t = model_tensor_at(m, i);
        rc = safetensors_read_real(st, t->name, t->ndim, t->shape, params + t->offset, err);
    }
    for (int i = 0; !rc && i < n; i++) {
        const model_tensor *t = model_tensor_at(m, i);
        for (size_t j = 0; j < t->numel; j++)
            if (!isfinite((double)params[t->offset + j])) {
                rc = engine_fail(err, ENGINE_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value", path, t->name);
                break;
            }
    }
    safetensors_close(st);
    return rc;
}

engine_status model_load(model **out, const char *path, int batch, int n_threads, int with_grads, engine_error *err) {
    *out = NULL;
    model_config c;
    engine_status rc = model_config_from_file(path, &c, err);
    if (rc) return rc;
    model *m;
    rc = model_new(&m, &c, batch, n_threads, with_grads, err);
    if (rc) return rc;
    rc = model_load_params(m, path, err);
    if (rc) {
        model_free(m);
        return rc;
    }
    *out = m;
    return ENGINE_OK;
}
