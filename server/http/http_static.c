/* Static files (contract: http_static.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http_impl.h"
#include "http/http_text.h"

int http_static_init(http_static *st, const char *dir) {
    st->real = NULL;
    st->dir = dir ? http_strdup(dir) : NULL;
    return dir && !st->dir ? -1 : 0;
}

int http_static_open(http_static *st, char *err, size_t errlen) {
    if (!st->dir) return 0;
    st->real = realpath(st->dir, NULL);
    if (!st->real) {
        snprintf(err, errlen, "static directory %s: %s", st->dir, strerror(errno));
        return -1;
    }
    return 0;
}

void http_static_free(http_static *st) {
    free(st->real);
    free(st->dir);
    st->real = st->dir = NULL;
}

static const char *content_type_for(const char *path) {
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
        {".map", "application/json"},
        {".woff2", "font/woff2"},
        {".csv", "text/csv; charset=utf-8"},
        {".md", "text/markdown; charset=utf-8"},
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
static int static_resolve(const http_static *s, const char *raw, char *out, size_t outlen) {
    if (!s->real || raw[0] != '/') return -1;
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
        if (dl <= 0 || strchr(seg, '/') || strchr(seg, '\\') || !strcmp(seg, ".") || !strcmp(seg, "..")) return -1;
        if (o + (size_t)dl + 2 >= sizeof rel) return -1;
        if (o) rel[o++] = '/';
        memcpy(rel + o, seg, (size_t)dl);
        o += (size_t)dl;
        if (!end) break;
        p = end + 1;
    }
    rel[o] = 0;
    char joined[PATH_MAX];
    if (snprintf(joined, sizeof joined, "%s/%s", s->real, rel) >= (int)sizeof joined) return -1;
    if (!realpath(joined, out)) return -1;
    size_t root_len = strlen(s->real);
    if (strncmp(out, s->real, root_len) != 0 || out[root_len] != '/') return -1;
    (void)outlen;
    return 0;
}

void http_static_serve(http_request *req) {
    char path[PATH_MAX];
    if (static_resolve(&req->server->statics, req->path, path, sizeof path) < 0) {
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
        http_reply_queue(req, 304, resp, NULL);
        return;
    }
    http_reply_fd(req, 200, content_type_for(path), fd, (uint64_t)st.st_size);
}
