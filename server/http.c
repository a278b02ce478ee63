#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define MAX_ROUTES 128
#define MAX_SEGMENTS 16
#define MAX_PARAMS 4
#define MAX_REPLY_HEADERS 8

typedef struct {
    char method[8];
    char *pattern;
    char *segment_store; /* a copy of pattern cut into segments */
    int n_segments;
    char *segments[MAX_SEGMENTS]; /* point into a copy of pattern; "{x}" marks a parameter */
    http_handler_fn fn;
    size_t upload_max; /* > 0: the body streams to a file */
} route;

struct http_stream {
    pthread_mutex_t lock;
    struct MHD_Connection *connection;
    http_server *server;
    http_stream_read_fn read;
    http_stream_close_fn close;
    void *ctx;
    int suspended;    /* the connection sleeps until a wake */
    int pending_wake; /* a wake arrived while the reader was running */
    http_stream *next, *prev; /* the server's list of live streams */
};

struct http_server {
    http_config cfg;
    char *bind_addr, *static_dir, *static_real, *upload_dir, *token;
    route routes[MAX_ROUTES];
    int n_routes;
    struct MHD_Daemon *daemon;
    int listen_fd;
    int port;
    atomic_uint_fast64_t status_counts[600];
    pthread_mutex_t streams_lock;
    http_stream *streams;
    atomic_int stopping;
};

struct http_request {
    http_server *server;
    struct MHD_Connection *connection;
    const char *method;
    char *path;
    const route *route;
    char *param_names[MAX_PARAMS];
    char *param_values[MAX_PARAMS];
    int n_params;
    char *body;
    size_t body_len, body_cap;
    int body_too_large;
    int replied;
    int status;
    struct timespec started;
    int upload_fd;
    char *upload_path;
    char *reply_headers[MAX_REPLY_HEADERS][2];
    int n_reply_headers;
    char **scratch; /* decoded query values, freed with the request */
    int n_scratch;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long http_url_decode(const char *src, size_t len, char *dst, int plus_is_space) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= len) return -1;
            int hi = hex_value(src[i + 1]), lo = hex_value(src[i + 2]);
            if (hi < 0 || lo < 0) return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == 0) return -1;
        dst[o++] = c;
    }
    dst[o] = 0;
    return (long)o;
}

