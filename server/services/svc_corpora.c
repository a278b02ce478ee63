/* The corpus service (svc_corpora.h). */
#include "services/svc_corpora.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "core/run_config.h"
#include "util/fsutil.h"

svc_status svc_corpora_list(struct app *a, json_t **out, svc_error *err) {
    *out = NULL;
    json_t *list = NULL;
    if (store_corpus_list(a->store, &list) != STORE_OK) return svc_store_failed(err);
    /* Windows at the run default (128 tokens): what a training run can draw from. */
    json_int_t window = json_integer_value(json_object_get(run_config_property("seq_len"), "default"));
    size_t i;
    json_t *c;
    int bad = window < 1;
    json_array_foreach(list, i, c) {
        json_int_t tokens = json_integer_value(json_object_get(c, "tokens"));
        bad |= json_object_set_new(c, "windows", json_integer(tokens > 1 && window > 0 ? (tokens - 1) / window : 0));
        bad |= json_object_set_new(c, "window_tokens", json_integer(window));
    }
    if (bad) {
        json_decref(list);
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory, or no default seq_len in the schema");
    }
    *out = list;
    return SVC_OK;
}

svc_status svc_corpora_get(struct app *a, const char *name, json_t **out, svc_error *err) {
    *out = NULL;
    store_status s = corpora_name_ok(name) ? store_corpus_get(a->store, name, out) : STORE_NOT_FOUND;
    if (s == STORE_NOT_FOUND)
        return svc_fail(err, SVC_NOT_FOUND, "not_found", "name", "no corpus named '%s'", name ? name : "");
    return s == STORE_OK ? SVC_OK : svc_store_failed(err);
}

/* A name an upload or a task corpus may take: SVC_OK, or the refusal. */
static svc_status name_free(const char *name, svc_error *err) {
    if (!corpora_name_ok(name))
        return svc_fail(err, SVC_INVALID, "invalid_field", "name", "name must be " CORPORA_NAME_RULE);
    if (corpora_name_reserved(name))
        return svc_fail(err, SVC_CONFLICT, "conflict", "name", "'%s' is the name of a built-in corpus", name);
    return SVC_OK;
}

typedef struct {
    corpora *c;
    char name[48], encoding[8];
} tokenize_job;

static void tokenize_upload(void *arg) {
    tokenize_job *t = arg;
    corpora_tokenize_upload(t->c, t->name, t->encoding);
    free(t);
}

/* The row's folder made and the upload moved into it, then its tokenization queued; undone (files
 * and row) when a step fails. */
static svc_status upload_queue(struct app *a, const char *name, const char *encoding, const char *upload_path,
                               svc_error *err) {
    char dir[PATH_MAX], dest[PATH_MAX + 16];
    corpora_dir(a->corpora, name, dir, sizeof dir);
    snprintf(dest, sizeof dest, "%s/upload.txt", dir);
    tokenize_job *t = calloc(1, sizeof *t);
    if (fs_mkdirs(dir) < 0 || rename(upload_path, dest) < 0 || !t) {
        int e = t ? errno : ENOMEM;
        free(t);
        store_corpus_delete(a->store, name);
        return svc_fail(err, SVC_FAILED, "internal", NULL, "could not store the upload: %s", strerror(e));
    }
    t->c = a->corpora;
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->encoding, sizeof t->encoding, "%s", encoding);
    if (jobs_probe_submit(a->jobs, tokenize_upload, t) < 0) {
        free(t);
        store_corpus_delete(a->store, name);
        corpora_remove_files(a->corpora, name);
        svc_fail(err, SVC_BUSY, "queue_full", NULL, "the probe queue is full; try again shortly");
        err->retry_after = 5;
        return SVC_BUSY;
    }
    return SVC_OK;
}

svc_status svc_corpora_upload(struct app *a, const char *name, const char *encoding, const char *upload_path,
                              size_t size, json_t **out, svc_error *err) {
    *out = NULL;
    svc_status v = name_free(name, err);
    if (v != SVC_OK) return v;
    if (!encoding) encoding = "gpt2";
    if (strcmp(encoding, "gpt2") != 0 && strcmp(encoding, "bytes") != 0)
        return svc_fail(err, SVC_INVALID, "invalid_field", "encoding", "encoding must be one of: gpt2, bytes");
    if (!corpora_tokenizer(a->corpora, encoding))
        return svc_fail(err, SVC_INVALID, "invalid_field", "encoding", "the %s tokenizer is not available here",
                        encoding);
    if (!upload_path || size == 0)
        return svc_fail(err, SVC_INVALID, "invalid_field", "body", "send the corpus as a non-empty text/plain body");
    store_corpus row = {.name = name,
                        .source = "uploaded text",
                        .tokenizer = encoding,
                        .status = "tokenizing",
                        .bytes = (long long)size};
    store_status s = store_corpus_create(a->store, &row);
    if (s == STORE_CONFLICT)
        return svc_fail(err, SVC_CONFLICT, "conflict", "name", "a corpus named '%s' exists already", name);
    if (s != STORE_OK) return svc_store_failed(err);
    v = upload_queue(a, name, encoding, upload_path, err);
    if (v != SVC_OK) return v;
    return store_corpus_get(a->store, name, out) == STORE_OK ? SVC_OK : svc_store_failed(err);
}

