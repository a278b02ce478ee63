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

/* A new experiment named name of two tiny variants (steps as given); its id, and its run ids in
 * ids[2]. */
static long long experiment(const char *name, int steps, long long ids[2]) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\":\"%s\",\"base\":{" TINY_CONFIG ",\"steps\":%d,\"checkpoint_every\":2},\"variants\":[{"
             "\"name\":\"a\",\"config\":{}},{\"name\":\"b\",\"config\":{\"attention\":\"dot\"}}]}",
             name, steps);
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
    long long runs[2], id = experiment("managed", 3, runs);
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
    long long runs[2], id = experiment("kept runs", 3, runs);
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
    long long runs[2], id = experiment("deleted runs", 100000, runs); /* trains until cancelled */
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

/* The name of experiment id ("" when it cannot be read; static). */
static const char *name_of(long long id) {
    static char name[256];
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld", id);
    json_t *e = api_expect(&srv, "GET", path, NULL, 200);
    snprintf(name, sizeof name, "%s",
             e ? json_string_value(json_object_get(json_object_get(e, "experiment"), "name")) : "");
    json_decref(e);
    return name;
}

TEST(experiment_names_are_unique) {
    /* a name the request gives is its own: 409 when taken (by a_rename_shows_everywhere's), on
     * create and on rename */
    json_t *e = api_expect(&srv, "POST", "/api/experiments",
                           "{\"name\":\"renamed A/B\",\"base\":{" TINY_CONFIG ",\"steps\":2},\"variants\":[{\"name\":"
                           "\"a\"}]}",
                           409);
    CHECK(e && !strcmp(api_error_field(e), "name"));
    json_decref(e);
    /* a default name (a preset's, an unnamed experiment's) takes the first free "name (n)" */
    static const char *const tiny =
        "{\"preset\":\"seed-blog\",\"overrides\":{" TINY_CONFIG ",\"steps\":2,\"checkpoint_every\":0}}";
    long long p1 = api_create_experiment(&srv, tiny, NULL), p2 = api_create_experiment(&srv, tiny, NULL);
    CHECK(p1 > 0 && p2 > 0);
    CHECK(!strcmp(name_of(p1), "seed-blog") && !strcmp(name_of(p2), "seed-blog (2)"));
    char runs[64];
    snprintf(runs, sizeof runs, "/api/runs?experiment=%lld&sort=name", p2);
    json_t *l = api_expect(&srv, "GET", runs, NULL, 200);
    const char *first = json_string_value(json_object_get(json_array_get(json_object_get(l, "runs"), 0), "name"));
    int named = first && !strcmp(first, "seed-blog (2)/cosine_rope");
    json_decref(l);
    CHECK_MSG(named, "its runs are not named after it");
    static const char *const unnamed = "{\"base\":{" TINY_CONFIG ",\"steps\":2},\"variants\":[{\"name\":\"a\"}]}";
    long long u1 = api_create_experiment(&srv, unnamed, NULL), u2 = api_create_experiment(&srv, unnamed, NULL);
    CHECK(u1 > 0 && u2 > 0);
    CHECK_MSG(!strcmp(name_of(u1), "experiment") && !strcmp(name_of(u2), "experiment (2)"), "%s", name_of(u2));
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld", p2);
    e = api_expect(&srv, "PATCH", path, "{\"name\":\"seed-blog\"}", 409);
    CHECK(e && !strcmp(api_error_field(e), "name"));
    json_decref(e);
    CHECK(!strcmp(name_of(p2), "seed-blog (2)"));
    CHECK_EQ_INT(api_status(&srv, "PATCH", path, "{\"name\":\"seed-blog (2)\"}"), 200); /* its own name */
}

/* The ids of what a list answers, joined by ",". */
static void ids_of(const char *path, const char *member, char *out, size_t len) {
    out[0] = 0;
    json_t *j = api_expect(&srv, "GET", path, NULL, 200);
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(j, member), i, x)
        snprintf(out + strlen(out), len - strlen(out), "%s%lld", i ? "," : "",
                 (long long)json_integer_value(json_object_get(x, "id")));
    if (!j) snprintf(out, len, "(refused)");
    json_decref(j);
}

TEST(runs_and_experiments_are_found_by_their_words) {
    long long runs[2], id = experiment("Swin scale search", 2, runs);
    CHECK(id > 0);
    CHECK(wait_all(runs) == 0);
    char path[128], got[256], want[64];
    snprintf(path, sizeof path, "/api/runs/%lld", runs[1]);
    CHECK_EQ_INT(
        api_status(&srv, "PATCH", path, "{\"note\":\"Diverged at step 2; retry with warm-up\",\"tags\":[\"flaky\"]}"),
        200);
    ids_of("/api/runs?q=warm%20DIVER", "runs", got, sizeof got);
    snprintf(want, sizeof want, "%lld", runs[1]);
    CHECK_MSG(!strcmp(got, want), "runs by a note: %s, not %s", got, want);
    ids_of("/api/runs?q=flaky&sort=id", "runs", got, sizeof got);
    CHECK_MSG(!strcmp(got, want), "runs by a tag: %s, not %s", got, want);
    ids_of("/api/runs?q=swin%20search&sort=id", "runs", got, sizeof got);
    snprintf(want, sizeof want, "%lld,%lld", runs[0], runs[1]);
    CHECK_MSG(!strcmp(got, want), "runs by their names: %s, not %s", got, want);
    snprintf(want, sizeof want, "%lld", id);
    ids_of("/api/experiments?q=swin", "experiments", got, sizeof got);
    CHECK_MSG(!strcmp(got, want), "an experiment by its name: %s, not %s", got, want);
    ids_of("/api/experiments?q=retry", "experiments", got, sizeof got);
    CHECK_MSG(!strcmp(got, want), "an experiment by a run's note: %s, not %s", got, want);
    ids_of("/api/experiments?q=zzzz", "experiments", got, sizeof got);
    CHECK_MSG(!strcmp(got, ""), "nothing: %s", got);
    static const char *const bad[] = {"/api/runs?q=", "/api/experiments?q=%20,;",
                                      "/api/runs?q=a%20b%20c%20d%20e%20f%20g%20h%20i"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *e = api_expect(&srv, "GET", bad[i], NULL, 422);
        CHECK_MSG(e && !strcmp(api_error_field(e), "q"), "%s", bad[i]);
        json_decref(e);
    }
}

