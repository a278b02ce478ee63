#include "gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <string.h>

#include "cpu.h"

static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;
static int gemm_own; /* 1: the float build's own AVX-512 kernels take every product */

/* Single-threaded BLAS: our worker threads already cover the cores, and BLAS threads shared by
 * concurrent runs would both oversubscribe the machine and make results depend on timing. The
 * value is the same for every run, so setting it process-wide is safe. */
static void gemm_init_once(void) {
    openblas_set_num_threads(1);
#if !defined(ENGINE_F64) && defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    gemm_own = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
#endif
}

void gemm_init(void) { pthread_once(&gemm_once, gemm_init_once); }

void gemm_use_blas(int on) {
    gemm_init();
#if !defined(ENGINE_F64) && defined(__x86_64__) && defined(__GNUC__)
    gemm_own = !on && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
#else
    (void)on;
#endif
}

int gemm_uses_own_kernels(void) {
    gemm_init();
    return gemm_own;
}

const char *gemm_blas_core(void) {
    extern char *openblas_get_corename(void);
    return openblas_get_corename();
}

#ifdef ENGINE_F64
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

#if !defined(ENGINE_F64) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OWN_KERNELS 1
#define GT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define GAI static inline __attribute__((always_inline)) GT

/* C[r][0..16NV) (+)= sum over k < K of a(r, k) b(k, 0..16NV) for r < R, where a(r, k) = A[r*ar + k*ak]
 * and b(k, .) = B + k*ldb (contiguous): rows of A broadcast, 16-lane columns of B streamed. The last
 * vector of a row may be partial (mask). Sums run over k in order, so every entry of C is the same
 * function of its inputs whatever tile or thread computed it. */
GAI void tile(int R, int NV, int K, const float *A, long ar, long ak, const float *B, long ldb, float *C, long ldc,
              int accumulate, __mmask16 last) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __mmask16 m = v == NV - 1 ? last : 0xffff;
            acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(m, C + r * ldc + 16 * v) : _mm512_setzero_ps();
        }
    for (int k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        __m512 b0 = NV == 2 ? _mm512_loadu_ps(b) : _mm512_maskz_loadu_ps(last, b);
        __m512 b1 = NV == 2 ? _mm512_maskz_loadu_ps(last, b + 16) : b0;
        const float *a = A + k * ak;
#pragma GCC unroll 12
        for (int r = 0; r < R; r++) {
            __m512 x = _mm512_set1_ps(a[r * ar]);
            acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
            if (NV == 2) acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++)
            _mm512_mask_storeu_ps(C + r * ldc + 16 * v, v == NV - 1 ? last : 0xffff, acc[r][v]);
}

