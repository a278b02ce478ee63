#include "services/svc_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "engine/attention.h"
#include "services/svc_experiments.h"

enum { M_TRAIN, M_VAL, M_MIN_VAL, M_TAU_SPREAD, M_TAU_MEAN, M_TAU_DRIFT, M_ENTROPY, N_METRICS };

/* Each metric's bounds (what its values cannot cross) and its interval: a spread gets the
 * percentile bootstrap (it cannot go below 0, a t interval of a few replicates can); the others
 * the t interval, or the bootstrap where the t interval would cross a bound (stats_bounded_ci). */
static const struct {
    const char *name, *description;
    int needs_tau; /* only for variants with a learned temperature */
    double lower, upper;
    stats_ci_method ci;
} metric_defs[N_METRICS] = {
    {"final_train_loss", "mean training loss over the last k steps", 0, 0, INFINITY, STATS_CI_T},
    {"final_val_loss", "validation loss at the last evaluation", 0, 0, INFINITY, STATS_CI_T},
    {"min_val_loss", "lowest validation loss of the run", 0, 0, INFINITY, STATS_CI_T},
    {"final_tau_spread", "max - min of tau over layers and heads at the last step", 1, 0, INFINITY, STATS_CI_BOOTSTRAP},
    {"final_tau_mean", "mean tau over layers and heads at the last step", 1, -INFINITY, INFINITY, STATS_CI_T},
    {"tau_drift", "final_tau_mean minus tau at initialisation (negative: drifted down); t-test against 0", 1, -INFINITY,
     INFINITY, STATS_CI_T},
    {"final_entropy_mean", "mean attention entropy over layers and heads at the last step (nats)", 0, 0, INFINITY,
     STATS_CI_T},
};

/* The most runs an experiment holds: 16 variants x 32 replicates. */
#define MAX_RUNS (16 * SVC_EXPERIMENTS_MAX_REPLICATES)

typedef struct {
    json_t *row; /* borrowed from the run list */
    long long id, seed;
    int replicate, included;
    double v[N_METRICS]; /* NaN: none */
} run_values;

typedef struct {
    const char *name, *attention; /* borrowed from the experiment and run rows */
    double tau0;                  /* tau at initialisation; NaN: no learned temperature */
    run_values **runs;            /* sorted by replicate, then id */
    size_t n_runs;
} variant_group;

void svc_stats_options_default(svc_stats_options *o) {
    o->cancel = NULL;
    o->k = SVC_STATS_DEFAULT_K;
    o->conf = 0.95;
    o->resamples = STATS_BOOTSTRAP_DEFAULT;
    o->seed = SVC_STATS_DEFAULT_SEED;
}

