/* The output layer fused with softmax and cross-entropy, forward and backward, so that the
 * [rows, vocab] logits never exist at once: each thread takes `chunk_rows` rows at a time,
 * computes their logits into its own buffer, turns them into per-row losses and (when training)
 * into dlogits in place, takes dx for its rows, and then adds its part of dW. dW is split into
 * one vocabulary slice per thread and the threads take turns round-robin between barriers, so
 * no two threads write the same rows of dW and the summation order depends only on the thread
 * count. Must be called by every thread of the pool (it uses threads_barrier). */
#ifndef ENGINE_LMHEAD_H
#define ENGINE_LMHEAD_H

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
    real *buf;      /* nthreads * chunk_rows * V scratch */
    int chunk_rows;
} lmhead_args;

void lmhead_thread(const lmhead_args *a, threadpool *pool, int tid, int nth);

/* One row: softmax cross-entropy of logits[V] against target; when want_grad, logits is
 * replaced by (softmax - onehot) * scale. Returns the loss. Exposed for tests. */
double lmhead_row_xent(real *logits, int V, int target, real scale, int want_grad);

#endif
