/* The timing core of bench_sparse and the sparse_cost probe (sparse_timing.h): its inputs are unit
 * vectors, its dense kernel computes exact causal attention (against a plain double-precision
 * softmax, and against sparse_attention with every key kept), the engine and sparse kernels leave
 * their outputs, times are finite and positive, bad arguments are refused, and the crossover rule
 * is the one documented; the sparse_cost probe's crossovers are the rule applied to its own table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "sparse_timing.h"
#include "test_probe_util.h"

#define D 16
#define NMAX 200 /* not a multiple of the dense kernel's 64-row blocks */

static const sparse_timing_cfg quick = {.min_s = 1e-5, .rounds = 1};

TEST(inputs_are_unit_vectors_and_seeded) {
    sparse_timing *a = NULL, *b = NULL, *c = NULL;
    CHECK(sparse_timing_new(&a, NMAX, D, 7, NULL) == ENGINE_OK);
    CHECK(sparse_timing_new(&b, NMAX, D, 7, NULL) == ENGINE_OK);
    CHECK(sparse_timing_new(&c, NMAX, D, 8, NULL) == ENGINE_OK);
    CHECK_EQ_INT(sparse_timing_max_n(a), NMAX);
    CHECK_EQ_INT(sparse_timing_d(a), D);
    const real *rows[3] = {sparse_timing_q(a), sparse_timing_k(a), sparse_timing_v(a)};
    for (int m = 0; m < 3; m++)
        for (int t = 0; t < NMAX; t++) {
            double s = 0;
            for (int i = 0; i < D; i++) s += (double)rows[m][t * D + i] * rows[m][t * D + i];
            CHECK_NEAR(s, 1.0, 1e-5);
        }
    CHECK(!memcmp(sparse_timing_q(a), sparse_timing_q(b), sizeof(real) * NMAX * D));
    CHECK(memcmp(sparse_timing_q(a), sparse_timing_q(c), sizeof(real) * NMAX * D) != 0);
    CHECK(memcmp(sparse_timing_q(a), sparse_timing_k(a), sizeof(real) * NMAX * D) != 0);
    sparse_timing_free(a), sparse_timing_free(b), sparse_timing_free(c);
    sparse_timing_free(NULL);
}

/* Query t's exact causal attention output in double precision. */
static void reference_row(const sparse_timing *tm, int t, double *y) {
    const real *q = sparse_timing_q(tm), *k = sparse_timing_k(tm), *v = sparse_timing_v(tm);
    double sc[NMAX], mx = -INFINITY, sum = 0;
    for (int s = 0; s <= t; s++) {
        double dot = 0;
        for (int i = 0; i < D; i++) dot += (double)q[t * D + i] * k[s * D + i];
        sc[s] = dot / sqrt((double)D);
        if (sc[s] > mx) mx = sc[s];
    }
    for (int i = 0; i < D; i++) y[i] = 0;
    for (int s = 0; s <= t; s++) sum += sc[s] = exp(sc[s] - mx);
    for (int s = 0; s <= t; s++)
        for (int i = 0; i < D; i++) y[i] += sc[s] / sum * v[s * D + i];
}

static double max_err_vs_reference(const sparse_timing *tm, int N) {
    double worst = 0, y[D];
    const real *out = sparse_timing_output(tm);
    for (int t = 0; t < N; t++) {
        reference_row(tm, t, y);
        for (int i = 0; i < D; i++) worst = fmax(worst, fabs(out[t * D + i] - y[i]));
    }
    return worst;
}

