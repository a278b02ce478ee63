/* Importing a bundle (svc_import.h): check all of it, then store the experiment, its runs and their
 * points, then set each run's progress, provenance and final status. */
#include "services/svc_import.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/run_status.h"
#include "services/app.h"
#include "services/svc_experiments.h"
#include "services/svc_external.h"
#include "store/store.h"
#include "util/json_text.h"

#define FAIL_AT(err, i, member, ...)                                                                                   \
    (svc_fail(err, SVC_INVALID, "invalid_field", NULL, __VA_ARGS__),                                                   \
     snprintf((err)->field, sizeof(err)->field, "runs[%zu]%s%s", (size_t)(i), *(member) ? "." : "", member),           \
     SVC_INVALID)

/* One run of the bundle, as checked: borrowed members and its points' count. */
typedef struct {
    const json_t *run, *config, *series;
    const char *variant, *status, *error, *name;
    char *config_json;
    long long seed, source_id;
    int replicate, total_steps;
    size_t points;
} import_run;

static const char *const ended[] = {"succeeded", "failed", "cancelled", "interrupted", NULL};

/* Checks run i's series: each {"steps":[…],"values":[…],"wall_times":[…]} of equal lengths, steps
 * integers 0..1e9, values numbers or null (a value that was not finite: left out), wall times
 * numbers. Adds the points it will store to *points. */
static svc_status check_series(const json_t *series, size_t i, size_t *points, svc_error *err) {
    if (!json_is_object(series)) return FAIL_AT(err, i, "series", "runs[%zu].series must be an object", i);
    const char *key;
    const json_t *s;
    json_object_foreach((json_t *)series, key, s) {
        char member[300];
        snprintf(member, sizeof member, "series.%s", key);
        if (!svc_external_key_ok(key))
            return FAIL_AT(err, i, "series", "runs[%zu].series has a key that is not a metric key", i);
        const json_t *steps = json_object_get(s, "steps"), *values = json_object_get(s, "values"),
                     *walls = json_object_get(s, "wall_times");
        size_t n = json_array_size(steps);
        if (!json_is_array(steps) || !json_is_array(values) || !json_is_array(walls) || json_array_size(values) != n ||
            json_array_size(walls) != n)
            return FAIL_AT(err, i, member, "runs[%zu].%s must hold steps, values and wall_times of one length", i,
                           member);
        for (size_t j = 0; j < n; j++) {
            const json_t *st = json_array_get(steps, j), *v = json_array_get(values, j), *w = json_array_get(walls, j);
            if (!json_is_integer(st) || json_integer_value(st) < 0 || json_integer_value(st) > 1000000000 ||
                !(json_is_number(v) || json_is_null(v)) || !json_is_number(w))
                return FAIL_AT(err, i, member,
                               "runs[%zu].%s point %zu must be an integer step, a number (or null) and a wall time", i,
                               member, j);
            if (json_is_number(v) && isfinite(json_number_value(v))) (*points)++;
        }
    }
    return SVC_OK;
}

