#include "services/svc_experiments.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "util/log.h"
#include "services/run_config.h"
#include "services/svc_runs.h"

/* The seed blog's configuration: 3 layers, 4 heads, d_model 128, 128-token chunks, AdamW lr 3e-4,
 * 2000 steps, batch 32, the default corpus, seed 1337. */
static json_t *seed_blog_base(void) {
    return json_pack("{s:i, s:i, s:i, s:i, s:f, s:i, s:i, s:s, s:i}", "n_layer", 3, "n_head", 4, "d_model", 128,
                     "seq_len", 128, "lr", 3e-4, "steps", 2000, "batch", 32, "corpus", "default", "seed", 1337);
}

/* positional-precision's schedule (see pp_base). */
#define PP_BATCH 32
#define PP_STEPS 600
#define PP_LR 1e-3
#define PP_EVAL_EVERY 50
#define PP_TINY_STEPS 300

/* A classroom-sized version: the built-in corpus and a model that trains in seconds. */
static json_t *tiny_overrides(void) {
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "corpus", "small", "steps", 200, "n_layer", 2,
                     "n_head", 4, "d_model", 64, "seq_len", 64, "batch", 8, "eval_every", 20, "checkpoint_every", 50);
}

/* rope against cosine_rope as the blog ran it (cos / tau, tau per head initialised to sqrt(d),
 * weight decay on tau). */
static json_t *blog_variants(void) {
    return json_pack("[{s:s, s:{s:s}}, {s:s, s:{s:s}}]", "name", "rope", "config", "attention", "rope", "name",
                     "cosine_rope", "config", "attention", "cosine_rope");
}

/* The scale question: is the blog's cosine arm held back by its temperature? rope; cosine_rope as
 * in the blog; the same with tau excluded from weight decay; and the published form, the cosine
 * multiplied by a learned per-head scale s = e^theta initialised to 10 and used as min(s, 100),
 * excluded from weight decay (Swin V2's logit scale). */
static json_t *scale_variants(void) {
    return json_pack("[{s:s, s:{s:s}}, {s:s, s:{s:s}}, {s:s, s:{s:s, s:b}}, {s:s, s:{s:s, s:s, s:f, s:f, s:b}}]",
                     "name", "rope", "config", "attention", "rope", "name", "cosine_rope", "config", "attention",
                     "cosine_rope", "name", "cosine_rope_no_wd", "config", "attention", "cosine_rope",
                     "tau_weight_decay", 0, "name", "cosine_log_scale_10", "config", "attention", "cosine_rope_scale",
                     "scale_param", "log", "scale_init", 10.0, "scale_clamp", 100.0, "tau_weight_decay", 0);
}

/* The blog's first open question: does tau specialise across heads with longer training? The seed
 * config for 10,000 steps, a checkpoint every 500; the per-step head spread (tau_ratio, tau_std,
 * entropy_frac_std, distance_std) is compared at step 2000 and at the end by
 * GET /api/experiments/{id}/head-spread. */
static json_t *tau_long_base(void) {
    json_t *b = seed_blog_base();
    if (b && (json_object_set_new(b, "steps", json_integer(10000)) < 0 ||
              json_object_set_new(b, "checkpoint_every", json_integer(500)) < 0 ||
              json_object_set_new(b, "eval_every", json_integer(250)) < 0)) {
        json_decref(b);
        return NULL;
    }
    return b;
}

/* tau-long in a classroom: the built-in corpus, a small model, 1500 steps (head-spread ?at=300). */
static json_t *tau_long_tiny(void) {
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f}", "corpus", "small", "steps", 1500, "n_layer",
                     2, "n_head", 4, "d_model", 64, "seq_len", 64, "batch", 8, "eval_every", 250, "checkpoint_every",
                     500, "lr", 1e-3);
}

/* The blog's second open question: does angular geometry help where positions must be exact? Four
 * synthetic tasks (engine/tasks.h), each a corpus made from its config when the preset is planned
 * (deterministic, milliseconds), on a model small enough to train in under a minute. The loss
 * counts the answer positions only (loss_on answers): with every target counted, the unpredictable
 * filler tokens drown the answers' gradient and no variant leaves chance within 600 steps (README,
 * open question 2). Exact-match accuracy on the answers is logged at every evaluation (acc,
 * acc.<offset or distance bucket>) and summarised by GET /api/experiments/{id}/accuracy. */
