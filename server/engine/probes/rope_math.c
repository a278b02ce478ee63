#include "rope_math.h"

#include <math.h>

void probe_rope_thetas(int d, double base, double *theta) {
    for (int i = 0; i < d / 2; i++) theta[i] = pow(base, -2.0 * i / d);
}

void probe_rope_rotate(const double *x, double *out, int d, const double *theta, double pos, probe_rope_layout layout) {
    int h = d / 2;
    for (int i = 0; i < h; i++) {
        int a = layout == PROBE_ROPE_INTERLEAVED ? 2 * i : i;
        int b = layout == PROBE_ROPE_INTERLEAVED ? 2 * i + 1 : i + h;
        double ang = pos * theta[i], c = cos(ang), s = sin(ang);
        double x0 = x[a], x1 = x[b];
        out[a] = x0 * c - x1 * s;
        out[b] = x0 * s + x1 * c;
    }
}

void probe_rope_rotate_f32(const float *x, float *out, int d, const float *theta, float pos) {
    for (int i = 0; i < d / 2; i++) {
        float ang = pos * theta[i], c = cosf(ang), s = sinf(ang);
        float x0 = x[2 * i], x1 = x[2 * i + 1];
        out[2 * i] = x0 * c - x1 * s;
        out[2 * i + 1] = x0 * s + x1 * c;
    }
}

double probe_rope_dot(const double *a, const double *b, int d) {
    double s = 0;
    for (int i = 0; i < d; i++) s += a[i] * b[i];
    return s;
}

double probe_rope_norm(const double *a, int d) { return sqrt(probe_rope_dot(a, a, d)); }

void probe_rope_sinusoid(double *p, int d, double base, double pos) {
    for (int i = 0; i < d / 2; i++) {
        double w = pow(base, -2.0 * i / d);
        p[2 * i] = sin(pos * w);
        p[2 * i + 1] = cos(pos * w);
    }
}

double probe_rope_score(const double *q, const double *k, int d, const double *theta, double m, double n) {
    /* Pair by pair, so no scratch vector is needed: (R(m)q).(R(n)k) summed over pairs. */
    double s = 0;
    for (int i = 0; i < d / 2; i++) {
        double cm = cos(m * theta[i]), sm = sin(m * theta[i]);
        double cn = cos(n * theta[i]), sn = sin(n * theta[i]);
        double q0 = q[2 * i] * cm - q[2 * i + 1] * sm, q1 = q[2 * i] * sm + q[2 * i + 1] * cm;
        double k0 = k[2 * i] * cn - k[2 * i + 1] * sn, k1 = k[2 * i] * sn + k[2 * i + 1] * cn;
        s += q0 * k0 + q1 * k1;
    }
    return s;
}

void probe_rope_softmax(const double *s, int n, double scale, double *w) {
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < n; i++)
        if (scale * s[i] > mx) mx = scale * s[i];
    for (int i = 0; i < n; i++) z += (w[i] = exp(scale * s[i] - mx));
    for (int i = 0; i < n; i++) w[i] /= z;
}

void probe_rope_softmax_stats(const double *s, int n, double scale, double *entropy, double *max_w) {
    /* Two passes without scratch: H = log Z - sum p_i x_i with x shifted by its max. */
    double mx = -INFINITY, z = 0, ex = 0;
    for (int i = 0; i < n; i++)
        if (scale * s[i] > mx) mx = scale * s[i];
    for (int i = 0; i < n; i++) {
        double x = scale * s[i] - mx, e = exp(x);
        z += e;
        ex += e * x;
    }
    *entropy = log(z) - ex / z;
    *max_w = 1.0 / z;
}
