/* Rotary probes checked against independent computations: complex multiplication (C99
 * <complex.h>) instead of the probes' 2x2 rotations, closed forms instead of their loops. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../support/test.h"
#include "test_probe_util.h"
#include "probes/rope_math.h"

/* Re[ sum_p q_p conj(k_p) e^{i(m-n)theta_p} ] with q_p = q[2p] + i q[2p+1]: the rotary score of
 * q at m and k at n written with complex numbers. theta_p = exp(-2p ln(base)/d). */
static double complex_score(const double *q, const double *k, int d, double base, double m, double n) {
    double complex acc = 0;
    for (int p = 0; p < d / 2; p++) {
        double th = exp(-2.0 * p * log(base) / d);
        double complex qp = q[2 * p] + I * q[2 * p + 1], kp = k[2 * p] + I * k[2 * p + 1];
        acc += qp * conj(kp) * cexp(I * (m - n) * th);
    }
    return creal(acc);
}

/* The same score when pairs are (p, p + d/2). */
static double complex_score_half(const double *q, const double *k, int d, double base, double m, double n) {
    double complex acc = 0;
    for (int p = 0; p < d / 2; p++) {
        double th = exp(-2.0 * p * log(base) / d);
        double complex qp = q[p] + I * q[p + d / 2], kp = k[p] + I * k[p + d / 2];
        acc += qp * conj(kp) * cexp(I * (m - n) * th);
    }
    return creal(acc);
}

static int read_vectors(const json_t *res, double *q, double *k, int cap) {
    const json_t *t = tp_table(res, "vectors");
    int n = t ? tp_nrows(t) : 0;
    for (int i = 0; i < n && i < cap; i++) q[i] = tp_cell(t, i, "q"), k[i] = tp_cell(t, i, "k");
    return n;
}

TEST(rope_invariance_matches_complex_form) {
    json_t *res = tp_run("rope_invariance", NULL, NULL);
    CHECK(res != NULL);
    double q[64], k[64];
    CHECK_EQ_INT(read_vectors(res, q, k, 64), 64);
    const json_t *g = tp_table(res, "gap_scores");
    CHECK_EQ_INT(tp_nrows(g), 4);
    static const double starts[] = {3, 10, 100, 4000};
    double ref = complex_score(q, k, 64, 10000, 0, 2); /* the gap alone */
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(tp_cell(g, i, "start"), starts[i], 0);
        double want = complex_score(q, k, 64, 10000, starts[i], starts[i] + 2);
        CHECK_NEAR(tp_cell(g, i, "rotary"), want, 1e-11);
        CHECK_NEAR(tp_cell(g, i, "rotary"), ref, 1e-11);
        /* additive: the four-term expansion with the sinusoids written out here */
        double pm_q = 0, pn_k = 0, pp = 0, qk = 0;
        for (int p = 0; p < 32; p++) {
            double w = pow(10000, -2.0 * p / 64), m = starts[i], n = m + 2;
            qk += q[2 * p] * k[2 * p] + q[2 * p + 1] * k[2 * p + 1];
            pn_k += q[2 * p] * sin(n * w) + q[2 * p + 1] * cos(n * w);
            pm_q += sin(m * w) * k[2 * p] + cos(m * w) * k[2 * p + 1];
            pp += cos((m - n) * w); /* sin sin + cos cos */
        }
        CHECK_NEAR(tp_cell(g, i, "additive"), qk + pn_k + pm_q + pp, 1e-9);
    }
    CHECK(tp_sum(res, "rotary_spread") <= 1e-12);
    CHECK(tp_sum(res, "additive_spread") > 1.0); /* the additive score wobbles by whole units */
    const json_t *grid = tp_table(res, "grid");
    CHECK_EQ_INT(tp_nrows(grid), 42);
    CHECK_NEAR(tp_sum(res, "combinations"), 42, 0);
    double worst = 0, worst_shift = 0;
    for (int r = 0; r < 42; r++) {
        double off = tp_cell(grid, r, "offset"), sh = tp_cell(grid, r, "shift");
        double want = complex_score(q, k, 64, 10000, sh, sh + off);
        CHECK_NEAR(tp_cell(grid, r, "rotary"), want, 1e-11);
        worst = fmax(worst, tp_cell(grid, r, "rotary_deviation"));
        worst_shift = fmax(worst_shift, sh);
    }
    CHECK_NEAR(worst_shift, 4000, 0);
    CHECK_NEAR(tp_sum(res, "worst_rotary_deviation"), worst, 0);
    /* ~1e-12 absolute in double (angles near 4000 rad carry 4000 ulp); far smaller relative */
    CHECK(tp_sum(res, "worst_rotary_deviation") < 5e-12);
    CHECK(tp_sum(res, "worst_rotary_relative_deviation") < 1e-12);
    CHECK(tp_sum(res, "worst_additive_deviation") > 1.0);
    json_decref(res);
}

