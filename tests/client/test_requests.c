/* What the client sends and how it treats answers a real attnlabd does not give on demand: the
 * exact request bodies of experiments, tags and probes, the bearer header, a server that never
 * answers (timeout), 5xx, and answers that are not the API. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "client_run.h"

static char bufs[16][2048];
static int nbuf;

static const char *resp(int status, const char *type, const char *body) {
    char *b = bufs[nbuf++ % 16];
    snprintf(b, sizeof bufs[0],
             "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", status, type,
             strlen(body), body);
    return b;
}

/* The JSON body the server received for the first request whose log line starts with `line`. */
static json_t *body_of(const char *log, const char *line) {
    const char *p = strstr(log, line);
    if (!p) return NULL;
    const char *b = strstr(p, "\nbody: ");
    if (!b) return NULL;
    b += 7;
    size_t n = strcspn(b, "\n");
    return json_loadb(b, n, 0, NULL);
}

static int json_is(const json_t *v, const char *text) {
    json_t *w = json_loads(text, 0, NULL);
    int eq = v && w && json_equal((json_t *)v, w);
    json_decref(w);
    return eq;
}

TEST(experiment_bodies) {
    fake_rule rules[] = {{"POST", "/api/experiments",
                          resp(201, "application/json",
                               "{\"experiment\":{\"id\":3,\"name\":\"x\"},\"runs\":[{\"id\":8,\"variant\":\"rope\"},{"
                               "\"id\":9,\"variant\":\"cosine_rope\"}]}"),
                          0, 0}};
    fake_server fs;
    CHECK(fake_start(&fs, rules, 1) == 0);
    client_result r1, r2;
    const char *a1[] = {"--server", fs.url,      "experiments", "start", "--preset", "seed-blog", "--set",
                        "steps=20", "--d-model", "32",          "--tag", "tiny",     NULL};
    client_run(&r1, 20, a1);
    char base[300];
    snprintf(base, sizeof base, "%s.base.json", fs.log_path);
    FILE *f = fopen(base, "w");
    CHECK(f);
    fputs("{\"steps\":50,\"corpus\":\"small\"}", f);
    fclose(f);
    const char *a2[] = {"--server", fs.url,  "experiments", "start",
                        "--base",   base,    "--vary",      "attention=rope,cosine_rope",
                        "--lr",     "0.001", "-q",          NULL};
    client_run(&r2, 20, a2);
    unlink(base);
    char *log = fake_stop(&fs);
    CHECK_MSG(r1.code == 0, "%s", r1.err);
    CHECK_MSG(!strcmp(r1.out, "experiment 3 created (x): run 8 (rope), run 9 (cosine_rope)\n"), "%s", r1.out);
    CHECK_MSG(r2.code == 0 && !strcmp(r2.out, "8\n9\n"), "%d %s %s", r2.code, r2.out, r2.err);
    json_t *b1 = body_of(log, "POST /api/experiments");
    CHECK_MSG(json_is(b1, "{\"preset\":\"seed-blog\",\"overrides\":{\"steps\":20,\"d_model\":32},\"tags\":[\"tiny\"]}"),
              "%s", log);
    json_decref(b1);
    const char *second = strstr(strstr(log, "POST /api/experiments") + 1, "POST /api/experiments");
    CHECK(second);
    json_t *b2 = body_of(second, "POST /api/experiments");
    CHECK_MSG(json_is(b2, "{\"base\":{\"steps\":50,\"corpus\":\"small\",\"lr\":0.001},"
                          "\"variants\":[{\"name\":\"rope\",\"config\":{\"attention\":\"rope\"}},"
                          "{\"name\":\"cosine_rope\",\"config\":{\"attention\":\"cosine_rope\"}}]}"),
              "%s", second);
    json_decref(b2);
    free(log);
}