static double elapsed_ms(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* ---- routes ----------------------------------------------------------------------------- */

http_server *http_server_new(const http_config *cfg) {
    http_server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    s->listen_fd = -1;
    s->bind_addr = dup_str(cfg->bind_addr ? cfg->bind_addr : "127.0.0.1");
    s->static_dir = cfg->static_dir ? dup_str(cfg->static_dir) : NULL;
    s->upload_dir = cfg->upload_dir ? dup_str(cfg->upload_dir) : NULL;
    s->token = cfg->token && cfg->token[0] ? dup_str(cfg->token) : NULL;
    /* Fail closed: a token that could not be copied must not leave the server open. */
    if (!s->bind_addr || (cfg->static_dir && !s->static_dir) || (cfg->upload_dir && !s->upload_dir) ||
        (cfg->token && cfg->token[0] && !s->token)) {
        free(s->bind_addr);
        free(s->static_dir);
        free(s->upload_dir);
        free(s->token);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->streams_lock, NULL);
    return s;
}

int http_route(http_server *s, const char *method, const char *pattern, http_handler_fn fn) {
    if (s->n_routes == MAX_ROUTES || strlen(method) >= sizeof s->routes[0].method) return -1;
    route *r = &s->routes[s->n_routes];
    r->pattern = dup_str(pattern);
    char *copy = dup_str(pattern);
    if (!r->pattern || !copy) {
        free(r->pattern);
        free(copy);
        return -1;
    }
    /* Segments are kept as pointers into `copy`, which lives as long as the server. */
    int n = 0;
    char *save = NULL;
    if (copy[0] != '/') { free(r->pattern); free(copy); return -1; }
    for (char *tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (n == MAX_SEGMENTS) { free(r->pattern); free(copy); return -1; }
        r->segments[n++] = tok;
    }
    r->segment_store = copy;
    r->n_segments = n;
    strcpy(r->method, method);
    r->fn = fn;
    s->n_routes++;
    return 0;
}

int http_route_upload(http_server *s, const char *method, const char *pattern, http_handler_fn fn, size_t max_bytes) {
    if (http_route(s, method, pattern, fn) < 0) return -1;
    s->routes[s->n_routes - 1].upload_max = max_bytes;
    return 0;
}

void http_server_each_route(const http_server *s, void (*fn)(const char *, const char *, void *), void *ctx) {
    for (int i = 0; i < s->n_routes; i++) fn(s->routes[i].method, s->routes[i].pattern, ctx);
}

/* A path is canonical when it is "/" or a run of '/'-prefixed segments, each non-empty (no "//",
 * no trailing '/') and at most NAME_MAX bytes, whose percent-decoding is valid, holds no '/', '\\'
 * or NUL, and is neither "." nor "..". Only canonical paths reach authorisation, routing and static
 * files, so all three see the same path (an alias such as "//api/runs" or "/metrics/" cannot be
 * routed one way and authorised another). Returns 1 when canonical. */
int http_path_canonical(const char *raw) {
    if (!raw || raw[0] != '/') return 0;
    if (raw[1] == 0) return 1;
    const char *p = raw + 1;
    for (;;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char seg[NAME_MAX + 1];
        if (len == 0 || len > NAME_MAX) return 0;
        long dl = http_url_decode(p, len, seg, 0);
        if (dl <= 0 || strchr(seg, '/') || strchr(seg, '\\') || !strcmp(seg, ".") || !strcmp(seg, "..")) return 0;
        if (!end) return 1;
        p = end + 1;
    }
}

/* Matches the raw path against a route; on success fills the request's decoded parameters.
 * Returns 1 on match, 0 on no match, -1 when a parameter does not decode. */
static int route_match(const route *r, const char *path, http_request *req) {
    char buf[2048];
    size_t len = strlen(path);
    if (len >= sizeof buf) return 0;
    memcpy(buf, path, len + 1);
    char *segs[MAX_SEGMENTS + 1];
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (n == MAX_SEGMENTS) return 0;
        segs[n++] = tok;
    }
    if (n != r->n_segments) return 0;
    int n_params = 0;
    for (int i = 0; i < n; i++) {
        const char *pat = r->segments[i];
        if (pat[0] == '{') {
            if (n_params == MAX_PARAMS) return 0;
            n_params++;
        } else if (strcmp(pat, segs[i]) != 0) {
            return 0;
        }
    }
    if (!req) return 1;
    for (int i = 0; i < n; i++) {
        const char *pat = r->segments[i];
        if (pat[0] != '{') continue;
        size_t sl = strlen(segs[i]);
        char *value = malloc(sl + 1);
        char *name = malloc(strlen(pat));
        if (!value || !name) { free(value); free(name); return -1; }
        if (http_url_decode(segs[i], sl, value, 0) < 0 || strchr(value, '/')) { free(value); free(name); return -1; }
        memcpy(name, pat + 1, strlen(pat) - 2);
        name[strlen(pat) - 2] = 0;
        req->param_names[req->n_params] = name;
        req->param_values[req->n_params] = value;
        req->n_params++;
    }
    return 1;
}

/* ---- request accessors ------------------------------------------------------------------ */

const char *http_request_method(const http_request *req) { return req->method; }

const char *http_request_upload_path(const http_request *req, size_t *size) {
    if (size) *size = req->body_len;
    return req->upload_path;
}
const char *http_request_path(const http_request *req) { return req->path; }
void *http_request_app(const http_request *req) { return req->server->cfg.app; }

const char *http_request_param(const http_request *req, const char *name) {
    for (int i = 0; i < req->n_params; i++)
        if (!strcmp(req->param_names[i], name)) return req->param_values[i];
    return NULL;
}

static const char *keep_scratch(http_request *req, char *s) {
    char **grown = realloc(req->scratch, (size_t)(req->n_scratch + 1) * sizeof *grown);
    if (!grown) { free(s); return NULL; }
    req->scratch = grown;
    req->scratch[req->n_scratch++] = s;
    return s;
}

