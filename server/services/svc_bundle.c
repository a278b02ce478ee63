/* Reads an experiment's result one run at a time (see svc_bundle.h). */
#include "services/svc_bundle.h"

#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "services/svc_experiments.h"

/* The config keys (sorted) whose values are not equal in every run of runs; NULL when out of
 * memory. A key absent from a run counts as a different value. */
static json_t *differing_keys(const json_t *runs) {
    json_t *out = json_array(), *seen = json_object();
    if (!out || !seen) goto fail;
    size_t i;
    const json_t *r;
    json_array_foreach(runs, i, r) {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(r, "config"), k,
                            v) if (json_object_set_new(seen, k, json_true()) < 0) goto fail;
    }
    const char *k;
    json_t *unused;
    json_object_foreach(seen, k, unused) {
        const json_t *first = json_object_get(json_object_get(json_array_get(runs, 0), "config"), k);
        int differs = 0;
        json_array_foreach(runs, i, r) {
            const json_t *v = json_object_get(json_object_get(r, "config"), k);
            if (!first || !v || !json_equal(first, v)) differs = 1;
        }
        if (differs && json_array_append_new(out, json_string(k)) < 0) goto fail;
    }
    json_decref(seen);
    /* json_object_foreach visits in insertion order: sort for a stable header. */
    size_t n = json_array_size(out);
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0; b--) {
            const char *x = json_string_value(json_array_get(out, b - 1)),
                       *y = json_string_value(json_array_get(out, b));
            if (strcmp(x, y) <= 0) break;
            json_t *t = json_incref(json_array_get(out, b - 1));
            json_array_set(out, b - 1, json_array_get(out, b));
            json_array_set_new(out, b, t);
        }
    return out;
fail:
    json_decref(out);
    json_decref(seen);
    return NULL;
}

svc_status svc_bundle_each(app *a, long long id, const char *keys, json_t **experiment, json_t **differing,
                           svc_bundle_run_fn fn, void *ctx, svc_error *err) {
    *experiment = NULL;
    *differing = NULL;
    json_t *exp = NULL, *runs = NULL;
    store_status s = store_experiment_get(a->store, id, &exp);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", NULL, "no experiment %lld", id);
    if (s != STORE_OK) return svc_store_failed(err);
    /* Every run: older experiments may hold 16 variants x 32 replicates. */
    long long total;
    store_run_filter f = {.experiment_id = id, .sort = "id", .limit = 16 * SVC_EXPERIMENTS_MAX_REPLICATES};
    if (store_run_list(a->store, &f, &runs, &total) != STORE_OK) {
        json_decref(exp);
        return svc_store_failed(err);
    }
    json_t *diff = differing_keys(runs);
    svc_status st = diff ? SVC_OK : svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        if (st != SVC_OK) break;
        long long run_id = json_integer_value(json_object_get(r, "id"));
        json_t *summary = NULL;
        store_metric *points = NULL;
        size_t n = 0;
        if (store_metrics_summary(a->store, run_id, &summary) != STORE_OK ||
            store_metrics_points(a->store, run_id, keys, 0, &points, &n) != STORE_OK) {
            json_decref(summary);
            st = svc_store_failed(err);
            break;
        }
        int rc = json_object_set_new(r, "summary", summary) < 0 ? -1 : fn(ctx, diff, r, points, n);
        free(points);
        if (rc == -1) st = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
        if (rc == -2)
            st = svc_fail(err, SVC_INVALID, "too_large", "max_points",
                          "the bundle of experiment %lld would be too large: ask for fewer points (max_points) "
                          "or keys (keys)",
                          id);
    }
    json_decref(runs);
    if (st != SVC_OK) {
        json_decref(exp);
        json_decref(diff);
        return st;
    }
    *experiment = exp;
    *differing = diff;
    return SVC_OK;
}
