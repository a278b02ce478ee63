/* What the HTTP layer's own files share: the server and the request. Not for use outside
 * server/http/; the layer's contract for everyone else is http.h.
 *
 * The layer is cut by concern, each part with its header:
 *   http.c            the server's life cycle and libmicrohttpd's request callbacks (parse, admit, route)
 *   http_admission.c  admission and limits: the front door, the connection table, head deadlines
 *   http_compute.c    the compute pool of heavy routes: admission, workers, cancellation
 *   http_head.c       the request-head check (pure)
 *   http_origin.c     browser-origin defences: Host allow-list, Origin of changes, JSON content type
 *   http_router.c     routing: the route table, canonical paths, bearer tokens, dispatch
 *   http_request.c    the request context handlers see: accessors and replies
 *   http_stream.c     streaming replies
 *   http_static.c     static files
 *   http_text.c       text and time helpers */
#ifndef ATTNLAB_HTTP_IMPL_H
#define ATTNLAB_HTTP_IMPL_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include "http/http.h"
#include "http/http_admission.h"
#include "http/http_compute.h"
#include "http/http_origin.h"
#include "http/http_router.h"
#include "http/http_static.h"
#include "http/http_stream.h"

#define HTTP_MAX_REPLY_HEADERS 8

struct http_server {
    http_config cfg;
    char *bind_addr, *upload_dir, *token;
    http_router router;
    http_static statics;
    http_streams streams;
    http_admission adm;
    http_origin origin;
    http_compute compute;
    struct MHD_Daemon *daemon;
    int listen_fd;
    int port;
    atomic_uint_fast64_t status_counts[600];
    atomic_int stopping;
    atomic_uint_fast64_t changes; /* requests other than GET and HEAD answered */
};

struct http_request {
    http_server *server;
    struct MHD_Connection *connection;
    const char *method;
    char *path;
    const http_route_entry *route;
    char *param_names[HTTP_MAX_PARAMS];
    char *param_values[HTTP_MAX_PARAMS];
    int n_params;
    char *body;
    size_t body_len, body_cap;
    int body_too_large;
    int upload_errno; /* the upload could not be written to disk (ENOSPC, …): answered at its end */
    int replied;
    int status;
    struct timespec started;
    int upload_fd;
    char *upload_path;
    char *reply_headers[HTTP_MAX_REPLY_HEADERS][2];
    int n_reply_headers;
    char **scratch; /* decoded query values, freed with the request */
    int n_scratch;
    http_conn *conn;   /* the connection's slot (NULL if untracked) */
    int seen;          /* the access handler has been called for it */
    int refuse_status; /* set from the request line (on_uri): answer this and close */
    const char *refuse_code, *refuse_message;
    /* A heavy request on the compute pool: its connection is suspended from admission until the
     * worker's answer (pending) is handed back; the answer is queued by the HTTP thread that
     * libmicrohttpd calls again once the connection is resumed. */
    int deferred;
    struct MHD_Response *pending;
    int pending_status;
    atomic_int cancelled; /* the client left */
    int fd;               /* the connection's socket, watched while the request waits or runs */
    http_request *job_next;
    void (*cont_fn)(void *ctx, const atomic_int *stop); /* http_request_continue */
    void *cont_ctx;
};

/* ---- the request (http_request.c) ---------------------------------------------------------- */
/* A request on connection, its clock started. NULL when out of memory. */
http_request *http_request_new(http_server *s, struct MHD_Connection *connection);
/* Frees what the request holds (parameters, headers, upload file, scratch, body) and req. */
void http_request_free(http_request *req);
/* Queues resp (NULL: an empty 500) with status and content type plus the reply headers; a second
 * answer to the same request is logged and dropped. Takes resp. */
void http_reply_queue(http_request *req, int status, struct MHD_Response *resp, const char *content_type);
/* Answers an error and closes the connection afterwards (the request is not read any further). */
void http_reply_and_close(http_request *req, int status, const char *code, const char *message);

#endif
