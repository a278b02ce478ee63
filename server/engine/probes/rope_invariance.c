/* rope_invariance: the same gap scores the same wherever it sits, under rotation; not under an
 * added sinusoid (seed 002 step six, seed 003's 42 offset x shift combinations). */
#include <math.h>
#include <stdlib.h>

#include "probe_impl.h"
#include "rng.h"
#include "rope_math.h"

#define MAX_LIST 64

static const double def_starts[] = {3, 10, 100, 4000};
static const double def_offsets[] = {0, 1, 2, 5, 16, 64, 256};
static const double def_shifts[] = {0, 1, 10, 100, 1000, 4000};

static const probe_param params[] = {
    PROBE_ROW_D(64, 1024),
    PROBE_ROW_BASE,
    PROBE_ROW_INT("gap", "distance between query and key", 2, 0, 1000000),
    PROBE_ROW_INT_LIST("starts", "query positions for the fixed gap", 0, 1000000, def_starts, MAX_LIST),
    PROBE_ROW_INT_LIST("offsets", "relative offsets of the grid", 0, 1000000, def_offsets, MAX_LIST),
    PROBE_ROW_INT_LIST("shifts", "absolute shifts of the grid", 0, 1000000, def_shifts, MAX_LIST),
    PROBE_ROW_SEED("random seed for q and k"),
};

static double additive_score(const double *q, const double *k, double *pm, double *pn, int d, double base, double m,
                             double n) {
    probe_rope_sinusoid(pm, d, base, m);
    probe_rope_sinusoid(pn, d, base, n);
    double s = 0;
    for (int i = 0; i < d; i++) s += (q[i] + pm[i]) * (k[i] + pn[i]);
    return s;
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    int d = (int)probe_p_int(p, "d");
    if (d % 2) return probe_fail(err, ENGINE_ERR_INVALID, "d", "d must be even (got %d)", d);
    double base = probe_p_num(p, "base");
    double gap = (double)probe_p_int(p, "gap");
    double starts[MAX_LIST], offsets[MAX_LIST], shifts[MAX_LIST];
    int ns = probe_p_list(p, "starts", starts, MAX_LIST), no = probe_p_list(p, "offsets", offsets, MAX_LIST),
        nsh = probe_p_list(p, "shifts", shifts, MAX_LIST);

    double *buf = malloc(sizeof(double) * (size_t)(5 * d));
    if (!buf) return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    double *q = buf, *k = buf + d, *theta = buf + 2 * d, *pm = buf + 3 * d, *pn = pm + d; /* theta uses d/2 */
    rng_state rng;
    rng_seed(&rng, (uint64_t)probe_p_int(p, "seed"));
    for (int i = 0; i < d; i++) q[i] = rng_normal_polar(&rng);
    for (int i = 0; i < d; i++) k[i] = rng_normal_polar(&rng);
    probe_rope_thetas(d, base, theta);

    static const char *const gcols[] = {"start", "rotary", "additive"};
    json_t *rows = probe_table(out, "gap_scores", gcols, 3);
    double rmin = INFINITY, rmax = -INFINITY, amin = INFINITY, amax = -INFINITY;
    for (int i = 0; i < ns; i++) {
        double r = probe_rope_score(q, k, d, theta, starts[i], starts[i] + gap);
        double a = additive_score(q, k, pm, pn, d, base, starts[i], starts[i] + gap);
        rmin = fmin(rmin, r), rmax = fmax(rmax, r), amin = fmin(amin, a), amax = fmax(amax, a);
        probe_row(out, rows, "idd", (int)starts[i], r, a);
    }
    probe_summary_num(out, "rotary_spread", rmax - rmin);
    probe_summary_num(out, "additive_spread", amax - amin);
    probe_summary_num(out, "rotary_score", rmin);
    probe_summary_num(out, "content_score", probe_rope_dot(q, k, d));

    static const char *const ccols[] = {
        "offset", "shift", "rotary", "rotary_reference", "rotary_deviation", "additive", "additive_deviation"};
    rows = probe_table(out, "grid", ccols, 7);
    double worst = 0, worst_add = 0;
    for (int i = 0; i < no; i++) {
        double ref = probe_rope_score(q, k, d, theta, 0, offsets[i]);
        double aref = additive_score(q, k, pm, pn, d, base, 0, offsets[i]);
        for (int j = 0; j < nsh; j++) {
            double r = probe_rope_score(q, k, d, theta, shifts[j], shifts[j] + offsets[i]);
            double a = additive_score(q, k, pm, pn, d, base, shifts[j], shifts[j] + offsets[i]);
            worst = fmax(worst, fabs(r - ref));
            worst_add = fmax(worst_add, fabs(a - aref));
            probe_row(out, rows, "iiddddd", (int)offsets[i], (int)shifts[j], r, ref, fabs(r - ref), a, fabs(a - aref));
        }
    }
    probe_summary_int(out, "combinations", (long)no * nsh);
    probe_summary_num(out, "worst_rotary_deviation", worst);
    probe_summary_num(out, "worst_additive_deviation", worst_add);
    /* The score's natural scale, sum over pairs of |q_pair| |k_pair|, for a relative figure. */
    double scale = 0;
    for (int i = 0; i < d / 2; i++) scale += hypot(q[2 * i], q[2 * i + 1]) * hypot(k[2 * i], k[2 * i + 1]);
    probe_summary_num(out, "worst_rotary_relative_deviation", worst / scale);
    probe_vectors_table(out, q, k, d);
    free(buf);

    static const char *const gy[] = {"rotary", "additive", NULL};
    probe_chart(out, "gap_scores", "bar", "start", gy, "score at a fixed gap, by start position", 0);
    static const char *const dy[] = {"rotary_deviation", "additive_deviation", NULL};
    probe_chart(out, "grid", "line", "shift", dy, "deviation from the unshifted score", 0);
    return ENGINE_OK;
}

const probe_kind probe_kind_rope_invariance = {
    .name = "rope_invariance",
    .title = "Relative-position invariance",
    .description = "score at a fixed gap across absolute positions: rotary vs additive sinusoidal",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .run = run,
};