static svc_status oom(svc_error *err) { return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory"); }

/* A number, or null where it cannot be computed. NULL only when out of memory. */
static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *interval(double lo, double hi) { return json_pack("[o, o]", num(lo), num(hi)); }

/* tau when the run starts, from its attention row's learned scale (attention_initial_tau): tau_init
 * for cos / tau, the reciprocal of min(scale_init, clamp) for s * cos; NaN for a fixed scale. */
static double initial_tau(const json_t *cfg) {
    const attention_variant *v = attention_find(json_string_value(json_object_get(cfg, "attention")));
    if (!v) return NAN;
    attention_scale s = {
        .form = v->scale,
        .init = json_number_value(json_object_get(cfg, v->scale == ATTENTION_SCALE_MULT ? "scale_init" : "tau_init")),
        .clamp = json_number_value(json_object_get(cfg, "scale_clamp"))};
    return attention_initial_tau(&s);
}

/* The run's metric values from its series: loss and val_loss in full, tau and entropy at the last
 * step of the loss series. */
static svc_status run_metrics(app *a, run_values *rv, int k, double tau0, svc_error *err) {
    for (int m = 0; m < N_METRICS; m++) rv->v[m] = NAN;
    store_metric *p = NULL;
    size_t n = 0;
    if (store_metrics_points(a->store, rv->id, "loss,val_loss", 0, &p, &n) != STORE_OK) return svc_store_failed(err);
    size_t n_loss = 0;
    while (n_loss < n && !strcmp(p[n_loss].key, "loss")) n_loss++;
    int last_step = n_loss ? p[n_loss - 1].step : -1;
    if (n_loss) {
        size_t from = n_loss > (size_t)k ? n_loss - (size_t)k : 0;
        double sum = 0;
        for (size_t i = from; i < n_loss; i++) sum += p[i].value;
        rv->v[M_TRAIN] = sum / (double)(n_loss - from); /* NaN if any of them is */
    }
    if (n > n_loss) {
        double lo = INFINITY;
        int finite = 1;
        for (size_t i = n_loss; i < n; i++) {
            finite &= isfinite(p[i].value);
            if (p[i].value < lo) lo = p[i].value;
        }
        rv->v[M_VAL] = p[n - 1].value;
        rv->v[M_MIN_VAL] = finite ? lo : NAN; /* a diverged evaluation has no minimum worth quoting */
    }
    free(p);
    if (last_step < 0) return SVC_OK;
    if (store_metrics_points(a->store, rv->id, "tau.*,entropy.*", last_step, &p, &n) != STORE_OK)
        return svc_store_failed(err);
    double tau_sum = 0, tau_lo = INFINITY, tau_hi = -INFINITY, ent_sum = 0;
    size_t n_tau = 0, n_ent = 0;
    int tau_finite = 1;
    for (size_t i = 0; i < n; i++) {
        if (p[i].step != last_step) continue;
        if (!strncmp(p[i].key, "tau.", 4)) {
            tau_sum += p[i].value;
            tau_finite &= isfinite(p[i].value);
            if (p[i].value < tau_lo) tau_lo = p[i].value;
            if (p[i].value > tau_hi) tau_hi = p[i].value;
            n_tau++;
        } else {
            ent_sum += p[i].value;
            n_ent++;
        }
    }
    free(p);
    if (n_tau) {
        rv->v[M_TAU_SPREAD] = tau_finite ? tau_hi - tau_lo : NAN;
        rv->v[M_TAU_MEAN] = tau_sum / (double)n_tau;
        rv->v[M_TAU_DRIFT] = rv->v[M_TAU_MEAN] - tau0;
    }
    if (n_ent) rv->v[M_ENTROPY] = ent_sum / (double)n_ent;
    return SVC_OK;
}

static int by_replicate(const void *x, const void *y) {
    const run_values *a = *(run_values *const *)x, *b = *(run_values *const *)y;
    if (a->replicate != b->replicate) return a->replicate < b->replicate ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The experiment's runs, grouped by variant in the experiment's variant order. */
typedef struct {
    json_t *exp, *runs;
    run_values *rv;
    size_t n_rv;
    variant_group *groups;
    size_t n_groups;
} experiment_runs;

static void experiment_runs_free(experiment_runs *e) {
    for (size_t g = 0; g < e->n_groups; g++) free(e->groups[g].runs);
    free(e->groups);
    free(e->rv);
    json_decref(e->runs);
    json_decref(e->exp);
    memset(e, 0, sizeof *e);
}

static svc_status experiment_runs_load(app *a, long long exp_id, experiment_runs *e, svc_error *err) {
    memset(e, 0, sizeof *e);
    store_status s = store_experiment_get(a->store, exp_id, &e->exp);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no experiment %lld", exp_id);
    if (s != STORE_OK) return svc_store_failed(err);
    long long total = 0;
    store_run_filter f = {.experiment_id = exp_id, .sort = "id", .limit = MAX_RUNS};
    if (store_run_list(a->store, &f, &e->runs, &total) != STORE_OK) {
        experiment_runs_free(e);
        return svc_store_failed(err);
    }
    size_t n = json_array_size(e->runs);
    json_t *variants = json_object_get(e->exp, "variants");
    size_t cap = json_array_size(variants) + n;
    e->rv = calloc(n ? n : 1, sizeof *e->rv);
    e->groups = calloc(cap ? cap : 1, sizeof *e->groups);
    if (!e->rv || !e->groups) {
        experiment_runs_free(e);
        return oom(err);
    }
    size_t i;
    json_t *v;
    json_array_foreach(variants, i, v) {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (name) e->groups[e->n_groups++] = (variant_group){.name = name, .tau0 = NAN};
    }
    json_array_foreach(e->runs, i, v) {
        run_values *rv = &e->rv[e->n_rv++];
        rv->row = v;
        rv->id = json_integer_value(json_object_get(v, "id"));
        rv->seed = json_integer_value(json_object_get(v, "seed"));
        rv->replicate = (int)json_integer_value(json_object_get(v, "replicate"));
        const char *vname = json_string_value(json_object_get(v, "variant"));
        if (!vname) vname = "";
        size_t g = 0;
        while (g < e->n_groups && strcmp(e->groups[g].name, vname)) g++;
        if (g == e->n_groups) e->groups[e->n_groups++] = (variant_group){.name = vname, .tau0 = NAN};
        variant_group *grp = &e->groups[g];
        if (!grp->runs && !(grp->runs = calloc(n, sizeof *grp->runs))) {
            experiment_runs_free(e);
            return oom(err);
        }
        if (!grp->attention) {
            json_t *cfg = json_object_get(v, "config");
            grp->attention = json_string_value(json_object_get(cfg, "attention"));
            grp->tau0 = initial_tau(cfg);
        }
        grp->runs[grp->n_runs++] = rv;
    }
    for (size_t g = 0; g < e->n_groups; g++)
        if (e->groups[g].n_runs) qsort(e->groups[g].runs, e->groups[g].n_runs, sizeof *e->groups[g].runs, by_replicate);
    return SVC_OK;
}

/* One variant's summary of metric m over its included runs with a finite value. */
static json_t *metric_summary(const variant_group *g, int m, const svc_stats_options *opt, svc_error *err,
                              svc_status *st) {
    double conf = opt->conf;
    double *x = malloc((g->n_runs ? g->n_runs : 1) * sizeof *x);
    json_t *values = json_array();
    size_t nx = 0;
    int bad = !x || !values;
    for (size_t i = 0; i < g->n_runs && !bad; i++) {
        const run_values *r = g->runs[i];
        if (!r->included) continue;
        bad |= json_array_append_new(values, json_pack("{s:i, s:I, s:o}", "replicate", r->replicate, "run_id",
                                                       (json_int_t)r->id, "value", num(r->v[m])));
        if (isfinite(r->v[m])) x[nx++] = r->v[m];
    }
    stats_summary s = {0};
    double lo = NAN, hi = NAN;
    stats_ci_method method = metric_defs[m].ci;
    if (!bad && (stats_summarize(x, nx, conf, &s) != STATS_OK ||
                 stats_bounded_ci(x, nx, conf, metric_defs[m].lower, metric_defs[m].upper, metric_defs[m].ci,
                                  opt->resamples, opt->seed, &lo, &hi, &method) != STATS_OK)) {
        free(x);
        json_decref(values);
        *st = svc_fail(err, SVC_FAILED, "internal", NULL, "the summary of %s failed", metric_defs[m].name);
        return NULL;
    }
    free(x);
    json_t *o =
        bad ? NULL
            : json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:o}", "n", (json_int_t)s.n, "mean", num(s.mean),
                        "std", num(s.std), "sem", num(s.sem), "df", s.n ? json_real(s.df) : json_null(), "ci",
                        interval(lo, hi), "ci_method", stats_ci_method_name(method), "reason",
                        s.reason ? json_string(s.reason) : json_null(), "values", values);
    if (o && m == M_TAU_DRIFT &&
        (json_object_set_new(o, "t", num(s.t)) < 0 || json_object_set_new(o, "p", num(s.p)) < 0)) {
        json_decref(o);
        o = NULL;
    }
    if (!o) {
        if (bad) json_decref(values);
        *st = oom(err);
    }
    return o;
}

