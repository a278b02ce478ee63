/* Tests only: AMX tiles emulated in C, after the documented semantics (Intel's instruction set
 * reference: LDTILECFG palette 1, TILELOADD / TILESTORED rows of colsb bytes `stride` apart,
 * TILEZERO, TDPBF16PS), and the output layer's AMX kernels (lmhead_amx_kernels.h, the very source
 * lmhead.c builds on the intrinsics) built on them: amx_emu_kernels, for lmhead_amx_use.
 *
 * TDPBF16PS dst, a, b:  for m < dst.rows, k < a.colsb / 4, n < dst.colsb / 4:
 *     dst[m][n] += fp32(a[m].bf16[2k]) * fp32(b[k].bf16[2n]);  dst[m][n] += fp32(a[m].bf16[2k+1]) *
 * fp32(b[k].bf16[2n+1]) in that order, each addition rounded to nearest even; bf16 inputs that are denormal count as
 * zero (DAZ) and denormal results are flushed to zero (FTZ), whatever MXCSR says. A tile used before a configuration,
 * of another shape than the configuration's, or with a bad number is counted in amx_emu_misuse (the tests require 0).
 * Each thread has its own tiles, as on hardware. */
#ifndef TESTS_AMX_EMU_H
#define TESTS_AMX_EMU_H

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "bf16.h"
#include "lmhead_amx.h"

static atomic_int amx_emu_misuse;
static atomic_long amx_emu_dps; /* TDPBF16PS executed, for the tests' own accounting */

static _Thread_local struct {
    int configured;
    int rows[8], colsb[8];
    unsigned char t[8][16][64];
} amx_emu;

static void amx_emu_begin(const unsigned char *cfg) {
    amx_emu.configured = cfg[0] == 1 && cfg[1] == 0; /* palette 1, start_row 0 */
    if (!amx_emu.configured) atomic_fetch_add(&amx_emu_misuse, 1);
    for (int t = 0; t < 8; t++) {
        amx_emu.colsb[t] = cfg[16 + 2 * t] | cfg[17 + 2 * t] << 8;
        amx_emu.rows[t] = cfg[48 + t];
        if (amx_emu.colsb[t] > 64 || amx_emu.rows[t] > 16) atomic_fetch_add(&amx_emu_misuse, 1);
    }
    memset(amx_emu.t, 0, sizeof amx_emu.t); /* LDTILECFG zeroes the tiles */
}

static int amx_emu_ok(int t) {
    int ok = amx_emu.configured && t >= 0 && t < 8 && amx_emu.rows[t] > 0;
    if (!ok) atomic_fetch_add(&amx_emu_misuse, 1);
    return ok;
}

static void amx_emu_zero(int t) {
    if (amx_emu_ok(t)) memset(amx_emu.t[t], 0, sizeof amx_emu.t[t]);
}

static void amx_emu_load(int t, const void *p, long stride) {
    if (!amx_emu_ok(t)) return;
    memset(amx_emu.t[t], 0, sizeof amx_emu.t[t]);
    for (int m = 0; m < amx_emu.rows[t]; m++)
        memcpy(amx_emu.t[t][m], (const unsigned char *)p + (long)m * stride, (size_t)amx_emu.colsb[t]);
}

static void amx_emu_store(int t, void *p, long stride) {
    if (!amx_emu_ok(t)) return;
    for (int m = 0; m < amx_emu.rows[t]; m++)
        memcpy((unsigned char *)p + (long)m * stride, amx_emu.t[t][m], (size_t)amx_emu.colsb[t]);
}

/* A bf16 input as TDPBF16PS reads it: denormals are zero (the sign kept). */
static float amx_emu_in(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    if ((h & 0x7f80) == 0) h &= 0x8000;
    return bf16_to_float(h);
}

static float amx_emu_ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

static void amx_emu_dp(int c, int a, int b) {
    if (!amx_emu_ok(c) || !amx_emu_ok(a) || !amx_emu_ok(b)) return;
    const int M = amx_emu.rows[c], N = amx_emu.colsb[c] / 4, K = amx_emu.colsb[a] / 4;
    /* shapes TDPBF16PS requires: a has dst's rows, b has a's K rows and dst's width */
    if (amx_emu.rows[a] != M || amx_emu.rows[b] != K || amx_emu.colsb[b] != amx_emu.colsb[c]) {
        atomic_fetch_add(&amx_emu_misuse, 1);
        return;
    }
    atomic_fetch_add(&amx_emu_dps, 1);
    for (int m = 0; m < M; m++) {
        float tmp[16];
        memcpy(tmp, amx_emu.t[c][m], sizeof tmp);
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                tmp[n] =
                    amx_emu_ftz(tmp[n] + amx_emu_in(&amx_emu.t[a][m][4 * k]) * amx_emu_in(&amx_emu.t[b][k][4 * n]));
                tmp[n] = amx_emu_ftz(tmp[n] +
                                     amx_emu_in(&amx_emu.t[a][m][4 * k + 2]) * amx_emu_in(&amx_emu.t[b][k][4 * n + 2]));
            }
        memcpy(amx_emu.t[c][m], tmp, sizeof tmp);
    }
}

#define AMX_SFX emu
#define AMX_TGT
#define AMX_BEGIN() amx_emu_begin(lmhead_amx_config)
#define AMX_ZERO(t) amx_emu_zero(t)
#define AMX_LOAD(t, p, stride) amx_emu_load(t, p, stride)
#define AMX_STORE(t, p, stride) amx_emu_store(t, p, stride)
#define AMX_DP(c, a, b) amx_emu_dp(c, a, b)
#define AMX_END() (amx_emu.configured = 0)
#define AMX_PREFETCH(p) ((void)(p))
#include "lmhead_amx_kernels.h"

static const lmhead_amx_kernels amx_emu_kernels = {"emulated", amx_sums_emu, amx_backward_emu};

#endif
