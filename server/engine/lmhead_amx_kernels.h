/* The AMX kernels of the output layer, written once against a tile interface (see lmhead_amx.h)
 * and included once per backend. No include guard: the includer defines, before each inclusion,
 *   AMX_SFX                     the suffix of this backend's function names (hw, emu)
 *   AMX_TGT                     an attribute for its kernel functions (the target), or nothing
 *   AMX_BEGIN()                 load lmhead_amx_config on this thread
 *   AMX_ZERO(t)                 tile t = 0
 *   AMX_LOAD(t, ptr, stride)    tile t = 16 rows of 64 bytes from ptr, rows `stride` bytes apart
 *   AMX_STORE(t, ptr, stride)   the reverse
 *   AMX_DP(c, a, b)             TDPBF16PS: c[m][n] += sum_k a[m][2k] b[k][2n] + a[m][2k+1] b[k][2n+1]
 *   AMX_END()                   release the tiles
 *   AMX_PREFETCH(p)             a hint that the 64 bytes at p will be read soon (may do nothing; p
 *                               need not be valid)
 * and may define AMX_EPI_SUMS and AMX_EPI_GRAD, functions of amx_epilogue_sums's and
 * amx_epilogue_grad's arguments that do the same (lmhead_amx_epi.h); else those portable ones.
 * Tiles 0-3 hold accumulators, 4-5 A operands, 6-7 B operands. */
#include <string.h>

#include "fastmath.h"
#include "lmhead_amx.h"

#ifndef LMHEAD_AMX_SHARED
#define LMHEAD_AMX_SHARED
/* ---- what every backend shares: the logits' epilogue, portable C ---- */

typedef unsigned amx_u16 __attribute__((vector_size(64)));
typedef uint16_t amx_h16 __attribute__((vector_size(32)));
typedef uint16_t amx_h32 __attribute__((vector_size(64)));

/* 16 floats rounded to bf16 as bf16_from_float does (nearest, ties to even; NaN kept NaN). */
static inline amx_h16 amx_round16(fm_v16 x) {
    amx_u16 u = (amx_u16)x;
    amx_u16 r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    amx_u16 nan = (amx_u16)((u & 0x7fffffffu) > 0x7f800000u);
    r = (nan & ((u >> 16) | 0x40u)) | (~nan & r);
    return __builtin_convertvector(r, amx_h16);
}

/* The running max and sum of one logits tile T[j][i] (vocabulary row v0 + j, row r0 + i of the
 * chunk's 16 at r0): exp against each row's bound, over the vocabulary rows below V in order, and
 * the targets' logits. */
static inline void amx_epilogue_sums(const lmhead_amx_chunk *k, const float *T, long v0, int r0) {
    fm_v16 u = fm_load(k->U + r0), m = fm_load(k->mx + r0), s = fm_load(k->sm + r0);
    int n = k->V - v0 < 16 ? (int)(k->V - v0) : 16;
    for (int j = 0; j < n; j++) {
        fm_v16 l = fm_load(T + 16 * j);
        m = fm_select(l > m, l, m);
        s += fm_exp16(l - u);
    }
    fm_store(k->mx + r0, m);
    fm_store(k->sm + r0, s);
    for (int i = 0; i < 16 && r0 + i < k->rows; i++) {
        long t = k->tg[r0 + i];
        if (t >= v0 && t < v0 + 16) k->tl[r0 + i] = T[16 * (t - v0) + i];
    }
}

/* The gradient of one logits tile: E = bf16(s_r exp(l - U_r)) for vocabulary rows v0 + j below
 * vend (zero from vend on), into the block's Eb rows (v0 - vb + j) and E2b pairs. */