static int applies(const variant_group *g, int m) { return !metric_defs[m].needs_tau || isfinite(g->tau0); }

static json_t *variant_json(const variant_group *g, const svc_stats_options *opt, svc_error *err, svc_status *st) {
    json_t *runs = json_array(), *metrics = json_object();
    size_t included = 0;
    int bad = !runs || !metrics;
    for (size_t i = 0; i < g->n_runs && !bad; i++) {
        const run_values *r = g->runs[i];
        included += (size_t)r->included;
        bad |= json_array_append_new(runs, json_pack("{s:I, s:i, s:I, s:O, s:b}", "id", (json_int_t)r->id, "replicate",
                                                     r->replicate, "seed", (json_int_t)r->seed, "status",
                                                     json_object_get(r->row, "status"), "included", r->included));
    }
    for (int m = 0; m < N_METRICS && !bad; m++) {
        if (!applies(g, m)) continue;
        json_t *o = metric_summary(g, m, opt, err, st);
        if (!o) {
            json_decref(runs);
            json_decref(metrics);
            return NULL;
        }
        bad |= json_object_set_new(metrics, metric_defs[m].name, o);
    }
    json_t *out =
        bad ? NULL
            : json_pack("{s:s, s:o, s:o, s:o, s:I, s:I, s:o}", "name", g->name, "attention",
                        g->attention ? json_string(g->attention) : json_null(), "tau_initial", num(g->tau0), "runs",
                        runs, "n_runs", (json_int_t)g->n_runs, "n_included", (json_int_t)included, "metrics", metrics);
    if (!out) {
        if (bad) {
            json_decref(runs);
            json_decref(metrics);
        }
        *st = oom(err);
    }
    return out;
}

