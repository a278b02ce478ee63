/* The figures behind the seed blog's open questions; the contract is in svc_questions.h. */
#include "services/svc_questions.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/app.h"
#include "engine/attention.h"
#include "services/stats.h"
#include "services/svc_experiments.h"

/* The most runs an experiment holds: 16 variants x the most replicates. */
#define MAX_RUNS (16 * SVC_EXPERIMENTS_MAX_REPLICATES)

static const struct {
    const char *name, *description;
    int needs_tau;
} spread_metrics[] = {
    {"tau_ratio", "max / min of tau over every head of the model", 1},
    {"tau_std", "standard deviation of tau over every head (population)", 1},
    {"entropy_frac_std", "standard deviation over heads of attention entropy / ln(keys) (0: all heads alike)", 0},
    {"distance_std", "standard deviation over heads of the mean attended distance (tokens)", 0},
};
#define N_SPREAD (int)(sizeof spread_metrics / sizeof spread_metrics[0])

static svc_status oom(svc_error *err) { return svc_fail(err, SVC_FAILED, "internal", NULL, "out of memory"); }
static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* The seed and resamples of the bootstrap intervals of these answers (the same data give the same
 * interval every time). */
#define BOOT_SEED 1
#define BOOT_RESAMPLES STATS_BOOTSTRAP_DEFAULT

/* A summary over replicates of values bounded by [lower, upper] as JSON: mean, std and an interval
 * of the mean that stays within the bounds (stats_bounded_ci: the percentile bootstrap for
 * STATS_CI_BOOTSTRAP), its method named in "ci_method". *lo_out, *hi_out (if non-NULL) get it. */
static json_t *summary_json(const double *x, size_t n, double conf, double lower, double upper, stats_ci_method ci,
                            double *lo_out, double *hi_out) {
    stats_summary s;
    double lo = NAN, hi = NAN;
    stats_ci_method used = ci;
    if (lo_out) *lo_out = NAN;
    if (hi_out) *hi_out = NAN;
    if (stats_summarize(x, n, conf, &s) != STATS_OK ||
        stats_bounded_ci(x, n, conf, lower, upper, ci, BOOT_RESAMPLES, BOOT_SEED, &lo, &hi, &used) != STATS_OK)
        return json_pack("{s:i, s:s}", "n", (int)n, "reason", "not finite");
    if (lo_out) *lo_out = lo;
    if (hi_out) *hi_out = hi;
    return json_pack("{s:i, s:o, s:o, s:[o, o], s:s, s:s?}", "n", (int)s.n, "mean", num(s.mean), "std", num(s.std),
                     "ci", num(lo), num(hi), "ci_method", stats_ci_method_name(used), "reason", s.reason);
}

/* The experiment's runs grouped by variant (experiment order, then any others), each group's runs
 * ordered by replicate. */
typedef struct {
    const char *name, *attention, *corpus;
    json_t **runs;
    size_t n;
} group;

typedef struct {
    json_t *exp, *runs;
    group *g;
    size_t n_g;
} exp_runs;

static void exp_runs_free(exp_runs *e) {
    for (size_t i = 0; i < e->n_g; i++) free(e->g[i].runs);
    free(e->g);
    json_decref(e->runs);
    json_decref(e->exp);
    memset(e, 0, sizeof *e);
}

static int by_replicate(const void *x, const void *y) {
    const json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
    json_int_t ra = json_integer_value(json_object_get(a, "replicate")),
               rb = json_integer_value(json_object_get(b, "replicate"));
    if (ra != rb) return ra < rb ? -1 : 1;
    json_int_t ia = json_integer_value(json_object_get(a, "id")), ib = json_integer_value(json_object_get(b, "id"));
    return (ia > ib) - (ia < ib);
}

