/* HTTP request handling end to end: each input is the raw bytes a client sends on one connection
 * (request line, query, headers, body, maybe several pipelined requests) to a real http_server in
 * this process, over loopback TCP; the client then half-closes and reads until the server closes.
 * Routes cover parameters, query arguments, headers, JSON bodies, uploads, error messages that
 * echo request bytes, file and stream replies, bearer tokens and static files.
 *
 * Checked: no crash or sanitizer report anywhere in the server; every connection is closed by the
 * server within a few seconds of the client's end of input (a held connection aborts); every
 * answer starts with an HTTP/1.1 status line; every JSON answer parses; and http_head_check's
 * verdict on the input is consistent with itself. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "util/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static http_server *srv;
static int port;
static char dir[256];

static int add_query(const char *key, const char *value, void *ctx) {
    /* Keys and values need not be UTF-8: jansson refuses those (and drops the value). */
    json_object_set_new(ctx, key, json_string(value));
    return 0;
}

static void h_item(http_request *req, const http_handler_ctx *ctx) {
    (void)ctx;
    json_t *o = json_object();
    json_t *q = json_object();
    const char *id = http_request_param(req, "id"), *name = http_request_param(req, "name");
    if (id) json_object_set_new(o, "id", json_string(id));
    if (name) json_object_set_new(o, "name", json_string(name));
    http_request_each_query(req, add_query, q);
    json_object_set_new(o, "query", q);
    const char *h = http_request_header(req, "X-Test");
    if (h) json_object_set_new(o, "x_test", json_string(h));
    const char *keys = http_request_query(req, "keys");
    if (keys) json_object_set_new(o, "keys", json_string(keys));
    http_reply_json(req, 200, o);
}

static void h_json(http_request *req, const http_handler_ctx *ctx) {
    (void)ctx;
    json_t *o = http_request_json_object(req);
    if (!o) return;
    http_reply_json(req, 201, o);
}

static void h_error(http_request *req, const http_handler_ctx *ctx) {
    (void)ctx;
    const char *v = http_request_query(req, "v");
    http_reply_error(req, 422, "invalid_field", http_request_query(req, "f"), "bad value '%s' at %s", v ? v : "",
                     http_request_path(req));
}

static void h_upload(http_request *req, const http_handler_ctx *ctx) {
    (void)ctx;
    size_t n = 0;
    const char *p = http_request_upload_path(req, &n);
    http_reply_json(req, 201, json_pack("{s:b, s:I}", "stored", p != NULL, "bytes", (json_int_t)n));
}

static void h_file(http_request *req, const http_handler_ctx *ctx) {
    (void)ctx;
    char path[300];
    snprintf(path, sizeof path, "%s/static/index.html", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0) close(fd);
        http_reply_error(req, 500, "internal", NULL, "no file");
        return;
    }
    http_reply_fd(req, 200, "text/html", fd, (uint64_t)st.st_size);
}

typedef struct {
    int chunks;
} stream_ctx;

static ssize_t stream_read(void *ctx, char *buf, size_t max) {
    stream_ctx *c = ctx;
    if (c->chunks++ >= 2 || max < 16) return -1;
    memcpy(buf, "data: tick\n\n", 12);
    return 12;
}

static void stream_close(void *ctx) { free(ctx); }

static void h_stream(http_request *req, const http_handler_ctx *ctx) {
    (void)ctx;
    stream_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    http_reply_stream(req, "text/event-stream", stream_read, stream_close, c);
}

static void h_silent(http_request *req, const http_handler_ctx *ctx) {
    (void)req;
    (void)ctx; /* answers nothing: the layer must answer 500 */
}

