/* rotation_check: that rotary embedding is a rotation, and what its usual mistakes cost.
 * Every pair's matrix is orthogonal with det +1 and the complex form agrees with the 2x2 form;
 * norms survive; interleaved and half-split layouts are each position-invariant yet score the
 * same weights differently; re-rotating cached keys puts position in twice, more so the longer the
 * generation; and a float32 angle drifts from the double one as position grows. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "probe_impl.h"
#include "rng.h"
#include "rope_math.h"

#define MAX_LIST 32

static const double def_positions[] = {1, 10, 100, 1000, 10000, 100000, 1000000};
static const double def_offsets[] = {0, 1, 2, 4, 8, 16, 64, 256, 1024, 4096};
static const double def_lengths[] = {1, 4, 16, 64, 256, 1024};

static const probe_param params[] = {
    PROBE_ROW_D(64, 256),
    PROBE_ROW_BASE,
    PROBE_ROW_INT_LIST("positions", "positions for the matrix, norm and float32 checks", 0, 100000000, def_positions,
                       MAX_LIST),
    PROBE_ROW_INT_LIST("offsets", "relative offsets for the layout comparison", 0, 1000000, def_offsets, MAX_LIST),
    PROBE_ROW_INT_LIST("gen_lengths", "generation lengths for the cache re-rotation bug", 1, 4096, def_lengths,
                       MAX_LIST),
    PROBE_ROW_RANDOM_SEED,
};

static void pair_checks(probe_out *out, const double *theta, int h, const double *pos, int np, rng_state *rng) {
    static const char *const cols[] = {"pair", "theta", "max_orthogonality_error", "max_det_error",
                                       "max_complex_vs_2x2"};
    json_t *rows = probe_table(out, "pairs", cols, 5);
    double worst_o = 0, worst_d = 0, worst_c = 0;
    double x0 = rng_normal_polar(rng), x1 = rng_normal_polar(rng);
    for (int i = 0; i < h; i++) {
        double eo = 0, ed = 0, ec = 0;
        for (int j = 0; j < np; j++) {
            double a = pos[j] * theta[i], c = cos(a), s = sin(a);
            /* R = [[c, -s], [s, c]]; R^T R = [[c^2+s^2, -cs+sc], [-sc+cs, s^2+c^2]] */
            double rtr[4] = {c * c + s * s - 1, c * -s + s * c, -s * c + c * s, s * s + c * c - 1};
            for (int e = 0; e < 4; e++) eo = fmax(eo, fabs(rtr[e]));
            ed = fmax(ed, fabs(c * c - (-s * s) - 1));
            double complex z = (x0 + I * x1) * cexp(I * a);
            ec = fmax(ec, fmax(fabs(creal(z) - (x0 * c - x1 * s)), fabs(cimag(z) - (x0 * s + x1 * c))));
        }
        probe_row(out, rows, "idddd", i, theta[i], eo, ed, ec);
        worst_o = fmax(worst_o, eo), worst_d = fmax(worst_d, ed), worst_c = fmax(worst_c, ec);
    }
    probe_summary_num(out, "max_orthogonality_error", worst_o);
    probe_summary_num(out, "max_det_error", worst_d);
    probe_summary_num(out, "max_complex_vs_2x2", worst_c);
}

/* Norms and float32 against double at each position: the table "precision". x, y: scratch [d];
 * fbuf: scratch [4 d]. */
