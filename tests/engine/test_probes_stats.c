/* The sampling probes (dephasing, scaling) checked against closed forms and against a second
 * sampler written here (a 64-bit LCG with Box-Muller, unrelated to the probes' xoshiro + polar),
 * so that a bug in the probes' generator cannot reproduce itself in the check. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../support/test.h"
#include "test_probe_util.h"
#include "probes/probe_rng.h"
#include "rng.h"

/* ---- the second sampler ---- */
typedef struct {
    uint64_t x;
    int have;
    double spare;
} lcg64;

static double lcg64_uniform(lcg64 *g) { /* (0, 1) from the top 53 bits of Knuth's MMIX LCG */
    g->x = g->x * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((double)(g->x >> 11) + 0.5) * 0x1.0p-53;
}

static double lcg64_normal(lcg64 *g) {
    if (g->have) {
        g->have = 0;
        return g->spare;
    }
    double r = sqrt(-2 * log(lcg64_uniform(g))), a = 2 * M_PI * lcg64_uniform(g);
    g->spare = r * sin(a);
    g->have = 1;
    return r * cos(a);
}

TEST(park_miller_known_value) {
    /* Park & Miller (1988): from seed 1, the 10000th value is 1043618065. */
    probe_lcg g;
    probe_lcg_seed(&g, 1);
    uint32_t x = 0;
    for (int i = 0; i < 10000; i++) x = probe_lcg_next(&g);
    CHECK_EQ_INT(x, 1043618065);
    /* why per-vector seeding fails: neighbouring seeds start 16807 apart out of 2^31 - 1 */
    probe_lcg a, b;
    probe_lcg_seed(&a, 1000);
    probe_lcg_seed(&b, 1001);
    CHECK_EQ_INT((long long)probe_lcg_next(&b) - (long long)probe_lcg_next(&a), 16807);
}

TEST(probe_normals_have_unit_moments) {
    rng_state r;
    rng_seed(&r, 7);
    double s = 0, s2 = 0, s4 = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = rng_normal_polar(&r);
        s += x, s2 += x * x, s4 += x * x * x * x;
    }
    CHECK_NEAR(s / n, 0, 5 / sqrt(n));
    CHECK_NEAR(s2 / n, 1, 5 * sqrt(2.0 / n));
    CHECK_NEAR(s4 / n, 3, 5 * sqrt(96.0 / n));
}

TEST(dephasing_self_column_is_closed_form) {
    json_t *res = tp_run("dephasing", NULL, NULL);
    CHECK(res != NULL);
    const json_t *qv = tp_table(res, "query_vector"), *t = tp_table(res, "dephasing");
    CHECK_EQ_INT(tp_nrows(qv), 16);
    CHECK_EQ_INT(tp_nrows(t), 4);
    double q[16];
    for (int i = 0; i < 16; i++) q[i] = tp_cell(qv, i, "value");
    static const double offs[] = {0, 16, 256, 1024};
    for (int r = 0; r < 4; r++) {
        CHECK_NEAR(tp_cell(t, r, "offset"), offs[r], 0);
        /* q against itself at offset o: sum_p |q_p|^2 cos(o theta_p) */
        double want = 0;
        for (int p = 0; p < 8; p++)
            want += (q[2 * p] * q[2 * p] + q[2 * p + 1] * q[2 * p + 1]) * cos(offs[r] * pow(10000, -p / 8.0));
        CHECK_NEAR(tp_cell(t, r, "self"), want, 1e-10);
    }
    json_decref(res);
}

/* E|q.Rk| for independent q, k ~ N(0, I_d): given q the score is N(0, |q|^2), so
 * E|score| = sqrt(2/pi) E|q| = sqrt(2/pi) sqrt(2) Gamma((d+1)/2) / Gamma(d/2). */
static double expected_abs(int d) { return sqrt(2 / M_PI) * sqrt(2.0) * exp(lgamma((d + 1) / 2.0) - lgamma(d / 2.0)); }

