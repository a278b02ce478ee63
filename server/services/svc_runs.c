#include "services/svc_runs.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "engine/train.h"
#include "util/fsutil.h"
#include "util/log.h"
#include "core/run_config.h"

static const char *const FROM_QUEUED[] = {"queued", NULL};

/* The whole config is at fault: its prefix without the trailing '.'. */
static void config_field(const char *prefix, char *field, size_t len) {
    snprintf(field, len, "%s", prefix[0] ? prefix : "config.");
    size_t n = strlen(field);
    if (n && field[n - 1] == '.') field[n - 1] = 0;
}

svc_status svc_runs_admit(app *a, json_t *config, const char *prefix, int together, svc_error *err) {
    char field[96];
    const char *corpus_name = json_string_value(json_object_get(config, "corpus"));
    int vocab = corpus_name ? corpora_vocab(a->corpora, corpus_name) : -1;
    if (vocab < 0) {
        snprintf(field, sizeof field, "%scorpus", prefix);
        if (corpus_name && !strcmp(corpus_name, "default"))
            return svc_fail(err, SVC_INVALID, "invalid_field", field,
                            "corpus 'default' is not built yet: run `make corpus`, or use corpus 'small'");
        return svc_fail(err, SVC_INVALID, "invalid_field", field, "corpus '%s' does not exist or is not ready",
                        corpus_name ? corpus_name : "");
    }
    const char *loss_on = json_string_value(json_object_get(config, "loss_on"));
    if (loss_on && !strcmp(loss_on, "answers") && !corpora_is_task(a->corpora, corpus_name)) {
        snprintf(field, sizeof field, "%sloss_on", prefix);
        return svc_fail(err, SVC_INVALID, "invalid_field", field,
                        "loss_on 'answers' needs a task corpus (one with answer positions); corpus '%s' is not one",
                        corpus_name);
    }
    json_int_t threads = json_integer_value(json_object_get(config, "threads"));
    if (threads == 0 &&
        json_object_set_new(config, "threads", json_integer(jobs_threads_per_run(a->jobs, together))) < 0)
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    /* More threads than the service computes with would oversubscribe every core it shares. */
    int most = jobs_compute_threads(a->jobs);
    if (threads > most) {
        snprintf(field, sizeof field, "%sthreads", prefix);
        return svc_fail(err, SVC_INVALID, "invalid_field", field,
                        "this service computes with %d thread%s (--compute-threads): ask for at most %d, or 0 for "
                        "its share",
                        most, most == 1 ? "" : "s", most);
    }
    train_config tc;
    run_config_to_train(config, vocab, &tc);
    engine_error eerr = {0};
    if (train_config_validate(&tc, &eerr) != ENGINE_OK) {
        config_field(prefix, field, sizeof field);
        return svc_fail(err, SVC_INVALID, "invalid_field", field, "%s", eerr.message);
    }
    size_t need = train_config_memory_bytes(&tc, (int)json_integer_value(json_object_get(config, "threads")));
    if (need > a->max_model_bytes) {
        config_field(prefix, field, sizeof field);
        return svc_fail(err, SVC_INVALID, "too_large", field,
                        "this model needs about %zu MiB, over the service's limit of %zu MiB", need >> 20,
                        a->max_model_bytes >> 20);
    }
    return SVC_OK;
}

