/* Static files (http_static.c): the dashboard's tree, served for unrouted GETs. */
#ifndef ATTNLAB_HTTP_STATIC_H
#define ATTNLAB_HTTP_STATIC_H

#include <stddef.h>

#include "http/http.h"

typedef struct {
    char *dir;  /* as configured; NULL: no static files */
    char *real; /* its realpath, once the server starts */
} http_static;

/* Copies dir (NULL: none). -1 when out of memory. */
int http_static_init(http_static *st, const char *dir);
/* Resolves the tree's real path; -1 with a one-line reason in err when it cannot. */
int http_static_open(http_static *st, char *err, size_t errlen);
void http_static_free(http_static *st);

/* Answers a GET of req's (canonical) path with the file it names inside the tree (ETag,
 * If-None-Match 304, cache policy), or 404. A path that resolves outside the tree (a symlink out)
 * is a 404 too. */
void http_static_serve(http_request *req);

#endif
