/* scaling: seed 001's question. For unit-variance random q, k the dot product's variance grows
 * as d_k, so a raw softmax saturates onto one key as d_k grows; dividing by sqrt(d_k) holds it
 * level; cos/tau is bounded in [-1, 1]/tau, so its sharpness is set by tau alone, and a large tau
 * goes flat. Reported per d_k, averaged over trials of one query against n_keys keys. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe_impl.h"
#include "rng.h"
#include "rope_math.h"

#define MAX_DKS 16
#define MAX_TAUS 8
#define MAX_WORK 20000000.0 /* normals drawn, which bounds the run time to well under a second */

static const double def_dks[] = {16, 32, 64, 128, 256, 512, 1024};
static const double def_taus[] = {0.05, 0.1, 0.2, 0.5, 1.0};

static const probe_param params[] = {
    PROBE_ROW_INT_LIST("dks", "key dimensions", 1, 4096, def_dks, MAX_DKS),
    PROBE_ROW_INT("n_keys", "keys per softmax", 32, 2, 4096),
    PROBE_ROW_INT("trials", "queries averaged per d_k", 8, 1, 1024),
    PROBE_ROW_NUMBER_LIST("taus", "temperatures for cos/tau", 1e-4, 100, def_taus, MAX_TAUS),
    PROBE_ROW_RANDOM_SEED,
};

/* The normals a run draws, bounded before it starts. */
static engine_status check(const json_t *p, probe_error *err) {
    double dks[MAX_DKS];
    int nd = probe_p_list(p, "dks", dks, MAX_DKS);
    int n = (int)probe_p_int(p, "n_keys"), trials = (int)probe_p_int(p, "trials");
    double work = 0;
    for (int i = 0; i < nd; i++) work += dks[i] * (n + 1.0) * trials;
    if (work > MAX_WORK)
        return probe_fail(err, ENGINE_ERR_INVALID, "trials",
                          "sum(dks) * (n_keys + 1) * trials is %.0f, above the limit of %.0f", work, MAX_WORK);
    return ENGINE_OK;
}

/* What every d_k's measurement shares: n keys per softmax, trials queries, the temperatures, and
 * the working arrays q, k [dmax], dot, cosv [n]. */
typedef struct {
    int n, trials, nt;
    const double *taus;
    double *q, *k, *dot, *cosv;
} scaling_work;

/* The row of d_k dk, drawing from rng: dk, the variance of q.k, then the mean entropy and largest
 * weight of the softmax raw, scaled by 1/sqrt(dk) and of cos/tau for each tau (6 + 2 nt numbers). */
static void measure_dk(const scaling_work *w, rng_state *rng, int dk, double *row) {
    const int n = w->n, trials = w->trials, nt = w->nt;
    double *q = w->q, *k = w->k, *dot = w->dot, *cosv = w->cosv;
    double sum = 0, sq = 0, stats[4 + 2 * MAX_TAUS] = {0};
    for (int t = 0; t < trials; t++) {
        double nq = 0;
        for (int i = 0; i < dk; i++) q[i] = rng_normal_polar(rng), nq += q[i] * q[i];
        for (int j = 0; j < n; j++) {
            double s = 0, nk = 0;
            for (int i = 0; i < dk; i++) {
                k[i] = rng_normal_polar(rng);
                s += q[i] * k[i];
                nk += k[i] * k[i];
            }
            dot[j] = s;
            cosv[j] = s / sqrt(nq * nk);
            sum += s, sq += s * s;
        }
        double e, m;
        probe_rope_softmax_stats(dot, n, 1.0, &e, &m);
        stats[0] += e, stats[1] += m;
        probe_rope_softmax_stats(dot, n, 1.0 / sqrt((double)dk), &e, &m);
        stats[2] += e, stats[3] += m;
        for (int ti = 0; ti < nt; ti++) {
            probe_rope_softmax_stats(cosv, n, 1.0 / w->taus[ti], &e, &m);
            stats[4 + 2 * ti] += e, stats[5 + 2 * ti] += m;
        }
    }
    double cnt = (double)trials * n, mean = sum / cnt;
    row[0] = dk;
    row[1] = cnt > 1 ? (sq - cnt * mean * mean) / (cnt - 1) : NAN;
    for (int i = 0; i < 4 + 2 * nt; i++) row[2 + i] = stats[i] / trials;
}

