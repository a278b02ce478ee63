/* Probes over HTTP: kinds, run (answered from the store when the same request was made before),
 * list, get, CSV per table. The computation itself runs on the probe queue. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "app.h"
#include "engine/model.h"
#include "engine/probes/probe.h"
#include "engine/probes/probe_engine_model.h"
#include "log.h"

void api_probe_kinds(http_request *req, void *ctx) {
    (void)ctx;
    json_t *kinds = probe_kinds_json();
    if (!kinds) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    http_reply_json(req, 200, json_pack("{s:o}", "kinds", kinds));
}

/* One probe computation, handed to a probe worker and back. */
typedef struct {
    app *a;
    const char *kind;
    json_t *params;
    long long run_id;
    /* out */
    json_t *result;
    probe_error err;
    engine_status status;
    double ms;
} probe_call;

static double mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Loads the run's latest checkpoint and its corpus's tokenizer for the model kinds. */
static engine_status run_model(app *a, long long run_id, model **m, const tokenizer **tok, probe_error *perr) {
    json_t *row = NULL;
    if (store_run_get(a->store, run_id, &row) != STORE_OK) {
        snprintf(perr->field, sizeof perr->field, "run_id");
        snprintf(perr->message, sizeof perr->message, "no run %lld", run_id);
        return ENGINE_ERR_INVALID;
    }
    const char *corpus_name = json_string_value(json_object_get(json_object_get(row, "config"), "corpus"));
    json_t *corpus_row = NULL;
    const char *encoding = "gpt2";
    if (store_corpus_get(a->store, corpus_name, &corpus_row) == STORE_OK)
        encoding = json_string_value(json_object_get(corpus_row, "tokenizer"));
    *tok = corpora_tokenizer(a->corpora, encoding);
    json_decref(corpus_row);
    json_decref(row);
    char path[PATH_MAX];
    jobs_run_checkpoint(a->jobs, run_id, path, sizeof path);
    engine_error err = {0};
    engine_status s = *tok ? model_load(m, path, 1, 1, 0, &err)
                           : engine_fail(&err, ENGINE_ERR_INVALID, "the %s tokenizer is not available", encoding);
    if (s != ENGINE_OK) {
        snprintf(perr->field, sizeof perr->field, "run_id");
        snprintf(perr->message, sizeof perr->message, "run %lld has no usable weights yet: %s", run_id, err.message);
        return ENGINE_ERR_INVALID;
    }
    return ENGINE_OK;
}

static void run_probe(void *arg) {
    probe_call *c = arg;
    double t0 = mono_ms();
    model *m = NULL;
    const tokenizer *tok = NULL;
    probe_engine_model pm;
    probe_context pctx = {NULL};
    const probe_kind *kind = probe_find(c->kind);
    c->status = ENGINE_OK;
    if (kind && kind->needs_model) {
        if (!c->run_id) {
            snprintf(c->err.field, sizeof c->err.field, "run_id");
            snprintf(c->err.message, sizeof c->err.message, "probe %s needs a run_id with trained weights", c->kind);
            c->status = ENGINE_ERR_INVALID;
        } else {
            c->status = run_model(c->a, c->run_id, &m, &tok, &c->err);
            engine_error e = {0};
            if (c->status == ENGINE_OK && probe_engine_model_init(&pm, m, tok, &e) != ENGINE_OK) {
                c->status = ENGINE_ERR_INVALID;
                snprintf(c->err.message, sizeof c->err.message, "%s", e.message);
            }
            pctx.model = &pm.view;
        }
    }
    if (c->status == ENGINE_OK) c->status = probe_run(c->kind, c->params, &pctx, &c->result, &c->err);
    model_free(m);
    c->ms = mono_ms() - t0;
}

/* The checkpoint's modification time stands for the weights a model probe saw. */
static long long weights_stamp(app *a, long long run_id) {
    char path[PATH_MAX];
    jobs_run_checkpoint(a->jobs, run_id, path, sizeof path);
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec : 0;
}

