#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
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

#include "util/log.h"

#define MAX_ROUTES 128
#define MAX_SEGMENTS 16
#define MAX_PARAMS 4
#define MAX_REPLY_HEADERS 8
/* Connections answered with an error and drained before close, beyond the connection limits. */
#define REFUSAL_SLOTS 64
/* A refused connection is read (and the bytes dropped) this long before close, so that the
 * client reads the answer instead of a reset. */
#define LINGER_S 2.0
/* libmicrohttpd's per-connection memory. Half of it is the first read buffer (16 KiB, twice
 * HTTP_MAX_HEAD); each query argument, header and cookie becomes a 56-byte record in the other
 * half, and the Cookie header a copy: with the limits of http.h that is at most
 * (64 + 48 + 32) * 56 + 4096 = 12.2 KiB, which leaves room for the reply's header, so
 * libmicrohttpd never reaches its own limits, whose answers are HTML, on a request the front door
 * let through. Not larger: above 32 KiB libmicrohttpd maps each connection's memory with mmap(),
 * which made a new connection three times dearer. */
#define MHD_POOL_BYTES (32 * 1024)

/* Where a connection is. PENDING: accepted by the front door, its head not yet complete;
 * HANDOFF: given to libmicrohttpd, not yet seen there; IDLE: libmicrohttpd's, waiting for a
 * request; BUSY: a request is being handled; STREAM: carries a streaming reply; CLOSING: answered
 * with an error by the front door and being drained. */
typedef enum { CONN_FREE = 0, CONN_PENDING, CONN_HANDOFF, CONN_IDLE, CONN_BUSY, CONN_STREAM, CONN_CLOSING } conn_state;

typedef struct {
    conn_state state;
    int fd;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    unsigned char ip[16]; /* IPv4 as v4-mapped IPv6, so one address has one key */
    double since;         /* monotonic seconds when it entered its state */
    double deadline;      /* PENDING, IDLE: the head deadline; CLOSING: end of draining; HANDOFF: expiry */
    double accepted;
    int partial; /* IDLE: the request line of a next request has arrived */
    int served;  /* requests completed on this connection */
    int killed;  /* IDLE: shut down by the front door, libmicrohttpd closes it next */
} http_conn;

static void conn_enter(http_conn *c, conn_state st, double now);

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
    int suspended;            /* the connection sleeps until a wake */
    int pending_wake;         /* a wake arrived while the reader was running */
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
    /* The front door: accepts, applies the connection limits and the head deadline, checks each
     * new connection's first request head (http_head_check) and hands it to libmicrohttpd. */
    unsigned max_conn, max_per_ip, max_streams;
    double header_timeout_s;
    pthread_mutex_t conns_lock; /* the table below; PENDING and CLOSING slots change only in the front door */
    http_conn *conns;
    unsigned n_slots;
    pthread_t front;
    int front_started;
    int wake_pipe[2];
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
    int upload_errno; /* the upload could not be written to disk (ENOSPC, …): answered at its end */
    int replied;
    int status;
    struct timespec started;
    int upload_fd;
    char *upload_path;
    char *reply_headers[MAX_REPLY_HEADERS][2];
    int n_reply_headers;
    char **scratch; /* decoded query values, freed with the request */
    int n_scratch;
    http_conn *conn;   /* the connection's slot (NULL if untracked) */
    int seen;          /* the access handler has been called for it */
    int refuse_status; /* set from the request line (on_uri): answer this and close */
    const char *refuse_code, *refuse_message;
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

/* Percent-decodes src[0..len) into dst (at least len+1 bytes); '+' becomes ' ' when plus_is_space.
 * Returns the decoded length, or -1 on a malformed escape or a decoded NUL byte. */
static long http_url_decode(const char *src, size_t len, char *dst, int plus_is_space) {
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

static double mono_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 when p[0] does not start one. Reads
 * no byte past a NUL. */
static size_t utf8_seq_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

char *http_utf8_clean(const char *src, char *dst, size_t cap) {
    if (!cap) return dst;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)(src ? src : "");
    while (*p) {
        size_t n = utf8_seq_len(p);
        if (n) {
            if (o + n >= cap) break;
            memcpy(dst + o, p, n);
            o += n;
            p += n;
        } else {
            if (o + 4 >= cap) break;
            snprintf(dst + o, 5, "\\x%02X", *p);
            o += 4;
            p++;
        }
    }
    dst[o] = 0;
    return dst;
}

/* A request path fit for a log line: printable ASCII, every other byte as \xHH, cut to fit. */
static const char *log_safe(const char *src, char *dst, size_t cap) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p && o + 5 < cap; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '\\')
            dst[o++] = (char)*p;
        else
            o += (size_t)snprintf(dst + o, 5, "\\x%02X", *p);
    }
    dst[o] = 0;
    return dst;
}

