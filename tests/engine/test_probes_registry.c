/* The probe registry and its contract: kinds listed with schemas, parameters validated (an
 * error names the field), the result shape, determinism, and the time the defaults take. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "test_probe_util.h"

static const char *const analytic[] = {"rope_invariance", "pair_turns", "dephasing",    "context_extension",
                                       "rotation_check",  "scaling",    "cosine_scores"};
#define N_ANALYTIC 7

TEST(registry_lists_every_kind_with_a_title_and_schema) {
    /* The kinds the seed texts and the service rely on are all there; the registry is the list. */
    static const char *const known[] = {"rope_invariance",   "pair_turns",     "dephasing",
                                        "context_extension", "rotation_check", "scaling",
                                        "cosine_scores",     "attention_map",  "topk_prediction"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        CHECK_MSG(probe_find(known[i]) != NULL, "kind %s missing", known[i]);
    int n = probe_kind_count();
    CHECK(n >= 9);
    for (int i = 0; i < n; i++) {
        const probe_kind *k = probe_kind_at(i);
        CHECK(k != NULL && probe_find(k->name) == k);
        CHECK_MSG(k->title && k->title[0], "kind %s has no title", k->name);
        CHECK_MSG(strlen(k->description) > 10, "kind %s has no description", k->name);
        CHECK(k->run != NULL);
    }
    CHECK(probe_find("nope") == NULL);
    CHECK(probe_kind_at(n) == NULL);
    CHECK(probe_kind_at(-1) == NULL);
    json_t *j = probe_kinds_json();
    CHECK(j != NULL);
    CHECK_EQ_INT(json_array_size(j), n);
    for (int i = 0; i < n; i++)
        CHECK(!strcmp(json_string_value(json_object_get(json_array_get(j, (size_t)i), "title")),
                      probe_kind_at(i)->title));
    json_t *ps = json_object_get(json_array_get(j, 2), "params");
    CHECK(json_array_size(ps) > 0);
    json_t *first = json_array_get(ps, 0);
    CHECK(json_is_string(json_object_get(first, "name")));
    CHECK(json_object_get(first, "default") != NULL);
    CHECK(json_is_number(json_object_get(first, "max")));
    json_decref(j);
}

TEST(defaults_fill_every_param_and_shape_is_right) {
    for (int i = 0; i < N_ANALYTIC; i++) {
        json_t *res = tp_run(analytic[i], NULL, NULL);
        CHECK_MSG(res != NULL, "%s failed with defaults", analytic[i]);
        CHECK(strcmp(json_string_value(json_object_get(res, "kind")), analytic[i]) == 0);
        const probe_kind *k = probe_find(analytic[i]);
        json_t *params = json_object_get(res, "params");
        CHECK_EQ_INT(json_object_size(params), k->n_params);
        CHECK(json_is_object(json_object_get(res, "summary")));
        CHECK(json_object_size(json_object_get(res, "summary")) > 0);
        json_t *tables = json_object_get(res, "tables");
        CHECK(json_array_size(tables) > 0);
        size_t ti;
        json_t *t;
        json_array_foreach(tables, ti, t) {
            size_t ncol = json_array_size(json_object_get(t, "columns"));
            CHECK(ncol > 0);
            size_t ri;
            json_t *r;
            json_array_foreach(json_object_get(t, "rows"), ri, r) {
                CHECK_MSG(json_array_size(r) == ncol, "%s table %s row %zu has %zu cells, %zu columns", analytic[i],
                          json_string_value(json_object_get(t, "name")), ri, json_array_size(r), ncol);
            }
        }
        /* Every chart names a table and columns that exist. */
        size_t ci;
        json_t *c;
        json_array_foreach(json_object_get(res, "charts"), ci, c) {
            json_t *tab = tp_table(res, json_string_value(json_object_get(c, "table")));
            CHECK_MSG(tab != NULL, "%s chart %zu names a missing table", analytic[i], ci);
            CHECK(tp_col(tab, json_string_value(json_object_get(c, "x"))) >= 0);
            size_t yi;
            json_t *y;
            json_array_foreach(json_object_get(c, "y"), yi, y) {
                CHECK_MSG(tp_col(tab, json_string_value(y)) >= 0, "%s chart y %s", analytic[i], json_string_value(y));
            }
        }
        json_decref(res);
    }
}

