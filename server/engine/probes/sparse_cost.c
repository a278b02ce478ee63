/* sparse_cost: the seed blog's question 3 as a cost. CPU time per query of sparse attention (the
 * predictor's own work included) against exact dense attention, one head on the probe's thread, on
 * random unit q, k, v, for a list of N at head width d; the crossover N per predictor and k. The
 * kernels and the timing are sparse_timing.h's, the same code `make bench` (bench_sparse) runs.
 *
 * A timing probe (probe_kind.timing): its figures are measurements and differ between runs, so the
 * service never answers it from the store. A budget of the probe thread's CPU time bounds the
 * request (the clock its figures are measured in, so that an estimate and what is left are in one
 * unit whatever the machine's load; a client that leaves cancels the rest): before each
 * measurement its CPU time is estimated (the same series at the previous N scaled as N^2, the worst
 * any of these kernels grows per call; a series' first N from a calibration call of the dense
 * kernel), and a measurement that would not fit in what is left is skipped (its cells null,
 * counted in summary.skipped). Exact top-k is timed up to N = 4096, as in the benchmark. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_impl.h"
#include "sparse_timing.h"

#define MAX_NS 12
#define MAX_KS 4
#define MAX_PRED 4
#define MAX_SERIES (1 + MAX_KS * MAX_PRED)

static const double def_ns[] = {128, 256, 512, 1024, 2048, 4096};
static const double def_ks[] = {32, 64};

static const probe_param params[] = {
    PROBE_ROW_INT_LIST("ns", "sequence lengths N (queries and causal keys), increasing", 16, 16384, def_ns, MAX_NS),
    PROBE_ROW_INT_LIST("ks", "keys kept per query", 1, 256, def_ks, MAX_KS),
    PROBE_ROW_INT("d", "head width d_head", 32, 1, 256),
    PROBE_ROW_TEXT("predictors", "comma-separated predictors: window, lsh, hamming, topk", "window,lsh,hamming,topk",
                   64),
    PROBE_ROW_NUMBER("min_ms", "CPU ms each timed round lasts at least", 2, 0.05, 50),
    PROBE_ROW_INT("rounds", "timed rounds, the best kept", 3, 1, 5),
    PROBE_ROW_INT("budget_ms", "CPU ms of the probe's thread for all measurements; what would not fit is skipped",
                  10000, 50, 20000),
    PROBE_ROW_SEED("random seed of q, k, v"),
};

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The predictors named in s, at most MAX_PRED, each once; dense (always the reference) and
 * unrotated (needs unrotated vectors) are refused. Returns the count, or -1 with err filled. */
static int parse_predictors(const char *s, sparse_predictor *out, probe_error *err) {
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && *p == ' ') p++, len--;
        while (len && p[len - 1] == ' ') len--;
        char name[32];
        if (len == 0 || len >= sizeof name) {
            probe_fail(err, ENGINE_ERR_INVALID, "predictors", "predictors must be names separated by commas");
            return -1;
        }
        memcpy(name, p, len);
        name[len] = 0;
        sparse_predictor sp;
        if (sparse_predictor_parse(name, &sp) != 0 || sp == SPARSE_DENSE || sp == SPARSE_UNROTATED) {
            probe_fail(err, ENGINE_ERR_INVALID, "predictors",
                       "predictor '%s' is not one of window, lsh, hamming, topk (dense is the reference)", name);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (out[i] == sp) {
                probe_fail(err, ENGINE_ERR_INVALID, "predictors", "predictor '%s' is named twice", name);
                return -1;
            }
        if (n == MAX_PRED) {
            probe_fail(err, ENGINE_ERR_INVALID, "predictors", "at most %d predictors", MAX_PRED);
            return -1;
        }
        out[n++] = sp;
        if (!e) break;
        p = e + 1;
    }
    return n;
}

/* What the measurements so far say about the ones to come. */
typedef struct {
    double last_call_s[MAX_SERIES]; /* CPU s per call at last_n; 0: not measured yet */
    int last_n[MAX_SERIES];
    double dense_coef;         /* CPU s per call per N^2, from the calibration call */
    double t0, cpu0, budget_s; /* wall and CPU clocks at the start; the CPU budget */
    sparse_timing_cfg timing;
} planner;

/* Estimated CPU seconds of `sets` timings (1 dense, 2 sparse: with and without the attention) of
 * series s at N. */