/* The server installs an identity unescaper, so query values arrive raw and are decoded here,
 * where a malformed escape or NUL byte can be refused instead of silently truncated. */
const char *http_request_query(http_request *req, const char *name) {
    const char *raw = MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, name);
    if (!raw) return NULL;
    size_t len = strlen(raw);
    char *out = malloc(len + 1);
    if (!out) return NULL;
    if (http_url_decode(raw, len, out, 1) < 0) { free(out); return NULL; }
    return keep_scratch(req, out);
}

typedef struct {
    http_request *req;
    int (*fn)(const char *, const char *, void *);
    void *ctx;
    int stop;
} query_walk;

static enum MHD_Result query_visit(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    query_walk *w = cls;
    const char *raw = value ? value : "";
    size_t len = strlen(raw);
    char *out = malloc(len + 1);
    if (!out) return MHD_NO;
    if (http_url_decode(raw, len, out, 1) < 0) { free(out); out = dup_str(""); if (!out) return MHD_NO; }
    const char *v = keep_scratch(w->req, out);
    if (!v) return MHD_NO;
    w->stop = w->fn(key, v, w->ctx);
    return w->stop ? MHD_NO : MHD_YES;
}

int http_request_each_query(http_request *req, int (*fn)(const char *, const char *, void *), void *ctx) {
    query_walk w = {req, fn, ctx, 0};
    MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, query_visit, &w);
    return w.stop;
}