TEST(the_timed_kernels_compute_exact_attention) {
    sparse_timing *tm = NULL;
    CHECK(sparse_timing_new(&tm, NMAX, D, 3, NULL) == ENGINE_OK);
    for (int N = 1; N <= NMAX; N += 67) {
        double us = -1;
        CHECK(sparse_timing_dense(tm, N, &quick, &us, NULL) == ENGINE_OK);
        CHECK(isfinite(us) && us > 0);
        CHECK_MSG(max_err_vs_reference(tm, N) < 2e-5, "dense N %d: error %g", N, max_err_vs_reference(tm, N));
        us = -1;
        CHECK(sparse_timing_engine(tm, N, &quick, &us, NULL) == ENGINE_OK);
        CHECK(isfinite(us) && us > 0);
        CHECK_MSG(max_err_vs_reference(tm, N) < 2e-5, "engine N %d: error %g", N, max_err_vs_reference(tm, N));
        /* Every key kept: sparse attention is dense attention. */
        sparse_config c;
        sparse_config_defaults(&c, SPARSE_TOPK, NMAX);
        double tot = -1, pred = -1;
        CHECK(sparse_timing_sparse(tm, &c, N, &quick, &tot, &pred, NULL) == ENGINE_OK);
        CHECK(isfinite(tot) && tot > 0 && isfinite(pred) && pred > 0);
        CHECK_MSG(max_err_vs_reference(tm, N) < 2e-5, "top-k N %d: error %g", N, max_err_vs_reference(tm, N));
    }
    /* Each predictor at a small k: times finite and positive, the predictor's share no more than
     * the whole call's by a wide margin (both are measured, so only loosely). */
    static const sparse_predictor ps[] = {SPARSE_WINDOW, SPARSE_LSH, SPARSE_HAMMING, SPARSE_TOPK};
    for (int i = 0; i < 4; i++) {
        sparse_config c;
        sparse_config_defaults(&c, ps[i], 8);
        double tot = -1, pred = -1;
        CHECK(sparse_timing_sparse(tm, &c, NMAX, &quick, &tot, &pred, NULL) == ENGINE_OK);
        CHECK_MSG(isfinite(tot) && tot > 0 && isfinite(pred) && pred > 0, "%s: %g %g", sparse_predictor_name(ps[i]),
                  tot, pred);
        double only = -1;
        CHECK(sparse_timing_sparse(tm, &c, NMAX, &quick, &only, NULL, NULL) == ENGINE_OK);
        CHECK(isfinite(only) && only > 0);
    }
    /* The window at k = 1 attends to the query's own key: the output row is v_t. */
    sparse_config w;
    sparse_config_defaults(&w, SPARSE_WINDOW, 1);
    double tot;
    CHECK(sparse_timing_sparse(tm, &w, NMAX, &quick, &tot, NULL, NULL) == ENGINE_OK);
    const real *out = sparse_timing_output(tm), *v = sparse_timing_v(tm);
    for (int t = 0; t < NMAX; t++)
        for (int i = 0; i < D; i++) CHECK_NEAR(out[t * D + i], v[t * D + i], 1e-6);
    sparse_timing_free(tm);
}

TEST(bad_arguments_are_refused) {
    sparse_timing *tm = (sparse_timing *)1;
    engine_error err;
    CHECK(sparse_timing_new(&tm, 0, D, 1, &err) == ENGINE_ERR_INVALID && tm == NULL);
    CHECK(sparse_timing_new(&tm, SPARSE_TIMING_MAX_N + 1, D, 1, &err) == ENGINE_ERR_INVALID);
    CHECK(sparse_timing_new(&tm, 16, 0, 1, &err) == ENGINE_ERR_INVALID);
    CHECK(sparse_timing_new(&tm, 16, 1025, 1, &err) == ENGINE_ERR_INVALID);
    CHECK(sparse_timing_new(&tm, 16, D, 1, &err) == ENGINE_OK);
    double us = 42;
    CHECK(sparse_timing_dense(tm, 17, &quick, &us, &err) == ENGINE_ERR_INVALID);
    CHECK(strstr(err.message, "17") != NULL);
    CHECK(sparse_timing_dense(tm, 0, &quick, &us, &err) == ENGINE_ERR_INVALID);
    sparse_timing_cfg bad = {.min_s = 0, .rounds = 1};
    CHECK(sparse_timing_dense(tm, 8, &bad, &us, &err) == ENGINE_ERR_INVALID);
    bad = (sparse_timing_cfg){.min_s = 1e-5, .rounds = SPARSE_TIMING_MAX_ROUNDS + 1};
    CHECK(sparse_timing_engine(tm, 8, &bad, &us, &err) == ENGINE_ERR_INVALID);
    CHECK(sparse_timing_dense(tm, 8, NULL, &us, &err) == ENGINE_ERR_INVALID);
    CHECK(us == 42); /* left as it was */
    sparse_config c;
    sparse_config_defaults(&c, SPARSE_UNROTATED, 4);
    CHECK(sparse_timing_sparse(tm, &c, 8, &quick, &us, NULL, &err) == ENGINE_ERR_INVALID);
    sparse_config_defaults(&c, SPARSE_LSH, 0); /* k 0: the config's own check */
    CHECK(sparse_timing_sparse(tm, &c, 8, &quick, &us, NULL, &err) == ENGINE_ERR_INVALID);
    CHECK(us == 42);
    sparse_timing_free(tm);
}