static double estimate(const planner *pl, int s, int N, int sets) {
    double call;
    double r = pl->last_n[s] ? (double)N / pl->last_n[s] : 0;
    if (pl->last_call_s[s] > 0)
        call = pl->last_call_s[s] * r * r;
    else
        call = pl->dense_coef * (double)N * N * (s == 0 ? 1 : 8); /* a first sparse series: a margin */
    return sets * (pl->timing.rounds * fmax(pl->timing.min_s, call) + call);
}

static int fits(const planner *pl, double est) { return sparse_timing_cpu_s() - pl->cpu0 + est <= pl->budget_s; }

static void account(planner *pl, int s, int N, double us_per_query) {
    pl->last_call_s[s] = us_per_query * N / 1e6;
    pl->last_n[s] = N;
}

/* Before each measurement: ENGINE_ERR_CANCELLED once nobody waits for the result. */
static engine_status still_wanted(const probe_context *ctx, engine_error *ee) {
    if (!probe_cancelled(ctx)) return ENGINE_OK;
    snprintf(ee->message, sizeof ee->message, "cancelled");
    return ENGINE_ERR_CANCELLED;
}

/* What is measured: the N (increasing) and k (each once) lists, the predictors, the head width. */
typedef struct {
    int ns[MAX_NS], ks[MAX_KS], nn, nk, np, d;
    sparse_predictor preds[MAX_PRED];
} cost_request;

/* The measurements: dense[i]; total/pred[kk][pp][i] (NAN: skipped, -1: not timed at this N); what
 * they took. */
typedef struct {
    double dense[MAX_NS], total[MAX_KS][MAX_PRED][MAX_NS], pred[MAX_KS][MAX_PRED][MAX_NS];
    int skipped;
    double wall_ms, cpu_ms;
} cost_results;

static engine_status read_request(const json_t *p, cost_request *rq, probe_error *err) {
    double nsd[MAX_NS], ksd[MAX_KS];
    rq->nn = probe_p_list(p, "ns", nsd, MAX_NS), rq->nk = probe_p_list(p, "ks", ksd, MAX_KS);
    for (int i = 0; i < rq->nn; i++) {
        rq->ns[i] = (int)nsd[i];
        if (i && rq->ns[i] <= rq->ns[i - 1])
            return probe_fail(err, ENGINE_ERR_INVALID, "ns", "ns must be increasing (ns[%d] = %d after %d)", i,
                              rq->ns[i], rq->ns[i - 1]);
    }
    for (int i = 0; i < rq->nk; i++) {
        rq->ks[i] = (int)ksd[i];
        for (int j = 0; j < i; j++)
            if (rq->ks[j] == rq->ks[i])
                return probe_fail(err, ENGINE_ERR_INVALID, "ks", "k = %d is named twice", rq->ks[i]);
    }
    rq->np = parse_predictors(probe_p_str(p, "predictors"), rq->preds, err);
    if (rq->np < 0) return err->status;
    rq->d = (int)probe_p_int(p, "d");
    return ENGINE_OK;
}

/* Calibration: one dense call at a small N gives the first estimate of every series. */
static engine_status calibrate(sparse_timing *tm, int n_first, planner *pl, engine_error *ee) {
    int n0 = n_first < 256 ? n_first : 256;
    sparse_timing_cfg once = {.min_s = 1e-9, .rounds = 1};
    double us = 0;
    engine_status st = sparse_timing_dense(tm, n0, &once, &us, ee);
    if (st) return st;
    pl->dense_coef = us * n0 / 1e6 / ((double)n0 * n0);
    return ENGINE_OK;
}

/* Every predictor and k at the i-th N, each when it fits in what is left of the budget. */
static engine_status measure_sparse_at(sparse_timing *tm, planner *pl, const cost_request *rq, const probe_context *ctx,
                                       int i, cost_results *res, engine_error *ee) {
    const int N = rq->ns[i];
    for (int kk = 0; kk < rq->nk; kk++)
        for (int pp = 0; pp < rq->np; pp++) {
            int s = 1 + kk * rq->np + pp;
            double *total = &res->total[kk][pp][i], *pred = &res->pred[kk][pp][i];
            *total = *pred = NAN;
            if (rq->preds[pp] == SPARSE_TOPK && N > SPARSE_TIMING_TOPK_MAX_N) {
                *total = *pred = -1;
                continue;
            }
            if (!fits(pl, estimate(pl, s, N, 2))) {
                res->skipped++;
                continue;
            }
            engine_status st = still_wanted(ctx, ee);
            if (st) return st;
            sparse_config cfg;
            sparse_config_defaults(&cfg, rq->preds[pp], rq->ks[kk]);
            if ((st = sparse_timing_sparse(tm, &cfg, N, &pl->timing, total, pred, ee))) return st;
            account(pl, s, N, *total);
        }
    return ENGINE_OK;
}

