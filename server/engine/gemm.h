/* Matrix products on row-major `real` arrays, C = A·op(B) (+ C when accumulate is set).
 * Each call runs on the calling thread only: the engine parallelises by giving each of its own
 * worker threads a block of rows, so BLAS is put in single-threaded mode once (gemm_init) and
 * concurrent runs in one process never share BLAS threads. None of these can fail. K may be 0
 * (C is then zeroed, or left as it is when accumulating). */
#ifndef ENGINE_GEMM_H
#define ENGINE_GEMM_H

#include <stddef.h>

#include "bf16.h"
#include "real.h"

/* Idempotent and thread-safe; the model calls it before any product. */
void gemm_init(void);

/* The float build takes every product through its own AVX-512 kernels where the CPU has AVX-512F
 * (asked at run time): one fixed order of summation per entry, and no dependence on which kernels
 * OpenBLAS picks for the CPU (Debian's 0.3.21 runs an Emerald Rapids on its generic SSE3 ones).
 * BLAS elsewhere and in the double build. */
int gemm_uses_own_kernels(void);
/* Tests and benchmarks: 1 sends every product to BLAS, 0 back to the own kernels where they apply.
 * Process-wide; call it while no product runs. */
void gemm_use_blas(int on);
/* The kernel set OpenBLAS chose for this CPU ("SkylakeX", "Prescott", ...). */
const char *gemm_blas_core(void);

/* C[M,N] (+)= A[M,K] · B[N,K]^T   (lda, ldb, ldc: row strides) */
void gemm_nt(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc, int accumulate);
/* C[M,N] (+)= A[M,K] · B[K,N] */
void gemm_nn(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc, int accumulate);
/* C[M,N] (+)= A[K,M]^T · B[K,N] */
void gemm_tn(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc, int accumulate);

/* ---- bf16 products: bf16 inputs, fp32 accumulation (vdpbf16ps) ----
 * C[M,N] (+)= A . B where A is bf16 [M][K] row-major (gemm_bf16_rows: K rounded up to even, the pad
 * zero) and B is packed in pairs along K, Bp[K/2][N][2] (gemm_bf16_pack). Each entry sums its pairs
 * of k in order in fp32: the same bits whatever rows a call is given. vdpbf16ps where the CPU has
 * AVX-512 BF16 (gemm_bf16_available), else portable loops (each pair's products added in turn;
 * not the same bits). Float build only (the double build computes in double, for tests). */
int gemm_bf16_available(void);
void gemm_bf16(int M, int N, int K, const bf16 *A, int lda, const bf16 *Bp, real *C, int ldc, int accumulate);
/* The same product on AMX tiles where this CPU runs them (cpu_has_amx_bf16) and M, N and K are
 * multiples of 32, with B in the tile layout instead (Bt, gemm_bf16_pack_tiles): returns 1 when
 * done, else 0 and nothing is touched (the caller takes gemm_bf16 with the pairs layout). Its sums
 * are in the tiles' order: not gemm_bf16's bits, but the same bits whatever rows a call is given. */
int gemm_bf16_amx(int M, int N, int K, const bf16 *A, int lda, const bf16 *Bt, real *C, int ldc, int accumulate);
/* The tile layout of B (K x N, both multiples of 32): tiles of 16 pairs of k x 16 n, each 1 KB in
 * one piece (rows of 64 bytes, a row holding its 16 n's pairs), n-tiles fastest; where B(k, n)
 * lives. gemm_bf16_packed_count(K, N) entries; rows [k0, k1) of B (k0 a multiple of 32) are the
 * entries from k0 N on. Rows 2 KB apart in the pairs layout would crowd two cache sets. */
static inline size_t gemm_bf16_tile_at(int N, int k, int n) {
    return ((size_t)(k / 32) * (size_t)(N / 16) + (size_t)(n / 16)) * 512 + (size_t)((k % 32) / 2) * 32 +
           (size_t)(n % 16) * 2 + (size_t)(k & 1);
}
/* Bt = bf16 of B(k, n) = src[k*sk + n*sn] in the tile layout (K, N multiples of 32). */
void gemm_bf16_pack_tiles(bf16 *Bt, int K, int N, const real *src, long sk, long sn);
/* bf16 entries Bp needs for K x N. */
size_t gemm_bf16_packed_count(int K, int N);
/* Bp = bf16 of B(k, n) = src[k*sk + n*sn] (sk = ldb, sn = 1: B as it is; sk = 1, sn = ld: B^T of a
 * [N][K] array), pairs along K; an odd K's last pair has a zero second half. */
void gemm_bf16_pack(bf16 *Bp, int K, int N, const real *src, long sk, long sn);
/* dst rows (stride ldd >= K rounded up to even) = bf16 of src rows (stride lds), M rows of K. */
void gemm_bf16_rows(bf16 *dst, int ldd, const real *src, int lds, int M, int K);
/* The transpose: dst[k][m] (rows of dst ldd apart, ldd >= M) = bf16 of src[m][k] (rows lds apart),
 * for M rows of K: the A operand of a product that contracts over src's rows. */
void gemm_bf16_cols(bf16 *dst, int ldd, const real *src, int lds, int M, int K);

#endif
