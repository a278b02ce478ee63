/* The output layer's AMX kernels (kernel path "amx"): the three bf16 products of one chunk of rows
 * on AMX tiles (TDPBF16PS, fp32 accumulation), for lmhead.c. Engine-internal.
 *
 * Every tile is 16 rows of 64 bytes (palette 1): an fp32 accumulator of 16 x 16, or a bf16 operand
 * of 16 rows x 32 values; B operands are in the "VNNI" layout, where a tile row holds 16 pairs of
 * consecutive values of the contracted dimension. The chunk's operands (sizes padded: C32, V16, V32
 * are C, V rounded up to 32, 16, 32; RP the chunk's rows rounded up to 32; padding is zero):
 *   logits^T [v][r] = sum_c  wa[v][c]  . XP[c/2][r][c%2]      A = wa [V16][C32], B = XP [C32/2][RP][2]
 *   DXT      [c][r] = sum_v  wt[c][v]  . E2[v/2][r][v%2]      A = wt [C][V32],   B = E2 [V32/2][RP][2]
 *   dW       [v][c] += sum_r E[v][r]   . XSp[r/2][c][r%2]     A = E [V16][RP],   B = XSp [RP/2][C][2]
 * where E = E2 = bf16(exp(logit - U_r)) (E in rows, E2 with pairs of vocabulary rows interleaved).
 * The logits' epilogue (exp against the row's bound, running max and sum per row, the target's
 * logit, E and E2) is portable C on 16-lane vectors, the same in every backend.
 *
 * The kernels are written once, in lmhead_amx_kernels.h, against a small tile interface (AMX_BEGIN,
 * AMX_ZERO, AMX_LOAD, AMX_STORE, AMX_DP, AMX_END); lmhead.c builds them on the AMX intrinsics, and
 * the tests build the same source on a C emulation of the documented tile semantics
 * (tests/engine/amx_emu.h), which lmhead_amx_use installs: so the kernels' packing and indexing are
 * checked on any CPU, and on hardware against the emulation. */
#ifndef ENGINE_LMHEAD_AMX_H
#define ENGINE_LMHEAD_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "bf16.h"

typedef struct {
    int C, C32, V, V16, V32, RP, rows;
    const bf16 *wa;    /* [V16][C32] the output head, zero beyond V and C */
    const bf16 *wt;    /* [C][V32] its transpose, zero beyond V */
    const bf16 *XP;    /* [C32/2][RP][2] the chunk's x, pairs of columns together, zero beyond C and rows */
    bf16 *E;           /* [V16][RP] out of logits */
    bf16 *E2;          /* [V32/2][RP][2] out of logits, zero beyond V */
    const bf16 *XSp;   /* [RP/2][C][2] s_r x_r, pairs of rows together, zero beyond rows */
    float *DXT;        /* [C][RP] out of dx */
    float *stage;      /* [4][16][16] scratch for accumulator tiles (and one dW tile, [16][C]) */
    const float *U;    /* [RP] the rows' logit bounds */
    float *mx, *sm;    /* [RP] running max of the logits and sum of E, updated by logits */
    float *tl;         /* [RP] out of logits: the logit of each row's target */
    const int32_t *tg; /* [rows] each row's target, already in 0..V-1 */
} lmhead_amx_chunk;

/* Floats of stage the kernels need for d_model C. */
static inline size_t lmhead_amx_stage_floats(int C) { return (size_t)(4 * 256 > 16 * C ? 4 * 256 : 16 * C); }

typedef struct {
    const char *name; /* "hardware", "emulated" */
    /* logits^T, its epilogue: E, E2 (and E2's zero rows from V to V32), mx, sm, tl */
    void (*logits)(const lmhead_amx_chunk *k);
    void (*dx)(const lmhead_amx_chunk *k); /* DXT */
    /* dW rows [vlo, vhi) (vlo a multiple of 16) += the chunk's contribution */
    void (*dw)(const lmhead_amx_chunk *k, long vlo, long vhi, float *dw);
} lmhead_amx_kernels;

/* Tests: the AMX path's kernels become k (the emulated backend) for the whole process, and the amx
 * kernel path counts as runnable while they are installed; NULL returns to the hardware kernels. */
void lmhead_amx_use(const lmhead_amx_kernels *k);
/* 1 when the amx path can run: emulated kernels installed, or the hardware kernels built and the
 * CPU and OS able to run them; else 0 and the reason in why (may be NULL). */
int lmhead_amx_ready(char *why, size_t why_len);

/* The tile configuration every kernel loads: palette 1, tiles 0-7 of 16 rows x 64 bytes. */
extern const unsigned char lmhead_amx_config[64];

#endif
