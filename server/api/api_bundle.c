/* GET /api/experiments/{id}/bundle and bundle.csv: an experiment's whole result in one download.
 * The service (svc_bundle.h) reads it a run at a time; this file presents it: JSON with the
 * experiment, every run's config, summary and series, or one long CSV of every point with the run,
 * its variant and the config keys that differ among the runs as columns. Both downsample each
 * series like GET /api/runs/{id}/metrics (max_points) and refuse (422 too_large) an answer that
 * could hold more than BUNDLE_MAX_POINTS points, before reading any point.
 *
 * The answer is produced on the compute worker and sent through a pipe while the client reads it
 * (api_pipe.h): each series is read a range of points at a time (api_series_reader) and formatted
 * when the client has taken the previous piece, so a slow or stalled client holds one range's
 * points and text, never a whole run's. The bytes are those of the whole answer built at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_pipe.h"
#include "api/api_series.h"
#include "api/api.h"
#include "services/svc_bundle.h"
#include "util/csv.h"
#include "util/log.h"
#include "util/json_text.h"

#define BUNDLE_MAX_POINTS 2000000

typedef struct {
    svc_bundle *b;
    long long id;
    int as_csv, max_points;
    char *keys;     /* JSON: echoed at the end (NULL: absent) */
    size_t emitted; /* points written so far */
    int runs_out;   /* runs written (JSON: a comma before each but the first) */
    int stage;      /* 0 the head, 1 the runs, 2 the tail, 3 done */
    char *text;     /* what is ready to be sent: text[sent..len) */
    size_t len, sent;
    /* the run being written, a series at a time and each series a range at a time: its row, the
     * next series of its summary, the series being read, whether one was written */
    json_t *run;
    void *at;
    api_series_reader *r;
    int series_out;
    store *st;
} bundle_stream;

static char *dump(const json_t *v) { return json_text_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY); }

/* The CSV's header line: the run's columns, the differing config keys, the point's columns. */
static void csv_header(csv_buf *c, const json_t *differing) {
    csv_cells(c, "run_id,name,variant,replicate,seed,status");
    size_t i;
    const json_t *k;
    json_array_foreach(differing, i, k) csv_text(c, json_string_value(k));
    csv_cells(c, "key,step,value,wall_time");
    csv_end_row(c);
}

/* Rows of one series' points of a run: the run's columns (the same on each of its rows; config
 * values exactly, %.17g), then the point's. */
static int csv_points(csv_buf *c, const json_t *differing, const json_t *run, const char *key, const store_metric *p,
                      size_t n) {
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
    for (size_t j = 0; j < n && !c->failed; j++) {
        csv_row_cells(c, &lead);
        csv_text(c, key);
        csv_int(c, p[j].step);
        csv_real(c, p[j].value, 17);
        csv_real(c, p[j].wall_time, 17);
        csv_end_row(c);
    }
    int failed = c->failed || lead.failed;
    csv_free(&lead);
    return failed ? -1 : 0;
}

/* Appends src (taken) to the ready text. */
static int ready(bundle_stream *s, char *src, size_t n) {
    if (!src) return -1;
    if (s->sent == s->len) {
        free(s->text);
        s->text = src;
        s->len = n;
        s->sent = 0;
        return 0;
    }
    char *grown = realloc(s->text, s->len + n);
    if (!grown) {
        free(src);
        return -1;
    }
    memcpy(grown + s->len, src, n);
    free(src);
    s->text = grown;
    s->len += n;
    return 0;
}

static int ready_str(bundle_stream *s, const char *str) {
    size_t n = strlen(str);
    char *copy = malloc(n + 1);
    if (copy) memcpy(copy, str, n + 1);
    return ready(s, copy, n);
}

static int ready_json(bundle_stream *s, const char *before, const json_t *v) {
    char *t = dump(v);
    if (!t || ready_str(s, before) < 0) {
        free(t);
        return -1;
    }
    return ready(s, t, strlen(t));
}