/* The run ids of an experiment's runs by variant and replicate: seeds[variant v][replicate r]. */
static int seeds_of(long long id, const char *const *variants, int nv, long long seeds[][4], int *n_rep) {
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld", id);
    json_t *e = api_expect(&srv, "GET", path, NULL, 200);
    if (!e) return -1;
    *n_rep = (int)json_integer_value(json_object_get(json_object_get(e, "experiment"), "replicates"));
    size_t i;
    json_t *r;
    int n = 0;
    json_array_foreach(json_object_get(e, "runs"), i, r) {
        int rep = (int)json_integer_value(json_object_get(r, "replicate"));
        const char *v = json_string_value(json_object_get(r, "variant"));
        for (int k = 0; k < nv; k++)
            if (v && !strcmp(v, variants[k]) && rep < 4) {
                seeds[k][rep] = json_integer_value(json_object_get(r, "seed"));
                n++;
            }
    }
    json_decref(e);
    return n;
}

TEST(runs_and_replicates_join_an_existing_experiment) {
    long long first[2], id = experiment("grown", 2, first);
    CHECK(id > 0);
    CHECK(wait_all(first) == 0);
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld/runs", id);
    /* two more replicates of both variants */
    json_t *added = api_expect(&srv, "POST", path, "{\"replicates\":2}", 201);
    CHECK(added);
    json_t *runs = json_incref(json_object_get(added, "runs"));
    json_decref(added);
    size_t n = json_array_size(runs);
    int missed = api_wait_runs(&srv, runs, "succeeded", 120000);
    json_decref(runs);
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(missed, 0);
    /* and a new variant, run for each of the three replicates with their seeds */
    added = api_expect(&srv, "POST", path,
                       "{\"variants\":[{\"name\":\"c\",\"config\":{\"attention\":\"cosine_rope\"}}]}", 201);
    CHECK(added);
    runs = json_incref(json_object_get(added, "runs"));
    json_decref(added);
    n = json_array_size(runs);
    missed = api_wait_runs(&srv, runs, "succeeded", 120000);
    json_decref(runs);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(missed, 0);
    static const char *const variants[] = {"a", "b", "c"};
    long long seeds[3][4] = {{0}};
    int reps = 0;
    CHECK_EQ_INT(seeds_of(id, variants, 3, seeds, &reps), 9);
    CHECK_EQ_INT(reps, 3);
    for (int r = 0; r < 3; r++)
        for (int v = 0; v < 3; v++)
            CHECK_MSG(seeds[v][r] == seeds[0][0] + r, "variant %s replicate %d has seed %lld", variants[v], r,
                      seeds[v][r]);
    /* the statistics pair all three replicates of every variant */
    char stats[96];
    snprintf(stats, sizeof stats, "/api/experiments/%lld/stats", id);
    json_t *s = api_expect(&srv, "GET", stats, NULL, 200);
    CHECK(s);
    size_t i;
    json_t *c;
    int pairs = 0;
    json_array_foreach(json_object_get(json_object_get(s, "stats"), "comparisons"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "metric")), "final_train_loss")) continue;
        pairs++;
        CHECK_MSG(json_integer_value(json_object_get(c, "n")) == 3, "%s - %s: n %lld",
                  json_string_value(json_object_get(c, "a")), json_string_value(json_object_get(c, "b")),
                  (long long)json_integer_value(json_object_get(c, "n")));
    }
    json_decref(s);
    CHECK_EQ_INT(pairs, 3);
    /* refused: both or neither, a variant it has, past the bounds, an unknown experiment */
    static const char *const bad[][2] = {{"{}", "replicates"},
                                         {"{\"replicates\":1,\"variants\":[]}", "variants"},
                                         {"{\"variants\":[{\"name\":\"a\"}]}", "variants"},
                                         {"{\"replicates\":30}", "replicates"},
                                         {"{\"replicates\":0}", "replicates"},
                                         {"{\"seeds\":1}", "seeds"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        json_t *e = api_expect(&srv, "POST", path, bad[k][0], 422);
        CHECK_MSG(e && !strcmp(api_error_field(e), bad[k][1]), "%s: field %s", bad[k][0], e ? api_error_field(e) : "");
        json_decref(e);
    }
    CHECK_EQ_INT(api_status(&srv, "POST", "/api/experiments/999999/runs", "{\"replicates\":1}"), 404);
}

static void cases(void) {
    RUN(a_rename_shows_everywhere);
    RUN(deleting_an_experiment_can_keep_its_runs);
    RUN(deleting_an_experiment_with_its_runs_waits_for_them_to_end);
    RUN(experiment_names_are_unique);
    RUN(runs_and_experiments_are_found_by_their_words);
    RUN(runs_and_replicates_join_an_existing_experiment);
}

int main(void) { return api_suite_main(&srv, NULL, cases); }
