/* dephasing: what "RoPE decays with distance" really measures (seed 003). Against itself a fixed q
 * loses score as its pairs drift out of phase; over random pairs the mean raw score stays at zero
 * and the mean |score| barely moves. With seeding=per_vector_lcg the study is repeated the wrong
 * way (one Park-Miller generator per vector, seeded by neighbouring integers) next to the right one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "probe_impl.h"
#include "probe_rng.h"
#include "rng.h"
#include "rope_math.h"

#define MAX_OFFSETS 32

static const double def_offsets[] = {0, 16, 256, 1024};
static const char *const seedings[] = {"single", "per_vector_lcg", NULL};

static const probe_param params[] = {
    PROBE_ROW_D(16, 256),
    PROBE_ROW_BASE,
    PROBE_ROW_INT_LIST("offsets", "relative offsets between query and key", 0, 1000000, def_offsets, MAX_OFFSETS),
    PROBE_ROW_INT("n_pairs", "random (q, k) pairs averaged", 600, 1, 10000),
    PROBE_ROW_RANDOM_SEED,
    PROBE_ROW_CHOICE("seeding",
                     "single: one generator for the study; per_vector_lcg: also the seeded-per-vector mistake",
                     "single", seedings),
};

/* Sum and |sum| of q . R(off) k over pairs, for every offset; cs holds cos, sin per offset and pair. */
static void accumulate(const double *q, const double *k, int h, const double *cs, int no, double *sum, double *abs_sum,
                       double *sq_sum) {
    for (int o = 0; o < no; o++) {
        const double *c = cs + (size_t)o * 2 * h, *s = c + h;
        double v = 0;
        for (int i = 0; i < h; i++) {
            double q0 = q[2 * i], q1 = q[2 * i + 1], k0 = k[2 * i], k1 = k[2 * i + 1];
            v += (q0 * k0 + q1 * k1) * c[i] + (q1 * k0 - q0 * k1) * s[i];
        }
        sum[o] += v;
        abs_sum[o] += fabs(v);
        sq_sum[o] += v * v;
    }
}

/* The sums by offset (no each): over the single generator's pairs (sum, abs_sum, sq), over the
 * per-vector generators' (lsum, labs, lsq), and of the first query against itself (self). */
typedef struct {
    double *sum, *abs_sum, *sq, *lsum, *labs, *lsq, *self;
} dephasing_sums;

/* The study: n pairs from one generator seeded once; q0 keeps the first query, also scored
 * against itself. q, k: scratch [d]. */
static void single_generator(uint32_t seed, int n, int d, const double *cs, int no, double *q0, double *q, double *k,
                             const dephasing_sums *sums) {
    rng_state rng;
    rng_seed(&rng, seed);
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < d; i++) q[i] = rng_normal_polar(&rng);
        for (int i = 0; i < d; i++) k[i] = rng_normal_polar(&rng);
        if (j == 0) memcpy(q0, q, sizeof(double) * (size_t)d);
        accumulate(q, k, d / 2, cs, no, sums->sum, sums->abs_sum, sums->sq);
    }
    /* The fixed query against itself: the first query of the study. */
    double zero[MAX_OFFSETS] = {0}, dummy[MAX_OFFSETS] = {0};
    accumulate(q0, q0, d / 2, cs, no, sums->self, zero, dummy);
}

/* The mistake: one Park-Miller generator per vector, seeded by neighbouring integers. */
static void per_vector_lcg(uint32_t seed, int n, int d, const double *cs, int no, double *q, double *k,
                           const dephasing_sums *sums) {
    for (int j = 0; j < n; j++) {
        probe_lcg gq, gk;
        probe_lcg_seed(&gq, seed + 2u * (uint32_t)j);
        probe_lcg_seed(&gk, seed + 2u * (uint32_t)j + 1u);
        for (int i = 0; i < d; i++) q[i] = probe_lcg_normal(&gq);
        for (int i = 0; i < d; i++) k[i] = probe_lcg_normal(&gk);
        accumulate(q, k, d / 2, cs, no, sums->lsum, sums->labs, sums->lsq);
    }
}