static svc_status exp_runs_load(app *a, long long exp_id, exp_runs *e, svc_error *err) {
    memset(e, 0, sizeof *e);
    store_status s = store_experiment_get(a->store, exp_id, &e->exp);
    if (s == STORE_NOT_FOUND) return svc_fail(err, SVC_NOT_FOUND, "not_found", "id", "no experiment %lld", exp_id);
    if (s != STORE_OK) return svc_store_failed(err);
    long long total = 0;
    store_run_filter f = {.experiment_id = exp_id, .sort = "id", .limit = MAX_RUNS};
    if (store_run_list(a->store, &f, &e->runs, &total) != STORE_OK) {
        exp_runs_free(e);
        return svc_store_failed(err);
    }
    size_t n = json_array_size(e->runs);
    json_t *variants = json_object_get(e->exp, "variants");
    size_t cap = json_array_size(variants) + n;
    e->g = calloc(cap ? cap : 1, sizeof *e->g);
    if (!e->g) {
        exp_runs_free(e);
        return oom(err);
    }
    size_t i;
    json_t *v;
    json_array_foreach(variants, i, v) {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (name) e->g[e->n_g++] = (group){.name = name};
    }
    json_array_foreach(e->runs, i, v) {
        const char *vname = json_string_value(json_object_get(v, "variant"));
        if (!vname) vname = "";
        size_t k = 0;
        while (k < e->n_g && strcmp(e->g[k].name, vname)) k++;
        if (k == e->n_g) e->g[e->n_g++] = (group){.name = vname};
        group *gr = &e->g[k];
        if (!gr->runs && !(gr->runs = calloc(n, sizeof *gr->runs))) {
            exp_runs_free(e);
            return oom(err);
        }
        if (!gr->attention) {
            const json_t *cfg = json_object_get(v, "config");
            gr->attention = json_string_value(json_object_get(cfg, "attention"));
            gr->corpus = json_string_value(json_object_get(cfg, "corpus"));
        }
        gr->runs[gr->n++] = v;
    }
    for (size_t k = 0; k < e->n_g; k++)
        if (e->g[k].n > 1) qsort(e->g[k].runs, e->g[k].n, sizeof *e->g[k].runs, by_replicate);
    return SVC_OK;
}

static json_t *experiment_json(const json_t *exp) {
    return json_pack("{s:O, s:O, s:O}", "id", json_object_get(exp, "id"), "name", json_object_get(exp, "name"),
                     "replicates",
                     json_object_get(exp, "replicates") ? json_object_get(exp, "replicates") : json_integer(1));
}

/* ---- Q1 ---------------------------------------------------------------------------------- */

/* One run's spread metrics at the last step <= at and at its last step. */
static svc_status run_spread(app *a, long long id, long at, double *v_at, double *v_end, int *at_step, int *last_step,
                             svc_error *err) {
    for (int m = 0; m < N_SPREAD; m++) v_at[m] = v_end[m] = NAN;
    *at_step = *last_step = -1;
    store_metric *p = NULL;
    size_t n = 0;
    if (store_metrics_points(a->store, id, "tau_ratio,tau_std,entropy_frac_std,distance_std", 0, &p, &n) != STORE_OK)
        return svc_store_failed(err);
    /* ordered by key, then step */
    for (size_t i = 0; i < n; i++) {
        int m = 0;
        while (m < N_SPREAD && strcmp(p[i].key, spread_metrics[m].name)) m++;
        if (m == N_SPREAD) continue;
        if (p[i].step <= at) {
            v_at[m] = p[i].value;
            if (p[i].step > *at_step) *at_step = p[i].step;
        }
        v_end[m] = p[i].value;
        if (p[i].step > *last_step) *last_step = p[i].step;
    }
    free(p);
    return SVC_OK;
}

/* at 0: step 2000, or a fifth of the way for runs that do not get that far. */
static long default_at(const json_t *runs) {
    long most = 0;
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        long n = (long)json_integer_value(json_object_get(json_object_get(r, "config"), "steps"));
        if (n > most) most = n;
    }
    return most > SVC_QUESTIONS_DEFAULT_AT || most < 5 ? SVC_QUESTIONS_DEFAULT_AT : most / 5;
}

/* The buffers of one head-spread answer: run r's metric m at `at` and at its end (va, ve, at
 * r * N_SPREAD + m), and a metric's finite values over one variant's runs (xa, xe). */
typedef struct {
    long at;
    double conf;
    double *xa, *xe, *va, *ve;
} spread_work;