/* Makes the next piece of the answer ready: the head, one run, or the tail. -1 on failure. */
static int produce(bundle_stream *s) {
    if (s->stage == 0) {
        s->stage = 1;
        if (s->as_csv) {
            csv_buf c = {0};
            csv_header(&c, svc_bundle_differing(s->b));
            size_t n;
            char *t = c.failed ? (csv_free(&c), NULL) : csv_take(&c, &n);
            return t ? ready(s, t, n) : -1;
        }
        return ready_json(s, "{\"experiment\":", svc_bundle_experiment(s->b)) < 0 ||
                       ready_json(s, ",\"differing_keys\":", svc_bundle_differing(s->b)) < 0 ||
                       ready_str(s, ",\"runs\":[") < 0
                   ? -1
                   : 0;
    }
    if (s->stage == 1 && !s->run) { /* the next run: its fields now, its series one by one */
        json_t *run;
        int got = svc_bundle_next(s->b, &run);
        if (got < 0) {
            log_error("the bundle of experiment %lld could not be read: %s", s->id, store_last_error());
            return -1;
        }
        if (got == 0) {
            s->stage = 2;
            return 0;
        }
        s->run = run;
        s->at = json_object_iter(json_object_get(run, "summary"));
        s->series_out = 0;
        if (s->as_csv) return 0;
        /* the run's object as a whole answer writes it, up to its "series" (the last member) */
        char *t = dump(run);
        size_t len = t ? strlen(t) : 0;
        if (!t || len < 2) {
            free(t);
            return -1;
        }
        t[len - 1] = 0; /* its closing brace comes after the series */
        int rc = ready_str(s, s->runs_out ? "," : "") < 0 || ready(s, t, len - 1) < 0 ||
                         ready_str(s, len > 2 ? ",\"series\":{" : "\"series\":{") < 0
                     ? -1
                     : 0;
        return rc;
    }
    const json_t *summary = s->run ? json_object_get(s->run, "summary") : NULL;
    while (s->stage == 1 && !s->r && s->at && !store_keys_match(json_object_iter_key(s->at), svc_bundle_keys(s->b)))
        s->at = json_object_iter_next((json_t *)summary, s->at);
    if (s->stage == 1 && !s->r && s->at) { /* the next series of the run */
        const json_t *v = json_object_iter_value(s->at);
        s->r = api_series_reader_open(s->st, json_integer_value(json_object_get(s->run, "id")),
                                      json_object_iter_key(s->at), 0, json_integer_value(json_object_get(v, "count")),
                                      (int)json_integer_value(json_object_get(v, "last_step")), s->max_points);
        return s->r ? 0 : -1;
    }
    if (s->stage == 1 && s->r) { /* a piece of the series */
        const char *key = json_object_iter_key(s->at);
        int got;
        if (s->as_csv) {
            const store_metric *p;
            size_t n;
            got = api_series_reader_points(s->r, &p, &n);
            if (got > 0) {
                csv_buf c = {0};
                int rc = csv_points(&c, svc_bundle_differing(s->b), s->run, key, p, n);
                size_t len = 0;
                char *t = rc < 0 ? (csv_free(&c), NULL) : csv_take(&c, &len);
                if (!t || (len ? ready(s, t, len) : (free(t), 0)) < 0) return -1;
            }
        } else {
            char *t;
            size_t len;
            got = api_series_reader_next(s->r, s->series_out ? "," : "", &t, &len);
            if (got > 0) {
                s->series_out = 1;
                if (ready(s, t, len) < 0) return -1;
            }
        }
        if (got < 0) {
            log_error("the bundle of experiment %lld could not be read: %s", s->id, store_last_error());
            return -1;
        }
        if (got == 0) {
            s->emitted += api_series_reader_emitted(s->r);
            api_series_reader_close(s->r);
            s->r = NULL;
            s->at = json_object_iter_next((json_t *)summary, s->at);
        }
        return 0;
    }
    if (s->stage == 1) { /* the run is written */
        int rc = s->as_csv ? 0 : ready_str(s, "}}");
        json_object_del(s->run, "summary");
        s->run = NULL;
        s->at = NULL;
        s->runs_out++;
        return rc;
    }
    s->stage = 3;
    if (s->as_csv) return 0;
    char tail[96];
    snprintf(tail, sizeof tail, "],\"max_points\":%d", s->max_points);
    if (ready_str(s, tail) < 0) return -1;
    json_t *k = s->keys ? json_string(s->keys) : json_null(); /* null when absent, as ever */
    int rc = k ? ready_json(s, ",\"keys\":", k) : -1;
    json_decref(k);
    if (rc < 0) return -1;
    snprintf(tail, sizeof tail, ",\"points\":%zu}", s->emitted);
    return ready_str(s, tail);
}