/* The included run of g with this replicate and a finite value of m, or NULL. */
static const run_values *pair_of(const variant_group *g, int replicate, int m) {
    for (size_t i = 0; i < g->n_runs; i++)
        if (g->runs[i]->replicate == replicate && g->runs[i]->included)
            return isfinite(g->runs[i]->v[m]) ? g->runs[i] : NULL;
    return NULL;
}

/* Variant a against b on metric m, paired by replicate. *p gets the t-test's p-value (NaN if none). */
static json_t *comparison(const variant_group *a, const variant_group *b, int m, const svc_stats_options *o,
                          double *p_out, svc_error *err, svc_status *st) {
    size_t cap = a->n_runs ? a->n_runs : 1;
    double *xa = malloc(cap * sizeof *xa), *xb = malloc(cap * sizeof *xb);
    json_t *reps = json_array();
    size_t n = 0;
    int bad = !xa || !xb || !reps;
    for (size_t i = 0; i < a->n_runs && !bad; i++) {
        const run_values *ra = a->runs[i], *rb;
        if (pair_of(a, ra->replicate, m) != ra || !(rb = pair_of(b, ra->replicate, m))) continue;
        xa[n] = ra->v[m];
        xb[n] = rb->v[m];
        n++;
        bad |= json_array_append_new(reps, json_integer(ra->replicate));
    }
    stats_summary s = {0};
    double lo = NAN, hi = NAN;
    const char *why = NULL;
    if (!bad && (stats_paired(xa, xb, n, o->conf, &s) != STATS_OK ||
                 stats_bootstrap_paired_ci(xa, xb, n, o->conf, o->resamples, o->seed, &lo, &hi, &why) != STATS_OK)) {
        free(xa);
        free(xb);
        json_decref(reps);
        *st = svc_fail(err, SVC_FAILED, "internal", NULL, "the comparison of %s failed", metric_defs[m].name);
        return NULL;
    }
    free(xa);
    free(xb);
    const char *reason = s.reason ? s.reason : why;
    json_t *out = bad ? NULL
                      : json_pack("{s:s, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:n, s:o, s:o}",
                                  "metric", metric_defs[m].name, "a", a->name, "b", b->name, "n", (json_int_t)n,
                                  "replicates", reps, "mean_diff", num(s.mean), "std", num(s.std), "sem", num(s.sem),
                                  "df", n ? json_real(s.df) : json_null(), "ci", interval(s.ci_lo, s.ci_hi), "t",
                                  num(s.t), "p", num(s.p), "p_holm", "bootstrap_ci", interval(lo, hi), "reason",
                                  reason ? json_string(reason) : json_null());
    if (!out) {
        if (bad) json_decref(reps);
        *st = oom(err);
        return NULL;
    }
    *p_out = s.p;
    return out;
}

