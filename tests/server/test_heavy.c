/* Heavy requests (statistics, exports, probes) against a real attnlabd (issue 23 item 1): they run
 * on a bounded compute pool, never on an HTTP thread, so the API answers while they compute; past
 * the per-client and queue bounds they are refused with JSON 429 / 503 and Retry-After; a client
 * that leaves while its request waits has it dropped (it never runs); work estimated above a bound
 * is refused with a 422 naming the bound before any of it is done. Every wait is for an observed
 * state (the pool's gauges in /metrics), never for a time. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv; /* two HTTP threads, one compute worker, one waiting place, two per client */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A figure of /metrics: the value of the line starting with `name` (the full series name, labels
 * included), or -1. */
static double metric(harness_server *s, const char *name) {
    harness_response r;
    if (harness_get(s, "/metrics", &r) != 0) return -1;
    double v = -1;
    size_t nl = strlen(name);
    for (const char *l = r.body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, name, nl) && l[nl] == ' ') {
            v = atof(l + nl + 1);
            break;
        }
    harness_response_free(&r);
    return v;
}

/* Waits (polling, up to 120 s) until the metric reaches at least want; 0 when it did. */
static int wait_metric(harness_server *s, const char *name, double want) {
    for (int i = 0; i < 6000; i++) {
        if (metric(s, name) >= want) return 0;
        sleep_ms(20);
    }
    return -1;
}

/* A connection from address src that sends req and is left open (the caller reads or closes it). */
static int send_from(int port, const char *src, const char *req) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, src, &a.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads an answer (until the peer closes or its body is complete, 60 s at most) into buf. */
static int read_answer(int fd, char *buf, size_t cap) {
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 60000) != 1) break;
        ssize_t r = recv(fd, buf + got, cap - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        const char *cl = end ? strcasestr(buf, "\r\nContent-Length:") : NULL;
        if (cl && cl < end && got >= (size_t)(end + 4 - buf) + strtoul(cl + 17, NULL, 10)) break;
        if (got == cap - 1) break;
    }
    buf[got] = 0;
    int status = 0;
    return sscanf(buf, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

static char *probe_request(const char *body) {
    char *req = malloc(2048);
    snprintf(req, 2048,
             "POST /api/probes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
             "%zu\r\n\r\n%s",
             strlen(body), body);
    return req;
}

/* Runs long whatever the machine: sequence lengths whose measurements cannot all fit its budget. */
static const char LONG_PROBE[] = "{\"kind\":\"sparse_cost\",\"params\":{\"ns\":[4096,8192,16384],\"ks\":[64],"
                                 "\"min_ms\":50,\"rounds\":5,\"budget_ms\":3000}}";

typedef struct {
    int fd, status;
    char buf[65536];
} answer_job;

static void *answer_thread(void *arg) {
    answer_job *j = arg;
    j->status = read_answer(j->fd, j->buf, sizeof j->buf);
    return NULL;
}

TEST(the_api_answers_while_heavy_requests_compute_and_bounds_hold) {
    /* A: a long probe, running on the one compute worker. */
    char *ra = probe_request(LONG_PROBE);
    answer_job a = {.fd = send_from(srv.port, "127.0.0.1", ra)};
    free(ra);
    CHECK(a.fd >= 0);
    pthread_t ta;
    pthread_create(&ta, NULL, answer_thread, &a);
    CHECK_MSG(wait_metric(&srv, "attnlab_heavy_requests{state=\"running\"}", 1) == 0, "the long probe never ran");
    /* B: a quick probe of the same client, waiting behind it. */
    char *rb = probe_request("{\"kind\":\"pair_turns\",\"params\":{\"d\":40}}");
    int b = send_from(srv.port, "127.0.0.1", rb);
    free(rb);
    CHECK(b >= 0);
    CHECK_MSG(wait_metric(&srv, "attnlab_heavy_requests{state=\"waiting\"}", 1) == 0, "the second never waited");
    /* Past the bounds: a third of this client's is 429, another client's finds the queue full (503). */
    char buf[8192];
    char *rc = probe_request("{\"kind\":\"pair_turns\",\"params\":{\"d\":44}}");
    int c = send_from(srv.port, "127.0.0.1", rc);
    int st = read_answer(c, buf, sizeof buf);
    close(c);
    CHECK_MSG(st == 429 && strcasestr(buf, "\r\nRetry-After:") && strstr(buf, "\"too_many_requests\""),
              "a third heavy request of one client: %.300s", buf);
    c = send_from(srv.port, "127.0.0.2", rc);
    st = read_answer(c, buf, sizeof buf);
    close(c);
    free(rc);
    CHECK_MSG(st == 503 && strcasestr(buf, "\r\nRetry-After:") && strstr(buf, "\"busy\""),
              "a heavy request with the pool full: %.300s", buf);
    /* Meanwhile the API answers at once: the HTTP threads hold none of it. */
    double worst = 0;
    for (int i = 0; i < 20; i++) {
        double t0 = now_ms();
        long code;
        json_decref(api_call(&srv, "GET", i % 2 ? "/api/health" : "/api/runs", NULL, &code));
        double ms = now_ms() - t0;
        CHECK_MSG(code == 200, "answered %ld while heavy requests computed", code);
        if (ms > worst) worst = ms;
    }
    CHECK_MSG(worst < 1000, "the API took %.0f ms to answer while a probe computed", worst);
    printf("# slowest of 20 API answers while a probe computed and another waited: %.1f ms\n", worst);
    /* B's client leaves: B is dropped, never run. */
    double dropped = metric(&srv, "attnlab_heavy_requests_total{result=\"cancelled\"}");
    close(b);
    CHECK_MSG(wait_metric(&srv, "attnlab_heavy_requests_total{result=\"cancelled\"}", dropped + 1) == 0,
              "the request of a client that left was not cancelled");
    pthread_join(ta, NULL);
    close(a.fd);
    CHECK_MSG(a.status == 201, "the long probe answered %d: %.300s", a.status, a.buf);
    long code;
    json_t *j = api_call(&srv, "GET", "/api/probes?kind=pair_turns", NULL, &code);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "total")), 0);
    json_decref(j);
    /* The pool is free again. */
    json_decref(api_call(&srv, "POST", "/api/probes", "{\"kind\":\"pair_turns\",\"params\":{\"d\":40}}", &code));
    CHECK_EQ_INT(code, 201);
}

