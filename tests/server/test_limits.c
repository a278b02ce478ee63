/* Connection limits, the request-head deadline and the errors answered before routing, over real
 * sockets against a real attnlabd:
 *  - idle sockets (hundreds of them) do not keep /api/health from answering;
 *  - a client that sends its head slowly (slowloris), first request or next one on a kept-alive
 *    connection, is answered 408 and closed at the deadline; one that sends nothing is closed;
 *  - too many query arguments get a JSON 431 and the connection is closed (libmicrohttpd 0.9.75
 *    alone never answered and held the connection);
 *  - what libmicrohttpd would answer in HTML (414, 431, 413, 505, 400, 501) comes back as JSON;
 *  - invalid UTF-8 echoed in an error message is escaped (it was a 500 "out of memory");
 *  - error messages carry no path of the server's;
 *  - past the per-address and total limits busy connections get JSON 429 / 503, and live streams
 *    have their own limit, so viewers cannot take the API's connections. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv; /* defaults, with --header-timeout 2 */
#define HEALTH "GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n"
#define HEALTH_CLOSE "GET /api/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
static harness_server small; /* tiny limits */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A non-blocking TCP socket to 127.0.0.1:port from address src (NULL: any). With wait, waits up
 * to 2 s for the connection; without, returns at once (the connect may still be in progress). */
static int tcp_open(int port, const char *src, int wait) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (src) {
        struct sockaddr_in a = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
            close(fd);
            return -1;
        }
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (connect(fd, (struct sockaddr *)&to, sizeof to) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    if (!wait) return fd;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&p, 1, 2000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends what the peer takes within timeout_ms; returns the bytes sent (a peer that answers early
 * and closes may take less). */
static size_t send_some(int fd, const char *buf, size_t len, int timeout_ms) {
    size_t off = 0;
    double end = now_ms() + timeout_ms;
    while (off < len && now_ms() < end) {
        ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR) break;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, 50);
    }
    return off;
}

static int send_str(int fd, const char *s) { return send_some(fd, s, strlen(s), 2000) == strlen(s) ? 0 : -1; }

typedef struct {
    int status;      /* 0: no response */
    char head[4096]; /* status line and headers */
    char body[8192]; /* body (cut) */
    size_t body_len;
    int closed;     /* the server closed the connection after the response (or instead of one) */
    size_t raw_len; /* bytes received in all */
} reply;

/* Reads one response (by Content-Length). With wait_close, then waits for the server to close. */
static void read_reply(int fd, int timeout_ms, int wait_close, reply *r) {
    memset(r, 0, sizeof *r);
    static char buf[1 << 16];
    size_t got = 0;
    buf[0] = 0;
    double end = now_ms() + timeout_ms;
    long need = -1; /* total bytes of the response once the head is parsed */
    while (now_ms() < end) {
        if (need >= 0 && got >= (size_t)need && !wait_close) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)(end - now_ms());
        if (poll(&p, 1, left > 0 ? left : 0) <= 0) break;
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            r->closed = 1;
            break;
        }
        if (n < 0) continue;
        got += (size_t)n;
        r->raw_len += (size_t)n;
        buf[got] = 0;
        if (need < 0) {
            char *eoh = strstr(buf, "\r\n\r\n");
            if (eoh) {
                size_t hl = (size_t)(eoh - buf) + 4;
                const char *cl = strcasestr(buf, "\r\nContent-Length:");
                need = (long)hl + (cl && cl < eoh ? atol(cl + 17) : 0);
            }
        }
        if (got == sizeof buf - 1) got = 0; /* keep reading (drained), content is not needed */
    }
    char *eoh = strstr(buf, "\r\n\r\n");
    if (!eoh || strncmp(buf, "HTTP/1.", 7) != 0) return;
    r->status = atoi(buf + 9);
    size_t hl = (size_t)(eoh - buf);
    if (hl >= sizeof r->head) hl = sizeof r->head - 1;
    memcpy(r->head, buf, hl);
    r->head[hl] = 0;
    size_t bl = got - ((size_t)(eoh - buf) + 4);
    if (bl >= sizeof r->body) bl = sizeof r->body - 1;
    memcpy(r->body, eoh + 4, bl);
    r->body[bl] = 0;
    r->body_len = bl;
}