static const struct {
    const char *corpus, *task; /* the corpus name and its tasks config (JSON) */
} pp_tasks[] = {
    {"pp-copy_offset", "{\"kind\":\"copy_offset\",\"seq_len\":64,\"windows\":4096,\"params\":{\"len_min\":8,"
                       "\"len_max\":16},\"offsets\":[1,2,4]}"},
    {"pp-induction", "{\"kind\":\"induction\",\"seq_len\":64,\"windows\":4096,\"params\":{\"len_min\":4,"
                     "\"len_max\":8}}"},
    {"pp-associative_recall", "{\"kind\":\"associative_recall\",\"seq_len\":64,\"windows\":4096,\"params\":"
                              "{\"pairs_min\":2,\"pairs_max\":6}}"},
    {"pp-relative_order", "{\"kind\":\"relative_order\",\"seq_len\":64,\"windows\":4096,\"params\":"
                          "{\"len_min\":8,\"len_max\":24,\"dist_min\":1,\"dist_max\":16}}"},
};
#define N_PP_TASKS (sizeof pp_tasks / sizeof pp_tasks[0])
/* The arms: dot (learned absolute positions), rope, cosine_rope as the blog has it (cos / tau, tau
 * from sqrt(d)), and the control that tells its geometry from its temperature: the same cosine
 * times a learned scale from 10 (Swin V2's, as in attention-scale). */
static const struct {
    const char *name, *config; /* the variant name's tail and its config (JSON) */
} pp_arms[] = {
    {"dot", "{\"attention\":\"dot\"}"},
    {"rope", "{\"attention\":\"rope\"}"},
    {"cosine_rope", "{\"attention\":\"cosine_rope\"}"},
    {"cosine_log_scale_10", "{\"attention\":\"cosine_rope_scale\",\"scale_param\":\"log\",\"scale_init\":10,"
                            "\"scale_clamp\":100,\"tau_weight_decay\":false}"},
};

static json_t *pp_base(void) {
    return json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:f, s:i, s:i, s:i, s:s, s:s}", "n_layer", 2, "n_head",
                     4, "d_model", 64, "seq_len", 64, "batch", PP_BATCH, "steps", PP_STEPS, "lr", PP_LR, "eval_every",
                     PP_EVAL_EVERY, "val_fraction", 0.05, "eval_batches", 4, "checkpoint_every", PP_STEPS, "seed", 1337,
                     "corpus", pp_tasks[0].corpus, "loss_on", "answers");
}

