/* The probe registry and its contract: kinds listed with schemas, parameters validated (an
 * error names the field), the result shape, determinism (for a timing kind: the same shape, and
 * times that are finite and positive), and the time the defaults take. */
#include <math.h>
#include <stdatomic.h>
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
    static const char *const known[] = {"rope_invariance", "pair_turns", "dephasing",     "context_extension",
                                        "rotation_check",  "scaling",    "cosine_scores", "attention_map",
                                        "topk_prediction", "sparse_cost"};
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
        CHECK_MSG(!(k->timing && k->needs_model), "timing kind %s needs a model", k->name);
    }
    CHECK(probe_find("sparse_cost")->timing == 1);
    CHECK(probe_find("dephasing")->timing == 0);
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

/* The shape of a result: table names, columns and row counts, chart hints; no cell values. */
static json_t *shape_of(const json_t *res) {
    json_t *s = json_object(), *tabs = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(res, "tables"), i, t) {
        json_array_append_new(tabs, json_pack("{s:O, s:O, s:I}", "name", json_object_get(t, "name"), "columns",
                                              json_object_get(t, "columns"), "rows",
                                              (json_int_t)json_array_size(json_object_get(t, "rows"))));
    }
    json_object_set_new(s, "tables", tabs);
    json_object_set(s, "charts", json_object_get(res, "charts"));
    json_object_set(s, "params", json_object_get(res, "params"));
    json_t *keys = json_array();
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(res, "summary"), key, v) json_array_append_new(keys, json_string(key));
    json_object_set_new(s, "summary_keys", keys);
    return s;
}

TEST(timing_kinds_give_the_same_shape_and_positive_times) {
    /* A timing kind's figures are measurements: two runs give the same tables, columns, rows,
     * charts and summary keys, and every time in them is finite and positive. */
    const char *small = "{\"ns\": [16, 64], \"ks\": [4, 8], \"min_ms\": 0.05, \"rounds\": 1}";
    for (int i = 0; i < probe_kind_count(); i++) {
        const probe_kind *k = probe_kind_at(i);
        if (!k->timing) continue;
        CHECK(!strcmp(k->name, "sparse_cost")); /* the one there is; a new one needs its small params here */
        json_t *a = tp_run(k->name, small, NULL), *b = tp_run(k->name, small, NULL);
        CHECK_MSG(a && b, "%s failed", k->name);
        if (!a || !b) {
            json_decref(a), json_decref(b);
            continue;
        }
        json_t *sa = shape_of(a), *sb = shape_of(b);
        CHECK(json_equal(sa, sb));
        json_decref(sa), json_decref(sb);
        json_t *tabs[2] = {tp_table(a, "us_per_query"), tp_table(a, "cost")};
        CHECK(tabs[0] && tabs[1]);
        CHECK_EQ_INT(tp_nrows(tabs[0]), 2);
        CHECK_EQ_INT(tp_nrows(tabs[1]), 2 * 4 * 2);
        static const char *const wide[] = {"dense",     "window_k4", "lsh_k4",     "hamming_k4", "topk_k4",
                                           "window_k8", "lsh_k8",    "hamming_k8", "topk_k8"};
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 9; c++) {
                double v = tp_cell(tabs[0], r, wide[c]);
                CHECK_MSG(isfinite(v) && v > 0, "%s row %d %s = %g", k->name, r, wide[c], v);
            }
        static const char *const times[] = {"us_per_query", "predictor_us_per_query", "dense_us_per_query",
                                            "ratio_to_dense"};
        for (int r = 0; r < tp_nrows(tabs[1]); r++)
            for (int c = 0; c < 4; c++) {
                double v = tp_cell(tabs[1], r, times[c]);
                CHECK_MSG(isfinite(v) && v > 0, "%s cost row %d %s = %g", k->name, r, times[c], v);
            }
        /* The chart hint: log-log, dense as the reference, every column there. */
        json_t *ch = json_array_get(json_object_get(a, "charts"), 0);
        CHECK(!strcmp(json_string_value(json_object_get(ch, "table")), "us_per_query"));
        CHECK(json_is_true(json_object_get(ch, "log_x")) && json_is_true(json_object_get(ch, "log_y")));
        CHECK(!strcmp(json_string_value(json_object_get(ch, "reference")), "dense"));
        CHECK_EQ_INT(json_array_size(json_object_get(ch, "y")), 9);
        CHECK_EQ_INT(tp_sum(a, "skipped"), 0);
        json_decref(a), json_decref(b);
    }
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
    expect_field("sparse_cost", "{\"ns\": [16384, 32768]}", "ns");
    expect_field("sparse_cost", "{\"ns\": [8]}", "ns");
    expect_field("sparse_cost", "{\"ns\": [64, 32]}", "ns");
    expect_field("sparse_cost", "{\"ns\": [64, 64]}", "ns");
    expect_field("sparse_cost", "{\"ns\": []}", "ns");
    expect_field("sparse_cost", "{\"ks\": [0]}", "ks");
    expect_field("sparse_cost", "{\"ks\": [8, 8]}", "ks");
    expect_field("sparse_cost", "{\"ks\": [1, 2, 3, 4, 5]}", "ks");
    expect_field("sparse_cost", "{\"d\": 257}", "d");
    expect_field("sparse_cost", "{\"predictors\": \"window,dense\"}", "predictors");
    expect_field("sparse_cost", "{\"predictors\": \"unrotated\"}", "predictors");
    expect_field("sparse_cost", "{\"predictors\": \"lsh,lsh\"}", "predictors");
    expect_field("sparse_cost", "{\"predictors\": \"lsh,\"}", "predictors");
    expect_field("sparse_cost", "{\"budget_ms\": 60000}", "budget_ms");
    expect_field("sparse_cost", "{\"min_ms\": 0}", "min_ms");
    expect_field("sparse_cost", "{\"rounds\": 9}", "rounds");
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
        {"sparse_cost",
         "{\"ns\": [16, 32], \"ks\": [4], \"predictors\": \"window,lsh\", \"min_ms\": 0.05, \"rounds\": 1}"},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
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

