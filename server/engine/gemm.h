/* Matrix products on row-major `real` arrays, C = A·op(B) (+ C when accumulate is set).
 * Each call runs on the calling thread only: the engine parallelises by giving each of its own
 * worker threads a block of rows, so BLAS is put in single-threaded mode once (gemm_init) and
 * concurrent runs in one process never share BLAS threads. None of these can fail. K may be 0
 * (C is then zeroed, or left as it is when accumulating). */
#ifndef ENGINE_GEMM_H
#define ENGINE_GEMM_H

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

#endif