/* One variant per task and arm: "<task>.<arm>", the task's corpus and the arm's config. */
static json_t *pp_variants(void) {
    json_t *v = json_array();
    for (size_t t = 0; v && t < N_PP_TASKS; t++)
        for (size_t k = 0; k < sizeof pp_arms / sizeof pp_arms[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s.%s", pp_tasks[t].corpus + 3, pp_arms[k].name);
            json_t *cfg = json_loads(pp_arms[k].config, 0, NULL);
            if (!cfg || json_object_set_new(cfg, "corpus", json_string(pp_tasks[t].corpus)) < 0 ||
                json_array_append_new(v, json_pack("{s:s, s:o}", "name", name, "config", cfg)) < 0) {
                json_decref(v);
                return NULL;
            }
        }
    return v;
}

/* The same in a classroom: fewer steps. */
static json_t *pp_tiny(void) {
    return json_pack("{s:i, s:i, s:i}", "steps", PP_TINY_STEPS, "checkpoint_every", PP_TINY_STEPS, "eval_every",
                     PP_EVAL_EVERY);
}

/* Makes the task corpora the preset trains on (nothing when they exist with the same config). */
static svc_status pp_prepare(app *a, svc_error *err) {
    for (size_t t = 0; t < N_PP_TASKS; t++) {
        json_t *spec = json_loads(pp_tasks[t].task, 0, NULL);
        tasks_config cfg;
        char field[64], msg[512];
        int bad = !spec || corpora_task_config_parse(spec, &cfg, field, sizeof field, msg, sizeof msg) < 0;
        json_decref(spec);
        if (bad)
            return svc_fail(err, SVC_FAILED, "internal", NULL, "the preset's task %s is malformed", pp_tasks[t].corpus);
        corpora_task_result r = corpora_create_task(a->corpora, pp_tasks[t].corpus, &cfg, msg, sizeof msg);
        if (r == CORPORA_TASK_CONFLICT)
            return svc_fail(err, SVC_CONFLICT, "conflict", "preset", "the preset's corpus %s: %s", pp_tasks[t].corpus,
                            msg);
        if (r == CORPORA_TASK_FAILED) return svc_fail(err, SVC_FAILED, "internal", NULL, "%s", msg);
    }
    return SVC_OK;
}

typedef struct {
    const char *name, *description;
    int replicates;
    json_t *(*variants)(void);
    json_t *(*base)(void);                         /* NULL: the seed blog's config */
    json_t *(*tiny)(void);                         /* NULL: tiny_overrides */
    svc_status (*prepare)(app *a, svc_error *err); /* NULL, or what must exist before its runs (corpora) */
} preset_def;

static const preset_def presets[] = {
    {"seed-blog", "The Cosine-RoPE blog experiment: rope vs cosine_rope, same seed and data order", 1, blog_variants,
     NULL, NULL, NULL},
    {"seed-blog-replicated",
     "The blog experiment with error bars: rope vs cosine_rope, 5 replicates (seeds 1337..1341), replicate i of both "
     "variants sharing its seed and data order",
     5, blog_variants, NULL, NULL, NULL},
    {"attention-scale",
     "Is the cosine arm held back by its scale? rope; cosine_rope as in the blog (cos/tau, tau from sqrt(d), weight "
     "decay on tau); the same without weight decay on tau; cos times a learned log-parameterised scale initialised "
     "to 10 and clamped at 100 without weight decay (Swin V2); 5 replicates each",
     5, scale_variants, NULL, NULL, NULL},
    {"tau-long",
     "The blog's open question 1: does tau specialise across heads with longer training? The seed config for 10,000 "
     "steps, rope vs cosine_rope, a checkpoint every 500, 3 replicates; GET /api/experiments/{id}/head-spread compares "
     "the spread of tau (and of entropy and distance) across heads at step 2000 with the end",
     3, blog_variants, tau_long_base, tau_long_tiny, NULL},
    {"positional-precision",
     "The blog's open question 2: positional precision. dot, rope, cosine_rope and the cosine with a learned log scale "
     "from 10 (Swin V2; tells the geometry from the temperature) on four synthetic tasks (copy at an offset, "
     "induction, "
     "associative recall, relative order; corpora made by the preset), 600 steps with the loss on the answers only, 3 "
     "replicates; exact-match accuracy per offset or distance bucket at every evaluation, "
     "GET /api/experiments/{id}/accuracy",
     3, pp_variants, pp_base, pp_tiny, pp_prepare},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

static json_t *preset_json(const preset_def *d) {
    return json_pack("{s:s, s:s, s:o, s:o, s:i, s:o}", "name", d->name, "description", d->description, "base",
                     d->base ? d->base() : seed_blog_base(), "variants", d->variants(), "replicates", d->replicates,
                     "tiny", d->tiny ? d->tiny() : tiny_overrides());
}

json_t *svc_experiments_presets(void) {
    json_t *out = json_array();
    for (size_t i = 0; out && i < N_PRESETS; i++)
        if (json_array_append_new(out, preset_json(&presets[i])) < 0) {
            json_decref(out);
            return NULL;
        }
    return out;
}

static const preset_def *preset_find(const char *name) {
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

int svc_experiments_variant_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > SVC_EXPERIMENTS_MAX_VARIANT_NAME) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              strchr("_.-=,+", s[i])))
            return 0;
    return 1;
}

/* A grid value as a variant name shows it: integers and booleans as JSON writes them, numbers to 15
 * significant digits (1e-3 is "0.001"), strings as they are. Writes at most len - 1 characters;
 * returns the length it needed. */
