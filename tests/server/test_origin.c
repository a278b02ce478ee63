/* Browser-origin defences over real sockets against a real attnlabd (issue 23 item 3): a web page
 * the user visits must not be able to use the API through the user's browser.
 *  - The attack as found: POST /api/runs with Host attacker.example, Origin http://attacker.example
 *    and Content-Type text/plain created a run (201). Each of its three parts is now refused alone.
 *  - DNS rebinding: any request under a name the server does not answer to is refused, reads too.
 *  - Cross-site changes: a change that carries the Origin of another page is refused, whatever its
 *    method; the dashboard's own origin and clients without Origin are not.
 *  - JSON bodies need Content-Type: application/json (what a form or a simple fetch cannot send).
 *  - ?optimizer=1 needs the token when one is set, --private or not; "bearer" is a bearer.
 * Every refusal is JSON, closes the connection, and leaves nothing behind (the run count is checked). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv;  /* defaults: loopback, no token */
static harness_server lab;  /* --allowed-host lab.example --token t0k */
static harness_server wide; /* --bind 0.0.0.0 --insecure */

typedef struct {
    int status;
    char head[2048];
    char body[4096];
    int closes; /* Connection: close */
} raw_answer;

/* Sends req on a fresh connection to 127.0.0.1:port and reads the answer until the server closes
 * or 10 s pass (then status 0). */
static void raw(int port, const char *req, raw_answer *a) {
    memset(a, 0, sizeof *a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
        if (fd >= 0) close(fd);
        return;
    }
    size_t len = strlen(req), off = 0;
    while (off < len) {
        ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    char buf[8192];
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10000) != 1) break;
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = 0;
        /* A kept-alive answer: stop once the whole body has come. */
        char *end = strstr(buf, "\r\n\r\n");
        const char *cl = end ? strcasestr(buf, "\r\nContent-Length:") : NULL;
        if (cl && cl < end && got >= (size_t)(end + 4 - buf) + strtoul(cl + 17, NULL, 10)) break;
        if (got == sizeof buf - 1) break;
    }
    close(fd);
    buf[got] = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &a->status) != 1) a->status = 0;
    char *end = strstr(buf, "\r\n\r\n");
    if (end) {
        snprintf(a->head, sizeof a->head, "%.*s", (int)(end - buf), buf);
        snprintf(a->body, sizeof a->body, "%s", end + 4);
    }
    a->closes = strcasestr(a->head, "\r\nConnection: close") != NULL;
}

static const char *error_code(const raw_answer *a, char *buf, size_t len) {
    json_t *j = json_loads(a->body, 0, NULL);
    const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    snprintf(buf, len, "%s", code ? code : "");
    json_decref(j);
    return buf;
}

static long long run_count(harness_server *s) {
    json_t *j = api_call(s, "GET", "/api/runs", NULL, NULL);
    long long n = json_integer_value(json_object_get(j, "total"));
    json_decref(j);
    return n;
}

static const char RUN_BODY[] = "{\"name\":\"csrf\",\"config\":{" TINY_CONFIG ",\"steps\":1}}";

/* POST /api/runs with the given Host, Origin and Content-Type lines (NULL: left out). */
static void post_run(int port, const char *host, const char *origin, const char *ctype, raw_answer *a) {
    char req[4096], h[256] = "", o[256] = "", c[256] = "";
    if (host) snprintf(h, sizeof h, "Host: %s\r\n", host);
    if (origin) snprintf(o, sizeof o, "Origin: %s\r\n", origin);
    if (ctype) snprintf(c, sizeof c, "Content-Type: %s\r\n", ctype);
    snprintf(req, sizeof req, "POST /api/runs HTTP/1.1\r\n%s%s%sContent-Length: %zu\r\n\r\n%s", h, o, c,
             sizeof RUN_BODY - 1, RUN_BODY);
    raw(port, req, a);
}

/* The refusal expected of a variant: status and error code, JSON, connection closed. */
#define CHECK_REFUSED(a, st, code_)                                                                                    \
    do {                                                                                                               \
        char code_buf[64];                                                                                             \
        CHECK_MSG((a).status == (st), "answered %d, not %d: %s", (a).status, (st), (a).body);                          \
        CHECK_MSG(!strcmp(error_code(&(a), code_buf, sizeof code_buf), (code_)), "code %s, not %s", code_buf,          \
                  (code_));                                                                                            \
        CHECK_MSG((a).closes, "the refused request's connection was kept open");                                       \
    } while (0)

