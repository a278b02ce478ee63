/* Sweeps and the runs list's new orders and filters, against a real attnlabd: an experiment from a
 * two-key grid makes the product of its values (names from the keys, configs set), every bound and
 * bad value of a grid is a 422 naming the field, GET /api/runs sorts by final and minimum loss and
 * validation loss as recomputed here from each run's summary (a run with no series last either
 * way), and config.KEY=VALUE filters select exactly the runs whose config has the value (a 422 for
 * an unknown key, a value of the wrong type, and past the most filters). */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/test.h"

static harness_server srv;
static long long exp_id;
static long long grid_runs[4];
static long long no_series_run; /* cancelled while queued: no metric at all */

#define BASE "{" TINY_CONFIG ",\"steps\":12,\"attention\":\"cosine_rope\",\"checkpoint_every\":0}"

/* POST /api/experiments with body; the status, and the error field in field (when there is one). */
static long post_experiment(const char *body, char *field, size_t len, char *msg, size_t msglen) {
    long status = 0;
    json_t *r = api_call(&srv, "POST", "/api/experiments", body, &status);
    if (field) snprintf(field, len, "%s", api_error_field(r));
    if (msg)
        snprintf(msg, msglen, "%s",
                 json_string_value(json_object_get(json_object_get(r, "error"), "message"))
                     ? json_string_value(json_object_get(json_object_get(r, "error"), "message"))
                     : "");
    json_decref(r);
    return status;
}

static long long experiment_count(void) {
    long status;
    json_t *r = api_call(&srv, "GET", "/api/experiments", NULL, &status);
    long long n = status == 200 ? (long long)json_integer_value(json_object_get(r, "total")) : -1;
    json_decref(r);
    return n;
}

TEST(grid_makes_the_product_of_its_values) {
    long status;
    json_t *r = api_call(&srv, "POST", "/api/experiments",
                         "{\"name\":\"sweep\",\"base\":" BASE
                         ",\"grid\":{\"lr\":[1e-3,3e-4],\"tau_param\":[\"linear\",\"log\"]}}",
                         &status);
    CHECK_MSG(status == 201, "status %ld", status);
    json_t *runs = json_object_get(r, "runs");
    CHECK_EQ_INT(json_array_size(runs), 4);
    static const char *const names[4] = {"lr=0.001,tau_param=linear", "lr=0.001,tau_param=log",
                                         "lr=0.0003,tau_param=linear", "lr=0.0003,tau_param=log"};
    static const double lrs[4] = {1e-3, 1e-3, 3e-4, 3e-4};
    static const char *const taus[4] = {"linear", "log", "linear", "log"};
    for (int i = 0; i < 4; i++) {
        json_t *run = json_array_get(runs, (size_t)i), *cfg = json_object_get(run, "config");
        const char *v = json_string_value(json_object_get(run, "variant"));
        CHECK_MSG(v && !strcmp(v, names[i]), "run %d variant %s", i, v ? v : "(none)");
        CHECK_NEAR(json_number_value(json_object_get(cfg, "lr")), lrs[i], 1e-15);
        CHECK(!strcmp(json_string_value(json_object_get(cfg, "tau_param")), taus[i]));
        CHECK(!strcmp(json_string_value(json_object_get(cfg, "attention")), "cosine_rope"));
        grid_runs[i] = json_integer_value(json_object_get(run, "id"));
    }
    exp_id = json_integer_value(json_object_get(json_object_get(r, "experiment"), "id"));
    json_t *vars = json_object_get(json_object_get(r, "experiment"), "variants");
    CHECK_EQ_INT(json_array_size(vars), 4);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(vars, 3), "name")), names[3]));
    json_decref(r);
    for (int i = 0; i < 4; i++) {
        char *st = api_wait_status(&srv, grid_runs[i], "succeeded", 120000);
        CHECK_MSG(st && !strcmp(st, "succeeded"), "run %lld ended %s", grid_runs[i], st ? st : "(timeout)");
        free(st);
    }
}