#define TILE_R(NV)                                                                                                     \
    switch (R) {                                                                                                       \
    case 12: tile(12, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                             \
    case 11: tile(11, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                             \
    case 10: tile(10, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                             \
    case 9: tile(9, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                               \
    case 8: tile(8, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                               \
    case 7: tile(7, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                               \
    case 6: tile(6, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                               \
    case 5: tile(5, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                               \
    case 4: tile(4, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                               \
    case 3: tile(3, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                               \
    case 2: tile(2, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                               \
    default: tile(1, NV, K, A, ar, ak, B, ldb, C, ldc, acc, last); break;                                              \
    }

/* One tile of up to 12 rows and up to 32 columns (w of them). */
GT static void tile_any(int R, int w, int K, const float *A, long ar, long ak, const float *B, long ldb, float *C,
                        long ldc, int acc) {
    __mmask16 last = (__mmask16)(w % 16 ? (1u << (w % 16)) - 1 : 0xffff);
    if (w > 16) {
        TILE_R(2)
    } else {
        TILE_R(1)
    }
}

/* C[M,N] (+)= sum_k a(m, k) B[k][n]: column blocks of 32 (kept in L1 across the rows), rows in 12s. */
__attribute__((noinline)) GT static void own_gemm(int M, int N, int K, const float *A, long ar, long ak, const float *B,
                                                  long ldb, float *C, long ldc, int acc) {
    for (int n0 = 0; n0 < N; n0 += 32) {
        int w = N - n0 < 32 ? N - n0 : 32;
        for (int m0 = 0; m0 < M; m0 += 12) {
            int R = M - m0 < 12 ? M - m0 : 12;
            tile_any(R, w, K, A + m0 * ar, ar, ak, B + n0, ldb, C + (long)m0 * ldc + n0, ldc, acc);
        }
    }
}

/* B[N,K] used as B^T: packed 32 columns x KB rows at a time into [k][32] so that own_gemm streams it. */
#define NT_KB 256
__attribute__((noinline)) GT static void own_gemm_nt(int M, int N, int K, const float *A, int lda, const float *B,
                                                     int ldb, float *C, int ldc, int accumulate) {
    float pack[NT_KB * 32] __attribute__((aligned(64)));
    for (int n0 = 0; n0 < N; n0 += 32) {
        int w = N - n0 < 32 ? N - n0 : 32;
        for (int k0 = 0; k0 < K || k0 == 0; k0 += NT_KB) {
            int kb = K - k0 < NT_KB ? K - k0 : NT_KB;
            for (int j = 0; j < w; j++)
                for (int k = 0; k < kb; k++) pack[k * 32 + j] = B[(long)(n0 + j) * ldb + k0 + k];
            for (int m0 = 0; m0 < M; m0 += 12) {
                int R = M - m0 < 12 ? M - m0 : 12;
                tile_any(R, w, kb, A + (long)m0 * lda + k0, lda, 1, pack, 32, C + (long)m0 * ldc + n0, ldc,
                         accumulate || k0 > 0);
            }
            if (K == 0) break;
        }
    }
}

/* A^T B (the weight gradients: K is the batch's rows, A and B are wide activations of which a
 * product reads a narrow column block): K in blocks of TN_KB; per block A's 64 columns and then each
 * 32 of B's columns are copied into contiguous panels, read row by row in memory order, so that the
 * tiles stream from L1 instead of striding through memory a column block at a time. Each entry still
 * sums over k in order (the accumulators go through C between blocks, exactly), so the results are
 * the same bits as one pass. */
#define TN_KB 128
#define TN_MB 64

/* dst[0..n) = src[0..n), n <= 64, in 16-lane pieces (a call to memcpy per row cost more than the copy). */
GAI void copy_row(float *dst, const float *src, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
    }
}
__attribute__((noinline)) GT static void own_gemm_tn(int M, int N, int K, const float *A, int lda, const float *B,
                                                     int ldb, float *C, int ldc, int accumulate) {
    float ap[TN_KB * TN_MB] __attribute__((aligned(64)));
    float bp[TN_KB * 32] __attribute__((aligned(64)));
    for (int mc = 0; mc < M; mc += TN_MB) {
        int mw = M - mc < TN_MB ? M - mc : TN_MB;
        for (int k0 = 0; k0 < K || k0 == 0; k0 += TN_KB) {
            int kb = K - k0 < TN_KB ? K - k0 : TN_KB;
            for (int k = 0; k < kb; k++) {
                const float *a = A + (long)(k0 + k) * lda + mc;
                _mm_prefetch((const char *)(a + 8L * lda), _MM_HINT_T0);
                copy_row(ap + k * TN_MB, a, mw);
            }
            for (int n0 = 0; n0 < N; n0 += 32) {
                int w = N - n0 < 32 ? N - n0 : 32;
                for (int k = 0; k < kb; k++) {
                    const float *b = B + (long)(k0 + k) * ldb + n0;
                    _mm_prefetch((const char *)(b + 8L * ldb), _MM_HINT_T0);
                    copy_row(bp + k * 32, b, w);
                }
                for (int m0 = 0; m0 < mw; m0 += 12) {
                    int R = mw - m0 < 12 ? mw - m0 : 12;
                    tile_any(R, w, kb, ap + m0, 1, TN_MB, bp, 32, C + (long)(mc + m0) * ldc + n0, ldc,
                             accumulate || k0 > 0);
                }
            }
            if (K == 0) break;
        }
    }
}
#endif

void gemm_nt(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc, int accumulate) {
    if (M <= 0 || N <= 0) return;
#ifdef OWN_KERNELS
    if (gemm_own) {
        own_gemm_nt(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
        return;
    }
#endif
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, A, lda, B, ldb, accumulate ? 1 : 0, C, ldc);
}

void gemm_nn(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc, int accumulate) {
    if (M <= 0 || N <= 0) return;
#ifdef OWN_KERNELS
    if (gemm_own) {
        own_gemm(M, N, K, A, lda, 1, B, ldb, C, ldc, accumulate);
        return;
    }
#endif
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, A, lda, B, ldb, accumulate ? 1 : 0, C, ldc);
}

void gemm_tn(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc, int accumulate) {
    if (M <= 0 || N <= 0) return;
#ifdef OWN_KERNELS
    if (gemm_own) {
        /* panels pay where K is long (weight gradients over the batch's rows); a short K (attention's
         * T x T) is in cache already. Both give the same bits. */
        if (K > 2 * TN_KB)
            own_gemm_tn(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
        else
            own_gemm(M, N, K, A, 1, lda, B, ldb, C, ldc, accumulate);
        return;
    }
#endif
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, 1, A, lda, B, ldb, accumulate ? 1 : 0, C, ldc);
}

/* ---- bf16 products (vdpbf16ps) ---- */
#include "bf16.h"

int gemm_bf16_available(void) { return !REAL_IS_DOUBLE && cpu_has_avx512bf16(); }

size_t gemm_bf16_packed_count(int K, int N) { return (size_t)((K + 1) / 2) * (size_t)N * 2; }

static void pack_portable(bf16 *Bp, int K, int N, const real *src, long sk, long sn) {
    for (int k2 = 0; k2 < (K + 1) / 2; k2++) {
        bf16 *row = Bp + (size_t)k2 * N * 2;
        const real *s0 = src + (long)(2 * k2) * sk, *s1 = s0 + sk;
        int odd = 2 * k2 + 1 < K;
        for (int n = 0; n < N; n++) {
            row[2 * n] = bf16_from_float((float)s0[n * sn]);
            row[2 * n + 1] = odd ? bf16_from_float((float)s1[n * sn]) : 0;
        }
    }
}

void gemm_bf16_rows(bf16 *dst, int ldd, const real *src, int lds, int M, int K) {
    for (int m = 0; m < M; m++) {
#if REAL_IS_DOUBLE
        for (int k = 0; k < K; k++) dst[(long)m * ldd + k] = bf16_from_float((float)src[(long)m * lds + k]);
#else
        bf16_from_floats(dst + (long)m * ldd, src + (long)m * lds, (size_t)K);
#endif
        if (K % 2) dst[(long)m * ldd + K] = 0;
    }
}

static void cols_portable(bf16 *dst, int ldd, const real *src, int lds, int M, int K) {
    /* 16 source rows at a time: each reads 16 short runs of src and writes K runs of 16 */
    for (int m0 = 0; m0 < M; m0 += 16) {
        int m1 = m0 + 16 < M ? m0 + 16 : M;
        for (int k = 0; k < K; k++)
            for (int m = m0; m < m1; m++) dst[(long)k * ldd + m] = bf16_from_float((float)src[(long)m * lds + k]);
    }
}

#if !defined(ENGINE_F64) && defined(__x86_64__) && defined(__GNUC__)
#define BT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define BAI static inline __attribute__((always_inline)) BT

/* ---- conversions to bf16 on AVX-512 BF16 (vcvtne*: nearest even, as bf16_from_float for every
 * finite value but denormals, which become zero) ---- */
#define HAVE_BCONV 1
/* Pairs of rows s0, s1 (N floats each, contiguous) into row[2n] = s0[n], row[2n+1] = s1[n]. */
BT static void pack_pair_rows(bf16 *row, const float *s0, const float *s1, int N) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    int n = 0;
    for (; n + 16 <= N; n += 16) {
        __m512i h = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s1 + n), _mm512_loadu_ps(s0 + n));
        _mm512_storeu_si512(row + 2 * n, _mm512_permutexvar_epi16(idx, h));
    }
    for (; n < N; n++) {
        row[2 * n] = bf16_from_float(s0[n]);
        row[2 * n + 1] = bf16_from_float(s1[n]);
    }
}

/* dst[k][0..16) = bf16 of src[0..16)[k] for k < 16: a 16 x 16 block transposed in registers. */
/* Rows 2 k2 and 2 k2 + 1 of B (s0, s1: N floats each, contiguous) into the tile layout. */
BT static void pack_pair_tiles(bf16 *Bt, int N, int k2, const float *s0, const float *s1) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int n = 0; n < N; n += 16) {
        __m512i h = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s1 + n), _mm512_loadu_ps(s0 + n));
        _mm512_storeu_si512(Bt + gemm_bf16_tile_at(N, 2 * k2, n), _mm512_permutexvar_epi16(idx, h));
    }
}

BT static void cols_block16(bf16 *dst, long ldd, const float *src, long lds) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* within each 128-bit lane, r[4g + e] holds element e of the lane's four for rows 4g..4g+3 */
    for (int g = 0; g < 16; g += 4) {
        r[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
        r[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
        r[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        r[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
        for (int e = 0; e < 4; e++) {
            t[h + e] = _mm512_shuffle_f32x4(r[h + e], r[h + 4 + e], 0x88);
            t[h + 4 + e] = _mm512_shuffle_f32x4(r[h + e], r[h + 4 + e], 0xDD);
        }
    for (int e = 0; e < 8; e++) {
        r[e] = _mm512_shuffle_f32x4(t[e], t[8 + e], 0x88);
        r[8 + e] = _mm512_shuffle_f32x4(t[e], t[8 + e], 0xDD);
    }
    for (int k = 0; k < 16; k++) _mm256_storeu_si256((__m256i *)(dst + k * ldd), (__m256i)_mm512_cvtneps_pbh(r[k]));
}

BT static void cols_avx512(bf16 *dst, int ldd, const float *src, int lds, int M, int K) {
    int m0 = 0;
    for (; m0 + 16 <= M; m0 += 16) {
        /* rows far apart in memory defeat the hardware prefetcher: ask for the block 32 rows on */
        if (m0 + 48 <= M)
            for (int i = 32; i < 48; i++)
                for (int k = 0; k < K; k += 16)
                    _mm_prefetch((const char *)(src + (long)(m0 + i) * lds + k), _MM_HINT_T0);
        int k0 = 0;
        for (; k0 + 16 <= K; k0 += 16) cols_block16(dst + (long)k0 * ldd + m0, ldd, src + (long)m0 * lds + k0, lds);
        for (int k = k0; k < K; k++)
            for (int m = m0; m < m0 + 16; m++) dst[(long)k * ldd + m] = bf16_from_float(src[(long)m * lds + k]);
    }
    for (int k = 0; k < K; k++)
        for (int m = m0; m < M; m++) dst[(long)k * ldd + m] = bf16_from_float(src[(long)m * lds + k]);
}

/* C[r][0..16NV) (+)= sum over pairs k2 < K2 of A[r][2k2..2k2+1] . Bp[k2][..][0..1] for r < R: each
 * row's pair broadcast, 16 columns' pairs streamed; the last vector may be partial (mask). */
BAI void btile(int R, int NV, int K2, const bf16 *A, long lda, const bf16 *Bp, long ldbp, float *C, long ldc,
               int accumulate, __mmask16 last) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __mmask16 m = v == NV - 1 ? last : 0xffff;
            acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(m, C + r * ldc + 16 * v) : _mm512_setzero_ps();
        }
    for (int k2 = 0; k2 < K2; k2++) {
        const bf16 *b = Bp + (long)k2 * ldbp;
        __m512i b0 = NV == 2 ? _mm512_loadu_si512(b) : _mm512_maskz_loadu_epi32(last, b);
        __m512i b1 = NV == 2 ? _mm512_maskz_loadu_epi32(last, b + 32) : b0;
#pragma GCC unroll 12
        for (int r = 0; r < R; r++) {
            int32_t pair;
            memcpy(&pair, A + r * lda + 2 * k2, 4);
            __m512i x = _mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)x, (__m512bh)b0);
            if (NV == 2) acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)x, (__m512bh)b1);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++)
            _mm512_mask_storeu_ps(C + r * ldc + 16 * v, v == NV - 1 ? last : 0xffff, acc[r][v]);
}

#define BTILE_R(NV)                                                                                                    \
    switch (R) {                                                                                                       \
    case 12: btile(12, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                            \
    case 11: btile(11, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                            \
    case 10: btile(10, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                            \
    case 9: btile(9, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                              \
    case 8: btile(8, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                              \
    case 7: btile(7, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                              \
    case 6: btile(6, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                              \
    case 5: btile(5, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                              \
    case 4: btile(4, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                              \
    case 3: btile(3, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                              \
    case 2: btile(2, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                              \
    default: btile(1, NV, K2, A, lda, Bp, ldbp, C, ldc, acc, last); break;                                             \
    }

BT static void btile_any(int R, int w, int K2, const bf16 *A, long lda, const bf16 *Bp, long ldbp, float *C, long ldc,
                         int acc) {
    __mmask16 last = (__mmask16)(w % 16 ? (1u << (w % 16)) - 1 : 0xffff);
    if (w > 16) {
        BTILE_R(2)
    } else {
        BTILE_R(1)
    }
}

/* Column blocks of 32 (their pairs, K2 x 128 bytes, stay in L1 across the rows), rows in 12s. */
__attribute__((noinline)) BT static void own_bgemm(int M, int N, int K, const bf16 *A, int lda, const bf16 *Bp,
                                                   float *C, int ldc, int accumulate) {
    const int K2 = (K + 1) / 2;
    const long ldbp = 2L * N;
    for (int n0 = 0; n0 < N; n0 += 32) {
        int w = N - n0 < 32 ? N - n0 : 32;
        for (int m0 = 0; m0 < M; m0 += 12) {
            int R = M - m0 < 12 ? M - m0 : 12;
            btile_any(R, w, K2, A + (long)m0 * lda, lda, Bp + 2L * n0, ldbp, C + (long)m0 * ldc + n0, ldc, accumulate);
        }
    }
}
#define HAVE_BGEMM 1
#endif

/* ---- the same products on AMX tiles (TDPBF16PS): A tiles are 16 rows of 32 values of A, B tiles
 * 16 pairs of Bp's rows, which is Bp's layout already ---- */
#if !defined(ENGINE_F64) && defined(__x86_64__) && defined(__GNUC__)
#include "cpu.h"
#include "lmhead_amx.h" /* lmhead_amx_config: palette 1, 8 tiles of 16 rows x 64 bytes */
#define AMXT __attribute__((target("amx-tile,amx-bf16")))
#define AMX_NAME(n) n##_gemm
#define AMX_TGT AMXT
#define AMX_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define AMX_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#include "amx_steps.h"

/* 32 x 32 blocks of C, 2 x 2 accumulator tiles each, over K in 32s; M, N, K multiples of 32. */
AMXT static void amx_bgemm(int M, int N, int K, const bf16 *A, int lda, const bf16 *Bt, float *C, int ldc,
                           int accumulate) {
    const long sa = 2L * lda, sc = 4L * ldc;
    _tile_loadconfig(lmhead_amx_config);
    for (int n0 = 0; n0 < N; n0 += 32)
        for (int m0 = 0; m0 < M; m0 += 32) {
            float *c = C + (long)m0 * ldc + n0;
            if (accumulate) {
                _tile_loadd(0, c, sc);
                _tile_loadd(1, c + 16, sc);
                _tile_loadd(2, c + 16L * ldc, sc);
                _tile_loadd(3, c + 16L * ldc + 16, sc);
            } else {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
            }
            const bf16 *a = A + (long)m0 * lda, *b = Bt + gemm_bf16_tile_at(N, 0, n0);
            amx_steps_gemm(K / 32, a, a + 16L * lda, sa, 32, b, b + 512, 64, (size_t)(N / 16) * 512);
            _tile_stored(0, c, sc);
            _tile_stored(1, c + 16, sc);
            _tile_stored(2, c + 16L * ldc, sc);
            _tile_stored(3, c + 16L * ldc + 16, sc);
        }
    _tile_release();
}

int gemm_bf16_amx(int M, int N, int K, const bf16 *A, int lda, const bf16 *Bt, real *C, int ldc, int accumulate) {
    if (M % 32 || N % 32 || K % 32 || M <= 0 || !cpu_has_amx_bf16()) return 0;
    amx_bgemm(M, N, K, A, lda, Bt, C, ldc, accumulate);
    return 1;
}
#else
int gemm_bf16_amx(int M, int N, int K, const bf16 *A, int lda, const bf16 *Bt, real *C, int ldc, int accumulate) {
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)Bt, (void)C, (void)ldc, (void)accumulate;
    return 0;
}
#endif

void gemm_bf16(int M, int N, int K, const bf16 *A, int lda, const bf16 *Bp, real *C, int ldc, int accumulate) {
    if (M <= 0 || N <= 0) return;
#ifdef HAVE_BGEMM
    if (gemm_bf16_available()) {
        own_bgemm(M, N, K, A, lda, Bp, C, ldc, accumulate);
        return;
    }
#endif
    /* portable: the same pairs in the same order, each pair's two products added in turn */
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = accumulate ? (float)C[(long)m * ldc + n] : 0.0f;
            for (int k2 = 0; k2 < (K + 1) / 2; k2++) {
                const bf16 *a = A + (long)m * lda + 2 * k2, *b = Bp + ((long)k2 * N + n) * 2;
                acc += bf16_to_float(a[0]) * bf16_to_float(b[0]);
                acc += bf16_to_float(a[1]) * bf16_to_float(b[1]);
            }
            C[(long)m * ldc + n] = acc;
        }
}

void gemm_bf16_pack(bf16 *Bp, int K, int N, const real *src, long sk, long sn) {
#ifdef HAVE_BCONV
    if (sn == 1 && gemm_bf16_available()) {
        for (int k2 = 0; k2 < K / 2; k2++) {
            const real *s0 = src + (long)(2 * k2) * sk;
            pack_pair_rows(Bp + (size_t)k2 * N * 2, s0, s0 + sk, N);
        }
        if (K % 2) pack_portable(Bp + (size_t)(K / 2) * N * 2, 1, N, src + (long)(K - 1) * sk, sk, sn);
        return;
    }
#endif
    pack_portable(Bp, K, N, src, sk, sn);
}

void gemm_bf16_cols(bf16 *dst, int ldd, const real *src, int lds, int M, int K) {
#ifdef HAVE_BCONV
    if (gemm_bf16_available()) {
        cols_avx512(dst, ldd, src, lds, M, K);
        return;
    }
#endif
    cols_portable(dst, ldd, src, lds, M, K);
}

void gemm_bf16_pack_tiles(bf16 *Bt, int K, int N, const real *src, long sk, long sn) {
#ifdef HAVE_BCONV
    if (sn == 1 && N % 16 == 0 && K % 2 == 0 && gemm_bf16_available()) {
        for (int k2 = 0; k2 < K / 2; k2++)
            pack_pair_tiles(Bt, N, k2, src + (long)(2 * k2) * sk, src + (long)(2 * k2 + 1) * sk);
        return;
    }
#endif
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) Bt[gemm_bf16_tile_at(N, k, n)] = bf16_from_float((float)src[(long)k * sk + n * sn]);
}
