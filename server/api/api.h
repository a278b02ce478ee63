/* The API layer's contract with its handlers (server/api/): what a handler is given, the helpers
 * it parses and replies with, and the handlers routes.c registers.
 *
 * A handler is `void api_<resource>_<verb>(http_request *req, const api_ctx *api)`: it parses the
 * request (the helpers below answer 404/422 themselves), calls one service (or a store read) and
 * replies exactly once (http.h). `api` is the same for every request and lives as long as the
 * server: read-only, every pointer set by cmd_serve.c before the server starts; what they point to is safe to call from
 * any thread. A handler reaches the rest of the process only through it: the services through `svc`, the rest through
 * the few members below. The HTTP layer only passes the pointer on (http.h's http_handler_ctx,
 * completed here). */
#ifndef ATTNLAB_API_H
#define ATTNLAB_API_H

#include <stddef.h>

#include "services/app.h"
#include "api/reply_cache.h"
#include "cluster/nodes.h"
#include "http/http.h"
#include "core/events.h"
#include "jobs/metrics_writer.h"
#include "services/svc.h"
#include "services/svc_idempotency.h"
#include "store/store.h"

typedef struct http_handler_ctx api_ctx;
struct http_handler_ctx {
    app *svc;                /* what every service call takes, and the handlers' own store reads */
    reply_cache *replies;    /* answers about ended runs' metrics and ended experiments; NULL: none kept */
    http_server *http;       /* the server answering: its counters (/metrics, the runs list's cache) */
    metrics_writer *writer;  /* health and /metrics */
    nodes *nodes;            /* this process as a node (GET /api/nodes, /metrics) */
    double started_at;       /* Unix seconds, for health's uptime */
    int worker_only;         /* --role worker: only health, metrics and nodes are routed */
    size_t max_upload_bytes; /* corpus uploads (weights uploads: svc->max_model_bytes) */
};

/* Registers every API route on the server (routes.c); the server's http_config.handler_ctx is the
 * api_ctx its handlers get. Returns -1 if a route is refused. */
int routes_register(http_server *s, const api_ctx *api);

/* ---- helpers shared by the handlers (server/api/api_util.c) ------------------------------ */
/* The {id} path parameter as a positive integer; answers 404 and returns -1 otherwise. */
int api_path_id(http_request *req, long long *id);
/* An integer query argument in [lo, hi] (def when absent); answers 422 and returns -1 if bad. */
int api_query_int(http_request *req, const char *name, long long lo, long long hi, long long def, long long *out);
/* The max_points query argument of every series route: 0 (every point) or 2..100000, def when
 * absent; answers 422 and returns -1 if bad. */
int api_query_max_points(http_request *req, long long def, long long *out);
/* A query argument that must be one of a NULL-terminated list (or absent); 422 on anything else. */
int api_query_enum(http_request *req, const char *name, const char *const *allowed, const char **out);
/* Refuses (422, field named) any member of obj not in the NULL-terminated list. */
int api_only_fields(http_request *req, const json_t *obj, const char *const *allowed);
/* Optional string member with a length cap; 422 when present but not a string or too long. */
int api_opt_string(http_request *req, const json_t *obj, const char *field, size_t max_len, const char **out);
/* Optional array of tags (1..40 chars of [a-zA-Z0-9_.:-], at most 32); 422 otherwise. */
int api_opt_tags(http_request *req, const json_t *obj, const char *field, json_t **out);
/* Answers 500 for a store failure. */
void api_store_failed(http_request *req);
/* The Idempotency-Key header of a creation of `kind` (svc_idempotency.h) with its request body:
 * 0 with *use NULL when there is none, or pointing at idem (prepared; idem->replay > 0 for a retry
 * of a creation that committed: answer that with api_reply_replayed first). -1 once a 422 or 500 has
 * been answered. */
int api_idempotency(http_request *req, const api_ctx *api, const char *kind, const json_t *body, svc_idem *idem,
                    svc_idem **use);
/* Marks the coming answer as a retry's (Idempotent-Replayed: true) and sets Location to path/id. */
void api_reply_replayed(http_request *req, const char *path, long long id);
/* Answers a service's refusal: its status as the HTTP status (422, 404, 409, 429 with
 * Retry-After, 500), its code, field and message. */
void api_reply_svc_error(http_request *req, const svc_error *err);

/* Answers about an experiment that can no longer change are kept in the reply cache. key gets a
 * cache key for `what` (the route and its query) about experiment id: "" unless every run of it has
 * ended (succeeded, failed, cancelled); it names each run's id, status, step, creation and end times
 * (through their SHA-256), so a resumed or deleted run changes it. 0, or -1 when the runs cannot be
 * read (nothing answered; the caller goes on uncached). */
int api_experiment_key(const api_ctx *api, long long id, const char *what, char *key, size_t cap);
/* Answers the body cached under key with 200 (1), or nothing (0: key "" or a miss). */
int api_reply_cached(http_request *req, const api_ctx *api, const char *key, const char *content_type);
/* Answers 200 with body (malloc'd, taken; NULL: 500 out of memory), keeping a copy under key when
 * key is not "". The JSON form takes the value and writes it as http_reply_json does. */
void api_reply_keeping(http_request *req, const api_ctx *api, const char *key, const char *content_type, char *body,
                       size_t len);
void api_reply_json_keeping(http_request *req, const api_ctx *api, const char *key, json_t *body);

