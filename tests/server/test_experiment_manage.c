/* Experiments one can manage, against a real attnlabd (and on PostgreSQL, as tests/run.sh runs every
 * harness suite): a rename shows in the experiment and the list; deleting one that keeps its runs
 * leaves them as runs of no experiment; deleting one with its runs removes them, their metrics and
 * their files, and is refused whole while one of them still trains; bad requests are 422. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv;

/* A new experiment of two tiny variants (steps as given); its id, and its run ids in ids[2]. */
static long long experiment(int steps, long long ids[2]) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\":\"managed\",\"base\":{" TINY_CONFIG ",\"steps\":%d,\"checkpoint_every\":2},\"variants\":[{"
             "\"name\":\"a\",\"config\":{}},{\"name\":\"b\",\"config\":{\"attention\":\"dot\"}}]}",
             steps);
    json_t *runs;
    long long id = api_create_experiment(&srv, body, &runs);
    for (int i = 0; i < 2; i++) ids[i] = json_integer_value(json_object_get(json_array_get(runs, (size_t)i), "id"));
    json_decref(runs);
    return id;
}

static long status_of(const char *method, const char *path, const char *body) {
    return api_status(&srv, method, path, body);
}

/* The two runs of experiment(): 0 when both succeeded. */
static int wait_all(const long long ids[2]) {
    json_t *runs = json_pack("[{s:I}, {s:I}]", "id", (json_int_t)ids[0], "id", (json_int_t)ids[1]);
    int missed = runs ? api_wait_runs(&srv, runs, "succeeded", 120000) : 1;
    json_decref(runs);
    return missed;
}

TEST(a_rename_shows_everywhere) {
    long long runs[2], id = experiment(3, runs);
    CHECK(id > 0);
    CHECK(wait_all(runs) == 0);
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld", id);
    long status;
    json_t *e = api_call(&srv, "PATCH", path, "{\"name\":\"renamed A/B\"}", &status);
    CHECK_EQ_INT(status, 200);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(e, "experiment"), "name")), "renamed A/B"));
    json_decref(e);
    json_t *l = api_call(&srv, "GET", "/api/experiments", NULL, &status);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(json_object_get(l, "experiments"), 0), "name")),
                  "renamed A/B"));
    json_decref(l);
    CHECK_EQ_INT(status_of("PATCH", path, "{\"name\":\"\"}"), 422);
    CHECK_EQ_INT(status_of("PATCH", path, "{\"colour\":\"red\"}"), 422);
    CHECK_EQ_INT(status_of("PATCH", "/api/experiments/999999", "{\"name\":\"x\"}"), 404);
}

TEST(deleting_an_experiment_can_keep_its_runs) {
    long long runs[2], id = experiment(3, runs);
    CHECK(id > 0);
    CHECK(wait_all(runs) == 0);
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld?runs=maybe", id);
    CHECK_EQ_INT(status_of("DELETE", path, NULL), 422);
    snprintf(path, sizeof path, "/api/experiments/%lld", id);
    CHECK_EQ_INT(status_of("DELETE", path, NULL), 204);
    CHECK_EQ_INT(status_of("GET", path, NULL), 404);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "/api/runs/%lld", runs[i]);
        long status;
        json_t *r = api_call(&srv, "GET", path, NULL, &status);
        CHECK_EQ_INT(status, 200);
        CHECK(json_is_null(json_object_get(json_object_get(r, "run"), "experiment_id")));
        json_decref(r);
    }
}

TEST(deleting_an_experiment_with_its_runs_waits_for_them_to_end) {
    long long runs[2], id = experiment(100000, runs); /* trains until cancelled */
    CHECK(id > 0);
    CHECK(api_wait_step(&srv, runs[0], 1, 120000) == 0);
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld?runs=delete", id);
    long status;
    json_t *e = api_call(&srv, "DELETE", path, NULL, &status);
    CHECK_EQ_INT(status, 409);
    CHECK(!strcmp(api_error_field(e), "runs"));
    json_decref(e);
    for (int i = 0; i < 2; i++) {
        char p[96];
        snprintf(p, sizeof p, "/api/runs/%lld/cancel", runs[i]);
        status_of("POST", p, NULL);
        char *st = api_wait_status(&srv, runs[i], "cancelled", 120000);
        CHECK_MSG(st && !strcmp(st, "cancelled"), "run %lld: %s", runs[i], st ? st : "(timeout)");
        free(st);
    }
    /* a cancelled run keeps its checkpoint: its folder is there before the delete */
    char dir0[160];
    struct stat before;
    snprintf(dir0, sizeof dir0, "%s/runs/%lld", srv.data_dir, runs[0]);
    CHECK_MSG(stat(dir0, &before) == 0, "%s is missing before the delete", dir0);
    /* the refused delete left everything as it was */
    snprintf(path, sizeof path, "/api/experiments/%lld", id);
    CHECK_EQ_INT(status_of("GET", path, NULL), 200);
    snprintf(path, sizeof path, "/api/experiments/%lld?runs=delete", id);
    CHECK_EQ_INT(status_of("DELETE", path, NULL), 204);
    for (int i = 0; i < 2; i++) {
        char p[160];
        snprintf(p, sizeof p, "/api/runs/%lld", runs[i]);
        CHECK_EQ_INT(status_of("GET", p, NULL), 404);
        snprintf(p, sizeof p, "%s/runs/%lld", srv.data_dir, runs[i]);
        struct stat sb;
        CHECK_MSG(stat(p, &sb) != 0, "%s is still there", p);
    }
    CHECK_EQ_INT(status_of("DELETE", "/api/experiments/999999", NULL), 404);
}

static void cases(void) {
    RUN(a_rename_shows_everywhere);
    RUN(deleting_an_experiment_can_keep_its_runs);
    RUN(deleting_an_experiment_with_its_runs_waits_for_them_to_end);
}

int main(void) { return api_suite_main(&srv, NULL, cases); }
