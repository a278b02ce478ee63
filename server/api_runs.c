/* Runs: create, list, get, change, delete, cancel, resume, and their metrics. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "engine/train.h"
#include "fsutil.h"
#include "log.h"
#include "run_config.h"

json_t *api_run_view(app *a, json_t *row) {
    long long id = json_integer_value(json_object_get(row, "id"));
    json_t *live = jobs_run_live(a->jobs, id);
    if (live) {
        /* The live counters are fresher than the row, which the writer updates once a second. */
        json_object_set(row, "step", json_object_get(live, "step"));
        json_object_set(row, "eta_s", json_object_get(live, "eta_s"));
        json_object_set(row, "tokens_per_s", json_object_get(live, "tokens_per_s"));
        json_object_set(row, "cancel_requested", json_object_get(live, "cancel_requested"));
        json_decref(live);
    } else {
        json_object_set_new(row, "eta_s", json_null());
        json_object_set_new(row, "tokens_per_s", json_null());
    }
    json_t *brief = NULL;
    if (store_run_brief(a->store, id, &brief) == STORE_OK) json_object_set_new(row, "last", brief);
    return row;
}

int api_runs_admit(http_request *req, app *a, json_t *config, const char *prefix) {
    char field[80];
    const char *corpus_name = json_string_value(json_object_get(config, "corpus"));
    int vocab = corpora_vocab(a->corpora, corpus_name);
    if (vocab < 0) {
        snprintf(field, sizeof field, "%scorpus", prefix);
        http_reply_error(req, 422, "invalid_field", field,
                         !strcmp(corpus_name, "default")
                             ? "corpus 'default' is not built yet: run `make corpus`, or use corpus 'small'"
                             : "corpus '%s' does not exist or is not ready",
                         corpus_name);
        return -1;
    }
    if (json_integer_value(json_object_get(config, "threads")) == 0)
        json_object_set_new(config, "threads", json_integer(jobs_threads_per_run(a->jobs)));
    train_config tc;
    run_config_to_train(config, vocab, &tc);
    engine_error err = {0};
    if (train_config_validate(&tc, &err) != ENGINE_OK) {
        snprintf(field, sizeof field, "%s", prefix[0] ? prefix : "config.");
        field[strlen(field) - 1] = 0;
        http_reply_error(req, 422, "invalid_field", field, "%s", err.message);
        return -1;
    }
    size_t need = train_config_memory_bytes(&tc, (int)json_integer_value(json_object_get(config, "threads")));
    if (need > a->max_model_bytes) {
        /* The whole config is at fault: name it without the trailing '.' of the prefix. */
        snprintf(field, sizeof field, "%s", prefix[0] ? prefix : "config.");
        field[strlen(field) - 1] = 0;
        http_reply_error(req, 422, "too_large", field,
                         "this model needs about %zu MiB, over the service's limit of %zu MiB", need >> 20,
                         a->max_model_bytes >> 20);
        return -1;
    }
    return 0;
}

static const char *const FROM_QUEUED[] = {"queued", NULL};

int api_runs_create_one(http_request *req, app *a, const char *name, const json_t *tags, const char *note,
                        json_t *config, long long experiment_id, const char *variant, long long *id_out) {
    char *config_text = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    store_new_run nr = {.name = name,
                        .variant = variant ? variant : json_string_value(json_object_get(config, "attention")),
                        .note = note,
                        .corpus = json_string_value(json_object_get(config, "corpus")),
                        .config_json = config_text,
                        .seed = json_integer_value(json_object_get(config, "seed")),
                        .experiment_id = experiment_id,
                        .total_steps = (int)json_integer_value(json_object_get(config, "steps")),
                        .tags = (json_t *)tags};
    long long id = 0;
    store_status s = config_text ? store_run_create(a->store, &nr, &id) : STORE_ERROR;
    free(config_text);
    if (s != STORE_OK) {
        api_store_failed(req);
        return -1;
    }
    if (jobs_submit_run(a->jobs, id) < 0) {
        /* Not queued after all: take the row back out so nothing waits forever. */
        store_run_transition(a->store, id, FROM_QUEUED, "cancelled", "the training queue was full");
        store_run_delete(a->store, id);
        http_reply_header(req, "Retry-After", "30");
        http_reply_error(req, 429, "queue_full", NULL, "the training queue is full; try again later");
        return -1;
    }
    *id_out = id;
    return 0;
}

