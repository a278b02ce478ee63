#include "lmhead.h"

#include <math.h>
#include <sched.h>
#include <string.h>

#include "gemm.h"

#if !REAL_IS_DOUBLE
#include "fastmath.h"
#endif

#if !REAL_IS_DOUBLE

/* Softmax cross-entropy of one row in three vectorised passes (max; exp and sum; scale). */
double lmhead_row_xent(real *x, int V, int target, real scale, int want_grad) {
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
double lmhead_row_xent(real *x, int V, int target, real scale, int want_grad) {
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

/* LT[v..v+NJ)[r..r+16NK) = W[v..v+NJ) . XT[:, r..], with the running max per row in vmax. */
AI void lg_tile(int NJ, int NK, const float *W, int C, const float *XT, int RP, float *LT, float *vmax) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int j = 0; j < NJ; j++)
#pragma GCC unroll 2
        for (int k = 0; k < NK; k++) acc[j][k] = _mm512_setzero_ps();
    for (int c = 0; c < C; c++) {
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

__attribute__((noinline)) static void lg_all(const float *W, int V, int C, const float *XT, int RP, float *LT, float *vmax) {
    for (int r = 0; r < RP; r++) vmax[r] = -INFINITY;
    int v = 0;
    for (; v + 12 <= V; v += 12) {
        int r = 0;
        for (; r + 32 <= RP; r += 32) lg_tile(12, 2, W + (long)v * C, C, XT + r, RP, LT + (long)v * RP + r, vmax + r);
        for (; r < RP; r += 16) lg_tile(12, 1, W + (long)v * C, C, XT + r, RP, LT + (long)v * RP + r, vmax + r);
    }
    for (; v < V; v++)
        for (int r = 0; r < RP; r += 16) lg_tile(1, 1, W + (long)v * C, C, XT + r, RP, LT + (long)v * RP + r, vmax + r);
}

/* DXT[c..c+8)[r..r+16NK) (+)= sum over v in [v0, v1) of W[v][c..] LT[v][r..]. NK = 4 (64 rows)
 * measured ~10% faster than 2 here, though its 32 accumulators exceed the registers a little. */
AI void dx_tile(int NK, const float *W, int C, const float *LT, int RP, int v0, int v1, float *DXT, int first) {
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
#pragma GCC unroll 4
        for (int k = 0; k < NK; k++)
            acc[j][k] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(DXT + (long)j * RP + 16 * k);
    for (int v = v0; v < v1; v++) {
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
    for (int v0 = 0; v0 < V; v0 += 256) {
        int v1 = v0 + 256 < V ? v0 + 256 : V;
        int r = 0;
        for (; r + 64 <= RP; r += 64) {
            exp_block(LT, RP, v0, v1, r, 4, vmax, sums, 1);
            for (int c = 0; c < C; c += 8) dx_tile(4, W + c, C, LT + r, RP, v0, v1, DXT + (long)c * RP + r, v0 == 0);
        }
        for (; r < RP; r += 16) {
            exp_block(LT, RP, v0, v1, r, 1, vmax, sums, 1);
            for (int c = 0; c < C; c += 8) dx_tile(1, W + c, C, LT + r, RP, v0, v1, DXT + (long)c * RP + r, v0 == 0);
        }
    }
}

/* dW[v..v+NJ)[16z0..16(z0+NZ)) += sum over r < rows of LT[v][r] XS[r][..]. Tiles of at most 64
 * columns keep the XS columns they read (rows x 256 bytes) in L1 across the vocabulary. */
AI void dw_tile(int NJ, int NZ, const float *LT, int RP, const float *XS, int C, int rows, float *dW) {
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int j = 0; j < NJ; j++)
#pragma GCC unroll 4
        for (int z = 0; z < NZ; z++) acc[j][z] = _mm512_loadu_ps(dW + (long)j * C + 16 * z);
    for (int r = 0; r < rows; r++) {
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
    const int NZ = C / 16;
    long v = vlo;
    for (; v < vhi; v += 6) {
        int nj = vhi - v < 6 ? (int)(vhi - v) : 6;
        for (int z0 = 0; z0 < NZ; z0 += 4) {
            int nz = NZ - z0 < 4 ? NZ - z0 : 4;
            const float *lt = LT + v * RP, *xs = XS + 16 * z0;
            float *dw = dW + v * C + 16 * z0;
            if (nj == 6) {
                switch (nz) {
                case 1: dw_tile(6, 1, lt, RP, xs, C, rows, dw); break;
                case 2: dw_tile(6, 2, lt, RP, xs, C, rows, dw); break;
                case 3: dw_tile(6, 3, lt, RP, xs, C, rows, dw); break;
                default: dw_tile(6, 4, lt, RP, xs, C, rows, dw); break;
                }
            } else {
                for (int j = 0; j < nj; j++) switch (nz) {
                    case 1: dw_tile(1, 1, lt + (long)j * RP, RP, xs, C, rows, dw + (long)j * C); break;
                    case 2: dw_tile(1, 2, lt + (long)j * RP, RP, xs, C, rows, dw + (long)j * C); break;
                    case 3: dw_tile(1, 3, lt + (long)j * RP, RP, xs, C, rows, dw + (long)j * C); break;
                    default: dw_tile(1, 4, lt + (long)j * RP, RP, xs, C, rows, dw + (long)j * C); break;
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
    for (int r = 0; r < rows; r++) tl[r] = LT[(long)a->targets[r0 + r] * RP + r];
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
        a->losses[r0 + r] = (real)(log(sum) + vmax[r] - tl[r]);
        scale[r] = (float)(a->grad_scale / sum);
    }
    *RP_out = RP;
    if (!train) return;
    /* dx[r] = s_r sum_v e[v][r] W[v] - g W[target_r] */
    for (int r = 0; r < rows; r++) {
        real *dx = a->dx + (r0 + r) * C;
        const float *wt = a->w + (long)a->targets[r0 + r] * C;
        for (int c = 0; c < C; c++) dx[c] = scale[r] * DXT[(long)c * RP + r] - a->grad_scale * wt[c];
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

size_t lmhead_scratch_per_thread(int C, int V) {
    return (size_t)LMHEAD_MAX_ROWS * (size_t)V + (lmhead_uses_kernels(C) ? kernel_extra(C) : 0);
}

void lmhead_thread(const lmhead_args *a, threadpool *pool, int tid, int nth) {
    (void)nth;
    const int R = a->chunk_rows, C = a->C, V = a->V;
    const int train = a->dx != NULL;
    real *buf = a->buf + (size_t)tid * a->buf_stride;
#ifdef LMHEAD_HAVE_KERNELS
    const int kern = !a->use_blas && lmhead_uses_kernels(C);
#endif
    const long nchunks = (a->N + R - 1) / R;
    for (long k; (k = threads_next(pool)) < nchunks;) {
        long r0 = k * R, rows = a->N - r0 < R ? a->N - r0 : R;
        int RP = 0;
        (void)RP;
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
                threads_split(V, s, LMHEAD_SLICES, &vlo, &vhi);
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
