/* Replicated experiments and their statistics, against a real attnlabd: a two-variant tiny
 * experiment with replicates 5 runs through the REST API and the client, and every figure of
 * GET /api/experiments/{id}/stats is recomputed here from the runs' own series
 * (GET /api/runs/{id}/metrics, not downsampled): each run's metric values, then the means,
 * sample standard deviations and Student-t intervals with the t quantile from the printed table,
 * the paired differences with the t-test's p-value from the closed-form t CDF for 4 degrees of
 * freedom, and the bootstrap interval redrawn with the answer's seed from the recomputed values.
 * The bands of /series are checked against the same series step by step, the CSV against the
 * JSON, and bad input answers 422 naming the field. */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../support/api.h"
#include "../support/test.h"
#include "services/stats.h"

static harness_server srv;

#define REPS 5
#define STEPS 30
#define K 5
#define RESAMPLES 2000
#define BOOT_SEED 3
/* Student's t, 0.975 quantile, 4 degrees of freedom (NIST/SEMATECH table 1.3.6.7.2, more digits). */
#define T975_DF4 2.7764451051977987

static const char *const VARIANTS[2] = {"rope", "cosine_rope"};
static const char *const METRICS[] = {"final_train_loss", "final_val_loss", "min_val_loss",      "final_tau_spread",
                                      "final_tau_mean",   "tau_drift",      "final_entropy_mean"};
#define N_METRICS 7
/* What each metric cannot go below (-INFINITY: nothing). */
static const double LOWER[N_METRICS] = {0, 0, 0, 0, -INFINITY, -INFINITY, 0};

/* ---- what this test computes itself --------------------------------------------------------- */

/* Every metric of one run, from its full series; NaN where the run has none. */
typedef struct {
    long long id;
    int replicate;
    double v[N_METRICS];
} run_figures;

static double mean_of(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s / n;
}

static double sd_of(const double *x, int n) {
    double m = mean_of(x, n), s = 0;
    for (int i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);
    return sqrt(s / (n - 1));
}

/* P(T <= t) for Student's t with 4 degrees of freedom, in closed form:
 * 1/2 + (3/8) u (1 - u^2/12) with u = t / sqrt(1 + t^2/4). */
static double t4_cdf(double t) {
    double u = t / sqrt(1 + t * t / 4);
    return 0.5 + 0.375 * u * (1 - u * u / 12);
}

/* The numbers of a series member of a /metrics answer. */
static json_t *values_of(json_t *series, const char *key) {
    return json_object_get(json_object_get(series, key), "values");
}

static int figures_of_run(long long id, int tau_learned, double tau0, run_figures *f) {
    char path[128];
    snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=loss,val_loss,tau.*,entropy.*", id);
    long code;
    json_t *j = api_call(&srv, "GET", path, NULL, &code), *s = json_object_get(j, "series");
    json_t *loss = values_of(s, "loss"), *val = values_of(s, "val_loss");
    int ok = code == 200 && json_array_size(loss) == STEPS && json_array_size(val) >= 2;
    for (int m = 0; m < N_METRICS; m++) f->v[m] = NAN;
    f->id = id;
    if (ok) {
        double sum = 0;
        for (int i = STEPS - K; i < STEPS; i++) sum += json_number_value(json_array_get(loss, (size_t)i));
        f->v[0] = sum / K;
        size_t nv = json_array_size(val);
        f->v[1] = json_number_value(json_array_get(val, nv - 1));
        f->v[2] = INFINITY;
        for (size_t i = 0; i < nv; i++) f->v[2] = fmin(f->v[2], json_number_value(json_array_get(val, i)));
        /* tau and entropy per head (TINY_CONFIG: 1 layer, 2 heads) at the last step */
        double tau[2], ent[2];
        for (int h = 0; h < 2 && ok; h++) {
            char key[32];
            snprintf(key, sizeof key, "entropy.0.%d", h);
            json_t *e = values_of(s, key);
            ok = json_array_size(e) == STEPS;
            ent[h] = json_number_value(json_array_get(e, STEPS - 1));
            snprintf(key, sizeof key, "tau.0.%d", h);
            json_t *t = values_of(s, key);
            if (tau_learned)
                ok = ok && json_array_size(t) == STEPS;
            else
                ok = ok && !t;
            tau[h] = json_number_value(json_array_get(t, STEPS - 1));
        }
        f->v[6] = (ent[0] + ent[1]) / 2;
        if (tau_learned) {
            f->v[3] = fabs(tau[0] - tau[1]);
            f->v[4] = (tau[0] + tau[1]) / 2;
            f->v[5] = f->v[4] - tau0;
        }
    }
    json_decref(j);
    return ok;
}

static const char *str(const json_t *v) { return json_is_string(v) ? json_string_value(v) : ""; }

static const json_t *find_named(const json_t *arr, const char *member, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach((json_t *)arr, i, v) if (!strcmp(str(json_object_get(v, member)), name)) return v;
    return NULL;
}

