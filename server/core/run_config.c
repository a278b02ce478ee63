#include "core/run_config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/attention.h"
#include "core/corpora.h"

extern const char openapi_json[];
static json_t *openapi;
static const json_t *schema_props; /* components.schemas.RunConfig.properties */

int run_config_init(void) {
    if (openapi) return 0;
    openapi = json_loads(openapi_json, 0, NULL);
    schema_props = json_object_get(
        json_object_get(json_object_get(json_object_get(openapi, "components"), "schemas"), "RunConfig"), "properties");
    if (!json_is_object(schema_props)) return -1;
    /* the default precision is this CPU's (asked at run time), so forms, flags and stored configs show it */
    json_t *prec = json_object_get(schema_props, "precision");
    if (prec && json_object_set_new(prec, "default", json_string(precision_name(precision_default()))) < 0) {
        run_config_cleanup(); /* out of memory: the next call tries again */
        return -1;
    }
    return 0;
}

void run_config_cleanup(void) {
    json_decref(openapi);
    openapi = NULL;
    schema_props = NULL;
}

const json_t *run_config_openapi(void) { return openapi; }

const json_t *run_config_property(const char *key) { return json_object_get(schema_props, key); }

static int fail(run_config_error *err, const char *prefix, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(run_config_error *err, const char *prefix, const char *field, const char *fmt, ...) {
    snprintf(err->field, sizeof err->field, "%s%s", prefix, field);
    va_list ap;
    va_start(ap, fmt);
    char msg[200];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err->message, sizeof err->message, "%s%s %s", prefix, field, msg);
    return -1;
}

/* Checks one value against its property schema. */
static int check_value(const char *prefix, const char *key, const json_t *v, const json_t *prop,
                       run_config_error *err) {
    const char *type = json_string_value(json_object_get(prop, "type"));
    if (!strcmp(type, "integer")) {
        /* 12.0 is accepted as 12; 12.5 is not. */
        if (json_is_real(v) && (json_real_value(v) != floor(json_real_value(v)) || fabs(json_real_value(v)) > 9e15))
            return fail(err, prefix, key, "must be an integer");
        if (!json_is_integer(v) && !json_is_real(v)) return fail(err, prefix, key, "must be an integer");
    } else if (!strcmp(type, "number")) {
        if (!json_is_number(v)) return fail(err, prefix, key, "must be a number");
    } else if (!strcmp(type, "string")) {
        if (!json_is_string(v)) return fail(err, prefix, key, "must be a string");
    } else if (!strcmp(type, "boolean")) {
        if (!json_is_boolean(v)) return fail(err, prefix, key, "must be true or false");
    }
    if (json_is_number(v)) {
        double x = json_number_value(v);
        const json_t *mn = json_object_get(prop, "minimum"), *mx = json_object_get(prop, "maximum");
        int excl = json_is_true(json_object_get(prop, "exclusiveMinimum"));
        if (!isfinite(x)) return fail(err, prefix, key, "must be finite");
        if (mn && (excl ? x <= json_number_value(mn) : x < json_number_value(mn)))
            return fail(err, prefix, key, "must be %s %g", excl ? ">" : ">=", json_number_value(mn));
        if (mx && x > json_number_value(mx)) return fail(err, prefix, key, "must be <= %g", json_number_value(mx));
    }
    const json_t *en = json_object_get(prop, "enum");
    if (en) {
        size_t i;
        const json_t *opt;
        json_array_foreach(en, i, opt) if (json_equal((json_t *)opt, (json_t *)v)) return 0;
        char list[160] = "";
        json_array_foreach(en, i, opt) {
            if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, json_string_value(opt), sizeof list - strlen(list) - 1);
        }
        return fail(err, prefix, key, "must be one of: %s", list);
    }
    /* The schema's one pattern is a corpus name's (^[a-z0-9_-]{1,40}$). */
    if (json_object_get(prop, "pattern") && !corpora_name_ok(json_string_value(v)))
        return fail(err, prefix, key, "must be " CORPORA_NAME_RULE);
    return 0;
}