/* The table "scaling" with its columns: dk, var_dot, raw and scaled figures, then per tau. */
static json_t *scaling_table(probe_out *out, const double *taus, int nt) {
    static const char *const fixed[] = {
        "dk", "var_dot", "entropy_raw", "max_weight_raw", "entropy_scaled", "max_weight_scaled"};
    json_t *cols = probe_cols(fixed, 6);
    for (int t = 0; t < nt; t++) {
        cols = probe_cols_add(cols, "entropy_cos_tau_%g", taus[t]);
        cols = probe_cols_add(cols, "max_weight_cos_tau_%g", taus[t]);
    }
    return probe_table_cols(out, "scaling", cols);
}

/* The charts over the table "scaling" (its per-tau entropy columns read back from the table). */
static void scaling_charts(probe_out *out, int nt) {
    static const char *const vy[] = {"var_dot", NULL};
    probe_chart(out, "scaling", "line", "dk", vy, "variance of q.k by d_k", 1);
    static const char *const my[] = {"max_weight_raw", "max_weight_scaled", NULL};
    probe_chart(out, "scaling", "line", "dk", my, "largest softmax weight: raw vs scaled by sqrt(d_k)", 1);
    const char *ey[3 + MAX_TAUS] = {"entropy_raw", "entropy_scaled"};
    json_t *tc = json_object_get(json_array_get(json_object_get(out->result, "tables"), 0), "columns");
    for (int t = 0; t < nt && tc; t++) ey[2 + t] = json_string_value(json_array_get(tc, (size_t)(6 + 2 * t)));
    probe_chart(out, "scaling", "line", "dk", ey, "softmax entropy (nats) by d_k", 1);
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    double dks[MAX_DKS], taus[MAX_TAUS];
    int nd = probe_p_list(p, "dks", dks, MAX_DKS), nt = probe_p_list(p, "taus", taus, MAX_TAUS);
    scaling_work w = {
        .n = (int)probe_p_int(p, "n_keys"), .trials = (int)probe_p_int(p, "trials"), .nt = nt, .taus = taus};
    const int n = w.n;
    int dmax = 0;
    for (int i = 0; i < nd; i++)
        if (dks[i] > dmax) dmax = (int)dks[i];
    double *buf = malloc(sizeof(double) * (size_t)(2 * dmax + 2 * n));
    if (!buf) return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    w.q = buf, w.k = w.q + dmax, w.dot = w.k + dmax, w.cosv = w.dot + n;
    rng_state rng;
    rng_seed(&rng, (uint64_t)probe_p_int(p, "seed"));

    json_t *rows = scaling_table(out, taus, nt);
    double row[6 + 2 * MAX_TAUS];
    double saturates_at = NAN, scaled_lo = INFINITY, scaled_hi = 0, lnn = log((double)n);
    int flat[MAX_TAUS];
    for (int t = 0; t < nt; t++) flat[t] = 1;
    for (int di = 0; di < nd; di++) {
        if (probe_cancelled(ctx)) {
            free(buf);
            return probe_fail(err, ENGINE_ERR_CANCELLED, "", "cancelled");
        }
        measure_dk(&w, &rng, (int)dks[di], row);
        probe_row_nums(out, rows, row, 6 + 2 * nt);
        if (isnan(saturates_at) && row[3] > 0.9) saturates_at = row[0];
        scaled_lo = fmin(scaled_lo, row[4]), scaled_hi = fmax(scaled_hi, row[4]);
        for (int t = 0; t < nt; t++) flat[t] &= row[6 + 2 * t] >= 0.99 * lnn;
    }
    /* "flat": within 1% of the uniform entropy at every d_k */
    double flat_tau = NAN;
    for (int t = 0; t < nt; t++)
        if (flat[t] && !(taus[t] >= flat_tau)) flat_tau = taus[t];
    free(buf);
    probe_summary_num(out, "max_entropy", log((double)n));
    probe_summary_num(out, "raw_saturates_at_dk", saturates_at); /* null: no d_k reached max weight 0.9 */
    probe_summary_num(out, "scaled_entropy_min", scaled_lo);
    probe_summary_num(out, "scaled_entropy_max", scaled_hi);
    probe_summary_num(out, "cos_flat_from_tau", flat_tau); /* null: no tau given is that flat */
    scaling_charts(out, nt);
    return ENGINE_OK;
}

const probe_kind probe_kind_scaling = {
    .name = "scaling",
    .title = "Why √d_k: saturation",
    .description = "variance of q.k and softmax sharpness by d_k: raw, divided by sqrt(d_k), and cos/tau",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .run = run,
    .check = check,
};