/* The budget is CPU time, not wall time: a busy machine must not fail it (tests never assume the
 * machine's speed beyond what the probe itself costs). */
TEST(defaults_cost_under_20ms_of_cpu) {
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
        for (int rep = 0; rep < 5; rep++) { /* best of five: caches are shared with other work */
            double t0 = tp_cpu_ms();
            json_t *res = tp_run(analytic[i], NULL, NULL);
            double dt = tp_cpu_ms() - t0;
            CHECK(res != NULL);
            json_decref(res);
            if (dt < best) best = dt;
        }
        printf("# %s defaults: %.2f ms of CPU\n", analytic[i], best);
        CHECK_MSG(best < 20.0, "%s took %.2f ms of CPU", analytic[i], best);
    }
#endif
}

/* Parameters whose product is over a kind's bound are refused as they are resolved: before the
 * request waits for a probe worker, not once it runs. */
TEST(work_over_a_bound_is_refused_before_the_probe_runs) {
    static const struct {
        const char *kind, *params, *field;
    } over[] = {
        {"scaling", "{\"dks\": [4096, 4096, 4096], \"trials\": 1024, \"n_keys\": 4096}", "trials"},
        {"cosine_scores", "{\"max_offset\": 65536, \"d\": 1024}", "max_offset"},
    };
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        json_t *params = json_loads(over[i].params, 0, NULL);
        probe_error err = {0};
        json_t *resolved = probe_params_resolve(probe_find(over[i].kind), params, &err);
        CHECK_MSG(resolved == NULL, "%s %s was resolved", over[i].kind, over[i].params);
        CHECK_MSG(!strcmp(err.field, over[i].field), "%s: field '%s'", over[i].kind, err.field);
        CHECK(err.status == ENGINE_ERR_INVALID);
        json_decref(resolved);
        json_decref(params);
    }
}

/* A probe whose client has gone stops at its next safe point: with the flag set it does nothing. */
TEST(a_cancelled_probe_stops) {
    static const struct {
        const char *kind, *params;
    } kinds[] = {
        {"sparse_cost", "{\"ns\": [64, 128], \"ks\": [8], \"min_ms\": 0.05, \"rounds\": 1}"},
        {"scaling", NULL},
    };
    atomic_int cancel = 1;
    probe_context ctx = {.cancel = &cancel};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        json_t *params = kinds[i].params ? json_loads(kinds[i].params, 0, NULL) : NULL, *res = NULL;
        probe_error err = {0};
        engine_status st = probe_run(kinds[i].kind, params, &ctx, &res, &err);
        CHECK_MSG(st == ENGINE_ERR_CANCELLED, "%s answered %d (%s)", kinds[i].kind, (int)st, err.message);
        CHECK(res == NULL);
        json_decref(res);
        /* and the same with the flag down runs to its result */
        atomic_store(&cancel, 0);
        st = probe_run(kinds[i].kind, params, &ctx, &res, &err);
        CHECK_MSG(st == ENGINE_OK, "%s: %s", kinds[i].kind, err.message);
        json_decref(res);
        atomic_store(&cancel, 1);
        json_decref(params);
    }
}

int main(void) {
    RUN(registry_lists_every_kind_with_a_title_and_schema);
    RUN(defaults_fill_every_param_and_shape_is_right);
    RUN(same_params_same_result_and_seed_matters);
    RUN(timing_kinds_give_the_same_shape_and_positive_times);
    RUN(bad_params_name_the_field);
    RUN(params_not_an_object_is_refused);
    RUN(null_error_pointer_is_fine);
    RUN(every_json_allocation_failure_is_reported);
    RUN(integral_reals_are_taken_as_ints);
    RUN(defaults_cost_under_20ms_of_cpu);
    RUN(work_over_a_bound_is_refused_before_the_probe_runs);
    RUN(a_cancelled_probe_stops);
    return test_summary();
}
