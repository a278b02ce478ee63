/* Runs trained elsewhere, against a real attnlabd (and again on PostgreSQL, as tests/run.sh runs
 * every harness suite): POST /api/runs {"source":"external"} creates a running run that keeps its
 * config as given, POST /api/runs/{id}/metrics stores a batch all or nothing (the first bad point
 * named, nothing of the batch kept), PATCH ends it, after which it takes no more points; a native
 * run takes neither points nor a status (and a refused PATCH changes nothing); a restart leaves an
 * external run running (the service did not train it); external runs that join an experiment as a
 * variant are in its statistics beside the native runs, paired by replicate; weights uploaded to an
 * external run (a trained run's, downloaded) are checked, served back and probed like the trained
 * run's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv;
static long long ext_id;

static json_t *call(const char *method, const char *path, const char *body, long want) {
    return api_expect(&srv, method, path, body, want);
}

TEST(an_external_run_is_created_running_with_its_config_as_given) {
    json_t *r =
        call("POST", "/api/runs",
             "{\"source\":\"external\",\"name\":\"torch-loop\",\"tags\":[\"torch\"],\"config\":{\"attention\":"
             "\"cosine_rope\",\"steps\":40,\"seed\":7,\"optimizer\":{\"name\":\"adamw\",\"betas\":[0.9,0.95]}}}",
             201);
    CHECK(r);
    json_t *run = json_object_get(r, "run");
    ext_id = json_integer_value(json_object_get(run, "id"));
    CHECK(!strcmp(json_string_value(json_object_get(run, "source")), "external"));
    CHECK(!strcmp(json_string_value(json_object_get(run, "status")), "running"));
    CHECK(!strcmp(json_string_value(json_object_get(run, "variant")), "cosine_rope"));
    CHECK_EQ_INT(json_integer_value(json_object_get(run, "seed")), 7);
    CHECK_EQ_INT(json_integer_value(json_object_get(run, "total_steps")), 40);
    json_t *opt = json_object_get(json_object_get(run, "config"), "optimizer");
    CHECK_MSG(json_is_object(opt) && json_is_array(json_object_get(opt, "betas")),
              "a key outside RunConfig was not kept");
    json_decref(r);
    /* it is listed and filtered like any run, and marked */
    json_t *l = call("GET", "/api/runs?tag=torch", NULL, 200);
    CHECK(l && json_array_size(json_object_get(l, "runs")) == 1);
    json_decref(l);
    static const char *const bad[][2] = {{"{\"source\":\"elsewhere\"}", "source"},
                                         {"{\"source\":\"external\",\"config\":[1]}", "config"},
                                         {"{\"source\":\"external\",\"variant\":\"a b\"}", "variant"},
                                         {"{\"source\":\"external\",\"experiment_id\":999999}", "experiment_id"},
                                         {"{\"source\":\"external\",\"replicate\":-1}", "replicate"},
                                         {"{\"source\":\"external\",\"steps\":3}", "steps"},
                                         {"{\"source\":\"external\",\"provenance\":[1]}", "provenance"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long status;
        json_t *j = api_call(&srv, "POST", "/api/runs", bad[i][0], &status);
        CHECK_MSG(status == 422 && !strcmp(api_error_field(j), bad[i][1]), "%s: %ld %s", bad[i][0], status,
                  api_error_field(j));
        json_decref(j);
    }
}

