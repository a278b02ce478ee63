/* The live stream, experiments and presets, the OpenAPI document and /metrics, over real HTTP. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/api.h"
#include "api/api.h"
#include "../support/test.h"

static harness_server srv;

/* ---- a small SSE reader --------------------------------------------------------------- */

#define MAX_EVENTS 4096
typedef struct {
    unsigned long long id;
    char type[16];
    long long run_id;
    int step;
    char status[16];
} sse_event;

typedef struct {
    long long want_run; /* stop after this run's final status event (0: never) */
    char buf[65536];
    size_t len;
    sse_event ev[MAX_EVENTS];
    int n;
    int done;
    int connected;
} sse_reader;

static void parse_block(sse_reader *r, char *block) {
    sse_event e = {0};
    char *data = NULL;
    for (char *line = strtok(block, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "id: ", 4)) e.id = strtoull(line + 4, NULL, 10);
        if (!strncmp(line, "event: ", 7)) snprintf(e.type, sizeof e.type, "%s", line + 7);
        if (!strncmp(line, "data: ", 6)) data = line + 6;
    }
    if (!e.type[0] || !data) return;
    json_t *j = json_loads(data, 0, NULL);
    e.run_id = json_integer_value(json_object_get(j, "run_id"));
    e.step = (int)json_integer_value(json_object_get(j, "step"));
    const char *st = json_string_value(json_object_get(j, "status"));
    if (st) snprintf(e.status, sizeof e.status, "%s", st);
    json_decref(j);
    if (r->n < MAX_EVENTS) r->ev[r->n++] = e;
    if (!strcmp(e.type, "status") && e.run_id == r->want_run &&
        (!strcmp(e.status, "succeeded") || !strcmp(e.status, "failed") || !strcmp(e.status, "cancelled")))
        r->done = 1;
}

static size_t sse_write(char *ptr, size_t size, size_t nmemb, void *ud) {
    sse_reader *r = ud;
    size_t n = size * nmemb;
    r->connected = 1;
    if (r->len + n >= sizeof r->buf) return 0;
    memcpy(r->buf + r->len, ptr, n);
    r->len += n;
    r->buf[r->len] = 0;
    char *end;
    while ((end = strstr(r->buf, "\n\n"))) {
        *end = 0;
        char block[8192];
        snprintf(block, sizeof block, "%s", r->buf);
        size_t used = (size_t)(end + 2 - r->buf);
        memmove(r->buf, end + 2, r->len - used + 1);
        r->len -= used;
        parse_block(r, block);
    }
    return r->done ? 0 : n; /* returning short ends the transfer */
}

typedef struct {
    const char *path;
    const char *last_event_id;
    sse_reader *r;
} sse_job;