/* The table "dephasing" (the LCG columns only when lcg) and its summary figures. */
static void dephasing_table(probe_out *out, const double *offsets, int no, int n, int lcg, const dephasing_sums *sums) {
    static const char *const cols[] = {"offset", "self", "mean_raw", "mean_abs", "mean_raw_lcg", "mean_abs_lcg"};
    json_t *rows = probe_table(out, "dephasing", cols, lcg ? 6 : 4);
    double worst = 0, lworst = 0, se_max = 0, abs_lo = INFINITY, abs_hi = 0;
    for (int o = 0; o < no; o++) {
        double m = sums->sum[o] / n, ma = sums->abs_sum[o] / n, lm = sums->lsum[o] / n, la = sums->labs[o] / n;
        double var = n > 1 ? (sums->sq[o] - n * m * m) / (n - 1) : 0;
        se_max = fmax(se_max, sqrt(fmax(var, 0) / n));
        worst = fmax(worst, fabs(m));
        lworst = fmax(lworst, fabs(lm));
        abs_lo = fmin(abs_lo, ma), abs_hi = fmax(abs_hi, ma);
        double row[6] = {offsets[o], sums->self[o], m, ma, lm, la};
        probe_row_nums(out, rows, row, lcg ? 6 : 4);
    }
    probe_summary_num(out, "max_abs_mean_raw", worst);
    probe_summary_num(out, "standard_error", se_max);
    probe_summary_num(out, "mean_abs_relative_range", (abs_hi - abs_lo) / abs_hi);
    probe_summary_num(out, "self_first", sums->self[0]);
    probe_summary_num(out, "self_last", sums->self[no - 1]);
    if (lcg) {
        probe_summary_num(out, "max_abs_mean_raw_lcg", lworst);
        probe_summary_num(out, "lcg_drift_in_standard_errors", se_max > 0 ? lworst / se_max : NAN);
    }
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    int d = (int)probe_p_int(p, "d"), h = d / 2;
    if (d % 2) return probe_fail(err, ENGINE_ERR_INVALID, "d", "d must be even (got %d)", d);
    double base = probe_p_num(p, "base"), offsets[MAX_OFFSETS];
    int no = probe_p_list(p, "offsets", offsets, MAX_OFFSETS);
    int n = (int)probe_p_int(p, "n_pairs");
    uint32_t seed = (uint32_t)probe_p_int(p, "seed");
    int lcg = strcmp(probe_p_str(p, "seeding"), "per_vector_lcg") == 0;

    size_t nbuf = (size_t)(4 * d + 2 * h * no + 8 * no);
    double *buf = calloc(nbuf, sizeof(double));
    if (!buf) return probe_fail(err, ENGINE_ERR_NOMEM, "", "out of memory");
    double *q0 = buf, *q = q0 + d, *k = q + d, *theta = k + d, *cs = theta + d;
    dephasing_sums sums = {.sum = cs + 2 * h * no};
    sums.abs_sum = sums.sum + no, sums.sq = sums.abs_sum + no, sums.lsum = sums.sq + no, sums.labs = sums.lsum + no;
    sums.lsq = sums.labs + no, sums.self = sums.lsq + no;
    probe_rope_thetas(d, base, theta);
    for (int o = 0; o < no; o++)
        for (int i = 0; i < h; i++) {
            cs[(size_t)o * 2 * h + i] = cos(offsets[o] * theta[i]);
            cs[(size_t)o * 2 * h + h + i] = sin(offsets[o] * theta[i]);
        }
    single_generator(seed, n, d, cs, no, q0, q, k, &sums);
    if (lcg) per_vector_lcg(seed, n, d, cs, no, q, k, &sums);
    dephasing_table(out, offsets, no, n, lcg, &sums);

    static const char *const qcols[] = {"component", "value"};
    json_t *rows = probe_table(out, "query_vector", qcols, 2);
    for (int i = 0; i < d; i++) probe_row(out, rows, "id", i, q0[i]);
    free(buf);

    static const char *const y[] = {"self", "mean_raw", "mean_abs", NULL};
    static const char *const ly[] = {"self", "mean_raw", "mean_abs", "mean_raw_lcg", "mean_abs_lcg", NULL};
    probe_chart(out, "dephasing", "line", "offset", lcg ? ly : y, "score against offset: one query vs many pairs", 0);
    return ENGINE_OK;
}

const probe_kind probe_kind_dephasing = {
    .name = "dephasing",
    .title = "Dephasing with distance",
    .description = "self score vs mean raw and mean |score| over random pairs, by offset (dephasing, not decay)",
    .params = params,
    .n_params = sizeof params / sizeof params[0],
    .run = run,
};
