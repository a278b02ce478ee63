/* The output layer's AMX kernels (kernel path "amx"): one chunk of rows on AMX tiles (TDPBF16PS,
 * fp32 accumulation), for lmhead.c. Engine-internal.
 *
 * Every tile is 16 rows of 64 bytes (palette 1): an fp32 accumulator of 16 x 16, or a bf16 operand
 * of 16 rows x 32 values; B operands are in the "VNNI" layout, where a tile row holds 16 pairs of
 * consecutive values of the contracted dimension. Sizes padded: C32, V16, V32 are C, V rounded up
 * to 32, 16, 32; RP the chunk's rows rounded up to 32; padding is zero.
 *
 * Two passes, so that no [V][rows] array exists and nothing but the weights streams from memory:
 *   sums:      logits^T [v][r] = sum_c wa[v][c] x[r][c] for every v (A = wa, B = XP), reduced at
 *              once (exp against the row's bound U_r) to the running max mx, the sum sm and the
 *              target's logit tl of each row;
 *   backward:  per block of LMHEAD_AMX_VB vocabulary rows, the block's logits again, E = bf16(s_r
 *              exp(l - U_r)) with s_r = g_r / sm_r (kept in the block's Eb and E2b), then while they
 *              are in cache
 *                DXT [c][r] += sum_v w[v][c] E[v][r]     A = wt, B = E2b
 *                dW  [v][c] += sum_r E[v][r] x[r][c]     A = Eb, B = XR
 * Every operand the kernels make or that lives in the chunk's scratch, and wt, is tile-major: each
 * tile is 1 KB in one piece (rows 64 bytes apart), so no tile load strides across pages or crowds
 * a few cache sets (the *_at functions below say where an entry lives); wa is row-major [V16][C32]
 * (rows C32 x 2 bytes apart) and dW is the caller's [V][C].
 * The one-hot terms (-g at the target) are lmhead.c's. The epilogues (exp, max, sum, rounding) are
 * portable C on 16-lane vectors, the same in every backend.
 *
 * The kernels are written once, in lmhead_amx_kernels.h, against a small tile interface (AMX_BEGIN,
 * AMX_ZERO, AMX_LOAD, AMX_STORE, AMX_DP, AMX_END); lmhead.c builds them on the AMX intrinsics
 * (lmhead_amx_hw.h; bench_amx.c a second time, with empty epilogues, to time the products alone), and
 * the tests build the same source on a C emulation of the documented tile semantics
 * (tests/engine/amx_emu.h), which lmhead_amx_use installs: so the kernels' packing and indexing are
 * checked on any CPU, and on hardware against the emulation. */
#ifndef ENGINE_LMHEAD_AMX_H
#define ENGINE_LMHEAD_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "bf16.h"

/* Vocabulary rows per block of the backward pass: Eb and E2b are 64 KB each at RP = 128. */
#define LMHEAD_AMX_VB 256

typedef struct {
    int C, C32, V, V16, V32, RP, rows;
    const bf16 *wa;    /* [V16][C32] the output head, zero beyond V and C */
    const bf16 *wt;    /* its transpose, amx_wt_at, zero beyond V */
    const bf16 *XP;    /* the chunk's x, amx_xp_at, zero beyond C and rows */
    const bf16 *XR;    /* the same x, amx_xr_at, zero beyond rows */
    bf16 *Eb;          /* a block's E, amx_eb_at (LMHEAD_AMX_VB x RP) */
    bf16 *E2b;         /* the same, amx_e2_at */
    float *DXT;        /* dx without its one-hot term, amx_dxt_at, accumulated by backward */
    float *stage;      /* lmhead_amx_stage_floats(C): two halves of four accumulator tiles, one dW tile [16][C] */
    const float *U;    /* [RP] the rows' logit bounds */
    const float *sc;   /* [RP] s_r = g_r / sum_r (0 for a row without gradient or past rows) */
    float *mx, *sm;    /* [RP] running max of the logits and sum of exp(l - U), updated by sums */
    float *tl;         /* [RP] out of sums: the logit of each row's target */
    const int32_t *tg; /* [rows] each row's target, already in 0..V-1 */
} lmhead_amx_chunk;

