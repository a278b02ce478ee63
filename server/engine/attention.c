#include "attention.h"

#include <math.h>
#include <string.h>

#include "layers.h"

/* ---- q/k transforms, one (batch element, head) unit at a time ---- */

static const real *cos_row(const attention_qk_unit *u, int t) { return u->rope_cos + (size_t)t * (u->d / 2); }
static const real *sin_row(const attention_qk_unit *u, int t) { return u->rope_sin + (size_t)t * (u->d / 2); }

/* rope: q_used = R_t q, k_used = R_t k. */
static void rotate_forward(const attention_qk_unit *u) {
    for (int t = 0; t < u->T; t++) {
        rope_rotate(u->q_used + t * u->used_stride, u->q + t * u->raw_stride, cos_row(u, t), sin_row(u, t), u->d);
        rope_rotate(u->k_used + t * u->used_stride, u->k + t * u->raw_stride, cos_row(u, t), sin_row(u, t), u->d);
    }
}

static void rotate_backward(const attention_qk_unit *u) {
    for (int t = 0; t < u->T; t++) {
        real *dq = u->dq + t * u->d_stride, *dk = u->dk + t * u->d_stride;
        rope_rotate_inverse(dq, dq, cos_row(u, t), sin_row(u, t), u->d);
        rope_rotate_inverse(dk, dk, cos_row(u, t), sin_row(u, t), u->d);
    }
}

/* cosine: q^ = q r, r = (|q|^2 + eps)^-1/2 (kept in aux), then rotated; k likewise. */
static void normalise_rotate_forward(const attention_qk_unit *u) {
    const int d = u->d;
    for (int t = 0; t < u->T; t++) {
        const real *q = u->q + t * u->raw_stride, *k = u->k + t * u->raw_stride;
        real *qo = u->q_used + t * u->used_stride, *ko = u->k_used + t * u->used_stride;
        double sq = 0, sk = 0;
        for (int i = 0; i < d; i++) {
            sq += (double)q[i] * q[i];
            sk += (double)k[i] * k[i];
        }
        real rq = (real)(1.0 / sqrt(sq + COSINE_NORM_EPS)), rk = (real)(1.0 / sqrt(sk + COSINE_NORM_EPS));
        u->q_aux[t * u->aux_stride] = rq;
        u->k_aux[t * u->aux_stride] = rk;
        for (int i = 0; i < d; i++) {
            qo[i] = q[i] * rq;
            ko[i] = k[i] * rk;
        }
        rope_rotate(qo, qo, cos_row(u, t), sin_row(u, t), d);
        rope_rotate(ko, ko, cos_row(u, t), sin_row(u, t), d);
    }
}

/* x^ = x r:  dx = r (dx^ - x^ (x^ . dx^)), after undoing the rotation. */
static void normalise_rotate_backward(const attention_qk_unit *u) {
    const int d = u->d;
    for (int t = 0; t < u->T; t++)
        for (int which = 0; which < 2; which++) {
            real *dx = (which ? u->dk : u->dq) + t * u->d_stride;
            const real *x = (which ? u->k : u->q) + t * u->raw_stride;
            real r = (which ? u->k_aux : u->q_aux)[t * u->aux_stride];
            rope_rotate_inverse(dx, dx, cos_row(u, t), sin_row(u, t), d);
            real dot = 0;
            for (int i = 0; i < d; i++) dot += x[i] * r * dx[i];
            for (int i = 0; i < d; i++) dx[i] = r * (dx[i] - x[i] * r * dot);
        }
}

static double inv_sqrt_d(int d) { return 1.0 / sqrt((double)d); }

#ifdef ATTNLAB_TEST_VARIANT
/* A variant that exists only in test builds, added by HACKING.md's recipe to prove it:
 * q_used = tanh(q), k_used = k, score = q_used . k / sqrt(d), learned positions. */
static void tanh_q_forward(const attention_qk_unit *u) {
    for (int t = 0; t < u->T; t++)
        for (int i = 0; i < u->d; i++) {
            u->q_used[t * u->used_stride + i] = rtanh(u->q[t * u->raw_stride + i]);
            u->k_used[t * u->used_stride + i] = u->k[t * u->raw_stride + i];
        }
}

static void tanh_q_backward(const attention_qk_unit *u) {
    for (int t = 0; t < u->T; t++)
        for (int i = 0; i < u->d; i++) {
            real y = rtanh(u->q[t * u->raw_stride + i]);
            u->dq[t * u->d_stride + i] *= 1 - y * y;
        }
}
#endif

/* ---- the table ---- */