static void *sse_thread(void *arg) {
    sse_job *job = arg;
    CURL *c = curl_easy_init();
    char url[256], hdr[96];
    snprintf(url, sizeof url, "%s%s", srv.base_url, job->path);
    struct curl_slist *hl = NULL;
    if (job->last_event_id) {
        snprintf(hdr, sizeof hdr, "Last-Event-ID: %s", job->last_event_id);
        hl = curl_slist_append(hl, hdr);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, job->r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_perform(c);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return NULL;
}

static sse_reader first; /* the full capture of one run, reused by the resume test */
static long long streamed_run;

TEST(sse_delivers_every_step_in_order_then_the_final_status) {
    first.want_run = -1;
    sse_job job = {"/api/events", NULL, &first};
    pthread_t t;
    pthread_create(&t, NULL, sse_thread, &job);
    for (int i = 0; i < 500 && !first.connected; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    long long id = api_start_tiny_run(&srv, "\"steps\":40", "streamed");
    first.want_run = id;
    streamed_run = id;
    pthread_join(t, NULL);
    CHECK_MSG(first.done, "no final status event arrived (%d events)", first.n);
    int expect = 1, saw_running = 0;
    unsigned long long last_id = 0;
    for (int i = 0; i < first.n; i++) {
        sse_event *e = &first.ev[i];
        CHECK_MSG(e->id > last_id, "event ids must increase");
        last_id = e->id;
        if (e->run_id != id) continue;
        if (!strcmp(e->type, "status") && !strcmp(e->status, "running")) saw_running = 1;
        if (!strcmp(e->type, "metrics") && e->step == expect)
            expect++;
        else if (!strcmp(e->type, "metrics"))
            CHECK_MSG(e->step < expect, "metrics for step %d arrived when %d was due", e->step, expect);
    }
    CHECK(saw_running);
    CHECK_MSG(expect == 41, "steps 1..40 in order, got up to %d", expect - 1);
}

TEST(last_event_id_resumes_without_gaps) {
    CHECK(first.done);
    /* Pick the 10th event of the run and ask for what came after it. */
    int k = -1, seen = 0;
    for (int i = 0; i < first.n; i++)
        if (first.ev[i].run_id == streamed_run && ++seen == 10) k = i;
    CHECK(k >= 0);
    char last[32], path[64];
    snprintf(last, sizeof last, "%llu", first.ev[k].id);
    snprintf(path, sizeof path, "/api/runs/%lld/events", streamed_run);
    sse_reader *again = calloc(1, sizeof *again);
    again->want_run = streamed_run;
    sse_job job = {path, last, again};
    sse_thread(&job);
    CHECK_MSG(again->done, "the resumed stream did not reach the final status");
    int j = 0;
    for (int i = k + 1; i < first.n; i++) {
        if (first.ev[i].run_id != streamed_run) continue;
        CHECK_MSG(j < again->n && again->ev[j].id == first.ev[i].id, "resumed event %d differs", j);
        j++;
    }
    CHECK_EQ_INT(again->n, j);
    free(again);
}

TEST(too_old_last_event_id_gets_resync) {
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld/events", streamed_run);
    sse_reader *r = calloc(1, sizeof *r);
    r->want_run = streamed_run;
    sse_job job = {path, "1", r};
    /* Nothing more happens on this finished run, so read briefly: the resync comes first. */
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s%s", srv.base_url, path);
    struct curl_slist *hl = curl_slist_append(NULL, "Last-Event-ID: 1");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 700L);
    curl_easy_perform(c);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    (void)job;
    CHECK(r->n >= 1);
    CHECK(!strcmp(r->ev[0].type, "resync"));
    free(r);
}

/* Reads one stream until the server ends it or timeout_ms pass; returns 1 if the server ended it. */
static int read_to_end(const char *path, sse_reader *r, long timeout_ms) {
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s%s", srv.base_url, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    return rc == CURLE_OK;
}

typedef struct {
    const char *path;
    sse_reader *r;
    int ended;
} end_job;

static void *end_thread(void *arg) {
    end_job *e = arg;
    e->ended = read_to_end(e->path, e->r, 180000);
    return NULL;
}

static sse_reader ending; /* static: nothing to free when a check fails */

TEST(a_runs_stream_ends_after_its_final_status) {
    long long id = api_start_tiny_run(&srv, "\"steps\":1000000", "stream-end");
    CHECK(id > 0);
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld/events", id);
    memset(&ending, 0, sizeof ending); /* want_run 0: the reader never hangs up itself */
    end_job job = {path, &ending, 0};
    pthread_t t;
    pthread_create(&t, NULL, end_thread, &job);
    /* Once the stream carries the run's steps, the run ends (cancelled) while it is being read. */
    for (int i = 0; i < 6000 && ending.n < 2; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    char cancel[96];
    long code;
    snprintf(cancel, sizeof cancel, "/api/runs/%lld/cancel", id);
    json_decref(api_call(&srv, "POST", cancel, NULL, &code));
    pthread_join(t, NULL);
    CHECK_EQ_INT(code, 202);
    CHECK_MSG(job.ended, "the stream of run %lld was still open long after it ended (%d events)", id, ending.n);
    CHECK(ending.n >= 2);
    sse_event *last = &ending.ev[ending.n - 1];
    CHECK_MSG(!strcmp(last->type, "status") && !strcmp(last->status, "cancelled"), "the last event was %s %s",
              last->type, last->status);
    int step = last->step;
    /* Connecting to a run that has already ended: its status, then the end. */
    memset(&ending, 0, sizeof ending);
    CHECK_MSG(read_to_end(path, &ending, 30000), "the stream of a finished run did not end (%d events)", ending.n);
    CHECK_EQ_INT(ending.n, 1);
    CHECK(!strcmp(ending.ev[0].type, "status") && !strcmp(ending.ev[0].status, "cancelled"));
    CHECK_EQ_INT(ending.ev[0].run_id, id);
    CHECK_EQ_INT(ending.ev[0].step, step);
}

TEST(experiment_makes_one_run_per_variant_with_one_seed) {
    long code;
    json_t *j = api_call(&srv, "POST", "/api/experiments",
                         "{\"name\":\"ab\",\"base\":{" TINY_CONFIG ",\"steps\":8,\"seed\":42},"
                         "\"variants\":[{\"name\":\"rope\",\"config\":{\"attention\":\"rope\"}},"
                         "{\"name\":\"cosine\",\"config\":{\"attention\":\"cosine_rope\"}}]}",
                         &code);
    CHECK_EQ_INT(code, 201);
    long long exp = json_integer_value(json_object_get(json_object_get(j, "experiment"), "id"));
    json_t *runs = json_object_get(j, "runs");
    CHECK_EQ_INT(json_array_size(runs), 2);
    long long ids[2];
    for (int i = 0; i < 2; i++) {
        json_t *r = json_array_get(runs, i);
        ids[i] = json_integer_value(json_object_get(r, "id"));
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "seed")), 42);
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "experiment_id")), exp);
    }
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(runs, 1), "variant")), "cosine"));
    json_decref(j);
    for (int i = 0; i < 2; i++) {
        char *st = api_wait_status(&srv, ids[i], "succeeded", 60000);
        CHECK(st && !strcmp(st, "succeeded"));
        free(st);
    }
    char path[64];
    snprintf(path, sizeof path, "/api/experiments/%lld", exp);
    j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(code, 200);
    runs = json_object_get(j, "runs");
    CHECK_EQ_INT(json_array_size(runs), 2);
    CHECK(json_object_get(json_object_get(json_array_get(runs, 0), "summary"), "loss"));
    CHECK(json_object_get(json_object_get(json_array_get(runs, 1), "summary"), "tau.0.0"));
    /* The tau table: one row per layer, one value per head, next to the initial sqrt(d) = sqrt(8). */
    json_t *tau = json_object_get(json_array_get(runs, 1), "tau");
    CHECK_NEAR(json_number_value(json_object_get(tau, "initial")), sqrt(8.0), 1e-12);
    CHECK_EQ_INT(json_array_size(json_object_get(tau, "final")), 1);
    CHECK_EQ_INT(json_array_size(json_array_get(json_object_get(tau, "final"), 0)), 2);
    CHECK(json_object_get(json_array_get(runs, 0), "tau") == NULL); /* rope has no learned tau */
    json_decref(j);
    j = api_call(&srv, "GET", "/api/runs?experiment=1", NULL, &code);
    CHECK(json_integer_value(json_object_get(j, "total")) >= 2);
    json_decref(j);
}

