/* Routing (contract: http_router.h; http_route, http_route_upload, http_server_each_route in
 * http.h). */
#include <limits.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_impl.h"
#include "http/http_text.h"

int http_route(http_server *s, const char *method, const char *pattern, http_handler_fn fn) {
    if (s->router.n_routes == HTTP_MAX_ROUTES || strlen(method) >= sizeof s->router.routes[0].method) return -1;
    http_route_entry *r = &s->router.routes[s->router.n_routes];
    r->pattern = http_strdup(pattern);
    char *copy = http_strdup(pattern);
    if (!r->pattern || !copy) {
        free(r->pattern);
        free(copy);
        return -1;
    }
    /* Segments are kept as pointers into `copy`, which lives as long as the server. */
    int n = 0;
    char *save = NULL;
    if (copy[0] != '/') {
        free(r->pattern);
        free(copy);
        return -1;
    }
    for (char *tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (n == HTTP_MAX_SEGMENTS) {
            free(r->pattern);
            free(copy);
            return -1;
        }
        r->segments[n++] = tok;
    }
    r->segment_store = copy;
    r->n_segments = n;
    strcpy(r->method, method);
    r->fn = fn;
    s->router.n_routes++;
    return 0;
}

int http_route_heavy(http_server *s, const char *method, const char *pattern, http_handler_fn fn) {
    if (http_route(s, method, pattern, fn) < 0) return -1;
    s->router.routes[s->router.n_routes - 1].heavy = 1;
    return 0;
}

int http_route_upload(http_server *s, const char *method, const char *pattern, http_handler_fn fn, size_t max_bytes) {
    if (http_route(s, method, pattern, fn) < 0) return -1;
    s->router.routes[s->router.n_routes - 1].upload_max = max_bytes;
    return 0;
}

int http_route_upload_heavy(http_server *s, const char *method, const char *pattern, http_handler_fn fn,
                            size_t max_bytes) {
    if (http_route_upload(s, method, pattern, fn, max_bytes) < 0) return -1;
    s->router.routes[s->router.n_routes - 1].heavy = 1;
    return 0;
}

int http_route_query(http_server *s, const char *method, const char *pattern, const char *keys) {
    for (int i = 0; i < s->router.n_routes; i++) {
        http_route_entry *r = &s->router.routes[i];
        if (strcmp(r->method, method) != 0 || strcmp(r->pattern, pattern) != 0) continue;
        char *copy = http_strdup(keys);
        if (!copy) return -1;
        free(r->query);
        r->query = copy;
        return 0;
    }
    return -1;
}