TEST(same_params_same_result_and_seed_matters) {
    json_t *a = tp_run("dephasing", NULL, NULL), *b = tp_run("dephasing", NULL, NULL);
    json_t *c = tp_run("dephasing", "{\"seed\": 99}", NULL);
    CHECK(a && b && c);
    CHECK(json_equal(a, b));
    CHECK(!json_equal(json_object_get(a, "tables"), json_object_get(c, "tables")));
    json_decref(a), json_decref(b), json_decref(c);
}

static void expect_field(const char *kind, const char *params, const char *field) {
    probe_error err;
    memset(&err, 0, sizeof err);
    json_t *res = tp_run(kind, params, &err);
    if (res) {
        json_decref(res);
        test_fail_at(__FILE__, __LINE__, "%s %s was accepted", kind, params);
        return;
    }
    if (err.status != ENGINE_ERR_INVALID || strcmp(err.field, field) != 0)
        test_fail_at(__FILE__, __LINE__, "%s %s: status %d field '%s' (%s), wanted field '%s'", kind, params,
                     err.status, err.field, err.message, field);
}

TEST(bad_params_name_the_field) {
    expect_field("rope_invariance", "{\"dd\": 4}", "dd");
    expect_field("rope_invariance", "{\"d\": 4097}", "d");
    expect_field("rope_invariance", "{\"d\": 7}", "d");
    expect_field("rope_invariance", "{\"d\": \"64\"}", "d");
    expect_field("rope_invariance", "{\"d\": 6.5}", "d");
    expect_field("rope_invariance", "{\"starts\": [1, -2]}", "starts");
    expect_field("rope_invariance", "{\"starts\": []}", "starts");
    expect_field("pair_turns", "{\"gaps\": 5}", "gaps");
    expect_field("dephasing", "{\"n_pairs\": 1000000}", "n_pairs");
    expect_field("dephasing", "{\"seeding\": \"per_pair\"}", "seeding");
    expect_field("context_extension", "{\"target_length\": 100}", "target_length");
    expect_field("context_extension", "{\"yarn_beta\": 0.5}", "yarn_beta");
    expect_field("context_extension", "{\"base\": 1e300}", "base");
    expect_field("scaling", "{\"dks\": [4096, 4096, 4096], \"trials\": 1024, \"n_keys\": 4096}", "trials");
    expect_field("scaling", "{\"taus\": [0]}", "taus");
    expect_field("cosine_scores", "{\"d\": 4, \"q\": [1, 2, 3]}", "q");
    expect_field("cosine_scores", "{\"d\": 2, \"k\": [0, 0]}", "k");
    expect_field("cosine_scores", "{\"max_offset\": 65536, \"d\": 1024}", "max_offset");
    expect_field("rotation_check", "{\"gen_lengths\": [5000]}", "gen_lengths");
    expect_field("nope", NULL, "kind");
    expect_field("attention_map", NULL, "run");
    expect_field("topk_prediction", "{\"text\": \"\"}", "text");
    /* the field is named even in a list item's message */
    probe_error err;
    json_t *res = tp_run("pair_turns", "{\"gaps\": [1, 0]}", &err);
    CHECK(res == NULL);
    CHECK(strstr(err.message, "gaps[1]") != NULL);
}

TEST(params_not_an_object_is_refused) {
    json_t *arr = json_array(), *res = NULL;
    probe_error err;
    CHECK(probe_run("pair_turns", arr, NULL, &res, &err) == ENGINE_ERR_INVALID);
    CHECK(strcmp(err.field, "params") == 0);
    json_decref(arr);
}

TEST(null_error_pointer_is_fine) {
    json_t *res = NULL, *bad = json_pack("{s:i}", "d", 3);
    CHECK(bad != NULL);
    CHECK(probe_run("pair_turns", bad, NULL, &res, NULL) == ENGINE_ERR_INVALID);
    CHECK(res == NULL);
    CHECK(probe_run("pair_turns", NULL, NULL, &res, NULL) == ENGINE_OK);
    CHECK(res != NULL);
    json_decref(res);
    json_decref(bad);
}

