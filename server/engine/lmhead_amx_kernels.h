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

/* One logits tile T[j][i] = logit of vocabulary row v0 + j for row r0 + i (the chunk's 16 rows at
 * r0): exp against each row's bound into E and E2, running max and sum over the vocabulary rows
 * below V in order, and the targets' logits. */
static void amx_epilogue(const lmhead_amx_chunk *k, const float *T, long v0, int r0) {
    const int RP = k->RP;
    fm_v16 u = fm_load(k->U + r0), m = fm_load(k->mx + r0), s = fm_load(k->sm + r0);
    amx_h16 h[16];
    for (int j = 0; j < 16; j++) {
        if (v0 + j >= k->V) {
            h[j] = (amx_h16){0};
        } else {
            fm_v16 l = fm_load(T + 16 * j);
            m = fm_select(l > m, l, m);
            fm_v16 x = fm_exp16(l - u);
            s += x;
            h[j] = amx_round16(x);
        }
        memcpy(k->E + (size_t)(v0 + j) * RP + r0, &h[j], sizeof h[j]);
    }
    fm_store(k->mx + r0, m);
    fm_store(k->sm + r0, s);
    /* E2: rows v0 + 2p and v0 + 2p + 1 interleaved, per row r */
    for (int p = 0; p < 8; p++) {
        amx_h32 o = __builtin_shufflevector(h[2 * p], h[2 * p + 1], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7,
                                            23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        memcpy(k->E2 + ((size_t)(v0 / 2 + p) * RP + r0) * 2, &o, sizeof o);
    }
    for (int i = 0; i < 16 && r0 + i < k->rows; i++) {
        long t = k->tg[r0 + i];
        if (t >= v0 && t < v0 + 16) k->tl[r0 + i] = T[16 * (t - v0) + i];
    }
}
#endif

#define AMX_CAT2(a, b) a##_##b
#define AMX_CAT(a, b) AMX_CAT2(a, b)
#define AMX_NAME(n) AMX_CAT(n, AMX_SFX)

/* logits^T of vocabulary tiles [v0, v0 + 16 nv) (nv 1 or 2) for the row tiles at r0, r0 + 16, then
 * the epilogue of each tile, in vocabulary order. */
AMX_TGT static void AMX_NAME(amx_logits_block)(const lmhead_amx_chunk *k, long v0, int nv, int r0) {
    const int RP = k->RP, C32 = k->C32;
    const long sa = (long)C32 * 2, sb = (long)RP * 4;
    AMX_ZERO(0);
    AMX_ZERO(1);
    AMX_ZERO(2);
    AMX_ZERO(3);
    for (int c = 0; c < C32; c += 32) {
        const bf16 *b = k->XP + ((size_t)(c / 2) * RP + r0) * 2;
        AMX_LOAD(6, b, sb);
        AMX_LOAD(7, b + 32, sb);
        AMX_LOAD(4, k->wa + (size_t)v0 * C32 + c, sa);
        AMX_DP(0, 4, 6);
        AMX_DP(1, 4, 7);
        if (nv == 2) {
            AMX_LOAD(5, k->wa + (size_t)(v0 + 16) * C32 + c, sa);
            AMX_DP(2, 5, 6);
            AMX_DP(3, 5, 7);
        }
    }
    float *st = k->stage;
    AMX_STORE(0, st, 64);
    AMX_STORE(1, st + 256, 64);
    if (nv == 2) {
        AMX_STORE(2, st + 512, 64);
        AMX_STORE(3, st + 768, 64);
    }
    amx_epilogue(k, st, v0, r0);
    amx_epilogue(k, st + 256, v0, r0 + 16);
    if (nv == 2) {
        amx_epilogue(k, st + 512, v0 + 16, r0);
        amx_epilogue(k, st + 768, v0 + 16, r0 + 16);
    }
}

AMX_TGT static void AMX_NAME(amx_logits)(const lmhead_amx_chunk *k) {
    const int RP = k->RP;
    /* E2's rows from V16 to V32 are never written by an epilogue: zero them (the scratch is shared) */
    if (k->V32 > k->V16) memset(k->E2 + (size_t)k->V16 / 2 * RP * 2, 0, sizeof(bf16) * (size_t)(k->V32 - k->V16) * RP);
    AMX_BEGIN();
    for (long v0 = 0; v0 < k->V16; v0 += 32) {
        int nv = k->V16 - v0 >= 32 ? 2 : 1;
        for (int r0 = 0; r0 < RP; r0 += 32) AMX_NAME(amx_logits_block)(k, v0, nv, r0);
    }
    AMX_END();
}

/* DXT[c][r] = sum_v wt[c][v] E2: vocabulary blocks of 256 (wt's and E2's share, 64 KB each at
 * C = RP = 128, stay in L2 while every (column pair, row pair) of tiles passes over them); the
 * accumulators go through DXT between blocks. */
AMX_TGT static void AMX_NAME(amx_dx)(const lmhead_amx_chunk *k) {
    const int RP = k->RP, C = k->C;
    const long sa = (long)k->V32 * 2, sb = (long)RP * 4, sd = (long)RP * 4;
    AMX_BEGIN();
    for (long vb = 0; vb < k->V32; vb += 256) {
        long ve = vb + 256 < k->V32 ? vb + 256 : k->V32;
        for (int c0 = 0; c0 < C; c0 += 32) {
            int nc = C - c0 >= 32 ? 2 : 1;
            for (int r0 = 0; r0 < RP; r0 += 32) {
                float *d = k->DXT + (size_t)c0 * RP + r0;
                if (vb == 0) {
                    AMX_ZERO(0);
                    AMX_ZERO(1);
                    AMX_ZERO(2);
                    AMX_ZERO(3);
                } else {
                    AMX_LOAD(0, d, sd);
                    AMX_LOAD(1, d + 16, sd);
                    if (nc == 2) {
                        AMX_LOAD(2, d + (size_t)16 * RP, sd);
                        AMX_LOAD(3, d + (size_t)16 * RP + 16, sd);
                    }
                }
                for (long v = vb; v < ve; v += 32) {
                    const bf16 *b = k->E2 + ((size_t)(v / 2) * RP + r0) * 2;
                    AMX_LOAD(6, b, sb);
                    AMX_LOAD(7, b + 32, sb);
                    AMX_LOAD(4, k->wt + (size_t)c0 * k->V32 + v, sa);
                    AMX_DP(0, 4, 6);
                    AMX_DP(1, 4, 7);
                    if (nc == 2) {
                        AMX_LOAD(5, k->wt + (size_t)(c0 + 16) * k->V32 + v, sa);
                        AMX_DP(2, 5, 6);
                        AMX_DP(3, 5, 7);
                    }
                }
                AMX_STORE(0, d, sd);
                AMX_STORE(1, d + 16, sd);
                if (nc == 2) {
                    AMX_STORE(2, d + (size_t)16 * RP, sd);
                    AMX_STORE(3, d + (size_t)16 * RP + 16, sd);
                }
            }
        }
    }
    AMX_END();
}

/* dW rows [v0, v0 + 16) (out, stride sdw bytes: dW itself, or the stage for a partial tile) +=
 * E rows v0.. . XSp, column tiles in pairs. */
AMX_TGT static void AMX_NAME(amx_dw_tile)(const lmhead_amx_chunk *k, long v0, float *out, long sdw) {
    const int RP = k->RP, C = k->C;
    const long sa = (long)RP * 2, sb = (long)C * 4;
    for (int c0 = 0; c0 < C; c0 += 32) {
        int nc = C - c0 >= 32 ? 2 : 1;
        AMX_LOAD(0, out + c0, sdw);
        if (nc == 2) AMX_LOAD(1, out + c0 + 16, sdw);
        for (int r = 0; r < RP; r += 32) {
            AMX_LOAD(4, k->E + (size_t)v0 * RP + r, sa);
            const bf16 *b = k->XSp + ((size_t)(r / 2) * C + c0) * 2;
            AMX_LOAD(6, b, sb);
            AMX_DP(0, 4, 6);
            if (nc == 2) {
                AMX_LOAD(7, b + 32, sb);
                AMX_DP(1, 4, 7);
            }
        }
        AMX_STORE(0, out + c0, sdw);
        if (nc == 2) AMX_STORE(1, out + c0 + 16, sdw);
    }
}

AMX_TGT static void AMX_NAME(amx_dw)(const lmhead_amx_chunk *k, long vlo, long vhi, float *dW) {
    const int C = k->C;
    AMX_BEGIN();
    long v0 = vlo;
    for (; v0 + 16 <= vhi; v0 += 16) AMX_NAME(amx_dw_tile)(k, v0, dW + (size_t)v0 * C, (long)C * 4);
    if (v0 < vhi) {
        /* a last tile of fewer than 16 rows: through the stage, so no row past vhi is touched */
        int n = (int)(vhi - v0);
        memset(k->stage, 0, sizeof(float) * 16 * (size_t)C);
        memcpy(k->stage, dW + (size_t)v0 * C, sizeof(float) * (size_t)n * C);
        AMX_NAME(amx_dw_tile)(k, v0, k->stage, (long)C * 4);
        memcpy(dW + (size_t)v0 * C, k->stage, sizeof(float) * (size_t)n * C);
    }
    AMX_END();
}

#undef AMX_NAME
#undef AMX_CAT
#undef AMX_CAT2