static int grid_value_text(const json_t *v, char *buf, size_t len) {
    if (json_is_string(v)) return snprintf(buf, len, "%s", json_string_value(v));
    if (json_is_integer(v)) return snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    if (json_is_real(v)) return snprintf(buf, len, "%.15g", json_real_value(v));
    return snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
}

/* Checks a grid: an object of 1..SVC_EXPERIMENTS_MAX_GRID_KEYS RunConfig keys, each an array of
 * 1..SVC_EXPERIMENTS_MAX_GRID_VALUES distinct values that the key takes; *n gets the number of
 * combinations, or SIZE_MAX once it passes SVC_EXPERIMENTS_MAX_RUNS. */
static svc_status grid_check(const json_t *grid, size_t *n, svc_error *err) {
    *n = 0;
    if (!json_is_object(grid) || json_object_size(grid) < 1 || json_object_size(grid) > SVC_EXPERIMENTS_MAX_GRID_KEYS)
        return svc_fail(err, SVC_INVALID, "invalid_field", "grid",
                        "grid must be an object of 1 to %d config keys, each with an array of values",
                        SVC_EXPERIMENTS_MAX_GRID_KEYS);
    size_t product = 1;
    const char *key;
    const json_t *vals;
    json_object_foreach((json_t *)grid, key, vals) {
        char field[96];
        snprintf(field, sizeof field, "grid.%.80s", key);
        size_t nv = json_array_size(vals);
        if (!json_is_array(vals) || nv < 1 || nv > SVC_EXPERIMENTS_MAX_GRID_VALUES)
            return svc_fail(err, SVC_INVALID, "invalid_field", field, "%s must be an array of 1 to %d values", field,
                            SVC_EXPERIMENTS_MAX_GRID_VALUES);
        for (size_t i = 0; i < nv; i++) {
            const json_t *v = json_array_get(vals, i);
            run_config_error cerr;
            if (run_config_check_field(key, v, "grid.", &cerr) < 0)
                return svc_fail(err, SVC_INVALID, "invalid_field", cerr.field, "%s", cerr.message);
            for (size_t k = 0; k < i; k++)
                if (json_equal((json_t *)v, json_array_get(vals, k)))
                    return svc_fail(err, SVC_INVALID, "invalid_field", field, "%s has the value at [%zu] twice", field,
                                    i);
        }
        product = product > SVC_EXPERIMENTS_MAX_RUNS ? product : product * nv;
    }
    *n = product > SVC_EXPERIMENTS_MAX_RUNS ? SIZE_MAX : product;
    return SVC_OK;
}

/* The variants of a checked grid of n combinations: [{"name":"k1=v1,k2=v2","config":{k1:v1,k2:v2}}]
 * with the first key varying slowest. NULL with err set when out of memory or a name would be too
 * long. */