int svc_runs_store_row(const svc_new_run *r, store_new_run *row, char **config_text) {
    *config_text = json_dumps(r->config, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    if (!*config_text) return -1;
    *row =
        (store_new_run){.name = r->name,
                        .variant = r->variant ? r->variant : json_string_value(json_object_get(r->config, "attention")),
                        .note = r->note,
                        .corpus = json_string_value(json_object_get(r->config, "corpus")),
                        .config_json = *config_text,
                        .seed = json_integer_value(json_object_get(r->config, "seed")),
                        .total_steps = (int)json_integer_value(json_object_get(r->config, "steps")),
                        .tags = r->tags};
    return 0;
}

static svc_status queue_full(svc_error *err) {
    svc_fail(err, SVC_BUSY, "queue_full", NULL, "the training queue is full; try again later");
    err->retry_after = 30;
    return SVC_BUSY;
}

svc_status svc_runs_create(app *a, const svc_new_run *r, long long *id, svc_error *err) {
    *id = 0;
    store_new_run row;
    char *config_text;
    if (svc_runs_store_row(r, &row, &config_text) < 0)
        return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    long long new_id = 0;
    row.idempotency = r->idem ? &r->idem->record : NULL;
    store_status s = store_run_create(a->store, &row, &new_id);
    free(config_text);
    if (s == STORE_CONFLICT && r->idem) {
        svc_status v = svc_idempotency_settle(a, r->idem, err);
        if (v == SVC_OK) *id = r->idem->replay;
        if (v == SVC_NOT_FOUND)
            v = svc_fail(err, SVC_CONFLICT, "conflict", NULL, "the run conflicted with another change; try again");
        return v;
    }
    if (s != STORE_OK) return svc_store_failed(err);
    if (jobs_submit_run(a->jobs, new_id) < 0) {
        /* Not queued after all: take the row back out so nothing waits forever. */
        if (store_run_transition(a->store, new_id, FROM_QUEUED, "cancelled", "the training queue was full") !=
                STORE_OK ||
            store_run_delete(a->store, new_id) != STORE_OK)
            log_warn("run %lld: could not take back a run the queue refused: %s", new_id, store_last_error());
        return queue_full(err);
    }
    *id = new_id;
    return SVC_OK;
}

/* The run's status into buf: SVC_OK, SVC_NOT_FOUND or SVC_FAILED. */
static svc_status run_status(app *a, long long id, char *buf, size_t len, svc_error *err) {
    json_t *row = NULL;
    store_status s = store_run_get(a->store, id, &row);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no run %lld", id);
    if (s != STORE_OK) return svc_store_failed(err);
    snprintf(buf, len, "%s", json_string_value(json_object_get(row, "status")));
    json_decref(row);
    return SVC_OK;
}

svc_status svc_runs_cancel(app *a, long long id, svc_error *err) {
    char status[16];
    svc_status v = run_status(a, id, status, sizeof status, err);
    if (v != SVC_OK) return v;
    /* A queued run is cancelled in the store: the worker that pops it sees it is no longer queued
     * and skips it. A running one is asked to stop by its worker. */
    if (!strcmp(status, "queued") && store_run_transition(a->store, id, FROM_QUEUED, "cancelled", NULL) == STORE_OK)
        return SVC_OK;
    if (jobs_cancel_run(a->jobs, id)) return SVC_OK;
    return svc_fail(err, SVC_CONFLICT, "conflict", "status", "run %lld is %s, not queued or running", id, status);
}

svc_status svc_runs_resume(app *a, long long id, svc_error *err) {
    static const char *const resumable[] = {"interrupted", "cancelled", NULL};
    store_status s = store_run_transition(a->store, id, resumable, "queued", NULL);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no run %lld", id);
    if (s == STORE_CONFLICT)
        return svc_fail(err, SVC_CONFLICT, "conflict", "status", "only interrupted or cancelled runs can be resumed");
    if (s != STORE_OK) return svc_store_failed(err);
    if (jobs_submit_run(a->jobs, id) < 0) {
        if (store_run_transition(a->store, id, FROM_QUEUED, "interrupted", "the training queue was full") != STORE_OK)
            log_warn("run %lld: could not put back a run the queue refused: %s", id, store_last_error());
        return queue_full(err);
    }
    return SVC_OK;
}

svc_status svc_runs_delete(app *a, long long id, svc_error *err) {
    store_status s = store_run_delete(a->store, id);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no run %lld", id);
    if (s == STORE_CONFLICT)
        return svc_fail(err, SVC_CONFLICT, "conflict", "status", "run %lld is queued or running: cancel it first", id);
    if (s != STORE_OK) return svc_store_failed(err);
    char dir[PATH_MAX];
    jobs_run_dir(a->jobs, id, dir, sizeof dir);
    if (fs_remove_tree(dir) < 0) log_warn("run %lld: could not remove %s", id, dir);
    return SVC_OK;
}
