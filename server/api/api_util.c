/* Helpers shared by the handlers: validation (each answers the request itself on failure), and the
 * answers about one run that several handlers give (runs, external runs). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "services/svc_experiments.h"
#include "services/svc_run_view.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/json_text.h"

int api_path_id(http_request *req, long long *id) {
    const char *s = http_request_param(req, "id");
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    /* One spelling per id: "01" is not run 1 (an alias would escape per-path caches and checks). */
    if (!s || errno || *end || v <= 0 || s[0] == '+' || s[0] == ' ' || s[0] == '0') {
        http_reply_error(req, 404, "not_found", "id", "no such id: %s", s ? s : "");
        return -1;
    }
    *id = v;
    return 0;
}

int api_query_int(http_request *req, const char *name, long long lo, long long hi, long long def, long long *out) {
    const char *s = http_request_query(req, name);
    if (!s) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        http_reply_error(req, 422, "invalid_field", name, "%s must be an integer in %lld..%lld", name, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int api_query_max_points(http_request *req, long long def, long long *out) {
    if (api_query_int(req, "max_points", 0, 100000, def, out) < 0) return -1;
    if (*out == 1) {
        http_reply_error(req, 422, "invalid_field", "max_points", "max_points must be 0 (every point) or 2 to 100000");
        return -1;
    }
    return 0;
}

int api_query_enum(http_request *req, const char *name, const char *const *allowed, const char **out) {
    const char *s = http_request_query(req, name);
    *out = NULL;
    if (!s) return 0;
    for (int i = 0; allowed[i]; i++)
        if (!strcmp(s, allowed[i])) {
            *out = allowed[i];
            return 0;
        }
    char list[256] = "";
    for (int i = 0; allowed[i]; i++) {
        if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, allowed[i], sizeof list - strlen(list) - 1);
    }
    http_reply_error(req, 422, "invalid_field", name, "%s must be one of: %s", name, list);
    return -1;
}

int api_only_fields(http_request *req, const json_t *obj, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(key, allowed[i]);
        if (!ok) {
            http_reply_error(req, 422, "unknown_field", key, "%s is not a known field", key);
            return -1;
        }
    }
    return 0;
}

int api_opt_string(http_request *req, const json_t *obj, const char *field, size_t max_len, const char **out) {
    json_t *v = json_object_get(obj, field);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v) || json_string_length(v) > max_len ||
        memchr(json_string_value(v), 0, json_string_length(v))) {
        http_reply_error(req, 422, "invalid_field", field, "%s must be a string of at most %zu bytes", field, max_len);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

static int tag_ok(const char *t) {
    size_t n = strlen(t);
    if (n < 1 || n > 40) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("_.:-", c)))
            return 0;
    }
    return 1;
}

int api_opt_tags(http_request *req, const json_t *obj, const char *field, json_t **out) {
    json_t *v = json_object_get(obj, field);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    size_t i;
    json_t *t;
    if (!json_is_array(v) || json_array_size(v) > 32) goto bad;
    json_array_foreach(v, i, t) if (!json_is_string(t) || !tag_ok(json_string_value(t))) goto bad;
    *out = v;
    return 0;
bad:
    http_reply_error(req, 422, "invalid_field", field,
                     "%s must be an array of at most 32 tags of 1-40 characters (letters, digits, _ . : -)", field);
    return -1;
}

int api_idempotency(http_request *req, const api_ctx *api, const char *kind, const json_t *body, svc_idem *idem,
                    svc_idem **use) {
    *use = NULL;
    const char *key = http_request_header(req, "Idempotency-Key");
    if (!key) return 0;
    svc_error err;
    if (svc_idempotency_begin(api->svc, kind, key, body, idem, &err) != SVC_OK) {
        api_reply_svc_error(req, &err);
        return -1;
    }
    *use = idem;
    return 0;
}

void api_reply_replayed(http_request *req, const char *path, long long id) {
    char loc[96];
    snprintf(loc, sizeof loc, "%s/%lld", path, id);
    http_reply_header(req, "Location", loc);
    http_reply_header(req, "Idempotent-Replayed", "true");
}

void api_store_failed(http_request *req) {
    if (store_unavailable())
        http_reply_error(req, 503, "unavailable", NULL, "the database cannot be reached: %s", store_last_error());
    else
        http_reply_error(req, 500, "internal", NULL, "the database failed: %s", store_last_error());
}

void api_reply_svc_error(http_request *req, const svc_error *err) {
    int status = 500;
    switch (err->status) {
    case SVC_INVALID: status = 422; break;
    case SVC_NOT_FOUND: status = 404; break;
    case SVC_CONFLICT: status = 409; break;
    case SVC_BUSY: status = 429; break;
    case SVC_OK:
    case SVC_FAILED: status = err->code && !strcmp(err->code, "unavailable") ? 503 : 500; break;
    }
    if (status == 429) {
        char secs[16];
        snprintf(secs, sizeof secs, "%d", err->retry_after > 0 ? err->retry_after : 30);
        http_reply_header(req, "Retry-After", secs);
    }
    http_reply_error(req, status, err->code ? err->code : "internal", err->field[0] ? err->field : NULL, "%s",
                     err->message);
}

