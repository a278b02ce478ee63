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

#include "bf16.h"
#include "error.h"
#include "kernel_path.h"
#include "real.h"
#include "threads.h"

/* bf16 copies of the output head for mixed precision, refreshed from the fp32 master weights once
 * per step (lmhead_bf16_refresh), in the layouts of the copies' kernel path: for vdpbf16ps and the
 * portable loops wb [V][C] as it is (the logits take (w[v][c], w[v][c+1]) pairs), wp [V/2 rounded
 * up][C][2] with rows 2p and 2p+1 interleaved (dx takes (w[2p][c], w[2p+1][c]) pairs; a missing last
 * row is zero); for AMX tiles wa and wt (lmhead_amx.h); and the largest row norm, which bounds every
 * logit. */
typedef struct {
    int V, C;
    kernel_path_id path; /* the kernels that compute with it (a bf16 path), fixed when it is made */
    bf16 *wb, *wp;       /* avx512_bf16 and bf16_portable paths (NULL on amx) */
    bf16 *wa, *wt;       /* amx path (NULL on the others): lmhead_amx.h's wa [V16][C32] and wt [C][V32] */
    float wmax;          /* max over v of |wb[v]|, rounded up */
    double *part;        /* per refresh item: largest squared row norm */
} lmhead_bf16;

typedef struct {
    const real *x;          /* [N, C] input rows (after the final LayerNorm) */
    const real *w;          /* [V, C] output head, PyTorch layout */
    const int32_t *targets; /* [N] next-token ids, already checked to be in 0..V-1, or negative: a
                             * row not counted (loss 0, no gradient; as PyTorch's ignore_index) */
    long N;
    int C, V;
    real *losses;    /* [N] per-row cross-entropy (natural log) */
    real *dx;        /* [N, C] overwritten with dL/dx, or NULL for a forward-only pass */
    real *dw;        /* [V, C] dL/dW added here, or NULL */
    real grad_scale; /* dL/d(row loss): 1/N for a mean */
    real *buf;       /* per thread buf_stride reals of scratch (lmhead_scratch_per_thread) */
    size_t buf_stride;
    int use_blas; /* 1: BLAS products even where the AVX-512 kernels apply (tests compare both) */
    int chunk_rows;
    atomic_long *tickets;  /* [LMHEAD_SLICES], all 0 before the run: next chunk due at each slice */
    const lmhead_bf16 *bf; /* non-NULL: mixed precision (where lmhead_bf16_applies), see below */
} lmhead_args;

#define LMHEAD_SLICES 8
#define LMHEAD_MAX_ROWS 128     /* chunk_rows must not exceed it (lmhead_max_rows) */
#define LMHEAD_AMX_MAX_ROWS 512 /* on the amx path: its scratch does not grow with the vocabulary */

/* The float build on an AVX-512 machine uses its own kernels for d_model a multiple of 16 up to
 * 128 (logits held as [vocab][rows] so nothing is packed; ~1/3 less time than BLAS here);
 * otherwise, and in the double build, BLAS. Both compute the same sums in different orders. */
int lmhead_uses_kernels(int C);
/* The largest chunk_rows for the copies bf (NULL: fp32): LMHEAD_AMX_MAX_ROWS on the amx path, whose
 * chunks stream the head's weights and dW once each (larger chunks, less memory traffic), else
 * LMHEAD_MAX_ROWS. */
int lmhead_max_rows(const lmhead_bf16 *bf);
/* Reals of scratch each thread needs (chunk_rows <= lmhead_max_rows). */
size_t lmhead_scratch_per_thread(int C, int V);

void lmhead_thread(const lmhead_args *a, threadpool *pool, int tid, int nth);

/* Mixed precision (float build, C a multiple of 16): the products take bf16 inputs (x rounded per
 * chunk, w from lmhead_bf16) and accumulate in fp32 (vdpbf16ps where cpu_has_avx512bf16, else a
 * portable scalar loop with the same rounding of the inputs); exp, sums, losses and the one-hot
 * terms stay fp32. The logits are never stored: each tile is exponentiated as it leaves the
 * registers, against the bound |x_r| * max_v |w_v| >= every logit of row r, and kept as bf16
 * exp(l - bound). A row whose largest logit lies more than LMHEAD_BF16_GAP below its bound is
 * recomputed against that largest logit. Deterministic for any thread count, like the fp32 path. */
#define LMHEAD_BF16_GAP 48.0f
int lmhead_bf16_applies(int C);
/* Copies for the kernels of kernel_path_for_precision(PRECISION_BF16). */
engine_status lmhead_bf16_new(lmhead_bf16 **out, int V, int C, engine_error *err);
/* The same for a given bf16 path; ENGINE_ERR_INVALID for a path that is not bf16 or that this CPU
 * cannot run (kernel_path_supported). */
engine_status lmhead_bf16_new_on(lmhead_bf16 **out, int V, int C, kernel_path_id path, engine_error *err);
void lmhead_bf16_free(lmhead_bf16 *b);
size_t lmhead_bf16_bytes(int V, int C);
/* Rounds w [V][C] into b's copies, on every thread of pool (pool may be NULL: this thread). */
void lmhead_bf16_refresh(lmhead_bf16 *b, const real *w, threadpool *pool);

#endif
