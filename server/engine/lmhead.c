#include "lmhead.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "gemm.h"
#include "mem.h"
#include "lmhead_amx.h"

#if !REAL_IS_DOUBLE
#include "fastmath.h"
#endif

/* A row whose target is negative is not counted (lmhead_args.targets): the kernels index the
 * logits with target 0 and scale its loss and gradient by 0. */
static inline long row_target(const lmhead_args *a, long r) { return a->targets[r] < 0 ? 0 : a->targets[r]; }
static inline real row_scale(const lmhead_args *a, long r) { return a->targets[r] < 0 ? 0 : a->grad_scale; }

/* The vocabulary rows of dW slice i: starts at multiples of 32 (the AMX kernels' blocks); where a
 * slice ends does not change a single sum. */
static void slice_bounds(int V, int i, long *vlo, long *vhi) {
    threads_split((V + 31) / 32, i, LMHEAD_SLICES, vlo, vhi);
    *vlo *= 32;
    *vhi = 32 * *vhi < V ? 32 * *vhi : V;
}

#if !REAL_IS_DOUBLE

/* Softmax cross-entropy of one row in three vectorised passes (max; exp and sum; scale); when
 * want_grad, x is replaced by (softmax - onehot) * scale. Returns the loss. */
static double lmhead_row_xent(real *x, int V, int target, real scale, int want_grad) {
    if (target < 0) { /* not counted: no loss, no gradient */
        if (want_grad) memset(x, 0, sizeof(real) * (size_t)V);
        return 0;
    }
    int nv = V / 16 * 16;
    fm_v16 vmx;
    float mx = -INFINITY;
    if (nv) {
        memcpy(&vmx, x, 64);
        for (int j = 16; j < nv; j += 16) {
            fm_v16 a;
            memcpy(&a, x + j, 64);
            fm_i16 m = a > vmx;
            vmx = (fm_v16)((m & (fm_i16)a) | (~m & (fm_i16)vmx));
        }
        for (int i = 0; i < 16; i++) mx = vmx[i] > mx ? vmx[i] : mx;
    }
    for (int j = nv; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    float xt = x[target];
    fm_v16 vsum = {0};
    fm_v16 vm = fm_splat(mx);
    for (int j = 0; j < nv; j += 16) {
        fm_v16 a;
        memcpy(&a, x + j, 64);
        fm_v16 e = fm_exp16(a - vm);
        if (want_grad) memcpy(x + j, &e, 64);
        vsum += e;
    }
    double sum = 0;
    for (int i = 0; i < 16; i++) sum += vsum[i];
    for (int j = nv; j < V; j++) {
        float e = fm_expf(x[j] - mx);
        if (want_grad) x[j] = e;
        sum += e;
    }
    double loss = log(sum) + mx - xt;
    if (want_grad) {
        float k = (float)(scale / sum);
        fm_v16 vk = fm_splat(k);
        for (int j = 0; j < nv; j += 16) {
            fm_v16 a;
            memcpy(&a, x + j, 64);
            a *= vk;
            memcpy(x + j, &a, 64);
        }
        for (int j = nv; j < V; j++) x[j] *= k;
        x[target] -= scale;
    }
    return loss;
}
#else
static double lmhead_row_xent(real *x, int V, int target, real scale, int want_grad) {
    if (target < 0) { /* not counted: no loss, no gradient */
        if (want_grad) memset(x, 0, sizeof(real) * (size_t)V);
        return 0;
    }
    double mx = -INFINITY;
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    double xt = x[target], sum = 0;
    for (int j = 0; j < V; j++) {
        double e = exp(x[j] - mx);
        if (want_grad) x[j] = e;
        sum += e;
    }
    if (want_grad) {
        for (int j = 0; j < V; j++) x[j] *= scale / sum;
        x[target] -= scale;
    }
    return log(sum) + mx - xt;
}
#endif

#if !REAL_IS_DOUBLE && defined(__AVX512F__)
#include <immintrin.h>
#define LMHEAD_HAVE_KERNELS 1

/* The chunk in "rows in lanes" layout: logits LT[v][r] (v over the vocabulary, r over the chunk's
 * rows padded to RP, a multiple of 16), so that one 16-lane register holds 16 rows of one vocabulary
 * entry. Every product then streams W in its natural [V, C] layout and broadcasts single weights;
 * nothing is packed, and the softmax is vectorised across rows. XT is X^T [C][RP] (zero padding). */

#define AI static inline __attribute__((always_inline))

/* Cache lines to fetch ahead while a tile computes: n_w lines from w (to be written, or for the
 * kernels that only read, the first stream), n_r from r. At V 50257 the weights, the logits and dW
 * come from memory, and a tile's first touch of them would stall without it. */
typedef struct {
    const char *w;
    int n_w;
    const char *r;
    int n_r;
} lm_prefetch;

/* LT[v..v+NJ)[r..r+16NK) = W[v..v+NJ) . XT[:, r..], with the running max per row in vmax. */
AI void lg_tile(int NJ, int NK, const float *W, int C, const float *XT, int RP, float *LT, float *vmax,
                const lm_prefetch *pf) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int j = 0; j < NJ; j++)
#pragma GCC unroll 2
        for (int k = 0; k < NK; k++) acc[j][k] = _mm512_setzero_ps();
    for (int c = 0; c < C; c++) {
        if (c < pf->n_r) _mm_prefetch(pf->r + 64 * c, _MM_HINT_T0);
        if (c < pf->n_w) _mm_prefetch(pf->w + (size_t)(c >> 1) * RP * 4 + 64 * (c & 1), _MM_HINT_ET0); /* 2 per row */
        __m512 x0 = _mm512_loadu_ps(XT + (long)c * RP), x1 = NK > 1 ? _mm512_loadu_ps(XT + (long)c * RP + 16) : x0;
#pragma GCC unroll 12
        for (int j = 0; j < NJ; j++) {
            __m512 w = _mm512_set1_ps(W[(long)j * C + c]);
            acc[j][0] = _mm512_fmadd_ps(x0, w, acc[j][0]);
            if (NK > 1) acc[j][1] = _mm512_fmadd_ps(x1, w, acc[j][1]);
        }
    }
#pragma GCC unroll 2
    for (int k = 0; k < NK; k++) {
        __m512 m = _mm512_loadu_ps(vmax + 16 * k);
#pragma GCC unroll 12
        for (int j = 0; j < NJ; j++) {
            _mm512_storeu_ps(LT + (long)j * RP + 16 * k, acc[j][k]);
            m = _mm512_max_ps(m, acc[j][k]);
        }
        _mm512_storeu_ps(vmax + 16 * k, m);
    }
}

__attribute__((noinline)) static void lg_all(const float *W, int V, int C, const float *XT, int RP, float *LT,
                                             float *vmax) {
    for (int r = 0; r < RP; r++) vmax[r] = -INFINITY;
    /* the next vocabulary tile's weights (12 C floats), a share per row block, and the lines of LT
     * the same row block of the next tile will write (12 rows of two lines) */
    const int nrb = (RP + 31) / 32, lines = (12 * C * 4 / 64 + nrb - 1) / nrb;
    const lm_prefetch none = {NULL, 0, NULL, 0};
    int v = 0;
    for (; v + 12 <= V; v += 12) {
        int r = 0;
        for (; r + 32 <= RP; r += 32) {
            lm_prefetch pf = {(const char *)(LT + (long)(v + 12) * RP + r), 24,
                              (const char *)(W + (long)(v + 12) * C) + 64 * lines * (r / 32), lines};
            lg_tile(12, 2, W + (long)v * C, C, XT + r, RP, LT + (long)v * RP + r, vmax + r, &pf);
        }
        for (; r < RP; r += 16) lg_tile(12, 1, W + (long)v * C, C, XT + r, RP, LT + (long)v * RP + r, vmax + r, &none);
    }
    for (; v < V; v++)
        for (int r = 0; r < RP; r += 16)
            lg_tile(1, 1, W + (long)v * C, C, XT + r, RP, LT + (long)v * RP + r, vmax + r, &none);
}

