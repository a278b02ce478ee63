/* Importing a bundle (POST /api/experiments/import), against a real attnlabd: an experiment
 * trained here, exported as its bundle and imported again gives back the same statistics and the
 * same points, with runs that nothing trains (external, already ended, provenance naming the runs
 * they came from); a bundle that is not one is refused naming the first bad member, and a refused
 * import leaves nothing behind. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv;
static long long exp_id; /* the trained experiment */
static json_t *bundle;   /* its bundle */
static long long imp_id; /* the imported one */

/* Drops every member named "id", "run_id", "experiment_id" or "created_at" (and "experiment"
 * objects' names) at any depth, so that two answers about different ids compare by content. */
static void strip_ids(json_t *v) {
    if (json_is_object(v)) {
        static const char *const drop[] = {"id", "run_id", "experiment_id", "created_at", "name", NULL};
        for (int i = 0; drop[i]; i++) json_object_del(v, drop[i]);
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) strip_ids(x);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) strip_ids(x);
    }
}

static int same_without_ids(json_t *a, json_t *b) {
    json_t *x = json_deep_copy(a), *y = json_deep_copy(b);
    strip_ids(x);
    strip_ids(y);
    int same = json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return same;
}

static json_t *get(const char *fmt, long long id) {
    char path[160];
    snprintf(path, sizeof path, fmt, id);
    return api_expect(&srv, "GET", path, NULL, 200);
}

static long long experiments_total(void) {
    long status;
    json_t *r = api_call(&srv, "GET", "/api/experiments", NULL, &status);
    long long n = (long long)json_integer_value(json_object_get(r, "total"));
    json_decref(r);
    return n;
}

static json_t *import_text(const char *text, const char *query, long *status) {
    char path[200];
    snprintf(path, sizeof path, "/api/experiments/import%s", query ? query : "");
    return api_call(&srv, "POST", path, text, status);
}

TEST(an_experiment_trained_here_and_exported) {
    json_t *runs;
    exp_id = api_create_experiment(&srv,
                                   "{\"name\":\"exported\",\"replicates\":3,\"base\":{" TINY_CONFIG
                                   ",\"steps\":12},\"variants\":[{\"name\":\"rope\",\"config\":{\"attention\":"
                                   "\"rope\"}},{\"name\":\"cos\",\"config\":{\"attention\":\"cosine_rope\"}}]}",
                                   &runs);
    CHECK(exp_id > 0);
    CHECK_EQ_INT(api_wait_runs(&srv, runs, "succeeded", 300000), 0);
    json_decref(runs);
    bundle = get("/api/experiments/%lld/bundle?max_points=0", exp_id);
    CHECK(bundle && json_array_size(json_object_get(bundle, "runs")) == 6);
}

TEST(its_import_gives_back_the_same_runs_points_and_statistics) {
    CHECK(bundle);
    char *text = json_dumps(bundle, JSON_COMPACT);
    long status;
    json_t *imp = import_text(text, "?name=imported", &status);
    free(text);
    CHECK_EQ_INT(status, 201);
    imp_id = (long long)json_integer_value(json_object_get(json_object_get(imp, "experiment"), "id"));
    CHECK(imp_id > exp_id);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(imp, "experiment"), "name")), "imported"));
    CHECK_EQ_INT((long)json_integer_value(json_object_get(imp, "points")),
                 (long)json_integer_value(json_object_get(bundle, "points")));
    /* every run: external, ended as exported, provenance naming its source */
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(imp, "runs"), i, r) {
        json_t *run = get("/api/runs/%lld", (long long)json_integer_value(json_object_get(r, "id")));
        json_t *o = json_object_get(run, "run");
        CHECK(!strcmp(json_string_value(json_object_get(o, "status")), "succeeded"));
        CHECK(!strcmp(json_string_value(json_object_get(o, "source")), "external"));
        json_t *from = json_object_get(json_object_get(o, "provenance"), "imported_from");
        json_t *src = json_array_get(json_object_get(bundle, "runs"), i);
        CHECK_EQ_INT((long)json_integer_value(json_object_get(from, "run_id")),
                     (long)json_integer_value(json_object_get(src, "id")));
        CHECK_EQ_INT((long)json_integer_value(json_object_get(from, "experiment_id")), (long)exp_id);
        CHECK_EQ_INT((long)json_integer_value(json_object_get(o, "step")), 12);
        json_decref(run);
    }
    json_decref(imp);
    /* the same statistics (every figure, bootstrap included) and the same series */
    json_t *s1 = get("/api/experiments/%lld/stats", exp_id), *s2 = get("/api/experiments/%lld/stats", imp_id);
    CHECK(s1 && s2);
    CHECK_MSG(same_without_ids(json_object_get(s1, "stats"), json_object_get(s2, "stats")),
              "the imported experiment's statistics differ");
    json_decref(s1);
    json_decref(s2);
    json_t *b2 = get("/api/experiments/%lld/bundle?max_points=0", imp_id);
    CHECK(b2);
    json_t *r1, *r2;
    json_array_foreach(json_object_get(bundle, "runs"), i, r1) {
        r2 = json_array_get(json_object_get(b2, "runs"), i);
        CHECK_MSG(json_equal(json_object_get(r1, "series"), json_object_get(r2, "series")), "run %zu's points", i);
        CHECK(json_equal(json_object_get(r1, "config"), json_object_get(r2, "config")));
        CHECK_EQ_INT((long)json_integer_value(json_object_get(r1, "replicate")),
                     (long)json_integer_value(json_object_get(r2, "replicate")));
    }
    json_decref(b2);
}

