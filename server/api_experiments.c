/* Experiments: runs that share everything but named differences, created together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "run_config.h"

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

void api_presets(http_request *req, void *ctx) {
    (void)ctx;
    http_reply_json(req, 200, json_pack("{s:[o]}", "presets", preset_seed_blog()));
}

static int valid_variant_name(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 40) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              strchr("_.-=", s[i])))
            return 0;
    return 1;
}

void api_experiments_create(http_request *req, void *ctx) {
    app *a = ctx;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"name", "preset", "base", "overrides", "variants", "tags", NULL};
    const char *name, *preset;
    json_t *tags, *preset_obj = NULL, *base = NULL, *variants = NULL, *configs = NULL, *created = NULL;
    if (api_only_fields(req, body, fields) < 0 || api_opt_string(req, body, "name", 200, &name) < 0 ||
        api_opt_string(req, body, "preset", 40, &preset) < 0 || api_opt_tags(req, body, "tags", &tags) < 0)
        goto done;
    json_t *overrides = json_object_get(body, "overrides");
    if (overrides && !json_is_object(overrides)) {
        http_reply_error(req, 422, "invalid_field", "overrides", "overrides must be an object of config fields");
        goto done;
    }
    if (preset) {
        if (strcmp(preset, "seed-blog") != 0) {
            http_reply_error(req, 422, "invalid_field", "preset", "unknown preset '%s' (known: seed-blog)", preset);
            goto done;
        }
        preset_obj = preset_seed_blog();
        base = run_config_merge(json_object_get(preset_obj, "base"), json_object_get(body, "base"));
        variants = json_object_get(body, "variants") ? json_incref(json_object_get(body, "variants"))
                                                     : json_incref(json_object_get(preset_obj, "variants"));
        if (!name) name = "seed-blog";
    } else {
        if (!json_is_object(json_object_get(body, "base"))) {
            http_reply_error(req, 422, "invalid_field", "base", "give a preset, or a base config object and variants");
            goto done;
        }
        base = json_deep_copy(json_object_get(body, "base"));
        variants = json_incref(json_object_get(body, "variants"));
    }
    if (overrides) json_object_update(base, overrides);
    if (!json_is_array(variants) || json_array_size(variants) < 1 || json_array_size(variants) > 16) {
        http_reply_error(req, 422, "invalid_field", "variants", "variants must be an array of 1 to 16 objects");
        goto done;
    }
    /* Every variant is checked before any run is made: an experiment is created whole or not at all. */
    configs = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(variants, i, v) {
        char field[64];
        snprintf(field, sizeof field, "variants[%zu]", i);
        const char *vname = json_string_value(json_object_get(v, "name"));
        json_t *vcfg = json_object_get(v, "config");
        if (!json_is_object(v) || !vname || !valid_variant_name(vname) || (vcfg && !json_is_object(vcfg)) ||
            json_object_size(v) != (size_t)(1 + (vcfg != NULL))) {
            http_reply_error(req, 422, "invalid_field", field,
                             "%s must be {\"name\": 1-40 characters, \"config\": {fields that differ}}", field);
            goto done;
        }
        for (size_t k = 0; k < i; k++)
            if (!strcmp(json_string_value(json_object_get(json_array_get(variants, k), "name")), vname)) {
                http_reply_error(req, 422, "invalid_field", field, "variant name '%s' is used twice", vname);
                goto done;
            }
        json_t *merged = run_config_merge(base, vcfg), *norm = NULL;
        run_config_error cerr;
        snprintf(field, sizeof field, "variants[%zu].config.", i);
        int bad = run_config_normalize(merged, field, &norm, &cerr);
        json_decref(merged);
        if (bad) {
            http_reply_error(req, 422, "invalid_field", cerr.field, "%s", cerr.message);
            goto done;
        }
        json_array_append_new(configs, norm);
        if (api_runs_admit(req, a, norm, field) < 0) goto done;
    }
    /* All or nothing: refuse now rather than leave half an experiment queued. */
    if (jobs_queue_room(a->jobs) < (int)json_array_size(configs)) {
        http_reply_header(req, "Retry-After", "30");
        http_reply_error(req, 429, "queue_full", NULL, "the training queue has no room for %zu runs; try again later",
                         json_array_size(configs));
        goto done;
    }
    char *base_text = json_dumps(base, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    char *variants_text = json_dumps(variants, JSON_COMPACT);
    long long exp_id = 0;
    store_status s = base_text && variants_text
                         ? store_experiment_create(a->store, name, preset, base_text, variants_text, &exp_id)
                         : STORE_ERROR;
    free(base_text);
    free(variants_text);
    if (s != STORE_OK) {
        api_store_failed(req);
        goto done;
    }
    created = json_array();
    json_array_foreach(configs, i, v) {
        const char *vname = json_string_value(json_object_get(json_array_get(variants, i), "name"));
        char run_name[256];
        snprintf(run_name, sizeof run_name, "%s/%s", name ? name : "experiment", vname);
        long long id;
        if (api_runs_create_one(req, a, run_name, tags, NULL, v, exp_id, vname, &id) < 0) goto done;
        json_t *row = NULL;
        if (store_run_get(a->store, id, &row) == STORE_OK) json_array_append_new(created, api_run_view(a, row));
    }
    json_t *exp = NULL;
    if (store_experiment_get(a->store, exp_id, &exp) != STORE_OK) {
        api_store_failed(req);
        goto done;
    }
    char loc[64];
    snprintf(loc, sizeof loc, "/api/experiments/%lld", exp_id);
    http_reply_header(req, "Location", loc);
    http_reply_json(req, 201, json_pack("{s:o, s:O}", "experiment", exp, "runs", created));
done:
    json_decref(created);
    json_decref(configs);
    json_decref(variants);
    json_decref(base);
    json_decref(preset_obj);
    json_decref(body);
}

