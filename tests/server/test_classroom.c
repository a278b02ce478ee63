/* The classroom version of the blog experiment, against a real attnlabd with its default flags: the
 * built-in byte-level corpus is there (and its name reserved), an experiment's runs split the cores
 * between them while a lone run on an idle service gets them all, and the seed-blog preset's tiny
 * overrides train both variants to a visible difference — rope's validation loss well below
 * cos/tau's, whose attention stays next to uniform — which is what the preset's description says a
 * class will see. (The last case trains 2 x 600 byte-level steps: release build only.) */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../support/api.h"
#include "../support/harness.h"
#include "../support/test.h"

static harness_server srv;

static json_t *get(const char *path) { return api_expect(&srv, "GET", path, NULL, 200); }

TEST(the_byte_level_classroom_corpus_is_built_in_and_its_name_reserved) {
    json_t *c = get("/api/corpora/small-bytes");
    json_t *o = json_object_get(c, "corpus");
    CHECK_MSG(o, "no corpus small-bytes");
    CHECK(json_is_true(json_object_get(o, "builtin")));
    CHECK(!strcmp(json_string_value(json_object_get(o, "tokenizer")), "bytes"));
    CHECK(!strcmp(json_string_value(json_object_get(o, "status")), "ready"));
    struct stat st;
    CHECK(stat("corpora/small/text.txt", &st) == 0);
    CHECK_EQ_INT((long)json_integer_value(json_object_get(o, "tokens")), (long)st.st_size); /* one token a byte */
    json_decref(c);
    harness_response r;
    CHECK(harness_request(&srv, "POST", "/api/corpora?name=small-bytes&encoding=bytes", "abc", 3, NULL, &r) == 0);
    CHECK_MSG(r.status == 409, "an upload took the built-in name: %ld", r.status);
    harness_response_free(&r);
}

/* The threads a run's stored config was given. */
static long run_threads(long long id) {
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", id);
    json_t *r = get(path);
    long t = (long)json_integer_value(json_object_get(json_object_get(json_object_get(r, "run"), "config"), "threads"));
    json_decref(r);
    return t;
}

#define SHARE_CONFIG                                                                                                   \
    "\"corpus\":\"small-bytes\",\"n_layer\":1,\"n_head\":2,\"d_model\":16,\"seq_len\":16,\"batch\":2,\"steps\":3,"     \
    "\"eval_every\":3,\"eval_batches\":1"

TEST(an_experiment_splits_the_cores_and_a_lone_run_takes_them_all) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long status;
    json_t *r = api_call(&srv, "POST", "/api/runs", "{\"config\":{" SHARE_CONFIG "}}", &status);
    CHECK_EQ_INT(status, 201);
    long long lone = (long long)json_integer_value(json_object_get(json_object_get(r, "run"), "id"));
    json_decref(r);
    CHECK_EQ_INT(run_threads(lone), cores);
    char *st = api_wait_status(&srv, lone, "succeeded", 300000);
    CHECK(st && !strcmp(st, "succeeded"));
    free(st);
    json_t *runs;
    CHECK(api_create_experiment(&srv,
                                "{\"name\":\"split\",\"base\":{" SHARE_CONFIG "},\"variants\":[{\"name\":\"a\","
                                "\"config\":{\"attention\":\"rope\"}},{\"name\":\"b\",\"config\":{\"attention\":"
                                "\"cosine_rope\"}}]}",
                                &runs) > 0);
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run) CHECK_EQ_INT(
        run_threads((long long)json_integer_value(json_object_get(run, "id"))), cores >= 2 ? cores / 2 : 1);
    CHECK_EQ_INT(api_wait_runs(&srv, runs, "succeeded", 300000), 0);
    json_decref(runs);
}

TEST(the_classroom_blog_experiment_shows_the_difference) {
    const char *mode = getenv("ATTNLAB_TEST_MODE");
    SKIP_IF(mode && (!strcmp(mode, "asan") || !strcmp(mode, "tsan")), "2 x 600 steps: release build only");
    json_t *presets = get("/api/presets"), *tiny = NULL;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(presets, "presets"), i,
                       p) if (!strcmp(json_string_value(json_object_get(p, "name")), "seed-blog")) tiny =
        json_object_get(p, "tiny");
    CHECK_MSG(tiny, "no seed-blog preset with a tiny version");
    json_t *body = json_pack("{s:s, s:s, s:O}", "preset", "seed-blog", "name", "classroom", "overrides", tiny);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    json_decref(presets);
    json_t *runs;
    long long exp = api_create_experiment(&srv, text, &runs);
    free(text);
    CHECK(exp > 0);
    CHECK_EQ_INT(api_wait_runs(&srv, runs, "succeeded", 900000), 0);
    json_decref(runs);
    char path[96];
    snprintf(path, sizeof path, "/api/experiments/%lld/stats", exp);
    json_t *s = get(path), *stats = json_object_get(s, "stats");
    double rope_val = NAN, cos_val = NAN, rope_ent = NAN, cos_ent = NAN;
    json_t *v;
    json_array_foreach(json_object_get(stats, "variants"), i, v) {
        json_t *m = json_object_get(v, "metrics");
        double val = json_number_value(json_object_get(json_object_get(m, "final_val_loss"), "mean"));
        double ent = json_number_value(json_object_get(json_object_get(m, "final_entropy_mean"), "mean"));
        if (!strcmp(json_string_value(json_object_get(v, "name")), "rope"))
            rope_val = val, rope_ent = ent;
        else
            cos_val = val, cos_ent = ent;
    }
    json_decref(s);
    double uniform = 0; /* mean over positions of ln(keys) of causal attention over 64 tokens */
    for (int t = 1; t <= 64; t++) uniform += log((double)t) / 64;
    printf("# classroom: val loss rope %.4f cos/tau %.4f; entropy rope %.3f cos/tau %.3f (uniform %.3f)\n", rope_val,
           cos_val, rope_ent, cos_ent, uniform);
    CHECK_MSG(cos_val - rope_val > 0.05, "rope %.4f against cos/tau %.4f: no visible gap", rope_val, cos_val);
    CHECK_MSG(fabs(cos_ent - uniform) < 0.05, "cos/tau attention entropy %.3f, uniform %.3f", cos_ent, uniform);
    CHECK_MSG(uniform - rope_ent > 0.3, "rope attention entropy %.3f, uniform %.3f", rope_ent, uniform);
}

static void cases(void) {
    RUN(the_byte_level_classroom_corpus_is_built_in_and_its_name_reserved);
    RUN(an_experiment_splits_the_cores_and_a_lone_run_takes_them_all);
    RUN(the_classroom_blog_experiment_shows_the_difference);
}

int main(void) { return api_suite_main(&srv, NULL, cases); }