/* Out of memory inside the result builder: fail the n-th JSON allocation for every n until the
 * run succeeds; each must answer ENGINE_ERR_NOMEM (or OK) and leak nothing (ASan checks). */
static long alloc_left;
static void *failing_malloc(size_t n) { return alloc_left-- > 0 ? malloc(n) : NULL; }

TEST(every_json_allocation_failure_is_reported) {
    static const char *const cases[][2] = {
        {"rope_invariance", "{\"d\": 4, \"starts\": [1, 2], \"offsets\": [1], \"shifts\": [0, 3]}"},
        {"pair_turns", "{\"d\": 4, \"gaps\": [1, 9]}"},
        {"dephasing", "{\"d\": 4, \"offsets\": [0, 5], \"n_pairs\": 3, \"seeding\": \"per_vector_lcg\"}"},
        {"context_extension", "{\"d\": 4}"},
        {"rotation_check", "{\"d\": 4, \"positions\": [1], \"offsets\": [2], \"gen_lengths\": [2]}"},
        {"scaling", "{\"dks\": [4], \"n_keys\": 2, \"trials\": 1, \"taus\": [1]}"},
        {"cosine_scores", "{\"d\": 4, \"max_offset\": 2, \"taus\": [1]}"},
    };
    for (int c = 0; c < 7; c++) {
        json_t *params = json_loads(cases[c][1], 0, NULL);
        CHECK(params != NULL);
        int ok = 0;
        for (long n = 0; n < 100000 && !ok; n++) {
            json_t *res = NULL;
            probe_error err;
            alloc_left = n;
            json_set_alloc_funcs(failing_malloc, free);
            engine_status st = probe_run(cases[c][0], params, NULL, &res, &err);
            json_set_alloc_funcs(malloc, free);
            if (st == ENGINE_OK) {
                ok = 1;
                CHECK(res != NULL);
                json_decref(res);
            } else {
                CHECK_MSG(st == ENGINE_ERR_NOMEM, "%s: allocation %ld failed, got %s (%s)", cases[c][0], n,
                          engine_status_name(st), err.message);
                CHECK(res == NULL);
            }
        }
        CHECK_MSG(ok, "%s never succeeded", cases[c][0]);
        json_decref(params);
    }
}

TEST(integral_reals_are_taken_as_ints) {
    json_t *res = tp_run("pair_turns", "{\"d\": 16.0}", NULL);
    CHECK(res != NULL);
    CHECK(json_is_integer(json_object_get(json_object_get(res, "params"), "d")));
    CHECK_EQ_INT(tp_nrows(tp_table(res, "turns")), 8);
    json_decref(res);
}

TEST(defaults_answer_within_20ms) {
#if defined(__SANITIZE_ADDRESS__) || defined(__OPTIMIZE__) == 0
    /* Under the sanitizers (or unoptimised) only the running matters; the budget is for release. */
    for (int i = 0; i < N_ANALYTIC; i++) {
        json_t *res = tp_run(analytic[i], NULL, NULL);
        CHECK(res != NULL);
        json_decref(res);
    }
#else
    for (int i = 0; i < N_ANALYTIC; i++) {
        double best = 1e9;
        for (int rep = 0; rep < 5; rep++) { /* best of five: the machine is shared */
            double t0 = tp_now_ms();
            json_t *res = tp_run(analytic[i], NULL, NULL);
            double dt = tp_now_ms() - t0;
            CHECK(res != NULL);
            json_decref(res);
            if (dt < best) best = dt;
        }
        printf("# %s defaults: %.2f ms\n", analytic[i], best);
        CHECK_MSG(best < 20.0, "%s took %.2f ms", analytic[i], best);
    }
#endif
}

int main(void) {
    RUN(registry_lists_every_kind_with_a_title_and_schema);
    RUN(defaults_fill_every_param_and_shape_is_right);
    RUN(same_params_same_result_and_seed_matters);
    RUN(bad_params_name_the_field);
    RUN(params_not_an_object_is_refused);
    RUN(null_error_pointer_is_fine);
    RUN(every_json_allocation_failure_is_reported);
    RUN(integral_reals_are_taken_as_ints);
    RUN(defaults_answer_within_20ms);
    return test_summary();
}
