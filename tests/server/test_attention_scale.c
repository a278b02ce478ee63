/* The normalised arm's scale parameterisations through the API: bad input is a 422 naming the
 * field, and each parameterisation (s * cos with s linear, log s with Swin V2's init 10 and clamp
 * 100, a clamped linear s; cos / tau with an lr multiplier and no decay) trains on the built-in
 * corpus `small` with a falling loss, recording its effective temperature per head. */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/test.h"

static harness_server srv;

static int expect_422(const char *config, const char *field) {
    char body[2048];
    snprintf(body, sizeof body, "{\"config\":{%s}}", config);
    long code;
    json_t *j = api_call(&srv, "POST", "/api/runs", body, &code);
    const char *got = api_error_field(j);
    int ok = code == 422 && !strcmp(got, field);
    if (!ok) printf("  config {%s}: got %ld field '%s', wanted 422 '%s'\n", config, code, got, field);
    json_decref(j);
    return ok;
}

TEST(bad_scale_input_is_422_naming_the_field) {
    int ok = 1;
    ok &= expect_422("\"attention\":\"cosine_rope_scale\",\"scale_param\":\"exp\"", "config.scale_param");
    ok &= expect_422("\"attention\":\"cosine_rope_scale\",\"scale_init\":10,\"scale_clamp\":5", "config.scale_clamp");
    /* the default init is sqrt(d_model/n_head) = sqrt(32) here */
    ok &= expect_422("\"attention\":\"cosine_rope_scale\",\"scale_clamp\":5", "config.scale_clamp");
    ok &= expect_422("\"scale_clamp\":-1", "config.scale_clamp");
    ok &= expect_422("\"scale_init\":0", "config.scale_init");
    ok &= expect_422("\"scale_lr_mult\":0", "config.scale_lr_mult");
    ok &= expect_422("\"scale_lr_mult\":\"2\"", "config.scale_lr_mult");
    CHECK(ok);
}

/* The defaults keep today's runs: the stored config carries them. */
TEST(defaults_keep_todays_behaviour) {
    long long id = api_start_tiny_run(&srv, "\"steps\":2,\"attention\":\"cosine_rope\"", "defaults");
    CHECK(id > 0);
    char *st = api_wait_status(&srv, id, "succeeded", 60000);
    CHECK_MSG(st && !strcmp(st, "succeeded"), "status %s", st ? st : "(timeout)");
    free(st);
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    long code;
    json_t *r = api_call(&srv, "GET", path, NULL, &code);
    json_t *cfg = json_object_get(json_object_get(r, "run"), "config");
    int ok = !strcmp(json_string_value(json_object_get(cfg, "scale_param")), "linear") &&
             json_number_value(json_object_get(cfg, "scale_clamp")) == 0 &&
             json_number_value(json_object_get(cfg, "scale_lr_mult")) == 1 &&
             fabs(json_number_value(json_object_get(cfg, "scale_init")) - sqrt(8.0)) < 1e-12 &&
             json_is_true(json_object_get(cfg, "tau_weight_decay"));
    json_decref(r);
    CHECK(ok);
}

/* Trains 40 steps; the mean loss of the last 5 is below that of the first 5. *tau_last gets the
 * last tau.0.0 (the effective temperature, 1/s for s * cos). */
static int trains(const char *extra, const char *name, double *tau_first, double *tau_last) {
    char cfg[512];
    snprintf(cfg, sizeof cfg, "\"steps\":40,\"lr\":0.003,\"seed\":5,%s", extra);
    long long id = api_start_tiny_run(&srv, cfg, name);
    if (id <= 0) return 0;
    char *st = api_wait_status(&srv, id, "succeeded", 120000);
    int ok = st && !strcmp(st, "succeeded");
    if (!ok) printf("  %s: status %s\n", name, st ? st : "(timeout)");
    free(st);
    json_t *loss = ok ? api_series(&srv, id, "loss") : NULL, *tau = ok ? api_series(&srv, id, "tau.0.0") : NULL;
    ok = ok && loss && tau && json_array_size(loss) == 40 && json_array_size(tau) == 40;
    if (ok) {
        double a = 0, b = 0;
        for (int i = 0; i < 5; i++) {
            a += json_number_value(json_array_get(loss, (size_t)i)) / 5;
            b += json_number_value(json_array_get(loss, (size_t)(35 + i))) / 5;
        }
        *tau_first = json_number_value(json_array_get(tau, 0));
        *tau_last = json_number_value(json_array_get(tau, 39));
        ok = isfinite(b) && b < a - 0.05;
        if (!ok) printf("  %s: loss %.4f (first 5) -> %.4f (last 5)\n", name, a, b);
    }
    json_decref(loss);
    json_decref(tau);
    return ok;
}

TEST(swin_v2_log_s_init_10_clamp_100_trains_on_small) {
    double t0, t1;
    CHECK(trains("\"attention\":\"cosine_rope_scale\",\"scale_param\":\"log\",\"scale_init\":10,\"scale_clamp\":100",
                 "swin-v2", &t0, &t1));
    CHECK_NEAR(t0, 0.1, 0.01); /* s starts near 10 */
    CHECK(t1 >= 0.01 - 1e-9);  /* s never exceeds 100 */
}

TEST(ngpt_linear_s_sqrt_d_trains_on_small) {
    double t0, t1;
    CHECK(trains("\"attention\":\"cosine_rope_scale\",\"scale_param\":\"linear\"", "ngpt", &t0, &t1));
    CHECK_NEAR(t0, 1 / sqrt(8.0), 0.02);
}

TEST(clamped_linear_s_trains_on_small) {
    double t0, t1;
    CHECK(trains("\"attention\":\"cosine_rope_scale\",\"scale_init\":4,\"scale_clamp\":4", "clamped", &t0, &t1));
    CHECK(t0 >= 0.25 - 1e-6 && t1 >= 0.25 - 1e-6); /* s used as at most 4 */
}

TEST(tau_with_lr_multiplier_and_no_decay_trains_on_small) {
    double t0, t1, u0, u1;
    CHECK(trains("\"attention\":\"cosine_rope\",\"tau_param\":\"log\"", "tau-log", &u0, &u1));
    CHECK(trains("\"attention\":\"cosine_rope\",\"tau_param\":\"log\",\"scale_lr_mult\":10,\"tau_weight_decay\":false",
                 "tau-log-mult", &t0, &t1));
    CHECK_MSG(fabs(t1 - t0) > 2 * fabs(u1 - u0), "tau moved %g with the multiplier, %g without", t1 - t0, u1 - u0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[] = {"--max-model-mb", "256", "--train-workers", "2", "--compute-threads", "2", NULL};
    if (harness_start(&srv, NULL, args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(bad_scale_input_is_422_naming_the_field);
    RUN(defaults_keep_todays_behaviour);
    RUN(swin_v2_log_s_init_10_clamp_100_trains_on_small);
    RUN(ngpt_linear_s_sqrt_d_trains_on_small);
    RUN(clamped_linear_s_trains_on_small);
    RUN(tau_with_lr_multiplier_and_no_decay_trains_on_small);
    int rc = harness_stop(&srv);
    if (rc != 0) {
        printf("FAIL shutdown: attnlabd exited with %d\n", rc);
        test_fail_count++;
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
