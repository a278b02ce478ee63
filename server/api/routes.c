/* The route table of attnlabd: one line per route. GET also answers HEAD. A heavy route (statistics
 * over an experiment, exports, probes) runs on the HTTP layer's compute pool, after admission, never
 * on an HTTP thread (http_route_heavy). The query keys a route takes are the ones its operation in
 * openapi.json documents (`"in": "query"`): that is their one table, which the router enforces (any
 * other key is a 422 naming it) and the description publishes. */
#include "api/api.h"
#include "services/svc_import.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/run_config.h"

typedef struct {
    http_server *s;
    int failed;
} query_tables;

/* Gives route (method, pattern) the query keys its operation documents: "config.KEY" (a name that
 * ends in ".KEY") stands for every key beginning with "config.". */
static void take_documented_query(const char *method, const char *pattern, void *ctx) {
    query_tables *t = ctx;
    char op[8], keys[1024] = "";
    size_t i = 0, used = 0;
    for (; method[i] && i < sizeof op - 1; i++) op[i] = (char)tolower((unsigned char)method[i]);
    op[i] = 0;
    const json_t *path = json_object_get(json_object_get(run_config_openapi(), "paths"), pattern);
    /* the path's parameters, then its operation's */
    const json_t *lists[2] = {json_object_get(path, "parameters"),
                              json_object_get(json_object_get(path, op), "parameters")};
    for (size_t l = 0; l < 2; l++) {
        const json_t *p;
        json_array_foreach(lists[l], i, p) {
            const char *name = json_string_value(json_object_get(p, "name"));
            const char *in = json_string_value(json_object_get(p, "in"));
            if (!name || !in || strcmp(in, "query") != 0) continue;
            size_t n = strlen(name);
            int prefix = n > 4 && !strcmp(name + n - 4, ".KEY");
            int w = snprintf(keys + used, sizeof keys - used, "%s%.*s%s", used ? "," : "", (int)(prefix ? n - 3 : n),
                             name, prefix ? "*" : "");
            if (w < 0 || (size_t)w >= sizeof keys - used) {
                t->failed = 1;
                return;
            }
            used += (size_t)w;
        }
    }
    if (http_route_query(t->s, method, pattern, keys) < 0) t->failed = 1;
}

/* The routes' query keys, once every route is in: -1 when a route or its keys could not be set. */
static int routes_done(http_server *s, int rc) {
    query_tables t = {.s = s};
    if (run_config_init() < 0) return -1; /* the description the keys are read from */
    if (!rc) http_server_each_route(s, take_documented_query, &t);
    return rc || t.failed ? -1 : 0;
}

int routes_register(http_server *s, const api_ctx *api) {
    int rc = 0;
    rc |= http_route(s, "GET", "/api/health", api_health);
    rc |= http_route(s, "GET", "/api/openapi.json", api_openapi);
    rc |= http_route(s, "GET", "/metrics", api_prometheus);
    rc |= http_route(s, "GET", "/api/nodes", api_nodes);
    if (api->worker_only) return routes_done(s, rc); /* a worker node trains; the API is served by others */
    rc |= http_route(s, "GET", "/api/presets", api_presets);

    rc |= http_route(s, "GET", "/api/runs", api_runs_list);
    rc |= http_route(s, "POST", "/api/runs", api_runs_create);
    rc |= http_route(s, "GET", "/api/runs/{id}", api_runs_get);
    rc |= http_route(s, "PATCH", "/api/runs/{id}", api_runs_patch);
    rc |= http_route(s, "DELETE", "/api/runs/{id}", api_runs_delete);
    rc |= http_route(s, "POST", "/api/runs/{id}/cancel", api_runs_cancel);
    rc |= http_route(s, "POST", "/api/runs/{id}/resume", api_runs_resume);
    rc |= http_route(s, "GET", "/api/runs/{id}/metrics", api_runs_metrics);
    rc |= http_route(s, "POST", "/api/runs/{id}/metrics", api_runs_metrics_post);
    rc |= http_route(s, "GET", "/api/runs/{id}/summary", api_runs_summary);
    rc |= http_route_heavy(s, "GET", "/api/runs/{id}/metrics.csv", api_runs_csv);
    rc |= http_route(s, "GET", "/api/runs/{id}/weights", api_runs_weights);
    rc |= http_route_upload(s, "POST", "/api/runs/{id}/weights", api_runs_weights_upload, api->svc->max_model_bytes);
    rc |= http_route(s, "GET", "/api/runs/{id}/events", api_events_run);
    rc |= http_route(s, "GET", "/api/events", api_events_all);

    rc |= http_route(s, "GET", "/api/experiments", api_experiments_list);
    rc |= http_route(s, "POST", "/api/experiments", api_experiments_create);
    rc |= http_route_upload_heavy(s, "POST", "/api/experiments/import", api_experiments_import, SVC_IMPORT_MAX_BYTES);
    rc |= http_route(s, "GET", "/api/experiments/{id}", api_experiments_get);
    rc |= http_route(s, "PATCH", "/api/experiments/{id}", api_experiments_patch);
    rc |= http_route(s, "DELETE", "/api/experiments/{id}", api_experiments_delete);
    rc |= http_route(s, "POST", "/api/experiments/{id}/runs", api_experiments_add_runs);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/stats", api_experiments_stats);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/stats.csv", api_experiments_stats_csv);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/series", api_experiments_series);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/plot.svg", api_experiments_plot_svg);

    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/bundle", api_experiments_bundle);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/bundle.csv", api_experiments_bundle_csv);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/head-spread", api_experiments_head_spread);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/head-spread.csv", api_experiments_head_spread_csv);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/accuracy", api_experiments_accuracy);
    rc |= http_route_heavy(s, "GET", "/api/experiments/{id}/accuracy.csv", api_experiments_accuracy_csv);

    rc |= http_route(s, "GET", "/api/corpora", api_corpora_list);
    rc |= http_route_upload(s, "POST", "/api/corpora", api_corpora_upload, api->max_upload_bytes);
    rc |= http_route(s, "GET", "/api/corpora/{name}", api_corpora_get);
    rc |= http_route(s, "DELETE", "/api/corpora/{name}", api_corpora_delete);
    rc |= http_route(s, "POST", "/api/tokenize", api_tokenize);
    rc |= http_route(s, "GET", "/api/task-kinds", api_task_kinds);
    rc |= http_route(s, "POST", "/api/task-corpora", api_task_corpora_create);

    rc |= http_route(s, "GET", "/api/probe-kinds", api_probe_kinds);
    rc |= http_route(s, "GET", "/api/attention-kinds", api_attention_kinds);
    rc |= http_route(s, "GET", "/api/probes", api_probes_list);
    rc |= http_route_heavy(s, "POST", "/api/probes", api_probes_create);
    rc |= http_route(s, "GET", "/api/probes/{id}", api_probes_get);
    rc |= http_route_heavy(s, "GET", "/api/probes/{id}/csv", api_probes_csv);

    rc |= http_route(s, "POST", "/api/follow", api_follow_create);
    rc |= http_route(s, "PUT", "/api/follow/{code}", api_follow_update);
    rc |= http_route(s, "GET", "/api/follow/{code}", api_follow_get);
    return routes_done(s, rc);
}
