/* A model probe's work is estimated from its parameters and the run's model size before it waits
 * for the probe worker (probe_estimate.h): over the bound it is a 422 too_large naming the parameter
 * to lower and the bound, and nothing runs or is stored; under it the probe runs as ever. The
 * server's bound is lowered (ATTNLAB_TEST_PROBE_MAX_FLOPS) so that a tiny run's probes meet it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

#define BOUND "1e+08"

static harness_server srv;
static long long run_id;

TEST(a_tiny_run_is_trained) {
    run_id = api_start_tiny_run(&srv, "\"steps\":2", "for-bounds");
    CHECK(run_id > 0);
    char *st = api_wait_status(&srv, run_id, "succeeded", 120000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
}

static long long probes_of(const char *kind) {
    char path[96];
    snprintf(path, sizeof path, "/api/probes?kind=%s", kind);
    json_t *j = api_expect(&srv, "GET", path, NULL, 200);
    long long n = json_integer_value(json_object_get(j, "total"));
    json_decref(j);
    return n;
}

TEST(a_model_probe_over_the_bound_is_refused_before_it_runs) {
    char body[256];
    long code;
    /* 6 ks x 5 predictors: 31 forward passes for the loss */
    snprintf(body, sizeof body, "{\"kind\":\"sparse_attention\",\"run_id\":%lld}", run_id);
    json_t *j = api_call(&srv, "POST", "/api/probes", body, &code);
    CHECK_EQ_INT(code, 422);
    const json_t *e = json_object_get(j, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    CHECK_MSG(!strcmp(json_string_value(json_object_get(e, "code")), "too_large"), "%s",
              json_string_value(json_object_get(e, "code")));
    CHECK_MSG(!strcmp(api_error_field(j), "params.ks"), "field %s", api_error_field(j));
    CHECK_MSG(msg && strstr(msg, BOUND) && strstr(msg, "lower ks"), "%s", msg ? msg : "");
    json_decref(j);
    /* more windows: it names them */
    snprintf(body, sizeof body,
             "{\"kind\":\"sparse_attention\",\"run_id\":%lld,\"params\":{\"window\":0,\"windows\":4}}", run_id);
    j = api_call(&srv, "POST", "/api/probes", body, &code);
    CHECK_EQ_INT(code, 422);
    CHECK_MSG(!strcmp(api_error_field(j), "params.windows"), "field %s", api_error_field(j));
    json_decref(j);
    CHECK_EQ_INT(probes_of("sparse_attention"), 0);
}

TEST(a_model_probe_under_the_bound_runs) {
    char body[256];
    snprintf(body, sizeof body, "{\"kind\":\"attention_map\",\"run_id\":%lld,\"params\":{\"max_tokens\":4}}", run_id);
    json_t *j = api_expect(&srv, "POST", "/api/probes", body, 201);
    CHECK(j);
    json_decref(j);
    snprintf(body, sizeof body,
             "{\"kind\":\"sparse_attention\",\"run_id\":%lld,\"params\":{\"ks\":[1],\"max_tokens\":4}}", run_id);
    j = api_expect(&srv, "POST", "/api/probes", body, 201);
    CHECK(j);
    json_decref(j);
    CHECK_EQ_INT(probes_of("sparse_attention"), 1);
    /* a kind without a model has no estimate: its own checks only */
    json_decref(api_expect(&srv, "POST", "/api/probes", "{\"kind\":\"pair_turns\",\"params\":{\"d\":16}}", 201));
}

static void cases(void) {
    RUN(a_tiny_run_is_trained);
    RUN(a_model_probe_over_the_bound_is_refused_before_it_runs);
    RUN(a_model_probe_under_the_bound_runs);
}

int main(void) {
    setenv("ATTNLAB_TEST_PROBE_MAX_FLOPS", BOUND, 1); /* the server inherits it */
    return api_suite_main(&srv, NULL, cases);
}
