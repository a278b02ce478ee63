/* The statistics service: figures over an experiment's replicate runs, read through the store and
 * computed by stats.h. It never answers a request; handlers present what it returns (JSON here,
 * CSV and downsampling in api_series.h).
 *
 * Per variant and metric it summarises the succeeded runs (one value per run: n, mean, sample std,
 * standard error, Student-t interval); between every two variants it pairs the runs by replicate
 * (replicate i of both ran with the same seed and data order) and gives the paired mean
 * difference a - b, its t interval, the paired t-test's two-sided p-value, Holm's adjustment over
 * the pairs of that metric, and a seeded percentile bootstrap interval. Fewer than 3 values give
 * no interval, and the answer's "reason" says so (stats.h's sentences).
 *
 * The metrics, each one number per run:
 *   final_train_loss    mean of the training loss over the run's last k steps (fewer if it has fewer)
 *   final_val_loss      the validation loss at the last evaluation
 *   min_val_loss        the lowest validation loss of the run
 *   final_tau_spread    max - min of tau.L.H over layers and heads at the run's last step
 *   final_tau_mean      mean of tau.L.H over layers and heads at the last step
 *   tau_drift           final_tau_mean - tau at initialisation (the variant's learned scale: tau_init
 *                       for cos/tau, 1/min(scale_init, scale_clamp) for s*cos); its t-test is
 *                       against 0 (did tau move at all)
 *   final_entropy_mean  mean of entropy.L.H over layers and heads at the last step (nats)
 * A variant without learned temperatures has no tau metrics. A value that is not finite (a
 * diverged run) is left out of its metric, and its pair out of the comparison. */
#ifndef ATTNLAB_SVC_STATS_H
#define ATTNLAB_SVC_STATS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "services/stats.h"
#include "services/svc.h"

struct app;

#define SVC_STATS_DEFAULT_K 10 /* final_train_loss averages the last 10 steps */
#define SVC_STATS_MAX_K 100000
#define SVC_STATS_DEFAULT_SEED 1 /* the bootstrap's seed when none is asked for */

/* The most bootstrap work one request may ask for: comparisons that resample (a pair of variants on
 * a metric, with at least 3 paired replicates) times resamples. Checked before any series is read
 * (an upper bound from the experiment's runs); above it the answer is a 422 on "resamples" naming
 * the bound and the largest resamples that fits. About 4 s of one core. */
#define SVC_STATS_MAX_WORK 50000000ULL

typedef struct {
    int k;            /* final_train_loss over the last k steps, 1..SVC_STATS_MAX_K */
    double conf;      /* interval level in (0, 1), e.g. 0.95 */
    size_t resamples; /* bootstrap resamples, 1..STATS_BOOTSTRAP_MAX (0: STATS_BOOTSTRAP_DEFAULT) */
    uint64_t seed;    /* bootstrap seed; every comparison draws from this seed */
    /* Non-NULL: polled between comparisons; once set the work stops (SVC_FAILED, code "cancelled"),
     * for a client that has gone (http_request_cancel_flag). */
    const atomic_int *cancel;
} svc_stats_options;

/* k = SVC_STATS_DEFAULT_K, conf 0.95, STATS_BOOTSTRAP_DEFAULT resamples, SVC_STATS_DEFAULT_SEED. */
void svc_stats_options_default(svc_stats_options *o);

/* The statistics of experiment exp_id as a new JSON object:
 * {"experiment":{"id","name","replicates"}, "conf", "k",
 *  "bootstrap":{"method":"percentile","resamples","seed"},
 *  "metrics":[{"name","description"}],
 *  "variants":[{"name","attention","tau_initial"|null,
 *               "runs":[{"id","replicate","seed","status","included"}], "n_runs","n_included",
 *               "metrics":{"<metric>":{"n","mean","std","sem","df","ci":[lo,hi],"reason",
 *                                      "values":[{"replicate","run_id","value"}]  (+ "t","p" for tau_drift)}}}],
 *  "comparisons":[{"metric","a","b","n","replicates":[…],"mean_diff","std","sem","df","ci":[lo,hi],
 *                  "t","p","p_holm","bootstrap_ci":[lo,hi],"reason"}]}
 * Numbers that cannot be computed are null, with "reason" saying why. Only succeeded runs are
 * included (the others are listed with "included": false). SVC_NOT_FOUND (field "id") when there
 * is no such experiment, SVC_INVALID for options out of range or work over SVC_STATS_MAX_WORK
 * (code "too_much_work", field "resamples"), SVC_FAILED when the store or an allocation fails or
 * the work was cancelled; *out is NULL on any failure. */
svc_status svc_stats_experiment(struct app *a, long long exp_id, const svc_stats_options *o, json_t **out,
                                svc_error *err);

/* Keys svc_stats_bands accepts besides a stored metric key: per step over a run's heads. */
#define SVC_STATS_DERIVED_KEYS "tau.mean, tau.spread, entropy.mean"

/* One variant's band over its replicate runs. */
typedef struct {
    char variant[48];
    json_t *runs;             /* [{"id","replicate","status"}] of the runs in the band (owned) */
    stats_band_point *points; /* per step, ascending (owned; NULL when none) */
    size_t n_points;
} svc_stats_band;

typedef struct {
    svc_stats_band *variants; /* in the experiment's variant order */
    size_t n;
} svc_stats_bands;

/* Per-variant mean, std, min and max over the replicates at each step of series `key` of every
 * run of the experiment (whatever its status, so a band grows while its runs train; each point's
 * n says how many replicates it holds). key is a stored key ("loss", "val_loss", "tau.0.3") or
 * one of SVC_STATS_DERIVED_KEYS, computed per run and step over its layers and heads (mean, or
 * max - min). SVC_INVALID (field "key") for a malformed key, SVC_NOT_FOUND (field "id") when there
 * is no such experiment, SVC_INVALID (code "too_large", field "key") when the series it would read
 * hold more than SVC_STATS_MAX_BAND_POINTS points (counted from the stored summaries before any point
 * is read), SVC_FAILED otherwise; on failure *out is empty. Free with svc_stats_bands_free. */
#define SVC_STATS_MAX_BAND_POINTS 5000000ULL
svc_status svc_stats_bands_get(struct app *a, long long exp_id, const char *key, svc_stats_bands *out, svc_error *err);
void svc_stats_bands_free(svc_stats_bands *b);

#endif