static void precision_table(probe_out *out, const double *q, const double *k, const double *theta, int d,
                            const double *pos, int np, double *x, double *y, float *fbuf) {
    const int h = d / 2;
    float *fx = fbuf, *fy = fx + d, *fth = fy + d, *fq = fth + d;
    static const char *const ncols[] = {"position", "norm_relative_error", "f32_max_angle_error",
                                        "f32_max_component_error", "f32_score_error"};
    json_t *rows = probe_table(out, "precision", ncols, 5);
    double worst_norm = 0, nq = probe_rope_norm(q, d);
    for (int i = 0; i < d; i++) fq[i] = (float)q[i], fy[i] = (float)k[i];
    for (int i = 0; i < h; i++) fth[i] = (float)theta[i];
    double last_angle = 0;
    for (int j = 0; j < np; j++) {
        probe_rope_rotate(q, x, d, theta, pos[j], PROBE_ROPE_INTERLEAVED);
        double ne = fabs(probe_rope_norm(x, d) - nq) / nq;
        worst_norm = fmax(worst_norm, ne);
        double ea = 0, ecomp = 0;
        for (int i = 0; i < h; i++) ea = fmax(ea, fabs((double)((float)pos[j] * fth[i]) - pos[j] * theta[i]));
        probe_rope_rotate_f32(fq, fx, d, fth, (float)pos[j]);
        for (int i = 0; i < d; i++) ecomp = fmax(ecomp, fabs((double)fx[i] - x[i]));
        /* Score of q at pos against k at pos + 1, both ways. */
        probe_rope_rotate(k, y, d, theta, pos[j] + 1, PROBE_ROPE_INTERLEAVED);
        double sd = probe_rope_dot(x, y, d);
        float fk[1024];
        probe_rope_rotate_f32(fy, fk, d, fth, (float)(pos[j] + 1));
        float sf = 0;
        for (int i = 0; i < d; i++) sf += fx[i] * fk[i];
        probe_row(out, rows, "ddddd", pos[j], ne, ea, ecomp, fabs((double)sf - sd));
        last_angle = ea;
    }
    probe_summary_num(out, "max_norm_relative_error", worst_norm);
    probe_summary_num(out, "f32_angle_error_at_last_position", last_angle);
}

/* Layouts: the same raw q, k read as interleaved or as half-split pairs, at each offset: the
 * table "layouts". x, y: scratch [d]. */
static void layout_table(probe_out *out, const double *q, const double *k, const double *theta, int d,
                         const double *offs, int no, double *x, double *y) {
    static const char *const lcols[] = {"offset", "interleaved", "half_split", "difference"};
    json_t *rows = probe_table(out, "layouts", lcols, 4);
    double inv_il = 0, inv_hs = 0, worst_diff = 0, mean_abs = 0;
    for (int o = 0; o < no; o++) {
        double sc[2];
        for (int l = 0; l < 2; l++) {
            double ref = 0;
            for (int sh = 0; sh < 3; sh++) { /* the same offset at three absolute places */
                double m = sh == 0 ? 0 : sh == 1 ? 37 : 4000;
                probe_rope_rotate(q, x, d, theta, m, (probe_rope_layout)l);
                probe_rope_rotate(k, y, d, theta, m + offs[o], (probe_rope_layout)l);
                double s = probe_rope_dot(x, y, d);
                if (sh == 0)
                    ref = s;
                else if (l == 0)
                    inv_il = fmax(inv_il, fabs(s - ref));
                else
                    inv_hs = fmax(inv_hs, fabs(s - ref));
            }
            sc[l] = ref;
        }
        worst_diff = fmax(worst_diff, fabs(sc[0] - sc[1]));
        mean_abs += fabs(sc[0]) / no;
        probe_row(out, rows, "dddd", offs[o], sc[0], sc[1], sc[0] - sc[1]);
    }
    probe_summary_num(out, "interleaved_invariance_error", inv_il);
    probe_summary_num(out, "half_split_invariance_error", inv_hs);
    probe_summary_num(out, "layout_max_difference", worst_diff);
    probe_summary_num(out, "layout_mean_abs_score", mean_abs);
}

/* Cache: tmax keys drawn from rng, rotated at their position once (right) or again on reuse (the
 * bug), scored by q at the end of each generation length: the table "cache_rerotation".
 * scratch: d + 3 tmax d + 3 tmax doubles. */
