/* The HTTP layer: the only module that speaks libmicrohttpd.
 *
 * A server holds a route table (method + path pattern -> handler) fixed before start, serves
 * files under a static directory for unrouted GETs, caps request bodies, answers errors as JSON
 * {"error":{"code","message","field"}} and logs one line per request.
 *
 * Connections come in through a front door of its own (one thread that owns the listening
 * socket): it applies the connection limits and the request-head deadline below and checks each
 * connection's first request head (http_head_check) before libmicrohttpd sees a byte of it, so
 * that what libmicrohttpd would refuse in HTML is refused in JSON; the requests after it on a
 * kept-alive connection are held to the same limits inside the layer.
 *
 * A handler runs on one of the server's pool threads and must answer exactly once with one of the
 * http_reply_* functions (the layer answers 500 if it does not). Strings it gets from a request
 * live as long as the request. Patterns are '/'-separated; a segment "{name}" matches any one
 * non-empty segment, whose percent-decoded value http_request_param() returns. */
#ifndef ATTNLAB_HTTP_H
#define ATTNLAB_HTTP_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct http_server http_server;
typedef struct http_request http_request;
/* What the layer that registers the routes hands every handler (http_config.handler_ctx): declared,
 * not defined, here; that layer completes the struct (the API's is api_ctx, api/api.h), so its
 * handlers take it typed, and this layer only passes the pointer on. */
typedef struct http_handler_ctx http_handler_ctx;
typedef void (*http_handler_fn)(http_request *req, const http_handler_ctx *ctx);

typedef struct {
    const char *bind_addr;  /* numeric IPv4 or IPv6 address */
    int port;               /* 0 picks a free port; see http_server_port() */
    const char *static_dir; /* NULL: no static files */
    size_t max_body;        /* bytes; larger bodies get 413 */
    unsigned threads;       /* size of libmicrohttpd's internal thread pool */
    /* Connection limits (0 picks the default in brackets). A connection counts against
     * max_connections and max_connections_per_ip from accept until it closes, except while it
     * carries a streaming reply, which counts against max_streams instead, so viewers of live
     * streams cannot starve the API. A new connection past a limit first evicts the oldest idle
     * connection (one waiting for a request) of the same address, or of any address for the
     * total; when none is idle it is answered 429 (per address) or 503 (total) as JSON and closed. */
    unsigned max_connections;        /* [256] */
    unsigned max_connections_per_ip; /* [128] */
    unsigned max_streams;            /* [256]; past it a streaming reply is refused with 503 */
    /* A client must send a complete request head within this many milliseconds of connecting or
     * of the end of its previous reply; otherwise the connection is closed (after a JSON 408 when
     * part of a request had arrived). [10000] */
    unsigned header_timeout_ms;
    /* The compute pool of heavy routes (http_route_heavy, http_compute.h): workers [2], requests
     * waiting beyond them [16] (past it: 503), requests of one address waiting or running [4] (past
     * it: 429), each answered as JSON with Retry-After. */
    unsigned compute_workers, compute_queue, compute_per_client;
    const char *upload_dir; /* where upload routes stream bodies (see http_route_upload) */
    const char *token;      /* non-NULL: changes need "Authorization: Bearer <token>" (401 otherwise) */
    int private_reads;      /* with a token: reads need it too (except /api/health) */
    /* Browser-origin defences (http_origin.h): the Host names answered besides the loopback names
     * and bind_addr ("*": any), also the origins whose pages may make changes. NULL-terminated;
     * may be NULL. */
    const char *const *allowed_hosts;
    const http_handler_ctx *handler_ctx; /* passed to every handler */
} http_config;

/* Allocates a server (not yet listening). NULL only when out of memory. */
http_server *http_server_new(const http_config *cfg);
/* Adds a route; call before http_server_start. Returns -1 on a malformed pattern or no memory. */
int http_route(http_server *s, const char *method, const char *pattern, http_handler_fn fn);
/* Adds a route whose body is streamed to a temporary file in upload_dir, up to max_bytes (413
 * beyond, with the partial file removed). The handler finds it with http_request_upload_path();
 * a file the handler has not moved away is deleted when the request ends. */
int http_route_upload(http_server *s, const char *method, const char *pattern, http_handler_fn fn, size_t max_bytes);
/* An upload route whose handler runs on the compute pool like a heavy route's, once the whole body
 * is in its file (an import that parses and stores a large body). */
int http_route_upload_heavy(http_server *s, const char *method, const char *pattern, http_handler_fn fn,
                            size_t max_bytes);
/* Adds a heavy route: one whose handler may compute for long (statistics, exports, probes). It runs
 * on the compute pool, never on an HTTP thread, after admission (see http_compute.h); it answers as
 * any handler does, and should stop early once http_request_cancelled() says the client left. */
