/* RoPE: the adjacent-pair convention and angles, norm preservation, the inverse, and the
 * property that makes it worth having: scores depend on the relative position only. */
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "layers.h"
#include "rng.h"

#define D 8
#define TMAX 4100

static real *cos_t, *sin_t;

static void tables(double base) { rope_tables(cos_t, sin_t, TMAX, D, base); }

static void rand_vec(rng_state *r, real *x, int d) {
    for (int i = 0; i < d; i++) x[i] = (real)rng_normal(r);
}

static double dot(const real *a, const real *b, int d) {
    double s = 0;
    for (int i = 0; i < d; i++) s += (double)a[i] * b[i];
    return s;
}

/* Pins the convention: pairs (2i, 2i+1), angle m * base^(-2i/d), out0 = x0 c - x1 s. */
TEST(rope_adjacent_pairs_and_angles) {
    tables(10000.0);
    real x[D] = {1, 0, 0, 1, 2, 3, -1, 0.5f}, y[D];
    int m = 3;
    rope_rotate(y, x, cos_t + m * D / 2, sin_t + m * D / 2, D);
    for (int i = 0; i < D / 2; i++) {
        double ang = m * pow(10000.0, -2.0 * i / D);
        double e0 = x[2 * i] * cos(ang) - x[2 * i + 1] * sin(ang);
        double e1 = x[2 * i] * sin(ang) + x[2 * i + 1] * cos(ang);
        CHECK_NEAR(y[2 * i], e0, 1e-6);
        CHECK_NEAR(y[2 * i + 1], e1, 1e-6);
    }
    /* pair 0 turns by exactly m radians: (1,0) -> (cos 3, sin 3) */
    CHECK_NEAR(y[0], cos(3.0), 1e-6);
    CHECK_NEAR(y[1], sin(3.0), 1e-6);
    /* position 0 is the identity */
    rope_rotate(y, x, cos_t, sin_t, D);
    for (int i = 0; i < D; i++) CHECK(y[i] == x[i]);
}

/* The half-split convention (pairs (i, i+d/2)) gives different numbers: the test above would
 * notice a silent switch. Here: rotate e_1 at position 1; adjacent pairs move it within (0,1). */
TEST(rope_not_half_split) {
    tables(10000.0);
    real x[D] = {0, 1, 0, 0, 0, 0, 0, 0}, y[D];
    rope_rotate(y, x, cos_t + D / 2, sin_t + D / 2, D);
    CHECK(fabs(y[0] + sin(1.0)) < 1e-6); /* x1 leaks into x0, not into x5 */
    CHECK(y[4] == 0 && y[5] == 0);
}

TEST(rope_preserves_norm_and_inverts) {
    tables(10000.0);
    rng_state r;
    rng_seed(&r, 5);
    real x[D], y[D], z[D];
    int pos[] = {0, 1, 7, 100, 4000};
    for (int k = 0; k < 5; k++) {
        rand_vec(&r, x, D);
        const real *c = cos_t + pos[k] * D / 2, *s = sin_t + pos[k] * D / 2;
        rope_rotate(y, x, c, s, D);
        CHECK_NEAR(sqrt(dot(y, y, D)), sqrt(dot(x, x, D)), 1e-5 * sqrt(dot(x, x, D)));
        rope_rotate_inverse(z, y, c, s, D);
        for (int i = 0; i < D; i++) CHECK_NEAR(z[i], x[i], 1e-5);
    }
}

/* score(m, n) = (R_m q).(R_n k) depends only on m - n: shift both positions and compare. */
TEST(rope_relative_position_invariance) {
    tables(10000.0);
    rng_state r;
    rng_seed(&r, 11);
    real q[D], k[D], qa[D], ka[D], qb[D], kb[D];
    rand_vec(&r, q, D);
    rand_vec(&r, k, D);
    int gaps[] = {0, 1, 2, 17};
    int starts[] = {3, 10, 100, 4000};
    for (int g = 0; g < 4; g++) {
        int gap = gaps[g];
        rope_rotate(qa, q, cos_t + (gap)*D / 2, sin_t + (gap)*D / 2, D);
        rope_rotate(ka, k, cos_t, sin_t, D);
        double ref = dot(qa, ka, D);
        for (int s = 0; s < 4; s++) {
            int n = starts[s], m = n + gap;
            rope_rotate(qb, q, cos_t + m * D / 2, sin_t + m * D / 2, D);
            rope_rotate(kb, k, cos_t + n * D / 2, sin_t + n * D / 2, D);
            /* float tables at large angles: a tolerance, not == (error grows with position) */
            CHECK_NEAR(dot(qb, kb, D), ref, 2e-3 * (1 + fabs(ref)));
        }
    }
    /* and it is not trivially constant: a different gap gives a different score */
    rope_rotate(qa, q, cos_t + 2 * D / 2, sin_t + 2 * D / 2, D);
    rope_rotate(ka, k, cos_t, sin_t, D);
    rope_rotate(qb, q, cos_t + 5 * D / 2, sin_t + 5 * D / 2, D);
    CHECK(fabs(dot(qa, ka, D) - dot(qb, ka, D)) > 1e-3);
}

/* The base sets the speeds: a different base gives different angles (pair 1). */
TEST(rope_base_matters) {
    rope_tables(cos_t, sin_t, 10, D, 10000.0);
    double c1 = cos_t[5 * D / 2 + 1];
    rope_tables(cos_t, sin_t, 10, D, 500.0);
    CHECK_NEAR(cos_t[5 * D / 2 + 1], cos(5 * pow(500.0, -2.0 / D)), 1e-7);
    CHECK(fabs(cos_t[5 * D / 2 + 1] - c1) > 1e-3);
}

int main(void) {
    cos_t = malloc(sizeof(real) * TMAX * D / 2);
    sin_t = malloc(sizeof(real) * TMAX * D / 2);
    RUN(rope_adjacent_pairs_and_angles);
    RUN(rope_not_half_split);
    RUN(rope_preserves_norm_and_inverts);
    RUN(rope_relative_position_invariance);
    RUN(rope_base_matters);
    free(cos_t);
    free(sin_t);
    return test_summary();
}
