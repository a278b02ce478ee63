/* The output layer fused with softmax and cross-entropy, forward and backward, so that the
 * [rows, vocab] logits never exist at once: threads take chunks of `chunk_rows` rows one at a
 * time (threads_next), compute their logits into their own buffer, turn them into per-row losses
 * and (when training) into dlogits in place, and take dx for those rows. dW is cut into
 * LMHEAD_SLICES vocabulary slices; chunk k may add to a slice only after chunk k-1 has, so every
 * dW entry sums the chunks in the same order however many threads there are and whichever
 * thread did which chunk: results are bit-identical for any thread count. Must be called by
 * every thread of the pool within one threads_run. */
#ifndef ENGINE_LMHEAD_H
#define ENGINE_LMHEAD_H

#include <stdatomic.h>
#include <stdint.h>

#include "real.h"
#include "threads.h"

typedef struct {
    const real *x;          /* [N, C] input rows (after the final LayerNorm) */
    const real *w;          /* [V, C] output head, PyTorch layout */
    const int32_t *targets; /* [N] next-token ids, already checked to be in 0..V-1 */
    long N;
    int C, V;
    real *losses;   /* [N] per-row cross-entropy (natural log) */
    real *dx;       /* [N, C] overwritten with dL/dx, or NULL for a forward-only pass */
    real *dw;       /* [V, C] dL/dW added here, or NULL */
    real grad_scale; /* dL/d(row loss): 1/N for a mean */
    real *buf;      /* per thread buf_stride reals of scratch (lmhead_scratch_per_thread) */
    size_t buf_stride;
    int use_blas;   /* 1: BLAS products even where the AVX-512 kernels apply (tests compare both) */
    int chunk_rows;
    atomic_long *tickets; /* [LMHEAD_SLICES], all 0 before the run: next chunk due at each slice */
} lmhead_args;

#define LMHEAD_SLICES 8
#define LMHEAD_MAX_ROWS 128 /* chunk_rows must not exceed it */

/* The float build on an AVX-512 machine uses its own kernels for d_model a multiple of 16 up to
 * 128 (logits held as [vocab][rows] so nothing is packed; ~1/3 less time than BLAS here);
 * otherwise, and in the double build, BLAS. Both compute the same sums in different orders. */
int lmhead_uses_kernels(int C);
/* Reals of scratch each thread needs (chunk_rows <= LMHEAD_MAX_ROWS). */
size_t lmhead_scratch_per_thread(int C, int V);

void lmhead_thread(const lmhead_args *a, threadpool *pool, int tid, int nth);

/* One row: softmax cross-entropy of logits[V] against target; when want_grad, logits is
 * replaced by (softmax - onehot) * scale. Returns the loss. Exposed for tests. */
double lmhead_row_xent(real *logits, int V, int target, real scale, int want_grad);

#endif