TEST(crossover_is_where_sparse_stays_below_dense) {
    const double dense[] = {1, 2, 4, 8, 16, 32};
    /* below from index 3 on */
    CHECK_EQ_INT(sparse_timing_crossover(dense, (double[]){2, 3, 5, 7, 9, 11}, 6), 3);
    /* below at 1, above at 2, below from 3 on: the crossover is the last entry into "below" */
    CHECK_EQ_INT(sparse_timing_crossover(dense, (double[]){2, 1, 5, 7, 9, 11}, 6), 3);
    /* above at the largest N: none */
    CHECK_EQ_INT(sparse_timing_crossover(dense, (double[]){0.5, 1, 2, 4, 8, 40}, 6), -1);
    /* equal is not below */
    CHECK_EQ_INT(sparse_timing_crossover(dense, (double[]){2, 3, 5, 7, 9, 32}, 6), -1);
    /* below everywhere: the first */
    CHECK_EQ_INT(sparse_timing_crossover(dense, (double[]){0.5, 1, 2, 4, 8, 16}, 6), 0);
    /* not measured (negative, NaN) is skipped, and so is a dense time that is not measured */
    CHECK_EQ_INT(sparse_timing_crossover(dense, (double[]){2, 3, 5, 7, -1, NAN}, 6), 3);
    CHECK_EQ_INT(sparse_timing_crossover((double[]){1, 2, 4, 8, NAN, 32}, (double[]){2, 3, 5, 7, 9, 11}, 6), 3);
    CHECK_EQ_INT(sparse_timing_crossover(dense, (double[]){-1, -1, -1, -1, -1, -1}, 6), -1);
    CHECK_EQ_INT(sparse_timing_crossover(dense, dense, 0), -1);
}

/* The probe's own table gives its crossovers: recomputed here from us_per_query by the rule. The
 * budget is the probe's largest (20 s): every cell must be measured, and this takes ~1 s in the
 * release build but over 5 s under the sanitizers on a loaded machine. */
