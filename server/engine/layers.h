/* Forward/backward pairs of the transformer's pieces, on flat row-major arrays of `real`.
 * Every function works on the rows it is given, so the model can hand each worker thread its
 * own block of rows or its own (batch, head) units. Nothing here allocates or fails.
 * Backward functions ACCUMULATE (+=) into parameter gradients and, where noted, input gradients. */
#ifndef ENGINE_LAYERS_H
#define ENGINE_LAYERS_H

#include "real.h"

#define LAYERNORM_EPS 1e-5

/* out = (inp - mean) * rstd * w + b per row of C; mean and rstd saved for the backward pass. */
void layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, long rows,
                       int C);
/* dinp += ..., dw += ..., db += ... */
void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, long rows, int C);

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void gelu_forward(real *out, const real *inp, long n);
/* dinp = gelu'(inp) * dout (overwrites) */
void gelu_backward(real *dinp, const real *inp, const real *dout, long n);

/* out[r, o] = bias[o] + sum_i inp[r, i] W[o, i]   (W in PyTorch [out, in] layout; bias may be NULL) */
void linear_forward(real *out, const real *inp, const real *W, const real *bias, long rows, int in, int out_dim);

/* RoPE tables for positions 0..T-1 and head width d (even): angle(m, i) = m * base^(-2i/d),
 * computed in double and stored as real; cos/sin are [T, d/2]. */
void rope_tables(real *cos_t, real *sin_t, int T, int d, double base);
/* Rotates adjacent pairs (2i, 2i+1) of x[d] by the angles of one position (tables' row):
 * out[2i] = x0 cos - x1 sin, out[2i+1] = x0 sin + x1 cos. out may equal x. */
void rope_rotate(real *out, const real *x, const real *cos_row, const real *sin_row, int d);
/* The transpose (inverse) rotation: used to carry gradients back through rope_rotate. */
void rope_rotate_inverse(real *out, const real *x, const real *cos_row, const real *sin_row, int d);

/* Causal attention for one (batch element, head). Query/key rows t are at q + t*qk_stride and
 * k + t*qk_stride (d wide), value rows at v + t*v_stride. att[T*T] receives the probabilities
 * (zeros above the diagonal), y + t*y_stride the head's output. score(t,s) = scale * q_t . k_s for
 * s <= t. Adds the summed row entropies (natural log) to *entropy_sum. */
void attention_forward_unit(const real *q, const real *k, int qk_stride, const real *v, int v_stride, real *att,
                            real *y, int y_stride, int T, int d, real scale, double *entropy_sum);
/* Gradients for one unit from dy and the saved probabilities: dq, dk (stride dqk_stride) and dv
 * (stride dv_stride) are OVERWRITTEN. If dscale is non-NULL, dL/dscale is added to it.
 * scratch holds T reals. */
void attention_backward_unit(const real *q, const real *k, int qk_stride, const real *v, int v_stride, const real *att,
                             const real *dy, int y_stride, real *dq, real *dk, int dqk_stride, real *dv, int dv_stride,
                             int T, int d, real scale, double *dscale, real *scratch);

#endif
