#include "bf16.h"

#include "cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BF16_X86 1

/* vcvtneps2bf16 rounds to nearest even like bf16_from_float, but makes every NaN the quiet NaN of
 * its sign and flushes float subnormals to zero; the scalar path then handles those lanes. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void from_floats_512(bf16 *dst, const float *src,
                                                                                            size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(src + i);
        __m512i bits = _mm512_castps_si512(x);
        __m512i ex = _mm512_and_si512(bits, _mm512_set1_epi32(0x7f800000));
        /* lanes that are NaN, or subnormal and non-zero, go the scalar way */
        __mmask16 odd = _mm512_cmpeq_epi32_mask(ex, _mm512_set1_epi32(0x7f800000)) |
                        (_mm512_cmpeq_epi32_mask(ex, _mm512_setzero_si512()) &
                         _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x007fffff)));
        __m256bh h = _mm512_cvtneps_pbh(x);
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)h);
        if (odd)
            for (int k = 0; k < 16; k++)
                if (odd & (1u << k)) dst[i + k] = bf16_from_float(src[i + k]);
    }
    for (; i < n; i++) dst[i] = bf16_from_float(src[i]);
}
#endif

void bf16_from_floats(bf16 *dst, const float *src, size_t n) {
#ifdef BF16_X86
    if (cpu_has_avx512bf16()) {
        from_floats_512(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = bf16_from_float(src[i]);
}

/* ---- precision names (the default is the kernel path's: kernel_path.c) ---- */
#include "precision.h"

const char *precision_name(precision_kind p) { return p == PRECISION_BF16 ? "bf16" : "fp32"; }

int precision_parse(const char *s, precision_kind *p) {
    if (!s) return -1;
    if (!strcmp(s, "fp32"))
        *p = PRECISION_FP32;
    else if (!strcmp(s, "bf16"))
        *p = PRECISION_BF16;
    else
        return -1;
    return 0;
}
