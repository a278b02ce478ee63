/* Experiments over HTTP: presets, create (planned and committed by svc_experiments), list, get, and
 * the statistics over their replicates (svc_stats): figures, CSV and per-step bands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_series.h"
#include "api/api.h"
#include "services/svc_run_view.h"
#include "services/svc_experiments.h"
#include "services/svc_stats.h"

void api_presets(http_request *req, const api_ctx *api) {
    (void)api;
    http_reply_json(req, 200, json_pack("{s:o}", "presets", svc_experiments_presets()));
}

/* Answers 201 {"experiment","runs"} for experiment id with the n runs ids just made (queued), with
 * the experiment's Location; a retry's answer (idem->replay) reads its runs back in the order they
 * were created instead. */
static void reply_created(http_request *req, const api_ctx *api, long long id, const long long *ids, size_t n,
                          const svc_idem *idem) {
    json_t *exp = NULL, *runs = json_array(), *rows = NULL;
    long long total = 0;
    int replay = idem && idem->replay;
    if (replay) { /* runs are created in their order, so their ids are too */
        store_run_filter f = {.experiment_id = id, .sort = "id", .limit = SVC_EXPERIMENTS_MAX_RUNS};
        if (store_run_list(api->svc->store, &f, &rows, &total) != STORE_OK) {
            json_decref(runs);
            api_store_failed(req);
            return;
        }
    }
    if (!runs) {
        json_decref(rows);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    if (store_experiment_get(api->svc->store, id, &exp) != STORE_OK) {
        json_decref(rows);
        json_decref(runs);
        api_store_failed(req);
        return;
    }
    int bad = 0;
    size_t count = replay ? json_array_size(rows) : n;
    for (size_t i = 0; i < count; i++) {
        json_t *row = NULL;
        if (replay)
            row = json_incref(json_array_get(rows, i));
        else if (store_run_get(api->svc->store, ids[i], &row) != STORE_OK)
            continue;
        bad |= json_array_append_new(runs, svc_run_view(api->svc, row)) < 0;
    }
    json_decref(rows);
    if (bad) { /* the runs are queued: the answer says what it can */
        json_decref(runs);
        runs = NULL;
    }
    if (replay) {
        api_reply_replayed(req, "/api/experiments", id);
    } else {
        char loc[64];
        snprintf(loc, sizeof loc, "/api/experiments/%lld", id);
        http_reply_header(req, "Location", loc);
    }
    http_reply_json(req, 201, json_pack("{s:o, s:o*}", "experiment", exp, "runs", runs));
}

void api_experiments_create(http_request *req, const api_ctx *api) {
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"name", "preset",     "base", "overrides",   "variants",
                                         "grid", "replicates", "tags", "from_bundle", NULL};
    svc_experiment_request r = {.base = json_object_get(body, "base"),
                                .overrides = json_object_get(body, "overrides"),
                                .variants = json_object_get(body, "variants"),
                                .grid = json_object_get(body, "grid"),
                                .replicates = json_object_get(body, "replicates")};
    json_t *tags;
    svc_experiment_plan plan;
    svc_error err;
    if (api_only_fields(req, body, fields) < 0 || api_opt_string(req, body, "name", 200, &r.name) < 0 ||
        api_opt_string(req, body, "preset", 40, &r.preset) < 0 || api_opt_tags(req, body, "tags", &tags) < 0) {
        json_decref(body);
        return;
    }
    r.tags = tags;
    svc_idem idem, *ip;
    if (api_idempotency(req, api, "experiment", body, &idem, &ip) < 0) {
        json_decref(body);
        return;
    }
    if (ip && ip->replay) { /* a retry: the first answer again */
        reply_created(req, api, ip->replay, NULL, 0, ip);
        json_decref(body);
        return;
    }
    r.name_given = r.name && *r.name;
    if (!r.name_given) r.name = NULL;
    json_t *bundle = json_object_get(body, "from_bundle");
    if (bundle) { /* run a bundle's experiment again: nothing else but a new name and tags */
        static const char *const with_bundle[] = {"from_bundle", "name", "tags", NULL};
        if (api_only_fields(req, body, with_bundle) < 0) {
            json_decref(body);
            return;
        }
        const char *name = r.name;
        if (svc_experiments_from_bundle(api->svc, bundle, name, &r, &err) != SVC_OK) {
            api_reply_svc_error(req, &err);
            json_decref(body);
            return;
        }
        r.tags = tags;
    }
    if (svc_experiments_plan(api->svc, &r, &plan, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        json_decref(body);
        return;
    }
    size_t n = plan.n_runs;
    plan.idem = ip;
    long long exp_id, *ids = calloc(n, sizeof *ids);
    if (!ids)
        http_reply_error(req, 500, "internal", NULL, "out of memory");
    else if (svc_experiments_commit(api->svc, &plan, &exp_id, ids, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else if (ip && ip->replay) /* another request with the key committed first */
        reply_created(req, api, exp_id, NULL, 0, ip);
    else
        reply_created(req, api, exp_id, ids, n, ip);
    free(ids);
    svc_experiments_plan_free(&plan);
    json_decref(body);
}

void api_experiments_add_runs(http_request *req, const api_ctx *api) {
    long long id;
    if (api_path_id(req, &id) < 0) return;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"variants", "replicates", NULL};
    long long *ids = NULL;
    size_t n = 0;
    svc_error err;
    if (api_only_fields(req, body, fields) < 0) {
        json_decref(body);
        return;
    }
    if (svc_experiments_add_runs(api->svc, id, json_object_get(body, "variants"), json_object_get(body, "replicates"),
                                 &ids, &n, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        reply_created(req, api, id, ids, n, NULL);
    free(ids);
    json_decref(body);
}

void api_experiments_list(http_request *req, const api_ctx *api) {
    long long limit, offset, total;
    const char *search;
    if (api_query_page(req, &limit, &offset) < 0 || api_query_search(req, &search) < 0) return;
    json_t *list;
    store_status s = store_experiment_list(api->svc->store, (int)limit, (int)offset, search, &list, &total);
    api_reply_list(req, s, "experiments", list, total);
}

/* The blog's table for a run with learned temperatures: each head's final tau next to the initial
 * sqrt(d), {"initial": tau_init, "final": [[per head] per layer]}; NULL when it has none. */
static json_t *final_tau(const json_t *run, const json_t *summary) {
    if (!json_object_get(summary, "tau.0.0")) return NULL;
    json_t *cfg = json_object_get(run, "config");
    int L = (int)json_integer_value(json_object_get(cfg, "n_layer"));
    int H = (int)json_integer_value(json_object_get(cfg, "n_head"));
    json_t *final = json_array();
    int bad = !final;
    for (int l = 0; l < L && !bad; l++) {
        json_t *row = json_array();
        for (int h = 0; h < H && row && !bad; h++) {
            char key[32];
            snprintf(key, sizeof key, "tau.%d.%d", l, h);
            const json_t *last = json_object_get(json_object_get(summary, key), "last");
            if (last) bad |= json_array_append_new(row, json_deep_copy(last)) < 0;
        }
        bad |= json_array_append_new(final, row) < 0;
    }
    if (bad) {
        json_decref(final);
        return NULL;
    }
    return json_pack("{s:O, s:o}", "initial", json_object_get(cfg, "tau_init"), "final", final);
}

void api_experiments_get(http_request *req, const api_ctx *api) {
    long long id, total;
    json_t *exp, *runs;
    if (api_load_by_id(req, api, "experiment", store_experiment_get, &id, &exp) < 0) return;
    /* Every run: at most SVC_EXPERIMENTS_MAX_RUNS (older experiments: 16 variants x 32 replicates). */
    store_run_filter f = {.experiment_id = id, .sort = "id", .limit = 16 * SVC_EXPERIMENTS_MAX_REPLICATES};
    if (store_run_list(api->svc->store, &f, &runs, &total) != STORE_OK) {
        json_decref(exp);
        api_store_failed(req);
        return;
    }
    int bad = svc_run_views(api->svc, runs) < 0;
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        json_t *summary = NULL;
        if (bad ||
            store_metrics_summary(api->svc->store, json_integer_value(json_object_get(r, "id")), &summary) != STORE_OK)
            continue;
        json_t *tau = final_tau(r, summary);
        bad |= json_object_set_new(r, "summary", summary) < 0;
        if (tau) bad |= json_object_set_new(r, "tau", tau) < 0;
    }
    if (bad) {
        json_decref(exp);
        json_decref(runs);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    http_reply_json(req, 200, json_pack("{s:o, s:o}", "experiment", exp, "runs", runs));
}

/* The statistics options of the query: k (1..100000, default 10), resamples (100..100000, default
 * 10000) and seed (default 1) of the bootstrap; answers 422 and returns -1 when one is bad. */
static int stats_options(http_request *req, svc_stats_options *o) {
    svc_stats_options_default(o);
    long long k, resamples, seed;
    if (api_query_int(req, "k", 1, SVC_STATS_MAX_K, SVC_STATS_DEFAULT_K, &k) < 0 ||
        api_query_int(req, "resamples", 100, 100000, STATS_BOOTSTRAP_DEFAULT, &resamples) < 0 ||
        api_query_int(req, "seed", 0, ((long long)1 << 53) - 1, SVC_STATS_DEFAULT_SEED, &seed) < 0)
        return -1;
    o->k = (int)k;
    o->resamples = (size_t)resamples;
    o->seed = (uint64_t)seed;
    return 0;
}

/* GET /api/experiments/{id}/stats (JSON) and /stats.csv: on the compute pool (a heavy route), the
 * work bounded before it starts (SVC_STATS_MAX_WORK), stopped when the client leaves, and the
 * answer about an ended experiment kept. */
static void reply_stats(http_request *req, const api_ctx *api, int as_csv) {
    long long id;
    svc_stats_options o;
    svc_error err;
    json_t *stats;
    if (api_path_id(req, &id) < 0 || stats_options(req, &o) < 0) return;
    o.cancel = http_request_cancel_flag(req);
    char what[160], key[320], disp[96];
    snprintf(what, sizeof what, "stats|%s|%d|%zu|%llu", as_csv ? "csv" : "json", o.k, o.resamples,
             (unsigned long long)o.seed);
    snprintf(disp, sizeof disp, "attachment; filename=\"experiment-%lld-stats.csv\"", id);
    const char *type = as_csv ? "text/csv; charset=utf-8" : "application/json";
    if (api_experiment_key(api, id, what, key, sizeof key) < 0) key[0] = 0;
    if (as_csv) http_reply_header(req, "Content-Disposition", disp);
    if (api_reply_cached(req, api, key, type)) return;
    if (svc_stats_experiment(api->svc, id, &o, &stats, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    if (!as_csv) {
        api_reply_json_keeping(req, api, key, json_pack("{s:o}", "stats", stats));
        return;
    }
    char *csv;
    size_t len;
    int rc = api_stats_csv(stats, &csv, &len);
    json_decref(stats);
    api_reply_keeping(req, api, key, type, rc < 0 ? NULL : csv, len);
}

void api_experiments_stats(http_request *req, const api_ctx *api) { reply_stats(req, api, 0); }

void api_experiments_stats_csv(http_request *req, const api_ctx *api) { reply_stats(req, api, 1); }

void api_experiments_series(http_request *req, const api_ctx *api) {
    long long id, max_points;
    if (api_path_id(req, &id) < 0 || api_query_max_points(req, 0, &max_points) < 0) return;
    const char *key = http_request_query(req, "key");
    char what[160], ckey[320];
    snprintf(what, sizeof what, "series|%lld|%.64s", max_points, key ? key : "");
    if (!key || strlen(key) > 64 || api_experiment_key(api, id, what, ckey, sizeof ckey) < 0) ckey[0] = 0;
    if (api_reply_cached(req, api, ckey, "application/json")) return;
    svc_stats_bands bands;
    svc_error err;
    if (svc_stats_bands_get(api->svc, id, key, &bands, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    json_t *variants = json_array();
    int bad = !variants;
    for (size_t i = 0; i < bands.n && !bad; i++) {
        json_t *band = api_band_json(bands.variants[i].points, bands.variants[i].n_points, (int)max_points);
        bad = !band || json_object_set_new(band, "variant", json_string(bands.variants[i].variant)) < 0 ||
              json_object_set(band, "runs", bands.variants[i].runs) < 0 || json_array_append_new(variants, band) < 0;
    }
    svc_stats_bands_free(&bands);
    if (bad) {
        json_decref(variants);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    api_reply_json_keeping(
        req, api, ckey,
        json_pack("{s:I, s:s, s:o}", "experiment_id", (json_int_t)id, "key", key, "variants", variants));
}

void api_experiments_patch(http_request *req, const api_ctx *api) {
    long long id;
    if (api_path_id(req, &id) < 0) return;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"name", NULL};
    const char *name = NULL;
    svc_error err;
    if (api_only_fields(req, body, fields) == 0 && api_opt_string(req, body, "name", 200, &name) == 0) {
        if (!name || !*name)
            http_reply_error(req, 422, "invalid_field", "name", "name must be 1 to 200 characters");
        else if (svc_experiments_rename(api->svc, id, name, &err) != SVC_OK)
            api_reply_svc_error(req, &err);
        else
            api_experiments_get(req, api);
    }
    json_decref(body);
}

void api_experiments_delete(http_request *req, const api_ctx *api) {
    long long id;
    if (api_path_id(req, &id) < 0) return;
    static const char *const modes[] = {"keep", "delete", NULL};
    const char *runs = NULL;
    if (api_query_enum(req, "runs", modes, &runs) < 0) return;
    svc_error err;
    if (svc_experiments_delete(api->svc, id, runs && !strcmp(runs, "delete"), &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_bytes(req, 204, NULL, "", 0);
}