static long long get_int(const json_t *o, const char *k) { return (long long)json_number_value(json_object_get(o, k)); }
static double get_num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }
static const char *get_str(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

int run_config_normalize(const json_t *in, const char *prefix, json_t **out, run_config_error *err) {
    *out = NULL;
    if (!prefix) prefix = "";
    if (in && !json_is_object(in)) return fail(err, "", prefix[0] ? "config" : "config", "must be an object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)in, key, v) {
        const json_t *prop = json_object_get(schema_props, key);
        if (!prop) return fail(err, prefix, key, "is not a known field");
        if (check_value(prefix, key, v, prop, err) < 0) return -1;
    }
    json_t *cfg = json_object();
    if (!cfg) return fail(err, prefix, "config", "could not be built (out of memory)");
    int bad = 0;
    json_object_foreach((json_t *)schema_props, key, v) {
        json_t *given = in ? json_object_get(in, key) : NULL;
        const char *type = json_string_value(json_object_get(v, "type"));
        if (given) {
            /* Integers are stored as integers even when sent as 12.0. */
            bad |= json_object_set_new(cfg, key,
                                       !strcmp(type, "integer") ? json_integer((json_int_t)json_number_value(given))
                                                                : json_deep_copy(given)) < 0;
        } else if (json_object_get(v, "default")) {
            bad |= json_object_set(cfg, key, json_object_get(v, "default")) < 0;
        }
    }
    if (bad) {
        json_decref(cfg);
        return fail(err, prefix, "config", "could not be built (out of memory)");
    }
    /* Rules that tie fields together. */
    long long C = get_int(cfg, "d_model"), H = get_int(cfg, "n_head");
    const attention_variant *attention = attention_find(get_str(cfg, "attention"));
    int rc = 0;
    if (!attention)
        rc = fail(err, prefix, "attention", "is not a variant of this engine");
    else if (C % H != 0)
        rc = fail(err, prefix, "n_head", "must divide d_model (%lld does not divide %lld)", H, C);
    else if ((attention->flags & ATTENTION_ROTATES) && (C / H) % 2 != 0)
        rc = fail(err, prefix, "n_head", "must leave an even head size for RoPE (d_model/n_head = %lld)", C / H);
    else if (get_int(cfg, "warmup_steps") > get_int(cfg, "steps"))
        rc = fail(err, prefix, "warmup_steps", "must not exceed steps (%lld)", get_int(cfg, "steps"));
    /* bf16 needs d_model % 16 == 0: the CPU's default gives way to fp32, a bf16 asked for is an error */
    const char *prec = get_str(cfg, "precision");
    if (!rc && prec && !strcmp(prec, "bf16") && C % 16 != 0) {
        if (in && json_object_get(in, "precision"))
            rc = fail(err, prefix, "precision", "bf16 needs d_model a multiple of 16 (d_model %lld)", C);
        else if (json_object_set_new(cfg, "precision", json_string("fp32")) < 0)
            rc = fail(err, prefix, "config", "could not be built (out of memory)");
    }
    if (!rc && !json_object_get(cfg, "tau_init") &&
        json_object_set_new(cfg, "tau_init", json_real(attention_scale_init(0, (int)(C / H)))) < 0)
        rc = fail(err, prefix, "config", "could not be built (out of memory)");
    if (!rc && !json_object_get(cfg, "scale_init") &&
        json_object_set_new(cfg, "scale_init", json_real(attention_scale_init(0, (int)(C / H)))) < 0)
        rc = fail(err, prefix, "config", "could not be built (out of memory)");
    if (!rc && get_num(cfg, "scale_clamp") > 0 && get_num(cfg, "scale_clamp") < get_num(cfg, "scale_init"))
        rc = fail(err, prefix, "scale_clamp", "must be 0 (no clamp) or at least scale_init (%g)",
                  get_num(cfg, "scale_init"));
    if (rc) {
        json_decref(cfg);
        return -1;
    }
    *out = cfg;
    return 0;
}

int run_config_check_field(const char *key, const json_t *v, const char *prefix, run_config_error *err) {
    if (!prefix) prefix = "";
    const json_t *prop = json_object_get(schema_props, key);
    if (!prop) return fail(err, prefix, key, "is not a known field");
    return check_value(prefix, key, v, prop, err);
}

int run_config_field_from_text(const char *key, const char *text, const char *prefix, json_t **out,
                               run_config_error *err) {
    *out = NULL;
    if (!prefix) prefix = "";
    const json_t *prop = json_object_get(schema_props, key);
    if (!prop) return fail(err, prefix, key, "is not a known field");
    const char *type = json_string_value(json_object_get(prop, "type"));
    json_t *v = NULL;
    char *end = NULL;
    if (!strcmp(type, "integer")) {
        errno = 0;
        long long x = strtoll(text, &end, 10);
        if (!*text || *end || errno) return fail(err, prefix, key, "must be an integer, not '%.40s'", text);
        v = json_integer(x);
    } else if (!strcmp(type, "number")) {
        errno = 0;
        double x = strtod(text, &end);
        if (!*text || *end || errno || !isfinite(x))
            return fail(err, prefix, key, "must be a number, not '%.40s'", text);
        v = json_real(x);
    } else if (!strcmp(type, "boolean")) {
        if (strcmp(text, "true") && strcmp(text, "false"))
            return fail(err, prefix, key, "must be true or false, not '%.40s'", text);
        v = json_boolean(!strcmp(text, "true"));
    } else {
        v = json_string(text);
    }
    if (!v) return fail(err, prefix, key, "could not be read (out of memory, or not UTF-8)");
    if (check_value(prefix, key, v, prop, err) < 0) {
        json_decref(v);
        return -1;
    }
    *out = v;
    return 0;
}

json_t *run_config_merge(const json_t *base, const json_t *overrides) {
    json_t *m = base ? json_deep_copy(base) : json_object();
    if (m && json_is_object(m) && json_is_object(overrides) && json_object_update(m, (json_t *)overrides) < 0) {
        json_decref(m); /* out of memory */
        return NULL;
    }
    return m;
}

void run_config_to_train(const json_t *cfg, int vocab, train_config *tc) {
    train_config_defaults(tc);
    model_config *mc = &tc->model;
    attention_kind_parse(get_str(cfg, "attention"), &mc->attention);
    mc->n_layer = (int)get_int(cfg, "n_layer");
    mc->n_head = (int)get_int(cfg, "n_head");
    mc->d_model = (int)get_int(cfg, "d_model");
    mc->seq_len = (int)get_int(cfg, "seq_len");
    mc->vocab = vocab;
    mc->rope_base = get_num(cfg, "rope_base");
    mc->tau_init = get_num(cfg, "tau_init");
    tau_param_parse(get_str(cfg, "tau_param"), &mc->tau_param);
    /* configs stored before these fields existed keep the engine's defaults */
    mc->scale_init = get_num(cfg, "scale_init");
    tau_param_parse(get_str(cfg, "scale_param"), &mc->scale_param);
    mc->scale_clamp = get_num(cfg, "scale_clamp");
    /* configs stored before precision existed ran in fp32 (train_config_defaults) */
    precision_parse(get_str(cfg, "precision"), &tc->precision);
    tc->batch = (int)get_int(cfg, "batch");
    tc->steps = (long)get_int(cfg, "steps");
    tc->lr = get_num(cfg, "lr");
    tc->beta1 = get_num(cfg, "beta1");
    tc->beta2 = get_num(cfg, "beta2");
    tc->eps = get_num(cfg, "eps");
    tc->weight_decay = get_num(cfg, "weight_decay");
    tc->tau_weight_decay = json_is_true(json_object_get(cfg, "tau_weight_decay"));
    if (json_object_get(cfg, "scale_lr_mult")) tc->scale_lr_mult = get_num(cfg, "scale_lr_mult");
    tc->grad_clip = get_num(cfg, "grad_clip");
    tc->schedule = !strcmp(get_str(cfg, "lr_schedule"), "cosine") ? LR_SCHEDULE_COSINE : LR_SCHEDULE_CONSTANT;
    tc->warmup_steps = (long)get_int(cfg, "warmup_steps");
    tc->min_lr_ratio = get_num(cfg, "min_lr_ratio");
    tc->seed = (uint64_t)get_int(cfg, "seed");
    tc->order = !strcmp(get_str(cfg, "order"), "shuffled") ? CORPUS_ORDER_SHUFFLED : CORPUS_ORDER_SEQUENTIAL;
    tc->val_fraction = get_num(cfg, "val_fraction");
    tc->eval_every = (long)get_int(cfg, "eval_every");
    tc->eval_batches = (int)get_int(cfg, "eval_batches");
    tc->checkpoint_every = (long)get_int(cfg, "checkpoint_every");
    /* configs stored before loss_on existed counted every target */
    const char *loss_on = get_str(cfg, "loss_on");
    tc->loss_on = loss_on && !strcmp(loss_on, "answers") ? TRAIN_LOSS_ANSWERS : TRAIN_LOSS_ALL;
}

/* The RunConfig keys that only some configs use, and what a config needs for the key to matter. */
typedef enum { USED_WITH_ROPE, USED_WITH_TAU, USED_WITH_MULT, USED_WITH_LEARNED_SCALE, USED_WITH_COSINE } used_when;
static const struct {
    const char *key;
    used_when when;
} conditional_keys[] = {
    {"rope_base", USED_WITH_ROPE},
    {"tau_init", USED_WITH_TAU},
    {"tau_param", USED_WITH_TAU},
    {"scale_init", USED_WITH_MULT},
    {"scale_param", USED_WITH_MULT},
    {"scale_clamp", USED_WITH_MULT},
    {"tau_weight_decay", USED_WITH_LEARNED_SCALE},
    {"scale_lr_mult", USED_WITH_LEARNED_SCALE},
    {"warmup_steps", USED_WITH_COSINE},
    {"min_lr_ratio", USED_WITH_COSINE},
};

int run_config_key_used(const json_t *cfg, const char *key) {
    for (size_t i = 0; i < sizeof conditional_keys / sizeof conditional_keys[0]; i++) {
        if (strcmp(conditional_keys[i].key, key) != 0) continue;
        if (conditional_keys[i].when == USED_WITH_COSINE) {
            const char *schedule = json_string_value(json_object_get(cfg, "lr_schedule"));
            return !schedule || strcmp(schedule, "constant") != 0;
        }
        const attention_variant *v = attention_find(json_string_value(json_object_get(cfg, "attention")));
        if (!v) return 1;
        switch (conditional_keys[i].when) {
        case USED_WITH_ROPE: return (v->flags & ATTENTION_ROTATES) != 0;
        case USED_WITH_TAU: return v->scale == ATTENTION_SCALE_TAU;
        case USED_WITH_MULT: return v->scale == ATTENTION_SCALE_MULT;
        case USED_WITH_LEARNED_SCALE: return v->scale != ATTENTION_SCALE_FIXED;
        case USED_WITH_COSINE: break;
        }
    }
    return 1;
}
