/* Renaming and deleting experiments (svc_experiments.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "core/corpora.h"
#include "services/svc_experiments.h"
#include "core/provenance.h"
#include "services/svc_runs.h"

svc_status svc_experiments_rename(app *a, long long id, const char *name, svc_error *err) {
    store_status s = store_experiment_rename(a->store, id, name);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no experiment %lld", id);
    if (s == STORE_CONFLICT)
        return svc_fail(err, SVC_CONFLICT, "conflict", "name", "another experiment is named '%s'", name);
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
        if (provenance_corpus_sha256(tokens, now, &bytes) != 0)
            return svc_fail(err, SVC_CONFLICT, "conflict", "from_bundle",
                            "corpus '%s' that run %lld trained on is not here", cname,
                            (long long)json_integer_value(json_object_get(run, "id")));
        if (strcmp(now, then))
            return svc_fail(err, SVC_CONFLICT, "conflict", "from_bundle",
                            "corpus '%s' has other tokens here (sha256 %.12s…) than run %lld trained on (%.12s…)",
                            cname, now, (long long)json_integer_value(json_object_get(run, "id")), then);
    }
    r->name_given = name != NULL;
    r->name = name ? name : json_string_value(json_object_get(e, "name"));
    r->base = json_object_get(e, "base");
    r->variants = json_object_get(e, "variants");
    r->replicates = json_object_get(e, "replicates");
    return SVC_OK;
}

/* 1 when an experiment's variants (its stored list) or its runs (an external run's variant too)
 * have a variant named name. */
static int has_variant(const json_t *variants, const json_t *runs, const char *name) {
    size_t i;
    const json_t *v;
    json_array_foreach(variants, i, v) {
        const char *known = json_string_value(json_object_get(v, "name"));
        if (known && !strcmp(known, name)) return 1;
    }
    json_array_foreach(runs, i, v) {
        const char *rv = json_string_value(json_object_get(v, "variant"));
        if (rv && !strcmp(rv, name)) return 1;
    }
    return 0;
}

/* A new replicate runs its variant's replicate-0 config exactly: configs[i] becomes the config of
 * the run of variant i and replicate 0, when the experiment has it. -1 when out of memory. */
static int configs_of_replicate_0(svc_experiment_plan *p, const json_t *runs) {
    size_t i;
    const json_t *v;
    json_array_foreach(p->variants, i, v) {
        const char *name = json_string_value(json_object_get(v, "name"));
        size_t k;
        const json_t *r;
        json_array_foreach(runs, k, r) {
            const char *rv = json_string_value(json_object_get(r, "variant"));
            if (!rv || strcmp(rv, name) || json_integer_value(json_object_get(r, "replicate")) != 0 ||
                json_object_get(r, "source"))
                continue;
            json_t *cfg = json_deep_copy(json_object_get(r, "config"));
            if (!cfg || json_array_set_new(p->configs, i, cfg) < 0) return -1;
            break;
        }
    }
    return 0;
}

svc_status svc_experiments_add_runs(app *a, long long id, const json_t *variants, const json_t *replicates,
                                    long long **run_ids, size_t *n, svc_error *err) {
    *run_ids = NULL;
    *n = 0;
    if (!variants == !replicates)
        return svc_fail(err, SVC_INVALID, "invalid_field", variants ? "variants" : "replicates",
                        "give replicates (how many more of every variant) or variants (new ones), one of them");
    json_t *e = NULL, *runs = NULL;
    store_status s = store_experiment_get(a->store, id, &e);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no experiment %lld", id);
    if (s != STORE_OK) return svc_store_failed(err);
    long long total = 0;
    store_run_filter f = {.experiment_id = id, .sort = "id", .limit = SVC_EXPERIMENTS_MAX_RUNS + 64};
    if (store_run_list(a->store, &f, &runs, &total) != STORE_OK) {
        json_decref(e);
        return svc_store_failed(err);
    }
    int had = (int)json_integer_value(json_object_get(e, "replicates"));
    const json_t *known = json_object_get(e, "variants");
    json_t *count = NULL;
    svc_experiment_request r = {.name = json_string_value(json_object_get(e, "name")),
                                .name_given = 1,
                                .base = json_object_get(e, "base"),
                                .variants = variants ? variants : known};
    svc_status v = SVC_OK;
    if (replicates) {
        json_int_t more = json_is_integer(replicates) ? json_integer_value(replicates) : 0;
        if (more < 1 || had + more > SVC_EXPERIMENTS_MAX_REPLICATES)
            v = svc_fail(err, SVC_INVALID, "invalid_field", "replicates",
                         "replicates must be an integer from 1 to %d: the experiment has %d of at most %d",
                         SVC_EXPERIMENTS_MAX_REPLICATES - had, had, SVC_EXPERIMENTS_MAX_REPLICATES);
        r.replicates = count = json_integer(had + more);
        r.first_replicate = had;
    } else {
        r.replicates = count = json_integer(had);
        size_t i;
        const json_t *x;
        json_array_foreach(variants, i, x) {
            const char *name = json_string_value(json_object_get(x, "name"));
            if (name && has_variant(known, runs, name)) {
                v = svc_fail(err, SVC_INVALID, "invalid_field", "variants",
                             "variants[%zu]: the experiment has a variant named '%s'", i, name);
                break;
            }
        }
    }
    svc_experiment_plan plan;
    memset(&plan, 0, sizeof plan);
    if (v == SVC_OK && !count) v = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (v == SVC_OK) v = svc_experiments_plan(a, &r, &plan, err);
    if (v == SVC_OK && total + (long long)plan.n_runs > SVC_EXPERIMENTS_MAX_RUNS)
        v = svc_fail(err, SVC_INVALID, "invalid_field", replicates ? "replicates" : "variants",
                     "the experiment has %lld runs: %zu more pass the most an experiment has, %d", total, plan.n_runs,
                     SVC_EXPERIMENTS_MAX_RUNS);
    if (v == SVC_OK) {
        plan.into = id;
        plan.all_variants = json_deep_copy(known);
        if (!plan.all_variants || (variants && json_array_extend(plan.all_variants, (json_t *)variants) < 0) ||
            (replicates && configs_of_replicate_0(&plan, runs) < 0))
            v = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    }
    long long *ids = v == SVC_OK ? calloc(plan.n_runs ? plan.n_runs : 1, sizeof *ids) : NULL;
    if (v == SVC_OK && !ids) v = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    long long exp_id = 0;
    if (v == SVC_OK) v = svc_experiments_commit(a, &plan, &exp_id, ids, err);
    if (v == SVC_OK) {
        *run_ids = ids;
        *n = plan.n_runs;
    } else {
        free(ids);
    }
    svc_experiments_plan_free(&plan);
    json_decref(count);
    json_decref(runs);
    json_decref(e);
    return v;
}