/* Dense, then every predictor and k, at each N in turn. */
static engine_status measure(sparse_timing *tm, planner *pl, const cost_request *rq, const probe_context *ctx,
                             cost_results *res, engine_error *ee) {
    for (int i = 0; i < rq->nn; i++) {
        int N = rq->ns[i];
        res->dense[i] = NAN;
        double est = estimate(pl, 0, N, 1);
        engine_status st = still_wanted(ctx, ee);
        if (st) return st;
        if (fits(pl, est)) {
            if ((st = sparse_timing_dense(tm, N, &pl->timing, &res->dense[i], ee))) return st;
            account(pl, 0, N, res->dense[i]);
        } else {
            res->skipped++;
        }
        if ((st = measure_sparse_at(tm, pl, rq, ctx, i, res, ee))) return st;
    }
    return ENGINE_OK;
}

/* A measured time, NAN for one not taken. */
static double time_of(double t) { return t < 0 ? NAN : t; }

/* The long table: one row per N, predictor and k. */
static void cost_table(probe_out *out, const cost_request *rq, const cost_results *res) {
    static const char *const cols[] = {
        "N", "predictor", "k", "us_per_query", "predictor_us_per_query", "dense_us_per_query", "ratio_to_dense"};
    json_t *rows = probe_table(out, "cost", cols, 7);
    for (int i = 0; i < rq->nn; i++)
        for (int pp = 0; pp < rq->np; pp++)
            for (int kk = 0; kk < rq->nk; kk++) {
                double t = time_of(res->total[kk][pp][i]), pr = time_of(res->pred[kk][pp][i]);
                probe_row(out, rows, "isidddd", rq->ns[i], sparse_predictor_name(rq->preds[pp]), rq->ks[kk], t, pr,
                          res->dense[i], t / res->dense[i]);
            }
}

/* The charts' tables: N, dense, then one column per predictor and k (µs per query; and the ratio
 * to dense), with their charts. */
static void chart_tables(probe_out *out, const cost_request *rq, const cost_results *res) {
    const int np = rq->np;
    const char *ys[2 + MAX_KS * MAX_PRED], *rys[1 + MAX_KS * MAX_PRED];
    char names[MAX_KS * MAX_PRED][40];
    int ny = 0;
    ys[ny++] = "dense";
    for (int kk = 0; kk < rq->nk; kk++)
        for (int pp = 0; pp < np; pp++) {
            char *nm = names[kk * np + pp];
            snprintf(nm, sizeof names[0], "%s_k%d", sparse_predictor_name(rq->preds[pp]), rq->ks[kk]);
            rys[ny - 1] = nm;
            ys[ny++] = nm;
        }
    ys[ny] = NULL;
    rys[ny - 1] = NULL;
    json_t *wcols = probe_cols_add(json_array(), "N"), *rcols = probe_cols_add(json_array(), "N");
    for (int j = 0; j < ny; j++) {
        wcols = probe_cols_add(wcols, "%s", ys[j]);
        if (j) rcols = probe_cols_add(rcols, "%s", ys[j]);
    }
    json_t *wrows = probe_table_cols(out, "us_per_query", wcols);
    json_t *rrows = probe_table_cols(out, "ratio_to_dense", rcols);
    for (int i = 0; i < rq->nn; i++) {
        double w[1 + 1 + MAX_KS * MAX_PRED], r[1 + MAX_KS * MAX_PRED];
        w[0] = r[0] = rq->ns[i];
        w[1] = res->dense[i];
        for (int kk = 0; kk < rq->nk; kk++)
            for (int pp = 0; pp < np; pp++) {
                double t = time_of(res->total[kk][pp][i]);
                w[2 + kk * np + pp] = t;
                r[1 + kk * np + pp] = t / res->dense[i];
            }
        probe_row_nums(out, wrows, w, 1 + ny);
        probe_row_nums(out, rrows, r, ny);
    }
    probe_chart_with(out, "us_per_query", "line", "N", ys, "CPU µs per query (dense = exact attention)",
                     &(probe_chart_opts){.log_x = 1, .log_y = 1, .reference = "dense"});
    probe_chart_with(out, "ratio_to_dense", "line", "N", rys, "sparse time ÷ dense time (below 1: sparse is cheaper)",
                     &(probe_chart_opts){.log_x = 1, .log_y = 1, .y_line = 1, .has_y_line = 1});
}