/* Sends a raw request on a fresh connection and reads the answer and the close. */
static void exchange(int port, const char *src, const char *req, size_t len, reply *r) {
    memset(r, 0, sizeof *r);
    int fd = tcp_open(port, src, 1);
    if (fd < 0) return;
    send_some(fd, req, len, 3000);
    read_reply(fd, 3000, 1, r);
    close(fd);
}

static int is_json_error(const reply *r, const char *code) {
    if (!strcasestr(r->head, "\r\nContent-Type: application/json")) return 0;
    json_error_t e;
    json_t *j = json_loads(r->body, 0, &e);
    const char *c = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    int ok =
        c && (!code || !strcmp(c, code)) && json_is_string(json_object_get(json_object_get(j, "error"), "message"));
    json_decref(j);
    return ok;
}

static const char *message_of(const reply *r, char *buf, size_t len) {
    json_t *j = json_loads(r->body, 0, NULL);
    const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    snprintf(buf, len, "%s", m ? m : "");
    json_decref(j);
    return buf;
}

/* A request that stays in progress: headers sent, body promised but never finished. */
static int open_busy(int port, const char *src) {
    int fd = tcp_open(port, src, 1);
    if (fd < 0) return -1;
    if (send_str(fd, "POST /api/tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     "Content-Length: 100\r\n\r\n{\"text\":") < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- cases --------------------------------------------------------------------------------- */

TEST(four_hundred_idle_sockets_do_not_keep_health_from_answering) {
    enum { N = 400 };
    int fds[N];
    int opened = 0;
    for (int i = 0; i < N; i++) {
        fds[i] = tcp_open(srv.port, NULL, 0);
        if (fds[i] >= 0) opened++;
    }
    sleep_ms(300); /* let the server take them all in */
    double t0 = now_ms();
    reply r;
    exchange(srv.port, NULL, HEALTH_CLOSE, strlen(HEALTH_CLOSE), &r);
    double ms = now_ms() - t0;
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0) close(fds[i]);
    CHECK_MSG(opened == N, "only %d of %d sockets opened", opened, N);
    CHECK_MSG(r.status == 200, "/api/health with %d idle sockets open: status %d after %.0f ms", N, r.status, ms);
    CHECK_MSG(ms < 1000, "/api/health took %.0f ms with %d idle sockets open", ms, N);
    /* From another address too. */
    exchange(srv.port, "127.0.0.2", HEALTH_CLOSE, strlen(HEALTH_CLOSE), &r);
    CHECK_EQ_INT(r.status, 200);
}

TEST(a_slowloris_is_answered_408_and_closed_at_the_header_deadline) {
    int fd = tcp_open(srv.port, NULL, 1);
    CHECK(fd >= 0);
    double t0 = now_ms();
    CHECK(send_str(fd, "GET /api/health HTTP/1.1\r\nHost: localhost\r\n") == 0);
    reply r = {0};
    /* One header line every 300 ms: activity that an inactivity timeout would count as progress. */
    while (now_ms() - t0 < 6000) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 300) == 1) {
            read_reply(fd, 1000, 1, &r);
            break;
        }
        if (send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0) break;
    }
    double ms = now_ms() - t0;
    close(fd);
    CHECK_MSG(r.status == 408, "slow head answered %d after %.0f ms", r.status, ms);
    CHECK(is_json_error(&r, "request_timeout"));
    CHECK_MSG(r.closed, "the connection stayed open after the 408");
    CHECK_MSG(ms >= 1500 && ms < 3500, "closed after %.0f ms; the deadline is 2 s", ms);
}

