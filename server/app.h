/* The service's shared state, handed to every HTTP handler as its `app` argument. Built by
 * cmd_serve.c at start-up; the pointers are set once before the HTTP server starts and then only
 * read; each module behind them is safe to call from any thread. */
#ifndef ATTNLAB_APP_H
#define ATTNLAB_APP_H

#include <stddef.h>

#include "corpora.h"
#include "events.h"
#include "http.h"
#include "jobs.h"
#include "metrics_writer.h"
#include "store.h"

typedef struct app {
    store *store;
    http_server *http;
    events *events;
    metrics_writer *writer;
    corpora *corpora;
    jobs *jobs;
    const char *data_dir;
    double started_at;       /* Unix seconds */
    size_t max_model_bytes;  /* larger estimated models are refused before queueing */
    size_t max_upload_bytes; /* corpus uploads */
} app;

/* Registers every API route on the server (server/routes.c). Returns -1 if a route is refused. */
int routes_register(http_server *s, const app *a);

double app_now(void); /* wall-clock Unix seconds */

/* ---- helpers shared by the handlers (server/api_util.c) ---------------------------------- */
/* The {id} path parameter as a positive integer; answers 404 and returns -1 otherwise. */
int api_path_id(http_request *req, long long *id);
/* An integer query argument in [lo, hi] (def when absent); answers 422 and returns -1 if bad. */
int api_query_int(http_request *req, const char *name, long long lo, long long hi, long long def, long long *out);
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

/* ---- handlers ------------------------------------------------------------------------------ */
void api_health(http_request *req, void *app);
void api_openapi(http_request *req, void *app);
void api_prometheus(http_request *req, void *app);

void api_runs_create(http_request *req, void *app);
void api_runs_list(http_request *req, void *app);
void api_runs_get(http_request *req, void *app);
void api_runs_patch(http_request *req, void *app);
void api_runs_delete(http_request *req, void *app);
void api_runs_cancel(http_request *req, void *app);
void api_runs_resume(http_request *req, void *app);
void api_runs_metrics(http_request *req, void *app);
void api_runs_summary(http_request *req, void *app);
void api_runs_csv(http_request *req, void *app);
void api_runs_weights(http_request *req, void *app);

void api_events_all(http_request *req, void *app);
void api_events_run(http_request *req, void *app);

void api_presets(http_request *req, void *app);
void api_experiments_create(http_request *req, void *app);
void api_experiments_list(http_request *req, void *app);
void api_experiments_get(http_request *req, void *app);

void api_corpora_list(http_request *req, void *app);
void api_corpora_get(http_request *req, void *app);
void api_corpora_upload(http_request *req, void *app);
void api_corpora_delete(http_request *req, void *app);
void api_tokenize(http_request *req, void *app);

void api_probe_kinds(http_request *req, void *app);
void api_probes_create(http_request *req, void *app);
void api_probes_list(http_request *req, void *app);
void api_probes_get(http_request *req, void *app);
void api_probes_csv(http_request *req, void *app);

/* Creates one queued run from a normalised config (shared by runs and experiments). On failure it
 * has answered the request and returns -1. */
int api_runs_create_one(http_request *req, app *a, const char *name, const json_t *tags, const char *note,
                        json_t *config, long long experiment_id, const char *variant, long long *id_out);
/* Checks a normalised config can run here (corpus, memory); answers 422 and returns -1 if not.
 * Fills threads when 0. */
int api_runs_admit(http_request *req, app *a, json_t *config, const char *field_prefix);
/* A run as the API shows it: the stored row plus live progress and a brief summary. */
json_t *api_run_view(app *a, json_t *row);

#endif
