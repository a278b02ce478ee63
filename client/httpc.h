/* HTTP for the client: one libcurl easy handle per request, the bearer token, timeouts, and the
 * translation of every way a request can go wrong into an exit code (cli.h) plus one line of text.
 *
 * Call curl_global_init() once before any function here. */
#ifndef ATTNLAB_HTTPC_H
#define ATTNLAB_HTTPC_H

#include <jansson.h>
#include <stddef.h>

#include "cli.h"

typedef struct {
    long status; /* HTTP status, 0 when no response arrived */
    char *body;  /* NUL-terminated, owned; may be NULL when empty */
    size_t len;
} httpc_response;

/* One request to ctx->server + path (path starts with '/', already escaped). body may be NULL;
 * when given it is sent as application/json. Returns CLI_EXIT_OK when a response arrived (any
 * status), else CLI_EXIT_UNREACHABLE with a line in msg ("cannot reach URL: why" or "timed out
 * ..."). Bodies over 256 MiB are refused (CLI_EXIT_SERVER). */
int httpc_request(const cli_ctx *ctx, const char *method, const char *path, const char *body, httpc_response *out,
                  char *msg, size_t msglen);
void httpc_response_free(httpc_response *r);

/* The exit code for an HTTP status: 2xx OK, 4xx REFUSED, everything else SERVER. */
int httpc_status_exit(long status);
/* One line describing a non-2xx response: "HTTP 422 invalid: message (field: steps)" from the
 * server's {"error":{...}} body, or the start of the body when it is not that shape. */
void httpc_error_line(long status, const char *body, char *msg, size_t msglen);

/* Does the request and expects JSON back. On 2xx sets *out (a JSON value, or null for an empty
 * 204 body) and returns CLI_EXIT_OK. Otherwise prints one line on ctx->err and returns the exit
 * code. body_json may be NULL. */
int httpc_json(const cli_ctx *ctx, const char *method, const char *path, const json_t *body_json, json_t **out);

/* URL-encodes s (RFC 3986 unreserved kept); caller frees. NULL when out of memory. */
char *httpc_escape(const char *s);

/* A streaming GET (Server-Sent Events). on_data gets each chunk as it arrives and returns 0 to go
 * on or non-zero to stop (then the call returns CLI_EXIT_OK). extra_headers is NULL or a
 * NULL-terminated list of "Name: value". The connection is given up as dead when no byte arrives
 * for idle_s seconds. *status gets the HTTP status (0 if none); a non-2xx body is collected into
 * msg as an error line. Returns CLI_EXIT_OK when the stream ended or was stopped, or
 * CLI_EXIT_UNREACHABLE with msg when the connection failed or went idle. */
typedef int (*httpc_data_fn)(const char *data, size_t len, void *user);
int httpc_stream(const cli_ctx *ctx, const char *path, const char *const *extra_headers, double idle_s,
                 httpc_data_fn on_data, void *user, long *status, char *msg, size_t msglen);

#endif