/* One thread of the server: its name, nice value and scheduling policy (/proc/PID/task/TID). */
typedef struct {
    char comm[32];
    int nice, policy;
} thread_info;

static int read_threads(pid_t pid, thread_info *out, int cap) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        if (e->d_name[0] == '.') continue;
        char path[128], buf[1024];
        snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(out[n].comm, sizeof out[n].comm, f)) out[n].comm[0] = 0;
        fclose(f);
        out[n].comm[strcspn(out[n].comm, "\n")] = 0;
        snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = 0;
        /* after "(comm)" come fields 3, 4, ...: nice is field 19, policy field 41 */
        char *p = strrchr(buf, ')');
        int field = 2;
        for (char *tok = p ? strtok(p + 1, " ") : NULL; tok; tok = strtok(NULL, " ")) {
            field++;
            if (field == 19) out[n].nice = atoi(tok);
            if (field == 41) out[n].policy = atoi(tok);
        }
        n++;
    }
    closedir(d);
    return n;
}

/* Training yields to the API (issue 23 item 4): its threads run SCHED_BATCH at nice 10, the compute
 * pool's SCHED_BATCH 5 nice steps below the HTTP threads (nice 0, or the server's own). */
TEST(training_and_compute_threads_run_below_the_http_threads) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\":\"priority\",\"config\":{\"corpus\":\"small\",\"n_layer\":1,\"n_head\":2,\"d_model\":16,"
             "\"seq_len\":16,\"batch\":2,\"steps\":1000000,\"threads\":2}}");
    long code;
    json_t *j = api_call(&srv, "POST", "/api/runs", body, &code);
    long long id = json_integer_value(json_object_get(json_object_get(j, "run"), "id"));
    json_decref(j);
    CHECK_MSG(code == 201 && id > 0, "the run was not created: %ld", code);
    CHECK(api_wait_step(&srv, id, 2, 60000) == 0);
    thread_info th[256];
    int n = read_threads(srv.pid, th, 256);
    CHECK(api_cancel_run(&srv, id, 60000) >= 2);
    CHECK(n > 0);
    /* the HTTP threads' nice: the server's (0, or what it was started at) */
    int base = 0;
    for (int i = 0; i < n; i++)
        if (!strncmp(th[i].comm, "MHD-", 4)) base = th[i].nice;
    int train = 0, heavy = 0, others_at_zero = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(th[i].comm, "attnlab-train")) {
            CHECK_MSG(th[i].nice == 10 && th[i].policy == 3, "a training thread runs at nice %d, policy %d", th[i].nice,
                      th[i].policy);
            train++;
        } else if (!strcmp(th[i].comm, "attnlab-heavy")) {
            /* 5 steps below the server's (not nice 5: above a server started at nice 10), SCHED_BATCH */
            CHECK_MSG(th[i].nice == (base + 5 > 19 ? 19 : base + 5) && th[i].policy == 3,
                      "a compute pool thread runs at nice %d, policy %d (the HTTP threads at nice %d)", th[i].nice,
                      th[i].policy, base);
            heavy++;
        } else if (th[i].nice == base && th[i].policy == 0) {
            others_at_zero++;
        }
    }
    /* the training worker and the run's second compute thread, which inherits from it */
    CHECK_MSG(train >= 2, "%d training threads found", train);
    CHECK_EQ_INT(heavy, 1);
    CHECK_MSG(others_at_zero >= 3, "only %d threads at nice %d (the HTTP threads)", others_at_zero, base);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[] = {
        "--http-threads", "2", "--heavy-workers", "1", "--max-heavy-queued", "1", "--max-heavy-per-ip", "2", NULL};
    if (harness_start(&srv, NULL, args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(the_api_answers_while_heavy_requests_compute_and_bounds_hold);
    RUN(training_and_compute_threads_run_below_the_http_threads);
    int rc = harness_stop(&srv);
    if (rc != 0) {
        printf("FAIL shutdown: attnlabd exited with %d\n", rc);
        test_fail_count++;
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