static json_t *grid_variants(const json_t *grid, size_t n, svc_error *err) {
    size_t nk = json_object_size(grid);
    const char *keys[SVC_EXPERIMENTS_MAX_GRID_KEYS];
    const json_t *vals[SVC_EXPERIMENTS_MAX_GRID_KEYS];
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)grid, key, v) {
        keys[k] = key;
        vals[k++] = v;
    }
    json_t *out = json_array();
    for (size_t c = 0; out && c < n; c++) {
        char name[SVC_EXPERIMENTS_MAX_VARIANT_NAME + 64] = "";
        size_t used = 0, rest = c;
        json_t *cfg = json_object();
        int bad = !cfg;
        /* Combination c in mixed radix, the last key's index changing fastest. */
        size_t idx[SVC_EXPERIMENTS_MAX_GRID_KEYS];
        for (size_t j = nk; j-- > 0;) {
            idx[j] = rest % json_array_size(vals[j]);
            rest /= json_array_size(vals[j]);
        }
        for (size_t j = 0; j < nk && !bad; j++) {
            const json_t *x = json_array_get(vals[j], idx[j]);
            char text[64];
            grid_value_text(x, text, sizeof text);
            int w = snprintf(name + used, sizeof name - used, "%s%s=%s", j ? "," : "", keys[j], text);
            if (w < 0 || (size_t)w >= sizeof name - used) {
                used = sizeof name;
                break;
            }
            used += (size_t)w;
            bad = json_object_set_new(cfg, keys[j], json_deep_copy(x)) < 0;
        }
        if (!bad && (used > SVC_EXPERIMENTS_MAX_VARIANT_NAME || !svc_experiments_variant_name_ok(name))) {
            json_decref(cfg);
            json_decref(out);
            svc_fail(err, SVC_INVALID, "invalid_field", "grid",
                     "the grid's variant name '%.60s...' is longer than %d characters or has characters other than "
                     "letters, digits and _ . - = , +",
                     name, SVC_EXPERIMENTS_MAX_VARIANT_NAME);
            return NULL;
        }
        json_t *variant = bad ? NULL : json_pack("{s:s, s:o}", "name", name, "config", cfg);
        if (!variant) {
            if (!bad) cfg = NULL; /* json_pack's "o" took it even on failure */
            json_decref(cfg);
            json_decref(out);
            out = NULL;
            break;
        }
        if (json_array_append_new(out, variant) < 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (!out) svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    return out;
}

void svc_experiments_plan_free(svc_experiment_plan *plan) {
    json_decref(plan->base);
    json_decref(plan->variants);
    json_decref(plan->configs);
    memset(plan, 0, sizeof *plan);
}

/* The base config and variants of a request, before any variant is looked at. */
static svc_status plan_base(app *a, const svc_experiment_request *r, svc_experiment_plan *p, svc_error *err) {
    if (r->overrides && !json_is_object(r->overrides))
        return svc_fail(err, SVC_INVALID, "invalid_field", "overrides", "overrides must be an object of config fields");
    p->replicates = 1;
    if (r->preset) {
        const preset_def *d = preset_find(r->preset);
        if (!d) {
            char known[256] = "";
            for (size_t i = 0; i < N_PRESETS; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", presets[i].name);
            return svc_fail(err, SVC_INVALID, "invalid_field", "preset", "unknown preset '%s' (known: %s)", r->preset,
                            known);
        }
        if (d->prepare) {
            svc_status ps = d->prepare(a, err);
            if (ps != SVC_OK) return ps;
        }
        json_t *preset = preset_json(d);
        if (preset) {
            p->base = run_config_merge(json_object_get(preset, "base"), r->base);
            p->variants = json_incref(r->variants ? (json_t *)r->variants : json_object_get(preset, "variants"));
        }
        json_decref(preset);
        if (!p->name) p->name = d->name;
        p->preset = d->name;
        p->replicates = d->replicates;
    } else {
        if (!json_is_object(r->base))
            return svc_fail(err, SVC_INVALID, "invalid_field", "base",
                            "give a preset, or a base config object and variants");
        p->base = json_deep_copy(r->base);
        p->variants = json_incref((json_t *)r->variants);
    }
    if (!p->base) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (r->overrides && json_object_update(p->base, (json_t *)r->overrides) < 0)
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (r->replicates) {
        json_int_t n = json_is_integer(r->replicates) ? json_integer_value(r->replicates) : 0;
        if (n < 1 || n > SVC_EXPERIMENTS_MAX_REPLICATES)
            return svc_fail(err, SVC_INVALID, "invalid_field", "replicates",
                            "replicates must be an integer from 1 to %d (runs per variant, seeds seed, seed+1, ...)",
                            SVC_EXPERIMENTS_MAX_REPLICATES);
        p->replicates = (int)n;
    }
    size_t nv;
    if (r->grid) {
        if (r->variants)
            return svc_fail(err, SVC_INVALID, "invalid_field", "grid", "give either grid or variants, not both");
        svc_status gs = grid_check(r->grid, &nv, err);
        if (gs != SVC_OK) return gs;
    } else {
        nv = json_array_size(p->variants);
        if (!json_is_array(p->variants) || nv < 1 || nv > SVC_EXPERIMENTS_MAX_RUNS)
            return svc_fail(err, SVC_INVALID, "invalid_field", "variants",
                            "variants must be an array of 1 to %d objects", SVC_EXPERIMENTS_MAX_RUNS);
    }
    /* The bound is checked before a grid's product is built. */
    if (nv == SIZE_MAX || nv * (size_t)p->replicates > SVC_EXPERIMENTS_MAX_RUNS) {
        if (nv == SIZE_MAX)
            return svc_fail(err, SVC_INVALID, "invalid_field", "grid",
                            "the grid makes more than %d variants; an experiment has at most %d runs (variants x "
                            "replicates)",
                            SVC_EXPERIMENTS_MAX_RUNS, SVC_EXPERIMENTS_MAX_RUNS);
        return svc_fail(err, SVC_INVALID, "invalid_field", r->grid ? "grid" : "variants",
                        "%zu variants x %d replicates make %zu runs; an experiment has at most %d runs", nv,
                        p->replicates, nv * (size_t)p->replicates, SVC_EXPERIMENTS_MAX_RUNS);
    }
    if (r->grid) {
        json_decref(p->variants);
        if (!(p->variants = grid_variants(r->grid, nv, err))) return err->status;
    }
    return SVC_OK;
}

/* The largest seed a config takes (RunConfig.seed's maximum, 2^53 - 1). */
#define MAX_SEED 9007199254740991LL

/* Variant i: its shape, its name once, its merged config normalised and admitted. */
static svc_status plan_variant(app *a, svc_experiment_plan *p, size_t i, svc_error *err) {
    char field[64];
    snprintf(field, sizeof field, "variants[%zu]", i);
    json_t *v = json_array_get(p->variants, i);
    const char *vname = json_string_value(json_object_get(v, "name"));
    json_t *vcfg = json_object_get(v, "config");
    if (!json_is_object(v) || !vname || !svc_experiments_variant_name_ok(vname) || (vcfg && !json_is_object(vcfg)) ||
        json_object_size(v) != (size_t)(1 + (vcfg != NULL)))
        return svc_fail(err, SVC_INVALID, "invalid_field", field,
                        "%s must be {\"name\": 1-%d characters of letters, digits and _ . - = , +, \"config\": "
                        "{fields that differ}}",
                        field, SVC_EXPERIMENTS_MAX_VARIANT_NAME);
    for (size_t k = 0; k < i; k++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(p->variants, k), "name")), vname))
            return svc_fail(err, SVC_INVALID, "invalid_field", field, "variant name '%s' is used twice", vname);
    json_t *merged = run_config_merge(p->base, vcfg), *norm = NULL;
    if (!merged) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    run_config_error cerr;
    snprintf(field, sizeof field, "variants[%zu].config.", i);
    int bad = run_config_normalize(merged, field, &norm, &cerr);
    json_decref(merged);
    if (bad) return svc_fail(err, SVC_INVALID, "invalid_field", cerr.field, "%s", cerr.message);
    if (json_array_append_new(p->configs, norm) < 0)
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (json_integer_value(json_object_get(norm, "seed")) > MAX_SEED - (p->replicates - 1))
        return svc_fail(err, SVC_INVALID, "invalid_field", "replicates",
                        "%d replicates from seed %lld pass the largest seed (%lld)", p->replicates,
                        (long long)json_integer_value(json_object_get(norm, "seed")), MAX_SEED);
    return svc_runs_admit(a, norm, field, err);
}