/* DXT[c..c+8)[r..r+16NK) (+)= sum over v in [v0, v1) of W[v][c..] LT[v][r..]. NK = 4 (64 rows)
 * measured ~10% faster than 2 here, though its 32 accumulators exceed the registers a little. */
AI void dx_tile(int NK, const float *W, int C, const float *LT, int RP, int v0, int v1, float *DXT, int first,
                const lm_prefetch *pf) {
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
#pragma GCC unroll 4
        for (int k = 0; k < NK; k++)
            acc[j][k] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(DXT + (long)j * RP + 16 * k);
    for (int v = v0; v < v1; v++) {
        if (v - v0 < pf->n_w) _mm_prefetch(pf->w + 64 * (v - v0), _MM_HINT_T0);
        if (v - v0 < pf->n_r) _mm_prefetch(pf->r + 64 * (v - v0), _MM_HINT_T0);
        __m512 e[4];
#pragma GCC unroll 4
        for (int k = 0; k < NK; k++) e[k] = _mm512_loadu_ps(LT + (long)v * RP + 16 * k);
        const float *w = W + (long)v * C;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m512 b = _mm512_set1_ps(w[j]);
#pragma GCC unroll 4
            for (int k = 0; k < NK; k++) acc[j][k] = _mm512_fmadd_ps(e[k], b, acc[j][k]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
#pragma GCC unroll 4
        for (int k = 0; k < NK; k++) _mm512_storeu_ps(DXT + (long)j * RP + 16 * k, acc[j][k]);
}

/* LT[v][r..r+16NK) = exp(LT[v][..] - vmax[..]) for v in [v0, v1), adding to sums[r..]. */
static inline void exp_block(float *LT, int RP, int v0, int v1, int r, int NK, const float *vmax, float *sums,
                             int store) {
    for (int k = 0; k < NK; k++) {
        fm_v16 m = fm_load(vmax + r + 16 * k), acc = fm_load(sums + r + 16 * k);
        for (int v = v0; v < v1; v++) {
            float *p = LT + (long)v * RP + r + 16 * k;
            fm_v16 e = fm_exp16(fm_load(p) - m);
            if (store) fm_store(p, e);
            acc += e;
        }
        fm_store(sums + r + 16 * k, acc);
    }
}

/* The exponentials (and their sums per row) are taken block by block just before the block is
 * used, while it sits in L1, instead of in a pass of their own over the whole [V][RP] buffer. */
__attribute__((noinline)) static void dx_all(const float *W, int V, int C, float *LT, int RP, const float *vmax,
                                             float *sums, float *DXT) {
    /* the next block's logits and weights (256 rows of each) are prefetched, a share per tile */
    const int tiles = (RP / 64 + RP % 64 / 16) * (C / 8);
    const int lt_lines = (256 * RP * 4 / 64 + tiles - 1) / tiles, w_lines = (256 * C * 4 / 64 + tiles - 1) / tiles;
    for (int v0 = 0; v0 < V; v0 += 256) {
        int v1 = v0 + 256 < V ? v0 + 256 : V, t = 0;
        int r = 0;
        for (; r + 64 <= RP; r += 64) {
            exp_block(LT, RP, v0, v1, r, 4, vmax, sums, 1);
            for (int c = 0; c < C; c += 8, t++) {
                lm_prefetch pf = {(const char *)(LT + (long)v1 * RP) + 64 * lt_lines * t, v1 < V ? lt_lines : 0,
                                  (const char *)(W + (long)v1 * C) + 64 * w_lines * t, v1 < V ? w_lines : 0};
                dx_tile(4, W + c, C, LT + r, RP, v0, v1, DXT + (long)c * RP + r, v0 == 0, &pf);
            }
        }
        for (; r < RP; r += 16) {
            exp_block(LT, RP, v0, v1, r, 1, vmax, sums, 1);
            for (int c = 0; c < C; c += 8, t++) {
                lm_prefetch pf = {(const char *)(LT + (long)v1 * RP) + 64 * lt_lines * t, v1 < V ? lt_lines : 0,
                                  (const char *)(W + (long)v1 * C) + 64 * w_lines * t, v1 < V ? w_lines : 0};
                dx_tile(1, W + c, C, LT + r, RP, v0, v1, DXT + (long)c * RP + r, v0 == 0, &pf);
            }
        }
    }
}

/* dW[v..v+NJ)[16z0..16(z0+NZ)) += sum over r < rows of LT[v][r] XS[r][..]. Tiles of at most 64
 * columns keep the XS columns they read (rows x 256 bytes) in L1 across the vocabulary. */
AI void dw_tile(int NJ, int NZ, const float *LT, int RP, const float *XS, int C, int rows, float *dW,
                const lm_prefetch *pf) {
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int j = 0; j < NJ; j++)
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++) acc[j][z] = _mm512_loadu_ps(dW + (long)j * C + 16 * z);
    for (int r = 0; r < rows; r++) {
        if (r < pf->n_w) _mm_prefetch(pf->w + 64 * r, _MM_HINT_ET0);
        if (r < pf->n_r) _mm_prefetch(pf->r + 64 * r, _MM_HINT_T0);
        __m512 x[4];
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++) x[z] = _mm512_loadu_ps(XS + (long)r * C + 16 * z);
#pragma GCC unroll 6
        for (int j = 0; j < NJ; j++) {
            __m512 e = _mm512_set1_ps(LT[(long)j * RP + r]);
#pragma GCC unroll 4
            for (int z = 0; z < NZ; z++) acc[j][z] = _mm512_fmadd_ps(e, x[z], acc[j][z]);
        }
    }
#pragma GCC unroll 6
    for (int j = 0; j < NJ; j++)
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++) _mm512_storeu_ps(dW + (long)j * C + 16 * z, acc[j][z]);
}

/* Both column tiles of a block of 6 vocabulary rows one after the other, so each dW row is read
 * and written once per chunk (dW does not fit in cache; XS does, in L2). */