/* The crossovers: a table and one summary figure per predictor and k (null: none). */
static void crossover_table(probe_out *out, const cost_request *rq, const cost_results *res) {
    static const char *const ccols[] = {"predictor", "k", "crossover_N", "largest_N", "speedup_at_largest_N"};
    json_t *crows = probe_table(out, "crossover", ccols, 5);
    for (int pp = 0; pp < rq->np; pp++)
        for (int kk = 0; kk < rq->nk; kk++) {
            double sp[MAX_NS];
            int last = -1;
            for (int i = 0; i < rq->nn; i++) {
                sp[i] = isfinite(res->total[kk][pp][i]) ? res->total[kk][pp][i] : -1;
                if (sp[i] >= 0 && isfinite(res->dense[i])) last = i;
            }
            int from = sparse_timing_crossover(res->dense, sp, rq->nn);
            double cross = from < 0 ? NAN : rq->ns[from];
            const char *name = sparse_predictor_name(rq->preds[pp]);
            probe_row(out, crows, "sidid", name, rq->ks[kk], cross, last < 0 ? 0 : rq->ns[last],
                      last < 0 ? NAN : res->dense[last] / sp[last]);
            char key[64];
            snprintf(key, sizeof key, "crossover_N_%s_k%d", name, rq->ks[kk]);
            probe_summary_num(out, key, cross);
        }
}

/* The summary figures about the whole measurement and the machine. */
static void cost_summary(probe_out *out, const cost_request *rq, const cost_results *res) {
    probe_summary_num(out, "dense_us_per_query_at_largest_N", res->dense[rq->nn - 1]);
    probe_summary_int(out, "skipped", res->skipped);
    probe_summary_num(out, "wall_ms", res->wall_ms);
    probe_summary_num(out, "cpu_ms", res->cpu_ms);
    double load = NAN;
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (fscanf(lf, "%lf", &load) != 1) load = NAN;
        fclose(lf);
    }
    probe_summary_num(out, "load_average_1m", load);
    probe_summary_str(out, "clock", "CPU time of the probe's thread, best of the rounds");
}

static engine_status run(probe_out *out, const json_t *p, const probe_context *ctx, probe_error *err) {
    cost_request rq;
    engine_status st = read_request(p, &rq, err);
    if (st) return st;
    planner pl = {.timing = {.min_s = probe_p_num(p, "min_ms") / 1e3, .rounds = (int)probe_p_int(p, "rounds")},
                  .budget_s = (double)probe_p_int(p, "budget_ms") / 1e3};
    engine_error ee = {0};
    sparse_timing *tm = NULL;
    if ((st = sparse_timing_new(&tm, rq.ns[rq.nn - 1], rq.d, (uint64_t)probe_p_int(p, "seed"), &ee)))
        return probe_fail(err, st, "", "%s", ee.message);
    pl.t0 = wall_s();
    pl.cpu0 = sparse_timing_cpu_s();
    cost_results res = {.skipped = 0};
    st = calibrate(tm, rq.ns[0], &pl, &ee);
    if (!st) {
        st = measure(tm, &pl, &rq, ctx, &res, &ee);
        res.wall_ms = (wall_s() - pl.t0) * 1e3, res.cpu_ms = (sparse_timing_cpu_s() - pl.cpu0) * 1e3;
    }
    sparse_timing_free(tm);
    if (st) return probe_fail(err, st, "", "%s", ee.message);
    cost_table(out, &rq, &res);
    chart_tables(out, &rq, &res);
    crossover_table(out, &rq, &res);
    cost_summary(out, &rq, &res);
    return ENGINE_OK;
}

const probe_kind probe_kind_sparse_cost = {
    .name = "sparse_cost",
    .title = "Sparse attention: time per query vs dense",
    .description = "Question 3 as a cost: CPU time per query of sparse attention with k keys chosen by each predictor "
                   "(window, angular LSH, Hamming ranking, exact top-k; the predictor's own time included and shown "
                   "apart) against exact dense attention, one head on random unit q, k, v, for each N; the crossover "
                   "N from which sparse stays cheaper. The same kernels as make bench; measured, so never cached.",
    .params = params,
    .n_params = (int)(sizeof params / sizeof params[0]),
    .timing = 1,
    .run = run,
};
