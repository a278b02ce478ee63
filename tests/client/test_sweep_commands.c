/* Sweeps and the runs list's orders and filters from the command line, against a real attnlabd:
 * `experiments start --vary A=.. --vary B=..` sends a grid and starts every combination, a key
 * varied twice is a usage error and a grid past the server's bound its refusal (exit 4 with the
 * field), `runs list --where KEY=VALUE --sort -val_loss` lists the same runs in the same order as
 * the API does, and a bad --where value is the server's 422 (exit 4 naming config.KEY). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"
#include "client_run.h"

static harness_server srv;
static char base_path[300];
static long long exp_id;

static int cl(client_result *r, const char *const *args) {
    const char *full[64] = {"--server", srv.base_url};
    int n = 2;
    for (int i = 0; args[i] && n < 63; i++) full[n++] = args[i];
    full[n] = NULL;
    return client_run(r, 120, full);
}

#define CL(r, ...)                                                                                                     \
    do {                                                                                                               \
        const char *a_[] = {__VA_ARGS__, NULL};                                                                        \
        cl((r), a_);                                                                                                   \
    } while (0)

TEST(two_vary_flags_start_their_grid) {
    client_result r;
    CL(&r, "experiments", "start", "--base", base_path, "--vary", "lr=1e-3,3e-4", "--vary", "tau-param=linear,log",
       "--name", "sweep");
    CHECK_MSG(r.code == 0, "%d %s", r.code, r.err);
    static const char *const names[] = {"(lr=0.001,tau_param=linear)", "(lr=0.001,tau_param=log)",
                                        "(lr=0.0003,tau_param=linear)", "(lr=0.0003,tau_param=log)"};
    for (int i = 0; i < 4; i++) CHECK_MSG(strstr(r.out, names[i]), "no %s in: %s", names[i], r.out);
    exp_id = atoll(r.out + strlen("experiment "));
    CHECK(exp_id > 0);
    char path[64];
    snprintf(path, sizeof path, "/api/experiments/%lld", exp_id);
    long status;
    json_t *e = api_call(&srv, "GET", path, NULL, &status);
    json_t *runs = json_object_get(e, "runs");
    CHECK_EQ_INT(json_array_size(runs), 4);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run) {
        long long id = json_integer_value(json_object_get(run, "id"));
        char *st = api_wait_status(&srv, id, "succeeded", 120000);
        int ok = st && !strcmp(st, "succeeded");
        free(st);
        if (!ok) json_decref(e);
        CHECK_MSG(ok, "run %lld did not succeed", id);
    }
    json_decref(e);
}

/* The sweep's whole result as the client's bundle: the same bytes as the API's, JSON and CSV. */
TEST(experiments_bundle_prints_the_apis_download) {
    CHECK(exp_id > 0);
    char id[32], path[128];
    snprintf(id, sizeof id, "%lld", exp_id);
    client_result r;
    CL(&r, "experiments", "bundle", id, "--csv", "--keys", "loss");
    CHECK_MSG(r.code == 0, "%d %s", r.code, r.err);
    snprintf(path, sizeof path, "/api/experiments/%lld/bundle.csv?keys=loss", exp_id);
    harness_response h;
    CHECK(harness_get(&srv, path, &h) == 0);
    CHECK_EQ_INT(h.status, 200);
    CHECK_MSG(!strcmp(r.out, h.body), "the client's CSV differs from GET %s", path);
    harness_response_free(&h);
    CL(&r, "experiments", "bundle", id, "--max-points", "4");
    CHECK_MSG(r.code == 0, "%d %s", r.code, r.err);
    json_t *b = json_loads(r.out, 0, NULL);
    CHECK(b);
    CHECK_EQ_INT(json_array_size(json_object_get(b, "runs")), 4);
    CHECK_EQ_INT(json_integer_value(json_object_get(b, "max_points")), 4);
    json_decref(b);
    CL(&r, "experiments", "bundle", id, "--max-points", "x");
    CHECK_EQ_INT(r.code, 2);
    CL(&r, "experiments", "bundle", "999999");
    CHECK_MSG(r.code == 4, "an unknown experiment exited %d, not 4 (refused)", r.code);
}