TEST(rope_invariance_custom_params) {
    json_t *res = tp_run("rope_invariance",
                         "{\"d\": 8, \"base\": 500, \"gap\": 7, \"starts\": [0, 123456], "
                         "\"offsets\": [3], \"shifts\": [0, 99], \"seed\": 5}",
                         NULL);
    CHECK(res != NULL);
    double q[8], k[8];
    CHECK_EQ_INT(read_vectors(res, q, k, 8), 8);
    const json_t *g = tp_table(res, "gap_scores");
    CHECK_EQ_INT(tp_nrows(g), 2);
    CHECK_NEAR(tp_cell(g, 1, "rotary"), complex_score(q, k, 8, 500, 123456, 123463), 1e-9);
    CHECK_EQ_INT(tp_nrows(tp_table(res, "grid")), 2);
    json_decref(res);
}

TEST(pair_turns_closed_form) {
    json_t *res = tp_run("pair_turns", NULL, NULL);
    CHECK(res != NULL);
    const json_t *in = tp_table(res, "inside_first_turn");
    CHECK(in != NULL);
    CHECK_NEAR(tp_cell(in, 0, "gap"), 1, 0);
    CHECK_NEAR(tp_cell(in, 0, "pairs_inside_first_turn"), 32, 0); /* seed 002: all 32 at gap 1 */
    double prev = 33;
    for (int r = 0; r < tp_nrows(in); r++) {
        double gap = tp_cell(in, r, "gap");
        /* pair p is inside iff gap * base^(-2p/d) < 2 pi, i.e. p > (d/2) log_base(gap / 2pi) */
        double lim = 32.0 * log(gap / (2 * M_PI)) / log(10000.0);
        int want = 0;
        for (int p = 0; p < 32; p++) want += p > lim;
        CHECK_MSG(tp_cell(in, r, "pairs_inside_first_turn") == want, "gap %g: %g vs %d", gap,
                  tp_cell(in, r, "pairs_inside_first_turn"), want);
        CHECK(want <= prev);
        prev = want;
    }
    CHECK(prev < 32); /* it does shrink */
    const json_t *t = tp_table(res, "turns");
    CHECK_EQ_INT(tp_nrows(t), 32);
    for (int p = 0; p < 32; p++) {
        double th = 1.0 / pow(10000.0, p / 32.0);
        CHECK_NEAR(tp_cell(t, p, "theta"), th, 1e-15);
        CHECK_NEAR(tp_cell(t, p, "turns_gap_4096") / (4096 * th / (2 * M_PI)), 1, 1e-12);
    }
    json_decref(res);
}

TEST(context_extension_seed_figures) {
    json_t *res = tp_run("context_extension", NULL, NULL);
    CHECK(res != NULL);
    /* seed 003: d=16, 512 -> 4096: 0.162 rad trained, 1.295 untouched, both repairs 0.162 */
    CHECK_NEAR(tp_sum(res, "slowest_trained"), 0.162, 5e-4);
    CHECK_NEAR(tp_sum(res, "slowest_untouched"), 1.295, 5e-4);
    CHECK_NEAR(tp_sum(res, "slowest_pi"), 0.162, 5e-4);
    CHECK_NEAR(tp_sum(res, "slowest_ntk"), 0.162, 5e-4);
    /* closed forms: theta_slow = base^-(d-2)/d; NTK base b s^(d/(d-2)) gives exactly theta_slow / s */
    double slow = 512 * exp(-(14.0 / 16.0) * log(10000.0));
    CHECK_NEAR(tp_sum(res, "slowest_trained"), slow, 1e-12);
    CHECK_NEAR(tp_sum(res, "slowest_untouched"), 8 * slow, 1e-12);
    CHECK_NEAR(tp_sum(res, "slowest_ntk"), slow, 1e-12);
    CHECK_NEAR(tp_sum(res, "slowest_turn_fraction_in_training"), 0.026, 5e-4); /* "2.6% of a turn" */
    CHECK_NEAR(tp_sum(res, "ntk_base"), 10000 * pow(8.0, 16.0 / 14.0), 1e-6);
    /* the fast end: NTK cannot move theta_0 = 1; PI slows it by s */
    CHECK_NEAR(tp_sum(res, "fastest_step_ntk"), 1, 1e-15);
    CHECK_NEAR(tp_sum(res, "fastest_step_pi"), 1.0 / 8, 1e-15);
    CHECK_NEAR(tp_sum(res, "fastest_step_yarn"), 1, 1e-15); /* 81 turns in training > beta 32 */
    CHECK_NEAR(tp_sum(res, "slowest_yarn"), slow, 1e-12);   /* 0.026 turns < alpha 1 */
    CHECK_NEAR(tp_sum(res, "yarn_attention_factor"), 0.1 * log(8.0) + 1, 1e-12);
    /* per pair: the YaRN ramp recomputed from turns = L / wavelength */
    const json_t *t = tp_table(res, "pairs");
    CHECK_EQ_INT(tp_nrows(t), 8);
    for (int p = 0; p < 8; p++) {
        double th = pow(10000.0, -p / 8.0), r = 512 * th / (2 * M_PI);
        double g = r < 1 ? 0 : r > 32 ? 1 : (r - 1) / 31;
        CHECK_NEAR(tp_cell(t, p, "yarn_ramp"), g, 1e-12);
        CHECK_NEAR(tp_cell(t, p, "angle_yarn"), 4096 * ((1 - g) * th / 8 + g * th), 1e-9);
        CHECK_NEAR(tp_cell(t, p, "angle_pi"), 512 * th, 1e-9);
    }
    const json_t *s = tp_table(res, "strategies");
    CHECK_EQ_INT(tp_nrows(s), 5);
    json_decref(res);
}