TEST(seed_blog_preset_is_the_blog_experiment) {
    long code;
    json_t *j = api_call(&srv, "GET", "/api/presets", NULL, &code);
    json_t *base = json_object_get(json_array_get(json_object_get(j, "presets"), 0), "base");
    CHECK_EQ_INT(json_integer_value(json_object_get(base, "n_layer")), 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(base, "n_head")), 4);
    CHECK_EQ_INT(json_integer_value(json_object_get(base, "d_model")), 128);
    CHECK_EQ_INT(json_integer_value(json_object_get(base, "seq_len")), 128);
    CHECK_EQ_INT(json_integer_value(json_object_get(base, "steps")), 2000);
    CHECK_EQ_INT(json_integer_value(json_object_get(base, "batch")), 32);
    json_decref(j);
    /* A classroom-sized version through overrides: still rope against cosine_rope, one seed. */
    j = api_call(&srv, "POST", "/api/experiments",
                 "{\"preset\":\"seed-blog\",\"overrides\":{\"corpus\":\"small\",\"steps\":4,\"n_layer\":1,"
                 "\"d_model\":16,\"n_head\":2,\"seq_len\":16,\"batch\":2,\"threads\":1}}",
                 &code);
    CHECK_EQ_INT(code, 201);
    json_t *runs = json_object_get(j, "runs");
    CHECK_EQ_INT(json_array_size(runs), 2);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(runs, 0), "config"), "attention")),
                  "rope"));
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(runs, 1), "config"), "attention")),
                  "cosine_rope"));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(runs, 0), "seed")),
                 json_integer_value(json_object_get(json_array_get(runs, 1), "seed")));
    json_decref(j);
    /* Without overrides it asks for the default corpus, which the test data dir does not have. */
    j = api_call(&srv, "POST", "/api/experiments", "{\"preset\":\"seed-blog\"}", &code);
    CHECK_EQ_INT(code, 422);
    CHECK(strstr(api_error_field(j), "corpus"));
    json_decref(j);
    j = api_call(&srv, "POST", "/api/experiments", "{\"preset\":\"nope\"}", &code);
    CHECK_EQ_INT(code, 422);
    CHECK(!strcmp(api_error_field(j), "preset"));
    json_decref(j);
    j = api_call(&srv, "POST", "/api/experiments",
                 "{\"base\":{" TINY_CONFIG "},\"variants\":[{\"name\":\"a\",\"config\":{\"n_layer\":99}}]}", &code);
    CHECK_EQ_INT(code, 422);
    CHECK(!strcmp(api_error_field(j), "variants[0].config.n_layer"));
    json_decref(j);
}