static svc_status check_run(const json_t *run, size_t i, import_run *r, svc_error *err) {
    memset(r, 0, sizeof *r);
    r->run = run;
    if (!json_is_object(run)) return FAIL_AT(err, i, "", "runs[%zu] must be an object", i);
    r->variant = json_string_value(json_object_get(run, "variant"));
    r->status = json_string_value(json_object_get(run, "status"));
    r->error = json_string_value(json_object_get(run, "error"));
    r->name = json_string_value(json_object_get(run, "name"));
    r->config = json_object_get(run, "config");
    r->series = json_object_get(run, "series");
    const json_t *rep = json_object_get(run, "replicate"), *seed = json_object_get(run, "seed"),
                 *id = json_object_get(run, "id"), *prov = json_object_get(run, "provenance"),
                 *total = json_object_get(run, "total_steps");
    if (!r->variant || !svc_experiments_variant_name_ok(r->variant))
        return FAIL_AT(err, i, "variant", "runs[%zu].variant must be a variant name", i);
    int known = 0;
    for (int k = 0; r->status && ended[k]; k++) known |= !strcmp(r->status, ended[k]);
    if (!known)
        return FAIL_AT(err, i, "status", "runs[%zu].status must be succeeded, failed, cancelled or interrupted", i);
    if (!json_is_integer(rep) || json_integer_value(rep) < 0 || json_integer_value(rep) > 1023)
        return FAIL_AT(err, i, "replicate", "runs[%zu].replicate must be an integer from 0 to 1023", i);
    if (seed && !json_is_integer(seed)) return FAIL_AT(err, i, "seed", "runs[%zu].seed must be an integer", i);
    if (!json_is_object(r->config)) return FAIL_AT(err, i, "config", "runs[%zu].config must be an object", i);
    if (prov && !json_is_null(prov) && !json_is_object(prov))
        return FAIL_AT(err, i, "provenance", "runs[%zu].provenance must be an object", i);
    if (r->name && strlen(r->name) > 200) return FAIL_AT(err, i, "name", "runs[%zu].name is over 200 bytes", i);
    r->replicate = (int)json_integer_value(rep);
    r->seed = seed ? (long long)json_integer_value(seed) : 0;
    r->source_id = json_is_integer(id) ? (long long)json_integer_value(id) : 0;
    r->total_steps = json_is_integer(total) && json_integer_value(total) > 0 && json_integer_value(total) < 2147483647
                         ? (int)json_integer_value(total)
                         : 0;
    r->config_json = json_dumps(r->config, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    if (!r->config_json) return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (strlen(r->config_json) > SVC_EXTERNAL_MAX_CONFIG_BYTES)
        return FAIL_AT(err, i, "config", "runs[%zu].config is over %d bytes as JSON", i, SVC_EXTERNAL_MAX_CONFIG_BYTES);
    return r->series ? check_series(r->series, i, &r->points, err) : SVC_OK;
}

/* Run i's points, in series order; *n of them. NULL when out of memory (or none: *n == 0). */
static store_metric *run_points(const import_run *r, long long id, size_t *n) {
    *n = 0;
    if (!r->points) return NULL;
    store_metric *p = malloc(r->points * sizeof *p);
    if (!p) return NULL;
    const char *key;
    const json_t *s;
    json_object_foreach((json_t *)r->series, key, s) {
        const json_t *steps = json_object_get(s, "steps"), *values = json_object_get(s, "values"),
                     *walls = json_object_get(s, "wall_times");
        for (size_t j = 0; j < json_array_size(steps); j++) {
            const json_t *v = json_array_get(values, j);
            if (!json_is_number(v) || !isfinite(json_number_value(v))) continue;
            store_metric *m = &p[(*n)++];
            m->run_id = id;
            m->step = (int)json_integer_value(json_array_get(steps, j));
            m->key = key; /* borrowed from the bundle, which outlives the insert */
            m->value = json_number_value(v);
            m->wall_time = json_number_value(json_array_get(walls, j));
        }
    }
    return p;
}

/* The run's provenance as stored: the bundle's (or {}) with "imported_from". NULL: out of memory. */
static char *provenance_text(const import_run *r, long long experiment_id) {
    const json_t *given = json_object_get(r->run, "provenance");
    json_t *p = json_is_object(given) ? json_deep_copy(given) : json_object();
    json_t *from =
        json_pack("{s:I, s:I}", "run_id", (json_int_t)r->source_id, "experiment_id", (json_int_t)experiment_id);
    char *text = NULL;
    if (p && from && json_object_set_new(p, "imported_from", from) == 0) {
        from = NULL;
        text = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    }
    json_decref(from);
    json_decref(p);
    return text;
}

/* Stores run i's points, progress, provenance and final status. */
static store_status finish_run(app *a, const import_run *r, long long id, long long experiment_id) {
    size_t n = 0;
    store_metric *pts = run_points(r, id, &n);
    if (r->points && !pts) return STORE_ERROR;
    store_status s = n ? store_metrics_insert(a->store, pts, n) : STORE_OK;
    int last = 0;
    for (size_t j = 0; j < n; j++)
        if (pts[j].step > last) last = pts[j].step;
    free(pts);
    if (s == STORE_OK && last > 0) s = store_run_progress(a->store, id, last, 0);
    char *prov = s == STORE_OK ? provenance_text(r, experiment_id) : NULL;
    if (s == STORE_OK && !prov) s = STORE_ERROR;
    if (s == STORE_OK) s = store_run_set_provenance(a->store, id, prov);
    free(prov);
    static const char *const running[] = {"running", NULL};
    if (s == STORE_OK) s = store_run_transition(a->store, id, running, r->status, r->error);
    return s;
}

static svc_status check_experiment(const json_t *e, const char *name, svc_error *err) {
    const char *ename = name ? name : json_string_value(json_object_get(e, "name"));
    const json_t *preset = json_object_get(e, "preset"), *reps = json_object_get(e, "replicates");
    if (!json_is_object(e))
        return svc_fail(err, SVC_INVALID, "invalid_field", "experiment",
                        "the body must be an experiment's bundle (GET /api/experiments/{id}/bundle)");
    if (!ename || !*ename || strlen(ename) > 200)
        return svc_fail(err, SVC_INVALID, "invalid_field", name ? "name" : "experiment.name",
                        "name must be 1 to 200 characters");
    if (preset && !json_is_null(preset) && !json_is_string(preset))
        return svc_fail(err, SVC_INVALID, "invalid_field", "experiment.preset", "preset must be a string or null");
    if (!json_is_object(json_object_get(e, "base")) || !json_is_array(json_object_get(e, "variants")))
        return svc_fail(err, SVC_INVALID, "invalid_field", "experiment",
                        "the experiment must have its base (an object) and variants (an array)");
    if (reps && (!json_is_integer(reps) || json_integer_value(reps) < 1 || json_integer_value(reps) > 1024))
        return svc_fail(err, SVC_INVALID, "invalid_field", "experiment.replicates",
                        "replicates must be an integer from 1 to 1024");
    return SVC_OK;
}

/* Takes back what was stored of a failed import: the runs, then the experiment. */
static void undo(app *a, long long exp_id, const long long *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i]) (void)store_run_delete(a->store, ids[i]);
    (void)store_experiment_delete(a->store, exp_id);
}