static const json_t *find_comparison(const json_t *stats, const char *metric) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(stats, "comparisons"), i, c) {
        if (!strcmp(str(json_object_get(c, "metric")), metric)) return c;
    }
    return NULL;
}

static double num(const json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

/* A tolerance relative to b: figures that went through JSON's 17 digits and a different order of sums. */
#define REL(b) (1e-9 * fmax(1.0, fabs(b)))

/* ---- the experiment shared by the cases below ----------------------------------------------- */

static long long exp_id;
static long long run_ids[2][REPS];
static run_figures figs[2][REPS];

TEST(replicated_experiment_runs_with_paired_seeds) {
    long code;
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\":\"rep\",\"replicates\":%d,\"base\":{" TINY_CONFIG ",\"steps\":%d,\"seed\":7},"
             "\"variants\":[{\"name\":\"rope\",\"config\":{\"attention\":\"rope\"}},"
             "{\"name\":\"cosine_rope\",\"config\":{\"attention\":\"cosine_rope\"}}]}",
             REPS, STEPS);
    json_t *j = api_call(&srv, "POST", "/api/experiments", body, &code);
    CHECK_EQ_INT(code, 201);
    json_t *exp = json_object_get(j, "experiment"), *runs = json_object_get(j, "runs");
    exp_id = json_integer_value(json_object_get(exp, "id"));
    CHECK_EQ_INT(json_integer_value(json_object_get(exp, "replicates")), REPS);
    CHECK_EQ_INT(json_array_size(runs), 2 * REPS);
    int seen[2][REPS] = {{0}};
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        int rep = (int)json_integer_value(json_object_get(r, "replicate"));
        const char *v = json_string_value(json_object_get(r, "variant"));
        int vi = !strcmp(v, "cosine_rope");
        CHECK(rep >= 0 && rep < REPS && !seen[vi][rep]);
        seen[vi][rep] = 1;
        /* replicate i of every variant: seed 7 + i (so the same data order) */
        CHECK_EQ_INT(json_integer_value(json_object_get(r, "seed")), 7 + rep);
        CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(r, "config"), "seed")), 7 + rep);
        run_ids[vi][rep] = json_integer_value(json_object_get(r, "id"));
    }
    json_decref(j);
    for (int v = 0; v < 2; v++)
        for (int k = 0; k < REPS; k++) {
            char *st = api_wait_status(&srv, run_ids[v][k], "succeeded", 120000);
            CHECK_MSG(st && !strcmp(st, "succeeded"), "run %lld: %s", run_ids[v][k], st ? st : "(timeout)");
            free(st);
            CHECK(figures_of_run(run_ids[v][k], v == 1, sqrt(8.0), &figs[v][k]));
            figs[v][k].replicate = k;
        }
    /* Replicates differ (another seed: other weights and another data order). */
    CHECK(figs[0][0].v[0] != figs[0][1].v[0] && figs[1][0].v[0] != figs[1][1].v[0]);
    /* A run of the experiment carries its replicate. */
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", run_ids[1][3]);
    j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "run"), "replicate")), 3);
    json_decref(j);
}