typedef struct {
    const json_t *paths;
    int missing, n;
} route_check;

static void check_route(const char *method, const char *pattern, void *ctx) {
    route_check *rc = ctx;
    char lower[16];
    size_t i = 0;
    for (; method[i] && i < sizeof lower - 1; i++) lower[i] = (char)(method[i] - 'A' + 'a');
    lower[i] = 0;
    json_t *item = json_object_get(rc->paths, pattern);
    if (!item || !json_object_get(item, lower)) {
        printf("# %s %s is routed but not described in openapi.json\n", method, pattern);
        rc->missing++;
    }
    rc->n++;
}

TEST(openapi_describes_every_route) {
    long code;
    json_t *doc = api_call(&srv, "GET", "/api/openapi.json", NULL, &code);
    CHECK_EQ_INT(code, 200);
    CHECK(!strncmp(json_string_value(json_object_get(doc, "openapi")), "3.0", 3));
    json_t *paths = json_object_get(doc, "paths");
    /* The routed table is the server's own: registered here exactly as attnlabd does. */
    http_config hc = {.bind_addr = "127.0.0.1"};
    app svc = {0};
    api_ctx a = {.svc = &svc, .max_upload_bytes = 1};
    http_server *hs = http_server_new(&hc);
    CHECK(hs && routes_register(hs, &a) == 0);
    route_check rcheck = {paths, 0, 0};
    http_server_each_route(hs, check_route, &rcheck);
    http_server_free(hs);
    int n = rcheck.n;
    CHECK_MSG(rcheck.missing == 0, "%d routes are missing from openapi.json", rcheck.missing);
    CHECK(n >= 25);
    json_decref(doc);
}

typedef struct {
    const json_t *paths;
    int n, wrong;
} query_probe;