/* Imports a copy of the bundle changed by `edit`; expects a 422 naming `field` and nothing stored. */
static void refused(void (*edit)(json_t *), const char *field) {
    json_t *b = json_deep_copy(bundle);
    edit(b);
    char *text = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    long long before = experiments_total();
    long status;
    json_t *r = import_text(text, NULL, &status);
    free(text);
    CHECK_EQ_INT(status, 422);
    CHECK_MSG(!strcmp(api_error_field(r), field), "field %s, expected %s", api_error_field(r), field);
    CHECK_EQ_INT((long)experiments_total(), (long)before);
    json_decref(r);
}

static json_t *run0(json_t *b) { return json_array_get(json_object_get(b, "runs"), 0); }
static json_t *last_run(json_t *b) {
    json_t *runs = json_object_get(b, "runs");
    return json_array_get(runs, json_array_size(runs) - 1);
}
static void still_running(json_t *b) { json_object_set_new(last_run(b), "status", json_string("running")); }
static void bad_value(json_t *b) {
    json_t *s = json_object_get(json_object_get(last_run(b), "series"), "loss");
    json_array_set_new(json_object_get(s, "values"), 0, json_string("low"));
}
static void ragged(json_t *b) {
    json_t *s = json_object_get(json_object_get(run0(b), "series"), "loss");
    json_array_append_new(json_object_get(s, "steps"), json_integer(99));
}
static void bad_key(json_t *b) {
    json_object_set_new(json_object_get(last_run(b), "series"), "no spaces allowed", json_object());
}
static void no_variants(json_t *b) { json_object_del(json_object_get(b, "experiment"), "variants"); }
static void bad_replicate(json_t *b) { json_object_set_new(run0(b), "replicate", json_integer(-1)); }

TEST(a_bundle_that_is_not_one_is_refused_naming_its_first_bad_member_and_nothing_is_kept) {
    CHECK(bundle);
    refused(still_running, "runs[5].status");
    refused(bad_value, "runs[5].series.loss");
    refused(ragged, "runs[0].series.loss");
    refused(bad_key, "runs[5].series");
    refused(no_variants, "experiment");
    refused(bad_replicate, "runs[0].replicate");
    long status;
    json_t *r = import_text("{not json", NULL, &status);
    CHECK_EQ_INT(status, 422);
    CHECK(!strcmp(api_error_field(r), "body"));
    json_decref(r);
    r = import_text("{\"experiment\":{},\"runs\":[]}", NULL, &status);
    CHECK_EQ_INT(status, 422);
    json_decref(r);
}

/* Names are unique: a name asked for that is in use is a 409 and stores nothing; the bundle's own
 * name, in use, becomes the first free "name (2)". */
TEST(an_import_takes_a_free_name) {
    CHECK(bundle);
    char *text = json_dumps(bundle, JSON_COMPACT);
    long long before = experiments_total();
    long status;
    json_t *r = import_text(text, "?name=imported", &status);
    CHECK_MSG(status == 409 && !strcmp(api_error_field(r), "name"), "%ld %s", status, api_error_field(r));
    json_decref(r);
    CHECK_EQ_INT((long)experiments_total(), (long)before);
    r = import_text(text, NULL, &status);
    free(text);
    CHECK_EQ_INT(status, 201);
    const char *name = json_string_value(json_object_get(json_object_get(r, "experiment"), "name"));
    int ok = name && !strcmp(name, "exported (2)");
    CHECK_MSG(ok, "named %s", name ? name : "(none)");
    json_decref(r);
}

TEST(imported_runs_are_never_trained_and_keep_their_status_across_a_restart) {
    CHECK(imp_id > 0);
    char dir[sizeof srv.data_dir];
    snprintf(dir, sizeof dir, "%s", srv.data_dir);
    harness_stop(&srv);
    CHECK(harness_start(&srv, dir, NULL) == 0);
    json_t *e = get("/api/experiments/%lld", imp_id);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(e, "runs"), i, r)
        CHECK(!strcmp(json_string_value(json_object_get(r, "status")), "succeeded"));
    CHECK_EQ_INT((long)json_array_size(json_object_get(e, "runs")), 6);
    json_decref(e);
}

static void cases(void) {
    RUN(an_experiment_trained_here_and_exported);
    RUN(its_import_gives_back_the_same_runs_points_and_statistics);
    RUN(a_bundle_that_is_not_one_is_refused_naming_its_first_bad_member_and_nothing_is_kept);
    RUN(an_import_takes_a_free_name);
    RUN(imported_runs_are_never_trained_and_keep_their_status_across_a_restart);
    json_decref(bundle);
}

int main(void) { return api_suite_main(&srv, NULL, cases); }