TEST(stats_match_a_recomputation_from_the_runs_series) {
    CHECK(exp_id > 0);
    char path[128];
    snprintf(path, sizeof path, "/api/experiments/%lld/stats?k=%d&resamples=%d&seed=%d", exp_id, K, RESAMPLES,
             BOOT_SEED);
    long code;
    json_t *j = api_call(&srv, "GET", path, NULL, &code), *stats = json_object_get(j, "stats");
    CHECK_EQ_INT(code, 200);
    CHECK_EQ_INT(json_integer_value(json_object_get(stats, "k")), K);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(stats, "bootstrap"), "seed")), BOOT_SEED);
    int checked = 0;
    for (int v = 0; v < 2; v++) {
        const json_t *var = find_named(json_object_get(stats, "variants"), "name", VARIANTS[v]);
        CHECK_MSG(var, "no variant %s", VARIANTS[v]);
        CHECK_EQ_INT(json_integer_value(json_object_get(var, "n_included")), REPS);
        json_t *ms = json_object_get(var, "metrics");
        for (int m = 0; m < N_METRICS; m++) {
            json_t *s = json_object_get(ms, METRICS[m]);
            if (v == 0 && m >= 3 && m <= 5) {
                CHECK_MSG(!s, "rope has no learned tau, yet %s is there", METRICS[m]);
                continue;
            }
            CHECK_MSG(s, "%s: no %s", VARIANTS[v], METRICS[m]);
            /* the per-run values, by replicate */
            double x[REPS];
            for (int k = 0; k < REPS; k++) {
                x[k] = figs[v][k].v[m];
                json_t *val = json_array_get(json_object_get(s, "values"), (size_t)k);
                CHECK_EQ_INT(json_integer_value(json_object_get(val, "replicate")), k);
                CHECK_EQ_INT(json_integer_value(json_object_get(val, "run_id")), run_ids[v][k]);
                CHECK_NEAR(num(json_object_get(val, "value")), x[k], REL(x[k]) + 1e-12);
            }
            double mean = mean_of(x, REPS), sd = sd_of(x, REPS), half = T975_DF4 * sd / sqrt(REPS);
            CHECK_EQ_INT(json_integer_value(json_object_get(s, "n")), REPS);
            CHECK_NEAR(num(json_object_get(s, "mean")), mean, REL(mean));
            CHECK_NEAR(num(json_object_get(s, "std")), sd, 1e-7 * sd + 1e-15);
            /* The interval stays within the metric's bounds: a spread's is the percentile bootstrap's
             * (redrawn here with the answer's seed), the others the t interval unless that would
             * cross 0, which no loss or entropy can. */
            const char *method = json_string_value(json_object_get(s, "ci_method"));
            int boot = m == 3 || (LOWER[m] == 0 && mean - half < 0);
            CHECK_MSG(method && !strcmp(method, boot ? "bootstrap" : "t"), "%s: ci_method %s", METRICS[m],
                      method ? method : "(none)");
            if (boot) {
                double lo, hi;
                CHECK(stats_bootstrap_mean_ci(x, REPS, 0.95, RESAMPLES, BOOT_SEED, &lo, &hi, NULL) == STATS_OK);
                CHECK_NEAR(num(json_array_get(json_object_get(s, "ci"), 0)), lo, 1e-9 * fabs(lo) + 1e-13);
                CHECK_NEAR(num(json_array_get(json_object_get(s, "ci"), 1)), hi, 1e-9 * fabs(hi) + 1e-13);
                CHECK(lo >= 0);
            } else {
                CHECK_NEAR(num(json_array_get(json_object_get(s, "ci"), 0)), mean - half, 1e-7 * half + REL(mean));
                CHECK_NEAR(num(json_array_get(json_object_get(s, "ci"), 1)), mean + half, 1e-7 * half + REL(mean));
            }
            CHECK(json_is_null(json_object_get(s, "reason")));
            if (m == 5) { /* tau drift against 0 */
                double t = mean / (sd / sqrt(REPS)), p = 2 * (1 - t4_cdf(fabs(t)));
                CHECK_NEAR(num(json_object_get(s, "p")), p, 1e-7 * p + 1e-12);
            }
            checked++;
        }
    }
    CHECK_EQ_INT(checked, 4 + N_METRICS);
    /* rope - cosine_rope, paired by replicate */
    int compared = 0;
    for (int m = 0; m < N_METRICS; m++) {
        const json_t *c = find_comparison(stats, METRICS[m]);
        if (m >= 3 && m <= 5) {
            CHECK_MSG(!c, "%s compared with a variant that has no tau", METRICS[m]);
            continue;
        }
        CHECK_MSG(c, "no comparison of %s", METRICS[m]);
        CHECK(!strcmp(json_string_value(json_object_get(c, "a")), "rope"));
        CHECK(!strcmp(json_string_value(json_object_get(c, "b")), "cosine_rope"));
        double a[REPS], b[REPS], d[REPS];
        for (int k = 0; k < REPS; k++) {
            a[k] = figs[0][k].v[m];
            b[k] = figs[1][k].v[m];
            d[k] = a[k] - b[k];
        }
        double mean = mean_of(d, REPS), sd = sd_of(d, REPS), sem = sd / sqrt(REPS), t = mean / sem;
        double p = 2 * (1 - t4_cdf(fabs(t)));
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "n")), REPS);
        CHECK_NEAR(num(json_object_get(c, "mean_diff")), mean, 1e-7 * fabs(mean) + 1e-13);
        CHECK_NEAR(num(json_object_get(c, "std")), sd, 1e-7 * sd + 1e-15);
        CHECK_NEAR(num(json_array_get(json_object_get(c, "ci"), 0)), mean - T975_DF4 * sem, 1e-7 * sem + 1e-13);
        CHECK_NEAR(num(json_array_get(json_object_get(c, "ci"), 1)), mean + T975_DF4 * sem, 1e-7 * sem + 1e-13);
        CHECK_NEAR(num(json_object_get(c, "t")), t, 1e-6 * fabs(t));
        CHECK_NEAR(num(json_object_get(c, "p")), p, 1e-6 * p + 1e-12);
        CHECK_NEAR(num(json_object_get(c, "p_holm")), p, 1e-6 * p + 1e-12); /* one pair: nothing to adjust */
        /* The bootstrap redrawn from the recomputed values with the answer's seed and count. */
        double lo, hi;
        const char *why;
        CHECK(stats_bootstrap_paired_ci(a, b, REPS, 0.95, RESAMPLES, BOOT_SEED, &lo, &hi, &why) == STATS_OK);
        CHECK_NEAR(num(json_array_get(json_object_get(c, "bootstrap_ci"), 0)), lo, 1e-9 * fabs(lo) + 1e-13);
        CHECK_NEAR(num(json_array_get(json_object_get(c, "bootstrap_ci"), 1)), hi, 1e-9 * fabs(hi) + 1e-13);
        double dmin = d[0], dmax = d[0];
        for (int k = 1; k < REPS; k++) dmin = fmin(dmin, d[k]), dmax = fmax(dmax, d[k]);
        CHECK(lo >= dmin - 1e-15 && hi <= dmax + 1e-15 && lo <= hi);
        compared++;
    }
    CHECK_EQ_INT(compared, 4);

    /* The CSV holds the same figures. */
    harness_response res;
    snprintf(path, sizeof path, "/api/experiments/%lld/stats.csv?k=%d&resamples=%d&seed=%d", exp_id, K, RESAMPLES,
             BOOT_SEED);
    CHECK(harness_get(&srv, path, &res) == 0);
    CHECK_EQ_INT(res.status, 200);
    CHECK(!strncmp(res.body, "kind,metric,variant,variant_b,replicate,run_id,value,n,mean,", 60));
    int summaries = 0, paired = 0, values = 0;
    for (char *line = strtok(res.body, "\n"); line; line = strtok(NULL, "\n")) {
        char kind[16], metric[40], variant[40];
        if (sscanf(line, "%15[^,],%39[^,],%39[^,]", kind, metric, variant) != 3) continue;
        if (!strcmp(kind, "value")) values++;
        if (!strcmp(kind, "paired")) paired++;
        if (strcmp(kind, "summary")) continue;
        /* kind,metric,variant,,,,,n,mean */
        const char *p = line;
        for (int comma = 0; comma < 8 && p; comma++) p = strchr(p + 1, ',');
        CHECK(p);
        double mean = strtod(p + 1, NULL);
        const json_t *var = find_named(json_object_get(stats, "variants"), "name", variant);
        double want = num(json_object_get(json_object_get(json_object_get(var, "metrics"), metric), "mean"));
        CHECK_NEAR(mean, want, 1e-8 * fabs(want));
        summaries++;
    }
    harness_response_free(&res);
    CHECK_EQ_INT(summaries, 4 + N_METRICS);
    CHECK_EQ_INT(paired, 4);
    CHECK_EQ_INT(values, REPS * (4 + N_METRICS));
    json_decref(j);
}