__attribute__((noinline)) static void dw_slice(const float *LT, int RP, const float *XS, int C, int rows, long vlo,
                                               long vhi, float *dW) {
    const int NZ = C / 16, nzt = (NZ + 3) / 4;
    /* the next block's 6 dW rows (to be written) and 6 logit rows, a share per column tile */
    const int dw_lines = (6 * C * 4 / 64 + nzt - 1) / nzt, lt_lines = (6 * RP * 4 / 64 + nzt - 1) / nzt;
    const lm_prefetch none = {NULL, 0, NULL, 0};
    long v = vlo;
    for (; v < vhi; v += 6) {
        int nj = vhi - v < 6 ? (int)(vhi - v) : 6;
        for (int z0 = 0; z0 < NZ; z0 += 4) {
            int nz = NZ - z0 < 4 ? NZ - z0 : 4;
            const float *lt = LT + v * RP, *xs = XS + 16 * z0;
            float *dw = dW + v * C + 16 * z0;
            lm_prefetch pf = {(const char *)(dW + (v + 6) * C) + 64 * dw_lines * (z0 / 4), dw_lines,
                              (const char *)(LT + (v + 6) * RP) + 64 * lt_lines * (z0 / 4), lt_lines};
            if (v + 6 >= vhi) pf = none;
            if (nj == 6) {
                switch (nz) {
                case 1: dw_tile(6, 1, lt, RP, xs, C, rows, dw, &pf); break;
                case 2: dw_tile(6, 2, lt, RP, xs, C, rows, dw, &pf); break;
                case 3: dw_tile(6, 3, lt, RP, xs, C, rows, dw, &pf); break;
                default: dw_tile(6, 4, lt, RP, xs, C, rows, dw, &pf); break;
                }
            } else {
                for (int j = 0; j < nj; j++) switch (nz) {
                    case 1: dw_tile(1, 1, lt + (long)j * RP, RP, xs, C, rows, dw + (long)j * C, &none); break;
                    case 2: dw_tile(1, 2, lt + (long)j * RP, RP, xs, C, rows, dw + (long)j * C, &none); break;
                    case 3: dw_tile(1, 3, lt + (long)j * RP, RP, xs, C, rows, dw + (long)j * C, &none); break;
                    default: dw_tile(1, 4, lt + (long)j * RP, RP, xs, C, rows, dw + (long)j * C, &none); break;
                    }
            }
        }
    }
}

/* Scratch reals per thread the kernels need beyond the logits. */
static size_t kernel_extra(int C) { return (size_t)3 * LMHEAD_MAX_ROWS * C + 4 * LMHEAD_MAX_ROWS; }

int lmhead_uses_kernels(int C) { return C % 16 == 0 && C <= 128; }

/* One chunk through the kernels: losses, dx and (returned in LT/XS) what dW needs. */
static void chunk_kernels(const lmhead_args *a, long r0, int rows, float *LT, float *scratch, int *RP_out) {
    const int C = a->C, V = a->V, RP = (rows + 15) / 16 * 16;
    const int train = a->dx != NULL;
    float *XT = scratch, *XS = XT + (size_t)LMHEAD_MAX_ROWS * C, *DXT = XS + (size_t)LMHEAD_MAX_ROWS * C;
    float *vmax = DXT + (size_t)LMHEAD_MAX_ROWS * C, *scale = vmax + LMHEAD_MAX_ROWS, *tl = scale + LMHEAD_MAX_ROWS;
    const float *X = a->x + r0 * C;
    for (int c = 0; c < C; c++)
        for (int r = 0; r < RP; r++) XT[(long)c * RP + r] = r < rows ? X[(long)r * C + c] : 0.0f;
    lg_all(a->w, V, C, XT, RP, LT, vmax);
    for (int r = 0; r < rows; r++) tl[r] = LT[(long)row_target(a, r0 + r) * RP + r];
    /* sums[r] = sum_v exp(l[v][r] - max_r); when training, dx_all takes them on the way */
    float *sums = scale;
    for (int r = 0; r < RP; r++) sums[r] = 0;
    if (train) {
        dx_all(a->w, V, C, LT, RP, vmax, sums, DXT);
    } else {
        for (int r = 0; r < RP; r += 16) exp_block(LT, RP, 0, V, r, 1, vmax, sums, 0);
    }
    for (int r = 0; r < rows; r++) {
        double sum = sums[r];
        real g = row_scale(a, r0 + r);
        a->losses[r0 + r] = g != 0 ? (real)(log(sum) + vmax[r] - tl[r]) : 0;
        scale[r] = (float)(g / sum);
    }
    *RP_out = RP;
    if (!train) return;
    /* dx[r] = s_r sum_v e[v][r] W[v] - g W[target_r] */
    for (int r = 0; r < rows; r++) {
        real *dx = a->dx + (r0 + r) * C, g = row_scale(a, r0 + r);
        const float *wt = a->w + (long)row_target(a, r0 + r) * C;
        for (int c = 0; c < C; c++) dx[c] = scale[r] * DXT[(long)c * RP + r] - g * wt[c];
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) XS[(long)r * C + c] = scale[r] * X[(long)r * C + c];
}

/* dW slice [vlo, vhi) of one chunk: sum_r e[v][r] s_r x_r, minus g x_r at each row's target. */
static void chunk_dw_slice(const lmhead_args *a, long r0, int rows, const float *LT, int RP, const float *scratch,
                           long vlo, long vhi) {
    const int C = a->C;
    const float *XS = scratch + (size_t)LMHEAD_MAX_ROWS * C;
    dw_slice(LT, RP, XS, C, rows, vlo, vhi, a->dw);
    for (int r = 0; r < rows; r++) {
        long t = a->targets[r0 + r];
        if (t < vlo || t >= vhi) continue;
        const real *x = a->x + (r0 + r) * C;
        real *dw = a->dw + t * C;
        for (int c = 0; c < C; c++) dw[c] -= a->grad_scale * x[c];
    }
}
#else
static size_t kernel_extra(int C) {
    (void)C;
    return 0;
}
int lmhead_uses_kernels(int C) {
    (void)C;
    return 0;
}
#endif

/* ---- mixed precision (bf16 inputs, fp32 accumulation) ---- */
#if !REAL_IS_DOUBLE
#include <stdlib.h>

#include "cpu.h"

#define BF_RP LMHEAD_MAX_ROWS /* chunk rows padded to a multiple of 32, at most this (amx: LMHEAD_AMX_MAX_ROWS) */

int lmhead_bf16_applies(int C) { return C % 16 == 0 && C >= 16 && C <= 1024; }

static long bf_pairs(int V) { return ((long)V + 1) / 2; }

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* The copies' bf16 counts: vdpbf16ps and portable paths wb [V][C] and wp [V/2][C][2]; AMX wa
 * [V16][C32] and wt [C][V32]. */
static size_t copies_vnni(int V, int C) { return (size_t)V * C + (size_t)bf_pairs(V) * 2 * C; }
static size_t copies_amx(int V, int C) { return round_up(V, 16) * round_up(C, 32) + (size_t)C * round_up(V, 32); }

size_t lmhead_bf16_bytes(int V, int C) {
    size_t a = copies_vnni(V, C), x = copies_amx(V, C);
    return sizeof(bf16) * (a > x ? a : x) + sizeof(double) * ((size_t)V / 64 + 1);
}

void lmhead_bf16_free(lmhead_bf16 *b) {
    if (!b) return;
    mem_free64(b->wb);
    mem_free64(b->wp);
    mem_free64(b->wa);
    mem_free64(b->wt);
    free(b->part);
    free(b);
}

engine_status lmhead_bf16_new(lmhead_bf16 **out, int V, int C, engine_error *err) {
    return lmhead_bf16_new_on(out, V, C, kernel_path_for_precision(PRECISION_BF16), err);
}

