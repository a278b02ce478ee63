/* GET /api/experiments/{id}/bundle and bundle.csv: an experiment's whole result in one download.
 * The service (svc_bundle.h) reads it a run at a time; this file presents it: JSON with the
 * experiment, every run's config, summary and series, or one long CSV of every point with the run,
 * its variant and the config keys that differ among the runs as columns. Both downsample each
 * series like GET /api/runs/{id}/metrics (max_points) and refuse (422 too_large) an answer of more
 * than BUNDLE_MAX_POINTS points. */
#include <stdio.h>
#include <string.h>

#include "api/api_series.h"
#include "api/app.h"
#include "util/csv.h"
#include "services/svc_bundle.h"

#define BUNDLE_MAX_POINTS 2000000

typedef struct {
    int max_points;
    size_t emitted; /* points written so far, against BUNDLE_MAX_POINTS */
    json_t *runs;   /* JSON: the runs so far */
    csv_buf csv;    /* CSV: the text so far */
    int header;     /* CSV: its header line is written */
} bundle_ctx;

/* The number of points in a series object of api_series_json. */
static size_t series_points(const json_t *series) {
    size_t n = 0;
    const char *k;
    const json_t *s;
    json_object_foreach((json_t *)series, k, s) n += json_array_size(json_object_get(s, "steps"));
    return n;
}

/* A run's series as the bundle gives them (downsampled to max_points), counted against
 * BUNDLE_MAX_POINTS: *out, and 0; -1 out of memory; -2 past the bound (nothing in *out). */
static int take_series(bundle_ctx *b, const store_metric *points, size_t n, json_t **out) {
    *out = api_series_json(points, n, b->max_points);
    if (!*out) return -1;
    b->emitted += series_points(*out);
    if (b->emitted > BUNDLE_MAX_POINTS) {
        json_decref(*out);
        *out = NULL;
        return -2;
    }
    return 0;
}

static int add_json_run(void *ctx, const json_t *differing, json_t *run, const store_metric *points, size_t n) {
    (void)differing;
    bundle_ctx *b = ctx;
    json_t *series;
    int rc = take_series(b, points, n, &series);
    if (rc) return rc;
    if (json_object_set_new(run, "series", series) < 0 || json_array_append(b->runs, run) < 0) return -1;
    return 0;
}

/* The CSV's header line: the run's columns, the differing config keys, the point's columns. */
static void csv_header(bundle_ctx *b, const json_t *differing) {
    csv_cells(&b->csv, "run_id,name,variant,replicate,seed,status");
    size_t i;
    const json_t *k;
    json_array_foreach(differing, i, k) csv_text(&b->csv, json_string_value(k));
    csv_cells(&b->csv, "key,step,value,wall_time");
    csv_end_row(&b->csv);
    b->header = 1;
}

static int add_csv_run(void *ctx, const json_t *differing, json_t *run, const store_metric *points, size_t n) {
    bundle_ctx *b = ctx;
    if (!b->header) csv_header(b, differing);
    json_t *series;
    int rc = take_series(b, points, n, &series);
    if (rc) return rc;
    /* The run's columns, the same on each of its rows; config values exactly (%.17g). */
    csv_buf lead = {0};
    const json_t *cfg = json_object_get(run, "config");
    csv_int(&lead, (long long)json_integer_value(json_object_get(run, "id")));
    csv_json(&lead, json_object_get(run, "name"), 17);
    csv_json(&lead, json_object_get(run, "variant"), 17);
    csv_int(&lead, (long long)json_integer_value(json_object_get(run, "replicate")));
    csv_int(&lead, (long long)json_integer_value(json_object_get(run, "seed")));
    csv_json(&lead, json_object_get(run, "status"), 17);
    size_t i;
    const json_t *k;
    json_array_foreach(differing, i, k) csv_json(&lead, json_object_get(cfg, json_string_value(k)), 17);
    const char *key;
    const json_t *s;
    json_object_foreach(series, key, s) {
        const json_t *steps = json_object_get(s, "steps"), *values = json_object_get(s, "values"),
                     *walls = json_object_get(s, "wall_times");
        for (size_t j = 0; j < json_array_size(steps) && !b->csv.failed; j++) {
            csv_row_cells(&b->csv, &lead);
            csv_text(&b->csv, key);
            csv_int(&b->csv, (long long)json_integer_value(json_array_get(steps, j)));
            csv_real(&b->csv, json_number_value(json_array_get(values, j)), 17);
            csv_real(&b->csv, json_number_value(json_array_get(walls, j)), 17);
            csv_end_row(&b->csv);
        }
    }
    int failed = b->csv.failed || lead.failed;
    csv_free(&lead);
    json_decref(series);
    return failed ? -1 : 0;
}