static void cache_table(probe_out *out, rng_state *rng, const double *q, const double *theta, int d, const double *lens,
                        int nl, int tmax, double *scratch) {
    double *qr = scratch, *keys = qr + d, *cache = keys + (size_t)tmax * d, *cache2 = cache + (size_t)tmax * d;
    double *s_ok = cache2 + (size_t)tmax * d, *s_bug = s_ok + tmax, *w = s_bug + tmax;
    for (int j = 0; j < tmax; j++) {
        double *kj = keys + (size_t)j * d;
        for (int i = 0; i < d; i++) kj[i] = rng_normal_polar(rng);
        probe_rope_rotate(kj, cache + (size_t)j * d, d, theta, j, PROBE_ROPE_INTERLEAVED);
        probe_rope_rotate(cache + (size_t)j * d, cache2 + (size_t)j * d, d, theta, j, PROBE_ROPE_INTERLEAVED);
    }
    static const char *const ccols[] = {"gen_length", "mean_abs_score_error", "max_abs_score_error",
                                        "attention_tv_distance"};
    json_t *rows = probe_table(out, "cache_rerotation", ccols, 4);
    double scale = 1 / sqrt((double)d), last_tv = 0;
    for (int l = 0; l < nl; l++) {
        int T = (int)lens[l];
        probe_rope_rotate(q, qr, d, theta, T - 1, PROBE_ROPE_INTERLEAVED);
        double mean_e = 0, max_e = 0, tv = 0;
        for (int j = 0; j < T; j++) {
            s_ok[j] = probe_rope_dot(qr, cache + (size_t)j * d, d);
            s_bug[j] = probe_rope_dot(qr, cache2 + (size_t)j * d, d);
            mean_e += fabs(s_bug[j] - s_ok[j]) / T;
            max_e = fmax(max_e, fabs(s_bug[j] - s_ok[j]));
        }
        probe_rope_softmax(s_ok, T, scale, w);
        probe_rope_softmax(s_bug, T, scale, s_ok); /* s_ok no longer needed: reuse for the buggy weights */
        for (int j = 0; j < T; j++) tv += 0.5 * fabs(w[j] - s_ok[j]);
        probe_row(out, rows, "iddd", T, mean_e, max_e, tv);
        last_tv = tv;
    }
    probe_summary_num(out, "cache_tv_distance_at_longest", last_tv);
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    int d = (int)probe_p_int(p, "d"), h = d / 2;
    if (d % 2) return probe_fail(err, ENGINE_ERR_INVALID, "d", "d must be even (got %d)", d);
    double base = probe_p_num(p, "base"), pos[MAX_LIST], offs[MAX_LIST], lens[MAX_LIST];
    int np = probe_p_list(p, "positions", pos, MAX_LIST), no = probe_p_list(p, "offsets", offs, MAX_LIST),
        nl = probe_p_list(p, "gen_lengths", lens, MAX_LIST);
    int tmax = 0;
    for (int i = 0; i < nl; i++)
        if (lens[i] > tmax) tmax = (int)lens[i];

    /* Scratch: q, k, x, y, theta (d each), float copies, and the cache (tmax keys, rotated once
     * and twice) with its scores. */
    size_t n_d = (size_t)d * (6 + 3 * (size_t)tmax) + 3 * (size_t)tmax;
    double *buf = malloc(sizeof(double) * n_d);
    float *fbuf = malloc(sizeof(float) * (size_t)(4 * d));
    if (!buf || !fbuf) {
        free(buf);
        free(fbuf);
        return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    }
    double *q = buf, *k = q + d, *x = k + d, *y = x + d, *theta = y + d;
    rng_state rng;
    rng_seed(&rng, (uint64_t)probe_p_int(p, "seed"));
    probe_rope_thetas(d, base, theta);
    pair_checks(out, theta, h, pos, np, &rng);
    for (int i = 0; i < d; i++) q[i] = rng_normal_polar(&rng);
    for (int i = 0; i < d; i++) k[i] = rng_normal_polar(&rng);
    precision_table(out, q, k, theta, d, pos, np, x, y, fbuf);
    layout_table(out, q, k, theta, d, offs, no, x, y);
    cache_table(out, &rng, q, theta, d, lens, nl, tmax, theta + d);
    probe_vectors_table(out, q, k, d);
    free(buf);
    free(fbuf);

    static const char *const ly[] = {"interleaved", "half_split", NULL};
    probe_chart(out, "layouts", "line", "offset", ly, "same weights, two pair layouts", 0);
    static const char *const cy[] = {"mean_abs_score_error", "attention_tv_distance", NULL};
    probe_chart(out, "cache_rerotation", "line", "gen_length", cy, "re-rotated cache: error by generation length", 1);
    static const char *const py[] = {"f32_max_angle_error", "f32_max_component_error", NULL};
    probe_chart(out, "precision", "line", "position", py, "float32 against float64 by position", 1);
    return ENGINE_OK;
}

const probe_kind probe_kind_rotation_check = {
    .name = "rotation_check",
    .title = "Rotation checks and pitfalls",
    .description = "rotation properties, pair layouts, the cache re-rotation bug and float32 angle error",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .run = run,
};