TEST(the_attack_as_found_is_refused_and_creates_nothing) {
    long long before = run_count(&srv);
    raw_answer a;
    post_run(srv.port, "attacker.example", "http://attacker.example", "text/plain", &a);
    CHECK_REFUSED(a, 403, "host_not_allowed");
    CHECK_EQ_INT(run_count(&srv), before);
}

TEST(each_part_of_the_attack_is_refused_alone) {
    long long before = run_count(&srv);
    char self[64], other[64];
    snprintf(self, sizeof self, "127.0.0.1:%d", srv.port);
    snprintf(other, sizeof other, "http://127.0.0.1:%d", srv.port + 1 > 65535 ? 1 : srv.port + 1);
    raw_answer a;
    /* a rebinding name, with a body the API would take */
    post_run(srv.port, "attacker.example", NULL, "application/json", &a);
    CHECK_REFUSED(a, 403, "host_not_allowed");
    post_run(srv.port, "attacker.example:8080", NULL, "application/json", &a);
    CHECK_REFUSED(a, 403, "host_not_allowed");
    /* another page's origin, everything else in order */
    post_run(srv.port, self, "http://attacker.example", "application/json", &a);
    CHECK_REFUSED(a, 403, "origin_not_allowed");
    post_run(srv.port, self, "null", "application/json", &a);
    CHECK_REFUSED(a, 403, "origin_not_allowed");
    post_run(srv.port, self, "http://localhost", "application/json", &a); /* a page on another local port */
    CHECK_REFUSED(a, 403, "origin_not_allowed");
    post_run(srv.port, self, other, "application/json", &a);
    CHECK_REFUSED(a, 403, "origin_not_allowed");
    post_run(srv.port, self, "file://", "application/json", &a);
    CHECK_REFUSED(a, 403, "origin_not_allowed");
    /* what a form or a fetch without a preflight can send */
    const char *types[] = {"text/plain",
                           "text/plain; charset=utf-8",
                           "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x",
                           "application/jsonx",
                           "application/json-patch+json"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        post_run(srv.port, self, NULL, types[i], &a);
        CHECK_REFUSED(a, 415, "unsupported_media_type");
    }
    post_run(srv.port, self, NULL, NULL, &a);
    CHECK_REFUSED(a, 415, "unsupported_media_type");
    /* a chunked body is a body too */
    char req[1024];
    snprintf(req, sizeof req,
             "POST /api/runs HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
             "2\r\n{}\r\n0\r\n\r\n",
             self);
    raw(srv.port, req, &a);
    CHECK_REFUSED(a, 415, "unsupported_media_type");
    /* two Host headers: which one the request is for is not guessed */
    snprintf(req, sizeof req, "GET /api/runs HTTP/1.1\r\nHost: %s\r\nHost: attacker.example\r\n\r\n", self);
    raw(srv.port, req, &a);
    CHECK_REFUSED(a, 400, "bad_request");
    CHECK_EQ_INT(run_count(&srv), before);
}

TEST(every_change_method_checks_the_origin) {
    char self[64], req[1024];
    snprintf(self, sizeof self, "127.0.0.1:%d", srv.port);
    const char *changes[][2] = {{"PATCH", "/api/runs/1"},        {"DELETE", "/api/runs/1"},
                                {"POST", "/api/runs/1/cancel"},  {"POST", "/api/experiments"},
                                {"POST", "/api/probes"},         {"POST", "/api/tokenize"},
                                {"POST", "/api/corpora?name=x"}, {"DELETE", "/api/corpora/small"}};
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        raw_answer a;
        snprintf(req, sizeof req,
                 "%s %s HTTP/1.1\r\nHost: %s\r\nOrigin: http://attacker.example\r\n"
                 "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                 changes[i][0], changes[i][1], self);
        raw(srv.port, req, &a);
        CHECK_MSG(a.status == 403, "%s %s from another origin answered %d", changes[i][0], changes[i][1], a.status);
    }
}

TEST(reads_under_a_foreign_name_are_refused_too) {
    const char *paths[] = {"/api/runs", "/api/health", "/metrics", "/", "/api/events", "/api/nope"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        raw_answer a;
        char req[512];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: rebound.attacker.example:%d\r\n\r\n", paths[i], srv.port);
        raw(srv.port, req, &a);
        CHECK_MSG(a.status == 403, "GET %s under a foreign name answered %d", paths[i], a.status);
    }
    /* names that only look local */
    const char *lookalikes[] = {"localhost.attacker.example", "127.0.0.1.nip.io", "localhostx", "[::2]", "0.0.0.0"};
    for (size_t i = 0; i < sizeof lookalikes / sizeof lookalikes[0]; i++) {
        raw_answer a;
        char req[512];
        snprintf(req, sizeof req, "GET /api/health HTTP/1.1\r\nHost: %s\r\n\r\n", lookalikes[i]);
        raw(srv.port, req, &a);
        CHECK_MSG(a.status == 403, "Host %s answered %d", lookalikes[i], a.status);
    }
}