TEST(probe_crossovers_follow_its_own_table) {
    probe_error err;
    json_t *res = tp_run("sparse_cost",
                         "{\"ns\": [16, 64, 256, 1024], \"ks\": [8, 32], \"min_ms\": 0.2, \"rounds\": 2, "
                         "\"budget_ms\": 20000}",
                         &err);
    CHECK_MSG(res != NULL, "sparse_cost failed: %s", err.message);
    if (!res) return;
    json_t *w = tp_table(res, "us_per_query"), *cost = tp_table(res, "cost"), *cross = tp_table(res, "crossover");
    CHECK(w && cost && cross);
    CHECK_EQ_INT(tp_nrows(w), 4);
    CHECK_EQ_INT(tp_nrows(cost), 4 * 4 * 2);
    CHECK_EQ_INT(tp_nrows(cross), 4 * 2);
    static const char *const preds[] = {"window", "lsh", "hamming", "topk"};
    static const int ks[] = {8, 32};
    const double ns[] = {16, 64, 256, 1024};
    for (int p = 0; p < 4; p++)
        for (int kk = 0; kk < 2; kk++) {
            char col[48], key[64];
            snprintf(col, sizeof col, "%s_k%d", preds[p], ks[kk]);
            snprintf(key, sizeof key, "crossover_N_%s_k%d", preds[p], ks[kk]);
            double dense[4], sp[4];
            for (int i = 0; i < 4; i++) {
                CHECK_EQ_INT((int)tp_cell(w, i, "N"), (int)ns[i]);
                dense[i] = tp_cell(w, i, "dense");
                sp[i] = tp_cell(w, i, col);
                CHECK_MSG(isfinite(sp[i]) && sp[i] > 0 && isfinite(dense[i]) && dense[i] > 0, "%s at N %g: %g vs %g",
                          col, ns[i], sp[i], dense[i]);
                /* the long table holds the same figure, and the ratio */
                int row = i * 8 + p * 2 + kk;
                CHECK_EQ_INT((int)tp_cell(cost, row, "N"), (int)ns[i]);
                CHECK_EQ_INT((int)tp_cell(cost, row, "k"), ks[kk]);
                CHECK(tp_cell(cost, row, "us_per_query") == sp[i]);
                CHECK(tp_cell(cost, row, "dense_us_per_query") == dense[i]);
                CHECK_NEAR(tp_cell(cost, row, "ratio_to_dense"), sp[i] / dense[i], 1e-12 * sp[i] / dense[i]);
                double pr = tp_cell(cost, row, "predictor_us_per_query");
                CHECK(isfinite(pr) && pr > 0);
            }
            int from = sparse_timing_crossover(dense, sp, 4);
            /* the rule by hand: below at the largest N, then back while below */
            int hand = -1;
            for (int i = 3; i >= 0 && sp[i] < dense[i]; i--) hand = i;
            CHECK_EQ_INT(from, hand);
            json_t *v = json_object_get(json_object_get(res, "summary"), key);
            CHECK_MSG(v != NULL, "summary lacks %s", key);
            if (from < 0)
                CHECK_MSG(json_is_null(v), "%s: wanted null", key);
            else
                CHECK_MSG(json_number_value(v) == ns[from], "%s: %g, wanted %g", key, json_number_value(v), ns[from]);
            double c = tp_cell(cross, p * 2 + kk, "crossover_N");
            CHECK(from < 0 ? isnan(c) : c == ns[from]);
            CHECK_EQ_INT((int)tp_cell(cross, p * 2 + kk, "largest_N"), 1024);
            CHECK_NEAR(tp_cell(cross, p * 2 + kk, "speedup_at_largest_N"), dense[3] / sp[3], 1e-12 * dense[3] / sp[3]);
        }
    CHECK_EQ_INT((int)tp_sum(res, "skipped"), 0);
    json_decref(res);
}

TEST(probe_budget_skips_what_does_not_fit) {
    /* 50 ms cannot hold exact top-k at N = 4096 (well over 100 ms a call in any build): skipped,
     * null in the tables, counted, and the request ends near its budget. */
    double t0 = tp_cpu_ms(); /* the process's CPU time: the load of other work does not count */
    probe_error err;
    json_t *res = tp_run("sparse_cost",
                         "{\"ns\": [64, 4096], \"ks\": [16], \"predictors\": \"window,topk\", \"min_ms\": 0.1, "
                         "\"rounds\": 1, \"budget_ms\": 50}",
                         &err);
    double dt = tp_cpu_ms() - t0;
    CHECK_MSG(res != NULL, "%s", err.message);
    if (!res) return;
    json_t *w = tp_table(res, "us_per_query");
    CHECK(isfinite(tp_cell(w, 0, "window_k16")));
    CHECK(isnan(tp_cell(w, 1, "topk_k16")));
    CHECK(tp_sum(res, "skipped") >= 1);
    CHECK_MSG(dt < 2000, "took %.0f ms of CPU on a 50 ms budget", dt);
    /* The budget is the probe thread's CPU time, the clock of its estimates, whatever the load:
     * what it spent is reported, and stays near the budget (the calibration call and one small N). */
    double cpu = tp_sum(res, "cpu_ms");
    CHECK_MSG(isfinite(cpu) && cpu > 0 && cpu < 500, "cpu_ms %g on a 50 ms budget", cpu);
    json_decref(res);
}

int main(void) {
    RUN(inputs_are_unit_vectors_and_seeded);
    RUN(the_timed_kernels_compute_exact_attention);
    RUN(bad_arguments_are_refused);
    RUN(crossover_is_where_sparse_stays_below_dense);
    RUN(probe_crossovers_follow_its_own_table);
    RUN(probe_budget_skips_what_does_not_fit);
    return test_summary();
}