/* The band of one variant at every step against the replicates' own points. */
static int band_matches(const json_t *band, int v, const char *key) {
    json_t *steps = json_object_get(band, "steps");
    int ok = json_array_size(steps) > 0 && json_array_size(json_object_get(band, "runs")) == REPS;
    for (size_t i = 0; ok && i < json_array_size(steps); i++) {
        long long step = json_integer_value(json_array_get(steps, i));
        double x[REPS];
        for (int k = 0; k < REPS && ok; k++) {
            char path[160];
            snprintf(path, sizeof path, "/api/runs/%lld/metrics?keys=%s&since_step=%lld", run_ids[v][k],
                     !strcmp(key, "tau.mean") ? "tau.*" : key, step);
            long code;
            json_t *j = api_call(&srv, "GET", path, NULL, &code), *s = json_object_get(j, "series");
            if (!strcmp(key, "tau.mean")) {
                x[k] = (json_number_value(json_array_get(values_of(s, "tau.0.0"), 0)) +
                        json_number_value(json_array_get(values_of(s, "tau.0.1"), 0))) /
                       2;
            } else {
                x[k] = json_number_value(json_array_get(values_of(s, key), 0));
            }
            ok = code == 200 &&
                 json_integer_value(json_array_get(
                     json_object_get(json_object_get(s, !strcmp(key, "tau.mean") ? "tau.0.0" : key), "steps"), 0)) ==
                     step;
            json_decref(j);
        }
        if (!ok) break;
        double mn = x[0], mx = x[0];
        for (int k = 1; k < REPS; k++) mn = fmin(mn, x[k]), mx = fmax(mx, x[k]);
        double mean = mean_of(x, REPS), sd = sd_of(x, REPS);
        ok = json_integer_value(json_array_get(json_object_get(band, "n"), i)) == REPS &&
             fabs(num(json_array_get(json_object_get(band, "mean"), i)) - mean) <= 1e-9 * fabs(mean) &&
             fabs(num(json_array_get(json_object_get(band, "std"), i)) - sd) <= 1e-6 * sd + 1e-12 &&
             num(json_array_get(json_object_get(band, "min"), i)) == mn &&
             num(json_array_get(json_object_get(band, "max"), i)) == mx;
        if (!ok) printf("  %s %s step %lld: band does not match the runs' points\n", VARIANTS[v], key, step);
    }
    return ok;
}