TEST(the_dashboard_and_clients_still_work) {
    char host[64], origin[96];
    const char *names[] = {"127.0.0.1", "localhost", "LocalHost", "localhost.", "[::1]", "app.localhost", "127.0.0.2"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        raw_answer a;
        char req[512];
        snprintf(req, sizeof req, "GET /api/health HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n", names[i],
                 srv.port);
        raw(srv.port, req, &a);
        CHECK_MSG(a.status == 200, "Host %s answered %d", names[i], a.status);
    }
    /* HTTP/1.0 without Host is no browser */
    raw_answer a;
    raw(srv.port, "GET /api/health HTTP/1.0\r\n\r\n", &a);
    CHECK_EQ_INT(a.status, 200);
    long long before = run_count(&srv);
    /* the page's own origin (the dashboard), under either loopback name */
    snprintf(host, sizeof host, "localhost:%d", srv.port);
    snprintf(origin, sizeof origin, "http://localhost:%d", srv.port);
    post_run(srv.port, host, origin, "application/json", &a);
    CHECK_MSG(a.status == 201, "the dashboard's own POST answered %d: %s", a.status, a.body);
    snprintf(host, sizeof host, "127.0.0.1:%d", srv.port);
    snprintf(origin, sizeof origin, "http://127.0.0.1:%d", srv.port);
    post_run(srv.port, host, origin, "application/json; charset=UTF-8", &a);
    CHECK_MSG(a.status == 201, "the dashboard's own POST answered %d: %s", a.status, a.body);
    /* no Origin (curl, the attnlab client), and a body-less change with no type at all */
    post_run(srv.port, host, NULL, "Application/JSON", &a);
    CHECK_MSG(a.status == 201, "a client's POST answered %d: %s", a.status, a.body);
    CHECK_EQ_INT(run_count(&srv), before + 3);
    json_t *j = api_call(&srv, "GET", "/api/runs?limit=1", NULL, NULL);
    long long id = json_integer_value(json_object_get(json_array_get(json_object_get(j, "runs"), 0), "id"));
    json_decref(j);
    char req[512];
    snprintf(req, sizeof req, "POST /api/runs/%lld/cancel HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", id, host);
    raw(srv.port, req, &a);
    CHECK_MSG(a.status == 202 || a.status == 409, "a body-less cancel answered %d: %s", a.status, a.body);
    /* the upload route takes plain text, from clients without Origin */
    snprintf(req, sizeof req,
             "POST /api/corpora?name=plain&encoding=bytes HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain\r\n"
             "Content-Length: 5\r\n\r\nhello",
             host);
    raw(srv.port, req, &a);
    CHECK_MSG(a.status == 201 || a.status == 202, "a plain-text upload answered %d: %s", a.status, a.body);
}

