#include "sparse_timing.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "gemm.h"
#include "layers.h"
#include "rng.h"
#if !REAL_IS_DOUBLE
#include "fastmath.h"
#endif

struct sparse_timing {
    int max_N, d;
    real *q, *k, *v, *y; /* [max_N][d] */
    real *S;             /* [SPARSE_TIMING_BLOCK][max_N] dense scores */
};

double sparse_timing_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void unit_rows(real *x, int n, int d, rng_state *r) {
    for (int t = 0; t < n; t++) {
        real *row = x + (size_t)t * d;
        double s = 0;
        for (int i = 0; i < d; i++) {
            row[i] = (real)rng_normal_polar(r);
            s += (double)row[i] * row[i];
        }
        double inv = s > 0 ? 1 / sqrt(s) : 0;
        for (int i = 0; i < d; i++) row[i] = (real)(row[i] * inv);
    }
}

engine_status sparse_timing_new(sparse_timing **out, int max_N, int d, uint64_t seed, engine_error *err) {
    *out = NULL;
    if (max_N < 1 || max_N > SPARSE_TIMING_MAX_N)
        return engine_fail(err, ENGINE_ERR_INVALID, "sparse_timing: max_N %d is outside 1..%d", max_N,
                           SPARSE_TIMING_MAX_N);
    if (d < 1 || d > 1024) return engine_fail(err, ENGINE_ERR_INVALID, "sparse_timing: d %d is outside 1..1024", d);
    sparse_timing *c = calloc(1, sizeof *c);
    if (!c) return engine_fail(err, ENGINE_ERR_NOMEM, "sparse_timing: out of memory");
    size_t rows = (size_t)max_N * (size_t)d;
    c->max_N = max_N;
    c->d = d;
    c->q = malloc(sizeof(real) * rows);
    c->k = malloc(sizeof(real) * rows);
    c->v = malloc(sizeof(real) * rows);
    c->y = calloc(rows, sizeof(real));
    c->S = malloc(sizeof(real) * (size_t)SPARSE_TIMING_BLOCK * (size_t)max_N);
    if (!c->q || !c->k || !c->v || !c->y || !c->S) {
        sparse_timing_free(c);
        return engine_fail(err, ENGINE_ERR_NOMEM, "sparse_timing: out of memory for %d queries at d %d", max_N, d);
    }
    rng_state r;
    rng_seed(&r, seed);
    unit_rows(c->q, max_N, d, &r);
    unit_rows(c->k, max_N, d, &r);
    unit_rows(c->v, max_N, d, &r);
    gemm_init();
    *out = c;
    return ENGINE_OK;
}

void sparse_timing_free(sparse_timing *c) {
    if (!c) return;
    free(c->q), free(c->k), free(c->v), free(c->y), free(c->S);
    free(c);
}

int sparse_timing_max_n(const sparse_timing *c) { return c->max_N; }
int sparse_timing_d(const sparse_timing *c) { return c->d; }
const real *sparse_timing_q(const sparse_timing *c) { return c->q; }
const real *sparse_timing_k(const sparse_timing *c) { return c->k; }
const real *sparse_timing_v(const sparse_timing *c) { return c->v; }
const real *sparse_timing_output(const sparse_timing *c) { return c->y; }

/* p[0..n) = softmax(scale * p) in place. */
static void softmax_row(real *p, int n, real scale) {
    real mx = -INFINITY;
    for (int s = 0; s < n; s++) {
        p[s] *= scale;
        if (p[s] > mx) mx = p[s];
    }
    double sum = 0;
    int s = 0;
#if !REAL_IS_DOUBLE
    fm_v16 vs = fm_splat(0), vm = fm_splat(mx);
    for (; s + 16 <= n; s += 16) {
        fm_v16 e = fm_exp16(fm_load(p + s) - vm);
        fm_store(p + s, e);
        vs += e;
    }
    for (int j = 0; j < 16; j++) sum += vs[j];
    for (; s < n; s++) p[s] = fm_expf(p[s] - mx), sum += p[s];
#else
    for (; s < n; s++) p[s] = exp(p[s] - mx), sum += p[s];
#endif
    real inv = (real)(1.0 / sum);
    for (s = 0; s < n; s++) p[s] *= inv;
}

/* Exact causal attention for queries 0..N-1, SPARSE_TIMING_BLOCK rows at a time. */
static void dense_blocked(sparse_timing *c, int N, real scale) {
    const int d = c->d;
    for (int r0 = 0; r0 < N; r0 += SPARSE_TIMING_BLOCK) {
        int rb = N - r0 < SPARSE_TIMING_BLOCK ? N - r0 : SPARSE_TIMING_BLOCK, r1 = r0 + rb;
        gemm_nt(rb, r1, d, c->q + (size_t)r0 * d, d, c->k, d, c->S, N, 0);
        for (int i = 0; i < rb; i++) {
            real *p = c->S + (size_t)i * N;
            int n = r0 + i + 1;
            softmax_row(p, n, scale);
            for (int s = n; s < r1; s++) p[s] = 0;
        }
        gemm_nn(rb, d, r1, c->S, N, c->v, d, c->y + (size_t)r0 * d, d, 0);
    }
}

typedef enum { K_DENSE, K_ENGINE, K_SPARSE, K_SELECT } kernel;

typedef struct {
    sparse_timing *c;
    kernel kind;
    int N;
    real scale;
    real *att;     /* K_ENGINE: N x N */
    sparse_ws *ws; /* K_SPARSE, K_SELECT */
} job;