engine_status lmhead_bf16_new_on(lmhead_bf16 **out, int V, int C, kernel_path_id path, engine_error *err) {
    *out = NULL;
    if (V < 1 || !lmhead_bf16_applies(C))
        return engine_fail(err, ENGINE_ERR_INVALID, "no bf16 output layer for d_model %d (needs a multiple of 16)", C);
    const kernel_path *row = kernel_path_row(path);
    char why[160];
    if (!row || row->precision != PRECISION_BF16)
        return engine_fail(err, ENGINE_ERR_INVALID, "kernel path %s has no bf16 products", row ? row->name : "?");
    if (!kernel_path_supported(path, why, sizeof why))
        return engine_fail(err, ENGINE_ERR_INVALID, "kernel path %s: %s", row->name, why);
    lmhead_bf16 *b = calloc(1, sizeof *b);
    if (!b) return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for the bf16 output layer");
    b->path = path;
    b->V = V;
    b->C = C;
    int ok;
    if (path == KERNEL_PATH_AMX) {
        /* zero: the padding rows and columns of the tiles */
        b->wa = mem_calloc64(round_up(V, 16) * round_up(C, 32), sizeof(bf16));
        b->wt = mem_calloc64((size_t)C * round_up(V, 32), sizeof(bf16));
        ok = b->wa && b->wt;
    } else {
        b->wb = mem_calloc64((size_t)V * C, sizeof(bf16));
        b->wp = mem_calloc64((size_t)bf_pairs(V) * 2 * C, sizeof(bf16)); /* zero: the missing last row of an odd V */
        ok = b->wb && b->wp;
    }
    b->part = calloc((size_t)V / 64 + 1, sizeof(double));
    if (!ok || !b->part) {
        lmhead_bf16_free(b);
        return engine_fail(err, ENGINE_ERR_NOMEM, "out of memory for the bf16 output layer (%d x %d)", V, C);
    }
    *out = b;
    return ENGINE_OK;
}

typedef struct {
    lmhead_bf16 *b;
    const real *w;
    threadpool *pool;
} refresh_ctx;

/* Item k: rows [64k, 64k+64). */
static void refresh_item(lmhead_bf16 *b, const real *w, long k) {
    const int C = b->C;
    long v0 = 64 * k, v1 = v0 + 64 < b->V ? v0 + 64 : b->V;
    double best = 0;
    if (b->path == KERNEL_PATH_AMX) {
        const size_t C32 = round_up(C, 32), V32 = round_up(b->V, 32);
        for (long v = v0; v < v1; v++) {
            bf16 *row = b->wa + v * C32;
            bf16_from_floats(row, w + v * C, (size_t)C);
            double sq = 0;
            for (int c = 0; c < C; c++) {
                b->wt[amx_wt_at((long)V32, c, v)] = row[c];
                double f = bf16_to_float(row[c]);
                sq += f * f;
            }
            if (sq > best) best = sq;
        }
        b->part[k] = best;
        return;
    }
    for (long v = v0; v < v1; v++) {
        bf16 *row = b->wb + v * C;
        bf16_from_floats(row, w + v * C, (size_t)C);
        bf16 *pp = b->wp + (v / 2) * 2 * C + (v & 1);
        double sq = 0;
        for (int c = 0; c < C; c++) {
            pp[2 * c] = row[c];
            double f = bf16_to_float(row[c]);
            sq += f * f;
        }
        if (sq > best) best = sq;
    }
    b->part[k] = best;
}

static void refresh_fn(void *ctx, int tid, int nth) {
    (void)tid;
    (void)nth;
    refresh_ctx *r = ctx;
    long items = (r->b->V + 63) / 64;
    for (long k; (k = threads_next(r->pool)) < items;) refresh_item(r->b, r->w, k);
}

void lmhead_bf16_refresh(lmhead_bf16 *b, const real *w, threadpool *pool) {
    long items = (b->V + 63) / 64;
    refresh_ctx r = {b, w, pool};
    if (pool)
        threads_run(pool, refresh_fn, &r);
    else
        for (long k = 0; k < items; k++) refresh_item(b, w, k);
    double best = 0;
    for (long k = 0; k < items; k++) best = b->part[k] > best ? b->part[k] : best;
    b->wmax = (float)(sqrt(best) * (1 + 1e-6));
}

/* Per-thread scratch of a bf16 chunk, in floats; fixed offsets (rows padded to BF_RP). */
typedef struct {
    bf16 *E;      /* [Vp][RP] exp(l - U) per vocabulary entry and row (Vp: V rounded up to even; AMX: a
                   * backward block's Eb, LMHEAD_AMX_VB rows) */
    bf16 *E2;     /* AMX: the block's E2b [LMHEAD_AMX_VB/2][RP][2], pairs of vocabulary rows interleaved */
    bf16 *XP;     /* [C/2][RP][2] the rows' x, pairs of columns together (AMX: C32/2, zero beyond C) */
    bf16 *XSp;    /* [RP/2][C][2] s_r x_r, pairs of rows together (AMX: XR, x_r unscaled) */
    float *DXT;   /* [C][RP] sum_v E[v][r] w[v][c], rows in the order of dx_perm within each 32 (AMX: in order) */
    float *stage; /* AMX: lmhead_amx_stage_floats(C) */
    float *U, *mx, *sm, *scale, *tl; /* [RP] */
} bf_scratch;

/* Lays the scratch out at buf (NULL: only counts); returns its size in floats. */
static size_t bf_layout_at(float *buf, int C, int V, int amx, bf_scratch *s) {
    size_t n = 0;
#define TAKE(field, type, count)                                                                                       \
    do {                                                                                                               \
        if (buf) s->field = (type *)(buf + n);                                                                         \
        n += round_up((count) * sizeof(type), 64) / sizeof(float);                                                     \
    } while (0)
    if (buf) memset(s, 0, sizeof *s);
    size_t Ve = amx ? LMHEAD_AMX_VB : (size_t)bf_pairs(V) * 2, Cx = amx ? round_up(C, 32) : (size_t)C;
    const size_t RPm = amx ? LMHEAD_AMX_MAX_ROWS : BF_RP;
    TAKE(E, bf16, Ve * RPm);
    if (amx) TAKE(E2, bf16, (size_t)LMHEAD_AMX_VB * RPm);
    TAKE(XP, bf16, Cx * RPm);
    TAKE(XSp, bf16, (size_t)C * RPm);
    TAKE(DXT, float, (size_t)C *RPm);
    if (amx) TAKE(stage, float, lmhead_amx_stage_floats(C));
    TAKE(U, float, RPm);
    TAKE(mx, float, RPm);
    TAKE(sm, float, RPm);
    TAKE(scale, float, RPm);
    TAKE(tl, float, RPm);
#undef TAKE
    return n;
}

static size_t bf_scratch_floats(int C, int V) {
    size_t a = bf_layout_at(NULL, C, V, 0, NULL), x = bf_layout_at(NULL, C, V, 1, NULL);
    return a > x ? a : x;
}

static bf_scratch bf_layout(float *buf, int C, int V, int amx) {
    bf_scratch s;
    bf_layout_at(buf, C, V, amx, &s);
    return s;
}

/* dx's accumulators hold 32 rows as two registers made by interleaving two vocabulary rows
 * (unpacklo/hi of 16-bit words act within 128-bit lanes): position q of a 32-row block holds row
 * dx_row(q). */
static inline int dx_row(int q) { return q < 16 ? 8 * (q / 4) + q % 4 : 8 * ((q - 16) / 4) + 4 + q % 4; }
static inline int dx_pos(int i) { return (i % 8 < 4 ? 0 : 16) + 4 * (i / 8) + i % 4; }

static inline float bf_pair_dot(float acc, const bf16 *a, const bf16 *b) {
    /* as vdpbf16ps: both products exact in float, added in turn */
    acc += bf16_to_float(a[0]) * bf16_to_float(b[0]);
    acc += bf16_to_float(a[1]) * bf16_to_float(b[1]);
    return acc;
}

/* ---- portable kernels (any CPU) ---- */

static float sl_logit(const bf16 *w, int C, const bf16 *XP, int RP, int r) {
    float acc = 0;
    for (int c2 = 0; c2 < C / 2; c2++) acc = bf_pair_dot(acc, XP + ((size_t)c2 * RP + r) * 2, w + 2 * c2);
    return acc;
}