TEST(dephasing_means_against_closed_form_and_second_sampler) {
    int n = 8000, d = 16;
    json_t *res = tp_run("dephasing", "{\"n_pairs\": 8000, \"offsets\": [0, 16, 256, 1024]}", NULL);
    CHECK(res != NULL);
    const json_t *t = tp_table(res, "dephasing");
    /* sd of the raw score is sqrt(d); of |score|, sqrt(d - E|score|^2) */
    double ea = expected_abs(d), se_raw = sqrt((double)d / n), se_abs = sqrt((d - ea * ea) / n);
    CHECK_NEAR(ea, 3.14, 0.01); /* seed 003's "typical magnitude of 3.2" at d = 16 */
    lcg64 g = {12345, 0, 0};
    static const double offs[] = {0, 16, 256, 1024};
    for (int r = 0; r < 4; r++) {
        CHECK_NEAR(tp_cell(t, r, "mean_raw"), 0, 5 * se_raw);
        CHECK_NEAR(tp_cell(t, r, "mean_abs"), ea, 5 * se_abs);
        /* the same study with the second sampler, scores by explicit rotation of k */
        double sum = 0, sabs = 0, qq[16], kk[16];
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < d; i++) qq[i] = lcg64_normal(&g);
            for (int i = 0; i < d; i++) kk[i] = lcg64_normal(&g);
            double s = 0;
            for (int p = 0; p < 8; p++) {
                double a = offs[r] * pow(10000, -p / 8.0);
                double k0 = kk[2 * p] * cos(a) - kk[2 * p + 1] * sin(a),
                       k1 = kk[2 * p] * sin(a) + kk[2 * p + 1] * cos(a);
                s += qq[2 * p] * k0 + qq[2 * p + 1] * k1;
            }
            sum += s, sabs += fabs(s);
        }
        CHECK_NEAR(tp_cell(t, r, "mean_raw"), sum / n, 5 * sqrt(2.0) * se_raw);
        CHECK_NEAR(tp_cell(t, r, "mean_abs"), sabs / n, 5 * sqrt(2.0) * se_abs);
    }
    CHECK_NEAR(tp_sum(res, "standard_error"), se_raw, 0.2 * se_raw);
    json_decref(res);
}

TEST(dephasing_lcg_option_adds_columns_beside_the_correct_ones) {
    json_t *a = tp_run("dephasing", NULL, NULL), *b = tp_run("dephasing", "{\"seeding\": \"per_vector_lcg\"}", NULL);
    CHECK(a && b);
    const json_t *ta = tp_table(a, "dephasing"), *tb = tp_table(b, "dephasing");
    CHECK(tp_col(ta, "mean_raw_lcg") < 0);
    CHECK(tp_col(tb, "mean_raw_lcg") >= 0);
    for (int r = 0; r < 4; r++) {
        CHECK_NEAR(tp_cell(tb, r, "mean_raw"), tp_cell(ta, r, "mean_raw"), 0);
        CHECK(tp_cell(tb, r, "mean_raw_lcg") != tp_cell(tb, r, "mean_raw"));
        /* the magnitudes are still right: the fault is in the correlation, not the marginals */
        CHECK_NEAR(tp_cell(tb, r, "mean_abs_lcg"), expected_abs(16), 0.5);
    }
    CHECK(json_is_number(json_object_get(json_object_get(b, "summary"), "lcg_drift_in_standard_errors")));
    json_decref(a), json_decref(b);
}

TEST(scaling_variance_is_dk) {
    json_t *res = tp_run("scaling", "{\"dks\": [16, 64, 256], \"n_keys\": 64, \"trials\": 64}", NULL);
    CHECK(res != NULL);
    const json_t *t = tp_table(res, "scaling");
    CHECK_EQ_INT(tp_nrows(t), 3);
    for (int r = 0; r < 3; r++) {
        double dk = tp_cell(t, r, "dk"), v = tp_cell(t, r, "var_dot");
        /* var(q.k) = d_k; the estimate from 4096 products has relative sd ~ sqrt(2/4096) */
        CHECK_MSG(fabs(v / dk - 1) < 6 * sqrt(2.0 / 4096) * sqrt(1 + 3 / dk), "dk %g var %g", dk, v);
    }
    json_decref(res);
}