static void run_once(const job *j) {
    sparse_timing *c = j->c;
    if (j->kind == K_DENSE) {
        dense_blocked(c, j->N, j->scale);
    } else if (j->kind == K_ENGINE) {
        double ent = 0;
        attention_forward_unit(c->q, c->k, c->d, c->v, c->d, j->att, c->y, c->d, j->N, c->d, j->scale, &ent);
    } else {
        sparse_input in = {.T = j->N,
                           .d = c->d,
                           .q = c->q,
                           .k = c->k,
                           .v = c->v,
                           .q_stride = c->d,
                           .k_stride = c->d,
                           .v_stride = c->d,
                           .scale = j->scale};
        /* Sizes and config were checked when the workspace was made: these cannot fail. */
        if (j->kind == K_SELECT)
            sparse_select(j->ws, &in, NULL);
        else
            sparse_attention(j->ws, &in, c->y, c->d, NULL);
    }
}

/* CPU seconds per call: the best of t->rounds rounds, each of calls lasting at least t->min_s. */
static double time_it(const job *j, const sparse_timing_cfg *t) {
    run_once(j); /* warm: caches, page faults */
    double best = INFINITY;
    for (int round = 0; round < t->rounds; round++) {
        long calls = 0;
        double t0 = sparse_timing_cpu_s(), dt;
        do {
            run_once(j);
            calls++;
            dt = sparse_timing_cpu_s() - t0;
        } while (dt < t->min_s);
        if (dt / (double)calls < best) best = dt / (double)calls;
    }
    return best;
}

static engine_status check_call(const sparse_timing *c, int N, const sparse_timing_cfg *t, engine_error *err) {
    if (N < 1 || N > c->max_N)
        return engine_fail(err, ENGINE_ERR_INVALID, "sparse_timing: N %d is outside 1..%d", N, c->max_N);
    if (!t || !(t->min_s > 0) || !isfinite(t->min_s) || t->rounds < 1 || t->rounds > SPARSE_TIMING_MAX_ROUNDS)
        return engine_fail(err, ENGINE_ERR_INVALID, "sparse_timing: timing needs min_s > 0 and rounds in 1..%d",
                           SPARSE_TIMING_MAX_ROUNDS);
    return ENGINE_OK;
}

static real score_scale(const sparse_timing *c) { return (real)(1 / sqrt((double)c->d)); }

engine_status sparse_timing_dense(sparse_timing *c, int N, const sparse_timing_cfg *t, double *us_per_query,
                                  engine_error *err) {
    engine_status st = check_call(c, N, t, err);
    if (st) return st;
    job j = {.c = c, .kind = K_DENSE, .N = N, .scale = score_scale(c)};
    *us_per_query = time_it(&j, t) / N * 1e6;
    return ENGINE_OK;
}

engine_status sparse_timing_engine(sparse_timing *c, int N, const sparse_timing_cfg *t, double *us_per_query,
                                   engine_error *err) {
    engine_status st = check_call(c, N, t, err);
    if (st) return st;
    if (N > SPARSE_TIMING_ENGINE_MAX_N)
        return engine_fail(err, ENGINE_ERR_INVALID, "sparse_timing: the engine kernel is timed up to N = %d, not %d",
                           SPARSE_TIMING_ENGINE_MAX_N, N);
    job j = {.c = c, .kind = K_ENGINE, .N = N, .scale = score_scale(c)};
    j.att = malloc(sizeof(real) * (size_t)N * (size_t)N);
    if (!j.att) return engine_fail(err, ENGINE_ERR_NOMEM, "sparse_timing: out of memory for a %d x %d matrix", N, N);
    *us_per_query = time_it(&j, t) / N * 1e6;
    free(j.att);
    return ENGINE_OK;
}

engine_status sparse_timing_sparse(sparse_timing *c, const sparse_config *cfg, int N, const sparse_timing_cfg *t,
                                   double *total_us, double *predictor_us, engine_error *err) {
    engine_status st = check_call(c, N, t, err);
    if (st) return st;
    if (cfg->predictor == SPARSE_UNROTATED)
        return engine_fail(err, ENGINE_ERR_INVALID, "sparse_timing: the unrotated predictor needs unrotated vectors");
    job j = {.c = c, .kind = K_SPARSE, .N = N, .scale = score_scale(c)};
    if ((st = sparse_ws_new(&j.ws, cfg, N, c->d, err))) return st;
    double total = time_it(&j, t) / N * 1e6, pred = 0;
    if (predictor_us) {
        j.kind = K_SELECT;
        pred = time_it(&j, t) / N * 1e6;
        /* The timed selection leaves the chosen keys, not an output: run the attention once more
         * so sparse_timing_output holds this config's result. */
        j.kind = K_SPARSE;
        run_once(&j);
    }
    sparse_ws_free(j.ws);
    *total_us = total;
    if (predictor_us) *predictor_us = pred;
    return ENGINE_OK;
}

static int measured(double x) { return isfinite(x) && x >= 0; }

int sparse_timing_crossover(const double *dense_us, const double *sparse_us, int n) {
    int from = -1;
    for (int i = n - 1; i >= 0; i--) {
        if (!measured(sparse_us[i]) || !(isfinite(dense_us[i]) && dense_us[i] > 0)) continue;
        if (sparse_us[i] < dense_us[i])
            from = i;
        else
            break;
    }
    return from;
}
