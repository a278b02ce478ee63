/* Reads an experiment's result one run at a time (see svc_bundle.h). */
#include "services/svc_bundle.h"

#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "core/run_config.h"
#include "services/svc_experiments.h"

/* The config keys (sorted) whose values are not equal in every run of runs that uses them
 * (run_config_key_used: tau_param is no difference between rope and cosine_rope), other than the
 * seed (each run's own column); NULL when out of memory. A key absent from a run counts as a
 * different value. */
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
        if (!strcmp(k, "seed")) continue;
        const json_t *first = NULL;
        int differs = 0, users = 0;
        json_array_foreach(runs, i, r) {
            const json_t *cfg = json_object_get(r, "config"), *v = json_object_get(cfg, k);
            if (!run_config_key_used(cfg, k)) continue;
            if (users++ == 0) first = v;
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
            if (json_array_set(out, b - 1, json_array_get(out, b)) < 0 || json_array_set_new(out, b, t) < 0) {
                json_decref(out);
                return NULL;
            }
        }
    return out;
fail:
    json_decref(out);
    json_decref(seen);
    return NULL;
}

struct svc_bundle {
    app *a;
    json_t *exp, *runs, *differing;
    char *keys;
    size_t next;
};

void svc_bundle_close(svc_bundle *b) {
    if (!b) return;
    json_decref(b->exp);
    json_decref(b->runs);
    json_decref(b->differing);
    free(b->keys);
    free(b);
}

svc_status svc_bundle_open(app *a, long long id, const char *keys, int max_points, size_t max_total, svc_bundle **out,
                           size_t *points, svc_error *err) {
    *out = NULL;
    *points = 0;
    svc_bundle *b = calloc(1, sizeof *b);
    if (!b || (keys && !(b->keys = strdup(keys)))) {
        free(b);
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    }
    b->a = a;
    store_status s = store_experiment_get(a->store, id, &b->exp);
    if (s != STORE_OK) {
        svc_bundle_close(b);
        return s == STORE_NOT_FOUND ? svc_fail(err, SVC_NOT_FOUND, "not_found", NULL, "no experiment %lld", id)
                                    : svc_store_failed(err);
    }
    /* Every run: older experiments may hold 16 variants x 32 replicates. */
    long long total;
    store_run_filter f = {.experiment_id = id, .sort = "id", .limit = 16 * SVC_EXPERIMENTS_MAX_REPLICATES};
    if (store_run_list(a->store, &f, &b->runs, &total) != STORE_OK) {
        svc_bundle_close(b);
        return svc_store_failed(err);
    }
    if (!(b->differing = differing_keys(b->runs))) {
        svc_bundle_close(b);
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    }
    /* The bound before any point is read: the summaries count each series' points. */
    size_t i, bound = 0;
    json_t *r;
    json_array_foreach(b->runs, i, r) {
        json_t *summary = NULL;
        if (store_metrics_summary(a->store, json_integer_value(json_object_get(r, "id")), &summary) != STORE_OK) {
            svc_bundle_close(b);
            return svc_store_failed(err);
        }
        const char *k;
        json_t *v;
        json_object_foreach(summary, k, v) {
            if (!store_keys_match(k, keys)) continue;
            size_t count = (size_t)json_integer_value(json_object_get(v, "count"));
            bound += max_points > 0 && count > (size_t)max_points ? (size_t)max_points : count;
        }
        json_decref(summary);
    }
    if (bound > max_total) {
        svc_bundle_close(b);
        return svc_fail(err, SVC_INVALID, "too_large", "max_points",
                        "the bundle of experiment %lld would hold up to %zu points, over the bound of %zu: ask for "
                        "fewer points per series (max_points) or fewer keys (keys)",
                        id, bound, max_total);
    }
    *out = b;
    *points = bound;
    return SVC_OK;
}

const json_t *svc_bundle_experiment(const svc_bundle *b) { return b->exp; }
const json_t *svc_bundle_differing(const svc_bundle *b) { return b->differing; }

const char *svc_bundle_keys(const svc_bundle *b) { return b->keys; }

int svc_bundle_next(svc_bundle *b, json_t **run) {
    *run = NULL;
    if (b->next >= json_array_size(b->runs)) return 0;
    json_t *r = json_array_get(b->runs, b->next++);
    long long run_id = json_integer_value(json_object_get(r, "id"));
    json_t *summary = NULL;
    if (store_metrics_summary(b->a->store, run_id, &summary) != STORE_OK) return -1;
    if (json_object_set_new(r, "summary", summary) < 0) return -1; /* it took summary either way */
    *run = r;
    return 1;
}
