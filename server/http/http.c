/* The HTTP server (contract: http.h): its life cycle, and libmicrohttpd's request callbacks, which
 * parse a request, check it against the limits and route it (http_router.c). The other concerns
 * have files of their own; http_impl.h lists them. */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http_impl.h"
#include "http/http_text.h"
#include "util/log.h"

/* libmicrohttpd's per-connection memory. Half of it is the first read buffer (16 KiB, twice
 * HTTP_MAX_HEAD); each query argument, header and cookie becomes a 56-byte record in the other
 * half, and the Cookie header a copy: with the limits of http.h that is at most
 * (64 + 48 + 32) * 56 + 4096 = 12.2 KiB, which leaves room for the reply's header, so
 * libmicrohttpd never reaches its own limits, whose answers are HTML, on a request the front door
 * let through. Not larger: above 32 KiB libmicrohttpd maps each connection's memory with mmap(),
 * which made a new connection three times dearer. */
#define MHD_POOL_BYTES (32 * 1024)

http_server *http_server_new(const http_config *cfg) {
    http_server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    s->listen_fd = -1;
    s->bind_addr = http_strdup(cfg->bind_addr ? cfg->bind_addr : "127.0.0.1");
    s->upload_dir = cfg->upload_dir ? http_strdup(cfg->upload_dir) : NULL;
    s->token = cfg->token && cfg->token[0] ? http_strdup(cfg->token) : NULL;
    int static_failed = http_static_init(&s->statics, cfg->static_dir) < 0;
    int origin_failed = http_origin_init(&s->origin, s->bind_addr, cfg->allowed_hosts) < 0;
    /* Fail closed: a token that could not be copied must not leave the server open. */
    if (!s->bind_addr || static_failed || origin_failed || (cfg->upload_dir && !s->upload_dir) ||
        (cfg->token && cfg->token[0] && !s->token) || http_compute_init(s, cfg) < 0 ||
        http_admission_init(s, cfg) < 0) {
        http_compute_destroy(s);
        http_origin_free(&s->origin);
        free(s->bind_addr);
        http_static_free(&s->statics);
        free(s->upload_dir);
        free(s->token);
        free(s);
        return NULL;
    }
    http_streams_init(&s->streams);
    return s;
}

/* ---- libmicrohttpd callbacks ------------------------------------------------------------ */

/* Leaves URLs as sent: the router decodes each piece itself (see static_resolve, route_match). */
static size_t identity_unescape(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    return strlen(s);
}

