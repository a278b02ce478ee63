/* The request context handlers see (contract: http.h): its path, parameters, query, headers and
 * body, and the replies. A request belongs to one connection; its strings live as long as it. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http/http_impl.h"
#include "http/http_text.h"
#include "util/log.h"
#include "util/json_text.h"

http_request *http_request_new(http_server *s, struct MHD_Connection *connection) {
    http_request *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    /* Set before any early reply: http_request_free closes upload_fd when it is >= 0. */
    req->upload_fd = -1;
    req->fd = -1;
    clock_gettime(CLOCK_MONOTONIC, &req->started);
    req->server = s;
    req->connection = connection;
    req->conn = http_admission_conn_of(connection);
    return req;
}

int http_request_cancelled(const http_request *req) { return atomic_load(&req->cancelled); }
const atomic_int *http_request_cancel_flag(const http_request *req) { return &req->cancelled; }

void http_request_free(http_request *req) {
    if (req->pending) MHD_destroy_response(req->pending);
    for (int i = 0; i < req->n_params; i++) {
        free(req->param_names[i]);
        free(req->param_values[i]);
    }
    for (int i = 0; i < req->n_reply_headers; i++) {
        free(req->reply_headers[i][0]);
        free(req->reply_headers[i][1]);
    }
    if (req->upload_fd >= 0) close(req->upload_fd);
    if (req->upload_path) {
        unlink(req->upload_path); /* gone already if the handler moved it */
        free(req->upload_path);
    }
    for (int i = 0; i < req->n_scratch; i++) free(req->scratch[i]);
    free(req->scratch);
    free(req->body);
    free(req->path);
    free(req);
}

const char *http_request_upload_path(const http_request *req, size_t *size) {
    if (size) *size = req->body_len;
    return req->upload_path;
}
const char *http_request_path(const http_request *req) { return req->path; }

const char *http_request_param(const http_request *req, const char *name) {
    for (int i = 0; i < req->n_params; i++)
        if (!strcmp(req->param_names[i], name)) return req->param_values[i];
    return NULL;
}

static const char *keep_scratch(http_request *req, char *s) {
    char **grown = realloc(req->scratch, (size_t)(req->n_scratch + 1) * sizeof *grown);
    if (!grown) {
        free(s);
        return NULL;
    }
    req->scratch = grown;
    req->scratch[req->n_scratch++] = s;
    return s;
}

/* The server installs an identity unescaper, so query keys and values arrive raw and are decoded
 * here, where a malformed escape or NUL byte can be refused instead of silently truncated. Keys are
 * decoded too: "max%5Fpoints" is max_points. */
static char *decoded(const char *raw) {
    size_t len = strlen(raw);
    char *out = malloc(len + 1);
    if (out && http_url_decode(raw, len, out, 1) < 0) {
        free(out);
        return NULL;
    }
    return out;
}

typedef struct {
    http_request *req;
    int (*fn)(const char *, const char *, void *);
    void *ctx;
    int stop;
    const char *want; /* http_request_query: the key looked for */
    const char *found;
} query_walk;

static enum MHD_Result query_visit(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    query_walk *w = cls;
    char *k = decoded(key ? key : "");
    if (!k) return MHD_YES; /* a key that does not decode names nothing */
    if (!keep_scratch(w->req, k)) return MHD_NO;
    if (w->want && strcmp(k, w->want) != 0) return MHD_YES;
    char *v = decoded(value ? value : "");
    if (w->want) { /* a value that does not decode is absent */
        w->found = v ? keep_scratch(w->req, v) : NULL;
        w->stop = 1;
        return MHD_NO;
    }
    if (!v && !(v = http_strdup(""))) return MHD_NO;
    if (!keep_scratch(w->req, v)) return MHD_NO;
    w->stop = w->fn(k, v, w->ctx);
    return w->stop ? MHD_NO : MHD_YES;
}

const char *http_request_query(http_request *req, const char *name) {
    query_walk w = {.req = req, .want = name};
    MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, query_visit, &w);
    return w.found;
}

int http_request_each_query(http_request *req, int (*fn)(const char *, const char *, void *), void *ctx) {
    query_walk w = {.req = req, .fn = fn, .ctx = ctx};
    MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, query_visit, &w);
    return w.stop;
}

