/* Where a run's numbers come from, against a real attnlabd: a trained run's object carries its
 * provenance, each part checked against an independent reading: the version /api/health reports,
 * the commit git names for this tree, the CPU model /proc/cpuinfo names, the kernel path the run's
 * precision computes on (fp32 for an fp32 run; health's path for a bf16 one where a bf16 unit
 * exists), and its corpus's SHA-256 as sha256sum computes it over the token file. The bundle of
 * the run's experiment carries it too, and runs again from it (POST /api/experiments
 * {"from_bundle"}), but not when its corpus's tokens here are not the ones it recorded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv;

/* The first line a shell command prints, without its newline ("" when none). */
static void first_line(const char *cmd, char *buf, size_t len) {
    buf[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(buf, (int)len, p)) buf[strcspn(buf, "\n")] = '\0';
    pclose(p);
}

TEST(a_trained_run_records_where_its_numbers_come_from) {
    long long id = api_start_tiny_run(&srv, "\"steps\":3,\"precision\":\"fp32\"", "traced");
    CHECK(id > 0);
    char *st = api_wait_status(&srv, id, "succeeded", 120000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    char path[96];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    long status;
    json_t *r = api_call(&srv, "GET", path, NULL, &status), *h = api_call(&srv, "GET", "/api/health", NULL, &status);
    json_t *p = json_object_get(json_object_get(r, "run"), "provenance");
    CHECK_MSG(json_is_object(p), "no provenance in the run");
    CHECK(!strcmp(json_string_value(json_object_get(p, "attnlab_version")),
                  json_string_value(json_object_get(h, "version"))));
    CHECK(!strcmp(json_string_value(json_object_get(p, "kernel_path")), "fp32"));
    CHECK(!strcmp(json_string_value(json_object_get(p, "precision")), "fp32"));
    char want[512];
    first_line("git rev-parse --short=12 HEAD 2>/dev/null", want, sizeof want);
    const char *commit = json_string_value(json_object_get(p, "commit"));
    CHECK_MSG(commit && (want[0] ? !strncmp(commit, want, strlen(want)) : !strcmp(commit, "unknown")),
              "commit %s, git says %s", commit ? commit : "(none)", want);
    first_line("grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//'", want, sizeof want);
    json_t *m = json_object_get(p, "machine");
    if (want[0]) CHECK_MSG(!strcmp(json_string_value(json_object_get(m, "cpu")), want), "cpu %s", want);
    CHECK(json_integer_value(json_object_get(m, "cores")) >= 1);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sha256sum '%s/corpora/small/tokens.u16' | cut -d' ' -f1", srv.data_dir);
    first_line(cmd, want, sizeof want);
    json_t *c = json_object_get(p, "corpus");
    CHECK(!strcmp(json_string_value(json_object_get(c, "name")), "small"));
    CHECK_MSG(strlen(want) == 64 && !strcmp(json_string_value(json_object_get(c, "sha256")), want),
              "corpus sha256 %s, sha256sum %s", json_string_value(json_object_get(c, "sha256")), want);
    json_decref(r);
    json_decref(h);
}

TEST(the_experiment_bundle_carries_each_runs_provenance) {
    json_t *runs;
    long long exp = api_create_experiment(&srv,
                                          "{\"name\":\"traced\",\"base\":{" TINY_CONFIG
                                          ",\"steps\":3},\"variants\":[{\"name\":\"a\",\"config\":{}},{\"name\":"
                                          "\"b\",\"config\":{\"attention\":\"dot\"}}]}",
                                          &runs);
    CHECK(exp > 0);
    int missed = api_wait_runs(&srv, runs, "succeeded", 120000);
    json_decref(runs);
    CHECK_EQ_INT(missed, 0);
    long status;
    size_t i;
    json_t *r;
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld/bundle?keys=loss", exp);
    json_t *b = api_call(&srv, "GET", path, NULL, &status);
    CHECK_EQ_INT(status, 200);
    json_array_foreach(json_object_get(b, "runs"), i, r) {
        json_t *p = json_object_get(r, "provenance");
        CHECK_MSG(json_is_object(p) && json_is_string(json_object_get(json_object_get(p, "corpus"), "sha256")),
                  "run %zu of the bundle has no provenance", i);
    }
    json_decref(b);
}

TEST(a_bundle_runs_again_only_on_the_same_tokens) {
    long status;
    json_t *l = api_call(&srv, "GET", "/api/experiments", NULL, &status);
    long long exp = json_integer_value(json_object_get(json_array_get(json_object_get(l, "experiments"), 0), "id"));
    json_decref(l);
    CHECK(exp > 0);
    char path[128];
    snprintf(path, sizeof path, "/api/experiments/%lld/bundle?keys=loss&max_points=2", exp);
    json_t *b = api_call(&srv, "GET", path, NULL, &status);
    CHECK_EQ_INT(status, 200);
    json_t *req = json_pack("{s:O, s:s}", "from_bundle", b, "name", "again");
    char *body = json_dumps(req, JSON_COMPACT);
    json_t *e = api_expect(&srv, "POST", "/api/experiments", body, 201);
    free(body);
    CHECK(e);
    json_t *x = json_object_get(e, "experiment"), *was = json_object_get(b, "experiment");
    CHECK(!strcmp(json_string_value(json_object_get(x, "name")), "again"));
    CHECK(json_equal(json_object_get(x, "base"), json_object_get(was, "base")));
    CHECK(json_equal(json_object_get(x, "variants"), json_object_get(was, "variants")));
    CHECK_EQ_INT(json_array_size(json_object_get(e, "runs")), json_array_size(json_object_get(b, "runs")));
    CHECK_EQ_INT(api_wait_runs(&srv, json_object_get(e, "runs"), "succeeded", 120000), 0);
    json_decref(e);
    /* the same bundle whose runs say their corpus had other tokens: refused, nothing created */
    json_t *p =
        json_object_get(
            json_object_get(json_object_get(json_array_get(json_object_get(b, "runs"), 0), "provenance"), "corpus"),
            "sha256")
            ? json_object_get(json_object_get(json_array_get(json_object_get(b, "runs"), 0), "provenance"), "corpus")
            : NULL;
    CHECK(p);
    json_object_set_new(p, "sha256", json_string("0000000000000000000000000000000000000000000000000000000000000000"));
    body = json_dumps(req, JSON_COMPACT);
    json_t *l2 = api_call(&srv, "GET", "/api/experiments", NULL, &status);
    long long before = json_integer_value(json_object_get(l2, "total"));
    json_decref(l2);
    e = api_call(&srv, "POST", "/api/experiments", body, &status);
    free(body);
    CHECK_EQ_INT(status, 409);
    CHECK(!strcmp(api_error_field(e), "from_bundle"));
    json_decref(e);
    l2 = api_call(&srv, "GET", "/api/experiments", NULL, &status);
    CHECK_EQ_INT(json_integer_value(json_object_get(l2, "total")), before);
    json_decref(l2);
    e = api_call(&srv, "POST", "/api/experiments", "{\"from_bundle\":{\"runs\":[]}}", &status);
    CHECK_EQ_INT(status, 422);
    json_decref(e);
    e = api_call(&srv, "POST", "/api/experiments", "{\"from_bundle\":{},\"preset\":\"seed-blog\"}", &status);
    CHECK_EQ_INT(status, 422);
    json_decref(e);
    json_decref(req);
    json_decref(b);
}

static void cases(void) {
    RUN(a_trained_run_records_where_its_numbers_come_from);
    RUN(the_experiment_bundle_carries_each_runs_provenance);
    RUN(a_bundle_runs_again_only_on_the_same_tokens);
}

int main(void) { return api_suite_main(&srv, NULL, cases); }