/* Called by libmicrohttpd with the request target as soon as a request line has arrived, before it
 * parses the query. The front door has checked the first request of each connection; the ones
 * after it on a kept-alive connection are checked here (and in on_request) against the same
 * limits. The request starts here, so on_request finds it in *con_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection) {
    http_server *s = cls;
    http_request *req = http_request_new(s, connection);
    if (!req) return NULL; /* on_request tries again */
    http_admission_request_line(s, req->conn);
    if (!uri) return req;
    const char *q = strchr(uri, '?');
    size_t args = 0;
    if (q) {
        args = 1;
        for (const char *c = q + 1; *c; c++) args += *c == '&';
    }
    if (args > HTTP_MAX_QUERY_ARGS) {
        req->refuse_status = 431;
        req->refuse_code = "too_many_query_arguments";
        req->refuse_message = "more than 64 query arguments";
        /* libmicrohttpd 0.9.75 parses each argument into a record of the connection's memory and,
         * when that runs out, neither answers nor closes. The target is its own buffer (passed as
         * const only); ending it right after the '?' leaves it nothing to parse. */
        ((char *)q)[1] = 0;
    } else if (strlen(uri) > HTTP_MAX_TARGET) {
        req->refuse_status = 414;
        req->refuse_code = "uri_too_long";
        req->refuse_message = "the request target is longer than 4096 bytes";
    }
    return req;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    http_server *s = cls;
    http_request *req = *con_cls;
    if (!req || !req->seen) {
        if (!req && !(req = http_request_new(s, connection))) return MHD_NO;
        *con_cls = req;
        req->seen = 1;
        req->method = method;
        req->path = http_strdup(url);
        if (http_admission_request_begins(s, req->conn) < 0) return MHD_NO;
        if (!req->path) return MHD_NO;
        if (req->refuse_status) {
            http_reply_and_close(req, req->refuse_status, req->refuse_code, req->refuse_message);
            return MHD_YES;
        }
        const union MHD_ConnectionInfo *hs =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        if ((hs && hs->header_size > HTTP_MAX_HEAD) ||
            MHD_get_connection_values(connection, MHD_HEADER_KIND, NULL, NULL) > HTTP_MAX_HEADERS) {
            http_reply_and_close(req, 431, "header_fields_too_large",
                                 "the request head is larger than 8192 bytes "
                                 "or has more than 48 header lines");
            return MHD_YES;
        }
        if (!http_path_canonical(req->path)) {
            http_reply_error(req, 404, "not_found", NULL,
                             "no such path (paths must be canonical: no empty, '.' "
                             "or '..' segments, no encoded '/', '\\' or NUL)");
            return MHD_YES;
        }
        if (http_router_find(s, req) < 0) {
            http_reply_error(req, 404, "not_found", NULL, "malformed path");
            return MHD_YES;
        }
        /* Browser-origin defences, from the head alone: a refused request's body is never read. */
        http_origin_refusal why;
        if (http_origin_check(
                &s->origin, method, req->route && !req->route->upload_max,
                MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
                MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Origin"),
                MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
                MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH),
                MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING),
                &why) < 0) {
            log_info("refused %s %s: %s", method, req->path, why.code);
            http_reply_and_close(req, why.status, why.code, why.message);
            return MHD_YES;
        }
        size_t limit = req->route && req->route->upload_max ? req->route->upload_max : s->cfg.max_body;
        const char *cl = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > limit) {
            http_reply_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
            http_reply_error(req, 413, "body_too_large", NULL, "request body exceeds %zu bytes", limit);
            return MHD_YES;
        }
        if (req->route && req->route->upload_max && http_router_authorised(req)) {
            char tmpl[PATH_MAX];
            snprintf(tmpl, sizeof tmpl, "%s/upload-XXXXXX", s->upload_dir ? s->upload_dir : "/tmp");
            req->upload_fd = mkstemp(tmpl);
            if (req->upload_fd < 0 || !(req->upload_path = http_strdup(tmpl))) {
                http_reply_error(req, 500, "internal", NULL, "cannot store the upload");
                return MHD_YES;
            }
        }
        return MHD_YES;
    }
    if (req->deferred) {
        /* A heavy request, back from the compute pool with its answer (see http_compute.h). */
        if (req->pending) {
            if (MHD_queue_response(connection, (unsigned)req->pending_status, req->pending) != MHD_YES)
                log_warn("could not queue the reply to %s %s", req->method, req->path);
            MHD_destroy_response(req->pending);
            req->pending = NULL;
        }
        return MHD_YES;
    }
    if (*upload_data_size && req->upload_fd >= 0) {
        if (!req->body_too_large) {
            if (req->body_len + *upload_data_size > req->route->upload_max) {
                req->body_too_large = 1;
            } else {
                size_t off = 0;
                while (!req->upload_errno && off < *upload_data_size) {
                    ssize_t w = write(req->upload_fd, upload_data + off, *upload_data_size - off);
                    /* A full disk is answered once the body is read, not by closing the connection. */
                    if (w <= 0)
                        req->upload_errno = w < 0 && errno ? errno : ENOSPC;
                    else
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
    if (req->upload_errno && !req->body_too_large) {
        int full = req->upload_errno == ENOSPC || req->upload_errno == EDQUOT;
        http_reply_error(req, full ? 507 : 500, full ? "insufficient_storage" : "internal", NULL,
                         "the upload could not be stored: %s", strerror(req->upload_errno));
        return MHD_YES;
    }
    if (req->body_too_large) {
        size_t limit = req->route && req->route->upload_max ? req->route->upload_max : s->cfg.max_body;
        http_reply_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
        http_reply_error(req, 413, "body_too_large", NULL, "request body exceeds %zu bytes", limit);
        return MHD_YES;
    }
    http_router_dispatch(req);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)connection;
    (void)toe;
    http_server *s = cls;
    http_request *req = *con_cls;
    if (!req) return;
    /* Back to waiting: the next request's head has header_timeout from now. */
    http_admission_request_ends(s, req->conn);
    if (req->method && strcmp(req->method, "GET") && strcmp(req->method, "HEAD")) atomic_fetch_add(&s->changes, 1);
    int status = req->replied ? req->status : 0;
    if (status >= 100 && status < 600) atomic_fetch_add(&s->status_counts[status], 1);
    char shown[600];
    log_info("%s %s %d %.1fms", req->method ? req->method : "?",
             req->path ? http_log_safe(req->path, shown, sizeof shown) : "?", status, http_elapsed_ms(&req->started));
    http_request_free(req);
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
    if (listen(fd, 1024) < 0) {
        snprintf(err, errlen, "listen: %s", strerror(errno));
        close(fd);
        return -1;
    }
    getsockname(fd, (struct sockaddr *)&ss, &slen);
    *bound_port =
        ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

int http_server_listen(http_server *s, char *err, size_t errlen) {
    if (s->listen_fd >= 0) return 0;
    s->listen_fd = open_listen_socket(s->bind_addr, s->cfg.port, &s->port, err, errlen);
    return s->listen_fd < 0 ? -1 : 0;
}

int http_server_start(http_server *s, char *err, size_t errlen) {
    if (http_static_open(&s->statics, err, errlen) < 0) return -1;
    if (http_server_listen(s, err, errlen) < 0) return -1;
    unsigned threads = s->cfg.threads ? s->cfg.threads : 4;
    /* The front door (front_main) owns the listening socket and enforces the limits; libmicrohttpd
     * only gets connections whose first head has been checked. Its own limit is set well above
     * what the front door hands it, since each pool thread takes an equal share of it. */
    unsigned mhd_limit = 2 * (s->adm.max_conn + s->adm.max_streams) + 16 * threads;
    /* poll(), not epoll: libmicrohttpd 0.9.75's epoll mode treats a short read as "nothing more to
     * read", so a client's end of input that arrived with its request (as it does when the front
     * door hands a connection over) would go unseen until a timeout. */
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
            MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
        0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, mhd_limit, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MHD_POOL_BYTES, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, http_admission_on_connection, s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
        MHD_OPTION_UNESCAPE_CALLBACK, identity_unescape, NULL, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "libmicrohttpd could not start on %s:%d", s->bind_addr, s->port);
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    if (http_admission_start(s) < 0 || http_compute_start(s) < 0) {
        http_admission_stop(s);
        http_compute_stop(s);
        snprintf(err, errlen, "cannot start the connection acceptor: %s", strerror(errno));
        MHD_stop_daemon(s->daemon);
        s->daemon = NULL;
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    return 0;
}

int http_server_port(const http_server *s) { return s->port; }

uint64_t http_server_changes(const http_server *s) { return atomic_load(&s->changes); }

void http_server_status_counts(const http_server *s, uint64_t counts[600]) {
    for (int i = 0; i < 600; i++) counts[i] = atomic_load(&s->status_counts[i]);
}

void http_server_free(http_server *s) {
    if (!s) return;
    atomic_store(&s->stopping, 1);
    /* Stop accepting first: the front door ends, and with it the connections it still holds. */
    http_admission_stop(s);
    /* Then the compute pool, whose suspended connections libmicrohttpd must still take back. */
    http_compute_stop(s);
    if (s->daemon) {
        /* Then end live streams so their sleeping connections can finish. */
        http_streams_wake_all(&s->streams);
        MHD_stop_daemon(s->daemon);
    }
    if (s->listen_fd >= 0) close(s->listen_fd);
    http_router_free(&s->router);
    http_streams_destroy(&s->streams);
    http_admission_destroy(s);
    http_compute_destroy(s);
    http_static_free(&s->statics);
    http_origin_free(&s->origin);
    free(s->upload_dir);
    free(s->token);
    free(s->bind_addr);
    free(s);
}