int http_route_heavy(http_server *s, const char *method, const char *pattern, http_handler_fn fn);
/* Sets the query keys the route (method, pattern) takes, comma-separated; "name.*" takes every key
 * that begins with "name.". A request with any other key is answered 422 (code unknown_parameter,
 * field the key) before its handler runs, or its admission to the compute pool; a route given none
 * takes none. Call before http_server_start. -1 when there is no such route or out of memory. */
int http_route_query(http_server *s, const char *method, const char *pattern, const char *keys);
/* Binds the listening socket without serving yet (connections wait in the backlog), so a caller
 * can make sure the port is its own before doing anything else. -1 with a reason in err. */
int http_server_listen(http_server *s, char *err, size_t errlen);
/* Binds (unless http_server_listen did) and starts the pool. On failure returns -1 with a
 * one-line reason in err. */
int http_server_start(http_server *s, char *err, size_t errlen);
int http_server_port(const http_server *s);
/* Stops accepting, lets in-flight requests finish, joins the pool and frees the server. */
void http_server_free(http_server *s);

/* The compute pool's figures, for /metrics: requests running and waiting now; admitted, refused
 * (429 and 503) and cancelled (the client left) since the start. */
void http_server_compute_counts(http_server *s, unsigned *running, unsigned *queued, unsigned long long *admitted,
                                unsigned long long *refused, unsigned long long *cancelled);
/* Requests that may have changed something (any method but GET and HEAD) answered so far, counted
 * when the answer is queued (before its client can read it) and again when it is over: an answer
 * built from the state may be kept until this moves (with what else changes the state). */
uint64_t http_server_changes(const http_server *s);
/* Counts of answered requests by status code (index 100..599), for /metrics. */
void http_server_status_counts(const http_server *s, uint64_t counts[600]);
/* Visits each route: used by the OpenAPI consistency test and documentation. */
void http_server_each_route(const http_server *s, void (*fn)(const char *method, const char *pattern, void *ctx),
                            void *ctx);

const char *http_request_path(const http_request *req);
const char *http_request_param(const http_request *req, const char *name);
/* A query-string argument, its key and value percent- and '+'-decoded; NULL when absent (or when its
 * value does not decode). The first of repeated keys. */
const char *http_request_query(http_request *req, const char *name);
/* Calls fn for every query argument (decoded key and value; an argument whose key does not decode
 * is skipped, a value that does not decode is ""); stops early when fn returns non-zero. */
int http_request_each_query(http_request *req, int (*fn)(const char *key, const char *value, void *ctx), void *ctx);
const char *http_request_header(const http_request *req, const char *name);
/* Parses the body as a JSON object; on failure answers 400 and returns NULL. Caller owns the result. */
json_t *http_request_json_object(http_request *req);
/* The temporary file holding an upload route's body, and its size. */
const char *http_request_upload_path(const http_request *req, size_t *size);

/* 1 when the request may do what needs the token whatever the route (a privileged read such as a
 * whole checkpoint): the server has no token, or the request carries it. */
int http_request_has_token(const http_request *req);
/* Answers 401 with WWW-Authenticate, as a route that needs the token does. */
void http_reply_unauthorized(http_request *req);

/* In a heavy handler that has answered (with http_reply_stream, say): once the answer has gone back
 * to the HTTP thread, fn(ctx, stop) runs on the same compute worker, which stays counted against
 * the pool's and the client's limits until fn returns, so that the work of a long answer is done
 * off the HTTP threads and bounded like any heavy request's. fn must not use the request (it may be
 * over); *stop becomes 1 when the server stops, and fn should then return soon. 0, or -1 (nothing
 * will run) outside a heavy handler. */
int http_request_continue(http_request *req, void (*fn)(void *ctx, const atomic_int *stop), void *ctx);

/* 1 once the client of a heavy request has gone (nobody will read the answer): its work can stop.
 * Always 0 for other routes. The flag itself, for computations that poll it: */
int http_request_cancelled(const http_request *req);
const atomic_int *http_request_cancel_flag(const http_request *req);

