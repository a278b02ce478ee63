/* The rotary-embedding arithmetic shared by the probes, in double precision.
 * Conventions: pair i of a d-vector (d even) is (x[2i], x[2i+1]) when interleaved, or
 * (x[i], x[i+d/2]) when half-split; pair i turns at theta_i = base^(-2i/d) per position.
 * None of these allocate or fail; callers check d even and base > 1. */
#ifndef PROBE_ROPE_MATH_H
#define PROBE_ROPE_MATH_H

typedef enum { PROBE_ROPE_INTERLEAVED = 0, PROBE_ROPE_HALF_SPLIT = 1 } probe_rope_layout;

/* theta[i] = base^(-2i/d), i < d/2. */
void probe_rope_thetas(int d, double base, double *theta);

/* out = x rotated by position pos (out may equal x). */
void probe_rope_rotate(const double *x, double *out, int d, const double *theta, double pos, probe_rope_layout layout);

/* The same in float32 throughout (angle, sin/cos and products), to measure what float costs. */
void probe_rope_rotate_f32(const float *x, float *out, int d, const float *theta, float pos);

double probe_rope_dot(const double *a, const double *b, int d);
double probe_rope_norm(const double *a, int d);

/* The additive sinusoidal position vector: p[2i] = sin(pos*w_i), p[2i+1] = cos(pos*w_i), w_i = base^(-2i/d). */
void probe_rope_sinusoid(double *p, int d, double base, double pos);

/* Rotated score: rope(q, m) . rope(k, n), via the 2x2 form. */
double probe_rope_score(const double *q, const double *k, int d, const double *theta, double m, double n);

/* Softmax of scale*s[0..n): entropy (nats) and largest weight; numerically stable. */
void probe_rope_softmax_stats(const double *s, int n, double scale, double *entropy, double *max_w);

/* Softmax of scale*s[0..n) into w. */
void probe_rope_softmax(const double *s, int n, double scale, double *w);

#endif