svc_status svc_corpora_create_task(struct app *a, const char *name, const json_t *spec, json_t **out, int *created,
                                   svc_error *err) {
    *out = NULL;
    *created = 0;
    svc_status v = name_free(name, err);
    if (v != SVC_OK) return v;
    tasks_config cfg;
    char field[64], msg[512];
    if (corpora_task_config_parse(spec, &cfg, field, sizeof field, msg, sizeof msg) < 0)
        return svc_fail(err, SVC_INVALID, "invalid_field", field[0] ? field : NULL, "%s", msg);
    corpora_task_result r = corpora_create_task(a->corpora, name, &cfg, msg, sizeof msg);
    if (r == CORPORA_TASK_CONFLICT) return svc_fail(err, SVC_CONFLICT, "conflict", "name", "%s", msg);
    if (r == CORPORA_TASK_FAILED) return svc_fail(err, SVC_FAILED, "internal", NULL, "%s", msg);
    if (store_corpus_get(a->store, name, out) != STORE_OK) return svc_store_failed(err);
    *created = r == CORPORA_TASK_CREATED;
    return SVC_OK;
}

svc_status svc_corpora_delete(struct app *a, const char *name, svc_error *err) {
    store_status s = corpora_name_ok(name) ? store_corpus_delete(a->store, name) : STORE_NOT_FOUND;
    if (s == STORE_NOT_FOUND)
        return svc_fail(err, SVC_NOT_FOUND, "not_found", "name", "no corpus named '%s'", name ? name : "");
    if (s == STORE_CONFLICT)
        return svc_fail(err, SVC_CONFLICT, "conflict", "name", "corpus '%s' is built in or used by a run", name);
    if (s != STORE_OK) return svc_store_failed(err);
    corpora_remove_files(a->corpora, name);
    return SVC_OK;
}

/* ---- task kinds -------------------------------------------------------------------------------- */

/* The task corpus request's common fields, as the schema publishes them (POST /api/task-corpora's
 * integer properties, whose bounds are the engine's: test_task_schema checks them against
 * tasks_config_set); NULL when out of memory or when the schema lacks them. */
static json_t *task_fields(void) {
    const json_t *props = json_object_get(
        json_object_get(
            json_object_get(
                json_object_get(
                    json_object_get(
                        json_object_get(json_object_get(run_config_openapi(), "paths"), "/api/task-corpora"), "post"),
                    "requestBody"),
                "content"),
            "application/json"),
        "schema");
    props = json_object_get(props, "properties");
    json_t *fields = json_array();
    const char *name;
    json_t *p;
    int bad = !fields || !json_object_size(props);
    json_object_foreach((json_t *)props, name, p) {
        const char *type = json_string_value(json_object_get(p, "type"));
        if (bad || !type || strcmp(type, "integer") != 0) continue;
        bad |= json_array_append_new(fields, json_pack("{s:s, s:s, s:I, s:I, s:I}", "name", name, "help",
                                                       json_string_value(json_object_get(p, "description")), "default",
                                                       json_integer_value(json_object_get(p, "default")), "min",
                                                       json_integer_value(json_object_get(p, "minimum")), "max",
                                                       json_integer_value(json_object_get(p, "maximum")))) < 0;
    }
    if (!bad) return fields;
    json_decref(fields);
    return NULL;
}

/* One row of the engine's table of kinds, with its defaults; NULL when out of memory. */
static json_t *task_kind(int i) {
    const tasks_kind *k = tasks_kind_at(i);
    tasks_config d;
    tasks_config_defaults(&d, i);
    json_t *params = json_array(), *buckets = json_array(), *offsets = k->has_offsets ? json_array() : NULL;
    int bad = !params || !buckets || (k->has_offsets && !offsets);
    for (int p = 0; !bad && p < k->n_params; p++)
        bad |= json_array_append_new(params, json_pack("{s:s, s:s, s:i, s:i, s:i}", "name", k->params[p].name, "help",
                                                       k->params[p].help, "default", k->params[p].def, "min",
                                                       k->params[p].min, "max", k->params[p].max)) < 0;
    for (int j = 0; !bad && offsets && j < d.n_offsets; j++)
        bad |= json_array_append_new(offsets, json_integer(d.offsets[j])) < 0;
    char names[TASKS_MAX_BUCKETS][12];
    int nb = tasks_buckets(&d, names);
    for (int b = 0; !bad && b < nb; b++) bad |= json_array_append_new(buckets, json_string(names[b])) < 0;
    json_t *o = bad ? NULL
                    : json_pack("{s:s, s:s, s:O, s:b}", "name", k->name, "summary", k->summary, "params", params,
                                "has_offsets", k->has_offsets);
    bad |= !o || (offsets && json_object_set(o, "default_offsets", offsets) < 0) ||
           json_object_set(o, "default_buckets", buckets) < 0;
    json_decref(params);
    json_decref(offsets);
    json_decref(buckets);
    if (!bad) return o;
    json_decref(o);
    return NULL;
}

svc_status svc_corpora_task_kinds(json_t **out, svc_error *err) {
    *out = NULL;
    json_t *kinds = json_array(), *fields = task_fields();
    int bad = !kinds || !fields;
    for (int i = 0; !bad && i < tasks_kind_count(); i++) bad |= json_array_append_new(kinds, task_kind(i)) < 0;
    *out = bad ? NULL : json_pack("{s:o, s:o}", "kinds", kinds, "fields", fields);
    if (*out) return SVC_OK;
    if (bad) {
        json_decref(kinds);
        json_decref(fields);
    }
    return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
}