static void sl_logits(const lmhead_bf16 *b, const bf_scratch *s, int RP) {
    const int C = b->C;
    for (long v = 0; v < b->V; v++)
        for (int r = 0; r < RP; r++) {
            float l = sl_logit(b->wb + v * C, C, s->XP, RP, r);
            if (l > s->mx[r]) s->mx[r] = l;
            float e = fm_expf(l - s->U[r]);
            s->sm[r] += e;
            s->E[v * RP + r] = bf16_from_float(e);
        }
}

static void sl_dx(const lmhead_bf16 *b, const bf_scratch *s, int RP) {
    const int C = b->C;
    const long P = bf_pairs(b->V);
    for (int c = 0; c < C; c++)
        for (int r = 0; r < RP; r++) {
            float acc = 0;
            for (long p = 0; p < P; p++) {
                bf16 e[2] = {s->E[2 * p * RP + r], s->E[(2 * p + 1) * RP + r]};
                acc = bf_pair_dot(acc, e, b->wp + (p * C + c) * 2);
            }
            s->DXT[(size_t)c * RP + (r / 32) * 32 + dx_pos(r % 32)] = acc;
        }
}

static void sl_dw(const bf_scratch *s, int RP, int C, int R2, long vlo, long vhi, float *dW) {
    for (long v = vlo; v < vhi; v++)
        for (int c = 0; c < C; c++) {
            float acc = dW[v * C + c];
            for (int r2 = 0; r2 < R2; r2++)
                acc = bf_pair_dot(acc, s->XSp + ((size_t)r2 * C + c) * 2, s->E + v * RP + 2 * r2);
            dW[v * C + c] = acc;
        }
}

/* ---- AVX-512 BF16 kernels ---- */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LMHEAD_HAVE_BF16_KERNELS 1
#define BFT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define BFAI static inline __attribute__((always_inline)) BFT

/* The exp of fastmath.h (same reduction and polynomial) in intrinsics, for target functions. */
BFAI __m512 bf_exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(FM_EXP_LO)), _mm512_set1_ps(FM_EXP_HI));
    __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(FM_L2E), _mm512_set1_ps(FM_MAGIC));
    __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(FM_MAGIC));
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(FM_LN2HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(FM_LN2LO), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i ni = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(_mm512_set1_ps(FM_MAGIC)));
    __m512 sc = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(ni, _mm512_set1_epi32(127)), 23));
    return _mm512_mul_ps(p, sc);
}

BFAI __m512i bcast32(const bf16 *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

#define DP(acc, a, b) _mm512_dpbf16_ps(acc, (__m512bh)(a), (__m512bh)(b))

/* Logits of vocabulary rows [v, v+NJ) for rows [r0, r0+16NK), exponentiated on the way out:
 * E = bf16(exp(l - U)), running max and sum per row. W, XP, E, U, mx, sm point at (v, r0). */
BFAI void bl_tile(int NJ, int NK, const bf16 *W, int C, const bf16 *XP, int RP, bf16 *E, const float *U, float *mx,
                  float *sm, const char *pf, int npf) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int j = 0; j < NJ; j++)
#pragma GCC unroll 2
        for (int k = 0; k < NK; k++) acc[j][k] = _mm512_setzero_ps();
    for (int c2 = 0; c2 < C / 2; c2++) {
        if (c2 < npf) _mm_prefetch(pf + 64 * c2, _MM_HINT_T0);
        if (c2 >= 32 && c2 < 32 + NJ) _mm_prefetch((const char *)(E + (size_t)(c2 - 32 + 12) * RP), _MM_HINT_ET0);
        const bf16 *x = XP + (size_t)c2 * RP * 2;
        __m512i x0 = _mm512_loadu_si512(x), x1 = NK > 1 ? _mm512_loadu_si512(x + 32) : x0;
#pragma GCC unroll 12
        for (int j = 0; j < NJ; j++) {
            __m512i w = bcast32(W + (size_t)j * C + 2 * c2);
            acc[j][0] = DP(acc[j][0], x0, w);
            if (NK > 1) acc[j][1] = DP(acc[j][1], x1, w);
        }
    }
#pragma GCC unroll 2
    for (int k = 0; k < NK; k++) {
        __m512 u = _mm512_loadu_ps(U + 16 * k), m = _mm512_loadu_ps(mx + 16 * k), sum = _mm512_loadu_ps(sm + 16 * k);
#pragma GCC unroll 12
        for (int j = 0; j < NJ; j++) {
            m = _mm512_max_ps(m, acc[j][k]);
            __m512 e = bf_exp16(_mm512_sub_ps(acc[j][k], u));
            sum = _mm512_add_ps(sum, e);
            _mm256_storeu_si256((__m256i *)(E + (size_t)j * RP + 16 * k), (__m256i)_mm512_cvtneps_pbh(e));
        }
        _mm512_storeu_ps(mx + 16 * k, m);
        _mm512_storeu_ps(sm + 16 * k, sum);
    }
}

__attribute__((noinline)) BFT static void bl_all(const lmhead_bf16 *b, const bf_scratch *s, int RP) {
    const int C = b->C, V = b->V;
    /* the next vocabulary tile's weights (12 C bf16) are prefetched while the row blocks of this one
     * run, a share per row block: from memory, they would stall each tile's first row block */
    const int nrb = RP / 32, lines = (12 * C * 2 / 64 + nrb - 1) / nrb;
    long v = 0;
    for (; v + 12 <= V; v += 12)
        for (int r = 0; r < RP; r += 32)
            bl_tile(12, 2, b->wb + v * C, C, s->XP + 2 * r, RP, s->E + v * RP + r, s->U + r, s->mx + r, s->sm + r,
                    (const char *)(b->wb + (v + 12) * C) + 64 * lines * (r / 32), lines);
    for (; v < V; v++)
        for (int r = 0; r < RP; r += 32)
            bl_tile(1, 2, b->wb + v * C, C, s->XP + 2 * r, RP, s->E + v * RP + r, s->U + r, s->mx + r, s->sm + r, NULL,
                    0);
}

/* The logit of vocabulary row w for row r, by the same sequence of operations as bl_tile's lane. */
__attribute__((noinline)) BFT static float bl_logit(const bf16 *w, int C, const bf16 *XP, int RP, int r) {
    const bf16 *x = XP + 2 * (r / 16 * 16);
    __m512 acc = _mm512_setzero_ps();
    for (int c2 = 0; c2 < C / 2; c2++) acc = DP(acc, _mm512_loadu_si512(x + (size_t)c2 * RP * 2), bcast32(w + 2 * c2));
    float out[16];
    _mm512_storeu_ps(out, acc);
    return out[r % 16];
}

/* DXT[c0..c0+8)[32-row block at r0] (+)= sum over pairs p in [p0, p1) of E[2p][r] w[2p][c] +
 * E[2p+1][r] w[2p+1][c]. E at (0, r0), WP at (0, c0), DXT at (c0, r0). */
