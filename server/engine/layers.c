#include "layers.h"

#include "gemm.h"

#include <math.h>
#include <string.h>

void layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, long rows,
                       int C) {
    for (long r = 0; r < rows; r++) {
        const real *x = inp + r * C;
        real *o = out + r * C;
        /* Two passes in double: the statistics are cheap and this keeps the float build close
         * to the double build even for rows with a large mean. */
        double m = 0;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        double v = 0;
        for (int i = 0; i < C; i++) {
            double dx = x[i] - m;
            v += dx * dx;
        }
        v /= C;
        real s = (real)(1.0 / sqrt(v + LAYERNORM_EPS));
        real mr = (real)m;
        for (int i = 0; i < C; i++) o[i] = (x[i] - mr) * s * w[i] + b[i];
        mean[r] = mr;
        rstd[r] = s;
    }
}

void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, long rows, int C) {
    for (long r = 0; r < rows; r++) {
        const real *x = inp + r * C, *dy = dout + r * C;
        real *dx = dinp + r * C;
        real m = mean[r], s = rstd[r];
        real dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int i = 0; i < C; i++) {
            real norm = (x[i] - m) * s;
            real dn = w[i] * dy[i];
            dnorm_mean += dn;
            dnorm_norm_mean += dn * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            real norm = (x[i] - m) * s;
            real dn = w[i] * dy[i];
            db[i] += dy[i];
            dw[i] += norm * dy[i];
            dx[i] += (dn - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
}

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

#if !REAL_IS_DOUBLE
#include "fastmath.h"

/* tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7, which is all GELU needs (it adds the
 * result to 1), at a fraction of libm's tanhf. */
static inline fm_v16 gelu_tanh16(fm_v16 x, fm_v16 *u_out) {
    fm_v16 u = (float)GELU_K * (x + 0.044715f * x * x * x);
    *u_out = u;
    return 1.0f - 2.0f / (fm_exp16(2.0f * u) + 1.0f);
}

static inline float gelu_tanh1(float x) {
    float u = (float)GELU_K * (x + 0.044715f * x * x * x);
    return 1.0f - 2.0f / (fm_expf(2.0f * u) + 1.0f);
}

void gelu_forward(real *out, const real *inp, long n) {
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        fm_v16 x = fm_load(inp + i), u;
        fm_v16 th = gelu_tanh16(x, &u);
        fm_store(out + i, 0.5f * x * (1.0f + th));
    }
    for (; i < n; i++) out[i] = 0.5f * inp[i] * (1.0f + gelu_tanh1(inp[i]));
}

void gelu_backward(real *dinp, const real *inp, const real *dout, long n) {
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        fm_v16 x = fm_load(inp + i), u;
        fm_v16 th = gelu_tanh16(x, &u);
        fm_v16 du = (float)GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        fm_store(dinp + i, (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du) * fm_load(dout + i));
    }
    for (; i < n; i++) {
        float x = inp[i], th = gelu_tanh1(x);
        float du = (float)GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du) * dout[i];
    }
}
#else
void gelu_forward(real *out, const real *inp, long n) {
    for (long i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_K * (x + (real)0.044715 * x * x * x);
        out[i] = (real)0.5 * x * (1 + rtanh(u));
    }
}

void gelu_backward(real *dinp, const real *inp, const real *dout, long n) {
    for (long i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_K * (x + (real)0.044715 * x * x * x);
        real th = rtanh(u);
        real sech2 = 1 - th * th;
        real du = (real)GELU_K * (1 + 3 * (real)0.044715 * x * x);
        dinp[i] = ((real)0.5 * (1 + th) + (real)0.5 * x * sech2 * du) * dout[i];
    }
}
#endif

void linear_forward(real *out, const real *inp, const real *W, const real *bias, long rows, int in, int out_dim) {
    gemm_nt((int)rows, out_dim, in, inp, in, W, in, out, out_dim, 0);
    if (bias)
        for (long r = 0; r < rows; r++)
            for (int o = 0; o < out_dim; o++) out[r * out_dim + o] += bias[o];
}

void rope_tables(real *cos_t, real *sin_t, int T, int d, double base) {
    int half = d / 2;
    for (int m = 0; m < T; m++)
        for (int i = 0; i < half; i++) {
            double ang = (double)m * pow(base, -2.0 * i / d);
            cos_t[(long)m * half + i] = (real)cos(ang);
            sin_t[(long)m * half + i] = (real)sin(ang);
        }
}

void rope_rotate(real *out, const real *x, const real *c, const real *s, int d) {
    for (int i = 0; i < d / 2; i++) {
        real x0 = x[2 * i], x1 = x[2 * i + 1];
        out[2 * i] = x0 * c[i] - x1 * s[i];
        out[2 * i + 1] = x0 * s[i] + x1 * c[i];
    }
}