TEST(grid_bounds_and_bad_values_are_422_naming_the_field) {
    long long before = experiment_count();
    static const struct {
        const char *grid, *field, *words;
    } cases[] = {
        {"\"grid\":{\"nokey\":[1,2]}", "grid.nokey", "not a known field"},
        {"\"grid\":{\"tau_param\":[\"linear\",\"cubic\"]}", "grid.tau_param", "one of"},
        {"\"grid\":{\"lr\":[0.001,\"fast\"]}", "grid.lr", "number"},
        {"\"grid\":{\"n_layer\":[1,0]}", "grid.n_layer", ">="},
        {"\"grid\":{\"lr\":0.001}", "grid.lr", "array"},
        {"\"grid\":{\"lr\":[]}", "grid.lr", "array"},
        {"\"grid\":{\"lr\":[0.001,0.001]}", "grid.lr", "twice"},
        {"\"grid\":[1,2]", "grid", "object"},
        {"\"grid\":{}", "grid", "object"},
        {"\"grid\":{\"lr\":[0.001]},\"variants\":[{\"name\":\"a\"}]", "grid", "not both"},
        {"\"grid\":{\"seed\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],\"steps\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,"
         "16,17]}",
         "grid", "256"},
        {"\"replicates\":32,\"grid\":{\"seed\":[1,2,3,4,5,6,7,8,9]}", "grid", "256"},
        {"\"grid\":{\"lr\":[0.001],\"beta1\":[0.9],\"beta2\":[0.99],\"eps\":[1e-8],\"n_layer\":[1],\"n_head\":[2],"
         "\"batch\":[2],\"steps\":[12],\"seed\":[1]}",
         "grid", "1 to 8"},
        {"\"grid\":{\"seed\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,"
         "33]}",
         "grid.seed", "1 to 32"},
        {"\"replicates\":17,\"variants\":[{\"name\":\"a\",\"config\":{\"seed\":1}},{\"name\":\"b\",\"config\":"
         "{\"seed\":100}}"
         ",{\"name\":\"c\",\"config\":{\"seed\":200}},{\"name\":\"d\",\"config\":{\"seed\":300}},{\"name\":\"e\"},"
         "{\"name\":\"f\",\"config\":{\"seed\":400}},{\"name\":\"g\",\"config\":{\"seed\":500}},{\"name\":\"h\","
         "\"config\":{\"seed\":600}},{\"name\":\"i\",\"config\":{\"seed\":700}},{\"name\":\"j\",\"config\":{\"seed\":"
         "800}},{\"name\":\"k\",\"config\":{\"seed\":900}},{\"name\":\"l\",\"config\":{\"seed\":1000}},{\"name\":\"m\","
         "\"config\":{\"seed\":1100}},{\"name\":\"n\",\"config\":{\"seed\":1200}},{\"name\":\"o\",\"config\":"
         "{\"seed\":1300}},{\"name\":\"p\",\"config\":{\"seed\":1400}}]",
         "variants", "256"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[2048], field[96], msg[512];
        snprintf(body, sizeof body, "{\"base\":%s,%s}", BASE, cases[i].grid);
        long st = post_experiment(body, field, sizeof field, msg, sizeof msg);
        CHECK_MSG(st == 422 && !strcmp(field, cases[i].field) && strstr(msg, cases[i].words),
                  "case %zu: %ld field '%s' (want '%s') message '%s' (want '%s')", i, st, field, cases[i].field, msg,
                  cases[i].words);
    }
    CHECK_EQ_INT(experiment_count(), before);
}

/* A run queued behind a long one and cancelled before it trains: it has no series at all. */
TEST(a_run_without_series_for_the_sort) {
    long long busy = api_start_tiny_run(&srv, "\"steps\":100000,\"checkpoint_every\":0", "busy");
    CHECK(busy > 0);
    CHECK(api_wait_step(&srv, busy, 1, 60000) == 0);
    no_series_run = api_start_tiny_run(&srv, "\"steps\":10", "never-trained");
    CHECK(no_series_run > 0);
    char path[64];
    long status;
    snprintf(path, sizeof path, "/api/runs/%lld/cancel", no_series_run);
    json_decref(api_call(&srv, "POST", path, NULL, &status));
    CHECK_MSG(status == 202, "cancel queued: %ld", status);
    snprintf(path, sizeof path, "/api/runs/%lld/cancel", busy);
    json_decref(api_call(&srv, "POST", path, NULL, &status));
    CHECK_MSG(status == 202, "cancel running: %ld", status);
    char *st = api_wait_status(&srv, busy, "cancelled", 60000);
    CHECK(st && !strcmp(st, "cancelled"));
    free(st);
    st = api_wait_status(&srv, no_series_run, "cancelled", 60000);
    CHECK(st && !strcmp(st, "cancelled"));
    free(st);
}

typedef struct {
    long long id;
    double v;
    int has;
} keyed;

static int desc_order;
static int by_value(const void *pa, const void *pb) {
    const keyed *a = pa, *b = pb;
    if (a->has != b->has) return a->has ? -1 : 1; /* no value: last either way */
    if (a->has && a->v != b->v) return (a->v < b->v ? -1 : 1) * (desc_order ? -1 : 1);
    return (a->id < b->id ? -1 : 1) * (desc_order ? -1 : 1);
}

TEST(runs_sort_by_final_and_minimum_loss_and_validation_loss) {
    long status;
    json_t *all = api_call(&srv, "GET", "/api/runs?limit=100&sort=id", NULL, &status);
    CHECK(status == 200);
    size_t n = json_array_size(json_object_get(all, "runs"));
    CHECK_MSG(n >= 6, "%zu runs", n);
    keyed *rows = calloc(n, sizeof *rows);
    CHECK(rows);
    static const struct {
        const char *sort, *key, *stat;
    } sorts[] = {{"loss", "loss", "last"},
                 {"val_loss", "val_loss", "last"},
                 {"min_loss", "loss", "min"},
                 {"min_val_loss", "val_loss", "min"}};
    int saw_missing = 0;
    for (size_t s = 0; s < 4; s++)
        for (int d = 0; d < 2; d++) {
            for (size_t i = 0; i < n; i++) {
                long long id =
                    json_integer_value(json_object_get(json_array_get(json_object_get(all, "runs"), i), "id"));
                char path[96];
                snprintf(path, sizeof path, "/api/runs/%lld/summary", id);
                json_t *sum = api_call(&srv, "GET", path, NULL, &status);
                json_t *v =
                    json_object_get(json_object_get(json_object_get(sum, "summary"), sorts[s].key), sorts[s].stat);
                rows[i] = (keyed){id, json_number_value(v), json_is_number(v)};
                saw_missing |= !rows[i].has;
                json_decref(sum);
            }
            desc_order = d;
            qsort(rows, n, sizeof *rows, by_value);
            char path[96];
            snprintf(path, sizeof path, "/api/runs?limit=100&sort=%s%s", d ? "-" : "", sorts[s].sort);
            json_t *got = api_call(&srv, "GET", path, NULL, &status);
            json_t *list = json_object_get(got, "runs");
            int same = status == 200 && json_array_size(list) == n;
            for (size_t i = 0; same && i < n; i++)
                same = json_integer_value(json_object_get(json_array_get(list, i), "id")) == rows[i].id;
            json_decref(got);
            long long first = rows[0].id;
            if (!same) {
                free(rows);
                json_decref(all);
            }
            CHECK_MSG(same, "sort=%s%s: order differs from the summaries' (first expected %lld)", d ? "-" : "",
                      sorts[s].sort, first);
        }
    free(rows);
    json_decref(all);
    CHECK_MSG(saw_missing, "no run without a series was listed");
}

/* The ids GET path lists, comma-separated, in order (status in *status). */
static void ids_of(const char *path, char *buf, size_t len, long *status) {
    json_t *r = api_call(&srv, "GET", path, NULL, status);
    buf[0] = 0;
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(r, "runs"), i, run) {
        size_t u = strlen(buf);
        snprintf(buf + u, len - u, "%s%lld", u ? "," : "", (long long)json_integer_value(json_object_get(run, "id")));
    }
    json_decref(r);
}

