#include "adamw.h"

#include <math.h>

void adamw_config_defaults(adamw_config *c) {
    c->lr = 3e-4;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->weight_decay = 0.01;
}

void adamw_update(real *p, const real *g, real *m, real *v, size_t n, const adamw_config *c, double lr, long t,
                  int decay, real grad_scale) {
    const real b1 = (real)c->beta1, b2 = (real)c->beta2;
    const real keep = decay ? (real)(1.0 - lr * c->weight_decay) : 1;
    const double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
    const real step_size = (real)(lr / bc1), bc2_sqrt = (real)sqrt(bc2), eps = (real)c->eps;
    for (size_t i = 0; i < n; i++) {
        real gi = g[i] * grad_scale;
        real pi = p[i] * keep;
        real mi = m[i] + (1 - b1) * (gi - m[i]);
        real vi = v[i] * b2 + (1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * (mi / (rsqrt(vi) / bc2_sqrt + eps));
    }
}