/* One run's object of a variant's "runs": its figures at `at` and at the end (NULL: out of memory). */
static json_t *spread_run_json(const json_t *row, int learned, const double *va, const double *ve, int at_step,
                               int last) {
    json_t *ja = json_object(), *je = json_object();
    int bad = !ja || !je;
    for (int m = 0; !bad && m < N_SPREAD; m++) {
        if (spread_metrics[m].needs_tau && !learned) continue;
        bad |= json_object_set_new(ja, spread_metrics[m].name, num(va[m])) < 0;
        bad |= json_object_set_new(je, spread_metrics[m].name, num(ve[m])) < 0;
    }
    if (bad) {
        json_decref(ja);
        json_decref(je);
        return NULL;
    }
    return json_pack("{s:O, s:O, s:O, s:O, s:i, s:o, s:o, s:o}", "id", json_object_get(row, "id"), "replicate",
                     json_object_get(row, "replicate"), "seed", json_object_get(row, "seed"), "status",
                     json_object_get(row, "status"), "last_step", last, "at_step",
                     at_step >= 0 ? json_integer(at_step) : json_null(), "at", ja, "end", je);
}

/* Reads each run of g into w->va, w->ve and appends its object to runs; *still: one of them is
 * queued or running. */
static svc_status spread_runs(app *a, const group *g, int learned, spread_work *w, json_t *runs, int *still,
                              svc_error *err) {
    *still = 0;
    for (size_t r = 0; r < g->n; r++) {
        const json_t *row = g->runs[r];
        int at_step, last;
        double *va = w->va + r * N_SPREAD, *ve = w->ve + r * N_SPREAD;
        svc_status st =
            run_spread(a, json_integer_value(json_object_get(row, "id")), w->at, va, ve, &at_step, &last, err);
        if (st != SVC_OK) return st;
        const char *status = json_string_value(json_object_get(row, "status"));
        *still |= status && (!strcmp(status, "running") || !strcmp(status, "queued"));
        json_t *o = spread_run_json(row, learned, va, ve, at_step, last);
        if (!o || json_array_append_new(runs, o) < 0) return oom(err);
    }
    return SVC_OK;
}

/* The figures of a variant's answer sentence: its head metric's mean at `at` and at the end (with
 * the end's interval), and the paired change with its interval and p. */
typedef struct {
    double at, end, lo, hi, ch, ch_lo, ch_hi, ch_p;
    size_t n;
} head_figures;

/* The sentence of variant g's head metric, appended to answer: -1 when out of memory. */
static int head_sentence(json_t *answer, const group *g, const char *metric, int still, const spread_work *w,
                         const head_figures *h) {
    char line[600];
    int len = snprintf(line, sizeof line, "%s (%s, %zu run%s%s): %s %.4g at step %ld", g->name,
                       g->attention ? g->attention : "?", h->n, h->n == 1 ? "" : "s", still ? ", still training" : "",
                       metric, h->at, w->at);
    len += snprintf(line + len, sizeof line - (size_t)len, ", %.4g at the end", h->end);
    if (isfinite(h->lo))
        len += snprintf(line + len, sizeof line - (size_t)len, " [%.0f%% bootstrap CI %.4g, %.4g]", w->conf * 100,
                        h->lo, h->hi);
    if (isfinite(h->ch)) len += snprintf(line + len, sizeof line - (size_t)len, "; change %+.4g", h->ch);
    if (isfinite(h->ch_lo))
        len += snprintf(line + len, sizeof line - (size_t)len, " [%.4g, %.4g], p = %.3g", h->ch_lo, h->ch_hi, h->ch_p);
    else if (h->n < 3)
        len += snprintf(line + len, sizeof line - (size_t)len, " (intervals need 3 replicates)");
    return json_array_append_new(answer, json_string(line));
}

/* Metric m over the runs of g: its summaries at `at` and at the end and the paired change, set in
 * mj; for the head metric (h non-NULL), the figures of the variant's sentence. */