static int by_p(const void *x, const void *y) {
    double a = **(const double *const *)x, b = **(const double *const *)y;
    return (a > b) - (a < b);
}

/* Holm's step-down adjustment of the finite p-values among p[0..n) into adj (NaN stays NaN). */
static int holm(const double *p, size_t n, double *adj) {
    const double **order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        adj[i] = NAN;
        if (isfinite(p[i])) order[m++] = &p[i];
    }
    qsort(order, m, sizeof *order, by_p);
    double run = 0;
    for (size_t r = 0; r < m; r++) {
        double v = fmin(1.0, (double)(m - r) * *order[r]);
        run = fmax(run, v);
        adj[order[r] - p] = run;
    }
    free(order);
    return 0;
}

/* Every pair of variants on every metric both have, with Holm's adjustment within a metric. */
static svc_status comparisons_json(const experiment_runs *e, const svc_stats_options *o, json_t *out, svc_error *err) {
    size_t most = e->n_groups * (e->n_groups ? e->n_groups - 1 : 0) / 2;
    double *p = malloc((most ? most : 1) * sizeof *p), *adj = malloc((most ? most : 1) * sizeof *adj);
    json_t **objs = malloc((most ? most : 1) * sizeof *objs);
    svc_status st = p && adj && objs ? SVC_OK : oom(err);
    for (int m = 0; m < N_METRICS && st == SVC_OK; m++) {
        size_t k = 0;
        for (size_t i = 0; i < e->n_groups && st == SVC_OK; i++)
            for (size_t j = i + 1; j < e->n_groups && st == SVC_OK; j++) {
                const variant_group *a = &e->groups[i], *b = &e->groups[j];
                if (!applies(a, m) || !applies(b, m) || !a->n_runs || !b->n_runs) continue;
                if (o->cancel && atomic_load(o->cancel)) {
                    st = svc_fail(err, SVC_FAILED, "cancelled", NULL, "the request was cancelled");
                    break;
                }
                json_t *c = comparison(a, b, m, o, &p[k], err, &st);
                if (!c) break;
                if (json_array_append_new(out, c) < 0) {
                    st = oom(err);
                    break;
                }
                objs[k++] = c;
            }
        if (st == SVC_OK && holm(p, k, adj) < 0) st = oom(err);
        for (size_t i = 0; i < k && st == SVC_OK; i++)
            if (json_object_set_new(objs[i], "p_holm", num(adj[i])) < 0) st = oom(err);
    }
    free(p);
    free(adj);
    free(objs);
    return st;
}

/* Succeeded runs of a group: an upper bound on the replicates any of its pairs can hold. */
static size_t succeeded(const variant_group *g) {
    size_t n = 0;
    for (size_t i = 0; i < g->n_runs; i++) {
        const char *status = json_string_value(json_object_get(g->runs[i]->row, "status"));
        n += status && !strcmp(status, "succeeded");
    }
    return n;
}

/* The bootstrap work the request would do, bounded above before any series is read: every pair of
 * variants on every metric both have, when both have at least STATS_MIN_INTERVAL_N succeeded runs
 * (fewer pairs draw nothing), times the resamples. */