TEST(config_filters_select_the_runs_with_the_value) {
    char got[512], want[512];
    long status;
    ids_of("/api/runs?sort=id&config.tau_param=log", got, sizeof got, &status);
    CHECK(status == 200);
    /* The grid's log runs, and the tiny runs (cosine_rope is not theirs, tau_param linear by default). */
    snprintf(want, sizeof want, "%lld,%lld", grid_runs[1], grid_runs[3]);
    CHECK_MSG(!strcmp(got, want), "tau_param=log: %s, want %s", got, want);
    ids_of("/api/runs?sort=id&config.tau_param=log&config.lr=0.0003", got, sizeof got, &status);
    snprintf(want, sizeof want, "%lld", grid_runs[3]);
    CHECK_MSG(!strcmp(got, want), "two filters: %s, want %s", got, want);
    /* The same number written another way; with the experiment and a sort. */
    char path[160];
    snprintf(path, sizeof path, "/api/runs?sort=-id&experiment=%lld&config.lr=3e-4", exp_id);
    ids_of(path, got, sizeof got, &status);
    snprintf(want, sizeof want, "%lld,%lld", grid_runs[3], grid_runs[2]);
    CHECK_MSG(!strcmp(got, want), "lr=3e-4: %s, want %s", got, want);
    /* Integers, booleans and strings of other keys. */
    ids_of("/api/runs?sort=id&config.steps=12&config.attention=cosine_rope&config.tau_weight_decay=true", got,
           sizeof got, &status);
    snprintf(want, sizeof want, "%lld,%lld,%lld,%lld", grid_runs[0], grid_runs[1], grid_runs[2], grid_runs[3]);
    CHECK_MSG(!strcmp(got, want), "steps/attention/bool: %s, want %s", got, want);
    ids_of("/api/runs?config.tau_weight_decay=false", got, sizeof got, &status);
    CHECK_MSG(status == 200 && !got[0], "tau_weight_decay=false: %s", got);
    json_t *r = api_call(&srv, "GET", "/api/runs?config.tau_param=log&limit=1", NULL, &status);
    CHECK_EQ_INT(json_integer_value(json_object_get(r, "total")), 2);
    json_decref(r);
    /* A page past the end still counts the matching runs. */
    r = api_call(&srv, "GET", "/api/runs?config.tau_param=log&offset=10&sort=-val_loss", NULL, &status);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_INT(json_array_size(json_object_get(r, "runs")), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(r, "total")), 2);
    json_decref(r);
}

