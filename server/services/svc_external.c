/* Runs trained elsewhere (svc_external.h): checks, then the store and the live streams. */
#include "services/svc_external.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "services/app.h"
#include "engine/attention.h"
#include "engine/model.h"
#include "engine/model_io.h"
#include "core/checkpoints.h"
#include "core/run_status.h"
#include "services/svc_experiments.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "util/json_text.h"

int svc_external_is(const json_t *run) {
    const char *src = json_string_value(json_object_get(run, "source"));
    return src && !strcmp(src, "external");
}

/* The run, which must exist, be external and still run: SVC_OK with *run (the caller's), or the
 * refusal. */
static svc_status running_external(app *a, long long id, json_t **run, svc_error *err) {
    *run = NULL;
    store_status s = store_run_get(a->store, id, run);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no run %lld", id);
    if (s != STORE_OK) return svc_store_failed(err);
    const char *status = json_string_value(json_object_get(*run, "status"));
    svc_status st = SVC_OK;
    if (!svc_external_is(*run))
        st = svc_fail(err, SVC_CONFLICT, "conflict", "id",
                      "run %lld is trained by this service: only external runs take points and a status", id);
    else if (!status || strcmp(status, "running"))
        st = svc_fail(err, SVC_CONFLICT, "conflict", "status", "run %lld has ended (%s)", id, status ? status : "?");
    if (st != SVC_OK) {
        json_decref(*run);
        *run = NULL;
    }
    return st;
}

svc_status svc_external_create(app *a, const svc_external_run *r, long long *id, svc_error *err) {
    *id = 0;
    json_t *empty = NULL;
    const json_t *config = r->config;
    if (!config) config = empty = json_object();
    if (!json_is_object(config))
        return svc_fail(err, SVC_INVALID, "invalid_field", "config", "config must be an object");
    if (json_object_size(config) > SVC_EXTERNAL_MAX_CONFIG_KEYS) {
        json_decref(empty);
        return svc_fail(err, SVC_INVALID, "invalid_field", "config", "config has more than %d members",
                        SVC_EXTERNAL_MAX_CONFIG_KEYS);
    }
    char *text = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(empty);
    if (!text) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (strlen(text) > SVC_EXTERNAL_MAX_CONFIG_BYTES) {
        free(text);
        return svc_fail(err, SVC_INVALID, "too_large", "config", "config is over %d bytes as JSON",
                        SVC_EXTERNAL_MAX_CONFIG_BYTES);
    }
    const char *attention = json_string_value(json_object_get(config, "attention"));
    const char *variant = r->variant                                                ? r->variant
                          : attention && svc_experiments_variant_name_ok(attention) ? attention
                                                                                    : "external";
    svc_status st = SVC_OK;
    char *prov = NULL;
    if (!svc_experiments_variant_name_ok(variant))
        st = svc_fail(err, SVC_INVALID, "invalid_field", "variant",
                      "variant must be 1 to %d letters, digits and _ . - = , +", SVC_EXPERIMENTS_MAX_VARIANT_NAME);
    else if (r->provenance && (!json_is_object(r->provenance) || !(prov = json_dumps(r->provenance, JSON_COMPACT)) ||
                               strlen(prov) > 16384))
        st =
            svc_fail(err, SVC_INVALID, "invalid_field", "provenance", "provenance must be an object of at most 16 KiB");
    else if (r->replicate < 0 || r->replicate > 1023)
        st = svc_fail(err, SVC_INVALID, "invalid_field", "replicate", "replicate must be 0 to 1023");
    else if (r->experiment_id) {
        json_t *e = NULL;
        store_status s = store_experiment_get(a->store, r->experiment_id, &e);
        json_decref(e);
        if (s == STORE_NOT_FOUND)
            st = svc_fail(err, SVC_INVALID, "invalid_field", "experiment_id", "no experiment %lld", r->experiment_id);
        else if (s != STORE_OK)
            st = svc_store_failed(err);
    }
    if (st != SVC_OK) {
        free(text);
        free(prov);
        return st;
    }
    json_t *seed = json_object_get(config, "seed"), *steps = json_object_get(config, "steps");
    store_new_run row = {.name = r->name ? r->name : "",
                         .variant = variant,
                         .note = r->note,
                         .corpus = json_string_value(json_object_get(config, "corpus")),
                         .config_json = text,
                         .seed = json_is_integer(seed) ? (long long)json_integer_value(seed) : 0,
                         .experiment_id = r->experiment_id,
                         .replicate = r->replicate,
                         .total_steps = json_is_integer(steps) && json_integer_value(steps) > 0 &&
                                                json_integer_value(steps) < 2147483647
                                            ? (int)json_integer_value(steps)
                                            : 0,
                         .tags = r->tags,
                         .external = 1,
                         .idempotency = r->idem ? &r->idem->record : NULL};
    store_status s = store_run_create(a->store, &row, id);
    free(text);
    if (s == STORE_CONFLICT && r->idem) {
        free(prov);
        svc_status v = svc_idempotency_settle(a, r->idem, err);
        if (v == SVC_OK) *id = r->idem->replay;
        if (v == SVC_NOT_FOUND)
            v = svc_fail(err, SVC_CONFLICT, "conflict", NULL, "the run conflicted with another change; try again");
        return v;
    }
    if (s == STORE_OK && prov) s = store_run_set_provenance(a->store, *id, prov);
    free(prov);
    if (s != STORE_OK) return svc_store_failed(err);
    run_status_publish(a->events, a->store, *id);
    return SVC_OK;
}