TEST(context_extension_other_sizes) {
    json_t *res = tp_run("context_extension", "{\"d\": 64, \"trained_length\": 2048, \"target_length\": 32768}", NULL);
    CHECK(res != NULL);
    double slow = 2048 * pow(10000.0, -62.0 / 64.0);
    CHECK_NEAR(tp_sum(res, "slowest_ntk"), slow, 1e-10);
    CHECK_NEAR(tp_sum(res, "slowest_untouched"), 16 * slow, 1e-10);
    json_decref(res);
}

TEST(rotation_math_against_complex) {
    /* the shared rotation itself, against z * e^{i m theta} */
    double x[16], y[16], th[8];
    for (int i = 0; i < 16; i++) x[i] = sin(1.3 * i + 0.2);
    probe_rope_thetas(16, 10000, th);
    for (double m = 0; m < 5000; m += 777) {
        probe_rope_rotate(x, y, 16, th, m, PROBE_ROPE_INTERLEAVED);
        for (int p = 0; p < 8; p++) {
            double complex z = (x[2 * p] + I * x[2 * p + 1]) * cexp(I * m * pow(10000, -p / 8.0));
            CHECK_NEAR(y[2 * p], creal(z), 1e-12);
            CHECK_NEAR(y[2 * p + 1], cimag(z), 1e-12);
        }
        probe_rope_rotate(x, y, 16, th, m, PROBE_ROPE_HALF_SPLIT);
        for (int p = 0; p < 8; p++) {
            double complex z = (x[p] + I * x[p + 8]) * cexp(I * m * pow(10000, -p / 8.0));
            CHECK_NEAR(y[p], creal(z), 1e-12);
            CHECK_NEAR(y[p + 8], cimag(z), 1e-12);
        }
    }
}

