/* Probes over HTTP: kinds, run (by the probes service: answered from the store when the same
 * request was made on the same weights before), list, get, CSV per table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "util/csv.h"
#include "engine/probes/probe.h"
#include "services/svc_probes.h"

void api_probe_kinds(http_request *req, const api_ctx *api) {
    (void)api;
    json_t *kinds = probe_kinds_json();
    if (!kinds) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    http_reply_json(req, 200, json_pack("{s:o}", "kinds", kinds));
}

static void reply_probe(http_request *req, const api_ctx *api, long long id, int status, int cached) {
    json_t *p = NULL;
    if (store_probe_get(api->svc->store, id, &p) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    if (json_object_set_new(p, "cached", json_boolean(cached)) < 0) {
        json_decref(p);
        p = NULL; /* http_reply_json answers 500 for what could not be built */
    }
    http_reply_json(req, status, json_pack("{s:o}", "probe", p));
}

void api_probes_create(http_request *req, const api_ctx *api) {
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"kind", "params", "run_id", NULL};
    const char *kind_name = json_string_value(json_object_get(body, "kind"));
    const probe_kind *kind = kind_name ? probe_find(kind_name) : NULL;
    json_t *params = json_object_get(body, "params");
    json_t *run = json_object_get(body, "run_id");
    long long id;
    int cached;
    svc_error err;
    if (api_only_fields(req, body, fields) < 0) {
        /* answered */
    } else if (!kind) {
        http_reply_error(req, 422, "invalid_field", "kind", "kind must be one of the names at /api/probe-kinds");
    } else if (params && !json_is_object(params)) {
        http_reply_error(req, 422, "invalid_field", "params", "params must be an object");
    } else if (run && (!json_is_integer(run) || json_integer_value(run) <= 0)) {
        http_reply_error(req, 422, "invalid_field", "run_id", "run_id must be a positive integer");
    } else if (svc_probes_run(api->svc, kind, params, run ? json_integer_value(run) : 0, http_request_cancel_flag(req),
                              &id, &cached, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
    } else {
        reply_probe(req, api, id, cached ? 200 : 201, cached);
    }
    json_decref(body);
}

void api_probes_list(http_request *req, const api_ctx *api) {
    long long limit, offset, total;
    if (api_query_page(req, &limit, &offset) < 0) return;
    const char *kind = http_request_query(req, "kind");
    if (kind && !probe_find(kind)) {
        http_reply_error(req, 422, "invalid_field", "kind", "unknown probe kind '%s'", kind);
        return;
    }
    json_t *list;
    store_status s = store_probe_list(api->svc->store, kind, (int)limit, (int)offset, &list, &total);
    api_reply_list(req, s, "probes", list, total);
}

void api_probes_get(http_request *req, const api_ctx *api) { api_reply_by_id(req, api, "probe", store_probe_get); }

void api_probes_csv(http_request *req, const api_ctx *api) {
    long long id;
    if (api_path_id(req, &id) < 0) return;
    const char *name = http_request_query(req, "table");
    json_t *t = NULL;
    store_status s = store_probe_table(api->svc->store, id, name, &t);
    if (s == STORE_NOT_FOUND) {
        http_reply_error(req, 404, "not_found", name ? "table" : "id", "no such probe or table");
        return;
    }
    if (s != STORE_OK) {
        api_store_failed(req);
        return;
    }
    /* A table's cells are numbers (reals exactly, %.17g), text or null (empty). */
    csv_buf b = {0};
    size_t i, j;
    json_t *c, *row, *cell;
    json_array_foreach(json_object_get(t, "columns"), i, c) csv_json(&b, c, 17);
    csv_end_row(&b);
    json_array_foreach(json_object_get(t, "rows"), i, row) {
        json_array_foreach(row, j, cell) csv_json(&b, cell, 17);
        csv_end_row(&b);
    }
    size_t len;
    char *buf = csv_take(&b, &len);
    if (!buf) {
        json_decref(t);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    char disp[160];
    snprintf(disp, sizeof disp, "attachment; filename=\"probe-%lld-%s.csv\"", id,
             json_string_value(json_object_get(t, "name")));
    http_reply_header(req, "Content-Disposition", disp);
    http_reply_take(req, 200, "text/csv; charset=utf-8", buf, len);
    json_decref(t);
}