static inline void amx_epilogue_grad(const lmhead_amx_chunk *k, const float *T, long vb, long v0, long vend, int r0) {
    const int RP = k->RP;
    fm_v16 u = fm_load(k->U + r0), sc = fm_load(k->sc + r0);
    amx_h16 h[16];
    long lv = v0 - vb;
    for (int j = 0; j < 16; j++) {
        if (v0 + j >= vend)
            h[j] = (amx_h16){0};
        else
            h[j] = amx_round16(fm_exp16(fm_load(T + 16 * j) - u) * sc);
        memcpy(k->Eb + amx_eb_at(RP, lv + j, r0), &h[j], sizeof h[j]);
    }
    for (int p = 0; p < 8; p++) {
        amx_h32 o = __builtin_shufflevector(h[2 * p], h[2 * p + 1], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7,
                                            23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        memcpy(k->E2b + amx_e2_at(RP, lv + 2 * p, r0), &o, sizeof o);
    }
}
#endif

#ifndef AMX_EPI_SUMS
#define AMX_EPI_SUMS amx_epilogue_sums
#endif
#ifndef AMX_EPI_GRAD
#define AMX_EPI_GRAD amx_epilogue_grad
#endif

#define AMX_CAT2(a, b) a##_##b
#define AMX_CAT(a, b) AMX_CAT2(a, b)
#define AMX_NAME(n) AMX_CAT(n, AMX_SFX)

#include "amx_steps.h"

/* The epilogues of a stored block of logits (stage tiles t + 256 q: vocabulary tile v0 + 16 (q / 2),
 * row tile r0 + 16 (q % 2); the second vocabulary tile only below vz), in an order that adds each
 * row's vocabulary tiles in turn. */
static void AMX_NAME(amx_epilogues)(const lmhead_amx_chunk *k, const float *t, long v0, int r0, long vz, int grad,
                                    long vb, long vend) {
    for (int q = 0; q < 4; q++) {
        long v = v0 + (q / 2) * 16;
        int r = r0 + (q % 2) * 16;
        if (v >= vz) break;
        if (grad)
            AMX_EPI_GRAD(k, t + 256 * q, vb, v, vend, r);
        else
            AMX_EPI_SUMS(k, t + 256 * q, v, r);
    }
}

/* The logits of vocabulary tiles [va, vz) (multiples of 16) for every pair of row tiles, in blocks
 * of two vocabulary tiles x two row tiles (2 x 2 accumulators, one tile load per product), each
 * block handed to an epilogue as stage tiles T[j][i] (vocabulary row v + j, row r + i): the sums'
 * (grad 0) or the gradient's (grad 1, of the block [vb, vend)). A block's tiles go to one half of
 * the stage, and its epilogue runs after the next block's products are issued, so that the tiles
 * compute while the vector units work. */
AMX_TGT static void AMX_NAME(amx_logits_sweep)(const lmhead_amx_chunk *k, long va, long vz, int grad, long vb,
                                               long vend) {
    const int RP = k->RP, C32 = k->C32;
    const long sa = (long)C32 * 2;
    /* the next pair of vocabulary tiles' weights (32 rows of sa bytes) are prefetched while this
     * pair's row blocks run, a share per row block */
    const int nrb = RP / 32, lines = (int)((32 * sa / 64 + nrb - 1) / nrb);
    long pv = -1; /* the block stored in the stage's half `half`, its epilogue pending */
    int pr = 0, half = 0;
    for (long v0 = va; v0 < vz; v0 += 32) {
        const int two = v0 + 16 < vz;
        const bf16 *a0 = k->wa + (size_t)v0 * C32, *a1 = a0 + (size_t)16 * C32;
        for (int r0 = 0; r0 < RP; r0 += 32) {
            if (v0 + 32 < vz) {
                const char *pf = (const char *)(a0 + (size_t)32 * C32) + (size_t)64 * lines * (r0 / 32);
                for (int i = 0; i < lines; i++) AMX_PREFETCH(pf + 64 * i);
            }
            AMX_ZERO(0);
            AMX_ZERO(1);
            AMX_ZERO(2);
            AMX_ZERO(3);
            const bf16 *b = k->XP + amx_xp_at(RP, 0, r0);
            AMX_NAME(amx_steps)(C32 / 32, a0, two ? a1 : NULL, sa, 32, b, b + 512, 64, (size_t)(RP / 16) * 512);
            if (pv >= 0) AMX_NAME(amx_epilogues)(k, k->stage + 1024 * half, pv, pr, vz, grad, vb, vend);
            half ^= 1;
            float *t = k->stage + 1024 * half;
            AMX_STORE(0, t, 64);
            AMX_STORE(1, t + 256, 64);
            if (two) {
                AMX_STORE(2, t + 512, 64);
                AMX_STORE(3, t + 768, 64);
            }
            pv = v0;
            pr = r0;
        }
    }
    if (pv >= 0) AMX_NAME(amx_epilogues)(k, k->stage + 1024 * half, pv, pr, vz, grad, vb, vend);
}

/* Pass 1: every logit of the chunk, reduced to the rows' running max and sum and their targets'
 * logits (mx, sm, tl); nothing of the [V][rows] logits is kept. */
AMX_TGT static void AMX_NAME(amx_sums)(const lmhead_amx_chunk *k) {
    AMX_BEGIN();
    AMX_NAME(amx_logits_sweep)(k, 0, k->V16, 0, 0, 0);
    AMX_END();
}

/* DXT[c][r] += sum over the block's n32 vocabulary rows (a multiple of 32) of w[vb + v][c] E[v][r]. */
AMX_TGT static void AMX_NAME(amx_dx_block)(const lmhead_amx_chunk *k, long vb, long n32) {
    const int RP = k->RP, C = k->C;
    const size_t a1 = (size_t)(k->V32 / 32) * 512; /* from a wt tile to the one 16 c further */
    for (int c0 = 0; c0 < C; c0 += 32) {
        int nc = C - c0 >= 32 ? 2 : 1;
        for (int r0 = 0; r0 < RP; r0 += 32) {
            float *d0 = k->DXT + amx_dxt_at(RP, c0, r0), *d1 = d0 + (size_t)(RP / 16) * 256;
            AMX_LOAD(0, d0, 64);
            AMX_LOAD(1, d0 + 256, 64);
            if (nc == 2) {
                AMX_LOAD(2, d1, 64);
                AMX_LOAD(3, d1 + 256, 64);
            }
            const bf16 *b = k->E2b + amx_e2_at(RP, 0, r0), *a = k->wt + amx_wt_at(k->V32, c0, vb);
            const int steps = (int)(n32 / 32);
            AMX_NAME(amx_steps)(steps, a, nc == 2 ? a + a1 : NULL, 64, 512, b, b + 512, 64, (size_t)(RP / 16) * 512);
            AMX_STORE(0, d0, 64);
            AMX_STORE(1, d0 + 256, 64);
            if (nc == 2) {
                AMX_STORE(2, d1, 64);
                AMX_STORE(3, d1 + 256, 64);
            }
        }
    }
}

/* dW rows [v0, v0 + 16) (out, stride sdw bytes: dW itself, or the stage for a partial tile) +=
 * the block's E rows lv.. . x, column tiles in pairs. */
AMX_TGT static void AMX_NAME(amx_dw_tile)(const lmhead_amx_chunk *k, long lv, float *out, long sdw) {
    const int RP = k->RP, C = k->C;
    for (int c0 = 0; c0 < C; c0 += 32) {
        int nc = C - c0 >= 32 ? 2 : 1;
        AMX_LOAD(0, out + c0, sdw);
        if (nc == 2) AMX_LOAD(1, out + c0 + 16, sdw);
        for (int r = 0; r < RP; r += 32) {
            const bf16 *b = k->XR + amx_xr_at(C, r, c0);
            AMX_LOAD(4, k->Eb + amx_eb_at(RP, lv, r), 64);
            AMX_LOAD(6, b, 64);
            AMX_DP(0, 4, 6);
            if (nc == 2) {
                AMX_LOAD(7, b + 512, 64);
                AMX_DP(1, 4, 7);
            }
        }
        AMX_STORE(0, out + c0, sdw);
        if (nc == 2) AMX_STORE(1, out + c0 + 16, sdw);
    }
}

/* dW rows [v0, v0 + 32) += the block's E rows lv.. . x, 2 x 2 tiles at a time (C a multiple of 32). */
AMX_TGT static void AMX_NAME(amx_dw_pair)(const lmhead_amx_chunk *k, long lv, float *out) {
    const int RP = k->RP, C = k->C;
    const long sd = (long)C * 4;
    for (int c0 = 0; c0 < C; c0 += 32) {
        float *d = out + c0;
        AMX_LOAD(0, d, sd);
        AMX_LOAD(1, d + 16, sd);
        AMX_LOAD(2, d + (size_t)16 * C, sd);
        AMX_LOAD(3, d + (size_t)16 * C + 16, sd);
        const bf16 *b = k->XR + amx_xr_at(C, 0, c0), *e = k->Eb + amx_eb_at(RP, lv, 0);
        AMX_NAME(amx_steps)(RP / 32, e, e + amx_eb_at(RP, 16, 0), 64, 512, b, b + 512, 64, (size_t)(C / 16) * 512);
        AMX_STORE(0, d, sd);
        AMX_STORE(1, d + 16, sd);
        AMX_STORE(2, d + (size_t)16 * C, sd);
        AMX_STORE(3, d + (size_t)16 * C + 16, sd);
    }
}

/* Pass 2 over vocabulary rows [vlo, vhi) (vlo a multiple of 32, vhi one or V), LMHEAD_AMX_VB at a
 * time: the logits again, E scaled by the rows' s_r, then DXT += and (dW non-NULL) dW rows +=. */
AMX_TGT static void AMX_NAME(amx_backward)(const lmhead_amx_chunk *k, long vlo, long vhi, float *dW, int want_dx) {
    const int RP = k->RP, C = k->C;
    AMX_BEGIN();
    for (long vb = vlo; vb < vhi; vb += LMHEAD_AMX_VB) {
        long vend = vb + LMHEAD_AMX_VB < vhi ? vb + LMHEAD_AMX_VB : vhi, n = vend - vb;
        long n16 = (n + 15) / 16 * 16, n32 = (n + 31) / 32 * 32;
        AMX_NAME(amx_logits_sweep)(k, vb, vb + n16, 1, vb, vend);
        /* dx contracts over pairs of vocabulary rows, 32 at a time: the last 16 of E2b are zero */
        if (n32 > n16)
            for (int r0 = 0; r0 < RP; r0 += 16) memset(k->E2b + amx_e2_at(RP, n16, r0), 0, sizeof(bf16) * 256);
        if (want_dx) AMX_NAME(amx_dx_block)(k, vb, n32);
        if (!dW) continue;
        long v0 = vb;
        if (C % 32 == 0)
            for (; v0 + 32 <= vend; v0 += 32) AMX_NAME(amx_dw_pair)(k, v0 - vb, dW + (size_t)v0 * C);
        for (; v0 + 16 <= vend; v0 += 16) AMX_NAME(amx_dw_tile)(k, v0 - vb, dW + (size_t)v0 * C, (long)C * 4);
        if (v0 < vend) {
            /* a last tile of fewer than 16 rows: through the stage, so no row past vend is touched */
            int m = (int)(vend - v0);
            float *t = k->stage + 2048;
            memset(t, 0, sizeof(float) * 16 * (size_t)C);
            memcpy(t, dW + (size_t)v0 * C, sizeof(float) * (size_t)m * C);
            AMX_NAME(amx_dw_tile)(k, v0 - vb, t, (long)C * 4);
            memcpy(dW + (size_t)v0 * C, t, sizeof(float) * (size_t)m * C);
        }
    }
    AMX_END();
}

#undef AMX_EPI_SUMS
#undef AMX_EPI_GRAD
#undef AMX_NAME
#undef AMX_CAT
#undef AMX_CAT2
