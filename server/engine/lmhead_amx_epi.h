/* The epilogues of the AMX kernels (lmhead_amx_kernels.h) on AVX-512, for the hardware backend:
 * the portable ones' results (lmhead_amx.h) to within their rounding, in about half the time.
 * exp(l - U) as 2^t, t = (l - U) log2 e: t = n + f with n an integer and |f| <= 1/2, 2^f by its
 * Taylor polynomial (degree 6 for the sums, relative error 1.2e-7; degree 4 for E, 4.2e-5, well
 * below bf16's 2^-9), times 2^n by vscalefps (which needs no clamping: 2^-200 is 0); rounding to
 * bf16 by vcvtneps2bf16 (nearest even, as bf16_from_float for every finite non-denormal value).
 * Engine-internal; included once, by lmhead.c, on x86-64 with GCC. */
#ifndef ENGINE_LMHEAD_AMX_EPI_H
#define ENGINE_LMHEAD_AMX_EPI_H

#include <immintrin.h>

#include "lmhead_amx.h"

#define EPI_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), always_inline)) static inline
/* (ln 2)^i / i!: 2^f = sum_i c_i f^i */
static const float amx_exp2_taylor[7] = {1.0f,
                                         6.9314718055994531e-1f,
                                         2.4022650695910071e-1f,
                                         5.5504108664821580e-2f,
                                         9.6181291076284772e-3f,
                                         1.3333558146428443e-3f,
                                         1.5403530393381606e-4f};

/* 2^t with the Taylor polynomial of degree deg (a constant: the loop unrolls) */
EPI_TGT __m512 exp2_taylor(__m512 t, int deg) {
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_set1_ps(amx_exp2_taylor[deg]);
    for (int i = deg - 1; i >= 0; i--) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(amx_exp2_taylor[i]));
    return _mm512_scalef_ps(p, n);
}
/* As amx_epilogue_sums. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
amx_epi_sums_avx512(const lmhead_amx_chunk *k, const float *T, long v0, int r0) {
    const __m512 l2e = _mm512_set1_ps(1.44269504088896341f);
    __m512 ul = _mm512_mul_ps(_mm512_loadu_ps(k->U + r0), l2e), m = _mm512_loadu_ps(k->mx + r0),
           s0 = _mm512_setzero_ps(), s1 = s0;
    int n = k->V - v0 < 16 ? (int)(k->V - v0) : 16;
    int j = 0;
    for (; j + 2 <= n; j += 2) {
        __m512 a = _mm512_loadu_ps(T + 16 * j), b = _mm512_loadu_ps(T + 16 * j + 16);
        m = _mm512_max_ps(m, _mm512_max_ps(a, b));
        s0 = _mm512_add_ps(s0, exp2_taylor(_mm512_fmsub_ps(a, l2e, ul), 6));
        s1 = _mm512_add_ps(s1, exp2_taylor(_mm512_fmsub_ps(b, l2e, ul), 6));
    }
    for (; j < n; j++) {
        __m512 a = _mm512_loadu_ps(T + 16 * j);
        m = _mm512_max_ps(m, a);
        s0 = _mm512_add_ps(s0, exp2_taylor(_mm512_fmsub_ps(a, l2e, ul), 6));
    }
    _mm512_storeu_ps(k->mx + r0, m);
    _mm512_storeu_ps(k->sm + r0, _mm512_add_ps(_mm512_loadu_ps(k->sm + r0), _mm512_add_ps(s0, s1)));
    for (int i = 0; i < 16 && r0 + i < k->rows; i++) {
        long t = k->tg[r0 + i];
        if (t >= v0 && t < v0 + 16) k->tl[r0 + i] = T[16 * (t - v0) + i];
    }
}
/* As amx_epilogue_grad. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
amx_epi_grad_avx512(const lmhead_amx_chunk *k, const float *T, long vb, long v0, long vend, int r0) {
    const int RP = k->RP;
    const __m512 l2e = _mm512_set1_ps(1.44269504088896341f);
    __m512 ul = _mm512_mul_ps(_mm512_loadu_ps(k->U + r0), l2e), sc = _mm512_loadu_ps(k->sc + r0);
    long lv = v0 - vb;
    for (int p = 0; p < 8; p++) {
        int j = 2 * p;
        __m512 a = v0 + j < vend
                       ? _mm512_mul_ps(exp2_taylor(_mm512_fmsub_ps(_mm512_loadu_ps(T + 16 * j), l2e, ul), 4), sc)
                       : _mm512_setzero_ps();
        __m512 b = v0 + j + 1 < vend
                       ? _mm512_mul_ps(exp2_taylor(_mm512_fmsub_ps(_mm512_loadu_ps(T + 16 * j + 16), l2e, ul), 4), sc)
                       : _mm512_setzero_ps();
        __m256i ha = (__m256i)_mm512_cvtneps_pbh(a), hb = (__m256i)_mm512_cvtneps_pbh(b);
        _mm256_storeu_si256((__m256i *)(k->Eb + amx_eb_at(RP, lv + j, r0)), ha);
        _mm256_storeu_si256((__m256i *)(k->Eb + amx_eb_at(RP, lv + j + 1, r0)), hb);
        /* E2b: words a0 b0 a1 b1 ... a15 b15 */
        __m512i idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                       5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
        __m512i o = _mm512_permutex2var_epi16(_mm512_castsi256_si512(ha), idx, _mm512_castsi256_si512(hb));
        _mm512_storeu_si512(k->E2b + amx_e2_at(RP, lv + 2 * p, r0), o);
    }
}

#endif
