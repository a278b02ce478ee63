#include "lmhead.h"

#include <math.h>
#include <sched.h>
#include <string.h>

#include "gemm.h"

#if !REAL_IS_DOUBLE
#include "fastmath.h"

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

void lmhead_thread(const lmhead_args *a, threadpool *pool, int tid, int nth) {
    (void)nth;
    const int R = a->chunk_rows, C = a->C, V = a->V;
    const int train = a->dx != NULL;
    real *buf = a->buf + (size_t)tid * a->buf_stride;
    const long nchunks = (a->N + R - 1) / R;
    for (long k; (k = threads_next(pool)) < nchunks;) {
        long r0 = k * R, rows = a->N - r0 < R ? a->N - r0 : R;
        gemm_nt((int)rows, V, C, a->x + r0 * C, C, a->w, C, buf, V, 0);
        for (long r = 0; r < rows; r++)
            a->losses[r0 + r] = (real)lmhead_row_xent(buf + r * V, V, a->targets[r0 + r], a->grad_scale, train);
        if (train) gemm_nn((int)rows, C, V, buf, V, a->w, C, a->dx + r0 * C, C, 0);
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