TEST(series_bands_match_the_replicates_step_by_step) {
    CHECK(exp_id > 0);
    char path[128];
    long code;
    snprintf(path, sizeof path, "/api/experiments/%lld/series?key=loss", exp_id);
    json_t *j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(code, 200);
    json_t *vs = json_object_get(j, "variants");
    CHECK_EQ_INT(json_array_size(vs), 2);
    for (int v = 0; v < 2; v++) {
        const json_t *band = find_named(vs, "variant", VARIANTS[v]);
        CHECK(band && json_integer_value(json_object_get(band, "count")) == STEPS);
        CHECK(band_matches(band, v, "loss"));
    }
    json_decref(j);
    /* tau over heads, per run and step, then over replicates */
    snprintf(path, sizeof path, "/api/experiments/%lld/series?key=tau.mean&max_points=10", exp_id);
    j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(code, 200);
    const json_t *band = find_named(json_object_get(j, "variants"), "variant", "cosine_rope");
    CHECK(band && json_integer_value(json_object_get(band, "count")) == STEPS);
    CHECK(json_array_size(json_object_get(band, "steps")) <= 10); /* downsampled */
    CHECK(band_matches(band, 1, "tau.mean"));
    /* rope has no tau: an empty band */
    band = find_named(json_object_get(j, "variants"), "variant", "rope");
    CHECK(band && json_array_size(json_object_get(band, "steps")) == 0);
    json_decref(j);
}

TEST(client_starts_replicates_and_shows_the_stats_table) {
    const char *bin = getenv("ATTNLAB");
    CHECK_MSG(bin && *bin, "ATTNLAB is not set");
    char base[300], cmd[1024], out[1 << 16];
    snprintf(base, sizeof base, "%s/base.json", srv.data_dir);
    FILE *f = fopen(base, "w");
    CHECK(f);
    fprintf(f, "{" TINY_CONFIG ",\"steps\":12,\"seed\":100}");
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "'%s' --server %s experiments start --base '%s' --vary attention=rope,cosine_rope "
             "--replicates 5 -q",
             bin, srv.base_url, base);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    CHECK_EQ_INT(pclose(p), 0);
    long long ids[10];
    int count = 0;
    for (char *s = strtok(out, "\n"); s && count < 10; s = strtok(NULL, "\n")) ids[count++] = atoll(s);
    CHECK_EQ_INT(count, 10);
    long code;
    char path[64];
    snprintf(path, sizeof path, "/api/runs/%lld", ids[0]);
    json_t *j = api_call(&srv, "GET", path, NULL, &code);
    long long eid = json_integer_value(json_object_get(json_object_get(j, "run"), "experiment_id"));
    json_decref(j);
    for (int i = 0; i < count; i++) {
        char *st = api_wait_status(&srv, ids[i], "succeeded", 120000);
        CHECK_MSG(st && !strcmp(st, "succeeded"), "run %lld: %s", ids[i], st ? st : "(timeout)");
        free(st);
    }
    snprintf(cmd, sizeof cmd, "'%s' --server %s experiments show %lld", bin, srv.base_url, eid);
    p = popen(cmd, "r");
    CHECK(p);
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    CHECK_EQ_INT(pclose(p), 0);
    CHECK_MSG(strstr(out, "5 replicates per variant") && strstr(out, "statistics over 5 replicates") &&
                  strstr(out, "METRIC") && strstr(out, "95% CI (t)") && strstr(out, "paired differences a − b") &&
                  strstr(out, "P (HOLM)") && strstr(out, "95% CI (BOOTSTRAP)"),
              "%s", out);
    /* Its mean final validation loss of rope, as the API gives it, is in the table. */
    snprintf(path, sizeof path, "/api/experiments/%lld/stats", eid);
    j = api_call(&srv, "GET", path, NULL, &code);
    const json_t *rope = find_named(json_object_get(json_object_get(j, "stats"), "variants"), "name", "rope");
    CHECK(rope);
    char want[64];
    snprintf(want, sizeof want, "%.5g",
             num(json_object_get(json_object_get(json_object_get(rope, "metrics"), "final_val_loss"), "mean")));
    json_decref(j);
    CHECK_MSG(strstr(out, want), "no %s in\n%s", want, out);
    /* out of range: the server's refusal, exit 4, naming the field */
    snprintf(cmd, sizeof cmd,
             "'%s' --server %s experiments start --base '%s' --vary attention=rope --replicates 33 2>&1", bin,
             srv.base_url, base);
    p = popen(cmd, "r");
    CHECK(p);
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    CHECK_MSG(WEXITSTATUS(rc) == 4 && strstr(out, "(field: replicates)"), "exit %d: %s", WEXITSTATUS(rc), out);
}