int svc_external_key_ok(const char *k) {
    size_t n = strlen(k);
    if (n < 1 || n > STORE_METRIC_KEY_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= '0' && k[i] <= '9') ||
              strchr("_.-:/", k[i])))
            return 0;
    return 1;
}

/* Checks point i into *out; SVC_OK or the refusal naming points[i].<field>. */
static svc_status read_point(const json_t *p, size_t i, long long run_id, double now, store_metric *out,
                             svc_error *err) {
    static const char *const fields[] = {"step", "key", "value", "wall_time", NULL};
    if (!json_is_object(p))
        return svc_fail(err, SVC_INVALID, "invalid_field", "points", "points[%zu] must be an object", i);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)p, k, v) {
        int known = 0;
        for (int f = 0; fields[f]; f++) known |= !strcmp(k, fields[f]);
        if (!known) {
            svc_fail(err, SVC_INVALID, "invalid_field", NULL, "points[%zu] has an unknown member", i);
            snprintf(err->field, sizeof err->field, "points[%zu]", i);
            return SVC_INVALID;
        }
    }
    json_t *step = json_object_get(p, "step"), *key = json_object_get(p, "key"), *value = json_object_get(p, "value");
    json_t *wall = json_object_get(p, "wall_time");
    const char *bad = NULL, *why = NULL;
    if (!json_is_integer(step) || json_integer_value(step) < 0 || json_integer_value(step) > 1000000000)
        bad = "step", why = "an integer from 0 to 1000000000";
    else if (!json_is_string(key) || !svc_external_key_ok(json_string_value(key)))
        bad = "key", why = "1 to 250 bytes of letters, digits and _ . - : /";
    else if (!json_is_number(value) || !isfinite(json_number_value(value)))
        bad = "value", why = "a finite number";
    else if (wall && (!json_is_number(wall) || !isfinite(json_number_value(wall)) || json_number_value(wall) < 0))
        bad = "wall_time", why = "a finite number of seconds since 1970";
    if (bad) {
        svc_fail(err, SVC_INVALID, "invalid_field", NULL, "points[%zu].%s must be %s", i, bad, why);
        snprintf(err->field, sizeof err->field, "points[%zu].%s", i, bad);
        return SVC_INVALID;
    }
    out->run_id = run_id;
    out->step = (int)json_integer_value(step);
    out->key = json_string_value(key); /* borrowed from the request, which outlives the insert */
    out->value = json_number_value(value);
    out->wall_time = wall ? json_number_value(wall) : now;
    return SVC_OK;
}

/* Each step's points as one "metrics" event, shaped as a trained run's (jobs.c). */
static void publish_points(app *a, long long id, int total, const store_metric *pts, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t j = i;
        json_t *values = json_object();
        int bad = !values;
        for (; j < n && pts[j].step == pts[i].step; j++)
            bad |= !bad && json_object_set_new(values, pts[j].key, json_real(pts[j].value)) < 0;
        if (bad) { /* out of memory: this step is not told (the points are stored) */
            json_decref(values);
            i = j;
            continue;
        }
        json_t *ev = json_pack("{s:I, s:I, s:I, s:f, s:n, s:n, s:o}", "run_id", (json_int_t)id, "step",
                               (json_int_t)pts[i].step, "total_steps", (json_int_t)total, "wall_time", pts[i].wall_time,
                               "eta_s", "tokens_per_s", "values", values);
        char *text = ev ? json_text_dumps(ev, JSON_COMPACT) : NULL;
        if (text) events_publish(a->events, id, "metrics", text);
        free(text);
        json_decref(ev);
        i = j;
    }
}

static int by_step(const void *x, const void *y) {
    const store_metric *a = x, *b = y;
    return (a->step > b->step) - (a->step < b->step);
}