int http_parse_event_id(const char *v, uint64_t *id) {
    if (!v) return -1;
    while (*v == ' ' || *v == '\t') v++;
    if (*v < '0' || *v > '9') return -1;
    uint64_t x = 0;
    while (*v >= '0' && *v <= '9') {
        unsigned d = (unsigned)(*v - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
        v++;
    }
    while (*v == ' ' || *v == '\t') v++;
    if (*v) return -1;
    *id = x;
    return 0;
}

/* ---- request heads ---------------------------------------------------------------------- */

static int is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int head_fail(http_head_check_result *res, int status, const char *code, const char *message) {
    res->status = status;
    res->code = code;
    res->message = message;
    return -1;
}

/* Finds the line starting at pos within buf[0..n): 1 with its length (CR of a CRLF excluded) and
 * the start of the next line, 0 when no LF follows yet, -1 at a CR not followed by LF. */
static int head_line(const char *buf, size_t n, size_t pos, size_t *len, size_t *next) {
    for (size_t i = pos; i < n; i++) {
        if (buf[i] == '\n') {
            *len = i - pos;
            *next = i + 1;
            return 1;
        }
        if (buf[i] == '\r') {
            if (i + 1 == n) return 0;
            if (buf[i + 1] != '\n') return -1;
            *len = i - pos;
            *next = i + 2;
            return 1;
        }
    }
    return 0;
}

static int value_is(const char *v, size_t n, const char *word) {
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    return n == strlen(word) && !strncasecmp(v, word, n);
}

int http_head_check(const char *buf, size_t len, int eof, http_head_check_result *res) {
    memset(res, 0, sizeof *res);
    size_t n = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD; /* the head must end within the limit */
    int more = len > HTTP_MAX_HEAD;                       /* bytes beyond the window exist */
    size_t pos = 0, ll = 0, next = 0;
    int k;
    /* Blank lines before a request line are skipped, as libmicrohttpd does. */
    while ((k = head_line(buf, n, pos, &ll, &next)) == 1 && ll == 0) pos = next;
    if (k < 0) return head_fail(res, 400, "bad_request", "bare CR in the request head");
    const char *line = buf + pos;
    size_t avail = k == 1 ? ll : n - pos;
    /* The method is checked as soon as it arrives, so a stray protocol (TLS, say) fails at once. */
    size_t i = 0;
    while (i < avail && is_tchar((unsigned char)line[i])) i++;
    if ((i < avail && line[i] != ' ') || i > 32 || (i == 0 && avail > 0))
        return head_fail(res, 400, "bad_request", "malformed request line");
    if (k == 0) {
        if (more) return head_fail(res, 414, "uri_too_long", "the request line is longer than the request head limit");
        if (eof && pos < len) return head_fail(res, 400, "bad_request", "incomplete request");
        return 0;
    }
    res->is_head = i == 4 && !memcmp(line, "HEAD", 4);
    size_t t0 = i + 1, j = t0;
    for (; j < ll && line[j] != ' '; j++) {
        unsigned char c = (unsigned char)line[j];
        if (c < 0x21 || c == 0x7f) return head_fail(res, 400, "bad_request", "control character in the request target");
    }
    if (j == t0) return head_fail(res, 400, "bad_request", "malformed request line");
    if (j - t0 > HTTP_MAX_TARGET)
        return head_fail(res, 414, "uri_too_long", "the request target is longer than 4096 bytes");
    if (j >= ll) return head_fail(res, 400, "bad_request", "the request line has no HTTP version");
    const char *v = line + j + 1;
    size_t vl = ll - j - 1;
    if (vl != 8 || memcmp(v, "HTTP/", 5) || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' || v[7] > '9')
        return head_fail(res, 400, "bad_request", "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return head_fail(res, 505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served");
    const char *q = memchr(line + t0, '?', j - t0);
    if (q) {
        size_t args = 1;
        for (const char *c = q + 1; c < line + j; c++) args += *c == '&';
        if (args > HTTP_MAX_QUERY_ARGS)
            return head_fail(res, 431, "too_many_query_arguments", "more than 64 query arguments");
    }
    int headers = 0, cookies = 0, has_cl = 0, has_te = 0;
    size_t cookie_bytes = 0;
    for (pos = next;; pos = next) {
        k = head_line(buf, n, pos, &ll, &next);
        if (k < 0) return head_fail(res, 400, "bad_request", "bare CR in the request head");
        if (k == 0) {
            if (more)
                return head_fail(res, 431, "header_fields_too_large", "the request head is larger than 8192 bytes");
            if (eof) return head_fail(res, 400, "bad_request", "incomplete request");
            return 0;
        }
        if (ll == 0) break;
        line = buf + pos;
        if (line[0] == ' ' || line[0] == '\t') return head_fail(res, 400, "bad_request", "folded header line");
        for (i = 0; i < ll && is_tchar((unsigned char)line[i]); i++) {}
        if (i == 0 || i >= ll || line[i] != ':') return head_fail(res, 400, "bad_request", "malformed header line");
        size_t name_len = i;
        const char *val = line + i + 1;
        size_t val_len = ll - i - 1;
        for (size_t m = 0; m < val_len; m++) {
            unsigned char c = (unsigned char)val[m];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return head_fail(res, 400, "bad_request", "control character in a header value");
        }
        if (++headers > HTTP_MAX_HEADERS)
            return head_fail(res, 431, "header_fields_too_large", "more than 48 header lines");
        if (name_len == 14 && !strncasecmp(line, "Content-Length", 14)) {
            if (has_cl++) return head_fail(res, 400, "bad_request", "repeated Content-Length");
            size_t a = 0, b = val_len;
            while (a < b && (val[a] == ' ' || val[a] == '\t')) a++;
            while (b > a && (val[b - 1] == ' ' || val[b - 1] == '\t')) b--;
            if (a == b) return head_fail(res, 400, "bad_request", "malformed Content-Length");
            uint64_t x = 0;
            for (size_t m = a; m < b; m++) {
                if (val[m] < '0' || val[m] > '9') return head_fail(res, 400, "bad_request", "malformed Content-Length");
                unsigned d = (unsigned)(val[m] - '0');
                if (x > ((uint64_t)INT64_MAX - d) / 10)
                    return head_fail(res, 413, "body_too_large", "Content-Length too large");
                x = x * 10 + d;
            }
        } else if (name_len == 17 && !strncasecmp(line, "Transfer-Encoding", 17)) {
            if (has_te++) return head_fail(res, 400, "bad_request", "repeated Transfer-Encoding");
            if (!value_is(val, val_len, "chunked"))
                return head_fail(res, 501, "not_implemented", "the only transfer coding served is chunked");
        } else if (name_len == 6 && !strncasecmp(line, "Cookie", 6)) {
            size_t a = 0, b = val_len;
            while (a < b && (val[a] == ' ' || val[a] == '\t')) a++;
            while (b > a && (val[b - 1] == ' ' || val[b - 1] == '\t')) b--;
            cookie_bytes += b - a;
            if (cookie_bytes > HTTP_MAX_COOKIE_BYTES)
                return head_fail(res, 431, "header_fields_too_large", "Cookie headers longer than 4096 bytes");
            cookies++;
            for (size_t m = 0; m < val_len; m++) cookies += val[m] == ';' || val[m] == ',';
            if (cookies > HTTP_MAX_COOKIES)
                return head_fail(res, 431, "header_fields_too_large", "more than 32 cookies");
        }
    }
    if (has_cl && has_te) return head_fail(res, 400, "bad_request", "both Content-Length and Transfer-Encoding");
    res->head_len = next;
    return 1;
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
    s->max_conn = cfg->max_connections ? cfg->max_connections : 256;
    s->max_per_ip = cfg->max_connections_per_ip ? cfg->max_connections_per_ip : 128;
    s->max_streams = cfg->max_streams ? cfg->max_streams : 256;
    s->header_timeout_s = (cfg->header_timeout_ms ? cfg->header_timeout_ms : 10000) / 1e3;
    s->n_slots = s->max_conn + s->max_streams + REFUSAL_SLOTS;
    s->conns = calloc(s->n_slots, sizeof *s->conns);
    s->wake_pipe[0] = s->wake_pipe[1] = -1;
    if (!s->conns || pipe2(s->wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(s->conns);
        free(s->bind_addr);
        free(s->static_dir);
        free(s->upload_dir);
        free(s->token);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->streams_lock, NULL);
    pthread_mutex_init(&s->conns_lock, NULL);
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
    if (copy[0] != '/') {
        free(r->pattern);
        free(copy);
        return -1;
    }
    for (char *tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (n == MAX_SEGMENTS) {
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
static int http_path_canonical(const char *raw) {
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

/* ---- request accessors ------------------------------------------------------------------ */

const char *http_request_upload_path(const http_request *req, size_t *size) {
    if (size) *size = req->body_len;
    return req->upload_path;
}
const char *http_request_path(const http_request *req) { return req->path; }

const char *http_request_param(const http_request *req, const char *name) {
    for (int i = 0; i < req->n_params; i++)
        if (!strcmp(req->param_names[i], name)) return req->param_values[i];
    return NULL;
}

static const char *keep_scratch(http_request *req, char *s) {
    char **grown = realloc(req->scratch, (size_t)(req->n_scratch + 1) * sizeof *grown);
    if (!grown) {
        free(s);
        return NULL;
    }
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
    if (http_url_decode(raw, len, out, 1) < 0) {
        free(out);
        return NULL;
    }
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
    if (http_url_decode(raw, len, out, 1) < 0) {
        free(out);
        out = dup_str("");
        if (!out) return MHD_NO;
    }
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

json_t *http_request_json_object(http_request *req) {
    json_error_t jerr;
    if (req->body_len == 0) {
        http_reply_error(req, 400, "bad_json", NULL, "request body must be a JSON object");
        return NULL;
    }
    json_t *v = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        http_reply_error(req, 400, "bad_json", NULL, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                         jerr.text);
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
    if (!n || !v) {
        free(n);
        free(v);
        return;
    }
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

void http_reply_take(http_request *req, int status, const char *content_type, char *body, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) free(body);
    queue(req, status, resp, content_type);
}

void http_reply_json(http_request *req, int status, json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(body);
    if (!text) {
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"the reply could not be built\"}}";
        http_reply_bytes(req, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    size_t len = strlen(text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) free(text);
    queue(req, status, resp, "application/json");
}

void http_reply_error(http_request *req, int status, const char *code, const char *field, const char *fmt, ...) {
    char raw[512], message[2048], clean_field[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* Messages echo request bytes (paths, names), which need not be UTF-8: JSON strings must be. */
    http_utf8_clean(raw, message, sizeof message);
    json_t *err = json_pack("{s:s, s:s}", "code", code, "message", message);
    if (err && field)
        json_object_set_new(err, "field", json_string(http_utf8_clean(field, clean_field, sizeof clean_field)));
    http_reply_json(req, status, err ? json_pack("{s:o}", "error", err) : NULL);
}

/* Answers an error and closes the connection afterwards (the request is not read any further). */
static void reply_and_close(http_request *req, int status, const char *code, const char *message) {
    http_reply_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
    http_reply_error(req, status, code, NULL, "%s", message);
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
    if (st->prev)
        st->prev->next = st->next;
    else
        s->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    pthread_mutex_unlock(&s->streams_lock);
    /* close() must guarantee no further http_stream_wake() on st once it returns. */
    st->close(st->ctx);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

http_stream *http_reply_stream(http_request *req, const char *content_type, http_stream_read_fn read,
                               http_stream_close_fn close, void *ctx) {
    http_server *s = req->server;
    if (req->conn) {
        /* Streams have their own limit, so that open viewers never take the API's connections. */
        pthread_mutex_lock(&s->conns_lock);
        unsigned streams = 0;
        for (unsigned i = 0; i < s->n_slots; i++) streams += s->conns[i].state == CONN_STREAM;
        if (streams >= s->max_streams) {
            pthread_mutex_unlock(&s->conns_lock);
            close(ctx);
            http_reply_header(req, "Retry-After", "1");
            http_reply_error(req, 503, "too_many_streams", NULL, "the server has too many live streams open (%u)",
                             s->max_streams);
            return NULL;
        }
        conn_enter(req->conn, CONN_STREAM, mono_now());
        pthread_mutex_unlock(&s->conns_lock);
    }
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
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, st, stream_free);
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

/* ---- connections and the front door ------------------------------------------------------ */

static const char *reason_phrase(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Error";
    }
}

/* The complete HTTP answer for an error decided outside libmicrohttpd, in buf. Returns its length
 * (0 if it does not fit). */
static size_t format_refusal(char *buf, size_t cap, int status, const char *code, const char *message, int head_only) {
    char body[512];
    int bl = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, message);
    if (bl < 0 || (size_t)bl >= sizeof body) return 0;
    int n = snprintf(buf, cap,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     "X-Content-Type-Options: nosniff\r\nConnection: close\r\n%s\r\n%s",
                     status, reason_phrase(status), bl, status == 429 || status == 503 ? "Retry-After: 1\r\n" : "",
                     head_only ? "" : body);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

static void ip_key(const struct sockaddr_storage *ss, unsigned char key[16]) {
    memset(key, 0, 16);
    if (ss->ss_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
}

static const char *addr_text(const http_conn *c, char *buf, size_t len) {
    if (c->addr.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&c->addr)->sin6_addr, buf, (socklen_t)len);
    else
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&c->addr)->sin_addr, buf, (socklen_t)len);
    return buf;
}

static void conn_enter(http_conn *c, conn_state st, double now) {
    c->state = st;
    c->since = now;
}

/* Counts against the connection limits: everything but streams, refusals and connections the
 * front door has already shut down. Called with conns_lock held. */
static int conn_counts(const http_conn *c) {
    return (c->state == CONN_PENDING || c->state == CONN_HANDOFF || c->state == CONN_IDLE || c->state == CONN_BUSY) &&
           !c->killed;
}

/* Ends a connection that is waiting for a request. One of the front door's own is closed; one of
 * libmicrohttpd's is shut down, which libmicrohttpd sees as the client leaving (the slot is freed
 * in on_connection, before libmicrohttpd closes the descriptor, so the descriptor named here is
 * still that connection's). With `answer` a JSON 408 goes first. Called with conns_lock held. */
static void conn_end_waiting(http_server *s, http_conn *c, int answer) {
    if (answer) {
        char msg[1024];
        size_t n =
            format_refusal(msg, sizeof msg, 408, "request_timeout", "the request head did not arrive in time", 0);
        if (n && send(c->fd, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) atomic_fetch_add(&s->status_counts[408], 1);
    }
    if (c->state == CONN_PENDING) {
        if (answer) {
            shutdown(c->fd, SHUT_WR);
            conn_enter(c, CONN_CLOSING, mono_now());
            c->deadline = c->since + LINGER_S;
        } else {
            close(c->fd);
            c->state = CONN_FREE;
        }
    } else {
        shutdown(c->fd, SHUT_RDWR);
        c->killed = 1;
    }
}

/* A connection waiting for a request that may be closed to make room: one in the front door, or a
 * kept-alive one between requests. The oldest goes first. Called with conns_lock held. */
static int conn_evict_oldest(http_server *s, const unsigned char *ip) {
    http_conn *best = NULL;
    for (unsigned i = 0; i < s->n_slots; i++) {
        http_conn *c = &s->conns[i];
        int waiting = c->state == CONN_PENDING || (c->state == CONN_IDLE && !c->killed && (c->served || c->partial));
        if (!waiting || (ip && memcmp(c->ip, ip, 16) != 0)) continue;
        if (!best || c->since < best->since) best = c;
    }
    if (!best) return 0;
    char a[INET6_ADDRSTRLEN];
    log_debug("closing an idle connection from %s to make room", addr_text(best, a, sizeof a));
    conn_end_waiting(s, best, 0);
    return 1;
}

/* Answers a connection the front door owns with an error and starts draining it. */
static void conn_refuse(http_server *s, http_conn *c, int status, const char *code, const char *message,
                        int head_only) {
    char msg[1024];
    size_t n = format_refusal(msg, sizeof msg, status, code, message, head_only);
    if (n) send(c->fd, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    atomic_fetch_add(&s->status_counts[status], 1);
    char a[INET6_ADDRSTRLEN];
    log_info("refused %d %s from %s", status, code, addr_text(c, a, sizeof a));
    shutdown(c->fd, SHUT_WR);
    pthread_mutex_lock(&s->conns_lock);
    conn_enter(c, CONN_CLOSING, mono_now());
    c->deadline = c->since + LINGER_S;
    pthread_mutex_unlock(&s->conns_lock);
}

static void front_readable(http_server *s, http_conn *c, short revents, char *buf);

/* Accepts what is waiting; returns -1 when out of descriptors (the caller pauses accepting). A
 * request that came with its connection is looked at at once (buf: HTTP_MAX_HEAD + 1 bytes). */
static int front_accept(http_server *s, char *buf) {
    for (int round = 0; round < 64; round++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                log_warn("cannot accept a connection: %s", strerror(errno));
                return -1;
            }
            return 0;
        }
        unsigned char ip[16];
        ip_key(&ss, ip);
        double now = mono_now();
        pthread_mutex_lock(&s->conns_lock);
        http_conn *slot = NULL;
        unsigned total = 0, from_ip = 0;
        for (unsigned i = 0; i < s->n_slots; i++) {
            http_conn *c = &s->conns[i];
            /* A descriptor number that comes back from accept() was closed: a handoff still
             * waiting under that number was refused inside libmicrohttpd. */
            if (c->state == CONN_HANDOFF && c->fd == fd) c->state = CONN_FREE;
            if (c->state == CONN_FREE) {
                if (!slot) slot = c;
                continue;
            }
            if (!conn_counts(c)) continue;
            total++;
            from_ip += !memcmp(c->ip, ip, 16);
        }
        if (!slot) {
            pthread_mutex_unlock(&s->conns_lock);
            close(fd);
            log_warn("connection table full: a connection was closed unanswered");
            continue;
        }
        int refuse = 0;
        if (from_ip >= s->max_per_ip) {
            if (!conn_evict_oldest(s, ip)) refuse = 429;
        } else if (total >= s->max_conn) {
            if (!conn_evict_oldest(s, NULL)) refuse = 503;
        }
        memset(slot, 0, sizeof *slot);
        slot->fd = fd;
        memcpy(&slot->addr, &ss, sl);
        slot->addrlen = sl;
        memcpy(slot->ip, ip, 16);
        slot->accepted = now;
        conn_enter(slot, CONN_PENDING, now);
        slot->deadline = now + s->header_timeout_s;
        pthread_mutex_unlock(&s->conns_lock);
        if (refuse == 429)
            conn_refuse(s, slot, 429, "too_many_connections", "too many connections from this address", 0);
        else if (refuse == 503)
            conn_refuse(s, slot, 503, "too_many_connections", "the server has too many connections", 0);
        else
            front_readable(s, slot, 0, buf);
    }
    return 0;
}

/* New bytes (or the end) on a connection whose head is not complete. The bytes are only peeked, so
 * that libmicrohttpd reads the same ones; SO_RCVLOWAT keeps poll() quiet until more arrive. */
static void front_readable(http_server *s, http_conn *c, short revents, char *buf) {
    ssize_t r = recv(c->fd, buf, HTTP_MAX_HEAD + 1, MSG_PEEK);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        pthread_mutex_lock(&s->conns_lock);
        close(c->fd);
        c->state = CONN_FREE;
        pthread_mutex_unlock(&s->conns_lock);
        return;
    }
    int eof = (revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
    http_head_check_result res;
    int k = http_head_check(buf, (size_t)r, eof, &res);
    if (k < 0) {
        conn_refuse(s, c, res.status, res.code, res.message, res.is_head);
        return;
    }
    if (k == 0) {
        if (eof) {
            pthread_mutex_lock(&s->conns_lock);
            close(c->fd);
            c->state = CONN_FREE;
            pthread_mutex_unlock(&s->conns_lock);
            return;
        }
        int lowat = (int)r + 1;
        setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
        return;
    }
    int one = 1;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    int fd = c->fd;
    struct sockaddr_storage ss = c->addr;
    socklen_t sl = c->addrlen;
    pthread_mutex_lock(&s->conns_lock);
    conn_enter(c, CONN_HANDOFF, mono_now());
    c->deadline = c->since + 10.0;
    pthread_mutex_unlock(&s->conns_lock);
    if (MHD_add_connection(s->daemon, fd, (struct sockaddr *)&ss, sl) != MHD_YES) {
        log_warn("libmicrohttpd refused a connection: %s", strerror(errno));
        pthread_mutex_lock(&s->conns_lock);
        if (c->state == CONN_HANDOFF && c->fd == fd) c->state = CONN_FREE; /* it closed fd */
        pthread_mutex_unlock(&s->conns_lock);
    }
}

static void front_drain(http_server *s, http_conn *c, char *buf) {
    ssize_t r = recv(c->fd, buf, HTTP_MAX_HEAD, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        pthread_mutex_lock(&s->conns_lock);
        close(c->fd);
        c->state = CONN_FREE;
        pthread_mutex_unlock(&s->conns_lock);
    }
}

/* Deadlines: heads that did not arrive in time (in the front door or, for a next request on a
 * kept-alive connection, in libmicrohttpd), drains that lasted long enough, handoffs that
 * libmicrohttpd never took up. */
static void front_expire(http_server *s) {
    double now = mono_now();
    pthread_mutex_lock(&s->conns_lock);
    for (unsigned i = 0; i < s->n_slots; i++) {
        http_conn *c = &s->conns[i];
        if (c->state == CONN_FREE || c->deadline > now) continue;
        if (c->state == CONN_PENDING || (c->state == CONN_IDLE && !c->killed)) {
            int ll = 0;
            if (c->state == CONN_PENDING) {
                char b[1];
                ll = recv(c->fd, b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
            } else {
                ll = c->partial;
            }
            char a[INET6_ADDRSTRLEN];
            if (ll)
                log_info("closing a connection from %s: its request head did not arrive within %.1f s",
                         addr_text(c, a, sizeof a), s->header_timeout_s);
            conn_end_waiting(s, c, ll);
        } else if (c->state == CONN_CLOSING) {
            close(c->fd);
            c->state = CONN_FREE;
        } else if (c->state == CONN_HANDOFF) {
            c->state = CONN_FREE;
        }
    }
    pthread_mutex_unlock(&s->conns_lock);
}

static void *front_main(void *arg) {
    http_server *s = arg;
    struct pollfd *pfd = malloc((s->n_slots + 2) * sizeof *pfd);
    unsigned *slot_of = malloc(s->n_slots * sizeof *slot_of);
    char *buf = malloc(HTTP_MAX_HEAD + 1);
    if (!pfd || !slot_of || !buf) {
        log_error("out of memory in the connection acceptor: no new connections");
        free(pfd);
        free(slot_of);
        free(buf);
        return NULL;
    }
    double accept_paused_until = 0;
    while (!atomic_load(&s->stopping)) {
        nfds_t n = 0;
        double now = mono_now(), next = now + 0.25, due = now + 3600;
        pfd[n++] = (struct pollfd){.fd = s->wake_pipe[0], .events = POLLIN};
        /* Out of descriptors, the listening socket would stay readable: leave it a moment. */
        pfd[n++] = (struct pollfd){.fd = now < accept_paused_until ? -1 : s->listen_fd, .events = POLLIN};
        pthread_mutex_lock(&s->conns_lock);
        for (unsigned i = 0; i < s->n_slots; i++) {
            http_conn *c = &s->conns[i];
            if (c->state == CONN_FREE) continue;
            /* Only waiting states have a deadline (a busy or streaming slot keeps a stale one). */
            int timed = c->state == CONN_PENDING || c->state == CONN_CLOSING || c->state == CONN_HANDOFF ||
                        (c->state == CONN_IDLE && !c->killed);
            if (timed && c->deadline < due) due = c->deadline;
            if (c->state != CONN_PENDING && c->state != CONN_CLOSING) continue;
            slot_of[n - 2] = i;
            pfd[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN | POLLRDHUP};
        }
        pthread_mutex_unlock(&s->conns_lock);
        if (due < next) next = due;
        double wait_ms = (next - now) * 1e3 + 1;
        int rc = poll(pfd, n, wait_ms < 0 ? 0 : wait_ms > 250 ? 250 : (int)wait_ms);
        if (rc < 0 && errno != EINTR) {
            log_error("poll: %s", strerror(errno));
            break;
        }
        if (pfd[0].revents) {
            char drain[64];
            while (read(s->wake_pipe[0], drain, sizeof drain) > 0) {}
        }
        if (atomic_load(&s->stopping)) break;
        for (nfds_t k = 2; rc > 0 && k < n; k++) {
            if (!pfd[k].revents) continue;
            http_conn *c = &s->conns[slot_of[k - 2]];
            if (c->state == CONN_PENDING)
                front_readable(s, c, pfd[k].revents, buf);
            else if (c->state == CONN_CLOSING)
                front_drain(s, c, buf);
        }
        if ((pfd[1].revents & POLLIN) && front_accept(s, buf) < 0) accept_paused_until = mono_now() + 0.1;
        if (mono_now() >= due) front_expire(s);
    }
    free(pfd);
    free(slot_of);
    free(buf);
    return NULL;
}

/* libmicrohttpd took up (or let go of) a connection the front door handed it. */
static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = ci ? ci->connect_fd : -1;
        *socket_context = NULL;
        pthread_mutex_lock(&s->conns_lock);
        for (unsigned i = 0; i < s->n_slots; i++) {
            http_conn *c = &s->conns[i];
            if (c->state != CONN_HANDOFF || c->fd != fd) continue;
            conn_enter(c, CONN_IDLE, mono_now());
            c->deadline = c->since + s->header_timeout_s;
            *socket_context = c;
            break;
        }
        pthread_mutex_unlock(&s->conns_lock);
        if (!*socket_context) log_warn("libmicrohttpd started an untracked connection (fd %d)", fd);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        http_conn *c = *socket_context;
        if (!c) return;
        pthread_mutex_lock(&s->conns_lock);
        c->state = CONN_FREE;
        pthread_mutex_unlock(&s->conns_lock);
        *socket_context = NULL;
    }
}

static http_conn *conn_of(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
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

static http_request *request_new(http_server *s, struct MHD_Connection *connection) {
    http_request *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    /* Set before any early reply: on_completed closes upload_fd when it is >= 0. */
    req->upload_fd = -1;
    clock_gettime(CLOCK_MONOTONIC, &req->started);
    req->server = s;
    req->connection = connection;
    req->conn = conn_of(connection);
    return req;
}

/* Called by libmicrohttpd with the request target as soon as a request line has arrived, before it
 * parses the query. The front door has checked the first request of each connection; the ones
 * after it on a kept-alive connection are checked here (and in on_request) against the same
 * limits. The request starts here, so on_request finds it in *con_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection) {
    http_server *s = cls;
    http_request *req = request_new(s, connection);
    if (!req) return NULL; /* on_request tries again */
    if (req->conn) {
        pthread_mutex_lock(&s->conns_lock);
        req->conn->partial = 1;
        pthread_mutex_unlock(&s->conns_lock);
    }
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
        if (!req && !(req = request_new(s, connection))) return MHD_NO;
        *con_cls = req;
        req->seen = 1;
        req->method = method;
        req->path = dup_str(url);
        if (req->conn) {
            pthread_mutex_lock(&s->conns_lock);
            int killed = req->conn->killed;
            if (!killed) {
                conn_enter(req->conn, CONN_BUSY, mono_now());
                req->conn->partial = 0;
            }
            pthread_mutex_unlock(&s->conns_lock);
            if (killed) return MHD_NO;
        }
        if (!req->path) return MHD_NO;
        if (req->refuse_status) {
            reply_and_close(req, req->refuse_status, req->refuse_code, req->refuse_message);
            return MHD_YES;
        }
        const union MHD_ConnectionInfo *hs =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        if ((hs && hs->header_size > HTTP_MAX_HEAD) ||
            MHD_get_connection_values(connection, MHD_HEADER_KIND, NULL, NULL) > HTTP_MAX_HEADERS) {
            reply_and_close(req, 431, "header_fields_too_large",
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
        const char *m = !strcmp(method, "HEAD") ? "GET" : method;
        for (int i = 0; i < s->n_routes; i++) {
            if (strcmp(s->routes[i].method, m) != 0) continue;
            int r = route_match(&s->routes[i], req->path, req);
            if (r == 1) {
                req->route = &s->routes[i];
                break;
            }
            if (r < 0) {
                http_reply_error(req, 404, "not_found", NULL, "malformed path");
                return MHD_YES;
            }
        }
        size_t limit = req->route && req->route->upload_max ? req->route->upload_max : s->cfg.max_body;
        const char *cl = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > limit) {
            http_reply_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
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
    if (req->conn) {
        /* Back to waiting: the next request's head has header_timeout from now. */
        pthread_mutex_lock(&s->conns_lock);
        http_conn *c = req->conn;
        if (!c->killed && (c->state == CONN_BUSY || c->state == CONN_STREAM || c->state == CONN_IDLE)) {
            conn_enter(c, CONN_IDLE, mono_now());
            c->deadline = c->since + s->header_timeout_s;
            c->partial = 0;
            c->served++;
        }
        pthread_mutex_unlock(&s->conns_lock);
    }
    int status = req->replied ? req->status : 0;
    if (status >= 100 && status < 600) atomic_fetch_add(&s->status_counts[status], 1);
    char shown[600];
    log_info("%s %s %d %.1fms", req->method ? req->method : "?",
             req->path ? log_safe(req->path, shown, sizeof shown) : "?", status, elapsed_ms(&req->started));
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
    if (s->static_dir) {
        s->static_real = realpath(s->static_dir, NULL);
        if (!s->static_real) {
            snprintf(err, errlen, "static directory %s: %s", s->static_dir, strerror(errno));
            return -1;
        }
    }
    if (http_server_listen(s, err, errlen) < 0) return -1;
    unsigned threads = s->cfg.threads ? s->cfg.threads : 4;
    /* The front door (front_main) owns the listening socket and enforces the limits; libmicrohttpd
     * only gets connections whose first head has been checked. Its own limit is set well above
     * what the front door hands it, since each pool thread takes an equal share of it. */
    unsigned mhd_limit = 2 * (s->max_conn + s->max_streams) + 16 * threads;
    /* poll(), not epoll: libmicrohttpd 0.9.75's epoll mode treats a short read as "nothing more to
     * read", so a client's end of input that arrived with its request (as it does when the front
     * door hands a connection over) would go unseen until a timeout. */
    s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                                     MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
                                 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                 MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                 (size_t)MHD_POOL_BYTES, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                                 MHD_OPTION_UNESCAPE_CALLBACK, identity_unescape, NULL, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "libmicrohttpd could not start on %s:%d", s->bind_addr, s->port);
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    int flags = fcntl(s->listen_fd, F_GETFL);
    if (flags < 0 || fcntl(s->listen_fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        pthread_create(&s->front, NULL, front_main, s) != 0) {
        snprintf(err, errlen, "cannot start the connection acceptor: %s", strerror(errno));
        MHD_stop_daemon(s->daemon);
        s->daemon = NULL;
        close(s->listen_fd);
        s->listen_fd = -1;
        return -1;
    }
    s->front_started = 1;
    return 0;
}

int http_server_port(const http_server *s) { return s->port; }

void http_server_status_counts(const http_server *s, uint64_t counts[600]) {
    for (int i = 0; i < 600; i++) counts[i] = atomic_load(&s->status_counts[i]);
}

void http_server_free(http_server *s) {
    if (!s) return;
    atomic_store(&s->stopping, 1);
    if (s->front_started) {
        /* Stop accepting first: the front door ends, and with it the connections it still holds. */
        if (write(s->wake_pipe[1], "x", 1) < 0) { /* the pipe is full: a wake is pending anyway */
        }
        pthread_join(s->front, NULL);
        pthread_mutex_lock(&s->conns_lock);
        for (unsigned i = 0; i < s->n_slots; i++) {
            http_conn *c = &s->conns[i];
            if (c->state == CONN_PENDING || c->state == CONN_CLOSING) {
                close(c->fd);
                c->state = CONN_FREE;
            }
        }
        pthread_mutex_unlock(&s->conns_lock);
    }
    if (s->daemon) {
        /* Then end live streams so their sleeping connections can finish. */
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
    pthread_mutex_destroy(&s->conns_lock);
    free(s->conns);
    close(s->wake_pipe[0]);
    close(s->wake_pipe[1]);
    free(s->static_real);
    free(s->upload_dir);
    free(s->token);
    free(s->bind_addr);
    free(s->static_dir);
    free(s);
}