static svc_status check_work(const experiment_runs *e, long long exp_id, const svc_stats_options *o, svc_error *err) {
    unsigned long long comparisons = 0, resamples = o->resamples ? o->resamples : STATS_BOOTSTRAP_DEFAULT;
    for (int m = 0; m < N_METRICS; m++)
        for (size_t i = 0; i < e->n_groups; i++)
            for (size_t j = i + 1; j < e->n_groups; j++) {
                const variant_group *x = &e->groups[i], *y = &e->groups[j];
                size_t nx = succeeded(x), ny = succeeded(y);
                comparisons +=
                    applies(x, m) && applies(y, m) && nx >= STATS_MIN_INTERVAL_N && ny >= STATS_MIN_INTERVAL_N;
            }
    if (comparisons * resamples <= SVC_STATS_MAX_WORK) return SVC_OK;
    unsigned long long fits = SVC_STATS_MAX_WORK / comparisons;
    return svc_fail(err, SVC_INVALID, "too_much_work", "resamples",
                    "the statistics of experiment %lld would bootstrap %llu comparisons x %llu resamples = %llu "
                    "draws, over the bound of %llu per request; ask for resamples=%llu or fewer%s",
                    exp_id, comparisons, resamples, comparisons * resamples, SVC_STATS_MAX_WORK,
                    fits < 100 ? 100 : fits,
                    fits < 100 ? " (this experiment has too many variants for any bootstrap)" : "");
}

svc_status svc_stats_experiment(app *a, long long exp_id, const svc_stats_options *o, json_t **out, svc_error *err) {
    *out = NULL;
    if (o->k < 1 || o->k > SVC_STATS_MAX_K)
        return svc_fail(err, SVC_INVALID, "invalid_field", "k", "k must be an integer in 1..%d", SVC_STATS_MAX_K);
    if (!(o->conf > 0 && o->conf < 1))
        return svc_fail(err, SVC_INVALID, "invalid_field", "conf", "conf must be in (0, 1)");
    if (o->resamples > STATS_BOOTSTRAP_MAX)
        return svc_fail(err, SVC_INVALID, "invalid_field", "resamples", "resamples must be at most %d",
                        STATS_BOOTSTRAP_MAX);
    experiment_runs e;
    svc_status st = experiment_runs_load(a, exp_id, &e, err);
    if (st != SVC_OK) return st;
    st = check_work(&e, exp_id, o, err);
    for (size_t g = 0; g < e.n_groups && st == SVC_OK; g++)
        for (size_t i = 0; i < e.groups[g].n_runs && st == SVC_OK; i++) {
            if (o->cancel && atomic_load(o->cancel))
                st = svc_fail(err, SVC_FAILED, "cancelled", NULL, "the request was cancelled");
            if (st != SVC_OK) break;
            run_values *r = e.groups[g].runs[i];
            for (int m = 0; m < N_METRICS; m++) r->v[m] = NAN;
            const char *status = json_string_value(json_object_get(r->row, "status"));
            r->included = status && !strcmp(status, "succeeded");
            if (r->included) st = run_metrics(a, r, o->k, e.groups[g].tau0, err);
        }
    json_t *metrics = json_array(), *variants = json_array(), *comps = json_array();
    if (st == SVC_OK && (!metrics || !variants || !comps)) st = oom(err);
    for (int m = 0; m < N_METRICS && st == SVC_OK; m++)
        if (json_array_append_new(metrics, json_pack("{s:s, s:s, s:s}", "name", metric_defs[m].name, "description",
                                                     metric_defs[m].description, "ci_method",
                                                     stats_ci_method_name(metric_defs[m].ci))) < 0)
            st = oom(err);
    for (size_t g = 0; g < e.n_groups && st == SVC_OK; g++) {
        if (!e.groups[g].n_runs) continue;
        json_t *v = variant_json(&e.groups[g], o, err, &st);
        if (v && json_array_append_new(variants, v) < 0) st = oom(err);
    }
    if (st == SVC_OK) st = comparisons_json(&e, o, comps, err);
    json_t *res = NULL;
    if (st == SVC_OK) {
        json_t *exp = json_pack("{s:O, s:O, s:O}", "id", json_object_get(e.exp, "id"), "name",
                                json_object_get(e.exp, "name"), "replicates", json_object_get(e.exp, "replicates"));
        json_t *boot =
            json_pack("{s:s, s:I, s:I}", "method", "percentile", "resamples",
                      (json_int_t)(o->resamples ? o->resamples : STATS_BOOTSTRAP_DEFAULT), "seed", (json_int_t)o->seed);
        res = exp && boot
                  ? json_pack("{s:o, s:f, s:i, s:o, s:O, s:O, s:O}", "experiment", exp, "conf", o->conf, "k", o->k,
                              "bootstrap", boot, "metrics", metrics, "variants", variants, "comparisons", comps)
                  : NULL;
        if (!exp || !boot) {
            json_decref(exp);
            json_decref(boot);
        }
        if (!res) st = oom(err);
    }
    json_decref(metrics);
    json_decref(variants);
    json_decref(comps);
    experiment_runs_free(&e);
    *out = res;
    return st;
}

