/* cosine_scores: score against relative offset for plain rotary attention (q.k/sqrt(d)) and for
 * cosine-rotary attention (cos(q,k)/tau, seed 000), and how sharp a softmax over those offsets is
 * as tau moves: small tau sharp, large tau diffuse. */
#include <math.h>
#include <stdlib.h>

#include "probe_impl.h"
#include "rng.h"
#include "rope_math.h"

#define MAX_D 1024
#define MAX_TAUS 16

static const double def_taus[] = {0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5};

static const probe_param params[] = {
    PROBE_ROW_D(64, MAX_D),
    PROBE_ROW_BASE,
    PROBE_ROW_VECTOR("q", "query (d numbers); null: random", -1e6, 1e6, 2, MAX_D),
    PROBE_ROW_VECTOR("k", "key (d numbers); null: random", -1e6, 1e6, 2, MAX_D),
    PROBE_ROW_NUMBER("tau", "temperature of the score curve", 0.1, 1e-4, 100),
    PROBE_ROW_INT("max_offset", "offsets 0..max_offset", 128, 0, 65536),
    PROBE_ROW_NUMBER_LIST("taus", "temperatures for the sharpness table", 1e-4, 100, def_taus, MAX_TAUS),
    PROBE_ROW_RANDOM_SEED,
};

static engine_status get_vector(const json_t *p, const char *name, double *v, int d, rng_state *rng, probe_error *err) {
    int n = probe_p_list(p, name, v, d);
    if (n < 0) {
        for (int i = 0; i < d; i++) v[i] = rng_normal_polar(rng);
        return ENGINE_OK;
    }
    if (n != d) return probe_fail(err, ENGINE_ERR_INVALID, name, "%s has %d numbers; d is %d", name, n, d);
    if (probe_rope_norm(v, d) == 0)
        return probe_fail(err, ENGINE_ERR_INVALID, name, "%s must not be the zero vector", name);
    return ENGINE_OK;
}

/* The scores a run computes, bounded before it starts. */
static engine_status check(const json_t *p, probe_error *err) {
    if ((double)(probe_p_int(p, "max_offset") + 1) * (double)probe_p_int(p, "d") > 2e6)
        return probe_fail(err, ENGINE_ERR_INVALID, "max_offset", "(max_offset + 1) * d must stay under 2000000");
    return ENGINE_OK;
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    int d = (int)probe_p_int(p, "d");
    if (d % 2) return probe_fail(err, ENGINE_ERR_INVALID, "d", "d must be even (got %d)", d);
    double base = probe_p_num(p, "base"), tau = probe_p_num(p, "tau"), taus[MAX_TAUS];
    int nt = probe_p_list(p, "taus", taus, MAX_TAUS), T = (int)probe_p_int(p, "max_offset") + 1;
    double *buf = malloc(sizeof(double) * (size_t)(3 * d + 2 * T));
    if (!buf) return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    double *q = buf, *k = q + d, *theta = k + d, *dot = theta + d, *cosv = dot + T;
    rng_state rng;
    rng_seed(&rng, (uint64_t)probe_p_int(p, "seed"));
    engine_status st = get_vector(p, "q", q, d, &rng, err);
    if (!st) st = get_vector(p, "k", k, d, &rng, err);
    if (st) {
        free(buf);
        return st;
    }
    probe_rope_thetas(d, base, theta);
    double nqk = probe_rope_norm(q, d) * probe_rope_norm(k, d), rs = 1 / sqrt((double)d);

    static const char *const cols[] = {"offset", "rope", "cosine_rope", "cosine"};
    json_t *rows = probe_table(out, "scores", cols, 4);
    double cmin = INFINITY, cmax = -INFINITY;
    for (int o = 0; o < T; o++) {
        dot[o] = probe_rope_score(q, k, d, theta, 0, o);
        cosv[o] = dot[o] / nqk;
        cmin = fmin(cmin, cosv[o]), cmax = fmax(cmax, cosv[o]);
        probe_row(out, rows, "iddd", o, dot[o] * rs, cosv[o] / tau, cosv[o]);
    }
    probe_summary_num(out, "cosine_min", cmin);
    probe_summary_num(out, "cosine_max", cmax);
    probe_summary_num(out, "norm_q_times_norm_k", nqk);

    double e, m, hmax = log((double)T);
    probe_rope_softmax_stats(dot, T, rs, &e, &m);
    probe_summary_num(out, "rope_entropy", e);
    probe_summary_num(out, "rope_max_weight", m);
    probe_summary_num(out, "max_entropy", hmax);
    static const char *const scols[] = {"tau", "entropy", "max_weight", "entropy_fraction"};
    rows = probe_table(out, "sharpness", scols, 4);
    for (int t = 0; t < nt; t++) {
        probe_rope_softmax_stats(cosv, T, 1 / taus[t], &e, &m);
        probe_row(out, rows, "dddd", taus[t], e, m, hmax > 0 ? e / hmax : NAN);
    }
    probe_vectors_table(out, q, k, d);
    free(buf);

    static const char *const y[] = {"rope", "cosine_rope", NULL};
    probe_chart(out, "scores", "line", "offset", y, "score by relative offset", 0);
    static const char *const sy[] = {"entropy_fraction", "max_weight", NULL};
    probe_chart(out, "sharpness", "line", "tau", sy, "softmax over offsets: sharpness by tau", 1);
    return ENGINE_OK;
}

const probe_kind probe_kind_cosine_scores = {
    .name = "cosine_scores",
    .title = "cos/τ sharpness",
    .description = "score by offset for rotary q.k/sqrt(d) and cosine-rotary cos/tau, and softmax sharpness by tau",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .run = run,
    .check = check,
};