/* The skeletons of the list and get handlers. */
typedef store_status (*api_get_fn)(store *st, long long id, json_t **out);
/* Loads the object the {id} path parameter names with get: 0 with *id and *out (owned) set, or
 * -1 after answering 404 ("no <what> <id>") or 500. */
int api_load_by_id(http_request *req, const api_ctx *api, const char *what, api_get_fn get, long long *id,
                   json_t **out);
/* GET of one object: 200 {"<what>": object}, or 404 / 500. */
void api_reply_by_id(http_request *req, const api_ctx *api, const char *what, api_get_fn get);
/* The limit (1..500, default 50) and offset query arguments; answers 422 and returns -1 if bad. */
int api_query_page(http_request *req, long long *limit, long long *offset);
/* The search `q` (NULL when absent); 422 (field q) and -1 for one the store does not take
 * (store_search_ok). */
int api_query_search(http_request *req, const char **out);
/* Answers a list read with status s: 200 {"<member>": list, "total": total} (taking list), or 500. */
void api_reply_list(http_request *req, store_status s, const char *member, json_t *list, long long total);

/* ---- handlers ------------------------------------------------------------------------------ */
void api_health(http_request *req, const api_ctx *api);
void api_openapi(http_request *req, const api_ctx *api);
void api_prometheus(http_request *req, const api_ctx *api);
void api_nodes(http_request *req, const api_ctx *api);

void api_runs_create(http_request *req, const api_ctx *api);
void api_runs_list(http_request *req, const api_ctx *api);
void api_runs_get(http_request *req, const api_ctx *api);
void api_runs_patch(http_request *req, const api_ctx *api);
void api_runs_delete(http_request *req, const api_ctx *api);
void api_runs_cancel(http_request *req, const api_ctx *api);
void api_runs_resume(http_request *req, const api_ctx *api);
void api_runs_metrics(http_request *req, const api_ctx *api);
void api_runs_summary(http_request *req, const api_ctx *api);
void api_runs_csv(http_request *req, const api_ctx *api);
void api_runs_weights(http_request *req, const api_ctx *api);

void api_events_all(http_request *req, const api_ctx *api);
void api_events_run(http_request *req, const api_ctx *api);

void api_presets(http_request *req, const api_ctx *api);
void api_experiments_create(http_request *req, const api_ctx *api);
void api_experiments_list(http_request *req, const api_ctx *api);
void api_experiments_get(http_request *req, const api_ctx *api);
void api_experiments_patch(http_request *req, const api_ctx *api);    /* rename */
void api_experiments_delete(http_request *req, const api_ctx *api);   /* ?runs=keep|delete */
void api_experiments_add_runs(http_request *req, const api_ctx *api); /* POST /api/experiments/{id}/runs */
void api_experiments_stats(http_request *req, const api_ctx *api);
void api_experiments_stats_csv(http_request *req, const api_ctx *api);
void api_experiments_series(http_request *req, const api_ctx *api);
void api_experiments_bundle(http_request *req, const api_ctx *api);
void api_experiments_bundle_csv(http_request *req, const api_ctx *api);
/* POST /api/experiments/import: a bundle stored again, nothing trained (api_import.c). */
void api_experiments_import(http_request *req, const api_ctx *api);
/* Runs trained elsewhere (api_external.c, svc_external.h): POST /api/runs with "source":"external"
 * is handed to api_runs_create_external (body owned by the caller); their points. */
void api_runs_create_external(http_request *req, const api_ctx *api, json_t *body, svc_idem *idem);
void api_runs_metrics_post(http_request *req, const api_ctx *api);
void api_runs_weights_upload(http_request *req, const api_ctx *api);
/* Answers `status` with {"run": the run's view} (api_util.c). */
void api_runs_reply(http_request *req, const api_ctx *api, long long id, int status);
/* Answers 201 for run id just created, with its Location (marked a retry's when idem->replay). */
void api_runs_created(http_request *req, const api_ctx *api, long long id, const svc_idem *idem);
/* An experiment's figure as SVG (api_plots.c, svc_plots.h). */
void api_experiments_plot_svg(http_request *req, const api_ctx *api);

/* The seed blog's open questions over an experiment (api_questions.c): head spread and accuracy. */
void api_experiments_head_spread(http_request *req, const api_ctx *api);
void api_experiments_head_spread_csv(http_request *req, const api_ctx *api);
void api_experiments_accuracy(http_request *req, const api_ctx *api);
void api_experiments_accuracy_csv(http_request *req, const api_ctx *api);

void api_corpora_list(http_request *req, const api_ctx *api);
void api_corpora_get(http_request *req, const api_ctx *api);
void api_corpora_upload(http_request *req, const api_ctx *api);
void api_corpora_delete(http_request *req, const api_ctx *api);
void api_tokenize(http_request *req, const api_ctx *api);
/* Task corpora (api_tasks.c): the kinds, and generating one. */
void api_task_kinds(http_request *req, const api_ctx *api);
void api_task_corpora_create(http_request *req, const api_ctx *api);

void api_probe_kinds(http_request *req, const api_ctx *api);
void api_attention_kinds(http_request *req, const api_ctx *api);
void api_probes_create(http_request *req, const api_ctx *api);
void api_probes_list(http_request *req, const api_ctx *api);
void api_probes_get(http_request *req, const api_ctx *api);
void api_probes_csv(http_request *req, const api_ctx *api);
/* presenter mode (api_follow.c) */
void api_follow_create(http_request *req, const api_ctx *api);
void api_follow_update(http_request *req, const api_ctx *api);
void api_follow_get(http_request *req, const api_ctx *api);

#endif