void rope_rotate_inverse(real *out, const real *x, const real *c, const real *s, int d) {
    for (int i = 0; i < d / 2; i++) {
        real x0 = x[2 * i], x1 = x[2 * i + 1];
        out[2 * i] = x0 * c[i] + x1 * s[i];
        out[2 * i + 1] = -x0 * s[i] + x1 * c[i];
    }
}

/* p[0..n) = softmax(scale * p) in place; returns the row's entropy in nats, taken without a log
 * per element: with z = score - max and S = sum e^z, H = log S - (sum e^z z) / S. */
#if !REAL_IS_DOUBLE
static double softmax_row_entropy(float *p, int n, float scale) {
    float mx = -INFINITY;
    for (int s = 0; s < n; s++) {
        p[s] *= scale;
        if (p[s] > mx) mx = p[s];
    }
    fm_v16 vsum = fm_splat(0), vez = fm_splat(0), vm = fm_splat(mx);
    int s = 0;
    for (; s + 16 <= n; s += 16) {
        fm_v16 z = fm_load(p + s) - vm, e = fm_exp16(z);
        fm_store(p + s, e);
        vsum += e;
        vez += e * z;
    }
    double sum = 0, ez = 0;
    for (int i = 0; i < 16; i++) {
        sum += vsum[i];
        ez += vez[i];
    }
    for (; s < n; s++) {
        float z = p[s] - mx, e = fm_expf(z);
        p[s] = e;
        sum += e;
        ez += (double)e * z;
    }
    fm_v16 vinv = fm_splat((float)(1.0 / sum));
    for (s = 0; s + 16 <= n; s += 16) fm_store(p + s, fm_load(p + s) * vinv);
    for (; s < n; s++) p[s] *= (float)(1.0 / sum);
    return log(sum) - ez / sum;
}
#else
static double softmax_row_entropy(double *p, int n, double scale) {
    double mx = -INFINITY, sum = 0, ez = 0;
    for (int s = 0; s < n; s++) {
        p[s] *= scale;
        if (p[s] > mx) mx = p[s];
    }
    for (int s = 0; s < n; s++) {
        double z = p[s] - mx, e = exp(z);
        p[s] = e;
        sum += e;
        ez += e * z;
    }
    for (int s = 0; s < n; s++) p[s] /= sum;
    return log(sum) - ez / sum;
}
#endif

/* Both passes use matrix products over the full T x T block (the masked half is computed and
 * then zeroed / multiplied by zero): twice the minimal FLOPs, but attention is ~1% of a step and
 * the products run near the machine's peak where scalar loops over d would not. */
void attention_forward_unit(const real *q, const real *k, int qk_stride, const real *v, int v_stride, real *att,
                            real *y, int y_stride, int T, int d, real scale, double *entropy_sum) {
    gemm_nt(T, T, d, q, qk_stride, k, qk_stride, att, T, 0);
    double ent = 0;
    for (int t = 0; t < T; t++) {
        real *p = att + (long)t * T;
        ent += softmax_row_entropy(p, t + 1, scale);
        for (int s = t + 1; s < T; s++) p[s] = 0;
    }
    gemm_nn(T, d, T, att, T, v, v_stride, y, y_stride, 0);
    *entropy_sum += ent;
}

void attention_backward_unit(const real *q, const real *k, int qk_stride, const real *v, int v_stride, const real *att,
                             const real *dy, int y_stride, real *dq, real *dk, int dqk_stride, real *dv, int dv_stride,
                             int T, int d, real scale, double *dscale, real *ds) {
    gemm_nt(T, T, d, dy, y_stride, v, v_stride, ds, T, 0);    /* dP = dY V^T */
    gemm_tn(T, d, T, att, T, dy, y_stride, dv, dv_stride, 0); /* dV = P^T dY */
    for (int t = 0; t < T; t++) {
        const real *p = att + (long)t * T;
        real *r = ds + (long)t * T;
        real pdp = 0;
        for (int s = 0; s <= t; s++) pdp += p[s] * r[s];
        /* softmax backward, then through score = scale * q.k */
        for (int s = 0; s <= t; s++) r[s] = p[s] * (r[s] - pdp) * scale;
        for (int s = t + 1; s < T; s++) r[s] = 0;
    }
    gemm_nn(T, d, T, ds, T, k, qk_stride, dq, dqk_stride, 0); /* dQ = dS K */
    gemm_tn(T, d, T, ds, T, q, qk_stride, dk, dqk_stride, 0); /* dK = dS^T Q */
    if (dscale) {
        /* dL/dscale = sum_ts dS_raw(t,s) q_t.k_s = sum_t q_t . dq_t / scale */
        double acc = 0;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < d; i++) acc += (double)q[(long)t * qk_stride + i] * dq[(long)t * dqk_stride + i];
        *dscale += acc / scale;
    }
}