const char *http_request_header(const http_request *req, const char *name) {
    return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

const char *http_request_body(const http_request *req, size_t *len) {
    if (len) *len = req->body_len;
    return req->body ? req->body : "";
}

json_t *http_request_json_object(http_request *req) {
    json_error_t jerr;
    if (req->body_len == 0) {
        http_reply_error(req, 400, "bad_json", NULL, "request body must be a JSON object");
        return NULL;
    }
    json_t *v = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        http_reply_error(req, 400, "bad_json", NULL, "invalid JSON at line %d column %d: %s", jerr.line,
                         jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        http_reply_error(req, 400, "bad_json", NULL, "request body must be a JSON object");
        return NULL;
    }
    return v;
}

/* ---- replies ---------------------------------------------------------------------------- */

void http_reply_header(http_request *req, const char *name, const char *value) {
    if (req->n_reply_headers == MAX_REPLY_HEADERS) return;
    char *n = dup_str(name), *v = dup_str(value);
    if (!n || !v) { free(n); free(v); return; }
    req->reply_headers[req->n_reply_headers][0] = n;
    req->reply_headers[req->n_reply_headers][1] = v;
    req->n_reply_headers++;
}

static void queue(http_request *req, int status, struct MHD_Response *resp, const char *content_type) {
    if (req->replied) {
        log_error("handler for %s %s answered twice", req->method, req->path);
        if (resp) MHD_destroy_response(resp);
        return;
    }
    req->replied = 1;
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
    if (MHD_queue_response(req->connection, (unsigned)status, resp) != MHD_YES)
        log_warn("could not queue the reply to %s %s", req->method, req->path);
    MHD_destroy_response(resp);
}

void http_reply_bytes(http_request *req, int status, const char *content_type, const void *body, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    queue(req, status, resp, content_type);
}

void http_reply_fd(http_request *req, int status, const char *content_type, int fd, uint64_t size) {
    struct MHD_Response *resp = MHD_create_response_from_fd(size, fd);
    if (!resp) close(fd);
    queue(req, status, resp, content_type);
}

void http_reply_json(http_request *req, int status, json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(body);
    if (!text) {
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        http_reply_bytes(req, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) free(text);
    queue(req, status, resp, "application/json");
}

void http_reply_error(http_request *req, int status, const char *code, const char *field, const char *fmt, ...) {
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    json_t *err = json_pack("{s:s, s:s}", "code", code, "message", message);
    if (err && field) json_object_set_new(err, "field", json_string(field));
    http_reply_json(req, status, err ? json_pack("{s:o}", "error", err) : NULL);
}

/* ---- streams ---------------------------------------------------------------------------- */

/* The reader runs without the stream lock (read() takes its producer's locks, and producers call
 * http_stream_wake() under those same locks); only the suspend decision is made under it. A wake
 * that lands between read() returning 0 and that decision is remembered in pending_wake. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    http_stream *st = cls;
    if (atomic_load(&st->server->stopping)) return MHD_CONTENT_READER_END_OF_STREAM;
    ssize_t n = st->read(st->ctx, buf, max);
    if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
    if (n == 0) {
        pthread_mutex_lock(&st->lock);
        if (st->pending_wake) {
            st->pending_wake = 0;
        } else {
            st->suspended = 1;
            MHD_suspend_connection(st->connection);
        }
        pthread_mutex_unlock(&st->lock);
    }
    return n;
}

static void stream_free(void *cls) {
    http_stream *st = cls;
    http_server *s = st->server;
    pthread_mutex_lock(&s->streams_lock);
    if (st->prev) st->prev->next = st->next; else s->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    pthread_mutex_unlock(&s->streams_lock);
    /* close() must guarantee no further http_stream_wake() on st once it returns. */
    st->close(st->ctx);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

http_stream *http_reply_stream(http_request *req, const char *content_type, http_stream_read_fn read,
                               http_stream_close_fn close, void *ctx) {
    http_stream *st = calloc(1, sizeof *st);
    if (!st) {
        close(ctx);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&st->lock, NULL);
    st->connection = req->connection;
    st->server = req->server;
    st->read = read;
    st->close = close;
    st->ctx = ctx;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, st,
                                                                  stream_free);
    if (!resp) {
        pthread_mutex_destroy(&st->lock);
        free(st);
        close(ctx);
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&req->server->streams_lock);
    st->next = req->server->streams;
    if (st->next) st->next->prev = st;
    req->server->streams = st;
    pthread_mutex_unlock(&req->server->streams_lock);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    queue(req, 200, resp, content_type);
    return st;
}

void http_stream_wake(http_stream *st) {
    pthread_mutex_lock(&st->lock);
    if (st->suspended) {
        st->suspended = 0;
        MHD_resume_connection(st->connection);
    } else {
        st->pending_wake = 1;
    }
    pthread_mutex_unlock(&st->lock);
}

/* ---- static files ----------------------------------------------------------------------- */

static const char *content_type_for(const char *path) {
    static const struct { const char *ext, *type; } types[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
        {".json", "application/json"}, {".svg", "image/svg+xml"}, {".png", "image/png"},
        {".ico", "image/x-icon"}, {".txt", "text/plain; charset=utf-8"}, {".map", "application/json"},
        {".woff2", "font/woff2"}, {".csv", "text/csv; charset=utf-8"}, {".md", "text/markdown; charset=utf-8"},
    };
    const char *dot = strrchr(path, '.');
    if (dot)
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (!strcasecmp(dot, types[i].ext)) return types[i].type;
    return "application/octet-stream";
}

/* Resolves a raw request path to a file inside the static tree, or returns -1. Every segment is
 * decoded on its own and refused if it is empty, "." or "..", or decodes to a '/', '\\' or NUL;
 * the final path is then resolved with realpath() and must still lie inside the tree, so a
 * symlink that points out is refused too. */
static int static_resolve(http_server *s, const char *raw, char *out, size_t outlen) {
    if (!s->static_real || raw[0] != '/') return -1;
    char rel[PATH_MAX];
    size_t o = 0;
    const char *p = raw + 1;
    if (*p == 0) p = "index.html";
    while (*p) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char seg[NAME_MAX + 1];
        if (len == 0 || len > NAME_MAX) return -1;
        long dl = http_url_decode(p, len, seg, 0);
        if (dl <= 0 || strchr(seg, '/') || strchr(seg, '\\') || !strcmp(seg, ".") || !strcmp(seg, ".."))
            return -1;
        if (o + (size_t)dl + 2 >= sizeof rel) return -1;
        if (o) rel[o++] = '/';
        memcpy(rel + o, seg, (size_t)dl);
        o += (size_t)dl;
        if (!end) break;
        p = end + 1;
    }
    rel[o] = 0;
    char joined[PATH_MAX];
    if (snprintf(joined, sizeof joined, "%s/%s", s->static_real, rel) >= (int)sizeof joined) return -1;
    if (!realpath(joined, out)) return -1;
    size_t root_len = strlen(s->static_real);
    if (strncmp(out, s->static_real, root_len) != 0 || out[root_len] != '/') return -1;
    (void)outlen;
    return 0;
}