void api_runs_create(http_request *req, void *ctx) {
    app *a = ctx;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"name", "tags", "note", "config", NULL};
    const char *name, *note;
    json_t *tags, *config = NULL;
    run_config_error cerr;
    if (api_only_fields(req, body, fields) < 0 || api_opt_string(req, body, "name", 200, &name) < 0 ||
        api_opt_string(req, body, "note", 10000, &note) < 0 || api_opt_tags(req, body, "tags", &tags) < 0)
        goto done;
    if (run_config_normalize(json_object_get(body, "config"), "config.", &config, &cerr) < 0) {
        http_reply_error(req, 422, "invalid_field", cerr.field, "%s", cerr.message);
        goto done;
    }
    if (api_runs_admit(req, a, config, "config.") < 0) goto done;
    long long id;
    if (api_runs_create_one(req, a, name, tags, note, config, 0, NULL, &id) < 0) goto done;
    json_t *row = NULL;
    if (store_run_get(a->store, id, &row) != STORE_OK) {
        api_store_failed(req);
        goto done;
    }
    char loc[64];
    snprintf(loc, sizeof loc, "/api/runs/%lld", id);
    http_reply_header(req, "Location", loc);
    http_reply_json(req, 201, json_pack("{s:o}", "run", api_run_view(a, row)));
done:
    json_decref(config);
    json_decref(body);
}

void api_runs_list(http_request *req, void *ctx) {
    app *a = ctx;
    static const char *const statuses[] = {"queued", "running", "succeeded", "failed", "cancelled", "interrupted", NULL};
    static const char *const sorts[] = {"id", "-id", "created_at", "-created_at", "name", "-name", "status", "-status",
                                        NULL};
    store_run_filter f = {0};
    long long limit, offset, experiment;
    if (api_query_enum(req, "status", statuses, &f.status) < 0 || api_query_enum(req, "sort", sorts, &f.sort) < 0 ||
        api_query_int(req, "limit", 1, 500, 50, &limit) < 0 || api_query_int(req, "offset", 0, 1000000000, 0, &offset) < 0 ||
        api_query_int(req, "experiment", 1, (long long)1 << 53, 0, &experiment) < 0)
        return;
    f.tag = http_request_query(req, "tag");
    f.variant = http_request_query(req, "variant");
    f.experiment_id = experiment;
    f.limit = (int)limit;
    f.offset = (int)offset;
    json_t *runs;
    long long total = 0;
    if (store_run_list(a->store, &f, &runs, &total) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) api_run_view(a, r);
    http_reply_json(req, 200, json_pack("{s:o, s:I, s:I, s:I}", "runs", runs, "total", (json_int_t)total, "limit",
                                        (json_int_t)limit, "offset", (json_int_t)offset));
}

/* Loads the {id} run or answers 404. */
static json_t *load_run(http_request *req, app *a, long long *id) {
    if (api_path_id(req, id) < 0) return NULL;
    json_t *row = NULL;
    store_status s = store_run_get(a->store, *id, &row);
    if (s == STORE_NOT_FOUND)
        http_reply_error(req, 404, "not_found", "id", "no run %lld", *id);
    else if (s != STORE_OK)
        api_store_failed(req);
    return row;
}

void api_runs_get(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    json_t *row = load_run(req, a, &id);
    if (!row) return;
    http_reply_json(req, 200, json_pack("{s:o}", "run", api_run_view(a, row)));
}

void api_runs_patch(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    if (api_path_id(req, &id) < 0) return;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"name", "tags", "note", NULL};
    const char *name, *note;
    json_t *tags;
    if (api_only_fields(req, body, fields) == 0 && api_opt_string(req, body, "name", 200, &name) == 0 &&
        api_opt_string(req, body, "note", 10000, &note) == 0 && api_opt_tags(req, body, "tags", &tags) == 0) {
        store_status s = store_run_update(a->store, id, name, note, tags);
        json_t *row = NULL;
        if (s == STORE_NOT_FOUND)
            http_reply_error(req, 404, "not_found", "id", "no run %lld", id);
        else if (s != STORE_OK || store_run_get(a->store, id, &row) != STORE_OK)
            api_store_failed(req);
        else
            http_reply_json(req, 200, json_pack("{s:o}", "run", api_run_view(a, row)));
    }
    json_decref(body);
}

void api_runs_delete(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    if (api_path_id(req, &id) < 0) return;
    store_status s = store_run_delete(a->store, id);
    if (s == STORE_NOT_FOUND) {
        http_reply_error(req, 404, "not_found", "id", "no run %lld", id);
    } else if (s == STORE_CONFLICT) {
        http_reply_error(req, 409, "conflict", "status", "run %lld is queued or running: cancel it first", id);
    } else if (s != STORE_OK) {
        api_store_failed(req);
    } else {
        char dir[PATH_MAX];
        jobs_run_dir(a->jobs, id, dir, sizeof dir);
        if (fs_remove_tree(dir) < 0) log_warn("run %lld: could not remove %s", id, dir);
        http_reply_bytes(req, 204, NULL, "", 0);
    }
}