TEST(bad_list_parameters_are_422_naming_the_field) {
    static const struct {
        const char *query, *field;
    } cases[] = {
        {"sort=loss2", "sort"},
        {"sort=-", "sort"},
        {"config.bogus=1", "config.bogus"},
        {"config.=1", "config."},
        {"config.lr=abc", "config.lr"},
        {"config.lr=", "config.lr"},
        {"config.steps=1.5", "config.steps"},
        {"config.steps=99999999999999999999", "config.steps"},
        {"config.tau_weight_decay=yes", "config.tau_weight_decay"},
        {"config.tau_param=cubic", "config.tau_param"},
        {"config.n_layer=0", "config.n_layer"},
        {"config.lr=0.1&config.lr=0.2&config.steps=1&config.steps=2&config.n_layer=1&config.n_layer=2&config.seed=1&"
         "config.seed=2&config.batch=1",
         "config"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        long status;
        snprintf(path, sizeof path, "/api/runs?%s", cases[i].query);
        json_t *r = api_call(&srv, "GET", path, NULL, &status);
        const char *f = api_error_field(r);
        int ok = status == 422 && !strcmp(f, cases[i].field);
        if (!ok) printf("  %s -> %ld field '%s'\n", cases[i].query, status, f);
        json_decref(r);
        CHECK_MSG(ok, "case %zu (%s)", i, cases[i].query);
    }
    /* Eight filters are the most, and are taken. */
    long status;
    json_decref(api_call(&srv, "GET",
                         "/api/runs?config.lr=0.1&config.lr=0.2&config.steps=1&config.steps=2&config.n_layer=1&config."
                         "n_layer=2&config.seed=1&config.seed=2",
                         NULL, &status));
    CHECK_EQ_INT(status, 200);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[] = {"--train-workers", "1", "--compute-threads", "1", NULL};
    if (harness_start(&srv, NULL, args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(grid_makes_the_product_of_its_values);
    RUN(grid_bounds_and_bad_values_are_422_naming_the_field);
    RUN(a_run_without_series_for_the_sort);
    RUN(runs_sort_by_final_and_minimum_loss_and_validation_loss);
    RUN(config_filters_select_the_runs_with_the_value);
    RUN(bad_list_parameters_are_422_naming_the_field);
    int rc = harness_stop(&srv);
    if (rc != 0) {
        printf("FAIL shutdown: attnlabd exited with %d\n", rc);
        test_fail_count++;
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