TEST(a_connection_that_sends_nothing_is_closed_at_the_deadline) {
    int fd = tcp_open(srv.port, NULL, 1);
    CHECK(fd >= 0);
    double t0 = now_ms();
    reply r;
    read_reply(fd, 5000, 1, &r);
    double ms = now_ms() - t0;
    close(fd);
    CHECK_MSG(r.closed && r.raw_len == 0, "closed %d, %zu bytes", r.closed, r.raw_len);
    CHECK_MSG(ms >= 1500 && ms < 3500, "closed after %.0f ms; the deadline is 2 s", ms);
}

TEST(a_slow_next_request_on_a_kept_alive_connection_is_closed_too) {
    int fd = tcp_open(srv.port, NULL, 1);
    CHECK(fd >= 0);
    CHECK(send_str(fd, "GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n") == 0);
    reply r;
    read_reply(fd, 2000, 0, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(!r.closed);
    double t0 = now_ms();
    CHECK(send_str(fd, "GET /api/health HTTP/1.1\r\n") == 0);
    memset(&r, 0, sizeof r);
    while (now_ms() - t0 < 6000) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 300) == 1) {
            read_reply(fd, 1000, 1, &r);
            break;
        }
        if (send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0) break;
    }
    double ms = now_ms() - t0;
    close(fd);
    CHECK_MSG(r.status == 408 && r.closed, "slow second head: status %d, closed %d after %.0f ms", r.status, r.closed,
              ms);
    CHECK(is_json_error(&r, "request_timeout"));
    CHECK_MSG(ms < 3500, "closed after %.0f ms; the deadline is 2 s", ms);
}