static void write_file(const char *rel, const char *text) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    log_set_level(LOG_ERROR);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fuzz-http-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) abort();
    char p[300];
    snprintf(p, sizeof p, "%s/static", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/static/js", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/static/vendor", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/upload", dir);
    mkdir(p, 0755);
    write_file("static/index.html", "<!doctype html><title>fuzz</title>\n");
    write_file("static/js/app.js", "export const x = 1;\n");
    write_file("static/vendor/lib.js", "/* vendored */\n");
    write_file("secret.txt", "outside the static tree\n");
    char static_dir[300], upload_dir[300];
    snprintf(static_dir, sizeof static_dir, "%s/static", dir);
    snprintf(upload_dir, sizeof upload_dir, "%s/upload", dir);
    http_config cfg = {.bind_addr = "127.0.0.1",
                       .port = 0,
                       .static_dir = static_dir,
                       .max_body = 4096,
                       .threads = 2,
                       .header_timeout_ms = 2000,
                       .upload_dir = upload_dir,
                       .token = "fuzz-token",
                       .private_reads = 0};
    srv = http_server_new(&cfg);
    if (!srv) abort();
    int bad = 0;
    bad |= http_route(srv, "GET", "/api/health", h_item);
    bad |= http_route(srv, "GET", "/api/items/{id}", h_item);
    bad |= http_route(srv, "GET", "/api/items/{id}/sub/{name}", h_item);
    bad |= http_route(srv, "PATCH", "/api/items/{id}", h_json);
    bad |= http_route(srv, "POST", "/api/items", h_json);
    bad |= http_route(srv, "GET", "/api/error", h_error);
    bad |= http_route(srv, "GET", "/api/file", h_file);
    bad |= http_route(srv, "GET", "/api/stream", h_stream);
    bad |= http_route(srv, "GET", "/api/silent", h_silent);
    bad |= http_route_upload(srv, "POST", "/api/upload", h_upload, 8192);
    char err[256];
    if (bad || http_server_start(srv, err, sizeof err) < 0) {
        fprintf(stderr, "fuzz_http: cannot start the server: %s\n", bad ? "bad route" : err);
        abort();
    }
    port = http_server_port(srv);
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Checks the front door's parser on the input itself. */
static void check_head(const uint8_t *data, size_t size) {
    http_head_check_result r;
    int k = http_head_check((const char *)data, size, 0, &r);
    if (k == 1 && (r.head_len == 0 || r.head_len > size || r.head_len > HTTP_MAX_HEAD || data[r.head_len - 1] != '\n'))
        abort();
    if (k < 0 && (r.status < 400 || r.status > 599 || !r.code || !r.message)) abort();
    /* The end of input only decides about heads that are still incomplete. */
    if (k != 0 && size > 1) {
        http_head_check_result r2;
        int k2 = http_head_check((const char *)data, size, 1, &r2);
        if (k2 != k || (k == 1 && r2.head_len != r.head_len) || (k < 0 && r2.status != r.status)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 64 * 1024) return -1;
    check_head(data, size);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 50; attempt++) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) abort();
        if (connect(fd, (struct sockaddr *)&to, sizeof to) == 0) break;
        int e = errno;
        close(fd);
        fd = -1;
        if (e != EADDRNOTAVAIL && e != EAGAIN && e != EINTR) {
            fprintf(stderr, "fuzz_http: cannot connect to the server: %s\n", strerror(e));
            abort();
        }
        struct timespec pause = {0, 20 * 1000000L}; /* local ports run out: wait for some */
        nanosleep(&pause, NULL);
    }
    if (fd < 0) abort();
    fcntl(fd, F_SETFL, O_NONBLOCK);
    static char buf[1 << 17];
    size_t off = 0, got = 0;
    int closed = 0, shut = 0;
    double deadline = now_ms() + 8000;
    while (!closed) {
        if (off == size && !shut) {
            shutdown(fd, SHUT_WR);
            shut = 1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN | (off < size ? POLLOUT : 0)};
        double left = deadline - now_ms();
        if (left <= 0) {
            fprintf(stderr, "fuzz_http: the server held the connection %s\n",
                    shut ? "after the input ended" : "without reading the input");
            abort();
        }
        if (poll(&p, 1, (int)left) <= 0) continue;
        if (p.revents & POLLOUT && off < size) {
            ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                off = size; /* the server stopped reading */
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                closed = 1;
            else if (n > 0)
                got = got + (size_t)n < sizeof buf - 1 ? got + (size_t)n : 0;
        }
    }
    /* The server has closed: end with a reset, so no local port waits in TIME_WAIT. */
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    buf[got] = 0;
    if (got && strncmp(buf, "HTTP/1.1 ", 9) != 0) {
        fprintf(stderr, "fuzz_http: an answer that is not HTTP/1.1: %.40s\n", buf);
        abort();
    }
    /* Every JSON body must parse. Only the first answer is checked (pipelined ones follow it). */
    char *eoh = strstr(buf, "\r\n\r\n");
    if (eoh && strstr(buf, "Content-Type: application/json") && strstr(buf, "Content-Type: application/json") < eoh &&
        strncmp(buf, "HTTP/1.1 304", 12) != 0) {
        const char *cl = strstr(buf, "Content-Length: ");
        size_t len = cl && cl < eoh ? strtoul(cl + 16, NULL, 10) : strlen(eoh + 4);
        if (len <= strlen(eoh + 4) && strstr(buf, "\r\nContent-Length: ")) {
            json_error_t e;
            json_t *j = json_loadb(eoh + 4, len, 0, &e);
            if (!j && len > 0 && !memmem(data, size, "HEAD", 4)) {
                fprintf(stderr, "fuzz_http: a JSON answer that does not parse: %.200s\n", eoh + 4);
                abort();
            }
            json_decref(j);
        }
    }
    return 0;
}