TEST(a_key_varied_twice_or_too_many_runs_are_refused) {
    client_result r;
    CL(&r, "experiments", "start", "--base", base_path, "--vary", "lr=1e-3,3e-4", "--vary", "lr=1e-2,1e-4");
    CHECK_MSG(r.code == 2 && strstr(r.err, "twice"), "%d %s", r.code, r.err);
    CL(&r, "experiments", "start", "--base", base_path, "--vary", "seed=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
       "--vary", "steps=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17");
    CHECK_MSG(r.code == 4 && strstr(r.err, "field: grid") && strstr(r.err, "256"), "%d %s", r.code, r.err);
    CL(&r, "experiments", "start", "--base", base_path, "--vary", "lr=1e-3,3e-4", "--vary", "tau_param=linear,cubic");
    CHECK_MSG(r.code == 4 && strstr(r.err, "grid.tau_param"), "%d %s", r.code, r.err);
}

TEST(runs_list_where_and_sort_match_the_api) {
    char path[160];
    snprintf(path, sizeof path, "/api/runs?sort=-val_loss&config.tau_param=log&experiment=%lld", exp_id);
    long status;
    json_t *want = api_call(&srv, "GET", path, NULL, &status);
    CHECK(status == 200 && json_array_size(json_object_get(want, "runs")) == 2);
    char es[32];
    snprintf(es, sizeof es, "%lld", exp_id);
    client_result r;
    CL(&r, "--json", "runs", "list", "--where", "tau_param=log", "--sort", "-val_loss", "--experiment", es);
    json_t *got = json_loads(r.out, 0, NULL);
    int same = r.code == 0 && got && json_array_size(json_object_get(got, "runs")) == 2;
    for (size_t i = 0; same && i < 2; i++)
        same = json_integer_value(json_object_get(json_array_get(json_object_get(got, "runs"), i), "id")) ==
               json_integer_value(json_object_get(json_array_get(json_object_get(want, "runs"), i), "id"));
    json_decref(got);
    json_decref(want);
    CHECK_MSG(same, "%d %s %s", r.code, r.out, r.err);
    /* The table: a header and the two runs. */
    CL(&r, "runs", "list", "--where", "tau-param=log", "--where", "lr=3e-4", "--sort", "min_loss");
    CHECK_MSG(r.code == 0 && count_lines(r.out) == 2 && strstr(r.out, "lr=0.0003,tau_param=log"), "%d %s %s", r.code,
              r.out, r.err);
    CL(&r, "runs", "list", "--where", "tau_param=cubic");
    CHECK_MSG(r.code == 4 && strstr(r.err, "config.tau_param"), "%d %s", r.code, r.err);
    CL(&r, "runs", "list", "--where", "tau_param");
    CHECK_MSG(r.code == 2 && strstr(r.err, "--where"), "%d %s", r.code, r.err);
    CL(&r, "runs", "list", "--sort", "loss3");
    CHECK_MSG(r.code == 4 && strstr(r.err, "sort"), "%d %s", r.code, r.err);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const char *extra[] = {"--compute-threads", "1", "--train-workers", "1", NULL};
    if (harness_start(&srv, NULL, extra) != 0) {
        printf("FAIL start_attnlabd: could not start %s\n", harness_attnlabd());
        return 1;
    }
    snprintf(base_path, sizeof base_path, "%s/base.json", srv.data_dir);
    FILE *f = fopen(base_path, "w");
    if (!f) {
        printf("FAIL setup: cannot write %s\n", base_path);
        harness_stop(&srv);
        return 1;
    }
    fputs("{" TINY_CONFIG ",\"steps\":10,\"attention\":\"cosine_rope\",\"checkpoint_every\":0}", f);
    fclose(f);
    RUN(two_vary_flags_start_their_grid);
    RUN(experiments_bundle_prints_the_apis_download);
    RUN(a_key_varied_twice_or_too_many_runs_are_refused);
    RUN(runs_list_where_and_sort_match_the_api);
    if (test_fail_count) harness_dump_log(&srv);
    harness_stop(&srv);
    return test_summary();
}
