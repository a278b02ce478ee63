/* Runs trained elsewhere over HTTP (svc_external.h): POST /api/runs {"source":"external", …} and
 * POST /api/runs/{id}/metrics {"points":[…]}, POST /api/runs/{id}/weights (a safetensors body); their
 * end is PATCH /api/runs/{id} {"status"} (api_runs.c). */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "services/svc_external.h"

void api_runs_create_external(http_request *req, const api_ctx *api, json_t *body, svc_idem *idem) {
    static const char *const fields[] = {"source",        "name",    "tags",      "note",       "config",
                                         "experiment_id", "variant", "replicate", "provenance", NULL};
    const char *source, *name, *note, *variant;
    json_t *tags;
    if (api_only_fields(req, body, fields) < 0 || api_opt_string(req, body, "source", 16, &source) < 0 ||
        api_opt_string(req, body, "name", 200, &name) < 0 || api_opt_string(req, body, "note", 10000, &note) < 0 ||
        api_opt_tags(req, body, "tags", &tags) < 0 || api_opt_string(req, body, "variant", 100, &variant) < 0)
        return;
    if (!source || strcmp(source, "external")) {
        http_reply_error(req, 422, "invalid_field", "source",
                         "source must be \"external\" (leave it out for a run this service trains)");
        return;
    }
    json_t *exp = json_object_get(body, "experiment_id"), *rep = json_object_get(body, "replicate");
    json_t *config = json_object_get(body, "config");
    if (exp && (!json_is_integer(exp) || json_integer_value(exp) < 1)) {
        http_reply_error(req, 422, "invalid_field", "experiment_id", "experiment_id must be a positive integer");
        return;
    }
    if (rep && (!json_is_integer(rep) || json_integer_value(rep) < 0 || json_integer_value(rep) > 1023)) {
        http_reply_error(req, 422, "invalid_field", "replicate", "replicate must be an integer from 0 to 1023");
        return;
    }
    if (config && !json_is_object(config)) {
        http_reply_error(req, 422, "invalid_field", "config", "config must be an object");
        return;
    }
    svc_external_run r = {.name = name,
                          .note = note,
                          .variant = variant,
                          .tags = tags,
                          .config = config,
                          .experiment_id = exp ? (long long)json_integer_value(exp) : 0,
                          .replicate = rep ? (int)json_integer_value(rep) : 0,
                          .provenance = json_object_get(body, "provenance"),
                          .idem = idem};
    long long id;
    svc_error err;
    if (svc_external_create(api->svc, &r, &id, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    api_runs_created(req, api, id, idem);
}

void api_runs_metrics_post(http_request *req, const api_ctx *api) {
    long long id;
    if (api_path_id(req, &id) < 0) return;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"points", NULL};
    if (api_only_fields(req, body, fields) == 0) {
        int stored = 0;
        svc_error err;
        if (svc_external_log(api->svc, id, json_object_get(body, "points"), &stored, &err) != SVC_OK)
            api_reply_svc_error(req, &err);
        else
            http_reply_json(req, 200, json_pack("{s:I, s:i}", "run_id", (json_int_t)id, "stored", stored));
    }
    json_decref(body);
}

void api_runs_weights_upload(http_request *req, const api_ctx *api) {
    long long id;
    size_t size = 0;
    const char *upload = http_request_upload_path(req, &size);
    if (api_path_id(req, &id) < 0) return;
    if (!upload || size == 0) {
        http_reply_error(req, 422, "invalid_field", "body", "send the weights as a safetensors file in the body");
        return;
    }
    json_t *info = NULL;
    svc_error err;
    if (svc_external_weights(api->svc, id, upload, &info, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return;
    }
    if (json_object_set_new(info, "bytes", json_integer((json_int_t)size)) < 0) {
        json_decref(info);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    http_reply_json(req, 201, json_pack("{s:o}", "weights", info));
}