static char *many_args_request(int n) {
    char *req = malloc((size_t)n * 8 + 128);
    if (!req) return NULL;
    size_t o = (size_t)sprintf(req, "GET /?");
    for (int i = 0; i < n; i++) o += (size_t)sprintf(req + o, "%sa%d=1", i ? "&" : "", i % 100);
    sprintf(req + o, " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    return req;
}

TEST(six_hundred_query_arguments_get_json_431_and_the_connection_is_closed) {
    char *req = many_args_request(600);
    CHECK(req);
    reply r;
    exchange(srv.port, NULL, req, strlen(req), &r);
    CHECK_MSG(r.status == 431, "600 arguments: status %d", r.status);
    CHECK(is_json_error(&r, "too_many_query_arguments"));
    CHECK_MSG(r.closed, "the connection was held open");
    /* The same as the second request of a kept-alive connection. */
    int fd = tcp_open(srv.port, NULL, 1);
    if (fd < 0) free(req);
    CHECK(fd >= 0);
    send_str(fd, "GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    read_reply(fd, 2000, 0, &r);
    int first = r.status;
    send_str(fd, req);
    free(req);
    read_reply(fd, 3000, 1, &r);
    close(fd);
    CHECK_EQ_INT(first, 200);
    CHECK_MSG(r.status == 431, "600 arguments after a first request: status %d", r.status);
    CHECK(is_json_error(&r, "too_many_query_arguments"));
    CHECK_MSG(r.closed, "the kept-alive connection was held open");
    /* At the limit the request is served. */
    req = many_args_request(64);
    CHECK(req);
    exchange(srv.port, NULL, req, strlen(req), &r);
    free(req);
    CHECK_MSG(r.status == 200, "64 arguments: status %d", r.status);
}

/* A head at every limit at once: 64 query arguments, 48 header lines, 32 cookies in 4 KB of Cookie,
 * 8 KB in all. The front door lets it through, so libmicrohttpd must be able to hold it (its
 * memory for a connection is sized for exactly this); first request and next one alike. */
static size_t head_at_every_limit(char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "GET /?");
    for (int i = 0; i < 64; i++) o += (size_t)snprintf(buf + o, cap - o, "%sa%d=%d", i ? "&" : "", i, i);
    o += (size_t)snprintf(buf + o, cap - o, " HTTP/1.1\r\nHost: localhost\r\nCookie: ");
    size_t c0 = o;
    for (int i = 0; i < 32; i++) o += (size_t)snprintf(buf + o, cap - o, "%sc%d=", i ? "; " : "", i);
    while (o - c0 < 4096) buf[o++] = 'v';
    o += (size_t)snprintf(buf + o, cap - o, "\r\n");
    for (int i = 0; i < 45; i++) o += (size_t)snprintf(buf + o, cap - o, "X-H%d: 1\r\n", i);
    o += (size_t)snprintf(buf + o, cap - o, "X-Pad: ");
    while (o < 8192 - 4) buf[o++] = 'p';
    o += (size_t)snprintf(buf + o, cap - o, "\r\n\r\n");
    return o;
}

TEST(a_head_at_every_limit_at_once_is_served) {
    static char head[8300];
    size_t len = head_at_every_limit(head, sizeof head);
    CHECK_EQ_INT(len, 8192);
    reply r;
    exchange(srv.port, NULL, head, len, &r);
    CHECK_MSG(r.status == 200, "first request: status %d: %.100s", r.status, r.body);
    int fd = tcp_open(srv.port, NULL, 1);
    CHECK(fd >= 0);
    send_str(fd, "GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    read_reply(fd, 2000, 0, &r);
    int first = r.status;
    send_some(fd, head, len, 2000);
    read_reply(fd, 3000, 0, &r);
    close(fd);
    CHECK_EQ_INT(first, 200);
    CHECK_MSG(r.status == 200, "second request: status %d: %.100s", r.status, r.body);
    /* One byte more and it is a JSON 431. */
    head[len - 4] = 'p';
    memcpy(head + len - 3, "p\r\n\r\n", 5);
    exchange(srv.port, NULL, head, len + 1, &r);
    CHECK_MSG(r.status == 431 && is_json_error(&r, "header_fields_too_large"), "8193 bytes: status %d", r.status);
}

typedef struct {
    const char *what;
    char *request;
    size_t len;
    int status;
} bad_case;

static char *padded(const char *prefix, size_t n, char fill, const char *suffix, size_t *len) {
    size_t pl = strlen(prefix), sl = strlen(suffix);
    char *b = malloc(pl + n + sl + 1);
    if (!b) return NULL;
    memcpy(b, prefix, pl);
    memset(b + pl, fill, n);
    memcpy(b + pl + n, suffix, sl + 1);
    *len = pl + n + sl;
    return b;
}

TEST(what_libmicrohttpd_would_answer_in_html_comes_back_as_json) {
    bad_case cases[16];
    int n = 0;
    size_t len = 0;
    char *many_headers = malloc(100 * 16 + 64);
    CHECK(many_headers);
    size_t o = (size_t)sprintf(many_headers, "GET /api/health HTTP/1.1\r\nHost: localhost\r\n");
    for (int i = 0; i < 100; i++) o += (size_t)sprintf(many_headers + o, "X-H%d: 1\r\n", i);
    strcpy(many_headers + o, "\r\n");
#define ADD(what_, req_, status_)                                                                                      \
    do {                                                                                                               \
        char *req__ = (req_);                                                                                          \
        cases[n++] = (bad_case){(what_), req__, req__ ? len : 0, (status_)};                                           \
    } while (0)
    ADD("20 KB target", padded("GET /api/", 20000, 'a', " HTTP/1.1\r\nHost: localhost\r\n\r\n", &len), 414);
    ADD("100 KB target", padded("GET /api/", 100000, 'a', " HTTP/1.1\r\nHost: localhost\r\n\r\n", &len), 414);
    ADD("40 KB header", padded("GET /api/health HTTP/1.1\r\nHost: localhost\r\nX-Big: ", 40000, 'b', "\r\n\r\n", &len),
        431);
    len = strlen(many_headers);
    ADD("100 header lines", many_headers, 431);
    ADD("5 KB of cookies",
        padded("GET /api/health HTTP/1.1\r\nHost: localhost\r\nCookie: a=", 5000, 'c', "\r\n\r\n", &len), 431);
    const char *plain[][2] = {
        {"HTTP/2.0", "GET /api/health HTTP/2.0\r\nHost: localhost\r\n\r\n"},
        {"Content-Length overflow",
         "POST /api/tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999999999999999\r\n\r\n"},
        {"Content-Length not a number",
         "POST /api/tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Length: 12abc\r\n\r\n"},
        {"header without a colon", "GET /api/health HTTP/1.1\r\nHost: localhost\r\nNoColon\r\n\r\n"},
        {"unknown transfer coding",
         "POST /api/tokenize HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n"},
        {"not HTTP", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"},
    };
    const int plain_status[] = {505, 413, 400, 400, 501, 400};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        len = strlen(plain[i][1]);
        ADD(plain[i][0], strdup(plain[i][1]), plain_status[i]);
    }
#undef ADD
    int failed = 0;
    for (int i = 0; i < n && !failed; i++) {
        reply r;
        if (!cases[i].request) {
            failed = 1;
            break;
        }
        exchange(srv.port, NULL, cases[i].request, cases[i].len, &r);
        if (r.status != cases[i].status || !is_json_error(&r, NULL) || !r.closed) {
            test_fail_at(__FILE__, __LINE__, "%s: status %d (want %d), JSON %d, closed %d; body: %.120s", cases[i].what,
                         r.status, cases[i].status, is_json_error(&r, NULL), r.closed, r.body);
            failed = 1;
        }
    }
    /* The same heads as the second request of a kept-alive connection (the limits are checked there
     * as well, before the router), for those that fit libmicrohttpd's own memory for a connection:
     * a next head larger than that (the 40 KB header) gets its HTML 431, like a malformed next
     * request line or header does. */
    for (int i = 0; i < n && !failed; i++) {
        if (i != 0 && i != 3) continue;
        int fd = tcp_open(srv.port, NULL, 1);
        reply r;
        send_str(fd, "GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n");
        read_reply(fd, 2000, 0, &r);
        send_some(fd, cases[i].request, cases[i].len, 3000);
        read_reply(fd, 3000, 1, &r);
        close(fd);
        if (r.status != cases[i].status || !is_json_error(&r, NULL) || !r.closed) {
            test_fail_at(__FILE__, __LINE__, "second request, %s: status %d (want %d), JSON %d, closed %d",
                         cases[i].what, r.status, cases[i].status, is_json_error(&r, NULL), r.closed);
            failed = 1;
        }
    }
    for (int i = 0; i < n; i++) free(cases[i].request);
    if (failed) return;
    harness_response h;
    CHECK(harness_get(&srv, "/api/health", &h) == 0 && h.status == 200);
    harness_response_free(&h);
}

TEST(invalid_utf8_echoed_in_a_path_is_a_json_404_with_the_bytes_escaped) {
    const char *paths[] = {"/api/\xff\xfe", "/api/caf\xc3", "/api/\xed\xa0\x80x", "/api/ok\xe2\x82\xac/\xc0\xaf"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char req[256];
        int len =
            snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", paths[i]);
        reply r;
        exchange(srv.port, NULL, req, (size_t)len, &r);
        char m[512];
        CHECK_MSG(r.status == 404, "path %zu: status %d, body %.100s", i, r.status, r.body);
        CHECK_MSG(is_json_error(&r, "not_found"), "path %zu: not a JSON error: %.100s", i, r.body);
        CHECK_MSG(strstr(message_of(&r, m, sizeof m), "\\x"), "path %zu: message %s", i, m);
    }
    /* A valid multi-byte path is echoed as it is. */
    reply r;
    const char *ok = "GET /api/caf\xc3\xa9 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    exchange(srv.port, NULL, ok, strlen(ok), &r);
    char m[512];
    CHECK_EQ_INT(r.status, 404);
    CHECK_MSG(strstr(message_of(&r, m, sizeof m), "caf\xc3\xa9"), "message %s", m);
}

TEST(error_messages_carry_no_server_paths) {
    char cwd[4096];
    CHECK(getcwd(cwd, sizeof cwd));
    const char *reqs[] = {
        "GET /nope.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "GET /api/nope HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "GET /%2e%2e/etc/passwd HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "GET /js/../../README.md HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "DELETE /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "POST /api/runs HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000\r\n\r\n",
        "POST /api/runs HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nConnection: close\r\n\r\n{nope",
        "GET /api/runs/%zz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        reply r;
        exchange(srv.port, NULL, reqs[i], strlen(reqs[i]), &r);
        CHECK_MSG(r.status >= 400, "request %zu: status %d", i, r.status);
        CHECK_MSG(is_json_error(&r, NULL), "request %zu: not a JSON error: %.100s", i, r.body);
        CHECK_MSG(!strstr(r.body, srv.data_dir) && !strstr(r.body, cwd), "request %zu leaks a path: %s", i, r.body);
    }
}

TEST(busy_connections_past_the_per_address_limit_get_json_429) {
    int busy[4];
    for (int i = 0; i < 4; i++) busy[i] = open_busy(small.port, NULL);
    sleep_ms(200);
    reply r;
    exchange(small.port, NULL, HEALTH, strlen(HEALTH), &r);
    reply other;
    exchange(small.port, "127.0.0.2", HEALTH_CLOSE, strlen(HEALTH_CLOSE), &other);
    for (int i = 0; i < 4; i++)
        if (busy[i] >= 0) close(busy[i]);
    for (int i = 0; i < 4; i++) CHECK(busy[i] >= 0);
    CHECK_MSG(r.status == 429, "a fifth connection from one address: status %d", r.status);
    CHECK(is_json_error(&r, "too_many_connections"));
    CHECK(strcasestr(r.head, "\r\nRetry-After:") != NULL);
    CHECK(r.closed);
    CHECK_MSG(other.status == 200, "another address: status %d", other.status);
    sleep_ms(200);
    exchange(small.port, NULL, HEALTH_CLOSE, strlen(HEALTH_CLOSE), &r);
    CHECK_MSG(r.status == 200, "after the busy ones closed: status %d", r.status);
}

TEST(busy_connections_past_the_total_limit_get_json_503) {
    int busy[6];
    const char *src[6] = {"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2", "127.0.0.3"};
    for (int i = 0; i < 6; i++) busy[i] = open_busy(small.port, src[i]);
    sleep_ms(200);
    reply r;
    exchange(small.port, "127.0.0.4", HEALTH, strlen(HEALTH), &r);
    for (int i = 0; i < 6; i++)
        if (busy[i] >= 0) close(busy[i]);
    for (int i = 0; i < 6; i++) CHECK(busy[i] >= 0);
    CHECK_MSG(r.status == 503, "a seventh connection: status %d", r.status);
    CHECK(is_json_error(&r, "too_many_connections"));
    CHECK(r.closed);
    sleep_ms(200);
    exchange(small.port, "127.0.0.4", HEALTH_CLOSE, strlen(HEALTH_CLOSE), &r);
    CHECK_MSG(r.status == 200, "after the busy ones closed: status %d", r.status);
}

TEST(live_streams_have_their_own_limit_and_leave_the_api_alone) {
    enum { VIEWERS = 12 };
    int fds[VIEWERS];
    int streaming = 0, refused = 0, other = 0;
    for (int i = 0; i < VIEWERS; i++) {
        fds[i] = tcp_open(small.port, NULL, 1);
        if (fds[i] < 0) continue;
        send_str(fds[i], "GET /api/events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n");
        /* A stream's head arrives at once; its body never ends. */
        char buf[2048] = "";
        size_t got = 0;
        double end = now_ms() + 2000;
        while (got < sizeof buf - 1 && now_ms() < end && !strstr(buf, "\r\n\r\n")) {
            struct pollfd p = {.fd = fds[i], .events = POLLIN};
            if (poll(&p, 1, 100) != 1) continue;
            ssize_t n = recv(fds[i], buf + got, sizeof buf - 1 - got, 0);
            if (n <= 0) break;
            got += (size_t)n;
            buf[got] = 0;
        }
        buf[got] = 0;
        if (!strncmp(buf, "HTTP/1.1 200", 12))
            streaming++;
        else if (!strncmp(buf, "HTTP/1.1 503", 12) && strstr(buf, "too_many_streams"))
            refused++;
        else
            other++;
    }
    /* With every stream slot taken, the API still answers on fresh connections from the same
     * address, up to its own limits. */
    int api_ok = 0;
    for (int i = 0; i < 8; i++) {
        reply r;
        exchange(small.port, NULL, HEALTH_CLOSE, strlen(HEALTH_CLOSE), &r);
        api_ok += r.status == 200;
    }
    for (int i = 0; i < VIEWERS; i++)
        if (fds[i] >= 0) close(fds[i]);
    CHECK_MSG(streaming == 3 && refused == VIEWERS - 3 && other == 0, "streams: %d open, %d refused, %d other",
              streaming, refused, other);
    CHECK_EQ_INT(api_ok, 8);
}

/* CPU seconds the server process has used so far (user + system). */
static double server_cpu_s(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* fields after the command name */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

TEST(an_idle_server_with_a_stream_and_a_busy_request_open_uses_no_cpu) {
    /* The front door once took a streaming or busy connection's old deadline for a due one and
     * polled without sleeping for as long as it stayed open: a whole core, next to training. */
    int stream = tcp_open(srv.port, NULL, 1);
    int busy = open_busy(srv.port, NULL);
    if (stream >= 0) send_str(stream, "GET /api/events HTTP/1.1\r\nHost: localhost\r\n\r\n");
    sleep_ms(2500); /* past the 2 s head deadline their slots once carried */
    double c0 = server_cpu_s(srv.pid);
    sleep_ms(2000);
    double c1 = server_cpu_s(srv.pid);
    if (stream >= 0) close(stream);
    if (busy >= 0) close(busy);
    CHECK(stream >= 0 && busy >= 0);
    CHECK(c0 >= 0 && c1 >= 0);
    CHECK_MSG(c1 - c0 < 0.2, "the server used %.2f s of CPU in 2 s with nothing to do", c1 - c0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[] = {"--header-timeout", "2", NULL};
    const char *small_args[] = {
        "--max-connections", "6", "--max-connections-per-ip", "4", "--max-streams", "3", "--header-timeout", "5", NULL};
    if (harness_start(&srv, NULL, args) < 0 || harness_start(&small, NULL, small_args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        harness_dump_log(&small);
        return 1;
    }
    RUN(four_hundred_idle_sockets_do_not_keep_health_from_answering);
    RUN(a_slowloris_is_answered_408_and_closed_at_the_header_deadline);
    RUN(a_connection_that_sends_nothing_is_closed_at_the_deadline);
    RUN(a_slow_next_request_on_a_kept_alive_connection_is_closed_too);
    RUN(six_hundred_query_arguments_get_json_431_and_the_connection_is_closed);
    RUN(a_head_at_every_limit_at_once_is_served);
    RUN(what_libmicrohttpd_would_answer_in_html_comes_back_as_json);
    RUN(invalid_utf8_echoed_in_a_path_is_a_json_404_with_the_bytes_escaped);
    RUN(error_messages_carry_no_server_paths);
    RUN(busy_connections_past_the_per_address_limit_get_json_429);
    RUN(busy_connections_past_the_total_limit_get_json_503);
    RUN(live_streams_have_their_own_limit_and_leave_the_api_alone);
    RUN(an_idle_server_with_a_stream_and_a_busy_request_open_uses_no_cpu);
    int rc = harness_stop(&srv), rc2 = harness_stop(&small);
    if (rc != 0 || rc2 != 0) {
        printf("FAIL shutdown: attnlabd exited with %d / %d\n", rc, rc2);
        test_fail_count++;
    }
    if (test_fail_count) {
        harness_dump_log(&srv);
        harness_dump_log(&small);
    }
    curl_global_cleanup();
    return test_summary();
}
