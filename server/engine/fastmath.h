/* Vectorised exp for the float build's hot loops (softmax over the vocabulary, GELU), where libm's
 * scalar expf/tanhf cost more than the matrix products around them. Cody-Waite reduction to
 * r in [-ln2/2, ln2/2], degree-6 Taylor polynomial (relative error < 2e-7), scaling by 2^n
 * through the exponent bits; inputs are clamped to [-87, 88] so 2^n stays a normal float.
 * fm_expf is the scalar twin (same operations, same results) for loop tails. Engine-internal. */
#ifndef ENGINE_FASTMATH_H
#define ENGINE_FASTMATH_H

#include <string.h>

typedef float fm_v16 __attribute__((vector_size(64)));
typedef int fm_i16 __attribute__((vector_size(64)));

#define FM_EXP_LO (-87.0f)
#define FM_EXP_HI 88.0f
#define FM_L2E 1.44269504088896341f
#define FM_LN2HI 0.693359375f
#define FM_LN2LO (-2.12194440e-4f)
#define FM_MAGIC 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer in the low bits */

static inline fm_v16 fm_splat(float x) { return (fm_v16){0} + x; }

static inline fm_v16 fm_select(fm_i16 mask, fm_v16 a, fm_v16 b) {
    return (fm_v16)((mask & (fm_i16)a) | (~mask & (fm_i16)b));
}

static inline fm_v16 fm_exp16(fm_v16 x) {
    x = fm_select(x < fm_splat(FM_EXP_LO), fm_splat(FM_EXP_LO), x);
    x = fm_select(x > fm_splat(FM_EXP_HI), fm_splat(FM_EXP_HI), x);
    fm_v16 t = x * FM_L2E + FM_MAGIC;
    fm_v16 n = t - FM_MAGIC;
    fm_v16 r = x - n * FM_LN2HI;
    r = r - n * FM_LN2LO;
    fm_v16 p = fm_splat(1.0f / 720);
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    fm_i16 ni = (fm_i16)t - (fm_i16)fm_splat(FM_MAGIC);
    return p * (fm_v16)((ni + 127) << 23);
}

static inline float fm_expf(float x) {
    if (x < FM_EXP_LO) x = FM_EXP_LO;
    if (x > FM_EXP_HI) x = FM_EXP_HI;
    float t = x * FM_L2E + FM_MAGIC;
    float n = t - FM_MAGIC;
    float r = x - n * FM_LN2HI;
    r = r - n * FM_LN2LO;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int ti, mi, bits;
    float magic = FM_MAGIC, sc;
    memcpy(&ti, &t, 4);
    memcpy(&mi, &magic, 4);
    bits = (ti - mi + 127) << 23;
    memcpy(&sc, &bits, 4);
    return p * sc;
}

static inline fm_v16 fm_load(const float *p) {
    fm_v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void fm_store(float *p, fm_v16 v) { memcpy(p, &v, sizeof v); }

#endif