static svc_status spread_metric(const group *g, int m, spread_work *w, json_t *mj, head_figures *h, svc_error *err) {
    size_t na = 0, ne = 0, np = 0;
    double *pa = calloc(g->n ? g->n : 1, sizeof(double)), *pe = calloc(g->n ? g->n : 1, sizeof(double));
    if (!pa || !pe) {
        free(pa), free(pe);
        return oom(err);
    }
    for (size_t r = 0; r < g->n; r++) {
        double x = w->va[r * N_SPREAD + m], y = w->ve[r * N_SPREAD + m];
        if (isfinite(x)) w->xa[na++] = x;
        if (isfinite(y)) w->xe[ne++] = y;
        if (isfinite(x) && isfinite(y)) pa[np] = x, pe[np] = y, np++;
    }
    stats_summary sc;
    int have_change = stats_paired(pe, pa, np, w->conf, &sc) == STATS_OK;
    free(pa), free(pe);
    json_t *chg = have_change ? json_pack("{s:i, s:o, s:o, s:[o, o], s:s, s:o, s:s?}", "n", (int)sc.n, "mean",
                                          num(sc.mean), "std", num(sc.std), "ci", num(sc.ci_lo), num(sc.ci_hi),
                                          "ci_method", "t", "p", num(sc.p), "reason", sc.reason)
                              : json_pack("{s:i, s:s}", "n", (int)np, "reason", "not finite");
    /* a spread is never below 0: its intervals are the percentile bootstrap's */
    double end_lo, end_hi;
    json_t *o = json_pack(
        "{s:o, s:o, s:o}", "at", summary_json(w->xa, na, w->conf, 0, INFINITY, STATS_CI_BOOTSTRAP, NULL, NULL), "end",
        summary_json(w->xe, ne, w->conf, 0, INFINITY, STATS_CI_BOOTSTRAP, &end_lo, &end_hi), "change", chg);
    svc_status st = !o || json_object_set_new(mj, spread_metrics[m].name, o) < 0 ? oom(err) : SVC_OK;
    if (h) {
        stats_summary s1, s2;
        if (stats_summarize(w->xa, na, w->conf, &s1) == STATS_OK) h->at = s1.mean;
        if (stats_summarize(w->xe, ne, w->conf, &s2) == STATS_OK) h->end = s2.mean, h->lo = end_lo, h->hi = end_hi;
        h->n = ne;
        if (have_change) h->ch = sc.mean, h->ch_lo = sc.ci_lo, h->ch_hi = sc.ci_hi, h->ch_p = sc.p;
    }
    return st;
}

/* Variant g's object, appended to variants, and its sentence, appended to answer. */
static svc_status spread_variant(app *a, const group *g, spread_work *w, json_t *variants, json_t *answer,
                                 svc_error *err) {
    const attention_variant *av = attention_find(g->attention);
    int learned = av && av->scale != ATTENTION_SCALE_FIXED, still = 0;
    json_t *runs = json_array(), *mj = json_object();
    svc_status st = runs && mj ? spread_runs(a, g, learned, w, runs, &still, err) : oom(err);
    const char *head_metric = learned ? "tau_ratio" : "entropy_frac_std";
    for (int m = 0; st == SVC_OK && m < N_SPREAD; m++) {
        if (spread_metrics[m].needs_tau && !learned) continue;
        int is_head = !strcmp(spread_metrics[m].name, head_metric);
        head_figures h = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0};
        st = spread_metric(g, m, w, mj, is_head ? &h : NULL, err);
        if (st == SVC_OK && is_head && head_sentence(answer, g, head_metric, still, w, &h) < 0) st = oom(err);
    }
    json_t *vo = st == SVC_OK ? json_pack("{s:s, s:s?, s:b, s:o, s:o}", "name", g->name, "attention", g->attention,
                                          "learned_scale", learned, "runs", runs, "metrics", mj)
                              : NULL;
    if (!vo) {
        json_decref(runs);
        json_decref(mj);
        return st == SVC_OK ? oom(err) : st;
    }
    return json_array_append_new(variants, vo) < 0 ? oom(err) : SVC_OK;
}

/* {"name","description"} of each spread metric (NULL: out of memory). */
static json_t *spread_metrics_json(void) {
    json_t *metrics = json_array();
    for (int m = 0; metrics && m < N_SPREAD; m++)
        if (json_array_append_new(metrics, json_pack("{s:s, s:s}", "name", spread_metrics[m].name, "description",
                                                     spread_metrics[m].description)) < 0) {
            json_decref(metrics);
            return NULL;
        }
    return metrics;
}