void api_experiments_list(http_request *req, void *ctx) {
    app *a = ctx;
    long long limit, offset, total = 0;
    if (api_query_int(req, "limit", 1, 500, 50, &limit) < 0 || api_query_int(req, "offset", 0, 1000000000, 0, &offset) < 0)
        return;
    json_t *list;
    if (store_experiment_list(a->store, (int)limit, (int)offset, &list, &total) != STORE_OK) {
        json_decref(list);
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 200, json_pack("{s:o, s:I}", "experiments", list, "total", (json_int_t)total));
}

void api_experiments_get(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    if (api_path_id(req, &id) < 0) return;
    json_t *exp = NULL;
    store_status s = store_experiment_get(a->store, id, &exp);
    if (s == STORE_NOT_FOUND) {
        http_reply_error(req, 404, "not_found", "id", "no experiment %lld", id);
        return;
    }
    if (s != STORE_OK) {
        api_store_failed(req);
        return;
    }
    store_run_filter f = {.experiment_id = id, .sort = "id", .limit = 100};
    json_t *runs;
    long long total;
    if (store_run_list(a->store, &f, &runs, &total) != STORE_OK) {
        json_decref(exp);
        api_store_failed(req);
        return;
    }
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        api_run_view(a, r);
        json_t *summary = NULL;
        if (store_metrics_summary(a->store, json_integer_value(json_object_get(r, "id")), &summary) != STORE_OK) continue;
        json_object_set_new(r, "summary", summary);
        /* The blog's table: each head's final temperature next to the initial sqrt(d). */
        json_t *cfg = json_object_get(r, "config");
        int L = (int)json_integer_value(json_object_get(cfg, "n_layer"));
        int H = (int)json_integer_value(json_object_get(cfg, "n_head"));
        if (!json_object_get(summary, "tau.0.0")) continue;
        json_t *final = json_array();
        for (int l = 0; l < L; l++) {
            json_t *row = json_array();
            for (int h = 0; h < H; h++) {
                char key[32];
                snprintf(key, sizeof key, "tau.%d.%d", l, h);
                json_array_append_new(row, json_deep_copy(json_object_get(json_object_get(summary, key), "last")));
            }
            json_array_append_new(final, row);
        }
        json_object_set_new(r, "tau", json_pack("{s:O, s:o}", "initial", json_object_get(cfg, "tau_init"), "final", final));
    }
    http_reply_json(req, 200, json_pack("{s:o, s:o}", "experiment", exp, "runs", runs));
}