static void reply_probe(http_request *req, app *a, long long id, int status, int cached) {
    json_t *p = NULL;
    if (store_probe_get(a->store, id, &p) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    json_object_set_new(p, "cached", json_boolean(cached));
    http_reply_json(req, status, json_pack("{s:o}", "probe", p));
}

void api_probes_create(http_request *req, void *ctx) {
    app *a = ctx;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"kind", "params", "run_id", NULL};
    json_t *resolved = NULL;
    char *key = NULL;
    if (api_only_fields(req, body, fields) < 0) goto done;
    const char *kind_name = json_string_value(json_object_get(body, "kind"));
    const probe_kind *kind = kind_name ? probe_find(kind_name) : NULL;
    if (!kind) {
        http_reply_error(req, 422, "invalid_field", "kind", "kind must be one of the names at /api/probe-kinds");
        goto done;
    }
    json_t *params = json_object_get(body, "params");
    json_t *run = json_object_get(body, "run_id");
    if (params && !json_is_object(params)) {
        http_reply_error(req, 422, "invalid_field", "params", "params must be an object");
        goto done;
    }
    if (run && (!json_is_integer(run) || json_integer_value(run) <= 0)) {
        http_reply_error(req, 422, "invalid_field", "run_id", "run_id must be a positive integer");
        goto done;
    }
    probe_error perr = {0};
    resolved = probe_params_resolve(kind, params, &perr);
    if (!resolved) {
        char field[80];
        snprintf(field, sizeof field, "params.%s", perr.field);
        http_reply_error(req, 422, "invalid_field", perr.field[0] ? field : "params", "%s", perr.message);
        goto done;
    }
    long long run_id = run ? json_integer_value(run) : 0;
    if (!kind->needs_model) run_id = 0;
    /* Same kind, same resolved parameters (and same weights for model probes): same answer. */
    json_t *keyobj = json_pack("{s:O, s:I, s:I}", "params", resolved, "run_id", (json_int_t)run_id, "weights",
                               (json_int_t)(run_id ? weights_stamp(a, run_id) : 0));
    key = keyobj ? json_dumps(keyobj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(keyobj);
    long long id;
    if (key && store_probe_find(a->store, kind->name, key, &id) == STORE_OK) {
        reply_probe(req, a, id, 200, 1);
        goto done;
    }
    probe_call call = {.a = a, .kind = kind->name, .params = resolved, .run_id = run_id};
    if (jobs_probe_call(a->jobs, run_probe, &call) < 0) {
        http_reply_header(req, "Retry-After", "1");
        http_reply_error(req, 429, "queue_full", NULL, "the probe queue is full; try again shortly");
        goto done;
    }
    if (call.status == ENGINE_ERR_INVALID) {
        char field[80];
        snprintf(field, sizeof field, "%s%s", strcmp(call.err.field, "run_id") && strcmp(call.err.field, "run") ? "params." : "",
                 !strcmp(call.err.field, "run") ? "run_id" : call.err.field);
        http_reply_error(req, 422, "invalid_field", call.err.field[0] ? field : "params", "%s", call.err.message);
        goto done;
    }
    if (call.status != ENGINE_OK) {
        http_reply_error(req, 500, "probe_failed", NULL, "%s", call.err.message[0] ? call.err.message : "probe failed");
        goto done;
    }
    char *params_text = json_dumps(resolved, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *seed = json_object_get(resolved, "seed");
    store_new_probe np = {.kind = kind->name,
                          .params_json = params_text,
                          .cache_key = key,
                          .status = "succeeded",
                          .seed = seed ? json_integer_value(seed) : 0,
                          .run_id = run_id,
                          .duration_ms = call.ms,
                          .result = call.result};
    store_status s = params_text ? store_probe_insert(a->store, &np, &id) : STORE_ERROR;
    free(params_text);
    json_decref(call.result);
    if (s != STORE_OK) {
        api_store_failed(req);
        goto done;
    }
    reply_probe(req, a, id, 201, 0);
done:
    free(key);
    json_decref(resolved);
    json_decref(body);
}

void api_probes_list(http_request *req, void *ctx) {
    app *a = ctx;
    long long limit, offset, total = 0;
    if (api_query_int(req, "limit", 1, 500, 50, &limit) < 0 || api_query_int(req, "offset", 0, 1000000000, 0, &offset) < 0)
        return;
    const char *kind = http_request_query(req, "kind");
    if (kind && !probe_find(kind)) {
        http_reply_error(req, 422, "invalid_field", "kind", "unknown probe kind '%s'", kind);
        return;
    }
    json_t *list;
    if (store_probe_list(a->store, kind, (int)limit, (int)offset, &list, &total) != STORE_OK) {
        json_decref(list);
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 200, json_pack("{s:o, s:I}", "probes", list, "total", (json_int_t)total));
}

void api_probes_get(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    if (api_path_id(req, &id) < 0) return;
    json_t *p = NULL;
    store_status s = store_probe_get(a->store, id, &p);
    if (s == STORE_NOT_FOUND)
        http_reply_error(req, 404, "not_found", "id", "no probe %lld", id);
    else if (s != STORE_OK)
        api_store_failed(req);
    else
        http_reply_json(req, 200, json_pack("{s:o}", "probe", p));
}

/* RFC 4180 quoting for cells that need it. */
static void csv_cell(FILE *f, const json_t *v) {
    if (json_is_integer(v)) {
        fprintf(f, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        fprintf(f, "%.17g", json_real_value(v));
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strpbrk(s, ",\"\n\r")) {
            fputc('"', f);
            for (; *s; s++) {
                if (*s == '"') fputc('"', f);
                fputc(*s, f);
            }
            fputc('"', f);
        } else {
            fputs(s, f);
        }
    } else if (json_is_boolean(v)) {
        fputs(json_is_true(v) ? "true" : "false", f);
    }
}

void api_probes_csv(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    if (api_path_id(req, &id) < 0) return;
    const char *name = http_request_query(req, "table");
    json_t *t = NULL;
    store_status s = store_probe_table(a->store, id, name, &t);
    if (s == STORE_NOT_FOUND) {
        http_reply_error(req, 404, "not_found", name ? "table" : "id", "no such probe or table");
        return;
    }
    if (s != STORE_OK) {
        api_store_failed(req);
        return;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        json_decref(t);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    size_t i, j;
    json_t *c, *row, *cell;
    json_array_foreach(json_object_get(t, "columns"), i, c) {
        if (i) fputc(',', f);
        csv_cell(f, c);
    }
    fputc('\n', f);
    json_array_foreach(json_object_get(t, "rows"), i, row) {
        json_array_foreach(row, j, cell) {
            if (j) fputc(',', f);
            csv_cell(f, cell);
        }
        fputc('\n', f);
    }
    fclose(f);
    char disp[160];
    snprintf(disp, sizeof disp, "attachment; filename=\"probe-%lld-%s.csv\"", id,
             json_string_value(json_object_get(t, "name")));
    http_reply_header(req, "Content-Disposition", disp);
    http_reply_bytes(req, 200, "text/csv; charset=utf-8", buf, len);
    free(buf);
    json_decref(t);
}