/* Mean softmax entropy of q.k * scale over n keys, by the second sampler. */
static void entropy_by_sampler(int dk, int n, double scale, int trials, double *mean, double *se) {
    lcg64 g = {999, 0, 0};
    double s = 0, s2 = 0, q[256], sc[256];
    for (int t = 0; t < trials; t++) {
        for (int i = 0; i < dk; i++) q[i] = lcg64_normal(&g);
        double mx = -1e300;
        for (int j = 0; j < n; j++) {
            double v = 0;
            for (int i = 0; i < dk; i++) v += q[i] * lcg64_normal(&g);
            sc[j] = v * scale;
            mx = fmax(mx, sc[j]);
        }
        double z = 0, h = 0;
        for (int j = 0; j < n; j++) z += exp(sc[j] - mx);
        for (int j = 0; j < n; j++) {
            double w = exp(sc[j] - mx) / z;
            if (w > 0) h -= w * log(w);
        }
        s += h, s2 += h * h;
    }
    *mean = s / trials;
    *se = sqrt((s2 / trials - *mean * *mean) / trials);
}

TEST(scaling_entropy_against_second_sampler) {
    json_t *res = tp_run("scaling", "{\"dks\": [64], \"n_keys\": 64, \"trials\": 256}", NULL);
    CHECK(res != NULL);
    const json_t *t = tp_table(res, "scaling");
    double m, se;
    entropy_by_sampler(64, 64, 1 / 8.0, 1000, &m, &se);
    /* the probe's mean has sd se * sqrt(1000/256) */
    double tol = 5 * sqrt(se * se + se * se * 1000 / 256);
    CHECK_NEAR(tp_cell(t, 0, "entropy_scaled"), m, tol);
    entropy_by_sampler(64, 64, 1.0, 1000, &m, &se);
    tol = 5 * sqrt(se * se + se * se * 1000 / 256);
    CHECK_NEAR(tp_cell(t, 0, "entropy_raw"), m, tol);
    json_decref(res);
}

TEST(scaling_saturates_raw_and_flattens_cosine) {
    json_t *res = tp_run("scaling", NULL, NULL);
    CHECK(res != NULL);
    const json_t *t = tp_table(res, "scaling");
    int n = tp_nrows(t);
    CHECK_EQ_INT(n, 7);
    double lnn = log(32.0);
    CHECK_NEAR(tp_sum(res, "max_entropy"), lnn, 1e-12);
    /* raw: one key takes nearly all the weight at d_k = 1024; scaled: level across d_k */
    CHECK(tp_cell(t, n - 1, "max_weight_raw") > 0.9);
    CHECK(tp_cell(t, n - 1, "entropy_raw") < tp_cell(t, 0, "entropy_raw"));
    CHECK(tp_sum(res, "scaled_entropy_max") - tp_sum(res, "scaled_entropy_min") < 0.5);
    CHECK(json_is_number(json_object_get(json_object_get(res, "summary"), "raw_saturates_at_dk")));
    /* cos/tau with tau = 1: scores spread ~ 1/sqrt(d_k), so ln n - H ~ var/2 = 1/(2 d_k): flat */
    for (int r = 0; r < n; r++) {
        double dk = tp_cell(t, r, "dk"), gap = lnn - tp_cell(t, r, "entropy_cos_tau_1");
        CHECK_MSG(gap > 0 && gap < 2.0 / dk, "dk %g: ln n - H = %g", dk, gap);
        CHECK_MSG(gap > 0.25 / dk, "dk %g: ln n - H = %g", dk, gap);
    }
    /* the summary's flat tau really is within 1% of uniform at every d_k, and 0.05 is not */
    double ft = tp_sum(res, "cos_flat_from_tau");
    CHECK(ft == 1.0 || ft == 0.5);
    char col[64];
    snprintf(col, sizeof col, "entropy_cos_tau_%g", ft);
    for (int r = 0; r < n; r++) CHECK(tp_cell(t, r, col) >= 0.99 * lnn);
    CHECK(tp_cell(t, 0, "entropy_cos_tau_0.05") < 0.99 * lnn);
    /* small tau is sharper than large tau at every d_k */
    for (int r = 0; r < n; r++) CHECK(tp_cell(t, r, "entropy_cos_tau_0.05") < tp_cell(t, r, "entropy_cos_tau_1"));
    json_decref(res);
}

int main(void) {
    RUN(park_miller_known_value);
    RUN(probe_normals_have_unit_moments);
    RUN(dephasing_self_column_is_closed_form);
    RUN(dephasing_means_against_closed_form_and_second_sampler);
    RUN(dephasing_lcg_option_adds_columns_beside_the_correct_ones);
    RUN(scaling_variance_is_dk);
    RUN(scaling_entropy_against_second_sampler);
    RUN(scaling_saturates_raw_and_flattens_cosine);
    return test_summary();
}