svc_status svc_external_log(app *a, long long id, const json_t *points, int *stored, svc_error *err) {
    *stored = 0;
    size_t n = json_array_size(points);
    if (!json_is_array(points) || n < 1 || n > SVC_EXTERNAL_MAX_POINTS)
        return svc_fail(err, SVC_INVALID, "invalid_field", "points", "points must be an array of 1 to %d points",
                        SVC_EXTERNAL_MAX_POINTS);
    json_t *run = NULL;
    svc_status st = running_external(a, id, &run, err);
    if (st != SVC_OK) return st;
    int total = (int)json_integer_value(json_object_get(run, "total_steps")),
        step = (int)json_integer_value(json_object_get(run, "step"));
    json_decref(run);
    store_metric *pts = malloc(n * sizeof *pts);
    if (!pts) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    double now = app_now();
    for (size_t i = 0; i < n && st == SVC_OK; i++) st = read_point(json_array_get(points, i), i, id, now, &pts[i], err);
    if (st == SVC_OK) {
        qsort(pts, n, sizeof *pts, by_step); /* stable enough: equal steps stay one event */
        if (store_metrics_insert(a->store, pts, n) != STORE_OK) st = svc_store_failed(err);
    }
    if (st == SVC_OK) {
        if (pts[n - 1].step > step && store_run_progress(a->store, id, pts[n - 1].step, 0) != STORE_OK)
            st = svc_store_failed(err);
        publish_points(a, id, total, pts, n);
        *stored = (int)n;
    }
    free(pts);
    return st;
}

svc_status svc_external_finish(app *a, long long id, const char *status, const char *error, svc_error *err) {
    if (!status || (strcmp(status, "succeeded") && strcmp(status, "failed")))
        return svc_fail(err, SVC_INVALID, "invalid_field", "status", "status must be succeeded or failed");
    json_t *run = NULL;
    svc_status st = running_external(a, id, &run, err);
    json_decref(run);
    if (st != SVC_OK) return st;
    static const char *const from[] = {"running", NULL};
    char why[1001];
    snprintf(why, sizeof why, "%s", error ? error : "");
    store_status s = store_run_transition(a->store, id, from, status, error ? why : NULL);
    if (s == STORE_CONFLICT) return svc_fail(err, SVC_CONFLICT, "conflict", "status", "run %lld has ended", id);
    if (s != STORE_OK) return svc_store_failed(err);
    run_status_publish(a->events, a->store, id);
    return SVC_OK;
}

svc_status svc_external_weights(app *a, long long id, const char *upload, json_t **info, svc_error *err) {
    *info = NULL;
    json_t *run = NULL;
    store_status s = store_run_get(a->store, id, &run);
    svc_status st = SVC_OK;
    if (s == STORE_NOT_FOUND)
        st = svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no run %lld", id);
    else if (s != STORE_OK)
        st = svc_store_failed(err);
    else if (!svc_external_is(run))
        st = svc_fail(err, SVC_CONFLICT, "conflict", "id",
                      "run %lld is trained by this service: its weights are its own checkpoints", id);
    long step = run ? (long)json_integer_value(json_object_get(run, "step")) : 0;
    json_decref(run);
    if (st != SVC_OK) {
        unlink(upload);
        return st;
    }
    /* the loader's own rules: a config from the metadata, then every tensor with its shape */
    engine_error e = {0};
    model *m = NULL;
    if (model_load(&m, upload, 1, 1, 0, &e) != ENGINE_OK) {
        unlink(upload);
        return svc_fail(err, SVC_INVALID, "invalid_field", "body", "these weights cannot be loaded: %s", e.message);
    }
    const model_config *c = model_get_config(m);
    *info = json_pack("{s:I, s:i, s:i, s:i, s:i, s:i, s:s}", "run_id", (json_int_t)id, "n_layer", c->n_layer, "n_head",
                      c->n_head, "d_model", c->d_model, "seq_len", c->seq_len, "vocab", c->vocab, "attention",
                      attention_kind_name(c->attention));
    model_free(m);
    char staging[4096], final[4096], dir[4096], why[256] = "out of memory";
    checkpoint_paths(a->data_dir, id, staging, sizeof staging, final, sizeof final);
    snprintf(dir, sizeof dir, "%s", staging);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    int moved = *info && fs_mkdirs(dir) == 0 && rename(upload, staging) == 0;
    if (*info && !moved) snprintf(why, sizeof why, "%s", strerror(errno));
    if (!moved || checkpoint_seal(a->store, a->data_dir, id, step, staging, final, why, sizeof why) < 0) {
        unlink(upload);
        unlink(staging);
        json_decref(*info);
        *info = NULL;
        return svc_fail(err, SVC_FAILED, "internal", NULL, "the weights could not be kept: %s", why);
    }
    return SVC_OK;
}