BFAI void bdx_tile(const bf16 *E, int RP, const bf16 *WP, int C, long p0, long p1, float *DXT, int first,
                   const lm_prefetch *pf) {
    __m512 acc[8][2];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++)
            acc[j][k] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(DXT + (size_t)j * RP + 16 * k);
    for (long p = p0; p < p1; p++) {
        if (p - p0 < pf->n_w) _mm_prefetch(pf->w + 64 * (p - p0), _MM_HINT_T0);
        if (p - p0 < pf->n_r) _mm_prefetch(pf->r + 64 * (p - p0), _MM_HINT_T0);
        __m512i e0 = _mm512_loadu_si512(E + (size_t)2 * p * RP), e1 = _mm512_loadu_si512(E + (size_t)(2 * p + 1) * RP);
        __m512i lo = _mm512_unpacklo_epi16(e0, e1), hi = _mm512_unpackhi_epi16(e0, e1);
        const bf16 *w = WP + (size_t)p * C * 2;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m512i b = bcast32(w + 2 * j);
            acc[j][0] = DP(acc[j][0], lo, b);
            acc[j][1] = DP(acc[j][1], hi, b);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) _mm512_storeu_ps(DXT + (size_t)j * RP + 16 * k, acc[j][k]);
}

/* Blocks of 128 vocabulary pairs (64 KB of E for 128 rows, 64 KB of WP at C = 128) so both stay
 * in L2 while every (row block, column block) tile passes over them; the next block's E and WP
 * (both from memory) are prefetched meanwhile, a share per tile. */
__attribute__((noinline)) BFT static void bdx_all(const lmhead_bf16 *b, const bf_scratch *s, int RP) {
    const int C = b->C;
    const long P = bf_pairs(b->V);
    const int tiles = RP / 32 * (C / 8);
    const int e_lines = (256 * RP * 2 / 64 + tiles - 1) / tiles, w_lines = (128 * C * 4 / 64 + tiles - 1) / tiles;
    for (long p0 = 0; p0 < P; p0 += 128) {
        long p1 = p0 + 128 < P ? p0 + 128 : P;
        int t = 0;
        for (int r = 0; r < RP; r += 32)
            for (int c = 0; c < C; c += 8, t++) {
                lm_prefetch pf = {(const char *)(s->E + (size_t)2 * p1 * RP) + 64 * e_lines * t, e_lines,
                                  (const char *)(b->wp + (size_t)p1 * C * 2) + 64 * w_lines * t, w_lines};
                if (p1 >= P) pf.n_w = pf.n_r = 0;
                bdx_tile(s->E + r, RP, b->wp + (size_t)c * 2, C, p0, p1, s->DXT + (size_t)c * RP + r, p0 == 0, &pf);
            }
    }
}

/* dW[v..v+NJ)[c0..c0+16NZ) += sum over row pairs of E[v][2i] XS[2i][c] + E[v][2i+1] XS[2i+1][c].
 * E at row v, XSp at column c0, dW at (v, c0). */
BFAI void bdw_tile(int NJ, int NZ, const bf16 *E, int RP, const bf16 *XSp, int C, int R2, float *dW,
                   const lm_prefetch *pf) {
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int j = 0; j < NJ; j++)
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++) acc[j][z] = _mm512_loadu_ps(dW + (size_t)j * C + 16 * z);
    for (int r2 = 0; r2 < R2; r2++) {
        if (r2 < pf->n_w) _mm_prefetch(pf->w + 64 * r2, _MM_HINT_ET0);
        if (r2 < pf->n_r) _mm_prefetch(pf->r + 64 * r2, _MM_HINT_T0);
        __m512i x[4];
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++) x[z] = _mm512_loadu_si512(XSp + ((size_t)r2 * C + 16 * z) * 2);
#pragma GCC unroll 6
        for (int j = 0; j < NJ; j++) {
            __m512i e = bcast32(E + (size_t)j * RP + 2 * r2);
#pragma GCC unroll 4
            for (int z = 0; z < NZ; z++) acc[j][z] = DP(acc[j][z], x[z], e);
        }
    }
#pragma GCC unroll 6
    for (int j = 0; j < NJ; j++)
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++) _mm512_storeu_ps(dW + (size_t)j * C + 16 * z, acc[j][z]);
}

#define BDW_CASES(NJ, e, xs, dw)                                                                                       \
    switch (nz) {                                                                                                      \
    case 1: bdw_tile(NJ, 1, e, RP, xs, C, R2, dw, &pf); break;                                                         \
    case 2: bdw_tile(NJ, 2, e, RP, xs, C, R2, dw, &pf); break;                                                         \
    case 3: bdw_tile(NJ, 3, e, RP, xs, C, R2, dw, &pf); break;                                                         \
    default: bdw_tile(NJ, 4, e, RP, xs, C, R2, dw, &pf); break;                                                        \
    }

/* Each block of 6 dW rows is read and written once per chunk, all its column tiles in turn; the
 * next block's dW rows and E rows are prefetched meanwhile, a share per column tile (both come from
 * memory: dW is 25 MB at the seed configuration, E 13 MB). */
__attribute__((noinline)) BFT static void bdw_slice(const bf_scratch *s, int RP, int C, int R2, long vlo, long vhi,
                                                    float *dW) {
    const int NZ = C / 16, nzt = (NZ + 3) / 4;
    const int dw_lines = (6 * C * 4 / 64 + nzt - 1) / nzt, e_lines = (6 * RP * 2 / 64 + nzt - 1) / nzt;
    for (long v = vlo; v < vhi; v += 6) {
        int nj = vhi - v < 6 ? (int)(vhi - v) : 6;
        for (int z0 = 0; z0 < NZ; z0 += 4) {
            int nz = NZ - z0 < 4 ? NZ - z0 : 4;
            lm_prefetch pf = {(const char *)(dW + (v + 6) * C) + 64 * dw_lines * (z0 / 4), dw_lines,
                              (const char *)(s->E + (v + 6) * RP) + 64 * e_lines * (z0 / 4), e_lines};
            if (v + 6 >= vhi) pf.n_w = pf.n_r = 0;
            const bf16 *e = s->E + v * RP, *xs = s->XSp + 32 * z0;
            float *dw = dW + v * C + 16 * z0;
            if (nj == 6) {
                BDW_CASES(6, e, xs, dw)
            } else {
                for (int j = 0; j < nj; j++) BDW_CASES(1, e + (size_t)j * RP, xs, dw + (size_t)j * C)
            }
        }
    }
}
#endif

/* ---- AMX tiles: the kernels of lmhead_amx_kernels.h on the intrinsics ---- */
const unsigned char lmhead_amx_config[64] = {
    [0] = 1, /* palette 1; bytes 16-31: colsb of tiles 0-7 (16 bits each), 48-55: their rows */
    [16] = 64, [18] = 64, [20] = 64, [22] = 64, [24] = 64, [26] = 64, [28] = 64, [30] = 64,
    [48] = 16, [49] = 16, [50] = 16, [51] = 16, [52] = 16, [53] = 16, [54] = 16, [55] = 16,
};

#include "lmhead_amx_hw.h"
#ifdef LMHEAD_HAVE_AMX
#define AMX_SFX hw
#include "lmhead_amx_epi.h"
#define AMX_EPI_SUMS amx_epi_sums_avx512
#define AMX_EPI_GRAD amx_epi_grad_avx512
#include "lmhead_amx_kernels.h"
static const lmhead_amx_kernels amx_hw = {"hardware", amx_sums_hw, amx_backward_hw};
#endif

static const lmhead_amx_kernels *_Atomic amx_override;

void lmhead_amx_use(const lmhead_amx_kernels *k) {
    atomic_store(&amx_override, k);
    kernel_path_amx_emulated(k != NULL);
}

static const lmhead_amx_kernels *amx_kernels(void) {
    const lmhead_amx_kernels *k = atomic_load(&amx_override);
#ifdef LMHEAD_HAVE_AMX
    if (!k) k = &amx_hw;
#endif
    return k;
}