/* experiments add: more replicates, or new variants, posted to the experiment's runs */
TEST(experiments_add_posts_replicates_or_variants) {
    fake_rule rules[] = {{"POST", "/api/experiments/4/runs",
                          resp(201, "application/json",
                               "{\"experiment\":{\"id\":4,\"name\":\"ab\"},\"runs\":[{\"id\":11,\"variant\":\"a\"},{"
                               "\"id\":12,\"variant\":\"b\"}]}"),
                          0, 0}};
    fake_server fs;
    CHECK(fake_start(&fs, rules, 1) == 0);
    client_result r1, r2, r3;
    const char *a1[] = {"--server", fs.url, "experiments", "add", "4", "--replicates", "2", NULL};
    client_run(&r1, 20, a1);
    const char *a2[] = {"--server", fs.url, "experiments", "add", "4", "--vary", "lr=1e-3,3e-4", "-q", NULL};
    client_run(&r2, 20, a2);
    const char *a3[] = {"--server", fs.url, "experiments", "add", "4", NULL};
    client_run(&r3, 20, a3);
    char *log = fake_stop(&fs);
    CHECK_MSG(r1.code == 0 && !strcmp(r1.out, "experiment 4 grew (ab): run 11 (a), run 12 (b)\n"), "%d %s %s", r1.code,
              r1.out, r1.err);
    CHECK_MSG(r2.code == 0 && !strcmp(r2.out, "11\n12\n"), "%d %s %s", r2.code, r2.out, r2.err);
    CHECK_MSG(r3.code == 2, "no --replicates or --vary: exit %d", r3.code);
    json_t *b1 = body_of(log, "POST /api/experiments/4/runs");
    CHECK_MSG(json_is(b1, "{\"replicates\":2}"), "%s", log);
    json_decref(b1);
    const char *second = strstr(strstr(log, "POST /api/experiments/4/runs") + 1, "POST /api/experiments/4/runs");
    CHECK(second);
    json_t *b2 = body_of(second, "POST /api/experiments/4/runs");
    CHECK_MSG(json_is(b2, "{\"variants\":[{\"name\":\"1e-3\",\"config\":{\"lr\":0.001}},{\"name\":\"3e-4\","
                          "\"config\":{\"lr\":0.0003}}]}"),
              "%s", second);
    json_decref(b2);
    free(log);
}

TEST(tag_merges_and_note_patches_with_the_token) {
    fake_rule rules[] = {
        {"GET", "/api/runs/5", resp(200, "application/json", "{\"run\":{\"id\":5,\"tags\":[\"old\",\"keep\"]}}"), 0, 0},
        {"PATCH", "/api/runs/5",
         resp(200, "application/json", "{\"run\":{\"id\":5,\"tags\":[\"keep\",\"new\",\"old\"],\"note\":\"n\"}}"), 0,
         0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 2) == 0);
    client_result r1, r2;
    const char *a1[] = {"--server", fs.url, "--token", "tok123", "runs", "tag", "5", "new", "old", NULL};
    client_run(&r1, 20, a1);
    const char *a2[] = {"--server", fs.url, "--token", "tok123", "runs", "note", "5", "two", "words", NULL};
    client_run(&r2, 20, a2);
    char *log = fake_stop(&fs);
    CHECK_MSG(r1.code == 0 && r2.code == 0, "%s %s", r1.err, r2.err);
    json_t *b = body_of(log, "PATCH /api/runs/5");
    CHECK_MSG(json_is(b, "{\"tags\":[\"old\",\"keep\",\"new\"]}"), "%s", log);
    json_decref(b);
    const char *second = strstr(strstr(log, "PATCH /api/runs/5") + 1, "PATCH /api/runs/5");
    CHECK(second);
    b = body_of(second, "PATCH /api/runs/5");
    CHECK_MSG(json_is(b, "{\"note\":\"two words\"}"), "%s", second);
    json_decref(b);
    /* Every request carried the bearer token. */
    CHECK_EQ_INT(count_substr(log, "Authorization: Bearer tok123"), count_substr(log, " /api/"));
    CHECK(strstr(r1.out, "run 5 tags: keep,new,old"));
    free(log);
}

TEST(probe_body_and_typed_params) {
    fake_rule rules[] = {
        {"GET", "/api/probe-kinds",
         resp(200, "application/json",
              "{\"kinds\":[{\"name\":\"dephasing\",\"params\":[{\"name\":\"offsets\",\"type\":\"int_list\"},"
              "{\"name\":\"seeding\",\"type\":\"choice\"},{\"name\":\"d\",\"type\":\"int\"}]}]}"),
         0, 0},
        {"POST", "/api/probes",
         resp(201, "application/json",
              "{\"probe\":{\"id\":2,\"kind\":\"dephasing\",\"result\":{\"kind\":\"dephasing\",\"tables\":[{\"name\":"
              "\"t\","
              "\"columns\":[\"offset\",\"mean\"],\"rows\":[[0,1.5],[16,-0.25]]}]}}}"),
         0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 2) == 0);
    client_result r;
    const char *a[] = {"--server", fs.url, "probe", "dephasing", "--param",  "offsets=16", "--param", "seeding=single",
                       "-p",       "d=8",  "--run", "4",         "--format", "csv",        NULL};
    client_run(&r, 20, a);
    char *log = fake_stop(&fs);
    CHECK_MSG(r.code == 0, "%s", r.err);
    CHECK_MSG(!strcmp(r.out, "offset,mean\n0,1.5\n16,-0.25\n"), "%s", r.out);
    json_t *b = body_of(log, "POST /api/probes");
    CHECK_MSG(
        json_is(b,
                "{\"kind\":\"dephasing\",\"params\":{\"offsets\":[16],\"seeding\":\"single\",\"d\":8},\"run_id\":4}"),
        "%s", log);
    json_decref(b);
    free(log);
}