static const attention_variant variants[] = {
    {
        .name = "dot",
        .summary = "q.k / sqrt(d), learned absolute positions",
        .flags = ATTENTION_LEARNED_POSITIONS,
        .scale = ATTENTION_SCALE_FIXED,
        .fixed_scale = inv_sqrt_d,
    },
    {
        .name = "rope",
        .summary = "(R_m q).(R_n k) / sqrt(d)",
        .flags = ATTENTION_ROTATES,
        .qk_forward = rotate_forward,
        .qk_backward = rotate_backward,
        .scale = ATTENTION_SCALE_FIXED,
        .fixed_scale = inv_sqrt_d,
    },
    {
        .name = "cosine_rope",
        .summary = "q, k normalised then rotated; cos / tau, tau learned per layer and head",
        .flags = ATTENTION_ROTATES | ATTENTION_NORMALISES_QK,
        .qk_forward = normalise_rotate_forward,
        .qk_backward = normalise_rotate_backward,
        .aux_per_head = 1,
        .scale = ATTENTION_SCALE_TAU,
        .scale_suffix = "attn.tau",
    },
    {
        .name = "cosine_rope_scale",
        .summary = "q, k normalised then rotated; s * cos, s learned per layer and head (optionally clamped)",
        .flags = ATTENTION_ROTATES | ATTENTION_NORMALISES_QK,
        .qk_forward = normalise_rotate_forward,
        .qk_backward = normalise_rotate_backward,
        .aux_per_head = 1,
        .scale = ATTENTION_SCALE_MULT,
        .scale_suffix = "attn.scale",
    },
#ifdef ATTNLAB_TEST_VARIANT
    {
        .name = "tanh_q",
        .summary = "tanh(q).k / sqrt(d), learned absolute positions (test builds only)",
        .flags = ATTENTION_LEARNED_POSITIONS,
        .qk_forward = tanh_q_forward,
        .qk_backward = tanh_q_backward,
        .scale = ATTENTION_SCALE_FIXED,
        .fixed_scale = inv_sqrt_d,
    },
#endif
};

#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

int attention_count(void) { return N_VARIANTS; }

const attention_variant *attention_at(int i) { return i >= 0 && i < N_VARIANTS ? &variants[i] : NULL; }

int attention_index(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < N_VARIANTS; i++)
        if (!strcmp(variants[i].name, name)) return i;
    return -1;
}

const attention_variant *attention_find(const char *name) { return attention_at(attention_index(name)); }

const char *attention_kind_name(int i) { return i >= 0 && i < N_VARIANTS ? variants[i].name : "unknown"; }

int attention_kind_parse(const char *s, int *k) {
    int i = attention_index(s);
    if (i < 0) return -1;
    *k = i;
    return 0;
}

int attention_layer_extra_tensors(const attention_variant *v) { return v->scale != ATTENTION_SCALE_FIXED; }

/* ---- scale forms ---- */

real attention_scale_value(const attention_variant *v, const attention_scale *s, int d, real theta) {
    switch (s->form) {
    case ATTENTION_SCALE_FIXED: break;
    case ATTENTION_SCALE_TAU: return s->param == TAU_PARAM_LOG ? (real)rexp(-theta) : 1 / theta;
    case ATTENTION_SCALE_MULT:
        if (s->param == TAU_PARAM_LOG) {
            real top = (real)log(s->clamp > 0 ? s->clamp : 1);
            return (real)rexp(s->clamp > 0 && theta > top ? top : theta);
        }
        return s->clamp > 0 && theta > (real)s->clamp ? (real)s->clamp : theta;
    }
    return (real)v->fixed_scale(d);
}

double attention_scale_dtheta(const attention_scale *s, real theta, double g, double dg) {
    switch (s->form) {
    case ATTENTION_SCALE_FIXED: return 0;
    case ATTENTION_SCALE_TAU:
        /* linear: g = 1/tau, dg/dtau = -g^2;  log: g = exp(-theta), dg/dtheta = -g */
        return s->param == TAU_PARAM_LOG ? -dg * g : -dg * g * g;
    case ATTENTION_SCALE_MULT:
        /* linear: g = s, dg/ds = 1;  log: g = exp(theta), dg/dtheta = g;  0 where the clamp holds */
        if (s->param == TAU_PARAM_LOG) return s->clamp > 0 && theta > (real)log(s->clamp) ? 0 : dg * g;
        return s->clamp > 0 && theta > (real)s->clamp ? 0 : dg;
    }
    return 0;
}

double attention_scale_theta0(const attention_scale *s) { return s->param == TAU_PARAM_LOG ? log(s->init) : s->init; }

double attention_scale_init(double configured, int head_dim) {
    return configured > 0 ? configured : sqrt((double)head_dim);
}

double attention_initial_tau(const attention_scale *s) {
    if (s->form == ATTENTION_SCALE_TAU) return s->init;
    if (s->form != ATTENTION_SCALE_MULT) return NAN;
    double s0 = s->clamp > 0 && s->clamp < s->init ? s->clamp : s->init;
    return s0 > 0 ? 1.0 / s0 : NAN;
}
