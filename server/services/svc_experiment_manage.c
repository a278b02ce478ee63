/* Renaming and deleting experiments (svc_experiments.h). */
#include <stdio.h>
#include <string.h>

#include "api/app.h"
#include "services/svc_experiments.h"
#include "services/svc_runs.h"

svc_status svc_experiments_rename(app *a, long long id, const char *name, svc_error *err) {
    store_status s = store_experiment_rename(a->store, id, name);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no experiment %lld", id);
    return s == STORE_OK ? SVC_OK : svc_store_failed(err);
}

svc_status svc_experiments_delete(app *a, long long id, int with_runs, svc_error *err) {
    json_t *e = NULL, *runs = NULL;
    store_status s = store_experiment_get(a->store, id, &e);
    json_decref(e);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no experiment %lld", id);
    if (s != STORE_OK) return svc_store_failed(err);
    if (with_runs) {
        long long total = 0;
        store_run_filter f = {.experiment_id = id, .sort = "id", .limit = 16 * SVC_EXPERIMENTS_MAX_REPLICATES};
        if (store_run_list(a->store, &f, &runs, &total) != STORE_OK) return svc_store_failed(err);
        size_t i;
        json_t *r;
        /* all or nothing: a run still queued or training keeps the whole experiment */
        json_array_foreach(runs, i, r) {
            const char *status = json_string_value(json_object_get(r, "status"));
            if (!store_run_status_ended(status)) {
                svc_status st =
                    svc_fail(err, SVC_CONFLICT, "conflict", "runs",
                             "run %lld is %s: cancel it first, or keep the runs (runs=keep)",
                             (long long)json_integer_value(json_object_get(r, "id")), status ? status : "?");
                json_decref(runs);
                return st;
            }
        }
        json_array_foreach(runs, i, r) {
            svc_status st = svc_runs_delete(a, json_integer_value(json_object_get(r, "id")), err);
            if (st != SVC_OK && st != SVC_NOT_FOUND) {
                json_decref(runs);
                return st;
            }
        }
        json_decref(runs);
    }
    s = store_experiment_delete(a->store, id);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no experiment %lld", id);
    return s == STORE_OK ? SVC_OK : svc_store_failed(err);
}
