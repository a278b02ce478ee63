#include "adamw.h"

#include <math.h>

#if !REAL_IS_DOUBLE && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ADAMW_AVX512 1

/* The float loop below on 16 lanes: the same operations in the same order (no fused multiply-adds;
 * sqrt and division are correctly rounded either way), so the same bits as the scalar loop, which
 * the compiler does not vectorise (sqrtf may set errno). Returns how many leading entries it did. */
__attribute__((target("avx512f"))) static size_t update_512(float *p, const float *g, float *m, float *v, size_t n,
                                                            float b1, float b2, float keep, float step_size,
                                                            float bc2_sqrt, float eps, float grad_scale) {
    const __m512 vb1 = _mm512_set1_ps(1 - b1), vb2 = _mm512_set1_ps(b2), vb2c = _mm512_set1_ps(1 - b2);
    const __m512 vkeep = _mm512_set1_ps(keep), vstep = _mm512_set1_ps(step_size), vbc2 = _mm512_set1_ps(bc2_sqrt);
    const __m512 veps = _mm512_set1_ps(eps), vgs = _mm512_set1_ps(grad_scale);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), vgs);
        __m512 pi = _mm512_mul_ps(_mm512_loadu_ps(p + i), vkeep);
        __m512 m0 = _mm512_loadu_ps(m + i), v0 = _mm512_loadu_ps(v + i);
        __m512 mi = _mm512_add_ps(m0, _mm512_mul_ps(vb1, _mm512_sub_ps(gi, m0)));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(v0, vb2), _mm512_mul_ps(_mm512_mul_ps(vb2c, gi), gi));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), vbc2), veps);
        _mm512_storeu_ps(p + i, _mm512_sub_ps(pi, _mm512_mul_ps(vstep, _mm512_div_ps(mi, den))));
    }
    return i;
}
#endif

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
    size_t i = 0;
#ifdef ADAMW_AVX512
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        i = update_512(p, g, m, v, n, b1, b2, keep, step_size, bc2_sqrt, eps, grad_scale);
#endif
    for (; i < n; i++) {
        real gi = g[i] * grad_scale;
        real pi = p[i] * keep;
        real mi = m[i] + (1 - b1) * (gi - m[i]);
        real vi = v[i] * b2 + (1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * (mi / (rsqrt(vi) / bc2_sqrt + eps));
    }
}