TEST(metrics_query_string) {
    fake_rule rules[] = {
        {"GET", "/api/runs/3/metrics",
         resp(200, "application/json", "{\"run_id\":3,\"series\":{\"loss\":{\"steps\":[1,2],\"values\":[2.5,2.25]}}}"),
         0, 0}};
    fake_server fs;
    CHECK(fake_start(&fs, rules, 1) == 0);
    client_result r;
    const char *a[] = {"--server", fs.url, "metrics", "3", "--keys", "loss,tau.*", "--max-points", "50", NULL};
    client_run(&r, 20, a);
    char *log = fake_stop(&fs);
    CHECK_MSG(r.code == 0, "%s", r.err);
    CHECK_MSG(strstr(log, "GET /api/runs/3/metrics?keys=loss%2Ctau.%2A&max_points=50\n"), "%s", log);
    CHECK_MSG(!strcmp(r.out, "step  loss\n   1   2.5\n   2  2.25\n"), "%s", r.out);
    free(log);
}

TEST(timeouts_5xx_and_foreign_answers) {
    fake_rule rules[] = {
        {"GET", "/api/runs?", NULL, 0, 0}, /* never answers */
        {"GET", "/api/runs", NULL, 0, 0},
        {"GET", "/api/experiments",
         resp(500, "application/json", "{\"error\":{\"code\":\"internal\",\"message\":\"database is locked\"}}"), 0, 0},
        {"GET", "/api/corpora", resp(200, "text/html", "<html><body>It works!</body></html>"), 0, 0},
        {"GET", "/api/probes", resp(502, "text/html", "<html>Bad Gateway</html>"), 0, 0},
        {"GET", "/api/health",
         resp(503, "application/json",
              "{\"status\":\"degraded\",\"version\":\"0.1.0\",\"db\":\"error\",\"uptime_s\":3}"),
         0, 0},
    };
    fake_server fs;
    CHECK(fake_start(&fs, rules, 6) == 0);
    client_result r1, r2, r3, r4, r5;
    const char *a1[] = {"--server", fs.url, "--timeout", "0.5", "runs", "list", NULL};
    double t0 = client_now();
    client_run(&r1, 20, a1);
    double took = client_now() - t0;
    const char *a2[] = {"--server", fs.url, "experiments", "list", NULL};
    client_run(&r2, 20, a2);
    const char *a3[] = {"--server", fs.url, "corpora", "list", NULL};
    client_run(&r3, 20, a3);
    const char *a4[] = {"--server", fs.url, "probes", "list", NULL};
    client_run(&r4, 20, a4);
    const char *a5[] = {"--server", fs.url, "health", NULL};
    client_run(&r5, 20, a5);
    free(fake_stop(&fs));
    CHECK_MSG(r1.code == 3 && strstr(r1.err, "timed out after 0.5s") && count_lines(r1.err) == 1, "%d %s", r1.code,
              r1.err);
    CHECK_MSG(took < 3, "took %.2fs", took);
    CHECK_MSG(r2.code == 5 && strstr(r2.err, "HTTP 500 internal: database is locked"), "%d %s", r2.code, r2.err);
    CHECK_MSG(r3.code == 5 && strstr(r3.err, "not JSON"), "%d %s", r3.code, r3.err);
    CHECK_MSG(r4.code == 5 && strstr(r4.err, "HTTP 502: <html>Bad Gateway</html>"), "%d %s", r4.code, r4.err);
    CHECK_MSG(r5.code == 5 && strstr(r5.out, "degraded") && strstr(r5.err, "reports 'degraded'"), "%d %s %s", r5.code,
              r5.out, r5.err);
    for (int k = 0; k < 5; k++) {
        client_result *r = k == 0 ? &r1 : k == 1 ? &r2 : k == 2 ? &r3 : k == 3 ? &r4 : &r5;
        CHECK_MSG(count_lines(r->err) == 1 && !strncmp(r->err, "attnlab: ", 9), "case %d: %s", k, r->err);
    }
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(experiment_bodies);
    RUN(experiments_add_posts_replicates_or_variants);
    RUN(tag_merges_and_note_patches_with_the_token);
    RUN(probe_body_and_typed_params);
    RUN(metrics_query_string);
    RUN(timeouts_5xx_and_foreign_answers);
    return test_summary();
}
