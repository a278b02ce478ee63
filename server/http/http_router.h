/* Routing (http_router.c): the route table, canonical paths, bearer tokens and dispatch.
 *
 * Routes are fixed before the server starts (http_route, http_route_upload in http.h) and only read
 * afterwards, so lookups need no lock. A request's path must be canonical before it is routed,
 * authorised or looked up as a static file, so that all three see the same path. */
#ifndef ATTNLAB_HTTP_ROUTER_H
#define ATTNLAB_HTTP_ROUTER_H

#include <stddef.h>

#include "http/http.h"

#define HTTP_MAX_ROUTES 128
#define HTTP_MAX_SEGMENTS 16
#define HTTP_MAX_PARAMS 4

typedef struct {
    char method[8];
    char *pattern;
    char *segment_store; /* a copy of pattern cut into segments */
    int n_segments;
    char *segments[HTTP_MAX_SEGMENTS]; /* point into a copy of pattern; "{x}" marks a parameter */
    http_handler_fn fn;
    size_t upload_max; /* > 0: the body streams to a file */
    int heavy;         /* runs on the compute pool (http_route_heavy) */
    char *query;       /* the query keys it takes, comma-separated ("name.*": a prefix); NULL: none */
} http_route_entry;

typedef struct {
    http_route_entry routes[HTTP_MAX_ROUTES];
    int n_routes;
} http_router;

void http_router_free(http_router *r);

/* A path is canonical when it is "/" or a run of '/'-prefixed segments, each non-empty (no "//",
 * no trailing '/') and at most NAME_MAX bytes, whose percent-decoding is valid, holds no '/', '\\'
 * or NUL, and is neither "." nor "..". Only canonical paths reach authorisation, routing and static
 * files, so all three see the same path (an alias such as "//api/runs" or "/metrics/" cannot be
 * routed one way and authorised another). Returns 1 when canonical. */
int http_path_canonical(const char *raw);

/* Finds the route of req's method (HEAD as GET) and path: sets req->route and its decoded
 * parameters and returns 1; 0 when none matches (req->route stays NULL); -1 when a parameter does
 * not decode (or no memory). */
int http_router_find(http_server *s, http_request *req);

/* With a token, changes always need it and reads need it under private_reads; /api/health stays
 * open for health checks, and the dashboard's own files for the login prompt. 1 when allowed. */
int http_router_authorised(const http_request *req);

/* Answers a complete request: 401 without the token it needs, else its route's handler (500 if
 * that gives no answer; a heavy route's is admitted to the compute pool instead of run here), else
 * 405 with Allow when another method has the path, 404 under /api, else a static file. */
void http_router_dispatch(http_request *req);

#endif