static void serve_static(http_request *req) {
    char path[PATH_MAX];
    if (static_resolve(req->server, req->path, path, sizeof path) < 0) {
        http_reply_error(req, 404, "not_found", NULL, "no such file");
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        http_reply_error(req, 404, "not_found", NULL, "no such file");
        return;
    }
    char etag[64];
    snprintf(etag, sizeof etag, "\"%llx-%llx\"", (unsigned long long)st.st_mtime, (unsigned long long)st.st_size);
    const char *inm = http_request_header(req, MHD_HTTP_HEADER_IF_NONE_MATCH);
    /* Vendored libraries change only with the lock file; the app's own files revalidate each load. */
    const char *cache = strstr(req->path, "/vendor/") ? "public, max-age=86400" : "no-cache";
    http_reply_header(req, MHD_HTTP_HEADER_ETAG, etag);
    http_reply_header(req, MHD_HTTP_HEADER_CACHE_CONTROL, cache);
    if (inm && !strcmp(inm, etag)) {
        close(fd);
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        queue(req, 304, resp, NULL);
        return;
    }
    http_reply_fd(req, 200, content_type_for(path), fd, (uint64_t)st.st_size);
}

/* ---- libmicrohttpd callbacks ------------------------------------------------------------ */

/* Leaves URLs as sent: the router decodes each piece itself (see static_resolve, route_match). */
static size_t identity_unescape(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    return strlen(s);
}

/* Compares in time that depends only on the lengths, not on where the strings differ. */
static int equal_constant_time(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++) diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return diff == 0;
}

/* With a token, changes always need it and reads need it under private_reads; /api/health stays
 * open for health checks, and the dashboard's own files for the login prompt. */
static int authorised(http_request *req) {
    http_server *s = req->server;
    if (!s->token) return 1;
    int is_read = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    /* Fail closed: anything a route answers is private, whatever its path looks like; only
     * unrouted paths outside /api and /metrics (static files) and /api/health are public. */
    int is_api = req->route != NULL || !strncmp(req->path, "/api/", 5) || !strcmp(req->path, "/api") ||
                 !strncmp(req->path, "/metrics", 8);
    if (is_read && (!s->cfg.private_reads || !is_api || !strcmp(req->path, "/api/health"))) return 1;
    const char *h = http_request_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
    return h && !strncmp(h, "Bearer ", 7) && equal_constant_time(h + 7, s->token);
}

