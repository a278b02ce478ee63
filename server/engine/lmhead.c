#include "lmhead.h"

#include <math.h>
#include <string.h>

#include "gemm.h"

#if !REAL_IS_DOUBLE
/* A vectorised expf for the softmax over the vocabulary (the only place with ~2e8 exps per
 * step): Cody-Waite reduction to r in [-ln2/2, ln2/2], degree-6 Taylor polynomial (relative
 * error < 2e-7), scaling by 2^n through the exponent bits. Inputs are <= 0 here (x - max);
 * they are clamped at -87 so 2^n stays a normal float. The scalar twin gives the same bits for
 * the tail of a row. */
typedef float vf16 __attribute__((vector_size(64)));
typedef int vi16 __attribute__((vector_size(64)));

#define EXP_LO (-87.0f)
#define EXP_L2E 1.44269504088896341f
#define EXP_LN2HI 0.693359375f
#define EXP_LN2LO (-2.12194440e-4f)
#define EXP_MAGIC 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer in the low bits */

static inline vf16 vexp16(vf16 x) {
    vf16 lo = x - x + EXP_LO;
    vi16 m = x < lo;
    x = (vf16)((m & (vi16)lo) | (~m & (vi16)x));
    vf16 t = x * EXP_L2E + EXP_MAGIC;
    vf16 n = t - EXP_MAGIC;
    vf16 r = x - n * EXP_LN2HI;
    r = r - n * EXP_LN2LO;
    vf16 p = r * 0.0f + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    vi16 ni = (vi16)t - (vi16)(t - t + EXP_MAGIC);
    vi16 scale = (ni + 127) << 23;
    return p * (vf16)scale;
}

static inline float sexp(float x) {
    if (x < EXP_LO) x = EXP_LO;
    float t = x * EXP_L2E + EXP_MAGIC;
    float n = t - EXP_MAGIC;
    float r = x - n * EXP_LN2HI;
    r = r - n * EXP_LN2LO;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int ti, mi;
    float magic = EXP_MAGIC;
    memcpy(&ti, &t, 4);
    memcpy(&mi, &magic, 4);
    int bits = (ti - mi + 127) << 23;
    float sc;
    memcpy(&sc, &bits, 4);
    return p * sc;
}

double lmhead_row_xent(real *x, int V, int target, real scale, int want_grad) {
    int nv = V / 16 * 16;
    vf16 vmx;
    float mx = -INFINITY;
    if (nv) {
        memcpy(&vmx, x, 64);
        for (int j = 16; j < nv; j += 16) {
            vf16 a;
            memcpy(&a, x + j, 64);
            vi16 m = a > vmx;
            vmx = (vf16)((m & (vi16)a) | (~m & (vi16)vmx));
        }
        for (int i = 0; i < 16; i++) mx = vmx[i] > mx ? vmx[i] : mx;
    }
    for (int j = nv; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    float xt = x[target];
    vf16 vsum = {0};
    vf16 vm = vmx - vmx + mx;
    for (int j = 0; j < nv; j += 16) {
        vf16 a;
        memcpy(&a, x + j, 64);
        vf16 e = vexp16(a - vm);
        if (want_grad) memcpy(x + j, &e, 64);
        vsum += e;
    }
    double sum = 0;
    for (int i = 0; i < 16; i++) sum += vsum[i];
    for (int j = nv; j < V; j++) {
        float e = sexp(x[j] - mx);
        if (want_grad) x[j] = e;
        sum += e;
    }
    double loss = log(sum) + mx - xt;
    if (want_grad) {
        float k = (float)(scale / sum);
        vf16 vk = vm - vm + k;
        for (int j = 0; j < nv; j += 16) {
            vf16 a;
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

void lmhead_thread(const lmhead_args *a, threadpool *pool, int tid, int nth) {
    const int R = a->chunk_rows, C = a->C, V = a->V;
    const int train = a->dx != NULL;
    real *buf = a->buf + (long)tid * R * V;
    long vlo[257], vhi[257];
    for (int s = 0; s < nth; s++) threads_split(V, s, nth, &vlo[s], &vhi[s]);
    for (long blk = 0; blk < a->N; blk += (long)R * nth) {
        long r0 = blk + (long)tid * R;
        long rows = a->N - r0;
        if (rows > R) rows = R;
        if (rows < 0) rows = 0;
        if (rows > 0) {
            gemm_nt((int)rows, V, C, a->x + r0 * C, C, a->w, C, buf, V, 0);
            for (long r = 0; r < rows; r++)
                a->losses[r0 + r] =
                    (real)lmhead_row_xent(buf + r * V, V, a->targets[r0 + r], a->grad_scale, train);
            if (train) gemm_nn((int)rows, C, V, buf, V, a->w, C, a->dx + r0 * C, C, 0);
        }
        if (!a->dw) continue;
        /* Round k: this thread adds its rows' share to vocabulary slice (tid + k) mod nth. */
        for (int k = 0; k < nth; k++) {
            if (k) threads_barrier(pool);
            int s = (tid + k) % nth;
            if (rows > 0 && vhi[s] > vlo[s])
                gemm_tn((int)(vhi[s] - vlo[s]), C, (int)rows, buf + vlo[s], V, a->x + r0 * C, C,
                        a->dw + vlo[s] * C, C, 1);
        }
        threads_barrier(pool);
    }
}