/* Adds a header to the coming reply (copied). */
void http_reply_header(http_request *req, const char *name, const char *value);
/* Sends body with its content type (copied). */
void http_reply_bytes(http_request *req, int status, const char *content_type, const void *body, size_t len);
/* Sends an open file of the given size; the layer owns (and closes) fd from here on. */
void http_reply_fd(http_request *req, int status, const char *content_type, int fd, uint64_t size);
/* Sends a JSON value and drops the caller's reference to it. */
/* Like http_reply_bytes, but takes body (malloc'd) instead of copying it: it is freed once sent. */
void http_reply_take(http_request *req, int status, const char *content_type, char *body, size_t len);
void http_reply_json(http_request *req, int status, json_t *body);
/* Sends {"error":{"code":code,"message":...,"field":field}}; field may be NULL. */
void http_reply_error(http_request *req, int status, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* A long answer written as it is read (chunked), so that a slow or stalled client holds one chunk,
 * never the whole answer: the layer calls next(ctx, buf, max) whenever the client can take more;
 * it writes up to max bytes and returns their number (> 0), 0 at the end of the answer, or -1 when
 * it fails (the connection is then closed without the answer's end, so the client sees it cut).
 * next runs on an HTTP thread and must do a bounded amount of work per call. done(ctx) is called
 * exactly once when the answer ends for any reason (sent, failed, client gone, server stop). */
typedef ssize_t (*http_chunks_next_fn)(void *ctx, char *buf, size_t max);
/* size: the answer's length when known (sent as Content-Length; next must then give exactly that
 * many bytes), or HTTP_SIZE_UNKNOWN (sent chunked). */
#define HTTP_SIZE_UNKNOWN UINT64_MAX
void http_reply_chunks(http_request *req, int status, const char *content_type, uint64_t size, http_chunks_next_fn next,
                       void (*done)(void *ctx), void *ctx);

/* Streaming replies (Server-Sent Events, answers produced elsewhere). The layer calls read(ctx, buf,
 * max) whenever the client can take more: it returns the number of bytes written (> 0), 0 when it
 * has nothing now, -1 to end the reply, or -2 to cut it (the connection closes without the reply's
 * end, so the client sees it incomplete). After a 0 the connection sleeps until someone calls http_stream_wake() on its
 * stream. The stream handle stays valid until close(ctx) is called, which the layer does exactly once when the reply
 * ends for any reason (client gone, -1, server stop). */
typedef struct http_stream http_stream;
typedef ssize_t (*http_stream_read_fn)(void *ctx, char *buf, size_t max);
typedef void (*http_stream_close_fn)(void *ctx);
http_stream *http_reply_stream(http_request *req, const char *content_type, http_stream_read_fn read,
                               http_stream_close_fn close, void *ctx);
/* Safe from any thread, any number of times, as long as the stream has not been closed. */
void http_stream_wake(http_stream *st);
/* Ends the stream now, even while its client reads nothing (so the layer never asks for more):
 * its connection is shut down, and close() follows. The same rules as http_stream_wake. */
void http_stream_abort(http_stream *st);
/* Caps the kernel's send buffer of the stream's connection at about `bytes`, so that a client that
 * stops reading fills it after that much rather than after the megabytes loopback autotuning allows
 * (a live stream's silent viewer is then noticed, and dropped, once the event ring passes it; see
 * api_events.c). Call it right after http_reply_stream; best effort (a refusal changes nothing). */
void http_stream_send_buffer(http_stream *st, int bytes);

/* Limits on a request head, enforced before libmicrohttpd parses it, each answered as JSON:
 * the request line and headers together at most HTTP_MAX_HEAD bytes (431; 414 when the request
 * line alone does not fit), the request target at most HTTP_MAX_TARGET bytes (414), at most
 * HTTP_MAX_QUERY_ARGS '&'-separated query arguments (431), HTTP_MAX_HEADERS header lines (431)
 * and HTTP_MAX_COOKIES cookies in at most HTTP_MAX_COOKIE_BYTES of Cookie headers (431); versions other than HTTP/1.0
 * and 1.1 get 505; malformed lines, control bytes, a bare CR, folded headers, a bad or repeated Content-Length, or
 * Content-Length with Transfer-Encoding get 400; a Content-Length too large to represent gets 413; a Transfer-Encoding
 * other than chunked gets 501. */
#define HTTP_MAX_HEAD 8192
#define HTTP_MAX_TARGET 4096
#define HTTP_MAX_QUERY_ARGS 64
#define HTTP_MAX_HEADERS 48
#define HTTP_MAX_COOKIES 32
#define HTTP_MAX_COOKIE_BYTES 4096

typedef struct {
    int status;          /* with a -1 result: the status to answer */
    const char *code;    /* with a -1 result: the error code ("bad_request", "uri_too_long", ...) */
    const char *message; /* with a -1 result: a fixed message (no request bytes in it) */
    size_t head_len;     /* with a 1 result: bytes up to and including the blank line */
    int is_head;         /* the method is HEAD (answer without a body) */
} http_head_check_result;

/* Checks the start of a connection's input, buf[0..len), against the limits above. Returns 1
 * when it holds a complete acceptable head, 0 when more bytes are needed (eof: the client will
 * send no more; then the answer is -1 or, for empty input, 0 with status 0), -1 when it must be
 * refused with res->status. Pure: used by the server's front door and by the fuzz tests. */
int http_head_check(const char *buf, size_t len, int eof, http_head_check_result *res);

/* Parses a Last-Event-ID value (decimal digits only, surrounding blanks allowed, at most
 * 2^63-1). Returns 0 with *id set, or -1 when absent (NULL), empty or malformed. */
int http_parse_event_id(const char *value, uint64_t *id);

/* Writes src as valid UTF-8 into dst (cap bytes, always terminated): each byte that does not
 * begin a well-formed sequence becomes the four characters \xHH. Returns dst. */
char *http_utf8_clean(const char *src, char *dst, size_t cap);

#endif