/* The AMX kernels' view of a chunk laid out in s. */
static lmhead_amx_chunk amx_chunk_of(const lmhead_bf16 *b, const bf_scratch *s, int RP, int rows, const int32_t *tg) {
    lmhead_amx_chunk k = {.C = b->C,
                          .C32 = (int)round_up(b->C, 32),
                          .V = b->V,
                          .V16 = (int)round_up(b->V, 16),
                          .V32 = (int)round_up(b->V, 32),
                          .RP = RP,
                          .rows = rows,
                          .wa = b->wa,
                          .wt = b->wt,
                          .XP = s->XP,
                          .XR = s->XSp,
                          .Eb = s->E,
                          .E2b = s->E2,
                          .DXT = s->DXT,
                          .stage = s->stage,
                          .U = s->U,
                          .sc = s->scale,
                          .mx = s->mx,
                          .sm = s->sm,
                          .tl = s->tl,
                          .tg = tg};
    return k;
}

/* XP (the chunk's x in bf16, Cx columns with zeros beyond C and rows: pairs of columns together,
 * or on amx tile-major, amx_xp_at) and U (each row's logit bound |x_r| |w|max), for every bf16 path. */
static void bf_prep_x(const lmhead_args *a, long r0, int rows, int RP, int Cx, int amx, const bf_scratch *s) {
    const int C = a->C;
    const real *X = a->x + r0 * C;
    for (int r = 0; r < RP; r++) {
        double sq = 0;
        for (int c = 0; c < Cx; c++) {
            bf16 h = r < rows && c < C ? bf16_from_float(X[(long)r * C + c]) : 0;
            s->XP[amx ? amx_xp_at(RP, c, r) : ((size_t)(c / 2) * RP + r) * 2 + (c & 1)] = h;
            double f = bf16_to_float(h);
            sq += f * f;
        }
        s->U[r] = (float)(sqrt(sq) * a->bf->wmax);
    }
}

/* Row r's x as rounded for the products. */
static inline float bf_x(const bf_scratch *s, int RP, int r, int c) {
    return bf16_to_float(s->XP[((size_t)(c / 2) * RP + r) * 2 + (c & 1)]);
}

/* Rows whose largest logit lies far below their bound get that logit as their bound; 1 if any. */
static int bf_rebound(bf_scratch *s, int rows) {
    int redo = 0;
    for (int r = 0; r < rows; r++)
        if (s->U[r] - s->mx[r] > LMHEAD_BF16_GAP) {
            s->U[r] = s->mx[r];
            redo = 1;
        }
    return redo;
}

/* One chunk in mixed precision on the vdpbf16ps or portable path: losses, dx, and (left in the
 * scratch) what dW needs. */
static void chunk_bf16(const lmhead_args *a, long r0, int rows, float *buf, int *RP_out) {
    const lmhead_bf16 *b = a->bf;
    const int C = a->C, V = a->V, RP = (rows + 31) / 32 * 32;
    const int train = a->dx != NULL;
#ifdef LMHEAD_HAVE_BF16_KERNELS
    const int kern = b->path == KERNEL_PATH_AVX512_BF16;
#endif
    bf_scratch s = bf_layout(buf, C, V, 0);
    int32_t tg[LMHEAD_MAX_ROWS];
    for (int r = 0; r < rows; r++) tg[r] = (int32_t)row_target(a, r0 + r);
    bf_prep_x(a, r0, rows, RP, C, 0, &s);
    if (V % 2) memset(s.E + (size_t)V * RP, 0, sizeof(bf16) * RP); /* the pad row of the last pair */
    for (int attempt = 0; attempt < 2; attempt++) {
        for (int r = 0; r < RP; r++) {
            s.mx[r] = -INFINITY;
            s.sm[r] = 0;
        }
#ifdef LMHEAD_HAVE_BF16_KERNELS
        if (kern)
            bl_all(b, &s, RP);
        else
#endif
            sl_logits(b, &s, RP);
        if (!bf_rebound(&s, rows)) break;
    }
    for (int r = 0; r < rows; r++) {
        const bf16 *wt = b->wb + (long)tg[r] * C;
#ifdef LMHEAD_HAVE_BF16_KERNELS
        if (kern)
            s.tl[r] = bl_logit(wt, C, s.XP, RP, r);
        else
#endif
            s.tl[r] = sl_logit(wt, C, s.XP, RP, r);
        double sum = s.sm[r];
        real g = row_scale(a, r0 + r);
        a->losses[r0 + r] = g != 0 ? (real)(log(sum) + s.U[r] - s.tl[r]) : 0;
        s.scale[r] = (float)(g / sum);
    }
    *RP_out = RP;
    if (!train) return;
#ifdef LMHEAD_HAVE_BF16_KERNELS
    if (kern)
        bdx_all(b, &s, RP);
    else
#endif
        sl_dx(b, &s, RP);
    /* dx[r] = s_r sum_v e[v][r] w[v] - g w[target_r]; XS = s_r x_r for dW */
    for (int r = 0; r < rows; r++) {
        real *dx = a->dx + (r0 + r) * C, g = row_scale(a, r0 + r);
        const bf16 *wt = b->wb + (long)tg[r] * C;
        const float *d = s.DXT + (r / 32) * 32 + dx_pos(r % 32);
        for (int c = 0; c < C; c++) dx[c] = s.scale[r] * d[(size_t)c * RP] - g * bf16_to_float(wt[c]);
    }
    for (int r = 0; r < RP; r++)
        for (int c = 0; c < C; c++) {
            float x = r < rows ? bf_x(&s, RP, r, c) : 0;
            s.XSp[((size_t)(r / 2) * C + c) * 2 + (r & 1)] = bf16_from_float(s.scale[r] * x);
        }
}

/* dW rows [vlo, vhi) += the chunk's contribution, its one-hot terms included. */
static void chunk_bf16_dw_slice(const lmhead_args *a, long r0, int rows, float *buf, int RP, long vlo, long vhi) {
    const int C = a->C;
    bf_scratch s = bf_layout(buf, C, a->V, 0);
    const int R2 = (rows + 1) / 2;
#ifdef LMHEAD_HAVE_BF16_KERNELS
    if (a->bf->path == KERNEL_PATH_AVX512_BF16)
        bdw_slice(&s, RP, C, R2, vlo, vhi, a->dw);
    else
#endif
        sl_dw(&s, RP, C, R2, vlo, vhi, a->dw);
    for (int r = 0; r < rows; r++) {
        long t = a->targets[r0 + r];
        if (t < vlo || t >= vhi) continue;
        real *dw = a->dw + t * C;
        for (int c = 0; c < C; c++) dw[c] -= a->grad_scale * bf_x(&s, RP, r, c);
    }
}

/* One chunk (index ci) on the amx path (lmhead_amx.h): losses; then, training, the backward pass
 * over the slices in order, so that dx sums in the same order however many threads there are, each
 * slice of dW only after chunk ci - 1 is done with it (the tickets). Every chunk takes the slices in
 * the same order, so a chunk follows its predecessor a slice behind and does not wait again. */