TEST(rotation_check_figures) {
    json_t *res = tp_run("rotation_check", NULL, NULL);
    CHECK(res != NULL);
    CHECK(tp_sum(res, "max_orthogonality_error") <= 1e-15);
    CHECK(tp_sum(res, "max_det_error") <= 1e-15);
    CHECK(tp_sum(res, "max_complex_vs_2x2") <= 1e-12);
    CHECK(tp_sum(res, "max_norm_relative_error") <= 1e-14);
    CHECK(tp_sum(res, "interleaved_invariance_error") < 1e-11);
    CHECK(tp_sum(res, "half_split_invariance_error") < 1e-11);
    double q[64], k[64];
    CHECK_EQ_INT(read_vectors(res, q, k, 64), 64);
    const json_t *l = tp_table(res, "layouts");
    double worst = 0;
    for (int r = 0; r < tp_nrows(l); r++) {
        double off = tp_cell(l, r, "offset");
        double a = complex_score(q, k, 64, 10000, 0, off), b = complex_score_half(q, k, 64, 10000, 0, off);
        CHECK_NEAR(tp_cell(l, r, "interleaved"), a, 1e-10);
        CHECK_NEAR(tp_cell(l, r, "half_split"), b, 1e-10);
        worst = fmax(worst, fabs(a - b));
    }
    CHECK_NEAR(tp_cell(l, 0, "difference"), 0, 1e-12); /* offset 0: both are q.k */
    CHECK_NEAR(tp_sum(res, "layout_max_difference"), worst, 1e-10);
    CHECK(worst > 1.0); /* silently, but clearly, different */
    /* re-rotated cache: nothing at length 1 (position 0 twice is 0), growing after */
    const json_t *c = tp_table(res, "cache_rerotation");
    int n = tp_nrows(c);
    CHECK(n >= 3);
    CHECK_NEAR(tp_cell(c, 0, "gen_length"), 1, 0);
    CHECK_NEAR(tp_cell(c, 0, "max_abs_score_error"), 0, 1e-12);
    CHECK(tp_cell(c, n - 1, "attention_tv_distance") > tp_cell(c, 1, "attention_tv_distance"));
    CHECK(tp_cell(c, n - 1, "mean_abs_score_error") > tp_cell(c, 1, "mean_abs_score_error"));
    /* float32: the angle error grows with position (about position * theta * 2^-24) */
    const json_t *pr = tp_table(res, "precision");
    int np = tp_nrows(pr);
    double last_pos = tp_cell(pr, np - 1, "position");
    double e_last = tp_cell(pr, np - 1, "f32_max_angle_error"), e_first = tp_cell(pr, 0, "f32_max_angle_error");
    CHECK(e_last > 1000 * e_first);
    CHECK(e_last < last_pos * 2 * 0x1.0p-24 * 2);
    CHECK(e_last > last_pos * 0x1.0p-24 * 0.01);
    json_decref(res);
}

TEST(cosine_scores_given_vectors) {
    char params[512];
    snprintf(params, sizeof params,
             "{\"d\": 4, \"q\": [1, 2, -0.5, 3], \"k\": [0.3, -1, 2, 1], \"tau\": 0.25, \"max_offset\": 50, "
             "\"taus\": [0.01, 0.1, 1, 100]}");
    json_t *res = tp_run("cosine_scores", params, NULL);
    CHECK(res != NULL);
    double q[4] = {1, 2, -0.5, 3}, k[4] = {0.3, -1, 2, 1};
    double nq = sqrt(1 + 4 + 0.25 + 9), nk = sqrt(0.09 + 1 + 4 + 1);
    const json_t *s = tp_table(res, "scores");
    CHECK_EQ_INT(tp_nrows(s), 51);
    double sc[51];
    for (int o = 0; o <= 50; o++) {
        double raw = complex_score(q, k, 4, 10000, 0, o);
        sc[o] = raw / (nq * nk);
        CHECK_NEAR(tp_cell(s, o, "rope"), raw / 2, 1e-12);
        CHECK_NEAR(tp_cell(s, o, "cosine_rope"), raw / (nq * nk) / 0.25, 1e-12);
    }
    /* sharpness: softmax entropies computed here from the complex scores */
    const json_t *sh = tp_table(res, "sharpness");
    static const double taus[] = {0.01, 0.1, 1, 100};
    double prev = -1;
    for (int t = 0; t < 4; t++) {
        double mx = -1e300, z = 0, h = 0, wmax = 0;
        for (int o = 0; o <= 50; o++) mx = fmax(mx, sc[o] / taus[t]);
        for (int o = 0; o <= 50; o++) z += exp(sc[o] / taus[t] - mx);
        for (int o = 0; o <= 50; o++) {
            double w = exp(sc[o] / taus[t] - mx) / z;
            if (w > 0) h -= w * log(w);
            wmax = fmax(wmax, w);
        }
        CHECK_NEAR(tp_cell(sh, t, "entropy"), h, 1e-9);
        CHECK_NEAR(tp_cell(sh, t, "max_weight"), wmax, 1e-12);
        CHECK(h > prev); /* small tau sharp, large tau diffuse */
        prev = h;
    }
    CHECK_NEAR(tp_cell(sh, 3, "entropy_fraction"), 1, 1e-3);
    CHECK(tp_cell(sh, 0, "entropy_fraction") < 0.5);
    json_decref(res);
}

int main(void) {
    RUN(rope_invariance_matches_complex_form);
    RUN(rope_invariance_custom_params);
    RUN(pair_turns_closed_form);
    RUN(context_extension_seed_figures);
    RUN(context_extension_other_sizes);
    RUN(rotation_math_against_complex);
    RUN(rotation_check_figures);
    RUN(cosine_scores_given_vectors);
    return test_summary();
}