void api_runs_cancel(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    json_t *row = load_run(req, a, &id);
    if (!row) return;
    char status[16];
    snprintf(status, sizeof status, "%s", json_string_value(json_object_get(row, "status")));
    json_decref(row);
    if (!strcmp(status, "queued") && store_run_transition(a->store, id, FROM_QUEUED, "cancelled", NULL) == STORE_OK) {
        /* The worker that pops it sees it is no longer queued and skips it. */
    } else if (!jobs_cancel_run(a->jobs, id)) {
        http_reply_error(req, 409, "conflict", "status", "run %lld is %s, not queued or running", id, status);
        return;
    }
    row = NULL;
    if (store_run_get(a->store, id, &row) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 202, json_pack("{s:o}", "run", api_run_view(a, row)));
}

void api_runs_resume(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    json_t *row = load_run(req, a, &id);
    if (!row) return;
    json_decref(row);
    static const char *const resumable[] = {"interrupted", "cancelled", NULL};
    store_status s = store_run_transition(a->store, id, resumable, "queued", NULL);
    if (s == STORE_CONFLICT) {
        http_reply_error(req, 409, "conflict", "status", "only interrupted or cancelled runs can be resumed");
        return;
    }
    if (s != STORE_OK) {
        api_store_failed(req);
        return;
    }
    if (jobs_submit_run(a->jobs, id) < 0) {
        static const char *const queued[] = {"queued", NULL};
        store_run_transition(a->store, id, queued, "interrupted", "the training queue was full");
        http_reply_header(req, "Retry-After", "30");
        http_reply_error(req, 429, "queue_full", NULL, "the training queue is full; try again later");
        return;
    }
    row = NULL;
    if (store_run_get(a->store, id, &row) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 202, json_pack("{s:o}", "run", api_run_view(a, row)));
}

static int run_exists(http_request *req, app *a, long long *id) {
    json_t *row = load_run(req, a, id);
    if (!row) return 0;
    json_decref(row);
    return 1;
}

void api_runs_metrics(http_request *req, void *ctx) {
    app *a = ctx;
    long long id, since, max_points;
    if (!run_exists(req, a, &id)) return;
    if (api_query_int(req, "since_step", 0, 100000000, 0, &since) < 0 ||
        api_query_int(req, "max_points", 2, 100000, 0, &max_points) < 0)
        return;
    const char *keys = http_request_query(req, "keys");
    if (keys && strlen(keys) > 2000) {
        http_reply_error(req, 422, "invalid_field", "keys", "keys must be at most 2000 characters");
        return;
    }
    json_t *series;
    if (store_metrics_series(a->store, id, keys, (int)since, (int)max_points, &series) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 200, json_pack("{s:I, s:o}", "run_id", (json_int_t)id, "series", series));
}

void api_runs_summary(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    if (!run_exists(req, a, &id)) return;
    json_t *summary;
    if (store_metrics_summary(a->store, id, &summary) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 200, json_pack("{s:I, s:o}", "run_id", (json_int_t)id, "summary", summary));
}

void api_runs_csv(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    if (!run_exists(req, a, &id)) return;
    char *csv;
    size_t len;
    if (store_metrics_csv(a->store, id, &csv, &len) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    char disp[80];
    snprintf(disp, sizeof disp, "attachment; filename=\"run-%lld-metrics.csv\"", id);
    http_reply_header(req, "Content-Disposition", disp);
    http_reply_bytes(req, 200, "text/csv; charset=utf-8", csv, len);
    free(csv);
}

void api_runs_weights(http_request *req, void *ctx) {
    app *a = ctx;
    long long id;
    if (!run_exists(req, a, &id)) return;
    char path[PATH_MAX];
    jobs_run_checkpoint(a->jobs, id, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0) close(fd);
        http_reply_error(req, 404, "not_found", NULL, "run %lld has no checkpoint yet", id);
        return;
    }
    char disp[80];
    snprintf(disp, sizeof disp, "attachment; filename=\"run-%lld.safetensors\"", id);
    http_reply_header(req, "Content-Disposition", disp);
    http_reply_fd(req, 200, "application/octet-stream", fd, (uint64_t)st.st_size);
}