/* ---- bands ------------------------------------------------------------------------------- */

/* A stored key: letters and underscores, optionally ".L.H" (no '*' or ',', which the store would
 * read as a pattern or a list). */
static int valid_stored_key(const char *k) {
    size_t n = strlen(k), i = 0;
    if (n < 1 || n > STORE_METRIC_KEY_MAX) return 0;
    while (i < n && ((k[i] >= 'a' && k[i] <= 'z') || k[i] == '_')) i++;
    if (i == 0) return 0;
    if (i == n) return 1;
    for (int part = 0; part < 2; part++) {
        if (k[i++] != '.') return 0;
        size_t d = i;
        while (i < n && k[i] >= '0' && k[i] <= '9') i++;
        if (i == d || i - d > 4) return 0;
    }
    return i == n;
}

typedef enum { KEY_STORED, KEY_MEAN, KEY_SPREAD } key_kind;

static int by_step(const void *x, const void *y) {
    const stats_point *a = x, *b = y;
    return (a->step > b->step) - (a->step < b->step);
}

/* A run's series of `key` as stats points (*pts malloc'd, NULL when none). */
/* The stored keys a band of key reads (a pattern of store_metrics_points). */
static void series_pattern(const char *key, key_kind kind, char *pattern, size_t cap) {
    if (kind == KEY_STORED)
        snprintf(pattern, cap, "%s", key);
    else
        snprintf(pattern, cap, "%.*s.*", (int)(strchr(key, '.') - key), key);
}

/* The points a band reads, bounded before any is read: the summaries count each series' points. */
static svc_status check_band_points(app *a, const experiment_runs *e, long long exp_id, const char *key, key_kind kind,
                                    svc_error *err) {
    char pattern[40];
    series_pattern(key, kind, pattern, sizeof pattern);
    unsigned long long total = 0;
    for (size_t g = 0; g < e->n_groups; g++)
        for (size_t i = 0; i < e->groups[g].n_runs; i++) {
            json_t *summary = NULL;
            if (store_metrics_summary(a->store, e->groups[g].runs[i]->id, &summary) != STORE_OK)
                return svc_store_failed(err);
            const char *k;
            json_t *v;
            json_object_foreach(summary, k, v) if (store_keys_match(k, pattern)) total +=
                (unsigned long long)json_integer_value(json_object_get(v, "count"));
            json_decref(summary);
        }
    if (total <= SVC_STATS_MAX_BAND_POINTS) return SVC_OK;
    return svc_fail(err, SVC_INVALID, "too_large", "key",
                    "the series %s of experiment %lld would read %llu points, over the bound of %llu per request", key,
                    exp_id, total, SVC_STATS_MAX_BAND_POINTS);
}

static svc_status run_series(app *a, long long id, const char *key, key_kind kind, stats_point **pts, size_t *n_out,
                             svc_error *err) {
    *pts = NULL;
    *n_out = 0;
    char pattern[40];
    series_pattern(key, kind, pattern, sizeof pattern);
    store_metric *p = NULL;
    size_t n = 0;
    if (store_metrics_points(a->store, id, pattern, 0, &p, &n) != STORE_OK) return svc_store_failed(err);
    if (!n) return SVC_OK;
    stats_point *all = malloc(n * sizeof *all);
    if (!all) {
        free(p);
        return oom(err);
    }
    for (size_t i = 0; i < n; i++) all[i] = (stats_point){p[i].step, p[i].value};
    free(p);
    if (kind == KEY_STORED) {
        *pts = all;
        *n_out = n;
        return SVC_OK;
    }
    /* Over the heads at each step: their mean, or max - min (NaN when any head's value is). */
    qsort(all, n, sizeof *all, by_step);
    size_t w = 0;
    for (size_t lo = 0; lo < n;) {
        size_t hi = lo;
        double sum = 0, mn = INFINITY, mx = -INFINITY;
        int finite = 1;
        for (; hi < n && all[hi].step == all[lo].step; hi++) {
            sum += all[hi].value;
            mn = fmin(mn, all[hi].value);
            mx = fmax(mx, all[hi].value);
            finite &= isfinite(all[hi].value);
        }
        double v = kind == KEY_MEAN ? sum / (double)(hi - lo) : mx - mn;
        all[w++] = (stats_point){all[lo].step, finite ? v : NAN};
        lo = hi;
    }
    *pts = all;
    *n_out = w;
    return SVC_OK;
}