static void chunk_amx(const lmhead_args *a, long ci, long r0, int rows, float *buf) {
    const lmhead_bf16 *b = a->bf;
    const int C = a->C, V = a->V, RP = (rows + 31) / 32 * 32, C32 = (int)round_up(C, 32);
    bf_scratch s = bf_layout(buf, C, V, 1);
    int32_t tg[LMHEAD_AMX_MAX_ROWS];
    for (int r = 0; r < rows; r++) tg[r] = (int32_t)row_target(a, r0 + r);
    lmhead_amx_chunk k = amx_chunk_of(b, &s, RP, rows, tg);
    bf_prep_x(a, r0, rows, RP, C32, 1, &s);
    for (int attempt = 0; attempt < 2; attempt++) {
        for (int r = 0; r < RP; r++) {
            s.mx[r] = -INFINITY;
            s.sm[r] = 0;
        }
        amx_kernels()->sums(&k);
        if (!bf_rebound(&s, rows)) break;
    }
    for (int r = 0; r < RP; r++) {
        real g = r < rows ? row_scale(a, r0 + r) : 0;
        double sum = s.sm[r];
        if (r < rows) a->losses[r0 + r] = g != 0 ? (real)(log(sum) + s.U[r] - s.tl[r]) : 0;
        s.scale[r] = g != 0 ? (float)(g / sum) : 0;
    }
    if (!a->dx && !a->dw) return;
    if (a->dx) memset(s.DXT, 0, sizeof(float) * (size_t)C * RP);
    if (a->dw)
        for (int r = 0; r < RP; r++)
            for (int c = 0; c < C; c++) s.XSp[amx_xr_at(C, r, c)] = s.XP[amx_xp_at(RP, c, r)];
    for (int sl = 0; sl < LMHEAD_SLICES; sl++) {
        long vlo, vhi;
        slice_bounds(V, sl, &vlo, &vhi);
        if (a->dw)
            while (atomic_load_explicit(&a->tickets[sl], memory_order_acquire) != ci) sched_yield();
        if (vhi > vlo) amx_kernels()->backward(&k, vlo, vhi, a->dw, a->dx != NULL);
        if (!a->dw) continue;
        for (int r = 0; r < rows; r++) {
            long t = a->targets[r0 + r];
            if (t < vlo || t >= vhi) continue;
            real *dw = a->dw + t * C;
            for (int c = 0; c < C; c++) dw[c] -= a->grad_scale * bf16_to_float(s.XP[amx_xp_at(RP, c, r)]);
        }
        atomic_store_explicit(&a->tickets[sl], ci + 1, memory_order_release);
    }
    if (!a->dx) return;
    for (int r = 0; r < rows; r++) {
        real *dx = a->dx + (r0 + r) * C, g = row_scale(a, r0 + r);
        const bf16 *wt = b->wa + (long)tg[r] * C32;
        for (int c = 0; c < C; c++) dx[c] = s.DXT[amx_dxt_at(RP, c, r)] - g * bf16_to_float(wt[c]);
    }
}
#else
int lmhead_bf16_applies(int C) {
    (void)C;
    return 0;
}
engine_status lmhead_bf16_new_on(lmhead_bf16 **out, int V, int C, kernel_path_id path, engine_error *err) {
    (void)path;
    return lmhead_bf16_new(out, V, C, err);
}
void lmhead_amx_use(const lmhead_amx_kernels *k) { (void)k; }
size_t lmhead_bf16_bytes(int V, int C) {
    (void)V;
    (void)C;
    return 0;
}
engine_status lmhead_bf16_new(lmhead_bf16 **out, int V, int C, engine_error *err) {
    (void)V;
    (void)C;
    *out = NULL;
    return engine_fail(err, ENGINE_ERR_INVALID, "bf16 mixed precision is not available in the double build");
}
void lmhead_bf16_free(lmhead_bf16 *b) { (void)b; }
void lmhead_bf16_refresh(lmhead_bf16 *b, const real *w, threadpool *pool) {
    (void)b;
    (void)w;
    (void)pool;
}
#endif

int lmhead_max_rows(const lmhead_bf16 *bf) {
#if !REAL_IS_DOUBLE
    if (bf && bf->path == KERNEL_PATH_AMX) return LMHEAD_AMX_MAX_ROWS;
#else
    (void)bf;
#endif
    return LMHEAD_MAX_ROWS;
}

size_t lmhead_scratch_per_thread(int C, int V) {
    size_t n = (size_t)LMHEAD_MAX_ROWS * (size_t)V + (lmhead_uses_kernels(C) ? kernel_extra(C) : 0);
#if !REAL_IS_DOUBLE
    if (lmhead_bf16_applies(C) && bf_scratch_floats(C, V) > n) n = bf_scratch_floats(C, V);
#endif
    return n;
}

void lmhead_thread(const lmhead_args *a, threadpool *pool, int tid, int nth) {
    (void)nth;
    /* a chunk larger than the scratch and the row arrays were sized for is cut down (fail closed) */
    const int R = a->chunk_rows < lmhead_max_rows(a->bf) ? a->chunk_rows : lmhead_max_rows(a->bf);
    const int C = a->C, V = a->V;
    const int train = a->dx != NULL;
    real *buf = a->buf + (size_t)tid * a->buf_stride;
#ifdef LMHEAD_HAVE_KERNELS
    const int kern = !a->use_blas && lmhead_uses_kernels(C);
#endif
#if !REAL_IS_DOUBLE
    const int bfm = a->bf != NULL && lmhead_bf16_applies(C);
#endif
    const long nchunks = (a->N + R - 1) / R;
    for (long k; (k = threads_next(pool)) < nchunks;) {
        long r0 = k * R, rows = a->N - r0 < R ? a->N - r0 : R;
        int RP = 0;
        (void)RP;
#if !REAL_IS_DOUBLE
        if (bfm && a->bf->path == KERNEL_PATH_AMX) {
            chunk_amx(a, k, r0, (int)rows, buf);
            continue;
        }
        if (bfm) {
            chunk_bf16(a, r0, (int)rows, buf, &RP);
        } else
#endif
#ifdef LMHEAD_HAVE_KERNELS
            if (kern) {
            chunk_kernels(a, r0, (int)rows, buf, buf + (size_t)LMHEAD_MAX_ROWS * V, &RP);
        } else
#endif
        {
            gemm_nt((int)rows, V, C, a->x + r0 * C, C, a->w, C, buf, V, 0);
            for (long r = 0; r < rows; r++)
                a->losses[r0 + r] = (real)lmhead_row_xent(buf + r * V, V, a->targets[r0 + r], a->grad_scale, train);
            if (train) gemm_nn((int)rows, C, V, buf, V, a->w, C, a->dx + r0 * C, C, 0);
        }
        if (!a->dw) continue;
        /* Add this chunk's dW to each slice in turn, as soon as chunk k-1 is done with it. */
        unsigned char done[LMHEAD_SLICES] = {0};
        int left = LMHEAD_SLICES;
        while (left > 0) {
            int progressed = 0;
            for (int i = 0; i < LMHEAD_SLICES; i++) {
                int s = (int)((k + i) % LMHEAD_SLICES);
                if (done[s] || atomic_load_explicit(&a->tickets[s], memory_order_acquire) != k) continue;
                long vlo, vhi;
                slice_bounds(V, s, &vlo, &vhi);
#if !REAL_IS_DOUBLE
                if (bfm)
                    chunk_bf16_dw_slice(a, r0, (int)rows, buf, RP, vlo, vhi);
                else
#endif
#ifdef LMHEAD_HAVE_KERNELS
                    if (kern)
                    chunk_dw_slice(a, r0, (int)rows, buf, RP, buf + (size_t)LMHEAD_MAX_ROWS * V, vlo, vhi);
                else
#endif
                    if (vhi > vlo)
                    gemm_tn((int)(vhi - vlo), C, (int)rows, buf + vlo, V, a->x + r0 * C, C, a->dw + vlo * C, C, 1);
                atomic_store_explicit(&a->tickets[s], k + 1, memory_order_release);
                done[s] = 1;
                left--;
                progressed = 1;
            }
            if (!progressed) sched_yield();
        }
    }
}
