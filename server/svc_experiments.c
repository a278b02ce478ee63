#include "svc_experiments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "log.h"
#include "run_config.h"
#include "svc_runs.h"

/* The seed blog's experiment: 3 layers, 4 heads, d_model 128, 128-token chunks, AdamW lr 3e-4,
 * 2000 steps, batch 32, the default corpus, rope against cosine_rope from one seed. */
static json_t *preset_seed_blog(void) {
    json_t *base = json_pack("{s:i, s:i, s:i, s:i, s:f, s:i, s:i, s:s, s:i}", "n_layer", 3, "n_head", 4, "d_model", 128,
                             "seq_len", 128, "lr", 3e-4, "steps", 2000, "batch", 32, "corpus", "default", "seed", 1337);
    json_t *variants = json_pack("[{s:s, s:{s:s}}, {s:s, s:{s:s}}]", "name", "rope", "config", "attention", "rope",
                                 "name", "cosine_rope", "config", "attention", "cosine_rope");
    return json_pack("{s:s, s:s, s:o, s:o}", "name", "seed-blog", "description",
                     "The Cosine-RoPE blog experiment: rope vs cosine_rope, same seed and data order", "base", base,
                     "variants", variants);
}

json_t *svc_experiments_presets(void) { return json_pack("[o]", preset_seed_blog()); }

static int valid_variant_name(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 40) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              strchr("_.-=", s[i])))
            return 0;
    return 1;
}

void svc_experiments_plan_free(svc_experiment_plan *plan) {
    json_decref(plan->base);
    json_decref(plan->variants);
    json_decref(plan->configs);
    memset(plan, 0, sizeof *plan);
}

/* The base config and variants of a request, before any variant is looked at. */
static svc_status plan_base(const svc_experiment_request *r, svc_experiment_plan *p, svc_error *err) {
    if (r->overrides && !json_is_object(r->overrides))
        return svc_fail(err, SVC_INVALID, "invalid_field", "overrides", "overrides must be an object of config fields");
    if (r->preset) {
        if (strcmp(r->preset, "seed-blog") != 0)
            return svc_fail(err, SVC_INVALID, "invalid_field", "preset", "unknown preset '%s' (known: seed-blog)",
                            r->preset);
        json_t *preset = preset_seed_blog();
        if (preset) {
            p->base = run_config_merge(json_object_get(preset, "base"), r->base);
            p->variants = json_incref(r->variants ? (json_t *)r->variants : json_object_get(preset, "variants"));
        }
        json_decref(preset);
        if (!p->name) p->name = "seed-blog";
        p->preset = "seed-blog";
    } else {
        if (!json_is_object(r->base))
            return svc_fail(err, SVC_INVALID, "invalid_field", "base", "give a preset, or a base config object and variants");
        p->base = json_deep_copy(r->base);
        p->variants = json_incref((json_t *)r->variants);
    }
    if (!p->base) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (r->overrides && json_object_update(p->base, (json_t *)r->overrides) < 0)
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (!json_is_array(p->variants) || json_array_size(p->variants) < 1 || json_array_size(p->variants) > 16)
        return svc_fail(err, SVC_INVALID, "invalid_field", "variants", "variants must be an array of 1 to 16 objects");
    return SVC_OK;
}

/* Variant i: its shape, its name once, its merged config normalised and admitted. */
static svc_status plan_variant(app *a, svc_experiment_plan *p, size_t i, svc_error *err) {
    char field[64];
    snprintf(field, sizeof field, "variants[%zu]", i);
    json_t *v = json_array_get(p->variants, i);
    const char *vname = json_string_value(json_object_get(v, "name"));
    json_t *vcfg = json_object_get(v, "config");
    if (!json_is_object(v) || !vname || !valid_variant_name(vname) || (vcfg && !json_is_object(vcfg)) ||
        json_object_size(v) != (size_t)(1 + (vcfg != NULL)))
        return svc_fail(err, SVC_INVALID, "invalid_field", field,
                        "%s must be {\"name\": 1-40 characters, \"config\": {fields that differ}}", field);
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
    if (json_array_append_new(p->configs, norm) < 0) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    return svc_runs_admit(a, norm, field, err);
}

svc_status svc_experiments_plan(app *a, const svc_experiment_request *r, svc_experiment_plan *plan, svc_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->name = r->name;
    plan->tags = r->tags;
    svc_status v = plan_base(r, plan, err);
    if (v == SVC_OK && !(plan->configs = json_array())) v = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    /* Every variant is checked before any run is made: an experiment is created whole or not at all. */
    for (size_t i = 0; v == SVC_OK && i < json_array_size(plan->variants); i++) v = plan_variant(a, plan, i, err);
    /* Refuse now rather than leave half an experiment queued. */
    size_t n = json_array_size(plan->configs);
    if (v == SVC_OK && jobs_queue_room(a->jobs) < (int)n) {
        v = svc_fail(err, SVC_BUSY, "queue_full", NULL, "the training queue has no room for %zu runs; try again later", n);
        err->retry_after = 30;
    }
    if (v != SVC_OK) svc_experiments_plan_free(plan);
    return v;
}

svc_status svc_experiments_commit(app *a, const svc_experiment_plan *p, long long *exp_id, long long *run_ids,
                                  svc_error *err) {
    *exp_id = 0;
    size_t n = json_array_size(p->configs);
    for (size_t i = 0; i < n; i++) run_ids[i] = 0;
    store_new_run *rows = calloc(n, sizeof *rows);
    char **texts = calloc(n, sizeof *texts), **names = calloc(n, sizeof *names);
    char *base_text = json_dumps(p->base, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    char *variants_text = json_dumps(p->variants, JSON_COMPACT);
    svc_status v = rows && texts && names && base_text && variants_text ? SVC_OK : SVC_FAILED;
    for (size_t i = 0; v == SVC_OK && i < n; i++) {
        const char *vname = json_string_value(json_object_get(json_array_get(p->variants, i), "name"));
        if (asprintf(&names[i], "%s/%s", p->name ? p->name : "experiment", vname) < 0) {
            names[i] = NULL;
            v = SVC_FAILED;
            break;
        }
        svc_new_run r = {.name = names[i], .variant = vname, .tags = p->tags, .config = json_array_get(p->configs, i)};
        if (svc_runs_store_row(&r, &rows[i], &texts[i]) < 0) v = SVC_FAILED;
    }
    if (v != SVC_OK) {
        svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    } else {
        store_new_experiment e = {.name = p->name, .preset = p->preset, .base_json = base_text,
                                  .variants_json = variants_text};
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
    for (size_t i = 0; i < n && texts && names; i++) {
        free(texts[i]);
        free(names[i]);
    }
    free(rows);
    free(texts);
    free(names);
    free(base_text);
    free(variants_text);
    return v;
}
