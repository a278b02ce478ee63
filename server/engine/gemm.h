/* Matrix products on row-major `real` arrays, C = A·op(B) (+ C when accumulate is set).
 * Each call runs on the calling thread only: the engine parallelises by giving each of its own
 * worker threads a block of rows, so BLAS is put in single-threaded mode once (gemm_init) and
 * concurrent runs in one process never share BLAS threads. None of these can fail. */
#ifndef ENGINE_GEMM_H
#define ENGINE_GEMM_H

#include "real.h"

/* Idempotent and thread-safe; the model calls it before any product. */
void gemm_init(void);

/* C[M,N] (+)= A[M,K] · B[N,K]^T   (lda, ldb, ldc: row strides) */
void gemm_nt(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc,
             int accumulate);
/* C[M,N] (+)= A[M,K] · B[K,N] */
void gemm_nn(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc,
             int accumulate);
/* C[M,N] (+)= A[K,M]^T · B[K,N] */
void gemm_tn(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc,
             int accumulate);

#endif