/* 1 when key is one of keys (http_route_query's list). */
static int query_key_taken(const char *keys, const char *key) {
    for (const char *p = keys; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n >= 2 && p[n - 1] == '*' ? !strncmp(key, p, n - 1) && key[n - 1] != 0
                                      : strlen(key) == n && !strncmp(key, p, n))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

typedef struct {
    const char *keys, *unknown;
} query_check;

static int find_unknown_key(const char *key, const char *value, void *ctx) {
    (void)value;
    query_check *c = ctx;
    if (query_key_taken(c->keys, key)) return 0;
    c->unknown = key;
    return 1;
}

/* Answers 422 and returns 1 when the request's query has a key its route does not take. */
static int refuse_unknown_query(http_request *req) {
    query_check c = {.keys = req->route->query};
    http_request_each_query(req, find_unknown_key, &c);
    if (!c.unknown) return 0;
    if (c.keys && *c.keys)
        http_reply_error(req, 422, "unknown_parameter", c.unknown, "unknown query parameter '%.100s' (%s %s takes: %s)",
                         c.unknown, req->route->method, req->route->pattern, c.keys);
    else
        http_reply_error(req, 422, "unknown_parameter", c.unknown,
                         "unknown query parameter '%.100s' (%s %s takes none)", c.unknown, req->route->method,
                         req->route->pattern);
    return 1;
}

void http_server_each_route(const http_server *s, void (*fn)(const char *, const char *, void *), void *ctx) {
    for (int i = 0; i < s->router.n_routes; i++) fn(s->router.routes[i].method, s->router.routes[i].pattern, ctx);
}

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
static int route_match(const http_route_entry *r, const char *path, http_request *req) {
    char buf[2048];
    size_t len = strlen(path);
    if (len >= sizeof buf) return 0;
    memcpy(buf, path, len + 1);
    char *segs[HTTP_MAX_SEGMENTS + 1];
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (n == HTTP_MAX_SEGMENTS) return 0;
        segs[n++] = tok;
    }
    if (n != r->n_segments) return 0;
    int n_params = 0;
    for (int i = 0; i < n; i++) {
        const char *pat = r->segments[i];
        if (pat[0] == '{') {
            if (n_params == HTTP_MAX_PARAMS) return 0;
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
        if (!value || !name) {
            free(value);
            free(name);
            return -1;
        }
        if (http_url_decode(segs[i], sl, value, 0) < 0 || strchr(value, '/')) {
            free(value);
            free(name);
            return -1;
        }
        memcpy(name, pat + 1, strlen(pat) - 2);
        name[strlen(pat) - 2] = 0;
        req->param_names[req->n_params] = name;
        req->param_values[req->n_params] = value;
        req->n_params++;
    }
    return 1;
}

int http_router_find(http_server *s, http_request *req) {
    const char *m = !strcmp(req->method, "HEAD") ? "GET" : req->method;
    for (int i = 0; i < s->router.n_routes; i++) {
        if (strcmp(s->router.routes[i].method, m) != 0) continue;
        int r = route_match(&s->router.routes[i], req->path, req);
        if (r == 1) {
            req->route = &s->router.routes[i];
            return 1;
        }
        if (r < 0) return -1;
    }
    return 0;
}

void http_router_free(http_router *r) {
    for (int i = 0; i < r->n_routes; i++) {
        free(r->routes[i].pattern);
        free(r->routes[i].segment_store);
        free(r->routes[i].query);
    }
    r->n_routes = 0;
}

/* Compares in time that depends only on the lengths, not on where the strings differ. */
static int equal_constant_time(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++) diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return diff == 0;
}

int http_router_authorised(const http_request *req) {
    http_server *s = req->server;
    if (!s->token) return 1;
    int is_read = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    /* Fail closed: anything a route answers is private, whatever its path looks like; only
     * unrouted paths outside /api and /metrics (static files) and /api/health are public. */
    int is_api = req->route != NULL || !strncmp(req->path, "/api/", 5) || !strcmp(req->path, "/api") ||
                 !strncmp(req->path, "/metrics", 8);
    if (is_read && (!s->cfg.private_reads || !is_api || !strcmp(req->path, "/api/health"))) return 1;
    return http_request_has_token(req);
}

int http_request_has_token(const http_request *req) {
    const char *token = req->server->token;
    if (!token) return 1;
    /* The scheme is case-insensitive and followed by one or more blanks (RFC 9110 11.4). */
    const char *h = http_request_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return 0;
    h += 6;
    while (*h == ' ' || *h == '\t') h++;
    return equal_constant_time(h, token);
}

void http_reply_unauthorized(http_request *req) {
    http_reply_header(req, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"attnlab\"");
    http_reply_error(req, 401, "unauthorized", NULL, "this request needs Authorization: Bearer <token>");
}

void http_router_dispatch(http_request *req) {
    http_server *s = req->server;
    const char *method = !strcmp(req->method, "HEAD") ? "GET" : req->method;
    if (!http_router_authorised(req)) {
        http_reply_unauthorized(req);
        return;
    }
    if (req->route && refuse_unknown_query(req)) return;
    if (req->route && req->route->heavy) {
        http_compute_admit(s, req);
        return;
    }
    if (req->route) {
        req->route->fn(req, s->cfg.handler_ctx);
        if (!req->replied) http_reply_error(req, 500, "internal", NULL, "the handler gave no answer");
        return;
    }
    /* Allowed methods for this path, if any route has its shape. */
    char allow[64] = "";
    for (int i = 0; i < s->router.n_routes; i++) {
        if (route_match(&s->router.routes[i], req->path, NULL) == 1 && !strstr(allow, s->router.routes[i].method)) {
            if (allow[0]) strncat(allow, ", ", sizeof allow - strlen(allow) - 1);
            strncat(allow, s->router.routes[i].method, sizeof allow - strlen(allow) - 1);
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
        http_static_serve(req);
    }
}
