#include "gemm.h"

#include <cblas.h>
#include <pthread.h>

static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;

/* Single-threaded BLAS: our worker threads already cover the cores, and BLAS threads shared by
 * concurrent runs would both oversubscribe the machine and make results depend on timing. The
 * value is the same for every run, so setting it process-wide is safe. */
static void gemm_init_once(void) { openblas_set_num_threads(1); }

void gemm_init(void) { pthread_once(&gemm_once, gemm_init_once); }

#ifdef ENGINE_F64
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

void gemm_nt(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc,
             int accumulate) {
    if (M <= 0 || N <= 0) return;
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, A, lda, B, ldb, accumulate ? 1 : 0, C, ldc);
}

void gemm_nn(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc,
             int accumulate) {
    if (M <= 0 || N <= 0) return;
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, A, lda, B, ldb, accumulate ? 1 : 0, C, ldc);
}

void gemm_tn(int M, int N, int K, const real *A, int lda, const real *B, int ldb, real *C, int ldc,
             int accumulate) {
    if (M <= 0 || N <= 0) return;
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, 1, A, lda, B, ldb, accumulate ? 1 : 0, C, ldc);
}
