#include "services/svc_probes.h"
#include "services/svc_external.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "services/app.h"
#include "engine/model.h"
#include "engine/model_io.h"
#include "engine/probes/probe_engine_model.h"
#include "engine/probes/probe_estimate.h"
#include "util/hash.h"
#include "util/log.h"
#include "core/run_config.h"

/* ---- checkpoint content hashes, computed once per file ------------------------------------ */

#define HASH_CACHE 32

typedef struct {
    char path[PATH_MAX];
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    char hex[65];
    unsigned long long used; /* for replacing the least recently used */
} hash_entry;

static pthread_mutex_t hash_lock = PTHREAD_MUTEX_INITIALIZER;
static hash_entry hash_cache[HASH_CACHE];
static unsigned long long hash_clock;

static int same_file(const hash_entry *e, const char *path, const struct stat *sb) {
    return e->used && !strcmp(e->path, path) && e->dev == sb->st_dev && e->ino == sb->st_ino &&
           e->size == sb->st_size && e->mtime.tv_sec == sb->st_mtim.tv_sec && e->mtime.tv_nsec == sb->st_mtim.tv_nsec;
}

/* The checkpoint content hash the cache key uses: 64 hex digits, or "" when the run has no
 * checkpoint that can be read. */
static void svc_probes_weights_hash(app *a, long long run_id, char hex[65]) {
    hex[0] = 0;
    char path[PATH_MAX];
    jobs_run_checkpoint(a->jobs, run_id, path, sizeof path);
    struct stat sb;
    if (stat(path, &sb) != 0) return;
    pthread_mutex_lock(&hash_lock);
    for (int i = 0; i < HASH_CACHE; i++)
        if (same_file(&hash_cache[i], path, &sb)) {
            hash_cache[i].used = ++hash_clock;
            memcpy(hex, hash_cache[i].hex, 65);
            pthread_mutex_unlock(&hash_lock);
            return;
        }
    pthread_mutex_unlock(&hash_lock);
    /* Hashing reads the whole file: done outside the lock. A file replaced while it is read is
     * noticed by its changed identity and not kept. */
    char got[65];
    if (hash_file_sha256(path, got, NULL) < 0) return;
    struct stat after;
    if (stat(path, &after) != 0 || after.st_ino != sb.st_ino || after.st_dev != sb.st_dev ||
        after.st_size != sb.st_size || after.st_mtim.tv_sec != sb.st_mtim.tv_sec ||
        after.st_mtim.tv_nsec != sb.st_mtim.tv_nsec)
        return;
    memcpy(hex, got, 65);
    pthread_mutex_lock(&hash_lock);
    int slot = 0;
    for (int i = 1; i < HASH_CACHE; i++)
        if (hash_cache[i].used < hash_cache[slot].used) slot = i;
    hash_entry *e = &hash_cache[slot];
    snprintf(e->path, sizeof e->path, "%s", path);
    e->dev = sb.st_dev;
    e->ino = sb.st_ino;
    e->size = sb.st_size;
    e->mtime = sb.st_mtim;
    memcpy(e->hex, got, 65);
    e->used = ++hash_clock;
    pthread_mutex_unlock(&hash_lock);
}

/* ---- one probe computation, handed to a probe worker and back ----------------------------- */