TEST(fewer_than_three_replicates_say_why_there_is_no_interval) {
    long code;
    json_t *j = api_call(&srv, "POST", "/api/experiments",
                         "{\"replicates\":2,\"base\":{" TINY_CONFIG ",\"steps\":4},"
                         "\"variants\":[{\"name\":\"a\",\"config\":{\"attention\":\"rope\"}},"
                         "{\"name\":\"b\",\"config\":{\"attention\":\"cosine_rope\"}}]}",
                         &code);
    CHECK_EQ_INT(code, 201);
    long long eid = json_integer_value(json_object_get(json_object_get(j, "experiment"), "id"));
    json_t *runs = json_object_get(j, "runs");
    CHECK_EQ_INT(json_array_size(runs), 4);
    long long ids[4];
    for (int i = 0; i < 4; i++) ids[i] = json_integer_value(json_object_get(json_array_get(runs, (size_t)i), "id"));
    json_decref(j);
    for (int i = 0; i < 4; i++) {
        char *st = api_wait_status(&srv, ids[i], "succeeded", 60000);
        CHECK(st && !strcmp(st, "succeeded"));
        free(st);
    }
    char path[64];
    snprintf(path, sizeof path, "/api/experiments/%lld/stats", eid);
    j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(code, 200);
    json_t *stats = json_object_get(j, "stats");
    const json_t *a = find_named(json_object_get(stats, "variants"), "name", "a");
    json_t *s = json_object_get(json_object_get(a, "metrics"), "final_val_loss");
    CHECK_EQ_INT(json_integer_value(json_object_get(s, "n")), 2);
    CHECK(json_is_number(json_object_get(s, "std")));
    CHECK(json_is_null(json_array_get(json_object_get(s, "ci"), 0)) &&
          json_is_null(json_array_get(json_object_get(s, "ci"), 1)));
    CHECK_MSG(!strcmp(str(json_object_get(s, "reason")), STATS_REASON_NEEDS_3), "%s",
              str(json_object_get(s, "reason")));
    const json_t *c = find_comparison(stats, "final_val_loss");
    CHECK(c && json_is_null(json_object_get(c, "p")) &&
          json_is_null(json_array_get(json_object_get(c, "bootstrap_ci"), 0)));
    CHECK(!strcmp(str(json_object_get(c, "reason")), STATS_REASON_NEEDS_3));
    json_decref(j);
}

static int expect_422(const char *path, const char *body, const char *field) {
    long code;
    json_t *j = api_call(&srv, body ? "POST" : "GET", path, body, &code);
    const char *got = api_error_field(j);
    int ok = code == 422 && !strcmp(got, field);
    if (!ok) printf("  %s %s: got %ld field '%s', wanted 422 '%s'\n", path, body ? body : "", code, got, field);
    json_decref(j);
    return ok;
}

#define TWO_VARIANTS                                                                                                   \
    "\"variants\":[{\"name\":\"a\",\"config\":{\"attention\":\"rope\"}},{\"name\":\"b\",\"config\":%s}]"

TEST(bad_input_is_422_naming_the_field) {
    char body[1024];
    int ok = 1;
    static const char *const bad_reps[] = {"0", "33", "-1", "\"5\"", "2.5", "true", "null"};
    for (size_t i = 0; i < sizeof bad_reps / sizeof bad_reps[0]; i++) {
        snprintf(body, sizeof body, "{\"replicates\":%s,\"base\":{" TINY_CONFIG "}," TWO_VARIANTS "}", bad_reps[i],
                 "{\"attention\":\"cosine_rope\"}");
        /* null is "absent" for the other optional fields, but not a count */
        ok &= expect_422("/api/experiments", body, "replicates");
    }
    snprintf(body, sizeof body, "{\"preset\":\"attention-scale\",\"replicates\":33}");
    ok &= expect_422("/api/experiments", body, "replicates");
    /* unknown parameterisation, clamp below the initial scale */
    snprintf(body, sizeof body, "{\"replicates\":5,\"base\":{" TINY_CONFIG "}," TWO_VARIANTS "}",
             "{\"attention\":\"cosine_rope_scale\",\"scale_param\":\"exp\"}");
    ok &= expect_422("/api/experiments", body, "variants[1].config.scale_param");
    snprintf(body, sizeof body, "{\"replicates\":5,\"base\":{" TINY_CONFIG "}," TWO_VARIANTS "}",
             "{\"attention\":\"cosine_rope_scale\",\"scale_param\":\"log\",\"scale_init\":10,\"scale_clamp\":5}");
    ok &= expect_422("/api/experiments", body, "variants[1].config.scale_clamp");
    snprintf(body, sizeof body, "{\"preset\":\"attention-scale\",\"overrides\":{\"tau_param\":\"cube\"}}");
    ok &= expect_422("/api/experiments", body, "variants[0].config.tau_param");
    /* seeds would pass the largest one */
    snprintf(body, sizeof body,
             "{\"replicates\":3,\"base\":{" TINY_CONFIG ",\"seed\":9007199254740990}," TWO_VARIANTS "}",
             "{\"attention\":\"rope\"}");
    ok &= expect_422("/api/experiments", body, "replicates");
    ok &= expect_422("/api/experiments", "{\"preset\":\"nope\"}", "preset");
    /* the statistics' own arguments */
    CHECK(exp_id > 0);
    char path[128];
    snprintf(path, sizeof path, "/api/experiments/%lld/stats?k=0", exp_id);
    ok &= expect_422(path, NULL, "k");
    snprintf(path, sizeof path, "/api/experiments/%lld/stats?resamples=10", exp_id);
    ok &= expect_422(path, NULL, "resamples");
    snprintf(path, sizeof path, "/api/experiments/%lld/series", exp_id);
    ok &= expect_422(path, NULL, "key");
    snprintf(path, sizeof path, "/api/experiments/%lld/series?key=tau.*", exp_id);
    ok &= expect_422(path, NULL, "key");
    snprintf(path, sizeof path, "/api/experiments/%lld/series?key=loss,val_loss", exp_id);
    ok &= expect_422(path, NULL, "key");
    CHECK(ok);
    long code;
    json_t *j = api_call(&srv, "GET", "/api/experiments/999999/stats", NULL, &code);
    CHECK_EQ_INT(code, 404);
    json_decref(j);
    j = api_call(&srv, "GET", "/api/experiments/999999/series?key=loss", NULL, &code);
    CHECK_EQ_INT(code, 404);
    json_decref(j);
}

