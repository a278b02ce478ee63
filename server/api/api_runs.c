/* Runs over HTTP: create, list, get, change, delete, cancel, resume, and their metrics. The rules
 * are the runs service's (svc_runs.h); these parse, call and reply. */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_pipe.h"
#include "api/api_series.h"
#include "api/api.h"
#include "core/checkpoints.h"
#include "util/log.h"
#include "api/reply_cache.h"
#include "core/run_config.h"
#include "services/svc_external.h"
#include "services/svc_run_view.h"
#include "services/svc_runs.h"
#include "util/json_text.h"

void api_runs_create(http_request *req, const api_ctx *api) {
    json_t *body = http_request_json_object(req);
    if (!body) return;
    svc_idem idem, *ip;
    if (api_idempotency(req, api, "run", body, &idem, &ip) < 0) {
        json_decref(body);
        return;
    }
    if (ip && ip->replay) { /* a retry: the first answer again */
        api_reply_replayed(req, "/api/runs", ip->replay);
        api_runs_reply(req, api, ip->replay, 201);
        json_decref(body);
        return;
    }
    if (json_object_get(body, "source")) { /* a run trained elsewhere (api_external.c) */
        api_runs_create_external(req, api, body, ip);
        json_decref(body);
        return;
    }
    static const char *const fields[] = {"name", "tags", "note", "config", NULL};
    const char *name, *note;
    json_t *tags, *config = NULL;
    run_config_error cerr;
    svc_error err;
    long long id;
    if (api_only_fields(req, body, fields) < 0 || api_opt_string(req, body, "name", 200, &name) < 0 ||
        api_opt_string(req, body, "note", 10000, &note) < 0 || api_opt_tags(req, body, "tags", &tags) < 0)
        goto done;
    if (run_config_normalize(json_object_get(body, "config"), "config.", &config, &cerr) < 0) {
        http_reply_error(req, 422, "invalid_field", cerr.field, "%s", cerr.message);
        goto done;
    }
    svc_new_run r = {.name = name, .note = note, .tags = tags, .config = config, .idem = ip};
    if (svc_runs_admit(api->svc, config, "config.", 1, &err) != SVC_OK ||
        svc_runs_create(api->svc, &r, &id, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        goto done;
    }
    api_runs_created(req, api, id, ip);
done:
    json_decref(config);
    json_decref(body);
}

/* The config filters of a runs list being read: the store's filter and the value texts it points to. */
typedef struct {
    store_run_filter *f;
    char keys[STORE_RUN_MAX_CONFIG_FILTERS][64];
    char *values[STORE_RUN_MAX_CONFIG_FILTERS];
    int too_many;
    run_config_error err; /* err.field[0] != 0: a bad filter */
} config_filters;

/* http_request_each_query's visitor: reads one `config.KEY=VALUE` argument into cf (others are left
 * alone). Returns non-zero to stop at the first bad or surplus filter. */
static int read_config_filter(const char *key, const char *value, void *ctx) {
    config_filters *cf = ctx;
    if (strncmp(key, "config.", 7) != 0) return 0;
    const char *name = key + 7;
    if (cf->f->n_config == STORE_RUN_MAX_CONFIG_FILTERS) {
        cf->too_many = 1;
        return 1;
    }
    json_t *v = NULL;
    if (strlen(name) >= sizeof cf->keys[0]) {
        snprintf(cf->err.field, sizeof cf->err.field, "config.");
        snprintf(cf->err.message, sizeof cf->err.message, "%.60s... is not a known field", key);
        return 1;
    }
    if (run_config_field_from_text(name, value ? value : "", "config.", &v, &cf->err) < 0) return 1;
    /* Written as stored configs are (15 significant digits), so equal numbers have equal texts. */
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(v);
    if (!text) {
        snprintf(cf->err.field, sizeof cf->err.field, "%s", key);
        snprintf(cf->err.message, sizeof cf->err.message, "out of memory");
        return 1;
    }
    int i = cf->f->n_config++;
    snprintf(cf->keys[i], sizeof cf->keys[i], "%s", name);
    cf->values[i] = text;
    cf->f->config[i].key = cf->keys[i];
    cf->f->config[i].value_json = text;
    return 0;
}

/* The runs list's last answers, one per query: an answer is kept with the state it was built from
 * (the event bus's last id, which moves with every step, status and end the jobs publish, and the
 * count of changes the API answered) and given again while neither has moved, so that a page asked
 * many times between two steps costs a copy. Not on a shared store, which other nodes change. */
#define RUNS_LIST_SLOTS 16

typedef struct {
    char *query;
    uint64_t events_id, changes;
    char *body;
    size_t len;
    unsigned long long used;
} runs_list_slot;

static pthread_mutex_t runs_list_lock = PTHREAD_MUTEX_INITIALIZER;
static runs_list_slot runs_list_slots[RUNS_LIST_SLOTS];
static unsigned long long runs_list_clock;

static int query_text(const char *key, const char *value, void *ctx) {
    char **q = ctx;
    size_t old = *q ? strlen(*q) : 0, add = strlen(key) + strlen(value) + 3;
    char *grown = realloc(*q, old + add);
    if (!grown) return 1;
    snprintf(grown + old, add, "%s=%s&", key, value);
    *q = grown;
    return 0;
}

static int runs_list_cached(const char *query, uint64_t events_id, uint64_t changes, char **body, size_t *len) {
    int hit = 0;
    pthread_mutex_lock(&runs_list_lock);
    for (int i = 0; i < RUNS_LIST_SLOTS && !hit; i++) {
        runs_list_slot *s = &runs_list_slots[i];
        if (!s->query || strcmp(s->query, query) || s->events_id != events_id || s->changes != changes) continue;
        if ((*body = malloc(s->len + 1))) {
            memcpy(*body, s->body, s->len + 1);
            *len = s->len;
            s->used = ++runs_list_clock;
            hit = 1;
        }
    }
    pthread_mutex_unlock(&runs_list_lock);
    return hit;
}

static void runs_list_keep(const char *query, uint64_t events_id, uint64_t changes, const char *body, size_t len) {
    char *q = strdup(query), *b = malloc(len + 1);
    if (!q || !b) {
        free(q);
        free(b);
        return;
    }
    memcpy(b, body, len + 1);
    pthread_mutex_lock(&runs_list_lock);
    runs_list_slot *slot = &runs_list_slots[0];
    for (int i = 0; i < RUNS_LIST_SLOTS; i++) {
        runs_list_slot *s = &runs_list_slots[i];
        if (s->query && !strcmp(s->query, query)) {
            slot = s;
            break;
        }
        if (s->used < slot->used) slot = s;
    }
    free(slot->query);
    free(slot->body);
    *slot = (runs_list_slot){q, events_id, changes, b, len, ++runs_list_clock};
    pthread_mutex_unlock(&runs_list_lock);
}

void api_runs_list(http_request *req, const api_ctx *api) {
    /* What the answer is built from, read before it is built: a change meanwhile moves it. */
    uint64_t events_id = events_last_id(api->svc->events), changes = http_server_changes(api->http);
    char *query = NULL;
    int cacheable = !store_shared(api->svc->store) && !http_request_each_query(req, query_text, &query);
    char *cached;
    size_t cached_len;
    if (cacheable && runs_list_cached(query ? query : "", events_id, changes, &cached, &cached_len)) {
        free(query);
        http_reply_take(req, 200, "application/json", cached, cached_len);
        return;
    }
    store_run_filter f = {0};
    long long limit, offset, experiment;
    if (api_query_enum(req, "status", store_run_statuses, &f.status) < 0 ||
        api_query_enum(req, "sort", store_run_sorts, &f.sort) < 0 || api_query_page(req, &limit, &offset) < 0 ||
        api_query_int(req, "experiment", 1, (long long)1 << 53, 0, &experiment) < 0 ||
        api_query_search(req, &f.search) < 0) {
        free(query);
        return;
    }
    config_filters cf = {.f = &f};
    http_request_each_query(req, read_config_filter, &cf);
    if (cf.too_many || cf.err.field[0]) {
        if (cf.too_many)
            http_reply_error(req, 422, "invalid_field", "config", "at most %d config.KEY filters",
                             STORE_RUN_MAX_CONFIG_FILTERS);
        else
            http_reply_error(req, 422, "invalid_field", cf.err.field, "%s", cf.err.message);
        for (int i = 0; i < f.n_config; i++) free(cf.values[i]);
        free(query);
        return;
    }
    f.tag = http_request_query(req, "tag");
    f.variant = http_request_query(req, "variant");
    f.experiment_id = experiment;
    f.limit = (int)limit;
    f.offset = (int)offset;
    json_t *runs;
    long long total;
    store_status s = store_run_list(api->svc->store, &f, &runs, &total);
    for (int i = 0; i < f.n_config; i++) free(cf.values[i]);
    if (s != STORE_OK) {
        free(query);
        api_store_failed(req);
        return;
    }
    if (svc_run_views(api->svc, runs) < 0) {
        json_decref(runs);
        free(query);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    json_t *body = json_pack("{s:o, s:I, s:I, s:I}", "runs", runs, "total", (json_int_t)total, "limit",
                             (json_int_t)limit, "offset", (json_int_t)offset);
    char *text = body ? json_text_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(body);
    if (text && cacheable) runs_list_keep(query ? query : "", events_id, changes, text, strlen(text));
    free(query);
    if (!text) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    http_reply_take(req, 200, "application/json", text, strlen(text));
}

void api_runs_get(http_request *req, const api_ctx *api) {
    long long id;
    json_t *row;
    if (api_load_by_id(req, api, "run", store_run_get, &id, &row) < 0) return;
    http_reply_json(req, 200, json_pack("{s:o}", "run", svc_run_view(api->svc, row)));
}

void api_runs_patch(http_request *req, const api_ctx *api) {
    long long id;
    if (api_path_id(req, &id) < 0) return;
    json_t *body = http_request_json_object(req);
    if (!body) return;
    static const char *const fields[] = {"name", "tags", "note", "status", "error", NULL};
    const char *name, *note, *status, *error;
    json_t *tags;
    if (api_only_fields(req, body, fields) == 0 && api_opt_string(req, body, "name", 200, &name) == 0 &&
        api_opt_string(req, body, "note", 10000, &note) == 0 && api_opt_tags(req, body, "tags", &tags) == 0 &&
        api_opt_string(req, body, "status", 16, &status) == 0 &&
        api_opt_string(req, body, "error", 1000, &error) == 0) {
        svc_error err;
        store_status s = STORE_OK;
        /* an external run's end first: a refused status leaves the run as it was */
        if (!status && error)
            http_reply_error(req, 422, "invalid_field", "error", "error goes with a status");
        else if (status && svc_external_finish(api->svc, id, status, error, &err) != SVC_OK)
            api_reply_svc_error(req, &err);
        else if ((s = store_run_update(api->svc->store, id, name, note, tags)) == STORE_NOT_FOUND)
            http_reply_error(req, 404, "not_found", "id", "no run %lld", id);
        else if (s != STORE_OK)
            api_store_failed(req);
        else
            api_runs_reply(req, api, id, 200);
    }
    json_decref(body);
}

void api_runs_delete(http_request *req, const api_ctx *api) {
    long long id;
    svc_error err;
    if (api_path_id(req, &id) < 0) return;
    if (svc_runs_delete(api->svc, id, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        http_reply_bytes(req, 204, NULL, "", 0);
}

void api_runs_cancel(http_request *req, const api_ctx *api) {
    long long id;
    svc_error err;
    if (api_path_id(req, &id) < 0) return;
    if (svc_runs_cancel(api->svc, id, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        api_runs_reply(req, api, id, 202);
}

void api_runs_resume(http_request *req, const api_ctx *api) {
    long long id;
    svc_error err;
    if (api_path_id(req, &id) < 0) return;
    if (svc_runs_resume(api->svc, id, &err) != SVC_OK)
        api_reply_svc_error(req, &err);
    else
        api_runs_reply(req, api, id, 202);
}

/* The {id} run exists (answers 404 or 500 and returns 0 if not). */
static int run_exists(http_request *req, const api_ctx *api, long long *id) {
    json_t *row;
    if (api_load_by_id(req, api, "run", store_run_get, id, &row) < 0) return 0;
    json_decref(row);
    return 1;
}

/* Loads the run of the {id} path (404 otherwise) and writes into key the cache key of the answer
 * `what` about it (svc_run_cache_key: "" while the run can still write metrics). Returns 0, or -1
 * once an answer has been sent. */
static int run_series_key(http_request *req, const api_ctx *api, const char *what, long long *id, char *key,
                          size_t cap) {
    json_t *row;
    if (api_load_by_id(req, api, "run", store_run_get, id, &row) < 0) return -1;
    svc_run_cache_key(row, what, key, cap);
    json_decref(row);
    return 0;
}

/* Answers a cached body for key; 1 when it did. */
static int reply_cached(http_request *req, const api_ctx *api, const char *key, const char *content_type) {
    char *body;
    size_t len;
    if (!key[0] || !reply_cache_get(api->replies, key, &body, &len)) return 0;
    http_reply_take(req, 200, content_type, body, len);
    return 1;
}

/* A streamed answer's text kept for the reply cache while it stays small enough to be kept (key ""
 * : not kept, or no longer). */
#define KEPT_MAX (16u << 20)
typedef struct {
    char key[2400];
    char *text;
    size_t len;
} kept_answer;

static void keep_piece(kept_answer *k, const char *piece, size_t len) {
    if (!k->key[0]) return;
    char *grown = k->len + len <= KEPT_MAX ? realloc(k->text, k->len + len) : NULL;
    if (!grown) { /* too long to keep (or no memory to keep it): answered all the same */
        free(k->text);
        k->text = NULL;
        k->key[0] = 0;
        return;
    }
    memcpy(grown + k->len, piece, len);
    k->text = grown;
    k->len += len;
}

/* The answer is whole: kept under its key. */
static void keep_done(const api_ctx *api, kept_answer *k) {
    if (k->key[0]) reply_cache_put(api->replies, k->key, k->text ? k->text : "", k->len);
}

/* GET /api/runs/{id}/metrics written a series at a time as the client reads it (http_reply_chunks),
 * so the answer's text is never built whole: the bytes of the whole object
 * {"run_id":…,"series":{"key":{…},…}} written compactly. Each series is read from the store a
 * range at a time (api_series_reader), so a client that stalls holds one range's points and text,
 * however long the run. An answer about an ended run of at most METRICS_WHOLE_MAX_POINTS points
 * (what the reply cache keeps; counted from the store's summaries) is made whole from the same
 * pieces and kept first instead. */
#define METRICS_WHOLE_MAX_POINTS 200000
typedef struct {
    const api_ctx *api;
    long long id;
    json_t *summary; /* the run's series (store_metrics_summary), in key order */
    void *at;        /* the next series to write (an iterator of summary) */
    char *keys;      /* the query's keys (NULL: every key) */
    api_series_reader *r;
    int since, max_points, stage, series_out; /* stage: 0 the head, 1 the series, 2 done */
    char *text;                               /* the piece being sent: text[sent..len) */
    size_t len, sent;
    kept_answer kept;
} metrics_answer;

/* The next piece into m->text: the head, a piece of a series, or the tail. -1 on failure. */
static int metrics_piece(metrics_answer *m) {
    free(m->text);
    m->text = NULL;
    m->len = m->sent = 0;
    if (m->stage == 0) {
        m->stage = 1;
        m->text = malloc(64);
        if (m->text) m->len = (size_t)snprintf(m->text, 64, "{\"run_id\":%lld,\"series\":{", m->id);
    }
    while (m->stage == 1 && !m->text) {
        if (!m->r) { /* the next series the keys ask for */
            while (m->at && !store_keys_match(json_object_iter_key(m->at), m->keys))
                m->at = json_object_iter_next(m->summary, m->at);
            if (!m->at) {
                m->stage = 2;
                m->text = strdup("}}");
                m->len = 2;
                break;
            }
            const json_t *v = json_object_iter_value(m->at);
            m->r = api_series_reader_open(m->api->svc->store, m->id, json_object_iter_key(m->at), m->since,
                                          json_integer_value(json_object_get(v, "count")),
                                          (int)json_integer_value(json_object_get(v, "last_step")), m->max_points);
            m->at = json_object_iter_next(m->summary, m->at);
            if (!m->r) return -1;
        }
        int got = api_series_reader_next(m->r, m->series_out ? "," : "", &m->text, &m->len);
        if (got < 0) {
            log_error("the metrics of run %lld could not be read: %s", m->id, store_last_error());
            return -1;
        }
        if (got > 0) {
            m->series_out = 1;
        } else {
            api_series_reader_close(m->r);
            m->r = NULL;
        }
    }
    if (!m->text) return -1;
    keep_piece(&m->kept, m->text, m->len);
    if (m->stage == 2) keep_done(m->api, &m->kept);
    return 0;
}

/* The points an answer of these series can hold at most (each series downsampled to max_points, 0:
 * all), from the summaries' counts. */
static size_t answer_points(const json_t *summary, const char *keys, int max_points) {
    size_t total = 0;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)summary, k, v) {
        if (!store_keys_match(k, keys)) continue;
        size_t count = (size_t)json_integer_value(json_object_get(v, "count"));
        total += max_points > 0 && count > (size_t)max_points ? (size_t)max_points : count;
    }
    return total;
}

static ssize_t metrics_next(void *ctx, char *buf, size_t max) {
    metrics_answer *m = ctx;
    if (m->sent == m->len) {
        if (m->stage == 2) return 0;
        if (metrics_piece(m) < 0) return -1;
    }
    size_t k = m->len - m->sent < max ? m->len - m->sent : max;
    memcpy(buf, m->text + m->sent, k);
    m->sent += k;
    return (ssize_t)k;
}

static void metrics_done(void *ctx) {
    metrics_answer *m = ctx;
    api_series_reader_close(m->r);
    json_decref(m->summary);
    free(m->keys);
    free(m->text);
    free(m->kept.text);
    free(m);
}

/* metrics.csv as the pipe's source (api_pipe.h): rows a piece at a time. */
#define CSV_PIECE_BYTES (64 * 1024)
typedef struct {
    const api_ctx *api;
    api_series_csv *rows;
    kept_answer kept;
} csv_answer;

static int csv_answer_next(void *ctx, char **text, size_t *len) {
    csv_answer *c = ctx;
    int got = api_series_csv_next(c->rows, CSV_PIECE_BYTES, text, len);
    if (got > 0) keep_piece(&c->kept, *text, *len);
    if (got == 0) keep_done(c->api, &c->kept);
    return got;
}

static void csv_answer_free(void *ctx) {
    csv_answer *c = ctx;
    api_series_csv_close(c->rows);
    free(c->kept.text);
    free(c);
}

void api_runs_metrics(http_request *req, const api_ctx *api) {
    long long id, since, max_points;
    char what[2100], key[2400];
    if (api_query_int(req, "since_step", 0, 100000000, 0, &since) < 0 || api_query_max_points(req, 0, &max_points) < 0)
        return;
    const char *keys = http_request_query(req, "keys");
    if (keys && strlen(keys) > 2000) {
        http_reply_error(req, 422, "invalid_field", "keys", "keys must be at most 2000 characters");
        return;
    }
    snprintf(what, sizeof what, "metrics|%lld|%lld|%s", since, max_points, keys ? keys : "\x01all");
    if (run_series_key(req, api, what, &id, key, sizeof key) < 0) return;
    if (reply_cached(req, api, key, "application/json")) return;
    json_t *summary;
    if (store_metrics_summary(api->svc->store, id, &summary) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    metrics_answer *m = calloc(1, sizeof *m);
    char *keys_copy = keys ? strdup(keys) : NULL;
    if (!m || (keys && !keys_copy)) {
        free(m);
        free(keys_copy);
        json_decref(summary);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    *m = (metrics_answer){.api = api,
                          .id = id,
                          .summary = summary,
                          .at = json_object_iter(summary),
                          .keys = keys_copy,
                          .since = (int)since,
                          .max_points = (int)max_points};
    snprintf(m->kept.key, sizeof m->kept.key, "%s", key);
    if (key[0] && answer_points(summary, keys, (int)max_points) <= METRICS_WHOLE_MAX_POINTS) {
        /* An answer the cache will keep is made whole at once and kept before it is sent, so that
         * clients asking together are answered from the cache instead of each writing it anew. */
        while (m->stage != 2 && metrics_piece(m) == 0) {}
        char *text = m->stage == 2 ? m->kept.text : NULL;
        size_t len = m->kept.len;
        if (text) m->kept.text = NULL;
        metrics_done(m);
        if (text)
            http_reply_take(req, 200, "application/json", text, len);
        else
            http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    http_reply_chunks(req, 200, "application/json", HTTP_SIZE_UNKNOWN, metrics_next, metrics_done, m);
}

void api_runs_summary(http_request *req, const api_ctx *api) {
    long long id;
    if (!run_exists(req, api, &id)) return;
    json_t *summary;
    if (store_metrics_summary(api->svc->store, id, &summary) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 200, json_pack("{s:I, s:o}", "run_id", (json_int_t)id, "summary", summary));
}

void api_runs_csv(http_request *req, const api_ctx *api) {
    long long id;
    char key[256], disp[80];
    if (run_series_key(req, api, "csv", &id, key, sizeof key) < 0) return;
    snprintf(disp, sizeof disp, "attachment; filename=\"run-%lld-metrics.csv\"", id);
    char *body;
    size_t blen;
    if (key[0] && reply_cache_get(api->replies, key, &body, &blen)) {
        http_reply_header(req, "Content-Disposition", disp);
        http_reply_take(req, 200, "text/csv; charset=utf-8", body, blen);
        return;
    }
    json_t *summary;
    if (store_metrics_summary(api->svc->store, id, &summary) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    csv_answer *c = calloc(1, sizeof *c);
    if (c) c->rows = api_series_csv_open(api->svc->store, id, summary);
    json_decref(summary);
    if (!c || !c->rows) {
        free(c);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    c->api = api;
    snprintf(c->kept.key, sizeof c->kept.key, "%s", key);
    api_pipe_source src = {.next = csv_answer_next, .free = csv_answer_free, .ctx = c};
    snprintf(src.what, sizeof src.what, "the metrics.csv of run %lld", id);
    http_reply_header(req, "Content-Disposition", disp);
    api_pipe_reply(req, "text/csv; charset=utf-8", &src);
}

static void no_checkpoint(http_request *req, long long id) {
    http_reply_error(req, 404, "not_found", NULL, "run %lld has no checkpoint yet", id);
}

static ssize_t weights_next(void *ctx, char *buf, size_t max) { return checkpoint_weights_read(ctx, buf, max); }
static void weights_done(void *ctx) { checkpoint_weights_close(ctx); }

/* GET /api/runs/{id}/weights: the model weights of the run's latest checkpoint (no optimiser
 * state); ?optimizer=1: the whole checkpoint, AdamW moments included, as the run resumes from it
 * (with a token, only to a request that carries it). */
void api_runs_weights(http_request *req, const api_ctx *api) {
    long long id, optimizer;
    if (!run_exists(req, api, &id)) return;
    if (api_query_int(req, "optimizer", 0, 1, 0, &optimizer) < 0) return;
    /* The whole training state is a privileged read: with a token it needs it, --private or not. */
    if (optimizer && !http_request_has_token(req)) {
        http_reply_unauthorized(req);
        return;
    }
    char path[PATH_MAX], disp[96], why[512];
    jobs_run_checkpoint(api->svc->jobs, id, path, sizeof path);
    /* what is served is what the run wrote: a file changed since is refused, not handed out */
    int sealed = checkpoint_check_sealed(api->svc->store, id, path, why, sizeof why);
    if (sealed > 0) {
        no_checkpoint(req, id);
        return;
    }
    if (sealed < 0) {
        log_error("run %lld: its weights are not served: %s", id, why);
        http_reply_error(req, 500, "checkpoint_mismatch", NULL, "the weights of run %lld are not served: %s", id, why);
        return;
    }
    if (optimizer) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            if (fd >= 0) close(fd);
            no_checkpoint(req, id);
            return;
        }
        snprintf(disp, sizeof disp, "attachment; filename=\"run-%lld-checkpoint.safetensors\"", id);
        http_reply_header(req, "Content-Disposition", disp);
        http_reply_fd(req, 200, "application/octet-stream", fd, (uint64_t)st.st_size);
        return;
    }
    /* read from the checkpoint as it is sent: no copy, a bounded buffer however slow the client */
    checkpoint_weights *w;
    uint64_t size;
    int rc = checkpoint_weights_open(path, &w, &size, why, sizeof why);
    if (rc > 0) {
        no_checkpoint(req, id);
        return;
    }
    if (rc < 0) {
        log_error("run %lld: the weights could not be served: %s", id, why);
        http_reply_error(req, 500, "internal", NULL, "the weights of run %lld could not be read: %s", id, why);
        return;
    }
    snprintf(disp, sizeof disp, "attachment; filename=\"run-%lld.safetensors\"", id);
    http_reply_header(req, "Content-Disposition", disp);
    http_reply_chunks(req, 200, "application/octet-stream", size, weights_next, weights_done, w);
}