/* The pipe's source (api_pipe.h): the pieces produce() makes ready, taken as they come. */
static int bundle_next(void *ctx, char **text, size_t *len) {
    bundle_stream *s = ctx;
    while (s->sent == s->len && s->stage != 3)
        if (produce(s) < 0) return -1;
    if (s->sent == s->len) return 0;
    *len = s->len - s->sent;
    if (s->sent) memmove(s->text, s->text + s->sent, *len);
    *text = s->text;
    s->text = NULL;
    s->len = s->sent = 0;
    return 1;
}

static void bundle_free(void *ctx) {
    bundle_stream *s = ctx;
    svc_bundle_close(s->b);
    api_series_reader_close(s->r);
    free(s->keys);
    free(s->text);
    free(s);
}

/* The query of both routes: max_points (0: every point, else 2..100000; default 1000 for JSON, 0
 * for CSV) and keys (as GET /api/runs/{id}/metrics). Answers 422 and returns -1 when bad. */
static int bundle_query(http_request *req, long long def_points, long long *id, long long *max_points,
                        const char **keys) {
    if (api_path_id(req, id) < 0 || api_query_max_points(req, def_points, max_points) < 0) return -1;
    *keys = http_request_query(req, "keys");
    if (*keys && strlen(*keys) > 2000) {
        http_reply_error(req, 422, "invalid_field", "keys", "keys must be at most 2000 characters");
        return -1;
    }
    return 0;
}

static void reply_bundle(http_request *req, const api_ctx *api, int as_csv) {
    long long id, max_points;
    const char *keys;
    if (bundle_query(req, as_csv ? 0 : 1000, &id, &max_points, &keys) < 0) return;
    bundle_stream *s = calloc(1, sizeof *s);
    if (!s || (keys && !(s->keys = strdup(keys)))) {
        free(s);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    s->id = id;
    s->st = api->svc->store;
    s->as_csv = as_csv;
    s->max_points = (int)max_points;
    size_t bound;
    svc_error err;
    if (svc_bundle_open(api->svc, id, keys, (int)max_points, BUNDLE_MAX_POINTS, &s->b, &bound, &err) != SVC_OK) {
        free(s->keys);
        free(s);
        api_reply_svc_error(req, &err);
        return;
    }
    api_pipe_source src = {.next = bundle_next, .free = bundle_free, .ctx = s};
    snprintf(src.what, sizeof src.what, "the bundle of experiment %lld", id);
    char disp[96];
    snprintf(disp, sizeof disp, "attachment; filename=\"experiment-%lld.%s\"", id, as_csv ? "csv" : "json");
    http_reply_header(req, "Content-Disposition", disp);
    api_pipe_reply(req, as_csv ? "text/csv; charset=utf-8" : "application/json", &src);
}

void api_experiments_bundle(http_request *req, const api_ctx *api) { reply_bundle(req, api, 0); }
void api_experiments_bundle_csv(http_request *req, const api_ctx *api) { reply_bundle(req, api, 1); }