TEST(presets_ask_the_questions) {
    long code;
    json_t *j = api_call(&srv, "GET", "/api/presets", NULL, &code);
    CHECK_EQ_INT(code, 200);
    json_t *ps = json_object_get(j, "presets");
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(ps, 0), "name")), "seed-blog"));
    const json_t *rep = find_named(ps, "name", "seed-blog-replicated"), *sc = find_named(ps, "name", "attention-scale");
    CHECK(rep && sc);
    CHECK_EQ_INT(json_integer_value(json_object_get(rep, "replicates")), 5);
    CHECK_EQ_INT(json_integer_value(json_object_get(sc, "replicates")), 5);
    CHECK_EQ_INT(json_array_size(json_object_get(rep, "variants")), 2);
    json_t *vs = json_object_get(sc, "variants");
    CHECK_EQ_INT(json_array_size(vs), 4);
    /* the published form: s = e^theta from 10, clamped at 100, no weight decay */
    json_t *swin = json_object_get(json_array_get(vs, 3), "config");
    CHECK(!strcmp(json_string_value(json_object_get(swin, "attention")), "cosine_rope_scale"));
    CHECK(!strcmp(json_string_value(json_object_get(swin, "scale_param")), "log"));
    CHECK(json_number_value(json_object_get(swin, "scale_init")) == 10 &&
          json_number_value(json_object_get(swin, "scale_clamp")) == 100);
    CHECK(json_is_false(json_object_get(swin, "tau_weight_decay")));
    CHECK(json_is_false(json_object_get(json_object_get(json_array_get(vs, 2), "config"), "tau_weight_decay")));
    /* the classroom version: tiny overrides on the built-in corpus */
    json_t *tiny = json_object_get(sc, "tiny");
    {
        char cpath[128];
        snprintf(cpath, sizeof cpath, "/api/corpora/%s", json_string_value(json_object_get(tiny, "corpus")));
        long cc;
        json_t *corpus = api_call(&srv, "GET", cpath, NULL, &cc);
        CHECK_MSG(cc == 200 && json_is_true(json_object_get(json_object_get(corpus, "corpus"), "builtin")),
                  "the classroom corpus %s is not a built-in one", cpath);
        json_decref(corpus);
    }
    /* smaller still, so that the four runs end in moments (under sanitizers too) */
    json_t *smaller = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "steps", 3, "n_layer", 1, "n_head", 2, "d_model",
                                16, "seq_len", 16, "batch", 2, "threads", 1);
    CHECK(smaller && json_object_update_missing(smaller, tiny) == 0);
    char *tiny_text = json_dumps(smaller, JSON_COMPACT);
    json_decref(smaller);
    json_decref(j);
    CHECK(tiny_text);
    char body[1024];
    snprintf(body, sizeof body, "{\"preset\":\"attention-scale\",\"replicates\":1,\"overrides\":%s}", tiny_text);
    free(tiny_text);
    j = api_call(&srv, "POST", "/api/experiments", body, &code);
    CHECK_EQ_INT(code, 201);
    json_t *runs = json_object_get(j, "runs");
    CHECK_EQ_INT(json_array_size(runs), 4);
    json_t *cfg = json_object_get(json_array_get(runs, 3), "config");
    CHECK(!strcmp(json_string_value(json_object_get(cfg, "corpus")), "small-bytes")); /* the tiny overrides' */
    CHECK(json_number_value(json_object_get(cfg, "scale_init")) == 10);
    CHECK(json_number_value(json_object_get(cfg, "scale_clamp")) == 100);
    CHECK(!strcmp(json_string_value(json_object_get(cfg, "scale_param")), "log"));
    /* every variant trains, the published form included */
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        char *st = api_wait_status(&srv, json_integer_value(json_object_get(r, "id")), "succeeded", 120000);
        int ok = st && !strcmp(st, "succeeded");
        char variant[64];
        snprintf(variant, sizeof variant, "%s", str(json_object_get(r, "variant")));
        free(st);
        if (!ok) json_decref(j);
        CHECK_MSG(ok, "%s did not succeed", variant);
    }
    json_decref(j);
}