svc_status svc_experiments_plan(app *a, const svc_experiment_request *r, svc_experiment_plan *plan, svc_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->name = r->name;
    plan->tags = r->tags;
    svc_status v = plan_base(a, r, plan, err);
    if (v == SVC_OK && !(plan->configs = json_array()))
        v = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    /* Every variant is checked before any run is made: an experiment is created whole or not at all. */
    for (size_t i = 0; v == SVC_OK && i < json_array_size(plan->variants); i++) v = plan_variant(a, plan, i, err);
    /* Refuse now rather than leave half an experiment queued. */
    size_t n = json_array_size(plan->configs) * (size_t)plan->replicates;
    plan->n_runs = n;
    /* More runs than the queue can ever hold is no reason to try again later (it was a 429 forever). */
    if (v == SVC_OK && n > (size_t)jobs_max_queued(a->jobs))
        v = svc_fail(err, SVC_INVALID, "too_many_runs", NULL,
                     "an experiment of %zu runs can never fit the training queue, which holds %d (attnlabd "
                     "--max-queued); ask for fewer variants or replicates, or start the server with a larger queue",
                     n, jobs_max_queued(a->jobs));
    if (v == SVC_OK && jobs_queue_room(a->jobs) < (int)n) {
        v = svc_fail(err, SVC_BUSY, "queue_full", NULL, "the training queue has no room for %zu runs; try again later",
                     n);
        err->retry_after = 30;
    }
    if (v != SVC_OK) svc_experiments_plan_free(plan);
    return v;
}

