/* Browser-origin defences (http_origin.c): what keeps a web page the user happens to visit from
 * using the API through the user's browser (cross-site request forgery) or from reading it under a
 * name of its own (DNS rebinding).
 *
 * - Host: every request's Host header (its name, the port aside) must be a loopback name
 *   ("localhost", a name under ".localhost", 127.0.0.0/8, ::1), the address the server is bound to,
 *   or a name given with --allowed-host (http_config.allowed_hosts; "*" allows any). A server bound
 *   to every address (0.0.0.0 or ::) also takes any IP literal: only a name can be rebound. A
 *   request without Host (HTTP/1.0) is not from a browser and passes. Refused: 403 host_not_allowed.
 * - Origin: a change (any method but GET and HEAD) that carries an Origin header must come from the
 *   page's own origin (the Origin's host and port are the request's Host) or from a host given with
 *   --allowed-host; "null" is refused. No Origin (curl, the attnlab client) passes. Refused: 403
 *   origin_not_allowed.
 * - Content-Type: a change with a body, on a route that takes JSON (every one but the uploads), must
 *   say Content-Type: application/json, which a page can only send after a CORS preflight that this
 *   server never grants. Refused: 415 unsupported_media_type.
 * Each refusal is decided from the request head, before any body is read, and closes the connection. */
#ifndef ATTNLAB_HTTP_ORIGIN_H
#define ATTNLAB_HTTP_ORIGIN_H

#include <stddef.h>

#include "http/http.h"

typedef struct {
    char **extra; /* --allowed-host names, lower case */
    size_t n_extra;
    char *bound;        /* the bound address as a Host name would carry it ("::1" for IPv6), or NULL */
    int any_ip_literal; /* bound to every address */
    int any_host;       /* "*" was given */
} http_origin;

/* -1 when out of memory. bind_addr: numeric; extra: NULL-terminated, may be NULL. */
int http_origin_init(http_origin *o, const char *bind_addr, const char *const *extra);
void http_origin_free(http_origin *o);

typedef struct {
    int status;
    const char *code;
    char message[256];
} http_origin_refusal;

/* Checks a request's head against the three rules above. json_route: the route takes a JSON body
 * (routed, not an upload). Returns 0 when it may go on, -1 with the refusal filled. Pure: the
 * values are the request's Host, Origin, Content-Type, Content-Length and Transfer-Encoding
 * headers (each NULL when absent). */
int http_origin_check(const http_origin *o, const char *method, int json_route, const char *host, const char *origin,
                      const char *content_type, const char *content_length, const char *transfer_encoding,
                      http_origin_refusal *out);

#endif