svc_status svc_questions_head_spread(app *a, long long exp_id, long at, double conf, json_t **out, svc_error *err) {
    *out = NULL;
    if (at < 0) return svc_fail(err, SVC_INVALID, "invalid_field", "at", "at must be a step >= 1");
    if (!(conf > 0 && conf < 1)) return svc_fail(err, SVC_INVALID, "invalid_field", "conf", "conf must be in (0, 1)");
    exp_runs e;
    svc_status st = exp_runs_load(a, exp_id, &e, err);
    if (st != SVC_OK) return st;
    spread_work w = {.at = at ? at : default_at(e.runs),
                     .conf = conf,
                     .xa = calloc(MAX_RUNS, sizeof(double)),
                     .xe = calloc(MAX_RUNS, sizeof(double)),
                     .va = calloc((size_t)MAX_RUNS * N_SPREAD, sizeof(double)),
                     .ve = calloc((size_t)MAX_RUNS * N_SPREAD, sizeof(double))};
    json_t *variants = json_array(), *answer = json_array(), *metrics = spread_metrics_json();
    if (!variants || !answer || !metrics || !w.xa || !w.xe || !w.va || !w.ve) st = oom(err);
    for (size_t gi = 0; st == SVC_OK && gi < e.n_g; gi++) st = spread_variant(a, &e.g[gi], &w, variants, answer, err);
    if (st == SVC_OK) {
        *out = json_pack("{s:o, s:I, s:f, s:O, s:O, s:O}", "experiment", experiment_json(e.exp), "at_step",
                         (json_int_t)w.at, "conf", conf, "metrics", metrics, "variants", variants, "answer", answer);
        if (!*out) st = oom(err);
    }
    json_decref(metrics);
    json_decref(variants);
    json_decref(answer);
    free(w.xa), free(w.xe), free(w.va), free(w.ve);
    exp_runs_free(&e);
    return st;
}

/* ---- Q2 ---------------------------------------------------------------------------------- */

/* A run's accuracies at its last evaluation: {key: value} (new object), that step and how many
 * answers acc counted there (acc_n; 0 when the run did not log it). */
static svc_status run_accuracy(app *a, long long id, json_t **acc, int *eval_step, long *answers, svc_error *err) {
    *acc = json_object();
    *eval_step = -1;
    *answers = 0;
    if (!*acc) return oom(err);
    store_metric *p = NULL;
    size_t n = 0;
    if (store_metrics_points(a->store, id, "acc,acc.*,acc_n", 0, &p, &n) != STORE_OK) {
        json_decref(*acc);
        *acc = NULL;
        return svc_store_failed(err);
    }
    for (size_t i = 0; i < n; i++)
        if (p[i].step > *eval_step) *eval_step = p[i].step;
    for (size_t i = 0; i < n; i++) {
        if (p[i].step != *eval_step) continue;
        if (!strcmp(p[i].key, "acc_n"))
            *answers = isfinite(p[i].value) && p[i].value >= 0 ? (long)p[i].value : 0;
        else if (json_object_set_new(*acc, p[i].key, num(p[i].value)) < 0) {
            free(p);
            json_decref(*acc);
            *acc = NULL;
            return oom(err);
        }
    }
    free(p);
    return SVC_OK;
}

/* Reads the last evaluation of each run of g: its object appended to runs, its accuracies to accs
 * (one object per run, in runs' order), their keys to keys (first seen first), its count of answers
 * to answers[r]. */
static svc_status accuracy_runs(app *a, const group *g, long *answers, json_t *runs, json_t *accs, json_t *keys,
                                svc_error *err) {
    svc_status st = SVC_OK;
    for (size_t r = 0; st == SVC_OK && r < g->n; r++) {
        const json_t *row = g->runs[r];
        json_t *acc = NULL;
        int step;
        st = run_accuracy(a, json_integer_value(json_object_get(row, "id")), &acc, &step, &answers[r], err);
        if (st != SVC_OK) break;
        const char *k;
        json_t *v;
        json_object_foreach(acc, k, v) {
            int seen = 0;
            size_t i;
            json_t *kk;
            json_array_foreach(keys, i, kk) seen |= !strcmp(json_string_value(kk), k);
            if (!seen && json_array_append_new(keys, json_string(k)) < 0) st = oom(err);
        }
        if (json_array_append(accs, acc) < 0) st = oom(err);
        json_t *o = json_pack("{s:O, s:O, s:O, s:O, s:o, s:o, s:o}", "id", json_object_get(row, "id"), "replicate",
                              json_object_get(row, "replicate"), "seed", json_object_get(row, "seed"), "status",
                              json_object_get(row, "status"), "eval_step", step >= 0 ? json_integer(step) : json_null(),
                              "acc", acc, "answers", answers[r] > 0 ? json_integer(answers[r]) : json_null());
        if (!o || json_array_append_new(runs, o) < 0) st = oom(err);
    }
    return st;
}

/* The summary over replicates of accuracy k (x: room for one value per run); for the overall "acc",
 * with the answers counted and their pooled Wilson interval. NULL when out of memory. */