const char *http_request_header(const http_request *req, const char *name) {
    return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

json_t *http_request_json_object(http_request *req) {
    json_error_t jerr;
    if (req->body_len == 0) {
        http_reply_error(req, 400, "bad_json", NULL, "request body must be a JSON object");
        return NULL;
    }
    json_t *v = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        http_reply_error(req, 400, "bad_json", NULL, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                         jerr.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        http_reply_error(req, 400, "bad_json", NULL, "request body must be a JSON object");
        return NULL;
    }
    return v;
}

void http_reply_header(http_request *req, const char *name, const char *value) {
    if (req->n_reply_headers == HTTP_MAX_REPLY_HEADERS) return;
    char *n = http_strdup(name), *v = http_strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return;
    }
    req->reply_headers[req->n_reply_headers][0] = n;
    req->reply_headers[req->n_reply_headers][1] = v;
    req->n_reply_headers++;
}

void http_reply_queue(http_request *req, int status, struct MHD_Response *resp, const char *content_type) {
    if (req->replied) {
        log_error("handler for %s %s answered twice", req->method, req->path);
        if (resp) MHD_destroy_response(resp);
        return;
    }
    req->replied = 1;
    /* A change is counted as soon as it is answered, before its client can see the answer and ask
     * again: an answer kept until the count moves (the runs list) is then never given after it. */
    if (req->method && strcmp(req->method, "GET") && strcmp(req->method, "HEAD"))
        atomic_fetch_add(&req->server->changes, 1);
    if (!resp) {
        status = 500;
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp) return;
    }
    if (content_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    for (int i = 0; i < req->n_reply_headers; i++)
        MHD_add_response_header(resp, req->reply_headers[i][0], req->reply_headers[i][1]);
    req->status = status;
    if (req->deferred) { /* a compute worker: handed to the HTTP thread that resumes the connection */
        req->pending = resp;
        req->pending_status = status;
        return;
    }
    if (MHD_queue_response(req->connection, (unsigned)status, resp) != MHD_YES)
        log_warn("could not queue the reply to %s %s", req->method, req->path);
    MHD_destroy_response(resp);
}

void http_reply_bytes(http_request *req, int status, const char *content_type, const void *body, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    http_reply_queue(req, status, resp, content_type);
}

void http_reply_fd(http_request *req, int status, const char *content_type, int fd, uint64_t size) {
    struct MHD_Response *resp = MHD_create_response_from_fd(size, fd);
    if (!resp) close(fd);
    http_reply_queue(req, status, resp, content_type);
}

void http_reply_take(http_request *req, int status, const char *content_type, char *body, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) free(body);
    http_reply_queue(req, status, resp, content_type);
}

void http_reply_json(http_request *req, int status, json_t *body) {
    char *text = body ? json_text_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(body);
    if (!text) {
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"the reply could not be built\"}}";
        http_reply_bytes(req, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) free(text);
    http_reply_queue(req, status, resp, "application/json");
}

void http_reply_error(http_request *req, int status, const char *code, const char *field, const char *fmt, ...) {
    char raw[512], message[2048], clean_field[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* Messages echo request bytes (paths, names), which need not be UTF-8: JSON strings must be. */
    http_utf8_clean(raw, message, sizeof message);
    json_t *err = json_pack("{s:s, s:s}", "code", code, "message", message);
    if (err && field)
        json_object_set_new(err, "field", json_string(http_utf8_clean(field, clean_field, sizeof clean_field)));
    http_reply_json(req, status, err ? json_pack("{s:o}", "error", err) : NULL);
}

void http_reply_and_close(http_request *req, int status, const char *code, const char *message) {
    http_reply_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
    http_reply_error(req, status, code, NULL, "%s", message);
}

typedef struct {
    http_chunks_next_fn next;
    void (*done)(void *);
    void *ctx;
} chunks;

static ssize_t chunks_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    chunks *c = cls;
    ssize_t n = c->next(c->ctx, buf, max);
    return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void chunks_free(void *cls) {
    chunks *c = cls;
    c->done(c->ctx);
    free(c);
}

void http_reply_chunks(http_request *req, int status, const char *content_type, uint64_t size, http_chunks_next_fn next,
                       void (*done)(void *ctx), void *ctx) {
    chunks *c = malloc(sizeof *c);
    struct MHD_Response *resp =
        c ? MHD_create_response_from_callback(size == HTTP_SIZE_UNKNOWN ? MHD_SIZE_UNKNOWN : size, 64 * 1024,
                                              chunks_reader, c, chunks_free)
          : NULL;
    if (!resp) {
        free(c);
        done(ctx);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    *c = (chunks){next, done, ctx};
    http_reply_queue(req, status, resp, content_type);
}