static void dispatch(http_request *req) {
    http_server *s = req->server;
    const char *method = !strcmp(req->method, "HEAD") ? "GET" : req->method;
    if (!authorised(req)) {
        http_reply_header(req, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"attnlab\"");
        http_reply_error(req, 401, "unauthorized", NULL, "this request needs Authorization: Bearer <token>");
        return;
    }
    if (req->route) {
        req->route->fn(req, s->cfg.app);
        if (!req->replied) http_reply_error(req, 500, "internal", NULL, "the handler gave no answer");
        return;
    }
    /* Allowed methods for this path, if any route has its shape. */
    char allow[64] = "";
    for (int i = 0; i < s->n_routes; i++) {
        if (route_match(&s->routes[i], req->path, NULL) == 1 && !strstr(allow, s->routes[i].method)) {
            if (allow[0]) strncat(allow, ", ", sizeof allow - strlen(allow) - 1);
            strncat(allow, s->routes[i].method, sizeof allow - strlen(allow) - 1);
        }
    }
    if (allow[0]) {
        http_reply_header(req, MHD_HTTP_HEADER_ALLOW, allow);
        http_reply_error(req, 405, "method_not_allowed", NULL, "%s is not allowed here (allowed: %s)", req->method,
                         allow);
        return;
    }
    int is_api = !strncmp(req->path, "/api/", 5) || !strcmp(req->path, "/api");
    if (is_api) {
        http_reply_error(req, 404, "not_found", NULL, "no such route: %s", req->path);
    } else if (strcmp(method, "GET") != 0) {
        http_reply_header(req, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        http_reply_error(req, 405, "method_not_allowed", NULL, "%s is not allowed here (allowed: GET, HEAD)",
                         req->method);
    } else {
        serve_static(req);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    http_server *s = cls;
    http_request *req = *con_cls;
    if (!req) {
        req = calloc(1, sizeof *req);
        if (!req) return MHD_NO;
        /* Set before any early reply: on_completed closes upload_fd when it is >= 0. */
        req->upload_fd = -1;
        clock_gettime(CLOCK_MONOTONIC, &req->started);
        req->server = s;
        req->connection = connection;
        req->method = method;
        req->path = dup_str(url);
        *con_cls = req;
        if (!req->path) return MHD_NO;
        if (!http_path_canonical(req->path)) {
            http_reply_error(req, 404, "not_found", NULL, "no such path (paths must be canonical: no empty, '.' "
                                                          "or '..' segments, no encoded '/', '\\' or NUL)");
            return MHD_YES;
        }
        const char *m = !strcmp(method, "HEAD") ? "GET" : method;
        for (int i = 0; i < s->n_routes; i++) {
            if (strcmp(s->routes[i].method, m) != 0) continue;
            int r = route_match(&s->routes[i], req->path, req);
            if (r == 1) { req->route = &s->routes[i]; break; }
            if (r < 0) {
                http_reply_error(req, 404, "not_found", NULL, "malformed path");
                return MHD_YES;
            }
        }
        size_t limit = req->route && req->route->upload_max ? req->route->upload_max : s->cfg.max_body;
        const char *cl = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > limit) {
            http_reply_error(req, 413, "body_too_large", NULL, "request body exceeds %zu bytes", limit);
            return MHD_YES;
        }
        if (req->route && req->route->upload_max && authorised(req)) {
            char tmpl[PATH_MAX];
            snprintf(tmpl, sizeof tmpl, "%s/upload-XXXXXX", s->upload_dir ? s->upload_dir : "/tmp");
            req->upload_fd = mkstemp(tmpl);
            if (req->upload_fd < 0 || !(req->upload_path = dup_str(tmpl))) {
                http_reply_error(req, 500, "internal", NULL, "cannot store the upload");
                return MHD_YES;
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size && req->upload_fd >= 0) {
        if (!req->body_too_large) {
            if (req->body_len + *upload_data_size > req->route->upload_max) {
                req->body_too_large = 1;
            } else {
                size_t off = 0;
                while (off < *upload_data_size) {
                    ssize_t w = write(req->upload_fd, upload_data + off, *upload_data_size - off);
                    if (w <= 0) return MHD_NO;
                    off += (size_t)w;
                }
                req->body_len += *upload_data_size;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!req->replied && !req->body_too_large) {
            size_t need = req->body_len + *upload_data_size;
            if (need > s->cfg.max_body) {
                req->body_too_large = 1;
                free(req->body);
                req->body = NULL;
                req->body_len = 0;
            } else {
                if (need + 1 > req->body_cap) {
                    size_t cap = req->body_cap ? req->body_cap : 4096;
                    while (cap < need + 1) cap *= 2;
                    if (cap > s->cfg.max_body + 1) cap = s->cfg.max_body + 1;
                    char *grown = realloc(req->body, cap);
                    if (!grown) return MHD_NO;
                    req->body = grown;
                    req->body_cap = cap;
                }
                memcpy(req->body + req->body_len, upload_data, *upload_data_size);
                req->body_len = need;
                req->body[need] = 0;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (req->upload_fd >= 0) {
        close(req->upload_fd);
        req->upload_fd = -1;
    }
    if (req->replied) return MHD_YES;
    if (req->body_too_large) {
        size_t limit = req->route && req->route->upload_max ? req->route->upload_max : s->cfg.max_body;
        http_reply_error(req, 413, "body_too_large", NULL, "request body exceeds %zu bytes", limit);
        return MHD_YES;
    }
    dispatch(req);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)connection;
    (void)toe;
    http_server *s = cls;
    http_request *req = *con_cls;
    if (!req) return;
    int status = req->replied ? req->status : 0;
    if (status >= 100 && status < 600) atomic_fetch_add(&s->status_counts[status], 1);
    log_info("%s %s %d %.1fms", req->method, req->path ? req->path : "?", status, elapsed_ms(&req->started));
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
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    log_warn("libmicrohttpd: %s", line);
}

static int open_listen_socket(const char *addr, int port, int *bound_port, char *err, size_t errlen) {
    struct sockaddr_storage ss;
    socklen_t slen;
    memset(&ss, 0, sizeof ss);
    int family;
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, addr, &a6->sin6_addr) != 1) {
            snprintf(err, errlen, "--bind %s is not a numeric IPv6 or IPv4 address", addr);
            return -1;
        }
        family = AF_INET6;
        slen = sizeof *a6;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, addr, &a4->sin_addr) != 1) {
            snprintf(err, errlen, "--bind %s is not a numeric IPv4 or IPv6 address", addr);
            return -1;
        }
        family = AF_INET;
        slen = sizeof *a4;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, slen) < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot listen on %s:%d: %s", addr, port,
                 e == EADDRINUSE ? "the port is already in use" : strerror(e));
        close(fd);
        return -1;
    }
    if (listen(fd, 128) < 0) {
        snprintf(err, errlen, "listen: %s", strerror(errno));
        close(fd);
        return -1;
    }
    getsockname(fd, (struct sockaddr *)&ss, &slen);
    *bound_port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

