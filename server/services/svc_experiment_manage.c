/* Renaming and deleting experiments (svc_experiments.h). */
#include <stdio.h>
#include <string.h>

#include "api/app.h"
#include "services/corpora.h"
#include "services/svc_experiments.h"
#include "services/svc_provenance.h"
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

svc_status svc_experiments_from_bundle(app *a, const json_t *bundle, const char *name, svc_experiment_request *r,
                                       svc_error *err) {
    memset(r, 0, sizeof *r);
    const json_t *e = json_object_get(bundle, "experiment");
    if (!json_is_object(bundle) || !json_is_object(json_object_get(e, "base")) ||
        !json_is_array(json_object_get(e, "variants")))
        return svc_fail(err, SVC_INVALID, "invalid_field", "from_bundle",
                        "from_bundle must be an experiment's bundle (GET /api/experiments/{id}/bundle): its experiment "
                        "with base and variants");
    /* the tokens each run trained on must be the tokens here */
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(bundle, "runs"), i, run) {
        const json_t *c = json_object_get(json_object_get(run, "provenance"), "corpus");
        const char *cname = json_string_value(json_object_get(c, "name"));
        const char *then = json_string_value(json_object_get(c, "sha256"));
        if (!cname || !then || !corpora_name_ok(cname)) continue; /* an external run's, or from before provenance */
        char tokens[4096], now[65];
        long long bytes = 0;
        corpora_dir(a->corpora, cname, tokens, sizeof tokens - 16);
        strcat(tokens, "/tokens.u16");
        if (svc_provenance_corpus_sha256(tokens, now, &bytes) != 0)
            return svc_fail(err, SVC_CONFLICT, "conflict", "from_bundle",
                            "corpus '%s' that run %lld trained on is not here", cname,
                            (long long)json_integer_value(json_object_get(run, "id")));
        if (strcmp(now, then))
            return svc_fail(err, SVC_CONFLICT, "conflict", "from_bundle",
                            "corpus '%s' has other tokens here (sha256 %.12s…) than run %lld trained on (%.12s…)",
                            cname, now, (long long)json_integer_value(json_object_get(run, "id")), then);
    }
    r->name = name ? name : json_string_value(json_object_get(e, "name"));
    r->base = json_object_get(e, "base");
    r->variants = json_object_get(e, "variants");
    r->replicates = json_object_get(e, "replicates");
    return SVC_OK;
}