int api_load_by_id(http_request *req, const api_ctx *api, const char *what, api_get_fn get, long long *id,
                   json_t **out) {
    *out = NULL;
    if (api_path_id(req, id) < 0) return -1;
    store_status s = get(api->svc->store, *id, out);
    if (s == STORE_NOT_FOUND) {
        http_reply_error(req, 404, "not_found", "id", "no %s %lld", what, *id);
        return -1;
    }
    if (s != STORE_OK) {
        api_store_failed(req);
        return -1;
    }
    return 0;
}

void api_reply_by_id(http_request *req, const api_ctx *api, const char *what, api_get_fn get) {
    long long id;
    json_t *obj;
    if (api_load_by_id(req, api, what, get, &id, &obj) == 0) http_reply_json(req, 200, json_pack("{s:o}", what, obj));
}

int api_query_page(http_request *req, long long *limit, long long *offset) {
    if (api_query_int(req, "limit", 1, 500, 50, limit) < 0) return -1;
    return api_query_int(req, "offset", 0, 1000000000, 0, offset);
}

int api_query_search(http_request *req, const char **out) {
    *out = http_request_query(req, "q");
    if (!*out || store_search_ok(*out)) return 0;
    http_reply_error(req, 422, "invalid_field", "q",
                     "q must be 1 to %d words of letters and digits, each at most %d bytes (words begin the words of "
                     "names, tags and notes)",
                     STORE_SEARCH_MAX_WORDS, STORE_SEARCH_MAX_WORD);
    return -1;
}

void api_reply_list(http_request *req, store_status s, const char *member, json_t *list, long long total) {
    if (s != STORE_OK) {
        json_decref(list);
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 200, json_pack("{s:o, s:I}", member, list, "total", (json_int_t)total));
}

int api_experiment_key(const api_ctx *api, long long id, const char *what, char *key, size_t cap) {
    key[0] = 0;
    json_t *runs = NULL;
    long long total = 0;
    store_run_filter f = {.experiment_id = id, .sort = "id", .limit = 16 * SVC_EXPERIMENTS_MAX_REPLICATES};
    if (store_run_list(api->svc->store, &f, &runs, &total) != STORE_OK) return -1;
    hash_sha256 h;
    hash_sha256_init(&h);
    int ended = total == (long long)json_array_size(runs);
    size_t i;
    const json_t *r;
    json_array_foreach(runs, i, r) {
        const char *status = json_string_value(json_object_get(r, "status"));
        /* interrupted is not an end: a resume continues the run */
        if (!status || (strcmp(status, "succeeded") && strcmp(status, "failed") && strcmp(status, "cancelled")))
            ended = 0;
        char line[256];
        int n = snprintf(
            line, sizeof line, "%lld|%s|%lld|%.17g|%.17g\n", (long long)json_integer_value(json_object_get(r, "id")),
            status ? status : "", (long long)json_integer_value(json_object_get(r, "step")),
            json_number_value(json_object_get(r, "created_at")), json_number_value(json_object_get(r, "finished_at")));
        hash_sha256_update(&h, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : 0);
    }
    json_decref(runs);
    char hex[65];
    hash_sha256_hex(&h, hex);
    int n = snprintf(key, cap, "experiment|%lld|%s|%s", id, hex, what);
    if (!ended || n < 0 || (size_t)n >= cap) key[0] = 0;
    return 0;
}

int api_reply_cached(http_request *req, const api_ctx *api, const char *key, const char *content_type) {
    char *body;
    size_t len;
    if (!key[0] || !reply_cache_get(api->replies, key, &body, &len)) return 0;
    http_reply_take(req, 200, content_type, body, len);
    return 1;
}

void api_reply_keeping(http_request *req, const api_ctx *api, const char *key, const char *content_type, char *body,
                       size_t len) {
    if (!body) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    if (key[0]) reply_cache_put(api->replies, key, body, len);
    http_reply_take(req, 200, content_type, body, len);
}

void api_reply_json_keeping(http_request *req, const api_ctx *api, const char *key, json_t *body) {
    char *text = body ? json_text_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(body);
    api_reply_keeping(req, api, key, "application/json", text, text ? strlen(text) : 0);
}

/* ---- the answers about a run ---- */

void api_runs_reply(http_request *req, const api_ctx *api, long long id, int status) {
    json_t *row = NULL;
    if (store_run_get(api->svc->store, id, &row) != STORE_OK) {
        api_store_failed(req);
        return;
    }
    http_reply_json(req, status, json_pack("{s:o}", "run", svc_run_view(api->svc, row)));
}

void api_runs_created(http_request *req, const api_ctx *api, long long id, const svc_idem *idem) {
    if (idem && idem->replay) { /* another request with the key committed first */
        api_reply_replayed(req, "/api/runs", id);
    } else {
        char loc[64];
        snprintf(loc, sizeof loc, "/api/runs/%lld", id);
        http_reply_header(req, "Location", loc);
    }
    api_runs_reply(req, api, id, 201);
}