/* The cache's hit count from /metrics. */
static long long cache_hits(void) {
    harness_response r;
    if (harness_get(&srv, "/metrics", &r) != 0) return -1;
    const char *p = r.body ? strstr(r.body, "attnlab_reply_cache_requests_total{result=\"hit\"} ") : NULL;
    long long v = p ? atoll(strchr(p, '}') + 2) : -1;
    harness_response_free(&r);
    return v;
}

static char *body_of(const char *path, long *code) {
    harness_response r;
    if (harness_get(&srv, path, &r) != 0) return NULL;
    *code = r.status;
    char *b = r.body;
    r.body = NULL;
    harness_response_free(&r);
    return b;
}

/* An ended experiment's answers are pure functions of its stored runs: asked again, they come from
 * the cache, byte for byte (issue 23 item 1). */
TEST(an_ended_experiments_answers_are_cached) {
    const char *paths[] = {"/stats", "/stats.csv?resamples=500", "/series?key=loss", "/head-spread", "/accuracy.csv"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char path[160];
        snprintf(path, sizeof path, "/api/experiments/%lld%s", exp_id, paths[i]);
        long c1 = 0, c2 = 0;
        char *first = body_of(path, &c1);
        long long h0 = cache_hits();
        char *again = body_of(path, &c2);
        long long h1 = cache_hits();
        CHECK_MSG(first && again && c1 == 200 && c2 == 200, "%s: %ld then %ld", path, c1, c2);
        CHECK_MSG(!strcmp(first, again), "%s: the cached answer differs from the computed one", path);
        CHECK_MSG(h1 == h0 + 1, "%s: asked again, it was not answered from the cache (%lld hits, then %lld)", path, h0,
                  h1);
        free(first);
        free(again);
    }
}

/* Bootstrap work over the bound is refused before any of it is done, naming the bound and what
 * fits (issue 23 item 1: 24,990 comparisons x 10,000 resamples froze the API for two minutes). */
TEST(stats_work_over_the_bound_is_a_422_before_the_work) {
    /* 13 variants (a grid over lr) x 3 replicates: 78 pairs x 7 metrics = 546 comparisons that resample. */
    long code;
    json_t *j = api_call(&srv, "POST", "/api/experiments",
                         "{\"name\":\"wide\",\"replicates\":3,\"base\":{" TINY_CONFIG
                         ",\"steps\":1,\"attention\":\"cosine_rope\"},\"grid\":{\"lr\":[1e-3,2e-3,3e-3,4e-3,5e-3,"
                         "6e-3,7e-3,8e-3,9e-3,1e-2,2e-2,3e-2,4e-2]}}",
                         &code);
    CHECK_EQ_INT(code, 201);
    long long id = json_integer_value(json_object_get(json_object_get(j, "experiment"), "id"));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "runs"), i, r) {
        char *st = api_wait_status(&srv, json_integer_value(json_object_get(r, "id")), "succeeded", 300000);
        CHECK_MSG(st && !strcmp(st, "succeeded"), "a run of the grid ended %s", st ? st : "(timeout)");
        free(st);
    }
    json_decref(j);
    char path[128];
    snprintf(path, sizeof path, "/api/experiments/%lld/stats?resamples=100000", id);
    j = api_call(&srv, "GET", path, NULL, &code);
    CHECK_EQ_INT(code, 422);
    json_t *e = json_object_get(j, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    CHECK(!strcmp(json_string_value(json_object_get(e, "code")), "too_much_work"));
    CHECK(!strcmp(api_error_field(j), "resamples"));
    CHECK_MSG(msg && strstr(msg, "546 comparisons x 100000 resamples") && strstr(msg, "50000000") &&
                  strstr(msg, "resamples=91575"),
              "message: %s", msg ? msg : "(none)");
    json_decref(j);
    /* within the bound it is answered */
    snprintf(path, sizeof path, "/api/experiments/%lld/stats?resamples=1000", id);
    json_decref(api_call(&srv, "GET", path, NULL, &code));
    CHECK_EQ_INT(code, 200);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *args[] = {"--max-model-mb", "256", "--train-workers", "2", "--compute-threads", "2", NULL};
    if (harness_start(&srv, NULL, args) < 0) {
        printf("FAIL setup: attnlabd did not start\n");
        harness_dump_log(&srv);
        return 1;
    }
    RUN(replicated_experiment_runs_with_paired_seeds);
    RUN(stats_match_a_recomputation_from_the_runs_series);
    RUN(series_bands_match_the_replicates_step_by_step);
    RUN(client_starts_replicates_and_shows_the_stats_table);
    RUN(fewer_than_three_replicates_say_why_there_is_no_interval);
    RUN(bad_input_is_422_naming_the_field);
    RUN(presets_ask_the_questions);
    RUN(an_ended_experiments_answers_are_cached);
    RUN(stats_work_over_the_bound_is_a_422_before_the_work);
    int rc = harness_stop(&srv);
    if (rc != 0) {
        printf("FAIL shutdown: attnlabd exited with %d\n", rc);
        test_fail_count++;
    }
    if (test_fail_count) harness_dump_log(&srv);
    curl_global_cleanup();
    return test_summary();
}