static json_t *accuracy_summary(const char *k, const json_t *accs, const long *answers, double *x, double conf) {
    size_t nx = 0, r;
    json_t *acc;
    json_array_foreach(accs, r, acc) {
        json_t *v = json_object_get(acc, k);
        if (json_is_number(v)) x[nx++] = json_number_value(v);
    }
    /* an accuracy lies in [0, 1]: a percentile bootstrap interval over the replicates stays there */
    json_t *sj = summary_json(x, nx, conf, 0, 1, STATS_CI_BOOTSTRAP, NULL, NULL);
    if (!sj || strcmp(k, "acc")) return sj;
    /* overall: the Wilson interval of the answers of every replicate pooled (what the evaluation's
     * finite sample leaves open; the bootstrap above is over seeds) */
    long succ = 0, trials = 0;
    int all = nx > 0;
    json_array_foreach(accs, r, acc) {
        json_t *v = json_object_get(acc, k);
        if (!json_is_number(v) || !isfinite(json_number_value(v))) continue;
        if (answers[r] < 1) all = 0;
        succ += lround(json_number_value(v) * (double)answers[r]);
        trials += answers[r];
    }
    double lo = NAN, hi = NAN;
    if (all && stats_wilson(succ, trials, conf, &lo, &hi) != STATS_OK) lo = hi = NAN;
    if (json_object_set_new(sj, "answers", all ? json_integer(trials) : json_null()) < 0 ||
        json_object_set_new(sj, "wilson_ci", json_pack("[o, o]", num(lo), num(hi))) < 0) {
        json_decref(sj);
        return NULL;
    }
    return sj;
}

/* Variant g's object (its runs, the summary of each accuracy key, its corpus's task), appended to
 * variants; x and answers: room for one value per run. */
static svc_status accuracy_variant(app *a, const group *g, double conf, double *x, long *answers, json_t *variants,
                                   svc_error *err) {
    json_t *runs = json_array(), *accs = json_array(), *keys = json_array(), *summ = json_object();
    svc_status st = runs && accs && keys && summ ? accuracy_runs(a, g, answers, runs, accs, keys, err) : oom(err);
    /* acc first, then the buckets in the order the store gave them (by key) */
    size_t i;
    json_t *kk;
    json_array_foreach(keys, i, kk) {
        if (st != SVC_OK) break;
        const char *k = json_string_value(kk);
        json_t *sj = accuracy_summary(k, accs, answers, x, conf);
        if (!sj || json_object_set_new(summ, k, sj) < 0) st = oom(err);
    }
    json_t *task = NULL, *crow = NULL;
    if (st == SVC_OK && g->corpus && store_corpus_get(a->store, g->corpus, &crow) == STORE_OK)
        task = json_incref(json_object_get(crow, "task"));
    json_decref(crow);
    json_t *vo = st == SVC_OK ? json_pack("{s:s, s:s?, s:s?, s:o, s:O, s:O, s:O}", "name", g->name, "attention",
                                          g->attention, "corpus", g->corpus, "task", task ? task : json_null(), "keys",
                                          keys, "runs", runs, "acc", summ)
                              : NULL;
    if (!vo && st == SVC_OK) st = oom(err);
    if (vo && json_array_append_new(variants, vo) < 0) st = oom(err);
    json_decref(runs);
    json_decref(accs);
    json_decref(keys);
    json_decref(summ);
    return st;
}

svc_status svc_questions_accuracy(app *a, long long exp_id, double conf, json_t **out, svc_error *err) {
    *out = NULL;
    if (!(conf > 0 && conf < 1)) return svc_fail(err, SVC_INVALID, "invalid_field", "conf", "conf must be in (0, 1)");
    exp_runs e;
    svc_status st = exp_runs_load(a, exp_id, &e, err);
    if (st != SVC_OK) return st;
    json_t *variants = json_array();
    double *x = calloc(MAX_RUNS, sizeof(double));
    long *answers = calloc(MAX_RUNS, sizeof(long));
    if (!variants || !x || !answers) st = oom(err);
    for (size_t gi = 0; st == SVC_OK && gi < e.n_g; gi++)
        st = accuracy_variant(a, &e.g[gi], conf, x, answers, variants, err);
    if (st == SVC_OK) {
        *out = json_pack("{s:o, s:f, s:O}", "experiment", experiment_json(e.exp), "conf", conf, "variants", variants);
        if (!*out) st = oom(err);
    }
    json_decref(variants);
    free(x);
    free(answers);
    exp_runs_free(&e);
    return st;
}