typedef struct {
    app *a;
    const probe_kind *kind;
    const json_t *params;
    long long run_id;
    const atomic_int *cancel; /* NULL: never */
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

static engine_status run_refused(probe_error *perr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static engine_status run_refused(probe_error *perr, const char *fmt, ...) {
    snprintf(perr->field, sizeof perr->field, "run_id");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(perr->message, sizeof perr->message, fmt, ap);
    va_end(ap);
    return ENGINE_ERR_INVALID;
}

/* Loads the run's latest checkpoint at the run's precision, its corpus's tokenizer (NULL for a task
 * corpus, which has none) and, when it can be read, the corpus itself with the run's loader
 * settings (for probes on its validation windows; *data stays NULL otherwise). */
static engine_status load_run_model(app *a, long long run_id, model **m, const tokenizer **tok, corpus **data,
                                    corpus_loader_config *lc, probe_error *perr) {
    json_t *row = NULL;
    store_status s = store_run_get(a->store, run_id, &row);
    if (s == STORE_NOT_FOUND) return run_refused(perr, "no run %lld", run_id);
    if (s != STORE_OK) return run_refused(perr, "run %lld cannot be read: %s", run_id, store_last_error());
    /* Copied out of the rows before they go: the names are used in messages below. */
    char corpus_name[64], encoding[16] = "gpt2";
    const json_t *cfg = json_object_get(row, "config");
    const char *c = json_string_value(json_object_get(cfg, "corpus"));
    snprintf(corpus_name, sizeof corpus_name, "%s", c ? c : "");
    /* A run trained elsewhere has a config of its own making, not a RunConfig: the model file says
     * what the model is (below), its windows are the model's length, its arithmetic fp32. */
    int external = svc_external_is(row);
    precision_kind precision = PRECISION_FP32;
    *lc = (corpus_loader_config){.seq_len = 0, .batch = 1, .order = CORPUS_ORDER_SHUFFLED, .val_fraction = 0.01};
    if (!external) {
        train_config tc;
        run_config_to_train(cfg, 2, &tc); /* the loader settings and the precision; the vocab is the file's */
        *lc = (corpus_loader_config){.seq_len = tc.model.seq_len,
                                     .batch = 1,
                                     .order = tc.order,
                                     .seed = tc.seed,
                                     .val_fraction = tc.val_fraction};
        precision = tc.precision;
    }
    json_decref(row);
    json_t *corpus_row = NULL;
    if (store_corpus_get(a->store, corpus_name, &corpus_row) == STORE_OK) {
        const char *t = json_string_value(json_object_get(corpus_row, "tokenizer"));
        if (t) snprintf(encoding, sizeof encoding, "%s", t);
        json_decref(corpus_row);
    }
    char path[PATH_MAX];
    jobs_run_checkpoint(a->jobs, run_id, path, sizeof path);
    struct stat sb;
    if (stat(path, &sb) != 0) return run_refused(perr, "run %lld has no checkpoint yet", run_id);
    engine_error err = {0};
    if (model_load(m, path, 1, 1, 0, &err) != ENGINE_OK) {
        /* The engine names the file; an answer names no server path (the log keeps it). */
        log_warn("run %lld: its checkpoint cannot be loaded for a probe: %s", run_id, err.message);
        return run_refused(perr, "run %lld has no usable weights yet: its checkpoint cannot be loaded", run_id);
    }
    if (external) { /* the tokenizer its vocabulary names; windows as long as the model's */
        const model_config *mc = model_get_config(*m);
        snprintf(encoding, sizeof encoding, "%s", mc->vocab == 256 ? "bytes" : "gpt2");
        lc->seq_len = mc->seq_len;
    }
    *tok = strcmp(encoding, "task") ? corpora_tokenizer(a->corpora, encoding) : NULL;
    if (!*tok && strcmp(encoding, "task")) {
        model_free(*m);
        *m = NULL;
        return run_refused(perr, "run %lld has no usable weights yet: the %s tokenizer is not available", run_id,
                           encoding);
    }
    /* A loaded model is fp32: evaluate as the run trained (its output layer in bf16 where it did). */
    if (model_set_precision(*m, precision, &err) != ENGINE_OK) {
        model_free(*m);
        *m = NULL;
        return run_refused(perr, "run %lld trained in %s, which this machine cannot evaluate: %s", run_id,
                           precision_name(precision), err.message);
    }
    /* The run's corpus for its validation windows; a probe without them still runs on text. */
    if (corpora_open(a->corpora, corpus_name, data, &err) != ENGINE_OK) {
        log_warn("run %lld: corpus '%s' cannot be read for probes: %s", run_id, corpus_name, err.message);
        *data = NULL;
    }
    return ENGINE_OK;
}

static void run_probe(void *arg) {
    probe_call *c = arg;
    double t0 = mono_ms();
    model *m = NULL;
    const tokenizer *tok = NULL;
    corpus *data = NULL;
    corpus_loader_config lc;
    probe_engine_model pm;
    probe_context pctx = {.cancel = c->cancel};
    c->status = ENGINE_OK;
    if (c->cancel && atomic_load(c->cancel)) { /* the client left while it waited for the worker */
        snprintf(c->err.message, sizeof c->err.message, "cancelled");
        c->status = ENGINE_ERR_CANCELLED;
    } else if (c->kind->needs_model) {
        if (!c->run_id) {
            snprintf(c->err.field, sizeof c->err.field, "run_id");
            snprintf(c->err.message, sizeof c->err.message, "probe %s needs a run_id with trained weights",
                     c->kind->name);
            c->status = ENGINE_ERR_INVALID;
        } else {
            c->status = load_run_model(c->a, c->run_id, &m, &tok, &data, &lc, &c->err);
            engine_error e = {0};
            if (c->status == ENGINE_OK && probe_engine_model_init(&pm, m, tok, &e) != ENGINE_OK) {
                c->status = ENGINE_ERR_INVALID;
                snprintf(c->err.message, sizeof c->err.message, "%s", e.message);
            }
            if (c->status == ENGINE_OK && data && probe_engine_model_set_corpus(&pm, data, &lc, &e) != ENGINE_OK)
                log_warn("run %lld: no validation windows for probes: %s", c->run_id, e.message);
            pctx.model = &pm.view;
        }
    }
    if (c->status == ENGINE_OK) c->status = probe_run(c->kind->name, c->params, &pctx, &c->result, &c->err);
    model_free(m);
    corpus_free(data);
    c->ms = mono_ms() - t0;
}

/* The answer for a failed computation. */
static svc_status probe_refused(const probe_call *c, svc_error *err) {
    if (c->status == ENGINE_ERR_INVALID) {
        const char *f = c->err.field;
        char field[96];
        /* The probe names "run" for a model it lacks; the API's member is run_id. */
        snprintf(field, sizeof field, "%s%s", strcmp(f, "run_id") && strcmp(f, "run") ? "params." : "",
                 !strcmp(f, "run") ? "run_id" : f);
        return svc_fail(err, SVC_INVALID, "invalid_field", f[0] ? field : "params", "%s", c->err.message);
    }
    if (c->status == ENGINE_ERR_CANCELLED)
        return svc_fail(err, SVC_FAILED, "cancelled", NULL, "the probe was cancelled: its client left");
    return svc_fail(err, SVC_FAILED, "probe_failed", NULL, "%s", c->err.message[0] ? c->err.message : "probe failed");
}

/* The bound's scale: 1, or ATTNLAB_TEST_PROBE_MAX_FLOPS / PROBE_MAX_FLOPS (tests, which have only
 * small models to probe). */
static double flops_scale(void) {
    const char *env = getenv("ATTNLAB_TEST_PROBE_MAX_FLOPS");
    char *end;
    double v = env && *env ? strtod(env, &end) : 0;
    return env && *env && !*end && v > 0 ? v / PROBE_MAX_FLOPS : 1;
}

/* A model probe's work estimated from its params and the size of the run's model (its checkpoint's
 * config, read without the weights) and checked against the bounds before the request waits for
 * the probe worker (probe_estimate.h). A run whose checkpoint cannot be read is left to the worker,
 * which says why. */
static engine_status svc_probes_estimate(app *a, const probe_kind *kind, const json_t *params, long long run_id,
                                         probe_error *perr) {
    char path[PATH_MAX];
    jobs_run_checkpoint(a->jobs, run_id, path, sizeof path);
    struct stat sb;
    model_config mc;
    engine_error e = {0};
    if (stat(path, &sb) != 0 || model_config_from_file(path, &mc, &e) != ENGINE_OK) return ENGINE_OK;
    probe_size size = {
        .n_layer = mc.n_layer, .n_head = mc.n_head, .d_model = mc.d_model, .seq_len = mc.seq_len, .vocab = mc.vocab};
    probe_cost cost;
    return probe_estimate_check(kind, params, &size, flops_scale(), &cost, perr);
}

svc_status svc_probes_run(app *a, const probe_kind *kind, const json_t *params, long long run_id,
                          const atomic_int *cancel, long long *id, int *cached, svc_error *err) {
    *id = 0;
    *cached = 0;
    probe_error perr = {0};
    json_t *resolved = probe_params_resolve(kind, params, &perr);
    if (!resolved) {
        char field[96];
        snprintf(field, sizeof field, "params.%s", perr.field);
        return svc_fail(err, SVC_INVALID, "invalid_field", perr.field[0] ? field : "params", "%s", perr.message);
    }
    if (!kind->needs_model) run_id = 0;
    if (run_id && kind->estimate && svc_probes_estimate(a, kind, resolved, run_id, &perr) != ENGINE_OK) {
        json_decref(resolved);
        char field[96];
        snprintf(field, sizeof field, "%s%s", strcmp(perr.field, "run") ? "params." : "",
                 strcmp(perr.field, "run") ? perr.field : "run_id");
        return svc_fail(err, SVC_INVALID, "too_large", field, "%s", perr.message);
    }
    /* Same kind, same resolved parameters (and the same weights' bytes for model probes): same answer. */
    char weights[65] = "";
    if (run_id) svc_probes_weights_hash(a, run_id, weights);
    json_t *keyobj = json_pack("{s:O, s:I, s:s, s:i}", "params", resolved, "run_id", (json_int_t)run_id, "weights",
                               weights, "format", PROBE_RESULT_FORMAT);
    char *key = keyobj ? json_dumps(keyobj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(keyobj);
    svc_status v = key ? SVC_OK : svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
    long long found = 0;
    /* A timing kind measures this machine: every request is a new measurement, stored without a
     * cache key so that no later request is answered with it. */
    store_status fs = v != SVC_OK    ? STORE_ERROR
                      : kind->timing ? STORE_NOT_FOUND
                                     : store_probe_find(a->store, kind->name, key, &found);
    if (v == SVC_OK && fs == STORE_OK) {
        *id = found;
        *cached = 1;
    } else if (v == SVC_OK && fs != STORE_NOT_FOUND) {
        v = svc_store_failed(err);
    } else if (v == SVC_OK) {
        probe_call call = {.a = a, .kind = kind, .params = resolved, .run_id = run_id, .cancel = cancel};
        if (jobs_probe_call(a->jobs, run_probe, &call) < 0) {
            v = svc_fail(err, SVC_BUSY, "queue_full", NULL, "the probe queue is full; try again shortly");
            err->retry_after = 1;
        } else if (call.status != ENGINE_OK) {
            v = probe_refused(&call, err);
        } else {
            char *params_text = json_dumps(resolved, JSON_COMPACT | JSON_SORT_KEYS);
            json_t *seed = json_object_get(resolved, "seed");
            store_new_probe np = {.kind = kind->name,
                                  .params_json = params_text,
                                  .cache_key = kind->timing ? NULL : key,
                                  .status = "succeeded",
                                  .seed = seed ? json_integer_value(seed) : 0,
                                  .run_id = run_id,
                                  .duration_ms = call.ms,
                                  .result = call.result};
            if (!params_text)
                v = svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory");
            else if (store_probe_insert(a->store, &np, id) != STORE_OK)
                v = svc_store_failed(err);
            free(params_text);
        }
        json_decref(call.result);
    }
    free(key);
    json_decref(resolved);
    return v;
}
