/* Experiments over HTTP: presets, create (planned and committed by svc_experiments), list, get. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "svc_experiments.h"

void api_presets(http_request *req, void *ctx) {
    (void)ctx;
    http_reply_json(req, 200, json_pack("{s:o}", "presets", svc_experiments_presets()));
}

void api_experiments_create(http_request *req, void *ctx) {
    app *a = ctx;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"name", "preset", "base", "overrides", "variants", "tags", NULL};
    svc_experiment_request r = {.base = json_object_get(body, "base"),
                                .overrides = json_object_get(body, "overrides"),
                                .variants = json_object_get(body, "variants")};
    json_t *tags;
    svc_experiment_plan plan;
    svc_error err;
    if (api_only_fields(req, body, fields) < 0 || api_opt_string(req, body, "name", 200, &r.name) < 0 ||
        api_opt_string(req, body, "preset", 40, &r.preset) < 0 || api_opt_tags(req, body, "tags", &tags) < 0) {
        json_decref(body);
        return;
    }
    r.tags = tags;
    if (svc_experiments_plan(a, &r, &plan, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        json_decref(body);
        return;
    }
    size_t n = json_array_size(plan.configs);
    long long exp_id, *ids = calloc(n, sizeof *ids);
    json_t *exp = NULL, *runs = json_array();
    if (!ids || !runs) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
    } else if (svc_experiments_commit(a, &plan, &exp_id, ids, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
    } else if (store_experiment_get(a->store, exp_id, &exp) != STORE_OK) {
        api_store_failed(req);
    } else {
        for (size_t i = 0; i < n; i++) {
            json_t *row = NULL;
            if (store_run_get(a->store, ids[i], &row) == STORE_OK) json_array_append_new(runs, api_run_view(a, row));
        }
        char loc[64];
        snprintf(loc, sizeof loc, "/api/experiments/%lld", exp_id);
        http_reply_header(req, "Location", loc);
        http_reply_json(req, 201, json_pack("{s:o, s:O}", "experiment", exp, "runs", runs));
    }
    json_decref(runs);
    free(ids);
    svc_experiments_plan_free(&plan);
    json_decref(body);
}

void api_experiments_list(http_request *req, void *ctx) {
    app *a = ctx;
    long long limit, offset, total;
    if (api_query_page(req, &limit, &offset) < 0) return;
    json_t *list;
    store_status s = store_experiment_list(a->store, (int)limit, (int)offset, &list, &total);
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
    for (int l = 0; l < L && final; l++) {
        json_t *row = json_array();
        for (int h = 0; h < H && row; h++) {
            char key[32];
            snprintf(key, sizeof key, "tau.%d.%d", l, h);
            json_array_append_new(row, json_deep_copy(json_object_get(json_object_get(summary, key), "last")));
        }
        json_array_append_new(final, row);
    }
    return final ? json_pack("{s:O, s:o}", "initial", json_object_get(cfg, "tau_init"), "final", final) : NULL;
}

void api_experiments_get(http_request *req, void *ctx) {
    app *a = ctx;
    long long id, total;
    json_t *exp, *runs;
    if (api_load_by_id(req, a, "experiment", store_experiment_get, &id, &exp) < 0) return;
    store_run_filter f = {.experiment_id = id, .sort = "id", .limit = 100};
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
        json_t *tau = final_tau(r, summary);
        if (tau) json_object_set_new(r, "tau", tau);
    }
    http_reply_json(req, 200, json_pack("{s:o, s:o}", "experiment", exp, "runs", runs));
}