TEST(allowed_hosts_and_their_pages_are_taken) {
    raw_answer a;
    char req[1024];
    post_run(lab.port, "lab.example", "http://lab.example", "application/json", &a);
    CHECK_MSG(a.status == 401, "a change on the allowed name without the token answered %d: %s", a.status, a.body);
    snprintf(req, sizeof req,
             "POST /api/runs HTTP/1.1\r\nHost: lab.example:%d\r\nOrigin: https://LAB.example\r\n"
             "Authorization: Bearer t0k\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             lab.port, sizeof RUN_BODY - 1, RUN_BODY);
    raw(lab.port, req, &a);
    CHECK_MSG(a.status == 201, "a change from the allowed host's page answered %d: %s", a.status, a.body);
    snprintf(req, sizeof req, "GET /api/health HTTP/1.1\r\nHost: other.example\r\n\r\n");
    raw(lab.port, req, &a);
    CHECK_REFUSED(a, 403, "host_not_allowed");
    /* a server bound to every address answers IP literals, never other names */
    raw(wide.port, "GET /api/health HTTP/1.1\r\nHost: 192.0.2.7:8080\r\nConnection: close\r\n\r\n", &a);
    CHECK_MSG(a.status == 200, "an IP literal on a wildcard bind answered %d", a.status);
    raw(wide.port, "GET /api/health HTTP/1.1\r\nHost: [2001:db8::1]\r\nConnection: close\r\n\r\n", &a);
    CHECK_MSG(a.status == 200, "an IPv6 literal on a wildcard bind answered %d", a.status);
    raw(wide.port, "GET /api/health HTTP/1.1\r\nHost: attacker.example\r\n\r\n", &a);
    CHECK_REFUSED(a, 403, "host_not_allowed");
    /* ... and an IP-literal page of someone else's is still another origin */
    post_run(wide.port, "192.0.2.7", "http://203.0.113.9", "application/json", &a);
    CHECK_REFUSED(a, 403, "origin_not_allowed");
}

TEST(the_whole_checkpoint_needs_the_token_and_bearer_is_any_case) {
    /* lab has a token without --private: reads are open, except the training state */
    long code;
    json_decref(api_call(&lab, "GET", "/api/runs/1/weights", NULL, &code));
    CHECK_MSG(code == 404 || code == 200, "plain weights answered %ld", code);
    json_decref(api_call(&lab, "GET", "/api/runs/1/weights?optimizer=1", NULL, &code));
    CHECK_EQ_INT(code, 401);
    const char *forms[] = {"Authorization: Bearer t0k", "Authorization: bearer t0k", "Authorization: BEARER  t0k"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const char *h[] = {forms[i], NULL};
        harness_response r;
        CHECK(harness_request(&lab, "GET", "/api/runs/1/weights?optimizer=1", NULL, 0, h, &r) == 0);
        CHECK_MSG(r.status == 404 || r.status == 200, "'%s': %ld", forms[i], r.status);
        harness_response_free(&r);
    }
    const char *wrong[] = {"Authorization: Bearer t0kx", "Authorization: Bearert0k", "Authorization: Basic t0k"};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        const char *h[] = {wrong[i], NULL};
        harness_response r;
        CHECK(harness_request(&lab, "GET", "/api/runs/1/weights?optimizer=1", NULL, 0, h, &r) == 0);
        CHECK_MSG(r.status == 401, "'%s': %ld", wrong[i], r.status);
        harness_response_free(&r);
    }
}

/* Smaller findings of issue 23 item 11: one spelling per id, query keys decoded like values, and a
 * server bound to every address says so. */
TEST(ids_have_one_spelling_query_keys_decode_and_a_wide_bind_warns) {
    long long id = api_start_tiny_run(&srv, "\"steps\":2", "spelling");
    CHECK(id > 0);
    char *st = api_wait_status(&srv, id, "succeeded", 60000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    char path[128];
    long code;
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_decref(api_call(&srv, "GET", path, NULL, &code));
    CHECK_EQ_INT(code, 200);
    snprintf(path, sizeof path, "/api/runs/0%lld", id);
    json_decref(api_call(&srv, "GET", path, NULL, &code));
    CHECK_MSG(code == 404, "%s answered %ld: an alias of run %lld", path, code, id);
    /* max%5Fpoints is max_points: 1 is out of its range */
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?max%%5Fpoints=1", id);
    json_t *j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_MSG(code == 422 && !strcmp(api_error_field(j), "max_points"), "%s answered %ld", path, code);
    json_decref(j);
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?m%%61x_points=2&keys=%%6Coss", id);
    j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(code, 200);
    CHECK(json_object_get(json_object_get(j, "series"), "loss") && json_object_size(json_object_get(j, "series")) == 1);
    json_decref(j);
    /* the wide server's log says where it listens */
    FILE *f = fopen(wide.log_path, "r");
    CHECK(f);
    char line[512];
    int warned = 0;
    while (fgets(line, sizeof line, f)) warned |= strstr(line, "listening on every address (--bind 0.0.0.0)") != NULL;
    fclose(f);
    CHECK_MSG(warned, "a server bound to 0.0.0.0 did not warn");
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *lab_args[] = {"--allowed-host", "lab.example", "--token", "t0k", NULL};
    const char *wide_args[] = {"--bind", "0.0.0.0", "--insecure", NULL};
    if (harness_start(&srv, NULL, NULL) < 0 || harness_start(&lab, NULL, lab_args) < 0 ||
        harness_start(&wide, NULL, wide_args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(the_attack_as_found_is_refused_and_creates_nothing);
    RUN(each_part_of_the_attack_is_refused_alone);
    RUN(every_change_method_checks_the_origin);
    RUN(reads_under_a_foreign_name_are_refused_too);
    RUN(the_dashboard_and_clients_still_work);
    RUN(allowed_hosts_and_their_pages_are_taken);
    RUN(the_whole_checkpoint_needs_the_token_and_bearer_is_any_case);
    RUN(ids_have_one_spelling_query_keys_decode_and_a_wide_bind_warns);
    harness_server *all[] = {&srv, &lab, &wide};
    for (int i = 0; i < 3; i++) {
        int rc = harness_stop(all[i]);
        if (rc != 0) {
            printf("FAIL shutdown: attnlabd exited with %d\n", rc);
            test_fail_count++;
        }
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