/* A path of the pattern with every {param} as 1. */
static void concrete(const char *pattern, char *out, size_t len) {
    size_t o = 0;
    for (const char *p = pattern; *p && o + 2 < len; p++) {
        if (*p == '{') {
            out[o++] = '1';
            p = strchr(p, '}');
            if (!p) break;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = 0;
}

/* Every route answers a key it does not take with 422 unknown_parameter naming it, before doing
 * anything (a DELETE deletes nothing, a stream does not start); every key a GET route documents is
 * taken (its answer, whatever it is, is not that refusal). */
static void probe_query(const char *method, const char *pattern, void *ctx) {
    query_probe *q = ctx;
    char path[300], with[400];
    concrete(pattern, path, sizeof path);
    snprintf(with, sizeof with, "%s?no_such_key=1", path);
    long code;
    json_t *j = api_call(&srv, method, with, NULL, &code);
    const char *err = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    if (code != 422 || !err || strcmp(err, "unknown_parameter") || strcmp(api_error_field(j), "no_such_key")) {
        printf("# %s %s: %ld %s\n", method, with, code, err ? err : "");
        q->wrong++;
    }
    json_decref(j);
    q->n++;
    size_t len = strlen(pattern);
    if (strcmp(method, "GET") || (len >= 6 && !strcmp(pattern + len - 6, "events"))) return; /* streams */
    char op[8] = "get";
    const json_t *item = json_object_get(q->paths, pattern);
    const json_t *lists[2] = {json_object_get(item, "parameters"),
                              json_object_get(json_object_get(item, op), "parameters")};
    for (int l = 0; l < 2; l++) {
        size_t i;
        const json_t *p;
        json_array_foreach(lists[l], i, p) {
            const char *name = json_string_value(json_object_get(p, "name"));
            if (strcmp(json_string_value(json_object_get(p, "in")), "query")) continue;
            char key[64];
            snprintf(key, sizeof key, "%s", name);
            char *dot = strstr(key, ".KEY");
            if (dot) strcpy(dot, ".lr");
            snprintf(with, sizeof with, "%s?%s=1", path, key);
            j = api_call(&srv, method, with, NULL, &code);
            err = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
            if (err && !strcmp(err, "unknown_parameter")) {
                printf("# %s %s: refused a documented key\n", method, with);
                q->wrong++;
            }
            json_decref(j);
        }
    }
}

TEST(every_route_takes_exactly_the_query_keys_it_documents) {
    long code;
    json_t *doc = api_call(&srv, "GET", "/api/openapi.json", NULL, &code);
    CHECK_EQ_INT(code, 200);
    http_config hc = {.bind_addr = "127.0.0.1"};
    app svc = {0};
    api_ctx a = {.svc = &svc, .max_upload_bytes = 1};
    http_server *hs = http_server_new(&hc);
    CHECK(hs && routes_register(hs, &a) == 0);
    query_probe q = {json_object_get(doc, "paths"), 0, 0};
    http_server_each_route(hs, probe_query, &q);
    http_server_free(hs);
    json_decref(doc);
    CHECK_MSG(q.wrong == 0, "%d of %d routes do not take exactly their documented query keys", q.wrong, q.n);
    CHECK(q.n >= 25);
    /* the message names what the route takes */
    json_t *j = api_call(&srv, "GET", "/api/experiments?sort=name", NULL, &code);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    CHECK_MSG(code == 422 && msg && strstr(msg, "'sort'") && strstr(msg, "limit"), "%ld %s", code, msg ? msg : "");
    json_decref(j);
}

/* The preset enum of POST /api/experiments in openapi.json names exactly the presets the server
 * serves, in its order (a new preset row must be described too). */
TEST(openapi_preset_enum_is_the_presets_table) {
    long code;
    json_t *doc = api_call(&srv, "GET", "/api/openapi.json", NULL, &code);
    CHECK_EQ_INT(code, 200);
    json_t *en = json_object_get(
        json_object_get(
            json_object_get(
                json_object_get(
                    json_object_get(
                        json_object_get(
                            json_object_get(json_object_get(json_object_get(doc, "paths"), "/api/experiments"), "post"),
                            "requestBody"),
                        "content"),
                    "application/json"),
                "schema"),
            "properties"),
        "preset");
    en = json_object_get(en, "enum");
    json_t *j = api_call(&srv, "GET", "/api/presets", NULL, &code);
    CHECK_EQ_INT(code, 200);
    json_t *ps = json_object_get(j, "presets");
    CHECK(json_is_array(en) && json_is_array(ps));
    CHECK_MSG(json_array_size(en) == json_array_size(ps), "openapi.json lists %zu presets, the server serves %zu",
              json_array_size(en), json_array_size(ps));
    for (size_t i = 0; i < json_array_size(ps); i++) {
        const char *want = json_string_value(json_object_get(json_array_get(ps, i), "name"));
        const char *got = json_string_value(json_array_get(en, i));
        CHECK_MSG(want && got && !strcmp(want, got), "preset %zu: openapi.json says '%s', the server '%s'", i,
                  got ? got : "(none)", want ? want : "(none)");
    }
    json_decref(j);
    json_decref(doc);
}

TEST(prometheus_metrics) {
    harness_response r;
    CHECK(harness_get(&srv, "/metrics", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "attnlab_runs{status=\"succeeded\"}"));
    CHECK(strstr(r.body, "attnlab_training_jobs{state=\"running\"}"));
    CHECK(strstr(r.body, "attnlab_http_requests_total{code=\"200\"}"));
    CHECK(strstr(r.body, "attnlab_training_tokens_per_second"));
    harness_response_free(&r);
}

/* attnlab_event_subscribers of s's /metrics, or -1. */
static long subscribers(harness_server *s) {
    harness_response r;
    if (harness_get(s, "/metrics", &r) != 0) return -1;
    const char *p = r.body ? strstr(r.body, "\nattnlab_event_subscribers ") : NULL;
    long v = p ? atol(p + strlen("\nattnlab_event_subscribers ")) : -1;
    harness_response_free(&r);
    return v;
}

/* A viewer that reads nothing is dropped once the ring has passed it (issue 23 item 11: it was
 * dropped only by the connection timeout, 54-67 s later), while its socket is still open. */
TEST(a_stream_that_reads_nothing_is_dropped_when_the_ring_passes_it) {
    harness_server small;
    const char *args[] = {"--event-ring", "64", NULL};
    CHECK(harness_start(&small, NULL, args) == 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int tiny = 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)small.port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof to) == 0);
    const char *req = "GET /api/events HTTP/1.1\r\nHost: localhost\r\n\r\n";
    CHECK(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    long n = 0;
    for (int i = 0; i < 500 && n < 1; i++) {
        n = subscribers(&small);
        if (n < 1) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    CHECK_MSG(n == 1, "the viewer never subscribed (%ld)", n);
    /* a run publishes far more than the ring and the sockets hold; the viewer never reads */
    long long id = api_start_tiny_run(&small, "\"steps\":1000000,\"checkpoint_every\":0", "flood");
    CHECK(id > 0);
    /* Until it is dropped, or the run has published far more than the ring (64 events), the
     * viewer's socket (1 KB) and the server's capped send buffer (api_events.c: some 64 KB, a few
     * hundred steps' events) hold together: a bound in steps, not in time, so a slow build (ASan on a
     * loaded machine: 12 steps a second) waits as long as it needs. (The loop's own cap, 60,000
     * polls, is only against a server that stops training altogether.) */
    int dropped = 0;
    long step = 0;
    for (int i = 0; i < 60000 && !dropped && step < 5000; i++) {
        dropped = subscribers(&small) == 0;
        if (!dropped) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            if (i % 20 == 0) {
                json_t *run = api_call(&small, "GET", "/api/runs/1", NULL, NULL);
                step = (long)json_integer_value(json_object_get(json_object_get(run, "run"), "step"));
                json_decref(run);
            }
        }
    }
    json_t *run = api_call(&small, "GET", "/api/runs/1", NULL, NULL);
    step = (long)json_integer_value(json_object_get(json_object_get(run, "run"), "step"));
    json_decref(run);
    api_cancel_run(&small, id, 60000);
    close(fd);
    CHECK_EQ_INT(harness_stop(&small), 0);
    CHECK_MSG(dropped, "a viewer that read nothing was still subscribed at step %ld", step);
    printf("# the silent viewer was dropped by step %ld (ring of 64 events)\n", step);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[] = {"--train-workers", "2", "--compute-threads", "2", NULL};
    if (harness_start(&srv, NULL, args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(sse_delivers_every_step_in_order_then_the_final_status);
    RUN(last_event_id_resumes_without_gaps);
    RUN(too_old_last_event_id_gets_resync);
    RUN(a_runs_stream_ends_after_its_final_status);
    RUN(experiment_makes_one_run_per_variant_with_one_seed);
    RUN(seed_blog_preset_is_the_blog_experiment);
    RUN(openapi_describes_every_route);
    RUN(every_route_takes_exactly_the_query_keys_it_documents);
    RUN(openapi_preset_enum_is_the_presets_table);
    RUN(prometheus_metrics);
    RUN(a_stream_that_reads_nothing_is_dropped_when_the_ring_passes_it);
    int rc = harness_stop(&srv);
    if (rc != 0) {
        printf("FAIL shutdown: attnlabd exited with %d\n", rc);
        test_fail_count++;
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