/* The query of both routes: max_points (0: every point, else 2..100000; default 1000 for JSON, 0
 * for CSV) and keys (as GET /api/runs/{id}/metrics). Answers 422 and returns -1 when bad. */
static int bundle_query(http_request *req, long long def_points, long long *id, long long *max_points,
                        const char **keys) {
    if (api_path_id(req, id) < 0 || api_query_int(req, "max_points", 0, 100000, def_points, max_points) < 0) return -1;
    if (*max_points == 1) {
        http_reply_error(req, 422, "invalid_field", "max_points", "max_points must be 0 (every point) or 2 to 100000");
        return -1;
    }
    *keys = http_request_query(req, "keys");
    if (*keys && strlen(*keys) > 2000) {
        http_reply_error(req, 422, "invalid_field", "keys", "keys must be at most 2000 characters");
        return -1;
    }
    return 0;
}

void api_experiments_bundle(http_request *req, void *ctx) {
    app *a = ctx;
    long long id, max_points;
    const char *keys;
    if (bundle_query(req, 1000, &id, &max_points, &keys) < 0) return;
    bundle_ctx b = {.max_points = (int)max_points, .runs = json_array()};
    if (!b.runs) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    json_t *exp, *differing;
    svc_error err;
    if (svc_bundle_each(a, id, keys, &exp, &differing, add_json_run, &b, &err) != SVC_OK) {
        json_decref(b.runs);
        api_reply_svc_error(req, &err);
        return;
    }
    char disp[96];
    snprintf(disp, sizeof disp, "attachment; filename=\"experiment-%lld.json\"", id);
    http_reply_header(req, "Content-Disposition", disp);
    http_reply_json(req, 200,
                    json_pack("{s:o, s:o, s:o, s:i, s:s?, s:I}", "experiment", exp, "differing_keys", differing, "runs",
                              b.runs, "max_points", (int)max_points, "keys", keys, "points", (json_int_t)b.emitted));
}

void api_experiments_bundle_csv(http_request *req, void *ctx) {
    app *a = ctx;
    long long id, max_points;
    const char *keys;
    if (bundle_query(req, 0, &id, &max_points, &keys) < 0) return;
    bundle_ctx b = {.max_points = (int)max_points};
    json_t *exp, *differing = NULL;
    svc_error err;
    svc_status st = svc_bundle_each(a, id, keys, &exp, &differing, add_csv_run, &b, &err);
    if (st != SVC_OK) {
        csv_free(&b.csv);
        api_reply_svc_error(req, &err);
        return;
    }
    json_decref(exp);
    if (!b.header) csv_header(&b, differing); /* an experiment without runs */
    json_decref(differing);
    size_t len;
    char *text = csv_take(&b.csv, &len);
    if (!text) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    char disp[96];
    snprintf(disp, sizeof disp, "attachment; filename=\"experiment-%lld.csv\"", id);
    http_reply_header(req, "Content-Disposition", disp);
    http_reply_take(req, 200, "text/csv; charset=utf-8", text, len);
}