/* The config of run k: variant k % nv's, its seed plus the replicate k / nv. NULL when out of memory. */
static json_t *run_config_of(const svc_experiment_plan *p, size_t k) {
    size_t nv = json_array_size(p->configs);
    json_t *cfg = json_deep_copy(json_array_get(p->configs, k % nv));
    json_int_t seed = json_integer_value(json_object_get(cfg, "seed")) + (json_int_t)(k / nv);
    if (cfg && json_object_set_new(cfg, "seed", json_integer(seed)) < 0) {
        json_decref(cfg);
        return NULL;
    }
    return cfg;
}

svc_status svc_experiments_commit(app *a, const svc_experiment_plan *p, long long *exp_id, long long *run_ids,
                                  svc_error *err) {
    *exp_id = 0;
    size_t n = p->n_runs, nv = json_array_size(p->configs);
    for (size_t i = 0; i < n; i++) run_ids[i] = 0;
    store_new_run *rows = calloc(n, sizeof *rows);
    char **texts = calloc(n, sizeof *texts), **names = calloc(n, sizeof *names);
    json_t **cfgs = calloc(n, sizeof *cfgs);
    char *base_text = json_dumps(p->base, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    char *variants_text = json_dumps(p->variants, JSON_COMPACT);
    svc_status v = rows && texts && names && cfgs && base_text && variants_text && nv ? SVC_OK : SVC_FAILED;
    for (size_t i = 0; v == SVC_OK && i < n; i++) {
        const char *vname = json_string_value(json_object_get(json_array_get(p->variants, i % nv), "name"));
        int rep = (int)(i / nv);
        int rc = p->replicates > 1 ? asprintf(&names[i], "%s/%s/r%d", p->name ? p->name : "experiment", vname, rep)
                                   : asprintf(&names[i], "%s/%s", p->name ? p->name : "experiment", vname);
        if (rc < 0 || !(cfgs[i] = run_config_of(p, i))) {
            if (rc < 0) names[i] = NULL;
            v = SVC_FAILED;
            break;
        }
        svc_new_run r = {.name = names[i], .variant = vname, .tags = p->tags, .config = cfgs[i]};
        if (svc_runs_store_row(&r, &rows[i], &texts[i]) < 0) v = SVC_FAILED;
        rows[i].replicate = rep;
    }
    if (v != SVC_OK) {
        svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    } else {
        store_new_experiment e = {.name = p->name,
                                  .preset = p->preset,
                                  .base_json = base_text,
                                  .variants_json = variants_text,
                                  .replicates = p->replicates};
        long long id = 0;
        if (store_experiment_create(a->store, &e, rows, n, &id, run_ids) != STORE_OK) {
            v = svc_store_failed(err);
        } else if (jobs_submit_runs(a->jobs, run_ids, (int)n) < 0) {
            /* The queue filled up since the plan: take the whole experiment back. */
            if (store_experiment_discard(a->store, id) != STORE_OK)
                log_warn("experiment %lld: could not take back an experiment the queue refused: %s", id,
                         store_last_error());
            for (size_t i = 0; i < n; i++) run_ids[i] = 0;
            v = svc_fail(err, SVC_BUSY, "queue_full", NULL, "the training queue is full; try again later");
            err->retry_after = 30;
        } else {
            *exp_id = id;
        }
    }
    for (size_t i = 0; i < n && texts && names && cfgs; i++) {
        free(texts[i]);
        free(names[i]);
        json_decref(cfgs[i]);
    }
    free(cfgs);
    free(rows);
    free(texts);
    free(names);
    free(base_text);
    free(variants_text);
    return v;
}
