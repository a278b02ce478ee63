/* AdamW against its definition (PyTorch's torch.optim.AdamW): decoupled decay before the step,
 * bias correction, and the shape of the first step; the vectorised loop gives the scalar loop's bits. */
#include <string.h>

#include "../support/test.h"
#include "adamw.h"

TEST(defaults_are_pytorch_with_lr_3e4) {
    adamw_config c;
    adamw_config_defaults(&c);
    CHECK(c.lr == 3e-4 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0.01);
}

/* First step: m^ = g, v^ = g^2, so p1 = p0 (1 - lr wd) - lr g / (|g| + eps). */
TEST(first_step_is_signed_lr) {
    adamw_config c;
    adamw_config_defaults(&c);
    real p[4] = {1, -2, 0.5f, 0}, g[4] = {0.3f, -1e-3f, 5, 0}, m[4] = {0}, v[4] = {0};
    real p0[4];
    memcpy(p0, p, sizeof p);
    adamw_update(p, g, m, v, 4, &c, c.lr, 1, 1, 1);
    for (int i = 0; i < 4; i++) {
        double want = p0[i] * (1 - c.lr * c.weight_decay) - c.lr * g[i] / (fabs(g[i]) + c.eps);
        CHECK_NEAR(p[i], want, 1e-7);
    }
    CHECK_NEAR(m[0], 0.1 * 0.3, 1e-8);
    CHECK_NEAR(v[0], 0.001 * 0.09, 1e-8); /* (1 - beta2) rounds in float */
}

/* Ten steps against a double-precision transcription of torch.optim.AdamW._single_tensor_adamw. */
TEST(matches_reference_over_steps) {
    adamw_config c;
    adamw_config_defaults(&c);
    c.lr = 1e-2;
    c.weight_decay = 0.1;
    real p[3] = {0.5f, -0.25f, 2}, m[3] = {0}, v[3] = {0};
    double rp[3] = {0.5, -0.25, 2}, rm[3] = {0}, rv[3] = {0};
    for (int t = 1; t <= 10; t++) {
        real g[3];
        for (int i = 0; i < 3; i++) g[i] = (real)(sin(t * (i + 1.0)) + 0.1 * rp[i]);
        adamw_update(p, g, m, v, 3, &c, c.lr, t, 1, 1);
        for (int i = 0; i < 3; i++) {
            double gi = g[i];
            rp[i] *= 1 - c.lr * c.weight_decay;
            rm[i] += (gi - rm[i]) * (1 - c.beta1);
            rv[i] = rv[i] * c.beta2 + (1 - c.beta2) * gi * gi;
            double bc1 = 1 - pow(c.beta1, t), bc2 = 1 - pow(c.beta2, t);
            double denom = sqrt(rv[i]) / sqrt(bc2) + c.eps;
            rp[i] -= (c.lr / bc1) * rm[i] / denom;
        }
    }
    for (int i = 0; i < 3; i++) CHECK_NEAR(p[i], rp[i], 1e-5);
}

TEST(no_decay_and_grad_scale) {
    adamw_config c;
    adamw_config_defaults(&c);
    c.weight_decay = 0.5;
    real p[1] = {2}, g[1] = {0}, m[1] = {0}, v[1] = {0};
    adamw_update(p, g, m, v, 1, &c, 0.1, 1, 0, 1);
    CHECK(p[0] == 2); /* zero gradient, no decay: unchanged */
    adamw_update(p, g, m, v, 1, &c, 0.1, 2, 1, 1);
    CHECK_NEAR(p[0], 2 * (1 - 0.1 * 0.5), 1e-6); /* decay alone */
    real g2[1] = {4}, m2[1] = {0}, v2[1] = {0}, q[1] = {0};
    adamw_update(q, g2, m2, v2, 1, &c, 0.1, 1, 0, 0.25f); /* clipped to 1 */
    CHECK_NEAR(m2[0], 0.1 * 1.0, 1e-7);
}

/* A run of 16-lane blocks (taken by the AVX-512 loop where the CPU has it) equals the same entries
 * updated one at a time (each a call of n = 1: the scalar loop), bit for bit, over several steps. */
TEST(vector_loop_gives_the_scalar_bits) {
    enum { N = 16 * 5 + 7 };
    real p[2][N], g[N], m[2][N], v[2][N];
    unsigned s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        p[0][i] = p[1][i] = (real)((int)(s >> 8) % 2001 - 1000) / 700;
        m[0][i] = m[1][i] = v[0][i] = v[1][i] = 0;
    }
    adamw_config c;
    adamw_config_defaults(&c);
    for (long t = 1; t <= 5; t++) {
        for (int i = 0; i < N; i++) {
            s = s * 1103515245u + 12345u;
            g[i] = (real)((int)(s >> 8) % 2001 - 1000) / 300;
        }
        adamw_update(p[0], g, m[0], v[0], N, &c, 1e-3, t, (int)(t % 2), (real)0.75);
        for (int i = 0; i < N; i++)
            adamw_update(&p[1][i], &g[i], &m[1][i], &v[1][i], 1, &c, 1e-3, t, (int)(t % 2), (real)0.75);
    }
    CHECK(memcmp(p[0], p[1], sizeof p[0]) == 0);
    CHECK(memcmp(m[0], m[1], sizeof m[0]) == 0);
    CHECK(memcmp(v[0], v[1], sizeof v[0]) == 0);
}

int main(void) {
    RUN(defaults_are_pytorch_with_lr_3e4);
    RUN(first_step_is_signed_lr);
    RUN(matches_reference_over_steps);
    RUN(no_decay_and_grad_scale);
    RUN(vector_loop_gives_the_scalar_bits);
    return test_summary();
}