void svc_stats_bands_free(svc_stats_bands *b) {
    for (size_t i = 0; i < b->n; i++) {
        json_decref(b->variants[i].runs);
        free(b->variants[i].points);
    }
    free(b->variants);
    memset(b, 0, sizeof *b);
}

svc_status svc_stats_bands_get(app *a, long long exp_id, const char *key, svc_stats_bands *out, svc_error *err) {
    memset(out, 0, sizeof *out);
    key_kind kind = KEY_STORED;
    if (!key || !*key)
        return svc_fail(err, SVC_INVALID, "invalid_field", "key",
                        "key is required (a metric key, or one of " SVC_STATS_DERIVED_KEYS ")");
    if (!strcmp(key, "tau.mean") || !strcmp(key, "entropy.mean"))
        kind = KEY_MEAN;
    else if (!strcmp(key, "tau.spread"))
        kind = KEY_SPREAD;
    else if (!valid_stored_key(key))
        return svc_fail(
            err, SVC_INVALID, "invalid_field", "key",
            "key must be a metric key such as loss, val_loss or tau.0.1, or one of " SVC_STATS_DERIVED_KEYS);
    experiment_runs e;
    svc_status st = experiment_runs_load(a, exp_id, &e, err);
    if (st != SVC_OK) return st;
    st = check_band_points(a, &e, exp_id, key, kind, err);
    if (st != SVC_OK) {
        experiment_runs_free(&e);
        return st;
    }
    out->variants = calloc(e.n_groups ? e.n_groups : 1, sizeof *out->variants);
    if (!out->variants) st = oom(err);
    for (size_t g = 0; g < e.n_groups && st == SVC_OK; g++) {
        const variant_group *grp = &e.groups[g];
        if (!grp->n_runs) continue;
        svc_stats_band *b = &out->variants[out->n++];
        snprintf(b->variant, sizeof b->variant, "%s", grp->name);
        stats_series *reps = calloc(grp->n_runs, sizeof *reps);
        if (!reps || !(b->runs = json_array())) st = oom(err);
        for (size_t i = 0; i < grp->n_runs && st == SVC_OK; i++) {
            const run_values *r = grp->runs[i];
            stats_point *pts;
            size_t n;
            st = run_series(a, r->id, key, kind, &pts, &n, err);
            if (st != SVC_OK) break;
            reps[i] = (stats_series){pts, n};
            if (json_array_append_new(b->runs, json_pack("{s:I, s:i, s:O}", "id", (json_int_t)r->id, "replicate",
                                                         r->replicate, "status", json_object_get(r->row, "status"))) <
                0)
                st = oom(err);
        }
        if (st == SVC_OK) {
            stats_status ss = stats_band(reps, grp->n_runs, &b->points, &b->n_points);
            if (ss != STATS_OK)
                st = ss == STATS_ERR_NOMEM ? oom(err)
                                           : svc_fail(err, SVC_FAILED, "internal", NULL, "the band of %s failed", key);
        }
        for (size_t i = 0; reps && i < grp->n_runs; i++) free((void *)reps[i].points);
        free(reps);
    }
    experiment_runs_free(&e);
    if (st != SVC_OK) svc_stats_bands_free(out);
    return st;
}