/* Where entry (row, column) of each tile-major operand lives (RP, C multiples of 16 or 32 as said;
 * 512 bf16 or 256 floats per tile). B operands hold pairs of the contracted dimension together. */
/* XP, B of the logits: x[r][c], tiles of 32 c (16 pairs) x 16 r, c-steps outer. */
static inline size_t amx_xp_at(int RP, int c, int r) {
    return ((size_t)(c / 32) * (size_t)(RP / 16) + (size_t)(r / 16)) * 512 + (size_t)((c % 32) / 2) * 32 +
           (size_t)(r % 16) * 2 + (size_t)(c & 1);
}
/* XR, B of dW: x[r][c], tiles of 32 r (16 pairs) x 16 c, r-steps outer. */
static inline size_t amx_xr_at(int C, int r, int c) {
    return ((size_t)(r / 32) * (size_t)(C / 16) + (size_t)(c / 16)) * 512 + (size_t)((r % 32) / 2) * 32 +
           (size_t)(c % 16) * 2 + (size_t)(r & 1);
}
/* wt, A of dx: w[v][c], tiles of 16 c x 32 v, c-tiles outer (V32 vocabulary columns). */
static inline size_t amx_wt_at(long V32, int c, long v) {
    return ((size_t)(c / 16) * (size_t)(V32 / 32) + (size_t)(v / 32)) * 512 + (size_t)(c % 16) * 32 + (size_t)(v % 32);
}
/* Eb, A of dW: E[v][r] for the block's vocabulary row lv, tiles of 16 v x 32 r, v-tiles outer. */
static inline size_t amx_eb_at(int RP, long lv, int r) {
    return ((size_t)(lv / 16) * (size_t)(RP / 32) + (size_t)(r / 32)) * 512 + (size_t)(lv % 16) * 32 + (size_t)(r % 32);
}
/* E2b, B of dx: E[v][r], tiles of 32 v (16 pairs) x 16 r, v-steps outer. */
static inline size_t amx_e2_at(int RP, long lv, int r) {
    return ((size_t)(lv / 32) * (size_t)(RP / 16) + (size_t)(r / 16)) * 512 + (size_t)((lv % 32) / 2) * 32 +
           (size_t)(r % 16) * 2 + (size_t)(lv & 1);
}
/* DXT, accumulators of dx: [c][r] in tiles of 16 c x 16 r, c-tiles outer. */
static inline size_t amx_dxt_at(int RP, int c, int r) {
    return ((size_t)(c / 16) * (size_t)(RP / 16) + (size_t)(r / 16)) * 256 + (size_t)(c % 16) * 16 + (size_t)(r % 16);
}

/* Floats of stage the kernels need for d_model C. */
static inline size_t lmhead_amx_stage_floats(int C) { return (size_t)(2 * 4 * 256 + 16 * C); }

typedef struct {
    const char *name;                        /* "hardware", "emulated" */
    void (*sums)(const lmhead_amx_chunk *k); /* mx, sm, tl over the whole vocabulary */
    /* vocabulary rows [vlo, vhi) (vlo a multiple of 32; vhi one, or V): DXT += when want_dx, dW rows
     * [vlo, vhi) += when dW is non-NULL */
    void (*backward)(const lmhead_amx_chunk *k, long vlo, long vhi, float *dW, int want_dx);
} lmhead_amx_kernels;

/* Tests: the AMX path's kernels become k (the emulated backend) for the whole process, and the amx
 * kernel path counts as runnable while they are installed (kernel_path_amx_emulated); NULL returns
 * to the hardware kernels, and the amx path to what the CPU and the build allow. */
void lmhead_amx_use(const lmhead_amx_kernels *k);

/* The tile configuration every kernel loads: palette 1, tiles 0-7 of 16 rows x 64 bytes. */
extern const unsigned char lmhead_amx_config[64];

#endif