TEST(a_batch_is_stored_whole_or_not_at_all) {
    char path[96], body[512];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics", ext_id);
    json_t *r = call("POST", path,
                     "{\"points\":[{\"step\":1,\"key\":\"loss\",\"value\":5.5,\"wall_time\":1000},{\"step\":2,\"key\":"
                     "\"loss\",\"value\":5.25},{\"step\":2,\"key\":\"tau.0.0\",\"value\":5.6}]}",
                     200);
    CHECK(r && json_integer_value(json_object_get(r, "stored")) == 3);
    json_decref(r);
    /* the second point is bad: the first is not kept either */
    static const char *const bad[][2] = {
        {"{\"points\":[{\"step\":3,\"key\":\"loss\",\"value\":5},{\"step\":3,\"key\":\"loss\",\"value\":\"x\"}]}",
         "points[1].value"},
        {"{\"points\":[{\"step\":3,\"key\":\"loss\",\"value\":5},{\"step\":-1,\"key\":\"loss\",\"value\":1}]}",
         "points[1].step"},
        {"{\"points\":[{\"step\":3,\"key\":\"a key\",\"value\":5}]}", "points[0].key"},
        {"{\"points\":[{\"step\":3,\"key\":\"loss\",\"value\":5,\"extra\":1}]}", "points[0]"},
        {"{\"points\":[]}", "points"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long status;
        json_t *j = api_call(&srv, "POST", path, bad[i][0], &status);
        CHECK_MSG(status == 422 && !strcmp(api_error_field(j), bad[i][1]), "%zu: %ld %s", i, status,
                  api_error_field(j));
        json_decref(j);
    }
    /* keys up to 250 bytes (MLflow's bound), stored and read back whole; 251 is refused */
    char key[260], big_body[400];
    for (int len = 250; len <= 251; len++) {
        for (int i = 0; i < len; i++) key[i] = "abcdefghij.0123456789"[i % 21];
        key[len] = 0;
        snprintf(big_body, sizeof big_body, "{\"points\":[{\"step\":2,\"key\":\"%s\",\"value\":0.5}]}", key);
        long status;
        json_t *j = api_call(&srv, "POST", path, big_body, &status);
        CHECK_MSG(status == (len == 250 ? 200 : 422) && (len == 250 || !strcmp(api_error_field(j), "points[0].key")),
                  "a %d-byte key: %ld", len, status);
        json_decref(j);
    }
    key[250] = 0;
    json_t *long_series = api_series(&srv, ext_id, key);
    CHECK_MSG(long_series && json_array_size(long_series) == 1 &&
                  json_real_value(json_array_get(long_series, 0)) == 0.5,
              "the 250-byte key's series: %zu points", json_array_size(long_series));
    json_decref(long_series);
    json_t *loss = api_series(&srv, ext_id, "loss");
    CHECK_MSG(loss && json_array_size(loss) == 2, "%zu loss points", json_array_size(loss));
    CHECK(json_real_value(json_array_get(loss, 1)) == 5.25);
    json_decref(loss);
    /* 1000 points in one batch are taken, 1001 are not */
    size_t cap = 1002 * 48 + 32;
    char *big = malloc(cap);
    CHECK(big);
    for (int n = 1000; n <= 1001; n++) {
        size_t off = (size_t)snprintf(big, cap, "{\"points\":[");
        for (int i = 0; i < n; i++)
            off += (size_t)snprintf(big + off, cap - off, "%s{\"step\":%d,\"key\":\"k\",\"value\":%d}", i ? "," : "",
                                    10 + i, i);
        snprintf(big + off, cap - off, "]}");
        long status;
        json_t *j = api_call(&srv, "POST", path, big, &status);
        CHECK_EQ_INT(status, n == 1000 ? 200 : 422);
        json_decref(j);
    }
    free(big);
    snprintf(body, sizeof body, "/api/runs/%lld", ext_id);
    json_t *run = call("GET", body, NULL, 200);
    CHECK(run && json_integer_value(json_object_get(json_object_get(run, "run"), "step")) == 1009);
    json_decref(run);
}

TEST(a_native_run_takes_neither_points_nor_a_status) {
    long long id = api_start_tiny_run(&srv, "\"steps\":3", "native");
    CHECK(id > 0);
    char *st = api_wait_status(&srv, id, "succeeded", 120000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    char path[96];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics", id);
    json_t *j = call("POST", path, "{\"points\":[{\"step\":1,\"key\":\"loss\",\"value\":1}]}", 409);
    CHECK(j);
    json_decref(j);
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    j = call("PATCH", path, "{\"name\":\"renamed\",\"status\":\"failed\"}", 409);
    CHECK(j);
    json_decref(j);
    j = call("GET", path, NULL, 200);
    CHECK(j && !strcmp(json_string_value(json_object_get(json_object_get(j, "run"), "name")), "native"));
    json_decref(j);
}

TEST(a_restart_leaves_an_external_run_running_and_the_client_ends_it) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s", srv.data_dir);
    CHECK(harness_stop(&srv) == 0);
    CHECK(harness_start(&srv, dir, NULL) == 0);
    char path[96];
    snprintf(path, sizeof path, "/api/runs/%lld", ext_id);
    json_t *j = call("GET", path, NULL, 200);
    CHECK(j && !strcmp(json_string_value(json_object_get(json_object_get(j, "run"), "status")), "running"));
    json_decref(j);
    j = call("PATCH", path, "{\"status\":\"finished\"}", 422);
    json_decref(j);
    j = call("PATCH", path, "{\"status\":\"failed\",\"error\":\"RuntimeError: CUDA out of memory\"}", 200);
    json_t *run = json_object_get(j, "run");
    CHECK(run && !strcmp(json_string_value(json_object_get(run, "status")), "failed"));
    CHECK(!strcmp(json_string_value(json_object_get(run, "error")), "RuntimeError: CUDA out of memory"));
    CHECK(json_is_number(json_object_get(run, "finished_at")));
    json_decref(j);
    snprintf(path, sizeof path, "/api/runs/%lld/metrics", ext_id);
    j = call("POST", path, "{\"points\":[{\"step\":5000,\"key\":\"loss\",\"value\":1}]}", 409);
    json_decref(j);
}

TEST(external_runs_join_an_experiment_and_its_statistics) {
    json_t *runs;
    long long exp = api_create_experiment(&srv,
                                          "{\"name\":\"mixed\",\"replicates\":3,\"base\":{" TINY_CONFIG
                                          ",\"steps\":6,\"checkpoint_every\":0},\"variants\":[{\"name\":\"rope\","
                                          "\"config\":{}}]}",
                                          &runs);
    CHECK(exp > 0);
    int missed = api_wait_runs(&srv, runs, "succeeded", 120000);
    json_decref(runs);
    CHECK_EQ_INT(missed, 0);
    size_t i;
    for (int rep = 0; rep < 3; rep++) {
        char body[256], path[96];
        snprintf(body, sizeof body,
                 "{\"source\":\"external\",\"experiment_id\":%lld,\"variant\":\"torch\",\"replicate\":%d,"
                 "\"config\":{\"attention\":\"rope\"}}",
                 exp, rep);
        json_t *c = call("POST", "/api/runs", body, 201);
        CHECK(c);
        long long id = json_integer_value(json_object_get(json_object_get(c, "run"), "id"));
        json_decref(c);
        snprintf(path, sizeof path, "/api/runs/%lld/metrics", id);
        snprintf(
            body, sizeof body,
            "{\"points\":[{\"step\":6,\"key\":\"loss\",\"value\":%g},{\"step\":6,\"key\":\"val_loss\",\"value\":%g}]}",
            9.0 + rep, 9.5 + rep);
        json_t *p = call("POST", path, body, 200);
        CHECK(p);
        json_decref(p);
        snprintf(path, sizeof path, "/api/runs/%lld", id);
        p = call("PATCH", path, "{\"status\":\"succeeded\"}", 200);
        CHECK(p);
        json_decref(p);
    }
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld/stats", exp);
    json_t *s = call("GET", path, NULL, 200);
    CHECK(s);
    json_t *torch = NULL, *v, *cmp = NULL;
    json_array_foreach(json_object_get(json_object_get(s, "stats"), "variants"), i,
                       v) if (!strcmp(json_string_value(json_object_get(v, "name")), "torch")) torch = v;
    CHECK_MSG(torch, "no torch variant in the statistics");
    json_t *fv = json_object_get(json_object_get(torch, "metrics"), "final_val_loss");
    CHECK_EQ_INT(json_integer_value(json_object_get(fv, "n")), 3);
    CHECK(json_number_value(json_object_get(fv, "mean")) == 10.5);
    json_array_foreach(json_object_get(json_object_get(s, "stats"), "comparisons"), i,
                       v) if (!strcmp(json_string_value(json_object_get(v, "metric")), "final_val_loss")) cmp = v;
    CHECK_MSG(cmp && json_integer_value(json_object_get(cmp, "n")) == 3, "no paired comparison of 3");
    json_decref(s);
}

/* The logging load, on this store backend: 20 keys a step for 10,000 steps in batches of
 * 1000 points (as the Python client sends them) while a run of the service's own trains; every
 * point is stored (each series' count), the last value is the last step's. */
TEST(twenty_keys_for_ten_thousand_steps_are_all_stored) {
    long long own = api_start_tiny_run(&srv, "\"steps\":1000000", "busy");
    CHECK(own > 0);
    CHECK(api_wait_step(&srv, own, 1, 120000) == 0);
    json_t *c = call("POST", "/api/runs", "{\"source\":\"external\",\"name\":\"bulk-log\"}", 201);
    CHECK(c);
    long long id = json_integer_value(json_object_get(json_object_get(c, "run"), "id"));
    json_decref(c);
    char path[96];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics", id);
    size_t cap = 1000 * 64 + 32;
    char *batch = malloc(cap);
    CHECK(batch);
    long refused = 0;
    for (int step = 1; step <= 10000 && !refused; step += 50) {
        size_t o = (size_t)snprintf(batch, cap, "{\"points\":[");
        for (int s = step; s < step + 50; s++)
            for (int k = 0; k < 20; k++)
                o += (size_t)snprintf(batch + o, cap - o, "%s{\"step\":%d,\"key\":\"k%d\",\"value\":%d.5}",
                                      s == step && k == 0 ? "" : ",", s, k, s + k);
        snprintf(batch + o, cap - o, "]}");
        long status;
        json_decref(api_call(&srv, "POST", path, batch, &status));
        if (status != 200) refused = status;
    }
    free(batch);
    CHECK(api_cancel_run(&srv, own, 120000) >= 0);
    CHECK_MSG(!refused, "a batch was answered %ld", refused);
    snprintf(path, sizeof path, "/api/runs/%lld/summary", id);
    json_t *sum = call("GET", path, NULL, 200);
    CHECK(sum);
    json_t *series = json_object_get(sum, "summary");
    long long stored = 0;
    const char *key;
    json_t *s;
    json_object_foreach(series, key, s) stored += json_integer_value(json_object_get(s, "count"));
    double last = json_number_value(json_object_get(json_object_get(series, "k19"), "last"));
    size_t n_series = json_object_size(series);
    json_decref(sum);
    CHECK_EQ_INT(n_series, 20);
    CHECK_EQ_INT(stored, 200000);
    CHECK(last == 10019.5);
}

/* POST a body with a content type; the response (caller frees) or status -1. */
static harness_response post_bytes(const char *path, const char *body, size_t len, const char *ctype) {
    harness_response r = {0};
    char h[96];
    snprintf(h, sizeof h, "Content-Type: %s", ctype);
    const char *headers[] = {h, NULL};
    if (harness_request(&srv, "POST", path, body, len, headers, &r) != 0) r.status = -1;
    return r;
}

/* The attention_map probe's result of a run on fixed text (NULL on failure). */
static json_t *attention_map(long long run_id) {
    char body[256];
    snprintf(body, sizeof body,
             "{\"kind\":\"attention_map\",\"run_id\":%lld,\"params\":{\"text\":\"the quick brown fox\"}}", run_id);
    long status;
    json_t *j = api_call(&srv, "POST", "/api/probes", body, &status);
    json_t *res =
        status == 200 || status == 201 ? json_incref(json_object_get(json_object_get(j, "probe"), "result")) : NULL;
    if (!res) printf("# probe on run %lld: HTTP %ld\n", run_id, status);
    json_decref(j);
    return res;
}

TEST(uploaded_weights_make_an_external_run_probeable) {
    /* a trained run's weights, downloaded, uploaded to an external run: its attention maps are the
     * trained run's exactly (the same model, loaded by the same rules) */
    long long native =
        api_start_tiny_run(&srv, "\"steps\":4,\"attention\":\"cosine_rope\",\"precision\":\"fp32\"", "donor");
    CHECK(native > 0);
    char *st = api_wait_status(&srv, native, "succeeded", 120000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    char path[96];
    snprintf(path, sizeof path, "/api/runs/%lld/weights", native);
    harness_response w;
    CHECK(harness_get(&srv, path, &w) == 0 && w.status == 200 && w.len > 1000);
    json_t *c = call("POST", "/api/runs", "{\"source\":\"external\",\"name\":\"with-weights\"}", 201);
    CHECK(c);
    long long id = json_integer_value(json_object_get(json_object_get(c, "run"), "id"));
    json_decref(c);
    snprintf(path, sizeof path, "/api/runs/%lld/weights", id);
    harness_response up = post_bytes(path, "not a safetensors file", 22, "application/octet-stream");
    json_t *e = harness_json(&up);
    CHECK_MSG(up.status == 422 && !strcmp(api_error_field(e), "body"), "junk: %ld", up.status);
    json_decref(e);
    harness_response_free(&up);
    up = post_bytes(path, w.body, w.len, "application/octet-stream");
    json_t *info = harness_json(&up);
    CHECK_MSG(up.status == 201, "upload: %ld %s", up.status, up.body ? up.body : "");
    json_t *wi = json_object_get(info, "weights");
    CHECK(!strcmp(json_string_value(json_object_get(wi, "attention")), "cosine_rope"));
    CHECK_EQ_INT(json_integer_value(json_object_get(wi, "d_model")), 16);
    json_decref(info);
    harness_response_free(&up);
    /* a native run takes no weights */
    snprintf(path, sizeof path, "/api/runs/%lld/weights", native);
    up = post_bytes(path, w.body, w.len, "application/octet-stream");
    CHECK_EQ_INT(up.status, 409);
    harness_response_free(&up);
    /* the same bytes come back from the external run */
    snprintf(path, sizeof path, "/api/runs/%lld/weights", id);
    harness_response back;
    CHECK(harness_get(&srv, path, &back) == 0 && back.status == 200);
    CHECK_MSG(back.len == w.len && !memcmp(back.body, w.body, w.len), "the weights served back differ");
    harness_response_free(&back);
    harness_response_free(&w);
    json_t *a = attention_map(native), *b = attention_map(id);
    CHECK(a && b);
    CHECK_MSG(json_equal(json_object_get(a, "tables"), json_object_get(b, "tables")),
              "the external run's attention maps are not the trained run's");
    json_decref(a);
    json_decref(b);
}

static void cases(void) {
    RUN(an_external_run_is_created_running_with_its_config_as_given);
    RUN(a_batch_is_stored_whole_or_not_at_all);
    RUN(a_native_run_takes_neither_points_nor_a_status);
    RUN(a_restart_leaves_an_external_run_running_and_the_client_ends_it);
    RUN(external_runs_join_an_experiment_and_its_statistics);
    RUN(uploaded_weights_make_an_external_run_probeable);
    RUN(twenty_keys_for_ten_thousand_steps_are_all_stored);
}

int main(void) { return api_suite_main(&srv, NULL, cases); }