static svc_status store_all(app *a, const json_t *e, const char *name, import_run *rs, size_t n, json_t **out,
                            svc_error *err) {
    char *base = json_dumps(json_object_get(e, "base"), JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    char *variants = json_dumps(json_object_get(e, "variants"), JSON_COMPACT | JSON_REAL_PRECISION(17));
    store_new_run *rows = calloc(n, sizeof *rows);
    long long *ids = calloc(n, sizeof *ids);
    svc_status st = SVC_OK;
    if (!base || !variants || !rows || !ids) st = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    const json_t *reps = json_object_get(e, "replicates");
    store_new_experiment ex = {.name = name ? name : json_string_value(json_object_get(e, "name")),
                               .preset = json_string_value(json_object_get(e, "preset")),
                               .base_json = base,
                               .variants_json = variants,
                               .replicates = json_is_integer(reps) ? (int)json_integer_value(reps) : 1,
                               /* names are unique: a name asked for is a 409 when in use; the
                                * bundle's own becomes the first free "name (2)", … */
                               .rename_if_taken = name == NULL};
    for (size_t i = 0; st == SVC_OK && i < n; i++) {
        const json_t *tags = json_object_get(rs[i].run, "tags");
        rows[i] = (store_new_run){.name = rs[i].name ? rs[i].name : "",
                                  .variant = rs[i].variant,
                                  .note = json_string_value(json_object_get(rs[i].run, "note")),
                                  .corpus = json_string_value(json_object_get(rs[i].config, "corpus")),
                                  .config_json = rs[i].config_json,
                                  .seed = rs[i].seed,
                                  .replicate = rs[i].replicate,
                                  .total_steps = rs[i].total_steps,
                                  .tags = json_is_array(tags) ? tags : NULL,
                                  .external = 1};
    }
    long long exp_id = 0;
    store_status made = st == SVC_OK ? store_experiment_create(a->store, &ex, rows, n, &exp_id, ids) : STORE_OK;
    if (made == STORE_CONFLICT)
        st = svc_fail(err, SVC_CONFLICT, "conflict", "name", "an experiment named '%s' exists: choose another name",
                      ex.name);
    else if (made != STORE_OK)
        st = svc_store_failed(err);
    long long source_exp = (long long)json_integer_value(json_object_get(e, "id"));
    for (size_t i = 0; st == SVC_OK && i < n; i++)
        if (finish_run(a, &rs[i], ids[i], source_exp) != STORE_OK) st = svc_store_failed(err);
    json_t *runs = st == SVC_OK ? json_array() : NULL;
    json_t *exp = NULL;
    size_t points = 0;
    for (size_t i = 0; runs && i < n; i++) {
        points += rs[i].points;
        json_t *r = json_pack("{s:I, s:s, s:i, s:{s:I, s:I}}", "id", (json_int_t)ids[i], "variant", rs[i].variant,
                              "replicate", rs[i].replicate, "imported_from", "run_id", (json_int_t)rs[i].source_id,
                              "experiment_id", (json_int_t)source_exp);
        if (!r || json_array_append_new(runs, r) < 0) {
            json_decref(runs);
            runs = NULL;
        }
    }
    if (st == SVC_OK && !runs) st = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    if (st == SVC_OK && store_experiment_get(a->store, exp_id, &exp) != STORE_OK) st = svc_store_failed(err);
    if (st == SVC_OK &&
        !(*out = json_pack("{s:o, s:o, s:I}", "experiment", exp, "runs", runs, "points", (json_int_t)points))) {
        runs = exp = NULL; /* json_pack took them */
        st = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    } else if (st == SVC_OK) {
        runs = exp = NULL;
    }
    json_decref(runs);
    json_decref(exp);
    if (st != SVC_OK && exp_id) undo(a, exp_id, ids, n);
    for (size_t i = 0; st == SVC_OK && i < n; i++) run_status_publish(a->events, a->store, ids[i]);
    free(base);
    free(variants);
    free(rows);
    free(ids);
    return st;
}

svc_status svc_import_bundle(app *a, const char *path, const char *name, json_t **out, svc_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) < 0) return svc_fail(err, SVC_FAILED, "internal", NULL, "the upload cannot be read");
    if ((unsigned long long)sb.st_size > SVC_IMPORT_MAX_BYTES)
        return svc_fail(err, SVC_INVALID, "too_large", "body", "a bundle to import is at most %u bytes",
                        SVC_IMPORT_MAX_BYTES);
    json_error_t jerr;
    json_t *bundle = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!bundle)
        return svc_fail(err, SVC_INVALID, "invalid_json", "body", "the body is not JSON: %s (line %d)", jerr.text,
                        jerr.line);
    const json_t *e = json_object_get(bundle, "experiment"), *runs = json_object_get(bundle, "runs");
    svc_status st = check_experiment(e, name, err);
    size_t n = json_array_size(runs);
    if (st == SVC_OK && (!json_is_array(runs) || n < 1 || n > SVC_IMPORT_MAX_RUNS))
        st = svc_fail(err, SVC_INVALID, "invalid_field", "runs", "runs must be an array of 1 to %d runs",
                      SVC_IMPORT_MAX_RUNS);
    import_run *rs = st == SVC_OK ? calloc(n, sizeof *rs) : NULL;
    if (st == SVC_OK && !rs) st = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    size_t points = 0;
    for (size_t i = 0; st == SVC_OK && i < n; i++) {
        st = check_run(json_array_get(runs, i), i, &rs[i], err);
        points += rs[i].points;
    }
    if (st == SVC_OK && points > SVC_IMPORT_MAX_POINTS)
        st = svc_fail(err, SVC_INVALID, "too_large", "runs", "the bundle holds %zu points; at most %d are imported",
                      points, SVC_IMPORT_MAX_POINTS);
    if (st == SVC_OK) st = store_all(a, e, name, rs, n, out, err);
    for (size_t i = 0; rs && i < n; i++) free(rs[i].config_json);
    free(rs);
    json_decref(bundle);
    return st;
}