int http_server_listen(http_server *s, char *err, size_t errlen) {
    if (s->listen_fd >= 0) return 0;
    s->listen_fd = open_listen_socket(s->bind_addr, s->cfg.port, &s->port, err, errlen);
    return s->listen_fd < 0 ? -1 : 0;
}

int http_server_start(http_server *s, char *err, size_t errlen) {
    if (s->static_dir) {
        s->static_real = realpath(s->static_dir, NULL);
        if (!s->static_real) {
            snprintf(err, errlen, "static directory %s: %s", s->static_dir, strerror(errno));
            return -1;
        }
    }
    if (http_server_listen(s, err, errlen) < 0) return -1;
    unsigned threads = s->cfg.threads ? s->cfg.threads : 4;
    unsigned max_conn = s->cfg.max_connections ? s->cfg.max_connections : 256;
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
            (strchr(s->bind_addr, ':') ? MHD_USE_IPv6 : 0),
        0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
        s->listen_fd, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, max_conn, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_UNESCAPE_CALLBACK, identity_unescape, NULL,
        MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "libmicrohttpd could not start on %s:%d", s->bind_addr, s->port);
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    return 0;
}

int http_server_port(const http_server *s) { return s->port; }

void http_server_status_counts(const http_server *s, uint64_t counts[600]) {
    for (int i = 0; i < 600; i++) counts[i] = atomic_load(&s->status_counts[i]);
}

void http_server_free(http_server *s) {
    if (!s) return;
    if (s->daemon) {
        /* Stop accepting first, then end live streams so their sleeping connections can finish. */
        MHD_quiesce_daemon(s->daemon);
        atomic_store(&s->stopping, 1);
        pthread_mutex_lock(&s->streams_lock);
        for (http_stream *st = s->streams; st; st = st->next) http_stream_wake(st);
        pthread_mutex_unlock(&s->streams_lock);
        MHD_stop_daemon(s->daemon);
    }
    if (s->listen_fd >= 0) close(s->listen_fd);
    for (int i = 0; i < s->n_routes; i++) {
        free(s->routes[i].pattern);
        free(s->routes[i].segment_store);
    }
    pthread_mutex_destroy(&s->streams_lock);
    free(s->static_real);
    free(s->upload_dir);
    free(s->token);
    free(s->bind_addr);
    free(s->static_dir);
    free(s);
}
